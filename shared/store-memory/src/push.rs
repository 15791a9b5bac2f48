//! `PushConfigStore`: each task's configs with their owners; a put checks the owner rules
//! and the caps of `task_store::limits` and writes under the same lock.

use async_trait::async_trait;
use task_store::limits::{check_push_config_caps, push_config_id};
use task_store::{
    Conflict, DeleteScope, PushConfig, PushConfigStore, StoreError, StoreResult, StoredPushConfig,
};

use crate::MemoryStore;
use crate::items::{Items, TaskItems};

/// Where `config` goes: its task and its id (`Invalid` without an id, `NotFound` without
/// the task).
fn target<'a>(
    items: &'a mut Items,
    config: &PushConfig,
) -> StoreResult<(&'a mut TaskItems, String)> {
    let id = push_config_id(config)?;
    let task_id = config.task_id.as_str();
    let task = items
        .tasks
        .get_mut(task_id)
        .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
    Ok((task, id))
}

/// Whether `owner` may store a config with id `config_id` on `task`: the id is free or
/// `owner`'s, and a new config stays under the caps (configs without owner do not count).
fn check_put(task: &TaskItems, task_id: &str, owner: &str, config_id: &str) -> StoreResult<()> {
    if let Some(existing) = task.push_configs.get(config_id) {
        if existing.is_owned_by(owner) {
            return Ok(());
        }
        let config_id = config_id.to_owned();
        let task_id = task_id.to_owned();
        return Err(Conflict::PushConfigTaken { task_id, config_id }.into());
    }
    let owners: Vec<&str> = task
        .push_configs
        .values()
        .filter_map(|c| c.owner.as_deref())
        .collect();
    let mine = owners.iter().filter(|o| **o == owner).count();
    Ok(check_push_config_caps(task_id, mine, owners.len())?)
}

#[async_trait]
impl PushConfigStore for MemoryStore {
    async fn put_push_config(&self, owner: &str, config: PushConfig) -> StoreResult<PushConfig> {
        let mut items = self.lock()?;
        let (task, id) = target(&mut items, &config)?;
        check_put(task, &config.task_id, owner, &id)?;
        let owner = Some(owner.to_owned());
        let stored = StoredPushConfig {
            owner,
            config: config.clone(),
        };
        task.push_configs.insert(id, stored);
        Ok(config)
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<StoredPushConfig>> {
        let items = self.lock()?;
        let task = items.tasks.get(task_id);
        Ok(task.and_then(|t| t.push_configs.get(config_id)).cloned())
    }

    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<StoredPushConfig>> {
        let items = self.lock()?;
        let task = items.tasks.get(task_id);
        Ok(task.map_or_else(Vec::new, |t| t.push_configs.values().cloned().collect()))
    }

    async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        scope: DeleteScope<'_>,
    ) -> StoreResult<bool> {
        let mut items = self.lock()?;
        let Some(configs) = items.tasks.get_mut(task_id).map(|t| &mut t.push_configs) else {
            return Ok(false);
        };
        let covered = configs
            .get(config_id)
            .is_some_and(|c| scope.covers(c.owner.as_deref()));
        if covered {
            configs.remove(config_id);
        }
        Ok(covered)
    }

    /// The store sees every config written to it: a task without configs now has none.
    fn may_have_push_configs(&self, task_id: &str) -> bool {
        // A poisoned store answers "list them to know", which then reports the error.
        self.lock().map_or(true, |items| {
            items
                .tasks
                .get(task_id)
                .is_some_and(|t| !t.push_configs.is_empty())
        })
    }
}

impl MemoryStore {
    /// Stores `config` (its id set) on its task without owner, as stores written before
    /// configs had owners hold such configs: for tests of that case
    /// (`task_store::contract::a_config_without_owner_is_nobodys`). `NotFound` if there is
    /// no such task.
    pub fn put_ownerless_push_config(&self, config: PushConfig) -> StoreResult<()> {
        let mut items = self.lock()?;
        let (task, id) = target(&mut items, &config)?;
        let owner = None;
        task.push_configs
            .insert(id, StoredPushConfig { owner, config });
        Ok(())
    }
}

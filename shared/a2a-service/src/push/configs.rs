//! Push configs belong to the participant who created them (their owner):
//!
//! - only the owner gets, lists (others do not see it at all) or replaces a config, so its
//!   `token` and `authentication.credentials` go back to nobody else; a config of someone
//!   else is answered exactly like a missing one;
//! - the owner or an admin of the task deletes it (anyone else's delete changes nothing and
//!   is answered like the delete of a missing config: success, as A2A's delete is idempotent);
//! - a config goes out only while its owner is a participant of its task: every delivery
//!   checks the owner against the task as it is then ([`Audience`]), and skips and deletes a
//!   config whose owner left (or a config without owner, stored before configs had owners);
//!   the service also deletes the leavers' configs right after the edit that removed them
//!   ([`remove_strays`]).
//!
//! The store enforces who may replace which id and the caps, atomically; this module holds
//! what the service and both deliverers (the local dispatcher, the deployed notifier) decide.

use task_core::extension::{Role, TaskExtension};
use task_core::policy::{self, Action};
use task_store::{
    Conflict, DeleteScope, Newer, PushConfig, Store, StoreError, StoreResult, StoredPushConfig,
    StoredTask,
};

use crate::error::ServiceError;

/// The caller's config, or `None` for a config that is someone else's (or has no owner).
pub fn owned_by(stored: Option<StoredPushConfig>, caller: &str) -> Option<PushConfig> {
    stored.filter(|c| c.is_owned_by(caller)).map(|c| c.config)
}

/// The caller's configs among the task's, in the store's order.
pub fn those_of(configs: Vec<StoredPushConfig>, caller: &str) -> Vec<PushConfig> {
    configs
        .into_iter()
        .filter(|c| c.is_owned_by(caller))
        .map(|c| c.config)
        .collect()
}

/// What a caller's delete may remove: any config for an admin of the task, else only their
/// own.
pub fn delete_scope<'a>(task: &TaskExtension, caller: &'a str) -> DeleteScope<'a> {
    if task
        .participant(caller)
        .is_some_and(|p| p.role == Role::Admin)
    {
        DeleteScope::AnyOwner
    } else {
        DeleteScope::Owner(caller)
    }
}

/// Whether a config of this owner may go out on the task: its owner may read the task.
pub fn delivers_to(task: &TaskExtension, owner: Option<&str>) -> bool {
    owner.is_some_and(|owner| policy::authorize(task, owner, Action::Read).is_ok())
}

/// The client-facing error of a refused put: the owner rules and caps are the caller's to
/// fix (-32602); everything else as the service maps store errors.
pub fn put_refusal(err: StoreError) -> Result<ServiceError, StoreError> {
    match err {
        StoreError::Conflict(
            conflict @ (Conflict::PushConfigTaken { .. } | Conflict::TooManyPushConfigs { .. }),
        ) => Ok(ServiceError::InvalidParams(conflict.to_string())),
        other => Err(other),
    }
}

/// Deletes the task's configs whose owner is no longer a participant (`task`: the task as
/// the edit that removed them left it), and configs without owner. Returns how many went.
pub async fn remove_strays(
    store: &dyn Store,
    task_id: &str,
    task: &TaskExtension,
) -> StoreResult<usize> {
    let mut removed = 0;
    for stray in store
        .list_push_configs(task_id)
        .await?
        .into_iter()
        .filter(|c| !delivers_to(task, c.owner.as_deref()))
    {
        if retire(store, task_id, &stray).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Deletes a config whose owner is not a participant, if it is still that owner's (a config
/// re-created since under the same id by someone else stays).
pub async fn retire(
    store: &dyn Store,
    task_id: &str,
    config: &StoredPushConfig,
) -> StoreResult<bool> {
    let Some(id) = config.config.id.as_deref() else {
        return Ok(false);
    };
    let deleted = store
        .delete_push_config(task_id, id, DeleteScope::exactly(config.owner.as_deref()))
        .await?;
    if deleted {
        tracing::info!(
            task_id,
            config_id = id,
            owner = config.owner.as_deref().unwrap_or(""),
            "push config removed: its owner is not a participant of the task"
        );
    }
    Ok(deleted)
}

/// The participants of a task as they are when a notification goes out: deliverers ask it
/// before each event, and it re-reads the task only when its version moved.
pub struct Audience {
    task_id: String,
    seen: Option<StoredTask>,
}

impl Audience {
    pub fn new(task_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            seen: None,
        }
    }

    /// Brings the participants up to date; `false` if the task is gone.
    pub async fn refresh(&mut self, store: &dyn Store) -> StoreResult<bool> {
        let newer = match &self.seen {
            Some(seen) => store.get_newer(&self.task_id, seen.version).await?,
            None => match store.get(&self.task_id).await? {
                Some(task) => Newer::Changed(Box::new(task)),
                None => Newer::Missing,
            },
        };
        match newer {
            Newer::Unchanged => {}
            Newer::Changed(task) => self.seen = Some(*task),
            Newer::Missing => self.seen = None,
        }
        Ok(self.seen.is_some())
    }

    /// Whether the config's owner was a participant at the last [`refresh`](Self::refresh).
    pub fn admits(&self, config: &StoredPushConfig) -> bool {
        self.seen
            .as_ref()
            .is_some_and(|t| delivers_to(&t.record.extension, config.owner.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use task_core::extension::{Participant, ParticipantKind};

    fn task() -> TaskExtension {
        let mut t = TaskExtension::new("n", "g");
        t.participants = vec![
            Participant::new("rep", ParticipantKind::Human, Role::Reporter),
            Participant::new("wat", ParticipantKind::Human, Role::Watcher),
            Participant::new("adm", ParticipantKind::Human, Role::Admin),
        ];
        t
    }

    fn config(owner: Option<&str>, id: &str) -> StoredPushConfig {
        StoredPushConfig {
            owner: owner.map(str::to_owned),
            config: PushConfig {
                url: "https://example.com/hook".into(),
                id: Some(id.into()),
                task_id: "t-1".into(),
                token: Some("secret".into()),
                authentication: None,
                tenant: None,
            },
        }
    }

    #[test]
    fn only_the_owner_sees_a_config() {
        assert!(owned_by(Some(config(Some("rep"), "c")), "rep").is_some());
        assert!(owned_by(Some(config(Some("rep"), "c")), "wat").is_none());
        assert!(owned_by(Some(config(None, "c")), "rep").is_none());
        let listed = those_of(
            vec![
                config(Some("rep"), "a"),
                config(Some("wat"), "b"),
                config(None, "c"),
            ],
            "wat",
        );
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id.as_deref(), Some("b"));
    }

    #[test]
    fn admins_delete_any_config_others_their_own() {
        let t = task();
        assert_eq!(delete_scope(&t, "adm"), DeleteScope::AnyOwner);
        assert_eq!(delete_scope(&t, "wat"), DeleteScope::Owner("wat"));
        assert_eq!(delete_scope(&t, "rep"), DeleteScope::Owner("rep"));
        assert_eq!(delete_scope(&t, "stranger"), DeleteScope::Owner("stranger"));
    }

    #[test]
    fn configs_go_out_only_to_participants() {
        let t = task();
        assert!(delivers_to(&t, Some("wat")));
        assert!(!delivers_to(&t, Some("gone")));
        assert!(!delivers_to(&t, None));
    }
}

//! `PushConfigStore`: one row per config in `push_configs`, keyed (task, config id), whose
//! value is `{"owner": …, "config": …}` (a config stored before configs had owners is the
//! bare config JSON: it reads back without owner).
//!
//! The writer thread runs every write's check and apply with nothing in between, so the
//! caps and the owner rules are checked on the rows the write then changes: the check
//! counts the task's configs in the layers and the file (at most the caps' worth, plus any
//! without owner), reading only each row's owner.

use std::collections::HashSet;
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use redb::Database;
use serde::{Deserialize, Serialize};
use task_store::limits::{check_push_config_caps, push_config_id};
use task_store::{
    Conflict, DeleteScope, PushConfig, PushConfigStore, StoreError, StoreResult, StoredPushConfig,
};

use crate::EmbeddedStore;
use crate::commit::meta_of;
use crate::error::backend;
use crate::items::{PUSH, json, parse};
use crate::tables::Tables;

#[derive(Serialize)]
struct Doc<'a> {
    owner: &'a str,
    config: &'a PushConfig,
}

/// A row as stored, either shape.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Owned { owner: String, config: PushConfig },
    Ownerless(PushConfig),
}

/// Only the owner of a row (`None` for a row without one).
#[derive(Deserialize)]
struct OwnerOf {
    #[serde(default)]
    owner: Option<String>,
}

fn decode(text: &str) -> StoreResult<StoredPushConfig> {
    Ok(match parse::<Stored>("push config", text)? {
        Stored::Owned { owner, config } => StoredPushConfig {
            owner: Some(owner),
            config,
        },
        Stored::Ownerless(config) => StoredPushConfig {
            owner: None,
            config,
        },
    })
}

fn owner_of(text: &str) -> StoreResult<Option<String>> {
    Ok(parse::<OwnerOf>("push config", text)?.owner)
}

/// A put's input for the writer.
struct Put {
    owner: String,
    config: PushConfig,
    id: String,
    doc: String,
}

/// Whether `put` may be written: the task exists, the id is free or `put.owner`'s, and a
/// new config stays under the caps.
fn check_put(tables: &Tables, put: &Put) -> StoreResult<()> {
    let task = put.config.task_id.as_str();
    if meta_of(tables, task)?.is_none() {
        return Err(StoreError::NotFound(format!("task {task}")));
    }
    let (mut mine, mut all) = (0, 0);
    for row in tables.push.range((task, "")..).map_err(backend)? {
        let (key, value) = row.map_err(backend)?;
        let (row_task, id) = key.value();
        if row_task != task {
            break;
        }
        let owner = owner_of(value.value())?;
        if id == put.id {
            return match owner {
                Some(owner) if owner == put.owner => Ok(()),
                _ => Err(Conflict::PushConfigTaken {
                    task_id: task.to_owned(),
                    config_id: put.id.clone(),
                }
                .into()),
            };
        }
        if let Some(owner) = owner {
            all += 1;
            if owner == put.owner {
                mine += 1;
            }
        }
    }
    Ok(check_push_config_caps(task, mine, all)?)
}

#[async_trait]
impl PushConfigStore for EmbeddedStore {
    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "put_push_config"))]
    async fn put_push_config(&self, owner: &str, config: PushConfig) -> StoreResult<PushConfig> {
        let id = push_config_id(&config)?;
        let doc = json(&Doc {
            owner,
            config: &config,
        })?;
        let put = Put {
            owner: owner.to_owned(),
            config,
            id,
            doc,
        };
        let push_tasks = Arc::clone(&self.push_tasks);
        self.writer
            .write(put, check_put, move |tables, put, ()| {
                let task = put.config.task_id.as_str();
                tables
                    .push
                    .insert((task, put.id.as_str()), put.doc.as_str())
                    .map_err(backend)?;
                // Before the write is durable: a dispatcher that lists too early finds
                // nothing and is told again once the config is stored.
                push_tasks
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(put.config.task_id.clone());
                Ok(put.config)
            })
            .await
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "get_push_config"))]
    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<StoredPushConfig>> {
        self.read(|snapshot| {
            let doc = snapshot.table(PUSH)?.get((task_id, config_id))?;
            doc.map(|d| decode(d.value())).transpose()
        })
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "list_push_configs"))]
    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<StoredPushConfig>> {
        self.read(|snapshot| {
            let mut configs = Vec::new();
            for entry in snapshot.table(PUSH)?.range((task_id, "").., false)? {
                let (key, value) = entry.map_err(backend)?;
                if key.value().0 != task_id {
                    break;
                }
                configs.push(decode(value.value())?);
            }
            Ok(configs)
        })
    }

    #[tracing::instrument(level = "debug", name = "store.call", skip_all, fields(store.operation = "delete_push_config"))]
    async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        scope: DeleteScope<'_>,
    ) -> StoreResult<bool> {
        let scope = match scope {
            DeleteScope::AnyOwner => Scope::AnyOwner,
            DeleteScope::Owner(owner) => Scope::Owner(owner.to_owned()),
            DeleteScope::Ownerless => Scope::Ownerless,
        };
        self.writer
            .write(
                (task_id.to_owned(), config_id.to_owned(), scope),
                |tables, (task, id, scope)| {
                    let found = tables
                        .push
                        .get((task.as_str(), id.as_str()))
                        .map_err(backend)?;
                    match found {
                        None => Ok(false),
                        Some(doc) => Ok(scope.covers(owner_of(doc.value())?.as_deref())),
                    }
                },
                |tables, (task, id, _), covered| {
                    if covered {
                        tables
                            .push
                            .remove((task.as_str(), id.as_str()))
                            .map_err(backend)?;
                    }
                    Ok(covered)
                },
            )
            .await
    }

    fn may_have_push_configs(&self, task_id: &str) -> bool {
        self.push_tasks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(task_id)
    }
}

/// [`DeleteScope`] owned, for the writer thread.
enum Scope {
    AnyOwner,
    Owner(String),
    Ownerless,
}

impl Scope {
    fn covers(&self, owner: Option<&str>) -> bool {
        match self {
            Scope::AnyOwner => DeleteScope::AnyOwner.covers(owner),
            Scope::Owner(o) => DeleteScope::Owner(o).covers(owner),
            Scope::Ownerless => DeleteScope::Ownerless.covers(owner),
        }
    }
}

/// The tasks the file holds push configs of.
pub(crate) fn tasks_with_push_configs(db: &Database) -> StoreResult<HashSet<String>> {
    use redb::{ReadableDatabase, ReadableTable};
    let txn = db.begin_read().map_err(backend)?;
    let push = txn.open_table(PUSH.table).map_err(backend)?;
    let mut tasks = HashSet::new();
    for entry in push.iter().map_err(backend)? {
        let (key, _) = entry.map_err(backend)?;
        tasks.insert(key.value().0.to_owned());
    }
    Ok(tasks)
}

//! `PushConfigStore`: `PUSH#<config id>` items beside the task, each with its `owner`, and two
//! counters per task, `PCOUNT#<owner>` (one owner's configs) and `PCOUNT` (all owned configs).
//!
//! Every rule is a condition of the one `TransactWriteItems` that writes, so no
//! read-then-write window exists:
//! - a creation puts the config with `attribute_not_exists(PK)` and adds 1 to both counters
//!   with `attribute_not_exists(n) OR n < :max`: the transaction fails whole on a taken id
//!   or a full counter, and two creations racing for the last slot cannot both pass;
//! - a replacement puts the config with `owner = :owner` and leaves the counters alone;
//! - a delete removes the config with `owner = :owner` (the owner it read) and takes 1 from
//!   both counters; a config without owner (stored before configs had owners) is deleted with
//!   `attribute_not_exists(owner)` and was never counted.
//!
//! A put first tries to create; if the id is taken it reads the config and, only if it is the
//! caller's, replaces it. A write whose condition fails because the config changed between
//! that read and the write (deleted, re-created) starts over, a few times at most.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};
use task_store::limits::{
    MAX_PUSH_CONFIGS_PER_PARTICIPANT, MAX_PUSH_CONFIGS_PER_TASK, push_config_id,
};
use task_store::{
    Conflict, DeleteScope, PushConfig, PushConfigStore, StoreError, StoreResult, StoredPushConfig,
};

use crate::DynamoDbStore;
use crate::calls::CHECK_ATTEMPTS;
use crate::error::{Cancellation, DynamoDbError, Guard};
use crate::items::{self, Item, attr, key, n, s};
use crate::keys;
use crate::schema::PK;
use crate::txn::{self, Condition};

/// Rounds of a put or delete whose config changed between its read and its write.
const ROUNDS: usize = 4;

/// A push config item's owner (`None`: stored before configs had owners).
fn owner_of(item: &Item) -> Option<String> {
    item.get(attr::OWNER)
        .and_then(|v| v.as_s().ok())
        .map(String::to_owned)
}

fn parse(item: &Item) -> StoreResult<StoredPushConfig> {
    Ok(StoredPushConfig {
        owner: owner_of(item),
        config: items::get_json(item, attr::DOC)?,
    })
}

impl DynamoDbStore {
    /// The condition check that the task exists.
    fn task_exists(&self, task_id: &str) -> StoreResult<TransactWriteItem> {
        let exists = Condition::exists();
        let check = ConditionCheck::builder()
            .table_name(&*self.table)
            .set_key(Some(key(keys::task_pk(task_id), keys::TASK_SK)))
            .condition_expression(exists.expression)
            .set_expression_attribute_names(Some(exists.names))
            .build()
            .map_err(DynamoDbError::from)?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Adds `delta` to a push config counter, under `max` when given.
    fn push_count(
        &self,
        task_id: &str,
        owner: Option<&str>,
        delta: i64,
        max: Option<usize>,
    ) -> StoreResult<TransactWriteItem> {
        let mut update = Update::builder()
            .table_name(&*self.table)
            .set_key(Some(key(
                keys::task_pk(task_id),
                keys::push_count_sk(owner),
            )))
            .update_expression("ADD #n :delta")
            .expression_attribute_names("#n", attr::COUNT)
            .expression_attribute_values(":delta", n(delta));
        if let Some(max) = max {
            update = update
                .condition_expression("attribute_not_exists(#n) OR #n < :max")
                .expression_attribute_values(":max", n(max));
        }
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(DynamoDbError::from)?)
            .build())
    }

    /// One transaction of a push config write; a failed condition comes back as the
    /// conflict its guard names.
    async fn push_transaction(
        &self,
        task_id: &str,
        writes: Vec<TransactWriteItem>,
        guards: &[Guard],
    ) -> StoreResult<Result<(), Conflict>> {
        match self.transact(writes, guards, CHECK_ATTEMPTS).await? {
            Ok(()) => Ok(Ok(())),
            Err(Cancellation::NotFound(_)) => Err(StoreError::NotFound(format!("task {task_id}"))),
            // The task check asks only for existence, so it cannot fail for a terminal task.
            Err(Cancellation::Conflict(Conflict::TaskTerminal(_))) => {
                Err(StoreError::NotFound(format!("task {task_id}")))
            }
            Err(Cancellation::Conflict(conflict)) => Ok(Err(conflict)),
            Err(other) => Err(DynamoDbError::Cancelled {
                operation: "TransactWriteItems",
                reasons: format!("push config on task {task_id}: {other:?}"),
            }
            .into()),
        }
    }

    /// Creates the config as `owner`'s: the id must be free and both counters under their cap.
    async fn create_push_config(
        &self,
        owner: &str,
        config: &PushConfig,
        id: &str,
    ) -> StoreResult<Result<(), Conflict>> {
        let task_id = config.task_id.as_str();
        let item = owned_item(owner, config, id)?;
        let writes = vec![
            self.task_exists(task_id)?,
            txn::put(&self.table, item, Some(&Condition::not_exists()))?,
            self.push_count(
                task_id,
                Some(owner),
                1,
                Some(MAX_PUSH_CONFIGS_PER_PARTICIPANT),
            )?,
            self.push_count(task_id, None, 1, Some(MAX_PUSH_CONFIGS_PER_TASK))?,
        ];
        let guards = [
            Guard::TaskOpen(task_id.to_owned()),
            Guard::PushConfigId {
                task_id: task_id.to_owned(),
                config_id: id.to_owned(),
            },
            Guard::PushConfigCap {
                task_id: task_id.to_owned(),
                per_participant: true,
                max: MAX_PUSH_CONFIGS_PER_PARTICIPANT,
            },
            Guard::PushConfigCap {
                task_id: task_id.to_owned(),
                per_participant: false,
                max: MAX_PUSH_CONFIGS_PER_TASK,
            },
        ];
        self.push_transaction(task_id, writes, &guards).await
    }

    /// Replaces `owner`'s config; `PushConfigTaken` if it is no longer theirs (or gone).
    async fn replace_push_config(
        &self,
        owner: &str,
        config: &PushConfig,
        id: &str,
    ) -> StoreResult<Result<(), Conflict>> {
        let task_id = config.task_id.as_str();
        let item = owned_item(owner, config, id)?;
        let owned = Condition::new("#owner = :owner")
            .name("#owner", attr::OWNER)
            .value(":owner", s(owner));
        let writes = vec![
            self.task_exists(task_id)?,
            txn::put(&self.table, item, Some(&owned))?,
        ];
        let guards = [
            Guard::TaskOpen(task_id.to_owned()),
            Guard::PushConfigId {
                task_id: task_id.to_owned(),
                config_id: id.to_owned(),
            },
        ];
        self.push_transaction(task_id, writes, &guards).await
    }

    /// Deletes the config if its owner is still `owner`, and frees its slot.
    async fn delete_owned_by(
        &self,
        task_id: &str,
        config_id: &str,
        owner: Option<&str>,
    ) -> StoreResult<Result<(), Conflict>> {
        let config_key = key(keys::task_pk(task_id), keys::push_sk(config_id));
        let id_guard = Guard::PushConfigId {
            task_id: task_id.to_owned(),
            config_id: config_id.to_owned(),
        };
        // Counter updates carry no condition: their guard never decides.
        let counter_guard = Guard::Log {
            task_id: task_id.to_owned(),
            creating: false,
        };
        let (writes, guards) = match owner {
            Some(owner) => {
                let owned = Condition::new("#owner = :owner")
                    .name("#owner", attr::OWNER)
                    .value(":owner", s(owner));
                (
                    vec![
                        txn::delete(&self.table, config_key, Some(&owned))?,
                        self.push_count(task_id, Some(owner), -1, None)?,
                        self.push_count(task_id, None, -1, None)?,
                    ],
                    vec![id_guard, counter_guard.clone(), counter_guard],
                )
            }
            None => {
                let ownerless =
                    Condition::new("attribute_exists(#pk) AND attribute_not_exists(#owner)")
                        .name("#pk", PK)
                        .name("#owner", attr::OWNER);
                (
                    vec![txn::delete(&self.table, config_key, Some(&ownerless))?],
                    vec![id_guard],
                )
            }
        };
        self.push_transaction(task_id, writes, &guards).await
    }
}

/// The item of `config`, stored under `id` as `owner`'s.
fn owned_item(owner: &str, config: &PushConfig, id: &str) -> StoreResult<Item> {
    let mut item = key(keys::task_pk(&config.task_id), keys::push_sk(id));
    item.insert(attr::DOC.into(), s(items::json(config)?));
    item.insert(attr::OWNER.into(), s(owner));
    Ok(item)
}

/// The port's error for a conflict that ran out of rounds.
fn kept_changing(task_id: &str, config_id: &str) -> StoreError {
    DynamoDbError::Cancelled {
        operation: "TransactWriteItems",
        reasons: format!("push config {config_id} of task {task_id} kept changing"),
    }
    .into()
}

#[async_trait]
impl PushConfigStore for DynamoDbStore {
    async fn put_push_config(&self, owner: &str, config: PushConfig) -> StoreResult<PushConfig> {
        let id = push_config_id(&config)?;
        let task_id = config.task_id.as_str();
        for _ in 0..ROUNDS {
            match self.create_push_config(owner, &config, &id).await? {
                Ok(()) => return Ok(config),
                Err(Conflict::PushConfigTaken { .. }) => {}
                Err(conflict) => return Err(conflict.into()),
            }
            match self.get_push_config(task_id, &id).await? {
                // Deleted since: create it again.
                None => continue,
                Some(current) if current.is_owned_by(owner) => {
                    match self.replace_push_config(owner, &config, &id).await? {
                        Ok(()) => return Ok(config),
                        // No longer theirs: see again what it is now.
                        Err(Conflict::PushConfigTaken { .. }) => continue,
                        Err(conflict) => return Err(conflict.into()),
                    }
                }
                Some(_) => {
                    return Err(Conflict::PushConfigTaken {
                        task_id: task_id.to_owned(),
                        config_id: id,
                    }
                    .into());
                }
            }
        }
        Err(kept_changing(task_id, &id))
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<StoredPushConfig>> {
        let item = self
            .get_item(key(keys::task_pk(task_id), keys::push_sk(config_id)))
            .await?;
        item.as_ref().map(parse).transpose()
    }

    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<StoredPushConfig>> {
        // `PUSH#<id>` sorts by id.
        let items = self
            .query_all(self.prefix_query(task_id, keys::PUSH_PREFIX))
            .await?;
        items.iter().map(parse).collect()
    }

    async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
        scope: DeleteScope<'_>,
    ) -> StoreResult<bool> {
        for _ in 0..ROUNDS {
            let Some(current) = self.get_push_config(task_id, config_id).await? else {
                return Ok(false);
            };
            if !scope.covers(current.owner.as_deref()) {
                return Ok(false);
            }
            match self
                .delete_owned_by(task_id, config_id, current.owner.as_deref())
                .await?
            {
                Ok(()) => return Ok(true),
                // Deleted or re-created since the read: look again.
                Err(Conflict::PushConfigTaken { .. }) => continue,
                Err(conflict) => return Err(conflict.into()),
            }
        }
        Err(kept_changing(task_id, config_id))
    }
}

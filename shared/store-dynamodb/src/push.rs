//! `PushConfigStore`: `PUSH#<config id>` items beside the task.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ConditionCheck, ReturnConsumedCapacity, TransactWriteItem};
use task_store::{Conflict, PushConfig, PushConfigStore, StoreError, StoreResult};

use crate::commit::{self, Condition};
use crate::error::{Cancellation, DynamoDbError, Guard};
use crate::items::{self, attr, key, s};
use crate::keys;
use crate::{CHECK_ATTEMPTS, DynamoDbStore, Kind};

#[async_trait]
impl PushConfigStore for DynamoDbStore {
    async fn put_push_config(&self, config: PushConfig) -> StoreResult<PushConfig> {
        let id = config
            .id
            .clone()
            .ok_or_else(|| StoreError::Invalid("a push config needs an id".to_owned()))?;
        let task_id = config.task_id.clone();
        let pk = keys::task_pk(&task_id);
        let exists = Condition::exists();
        let check = ConditionCheck::builder()
            .table_name(&*self.table)
            .set_key(Some(key(&pk, keys::TASK_SK)))
            .condition_expression(exists.expression)
            .set_expression_attribute_names(Some(exists.names))
            .build()
            .map_err(DynamoDbError::from)?;
        let mut item = key(&pk, keys::push_sk(&id));
        item.insert(attr::DOC.into(), s(items::json(&config)?));
        let writes = vec![
            TransactWriteItem::builder().condition_check(check).build(),
            commit::put(&self.table, item, None)?,
        ];
        let guards = [
            Guard::TaskOpen(task_id.clone()),
            Guard::Log {
                task_id: task_id.clone(),
                creating: false,
            },
        ];
        match self.transact(writes, &guards, CHECK_ATTEMPTS).await? {
            Ok(()) => Ok(config),
            Err(Cancellation::NotFound(_)) => Err(StoreError::NotFound(format!("task {task_id}"))),
            // The check asks only for existence, so it cannot fail for a terminal task.
            Err(Cancellation::Conflict(Conflict::TaskTerminal(_))) => {
                Err(StoreError::NotFound(format!("task {task_id}")))
            }
            Err(Cancellation::Conflict(conflict)) => Err(conflict.into()),
            Err(other) => Err(DynamoDbError::Cancelled {
                operation: "TransactWriteItems",
                reasons: format!("push config on task {task_id}: {other:?}"),
            }
            .into()),
        }
    }

    async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> StoreResult<Option<PushConfig>> {
        let item = self
            .get_item(key(keys::task_pk(task_id), keys::push_sk(config_id)))
            .await?;
        Ok(item
            .map(|item| items::get_json(&item, attr::DOC))
            .transpose()?)
    }

    async fn list_push_configs(&self, task_id: &str) -> StoreResult<Vec<PushConfig>> {
        // `PUSH#<id>` sorts by id.
        let items = self
            .query_all(self.prefix_query(task_id, keys::PUSH_PREFIX))
            .await?;
        items
            .iter()
            .map(|item| Ok(items::get_json(item, attr::DOC)?))
            .collect()
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> StoreResult<()> {
        let out = self
            .client
            .delete_item()
            .table_name(&*self.table)
            .set_key(Some(key(keys::task_pk(task_id), keys::push_sk(config_id))))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| DynamoDbError::call("DeleteItem", e))?;
        self.count(Kind::Write, out.consumed_capacity());
        Ok(())
    }
}

//! Transaction items: condition expressions ([`Condition`]), conditional puts and deletes,
//! and the writes of queueing a message, which a commit (`Change::Enqueue`) and
//! `InboxStore::enqueue` both send.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};
use task_core::lifecycle::TERMINAL;
use task_store::{Conflict, InboxItem, StoreError, StoreResult};

use crate::DynamoDbStore;
use crate::error::{DynamoDbError, Guard};
use crate::items::{self, Item, attr, key, s};
use crate::keys;
use crate::schema::PK;

/// A condition expression with its placeholders.
#[derive(Debug, Clone, Default)]
pub struct Condition {
    pub expression: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Condition {
    pub fn new(expression: impl Into<String>) -> Self {
        Condition {
            expression: expression.into(),
            ..Default::default()
        }
    }

    pub fn name(mut self, placeholder: &str, name: &str) -> Self {
        self.names.insert(placeholder.to_owned(), name.to_owned());
        self
    }

    pub fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    pub fn not_exists() -> Self {
        Condition::new("attribute_not_exists(#pk)").name("#pk", PK)
    }

    pub fn exists() -> Self {
        Condition::new("attribute_exists(#pk)").name("#pk", PK)
    }

    fn values_or_none(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

pub fn put(
    table: &str,
    item: Item,
    condition: Option<&Condition>,
) -> Result<TransactWriteItem, DynamoDbError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item));
    if let Some(c) = condition {
        put = put
            .condition_expression(&c.expression)
            .set_expression_attribute_names(Some(c.names.clone()))
            .set_expression_attribute_values(c.values_or_none());
    }
    Ok(TransactWriteItem::builder().put(put.build()?).build())
}

pub fn delete(
    table: &str,
    key: Item,
    condition: Option<&Condition>,
) -> Result<TransactWriteItem, DynamoDbError> {
    let mut delete = Delete::builder().table_name(table).set_key(Some(key));
    if let Some(c) = condition {
        delete = delete
            .condition_expression(&c.expression)
            .set_expression_attribute_names(Some(c.names.clone()))
            .set_expression_attribute_values(c.values_or_none());
    }
    Ok(TransactWriteItem::builder().delete(delete.build()?).build())
}

/// The check that the task exists and is not in a terminal state. On failure DynamoDB
/// returns the task item (if any), which tells "no such task" from "terminal".
fn task_open(table: &str, task_id: &str) -> StoreResult<TransactWriteItem> {
    let mut condition = Condition::exists().name("#state", attr::STATE);
    let mut placeholders = Vec::new();
    for (i, state) in TERMINAL.iter().enumerate() {
        let placeholder = format!(":terminal{i}");
        condition = condition.value(&placeholder, s(items::state_name(state)?));
        placeholders.push(placeholder);
    }
    condition.expression.push_str(&format!(
        " AND NOT (#state IN ({}))",
        placeholders.join(", ")
    ));
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key(keys::task_pk(task_id), keys::TASK_SK)))
        .condition_expression(condition.expression)
        .set_expression_attribute_names(Some(condition.names))
        .set_expression_attribute_values(Some(condition.values))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map_err(DynamoDbError::from)?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// The writes of queueing `item` (`json`: its encoded message) for `task_id`: the check that
/// the task is open, its message id, its chunks; with their guards. Shared by `enqueue` and
/// a commit's `Change::Enqueue`.
pub fn enqueue_writes(
    table: &str,
    task_id: &str,
    item: &InboxItem,
    json: &str,
) -> StoreResult<(Vec<TransactWriteItem>, Vec<Guard>)> {
    let pk = keys::task_pk(task_id);
    let message_id = &item.key.message_id;
    let mut writes = vec![task_open(table, task_id)?];
    let mut guards = vec![Guard::TaskOpen(task_id.to_owned())];
    writes.push(put(
        table,
        key(&pk, keys::message_id_sk(message_id)),
        Some(&Condition::not_exists()),
    )?);
    guards.push(Guard::MessageId {
        task_id: task_id.to_owned(),
        message_id: message_id.clone(),
    });
    for chunk in items::inbox_chunks(&pk, item, json)? {
        writes.push(put(table, chunk, None)?);
        guards.push(Guard::Log {
            task_id: task_id.to_owned(),
            creating: false,
        });
    }
    Ok((writes, guards))
}

impl DynamoDbStore {
    /// A failed "task is open" check without the item DynamoDB should return: read it to
    /// tell a missing task from a terminal one.
    pub(crate) async fn closed_task(&self, task_id: &str) -> StoreResult<StoreError> {
        Ok(
            match self
                .get_item(key(keys::task_pk(task_id), keys::TASK_SK))
                .await?
            {
                None => StoreError::NotFound(format!("task {task_id}")),
                Some(_) => Conflict::TaskTerminal(task_id.to_owned()).into(),
            },
        )
    }
}

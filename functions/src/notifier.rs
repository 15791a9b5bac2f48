//! The push notifier: a consumer of the task table's DynamoDB Stream that delivers each new
//! task event to the task's push configs, with the same sender (retries, backoff, webhook
//! policy) as the local server's dispatcher.
//!
//! # Guarantees and decisions
//!
//! - **Which records.** Only `INSERT`s of an event's first chunk (`PK = TASK#<id>`,
//!   `SK = EVT#<seq>#000`) are notifications; everything else in the stream (task items,
//!   history, leases, …) is skipped. The event itself is read through the store (it may be
//!   chunked over several items), so the stream view type does not matter.
//! - **Order.** A task's items share one partition key, so its records arrive in order in one
//!   shard. Within a batch, a task's events go out one after the other, each to all of the
//!   task's configs at once; different tasks are delivered concurrently, so a slow webhook
//!   delays only its own task.
//! - **At-least-once, with partial-batch failure.** An event whose event or configs could not
//!   be read from the store is reported in `batchItemFailures`, and so are the later events of
//!   the same task in the batch (they are not attempted, to keep the order). Lambda then
//!   retries the batch from the earliest reported record: events after it are delivered again
//!   (duplicates, which at-least-once allows), and once the mapping's retry budget is spent the
//!   batch goes to its on-failure destination.
//! - **Giving up on a webhook.** The retry budget of a delivery is the sender's (5 attempts
//!   with backoff), as on the local server's dispatcher: when it is spent (5xx, timeouts,
//!   connection errors), or a webhook refuses a notification (a 4xx other than 408/429), or
//!   the policy refuses the address, or the config is invalid, the event is logged and
//!   skipped for that config and the next ones are tried. Reporting it for retry would hold
//!   the whole shard, every other task's notifications with it, for up to the mapping's ten
//!   retries behind one dead webhook; the receiver can always read the task to catch up.
//! - **Owners.** Before each event, the task is read as it is then (again only if its version
//!   moved): a config whose owner is no longer a participant (or that has no owner) gets
//!   nothing more and is deleted.
//! - **Configs created late.** The configs are read when the event is delivered, so a config
//!   created while the notifier lags may also receive events appended shortly before it.

use std::collections::BTreeMap;
use std::sync::Arc;

use a2a_service::push::PushSender;
use a2a_service::push::configs::{self, Audience};
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use futures::future::join_all;
use task_store::Store;

/// A new event found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub task_id: String,
    pub seq: u64,
    /// The record's sequence number: what `batchItemFailures` names.
    pub item_identifier: String,
}

/// The new events of a batch, in stream order.
pub fn new_events(event: &Event) -> Vec<NewEvent> {
    event.records.iter().filter_map(new_event).collect()
}

fn new_event(record: &EventRecord) -> Option<NewEvent> {
    if record.event_name != "INSERT" {
        return None;
    }
    // Keys as DynamoDB JSON: {"PK": {"S": "..."}, "SK": {"S": "..."}}.
    let keys = serde_json::to_value(&record.change.keys).ok()?;
    let string = |name: &str| keys.get(name)?.get("S")?.as_str().map(str::to_owned);
    let (pk, sk) = (string("PK")?, string("SK")?);
    let (task_id, seq) = store_dynamodb::keys::event_of_keys(&pk, &sk)?;
    Some(NewEvent {
        task_id: task_id.to_owned(),
        seq,
        item_identifier: record.change.sequence_number.clone()?,
    })
}

pub struct Notifier {
    store: Arc<dyn Store>,
    sender: Arc<PushSender>,
}

impl Notifier {
    pub fn new(store: Arc<dyn Store>, sender: Arc<PushSender>) -> Self {
        Self { store, sender }
    }

    /// Delivers the batch's new events; the response names the records to retry.
    pub async fn handle(&self, event: &Event) -> DynamoDbEventResponse {
        let mut by_task: BTreeMap<String, Vec<NewEvent>> = BTreeMap::new();
        for new in new_events(event) {
            by_task.entry(new.task_id.clone()).or_default().push(new);
        }
        let failed: Vec<String> =
            join_all(by_task.into_iter().map(|(task_id, events)| async move {
                self.deliver_task(&task_id, &events).await
            }))
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut response = DynamoDbEventResponse::default();
        response.batch_item_failures = failed
            .into_iter()
            .map(|id| {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some(id);
                failure
            })
            .collect();
        response
    }

    /// One task's events in order; returns the identifiers of the records to retry.
    async fn deliver_task(&self, task_id: &str, events: &[NewEvent]) -> Vec<String> {
        let retry_from = |i: usize| {
            events[i..]
                .iter()
                .map(|e| e.item_identifier.clone())
                .collect()
        };
        let mut configs = match self.store.list_push_configs(task_id).await {
            Ok(configs) => configs,
            Err(err) => {
                tracing::warn!(task_id, error = %err, "cannot list the task's push configs; the batch is retried");
                return retry_from(0);
            }
        };
        let mut audience = Audience::new(task_id);
        for (i, new) in events.iter().enumerate() {
            if configs.is_empty() {
                return Vec::new();
            }
            // At delivery time, each config's owner must be a participant of the task.
            if let Err(err) = audience.refresh(&*self.store).await {
                tracing::warn!(task_id, seq = new.seq, error = %err, "cannot read the task for its push configs; the batch is retried");
                return retry_from(i);
            }
            let (keep, gone): (Vec<_>, Vec<_>) =
                configs.into_iter().partition(|c| audience.admits(c));
            configs = keep;
            for config in &gone {
                // Not delivered either way; a failed delete is tried again by the next batch.
                if let Err(err) = configs::retire(&*self.store, task_id, config).await {
                    tracing::warn!(task_id, config_id = config.config.id.as_deref().unwrap_or(""), error = %err, "cannot remove a push config whose owner left the task");
                }
            }
            if configs.is_empty() {
                return Vec::new();
            }
            let stored = match self.store.events(task_id, new.seq, 1).await {
                Ok(found) => found.into_iter().next(),
                Err(err) => {
                    tracing::warn!(task_id, seq = new.seq, error = %err, "cannot read the event; the batch is retried");
                    return retry_from(i);
                }
            };
            let Some(stored) = stored.filter(|s| s.seq == new.seq) else {
                tracing::warn!(
                    task_id,
                    seq = new.seq,
                    "the event is not in the store; skipped"
                );
                continue;
            };
            let outcomes = join_all(
                configs
                    .iter()
                    .map(|config| self.sender.deliver(&config.config, &stored.event)),
            )
            .await;
            for (config, outcome) in configs.iter().zip(outcomes) {
                if let Err(err) = outcome {
                    tracing::warn!(
                        task_id, seq = new.seq, config_id = config.config.id.as_deref().unwrap_or(""),
                        url = %config.config.url, error = %err, transient = err.is_transient(),
                        "push notification not delivered; skipped for this config"
                    );
                }
            }
        }
        Vec::new()
    }
}

//! The reads of a task: its item, and its logs (events, history, transcript, artifacts,
//! audit), reassembled from chunks and read again while a transaction is half visible.

use std::future::Future;

use a2a::{Artifact, Message};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use task_store::{AuditEntry, StoreResult, StoredEvent, StoredTask};

use crate::DynamoDbStore;
use crate::calls::backoff;
use crate::error::DynamoDbError;
use crate::items::{self, Incomplete, attr, key, s};
use crate::keys;

/// Reads of chunked documents that met a partly visible transaction are repeated this
/// often before the data is called corrupt.
const READ_ATTEMPTS: u32 = 3;

/// Runs a read until it sees whole documents.
pub async fn whole<T, F, Fut>(what: &str, task_id: &str, read: F) -> StoreResult<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = StoreResult<Result<T, Incomplete>>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        match read().await? {
            Ok(value) => return Ok(value),
            Err(Incomplete(n)) if attempt >= READ_ATTEMPTS => {
                return Err(DynamoDbError::corrupt(
                    keys::task_pk(task_id),
                    format!("{what} {n} is missing chunks after {attempt} reads"),
                )
                .into());
            }
            Err(_) => backoff(attempt).await,
        }
    }
}

/// Numbered documents must follow each other without a hole.
fn contiguous(docs: &[(u64, String)]) -> Result<(), Incomplete> {
    match docs.windows(2).find(|w| w[1].0 != w[0].0 + 1) {
        Some(w) => Err(Incomplete(w[0].0 + 1)),
        None => Ok(()),
    }
}

fn parse_doc<T: serde::de::DeserializeOwned>(
    task_id: &str,
    what: &str,
    n: u64,
    json: &str,
) -> StoreResult<T> {
    serde_json::from_str(json).map_err(|e| {
        DynamoDbError::corrupt(keys::task_pk(task_id), format!("{what} {n}: {e}")).into()
    })
}

impl DynamoDbStore {
    /// A query of one task's documents under `prefix` numbered `first..=last`.
    fn numbered_query(
        &self,
        task_id: &str,
        prefix: &str,
        first: u64,
        last: u64,
    ) -> QueryFluentBuilder {
        let (low, high) = keys::numbered_range(prefix, first, last);
        self.task_query(task_id, "#sk BETWEEN :low AND :high")
            .expression_attribute_values(":low", s(low))
            .expression_attribute_values(":high", s(high))
    }

    /// The documents under `prefix` that `query` finds, whole, numbered from `from` on
    /// without a hole.
    async fn numbered_docs(
        &self,
        what: &str,
        task_id: &str,
        prefix: &str,
        query: QueryFluentBuilder,
        from: u64,
    ) -> StoreResult<Vec<(u64, String)>> {
        whole(what, task_id, || async {
            let chunks = self
                .query_all(query.clone())
                .await?
                .iter()
                .map(|item| items::parse_chunk(prefix, item))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(items::assemble(chunks).and_then(|docs| {
                if docs.first().is_some_and(|(n, _)| *n != from) {
                    return Err(Incomplete(from));
                }
                contiguous(&docs).map(|()| docs)
            }))
        })
        .await
    }

    pub(crate) async fn get_task(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        let Some(item) = self
            .get_item(key(keys::task_pk(task_id), keys::TASK_SK))
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(items::parse_task(&item)?))
    }

    pub(crate) async fn read_events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let last = from_seq.saturating_add(limit as u64 - 1);
        let query = self.numbered_query(task_id, keys::EVENT_PREFIX, from_seq, last);
        let docs = self
            .numbered_docs("event", task_id, keys::EVENT_PREFIX, query, from_seq)
            .await?;
        docs.into_iter()
            .map(|(seq, json)| {
                Ok(StoredEvent {
                    seq,
                    event: parse_doc(task_id, "event", seq, &json)?,
                })
            })
            .collect()
    }

    pub(crate) async fn read_history(
        &self,
        task_id: &str,
        last: Option<usize>,
    ) -> StoreResult<Vec<Message>> {
        let docs = match last {
            Some(0) => return Ok(Vec::new()),
            None => {
                let query = self.prefix_query(task_id, keys::HISTORY_PREFIX);
                self.numbered_docs("history message", task_id, keys::HISTORY_PREFIX, query, 0)
                    .await?
            }
            Some(newest) => {
                // Newest first, until a message beyond the newest `newest` shows up.
                let page = i32::try_from(newest.saturating_add(1))
                    .unwrap_or(i32::MAX)
                    .min(1000);
                let query = self
                    .prefix_query(task_id, keys::HISTORY_PREFIX)
                    .scan_index_forward(false)
                    .limit(page);
                whole("history message", task_id, || async {
                    let mut chunks = Vec::new();
                    let mut seen = 0usize;
                    let mut current = None;
                    let mut start = None;
                    'pages: loop {
                        let out = self
                            .query_page(query.clone().set_exclusive_start_key(start))
                            .await?;
                        for item in out.items() {
                            let chunk = items::parse_chunk(keys::HISTORY_PREFIX, item)?;
                            if current != Some(chunk.n) {
                                current = Some(chunk.n);
                                seen += 1;
                                if seen > newest {
                                    break 'pages;
                                }
                            }
                            chunks.push(chunk);
                        }
                        match out.last_evaluated_key {
                            Some(key) if !key.is_empty() => start = Some(key),
                            _ => break,
                        }
                    }
                    chunks.reverse();
                    Ok(items::assemble(chunks).and_then(|docs| contiguous(&docs).map(|()| docs)))
                })
                .await?
            }
        };
        docs.iter()
            .map(|(n, json)| parse_doc(task_id, "history message", *n, json))
            .collect()
    }

    pub(crate) async fn read_transcript(
        &self,
        task_id: &str,
        from: u64,
    ) -> StoreResult<Vec<serde_json::Value>> {
        let query = self.numbered_query(task_id, keys::TRANSCRIPT_PREFIX, from, u64::MAX);
        let docs = self
            .numbered_docs(
                "transcript entry",
                task_id,
                keys::TRANSCRIPT_PREFIX,
                query,
                from,
            )
            .await?;
        docs.iter()
            .map(|(n, json)| parse_doc(task_id, "transcript entry", *n, json))
            .collect()
    }

    pub(crate) async fn read_artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
        let query = self.prefix_query(task_id, keys::ARTIFACT_PREFIX);
        let docs = whole("artifact", task_id, || async {
            let chunks = self
                .query_all(query.clone())
                .await?
                .iter()
                .map(|item| items::parse_chunk(keys::ARTIFACT_PREFIX, item))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(items::assemble(chunks))
        })
        .await?;
        docs.iter()
            .map(|(n, json)| parse_doc(task_id, "artifact", *n, json))
            .collect()
    }

    pub(crate) async fn read_audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        let items = self
            .query_all(self.prefix_query(task_id, keys::AUDIT_PREFIX))
            .await?;
        // The sort key orders by (time, message id) already.
        items
            .iter()
            .map(|item| Ok(items::get_json(item, attr::DOC)?))
            .collect()
    }
}

//! `TaskStore`: commits as one transaction; reads of the task, its logs and the
//! participant index.

use std::collections::HashMap;
use std::future::Future;

use a2a::{Artifact, Message};
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::Select;
use task_store::{
    AuditEntry, Change, Committed, Conflict, LeaseStore, ListQuery, StoreError, StoreResult,
    StoredEvent, StoredTask, TaskPage, TaskStore,
};

use crate::commit::{self, InboxChunks};
use crate::error::{Cancellation, DynamoDbError, contended_task};
use crate::items::{self, Incomplete, Item, attr, key, s};
use crate::keys::{self, PageToken};
use crate::schema::{GSI1, GSI1_PK, GSI1_SK, PK, SK};
use crate::{COMMIT_ATTEMPTS, DynamoDbStore};

/// Reads of chunked documents that met a partly visible transaction are repeated this
/// often before the data is called corrupt.
const READ_ATTEMPTS: u32 = 3;

/// Runs a read until it sees whole documents.
pub(crate) async fn whole<T, F, Fut>(what: &str, task_id: &str, read: F) -> StoreResult<T>
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
            Err(_) => crate::backoff(attempt).await,
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
    /// A query of one task's items whose sort key starts with `prefix`.
    pub(crate) fn prefix_query(&self, task_id: &str, prefix: &str) -> QueryFluentBuilder {
        self.query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::task_pk(task_id)))
            .expression_attribute_values(":prefix", s(prefix))
            .consistent_read(true)
    }

    /// Writes index entries that did not fit in the commit's transaction. The commit has
    /// happened: a failure here leaves the index behind until the task's next status
    /// change, and is logged rather than reported as a failed commit.
    async fn write_index_after(&self, writes: Vec<commit::IndexWrite>) {
        let requests: Result<Vec<_>, _> = writes
            .iter()
            .map(commit::IndexWrite::write_request)
            .collect();
        let result = match requests {
            Ok(requests) => self.batch_write(requests).await,
            Err(e) => Err(e.into()),
        };
        if let Err(e) = result {
            tracing::error!(error = %e, table = %self.table, "participant index entries not written after a commit");
        }
    }

    async fn inbox_chunks(&self, changes: &[Change]) -> StoreResult<InboxChunks> {
        let heads = commit::consumed_inbox_heads(changes)?;
        let mut chunks = InboxChunks::new();
        if heads.is_empty() {
            return Ok(chunks);
        }
        let names: &[(&str, &str)] = &[("#pk", PK), ("#sk", SK), ("#chunks", attr::CHUNKS)];
        for item in self
            .batch_get(heads, Some(("#pk, #sk, #chunks", names)))
            .await?
        {
            let pk = items::get_s(&item, PK)?.to_owned();
            let sk = items::get_s(&item, SK)?.to_owned();
            chunks.insert((pk, sk), items::get_n(&item, attr::CHUNKS)?);
        }
        Ok(chunks)
    }

    /// One page of a participant's index entries from `start`, newest first, and whether
    /// more follow.
    async fn index_page(
        &self,
        query: QueryFluentBuilder,
        start: Option<Item>,
        page_size: usize,
    ) -> StoreResult<(Vec<Item>, bool)> {
        let mut entries = Vec::new();
        let mut start = start;
        loop {
            let out = self
                .query_page(query.clone().set_exclusive_start_key(start))
                .await?;
            entries.extend(out.items.unwrap_or_default());
            if entries.len() > page_size {
                entries.truncate(page_size);
                return Ok((entries, true));
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok((entries, false)),
            }
        }
    }

    async fn count_matches(&self, query: QueryFluentBuilder) -> StoreResult<usize> {
        let mut total = 0;
        let mut start = None;
        loop {
            let out = self
                .query_page(query.clone().set_exclusive_start_key(start))
                .await?;
            total += usize::try_from(out.count).unwrap_or(0);
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(total),
            }
        }
    }
}

#[async_trait]
impl TaskStore for DynamoDbStore {
    async fn commit(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let inbox_chunks = self.inbox_chunks(&changes).await?;
        let mut plan = commit::plan(&self.table, &changes, &inbox_chunks)?;
        plan.fit(&self.table)?;
        let outcome = self
            .transact(
                std::mem::take(&mut plan.items),
                &plan.guards,
                COMMIT_ATTEMPTS,
            )
            .await?;
        match outcome {
            Ok(()) => {}
            Err(Cancellation::Conflict(conflict)) => return Err(conflict.into()),
            // A queued message's task is missing or terminal (`Change::Enqueue`).
            Err(Cancellation::NotFound(task_id)) => return Err(self.closed_task(&task_id).await?),
            Err(Cancellation::Contention) => {
                // Still in another transaction after the retries: it changed (the caller re-reads).
                let task = contended_task(&plan.guards).unwrap_or_else(|| changes[0].task_id());
                return Err(Conflict::TaskChanged(task.to_owned()).into());
            }
            Err(other) => {
                return Err(DynamoDbError::Cancelled {
                    operation: "TransactWriteItems",
                    reasons: format!("{other:?}"),
                }
                .into());
            }
        }
        if !plan.index.is_empty() {
            self.write_index_after(std::mem::take(&mut plan.index))
                .await;
        }
        // A lease cannot be given up conditionally inside the transaction (a lease another
        // runner took would cancel it): it is given up right after.
        for lease in changes.iter().filter_map(|c| match c {
            Change::Update(update) => update.release.as_ref(),
            _ => None,
        }) {
            match self.release(lease).await {
                Ok(()) | Err(StoreError::Conflict(Conflict::LeaseLost(_))) => {}
                Err(err) => {
                    tracing::warn!(task_id = %lease.task_id, error = %err, "a lease was not given up after its run's last write; it will expire");
                }
            }
        }
        Ok(plan.committed)
    }

    async fn get(&self, task_id: &str) -> StoreResult<Option<StoredTask>> {
        let Some(item) = self
            .get_item(key(keys::task_pk(task_id), keys::TASK_SK))
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(items::parse_task(&item)?))
    }

    async fn events(
        &self,
        task_id: &str,
        from_seq: u64,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let last = from_seq.saturating_add(limit as u64 - 1);
        let (low, high) = keys::numbered_range(keys::EVENT_PREFIX, from_seq, last);
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :low AND :high")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::task_pk(task_id)))
            .expression_attribute_values(":low", s(low))
            .expression_attribute_values(":high", s(high))
            .consistent_read(true);
        let docs = whole("event", task_id, || async {
            let chunks = self
                .query_all(query.clone())
                .await?
                .iter()
                .map(|item| items::parse_chunk(keys::EVENT_PREFIX, item))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(items::assemble(chunks).and_then(|docs| {
                match docs.first() {
                    Some((first, _)) if *first != from_seq => return Err(Incomplete(from_seq)),
                    _ => {}
                }
                contiguous(&docs).map(|()| docs)
            }))
        })
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

    async fn history(&self, task_id: &str, last: Option<usize>) -> StoreResult<Vec<Message>> {
        let docs = match last {
            Some(0) => return Ok(Vec::new()),
            None => {
                let query = self.prefix_query(task_id, keys::HISTORY_PREFIX);
                whole("history message", task_id, || async {
                    let chunks = self
                        .query_all(query.clone())
                        .await?
                        .iter()
                        .map(|item| items::parse_chunk(keys::HISTORY_PREFIX, item))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(items::assemble(chunks).and_then(|docs| {
                        if docs.first().is_some_and(|(n, _)| *n != 0) {
                            return Err(Incomplete(0));
                        }
                        contiguous(&docs).map(|()| docs)
                    }))
                })
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

    async fn transcript(&self, task_id: &str, from: u64) -> StoreResult<Vec<serde_json::Value>> {
        let (low, high) = keys::numbered_range(keys::TRANSCRIPT_PREFIX, from, u64::MAX);
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :low AND :high")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(keys::task_pk(task_id)))
            .expression_attribute_values(":low", s(low))
            .expression_attribute_values(":high", s(high))
            .consistent_read(true);
        let docs = whole("transcript entry", task_id, || async {
            let chunks = self
                .query_all(query.clone())
                .await?
                .iter()
                .map(|item| items::parse_chunk(keys::TRANSCRIPT_PREFIX, item))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(items::assemble(chunks).and_then(|docs| {
                if docs.first().is_some_and(|(n, _)| *n != from) {
                    return Err(Incomplete(from));
                }
                contiguous(&docs).map(|()| docs)
            }))
        })
        .await?;
        docs.iter()
            .map(|(n, json)| parse_doc(task_id, "transcript entry", *n, json))
            .collect()
    }

    async fn artifacts(&self, task_id: &str) -> StoreResult<Vec<Artifact>> {
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

    async fn audit(&self, task_id: &str) -> StoreResult<Vec<AuditEntry>> {
        let items = self
            .query_all(self.prefix_query(task_id, keys::AUDIT_PREFIX))
            .await?;
        // The sort key orders by (time, message id) already.
        items
            .iter()
            .map(|item| Ok(items::get_json(item, attr::DOC)?))
            .collect()
    }

    async fn list(&self, participant_id: &str, query: &ListQuery) -> StoreResult<TaskPage> {
        let start = query
            .page_token
            .as_deref()
            .map(PageToken::decode)
            .transpose()?;
        let partition = keys::participant_partition(participant_id);
        let mut key_condition = "#gpk = :gpk".to_owned();
        let mut names = HashMap::from([("#gpk".to_owned(), GSI1_PK.to_owned())]);
        let mut values = HashMap::from([(":gpk".to_owned(), s(partition.clone()))]);
        if let Some(after) = query.status_after {
            key_condition.push_str(" AND #gsk >= :after");
            names.insert("#gsk".into(), GSI1_SK.into());
            values.insert(":after".into(), s(keys::time(after)?));
        }
        let mut filters = Vec::new();
        if let Some(context) = &query.context_id {
            filters.push("#ctx = :ctx");
            names.insert("#ctx".into(), attr::CONTEXT.into());
            values.insert(":ctx".into(), s(context.clone()));
        }
        if let Some(state) = &query.state {
            filters.push("#state = :state");
            names.insert("#state".into(), attr::STATE.into());
            values.insert(":state".into(), s(items::state_name(state)?));
        }
        let base = self
            .client
            .query()
            .table_name(&*self.table)
            .index_name(GSI1)
            .key_condition_expression(key_condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .set_filter_expression((!filters.is_empty()).then(|| filters.join(" AND ")))
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Total);
        // Without filters one extra entry tells whether a next page exists; with filters,
        // read more per call (a call costs by bytes read, rounded up to 4 KB).
        let per_call = if filters.is_empty() {
            query.page_size + 1
        } else {
            (query.page_size + 1).saturating_mul(4)
        };
        let per_call = i32::try_from(per_call.clamp(1, 1000)).unwrap_or(1000);
        let page_query = base.clone().scan_index_forward(false).limit(per_call);
        let count_query = base.select(Select::Count);
        let start_key = start.map(|token| {
            HashMap::from([
                (PK.to_owned(), s(keys::task_pk(&token.task))),
                (SK.to_owned(), s(keys::participant_sk(participant_id))),
                (GSI1_PK.to_owned(), s(partition.clone())),
                (GSI1_SK.to_owned(), s(token.index_sk())),
            ])
        });
        let page_size = query.page_size;
        let (page, total) = futures::join!(
            async {
                if page_size == 0 {
                    Ok((Vec::new(), false))
                } else {
                    self.index_page(page_query, start_key, page_size).await
                }
            },
            self.count_matches(count_query)
        );
        let ((entries, more), total_size) = (page?, total?);

        let mut order = Vec::with_capacity(entries.len());
        for entry in &entries {
            order.push(items::get_s(entry, attr::TASK)?.to_owned());
        }
        let next_page_token = match (more, entries.last()) {
            (true, Some(last)) => PageToken::from_index_sk(items::get_s(last, GSI1_SK)?)
                .ok_or_else(|| {
                    DynamoDbError::corrupt(items::describe_key(last), "unreadable GSI1SK")
                })?
                .encode(),
            _ => String::new(),
        };
        let keys: Vec<Item> = order
            .iter()
            .map(|id| key(keys::task_pk(id), keys::TASK_SK))
            .collect();
        let mut tasks: HashMap<String, StoredTask> = HashMap::new();
        for item in self.batch_get(keys, None).await? {
            let task = items::parse_task(&item)?;
            tasks.insert(task.record.id.clone(), task);
        }
        let tasks = order.iter().filter_map(|id| tasks.remove(id)).collect();
        Ok(TaskPage {
            tasks,
            next_page_token,
            total_size,
        })
    }
}

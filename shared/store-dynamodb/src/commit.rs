//! A commit: its changes turned into one `TransactWriteItems` (the items in the order that
//! makes the first failed condition the conflict the port names, each with its [`Guard`];
//! the version condition of an update), and sending it (index writes that do not fit:
//! `index.rs`). The transaction being built and the writes of one task: `plan.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};

use task_store::listing::ListingChange;
use task_store::{
    Change, Committed, Conflict, InboxKey, LeaseStore, NewTask, StoreError, StoreResult,
    TaskCounters, TaskUpdate,
    limits::{self, EncodedChange},
};

use crate::DynamoDbStore;
use crate::calls::COMMIT_ATTEMPTS;
use crate::error::{Cancellation, DynamoDbError, Guard, contended_task};
use crate::items::{self, Item, attr, key, n, s};
use crate::keys;
use crate::plan::{Builder, Plan};
use crate::schema::{PK, SK};
use crate::txn::{self, Condition, delete, put};

/// The chunk-0 sort key of a consumed inbox item.
pub fn inbox_head_sk(key: &InboxKey) -> StoreResult<String> {
    Ok(keys::inbox_sk(
        &keys::time(key.enqueued_at)?,
        0,
        &key.message_id,
    ))
}

/// Keys of the chunk-0 items of every inbox item the commit consumes: their `chunks`
/// attribute says which further items to delete.
pub fn consumed_inbox_heads(changes: &[Change]) -> StoreResult<Vec<Item>> {
    let mut heads = Vec::new();
    for change in changes {
        if let Change::Update(update) = change {
            for consumed in &update.consume_inbox {
                heads.push(key(
                    keys::task_pk(update.task_id()),
                    inbox_head_sk(consumed)?,
                ));
            }
        }
    }
    Ok(heads)
}

/// (PK, chunk-0 SK) → the number of chunks of each consumed inbox item still there.
pub type InboxChunks = HashMap<(String, String), usize>;

/// Builds the transaction of a commit. `inbox_chunks` comes from reading the consumed inbox
/// items' chunk-0 items ([`consumed_inbox_heads`]).
#[cfg(test)]
pub fn plan(table: &str, changes: &[Change], inbox_chunks: &InboxChunks) -> StoreResult<Plan> {
    plan_for(table, changes, inbox_chunks, None)
}

/// [`plan`], writing no index entries or counts for `unlisted` (the service's own agent,
/// which never lists).
pub fn plan_for(
    table: &str,
    changes: &[Change],
    inbox_chunks: &InboxChunks,
    unlisted: Option<&str>,
) -> StoreResult<Plan> {
    let docs = limits::encode_changes(changes)?;
    let mut plan = Plan::default();
    for (change, docs) in changes.iter().zip(docs) {
        match change {
            Change::Create(new) => plan_create(table, &mut plan, new, docs, unlisted)?,
            Change::Update(update) => {
                plan_update(table, &mut plan, update, docs, inbox_chunks, unlisted)?
            }
            Change::Enqueue { task_id, item } => {
                let json = docs.inbox.first().map(String::as_str).unwrap_or_default();
                let (writes, guards) = txn::enqueue_writes(table, task_id, item, json)?;
                plan.items.extend(writes);
                plan.guards.extend(guards);
                plan.committed.push(Committed {
                    task_id: task_id.clone(),
                    version: 0,
                    event_seqs: Vec::new(),
                });
            }
        }
    }
    Ok(plan)
}

fn plan_create(
    table: &str,
    plan: &mut Plan,
    new: &NewTask,
    docs: EncodedChange,
    unlisted: Option<&str>,
) -> StoreResult<()> {
    let task_id = new.record.id.as_str();
    let mut b = Builder::new(table, plan, task_id);
    let counters = TaskCounters {
        events: docs.events.len() as u64,
        history: docs.history.len() as u64,
        artifact_ids: Vec::new(),
        transcript: 0,
    };
    let item = items::task_item(&new.record, docs.task, 1, &counters)?;
    b.task_item(
        item,
        &Condition::not_exists(),
        Guard::NewTask(task_id.to_owned()),
    )?;
    // Queued messages record their ids like any other, in the same duplicate check.
    let inbox_ids = new.inbox.iter().map(|item| item.key.message_id.clone());
    let ids: Vec<String> = new.message_ids.iter().cloned().chain(inbox_ids).collect();
    b.message_ids(&ids)?;
    for (item, json) in new.inbox.iter().zip(&docs.inbox) {
        for chunk in items::inbox_chunks(&b.pk, item, json)? {
            let write = put(b.table, chunk, None)?;
            b.push_log(write, true);
        }
    }
    let event_seqs = b.events(0, &docs.events, true)?;
    b.history(0, &docs.history, true)?;
    b.audit(docs.audit, true)?;
    for participant in items::participants(&new.record) {
        if Some(participant) != unlisted {
            b.index_put(&new.record, participant, 1)?;
        }
    }
    let listing = ListingChange::between(None, &new.record);
    b.plan.counts.add(task_id, &listing, unlisted);
    if let Some(lease) = &new.lease {
        let write = put(
            b.table,
            items::lease_item(lease),
            Some(&Condition::not_exists()),
        )?;
        // A lease on the id of a task that does not exist yet: the id is taken.
        b.push(write, Guard::NewTask(task_id.to_owned()));
    }
    b.plan.committed.push(Committed {
        task_id: task_id.to_owned(),
        version: 1,
        event_seqs,
    });
    Ok(())
}

/// `version = :read`, plus the allowed states and the actor's role when asked.
pub fn version_condition(update: &TaskUpdate) -> StoreResult<Condition> {
    let mut c = Condition::new("#version = :read")
        .name("#version", attr::VERSION)
        .value(":read", n(update.base.version));
    if !update.allowed_states.is_empty() {
        let mut placeholders = Vec::with_capacity(update.allowed_states.len());
        for (i, state) in update.allowed_states.iter().enumerate() {
            let placeholder = format!(":state{i}");
            c = c.value(&placeholder, s(items::state_name(state)?));
            placeholders.push(placeholder);
        }
        c.expression
            .push_str(&format!(" AND #state IN ({})", placeholders.join(", ")));
        c = c.name("#state", attr::STATE);
    }
    if let Some((actor, role)) = &update.actor_role {
        c.expression.push_str(" AND #roles.#actor = :role");
        c = c
            .name("#roles", attr::ROLES)
            .name("#actor", actor)
            .value(":role", s(role.as_str()));
    }
    Ok(c)
}

fn plan_update(
    table: &str,
    plan: &mut Plan,
    update: &TaskUpdate,
    docs: EncodedChange,
    inbox_chunks: &InboxChunks,
    unlisted: Option<&str>,
) -> StoreResult<()> {
    let task_id = update.task_id();
    let old = &update.base.record;
    let record = update.record.as_ref().unwrap_or(old);
    if record.id != task_id {
        return Err(StoreError::Invalid(format!(
            "an update of task {task_id} carries task {}",
            record.id
        )));
    }
    let version = update.base.version + 1;
    let mut counters = update.base.counters.clone();
    let mut b = Builder::new(table, plan, task_id);

    // The counters are final only after the artifacts took their positions; build those
    // items first, then put the task item in front of them.
    let start = b.plan.items.len();
    let event_seqs = b.events(counters.events, &docs.events, false)?;
    b.history(counters.history, &docs.history, false)?;
    b.transcript(counters.transcript, &docs.transcript)?;
    b.artifacts(&mut counters, docs.artifacts, version)?;
    b.audit(docs.audit, false)?;
    let logs: Vec<_> = b
        .plan
        .items
        .drain(start..)
        .zip(b.plan.guards.drain(start..))
        .collect();
    counters.events += docs.events.len() as u64;
    counters.history += docs.history.len() as u64;
    counters.transcript += docs.transcript.len() as u64;

    let item = items::task_item(record, docs.task, version, &counters)?;
    b.task_item(
        item,
        &version_condition(update)?,
        Guard::TaskVersion(task_id.to_owned()),
    )?;
    b.message_ids(&update.message_ids)?;
    let mut consumed = HashSet::new();
    for inbox_key in &update.consume_inbox {
        let head = inbox_head_sk(inbox_key)?;
        if !consumed.insert(head.clone()) {
            // Consuming one item twice: the second finds it gone.
            return Err(Conflict::InboxItemGone(task_id.to_owned()).into());
        }
        let at = keys::time(inbox_key.enqueued_at)?;
        let count = inbox_chunks
            .get(&(b.pk.clone(), head.clone()))
            .copied()
            .unwrap_or(1);
        let item = delete(table, key(&b.pk, head), Some(&Condition::exists()))?;
        b.push(item, Guard::InboxItem(task_id.to_owned()));
        for chunk in 1..count {
            let item = delete(
                table,
                key(&b.pk, keys::inbox_sk(&at, chunk, &inbox_key.message_id)),
                None,
            )?;
            b.push_log(item, false);
        }
    }
    for (item, guard) in logs {
        b.push(item, guard);
    }

    if update.record.is_some() {
        let mut before = items::participants(old);
        let mut after = items::participants(record);
        if let Some(unlisted) = unlisted {
            before.remove(unlisted);
            after.remove(unlisted);
        }
        let moved = old.status.timestamp != record.status.timestamp
            || old.state() != record.state()
            || old.context_id != record.context_id;
        for participant in &after {
            if moved || !before.contains(participant) {
                b.index_put(record, participant, version)?;
            }
        }
        let gone: BTreeSet<&str> = before.difference(&after).copied().collect();
        for participant in gone {
            b.index_delete(participant, version);
        }
        let listing = ListingChange::between(Some(old), record);
        b.plan.counts.add(task_id, &listing, unlisted);
    }
    b.plan.committed.push(Committed {
        task_id: task_id.to_owned(),
        version,
        event_seqs,
    });
    Ok(())
}

impl DynamoDbStore {
    /// Sends a commit: its index writes that do not fit before and after, its transaction,
    /// and the leases it gives up after it.
    pub(crate) async fn commit_changes(&self, changes: Vec<Change>) -> StoreResult<Vec<Committed>> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let inbox_chunks = self.inbox_chunks(&changes).await?;
        let mut plan = plan_for(
            &self.table,
            &changes,
            &inbox_chunks,
            self.unlisted.as_deref(),
        )?;
        plan.fit(&self.table)?;
        if !plan.before.is_empty() {
            // Before anything of the commit is applied: a failure here fails it whole.
            self.write_index_before(std::mem::take(&mut plan.before))
                .await?;
        }
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
        if !plan.after.is_empty() {
            self.write_index_after(std::mem::take(&mut plan.after))
                .await;
        }
        if !plan.counts_after.is_empty() {
            self.write_counts_after(std::mem::take(&mut plan.counts_after))
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

    /// How many chunks each inbox item the commit consumes has (read from their chunk 0).
    async fn inbox_chunks(&self, changes: &[Change]) -> StoreResult<InboxChunks> {
        let heads = consumed_inbox_heads(changes)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::{TaskState, TaskStatus};
    use chrono::{TimeZone, Utc};
    use task_core::extension::{Participant, ParticipantKind, Role, TaskExtension};
    use task_store::{StoredTask, TaskRecord};

    use crate::index::IndexWrite;

    /// `record` as stored at `version`, with no logs yet.
    fn stored(record: TaskRecord, version: u64) -> StoredTask {
        StoredTask {
            record,
            version,
            counters: TaskCounters::default(),
        }
    }

    fn record(id: &str, participants: &[&str]) -> TaskRecord {
        let mut extension = TaskExtension::new("t", "d");
        extension.participants = participants
            .iter()
            .map(|p| Participant::new(*p, ParticipantKind::Human, Role::Watcher))
            .collect();
        TaskRecord {
            id: id.into(),
            context_id: "ctx".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: Some(Utc.timestamp_opt(1_790_000_000, 0).unwrap()),
            },
            sub_state: None,
            extension,
            agent: Default::default(),
        }
    }

    fn sort_keys(plan: &Plan) -> Vec<String> {
        plan.items
            .iter()
            .map(|i| {
                let item = i
                    .put
                    .as_ref()
                    .map(|p| p.item.clone())
                    .or_else(|| i.delete.as_ref().map(|d| d.key.clone()))
                    .or_else(|| i.update.as_ref().map(|u| u.key.clone()));
                item.and_then(|m| m.get("SK").and_then(|v| v.as_s().ok()).cloned())
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn an_update_orders_task_item_message_ids_inbox_then_logs() {
        let base = stored(record("t", &["a", "b"]), 3);
        let mut update = TaskUpdate::new(base.clone());
        let mut moved = base.record.clone();
        moved.status.state = TaskState::InputRequired;
        moved.extension.participants.retain(|p| p.id != "b");
        update.record = Some(moved);
        update.message_ids = vec!["m-9".into()];
        update.history = vec![a2a::Message::new(
            a2a::Role::User,
            vec![a2a::Part::text("hi")],
        )];
        let at = Utc.timestamp_opt(1_790_000_001, 0).unwrap();
        update.consume_inbox = vec![InboxKey {
            enqueued_at: at,
            message_id: "m-5".into(),
        }];
        let head = inbox_head_sk(&update.consume_inbox[0]).unwrap();
        let chunks = HashMap::from([(("TASK#t".to_owned(), head.clone()), 2)]);
        let mut plan = plan("tasks", &[Change::Update(Box::new(update))], &chunks).unwrap();
        plan.fit("tasks").unwrap();
        let at = keys::time(at).unwrap();
        assert_eq!(
            sort_keys(&plan),
            vec![
                "TASK".to_owned(),
                "MID#m-9".into(),
                head,
                keys::inbox_sk(&at, 1, "m-5"),
                keys::history_sk(0, 0),
                // a's count moves to INPUT_REQUIRED, b's drops: before the index writes.
                keys::count_sk(crate::counts::shard("t")),
                keys::count_sk(crate::counts::shard("t")),
                "PART#a".into(),
                "PART#b".into(),
            ]
        );
        assert_eq!(plan.guards[0], Guard::TaskVersion("t".into()));
        assert_eq!(plan.guards[2], Guard::InboxItem("t".into()));
        assert!(
            plan.items[8].delete.is_some(),
            "b left: its entry is deleted"
        );
        assert_eq!(
            plan.committed,
            vec![Committed {
                task_id: "t".into(),
                version: 4,
                event_seqs: vec![]
            }]
        );
    }

    #[test]
    fn conditions_name_the_version_states_and_role() {
        let base = stored(record("t", &["ops"]), 7);
        let mut update = TaskUpdate::new(base);
        update.allowed_states = vec![TaskState::Submitted, TaskState::Working];
        update.actor_role = Some(("ops#1".into(), Role::Admin));
        let c = version_condition(&update).unwrap();
        assert_eq!(
            c.expression,
            "#version = :read AND #state IN (:state0, :state1) AND #roles.#actor = :role"
        );
        assert_eq!(c.names["#actor"], "ops#1");
        assert_eq!(c.values[":state1"], s("TASK_STATE_WORKING"));
        assert_eq!(c.values[":role"], s("admin"));
        assert_eq!(c.values[":read"], n(7));
    }

    #[test]
    fn index_writes_move_out_of_a_transaction_that_would_be_too_large() {
        let participants: Vec<String> = (0..120).map(|i| format!("p{i}")).collect();
        let refs: Vec<&str> = participants.iter().map(String::as_str).collect();
        let new = NewTask::new(record("big", &refs));
        let mut plan = plan("tasks", &[Change::Create(Box::new(new))], &HashMap::new()).unwrap();
        plan.fit("tasks").unwrap();
        let placed = |plan: &Plan| {
            (
                plan.items.len(),
                plan.index.len(),
                plan.before.len(),
                plan.after.len(),
            )
        };
        assert_eq!(
            placed(&plan),
            (100, 0, 120, 0),
            "99 counts fit, the entries go before"
        );
        assert_eq!(plan.counts_after.len(), 21, "the other counts go after");
        assert!(
            plan.before
                .iter()
                .all(|w| matches!(w, IndexWrite::Put { version: 1, .. }))
        );

        let mut few = NewTask::new(record("small", &["a", "b", "c"]));
        few.message_ids = vec!["m".into()];
        let mut plan = plan_fn(vec![Change::Create(Box::new(few))]);
        plan.fit("tasks").unwrap();
        assert_eq!(placed(&plan), (8, 0, 0, 0), "task, id, 3 counts, 3 entries");

        // 98 history messages and the task item leave room for one of the three counts
        // (a's, b's, c's) and none of the three index writes: the two puts go before, the
        // delete and two counts after.
        let base = stored(record("t", &["a", "b"]), 4);
        let mut moved = base.record.clone();
        moved.status.state = TaskState::Completed;
        moved.extension.participants.retain(|p| p.id != "b");
        moved
            .extension
            .participants
            .push(task_core::extension::Participant::new(
                "c",
                task_core::extension::ParticipantKind::Human,
                task_core::extension::Role::Watcher,
            ));
        let mut full = TaskUpdate::new(base.clone());
        full.record = Some(moved);
        full.history = (0..98)
            .map(|i| a2a::Message::new(a2a::Role::User, vec![a2a::Part::text(format!("{i}"))]))
            .collect();
        let mut plan = plan_fn(vec![Change::Update(Box::new(full))]);
        plan.fit("tasks").unwrap();
        assert_eq!(placed(&plan), (100, 0, 2, 1));
        assert!(plan.items[99].update.is_some(), "a count rides inside");
        assert_eq!(plan.counts_after.len(), 2);
        assert!(matches!(plan.before[0], IndexWrite::Put { version: 5, .. }));

        let base = stored(record("t", &["a"]), 1);
        let mut huge = TaskUpdate::new(base);
        huge.history = (0..120)
            .map(|i| a2a::Message::new(a2a::Role::User, vec![a2a::Part::text(format!("{i}"))]))
            .collect();
        let mut plan = plan_fn(vec![Change::Update(Box::new(huge))]);
        assert!(matches!(plan.fit("tasks"), Err(StoreError::TooLarge(_))));
    }

    fn plan_fn(changes: Vec<Change>) -> Plan {
        plan("tasks", &changes, &HashMap::new()).unwrap()
    }

    #[test]
    fn repeated_ids_in_one_write_conflict_like_the_embedded_store() {
        let base = stored(record("t", &["a"]), 1);
        let mut twice = TaskUpdate::new(base.clone());
        twice.message_ids = vec!["m".into(), "m".into()];
        let err = plan("tasks", &[Change::Update(Box::new(twice))], &HashMap::new()).unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(Conflict::DuplicateMessage { .. })),
            "{err:?}"
        );
        let both = vec![
            Change::Update(Box::new(TaskUpdate::new(base.clone()))),
            Change::Update(Box::new(TaskUpdate::new(base))),
        ];
        assert!(matches!(
            plan("tasks", &both, &HashMap::new()),
            Err(StoreError::Invalid(_))
        ));
    }
}

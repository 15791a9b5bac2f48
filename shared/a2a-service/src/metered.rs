//! A commit of task changes, counted: the tasks it created (by lifecycle) and the conflict
//! that refused it (by name), for the metrics both hosts read out.

use task_core::extension::Lifecycle;
use task_store::{Change, Conflict, PendingCommit, Store, StoreError, StoreResult};

/// Commits `changes` through `store`, recording what came of it.
pub(crate) async fn commit(store: &dyn Store, changes: Vec<Change>) -> Result<(), StoreError> {
    let created = created(&changes);
    let outcome = store.commit(changes).await;
    record(&outcome, created);
    outcome.map(|_| ())
}

/// Submits `changes` through `store` (see `TaskStore::submit`), recording what came of it
/// once the commit has.
pub(crate) async fn submit(store: &dyn Store, changes: Vec<Change>) -> StoreResult<PendingCommit> {
    let created = created(&changes);
    let pending = store.submit(changes).await?;
    Ok(Box::pin(async move {
        let outcome = pending.await;
        record(&outcome, created);
        outcome
    }))
}

/// The lifecycles of the tasks `changes` create (none looked at when nothing records).
fn created(changes: &[Change]) -> Vec<&'static str> {
    if !telemetry::metrics::enabled() {
        return Vec::new();
    }
    changes
        .iter()
        .filter_map(|change| match change {
            Change::Create(new) => Some(lifecycle_name(new.record.extension.effective_lifecycle())),
            _ => None,
        })
        .collect()
}

fn record<T>(outcome: &StoreResult<T>, created: Vec<&'static str>) {
    match outcome {
        Ok(_) => {
            for lifecycle in created {
                telemetry::metrics::task_created(lifecycle);
            }
        }
        Err(StoreError::Conflict(conflict)) => {
            telemetry::metrics::store_conflict(conflict_name(conflict));
        }
        Err(_) => {}
    }
}

fn lifecycle_name(lifecycle: Lifecycle) -> &'static str {
    match lifecycle {
        Lifecycle::Conversation => "conversation",
        Lifecycle::Delegated => "delegated",
    }
}

/// The conflict's label: its variant in snake case (never its ids).
pub(crate) fn conflict_name(conflict: &Conflict) -> &'static str {
    match conflict {
        Conflict::TaskExists(_) => "task_exists",
        Conflict::TaskChanged(_) => "task_changed",
        Conflict::DuplicateMessage { .. } => "duplicate_message",
        Conflict::InboxItemGone(_) => "inbox_item_gone",
        Conflict::TaskTerminal(_) => "task_terminal",
        Conflict::LeaseHeld { .. } => "lease_held",
        Conflict::LeaseLost(_) => "lease_lost",
        Conflict::PushConfigTaken { .. } => "push_config_taken",
        Conflict::TooManyPushConfigs { .. } => "too_many_push_configs",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use a2a::TaskState;
    use task_core::extension::Role;
    use task_store::NewTask;
    use task_store::contract::{at, record};
    use telemetry::metrics::{self, Metric, Mode, Value};

    fn counted(metric: Metric, label: &str) -> f64 {
        metrics::installed()
            .expect("installed")
            .snapshot()
            .iter()
            .find(|s| s.metric == metric && s.labels[0] == label)
            .map(|s| match s.value {
                Value::Counter(n) => n,
                _ => 0.0,
            })
            .unwrap_or(0.0)
    }

    fn create(id: &str) -> Vec<Change> {
        let rec = record(
            id,
            "ctx",
            &[("alice", Role::Admin)],
            TaskState::Working,
            at(0),
        );
        vec![Change::Create(Box::new(NewTask::new(rec)))]
    }

    #[tokio::test]
    async fn a_commit_counts_the_tasks_it_created_and_the_conflict_that_refused_it() {
        metrics::install(Mode::Prometheus);
        let store = store_memory::MemoryStore::new();
        let (created, refused) = (
            counted(Metric::TasksCreated, "conversation"),
            counted(Metric::StoreConflicts, "task_exists"),
        );
        commit(&store, create("metered-1")).await.unwrap();
        assert_eq!(counted(Metric::TasksCreated, "conversation"), created + 1.0);
        let again = commit(&store, create("metered-1")).await;
        assert!(matches!(
            again,
            Err(StoreError::Conflict(Conflict::TaskExists(_)))
        ));
        assert_eq!(
            counted(Metric::StoreConflicts, "task_exists"),
            refused + 1.0
        );
        assert_eq!(
            counted(Metric::TasksCreated, "conversation"),
            created + 1.0,
            "a refused creation is not counted"
        );
    }
}

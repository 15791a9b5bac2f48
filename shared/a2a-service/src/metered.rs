//! A commit of task changes, counted: the tasks it created (by lifecycle) and the conflict
//! that refused it (by name), for the metrics both hosts read out.

use task_core::extension::Lifecycle;
use task_store::{Change, Conflict, Store, StoreError};

/// Commits `changes` through `store`, recording what came of it.
pub(crate) async fn commit(store: &dyn Store, changes: Vec<Change>) -> Result<(), StoreError> {
    let lifecycles: Vec<&'static str> = changes
        .iter()
        .filter_map(|change| match change {
            Change::Create(new) => Some(lifecycle_name(new.record.extension.effective_lifecycle())),
            _ => None,
        })
        .collect();
    match store.commit(changes).await {
        Ok(_) => {
            for lifecycle in lifecycles {
                telemetry::metrics::task_created(lifecycle);
            }
            Ok(())
        }
        Err(err) => {
            if let StoreError::Conflict(conflict) = &err {
                telemetry::metrics::store_conflict(conflict_name(conflict));
            }
            Err(err)
        }
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

//! The contract suite: every operation and every conflict path of the store ports, and the
//! concurrency guarantees, as async functions over any [`Store`](crate::Store). Each adapter's
//! tests run all of them through [`contract_suite!`](crate::contract_suite), each test on a
//! fresh store (a new table, a new file).
//!
//! The tests live by concern: `tasks` (create, get, submit order), `conditions` (existence,
//! version, states, role, message ids, atomic multi-task commits), `reads` (events, history,
//! artifacts, transcript, audit), `sizes`, `inbox`, `leases`, `list`, `counts` (ListTasks'
//! totals under every filter), `push` (push configs), `retention` (the purge)
//! and `concurrency`; `fixtures` holds what they share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod concurrency;
mod conditions;
mod counts;
mod fixtures;
mod inbox;
mod leases;
mod list;
pub mod list_bench;
mod push;
mod reads;
mod retention;
mod sizes;
mod tasks;

pub use concurrency::*;
pub use conditions::*;
pub use counts::*;
pub use fixtures::{
    FreshStore, TEAM, at, create_task_of_config_without_owner, record, snapshot, status_event,
    user_message, version_of,
};
pub use inbox::*;
pub use leases::*;
pub use list::*;
pub use push::*;
pub use reads::*;
pub use retention::*;
pub use sizes::*;
pub use tasks::*;

/// Runs every contract test against stores made by `$make` (an async expression giving an
/// `Arc<dyn Store>`, or one with a guard: see [`FreshStore`]), one `#[tokio::test]` each.
#[macro_export]
macro_rules! contract_suite {
    ($make:expr) => {
        $crate::contract_suite!(@tests $make;
            create_then_get, get_newer_reads_only_a_changed_task, a_commit_submitted_after_another_is_applied_after_it, create_conflicts_when_the_task_exists, update_needs_the_version_it_read,
            update_checks_the_allowed_states, update_checks_the_actors_role, events_are_gapless_and_readable_from_a_seq,
            message_ids_are_deduplicated, history_reads_all_or_the_newest, documents_over_the_cap_are_refused,
            artifacts_keep_their_first_order, an_update_applied_is_what_the_store_reads, a_multi_task_commit_is_atomic, a_task_is_created_with_its_first_message_queued, a_task_is_created_with_its_lease, an_update_gives_up_the_runners_lease, the_transcript_is_appended_and_read_from_a_number, a_commit_can_queue_a_message_for_another_task, list_is_scoped_ordered_filtered_and_paged,
            list_follows_participant_and_status_changes, list_counts_follow_creations_states_and_participants,
            filtered_pages_skip_what_does_not_match, push_configs, leases, inbox, audit_log,
            a_long_conversation_is_stored_intact, concurrent_updates_lose_nothing, one_winner_per_conflicting_pair,
            concurrent_role_changes_have_one_winner, concurrent_lease_acquisition_has_one_winner,
            push_configs_belong_to_their_owner, push_configs_are_capped,
            concurrent_push_config_writes_keep_the_rules,
            the_purge_removes_expired_terminal_tasks_and_keeps_live_ones);
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let (store, _guard) = $crate::contract::FreshStore::split($make.await);
                $crate::contract::$name(store).await;
            }
        )*
    };
}

//! Writers racing on one task: exactly one wins, the others fail cleanly, nothing is lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a::{Part, SendMessageRequest, SendMessageResponse, Task, TaskState};
use a2a_service::{A2aApi, Agent, AgentReply, EchoAgent, ServiceConfig, ServiceError, TurnContext};
use async_trait::async_trait;
use common::{Fixture, as_participant, cancel_request, ctx, from, send, send_task};
use task_store::StoreError;

fn service() -> Fixture {
    service_with(Arc::new(EchoAgent), |_| {})
}

/// A service polling every 5 ms, with `agent` and the config as `configure` leaves it.
fn service_with(agent: Arc<dyn Agent>, configure: impl FnOnce(&mut ServiceConfig)) -> Fixture {
    common::fixture_with(agent, |config| {
        config.poll_interval = Duration::from_millis(5);
        configure(config);
    })
}

/// Alice's message `id` (its text says which), on the task if one is given.
fn message(id: &str, task_id: Option<&str>) -> SendMessageRequest {
    let mut m = from("alice", vec![Part::text(format!("text of {id}"))]);
    m.message_id = id.into();
    m.task_id = task_id.map(str::to_owned);
    send(m)
}

/// A service with the task alice's first message opened.
async fn alices_task() -> (Fixture, Task) {
    let f = service();
    let task = send_task(&f, message("m-1", None)).await;
    (f, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_many_concurrent_cancels_exactly_one_wins() {
    let (Fixture { service, store }, task) = alices_task().await;
    let alice = as_participant("alice");
    let cancels = futures::future::join_all((0..16).map(|_| {
        let service = service.clone();
        let alice = alice.clone();
        let id = task.id.clone();
        tokio::spawn(async move { service.cancel_task(&alice, cancel_request(&id)).await })
    }))
    .await;
    let (won, lost): (Vec<_>, Vec<_>) = cancels
        .into_iter()
        .map(|r| r.expect("task"))
        .partition(Result::is_ok);
    assert_eq!(won.len(), 1, "one cancel wins");
    for loss in lost {
        assert!(
            matches!(loss, Err(ServiceError::TaskNotCancelable(_))),
            "{loss:?}"
        );
    }
    let events = store.events(&task.id, 0, 100).await.expect("events");
    let canceled = events
        .iter()
        .filter(|e| matches!(&e.event, a2a::StreamResponse::StatusUpdate(s) if s.status.state == TaskState::Canceled))
        .count();
    assert_eq!(canceled, 1, "one CANCELED event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_racing_a_running_turn_ends_the_task_and_loses_no_message() {
    let (Fixture { service, store }, task) = alices_task().await;
    let alice = as_participant("alice");
    // Follow-ups and a cancel at once.
    let sends = (2..8).map(|i| {
        let service = service.clone();
        let id = task.id.clone();
        let message_id = format!("m-{i}");
        tokio::spawn(async move {
            let result = service
                .send_message(&ctx(), message(&message_id, Some(&id)))
                .await
                .map(|_| ());
            (message_id, result)
        })
    });
    let cancel = {
        let service = service.clone();
        let id = task.id.clone();
        tokio::spawn(async move {
            service
                .cancel_task(&alice, cancel_request(&id))
                .await
                .map(|_| ())
        })
    };
    let mut accepted = Vec::new();
    for send in futures::future::join_all(sends).await {
        let (message_id, result) = send.expect("task");
        // A message either got in before the cancel or met the terminal task and was told so.
        match result {
            Ok(()) => accepted.push(message_id),
            Err(ServiceError::UnsupportedOperation(_)) => {}
            Err(other) => panic!("{message_id}: {other:?}"),
        }
    }
    cancel.await.expect("task").expect("the only cancel wins");
    assert_eq!(
        store
            .get(&task.id)
            .await
            .expect("get")
            .expect("exists")
            .record
            .status
            .state,
        TaskState::Canceled
    );
    // Every accepted message ends up answered (history) or audited as arriving too late, once
    // the runner has drained the inbox: none vanishes.
    assert!(
        common::inbox_emptied(&*store, &task.id, 500).await,
        "the runner drains the inbox"
    );
    let audit = store.audit(&task.id).await.expect("audit");
    let history = store.history(&task.id, None).await.expect("history");
    for id in &accepted {
        let answered = history.iter().any(|m| &m.message_id == id);
        let audited = audit.iter().any(|e| &e.message_id == id);
        assert!(answered || audited, "{id} was accepted and then lost");
    }
}

/// Answers like echo, but only after `pause`, counting its turns.
struct Slow {
    pause: Duration,
    turns: AtomicUsize,
}

#[async_trait]
impl Agent for Slow {
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        self.turns.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.pause).await;
        Ok(AgentReply::text(turn.input()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_longer_than_the_lease_keeps_it_and_runs_once() {
    let agent = Arc::new(Slow {
        pause: Duration::from_millis(1500),
        turns: AtomicUsize::new(0),
    });
    let Fixture { service, store } = service_with(agent.clone(), |config| {
        config.lease_ttl = Duration::from_millis(400);
    });
    let send = {
        let service = service.clone();
        tokio::spawn(async move { service.send_message(&ctx(), message("m-1", None)).await })
    };
    // A sweeper running all along the turn, nearly four lease lifetimes: the live runner
    // renews its lease, so there is nothing to take over.
    while !send.is_finished() {
        let taken = service.runner().sweep().await.expect("sweep");
        assert!(
            taken.is_empty(),
            "a live run's lease was taken over: {taken:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let SendMessageResponse::Task(task) = send.await.expect("task").expect("send") else {
        panic!("a task")
    };
    assert_eq!(task.status.state, TaskState::InputRequired);
    assert_eq!(
        agent.turns.load(Ordering::SeqCst),
        1,
        "one turn, by one runner"
    );
    service.runner().settle().await;
    assert!(
        store
            .expired_leases(chrono::Utc::now() + chrono::Duration::days(1), 10)
            .await
            .expect("leases")
            .is_empty(),
        "the run gave its lease back"
    );
}

/// A run gives its lease up in the very write that records its last outcome: by the time a
/// blocking send is answered, the task is free for the next runner (no release still to come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_last_outcome_gives_its_lease_up() {
    let f = service();
    for n in 0..30 {
        let task = send_task(&f, message(&format!("m-{n}"), None)).await;
        assert_eq!(task.status.state, TaskState::InputRequired);
        f.store
            .acquire(
                &task.id,
                "another runner",
                chrono::Utc::now(),
                chrono::Duration::seconds(30),
            )
            .await
            .unwrap_or_else(|err| panic!("send {n}: the lease is still held: {err}"));
    }
}

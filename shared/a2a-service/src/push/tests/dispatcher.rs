//! The dispatcher over the memory store: every event in order to each config, from where
//! the config was registered, with failing or stuck webhooks delaying no other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a::{TaskPushNotificationConfig, TaskState};
use task_core::extension::Role;
use task_store::contract::{at, record, status_event};
use task_store::{Change, NewTask, Store, TaskRecord, TaskUpdate};

use super::fixtures::{
    Receiver, TEAM, config, event_id, local_options, ok, sender, status, then_ok,
};
use crate::push::{PushDispatcher, PushOptions, PushSender};

/// A memory store the dispatcher reads, with the writes the tests make to it.
struct Fixture {
    store: Arc<dyn Store>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            store: Arc::new(store_memory::MemoryStore::new()),
        }
    }

    /// A store holding the task with one event, `<task>:e0`.
    async fn with_task(task: &str) -> Self {
        let fx = Self::new();
        fx.create_task(task).await;
        fx
    }

    /// Creates the task with one event, `<task>:e0`.
    async fn create_task(&self, task: &str) {
        self.create_task_of(task, TEAM).await;
    }

    /// Creates the task of `team` with one event, `<task>:e0`.
    async fn create_task_of(&self, task: &str, team: &[(&str, Role)]) {
        let rec = record(task, "ctx", team, TaskState::Working, at(0));
        let mut new = NewTask::new(rec.clone());
        new.events.push(status_event(&rec, "e0"));
        self.store
            .commit(vec![Change::Create(Box::new(new))])
            .await
            .unwrap();
    }

    /// Appends one event, `<task>:<text>`.
    async fn append(&self, task: &str, text: &str, state: TaskState) {
        self.update(task, |rec| rec.status.state = state, &[text])
            .await;
    }

    /// Changes the task's record as `edit` says, with one event `<task>:<text>` for each
    /// of `texts`, in one commit.
    async fn update(&self, task: &str, edit: impl FnOnce(&mut TaskRecord), texts: &[&str]) {
        let base = self.store.get(task).await.unwrap().unwrap();
        let mut rec = base.record.clone();
        edit(&mut rec);
        let mut update = TaskUpdate::new(base);
        for text in texts {
            update.events.push(status_event(&rec, text));
        }
        update.record = Some(rec);
        self.store
            .commit(vec![Change::Update(Box::new(update))])
            .await
            .unwrap();
    }

    /// Stores `config` as `owner`'s, without telling any dispatcher.
    async fn put_config(&self, owner: &str, config: TaskPushNotificationConfig) {
        self.store.put_push_config(owner, config).await.unwrap();
    }

    /// Stores alice's `configs` (task, config id, URL), and a dispatcher that sends each
    /// one its task's events from the first, as for configs given with the creating message.
    async fn dispatch_from_start(
        &self,
        configs: &[(&str, &str, &str)],
        options: PushOptions,
    ) -> PushDispatcher {
        for (task, id, url) in configs {
            self.put_config("alice", config(task, id, url)).await;
        }
        let push = self.dispatcher(options);
        for (task, id, _) in configs {
            push.register(task, id, 0);
        }
        push
    }

    fn dispatcher(&self, options: PushOptions) -> PushDispatcher {
        PushDispatcher::new(Arc::clone(&self.store), Arc::new(sender(options))).unwrap()
    }
}

/// A store holding task `t-1` with its event `e0`, and a webhook that takes everything.
async fn task_and_webhook() -> (Fixture, Receiver) {
    let fx = Fixture::with_task("t-1").await;
    (fx, Receiver::always(ok()).await)
}

fn ids(task: &str, texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| format!("{task}:{t}")).collect()
}

/// Shuts `push` down within `bound` with no delivery left behind, checks that each receiver
/// got exactly the events listed with it, and stops it.
async fn shut_down_having_delivered(
    push: &PushDispatcher,
    bound: Duration,
    delivered: Vec<(Receiver, Vec<String>)>,
) {
    assert_eq!(push.shutdown(bound).await, 0);
    for (receiver, expected) in delivered {
        assert_eq!(receiver.delivered(), expected);
        receiver.stop().await;
    }
}

/// Waits until each receiver has had as many events delivered as are listed with it, then
/// shuts `push` down within 5 s as [`shut_down_having_delivered`] does.
async fn delivered_then_shut_down(push: &PushDispatcher, delivered: Vec<(Receiver, Vec<String>)>) {
    for (receiver, expected) in &delivered {
        let what = format!("{} events at {}", expected.len(), receiver.url);
        eventually(&what, || receiver.delivered().len() >= expected.len()).await;
    }
    shut_down_having_delivered(push, Duration::from_secs(5), delivered).await;
}

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn dispatch_options() -> PushOptions {
    PushOptions {
        request_timeout: Duration::from_secs(5),
        ..local_options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_event_in_order_to_each_config_and_a_failing_webhook_delays_no_other() {
    let fx = Fixture::with_task("t-1").await;
    let good = Receiver::always(ok()).await;
    // Slow and failing for its first three calls: about 1.5 s before its first success.
    let flaky = Receiver::start(then_ok(3, status(500).after(Duration::from_millis(500)))).await;
    // Configs given with the creating message: from the first event.
    let configs = [
        ("t-1", "good", good.url.as_str()),
        ("t-1", "flaky", &flaky.url),
    ];
    let push = fx.dispatch_from_start(&configs, dispatch_options()).await;
    push.notify("t-1");
    for i in 1..=5 {
        let state = if i == 5 {
            TaskState::Completed
        } else {
            TaskState::Working
        };
        fx.append("t-1", &format!("e{i}"), state).await;
        push.notify("t-1");
    }

    let all = ids("t-1", &["e0", "e1", "e2", "e3", "e4", "e5"]);
    eventually("the good webhook", || good.delivered().len() >= all.len()).await;
    eventually("the flaky webhook", || flaky.delivered().len() >= all.len()).await;
    assert_eq!(good.delivered(), all);
    assert_eq!(flaky.delivered(), all);
    assert_eq!(flaky.calls().len(), all.len() + 3);

    // Everything reached the good webhook before the flaky one took anything.
    let good_done = good.calls().last().unwrap().at;
    let flaky_first_ok = flaky.calls().iter().find(|c| c.status == 200).unwrap().at;
    assert!(
        good_done < flaky_first_ok,
        "the failing webhook delayed the other"
    );

    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    good.stop().await;
    flaky.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn register_sets_where_a_config_starts() {
    let fx = Fixture::with_task("t-1").await;
    let late = Receiver::always(ok()).await;
    let inline = Receiver::always(ok()).await;
    fx.append("t-1", "e1", TaskState::Working).await;
    fx.append("t-1", "e2", TaskState::InputRequired).await;
    let push = fx.dispatcher(dispatch_options());

    // Created when the task had 3 events: from seq 3 on.
    fx.put_config("alice", config("t-1", "late", &late.url))
        .await;
    push.register("t-1", "late", 3);
    fx.put_config("alice", config("t-1", "inline", &inline.url))
        .await;
    push.register("t-1", "inline", 0);
    fx.append("t-1", "e3", TaskState::Working).await;
    push.notify("t-1");
    fx.append("t-1", "e4", TaskState::Completed).await;
    push.notify("t-1");

    delivered_then_shut_down(
        &push,
        vec![
            (late, ids("t-1", &["e3", "e4"])),
            (inline, ids("t-1", &["e0", "e1", "e2", "e3", "e4"])),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unregistered_config_starts_at_the_newest_event() {
    let (fx, receiver) = task_and_webhook().await;
    fx.append("t-1", "e1", TaskState::Working).await;
    // As after a restart: the config is in the store, the dispatcher never heard of it.
    fx.put_config("alice", config("t-1", "c", &receiver.url))
        .await;
    let push = fx.dispatcher(dispatch_options());
    fx.append("t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    eventually("e2", || !receiver.delivered().is_empty()).await;
    fx.append("t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");
    delivered_then_shut_down(&push, vec![(receiver, ids("t-1", &["e2", "e3"]))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_given_up_on_is_skipped_and_the_next_ones_go() {
    let fx = Fixture::with_task("t-1").await;
    // Refuses e1 for good (400), and e2 until the retry budget is spent.
    let receiver = Receiver::start(|_, body| match event_id(body).as_str() {
        "t-1:e1" => status(400),
        "t-1:e2" => status(503),
        _ => ok(),
    })
    .await;
    let options = PushOptions {
        attempts: 3,
        ..dispatch_options()
    };
    let push = fx
        .dispatch_from_start(&[("t-1", "c", &receiver.url)], options)
        .await;
    for i in 1..=3 {
        fx.append("t-1", &format!("e{i}"), TaskState::Working).await;
    }
    push.notify("t-1");
    eventually("e3", || receiver.delivered().len() >= 2).await;
    assert_eq!(receiver.delivered(), ids("t-1", &["e0", "e3"]));
    let attempts: Vec<String> = receiver.calls().iter().map(|c| event_id(&c.body)).collect();
    assert_eq!(attempts, ids("t-1", &["e0", "e1", "e2", "e2", "e2", "e3"]));
    assert_eq!(push.shutdown(Duration::from_secs(5)).await, 0);
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_are_independent_and_deleted_configs_stop() {
    let fx = Fixture::with_task("t-1").await;
    let stuck = Receiver::always(ok().after(Duration::from_secs(30))).await;
    let receiver = Receiver::always(ok()).await;
    fx.create_task("t-2").await;
    let configs = [
        ("t-1", "c", stuck.url.as_str()),
        ("t-2", "c", &receiver.url),
    ];
    let push = fx.dispatch_from_start(&configs, dispatch_options()).await;
    push.notify("t-1");
    push.notify("t-2");
    eventually("t-2's first event", || receiver.delivered().len() == 1).await;

    fx.store
        .delete_push_config("t-2", "c", task_store::DeleteScope::Owner("alice"))
        .await
        .unwrap();
    fx.append("t-2", "e1", TaskState::Working).await;
    push.notify("t-2");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.delivered(), ids("t-2", &["e0"]));

    // The stuck delivery to t-1 is abandoned at the shutdown bound.
    let started = Instant::now();
    assert_eq!(push.shutdown(Duration::from_millis(300)).await, 1);
    assert!(started.elapsed() < Duration::from_secs(2));
    // Shut down: notifications are ignored.
    fx.append("t-2", "e2", TaskState::Working).await;
    push.notify("t-2");
    stuck.stop().await;
    receiver.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_lets_pending_deliveries_finish() {
    let fx = Fixture::with_task("t-1").await;
    let receiver = Receiver::always(ok().after(Duration::from_millis(50))).await;
    for i in 1..=4 {
        fx.append("t-1", &format!("e{i}"), TaskState::Working).await;
    }
    let push = fx
        .dispatch_from_start(&[("t-1", "c", &receiver.url)], dispatch_options())
        .await;
    push.notify("t-1");
    shut_down_having_delivered(
        &push,
        Duration::from_secs(10),
        vec![(receiver, ids("t-1", &["e0", "e1", "e2", "e3", "e4"]))],
    )
    .await;
}

/// The service registers a config before storing it: a scan that runs in between (another
/// event of the task) must neither drop the registration nor start the config anywhere
/// else, so it gets every event from where it was registered, once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_config_registered_before_it_is_stored_starts_where_registered() {
    let (fx, receiver) = task_and_webhook().await;
    fx.append("t-1", "e1", TaskState::Working).await;
    let push = fx.dispatcher(dispatch_options());
    push.register("t-1", "c", 0);
    // A scan lists no config yet, and must keep the registration.
    fx.append("t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    eventually("the scan to settle", || push.scanning("t-1") == Some(false)).await;
    fx.put_config("alice", config("t-1", "c", &receiver.url))
        .await;
    push.notify("t-1");
    eventually("three events", || receiver.delivered().len() >= 3).await;
    fx.append("t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");
    delivered_then_shut_down(
        &push,
        vec![(receiver, ids("t-1", &["e0", "e1", "e2", "e3"]))],
    )
    .await;
}

#[test]
fn the_dispatcher_needs_a_runtime() {
    let store: Arc<dyn Store> = Arc::new(store_memory::MemoryStore::new());
    // The sender builds without a runtime; the dispatcher refuses to.
    let sender = Arc::new(PushSender::new(PushOptions::default()).unwrap());
    assert!(PushDispatcher::new(store, sender).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_events_of_one_commit_all_go_even_the_terminal_one() {
    let (fx, receiver) = task_and_webhook().await;
    let push = fx
        .dispatch_from_start(&[("t-1", "c", &receiver.url)], dispatch_options())
        .await;
    push.notify("t-1");
    eventually("e0", || receiver.delivered().len() == 1).await;

    fx.update(
        "t-1",
        |rec| rec.status.state = TaskState::Completed,
        &["e1", "e2", "e3"],
    )
    .await;
    push.notify("t-1");

    delivered_then_shut_down(
        &push,
        vec![(receiver, ids("t-1", &["e0", "e1", "e2", "e3"]))],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_without_configs_is_not_listed_once_its_configs_are() {
    let (fx, receiver) = task_and_webhook().await;
    let push = fx.dispatcher(dispatch_options());
    // The embedded store knows the task has no configs: no listing starts.
    fx.append("t-1", "e1", TaskState::Working).await;
    push.notify("t-1");
    assert_eq!(push.scanning("t-1"), None);
    // A config stored without a `register` (as if by another handle): the store knows now.
    fx.put_config("alice", config("t-1", "c", &receiver.url))
        .await;
    fx.append("t-1", "e2", TaskState::Working).await;
    push.notify("t-1");
    assert!(push.scanning("t-1").is_some());
    delivered_then_shut_down(&push, vec![(receiver, ids("t-1", &["e2"]))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_whose_owner_left_the_task_gets_nothing_more_and_is_removed() {
    let fx = Fixture::new();
    let alices = Receiver::always(ok()).await;
    let bobs = Receiver::always(ok()).await;
    let team = [("alice", Role::Admin), ("bob", Role::Watcher)];
    fx.create_task_of("t-1", &team).await;
    fx.put_config("alice", config("t-1", "alices", &alices.url))
        .await;
    fx.put_config("bob", config("t-1", "bobs", &bobs.url)).await;
    let push = fx.dispatcher(dispatch_options());
    push.register("t-1", "alices", 0);
    push.register("t-1", "bobs", 0);
    push.notify("t-1");
    fx.append("t-1", "e1", TaskState::Working).await;
    push.notify("t-1");
    eventually("bob's first events", || bobs.delivered().len() >= 2).await;

    // Bob is removed: the removal's own event and everything after go to alice only.
    fx.update(
        "t-1",
        |rec| rec.extension.participants.retain(|p| p.id != "bob"),
        &["bob removed"],
    )
    .await;
    push.notify("t-1");
    fx.append("t-1", "e3", TaskState::Completed).await;
    push.notify("t-1");

    eventually("alice's events", || alices.delivered().len() >= 4).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while fx
        .store
        .get_push_config("t-1", "bobs")
        .await
        .unwrap()
        .is_some()
    {
        assert!(Instant::now() < deadline, "bob's config was not removed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shut_down_having_delivered(
        &push,
        Duration::from_secs(5),
        vec![
            (alices, ids("t-1", &["e0", "e1", "bob removed", "e3"])),
            (bobs, ids("t-1", &["e0", "e1"])),
        ],
    )
    .await;
}

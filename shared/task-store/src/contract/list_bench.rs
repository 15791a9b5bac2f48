//! The ListTasks benchmark's seed and measurements, shared by the adapters' `list_tasks`
//! benches (docs/performance.md, "ListTasks"): `n` tasks of one participant, then pages of 50
//! (the first, one in the middle by its token, the first of a state filter), p50 and p95 of
//! `LIST_BENCH_ROUNDS` (100) calls each, and the read units of each page where the store
//! reports them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a::TaskState;
use futures::{StreamExt, stream};
use task_core::extension::Role;

use super::fixtures::{at, record, snapshot};
use crate::model::{Change, ListQuery, NewTask};
use crate::port::Store;

/// The table's header.
pub fn header() {
    println!(
        "| store | tasks | page of {PAGE} | p50 ms | p95 ms | read units (first / last call) | totalSize |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
}

/// The task counts to seed (`LIST_BENCH_SIZES`; default `100,100000` under `cargo bench`, 20
/// under `cargo test`).
pub fn sizes() -> Vec<usize> {
    // `cargo test --all-targets` runs a bench target without `--bench`: a smoke run of 20
    // tasks then, so that the test suite checks the bench works without seeding 100,000.
    let measuring = std::env::args().any(|a| a == "--bench");
    let default = if measuring { "100,100000" } else { "20" };
    std::env::var("LIST_BENCH_SIZES")
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

pub const PARTICIPANT: &str = "bench";
const PAGE: usize = 50;

/// The state of seeded task `i`: most tasks done, some waiting for input, a few working.
fn state_of(i: usize) -> TaskState {
    match i % 20 {
        0..=2 => TaskState::InputRequired,
        3 => TaskState::Working,
        _ => TaskState::Completed,
    }
}

/// Task `i` of the seed: its own context, the participant and the agent, one event.
fn creation(i: usize) -> Change {
    let team = [("bench", Role::Reporter), ("agent", Role::Assignee)];
    let millis = i64::try_from(i).unwrap();
    let mut rec = record(
        &format!("task-{i:07}"),
        &format!("ctx-{i:07}"),
        &team,
        state_of(i),
        at(0),
    );
    rec.status.timestamp = Some(at(0) + chrono::Duration::milliseconds(millis));
    let mut new = NewTask::new(rec.clone());
    new.events = vec![snapshot(&rec)];
    Change::Create(Box::new(new))
}

/// Seeds `n` tasks: commits of `batch` creations, `parallel` at a time.
async fn seed(store: &Arc<dyn Store>, n: usize, batch: usize, parallel: usize) -> Duration {
    let started = Instant::now();
    let batches: Vec<Vec<usize>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(batch)
        .map(<[usize]>::to_vec)
        .collect();
    stream::iter(batches)
        .map(|ids| {
            let store = store.clone();
            async move {
                let changes = ids.into_iter().map(creation).collect();
                store.commit(changes).await.expect("seed commit");
            }
        })
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
    started.elapsed()
}

/// The token of the page that starts half way down the list.
async fn middle_token(store: &dyn Store, n: usize) -> Option<String> {
    let mut query = ListQuery {
        page_size: 100,
        ..Default::default()
    };
    let mut seen = 0;
    while seen < n / 2 {
        let page = store.list(PARTICIPANT, &query).await.expect("list");
        seen += page.tasks.len();
        if page.next_page_token.is_empty() {
            return None;
        }
        query.page_token = Some(page.next_page_token);
    }
    query.page_token
}

struct Measure {
    p50: Duration,
    p95: Duration,
    /// Read units per page (DynamoDB), from the first and the last call.
    read_units: Option<(f64, f64)>,
    total_size: usize,
}

async fn measure(
    store: &dyn Store,
    read_units: Option<&(dyn Fn() -> f64 + Sync)>,
    query: &ListQuery,
    rounds: usize,
) -> Measure {
    let mut times = Vec::with_capacity(rounds);
    let mut units = Vec::with_capacity(rounds);
    let mut total_size = 0;
    for _ in 0..rounds {
        let before = read_units.map(|units| units());
        let started = Instant::now();
        let page = store.list(PARTICIPANT, query).await.expect("list");
        times.push(started.elapsed());
        if let (Some(units_now), Some(before)) = (read_units, before) {
            units.push(units_now() - before);
        }
        assert_eq!(page.tasks.len(), PAGE.min(page.total_size));
        total_size = page.total_size;
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Measure {
        p50: at(0.5),
        p95: at(0.95),
        read_units: (!units.is_empty()).then(|| (units[0], units[units.len() - 1])),
        total_size,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Seeds `n` tasks (commits of `batch` creations, `parallel` at a time) and prints one table
/// row per measurement; `read_units` gives the read units consumed so far (DynamoDB).
pub async fn run(
    name: &str,
    store: Arc<dyn Store>,
    read_units: Option<&(dyn Fn() -> f64 + Sync)>,
    n: usize,
    (batch, parallel): (usize, usize),
) {
    let rounds: usize = std::env::var("LIST_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let seeded = seed(&store, n, batch, parallel).await;
    eprintln!("{name}: seeded {n} tasks in {:.1} s", seeded.as_secs_f64());
    // Let the store settle (the embedded store writes the seed into its file within a few
    // seconds of it) so that the timings are of the reads alone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let first = ListQuery {
        page_size: PAGE,
        ..Default::default()
    };
    let middle = ListQuery {
        page_token: middle_token(&*store, n).await,
        ..first.clone()
    };
    let done = ListQuery {
        state: Some(TaskState::Completed),
        ..first.clone()
    };
    let working = ListQuery {
        state: Some(TaskState::Working),
        ..first.clone()
    };
    for (what, query) in [
        ("first page", &first),
        ("middle page (token)", &middle),
        ("state filter, COMPLETED (80 %)", &done),
        ("state filter, WORKING (5 %)", &working),
    ] {
        let m = measure(&*store, read_units, query, rounds).await;
        let units = m
            .read_units
            .map_or("-".to_owned(), |(a, b)| format!("{a:.1} / {b:.1}"));
        println!(
            "| {name} | {n} | {what} | {} | {} | {units} | {} |",
            ms(m.p50),
            ms(m.p95),
            m.total_size
        );
    }
}

//! What the service calls where things happen: one function per metric, its labels typed or
//! `&'static str` (model ids, which come from the configuration, are interned up to a cap).
//! Each is a no-op when no registry is installed.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use super::catalog::Metric;
use super::global::installed;

#[inline]
fn record(metric: Metric, labels: [&'static str; 2], value: f64) {
    if let Some(registry) = installed() {
        registry.record(metric, labels, value);
    }
}

fn millis(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

/// When a timed operation began; empty (no clock read) when nothing records.
#[derive(Debug, Clone, Copy)]
pub struct Timer(Option<Instant>);

impl Timer {
    #[inline]
    pub fn start() -> Self {
        Timer(installed().map(|_| Instant::now()))
    }
}

/// How a request ended, by its HTTP status.
pub fn outcome(status: u16) -> &'static str {
    match status {
        0..400 => "ok",
        400..500 => "client_error",
        _ => "server_error",
    }
}

/// An A2A request answered with `status` (`method`: its JSON-RPC name).
pub fn request(method: &'static str, status: u16, started: Timer) {
    let Some(started) = started.0 else { return };
    let labels = [method, outcome(status)];
    record(Metric::Requests, labels, 1.0);
    record(Metric::RequestLatency, labels, millis(started.elapsed()));
}

/// A task created, with its lifecycle (`conversation`, `delegated`).
pub fn task_created(lifecycle: &'static str) {
    record(Metric::TasksCreated, [lifecycle, ""], 1.0);
}

/// One run of the agent on a message (`local`, or `remote`: a relayed sub-task).
pub fn turn(agent: &'static str) {
    record(Metric::Turns, [agent, ""], 1.0);
}

/// A tool call that failed with `code` (`tool.not_found`, …).
pub fn tool_error(code: &'static str) {
    record(Metric::ToolErrors, [code, ""], 1.0);
}

/// One model call of `model`, and whether it answered.
pub fn model_call(model: &str, ok: bool, started: Timer) {
    let Some(started) = started.0 else { return };
    let labels = [model_label(model), if ok { "ok" } else { "error" }];
    record(Metric::ModelLatency, labels, millis(started.elapsed()));
}

/// The tokens one model call of `model` spent.
pub fn model_tokens(model: &str, input: u64, output: u64, cached: u64) {
    if installed().is_none() {
        return;
    }
    let model = model_label(model);
    for (kind, tokens) in [("input", input), ("output", output), ("cached", cached)] {
        record(Metric::ModelTokens, [model, kind], tokens as f64);
    }
}

/// Expired leases found, their tasks run again.
pub fn lease_takeovers(count: usize) {
    if count > 0 {
        record(Metric::LeaseTakeovers, ["", ""], count as f64);
    }
}

/// A push notification's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered (a 2xx).
    Sent,
    /// An attempt failed and is tried again.
    Retried,
    /// Given up (refused, rejected, or out of attempts).
    Failed,
}

pub fn push_delivery(delivery: Delivery) {
    let result = match delivery {
        Delivery::Sent => "sent",
        Delivery::Retried => "retried",
        Delivery::Failed => "failed",
    };
    record(Metric::PushDeliveries, [result, ""], 1.0);
}

/// A conditional write the store refused (`conflict`: the conflict's name, snake case).
pub fn store_conflict(conflict: &'static str) {
    record(Metric::StoreConflicts, [conflict, ""], 1.0);
}

/// DynamoDB capacity units consumed by one call.
pub fn dynamodb_capacity(read_units: f64, write_units: f64) {
    if read_units > 0.0 {
        record(Metric::DynamoDbCapacity, ["read", ""], read_units);
    }
    if write_units > 0.0 {
        record(Metric::DynamoDbCapacity, ["write", ""], write_units);
    }
}

/// A DynamoDB `operation` throttled (past the SDK's retries, or a transaction cancelled for
/// throttling).
pub fn dynamodb_throttle(operation: &'static str) {
    record(Metric::DynamoDbThrottles, [operation, ""], 1.0);
}

/// Model ids seen so far; past [`MAX_MODELS`] a new id is recorded as `other`.
static MODELS: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());
/// The catalog's models, with room to spare; bounds what the interning keeps.
const MAX_MODELS: usize = 64;

/// `model` as a label: the same `&'static str` for the same id (each id kept once).
fn model_label(model: &str) -> &'static str {
    if let Ok(known) = MODELS.read()
        && let Some(found) = known.iter().find(|m| **m == model)
    {
        return found;
    }
    let Ok(mut known) = MODELS.write() else {
        return "other";
    };
    if let Some(found) = known.iter().find(|m| **m == model) {
        return found;
    }
    if known.len() >= MAX_MODELS {
        return "other";
    }
    // Bounded by MAX_MODELS: the ids of the configured catalog.
    let kept: &'static str = Box::leak(model.to_owned().into_boxed_str());
    known.push(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_three_outcomes() {
        assert_eq!(outcome(200), "ok");
        assert_eq!(outcome(304), "ok");
        assert_eq!(outcome(404), "client_error");
        assert_eq!(outcome(429), "client_error");
        assert_eq!(outcome(500), "server_error");
        assert_eq!(outcome(503), "server_error");
    }

    #[test]
    fn a_model_id_is_interned_once() {
        let first = model_label("interned-model");
        let second = model_label(&String::from("interned-model"));
        assert!(std::ptr::eq(first, second));
    }
}

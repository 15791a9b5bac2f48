//! Retries of transient model failures (throttling, 5xx, transport, timeouts), with
//! exponential backoff and jitter, until a deadline measured from the first attempt; anything
//! else fails at once.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::ModelError;

/// How long transient failures are retried by default: a minute from the first attempt.
pub const DEFAULT_RETRY_DEADLINE: Duration = Duration::from_secs(60);

/// When a failed model call is tried again.
///
/// A transient failure ([`ModelError::is_transient`]) is retried after a wait of
/// `base_delay`, doubling each time up to `max_delay`, each up to a quarter shorter at random
/// (so that many tasks throttled together do not retry together). A retry is made only if
/// its wait ends before `deadline` (counted from the start of the first attempt) and fewer
/// than `attempts` calls were made; otherwise the last failure is the result. The deadline
/// bounds when retries start, not how long an attempt runs (each call has its provider's
/// timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// No retry starts later than this after the first attempt started.
    pub deadline: Duration,
    /// Calls in all at most, the first included (`u32::MAX`: the deadline alone bounds them).
    pub attempts: u32,
    /// The wait before the first retry; it doubles each time, up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Retries for 60 s, waiting 0.5 s, then 1, 2, 4 and 8 s (and 8 s from then on).
    fn default() -> Self {
        Self::with_deadline(DEFAULT_RETRY_DEADLINE)
    }
}

impl RetryPolicy {
    /// Retries until `deadline` after the first attempt (the default backoff: 0.5 s doubling
    /// to 8 s). `Duration::ZERO`: no retries.
    pub fn with_deadline(deadline: Duration) -> Self {
        Self {
            deadline,
            attempts: u32::MAX,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }

    /// No retries (tests of the failure path).
    pub fn once() -> Self {
        Self {
            attempts: 1,
            ..Self::default()
        }
    }

    /// `attempts` calls with millisecond waits (tests of the retry path).
    pub fn quick(attempts: u32) -> Self {
        Self {
            attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            ..Self::default()
        }
    }

    fn delay(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)));
        let capped = exp.min(self.max_delay);
        // Up to a quarter less, so that many tasks throttled together do not retry together.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        capped.saturating_sub(capped / 4 * (nanos % 1000) / 1000)
    }

    /// Runs `call` until it succeeds, fails for good, or the deadline or the attempts are
    /// spent.
    pub async fn run<T, F, Fut>(&self, mut call: F, model_id: &str) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let started = Instant::now();
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            match call().await {
                Err(err) if err.is_transient() && attempt < attempts => {
                    let wait = self.delay(attempt);
                    if started.elapsed().saturating_add(wait) > self.deadline {
                        tracing::warn!(model = model_id, attempt, error = %err, deadline = ?self.deadline, "model call failed; no retry left before the deadline");
                        return Err(err);
                    }
                    tracing::warn!(model = model_id, attempt, error = %err, ?wait, "model call failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Runs `policy` over a call that always fails with `error`: the result and the calls made.
    async fn always_failing(
        policy: RetryPolicy,
        error: ModelError,
    ) -> (Result<(), ModelError>, u32) {
        let calls = AtomicU32::new(0);
        let result = policy
            .run(
                || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err(error.clone())
                },
                "m",
            )
            .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn transient_failures_are_retried_until_the_attempts_are_spent() {
        let throttled = ModelError::Throttled("slow down".into());
        let (result, calls) = always_failing(RetryPolicy::quick(3), throttled.clone()).await;
        assert_eq!(result, Err(throttled));
        assert_eq!(calls, 3);

        let calls = AtomicU32::new(0);
        let result = RetryPolicy::quick(5)
            .run(
                || async {
                    match calls.fetch_add(1, Ordering::SeqCst) {
                        0 => Err(ModelError::Unavailable("502".into())),
                        1 => Err(ModelError::TimedOut("read timeout".into())),
                        _ => Ok("done"),
                    }
                },
                "m",
            )
            .await;
        assert_eq!(result, Ok("done"));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn other_failures_are_not_retried() {
        let (result, calls) = always_failing(
            RetryPolicy::quick(5),
            ModelError::Rejected("bad key".into()),
        )
        .await;
        assert!(matches!(result, Err(ModelError::Rejected(_))));
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_until_the_deadline() {
        let started = Instant::now();
        let (result, calls) = always_failing(
            RetryPolicy::with_deadline(Duration::from_secs(10)),
            ModelError::Unavailable("503".into()),
        )
        .await;
        assert!(matches!(result, Err(ModelError::Unavailable(_))));
        // Calls at 0 and after waits of about 0.5, 1, 2 and 4 s; the next wait (about 8 s)
        // would end past the deadline.
        assert_eq!(calls, 5);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(started.elapsed() >= Duration::from_millis(5_625));

        // The default: a minute.
        let started = Instant::now();
        let (_, calls) =
            always_failing(RetryPolicy::default(), ModelError::Throttled("429".into())).await;
        let elapsed = started.elapsed();
        assert!(elapsed <= Duration::from_secs(60), "{elapsed:?}");
        assert!(elapsed >= Duration::from_secs(45), "{elapsed:?}");
        assert!(calls >= 10, "{calls}");

        let (_, calls) = always_failing(
            RetryPolicy::with_deadline(Duration::ZERO),
            ModelError::TimedOut("slow".into()),
        )
        .await;
        assert_eq!(calls, 1);
        let (_, calls) =
            always_failing(RetryPolicy::once(), ModelError::TimedOut("slow".into())).await;
        assert_eq!(calls, 1);
    }

    #[test]
    fn the_backoff_doubles_up_to_the_cap_with_some_jitter() {
        let policy = RetryPolicy {
            attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            ..RetryPolicy::default()
        };
        for (retry, full) in [(1, 100), (2, 200), (3, 400), (4, 500), (9, 500)] {
            let d = policy.delay(retry).as_millis() as u64;
            assert!(d <= full && d >= full * 3 / 4, "retry {retry}: {d} ms");
        }
    }
}

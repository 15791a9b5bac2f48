//! Retries of transient model failures (throttling, 5xx, transport, timeouts), with
//! exponential backoff and jitter; anything else fails at once.

use std::future::Future;
use std::time::Duration;

use crate::ModelError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls in all, the first included (at least 1).
    pub attempts: u32,
    /// The wait before the first retry; it doubles each time, up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// No retries (tests of the failure path).
    pub fn once() -> Self {
        Self {
            attempts: 1,
            ..Self::default()
        }
    }

    /// Retries for about `deadline` from the first attempt (the default backoff). Until the
    /// deadline-based policy lands, the attempts that fit in `deadline` with full backoff.
    pub fn with_deadline(deadline: Duration) -> Self {
        let mut policy = Self::default();
        let mut spent = Duration::ZERO;
        let mut attempts = 1;
        while attempts < 1_000 {
            let wait = policy
                .base_delay
                .saturating_mul(2u32.saturating_pow(attempts - 1));
            spent += wait.min(policy.max_delay);
            if spent > deadline {
                break;
            }
            attempts += 1;
        }
        policy.attempts = attempts;
        policy
    }

    /// `attempts` calls with millisecond waits (tests of the retry path).
    pub fn quick(attempts: u32) -> Self {
        Self {
            attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
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

    /// Runs `call` until it succeeds, fails for good, or the attempts are spent.
    pub async fn run<T, F, Fut>(&self, mut call: F, model_id: &str) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            match call().await {
                Err(err) if err.is_transient() && attempt < attempts => {
                    let wait = self.delay(attempt);
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

    #[test]
    fn the_backoff_doubles_up_to_the_cap_with_some_jitter() {
        let policy = RetryPolicy {
            attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
        };
        for (retry, full) in [(1, 100), (2, 200), (3, 400), (4, 500), (9, 500)] {
            let d = policy.delay(retry).as_millis() as u64;
            assert!(d <= full && d >= full * 3 / 4, "retry {retry}: {d} ms");
        }
    }
}

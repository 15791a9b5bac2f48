//! How long a test waits for anything, and polling until something holds.

use std::future::Future;
use std::time::Duration;

/// The longest any single wait may take before the test fails (a guard, not an expectation).
pub const WAIT: Duration = Duration::from_secs(30);

/// How often [`poll`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Calls `read` until `done` holds for what it returns, and returns that; fails the test
/// after [`WAIT`], saying it was waiting for `what` and showing the last value read.
pub async fn poll<T: std::fmt::Display, F: Future<Output = T>>(
    what: &str,
    mut read: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let value = read().await;
        if done(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {value}"
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

//! How many refusals the service writes down (SPEC section 9: refusals are cheap for the
//! store).
//!
//! A refused message costs one bounded audit record on the task it was sent to. So that
//! refused traffic cannot grow a task's log (or contend with its runner) without limit, each
//! task and each caller may have at most [`RefusalLimits::per_task`] and
//! [`RefusalLimits::per_caller`] refusals recorded per window; past either, the request is
//! answered 429 with nothing written. The counts live in this process: the local server
//! counts everything it serves; each Lambda instance counts its own requests, so a deployment
//! records at most that many per instance (API Gateway throttling and WAF bound the rest).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limits, per fixed window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusalLimits {
    pub window: Duration,
    pub per_task: u32,
    pub per_caller: u32,
    /// Tasks (and callers) counted at once; past it, new keys are refused until windows end
    /// (fail closed: refusals matter less than the store).
    pub max_keys: usize,
}

impl Default for RefusalLimits {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(60),
            per_task: 30,
            per_caller: 30,
            max_keys: 10_000,
        }
    }
}

/// Counts of refusals per task and per caller in the current window.
pub struct RefusalBudget {
    limits: RefusalLimits,
    tasks: Mutex<Windows>,
    callers: Mutex<Windows>,
}

/// One window's count per key.
struct Windows {
    counts: HashMap<String, (Instant, u32)>,
}

impl Windows {
    /// Counts one more for `key` unless it is at `limit`; otherwise the time until its window
    /// ends.
    fn take(
        &mut self,
        key: &str,
        limit: u32,
        limits: &RefusalLimits,
        now: Instant,
    ) -> Result<(), Duration> {
        let window = limits.window;
        if !self.counts.contains_key(key) && self.counts.len() >= limits.max_keys {
            self.counts
                .retain(|_, (start, _)| now.duration_since(*start) < window);
            if self.counts.len() >= limits.max_keys {
                let oldest = self.counts.values().map(|(start, _)| *start).min();
                return Err(oldest.map_or(window, |s| window.saturating_sub(now.duration_since(s))));
            }
        }
        let (start, count) = self.counts.entry(key.to_owned()).or_insert((now, 0));
        if now.duration_since(*start) >= window {
            *start = now;
            *count = 0;
        }
        if *count >= limit {
            return Err(window.saturating_sub(now.duration_since(*start)));
        }
        *count += 1;
        Ok(())
    }
}

impl RefusalBudget {
    pub fn new(limits: RefusalLimits) -> Self {
        let windows = || {
            Mutex::new(Windows {
                counts: HashMap::new(),
            })
        };
        Self {
            limits,
            tasks: windows(),
            callers: windows(),
        }
    }

    /// Whether a refusal of `caller` on `task_id` may be recorded now; otherwise the whole
    /// seconds until it may (at least 1).
    pub fn admit(&self, task_id: &str, caller: &str) -> Result<(), u64> {
        self.admit_at(task_id, caller, Instant::now())
    }

    fn admit_at(&self, task_id: &str, caller: &str, now: Instant) -> Result<(), u64> {
        let secs = |wait: Duration| wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let limits = &self.limits;
        // A poisoned lock only means a panic elsewhere mid-count: the counts are still usable.
        let mut callers = self.callers.lock().unwrap_or_else(|p| p.into_inner());
        callers
            .take(caller, limits.per_caller, limits, now)
            .map_err(|w| secs(w).max(1))?;
        drop(callers);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks
            .take(task_id, limits.per_task, limits, now)
            .map_err(|w| secs(w).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(per_task: u32, per_caller: u32, max_keys: usize) -> RefusalBudget {
        RefusalBudget::new(RefusalLimits {
            window: Duration::from_secs(60),
            per_task,
            per_caller,
            max_keys,
        })
    }

    #[test]
    fn per_caller_and_per_task() {
        let b = budget(5, 2, 100);
        let t0 = Instant::now();
        assert!(b.admit_at("t1", "mallory", t0).is_ok());
        assert!(b.admit_at("t2", "mallory", t0).is_ok());
        // The caller is out, whichever task it tries.
        assert_eq!(
            b.admit_at("t3", "mallory", t0 + Duration::from_secs(10)),
            Err(50)
        );
        // Others still have the task's budget: 2 used by mallory's first, up to 5.
        for who in ["a", "b", "c", "d"] {
            assert!(b.admit_at("t1", who, t0).is_ok(), "{who}");
        }
        assert!(b.admit_at("t1", "e", t0).is_err(), "the task is out");
        assert!(b.admit_at("t9", "e", t0).is_ok(), "another task is not");
        // A new window starts afresh.
        assert!(
            b.admit_at("t3", "mallory", t0 + Duration::from_secs(60))
                .is_ok()
        );
    }

    #[test]
    fn memory_is_bounded_and_fails_closed() {
        let b = budget(100, 100, 3);
        let t0 = Instant::now();
        for who in ["a", "b", "c"] {
            assert!(b.admit_at("t", who, t0).is_ok());
        }
        assert!(b.admit_at("t", "d", t0 + Duration::from_secs(1)).is_err());
        assert!(
            b.admit_at("t", "a", t0 + Duration::from_secs(1)).is_ok(),
            "known keys go on"
        );
        // Once windows end, their keys make room.
        assert!(b.admit_at("t", "d", t0 + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn retry_after_is_whole_seconds_and_never_zero() {
        let b = budget(1, 1, 10);
        let t0 = Instant::now();
        assert!(b.admit_at("t", "a", t0).is_ok());
        assert_eq!(
            b.admit_at("t", "a", t0 + Duration::from_millis(59_500)),
            Err(1)
        );
        assert_eq!(
            b.admit_at("t", "a", t0 + Duration::from_millis(100)),
            Err(60)
        );
    }
}

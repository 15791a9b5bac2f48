//! Per-caller rate limits: a token bucket per caller identity, checked by [`crate::handle`]
//! before anything of the request is parsed, so a refused request costs a lookup and no more.
//!
//! Why these keys: the verified principal is the caller when an authorizer named one (callers
//! behind one NAT or proxy are then told apart); otherwise the client address, an IPv6 one by
//! its /64, since one host commonly holds a whole /64 and could rotate through it.
//!
//! Why two generations of buckets: memory stays bounded without ever scanning the buckets. A
//! bucket untouched for a whole fill time is full again, which is what a missing bucket means,
//! so dropping the older generation once per fill time loses nothing. A flood of new callers
//! (more than half [`MAX_TRACKED_CALLERS`] within one fill time) turns the generations over
//! early: memory stays bounded, at the price of those callers' buckets starting full again.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::Caller;

/// The most callers whose buckets a limiter keeps (about 100 bytes each).
pub const MAX_TRACKED_CALLERS: usize = 65_536;

/// A rate limit: each caller's tokens refill at `per_second`, up to `burst`; a request takes
/// one, and a request that finds none is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    per_second: f64,
    burst: u32,
}

// `new` refuses NaN, so equality is total.
impl Eq for RateLimit {}

impl RateLimit {
    /// `None` unless `per_second` is a positive finite number and `burst` at least 1.
    pub fn new(per_second: f64, burst: u32) -> Option<Self> {
        (per_second.is_finite() && per_second > 0.0 && burst >= 1)
            .then_some(RateLimit { per_second, burst })
    }

    /// The default burst: one second's worth of requests, at least one.
    pub fn default_burst(per_second: f64) -> u32 {
        // Saturating float-to-int conversion; `new` refuses the non-finite rates.
        (per_second.ceil() as u32).max(1)
    }

    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// How long an untouched bucket takes to fill from empty.
    fn fill_time(&self) -> Duration {
        Duration::try_from_secs_f64(f64::from(self.burst) / self.per_second)
            .unwrap_or(Duration::MAX)
    }
}

/// Where a limiter reads the time (a settable clock in the tests).
pub(crate) trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Whose bucket a request takes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Principal(String),
    Address(IpAddr),
    /// No principal and no address (a host that knows neither): one shared bucket.
    Unknown,
}

impl Key {
    fn of(caller: &Caller) -> Key {
        if let Some(principal) = &caller.verified_principal {
            return Key::Principal(principal.clone());
        }
        match caller.address {
            Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => Key::Address(IpAddr::V4(v4)),
                None => Key::Address(IpAddr::V6(prefix_64(v6))),
            },
            Some(v4) => Key::Address(v4),
            None => Key::Unknown,
        }
    }
}

fn prefix_64(address: Ipv6Addr) -> Ipv6Addr {
    let [a, b, c, d, ..] = address.segments();
    Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0)
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

struct Buckets {
    current: HashMap<Key, Bucket>,
    previous: HashMap<Key, Bucket>,
    turned_at: Instant,
}

struct Inner {
    limit: RateLimit,
    max_callers: usize,
    clock: Arc<dyn Clock>,
    buckets: Mutex<Buckets>,
}

/// A [`RateLimit`] applied per caller. Clones share the buckets.
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        Self::with_clock(limit, MAX_TRACKED_CALLERS, Arc::new(SystemClock))
    }

    pub(crate) fn with_clock(limit: RateLimit, max_callers: usize, clock: Arc<dyn Clock>) -> Self {
        let turned_at = clock.now();
        RateLimiter {
            inner: Arc::new(Inner {
                limit,
                max_callers: max_callers.max(2),
                clock,
                buckets: Mutex::new(Buckets {
                    current: HashMap::new(),
                    previous: HashMap::new(),
                    turned_at,
                }),
            }),
        }
    }

    pub fn limit(&self) -> RateLimit {
        self.inner.limit
    }

    /// Takes a token from `caller`'s bucket, or says in how many whole seconds (at least 1)
    /// the next one is there. A refused request takes nothing.
    pub fn check(&self, caller: &Caller) -> Result<(), u64> {
        let Inner {
            limit,
            max_callers,
            clock,
            buckets,
        } = &*self.inner;
        let now = clock.now();
        let key = Key::of(caller);
        // A panic elsewhere cannot leave a bucket half-updated: each update is one store.
        let mut buckets = buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let buckets = &mut *buckets;
        let fill_time = limit.fill_time();
        let since_turn = now.saturating_duration_since(buckets.turned_at);
        if since_turn >= fill_time {
            // Everything older than the current generation is full by now.
            buckets.previous = if since_turn >= fill_time.saturating_mul(2) {
                HashMap::new()
            } else {
                std::mem::take(&mut buckets.current)
            };
            buckets.current.clear();
            buckets.turned_at = now;
        }
        let bucket = match buckets.current.get_mut(&key) {
            Some(bucket) => bucket,
            None => {
                let bucket = buckets.previous.remove(&key).unwrap_or(Bucket {
                    tokens: f64::from(limit.burst),
                    at: now,
                });
                if buckets.current.len() >= max_callers / 2 {
                    buckets.previous = std::mem::take(&mut buckets.current);
                    buckets.turned_at = now;
                }
                buckets.current.entry(key).or_insert(bucket)
            }
        };
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.per_second).min(f64::from(limit.burst));
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - bucket.tokens) / limit.per_second).ceil();
            // Saturating conversion: a very slow rate waits as long as a u64 says.
            Err((wait as u64).max(1))
        }
    }

    /// How many callers have a bucket now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        let buckets = self
            .inner
            .buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        buckets.current.len() + buckets.previous.len()
    }
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limit", &self.inner.limit)
            .finish_non_exhaustive()
    }
}

/// Limiters are equal when their limits are (a configuration is compared, not its state).
impl PartialEq for RateLimiter {
    fn eq(&self, other: &Self) -> bool {
        self.inner.limit == other.inner.limit
    }
}

impl Eq for RateLimiter {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock the test moves by hand.
    struct TestClock {
        start: Instant,
        offset: Mutex<Duration>,
    }

    impl TestClock {
        fn new() -> Arc<Self> {
            Arc::new(TestClock {
                start: Instant::now(),
                offset: Mutex::new(Duration::ZERO),
            })
        }

        fn advance(&self, by: Duration) {
            *self.offset.lock().unwrap() += by;
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> Instant {
            self.start + *self.offset.lock().unwrap()
        }
    }

    /// A limiter on a clock of its own, which the test moves.
    fn limiter(per_second: f64, burst: u32) -> (Arc<TestClock>, RateLimiter) {
        let clock = TestClock::new();
        let limit = RateLimit::new(per_second, burst).unwrap();
        let limiter = RateLimiter::with_clock(limit, MAX_TRACKED_CALLERS, clock.clone());
        (clock, limiter)
    }

    fn at(address: &str) -> Caller {
        Caller::anonymous().with_address(Some(address.parse().unwrap()))
    }

    /// Spends a full bucket of `burst` tokens, each request let through.
    fn spend_burst(limiter: &RateLimiter, caller: &Caller, burst: u32) {
        for n in 0..burst {
            assert_eq!(limiter.check(caller), Ok(()), "request {n} of the burst");
        }
    }

    #[test]
    fn a_burst_then_refusals_with_the_seconds_until_the_next_token() {
        let (clock, limiter) = limiter(0.5, 3);
        let alice = at("192.0.2.1");
        spend_burst(&limiter, &alice, 3);
        // One token every 2 s: the next is 2 s away, and a refusal takes nothing.
        assert_eq!(limiter.check(&alice), Err(2));
        assert_eq!(limiter.check(&alice), Err(2));
        clock.advance(Duration::from_millis(500));
        assert_eq!(limiter.check(&alice), Err(2), "1.5 s rounds up to 2");
        clock.advance(Duration::from_millis(1000));
        assert_eq!(
            limiter.check(&alice),
            Err(1),
            "0.5 s rounds up to 1, never 0"
        );
        clock.advance(Duration::from_millis(500));
        assert_eq!(limiter.check(&alice), Ok(()));
        assert_eq!(limiter.check(&alice), Err(2));
    }

    #[test]
    fn tokens_refill_up_to_the_burst_only() {
        let (clock, limiter) = limiter(10.0, 2);
        let bob = at("192.0.2.2");
        spend_burst(&limiter, &bob, 2);
        assert_eq!(limiter.check(&bob), Err(1));
        clock.advance(Duration::from_secs(3600));
        spend_burst(&limiter, &bob, 2);
        assert!(
            limiter.check(&bob).is_err(),
            "an hour idle still refills 2, not more"
        );
    }

    #[test]
    fn callers_do_not_share_buckets() {
        let (_, limiter) = limiter(1.0, 1);
        assert_eq!(limiter.check(&at("192.0.2.1")), Ok(()));
        assert!(limiter.check(&at("192.0.2.1")).is_err());
        assert_eq!(limiter.check(&at("192.0.2.2")), Ok(()));
        // A verified principal is its own caller, whatever address it comes from...
        let alice = Caller::verified("alice").with_address(Some("192.0.2.1".parse().unwrap()));
        assert_eq!(limiter.check(&alice), Ok(()));
        assert!(limiter.check(&alice).is_err());
        let alice_elsewhere =
            Caller::verified("alice").with_address(Some("198.51.100.9".parse().unwrap()));
        assert!(limiter.check(&alice_elsewhere).is_err());
        assert_eq!(limiter.check(&Caller::verified("bob")), Ok(()));
        // ...and callers with neither share one bucket.
        assert_eq!(limiter.check(&Caller::anonymous()), Ok(()));
        assert!(limiter.check(&Caller::anonymous()).is_err());
    }

    #[test]
    fn an_ipv6_caller_is_its_64_prefix_and_a_mapped_ipv4_its_ipv4() {
        let (_, limiter) = limiter(1.0, 1);
        assert_eq!(limiter.check(&at("2001:db8:1:2::1")), Ok(()));
        assert!(limiter.check(&at("2001:db8:1:2:ffff::9")).is_err());
        assert_eq!(limiter.check(&at("2001:db8:1:3::1")), Ok(()));
        assert_eq!(limiter.check(&at("192.0.2.7")), Ok(()));
        assert!(limiter.check(&at("::ffff:192.0.2.7")).is_err());
    }

    #[test]
    fn memory_is_capped_and_idle_buckets_are_dropped() {
        let clock = TestClock::new();
        let limit = RateLimit::new(1.0, 2).unwrap();
        let limiter = RateLimiter::with_clock(limit, 100, clock.clone());
        for n in 0..1000u32 {
            let caller = at(&std::net::Ipv4Addr::from(0x0a00_0000 + n).to_string());
            assert_eq!(limiter.check(&caller), Ok(()));
            assert!(limiter.tracked() <= 100, "{} buckets", limiter.tracked());
        }
        // Idle for two fill times (2 s each): the next request finds only its own bucket.
        clock.advance(Duration::from_secs(4));
        assert_eq!(limiter.check(&at("192.0.2.1")), Ok(()));
        assert_eq!(limiter.tracked(), 1);
    }

    #[test]
    fn turning_the_generations_over_on_time_keeps_a_bucket_that_is_not_full() {
        let (clock, limiter) = limiter(1.0, 2);
        let alice = at("192.0.2.1");
        spend_burst(&limiter, &alice, 2);
        // One fill time later another caller turns the generations over; alice's bucket,
        // refilled by then, is full and may go, but one drained just before must stay.
        clock.advance(Duration::from_millis(1500));
        assert_eq!(limiter.check(&alice), Ok(()));
        clock.advance(Duration::from_millis(750));
        assert_eq!(limiter.check(&at("192.0.2.2")), Ok(()));
        assert_eq!(limiter.check(&alice), Ok(()), "0.5 left and 0.75 refilled");
        assert_eq!(limiter.check(&alice), Err(1));
    }

    #[test]
    fn invalid_limits_are_refused() {
        assert_eq!(RateLimit::new(0.0, 1), None);
        assert_eq!(RateLimit::new(-1.0, 1), None);
        assert_eq!(RateLimit::new(f64::NAN, 1), None);
        assert_eq!(RateLimit::new(f64::INFINITY, 1), None);
        assert_eq!(RateLimit::new(1.0, 0), None);
        assert_eq!(RateLimit::default_burst(0.2), 1);
        assert_eq!(RateLimit::default_burst(10.0), 10);
        assert_eq!(RateLimit::default_burst(2.5), 3);
    }
}

//! Requests per period one client address may make: the API's rate limit
//! and the password sign-in's attempts share it (governor's keyed limiter).

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Requests per second and burst allowed to one client address on the API.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Option<Arc<DefaultKeyedRateLimiter<IpAddr>>>,
    checks: Arc<AtomicU64>,
}

/// Every so many checks, addresses not seen lately are forgotten, so the
/// limiter's memory stays bounded by the clients of the last moments.
const FORGET_EVERY: u64 = 4096;

impl RateLimit {
    /// `per_second` 0 turns the limit off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let quota =
            NonZeroU32::new(per_second).map(|rate| Quota::per_second(rate).allow_burst(nonzero_or(burst, rate)));
        Self::with_quota(quota)
    }

    /// `per_minute` 0 turns the limit off.
    pub fn per_minute(per_minute: u32, burst: u32) -> Self {
        let quota =
            NonZeroU32::new(per_minute).map(|rate| Quota::per_minute(rate).allow_burst(nonzero_or(burst, rate)));
        Self::with_quota(quota)
    }

    fn with_quota(quota: Option<Quota>) -> Self {
        Self { limiter: quota.map(|q| Arc::new(DefaultKeyedRateLimiter::keyed(q))), checks: Arc::default() }
    }

    /// Seconds to wait when `client` is over its rate, else `None`.
    pub fn check(&self, client: IpAddr) -> Option<u64> {
        let limiter = self.limiter.as_ref()?;
        if self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            limiter.retain_recent();
        }
        let refused = limiter.check_key(&client).err()?;
        Some(refused.wait_time_from(DefaultClock::default().now()).as_secs().max(1))
    }
}

fn nonzero_or(n: u32, fallback: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_refuses_a_burst_and_names_a_wait() {
        let limit = RateLimit::new(1, 3);
        let client: IpAddr = "10.1.2.3".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(limit.check(client), None);
        }
        assert_eq!(limit.check(client), Some(1));
        assert_eq!(limit.check("10.1.2.4".parse().unwrap()), None, "another client has its own budget");
        assert_eq!(RateLimit::new(0, 1).check(client), None, "0 turns it off");
    }
}

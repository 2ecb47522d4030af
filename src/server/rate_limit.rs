//! Requests per period one client may make: the API's rate limit (per
//! token, else per address) and the password sign-in's attempts per address
//! share it (governor's keyed limiter).

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Requests per period and burst allowed to one key (a client address,
/// unless told).
#[derive(Clone)]
pub struct RateLimit<K: Hash + Eq + Clone = IpAddr> {
    limiter: Option<Arc<DefaultKeyedRateLimiter<K>>>,
    checks: Arc<AtomicU64>,
}

/// Every so many checks, addresses not seen lately are forgotten, so the
/// limiter's memory stays bounded by the clients of the last moments.
const FORGET_EVERY: u64 = 4096;

impl<K: Hash + Eq + Clone> RateLimit<K> {
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
    pub fn check(&self, client: K) -> Option<u64> {
        let limiter = self.limiter.as_ref()?;
        if self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            limiter.retain_recent();
        }
        let refused = limiter.check_key(&client).err()?;
        Some(refused.wait_time_from(DefaultClock::default().now()).as_secs().max(1))
    }
}

/// Whom an API request is counted against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ApiClient {
    /// The API token it carries, by name: each script its own budget,
    /// wherever it runs from.
    Token(String),
    /// Its client address, when it carries no token.
    Addr(IpAddr),
}

/// The API's rate per client: per token when the request carries one, else
/// per client address. A token that turns out not to be valid is charged to
/// the address it came from too, and an address over its rate that way is
/// refused any token for the wait it was told: made-up token names, each
/// with a fresh budget, do not get a client past its address's rate.
#[derive(Clone)]
pub struct ApiRate {
    limit: RateLimit<ApiClient>,
    /// Addresses refused for invalid tokens, until when.
    refused: moka::sync::Cache<IpAddr, Instant>,
}

impl ApiRate {
    /// `per_second` 0 turns the limit off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let quota =
            NonZeroU32::new(per_second).map(|rate| Quota::per_second(rate).allow_burst(nonzero_or(burst, rate)));
        let refused = moka::sync::Cache::builder().max_capacity(100_000).time_to_live(Duration::from_secs(60)).build();
        Self { limit: RateLimit::with_quota(quota), refused }
    }

    /// Seconds to wait when this request is over its client's rate, else
    /// `None`. `token`: the name of the API token it carries.
    pub fn check(&self, addr: IpAddr, token: Option<&str>) -> Option<u64> {
        match token {
            Some(name) => {
                if let Some(until) = self.refused.get(&addr) {
                    let wait = until.saturating_duration_since(Instant::now());
                    if !wait.is_zero() {
                        return Some(wait.as_secs().max(1));
                    }
                }
                self.limit.check(ApiClient::Token(name.to_string()))
            }
            None => self.limit.check(ApiClient::Addr(addr)),
        }
    }

    /// A request from `addr` carried a token that is not valid: charged to
    /// the address.
    pub fn invalid_token(&self, addr: IpAddr) {
        if let Some(secs) = self.limit.check(ApiClient::Addr(addr)) {
            self.refused.insert(addr, Instant::now() + Duration::from_secs(secs));
        }
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
        assert_eq!(RateLimit::<IpAddr>::new(0, 1).check(client), None, "0 turns it off");
    }

    #[test]
    fn the_api_rate_is_per_token_else_per_address_and_bad_tokens_cost_the_address() {
        let rate = ApiRate::new(1, 2);
        let (shared, other): (IpAddr, IpAddr) = ("10.1.2.3".parse().unwrap(), "10.1.2.4".parse().unwrap());
        assert_eq!((rate.check(shared, None), rate.check(shared, None)), (None, None));
        assert!(rate.check(shared, None).is_some(), "the address is spent");
        assert_eq!(rate.check(shared, Some("script-a")), None, "a token from it has its own budget");
        assert_eq!(rate.check(other, None), None);
        // Made-up tokens from `other`: once its address is spent, refused.
        for n in 0..3 {
            if rate.check(other, Some(&format!("made-up-{n}"))).is_none() {
                rate.invalid_token(other);
            }
        }
        assert!(rate.check(other, Some("made-up-9")).is_some(), "a fresh name does not escape");
        assert_eq!(ApiRate::new(0, 1).check(other, None), None, "0 turns it off");
    }
}

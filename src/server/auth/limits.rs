//! How fast passwords may be tried: per client address (a rate, as for the
//! API), and per account name (growing delays), so that neither one address
//! guessing many accounts nor many addresses guessing one account get far.
//!
//! Per account: the first `free` attempts against a name pass; each one
//! after that must wait, since the last, 1 s, then twice as long each time,
//! up to `max_delay`. The delay is capped rather than a lock, and a client
//! address that has signed in to the account before skips it (the per
//! address rate still holds): an attacker can slow a victim who signs in
//! from a new address down to one try per `max_delay`, never lock them out,
//! and never touch one signing in from where they did before. Names that do
//! not exist are counted exactly like those that do, so a delay tells
//! nothing about the account. Attempts are counted when they start, under a
//! lock, so many sent at once get no more through than sent one by one.
//!
//! All in memory: each instance counts for itself.

use crate::server::rate_limit::RateLimit;
use parking_lot::Mutex;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An account's attempts are forgotten this long after the last one.
const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// A client address that signed in to an account is remembered this long.
const KNOWN_FOR: Duration = Duration::from_secs(30 * 24 * 3600);
/// Names (and name-address pairs) kept at most: guessing random names
/// cannot grow the memory past this.
const MAX_KEPT: u64 = 100_000;

#[derive(Clone, Copy, Debug)]
pub struct SignInRules {
    /// Attempts per minute from one client address.
    pub per_client_per_minute: u32,
    /// Attempts against one account before each further one is delayed.
    pub free: u32,
    /// The longest delay.
    pub max_delay: Duration,
}

/// Why an attempt is refused before its password is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The client address is over its rate.
    Client { retry_after: Duration },
    /// The account's attempts are delayed.
    Account { retry_after: Duration },
}

impl Refused {
    pub fn retry_after(self) -> Duration {
        match self {
            Refused::Client { retry_after } | Refused::Account { retry_after } => retry_after,
        }
    }
}

#[derive(Default)]
struct Attempts {
    count: u32,
    last: Option<Instant>,
}

#[derive(Clone)]
pub struct SignInLimits {
    rules: SignInRules,
    per_client: RateLimit,
    accounts: moka::sync::Cache<String, Arc<Mutex<Attempts>>>,
    known: moka::sync::Cache<(String, IpAddr), ()>,
}

impl SignInLimits {
    pub fn new(rules: SignInRules) -> Self {
        let per_minute = rules.per_client_per_minute;
        Self {
            rules,
            per_client: RateLimit::per_minute(per_minute, per_minute),
            accounts: moka::sync::Cache::builder().max_capacity(MAX_KEPT).time_to_idle(FORGET_AFTER).build(),
            known: moka::sync::Cache::builder().max_capacity(MAX_KEPT).time_to_live(KNOWN_FOR).build(),
        }
    }

    /// Admits an attempt by `client` at `name`, counting it, or says how
    /// long to wait. `name` as the form gave it, lowercased.
    pub fn admit(&self, client: IpAddr, name: &str) -> Result<(), Refused> {
        if let Some(secs) = self.per_client.check(client) {
            return Err(Refused::Client { retry_after: Duration::from_secs(secs) });
        }
        if self.known.contains_key(&(name.to_string(), client)) {
            return Ok(());
        }
        let attempts = self.accounts.get_with(name.to_string(), Arc::default);
        let mut attempts = attempts.lock();
        let now = Instant::now();
        if let Some(last) = attempts.last {
            let wait = self.delay(attempts.count).saturating_sub(now.duration_since(last));
            if !wait.is_zero() {
                return Err(Refused::Account { retry_after: wait });
            }
        }
        attempts.count = attempts.count.saturating_add(1);
        attempts.last = Some(now);
        Ok(())
    }

    /// `client` signed in to `name`: its attempts are forgotten, and this
    /// address skips the account's delays from now on.
    pub fn signed_in(&self, client: IpAddr, name: &str) {
        self.accounts.invalidate(name);
        self.known.insert((name.to_string(), client), ());
    }

    /// The wait after `count` attempts: none for the first `free`, then
    /// 1 s, doubling, capped.
    fn delay(&self, count: u32) -> Duration {
        let Some(over) = count.checked_sub(self.rules.free) else { return Duration::ZERO };
        let doubled = Duration::from_secs(1).saturating_mul(1u32.checked_shl(over).unwrap_or(u32::MAX));
        doubled.min(self.rules.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(free: u32, max_secs: u64) -> SignInLimits {
        SignInLimits::new(SignInRules { per_client_per_minute: 10, free, max_delay: Duration::from_secs(max_secs) })
    }

    fn address(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0xCB00_7100u32 + n))
    }

    #[test]
    fn delays_double_from_one_second_up_to_the_cap() {
        let limits = limits(5, 60);
        let delays: Vec<u64> = (0..14).map(|n| limits.delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(limits.delay(u32::MAX), Duration::from_secs(60), "no overflow");
    }

    #[test]
    fn many_addresses_at_one_account_are_slowed_and_others_are_not() {
        let limits = limits(3, 60);
        for n in 0..3 {
            assert_eq!(limits.admit(address(n), "anna"), Ok(()), "attempt {n}");
        }
        let Err(Refused::Account { retry_after }) = limits.admit(address(3), "anna") else { panic!("not slowed") };
        assert!(retry_after <= Duration::from_secs(1) && retry_after > Duration::ZERO, "{retry_after:?}");
        // A made-up name is counted the same, and on its own.
        assert_eq!(limits.admit(address(4), "nobody"), Ok(()));
    }

    #[test]
    fn an_address_that_signed_in_before_skips_the_accounts_delay() {
        let limits = limits(2, 60);
        limits.signed_in(address(0), "anna");
        for n in 1..=2 {
            assert_eq!(limits.admit(address(n), "anna"), Ok(()));
        }
        assert!(matches!(limits.admit(address(3), "anna"), Err(Refused::Account { .. })));
        assert_eq!(limits.admit(address(0), "anna"), Ok(()), "the victim's own address");
        // Signing in forgets the attempts.
        limits.signed_in(address(0), "anna");
        assert_eq!(limits.admit(address(3), "anna"), Ok(()));
    }

    #[test]
    fn one_address_is_held_to_its_rate_whatever_the_names() {
        let limits = limits(5, 60);
        for n in 0..10 {
            assert_eq!(limits.admit(address(0), &format!("name-{n}")), Ok(()));
        }
        assert!(matches!(limits.admit(address(0), "name-10"), Err(Refused::Client { .. })));
        assert_eq!(limits.admit(address(1), "name-10"), Ok(()), "another address has its own");
    }
}

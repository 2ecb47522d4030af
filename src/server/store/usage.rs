//! What this process's DynamoDB calls consumed and how often they were
//! throttled, as the store's interceptor reports them: per second for the
//! last few minutes (in memory only), and per minute until the minutes are
//! flushed to the metrics table (`Store::flush_usage`).
//!
//! No store access here: the interceptor records, the store flushes and
//! reads back.

use crate::server::store::error::Throttle;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

/// Reads or writes: each is billed, provisioned and scaled on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReadWrite {
    Read,
    Write,
}

impl fmt::Display for ReadWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadWrite::Read => "read",
            ReadWrite::Write => "write",
        })
    }
}

/// Seconds kept in the per-second ring: five minutes.
pub const RING_SECONDS: usize = 300;

/// A table, or one of its global secondary indexes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Resource {
    pub table: String,
    pub index: Option<String>,
}

impl Resource {
    pub fn table(table: impl Into<String>) -> Self {
        Self { table: table.into(), index: None }
    }

    pub fn index(table: impl Into<String>, index: impl Into<String>) -> Self {
        Self { table: table.into(), index: Some(index.into()) }
    }

    /// `orders` or `orders/GSI2`, as the metrics table files it.
    pub fn parse(text: &str) -> Option<Self> {
        match text.split_once('/') {
            Some((table, index)) if !table.is_empty() && !index.is_empty() && !index.contains('/') => {
                Some(Self::index(table, index))
            }
            None if !text.is_empty() => Some(Self::table(text)),
            _ => None,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.index {
            Some(index) => write!(f, "{}/{index}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

/// A throttle as it is filed: the reason, and the resource without its
/// ARN's account and region (`table/orders/index/GSI2`), which
/// `Throttle::index` and `Throttle::place` read the same way.
pub fn filed(throttle: &Throttle) -> Throttle {
    let resource = throttle.resource.rsplit_once(':').map_or(throttle.resource.as_str(), |(_, r)| r);
    Throttle { reason: throttle.reason.clone(), resource: resource.to_string() }
}

/// Units and throttled attempts of one span (a second or a minute).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub units: BTreeMap<(Resource, ReadWrite), f64>,
    pub throttles: BTreeMap<(String, String), u64>,
    /// Write units of transactions (a part of `units`' writes): DynamoDB
    /// bills them twice, which the stream cannot see.
    pub transactional: BTreeMap<Resource, f64>,
}

impl Tally {
    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.throttles.is_empty() && self.transactional.is_empty()
    }

    fn add_units(&mut self, resource: &Resource, access: ReadWrite, units: f64) {
        *self.units.entry((resource.clone(), access)).or_default() += units;
    }

    fn add_throttle(&mut self, throttle: &Throttle) {
        *self.throttles.entry((throttle.reason.clone(), throttle.resource.clone())).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Tally) {
        for ((resource, access), units) in &other.units {
            self.add_units(resource, *access, *units);
        }
        for (key, n) in &other.throttles {
            *self.throttles.entry(key.clone()).or_default() += n;
        }
        for (resource, units) in &other.transactional {
            *self.transactional.entry(resource.clone()).or_default() += units;
        }
    }
}

/// Minutes since the Unix epoch: the key of a minute's tally.
pub fn epoch_minute(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(60)
}

/// The start of an epoch minute.
pub fn minute_start(minute: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(minute * 60, 0).unwrap_or_default()
}

#[derive(Debug, Default)]
struct Inner {
    /// (epoch second, its tally), oldest first, at most `RING_SECONDS`.
    seconds: VecDeque<(i64, Tally)>,
    /// Minutes not yet handed to a flush, by epoch minute.
    minutes: BTreeMap<i64, Tally>,
    /// Throttled attempts since the process started, by reason and resource.
    throttle_totals: BTreeMap<(String, String), u64>,
    /// Units consumed since the process started.
    unit_totals: BTreeMap<(Resource, ReadWrite), f64>,
    /// What the process has done to which partition family, since it started.
    accesses: BTreeSet<Access>,
}

/// One kind of item access this process has made: the IAM action that
/// authorizes it (`dynamodb:PutItem` for a transaction's Put too), the
/// table, and the partition family of its key (`store::keys::partition_of`;
/// `None` for a key of no family, such as an order's, or a request that
/// names none, a Scan). At most actions x tables x families of them: what
/// the IAM tests hold each role's policy to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub action: &'static str,
    pub table: String,
    pub family: Option<&'static str>,
}

/// The recorder the store's interceptor writes to. Cheap to call from any
/// thread: one short lock per recorded call.
#[derive(Debug, Default)]
pub struct Usage {
    inner: Mutex<Inner>,
}

impl Usage {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock())
    }

    /// Records the item accesses of one call.
    pub fn accessed(&self, accesses: impl IntoIterator<Item = Access>) {
        self.with(|inner| inner.accesses.extend(accesses));
    }

    /// Every kind of item access since the process started.
    pub fn accesses(&self) -> BTreeSet<Access> {
        self.with(|inner| inner.accesses.clone())
    }

    /// Units `resource` consumed for one call answered at `at`; the units it
    /// has consumed since the process started, or `None` when `units` is
    /// nothing to record.
    pub fn consumed(&self, at: DateTime<Utc>, resource: &Resource, access: ReadWrite, units: f64) -> Option<f64> {
        if !(units.is_finite() && units > 0.0) {
            return None;
        }
        Some(self.with(|inner| {
            inner.second(at).add_units(resource, access, units);
            inner.minutes.entry(epoch_minute(at)).or_default().add_units(resource, access, units);
            let total = inner.unit_totals.entry((resource.clone(), access)).or_default();
            *total += units;
            *total
        }))
    }

    /// Write units of a transaction answered at `at`, already recorded by
    /// `consumed`: kept apart per minute, so that the stream's figures can
    /// add the second half DynamoDB bills.
    pub fn transactional(&self, at: DateTime<Utc>, resource: &Resource, units: f64) {
        if units.is_finite() && units > 0.0 {
            self.with(|inner| {
                let minute = inner.minutes.entry(epoch_minute(at)).or_default();
                *minute.transactional.entry(resource.clone()).or_default() += units;
            });
        }
    }

    /// One throttled attempt, answered at `at` (`filed` is applied here).
    pub fn throttled(&self, at: DateTime<Utc>, throttle: &Throttle) {
        let throttle = filed(throttle);
        self.with(|inner| {
            inner.second(at).add_throttle(&throttle);
            inner.minutes.entry(epoch_minute(at)).or_default().add_throttle(&throttle);
            *inner.throttle_totals.entry((throttle.reason.clone(), throttle.resource.clone())).or_default() += 1;
        });
    }

    /// Every throttled attempt since the process started, by (reason,
    /// resource): what a run diffs to count its own.
    pub fn throttle_totals(&self) -> BTreeMap<(String, String), u64> {
        self.with(|inner| inner.throttle_totals.clone())
    }

    /// The last `RING_SECONDS` seconds up to `now`, oldest first, each with
    /// its tally (empty for a quiet second).
    pub fn recent(&self, now: DateTime<Utc>) -> Vec<(i64, Tally)> {
        let last = now.timestamp();
        let first = last - RING_SECONDS as i64 + 1;
        self.with(|inner| {
            let mut kept: BTreeMap<i64, Tally> =
                inner.seconds.iter().filter(|(s, _)| (first..=last).contains(s)).cloned().collect();
            (first..=last).map(|s| (s, kept.remove(&s).unwrap_or_default())).collect()
        })
    }

    /// The unflushed minutes, handed over for a flush; `restore` gives them
    /// back if it fails.
    pub fn take_minutes(&self) -> BTreeMap<i64, Tally> {
        self.with(|inner| std::mem::take(&mut inner.minutes))
    }

    /// Minutes a failed flush could not write, merged back.
    pub fn restore(&self, minutes: BTreeMap<i64, Tally>) {
        self.with(|inner| {
            for (minute, tally) in minutes {
                inner.minutes.entry(minute).or_default().merge(&tally);
            }
        });
    }

    /// A copy of the unflushed minutes (for reading them beside the
    /// persisted ones).
    pub fn unflushed(&self) -> BTreeMap<i64, Tally> {
        self.with(|inner| inner.minutes.clone())
    }
}

impl Inner {
    /// The tally of `at`'s second, made when new; seconds older than the
    /// ring are dropped. A call answered out of order lands in its own
    /// second when that is still kept.
    fn second(&mut self, at: DateTime<Utc>) -> &mut Tally {
        let second = at.timestamp();
        let oldest = second - RING_SECONDS as i64 + 1;
        while self.seconds.front().is_some_and(|(s, _)| *s < oldest) {
            self.seconds.pop_front();
        }
        let position = self.seconds.iter().position(|(s, _)| *s >= second);
        match position {
            Some(i) if self.seconds[i].0 == second => &mut self.seconds[i].1,
            Some(i) => {
                self.seconds.insert(i, (second, Tally::default()));
                &mut self.seconds[i].1
            }
            None => {
                self.seconds.push_back((second, Tally::default()));
                &mut self.seconds.back_mut().expect("just pushed").1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn gsi2() -> Resource {
        Resource::index("orders", "GSI2")
    }

    #[test]
    fn resources_print_and_parse_as_the_metrics_table_files_them() {
        assert_eq!(gsi2().to_string(), "orders/GSI2");
        assert_eq!(Resource::parse("orders/GSI2"), Some(gsi2()));
        assert_eq!(Resource::parse("orders"), Some(Resource::table("orders")));
        for bad in ["", "/GSI2", "orders/", "a/b/c"] {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn throttles_are_filed_without_the_arns_account_and_region() {
        let arn = Throttle {
            reason: "IndexWriteKeyRangeThroughputExceeded".into(),
            resource: "arn:aws:dynamodb:us-east-1:123456789012:table/orders/index/GSI2".into(),
        };
        let filed = filed(&arn);
        assert_eq!(filed.resource, "table/orders/index/GSI2");
        assert_eq!(filed.index(), Some("GSI2"));
        let transaction = Throttle { reason: "TransactionThrottlingError".into(), resource: "table/orders".into() };
        assert_eq!(super::filed(&transaction), transaction, "already filed");
    }

    #[test]
    fn units_add_up_per_second_and_per_minute() {
        let usage = Usage::default();
        usage.consumed(at("2026-11-29T10:15:30Z"), &gsi2(), ReadWrite::Write, 1.0);
        usage.consumed(at("2026-11-29T10:15:30.5Z"), &gsi2(), ReadWrite::Write, 2.0);
        usage.consumed(at("2026-11-29T10:15:59Z"), &Resource::table("orders"), ReadWrite::Read, 0.5);
        usage.consumed(at("2026-11-29T10:16:00Z"), &gsi2(), ReadWrite::Write, 4.0);
        usage.consumed(at("2026-11-29T10:16:00Z"), &gsi2(), ReadWrite::Write, 0.0);
        let minutes = usage.unflushed();
        let first = &minutes[&epoch_minute(at("2026-11-29T10:15:00Z"))];
        assert_eq!(first.units[&(gsi2(), ReadWrite::Write)], 3.0);
        assert_eq!(first.units[&(Resource::table("orders"), ReadWrite::Read)], 0.5);
        assert_eq!(minutes[&epoch_minute(at("2026-11-29T10:16:00Z"))].units[&(gsi2(), ReadWrite::Write)], 4.0);
        assert_eq!(minutes.len(), 2, "a zero is not recorded");

        let recent = usage.recent(at("2026-11-29T10:16:00Z"));
        assert_eq!(recent.len(), RING_SECONDS);
        assert_eq!(recent.last().unwrap().1.units[&(gsi2(), ReadWrite::Write)], 4.0);
        let second = recent.iter().find(|(s, _)| *s == at("2026-11-29T10:15:30Z").timestamp()).unwrap();
        assert_eq!(second.1.units[&(gsi2(), ReadWrite::Write)], 3.0);
        // Five minutes later the ring has let them go; the minutes wait for a flush.
        assert!(usage.recent(at("2026-11-29T10:21:01Z")).iter().all(|(_, t)| t.is_empty()));
        usage.consumed(at("2026-11-29T10:21:01Z"), &gsi2(), ReadWrite::Read, 1.0);
        assert_eq!(usage.unflushed().len(), 3);
    }

    #[test]
    fn a_failed_flush_gives_its_minutes_back() {
        let usage = Usage::default();
        let throttle = Throttle { reason: "ThrottlingException".into(), resource: "table/orders".into() };
        usage.consumed(at("2026-11-29T10:15:30Z"), &gsi2(), ReadWrite::Write, 1.0);
        usage.throttled(at("2026-11-29T10:15:31Z"), &throttle);
        let taken = usage.take_minutes();
        assert!(usage.unflushed().is_empty());
        usage.consumed(at("2026-11-29T10:15:40Z"), &gsi2(), ReadWrite::Write, 2.0);
        usage.restore(taken);
        let minute = &usage.unflushed()[&epoch_minute(at("2026-11-29T10:15:00Z"))];
        assert_eq!(minute.units[&(gsi2(), ReadWrite::Write)], 3.0);
        assert_eq!(minute.throttles[&("ThrottlingException".to_string(), "table/orders".to_string())], 1);
        assert_eq!(usage.throttle_totals().values().sum::<u64>(), 1, "totals never reset");
    }
}

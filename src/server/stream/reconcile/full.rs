//! `reconcile --full`: the counters no index can recount (`created`, each
//! `status<S>`, `c<HHMM>`) checked against a Scan of the orders table,
//! anchored like the PENDING reconciliation and repaired with deltas.
//!
//! The Scan is strongly consistent (so the table's own lag needs no grace),
//! runs in parallel segments, and is paced to a number of read capacity
//! units per second from what each page reports it consumed.

use super::anchor::Taken;
use super::drift::{Touched, drift, expected};
use super::{Plan, ReconcileError, Reconciler};
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::keys::{self, attr};
use crate::server::store::{CounterItem, ReadCapacity, backoff};
use crate::server::stream::counters::{Image, Key, image_of, state_counters};
use backon::Retryable;
use chrono::{NaiveDate, Utc};
use futures::future::try_join_all;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// The most days one run may cover.
pub const MAX_DAYS: i64 = 400;
/// Attempts at a Scan page that is throttled.
const SCAN_ATTEMPTS: u32 = 8;

#[derive(Clone, Debug)]
pub struct FullOptions {
    pub since: NaiveDate,
    pub until: NaiveDate,
    /// Read capacity units per second the Scan may consume, on average.
    pub rcu_per_second: f64,
    pub segments: u32,
    /// Items per Scan page.
    pub page: i32,
    /// Show a progress bar (on a terminal).
    pub progress: bool,
}

/// What a full reconciliation found for one day.
#[derive(Clone, Debug, PartialEq)]
pub struct DayOutcome {
    pub day: NaiveDate,
    /// `created` at the snapshot, and what the applied view says it should be.
    pub created: i64,
    pub expected_created: i64,
    /// Attributes of the day's item (`created`, `status<S>`) that were off.
    pub off: BTreeMap<String, i64>,
    /// `c<HHMM>` attributes that were off, summed over the day's minute
    /// items (what a reader sees).
    pub minutes_off: BTreeMap<String, i64>,
    pub repaired: bool,
    /// Another reconciliation repaired the day first: nothing was written; run again.
    pub raced: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FullOutcome {
    pub days: Vec<DayOutcome>,
    /// Items the Scan read, and orders of the range among them.
    pub scanned: u64,
    pub in_range: usize,
    pub unreadable: u64,
    /// Read capacity units the Scan consumed.
    pub consumed: f64,
    pub records: u64,
    pub elapsed: Duration,
}

/// What the Scan found: each order of the range, as it was read.
#[derive(Default)]
struct Scanned {
    orders: HashMap<String, Image>,
    scanned: u64,
    unreadable: u64,
    consumed: f64,
}

impl Reconciler {
    /// Checks the day and minute counters of every day in the range and,
    /// with `repair`, undoes the drift.
    pub async fn full(&self, options: &FullOptions, repair: bool) -> Result<FullOutcome, ReconcileError> {
        let started = Instant::now();
        let days = days(options)?;
        let keys: Vec<Key> = days.iter().flat_map(|d| day_keys(*d)).collect();
        // Each item is judged against the snapshot that read it, so a day's
        // items need not share one.
        self.refuse_marker_mode().await?;
        let anchor = self.anchor(&keys, 1).await?;
        let scan = self.scan(options).await?;
        let stream = self.read_stream(&anchor, Utc::now()).await?;
        self.refuse_far_behind(&anchor, &stream)?;
        let judged = judge(&anchor.taken, &stream.touched, &scan.orders);
        let mut outcomes = Vec::new();
        for day in days {
            outcomes.push(self.settle(day, &judged, repair).await?);
        }
        Ok(FullOutcome {
            days: outcomes,
            scanned: scan.scanned,
            in_range: scan.orders.len(),
            unreadable: scan.unreadable,
            consumed: scan.consumed,
            records: stream.records,
            elapsed: started.elapsed(),
        })
    }

    /// Repairs one day's items (the day's, its minutes') in one
    /// transaction, the verdict on the day's.
    async fn settle(&self, day: NaiveDate, judged: &Judged, repair: bool) -> Result<DayOutcome, ReconcileError> {
        let (day_key, minute_keys) = (keys::metric_day_key(day), keys::metric_minutes_keys(day));
        let (counter, off) = &judged[&day_key];
        let created_drift = off.get(attr::CREATED).copied().unwrap_or(0);
        let minutes = minute_keys.iter().map(|key| (key, &judged[key]));
        let damaged = !off.is_empty() || minute_keys.iter().any(|key| !judged[key].1.is_empty());
        let mut outcome = DayOutcome {
            day,
            created: counter.values.get(attr::CREATED).copied().unwrap_or(0),
            expected_created: counter.values.get(attr::CREATED).copied().unwrap_or(0) - created_drift,
            off: off.clone(),
            minutes_off: merged(minutes.clone().map(|(_, (_, off))| off)),
            repaired: false,
            raced: false,
        };
        if !repair || !(damaged || counter.exists) {
            return Ok(outcome);
        }
        let verdict = self.verdict(created_drift, damaged);
        let mut plans = vec![Plan::undo(day_key.clone(), counter, off, verdict.clone())];
        for (key, (counter, off)) in minutes.filter(|(_, (_, off))| !off.is_empty()) {
            let mut plan = Plan::undo(key.clone(), counter, off, verdict.clone());
            plan.verdict = None;
            plans.push(plan);
        }
        match self.repair(&plans, None).await {
            Ok(()) => outcome.repaired = damaged,
            Err(StoreError::Conflict(_)) => outcome.raced = true,
            Err(err) => return Err(err.into()),
        }
        Ok(outcome)
    }

    /// A parallel Scan of the orders, paced; keeps the orders of the range.
    async fn scan(&self, options: &FullOptions) -> Result<Scanned, ReconcileError> {
        let pace = Pace { per_second: options.rcu_per_second, started: Instant::now(), spent: Mutex::new(0.0) };
        let bar = self.progress_bar(options).await?;
        let segments = options.segments.max(1) as i32;
        let parts =
            try_join_all((0..segments).map(|segment| self.scan_segment(segment, segments, options, &pace, &bar)))
                .await?;
        bar.finish_and_clear();
        let mut all = Scanned::default();
        for part in parts {
            all.orders.extend(part.orders);
            all.scanned += part.scanned;
            all.unreadable += part.unreadable;
            all.consumed += part.consumed;
        }
        Ok(all)
    }

    async fn scan_segment(
        &self,
        segment: i32,
        segments: i32,
        options: &FullOptions,
        pace: &Pace,
        bar: &indicatif::ProgressBar,
    ) -> Result<Scanned, StoreError> {
        let mut part = Scanned::default();
        let mut start = None;
        loop {
            let page = self.scan_page(segment, segments, start.take(), options.page).await?;
            // An engine that reports no capacity is charged a unit per item.
            let units = page.consumed.unwrap_or(page.scanned as f64);
            part.scanned += page.scanned;
            // How each counts is the consumer's rule. The full check compares
            // the day and minute counters only, so every GSI2 partition
            // counts as listed here.
            let orders: Vec<Image> = page.items.iter().filter_map(image_of).collect();
            part.unreadable += (page.items.len() - orders.len()) as u64;
            part.consumed += units;
            let in_range = |o: &Image| (options.since..=options.until).contains(&o.created_at.date_naive());
            part.orders.extend(orders.into_iter().filter(in_range).map(|o| (o.order_id.clone(), o)));
            bar.inc(page.scanned);
            bar.set_message(format!("{:.1} RCU/s", pace.rate()));
            pace.spend(units).await;
            match page.next {
                Some(next) => start = Some(next),
                None => return Ok(part),
            }
        }
    }

    /// One page, retried while throttled.
    async fn scan_page(
        &self,
        segment: i32,
        segments: i32,
        start: Option<crate::server::store::Item>,
        limit: i32,
    ) -> Result<crate::server::store::ScanPage, StoreError> {
        (|| self.store.scan_orders(segment, segments, start.clone(), limit))
            .retry(backoff(SCAN_ATTEMPTS - 1))
            .sleep(tokio::time::sleep)
            .when(|err| matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }))
            .await
    }

    async fn progress_bar(&self, options: &FullOptions) -> Result<indicatif::ProgressBar, StoreError> {
        if !options.progress {
            return Ok(indicatif::ProgressBar::hidden());
        }
        let estimate = self.store.read_capacity().await?.item_count.unwrap_or(0).max(0) as u64;
        let bar = indicatif::ProgressBar::new(estimate);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/~{len} items scanned {msg}",
            )
            .expect("a valid template"),
        );
        Ok(bar)
    }
}

/// Each snapshot item as it was read, with its drift against its own
/// snapshot.
type Judged = HashMap<Key, (CounterItem, BTreeMap<String, i64>)>;

/// The items a full reconciliation checks for `day`: the day's, then every
/// minute item (`keys::metric_minutes_keys`: the old whole-day one, which
/// nothing should hold any more state counts in, and the hours').
fn day_keys(day: NaiveDate) -> Vec<Key> {
    std::iter::once(keys::metric_day_key(day)).chain(keys::metric_minutes_keys(day)).collect()
}

/// The drift of every item of every snapshot against that snapshot.
fn judge(taken: &[Taken], touched: &[Touched], orders: &HashMap<String, Image>) -> Judged {
    let mut judged = Judged::new();
    for (taken, touched) in taken.iter().zip(touched) {
        let read = orders.iter().map(|(id, image)| (id.as_str(), state_counters(image)));
        let expected = expected(read, touched, &taken.keys);
        for (key, counter) in taken.keys.iter().zip(&taken.counters) {
            judged.insert(key.clone(), (counter.clone(), drift(&counter.values, expected.get(key))));
        }
    }
    judged
}

/// The drift of the minute figures as a reader sees them: summed over the
/// items (an order counted in the old whole-day item and missing from its
/// hour's is no drift there), non-zero only.
fn merged<'a>(offs: impl Iterator<Item = &'a BTreeMap<String, i64>>) -> BTreeMap<String, i64> {
    let mut merged = BTreeMap::<String, i64>::new();
    for (attribute, d) in offs.flatten() {
        *merged.entry(attribute.clone()).or_default() += d;
    }
    merged.retain(|_, d| *d != 0);
    merged
}

/// The read capacity units per second a Scan may use: a share of a
/// provisioned table's capacity (capped by `max`), or `max` for an
/// on-demand table, which has no capacity to take a share of.
pub fn scan_rate(capacity: ReadCapacity, share: f64, max: Option<f64>) -> Result<f64, ReconcileError> {
    match (capacity.provisioned, max) {
        (Some(units), max) => Ok((units as f64 * share).min(max.unwrap_or(f64::INFINITY))),
        (None, Some(max)) => Ok(max),
        (None, None) => Err(ReconcileError::Usage(
            "the orders table is on-demand: say how fast --full may read with --max-rcu-per-second".into(),
        )),
    }
}

/// The days of the range, checked.
fn days(options: &FullOptions) -> Result<Vec<NaiveDate>, ReconcileError> {
    let span = (options.until - options.since).num_days();
    if !(0..MAX_DAYS).contains(&span) {
        return Err(ReconcileError::Usage(format!(
            "--since {} to --until {} must be 1 to {MAX_DAYS} days, in order",
            options.since, options.until
        )));
    }
    Ok(options.since.iter_days().take(span as usize + 1).collect())
}

/// Keeps a Scan's consumed capacity to a rate: after each page, waits until
/// the units spent so far are due.
struct Pace {
    per_second: f64,
    started: Instant,
    spent: Mutex<f64>,
}

impl Pace {
    async fn spend(&self, units: f64) {
        tokio::time::sleep_until(self.due(units).into()).await;
    }

    /// Counts `units` as spent: when the units spent so far are due.
    fn due(&self, units: f64) -> Instant {
        let mut spent = self.spent.lock();
        *spent += units;
        self.started + Duration::from_secs_f64(*spent / self.per_second)
    }

    fn rate(&self) -> f64 {
        *self.spent.lock() / self.started.elapsed().as_secs_f64().max(1e-3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_scan_keeps_to_its_rate() {
        let pace = Pace { per_second: 10.0, started: Instant::now(), spent: Mutex::new(0.0) };
        let dues: Vec<Duration> = (0..5).map(|_| pace.due(8.0) - pace.started).collect();
        let close = |a: Duration, b: Duration| a.abs_diff(b) < Duration::from_micros(1);
        assert!(close(dues[4], Duration::from_secs(4)), "40 units at 10/s are due after 4 s, not {:?}", dues[4]);
        assert!(dues.windows(2).all(|w| close(w[1] - w[0], Duration::from_millis(800))));
    }

    #[test]
    fn the_scan_takes_a_share_of_provisioned_capacity_or_a_given_rate() {
        let provisioned = ReadCapacity { provisioned: Some(100), item_count: None };
        let on_demand = ReadCapacity { provisioned: None, item_count: Some(5) };
        assert_eq!(scan_rate(provisioned, 0.25, None).unwrap(), 25.0);
        assert_eq!(scan_rate(provisioned, 0.25, Some(10.0)).unwrap(), 10.0);
        assert_eq!(scan_rate(on_demand, 0.25, Some(40.0)).unwrap(), 40.0);
        assert!(matches!(scan_rate(on_demand, 0.25, None), Err(ReconcileError::Usage(_))));
    }

    #[test]
    fn a_range_is_checked() {
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        let options =
            |since, until| FullOptions { since, until, rcu_per_second: 1.0, segments: 1, page: 100, progress: false };
        assert_eq!(days(&options(day(28), day(30))).unwrap(), vec![day(28), day(29), day(30)]);
        assert!(days(&options(day(30), day(28))).is_err());
    }
}

//! The PENDING list: a newest-first merge over every write shard of every
//! requested day.
//!
//! Each (day, shard) partition of GSI2 is already sorted by `GSI2SK`
//! (`<createdAt>#<orderId>`, unique per order), so a k-way merge on that key
//! gives one global order, and a page continues strictly after the last key it
//! returned: no order is repeated or skipped, whatever the spread.
//!
//! To read no more than a page needs, the newest day's partitions are first
//! read a few items each. An order's shard is uniform by hash, so a
//! partition holds a binomial share of the page: its expected share (from
//! the day's per-shard PENDING counters when they have been read lately,
//! else an even share) plus `SPREAD` standard deviations, and never more
//! than it is known to hold plus one (counts size only a page's first
//! round, so a stale one costs a round at most). Once the orders in hand number at
//! least what the page still needs, the worst of those best ones is a floor
//! the page cannot go below, and one more round reads, from each partition
//! that could hold keys above it, only the keys between that floor and what
//! the partition already gave. A partition whose unread keys all sort below
//! the best order in hand (an older day, say) is not read at all.
//!
//! Per-partition counts cannot make one round likely at a read cost near
//! the page (each partition must read one item past its part of the page to
//! show it is done, and the largest of N binomial shares sets the round):
//! so the first round is a key range when the day's pace is known. Each
//! page read without item filters leaves the day's pace (orders per
//! millisecond on the page, and the newest key a top page showed); for
//! `PACE_TTL` the next such page of that day first reads, from every partition,
//! the keys between its ceiling and a floor far enough below the top (the
//! newest key moved on by the time since it was seen, or the ceiling if
//! lower) to hold the page plus `PACED_SPREAD` standard deviations, each
//! query capped at the partition's share plus `PACED_CAP_SPREAD` sd. A guess
//! too high or too low costs reads or a second round, never exactness: the
//! floor becomes each partition's ceiling, as in the second round.
//!
//! Filters: "stuck only" is a key range (orders created before a moment), so
//! the index serves it; country, minimum total and customer are applied to
//! the items read (the index projects those attributes), so what they pass
//! over is read and counted in `items_read`. A page whose filter matches
//! little stops after `MAX_ROUNDS` rounds once it has an order to show, and
//! continues from there on the next page.

use super::{Store, reading, shard_count};
use crate::model::{PendingOrder, iso_millis};
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, GSI2, GSI2SK};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Days, NaiveDate, Utc};
use futures::future::try_join_all;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// Standard deviations of its binomial share of the page a partition is
/// read beyond its expected share when no pace is known: the trade-off
/// between items read and second rounds (BENCHMARKS.md, table 2: at a page of
/// 25 over 10 shards, 1 sd reads 1.70 items per item shown and always takes a
/// second round, 2 sd reads 2.42 and takes one in 30% of pages). Such a page
/// is the first of its day in a while, so its latency is what is chosen.
pub const SPREAD: f64 = 2.0;
/// The same, for the caps of a paced first round: high, since there the key
/// range, not the cap, is meant to end each read.
const PACED_CAP_SPREAD: f64 = 2.5;
/// Standard deviations of the page's size a paced first round's key range
/// is meant to hold beyond the page (orders arrive about as a Poisson process).
const PACED_SPREAD: f64 = 2.0;
/// How long a day's learned pace is used: a page read refreshes it.
pub(super) const PACE_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// Rounds a page takes at most once it holds an order (a filter that
/// matches little would otherwise read on and on): the page is then
/// shorter, and the next continues after it.
const MAX_ROUNDS: u32 = 8;

/// Which PENDING orders a page keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PendingFilter {
    /// Only orders created before this (the stuck ones): a key range.
    pub created_before: Option<DateTime<Utc>>,
    /// Applied to the items read.
    pub country: Option<String>,
    pub min_total: Option<i64>,
    pub customer: Option<String>,
}

impl PendingFilter {
    /// A filter keeps only what it can read to match: an order whose
    /// country, total or customer cannot be read is not kept by a filter on it.
    fn keeps(&self, order: &PendingOrder) -> bool {
        let country = order.shipping_country.as_deref();
        self.country.as_ref().is_none_or(|c| country.is_some_and(|country| country.eq_ignore_ascii_case(c)))
            && self.min_total.is_none_or(|min| order.total.is_some_and(|total| total >= min))
            && self.customer.as_ref().is_none_or(|c| order.customer_id.as_ref() == Some(c))
    }

    /// The key every kept order sorts below: `<createdAt>` alone sorts
    /// above every `<earlier>#<id>` and below `<createdAt>#<id>`.
    fn key_bound(&self) -> Option<String> {
        self.created_before.as_ref().map(iso_millis::format)
    }

    /// Whether every item read is kept: only then do items read measure the
    /// pace of the list.
    fn keeps_all(&self) -> bool {
        self.country.is_none() && self.min_total.is_none() && self.customer.is_none()
    }
}

/// How a page's first round is sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadPlan {
    /// Standard deviations of its share each partition is read beyond its
    /// expected share of the page.
    pub spread: f64,
    /// Whether the first round is a key range from the day's learned pace.
    pub paced: bool,
    /// A whole page from every partition (for comparison only).
    pub naive: bool,
}

impl Default for ReadPlan {
    fn default() -> Self {
        Self { spread: SPREAD, paced: true, naive: false }
    }
}

/// Items to ask one partition for so that it likely holds its part of
/// `needed` orders: it gets each of them with probability `share`, so its
/// part is binomial; its mean plus `spread` standard deviations, rounded up,
/// and at least one. A partition known to hold `held` orders in all is read
/// for all of them plus one, which ends it in one query.
pub fn share_size(needed: u32, share: f64, spread: f64, held: Option<u64>) -> u32 {
    let n = f64::from(needed);
    let share = share.clamp(0.0, 1.0);
    let size = (n * share + spread * (n * share * (1.0 - share)).sqrt()).ceil().max(1.0) as u32;
    match held {
        Some(held) if held < u64::from(size) => held as u32 + 1,
        _ => size,
    }
}

/// How fast a day's PENDING list runs, as the last page read of it showed.
#[derive(Clone, Debug, PartialEq)]
pub struct Pace {
    /// Orders per millisecond of `createdAt` on that page.
    pub per_ms: f64,
    /// The newest key a first page of the day showed, and when.
    pub newest: Option<(String, Instant)>,
}

/// The floor of a paced first round: far enough below the top of what the
/// partitions may hold to hold `needed` orders at `pace` with a margin. The
/// top is the newest key known, moved on by the time since it was seen (at
/// the pace, that time brought orders too), or `ceiling` when that is lower.
/// `None` when the floor reaches the start of the day (then there is nothing
/// to save) or the ceiling.
fn paced_floor(pace: &Pace, now: Instant, ceiling: &str, day_start: &str, needed: u32) -> Option<String> {
    let ceiling_at = || iso_millis::parse(ceiling.get(..24)?).ok();
    let top = match &pace.newest {
        Some((newest, seen)) if newest.as_str() < ceiling => {
            let since = chrono::Duration::from_std(now.saturating_duration_since(*seen).min(PACE_TTL)).ok()?;
            let moved = iso_millis::parse(newest.get(..24)?).ok()?.checked_add_signed(since)?;
            match ceiling_at() {
                Some(ceiling) if ceiling < moved => ceiling,
                _ => moved,
            }
        }
        _ => ceiling_at()?,
    };
    let target = f64::from(needed) + PACED_SPREAD * f64::from(needed).sqrt();
    if pace.per_ms.is_nan() || pace.per_ms <= 0.0 {
        return None;
    }
    let span = chrono::Duration::milliseconds((target / pace.per_ms).ceil().min(1e12) as i64);
    let floor = iso_millis::format(&top.checked_sub_signed(span)?);
    (floor.as_str() > day_start && floor.as_str() < ceiling).then_some(floor)
}

/// Days whose hints are kept.
const HINT_DAYS: u64 = 1_000;
/// How long per-shard counts are used after they were read: the dashboard
/// reads them every second or so; a stale count only sizes a read.
const COUNTS_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// How long per-shard counts say which shards beyond a day's count hold
/// orders (`shard_count::partitions`): an order another writer put on such
/// a shard is listed within this of the consumer counting it.
const COUNTED_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// What earlier reads left for sizing the next page's first round, and for
/// finding the shards beyond a day's count.
pub(super) struct Hints {
    counts: moka::sync::Cache<NaiveDate, Arc<[u64]>>,
    counted: moka::sync::Cache<NaiveDate, Arc<[u64]>>,
    paces: moka::sync::Cache<NaiveDate, Pace>,
}

impl Default for Hints {
    fn default() -> Self {
        Self {
            counts: moka::sync::Cache::builder().max_capacity(HINT_DAYS).time_to_live(COUNTS_TTL).build(),
            counted: moka::sync::Cache::builder().max_capacity(HINT_DAYS).time_to_live(COUNTED_TTL).build(),
            paces: moka::sync::Cache::builder().max_capacity(HINT_DAYS).time_to_live(PACE_TTL).build(),
        }
    }
}

impl Store {
    /// The day's PENDING orders per shard, as the counters were last read.
    fn pending_counts(&self, day: NaiveDate) -> Option<Arc<[u64]>> {
        self.pending_hints.counts.get(&day)
    }

    /// Keeps the day's per-shard counts the counters were just read at.
    pub(super) fn saw_pending_counts(&self, day: NaiveDate, per_shard: &[u64]) {
        let counts: Arc<[u64]> = per_shard.into();
        self.pending_hints.counts.insert(day, counts.clone());
        self.pending_hints.counted.insert(day, counts);
    }

    /// The day's PENDING orders per shard as counted at most `COUNTED_TTL`
    /// ago: read (one Query of the counter item and its sub-items) when no
    /// read of the counters left them that lately.
    pub(super) async fn counted_per_shard(&self, day: NaiveDate) -> Result<Arc<[u64]>, StoreError> {
        if let Some(counts) = self.pending_hints.counted.get(&day) {
            return Ok(counts);
        }
        let counts: Arc<[u64]> = self.read_per_shard(day).await?.into();
        self.pending_hints.counted.insert(day, counts.clone());
        Ok(counts)
    }

    fn pace(&self, day: NaiveDate) -> Option<Pace> {
        self.pending_hints.paces.get(&day)
    }

    /// A page's pace, and the day's newest key when the page was the top of
    /// the day (it was the newest just now); else the newest stays as known.
    fn learn_pace(&self, day: NaiveDate, per_ms: f64, newest: Option<String>) {
        let newest = match newest {
            Some(newest) => Some((newest, Instant::now())),
            None => self.pending_hints.paces.get(&day).and_then(|p| p.newest),
        };
        self.pending_hints.paces.insert(day, Pace { per_ms, newest });
    }

    /// Sets (or, with `None`, forgets) what the PENDING list's reads are
    /// sized by for `day`: for tests that pages stay exact whatever it says.
    #[doc(hidden)]
    pub fn hint_pending(&self, day: NaiveDate, per_shard: Option<&[u64]>, pace: Option<Pace>) {
        match per_shard {
            Some(counts) => self.saw_pending_counts(day, counts),
            None => self.pending_hints.counts.invalidate(&day),
        }
        match pace {
            Some(pace) => self.pending_hints.paces.insert(day, pace),
            None => self.pending_hints.paces.invalidate(&day),
        }
    }
}

pub struct PendingRead {
    pub orders: Vec<PendingOrder>,
    /// The sort key to continue after, when more orders may follow.
    pub next_after: Option<String>,
    /// Index items read, across every partition and round.
    pub items_read: u64,
    /// Rounds of parallel queries it took.
    pub rounds: u32,
}

struct Partition {
    day: NaiveDate,
    shard: u32,
    pk: String,
    /// Kept orders read and not yet placed on the page.
    buffer: VecDeque<(String, PendingOrder)>,
    /// Every unread key of this partition is below this one.
    ceiling: String,
    /// True once a query said nothing follows (no LastEvaluatedKey).
    exhausted: bool,
}

impl Partition {
    fn head(&self) -> Option<&str> {
        self.buffer.front().map(|(sk, _)| sk.as_str())
    }
}

/// What one Query of a partition gave.
struct Read {
    /// The kept items, newest first.
    kept: Vec<(String, PendingOrder)>,
    /// The last key read, kept or not: where the partition continues.
    last: Option<String>,
    more: bool,
    scanned: u64,
}

impl Store {
    /// One page of the PENDING orders of `days` (newest first) that
    /// `filter` keeps, after the sort key `after`.
    pub async fn pending_page(
        &self,
        days: &[NaiveDate],
        limit: u32,
        after: Option<&str>,
        filter: &PendingFilter,
    ) -> Result<PendingRead, StoreError> {
        let partitions = self.partitions(days, after, filter).await?;
        Merge::new(self, partitions, limit, filter, ReadPlan::default()).run(after).await
    }

    /// `pending_page` with another read plan, for the benchmark's trade-off table.
    #[cfg(feature = "testing")]
    pub async fn pending_page_with(
        &self,
        days: &[NaiveDate],
        limit: u32,
        after: Option<&str>,
        plan: ReadPlan,
    ) -> Result<PendingRead, StoreError> {
        let filter = PendingFilter::default();
        let partitions = self.partitions(days, after, &filter).await?;
        Merge::new(self, partitions, limit, &filter, plan).run(after).await
    }

    /// Every (day, shard) partition readers read (`shard_count::partitions`:
    /// each below the day's count, and each beyond it that the counters say
    /// holds an order), each capped at the end of its day, at the cursor and
    /// at the filter's key bound. A day the cursor or the bound has already
    /// gone below is not read.
    async fn partitions(
        &self,
        days: &[NaiveDate],
        after: Option<&str>,
        filter: &PendingFilter,
    ) -> Result<Vec<Partition>, StoreError> {
        let counts = self.day_shards(days).await?;
        let counted = try_join_all(days.iter().map(|day| self.counted_per_shard(*day))).await?;
        let bound = filter.key_bound();
        let mut partitions = Vec::new();
        for ((day, count), counted) in days.iter().zip(counts).zip(counted) {
            let shards = shard_count::partitions(count, &counted);
            let day_end = day.checked_add_days(Days::new(1)).map(keys::day_start).unwrap_or_else(|| "9".into());
            let ceiling = [Some(day_end), after.map(str::to_string), bound.clone()].into_iter().flatten().min();
            let ceiling = ceiling.expect("the day's end is always there");
            if ceiling <= keys::day_start(*day) {
                // Every key of the day sorts at or above its start: a cursor
                // or a bound before the day leaves nothing of it to read.
                continue;
            }
            for shard in shards {
                partitions.push(Partition {
                    day: *day,
                    shard,
                    pk: keys::pending_pk(*day, shard),
                    buffer: VecDeque::new(),
                    ceiling: ceiling.clone(),
                    exhausted: false,
                });
            }
        }
        Ok(partitions)
    }

    /// Up to `size` items of a partition below its ceiling (and, given a
    /// floor, not below it), newest first.
    async fn read_partition(
        &self,
        partition: &Partition,
        floor: Option<&str>,
        size: u32,
        filter: &PendingFilter,
    ) -> Result<Read, StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.orders_table)
            .index_name(GSI2)
            .expression_attribute_values(":p", AttributeValue::S(partition.pk.clone()))
            .scan_index_forward(false)
            .limit(size as i32);
        // BETWEEN is inclusive at both ends: just below the ceiling keeps the
        // key already read out of the answer.
        let query = match floor {
            Some(floor) => query
                .key_condition_expression("GSI2PK = :p AND GSI2SK BETWEEN :floor AND :below")
                .expression_attribute_values(":floor", AttributeValue::S(floor.to_string()))
                .expression_attribute_values(":below", AttributeValue::S(keys::just_below(&partition.ceiling))),
            None => query
                .key_condition_expression("GSI2PK = :p AND GSI2SK < :ceiling")
                .expression_attribute_values(":ceiling", AttributeValue::S(partition.ceiling.clone())),
        };
        let out = query.send().await?;
        let scanned = out.scanned_count().max(0) as u64;
        let more = out.last_evaluated_key().is_some_and(|k| !k.is_empty());
        let mut read = Read { kept: Vec::new(), last: None, more, scanned };
        for item in out.items.unwrap_or_default() {
            let sk = match item.get(GSI2SK) {
                Some(AttributeValue::S(sk)) => sk.clone(),
                _ => return Err(StoreError::Data(format!("a {} item has no {GSI2SK}", partition.pk))),
            };
            // Read as it is: a row another writer left incomplete is shown
            // with what it has, and says what it lacks.
            let order = reading::pending_row(&item);
            read.last = Some(sk.clone());
            if filter.keeps(&order) {
                read.kept.push((sk, order));
            }
        }
        Ok(read)
    }
}

/// One page being merged.
struct Merge<'a> {
    store: &'a Store,
    partitions: Vec<Partition>,
    filter: &'a PendingFilter,
    limit: u32,
    plan: ReadPlan,
    orders: Vec<PendingOrder>,
    first_key: Option<String>,
    last_key: Option<String>,
    items_read: u64,
    rounds: u32,
}

impl<'a> Merge<'a> {
    fn new(
        store: &'a Store,
        partitions: Vec<Partition>,
        limit: u32,
        filter: &'a PendingFilter,
        plan: ReadPlan,
    ) -> Self {
        let orders = Vec::with_capacity(limit as usize);
        Self {
            store,
            partitions,
            filter,
            limit,
            plan,
            orders,
            first_key: None,
            last_key: None,
            items_read: 0,
            rounds: 0,
        }
    }

    async fn run(mut self, after: Option<&str>) -> Result<PendingRead, StoreError> {
        while self.orders.len() < self.limit as usize {
            let best = best_partition(&self.partitions);
            let best_key = best.and_then(|i| self.partitions[i].head()).map(str::to_string);
            let blocking = blocking_partitions(&self.partitions, best_key.as_deref());
            if blocking.is_empty() {
                let Some(best) = best else { break };
                let (key, order) = self.partitions[best].buffer.pop_front().expect("best has a head");
                self.orders.push(order);
                self.first_key.get_or_insert_with(|| key.clone());
                self.last_key = Some(key);
                continue;
            }
            if self.rounds >= MAX_ROUNDS && !self.orders.is_empty() {
                // A shorter page; the next one continues after its last order.
                return Ok(self.finish(true));
            }
            self.rounds += 1;
            let needed = self.limit - self.orders.len() as u32;
            match floor_key(&self.partitions, needed as usize) {
                Some(floor) => self.floor_round(&floor, needed).await?,
                None => self.share_round(&blocking, needed).await?,
            }
        }
        let more = self.partitions.iter().any(|p| !p.buffer.is_empty() || !p.exhausted);
        self.learn_pace(after);
        Ok(self.finish(more))
    }

    fn finish(self, more: bool) -> PendingRead {
        PendingRead {
            orders: self.orders,
            next_after: if more { self.last_key } else { None },
            items_read: self.items_read,
            rounds: self.rounds,
        }
    }

    /// Leaves the day's pace for its next page: the orders shown per
    /// millisecond, and the newest key when this was the top of the day.
    fn learn_pace(&self, after: Option<&str>) {
        // Times from the keys the page was merged on: an order whose
        // `createdAt` cannot be read still has its key.
        let at = |key: &Option<String>| key.as_deref().and_then(keys::parse_timeline_sk).map(|(at, _)| at);
        let (Some(first), Some(last)) = (at(&self.first_key), at(&self.last_key)) else { return };
        let day = first.date_naive();
        let one_day = last.date_naive() == day;
        if !self.plan.paced || !self.filter.keeps_all() || self.orders.len() < 2 || !one_day {
            return;
        }
        let span_ms = (first - last).num_milliseconds().max(1) as f64;
        let per_ms = (self.orders.len() - 1) as f64 / span_ms;
        let top_of_day = after.is_none() && self.filter.created_before.is_none();
        self.store.learn_pace(day, per_ms, self.first_key.clone().filter(|_| top_of_day));
    }

    /// Enough orders are in hand that the page cannot reach below the
    /// `needed`-th best of them: read, from every partition that could hold
    /// keys above that floor, exactly the keys between the floor and what it
    /// has already given. Without a filter, this round settles the page.
    async fn floor_round(&mut self, floor: &str, needed: u32) -> Result<(), StoreError> {
        let targets: Vec<usize> = (0..self.partitions.len())
            .filter(|&i| !self.partitions[i].exhausted && self.partitions[i].ceiling.as_str() > floor)
            .collect();
        let sizes = vec![needed + 1; targets.len()];
        self.read_above(&targets, floor, &sizes).await
    }

    /// Reads `targets` between `floor` and their ceilings, each for at most
    /// its size. A partition that gave all it holds there continues below
    /// the floor; one that gave its size continues below its last key.
    async fn read_above(&mut self, targets: &[usize], floor: &str, sizes: &[u32]) -> Result<(), StoreError> {
        let (store, filter) = (self.store, self.filter);
        let reads = targets
            .iter()
            .zip(sizes)
            .map(|(&i, &size)| store.read_partition(&self.partitions[i], Some(floor), size, filter));
        for (i, read) in targets.iter().zip(try_join_all(reads).await?) {
            let partition = &mut self.partitions[*i];
            self.items_read += read.scanned;
            let ceiling = partition.ceiling.clone();
            partition.ceiling = match (read.more, read.last) {
                (true, Some(last)) => last,
                _ => floor.to_string(),
            };
            partition.buffer.extend(read.kept.into_iter().filter(|(sk, _)| *sk < ceiling));
        }
        Ok(())
    }

    /// Too few orders in hand: each partition of the day being read is
    /// read for its likely part of what is still needed (see `share_size`),
    /// or, on a page's first round when the day's pace is known, for the keys
    /// of a range that likely holds the page.
    async fn share_round(&mut self, blocking: &[usize], needed: u32) -> Result<(), StoreError> {
        let day = self.partitions[blocking[0]].day;
        let first = self.rounds == 1;
        if first && let Some(floor) = self.paced_floor(blocking, needed) {
            let target = needed + (PACED_SPREAD * f64::from(needed).sqrt()).ceil() as u32;
            let sizes = self.share_sizes(day, blocking, target, PACED_CAP_SPREAD, true);
            return self.read_above(blocking, &floor, &sizes).await;
        }
        let sizes = self.share_sizes(day, blocking, needed, self.plan.spread, first);
        let (store, filter) = (self.store, self.filter);
        let reads = blocking
            .iter()
            .zip(&sizes)
            .map(|(&i, &size)| store.read_partition(&self.partitions[i], None, size, filter));
        for (i, read) in blocking.iter().zip(try_join_all(reads).await?) {
            let partition = &mut self.partitions[*i];
            self.items_read += read.scanned;
            // An empty answer with a LastEvaluatedKey would not move the
            // ceiling; treating it as the end keeps the loop finite.
            partition.exhausted = !read.more || read.last.is_none();
            if let Some(last) = read.last {
                partition.ceiling = last;
            }
            partition.buffer.extend(read.kept);
        }
        Ok(())
    }

    /// The floor of a paced first round over `blocking` (every partition of
    /// the newest day, all at one ceiling), when the day's pace is known.
    fn paced_floor(&self, blocking: &[usize], needed: u32) -> Option<String> {
        let first = &self.partitions[blocking[0]];
        let same_ceiling = blocking.iter().all(|&i| self.partitions[i].ceiling == first.ceiling);
        if !self.plan.paced || self.plan.naive || !self.filter.keeps_all() || !same_ceiling {
            return None;
        }
        let pace = self.store.pace(first.day)?;
        paced_floor(&pace, Instant::now(), &first.ceiling, &keys::day_start(first.day), needed)
    }

    /// What each of `blocking` (partitions of `day`) is read for: its likely
    /// part of `needed`. On a page's first round that is by the day's
    /// per-shard counts when read lately; else, and in later rounds (where a
    /// stale count, which caps a read, must not cost round after round), an
    /// even share among the day's partitions not yet exhausted.
    fn share_sizes(&self, day: NaiveDate, blocking: &[usize], needed: u32, spread: f64, by_counts: bool) -> Vec<u32> {
        if self.plan.naive {
            return vec![self.limit; blocking.len()];
        }
        let live = self.partitions.iter().filter(|p| p.day == day && !(p.exhausted && p.buffer.is_empty())).count();
        let counts = by_counts.then(|| self.store.pending_counts(day)).flatten();
        let counts = counts.as_deref().map(|c| (c, c.iter().sum::<u64>())).filter(|(_, total)| *total > 0);
        blocking
            .iter()
            .map(|&i| {
                let shard = self.partitions[i].shard as usize;
                match counts.and_then(|(c, total)| Some((*c.get(shard)?, total))) {
                    Some((held, total)) => share_size(needed, held as f64 / total as f64, spread, Some(held)),
                    None => share_size(needed, 1.0 / live.max(1) as f64, spread, None),
                }
            })
            .collect()
    }
}

/// The `needed`-th best key in hand, when that many are in hand.
fn floor_key(partitions: &[Partition], needed: usize) -> Option<String> {
    let mut keys: Vec<&str> = partitions.iter().flat_map(|p| p.buffer.iter().map(|(sk, _)| sk.as_str())).collect();
    if needed == 0 || keys.len() < needed {
        return None;
    }
    keys.sort_unstable_by(|a, b| b.cmp(a));
    Some(keys[needed - 1].to_string())
}

/// The partition holding the newest unread order in hand.
fn best_partition(partitions: &[Partition]) -> Option<usize> {
    partitions
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.head().map(|head| (i, head)))
        .max_by(|a, b| a.1.cmp(b.1))
        .map(|(i, _)| i)
}

/// The partitions to read before the next order can be chosen: those with
/// nothing in hand that could still hold a key above the best one in hand.
/// With nothing in hand at all, the newest day's partitions: older days'
/// keys all sort below them.
fn blocking_partitions(partitions: &[Partition], best: Option<&str>) -> Vec<usize> {
    let unread = |p: &Partition| p.buffer.is_empty() && !p.exhausted;
    let newest_day = match best {
        Some(_) => None,
        None => partitions.iter().filter(|p| unread(p)).map(|p| p.day).max(),
    };
    partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            unread(p)
                && match best {
                    Some(best) => p.ceiling.as_str() > best,
                    None => Some(p.day) == newest_day,
                }
        })
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_share_is_its_binomial_mean_plus_spread_deviations() {
        // 25 orders, a tenth each: mean 2.5, sd 1.5.
        assert_eq!(share_size(25, 0.1, 0.0, None), 3);
        assert_eq!(share_size(25, 0.1, 1.0, None), 4);
        assert_eq!(share_size(25, 0.1, 2.0, None), 6);
        // One partition holds everything: no spread, the whole page.
        assert_eq!(share_size(25, 1.0, 2.0, None), 25);
        // Never nothing, and a share out of range is clamped.
        assert_eq!(share_size(0, 0.1, 1.0, None), 1);
        assert_eq!(share_size(25, 0.0, 1.0, None), 1);
        assert_eq!(share_size(25, 7.0, 1.0, None), 25);
        assert_eq!(share_size(25, -1.0, 1.0, None), 1);
    }

    #[test]
    fn a_share_is_capped_at_what_the_partition_is_known_to_hold_plus_one() {
        assert_eq!(share_size(25, 0.1, 1.0, Some(2)), 3);
        assert_eq!(share_size(25, 0.1, 1.0, Some(0)), 1);
        assert_eq!(share_size(25, 0.1, 1.0, Some(4)), 4);
        assert_eq!(share_size(25, 0.1, 1.0, Some(1_000)), 4);
    }

    const DAY_START: &str = "2026-03-14T00:00:00.000Z";
    const DAY_END: &str = "2026-03-15T00:00:00.000Z";

    fn pace(per_ms: f64, newest: Option<(&str, Instant)>) -> Pace {
        Pace { per_ms, newest: newest.map(|(k, at)| (k.to_string(), at)) }
    }

    #[test]
    fn a_paced_floor_holds_the_page_and_a_margin_at_the_pace() {
        let now = Instant::now();
        // One order a second: 25 + 2·5 = 35 seconds below the newest key.
        let p = pace(0.001, Some(("2026-03-14T12:00:00.000Z#o-1", now)));
        assert_eq!(paced_floor(&p, now, DAY_END, DAY_START, 25).as_deref(), Some("2026-03-14T11:59:25.000Z"));
        // A cursor below the newest key is the top.
        let after = "2026-03-14T10:00:00.000Z#o-9";
        assert_eq!(paced_floor(&p, now, after, DAY_START, 25).as_deref(), Some("2026-03-14T09:59:25.000Z"));
        // Without a newest key, the day's end is the top.
        let p = pace(0.001, None);
        assert_eq!(paced_floor(&p, now, DAY_END, DAY_START, 25).as_deref(), Some("2026-03-14T23:59:25.000Z"));
    }

    #[test]
    fn a_paced_floor_moves_on_with_the_time_since_the_newest_key_was_seen() {
        let seen = Instant::now();
        let p = pace(0.001, Some(("2026-03-14T12:00:00.000Z#o-1", seen)));
        let later = seen + Duration::from_secs(10);
        assert_eq!(paced_floor(&p, later, DAY_END, DAY_START, 25).as_deref(), Some("2026-03-14T11:59:35.000Z"));
        // Never beyond the ceiling, and never more than the pace lives.
        let ceiling = "2026-03-14T12:00:05.000Z";
        assert_eq!(paced_floor(&p, later, ceiling, DAY_START, 25).as_deref(), Some("2026-03-14T11:59:30.000Z"));
        let much_later = seen + PACE_TTL * 10;
        let expected = format!("2026-03-14T12:00:{:02}.000Z", PACE_TTL.as_secs() - 35);
        assert_eq!(paced_floor(&p, much_later, DAY_END, DAY_START, 25), Some(expected));
    }

    #[test]
    fn a_paced_floor_that_saves_nothing_is_none() {
        let now = Instant::now();
        // So slow that the range reaches the start of the day.
        let p = pace(1e-7, Some(("2026-03-14T12:00:00.000Z#o-1", now)));
        assert_eq!(paced_floor(&p, now, DAY_END, DAY_START, 25), None);
        // No pace at all, or a ceiling that is no time.
        assert_eq!(paced_floor(&pace(0.0, None), now, DAY_END, DAY_START, 25), None);
        assert_eq!(paced_floor(&pace(f64::NAN, None), now, DAY_END, DAY_START, 25), None);
        assert_eq!(paced_floor(&pace(0.001, None), now, "9", DAY_START, 25), None);
    }
}

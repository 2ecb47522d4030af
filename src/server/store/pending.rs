//! The PENDING list: a newest-first merge over every write shard of every
//! requested day.
//!
//! Each (day, shard) partition of GSI2 is already sorted by `GSI2SK`
//! (`<createdAt>#<orderId>`, unique per order), so a k-way merge on that key
//! gives one global order, and a page continues strictly after the last key it
//! returned: no order is repeated or skipped, whatever the spread.
//!
//! To read no more than a page needs, the newest day's partitions are first
//! read a few items each (an even share of the page, plus a margin). Once the
//! orders in hand number at least what the page still needs, the worst of
//! those best ones is a floor the page cannot go below, and one more round
//! reads, from each partition that could hold keys above it, only the keys
//! between that floor and what the partition already gave. So a page takes
//! two rounds at most in the common case, and reads little beyond what it
//! shows. A partition whose unread keys all sort below the best order in hand
//! (an older day, say) is not read at all.
//!
//! Filters: "stuck only" is a key range (orders created before a moment), so
//! the index serves it; country, minimum total and customer are applied to
//! the items read (the index projects those attributes), so what they pass
//! over is read and counted in `items_read`. A page whose filter matches
//! little stops after `MAX_ROUNDS` rounds once it has an order to show, and
//! continues from there on the next page.

use super::Store;
use crate::model::{PendingOrder, iso_millis};
use crate::server::error::StoreError;
use crate::server::keys::{self, GSI2, GSI2SK};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Days, NaiveDate, Utc};
use futures::future::try_join_all;
use std::collections::VecDeque;

/// Extra items read per partition beyond its even share of what is still
/// needed: fewer second rounds for a small over-read.
const READ_MARGIN: u32 = 2;
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
    fn keeps(&self, order: &PendingOrder) -> bool {
        self.country.as_ref().is_none_or(|c| order.shipping_country.eq_ignore_ascii_case(c))
            && self.min_total.is_none_or(|min| order.total >= min)
            && self.customer.as_ref().is_none_or(|c| &order.customer_id == c)
    }

    /// The key every kept order sorts below: `<createdAt>` alone sorts
    /// above every `<earlier>#<id>` and below `<createdAt>#<id>`.
    fn key_bound(&self) -> Option<String> {
        self.created_before.as_ref().map(iso_millis::format)
    }
}

/// How each partition is read: its even share of what the page still needs
/// plus `margin` items, or (`naive`) a whole page from every partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    pub margin: u32,
    pub naive: bool,
}

impl Default for ReadPlan {
    fn default() -> Self {
        Self { margin: READ_MARGIN, naive: false }
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
        Merge::new(self, partitions, limit, filter, ReadPlan::default()).run().await
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
        Merge::new(self, partitions, limit, &filter, plan).run().await
    }

    /// Every (day, shard) partition, each capped at the end of its day, at
    /// the cursor and at the filter's key bound. A day nothing PENDING was
    /// ever written to has no shard count recorded and is not read at all.
    async fn partitions(
        &self,
        days: &[NaiveDate],
        after: Option<&str>,
        filter: &PendingFilter,
    ) -> Result<Vec<Partition>, StoreError> {
        let counts = self.recorded_shards(days).await?;
        let bound = filter.key_bound();
        let mut partitions = Vec::new();
        for (day, shards) in days.iter().zip(counts).filter_map(|(d, n)| Some((d, n?))) {
            let day_end = day
                .checked_add_days(Days::new(1))
                .map(|next| format!("{}T00:00:00.000Z", next.format("%Y-%m-%d")))
                .unwrap_or_else(|| "9".into());
            let ceiling = [Some(day_end), after.map(str::to_string), bound.clone()].into_iter().flatten().min();
            let ceiling = ceiling.expect("the day's end is always there");
            for shard in 0..shards {
                partitions.push(Partition {
                    day: *day,
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
        for mut item in out.items.unwrap_or_default() {
            let sk = match item.remove(GSI2SK) {
                Some(AttributeValue::S(sk)) => sk,
                _ => return Err(StoreError::Data(format!("a {} item has no {GSI2SK}", partition.pk))),
            };
            let order: PendingOrder = serde_dynamo::from_item(item)?;
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
        Self { store, partitions, filter, limit, plan, orders, last_key: None, items_read: 0, rounds: 0 }
    }

    async fn run(mut self) -> Result<PendingRead, StoreError> {
        while self.orders.len() < self.limit as usize {
            let best = best_partition(&self.partitions);
            let best_key = best.and_then(|i| self.partitions[i].head()).map(str::to_string);
            let blocking = blocking_partitions(&self.partitions, best_key.as_deref());
            if blocking.is_empty() {
                let Some(best) = best else { break };
                let (key, order) = self.partitions[best].buffer.pop_front().expect("best has a head");
                self.orders.push(order);
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

    /// Enough orders are in hand that the page cannot reach below the
    /// `needed`-th best of them: read, from every partition that could hold
    /// keys above that floor, exactly the keys between the floor and what it
    /// has already given. Without a filter, this round settles the page.
    async fn floor_round(&mut self, floor: &str, needed: u32) -> Result<(), StoreError> {
        let targets: Vec<usize> = (0..self.partitions.len())
            .filter(|&i| !self.partitions[i].exhausted && self.partitions[i].ceiling.as_str() > floor)
            .collect();
        let (store, filter) = (self.store, self.filter);
        let reads = targets.iter().map(|&i| store.read_partition(&self.partitions[i], Some(floor), needed + 1, filter));
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
    /// expected to hold an even share of what is still needed; reading that
    /// much (plus a margin) keeps the over-read small.
    async fn share_round(&mut self, blocking: &[usize], needed: u32) -> Result<(), StoreError> {
        let day = self.partitions[blocking[0]].day;
        let live = self.partitions.iter().filter(|p| p.day == day && !(p.exhausted && p.buffer.is_empty())).count();
        let size = if self.plan.naive { self.limit } else { needed.div_ceil(live.max(1) as u32) + self.plan.margin };
        let (store, filter) = (self.store, self.filter);
        let reads = blocking.iter().map(|&i| store.read_partition(&self.partitions[i], None, size, filter));
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

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

use super::Store;
use crate::model::PendingOrder;
use crate::server::error::StoreError;
use crate::server::keys::{self, GSI2, GSI2SK};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Days, NaiveDate};
use futures::future::try_join_all;
use std::collections::VecDeque;

/// Extra items read per partition beyond its even share of what is still
/// needed: fewer second rounds for a small over-read.
const READ_MARGIN: u32 = 2;

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

impl Store {
    /// One page of the PENDING orders of `days` (newest first), after the
    /// sort key `after`.
    pub async fn pending_page(
        &self,
        days: &[NaiveDate],
        limit: u32,
        after: Option<&str>,
    ) -> Result<PendingRead, StoreError> {
        self.merge_pending(days, limit, after, ReadPlan::default()).await
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
        self.merge_pending(days, limit, after, plan).await
    }

    async fn merge_pending(
        &self,
        days: &[NaiveDate],
        limit: u32,
        after: Option<&str>,
        plan: ReadPlan,
    ) -> Result<PendingRead, StoreError> {
        let mut partitions = self.partitions(days, after).await?;
        let mut orders = Vec::with_capacity(limit as usize);
        let mut last_key = None;
        let (mut items_read, mut rounds) = (0u64, 0u32);
        while orders.len() < limit as usize {
            let best = best_partition(&partitions);
            let best_key = best.and_then(|i| partitions[i].head()).map(str::to_string);
            let blocking = blocking_partitions(&partitions, best_key.as_deref());
            if blocking.is_empty() {
                let Some(best) = best else { break };
                let (key, order) = partitions[best].buffer.pop_front().expect("best has a head");
                orders.push(order);
                last_key = Some(key);
                continue;
            }
            let needed = limit - orders.len() as u32;
            rounds += 1;
            if let Some(floor) = floor_key(&partitions, needed as usize) {
                // Enough orders are in hand that the page cannot reach below the
                // `needed`-th best of them: read, from every partition that could
                // hold keys above that floor, exactly the keys between the floor
                // and what it has already given. This round settles the page.
                let targets: Vec<usize> = partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| !p.exhausted && p.ceiling.as_str() > floor.as_str())
                    .map(|(i, _)| i)
                    .collect();
                let reads = targets.iter().map(|&i| self.read_partition(&partitions[i], Some(&floor), needed + 1));
                for (i, (items, more_in_range, scanned)) in targets.iter().zip(try_join_all(reads).await?) {
                    let partition = &mut partitions[*i];
                    items_read += scanned;
                    let ceiling = partition.ceiling.clone();
                    let fresh: Vec<_> = items.into_iter().filter(|(sk, _)| *sk < ceiling).collect();
                    partition.ceiling = match (more_in_range, fresh.last()) {
                        (true, Some((sk, _))) => sk.clone(),
                        _ => floor.clone(),
                    };
                    partition.buffer.extend(fresh);
                }
                continue;
            }
            // Too few orders in hand: each partition of the day being read is
            // expected to hold an even share of what is still needed; reading
            // that much (plus a margin) keeps the over-read small.
            let day = partitions[blocking[0]].day;
            let live =
                partitions.iter().filter(|p| p.day == day && !(p.exhausted && p.buffer.is_empty())).count().max(1)
                    as u32;
            let size = if plan.naive { limit } else { needed.div_ceil(live) + plan.margin };
            let reads = blocking.iter().map(|&i| self.read_partition(&partitions[i], None, size));
            for (i, (items, more, scanned)) in blocking.iter().zip(try_join_all(reads).await?) {
                let partition = &mut partitions[*i];
                items_read += scanned;
                // An empty answer with a LastEvaluatedKey would not move the
                // ceiling; treating it as the end keeps the loop finite.
                partition.exhausted = !more || items.is_empty();
                if let Some((sk, _)) = items.last() {
                    partition.ceiling = sk.clone();
                }
                partition.buffer.extend(items);
            }
        }
        let more = partitions.iter().any(|p| !p.buffer.is_empty() || !p.exhausted);
        Ok(PendingRead { orders, next_after: if more { last_key } else { None }, items_read, rounds })
    }

    /// Every (day, shard) partition, each capped at the end of its day and at
    /// the cursor.
    /// A day nothing PENDING was ever written to has no shard count recorded
    /// and is not read at all.
    async fn partitions(&self, days: &[NaiveDate], after: Option<&str>) -> Result<Vec<Partition>, StoreError> {
        let counts = self.recorded_shards(days).await?;
        let mut partitions = Vec::new();
        for (day, shards) in days.iter().zip(counts).filter_map(|(d, n)| Some((d, n?))) {
            let day_end = day
                .checked_add_days(Days::new(1))
                .map(|next| format!("{}T00:00:00.000Z", next.format("%Y-%m-%d")))
                .unwrap_or_else(|| "9".into());
            let ceiling = match after {
                Some(after) if after < day_end.as_str() => after.to_string(),
                _ => day_end,
            };
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
    /// floor, not below it), newest first; and whether more may follow.
    async fn read_partition(
        &self,
        partition: &Partition,
        floor: Option<&str>,
        size: u32,
    ) -> Result<(Vec<(String, PendingOrder)>, bool, u64), StoreError> {
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
        let items = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|mut item| {
                let sk = match item.remove(GSI2SK) {
                    Some(AttributeValue::S(sk)) => sk,
                    _ => return Err(StoreError::Data(format!("a {} item has no {GSI2SK}", partition.pk))),
                };
                Ok((sk, serde_dynamo::from_item(item)?))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((items, more, scanned))
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

//! Reading the counters the stream consumer keeps, with the verdicts of the
//! last reconciliations.

use super::reconcile::{Verdict, refused_of, verdict_of};
use super::{Item, Store};
use crate::model::{DayCounts, Status};
use crate::server::store::deltas::Key;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use chrono::NaiveDate;
use std::collections::{BTreeMap, HashMap};

/// A day's counter items as stored: signed, since a repair may pass through
/// negative values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub date: NaiveDate,
    /// Whether the consumer has written any PENDING counter for the day.
    pub exists: bool,
    pub pending: i64,
    pub per_shard: Vec<i64>,
    pub created: i64,
    pub per_status: BTreeMap<Status, i64>,
    /// Per minute of the day (1440 each): created, entered PENDING, left PENDING.
    pub created_per_minute: Vec<i64>,
    pub entered_per_minute: Vec<i64>,
    pub left_per_minute: Vec<i64>,
    /// What the last reconciliation of the PENDING counters found.
    pub pending_verdict: Option<Verdict>,
    /// What the last full reconciliation (`created`, per status, per minute) found.
    pub daily_verdict: Option<Verdict>,
    /// Why the last reconciliation of the PENDING counters refused, and when
    /// (until one judges them).
    pub pending_refused: Option<(chrono::DateTime<chrono::Utc>, crate::model::ReconcileRefusal)>,
    /// The PENDING item's `version` (see `attr::VERSION`).
    pub version: i64,
}

/// A day's `version` as one strongly consistent read found it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VersionRead {
    pub version: i64,
    /// Read capacity units the read consumed, when the engine says.
    pub units: Option<f64>,
}

impl Counters {
    /// The figures as shown: clamped to zero, here and nowhere else.
    pub fn day_counts(&self) -> DayCounts {
        let clamp = |n: i64| n.max(0) as u64;
        DayCounts {
            date: self.date,
            counted: self.exists,
            pending: clamp(self.pending),
            per_shard: self.per_shard.iter().copied().map(clamp).collect(),
            created: clamp(self.created),
            per_status: self.per_status.iter().map(|(s, n)| (*s, clamp(*n))).collect(),
        }
    }
}

impl Store {
    pub async fn read_counters(&self, day: NaiveDate) -> Result<Counters, StoreError> {
        let (pending, daily, minutes, shards) = futures::try_join!(
            self.counter_items(keys::metric_pending_key(day), true, None),
            self.counter_items(keys::metric_day_key(day), false, None),
            self.minute_items(day),
            self.shards_for(day),
        )?;
        let counters = counters(day, pending, daily, minutes, shards);
        self.saw_counts(&counters.day_counts());
        Ok(counters)
    }

    /// Every minute counter item of `day` (the hours', their sub-items, and
    /// the whole-day item versions before the split wrote): one paginated
    /// Query of their partition, summed by the reader.
    async fn minute_items(&self, day: NaiveDate) -> Result<Vec<Item>, StoreError> {
        self.metrics_partition(keys::metric_minutes_pk(day), false).await
    }

    /// A live counter item and its sub-items (`keys::COUNTER_SUBS`): one
    /// Query of the sort keys that begin with the item's (a few hundred
    /// bytes each), only `projection` of each when given.
    async fn counter_items(&self, key: Key, consistent: bool, projection: Option<&str>) -> Result<Summed, StoreError> {
        Ok(self.counter_items_read(key, consistent, projection).await?.0)
    }

    /// `counter_items`, and the read units the Query consumed (where the
    /// engine says).
    async fn counter_items_read(
        &self,
        key: Key,
        consistent: bool,
        projection: Option<&str>,
    ) -> Result<(Summed, Option<f64>), StoreError> {
        let (pk, sk) = key.clone();
        let query = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :sk)")
            .expression_attribute_names("#pk", keys::PK)
            .expression_attribute_names("#sk", keys::SK)
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .expression_attribute_values(":sk", AttributeValue::S(sk))
            .consistent_read(consistent)
            .limit(COUNTER_PAGE)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        let query = match projection {
            Some(attribute) => {
                query.projection_expression("#sk, #projected").expression_attribute_names("#projected", attribute)
            }
            None => query,
        };
        let mut pages = query.into_paginator().send();
        let (mut items, mut units) = (Vec::new(), None::<f64>);
        while let Some(page) = pages.next().await {
            let page = page?;
            if let Some(used) = page.consumed_capacity.and_then(|c| c.capacity_units) {
                units = Some(units.unwrap_or(0.0) + used);
            }
            items.extend(page.items.unwrap_or_default());
        }
        Ok((Summed::of(&key, items), units))
    }

    /// The day's PENDING orders per shard, as the counter item and its
    /// sub-items say now (eventually consistent: a second's staleness only
    /// delays a shard beyond the count on the list), every shard that
    /// holds one included (`shard_count`).
    pub(super) async fn read_per_shard(&self, day: NaiveDate) -> Result<Vec<u64>, StoreError> {
        let (pending, count) =
            futures::try_join!(self.counter_items(keys::metric_pending_key(day), false, None), self.shards_for(day))?;
        Ok(per_shard(&pending, count).into_iter().map(|n| n.max(0) as u64).collect())
    }

    /// Leaves the per-shard PENDING counts for sizing the list's reads.
    fn saw_counts(&self, counts: &DayCounts) {
        if counts.counted {
            self.saw_pending_counts(counts.date, &counts.per_shard);
        }
    }

    /// The figures a dashboard's headline shows (no per-minute history, the
    /// largest counter item) and the day's `version`: what live pushes send,
    /// read consistently, since a push must show the change it announces.
    pub async fn read_day_counts(&self, day: NaiveDate) -> Result<(DayCounts, i64), StoreError> {
        let (pending, daily, shards) = futures::try_join!(
            self.counter_items(keys::metric_pending_key(day), true, None),
            self.counter_items(keys::metric_day_key(day), true, None),
            self.shards_for(day),
        )?;
        let counters = counters(day, pending, daily, Vec::new(), shards);
        let counts = counters.day_counts();
        self.saw_counts(&counts);
        Ok((counts, counters.version))
    }

    /// The day's `version`: one strongly consistent Query of the PENDING
    /// counter item and its sub-items, their `version` only (a few hundred
    /// bytes each: a read unit or two), whatever the day's traffic. 0 for a
    /// day nothing has been counted on.
    pub async fn counters_version(&self, day: NaiveDate) -> Result<VersionRead, StoreError> {
        let (summed, units) = self.counter_items_read(keys::metric_pending_key(day), true, Some(attr::VERSION)).await?;
        Ok(VersionRead { version: summed.number(attr::VERSION), units })
    }
}

/// Items of a counter partition a page holds: an item and its sixteen
/// sub-items fit one.
const COUNTER_PAGE: i32 = 100;

/// A live counter item read with its sub-items: the item itself (its
/// verdict, whether it was ever written) and the sums of their numbers. A
/// counter that is not a number (another tool's text) counts as nothing.
#[derive(Clone, Debug, Default)]
struct Summed {
    main: Option<Item>,
    exists: bool,
    sums: HashMap<String, i64>,
}

impl Summed {
    fn of(key: &Key, items: Vec<Item>) -> Summed {
        let mut summed = Summed::default();
        for item in items {
            let sk = item.get(keys::SK).and_then(|v| v.as_s().ok()).map(String::as_str).unwrap_or_default();
            let main = sk == key.1;
            // Only the item and its own sub-items (`COUNT#S07`, not `COUNTX`).
            let sub = sk.starts_with(&key.1) && keys::is_counter_sub_sk(sk);
            if !(main || sub) {
                continue;
            }
            for (name, value) in &item {
                if let Some(n) = value.as_n().ok().and_then(|n| n.parse::<i64>().ok()) {
                    *summed.sums.entry(name.clone()).or_default() += n;
                }
            }
            summed.exists = true;
            if main {
                summed.main = Some(item);
            }
        }
        summed
    }

    fn number(&self, attribute: &str) -> i64 {
        self.sums.get(attribute).copied().unwrap_or(0)
    }
}

/// PENDING orders per shard: every shard below the day's count, and every
/// one beyond it the counter names (a writer that used another count), the
/// shards between them at 0.
fn per_shard(pending: &Summed, count: u32) -> Vec<i64> {
    let named = pending.sums.keys().filter_map(|name| keys::parse_shard_attribute(name));
    let highest = named.filter(|shard| pending.number(&keys::shard_attribute(*shard)) != 0).max();
    let len = highest.map_or(count, |shard| count.max(shard + 1));
    (0..len).map(|s| pending.number(&keys::shard_attribute(s))).collect()
}

fn counters(day: NaiveDate, pending: Summed, daily: Summed, minutes: Vec<Item>, shards: u32) -> Counters {
    let per_minute = |kind: char| {
        let mut figures = vec![0; 1440];
        for (name, value) in minutes.iter().flatten() {
            if let Some((k, minute)) = keys::parse_minute_attribute(name)
                && k == kind
            {
                figures[minute as usize] += value.as_n().ok().and_then(|n| n.parse::<i64>().ok()).unwrap_or(0);
            }
        }
        figures
    };
    Counters {
        date: day,
        exists: pending.exists,
        pending: pending.number(attr::PENDING),
        per_shard: per_shard(&pending, shards),
        created: daily.number(attr::CREATED),
        per_status: Status::ALL.iter().map(|s| (*s, daily.number(&keys::status_attribute(s.as_str())))).collect(),
        created_per_minute: per_minute('c'),
        entered_per_minute: per_minute('e'),
        left_per_minute: per_minute('l'),
        pending_verdict: pending.main.as_ref().and_then(verdict_of),
        daily_verdict: daily.main.as_ref().and_then(verdict_of),
        pending_refused: pending.main.as_ref().and_then(refused_of),
        version: pending.number(attr::VERSION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, i64)]) -> Item {
        pairs.iter().map(|(name, n)| (name.to_string(), AttributeValue::N(n.to_string()))).collect()
    }

    fn keyed(sk: &str, pairs: &[(&str, i64)]) -> Item {
        let mut item = item(pairs);
        item.insert(keys::SK.to_string(), AttributeValue::S(sk.to_string()));
        item
    }

    #[test]
    fn a_counter_is_its_item_and_its_sub_items_summed() {
        let day = NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
        let key = keys::metric_pending_key(day);
        let sub = |n| keys::counter_sub_key(&key, n).unwrap().1;
        let mut text = keyed(&sub(9), &[("pending", 1)]);
        text.insert("shard0".into(), AttributeValue::S("lots".into()));
        let items = vec![
            keyed(&key.1, &[("pending", 3), ("shard0", 3), ("version", 10)]),
            keyed(&sub(2), &[("pending", 2), ("shard1", 2), ("version", 4)]),
            keyed(&sub(15), &[("pending", -1), ("shard0", -1), ("version", 1)]),
            text,
            // Not this item's: another sort key that begins the same.
            keyed(&format!("{}X", key.1), &[("pending", 100)]),
        ];
        let counters = counters(day, Summed::of(&key, items), Summed::default(), Vec::new(), 2);
        assert!(counters.exists);
        assert_eq!((counters.pending, counters.per_shard.clone(), counters.version), (5, vec![2, 2], 15));
        // Only sub-items, written before any repair: counted, no verdict.
        let only_subs = Summed::of(&key, vec![keyed(&sub(4), &[("pending", 1)])]);
        assert!(only_subs.exists && only_subs.main.is_none() && only_subs.number("pending") == 1);
        assert!(!Summed::of(&key, Vec::new()).exists);
    }

    #[test]
    fn minute_figures_are_summed_over_the_hours_and_the_old_whole_day_item() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        // Counted before the split (the whole-day item), then after it: an
        // order of 10:15 removed after the upgrade takes its hour's item to -1.
        let whole_day = item(&[("c1015", 3), ("e1015", 3), ("l2359", 1)]);
        let hours = [item(&[("c1015", -1), ("c1016", 2)]), item(&[("l2359", 4), ("e2300", 1)])];
        let minutes = [vec![whole_day], hours.to_vec()].concat();
        let counters = counters(day, Summed::default(), Summed::default(), minutes, 4);
        assert_eq!(counters.created_per_minute[615], 2);
        assert_eq!(counters.created_per_minute[616], 2);
        assert_eq!(counters.entered_per_minute[615], 3);
        assert_eq!(counters.entered_per_minute[1380], 1);
        assert_eq!(counters.left_per_minute[1439], 5);
        assert_eq!(counters.created_per_minute.iter().sum::<i64>(), 4);
        assert_eq!(counters.left_per_minute.len(), 1440);
    }
}

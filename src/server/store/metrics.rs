//! Reading the counters the stream consumer keeps, with the verdicts of the
//! last reconciliations.

use super::reconcile::{Verdict, verdict_of};
use super::{Item, Store};
use crate::model::{DayCounts, Status};
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use chrono::NaiveDate;
use std::collections::BTreeMap;

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

fn number(item: &Item, attribute: &str) -> i64 {
    item.get(attribute).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Store {
    pub async fn read_counters(&self, day: NaiveDate) -> Result<Counters, StoreError> {
        let (pending, daily, minutes, shards) = futures::try_join!(
            self.metric_item(keys::metric_pending_key(day), true),
            self.metric_item(keys::metric_day_key(day), false),
            self.minute_items(day),
            self.shards_for(day),
        )?;
        let counters = counters(day, pending, daily, minutes, shards);
        self.saw_counts(&counters.day_counts());
        Ok(counters)
    }

    /// Every minute counter item of `day` (the hours', and the whole-day
    /// item versions before the split wrote, 25 at most): one paginated
    /// Query of their partition.
    async fn minute_items(&self, day: NaiveDate) -> Result<Vec<Item>, StoreError> {
        self.metrics_partition(keys::metric_minutes_pk(day), false).await
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
            self.metric_item(keys::metric_pending_key(day), true),
            self.metric_item(keys::metric_day_key(day), true),
            self.shards_for(day),
        )?;
        let counters = counters(day, pending, daily, Vec::new(), shards);
        let counts = counters.day_counts();
        self.saw_counts(&counts);
        Ok((counts, counters.version))
    }

    /// The day's `version`: one strongly consistent GetItem of the PENDING
    /// counter item (a few hundred bytes: one read unit), whatever the day's
    /// traffic. 0 for a day nothing has been counted on.
    pub async fn counters_version(&self, day: NaiveDate) -> Result<VersionRead, StoreError> {
        let (pk, sk) = keys::metric_pending_key(day);
        let out = self
            .client
            .get_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .consistent_read(true)
            .projection_expression("#version")
            .expression_attribute_names("#version", attr::VERSION)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        Ok(VersionRead {
            version: out.item.as_ref().map_or(0, |item| number(item, attr::VERSION)),
            units: out.consumed_capacity.and_then(|c| c.capacity_units),
        })
    }
}

fn counters(day: NaiveDate, pending: Option<Item>, daily: Option<Item>, minutes: Vec<Item>, shards: u32) -> Counters {
    let empty = Item::new();
    let pending_item = pending.as_ref().unwrap_or(&empty);
    let daily = daily.unwrap_or_default();
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
        exists: pending.is_some(),
        pending: number(pending_item, attr::PENDING),
        per_shard: (0..shards).map(|s| number(pending_item, &keys::shard_attribute(s))).collect(),
        created: number(&daily, attr::CREATED),
        per_status: Status::ALL.iter().map(|s| (*s, number(&daily, &keys::status_attribute(s.as_str())))).collect(),
        created_per_minute: per_minute('c'),
        entered_per_minute: per_minute('e'),
        left_per_minute: per_minute('l'),
        pending_verdict: pending.as_ref().and_then(verdict_of),
        daily_verdict: verdict_of(&daily),
        version: number(pending_item, attr::VERSION),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, i64)]) -> Item {
        pairs.iter().map(|(name, n)| (name.to_string(), AttributeValue::N(n.to_string()))).collect()
    }

    #[test]
    fn minute_figures_are_summed_over_the_hours_and_the_old_whole_day_item() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        // Counted before the split (the whole-day item), then after it: an
        // order of 10:15 removed after the upgrade takes its hour's item to -1.
        let whole_day = item(&[("c1015", 3), ("e1015", 3), ("l2359", 1)]);
        let hours = [item(&[("c1015", -1), ("c1016", 2)]), item(&[("l2359", 4), ("e2300", 1)])];
        let minutes = [vec![whole_day], hours.to_vec()].concat();
        let counters = counters(day, None, None, minutes, 4);
        assert_eq!(counters.created_per_minute[615], 2);
        assert_eq!(counters.created_per_minute[616], 2);
        assert_eq!(counters.entered_per_minute[615], 3);
        assert_eq!(counters.entered_per_minute[1380], 1);
        assert_eq!(counters.left_per_minute[1439], 5);
        assert_eq!(counters.created_per_minute.iter().sum::<i64>(), 4);
        assert_eq!(counters.left_per_minute.len(), 1440);
    }
}

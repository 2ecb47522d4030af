//! Counting a day's PENDING orders from the index itself: every shard,
//! `Select=COUNT`, every page. It reads every PENDING item of the day, so it
//! is for checks and repairs, not for each page view. And the check of
//! every counter of a day against a recount and a Scan of the orders table
//! (`counter_differences`), which reads the whole table: for tests and
//! rehearsals.

use super::{Store, shard_count};
use crate::model::iso_millis;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, GSI2, GSI2SK, MAX_SHARDS};
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{DateTime, NaiveDate, Timelike, Utc};
use futures::future::try_join_all;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recount {
    pub day: NaiveDate,
    /// PENDING orders in each shard, shard 0 first.
    pub per_shard: Vec<u64>,
    /// Index items read to count them.
    pub items_read: u64,
}

impl Recount {
    pub fn total(&self) -> u64 {
        self.per_shard.iter().sum()
    }
}

/// The orders of a day as a Scan of the orders table finds them: how many
/// were created that day, how many of those are in each status, and how
/// many were created in each minute of the day (0 to 1439).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DayScan {
    pub created: i64,
    pub per_status: BTreeMap<String, i64>,
    pub per_minute: BTreeMap<u32, i64>,
}

impl Store {
    /// Counts every readable partition of the day (`keys::parse_pending_pk`),
    /// not only those below its count: the consumer counts an order in any of
    /// them (`shard_count`), and a recount must find what a writer put
    /// beyond the count, or that the counters missed. An empty partition
    /// costs one small Query. `per_shard` runs to the day's count or to the
    /// highest shard that holds an order, as the counters' does.
    pub async fn recount_pending(&self, day: NaiveDate) -> Result<Recount, StoreError> {
        let (count, counts) = futures::try_join!(
            self.shards_for(day),
            try_join_all((0..MAX_SHARDS).map(|shard| self.count_shard(day, shard)))
        )?;
        let held = counts.iter().rposition(|(n, _)| *n > 0).map_or(0, |last| last + 1);
        let len = (count as usize).max(held);
        Ok(Recount {
            day,
            per_shard: counts.iter().take(len).map(|(count, _)| *count).collect(),
            items_read: counts.iter().map(|(_, read)| *read).sum(),
        })
    }

    /// The partitions a day's readers read (`shard_count::partitions`).
    pub(super) async fn read_partitions(&self, day: NaiveDate) -> Result<Vec<u32>, StoreError> {
        let (count, counted) = futures::try_join!(self.shards_for(day), self.counted_per_shard(day))?;
        Ok(shard_count::partitions(count, &counted))
    }

    /// A Query of one (day, shard) partition of GSI2.
    pub(super) fn partition_query(
        &self,
        day: NaiveDate,
        shard: u32,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.orders_table)
            .index_name(GSI2)
            .key_condition_expression("GSI2PK = :p")
            .expression_attribute_values(":p", AttributeValue::S(keys::pending_pk(day, shard)))
    }

    async fn count_shard(&self, day: NaiveDate, shard: u32) -> Result<(u64, u64), StoreError> {
        let mut pages = self.partition_query(day, shard).select(Select::Count).into_paginator().send();
        let (mut count, mut read) = (0u64, 0u64);
        while let Some(page) = pages.next().await {
            let page = page?;
            count += page.count().max(0) as u64;
            read += page.scanned_count().max(0) as u64;
        }
        Ok((count, read))
    }

    /// When the longest-waiting PENDING order of `day` was created: the first
    /// key of each shard, ascending, one item each.
    pub async fn oldest_pending(&self, day: NaiveDate) -> Result<Option<DateTime<Utc>>, StoreError> {
        let shards = self.read_partitions(day).await?;
        let firsts = try_join_all(shards.into_iter().map(|shard| async move {
            let out = self
                .partition_query(day, shard)
                .projection_expression(GSI2SK)
                .scan_index_forward(true)
                .limit(1)
                .send()
                .await?;
            Ok::<_, StoreError>(out.items.unwrap_or_default().into_iter().next().and_then(|item| {
                let sk = item.get(GSI2SK)?.as_s().ok()?.clone();
                keys::parse_timeline_sk(&sk).map(|(at, _)| at)
            }))
        }))
        .await?;
        Ok(firsts.into_iter().flatten().min())
    }

    /// Every order of `day` in the orders table: a consistent Scan of the
    /// whole table, an item counted when its `createdAt` reads as a time of
    /// the day.
    pub async fn scan_day(&self, day: NaiveDate) -> Result<DayScan, StoreError> {
        let mut pages =
            self.client.scan().table_name(&self.orders_table).consistent_read(true).into_paginator().items().send();
        let mut scan = DayScan::default();
        while let Some(item) = pages.next().await {
            let item = item?;
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            let Ok(at) = iso_millis::parse(&text("createdAt")) else { continue };
            if at.date_naive() != day {
                continue;
            }
            scan.created += 1;
            *scan.per_status.entry(text("status")).or_default() += 1;
            *scan.per_minute.entry(at.hour() * 60 + at.minute()).or_default() += 1;
        }
        Ok(scan)
    }

    /// What differs between the counters of `day` and the tables: every
    /// state counter family against a recount of the index and a Scan of
    /// the orders table (`scan_day`), and the chart's history against the
    /// PENDING counter. Empty when the counters are exact; a store error is
    /// a difference too. It reads the whole table: for tests and rehearsals.
    pub async fn counter_differences(&self, day: NaiveDate) -> Vec<String> {
        let read = futures::try_join!(self.read_counters(day), self.recount_pending(day), self.scan_day(day));
        let (counters, recount, scan) = match read {
            Ok(read) => read,
            Err(err) => return vec![format!("store: {err}")],
        };
        let mut off = Vec::new();
        let mut check = |what: String, counter: i64, truth: i64| {
            if counter != truth {
                off.push(format!("{what}: counter {counter}, tables {truth}"));
            }
        };
        check("pending".into(), counters.pending, recount.total() as i64);
        for (shard, n) in recount.per_shard.iter().enumerate() {
            check(format!("shard{shard}"), counters.per_shard.get(shard).copied().unwrap_or(0), *n as i64);
        }
        check("created".into(), counters.created, scan.created);
        for (status, n) in &counters.per_status {
            check(format!("status{status}"), *n, scan.per_status.get(status.as_str()).copied().unwrap_or(0));
        }
        for (minute, n) in counters.created_per_minute.iter().enumerate() {
            check(
                format!("c{:02}{:02}", minute / 60, minute % 60),
                *n,
                scan.per_minute.get(&(minute as u32)).copied().unwrap_or(0),
            );
        }
        let history: i64 =
            counters.entered_per_minute.iter().sum::<i64>() - counters.left_per_minute.iter().sum::<i64>();
        check("entered - left".into(), history, counters.pending);
        off
    }
}

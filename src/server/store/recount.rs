//! Counting a day's PENDING orders from the index itself: every shard,
//! `Select=COUNT`, every page. It reads every PENDING item of the day, so it
//! is for checks and repairs, not for each page view.

use super::{Store, shard_count};
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, GSI2, GSI2SK, MAX_SHARDS};
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{DateTime, NaiveDate, Utc};
use futures::future::try_join_all;

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
        Ok(shard_count::partitions(count, counted.iter().enumerate().map(|(s, n)| (s as u32, *n as i64))))
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
}

//! Counting a day's PENDING orders from the index itself: every shard,
//! `Select=COUNT`, every page. It reads every PENDING item of the day, so it
//! is for checks and repairs, not for each page view.

use super::Store;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, GSI2, GSI2SK};
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
    pub async fn recount_pending(&self, day: NaiveDate) -> Result<Recount, StoreError> {
        let shards = self.shards_for(day).await?;
        let counts = try_join_all((0..shards).map(|shard| self.count_shard(day, shard))).await?;
        Ok(Recount {
            day,
            per_shard: counts.iter().map(|(count, _)| *count).collect(),
            items_read: counts.iter().map(|(_, read)| *read).sum(),
        })
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
        let shards = self.shards_for(day).await?;
        let firsts = try_join_all((0..shards).map(|shard| async move {
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

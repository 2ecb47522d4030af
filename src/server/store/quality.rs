//! The data quality items of a day (`keys::quality_pk`), which the stream
//! consumer writes with its checkpoint (`stream::quality`), read back.

use super::{Item, Store};
use crate::server::store::error::StoreError;
use crate::server::store::keys;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::NaiveDate;

impl Store {
    /// Every quality item of `day`: one Query of its partition, every page
    /// (an item per hour, per hour of largest items, per drift kind).
    pub async fn quality_items(&self, day: NaiveDate) -> Result<Vec<Item>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(keys::quality_pk(day)))
            .into_paginator()
            .items()
            .send();
        let mut items = Vec::new();
        while let Some(item) = pages.next().await {
            items.push(item?);
        }
        Ok(items)
    }
}

//! Reading the counters the stream consumer keeps, and repairing the PENDING
//! counter of a day from a recount of the index.

use super::{Item, Recount, Store};
use crate::model::{DayCounts, Status};
use crate::server::error::{StoreError, Unavailable, unless_condition_failed};
use crate::server::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::NaiveDate;
use std::collections::BTreeMap;

/// Times a reconciliation retries while the consumer moves the counter under it.
const RECONCILE_TRIES: u32 = 5;

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
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reconciliation {
    pub day: NaiveDate,
    pub counter: i64,
    pub recount: Recount,
    /// Counter minus recount, before any repair.
    pub drift: i64,
    pub repaired: bool,
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
    async fn metric_item(&self, key: (String, String), consistent: bool) -> Result<Option<Item>, StoreError> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(key.0))
            .key(keys::SK, AttributeValue::S(key.1))
            .consistent_read(consistent)
            .send()
            .await?
            .item)
    }

    pub async fn read_counters(&self, day: NaiveDate) -> Result<Counters, StoreError> {
        let (pending, daily, minutes, shards) = futures::try_join!(
            self.metric_item(keys::metric_pending_key(day), true),
            self.metric_item(keys::metric_day_key(day), false),
            self.metric_item(keys::metric_minutes_key(day), false),
            self.shards_for(day),
        )?;
        let empty = Item::new();
        let pending_item = pending.as_ref().unwrap_or(&empty);
        let daily = daily.unwrap_or_default();
        let minutes = minutes.unwrap_or_default();
        let per_minute = |kind: char| (0..1440).map(|m| number(&minutes, &keys::minute_attribute(kind, m))).collect();
        Ok(Counters {
            date: day,
            exists: pending.is_some(),
            pending: number(pending_item, attr::PENDING),
            per_shard: (0..shards).map(|s| number(pending_item, &keys::shard_attribute(s))).collect(),
            created: number(&daily, attr::CREATED),
            per_status: Status::ALL.iter().map(|s| (*s, number(&daily, &keys::status_attribute(s.as_str())))).collect(),
            created_per_minute: per_minute('c'),
            entered_per_minute: per_minute('e'),
            left_per_minute: per_minute('l'),
        })
    }

    /// Recounts a day's PENDING orders from the index and, when the counter
    /// differs, sets it to the recount — only if the consumer has not moved
    /// it meanwhile (a conditional write; otherwise it tries again).
    pub async fn reconcile(&self, day: NaiveDate, repair: bool) -> Result<Reconciliation, StoreError> {
        let key = keys::metric_pending_key(day);
        for _ in 0..RECONCILE_TRIES {
            let before = self.metric_item(key.clone(), true).await?.unwrap_or_default();
            let recount = self.recount_pending(day).await?;
            let after = self.metric_item(key.clone(), true).await?.unwrap_or_default();
            if before != after {
                continue; // records were applied while counting: count again
            }
            let counter = number(&after, attr::PENDING);
            let drift = counter - recount.total() as i64;
            let shards_differ = recount
                .per_shard
                .iter()
                .enumerate()
                .any(|(s, n)| number(&after, &keys::shard_attribute(s as u32)) != *n as i64);
            if !repair || (drift == 0 && !shards_differ) {
                return Ok(Reconciliation { day, counter, recount, drift, repaired: false });
            }
            match self.overwrite_pending(&key, &after, &recount).await {
                Ok(()) => return Ok(Reconciliation { day, counter, recount, drift, repaired: true }),
                Err(StoreError::Conflict(_)) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::unavailable(
            Unavailable::Busy,
            format!("the PENDING counter of {day} kept changing while it was recounted; try again"),
        ))
    }

    async fn overwrite_pending(
        &self,
        key: &(String, String),
        seen: &Item,
        recount: &Recount,
    ) -> Result<(), StoreError> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(key.0.clone()))
            .key(keys::SK, AttributeValue::S(key.1.clone()))
            .expression_attribute_values(":total", AttributeValue::N(recount.total().to_string()));
        let mut sets = vec!["pending = :total".to_string()];
        // Written only if every counter attribute is still as read.
        let mut conditions = Vec::new();
        let mut names: Vec<String> = vec![attr::PENDING.into()];
        names.extend((0..recount.per_shard.len() as u32).map(keys::shard_attribute));
        for (i, name) in names.iter().enumerate() {
            match seen.get(name) {
                Some(value) => {
                    conditions.push(format!("#a{i} = :seen{i}"));
                    update = update.expression_attribute_values(format!(":seen{i}"), value.clone());
                }
                None => conditions.push(format!("attribute_not_exists(#a{i})")),
            }
            update = update.expression_attribute_names(format!("#a{i}"), name);
        }
        for (shard, count) in recount.per_shard.iter().enumerate() {
            let i = shard + 1;
            sets.push(format!("#a{i} = :n{i}"));
            update = update.expression_attribute_values(format!(":n{i}"), AttributeValue::N(count.to_string()));
        }
        let result = update
            .update_expression(format!("SET {}", sets.join(", ").replacen("pending", "#a0", 1)))
            .condition_expression(conditions.join(" AND "))
            .send()
            .await;
        match unless_condition_failed(result)? {
            Some(_) => Ok(()),
            None => Err(StoreError::Conflict("the counter moved".into())),
        }
    }
}

//! The consumer registry: who applies the orders table's stream to the
//! counters (`stream::registry` decides what the entries mean).

use super::Store;
use crate::model::{ConsumerMode, ConsumerModeState};
use crate::server::store::error::{StoreError, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// How long an entry is kept after it was last seen (the metrics table's TTL).
const KEEP_SECS: i64 = 7 * 24 * 3600;

/// One consumer as the registry last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerEntry {
    /// `in-process` or `lambda`.
    pub mode: String,
    pub instance: String,
    pub seen_at: DateTime<Utc>,
}

impl Store {
    /// Records that `instance` consumes in `mode` as of `at` (one small
    /// UpdateItem: the heartbeat).
    pub async fn record_consumer(&self, mode: &str, instance: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.heartbeat(mode, instance, at, false).await
    }

    /// A heartbeat that also says the consumer applies records guarded by
    /// per-record markers (`markersAt`): a Lambda function without a
    /// tumbling window, whose records move no shard checkpoint.
    pub async fn record_consumer_with_markers(
        &self,
        mode: &str,
        instance: &str,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.heartbeat(mode, instance, at, true).await
    }

    async fn heartbeat(&self, mode: &str, instance: &str, at: DateTime<Utc>, markers: bool) -> Result<(), StoreError> {
        let (pk, sk) = keys::consumer_key(mode, instance);
        let seen = AttributeValue::N(at.timestamp_millis().to_string());
        let mut update = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .expression_attribute_names("#mode", attr::MODE)
            .expression_attribute_names("#seen", attr::SEEN_AT)
            .expression_attribute_names("#expires", attr::EXPIRES_AT)
            .expression_attribute_values(":mode", AttributeValue::S(mode.to_string()))
            .expression_attribute_values(":seen", seen)
            .expression_attribute_values(":expires", AttributeValue::N((at.timestamp() + KEEP_SECS).to_string()));
        let mut expression = "SET #mode = :mode, #seen = :seen, #expires = :expires".to_string();
        if markers {
            expression.push_str(", #markers = :seen");
            update = update.expression_attribute_names("#markers", attr::MARKERS_AT);
        }
        update.update_expression(expression).send().await?;
        Ok(())
    }

    /// The registry's consumers that last applied records guarded by
    /// markers, and when: (mode, instance, `markersAt`).
    pub async fn consumers_with_markers(&self) -> Result<Vec<(String, String, DateTime<Utc>)>, StoreError> {
        let items = self.metrics_partition(keys::consumers_pk().to_string(), true).await?;
        let mut seen = Vec::new();
        for item in items {
            let sk = item.get(keys::SK).and_then(|v| v.as_s().ok());
            let at = item.get(attr::MARKERS_AT).and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok());
            if let Some(((mode, instance), at)) = sk.and_then(|sk| keys::parse_consumer_sk(sk)).zip(at)
                && let Some(at) = DateTime::from_timestamp_millis(at)
            {
                seen.push((mode.to_string(), instance.to_string(), at));
            }
        }
        Ok(seen)
    }

    /// Takes `instance` out of the registry: it stopped consuming (its peers
    /// then share the shards without it at once, not once it goes stale).
    pub async fn forget_consumer(&self, mode: &str, instance: &str) -> Result<(), StoreError> {
        self.delete_metric(keys::consumer_key(mode, instance)).await
    }

    /// Every entry of the registry, read strongly consistent. An item that
    /// cannot be read as one (another writer's) is left out.
    pub async fn consumers(&self) -> Result<Vec<ConsumerEntry>, StoreError> {
        let items = self.metrics_partition(keys::consumers_pk().to_string(), true).await?;
        let mut entries = Vec::new();
        for item in items {
            let sk = item.get(keys::SK).and_then(|v| v.as_s().ok());
            let seen = item.get(attr::SEEN_AT).and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok());
            let Some(((mode, instance), seen)) = sk.and_then(|sk| keys::parse_consumer_sk(sk)).zip(seen) else {
                continue;
            };
            let Some(seen_at) = DateTime::from_timestamp_millis(seen) else { continue };
            entries.push(ConsumerEntry { mode: mode.to_string(), instance: instance.to_string(), seen_at });
        }
        Ok(entries)
    }
}

impl Store {
    /// The recorded consumer mode, read strongly consistent; `serve`,
    /// version 0, when none is recorded.
    pub async fn consumer_mode(&self) -> Result<ConsumerModeState, StoreError> {
        let Some(item) = self.metric_item(keys::consumer_mode_key(), true).await? else {
            return Ok(ConsumerModeState::default_serve());
        };
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        let number = |name: &str| item.get(name).and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok());
        let mode = text(attr::MODE).ok_or_else(|| StoreError::Data("the consumer mode item has no mode".into()))?;
        let mode = mode.parse::<ConsumerMode>().map_err(StoreError::Data)?;
        Ok(ConsumerModeState {
            mode,
            recorded: true,
            version: number(attr::VERSION).unwrap_or(0).max(0) as u64,
            changed_at: number(attr::CHANGED_AT).and_then(DateTime::from_timestamp_millis),
            changed_by: text(attr::CHANGED_BY),
        })
    }

    /// Records `mode`, only where the recorded one is still at `expected`
    /// (its version; 0: none recorded): a compare-and-set, so of two
    /// switches made from the same reading one wins and the other is a
    /// `Conflict` that names what is recorded now. The new state.
    pub async fn switch_consumer_mode(
        &self,
        mode: ConsumerMode,
        expected: u64,
        actor: &str,
        at: DateTime<Utc>,
    ) -> Result<ConsumerModeState, StoreError> {
        let (pk, sk) = keys::consumer_mode_key();
        let mut values = HashMap::from([
            (":mode".to_string(), AttributeValue::S(mode.as_str().to_string())),
            (":version".to_string(), AttributeValue::N((expected + 1).to_string())),
            (":at".to_string(), AttributeValue::N(at.timestamp_millis().to_string())),
            (":by".to_string(), AttributeValue::S(actor.to_string())),
        ]);
        let condition = if expected == 0 {
            "attribute_not_exists(#version)"
        } else {
            values.insert(":expected".to_string(), AttributeValue::N(expected.to_string()));
            "#version = :expected"
        };
        let result = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #mode = :mode, #version = :version, #at = :at, #by = :by")
            .condition_expression(condition)
            .expression_attribute_names("#mode", attr::MODE)
            .expression_attribute_names("#version", attr::VERSION)
            .expression_attribute_names("#at", attr::CHANGED_AT)
            .expression_attribute_names("#by", attr::CHANGED_BY)
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        if unless_condition_failed(result)?.is_some() {
            return Ok(ConsumerModeState {
                mode,
                recorded: true,
                version: expected + 1,
                // As it is read back: to the millisecond.
                changed_at: DateTime::from_timestamp_millis(at.timestamp_millis()),
                changed_by: Some(actor.to_string()),
            });
        }
        let now = self.consumer_mode().await?;
        Err(StoreError::Conflict(format!(
            "the consumer mode changed since version {expected}: it is {} at version {}{}; read it again and \
             switch from there if you still mean to",
            now.mode,
            now.version,
            match (&now.changed_by, now.changed_at) {
                (Some(by), Some(at)) => format!(" (switched by {by} at {})", at.format("%Y-%m-%d %H:%M:%S UTC")),
                _ => String::new(),
            }
        )))
    }
}

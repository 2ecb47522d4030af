//! The consumer registry: who applies the orders table's stream to the
//! counters (`stream::registry` decides what the entries mean).

use super::Store;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

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
        let (pk, sk) = keys::consumer_key(mode, instance);
        self.client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #mode = :mode, #seen = :seen, #expires = :expires")
            .expression_attribute_names("#mode", attr::MODE)
            .expression_attribute_names("#seen", attr::SEEN_AT)
            .expression_attribute_names("#expires", attr::EXPIRES_AT)
            .expression_attribute_values(":mode", AttributeValue::S(mode.to_string()))
            .expression_attribute_values(":seen", AttributeValue::N(at.timestamp_millis().to_string()))
            .expression_attribute_values(":expires", AttributeValue::N((at.timestamp() + KEEP_SECS).to_string()))
            .send()
            .await?;
        Ok(())
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

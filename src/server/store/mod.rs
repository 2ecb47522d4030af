//! The store: one aws-sdk-dynamodb client, whatever engine answers it.

mod metrics;
mod orders;
mod pending;
mod provision;
mod recount;

pub use metrics::{Counters, Reconciliation};
pub use orders::order_item;
pub use pending::{PendingRead, ReadPlan};
pub use provision::ProvisionReport;
pub use recount::Recount;

use super::config::{StoreConfig, StoreKind};
use super::embedded::{Embedded, EmbeddedError};
use super::error::StoreError;
use super::keys;
use aws_config::{BehaviorVersion, Region, timeout::TimeoutConfig};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::NaiveDate;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Region for local engines, which accept any.
const LOCAL_REGION: &str = "us-east-1";

pub struct Store {
    client: Client,
    streams: aws_sdk_dynamodbstreams::Client,
    orders_table: String,
    metrics_table: String,
    /// Shard count for days not written to yet.
    shards: u32,
    /// Shard counts already recorded per day; they never change once written.
    shard_counts: Mutex<HashMap<NaiveDate, u32>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
}

/// Opens the configured store. For the embedded one this also starts its
/// server, which lives as long as the returned `Embedded`.
pub async fn connect(config: &StoreConfig) -> Result<(Store, Option<Embedded>), ConnectError> {
    config.validate().map_err(ConnectError::Config)?;
    let (sdk_config, embedded) = match config.kind() {
        StoreKind::Embedded => {
            let embedded = Embedded::start(&config.data_dir, config.embedded_addr).await?;
            (local_sdk_config(&embedded.endpoint()).await, Some(embedded))
        }
        StoreKind::Endpoint => {
            let endpoint = config.endpoint().unwrap_or_default();
            (endpoint_sdk_config(&endpoint).await, None)
        }
        StoreKind::Aws => {
            let sdk_config = base_loader().load().await;
            if sdk_config.region().is_none() {
                return Err(ConnectError::Config(
                    "no AWS region: set AWS_REGION or a region in your AWS profile".into(),
                ));
            }
            (sdk_config, None)
        }
    };
    let store = Store {
        client: Client::new(&sdk_config),
        // The same endpoint as the tables: local engines serve both.
        streams: aws_sdk_dynamodbstreams::Client::new(&sdk_config),
        orders_table: config.orders_table.clone(),
        metrics_table: config.metrics_table.clone(),
        shards: config.shards,
        shard_counts: Mutex::new(HashMap::new()),
    };
    Ok((store, embedded))
}

fn base_loader() -> aws_config::ConfigLoader {
    // Fail fast when the store is down, so pages can say so instead of hanging.
    aws_config::defaults(BehaviorVersion::latest()).timeout_config(
        TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(3))
            .operation_attempt_timeout(Duration::from_secs(10))
            .operation_timeout(Duration::from_secs(30))
            .build(),
    )
}

/// A local engine takes any credentials and region; fixed ones spare the
/// user from configuring AWS to use it.
async fn local_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    base_loader()
        .endpoint_url(endpoint)
        .region(Region::new(LOCAL_REGION))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "northwind", "northwind", None, None, "northwind-ops-local",
        ))
        .load()
        .await
}

/// An explicit endpoint: the standard chain for region and credentials, but
/// a loopback endpoint (DynamoDB Local) works without any AWS set-up.
async fn endpoint_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    let loaded = base_loader().endpoint_url(endpoint).load().await;
    let loopback = endpoint.contains("://127.") || endpoint.contains("://localhost") || endpoint.contains("://[::1]");
    let has_credentials = std::env::var_os("AWS_ACCESS_KEY_ID").is_some() || std::env::var_os("AWS_PROFILE").is_some();
    if loopback && !has_credentials {
        return local_sdk_config(endpoint).await;
    }
    if loaded.region().is_none() {
        return loaded.into_builder().region(Region::new(LOCAL_REGION)).build();
    }
    loaded
}

impl Store {
    pub fn orders_table(&self) -> &str {
        &self.orders_table
    }

    pub fn metrics_table(&self) -> &str {
        &self.metrics_table
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn streams(&self) -> &aws_sdk_dynamodbstreams::Client {
        &self.streams
    }

    /// Answers when the store is reachable and the orders table exists.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.client
            .describe_table()
            .table_name(&self.orders_table)
            .send()
            .await?;
        Ok(())
    }

    /// The shard count of `day` as recorded, or the configured one for a day
    /// nothing has been written to.
    pub async fn shards_for(&self, day: NaiveDate) -> Result<u32, StoreError> {
        if let Some(n) = self.cached_shards(day) {
            return Ok(n);
        }
        let (pk, sk) = keys::shard_count_key(day);
        let item = self
            .client
            .get_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .consistent_read(true)
            .send()
            .await?
            .item;
        match item.as_ref().and_then(read_shard_count) {
            Some(n) => Ok(self.cache_shards(day, n)),
            None => Ok(self.shards),
        }
    }

    /// Records the shard count of `day` before its first PENDING write; the
    /// first writer wins, and every later writer adopts its count.
    pub async fn ensure_shards_recorded(&self, day: NaiveDate) -> Result<u32, StoreError> {
        if let Some(n) = self.cached_shards(day) {
            return Ok(n);
        }
        let (pk, sk) = keys::shard_count_key(day);
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .item(keys::PK, AttributeValue::S(pk))
            .item(keys::SK, AttributeValue::S(sk))
            .item("shards", AttributeValue::N(self.shards.to_string()))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(self.cache_shards(day, self.shards)),
            Err(err) if is_condition_failure(&err) => self.shards_for(day).await,
            Err(err) => Err(err.into()),
        }
    }

    fn cached_shards(&self, day: NaiveDate) -> Option<u32> {
        self.shard_counts.lock().expect("shard cache poisoned").get(&day).copied()
    }

    fn cache_shards(&self, day: NaiveDate, n: u32) -> u32 {
        self.shard_counts.lock().expect("shard cache poisoned").insert(day, n);
        n
    }
}

fn read_shard_count(item: &HashMap<String, AttributeValue>) -> Option<u32> {
    item.get("shards")?.as_n().ok()?.parse().ok().filter(|n| *n > 0)
}

pub(crate) fn is_condition_failure<E, R>(err: &aws_sdk_dynamodb::error::SdkError<E, R>) -> bool
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata,
{
    err.as_service_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "ConditionalCheckFailedException")
}

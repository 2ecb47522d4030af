//! The store: the only code that talks to DynamoDB (tables and stream), one
//! aws-sdk-dynamodb client whatever engine answers it.

mod accounts;
mod applied;
mod audit;
pub mod autoscaling;
mod breaker;
mod bulk;
mod capacity;
mod checkpoints;
pub mod cloudwatch;
pub mod config;
mod conflicts;
pub mod deltas;
pub mod embedded;
pub mod error;
mod interceptor;
mod items;
pub mod keys;
mod metrics;
mod orders;
mod pending;
mod provision;
mod quality;
pub mod reading;
mod reconcile;
mod recount;
mod registry;
mod sales;
pub mod shard_count;
mod stream;
pub mod usage;

pub use accounts::{ACCESS_TTL, Account, AccountChange, Token};
pub use applied::{AppliedRange, Marked, Marker, RANGE_KEPT_SECS, RangeOf, TRANSACTION_ITEMS};
pub use audit::{AuditPage, AuditScope, KindFilter, audit_items};
pub use autoscaling::{ScalableTarget, ScheduledAction};
pub use breaker::PROBE_EVERY;
pub use capacity::{CapacityDay, HeatDay, UsageFlusher, day_minute};
pub use checkpoints::{Checkpoint, CheckpointMove, Holder, Lease};
pub use conflicts::CONFLICT_RETRIES;
pub use interceptor::units_of;
pub use metrics::{Counters, VersionRead};
pub use orders::{BatchPut, HistoryPage, Transition, order_item};
#[cfg(feature = "testing")]
pub use pending::ReadPlan;
pub use pending::{Pace, PendingFilter, PendingRead};
pub use provision::{IndexSpec, ProvisionReport, TableCapacity, TableDef, WarmThroughput, order_indexes};
pub use reconcile::{
    CounterItem, CounterRepair, FindingWrite, ReadCapacity, ScanPage, Snapshot, TRANSACT_GET_MAX, Verdict,
    snapshot_items,
};
pub use recount::{DayScan, Recount};
pub use registry::ConsumerEntry;
pub use sales::{Alarm, Recorded, ThroughputSettings};
pub use stream::{StreamBatch, StreamShard};

use crate::server::store::config::{StoreConfig, StoreKind};
use crate::server::store::embedded::{Embedded, EmbeddedError};
use crate::server::store::error::StoreError;
use crate::server::store::usage::Usage;
use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region, timeout::TimeoutConfig};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use chrono::NaiveDate;
use futures::future::try_join_all;
use keys::{MAX_SHARDS, attr};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Region for local engines, which accept any.
const LOCAL_REGION: &str = "us-east-1";
/// How long "nothing PENDING was ever written to this day" is believed
/// before the shard-count item is looked up again.
const UNRECORDED_DAY_TTL: Duration = Duration::from_secs(5);
/// Days whose shard counts are kept in memory.
const SHARD_CACHE_DAYS: u64 = 10_000;

pub type Item = HashMap<String, AttributeValue>;

pub struct Store {
    client: Client,
    streams: aws_sdk_dynamodbstreams::Client,
    orders_table: String,
    metrics_table: String,
    /// Shard count for days not written to yet.
    shards: u32,
    /// Shard counts per day as recorded (`None`: nothing recorded yet).
    shard_counts: moka::sync::Cache<NaiveDate, Option<u32>>,
    /// What every call consumed and how often it was throttled, as the
    /// clients' interceptor records it, and its flush to the metrics table.
    usage: UsageFlusher,
    /// What the PENDING merge knows of recent days: per-shard counts as last
    /// read, and the pace its last page showed (see `pending`).
    pending_hints: pending::Hints,
    /// DynamoDB's own metrics, when they are the capacity source.
    cloudwatch: Option<cloudwatch::CloudWatchClient>,
    /// Application Auto Scaling, on AWS or an emulator (`autoscaling`).
    autoscaling: Option<aws_sdk_applicationautoscaling::Client>,
    /// Whether this is AWS DynamoDB (`--store aws`), not a local engine:
    /// what only AWS reports (warm throughput, alarms) is then expected.
    on_aws: bool,
    /// Accounts, tokens and sessions as read within a second (`accounts`).
    access: accounts::AccessCache,
    /// How long audit records are kept (`--audit-retention-days`); `None`:
    /// for ever.
    audit_retention: Option<chrono::Duration>,
    /// Checkpoint items read so far (`checkpoints_of`), for the figures of
    /// what a consumer pass or a reconciliation costs as the stream ages.
    checkpoint_items_read: std::sync::atomic::AtomicU64,
}

/// Recorded counts never change; an unrecorded day may be recorded any time.
struct ShardCountExpiry;

impl moka::Expiry<NaiveDate, Option<u32>> for ShardCountExpiry {
    fn expire_after_create(&self, _: &NaiveDate, value: &Option<u32>, _: std::time::Instant) -> Option<Duration> {
        value.is_none().then_some(UNRECORDED_DAY_TTL)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
}

/// How long the store may take: every call is bounded, retries included, so
/// a store that stops answering gives a prompt 503, not a hang; once one
/// call has found it down, the others fail at once (see `breaker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreTimeouts {
    pub connect: Duration,
    pub attempt: Duration,
    pub operation: Duration,
    pub max_attempts: u32,
}

impl StoreTimeouts {
    pub fn from_operation(operation: Duration) -> Self {
        Self {
            connect: Duration::from_secs(2).min(operation),
            attempt: (operation / 2).max(Duration::from_millis(100)),
            operation,
            max_attempts: 3,
        }
    }
}

/// Opens the configured store. For the embedded one this also starts its
/// server, which lives as long as the returned `Embedded`.
pub async fn connect(config: &StoreConfig) -> Result<(Store, Option<Embedded>), ConnectError> {
    config.validate().map_err(ConnectError::Config)?;
    let timeouts = StoreTimeouts::from_operation(Duration::from_millis(config.store_timeout_ms));
    let (sdk_config, embedded) = match config.kind() {
        StoreKind::Embedded => {
            let embedded = if config.embedded_in_memory {
                Embedded::in_memory(config.embedded_addr).await?
            } else {
                Embedded::start(&config.data_dir, config.embedded_addr).await?
            };
            (local_sdk_config(&embedded.endpoint(), timeouts).await, Some(embedded))
        }
        StoreKind::Endpoint => {
            let endpoint = config.endpoint().unwrap_or_default();
            (endpoint_sdk_config(&endpoint, timeouts).await, None)
        }
        StoreKind::Aws => {
            let sdk_config = base_loader(timeouts).load().await;
            if sdk_config.region().is_none() {
                return Err(ConnectError::Config(
                    "no AWS region: set AWS_REGION or a region in your AWS profile".into(),
                ));
            }
            (sdk_config, None)
        }
    };
    // The stream has its own endpoint on AWS; local engines serve both on
    // one, and a test may put a recorded stream in front of the consumer.
    // Every call of both clients passes the recorder (see `interceptor`).
    let usage = Arc::new(Usage::default());
    let recorder = interceptor::Recorder::new(usage.clone());
    // Each client has its own breaker: on AWS the stream is another endpoint.
    let (tables, stream) = (breaker::Breaker::new("dynamodb"), breaker::Breaker::new("dynamodb streams"));
    let streams = aws_sdk_dynamodbstreams::config::Builder::from(&sdk_config)
        .interceptor(recorder.clone())
        .retry_classifier(stream.no_retry_while_down())
        .interceptor(stream);
    let streams = match config.streams_endpoint_url.as_deref() {
        Some(url) => streams.endpoint_url(url).build(),
        None => streams.build(),
    };
    let client = aws_sdk_dynamodb::config::Builder::from(&sdk_config)
        .interceptor(recorder)
        .retry_classifier(tables.no_retry_while_down())
        .interceptor(tables)
        .build();
    let client = Client::from_conf(client);
    let cloudwatch = match (config.capacity_source(), config.cloudwatch_endpoint_url.as_deref(), config.kind()) {
        (crate::server::store::config::CapacitySource::Stream, _, _) => None,
        (_, Some(url), _) => Some(aws_sdk_cloudwatch::config::Builder::from(&sdk_config).endpoint_url(url).build()),
        (_, None, StoreKind::Aws) => Some(aws_sdk_cloudwatch::config::Builder::from(&sdk_config).build()),
        (_, None, _) => {
            return Err(ConnectError::Config(
                "--capacity-source cloudwatch reads DynamoDB's metrics from CloudWatch: use it with --store aws, \
                 or name an emulator with --cloudwatch-endpoint-url"
                    .into(),
            ));
        }
    }
    .map(|config| {
        // A fortnight of minutes is a large answer: more time than a store call.
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(timeouts.connect)
            .operation_attempt_timeout(Duration::from_secs(30))
            .operation_timeout(Duration::from_secs(60))
            .build();
        let config = config.to_builder().timeout_config(timeouts).build();
        cloudwatch::CloudWatchClient::new(aws_sdk_cloudwatch::Client::from_conf(config))
    });
    // Only AWS (or an emulator) has auto scaling: a local engine's endpoint
    // would answer for DynamoDB, not for it.
    let autoscaling = match (config.autoscaling_endpoint_url.as_deref(), config.kind()) {
        (Some(url), _) => Some(aws_sdk_applicationautoscaling::config::Builder::from(&sdk_config).endpoint_url(url)),
        (None, StoreKind::Aws) => Some(aws_sdk_applicationautoscaling::config::Builder::from(&sdk_config)),
        (None, _) => None,
    }
    .map(|config| aws_sdk_applicationautoscaling::Client::from_conf(config.build()));
    let store = Store {
        cloudwatch,
        autoscaling,
        usage: UsageFlusher::new(client.clone(), config.metrics_table.clone(), usage),
        client,
        streams: aws_sdk_dynamodbstreams::Client::from_conf(streams),
        orders_table: config.orders_table.clone(),
        metrics_table: config.metrics_table.clone(),
        shards: config.shards,
        shard_counts: moka::sync::Cache::builder()
            .max_capacity(SHARD_CACHE_DAYS)
            .expire_after(ShardCountExpiry)
            .build(),
        pending_hints: pending::Hints::default(),
        on_aws: config.kind() == StoreKind::Aws,
        access: accounts::AccessCache::default(),
        audit_retention: (config.audit_retention_days > 0)
            .then(|| chrono::Duration::days(i64::from(config.audit_retention_days))),
        checkpoint_items_read: Default::default(),
    };
    Ok((store, embedded))
}

fn base_loader(timeouts: StoreTimeouts) -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(timeouts.connect)
                .operation_attempt_timeout(timeouts.attempt)
                .operation_timeout(timeouts.operation)
                .build(),
        )
        // The standard mode's retry quota is the budget: a store failing
        // every call soon stops being retried at all.
        .retry_config(RetryConfig::standard().with_max_attempts(timeouts.max_attempts))
}

/// A local engine takes any credentials and region; fixed ones spare the
/// user from configuring AWS to use it.
async fn local_sdk_config(endpoint: &str, timeouts: StoreTimeouts) -> aws_config::SdkConfig {
    base_loader(timeouts)
        .endpoint_url(endpoint)
        .region(Region::new(LOCAL_REGION))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "northwind",
            "northwind",
            None,
            None,
            "northwind-ops-local",
        ))
        .load()
        .await
}

/// An explicit endpoint: the standard chain for region and credentials, but
/// a loopback endpoint (DynamoDB Local) works without any AWS set-up.
pub(crate) async fn endpoint_sdk_config(endpoint: &str, timeouts: StoreTimeouts) -> aws_config::SdkConfig {
    let loopback = endpoint.contains("://127.") || endpoint.contains("://localhost") || endpoint.contains("://[::1]");
    let has_credentials = std::env::var_os("AWS_ACCESS_KEY_ID").is_some() || std::env::var_os("AWS_PROFILE").is_some();
    // Decided before loading the standard chain, whose region provider would
    // ask the instance metadata service (off a laptop) for nothing.
    if loopback && !has_credentials {
        return local_sdk_config(endpoint, timeouts).await;
    }
    let loaded = base_loader(timeouts).endpoint_url(endpoint).load().await;
    if loaded.region().is_none() {
        return loaded.into_builder().region(Region::new(LOCAL_REGION)).build();
    }
    loaded
}

impl Store {
    /// The GSI2 write shards a new day is given (`--shards`).
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Whether this is AWS DynamoDB rather than a local engine.
    pub fn on_aws(&self) -> bool {
        self.on_aws
    }

    pub fn orders_table(&self) -> &str {
        &self.orders_table
    }

    pub fn metrics_table(&self) -> &str {
        &self.metrics_table
    }

    /// The raw client, for tests and tools that play another client of the
    /// same tables. The app itself goes through the methods of `Store`.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The raw stream client, likewise.
    pub fn streams(&self) -> &aws_sdk_dynamodbstreams::Client {
        &self.streams
    }

    /// Answers when the store is reachable and the orders table exists.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.client.describe_table().table_name(&self.orders_table).send().await?;
        Ok(())
    }

    /// The shard count of `day` (`shard_count::day_count`: as recorded, else
    /// the configured one).
    pub async fn shards_for(&self, day: NaiveDate) -> Result<u32, StoreError> {
        Ok(self.day_shards(&[day]).await?[0])
    }

    /// The shard count of each day, by the one rule (`shard_count`).
    pub async fn day_shards(&self, days: &[NaiveDate]) -> Result<Vec<u32>, StoreError> {
        let recorded = self.recorded_shards(days).await?;
        Ok(recorded.into_iter().map(|n| shard_count::day_count(n, self.shards)).collect())
    }

    /// The recorded shard count of each day, `None` for a day with no record
    /// (it has the configured count). One BatchGetItem for the days not in
    /// memory.
    pub async fn recorded_shards(&self, days: &[NaiveDate]) -> Result<Vec<Option<u32>>, StoreError> {
        let missing: Vec<NaiveDate> = days.iter().filter(|d| !self.shard_counts.contains_key(*d)).copied().collect();
        if !missing.is_empty() {
            let found = self.read_shard_counts(&missing).await?;
            for day in missing {
                match found.get(&day) {
                    Some(n) => self.shard_counts.insert(day, Some(*n)),
                    // Never over a count a writer recorded meanwhile: this
                    // read may have started before its write.
                    None => drop(self.shard_counts.entry(day).or_insert(None)),
                }
            }
        }
        // A value evicted between the two steps reads as unrecorded once.
        Ok(days.iter().map(|d| self.shard_counts.get(d).flatten()).collect())
    }

    /// The recorded shard count of each day as of now, for the stream
    /// consumer: a recorded count is kept for good (it never changes), a day
    /// with none is read again (strongly consistent), since the record the
    /// consumer is about to read may follow the count's first write.
    pub async fn recorded_shards_now(&self, days: &[NaiveDate]) -> Result<HashMap<NaiveDate, Option<u32>>, StoreError> {
        let mut counts: HashMap<NaiveDate, Option<u32>> =
            days.iter().filter_map(|day| Some((*day, Some(self.shard_counts.get(day).flatten()?)))).collect();
        let unknown: Vec<NaiveDate> = days.iter().filter(|day| !counts.contains_key(*day)).copied().collect();
        if !unknown.is_empty() {
            let found = self.read_shard_counts(&unknown).await?;
            for day in unknown {
                let count = found.get(&day).copied();
                if let Some(n) = count {
                    self.shard_counts.insert(day, Some(n));
                }
                counts.insert(day, count);
            }
        }
        Ok(counts)
    }

    async fn read_shard_counts(&self, days: &[NaiveDate]) -> Result<HashMap<NaiveDate, u32>, StoreError> {
        let mut found = HashMap::new();
        // BatchGetItem takes at most 100 keys.
        for chunk in days.chunks(100) {
            let keys = chunk.iter().map(|day| key_item(keys::shard_count_key(*day))).collect();
            let request = KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build()?;
            for item in self.batch_get(&self.metrics_table, request).await? {
                let day = item.get(keys::PK).and_then(|v| v.as_s().ok()).and_then(|pk| keys::parse_shard_count_pk(pk));
                if let Some(day) = day {
                    found.insert(day, read_shard_count(&item)?);
                }
            }
        }
        Ok(found)
    }

    /// Every item of a BatchGetItem, its unprocessed keys asked for again a
    /// bounded number of times.
    async fn batch_get(&self, table: &str, request: KeysAndAttributes) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut request = Some(request);
        let mut pauses = backon::BackoffBuilder::build(backoff(7));
        for _ in 0..8u32 {
            let Some(keys) = request.take() else { return Ok(items) };
            let out = self.client.batch_get_item().request_items(table, keys).send().await?;
            items.extend(out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default());
            request = out.unprocessed_keys.and_then(|mut u| u.remove(table)).filter(|k| !k.keys().is_empty());
            if let (Some(_), Some(pause)) = (&request, pauses.next()) {
                tokio::time::sleep(pause).await;
            }
        }
        match request {
            None => Ok(items),
            Some(_) => Err(StoreError::unavailable(
                crate::server::store::error::Unavailable::Throttled,
                format!("BatchGetItem on {table} left keys unprocessed after 8 attempts"),
            )),
        }
    }

    /// The shard count this console writes `day`'s PENDING orders with,
    /// recorded first where no count is (`shard_count`, 4, by
    /// `record_days_ahead`): the first writer wins, and every later writer
    /// adopts its count. A day already recorded costs one read, no probe.
    pub async fn ensure_shards_recorded(&self, day: NaiveDate) -> Result<u32, StoreError> {
        if let Some(Some(n)) = self.shard_counts.get(&day) {
            return Ok(n);
        }
        self.record_days_ahead(&[(day, self.shards)]).await?;
        // Ours or another writer's, read past a "not recorded" in the cache.
        match self.recorded_shards_now(&[day]).await?.get(&day).copied().flatten() {
            Some(n) => Ok(n),
            None => Err(StoreError::Data(format!("the shard count of {day} vanished after it was recorded"))),
        }
    }
}

impl Store {
    /// The count to record for `day`, which has none
    /// (`shard_count::to_record`): the configured one, or past the highest
    /// of the day's partitions beyond it that holds an order (one key-only
    /// item read from each, in parallel: for a day before its first order,
    /// every read finds nothing).
    pub async fn count_to_record(&self, day: NaiveDate) -> Result<u32, StoreError> {
        let occupied = try_join_all((self.shards..MAX_SHARDS).map(|shard| async move {
            let out = self.partition_query(day, shard).projection_expression(keys::GSI2PK).limit(1).send().await?;
            Ok::<_, StoreError>((out.count() > 0).then_some(shard))
        }))
        .await?;
        Ok(shard_count::to_record(self.shards, occupied.into_iter().flatten().max()))
    }

    /// Records each day's count where none is, at least `at_least` (a sale
    /// plan's count, else the configured one) and at least what its
    /// partitions hold (`count_to_record`), so every writer that reads the
    /// record finds it. Safe on any number of instances at once (the first
    /// put wins; the others read it). The days written.
    pub async fn record_days_ahead(&self, days: &[(NaiveDate, u32)]) -> Result<Vec<NaiveDate>, StoreError> {
        let wanted: Vec<NaiveDate> = days.iter().map(|(day, _)| *day).collect();
        let recorded = self.recorded_shards_now(&wanted).await?;
        let mut written = Vec::new();
        for (day, at_least) in days.iter().filter(|(day, _)| recorded.get(day).copied().flatten().is_none()) {
            let shards = self.count_to_record(*day).await?.max(*at_least).min(MAX_SHARDS);
            if let sales::Recorded::Written = self.record_shards_ahead(*day, shards).await? {
                written.push(*day);
            }
        }
        Ok(written)
    }
}

/// Items a page of a metrics-table partition's Query holds at most.
const PARTITION_PAGE: i32 = 100;

impl Store {
    /// Hands each item of one partition of the metrics table to `each`, in
    /// sort key order, until it breaks: a Query paginated `PARTITION_PAGE`
    /// items a page, strongly consistent when `consistent`, no page read
    /// after the break. The one way the store reads a whole metrics
    /// partition (a day's minute items, a stream's checkpoints, the
    /// registry, the sale plans, quality and capacity days).
    pub(super) async fn for_each_in_metrics_partition(
        &self,
        pk: String,
        consistent: bool,
        mut each: impl FnMut(Item) -> std::ops::ControlFlow<()>,
    ) -> Result<(), StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", keys::PK)
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .consistent_read(consistent)
            .limit(PARTITION_PAGE)
            .into_paginator()
            .items()
            .send();
        while let Some(item) = pages.next().await {
            if each(item?).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Every item of one partition of the metrics table (see
    /// `for_each_in_metrics_partition`).
    pub(super) async fn metrics_partition(&self, pk: String, consistent: bool) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        self.for_each_in_metrics_partition(pk, consistent, |item| {
            items.push(item);
            std::ops::ControlFlow::Continue(())
        })
        .await?;
        Ok(items)
    }
}

/// The pauses before each of up to `retries` sends again of what DynamoDB
/// left undone or refused for the moment (unprocessed keys and items,
/// throttles, a snapshot colliding with a transaction): exponential from
/// 12 ms, doubling up to 1.6 s, each with up to as much again of jitter, so
/// that callers that failed together do not retry in step. The one retry
/// policy of the store and of what retries through it (conflicts have
/// their own, `conflicts`).
pub fn backoff(retries: u32) -> backon::ExponentialBuilder {
    backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(12))
        .with_factor(2.0)
        .with_max_delay(Duration::from_millis(1600))
        .with_max_times(retries as usize)
        .with_jitter()
}

fn key_item((pk, sk): (String, String)) -> Item {
    HashMap::from([(keys::PK.to_string(), AttributeValue::S(pk)), (keys::SK.to_string(), AttributeValue::S(sk))])
}

/// A day's shard count, bounded: a corrupt item must not make every reader
/// fan out over millions of partitions.
fn read_shard_count(item: &Item) -> Result<u32, StoreError> {
    item.get(attr::SHARDS)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| (1..=MAX_SHARDS).contains(n))
        .ok_or_else(|| StoreError::Data(format!("a shard-count item holds no count from 1 to {MAX_SHARDS}: {item:?}")))
}

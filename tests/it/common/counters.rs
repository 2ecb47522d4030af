//! The stream consumer in tests: consumers, reading and applying batches by
//! hand, a mix of writes, and checks of every counter against the tables.

use super::{TestApp, new_order_json, order};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::Record;
use chrono::{Duration, NaiveDate, Utc};
use northwind_ops::model::Status;
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{Store, StreamBatch, order_item};
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
use northwind_ops::server::stream::lambda::Delivered;
use serde_json::json;
use std::sync::Arc;

/// A consumer reading batches of 40 records, so a test's few hundred make
/// several batches.
pub fn consumer(store: &Arc<Store>, owner: &str, lease_ms: u64) -> Consumer {
    consumer_reading(store, owner, lease_ms, 40)
}

/// A consumer reading batches of `batch` records.
pub fn consumer_reading(store: &Arc<Store>, owner: &str, lease_ms: u64, batch: i32) -> Consumer {
    let mut options = ConsumerOptions::new(owner);
    options.lease = std::time::Duration::from_millis(lease_ms);
    options.batch = batch;
    Consumer::new(store.clone(), options, None)
}

/// One GetRecords of a shard, from `iterator` or the start.
pub async fn read_batch(
    store: &Store,
    arn: &str,
    shard: &str,
    iterator: Option<String>,
    limit: i32,
) -> (Vec<aws_sdk_dynamodbstreams::types::Record>, Option<String>) {
    let iterator = match iterator {
        Some(iterator) => iterator,
        None => store.shard_iterator(arn, shard, None).await.unwrap(),
    };
    match store.get_records(&iterator, limit).await.unwrap() {
        StreamBatch::Records { records, next } => (records, next),
        other => panic!("no records: {other:?}"),
    }
}

/// Polls until three passes in a row apply nothing, adding the
/// observations carried after each of those, as `run` does beside its
/// passes (the next pass then marks the minutes observed).
pub async fn drain(consumer: &Consumer) -> u64 {
    let (mut total, mut idle) = (0, 0);
    while idle < 3 {
        let applied = consumer.poll().await.unwrap();
        total += applied;
        idle = if applied == 0 { idle + 1 } else { 0 };
        if applied == 0 {
            consumer.add_carried().await;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    total
}

/// A consumer that has taken a shard's lease and read a batch it has not
/// applied yet: a consumer caught between reading and applying.
pub struct Paused {
    pub arn: String,
    pub shard: String,
    pub checkpoint: Option<String>,
    pub records: Vec<aws_sdk_dynamodbstreams::types::Record>,
}

impl Paused {
    /// Takes the lease of the stream's only shard and reads up to `limit`
    /// records after its checkpoint.
    pub async fn read(store: &Store, consumer: &Consumer, limit: i32) -> Paused {
        let arn = consumer.stream_arn().await.unwrap();
        let shards = store.stream_shards(&arn).await.unwrap();
        assert_eq!(shards.len(), 1, "the local engines keep one stream shard");
        let shard = shards[0].id.clone();
        let checkpoint = consumer.lease(&arn, &shard).await.unwrap().expect("the lease is free").seq;
        let iterator = store.shard_iterator(&arn, &shard, checkpoint.as_deref()).await.unwrap();
        let (records, _) = read_batch(store, &arn, &shard, Some(iterator), limit).await;
        Paused { arn, shard, checkpoint, records }
    }

    /// Applies the batch read, as the consumer would have.
    pub async fn apply(self, consumer: &Consumer) {
        consumer.apply(&self.arn, &self.shard, self.checkpoint, &self.records, false).await.unwrap();
    }
}

/// The counters of `day` against a recount of the index and the expected
/// per-status and created figures.
/// Cancels an order as another service would, straight through the SDK,
/// removing its GSI2 keys as the key design requires.
pub async fn cancel_outside(client: &aws_sdk_dynamodb::Client, orders_table: &str, order_id: &str) {
    client
        .update_item()
        .table_name(orders_table)
        .key(keys::PK, AttributeValue::S(keys::order_pk(order_id)))
        .update_expression("SET #s = :c REMOVE GSI2PK, GSI2SK")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":c", AttributeValue::S("CANCELLED".into()))
        .send()
        .await
        .unwrap();
}

pub async fn assert_exact(app: &TestApp, day: NaiveDate, created: i64, per_status: &[(Status, i64)]) {
    let counters = app.store.read_counters(day).await.unwrap();
    let engine = &app.engine;
    assert_pending_exact(app, day).await;
    assert_eq!(counters.created, created, "{engine:?}: created");
    for (status, n) in per_status {
        assert_eq!(counters.per_status[status], *n, "{engine:?}: {status}");
    }
    let entered: i64 = counters.entered_per_minute.iter().sum();
    let left: i64 = counters.left_per_minute.iter().sum();
    assert_eq!(entered - left, counters.pending, "{engine:?}: the chart's backlog ends at the counter");
}

/// The PENDING counters of `day` against a recount of the index.
pub async fn assert_pending_exact(app: &TestApp, day: NaiveDate) {
    let counters = app.store.read_counters(day).await.unwrap();
    let recount = app.store.recount_pending(day).await.unwrap();
    let engine = &app.engine;
    assert_eq!(counters.pending, recount.total() as i64, "{engine:?}: pending counter vs recount");
    let recounted: Vec<i64> = recount.per_shard.iter().map(|n| *n as i64).collect();
    assert_eq!(counters.per_shard, recounted, "{engine:?}: per shard");
}

/// Every state counter of `day` against a Scan of the orders table: the
/// PENDING ones, `created`, each status and each minute's `created`.
pub async fn assert_all_exact(app: &TestApp, day: NaiveDate) {
    assert_pending_exact(app, day).await;
    let scan = app.store.scan_day(day).await.unwrap();
    let counters = app.store.read_counters(day).await.unwrap();
    let engine = &app.engine;
    assert_eq!(counters.created, scan.created, "{engine:?}: created vs a Scan");
    for (status, n) in &counters.per_status {
        assert_eq!(*n, scan.per_status.get(status.as_str()).copied().unwrap_or(0), "{engine:?}: {status} vs a Scan");
    }
    for (minute, n) in counters.created_per_minute.iter().enumerate() {
        assert_eq!(*n, scan.per_minute.get(&(minute as u32)).copied().unwrap_or(0), "{engine:?}: minute {minute}");
    }
}

/// A mix of writes for one day: 60 orders through the API, 40 written with
/// the SDK directly (bypassing the app), then status changes both ways, and
/// two orders deleted. Returns the day and the expected counts.
pub async fn write_mix(app: &TestApp) -> (NaiveDate, i64, Vec<(Status, i64)>) {
    let day = Utc::now().date_naive();
    for i in 0..60 {
        let (status, _) = app.post("/api/orders", new_order_json(&format!("m-{i:03}"), &format!("c-{}", i % 7))).await;
        assert_eq!(status, 201);
    }
    let client = app.store.client();
    let now = Utc::now();
    for i in 0..40 {
        let o = order(&format!("d-{i:03}"), "c-direct", Status::Pending, now - Duration::milliseconds(i));
        let item = order_item(&o, app.store.shards_for(day).await.unwrap()).unwrap();
        client.put_item().table_name(&app.config.orders_table).set_item(Some(item)).send().await.unwrap();
    }
    for i in 0..15 {
        app.post(&format!("/api/orders/m-{i:03}/status"), json!({"from": "PENDING", "to": "CONFIRMED"})).await;
    }
    for i in 0..5 {
        app.post(&format!("/api/orders/m-{i:03}/status"), json!({"from": "CONFIRMED", "to": "SHIPPED"})).await;
    }
    // Another client cancels directly, removing the index keys as the design requires.
    for i in 0..10 {
        cancel_outside(client, &app.config.orders_table, &format!("d-{i:03}")).await;
    }
    // And deletes two PENDING orders outright: `created` counts the orders
    // of the day that exist, so it drops with them.
    for i in 38..40 {
        client
            .delete_item()
            .table_name(&app.config.orders_table)
            .key("PK", AttributeValue::S(keys::order_pk(&format!("d-{i:03}"))))
            .send()
            .await
            .unwrap();
    }
    let expected = vec![
        (Status::Pending, 60 - 15 + 40 - 10 - 2),
        (Status::Confirmed, 10),
        (Status::Shipped, 5),
        (Status::Cancelled, 10),
    ];
    (day, 100 - 2, expected)
}

/// Adds `by` to counters of an item, as damage would.
pub async fn damage(app: &TestApp, key: (String, String), changes: &[(&str, i64)]) {
    damage_in(&app.store, &app.config.metrics_table, key, changes).await
}

/// `damage` on `metrics_table` through `store`'s client, written around the
/// store (one UpdateItem that ADDs each change).
pub async fn damage_in(store: &Store, metrics_table: &str, key: (String, String), changes: &[(&str, i64)]) {
    let mut update = store
        .client()
        .update_item()
        .table_name(metrics_table)
        .key(keys::PK, AttributeValue::S(key.0))
        .key(keys::SK, AttributeValue::S(key.1));
    let mut adds = Vec::new();
    for (i, (attribute, by)) in changes.iter().enumerate() {
        adds.push(format!("#a{i} :v{i}"));
        update = update
            .expression_attribute_names(format!("#a{i}"), *attribute)
            .expression_attribute_values(format!(":v{i}"), AttributeValue::N(by.to_string()));
    }
    update.update_expression(format!("ADD {}", adds.join(", "))).send().await.unwrap();
}

/// The stream's records as the Lambda's event delivers them.
pub fn delivered(records: &[Record]) -> Vec<Delivered> {
    records
        .iter()
        .map(|r| Delivered {
            event_id: r.event_id().map(str::to_string),
            seq: r.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string),
            record: Some(r.clone()),
        })
        .collect()
}

/// Whether the Lambda function's marker of a stream record exists: it was applied.
pub async fn has_marker(store: &Store, metrics_table: &str, event_id: &str) -> bool {
    let (pk, sk) = keys::applied_key(event_id);
    let out = store
        .client()
        .get_item()
        .table_name(metrics_table)
        .key(keys::PK, AttributeValue::S(pk))
        .key(keys::SK, AttributeValue::S(sk))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.item.is_some()
}

/// Sets a counter the first SHIPPED record adds to to a string, on the day
/// item and every sub-item (a consumer adds to its shard's sub-item): the
/// store refuses to add to it (`false` puts it right: no order was SHIPPED
/// before).
pub async fn damage_shipped(store: &Store, metrics_table: &str, day: NaiveDate, damaged: bool) {
    let key = keys::metric_day_key(day);
    for (pk, sk) in std::iter::once(key.clone()).chain(keys::counter_sub_keys(&key)) {
        let update = store
            .client()
            .update_item()
            .table_name(metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .expression_attribute_names("#s", keys::status_attribute(Status::Shipped.as_str()));
        let update = match damaged {
            true => update
                .update_expression("SET #s = :text")
                .expression_attribute_values(":text", AttributeValue::S("damaged by hand".into())),
            false => update.update_expression("REMOVE #s"),
        };
        update.send().await.unwrap();
    }
}

/// The built binary as the Lambda consumer of the tables `config` reaches
/// over HTTP, with the mapping's memory and timeout, its environments'
/// logs under `work_dir`.
pub fn lambda_function(
    config: &northwind_ops::server::cli::config::StoreConfig,
    settings: &northwind_ops::server::sim::lambda::MappingSettings,
    work_dir: std::path::PathBuf,
) -> northwind_ops::server::sim::lambda::runtime::FunctionConfig {
    northwind_ops::server::sim::lambda::runtime::FunctionConfig {
        binary: env!("CARGO_BIN_EXE_northwind-ops").into(),
        args: vec!["lambda".into()],
        env: northwind_ops::server::sim::lambda::function_env(config).unwrap(),
        name: "northwind-ops-consumer".into(),
        memory_mb: settings.memory_mb,
        timeout: settings.function_timeout,
        work_dir,
    }
}

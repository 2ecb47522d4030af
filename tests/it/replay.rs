//! `replay`: the records the Lambda consumer gave up on, delivered again from
//! the stream, with the built binary, on both engines. The Lambda consumer
//! (its own code, `LambdaConsumer`) applies the day's records but a range in
//! the middle, which the on-failure destination names in a message (as the
//! local event source mapping writes it, and as SQS hands it over): the
//! counters are off by that range until `replay` applies it; a second replay
//! changes nothing; a message of records already applied applies none; bad
//! messages are refused, naming the problem; beside a live in-process
//! consumer a replay counts nothing again; no replay changes the recorded
//! consumer mode.
//!
//! And the applied ranges: a tumbling window's batch given up after part of
//! it was committed is replayed (the rest counted once, twice replayed
//! still once, and a later switch to `serve` counts none of it again); a
//! range the in-process consumer committed counts nothing when replayed,
//! and what it has not read yet is left to it.
//!
//! Every process started is stopped by its pid (`Command::output` waits).

use crate::common;

use aws_sdk_dynamodbstreams::types::Record;
use chrono::{Duration as Span, NaiveDate, Utc};
use common::counters::{consumer, delivered, drain, read_batch};
use common::{Engine, order, write_all};
use northwind_ops::model::ConsumerMode;
use northwind_ops::model::{Actor, Order, Status};
use northwind_ops::server::sim::lambda::dead_letters::{Condition, GivenUp, message};
use northwind_ops::server::store::{AppliedRange, Store, TableCapacity, Transition};
use northwind_ops::server::stream::counters::Deltas;
use northwind_ops::server::stream::lambda::{LambdaConsumer, ShardOf};
use northwind_ops::server::stream::registry::{self, IN_PROCESS};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");
const CREATED: usize = 40;
const CONFIRMED: usize = 15;
/// The records the mapping gave up on: positions in the stream.
const GIVEN_UP: std::ops::Range<usize> = 20..35;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_applies_what_the_lambda_gave_up_once_and_refuses_what_it_must() {
    for engine in common::engines() {
        replay_on(engine).await;
    }
}

async fn replay_on(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&engine, dir.path(), &[]);
    let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
    let endpoint = common::endpoint_of(&engine, embedded.as_ref());
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let store = Arc::new(store);
    let day = write_day(&store).await;
    let (arn, shard, records) = read_stream(&store, CREATED + CONFIRMED).await;

    // The Lambda consumer applies everything but the range it gave up on.
    let lambda = LambdaConsumer::new(store.clone());
    for part in [&records[..GIVEN_UP.start], &records[GIVEN_UP.end..]] {
        let outcome = lambda.apply(&delivered(part)).await;
        assert_eq!(outcome.failed_from, None, "{engine:?}: {outcome:?}");
    }
    let off = store.counter_differences(day).await;
    assert!(!off.is_empty(), "{engine:?}: the range given up is missing from the counters");
    // No mode was recorded: the function recorded lambda at its first batch.
    let mode = store.consumer_mode().await.unwrap();
    assert_eq!((mode.mode, mode.version), (ConsumerMode::Lambda, 1), "{engine:?}: {mode:?}");

    let given_up = dead_letter(&arn, &shard, &records[GIVEN_UP]);
    let sqs_form = serde_json::json!({"MessageId": "1", "Body": given_up.to_string()}).to_string();
    let messages = dir.path().join("dead-letters.jsonl");
    std::fs::write(&messages, format!("{given_up}\n")).unwrap();
    let run = |file: &Path| replay(&endpoint, &config, dir.path(), file);

    let (ok, out) = run(&messages);
    assert!(ok, "{engine:?}: {out}");
    let n = GIVEN_UP.len();
    assert!(out.contains(&format!("{n} records read (the message says {n}), {n} applied, 0 applied before")), "{out}");
    let off = store.counter_differences(day).await;
    assert!(off.is_empty(), "{engine:?}: every counter equals its recount after the replay: {off:?}");
    let settled = store.read_counters(day).await.unwrap();

    // Again, in the form SQS hands it over, beside a range applied long ago.
    let applied_before = dead_letter(&arn, &shard, &records[..5]);
    std::fs::write(&messages, format!("{sqs_form}\n{applied_before}\n")).unwrap();
    let (ok, out) = run(&messages);
    assert!(ok, "{engine:?}: {out}");
    assert!(out.contains(&format!("{} records, 0 applied, {} applied before", n + 5, n + 5)), "{out}");
    assert_eq!(store.read_counters(day).await.unwrap(), settled, "{engine:?}: a second replay changed nothing");

    // Bad messages: named by line, nothing applied.
    std::fs::write(&messages, format!("{given_up}\n{{\"DDBStreamBatchInfo\": {{\"shardId\": \"x\"}}}}\n")).unwrap();
    let (ok, out) = run(&messages);
    assert!(!ok && out.contains("message 2: no DDBStreamBatchInfo.streamArn"), "{engine:?}: {out}");
    let (ok, out) = run(&dir.path().join("absent.jsonl"));
    assert!(!ok && out.contains("absent.jsonl"), "{engine:?}: {out}");

    // Replays never change the mode, whichever it is.
    assert_eq!(store.consumer_mode().await.unwrap(), mode, "{engine:?}: the replays left the mode as it was");
    let serve =
        registry::switch_mode(&store, ConsumerMode::Serve, Some(1), &northwind_ops::model::Actor::cli("tests"), None)
            .await
            .unwrap();
    std::fs::write(&messages, format!("{given_up}\n")).unwrap();
    let (ok, out) = run(&messages);
    assert!(ok, "{engine:?}: {out}");
    assert_eq!(store.consumer_mode().await.unwrap(), serve, "{engine:?}: a replay in serve mode left it serve");
    assert_eq!(store.read_counters(day).await.unwrap(), settled);

    // Beside a live in-process consumer: what was applied counts nothing again.
    store.record_consumer(IN_PROCESS, "serve-1", Utc::now()).await.unwrap();
    std::fs::write(&messages, format!("{given_up}\n")).unwrap();
    let (ok, out) = run(&messages);
    assert!(ok && out.contains(&format!("0 applied, {n} applied before")), "{engine:?}: {out}");
    assert_eq!(store.read_counters(day).await.unwrap(), settled);
    println!(
        "{engine:?}: {} records, {n} given up and replayed: counters equal the recount (created {}, PENDING {}); \
         replayed again: 0 applied",
        records.len(),
        settled.created,
        settled.pending
    );
    drop(store);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

/// Where the windowed batch given up was committed up to: `GIVEN_UP.start`
/// to this (excluded) made it, the rest did not.
const COMMITTED_UNTIL: usize = 27;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_committed_window_and_an_in_process_range_replayed_count_once() {
    for engine in common::engines() {
        partly_committed_on(engine.clone()).await;
        in_process_range_on(engine).await;
    }
}

/// The Lambda form with a tumbling window (its `apply_shard`, each commit
/// moving the shard's checkpoint and recording its range) commits a
/// batch's first records, then gives the batch up (a timeout, a window
/// close that failed): the mapping moves on, the counters miss the rest.
async fn partly_committed_on(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&engine, dir.path(), &[]);
    let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
    let endpoint = common::endpoint_of(&engine, embedded.as_ref());
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let store = Arc::new(store);
    let day = write_day(&store).await;
    let (arn, shard_id, records) = read_stream(&store, CREATED + CONFIRMED).await;
    let shard = ShardOf { stream_arn: arn.clone(), shard_id: shard_id.clone() };

    let lambda = LambdaConsumer::new(store.clone());
    let mut carried = Deltas::default();
    for part in [&records[..GIVEN_UP.start], &records[GIVEN_UP.start..COMMITTED_UNTIL]] {
        let outcome = lambda.apply_shard(&shard, &delivered(part), &mut carried).await;
        assert_eq!(outcome.failed_from, None, "{engine:?}: {outcome:?}");
    }
    assert!(!store.counter_differences(day).await.is_empty(), "{engine:?}: the rest is missing");
    let seq = |i: usize| records[i].dynamodb().unwrap().sequence_number().unwrap().to_string();
    let ranges = store.applied_ranges(&arn, &shard_id, &seq(0), &seq(records.len() - 1)).await.unwrap();
    let expected = [(0, GIVEN_UP.start - 1), (GIVEN_UP.start, COMMITTED_UNTIL - 1)];
    let expected: Vec<AppliedRange> =
        expected.iter().map(|(a, b)| AppliedRange { first: seq(*a), last: seq(*b) }).collect();
    assert_eq!(ranges, expected, "{engine:?}: a range per commit, in the commit");

    let messages = dir.path().join("dead-letters.jsonl");
    std::fs::write(&messages, format!("{}\n", dead_letter(&arn, &shard_id, &records[GIVEN_UP]))).unwrap();
    let (n, rest) = (GIVEN_UP.len(), GIVEN_UP.end - COMMITTED_UNTIL);
    let (ok, out) = replay(&endpoint, &config, dir.path(), &messages);
    assert!(ok, "{engine:?}: {out}");
    let committed = n - rest;
    assert!(
        out.contains(&format!("{n} records read (the message says {n}), {rest} applied, {committed} applied before")),
        "{out}"
    );
    // The stream's first 35 records are its first 35 orders: each counted once.
    let settled = store.read_counters(day).await.unwrap();
    assert_eq!(settled.created, GIVEN_UP.end as i64, "{engine:?}: the committed part counted once: {settled:?}");
    // The replay moved the shard's checkpoint past what it applied.
    let checkpoint = store.checkpoint(&arn, &shard_id).await.unwrap().seq;
    assert_eq!(checkpoint, Some(seq(GIVEN_UP.end - 1)), "{engine:?}");

    let (ok, out) = replay(&endpoint, &config, dir.path(), &messages);
    assert!(ok && out.contains(&format!("0 applied, {n} applied before")), "{engine:?}: {out}");
    assert_eq!(store.read_counters(day).await.unwrap(), settled, "{engine:?}: replayed twice, counted once");

    // The mapping's next batch, then a switch to `serve`: the in-process
    // consumer starts at the shared checkpoint and counts nothing again.
    let outcome = lambda.apply_shard(&shard, &delivered(&records[GIVEN_UP.end..]), &mut carried).await;
    assert_eq!((outcome.failed_from, outcome.applied), (None, records.len() - GIVEN_UP.end), "{engine:?}");
    let off = store.counter_differences(day).await;
    assert!(off.is_empty(), "{engine:?}: every record counted once: {off:?}");
    let mode = store.consumer_mode().await.unwrap();
    registry::switch_mode(&store, ConsumerMode::Serve, Some(mode.version), &Actor::cli("tests"), None).await.unwrap();
    let applied = drain(&consumer(&store, "after", 10_000)).await;
    let off = store.counter_differences(day).await;
    assert!(off.is_empty(), "{engine:?}: serve after the replay: {off:?}");
    println!(
        "{engine:?}: a window's batch of {n} given up after {committed} committed: replay applied {rest}, \
         again 0; serve after it applied {applied}; counters equal the recount"
    );
    assert_eq!(applied, 0, "{engine:?}");
    drop(store);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

/// The in-process consumer commits every record (a range per shard and
/// commit): a range of them replayed beside it counts nothing; records
/// written after its last pass, replayed, are left to it (mode `serve`,
/// after its checkpoint), and it counts them once.
async fn in_process_range_on(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&engine, dir.path(), &[]);
    let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
    let endpoint = common::endpoint_of(&engine, embedded.as_ref());
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let store = Arc::new(store);
    let day = write_day(&store).await;
    let (arn, shard_id, records) = read_stream(&store, CREATED + CONFIRMED).await;
    let serve = consumer(&store, "serve-1", 10_000);
    assert_eq!(drain(&serve).await as usize, records.len(), "{engine:?}");
    store.record_consumer(IN_PROCESS, "serve-1", Utc::now()).await.unwrap();
    let settled = store.read_counters(day).await.unwrap();

    let messages = dir.path().join("dead-letters.jsonl");
    std::fs::write(&messages, format!("{}\n", dead_letter(&arn, &shard_id, &records[GIVEN_UP]))).unwrap();
    let n = GIVEN_UP.len();
    let (ok, out) = replay(&endpoint, &config, dir.path(), &messages);
    assert!(ok && out.contains(&format!("0 applied, {n} applied before")), "{engine:?}: {out}");
    assert_eq!(store.read_counters(day).await.unwrap(), settled, "{engine:?}: nothing counted again");

    // Written after the consumer's last pass: replayed, they are left to it.
    let later: Vec<Order> = (0..5)
        .map(|i| order(&format!("later-{i}"), "c-later", Status::Pending, Utc::now() + Span::milliseconds(i)))
        .collect();
    write_all(&store, later).await;
    let (_, _, all) = read_stream(&store, records.len() + 5).await;
    std::fs::write(&messages, format!("{}\n", dead_letter(&arn, &shard_id, &all[records.len()..]))).unwrap();
    let (ok, out) = replay(&endpoint, &config, dir.path(), &messages);
    assert!(
        ok && out.contains("0 applied, 0 applied before, 0 unreadable, 5 left to the in-process consumer"),
        "{engine:?}: {out}"
    );
    assert_eq!(store.read_counters(day).await.unwrap(), settled, "{engine:?}: the replay applied none of them");
    assert_eq!(drain(&serve).await, 5, "{engine:?}");
    let off = store.counter_differences(day).await;
    assert!(off.is_empty(), "{engine:?}: each counted once, by the consumer: {off:?}");
    println!(
        "{engine:?}: {n} records the in-process consumer committed, replayed: 0 applied; 5 after its checkpoint left to it"
    );
    drop(store);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

/// `northwind-ops replay --messages FILE` against the engine: whether it
/// succeeded, and what it printed.
fn replay(
    endpoint: &str,
    config: &northwind_ops::server::store::config::StoreConfig,
    dir: &Path,
    file: &Path,
) -> (bool, String) {
    let out = Command::new(BIN)
        .args(["replay", "--messages"])
        .arg(file)
        .env("NORTHWIND_STORE", "endpoint")
        .env("NORTHWIND_ENDPOINT_URL", endpoint)
        .env("NORTHWIND_ORDERS_TABLE", &config.orders_table)
        .env("NORTHWIND_METRICS_TABLE", &config.metrics_table)
        .env("NORTHWIND_DATA_DIR", dir)
        .env("NORTHWIND_LOG", "warn")
        .output()
        .expect("the binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// The on-failure record the mapping sends for `records`.
fn dead_letter(arn: &str, shard: &str, records: &[Record]) -> serde_json::Value {
    let given_up = GivenUp {
        condition: Condition::RetryAttemptsExhausted,
        request_id: "test".into(),
        function_arn: "arn:aws:lambda:us-east-1:000000000000:function:northwind-stream",
        invocations: 11,
        response: None,
        shard_id: shard,
        stream_arn: arn,
        records,
    };
    message(&given_up, Utc::now())
}

async fn write_day(store: &Store) -> NaiveDate {
    let start = Utc::now() - Span::seconds(1);
    let orders: Vec<Order> = (0..CREATED)
        .map(|i| {
            order(&format!("r-{i:03}"), &format!("c-{}", i % 7), Status::Pending, start + Span::milliseconds(i as i64))
        })
        .collect();
    write_all(store, orders).await;
    let actor = Actor::cli("replay-test");
    for i in 0..CONFIRMED {
        let order_id = format!("r-{i:03}");
        let change = Transition {
            order_id: &order_id,
            from: Status::Pending,
            to: Status::Confirmed,
            at: Utc::now(),
            actor: &actor,
            reason: None,
            bulk_id: None,
        };
        store.change_status(&change).await.unwrap();
    }
    start.date_naive()
}

/// The stream's ARN, its one shard and its `n` records, once all show.
async fn read_stream(store: &Store, n: usize) -> (String, String, Vec<Record>) {
    let arn = store.stream_arn().await.unwrap().expect("the orders table has a stream");
    let shards = store.stream_shards(&arn).await.unwrap();
    let shard = shards[0].id.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (mut records, mut iterator) = (Vec::new(), None);
        loop {
            let (batch, next) = read_batch(store, &arn, &shard, iterator, 1000).await;
            if batch.is_empty() {
                break;
            }
            records.extend(batch);
            iterator = next;
        }
        if records.len() >= n || Instant::now() > deadline {
            assert_eq!(records.len(), n, "every write's record");
            return (arn, shard, records);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

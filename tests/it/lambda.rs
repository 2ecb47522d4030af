//! The stream consumer as a Lambda function, through the real
//! `lambda_runtime` client: the built binary runs `lambda` in an execution
//! environment of the local Lambda (`sim::lambda::runtime`: the Lambda Runtime
//! API on loopback, its published HTTP interface), and is handed the real records
//! of the engine's own stream (DynamoDB Local's, then Dynoxide's, which the
//! function reaches over HTTP) in the Lambda DynamoDB event shape: a batch, the
//! same batch again, a batch that overlaps it with a record the store refuses
//! in the middle, the failures again once the store takes them, and the whole
//! stream once more. Every counter family ends equal to its recount, and no
//! redelivery changes anything.
//!
//! The binary is stopped by its own pid, whatever the outcome.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::Record;
use chrono::{Duration as Span, NaiveDate, Utc};
use common::counters::{cancel_outside, damage_shipped, has_marker, read_batch};
use common::{Engine, order, write_all};
use northwind_ops::model::{Actor, Order, Status};
use northwind_ops::server::sim::lambda::runtime::{Answer, Environment, FunctionConfig};
use northwind_ops::server::sim::wire;
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{Store, TableCapacity, Transition};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

// ---- The function, in an execution environment on loopback ----------------

/// The built binary running `lambda` in an execution environment of the
/// product's local Lambda (`sim::lambda::runtime`): its Runtime API on
/// loopback, the process stopped by its pid when dropped.
struct Function {
    environment: Environment,
}

impl Function {
    async fn start(endpoint: &str, orders: &str, metrics: &str, dir: &Path) -> Function {
        // What Lambda gives a function, and the store's settings as the
        // template gives them.
        let config = FunctionConfig {
            binary: BIN.into(),
            args: vec!["lambda".into()],
            env: [
                ("NORTHWIND_STORE", "endpoint"),
                ("NORTHWIND_ENDPOINT_URL", endpoint),
                ("NORTHWIND_ORDERS_TABLE", orders),
                ("NORTHWIND_METRICS_TABLE", metrics),
                ("NORTHWIND_LOG", "info,aws_config=warn,aws_smithy_runtime=warn"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            name: "northwind-stream".into(),
            memory_mb: 256,
            timeout: Duration::from_secs(120),
            work_dir: dir.to_path_buf(),
        };
        Function { environment: Environment::start(&config, 0).await.expect("the environment starts") }
    }

    /// One invocation with `event`: what the function answered.
    async fn invoke(&mut self, event: Value) -> Answer {
        match self.environment.invoke(event).await {
            Ok(answer) => answer,
            Err(err) => panic!("no answer: {err}\n{}", self.log_tail()),
        }
    }

    /// The answer of an invocation that answered.
    async fn respond(&mut self, event: Value) -> Value {
        match self.invoke(event).await {
            Answer::Response(body) => body,
            Answer::Error(body) => panic!("the invocation failed: {body}\n{}", self.log_tail()),
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.environment.log_path()).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        self.environment.log_tail(30)
    }
}

fn failures_of(body: &Value) -> Vec<String> {
    let failures = body["batchItemFailures"].as_array().unwrap_or_else(|| panic!("{body}"));
    failures.iter().map(|f| f["itemIdentifier"].as_str().unwrap().to_string()).collect()
}

/// The stream-priced write units and the shard heat's writes a day's items
/// hold (`state`): what a window carries to its close.
fn observations(state: &Value) -> (f64, u64) {
    (state["stream_units"].as_f64().unwrap_or_default(), state["heat_writes"].as_u64().unwrap_or_default())
}

// ---- Records in the Lambda event shape --------------------------------------

/// A record read from the stream, as Lambda hands it to a function.
fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    wire::lambda_record(record, stream_arn)
}

fn event(records: &[Value]) -> Value {
    json!({"Records": records})
}

/// The event of a mapping with a tumbling window: it names its shard, and
/// carries the state the window's last answer gave.
fn windowed_event(records: &[Value], stream_arn: &str, shard_id: &str, state: &Value, closing: bool) -> Value {
    json!({
        "Records": records,
        "window": {"start": "2026-12-04T17:00:00Z", "end": "2026-12-04T17:01:00Z"},
        "state": state,
        "shardId": shard_id,
        "eventSourceARN": stream_arn,
        "isFinalInvokeForWindow": closing,
        "isWindowTerminatedEarly": false
    })
}

fn seq(record: &Value) -> String {
    record["dynamodb"]["SequenceNumber"].as_str().unwrap().to_string()
}

fn new_status(record: &Value) -> Option<&str> {
    record["dynamodb"]["NewImage"]["status"]["S"].as_str()
}

// ---- Writes, state and markers -------------------------------------------

const CREATED: usize = 120;
const CONFIRMED: usize = 30;
const CANCELLED: usize = 10;
const DELETED: usize = 3;
const SHIPPED: usize = 8;
/// Creates, changes, and a put and a delete of an item that is not an order.
const RECORDS: usize = CREATED + CONFIRMED + CANCELLED + DELETED + SHIPPED + 2;

/// Orders of one day written as several clients would: created through the
/// store, confirmed with their audit records, cancelled and deleted straight
/// through the SDK, an item that is not an order put and deleted, and last
/// some confirmed orders shipped (the first SHIPPED record is the one the
/// store will refuse).
async fn write_day(store: &Store, orders_table: &str) -> NaiveDate {
    let start = Utc::now() - Span::seconds(1);
    let orders: Vec<Order> = (0..CREATED)
        .map(|i| {
            order(&format!("l-{i:03}"), &format!("c-{}", i % 9), Status::Pending, start + Span::milliseconds(i as i64))
        })
        .collect();
    write_all(store, orders).await;
    for i in 0..CONFIRMED {
        move_order(store, i, Status::Pending, Status::Confirmed).await;
    }
    let client = store.client();
    let junk = HashMap::from([
        (keys::PK.to_string(), AttributeValue::S(keys::order_pk("not-an-order"))),
        ("note".to_string(), AttributeValue::S("no order attributes".into())),
    ]);
    client.put_item().table_name(orders_table).set_item(Some(junk)).send().await.unwrap();
    client
        .delete_item()
        .table_name(orders_table)
        .key(keys::PK, AttributeValue::S(keys::order_pk("not-an-order")))
        .send()
        .await
        .unwrap();
    for i in CONFIRMED..CONFIRMED + CANCELLED {
        cancel_outside(client, orders_table, &format!("l-{i:03}")).await;
    }
    for i in CREATED - DELETED..CREATED {
        client
            .delete_item()
            .table_name(orders_table)
            .key(keys::PK, AttributeValue::S(keys::order_pk(&format!("l-{i:03}"))))
            .send()
            .await
            .unwrap();
    }
    for i in 0..SHIPPED {
        move_order(store, i, Status::Confirmed, Status::Shipped).await;
    }
    start.date_naive()
}

/// A status change through the store, with its audit records.
async fn move_order(store: &Store, i: usize, from: Status, to: Status) {
    let (order_id, actor) = (format!("l-{i:03}"), Actor::cli("lambda-test"));
    let change =
        Transition { order_id: &order_id, from, to, at: Utc::now(), actor: &actor, reason: None, bulk_id: None };
    store.change_status(&change).await.unwrap();
}

/// Every record of the stream (local engines keep one shard), once all the
/// writes show.
async fn read_stream(store: &Store) -> (String, Vec<Record>) {
    let arn = store.stream_arn().await.unwrap().expect("the orders table has a stream");
    let shards = store.stream_shards(&arn).await.unwrap();
    assert_eq!(shards.len(), 1, "the local engines keep one stream shard");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (mut records, mut iterator) = (Vec::new(), None);
        loop {
            let (batch, next) = read_batch(store, &arn, &shards[0].id, iterator, 1000).await;
            if batch.is_empty() {
                break;
            }
            records.extend(batch);
            iterator = next;
        }
        if records.len() >= RECORDS || Instant::now() > deadline {
            assert_eq!(records.len(), RECORDS, "every write's record");
            return (arn, records);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the function writes for a day: every counter, the shard heat, and
/// the stream-priced write units and hot keys.
async fn state(store: &Store, day: NaiveDate) -> Value {
    let counters = store.read_counters(day).await.unwrap();
    let heat = store.heat_day(day).await.unwrap();
    let capacity = store.persisted_capacity_day(day).await.unwrap();
    json!({
        "counters": format!("{counters:?}"),
        "stream_units": capacity.stream.values().flatten().sum::<f64>(),
        "heat_writes": heat.writes.iter().flatten().sum::<u64>(),
        "heat": format!("{heat:?}"),
        "stream": format!("{:?}", capacity.stream),
        "hot": format!("{:?}", capacity.hot),
    })
}

/// Which records have their marker (were applied), by position.
async fn marked(store: &Store, metrics_table: &str, records: &[Value]) -> Vec<bool> {
    let mut marked = Vec::new();
    for record in records {
        marked.push(has_marker(store, metrics_table, record["eventID"].as_str().unwrap()).await);
    }
    marked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_consumer_applies_each_record_once_reports_a_failing_one_and_ends_exact() {
    for engine in common::engines() {
        lambda_on(engine, false).await;
    }
}

/// The same with a tumbling window, as the template deploys it: each event
/// names its shard, and the shard's checkpoint, not a marker per record,
/// says what was applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_tumbling_window_the_shard_checkpoint_guards_each_batch_and_the_counters_end_exact() {
    for engine in common::engines() {
        lambda_on(engine, true).await;
    }
}

/// The scenario on one engine, the function reaching it over HTTP; with a
/// tumbling window (`windowed`) or without.
async fn lambda_on(engine: Engine, windowed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&engine, dir.path(), &[]);
    let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
    let endpoint = common::endpoint_of(&engine, embedded.as_ref());
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let (orders_table, metrics_table) = (config.orders_table.clone(), config.metrics_table.clone());

    let day = write_day(&store, &orders_table).await;
    let (arn, stream) = read_stream(&store).await;
    let records: Vec<Value> = stream.iter().map(|r| lambda_record(r, &arn)).collect();
    let n = records.len();
    let failing = records.iter().position(|r| new_status(r) == Some("SHIPPED")).expect("a SHIPPED record");
    let first = 100;
    assert!(first < failing && failing < n - 1, "the failing record {failing} is in the middle of the second batch");

    let shard = store.stream_shards(&arn).await.unwrap().remove(0).id;
    // The state Lambda hands on: the last answer's, as the function gave it.
    let carried = std::sync::Mutex::new(json!({}));
    let event = |records: &[Value]| {
        if windowed { windowed_event(records, &arn, &shard, &carried.lock().unwrap(), false) } else { event(records) }
    };
    let carry = |answer: &Value| {
        if windowed {
            *carried.lock().unwrap() = answer["state"].clone();
        }
    };
    let checkpoint = async || store.checkpoint(&arn, &shard).await.unwrap().seq;
    let mut function = Function::start(&endpoint, &orders_table, &metrics_table, dir.path()).await;

    // Batch 1, then the same batch again: the second changes nothing. A
    // windowed answer carries a state (Lambda fails one without it): the
    // window's observations, not written yet.
    let Answer::Response(answer) = function.invoke(event(&records[..first])).await else { panic!("batch 1 failed") };
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(answer.get("state").is_some(), windowed, "{answer}");
    carry(&answer);
    let after_first = state(&store, day).await;
    if windowed {
        assert!(answer["state"]["adds"].as_str().is_some_and(|a| a.contains("CAPACITY#")), "{answer}");
        assert_eq!(observations(&after_first), (0.0, 0), "carried, not written: {after_first}");
    }
    let marks = marked(&store, &metrics_table, &records[..first]).await;
    if windowed {
        assert_eq!(marks, vec![false; first], "no marker: the checkpoint guards the shard");
        assert_eq!(checkpoint().await, Some(seq(&records[first - 1])), "the checkpoint at the batch's last record");
    } else {
        assert_eq!(marks, vec![true; first]);
        assert_eq!(checkpoint().await, None, "no checkpoint without a window");
    }
    let Answer::Response(replayed) = function.invoke(event(&records[..first])).await else { panic!("the replay") };
    assert_eq!(replayed["batchItemFailures"], json!([]), "the replay: {replayed}");
    assert_eq!(replayed.get("state"), answer.get("state"), "the replay carries nothing more");
    assert_eq!(state(&store, day).await, after_first, "a replayed batch changed nothing");

    // Batch 2 overlaps batch 1 by ten records, and its first SHIPPED record
    // adds to a counter the store cannot add to: it and every record after
    // it are reported, in order, and none of them is applied.
    damage_shipped(&store, &metrics_table, day, true).await;
    let second = first - 10;
    let body = function.respond(event(&records[second..])).await;
    carry(&body);
    let failures = failures_of(&body);
    let expected: Vec<String> = records[failing..].iter().map(seq).collect();
    assert_eq!(failures, expected, "the failing record and every one after it");
    let log = function.log();
    let refused = log.lines().find(|l| l.contains("a stream record could not be applied")).map(str::to_string);
    let refused = refused.unwrap_or_else(|| panic!("the function logs the refused record\n{}", function.log_tail()));
    assert!(refused.contains(&seq(&records[failing])), "{refused}");
    if windowed {
        let at = checkpoint().await;
        assert_eq!(at, Some(seq(&records[failing - 1])), "applied up to the failing record, nothing past it");
    } else {
        let applied = marked(&store, &metrics_table, &records).await;
        let expected_marks: Vec<bool> = (0..n).map(|i| i < failing).collect();
        assert_eq!(applied, expected_marks, "applied up to the failing record, nothing past it");
    }

    // The store takes it once repaired; Lambda delivers the failures again.
    damage_shipped(&store, &metrics_table, day, false).await;
    let body = function.respond(event(&records[failing..])).await;
    carry(&body);
    assert_eq!(failures_of(&body), Vec::<String>::new());
    let off = store.counter_differences(day).await;
    assert!(off.is_empty(), "every counter family equals its recount: {off:?}\n{}", function.log_tail());
    let settled = state(&store, day).await;

    // The whole stream once more, in one batch: nothing changes.
    let body = function.respond(event(&records)).await;
    assert_eq!(body.get("state"), windowed.then(|| carried.lock().unwrap().clone()).as_ref(), "nothing more carried");
    assert_eq!(failures_of(&body), Vec::<String>::new(), "the whole stream again");
    assert_eq!(state(&store, day).await, settled, "a redelivered stream changed nothing");
    if windowed {
        assert_eq!(checkpoint().await, Some(seq(&records[n - 1])));
        // The call that closes the window writes what it carried, once:
        // made again (Lambda retries a failed one), it adds nothing.
        let last = carried.lock().unwrap().clone();
        let closing = windowed_event(&[], &arn, &shard, &last, true);
        let Answer::Response(answer) = function.invoke(closing.clone()).await else {
            panic!("the closing call failed")
        };
        assert_eq!(answer, json!({"batchItemFailures": [], "state": {}}));
        let closed = state(&store, day).await;
        assert_eq!(closed["counters"], settled["counters"], "the counters were written with the checkpoint");
        let (stream_units, heat) = observations(&closed);
        assert!(stream_units > 0.0 && heat > 0, "the window's observations written: {closed}");
        assert!(matches!(function.invoke(closing).await, Answer::Response(_)), "the closing call again");
        assert_eq!(state(&store, day).await, closed, "a closing call made again adds nothing");
        // One without Records, and one carrying nothing: nothing to add.
        let mut bare = windowed_event(&[], &arn, &shard, &json!({}), true);
        bare.as_object_mut().unwrap().remove("Records");
        assert!(matches!(function.invoke(bare).await, Answer::Response(_)), "a closing call without Records");
        assert_eq!(state(&store, day).await, closed);
    }
    assert!(store.counter_differences(day).await.is_empty());
    let counters = store.read_counters(day).await.unwrap();
    // The function recorded how far behind the stream its batches were.
    let lag = store.persisted_capacity_day(Utc::now().date_naive()).await.unwrap().behind_ms;
    assert!(!lag.is_empty(), "{engine:?}: the function records its lag once a minute");
    let polls = function.environment.polls();
    println!(
        "{engine:?}, {}: {n} stream records; batch 1: records 0..{first}, delivered twice; batch 2: records {second}..{n}, the record \
         at {failing} refused, {} failures reported from it; the failures delivered again; all {n} delivered once \
         more: every counter equals its recount (PENDING {}, created {}, {:?}); {} invocations, {polls} polls of the \
         Runtime API; the refusal, as the function logged it:\n{refused}",
        if windowed { "a tumbling window (the shard's checkpoint)" } else { "no window (a marker per record)" },
        expected.len(),
        counters.pending,
        counters.created,
        counters.per_status,
        function.environment.invoked(),
    );
    drop(function);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

/// A window's close adds its observations item by item: an item with more
/// attributes than one update expression takes is added in several, every
/// increment once, on both engines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_windows_observations_are_added_item_by_item_however_wide() {
    use northwind_ops::server::stream::counters::Deltas;
    for engine in common::engines() {
        let dir = tempfile::tempdir().unwrap();
        let config = common::store_config(&engine, dir.path(), &[]);
        let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
        store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
        let day = Utc::now().date_naive();
        let (wide, narrow) = (keys::heat_key(day, 1), keys::heat_key(day, 2));
        let mut deltas = Deltas::default();
        for i in 0..250 {
            deltas.add(wide.clone(), format!("s{i}"), i + 1);
        }
        deltas.add(narrow.clone(), "s0".into(), 7);
        store.add_deltas(&deltas).await.unwrap();
        store.add_deltas(&deltas).await.unwrap();
        let read = |key: (String, String)| {
            let store = &store;
            let table = config.metrics_table.clone();
            async move {
                let out = store.client().get_item().table_name(table).key(keys::PK, AttributeValue::S(key.0));
                let item = out.key(keys::SK, AttributeValue::S(key.1)).consistent_read(true).send().await.unwrap();
                let item = item.item.unwrap_or_default();
                let mut sums: Vec<(String, i64)> = item
                    .iter()
                    .filter_map(|(name, value)| Some((name.clone(), value.as_n().ok()?.parse().ok()?)))
                    .collect();
                sums.sort();
                sums
            }
        };
        let wide_sums = read(wide).await;
        assert_eq!(wide_sums.len(), 250, "{engine:?}: every attribute of the wide item");
        assert!(wide_sums.iter().all(|(name, sum)| *sum == 2 * (name[1..].parse::<i64>().unwrap() + 1)), "{engine:?}");
        assert_eq!(read(narrow).await, [("s0".to_string(), 14)], "{engine:?}");
        drop(store);
        if let Some(embedded) = embedded {
            embedded.shutdown().await;
        }
    }
}

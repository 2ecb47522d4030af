//! The stream consumer as a Lambda function, through the real
//! `lambda_runtime` client: the built binary runs `lambda` against a Lambda
//! Runtime API served here on loopback (its published HTTP interface: the
//! next invocation, its response, its error), and is handed the real records
//! of the engine's own stream (DynamoDB Local's, then Dynoxide's, which the
//! function reaches over HTTP) in the Lambda DynamoDB event shape: a batch, the
//! same batch again, a batch that overlaps it with a record the store refuses
//! in the middle, the failures again once the store takes them, and the whole
//! stream once more. Every counter family ends equal to its recount, and no
//! redelivery changes anything.
//!
//! The binary is stopped by its own pid, whatever the outcome.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use chrono::{Duration as Span, NaiveDate, Utc};
use common::counters::{cancel_outside, differences, read_batch};
use common::{Engine, order, write_all};
use northwind_ops::model::{Actor, Order, Status};
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{Store, TableCapacity, Transition};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");
const RUNTIME: &str = "/2018-06-01/runtime";

// ---- The Lambda Runtime API, on loopback ------------------------------------

/// What the function answered to one invocation.
#[derive(Debug)]
enum Answer {
    Response(Value),
    Error(Value),
}

/// The Runtime API's side: invocations waiting to be polled, and where each
/// one's answer goes.
struct RuntimeApi {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value)>>,
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    polls: AtomicUsize,
    init_errors: Mutex<Vec<Value>>,
}

/// `GET /2018-06-01/runtime/invocation/next`: blocks until there is an
/// invocation, as the real API does.
async fn next(State(api): State<Arc<RuntimeApi>>) -> impl IntoResponse {
    api.polls.fetch_add(1, Ordering::SeqCst);
    let Some((id, event)) = api.queue.lock().await.recv().await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, HeaderMap::new(), "no more invocations".to_string());
    };
    let deadline = Utc::now().timestamp_millis() + 60_000;
    let mut headers = HeaderMap::new();
    let header = |v: String| HeaderValue::from_str(&v).unwrap();
    headers.insert("lambda-runtime-aws-request-id", header(id));
    headers.insert("lambda-runtime-deadline-ms", header(deadline.to_string()));
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        header("arn:aws:lambda:us-east-1:123456789012:function:northwind-stream".into()),
    );
    headers.insert("lambda-runtime-trace-id", header("Root=1-00000000-000000000000000000000000;Sampled=0".into()));
    headers.insert("content-type", header("application/json".into()));
    (StatusCode::OK, headers, event.to_string())
}

async fn response(State(api): State<Arc<RuntimeApi>>, UrlPath(id): UrlPath<String>, body: String) -> StatusCode {
    answer(&api, &id, Answer::Response(serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

async fn error(State(api): State<Arc<RuntimeApi>>, UrlPath(id): UrlPath<String>, body: String) -> StatusCode {
    answer(&api, &id, Answer::Error(serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

async fn init_error(State(api): State<Arc<RuntimeApi>>, body: String) -> StatusCode {
    api.init_errors.lock().unwrap().push(serde_json::from_str(&body).unwrap_or(Value::String(body)));
    StatusCode::ACCEPTED
}

fn answer(api: &RuntimeApi, id: &str, answer: Answer) -> StatusCode {
    match api.answers.lock().unwrap().remove(id) {
        Some(waiting) => {
            let _ = waiting.send(answer);
            StatusCode::ACCEPTED
        }
        None => StatusCode::NOT_FOUND,
    }
}

/// The built binary running `lambda` against a Runtime API served here.
struct Function {
    api: Arc<RuntimeApi>,
    invocations: mpsc::UnboundedSender<(String, Value)>,
    count: AtomicU64,
    child: Child,
    log: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl Function {
    async fn start(endpoint: &str, orders: &str, metrics: &str, dir: &Path) -> Function {
        let (invocations, queue) = mpsc::unbounded_channel();
        let api = Arc::new(RuntimeApi {
            queue: tokio::sync::Mutex::new(queue),
            answers: Mutex::default(),
            polls: AtomicUsize::new(0),
            init_errors: Mutex::default(),
        });
        let router = axum::Router::new()
            .route(&format!("{RUNTIME}/invocation/next"), axum::routing::get(next))
            .route(&format!("{RUNTIME}/invocation/{{id}}/response"), axum::routing::post(response))
            .route(&format!("{RUNTIME}/invocation/{{id}}/error"), axum::routing::post(error))
            .route(&format!("{RUNTIME}/init/error"), axum::routing::post(init_error))
            .with_state(api.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        let log = dir.join("lambda.err");
        // What Lambda gives a function: the Runtime API's address and the
        // function's settings; the store's settings as the template gives them.
        let child = Command::new(BIN)
            .arg("lambda")
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "northwind-stream")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/12/01/[$LATEST]test")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/northwind-stream")
            .env("NORTHWIND_STORE", "endpoint")
            .env("NORTHWIND_ENDPOINT_URL", endpoint)
            .env("NORTHWIND_ORDERS_TABLE", orders)
            .env("NORTHWIND_METRICS_TABLE", metrics)
            .env("NORTHWIND_DATA_DIR", dir.join("data"))
            .env("NORTHWIND_LOG", "info,aws_config=warn,aws_smithy_runtime=warn")
            .stdin(Stdio::null())
            .stdout(File::create(dir.join("lambda.out")).unwrap())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("the binary starts");
        Function { api, invocations, count: AtomicU64::new(0), child, log, server }
    }

    /// One invocation with `event`: what the function answered.
    async fn invoke(&mut self, event: Value) -> Answer {
        let id = format!("request-{}", self.count.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = oneshot::channel();
        self.api.answers.lock().unwrap().insert(id.clone(), tx);
        self.invocations.send((id, event)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut rx = rx;
        loop {
            match tokio::time::timeout(Duration::from_millis(200), &mut rx).await {
                Ok(answer) => return answer.expect("the Runtime API keeps its senders"),
                Err(_) => {
                    let exited = self.child.try_wait().unwrap();
                    assert!(exited.is_none(), "the function exited ({exited:?})\n{}", self.log_tail());
                    assert!(Instant::now() < deadline, "no answer in 120 s\n{}", self.log_tail());
                    let init = self.api.init_errors.lock().unwrap().clone();
                    assert!(init.is_empty(), "init errors: {init:?}\n{}", self.log_tail());
                }
            }
        }
    }

    /// The batch item failures of an invocation that answered.
    async fn failures(&mut self, event: Value) -> Vec<String> {
        match self.invoke(event).await {
            Answer::Response(body) => {
                let failures = body["batchItemFailures"].as_array().unwrap_or_else(|| panic!("{body}"));
                failures.iter().map(|f| f["itemIdentifier"].as_str().unwrap().to_string()).collect()
            }
            Answer::Error(body) => panic!("the invocation failed: {body}\n{}", self.log_tail()),
        }
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!("--- lambda (pid {}):\n{}", self.child.id(), lines[lines.len().saturating_sub(30)..].join("\n"))
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        // By its own pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.server.abort();
    }
}

// ---- Records in the Lambda event shape --------------------------------------

/// An attribute value as the Lambda event (and the Streams API) writes it.
fn wire(value: &StreamValue) -> Value {
    match value {
        StreamValue::S(s) => json!({"S": s}),
        StreamValue::N(n) => json!({"N": n}),
        StreamValue::Bool(b) => json!({"BOOL": b}),
        StreamValue::Null(_) => json!({"NULL": true}),
        StreamValue::Ss(list) => json!({"SS": list}),
        StreamValue::Ns(list) => json!({"NS": list}),
        StreamValue::L(list) => json!({"L": list.iter().map(wire).collect::<Vec<_>>()}),
        StreamValue::M(map) => json!({"M": item(map)}),
        other => panic!("no wire form in this test for {other:?}"),
    }
}

fn item(map: &HashMap<String, StreamValue>) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.clone(), wire(v))).collect())
}

/// A record read from the stream, as Lambda hands it to a function.
fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let data = record.dynamodb().expect("stream records carry their change");
    let mut change = json!({
        "Keys": item(data.keys().unwrap()),
        "SequenceNumber": data.sequence_number().unwrap(),
        "SizeBytes": data.size_bytes().unwrap_or_default(),
        "StreamViewType": data.stream_view_type().map(|v| v.as_str()).unwrap_or("NEW_AND_OLD_IMAGES"),
    });
    if let Some(at) = data.approximate_creation_date_time() {
        change["ApproximateCreationDateTime"] = json!(at.as_secs_f64());
    }
    if let Some(new) = data.new_image() {
        change["NewImage"] = item(new);
    }
    if let Some(old) = data.old_image() {
        change["OldImage"] = item(old);
    }
    json!({
        "eventID": record.event_id().unwrap(),
        "eventName": record.event_name().unwrap().as_str(),
        "eventVersion": record.event_version().unwrap_or("1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region().unwrap_or("us-east-1"),
        "eventSourceARN": stream_arn,
        "dynamodb": change,
    })
}

fn event(records: &[Value]) -> Value {
    json!({"Records": records})
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
        "heat": format!("{heat:?}"),
        "stream": format!("{:?}", capacity.stream),
        "hot": format!("{:?}", capacity.hot),
    })
}

/// Which records have their marker (were applied), by position.
async fn marked(store: &Store, metrics_table: &str, records: &[Value]) -> Vec<bool> {
    let mut marked = Vec::new();
    for record in records {
        let (pk, sk) = keys::applied_key(record["eventID"].as_str().unwrap());
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
        marked.push(out.item.is_some());
    }
    marked
}

/// Sets a counter the first SHIPPED record adds to to a string: the store
/// refuses to add to it (`None` puts it right: no order was SHIPPED before).
async fn damage_shipped(store: &Store, metrics_table: &str, day: NaiveDate, damaged: bool) {
    let (pk, sk) = keys::metric_day_key(day);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_consumer_applies_each_record_once_reports_a_failing_one_and_ends_exact() {
    for engine in common::engines() {
        lambda_on(engine).await;
    }
}

/// The scenario on one engine, the function reaching it over HTTP.
async fn lambda_on(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&engine, dir.path(), &[]);
    let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
    let endpoint = match (&engine, &embedded) {
        (Engine::DynamoDbLocal(url), _) => url.clone(),
        (Engine::Dynoxide, Some(embedded)) => embedded.endpoint(),
        (Engine::Dynoxide, None) => unreachable!("the embedded store runs in this process"),
    };
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let (orders_table, metrics_table) = (config.orders_table.clone(), config.metrics_table.clone());

    let day = write_day(&store, &orders_table).await;
    let (arn, stream) = read_stream(&store).await;
    let records: Vec<Value> = stream.iter().map(|r| lambda_record(r, &arn)).collect();
    let n = records.len();
    let failing = records.iter().position(|r| new_status(r) == Some("SHIPPED")).expect("a SHIPPED record");
    let first = 100;
    assert!(first < failing && failing < n - 1, "the failing record {failing} is in the middle of the second batch");

    let mut function = Function::start(&endpoint, &orders_table, &metrics_table, dir.path()).await;

    // Batch 1, then the same batch again: the second changes nothing.
    assert_eq!(function.failures(event(&records[..first])).await, Vec::<String>::new());
    let after_first = state(&store, day).await;
    assert_eq!(marked(&store, &metrics_table, &records[..first]).await, vec![true; first]);
    assert_eq!(function.failures(event(&records[..first])).await, Vec::<String>::new(), "the replay");
    assert_eq!(state(&store, day).await, after_first, "a replayed batch changed nothing");

    // Batch 2 overlaps batch 1 by ten records, and its first SHIPPED record
    // adds to a counter the store cannot add to: it and every record after
    // it are reported, in order, and none of them is applied.
    damage_shipped(&store, &metrics_table, day, true).await;
    let second = first - 10;
    let failures = function.failures(event(&records[second..])).await;
    let expected: Vec<String> = records[failing..].iter().map(seq).collect();
    assert_eq!(failures, expected, "the failing record and every one after it");
    let log = fs::read_to_string(&function.log).unwrap_or_default();
    let refused = log.lines().find(|l| l.contains("a stream record could not be applied")).map(str::to_string);
    let refused = refused.unwrap_or_else(|| panic!("the function logs the refused record\n{}", function.log_tail()));
    assert!(refused.contains(&seq(&records[failing])), "{refused}");
    let applied = marked(&store, &metrics_table, &records).await;
    let expected_marks: Vec<bool> = (0..n).map(|i| i < failing).collect();
    assert_eq!(applied, expected_marks, "applied up to the failing record, nothing past it");

    // The store takes it once repaired; Lambda delivers the failures again.
    damage_shipped(&store, &metrics_table, day, false).await;
    assert_eq!(function.failures(event(&records[failing..])).await, Vec::<String>::new());
    let off = differences(&store, &orders_table, day).await;
    assert!(off.is_empty(), "every counter family equals its recount: {off:?}\n{}", function.log_tail());
    let settled = state(&store, day).await;

    // The whole stream once more, in one batch: nothing changes.
    assert_eq!(function.failures(event(&records)).await, Vec::<String>::new(), "the whole stream again");
    assert_eq!(state(&store, day).await, settled, "a redelivered stream changed nothing");
    assert!(differences(&store, &orders_table, day).await.is_empty());
    let counters = store.read_counters(day).await.unwrap();
    let polls = function.api.polls.load(Ordering::SeqCst);
    println!(
        "{engine:?}: {n} stream records; batch 1: records 0..{first}, delivered twice; batch 2: records {second}..{n}, the record \
         at {failing} refused, {} failures reported from it; the failures delivered again; all {n} delivered once \
         more: every counter equals its recount (PENDING {}, created {}, {:?}); {} invocations, {polls} polls of the \
         Runtime API; the refusal, as the function logged it:\n{refused}",
        expected.len(),
        counters.pending,
        counters.created,
        counters.per_status,
        function.count.load(Ordering::SeqCst),
    );
    drop(function);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

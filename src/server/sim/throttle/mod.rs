//! `northwind-ops throttle-proxy`: a partition-limit simulator. The local
//! engines never throttle; this reverse proxy sits in front of any DynamoDB
//! endpoint, computes what each request of the metered operations consumes
//! on the table and on each global secondary index the way DynamoDB does,
//! charges it to a token bucket per partition key value, and refuses what
//! is over the limit exactly as DynamoDB answers, so engineers can rehearse
//! hot partitions on a laptop. Everything else is forwarded untouched.
//!
//! Metered: PutItem, UpdateItem, DeleteItem, BatchWriteItem,
//! TransactWriteItems (writes, charged before they are forwarded, all or
//! nothing), GetItem, BatchGetItem and Query (reads: their size is known
//! only from the answer, so a read needs the minimum in its bucket to go
//! ahead and is charged the rest afterwards, possibly into debt).
//!
//! To price writes the proxy reads the old item itself (a consistent
//! GetItem upstream) and works out the new one; these extra reads are not
//! charged, and the read and the write are not atomic: a simulator's
//! approximation. Requests it cannot meter (an unknown table, a body it
//! cannot read) are forwarded as they are and counted.

pub mod buckets;
pub mod protocol;
pub mod schema;
pub mod update;

use crate::server::rules::units::{self, Consistency};
use crate::server::store::{StoreTimeouts, endpoint_sdk_config};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, header};
use buckets::{BucketKey, Buckets, Draw, Kind, Resource};
use clap::Args;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use parking_lot::Mutex;
use protocol::{Action, Reason, Write};
use schema::{Billing, Item, TableSchema};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

#[derive(Args, Debug, Clone)]
pub struct ThrottleProxyArgs {
    /// The DynamoDB endpoint to stand in front of, e.g. http://127.0.0.1:8000
    #[arg(long, env = "NORTHWIND_THROTTLE_UPSTREAM")]
    pub upstream: String,

    /// Address the proxy listens on; point the app's --endpoint-url at it
    #[arg(long, env = "NORTHWIND_THROTTLE_LISTEN", default_value = "127.0.0.1:8010")]
    pub listen: SocketAddr,

    /// Multiplies the partition limits (3,000 read and 1,000 write units a
    /// second): 0.05 reaches them at 50 writes a second
    #[arg(long, env = "NORTHWIND_THROTTLE_SCALE", default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,

    /// Refuse writes to an item a transaction in flight is writing, as
    /// DynamoDB does (TransactionConflict); the local engines never do
    #[arg(long, env = "NORTHWIND_THROTTLE_TRANSACTION_CONFLICTS")]
    pub transaction_conflicts: bool,
}

pub fn parse_scale(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(scale) if scale.is_finite() && scale > 0.0 => Ok(scale),
        _ => Err(format!("{text:?} is not a number above 0")),
    }
}

/// DynamoDB takes requests up to 16 MB (a BatchWriteItem's limit).
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Longest the proxy's own DescribeTable or GetItem may take upstream,
/// retries included.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(5);
/// Where a rehearsal starts an outage of a table (see `Proxy::start_outage`).
pub const OUTAGE_PATH: &str = "/_proxy/outage";

#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The DynamoDB endpoint behind the proxy (http only).
    pub upstream: String,
    pub listen: SocketAddr,
    /// Partition limits times this: 0.05 is 50 write units a second.
    pub scale: f64,
    /// Refuse writes meeting a transaction in flight on the same item.
    pub transaction_conflicts: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ThrottleError {
    #[error("--upstream {url}: {why}")]
    Upstream { url: String, why: String },
    #[error("--scale {0}: must be a number above 0")]
    Scale(f64),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("the throttle proxy failed: {0}")]
    Serve(std::io::Error),
}

/// Binds, and serves until `shutdown`; the task returns the tally.
pub async fn start(
    options: ProxyOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, JoinHandle<Result<Tally, ThrottleError>>), ThrottleError> {
    let (addr, task, _) = start_watched(options, shutdown).await?;
    Ok((addr, task))
}

/// A running proxy's tally, read while it serves (a rehearsal's figures
/// minute by minute).
#[derive(Clone)]
pub struct Watch(Arc<Proxy>);

impl Watch {
    pub fn tally(&self) -> Tally {
        self.0.tally()
    }
}

/// `start`, and a `Watch` of the tally so far.
pub async fn start_watched(
    options: ProxyOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, JoinHandle<Result<Tally, ThrottleError>>, Watch), ThrottleError> {
    if !(options.scale.is_finite() && options.scale > 0.0) {
        return Err(ThrottleError::Scale(options.scale));
    }
    let upstream = upstream_base(&options.upstream)?;
    let sdk_config = endpoint_sdk_config(&upstream, StoreTimeouts::from_operation(UPSTREAM_TIMEOUT)).await;
    let proxy = Arc::new(Proxy {
        http: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
        sdk: aws_sdk_dynamodb::Client::new(&sdk_config),
        upstream,
        schemas: Mutex::new(HashMap::new()),
        buckets: Mutex::new(Buckets::new(options.scale)),
        tally: Mutex::new(Tally::default()),
        told_unevaluable: AtomicBool::new(false),
        conflicts: options.transaction_conflicts,
        in_flight: Arc::default(),
        outages: Mutex::new(HashMap::new()),
    });
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ThrottleError::Listen { addr: options.listen, source })?;
    let addr = listener.local_addr().map_err(|source| ThrottleError::Listen { addr: options.listen, source })?;
    let app = Router::new().fallback(handle).with_state(proxy.clone());
    let watch = Watch(proxy.clone());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await.map_err(ThrottleError::Serve)?;
        Ok(proxy.tally())
    });
    Ok((addr, task, watch))
}

/// The command: serves until `shutdown`, then prints the tally.
pub async fn run(
    options: ProxyOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ThrottleError> {
    let (addr, task) = start(options.clone(), shutdown).await?;
    // Scripts and tests read this line to find the port when --listen has port 0.
    println!("throttle proxy listening on http://{addr} (upstream {}, scale {})", options.upstream, options.scale);
    let tally = task.await.map_err(|e| ThrottleError::Serve(std::io::Error::other(e)))??;
    println!("{tally}");
    Ok(())
}

fn upstream_base(url: &str) -> Result<String, ThrottleError> {
    let error = |why: &str| ThrottleError::Upstream { url: url.to_string(), why: why.to_string() };
    let uri: Uri = url.parse().map_err(|e: axum::http::uri::InvalidUri| error(&e.to_string()))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(error("must be an http:// URL with a host"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The leading upper-case words of a partition key given as its DynamoDB
/// JSON (`{"S":"METRIC#DAY#2026-12-04"}` is `METRIC#DAY`); `other` for keys
/// with none.
pub fn key_family(partition: &str) -> String {
    let text = serde_json::from_str::<Value>(partition)
        .ok()
        .and_then(|v| v.get("S").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    let words: Vec<&str> = text
        .split('#')
        .take_while(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .collect();
    if words.is_empty() { "other".into() } else { words.join("#") }
}

/// What the proxy counted, printed when it stops.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Requests refused whole, and batches refused in part.
    pub throttled_requests: u64,
    /// Refusals by reason and resource (a request counts once per reason).
    pub reasons: BTreeMap<Reason, u64>,
    /// Capacity units charged, per table or index and kind.
    pub units: BTreeMap<(String, Kind), f64>,
    /// Requests of metered operations forwarded without metering.
    pub unmetered: u64,
    /// Refusals by the partition key that was over its limit: (table or
    /// index, the key's value as DynamoDB JSON), a request counting once per key.
    pub by_key: BTreeMap<(String, String), u64>,
    /// Requests refused for a transaction in flight on one of their items,
    /// by table.
    pub conflicts: BTreeMap<String, u64>,
    /// Write units charged per table and family of partition keys (the
    /// key's leading upper-case words: `METRIC#PENDING`, `CHECKPOINT`),
    /// to see what a run's writes went to.
    pub writes_by_family: BTreeMap<(String, String), f64>,
}

impl Tally {
    /// The keys refused most, most first (at most `n`).
    pub fn hottest(&self, n: usize) -> Vec<(&(String, String), &u64)> {
        let mut keys: Vec<_> = self.by_key.iter().collect();
        keys.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        keys.truncate(n);
        keys
    }

    /// Refusals that named `reason`, whatever the resource.
    pub fn throttled_by(&self, reason: &str) -> u64 {
        self.reasons.iter().filter(|(r, _)| r.reason == reason).map(|(_, n)| n).sum()
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "throttle proxy summary: {} requests throttled", self.throttled_requests)?;
        for (reason, count) in &self.reasons {
            writeln!(f, "  {} on {}: {count}", reason.reason, reason.resource)?;
        }
        for ((resource, key), count) in self.hottest(5) {
            writeln!(f, "  key {key} of {resource}: {count}")?;
        }
        writeln!(f, "capacity units charged:")?;
        let resources: BTreeSet<&String> = self.units.keys().map(|(r, _)| r).collect();
        for resource in resources {
            let get = |kind| self.units.get(&(resource.clone(), kind)).copied().unwrap_or(0.0);
            writeln!(f, "  {resource}: {:.1} read units, {:.1} write units", get(Kind::Read), get(Kind::Write))?;
        }
        for (table, count) in &self.conflicts {
            writeln!(f, "transaction conflicts on {table}: {count}")?;
        }
        write!(f, "requests forwarded without metering: {}", self.unmetered)
    }
}

struct Proxy {
    http: Client<HttpConnector, Body>,
    /// For the proxy's own DescribeTable and GetItem calls.
    sdk: aws_sdk_dynamodb::Client,
    upstream: String,
    schemas: Mutex<HashMap<String, Arc<TableSchema>>>,
    buckets: Mutex<Buckets>,
    tally: Mutex<Tally>,
    told_unevaluable: AtomicBool,
    conflicts: bool,
    /// The items transactions in flight write: (table, key), and how many.
    in_flight: Arc<Mutex<HashMap<(String, String), usize>>>,
    /// Tables whose every write is refused until then (`POST /_proxy/outage`).
    outages: Mutex<HashMap<String, Instant>>,
}

/// The items of a transaction in flight, held until it is answered.
struct Held {
    in_flight: Arc<Mutex<HashMap<(String, String), usize>>>,
    items: Vec<(String, String)>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock();
        for item in &self.items {
            if let Some(n) = in_flight.get_mut(item) {
                *n -= 1;
                if *n == 0 {
                    in_flight.remove(item);
                }
            }
        }
    }
}

/// An upstream answer read whole.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn into_response(self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }

    fn json(&self) -> Option<Value> {
        (self.status == StatusCode::OK).then(|| serde_json::from_slice(&self.body).ok()).flatten()
    }

    /// The answer with a body the proxy rewrote: length and checksum of the
    /// old body no longer hold.
    fn with_body(mut self, body: &Value) -> Self {
        self.body = Bytes::from(body.to_string());
        self.headers.remove(header::CONTENT_LENGTH);
        self.headers.remove("x-amz-crc32");
        self
    }
}

/// The item a write writes: its table and key (`None`: a key the proxy
/// cannot read).
fn item_of(write: &Write, schema: &TableSchema) -> Option<(String, String)> {
    let key = match &write.action {
        Action::Put { item, .. } => schema.key_of(item)?,
        Action::Update { key, .. } | Action::Delete { key } | Action::ConditionCheck { key } => schema.key_of(key)?,
    };
    Some((write.table.clone(), protocol::key_text(&key)))
}

/// The proxy could not reach the upstream: a 502, which SDKs retry.
struct Fault(String);

impl Fault {
    fn into_response(self) -> Response<Body> {
        tracing::warn!(error = %self.0, "throttle proxy: upstream request failed");
        let body = serde_json::json!({
            "__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
            "message": format!("throttle proxy: {}", self.0),
        });
        dynamodb_answer(StatusCode::BAD_GATEWAY, &body)
    }
}

/// A metered read of one partition: the table it names and its schema,
/// the bucket it draws from, and how consistent it is (its price).
struct Metered<'a> {
    table: &'a str,
    schema: &'a Arc<TableSchema>,
    bucket: BucketKey,
    consistency: Consistency,
}

fn dynamodb_answer(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(protocol::CONTENT_TYPE));
    response
}

async fn handle(State(proxy): State<Arc<Proxy>>, request: Request<Body>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if parts.uri.path() == OUTAGE_PATH {
        return proxy.start_outage(&parts);
    }
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(err) => return Fault(format!("cannot read the request: {err}")).into_response(),
    };
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok());
    let operation = protocol::operation(target).map(str::to_string);
    let result = match operation.as_deref() {
        Some(op @ ("PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems")) => {
            proxy.write(op, &parts, body).await
        }
        Some("BatchWriteItem") => proxy.batch_write(&parts, body).await,
        Some("GetItem") => proxy.get(&parts, body).await,
        Some("BatchGetItem") => proxy.batch_get(&parts, body).await,
        Some("TransactGetItems") if proxy.conflicts => proxy.transact_get(&parts, body).await,
        Some("Query") => proxy.query(&parts, body).await,
        Some(op) => {
            if matches!(op, "CreateTable" | "DeleteTable" | "UpdateTable") {
                proxy.forget_tables_of(&body);
            }
            proxy.forward(&parts, body).await
        }
        None => proxy.forward(&parts, body).await,
    };
    result.unwrap_or_else(Fault::into_response)
}

impl Proxy {
    fn tally(&self) -> Tally {
        self.tally.lock().clone()
    }

    // ---- outages

    /// `POST /_proxy/outage?table=T&seconds=S`: every write to table `T`
    /// refused as throttled for `S` seconds (a table whose partitions are all
    /// over their limits, or capped by its maximum), for fault rehearsals.
    fn start_outage(&self, parts: &Parts) -> Response<Body> {
        let query = parts.uri.query().unwrap_or_default();
        let param = |name: &str| {
            query.split('&').filter_map(|pair| pair.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
        };
        let seconds = param("seconds").and_then(|s| s.parse::<f64>().ok()).filter(|s| s.is_finite() && *s > 0.0);
        let (Some(table), Some(seconds), true) =
            (param("table").filter(|t| !t.is_empty()), seconds, parts.method == "POST")
        else {
            let error = json!({"error": "POST /_proxy/outage?table=NAME&seconds=S (S a number above 0)"});
            return dynamodb_answer(StatusCode::BAD_REQUEST, &error);
        };
        self.outages.lock().insert(table.to_string(), Instant::now() + Duration::from_secs_f64(seconds.min(3600.0)));
        tracing::info!(table, seconds, "throttle proxy: every write to the table refused");
        dynamodb_answer(StatusCode::OK, &json!({"table": table, "seconds": seconds}))
    }

    fn in_outage(&self, table: &str) -> bool {
        let mut outages = self.outages.lock();
        match outages.get(table) {
            Some(until) if *until > Instant::now() => true,
            Some(_) => {
                outages.remove(table);
                false
            }
            None => false,
        }
    }

    /// A write request that names a table in an outage: refused as DynamoDB
    /// refuses a write over the table's capacity (a transaction cancelled,
    /// the actions on that table marked throttled), and tallied.
    fn outage_answer(&self, operation: &str, tables: &[&str], schemas: &[Arc<TableSchema>]) -> Option<Response<Body>> {
        let out: Vec<bool> = tables.iter().map(|t| self.in_outage(t)).collect();
        let schema = schemas.iter().find(|s| out.iter().zip(tables).any(|(o, t)| *o && s.name == *t))?;
        let reason = match schema.billing {
            Billing::OnDemand => "TableWriteMaxOnDemandThroughputExceeded",
            Billing::Provisioned => "TableWriteProvisionedThroughputExceeded",
        };
        let reason = Reason { reason: reason.to_string(), resource: schema.arn.clone() };
        {
            let mut tally = self.tally.lock();
            tally.throttled_requests += 1;
            *tally.reasons.entry(reason.clone()).or_default() += 1;
        }
        let body = match operation {
            "TransactWriteItems" => protocol::transaction_throttled(&out),
            _ => protocol::throttled(schema.billing, &[reason]),
        };
        Some(dynamodb_answer(StatusCode::BAD_REQUEST, &body))
    }

    // ---- forwarding

    fn upstream_request(&self, parts: &Parts, body: Bytes) -> Result<Request<Body>, Fault> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri: Uri = format!("{}{path}", self.upstream).parse().map_err(|e| Fault(format!("{e}")))?;
        let mut request = Request::new(Body::from(body.clone()));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = uri;
        *request.headers_mut() = parts.headers.clone();
        // The body was read whole: it goes on with its length, not in chunks.
        let headers = request.headers_mut();
        headers.remove(header::TRANSFER_ENCODING);
        headers.remove(header::CONNECTION);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        Ok(request)
    }

    /// Forwards untouched and streams the answer back untouched.
    async fn forward(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let request = self.upstream_request(parts, body)?;
        let response = self.http.request(request).await.map_err(|e| Fault(e.to_string()))?;
        Ok(response.map(Body::new))
    }

    /// Forwards and reads the answer whole, for the proxy to look at.
    async fn forward_read(&self, parts: &Parts, body: Bytes) -> Result<Answer, Fault> {
        let request = self.upstream_request(parts, body)?;
        let response = self.http.request(request).await.map_err(|e| Fault(e.to_string()))?;
        let (head, body) = response.into_parts();
        let body = axum::body::to_bytes(Body::new(body), MAX_BODY)
            .await
            .map_err(|e| Fault(format!("reading the upstream answer: {e}")))?;
        Ok(Answer { status: head.status, headers: head.headers, body })
    }

    /// A metered request the proxy could not meter goes on as it is.
    async fn unmetered(&self, parts: &Parts, body: Bytes, why: &str) -> Result<Response<Body>, Fault> {
        tracing::debug!(why, "throttle proxy: forwarding without metering");
        self.tally.lock().unmetered += 1;
        self.forward(parts, body).await
    }

    // ---- what the proxy knows of tables

    /// The schema of every table a batch names, each once (`None`: one of
    /// them cannot be metered).
    async fn schemas_of<'t>(&self, tables: impl Iterator<Item = &'t str>) -> Option<Vec<Arc<TableSchema>>> {
        let mut schemas = Vec::new();
        for table in tables.collect::<BTreeSet<_>>() {
            schemas.push(self.schema(table).await?);
        }
        Some(schemas)
    }

    /// The table's schema, from the upstream's DescribeTable the first time.
    async fn schema(&self, table: &str) -> Option<Arc<TableSchema>> {
        if let Some(schema) = self.schemas.lock().get(table) {
            return Some(schema.clone());
        }
        let described = self.sdk.describe_table().table_name(table).send().await;
        let schema = match described.map(|out| out.table.map(|t| TableSchema::from_description(&t))) {
            Ok(Some(Ok(schema))) => Arc::new(schema),
            Ok(Some(Err(err))) => {
                tracing::warn!(error = %err, "throttle proxy: cannot meter this table");
                return None;
            }
            Ok(None) | Err(_) => return None,
        };
        self.schemas.lock().insert(table.to_string(), schema.clone());
        Some(schema)
    }

    fn forget(&self, table: &str) {
        self.schemas.lock().remove(table);
    }

    fn forget_tables_of(&self, body: &[u8]) {
        if let Some(table) =
            serde_json::from_slice::<Value>(body).ok().and_then(|b| b["TableName"].as_str().map(str::to_string))
        {
            self.forget(&table);
        }
    }

    /// A table that is gone is described again next time it is named.
    fn notice_missing(&self, answer: &Answer, tables: &[&str]) {
        if protocol::is_resource_not_found(answer.status.as_u16(), &answer.body) {
            for table in tables {
                self.forget(table);
            }
        }
    }

    /// The item as it is now, read consistently from the upstream.
    async fn current(&self, schema: &TableSchema, item: &Item) -> Option<Item> {
        let key = protocol::item_from_json(&schema.key_of(item)?).ok()?;
        let read = self.sdk.get_item().table_name(&schema.name).set_key(Some(key)).consistent_read(true).send().await;
        match read {
            Ok(out) => out.item.as_ref().map(units::item_to_json),
            Err(err) => {
                tracing::warn!(error = %aws_sdk_dynamodb::error::DisplayErrorContext(&err), "throttle proxy: cannot read the old item; pricing as if there were none");
                None
            }
        }
    }

    // ---- buckets

    fn take(&self, draws: &[Draw]) -> Result<(), Vec<BucketKey>> {
        self.buckets.lock().try_take(Instant::now(), draws)?;
        self.count_units(draws);
        Ok(())
    }

    /// A read answered with `size` bytes is charged what it costs beyond
    /// the minimum it took to go ahead.
    fn charge_read(&self, key: &BucketKey, size: u64, consistency: Consistency) {
        self.charge(key, units::read_units(size, consistency) - units::read_units(0, consistency));
    }

    fn charge(&self, key: &BucketKey, units: f64) {
        if units <= 0.0 {
            return;
        }
        self.buckets.lock().charge(Instant::now(), key, units);
        self.count_units(&[Draw { key: key.clone(), units }]);
    }

    fn count_units(&self, draws: &[Draw]) {
        let mut tally = self.tally.lock();
        for draw in draws {
            *tally.units.entry((draw.key.resource.to_string(), draw.key.kind)).or_default() += draw.units;
            if draw.key.kind == Kind::Write && draw.key.resource.index.is_none() {
                let family = (draw.key.resource.table.clone(), key_family(&draw.key.partition));
                *tally.writes_by_family.entry(family).or_default() += draw.units;
            }
        }
    }

    /// The reasons for the buckets that were short, and the request counted
    /// as throttled under each.
    fn refused(&self, short: &[BucketKey], schemas: &[Arc<TableSchema>]) -> Vec<Reason> {
        let reasons: BTreeSet<Reason> = short
            .iter()
            .filter_map(|key| {
                let schema = schemas.iter().find(|s| s.name == key.resource.table)?;
                Some(Reason::key_range(schema, key.resource.index.as_deref(), key.kind))
            })
            .collect();
        let mut tally = self.tally.lock();
        tally.throttled_requests += 1;
        for reason in &reasons {
            *tally.reasons.entry(reason.clone()).or_default() += 1;
        }
        let keys: BTreeSet<(String, String)> =
            short.iter().map(|key| (key.resource.to_string(), key.partition.clone())).collect();
        for key in keys {
            *tally.by_key.entry(key).or_default() += 1;
        }
        reasons.into_iter().collect()
    }

    // ---- writes

    /// What one write draws, reading the old item when its price needs it.
    async fn draws_of(&self, schema: &TableSchema, write: &Write) -> Option<Vec<Draw>> {
        let t = write.transactional;
        let draws = match &write.action {
            Action::Put { item, .. } => {
                let old = if write.assumes_absent(schema) { None } else { self.current(schema, item).await };
                schema.write_draws(old.as_ref(), Some(item), t)
            }
            Action::Update { key, expression, names, values } => {
                let old = self.current(schema, key).await;
                let start = old.as_ref().unwrap_or(key);
                let new = match expression {
                    Some(expression) => update::apply(start, &update::Update { expression, names, values }),
                    None => Ok(start.clone()),
                };
                match new {
                    Ok(new) => schema.write_draws(old.as_ref(), Some(&new), t),
                    Err(unsupported) => {
                        if !self.told_unevaluable.swap(true, Ordering::Relaxed) {
                            tracing::debug!(%unsupported, "throttle proxy: pricing such updates by the old item");
                        }
                        schema.fallback_draws(old.as_ref(), key, t)
                    }
                }
            }
            Action::Delete { key } => match self.current(schema, key).await {
                Some(old) => schema.write_draws(Some(&old), None, t),
                None => schema.fallback_draws(None, key, t),
            },
            // A condition check reads the item; priced as one write of a
            // small item, doubled as every transactional action is.
            Action::ConditionCheck { key } => schema.fallback_draws(None, key, t),
        };
        draws.ok()
    }

    /// PutItem, UpdateItem, DeleteItem and TransactWriteItems: charged
    /// before forwarding, all or nothing.
    async fn write(&self, operation: &str, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let Some(writes) =
            serde_json::from_slice::<Value>(&body).ok().and_then(|json| protocol::writes(operation, &json).ok())
        else {
            return self.unmetered(parts, body, "unreadable write").await;
        };
        let mut schemas = Vec::new();
        for write in &writes {
            let Some(schema) = self.schema(&write.table).await else {
                return self.unmetered(parts, body, "unknown table").await;
            };
            schemas.push(schema);
        }
        // The items' sizes before the write, all asked at once: a
        // transaction of 19 updates read its items one after another, each
        // behind the engine's queue, which at a sale's peak on 2 cores put
        // 0.8 to 1 s of the proxy's own reads in front of every consumer
        // commit at 32 shards (DynamoDB reads nothing for the caller first).
        let draws = futures::future::join_all(writes.iter().zip(&schemas).map(|(w, s)| self.draws_of(s, w))).await;
        let Some(per_write) = draws.into_iter().collect::<Option<Vec<_>>>() else {
            return self.unmetered(parts, body, "unreadable item").await;
        };
        let tables: Vec<&str> = writes.iter().map(|w| w.table.as_str()).collect();
        if let Some(refused) = self.outage_answer(operation, &tables, &schemas) {
            return Ok(refused);
        }
        let all: Vec<Draw> = per_write.iter().flatten().cloned().collect();
        if let Err(short) = self.take(&all) {
            let reasons = self.refused(&short, &schemas);
            if operation == "TransactWriteItems" {
                let throttled: Vec<bool> = per_write.iter().map(|d| d.iter().any(|d| short.contains(&d.key))).collect();
                return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &protocol::transaction_throttled(&throttled)));
            }
            return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &protocol::throttled(schemas[0].billing, &reasons)));
        }
        let items: Vec<Option<(String, String)>> =
            writes.iter().zip(&schemas).map(|(write, schema)| item_of(write, schema)).collect();
        let _held = match self.hold(operation == "TransactWriteItems", &items) {
            Ok(held) => held,
            Err(conflicting) => {
                self.count_conflict(&writes[0].table);
                let answer = match operation {
                    "TransactWriteItems" => protocol::transaction_conflicted(&conflicting),
                    _ => protocol::write_conflicted(),
                };
                return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &answer));
            }
        };
        let answer = self.forward_read(parts, body).await?;
        self.notice_missing(&answer, &writes.iter().map(|w| w.table.as_str()).collect::<Vec<_>>());
        Ok(answer.into_response())
    }

    // ---- transactions in flight

    /// Whether `items` are free of transactions in flight: if so, a
    /// transaction holds them until its answer (the guard); if not, which
    /// of them are held. Always free when conflicts are not simulated.
    fn hold(&self, transaction: bool, items: &[Option<(String, String)>]) -> Result<Option<Held>, Vec<bool>> {
        if !self.conflicts {
            return Ok(None);
        }
        let mut in_flight = self.in_flight.lock();
        let conflicting: Vec<bool> =
            items.iter().map(|i| i.as_ref().is_some_and(|i| in_flight.contains_key(i))).collect();
        if conflicting.iter().any(|c| *c) {
            return Err(conflicting);
        }
        if !transaction {
            return Ok(None);
        }
        let items: Vec<(String, String)> = items.iter().flatten().cloned().collect();
        for item in &items {
            *in_flight.entry(item.clone()).or_default() += 1;
        }
        Ok(Some(Held { in_flight: self.in_flight.clone(), items }))
    }

    fn count_conflict(&self, table: &str) {
        *self.tally.lock().conflicts.entry(table.to_string()).or_default() += 1;
    }

    /// TransactGetItems: cancelled when a transaction in flight writes one
    /// of its items, else forwarded.
    async fn transact_get(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let Ok(gets) = serde_json::from_slice::<Value>(&body)
            .map_err(|_| ())
            .and_then(|b| protocol::transact_gets(&b).map_err(|_| ()))
        else {
            return self.forward(parts, body).await;
        };
        let items: Vec<Option<(String, String)>> =
            gets.iter().map(|(table, key)| Some((table.clone(), protocol::key_text(key)))).collect();
        if let Err(conflicting) = self.hold(false, &items) {
            self.count_conflict(&gets[0].0);
            return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &protocol::transaction_conflicted(&conflicting)));
        }
        self.forward(parts, body).await
    }

    /// BatchWriteItem: requests whose partitions are over the limit come
    /// back in `UnprocessedItems`, the rest go on; if none can, the
    /// exception DynamoDB gives for the whole batch.
    async fn batch_write(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let Some((json, writes)) = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|json| protocol::batch_writes(&json).ok().map(|w| (json, w)))
        else {
            return self.unmetered(parts, body, "unreadable batch").await;
        };
        let Some(schemas) = self.schemas_of(writes.iter().map(|(t, _, _)| t.as_str())).await else {
            return self.unmetered(parts, body, "unknown table").await;
        };
        let tables: Vec<&str> = writes.iter().map(|(t, _, _)| t.as_str()).collect();
        if let Some(refused) = self.outage_answer("BatchWriteItem", &tables, &schemas) {
            return Ok(refused);
        }
        let schema_of = |table: &str| schemas.iter().find(|s| s.name == table).expect("described above").clone();
        // The old items are read in parallel: a batch holds up to 25.
        let priced = futures::future::join_all(writes.iter().map(|(table, _, write)| {
            let schema = schema_of(table);
            async move { self.draws_of(&schema, write).await }
        }))
        .await;
        let Some(priced) = priced.into_iter().collect::<Option<Vec<_>>>() else {
            return self.unmetered(parts, body, "unreadable item").await;
        };
        let mut accepted = HashSet::new();
        let mut short = Vec::new();
        for ((table, position, _), draws) in writes.iter().zip(priced) {
            match self.take(&draws) {
                Ok(()) => {
                    accepted.insert((table.clone(), *position));
                }
                Err(keys) => short.extend(keys),
            }
        }
        if short.is_empty() {
            return self.forward(parts, body).await;
        }
        let reasons = self.refused(&short, &schemas);
        let (forward, held) = protocol::split_batch(&json, |table, i| accepted.contains(&(table.to_string(), i)));
        let Some(forward) = forward else {
            return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &protocol::throttled(schemas[0].billing, &reasons)));
        };
        let answer = self.forward_read(parts, Bytes::from(forward.to_string())).await?;
        Ok(match answer.json() {
            Some(mut out) => {
                protocol::merge_unprocessed(&mut out, "UnprocessedItems", held);
                answer.with_body(&out).into_response()
            }
            None => answer.into_response(),
        })
    }

    // ---- reads

    /// GetItem: the minimum to go ahead, the rest by the item's size.
    async fn get(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let json: Value = serde_json::from_slice(&body).unwrap_or_default();
        let (Some(table), Some(key)) = (json["TableName"].as_str(), json["Key"].as_object()) else {
            return self.unmetered(parts, body, "unreadable read").await;
        };
        let Some(schema) = self.schema(table).await else {
            return self.unmetered(parts, body, "unknown table").await;
        };
        let Some(bucket) = schema.bucket(key, Kind::Read) else {
            return self.unmetered(parts, body, "no hash key").await;
        };
        let consistency =
            if json["ConsistentRead"].as_bool() == Some(true) { Consistency::Strong } else { Consistency::Eventual };
        let read = Metered { table, schema: &schema, bucket, consistency };
        self.metered_read(parts, body, read, |out| {
            out["Item"].as_object().map(|item| units::item_size(item).unwrap_or(0))
        })
        .await
    }

    /// Query: the minimum from the partition its key condition names, then
    /// the items it returned, summed and rounded up to 4 KB once. Index
    /// queries are eventually consistent. (Only returned items are seen: a
    /// filter, a projection or `Select=COUNT` makes this a lower bound.)
    async fn query(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let json: Value = serde_json::from_slice(&body).unwrap_or_default();
        let Some(table) = json["TableName"].as_str() else {
            return self.unmetered(parts, body, "unreadable query").await;
        };
        let Some(schema) = self.schema(table).await else {
            return self.unmetered(parts, body, "unknown table").await;
        };
        let Ok(target) = protocol::query_target(&json, &schema) else {
            return self.unmetered(parts, body, "no partition in the key condition").await;
        };
        let resource = match &target.index {
            Some(index) => Resource::index(table, index),
            None => Resource::table(table),
        };
        let bucket = BucketKey { resource, partition: schema::partition_of(&target.partition), kind: Kind::Read };
        let consistency = if target.consistent { Consistency::Strong } else { Consistency::Eventual };
        let read = Metered { table, schema: &schema, bucket, consistency };
        self.metered_read(parts, body, read, |out| {
            let items = out["Items"].as_array().into_iter().flatten().filter_map(Value::as_object);
            Some(items.filter_map(|item| units::item_size(item).ok()).sum())
        })
        .await
    }

    /// A read of one partition (GetItem, Query): it goes ahead with the
    /// minimum in its bucket, else gets the throttled answer DynamoDB gives;
    /// once answered, it is charged the rest by the size `size_of` reads
    /// from the answer (`None`: not charged), rounded up to 4 KB once.
    async fn metered_read(
        &self,
        parts: &Parts,
        body: Bytes,
        read: Metered<'_>,
        size_of: fn(&Value) -> Option<u64>,
    ) -> Result<Response<Body>, Fault> {
        let Metered { table, schema, bucket, consistency } = read;
        let minimum = units::read_units(0, consistency);
        if let Err(short) = self.take(&[Draw { key: bucket.clone(), units: minimum }]) {
            let reasons = self.refused(&short, std::slice::from_ref(schema));
            return Ok(dynamodb_answer(StatusCode::BAD_REQUEST, &protocol::throttled(schema.billing, &reasons)));
        }
        let answer = self.forward_read(parts, body).await?;
        self.notice_missing(&answer, &[table]);
        if let Some(size) = answer.json().as_ref().and_then(size_of) {
            self.charge_read(&bucket, size, consistency);
        }
        Ok(answer.into_response())
    }

    /// BatchGetItem: keys whose partitions lack the minimum come back in
    /// `UnprocessedKeys`; each returned item is charged by its size.
    async fn batch_get(&self, parts: &Parts, body: Bytes) -> Result<Response<Body>, Fault> {
        let Some((json, gets)) = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|json| protocol::batch_gets(&json).ok().map(|g| (json, g)))
        else {
            return self.unmetered(parts, body, "unreadable batch").await;
        };
        let Some(schemas) = self.schemas_of(gets.iter().map(|(t, ..)| t.as_str())).await else {
            return self.unmetered(parts, body, "unknown table").await;
        };
        let consistency_of = |strong: bool| {
            if strong { Consistency::Strong } else { Consistency::Eventual }
        };
        let mut accepted = HashSet::new();
        let mut short = Vec::new();
        for (table, position, key, strong) in &gets {
            let schema = schemas.iter().find(|s| s.name == *table).expect("described above");
            let Some(bucket) = schema.bucket(key, Kind::Read) else {
                continue;
            };
            match self.take(&[Draw { key: bucket, units: units::read_units(0, consistency_of(*strong)) }]) {
                Ok(()) => {
                    accepted.insert((table.clone(), *position));
                }
                Err(keys) => short.extend(keys),
            }
        }
        let (forward, held) = protocol::split_batch(&json, |table, i| accepted.contains(&(table.to_string(), i)));
        if !short.is_empty() {
            let reasons = self.refused(&short, &schemas);
            if forward.is_none() {
                return Ok(dynamodb_answer(
                    StatusCode::BAD_REQUEST,
                    &protocol::throttled(schemas[0].billing, &reasons),
                ));
            }
        }
        let Some(forward) = forward else {
            return self.forward(parts, body).await;
        };
        let answer = self.forward_read(parts, Bytes::from(forward.to_string())).await?;
        let Some(mut out) = answer.json() else {
            return Ok(answer.into_response());
        };
        for (table, items) in out["Responses"].as_object().into_iter().flatten() {
            let Some(schema) = schemas.iter().find(|s| s.name == *table) else {
                continue;
            };
            let strong = gets.iter().any(|(t, .., s)| t == table && *s);
            let consistency = consistency_of(strong);
            for item in items.as_array().into_iter().flatten().filter_map(Value::as_object) {
                if let (Some(bucket), Ok(size)) = (schema.bucket(item, Kind::Read), units::item_size(item)) {
                    self.charge_read(&bucket, size, consistency);
                }
            }
        }
        if held.is_empty() {
            return Ok(answer.into_response());
        }
        protocol::merge_unprocessed(&mut out, "UnprocessedKeys", held);
        Ok(answer.with_body(&out).into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_must_be_plain_http_with_a_host() {
        assert_eq!(upstream_base("http://127.0.0.1:8000/").unwrap(), "http://127.0.0.1:8000");
        assert!(upstream_base("https://dynamodb.us-east-1.amazonaws.com").is_err());
        assert!(upstream_base("127.0.0.1:8000").is_err());
    }

    #[test]
    fn the_summary_names_every_reason_and_resource() {
        let mut tally = Tally { throttled_requests: 3, ..Tally::default() };
        let reason =
            Reason { reason: "IndexWriteKeyRangeThroughputExceeded".into(), resource: "arn:x/index/GSI2".into() };
        tally.reasons.insert(reason, 3);
        tally.units.insert(("orders".into(), Kind::Write), 10.0);
        tally.units.insert(("orders/index/GSI2".into(), Kind::Write), 10.0);
        let text = tally.to_string();
        assert!(text.contains("3 requests throttled"), "{text}");
        assert!(text.contains("IndexWriteKeyRangeThroughputExceeded on arn:x/index/GSI2: 3"), "{text}");
        assert!(text.contains("orders/index/GSI2: 0.0 read units, 10.0 write units"), "{text}");
        assert_eq!(tally.throttled_by("IndexWriteKeyRangeThroughputExceeded"), 3);
    }
}

//! Prometheus metrics: the names, the recorder behind `GET /metrics`, and
//! what every layer records into it (the HTTP middleware that times each
//! request by its route is `http::telemetry`). Below every layer: it
//! imports none of them.
//!
//! Counters and histograms are recorded where things happen (the store's
//! interceptor, the HTTP middleware, the reconciler); the figures a scrape
//! only needs to read (consumer lag, live clients) are set when it renders.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// The header that carries a request's id, given by the client or made
/// here: in the log, on every answer, and in every error body.
pub const REQUEST_ID: &str = "x-request-id";

pub const HTTP_REQUESTS: &str = "northwind_http_requests_total";
pub const HTTP_DURATION: &str = "northwind_http_request_duration_seconds";
pub const STORE_CALLS: &str = "northwind_store_calls_total";
pub const STORE_DURATION: &str = "northwind_store_call_duration_seconds";
pub const CONSUMED_UNITS: &str = "northwind_dynamodb_consumed_capacity_units_total";
pub const THROTTLED_ATTEMPTS: &str = "northwind_dynamodb_throttled_attempts_total";
pub const CONSUMER_LAG: &str = "northwind_stream_consumer_lag_seconds";
pub const CONSUMER_RECORDS: &str = "northwind_stream_records_applied_total";
pub const CONSUMER_BAD_RECORDS: &str = "northwind_stream_records_unreadable_total";
pub const LIVE_CLIENTS: &str = "northwind_live_clients";
pub const RECONCILE_DRIFT: &str = "northwind_reconcile_last_drift_orders";
pub const RECONCILE_AT: &str = "northwind_reconcile_last_run_timestamp_seconds";
pub const HOT_KEYS: &str = "northwind_dynamodb_hot_key_write_units_per_second";
pub const DATA_DRIFT: &str = "northwind_data_drift_items_total";

/// Where a request that reached no route (refused before routing, a static
/// file, an unknown path) is counted: never under its raw path.
pub const UNROUTED: &str = "unrouted";

/// Latency buckets, in seconds: a millisecond (an in-memory answer) to ten
/// seconds (past every timeout).
const BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0];

/// The process's one Prometheus recorder, installed on first use. A
/// recorder installed by someone else first (a host program) leaves this one
/// detached: its page then shows only what was described.
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
            .expect("the buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder was installed first: /metrics shows only descriptions");
        }
        describe();
        handle
    })
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(HTTP_REQUESTS, "HTTP requests answered, by route pattern, method and status");
    describe_histogram!(HTTP_DURATION, Unit::Seconds, "Time to answer an HTTP request (to its headers)");
    describe_counter!(STORE_CALLS, "DynamoDB calls, by operation and outcome (retries inside one call)");
    describe_histogram!(STORE_DURATION, Unit::Seconds, "Time a DynamoDB call took, its retries included");
    describe_counter!(CONSUMED_UNITS, "Capacity units DynamoDB reported consumed, by table, index and access");
    describe_counter!(
        THROTTLED_ATTEMPTS,
        "Attempts DynamoDB throttled (retried ones included), by reason, table and index"
    );
    describe_gauge!(CONSUMER_LAG, Unit::Seconds, "How old the newest stream record was when the consumer applied it");
    describe_counter!(CONSUMER_RECORDS, "Stream records the consumer applied to the counters");
    describe_counter!(CONSUMER_BAD_RECORDS, "Stream records the consumer could not read and skipped");
    describe_gauge!(LIVE_CLIENTS, "Live (server-sent events) connections open on this instance");
    describe_gauge!(RECONCILE_DRIFT, "PENDING counter drift the last reconciliation on this instance found");
    describe_gauge!(RECONCILE_AT, Unit::Seconds, "When this instance last reconciled, in seconds since the epoch");
    describe_counter!(
        DATA_DRIFT,
        "Items written to the orders table (by any writer) that this instance's consumer found drifting, by kind and field"
    );
}

/// One DynamoDB call, its retries included.
pub fn store_call(operation: &str, outcome: &'static str, seconds: f64) {
    let labels = [("operation", operation.to_string()), ("outcome", outcome.to_string())];
    metrics::counter!(STORE_CALLS, &labels).increment(1);
    metrics::histogram!(STORE_DURATION, &labels).record(seconds);
}

/// The units a table (`index` empty) or an index has consumed since the
/// process started. Prometheus counters are floats but the `metrics` crate's
/// are whole numbers, and reads come in halves: the counter shows the whole
/// units of the exact running total (`Usage` keeps the fractions).
pub fn consumed(table: &str, index: &str, access: &str, running_total: f64) {
    let labels = [("table", table.to_string()), ("index", index.to_string()), ("access", access.to_string())];
    metrics::counter!(CONSUMED_UNITS, &labels).absolute(running_total.floor() as u64);
}

/// One throttled attempt.
pub fn throttled(reason: &str, table: &str, index: &str) {
    let labels = [("reason", reason.to_string()), ("table", table.to_string()), ("index", index.to_string())];
    metrics::counter!(THROTTLED_ATTEMPTS, &labels).increment(1);
}

/// Items of one drift kind and field the consumer applied. Both labels
/// are bounded: the kinds are `model::ProblemKind`, the fields the dozen
/// attributes the reader names.
pub fn drift(kind: &str, field: &str, items: u64) {
    let labels = [("kind", kind.to_string()), ("field", field.to_string())];
    metrics::counter!(DATA_DRIFT, &labels).increment(items);
}

/// What the last reconciliation on this instance found.
pub fn reconciled(drift: i64) {
    metrics::gauge!(RECONCILE_DRIFT).set(drift as f64);
    metrics::gauge!(RECONCILE_AT).set(chrono::Utc::now().timestamp() as f64);
}

/// Figures read at scrape time, from what the consumer and the live hub
/// know now.
pub struct Snapshot {
    pub consumer_lag_seconds: Option<f64>,
    pub records_applied: u64,
    pub bad_records: u64,
    pub live_clients: usize,
    /// The consumer's top keys of its last finished minute.
    pub hot_keys: Vec<HotKeyGauge>,
}

/// One partition key's write rate, as the hot keys family shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct HotKeyGauge {
    pub table: String,
    /// Empty for the table itself.
    pub index: String,
    pub key: String,
    pub units_per_second: f64,
}

/// The text of a scrape: `snapshot` set first, then everything rendered.
pub fn render(snapshot: &Snapshot) -> String {
    let handle = prometheus();
    if let Some(lag) = snapshot.consumer_lag_seconds {
        metrics::gauge!(CONSUMER_LAG).set(lag);
    }
    metrics::counter!(CONSUMER_RECORDS).absolute(snapshot.records_applied);
    metrics::counter!(CONSUMER_BAD_RECORDS).absolute(snapshot.bad_records);
    metrics::gauge!(LIVE_CLIENTS).set(snapshot.live_clients as f64);
    // No background task drains the histograms: each scrape does.
    handle.run_upkeep();
    let mut text = handle.render();
    text.push_str(&hot_keys(&snapshot.hot_keys));
    text
}

/// The hot keys family, written here rather than kept in the recorder: only
/// the current top keys are shown, so the series stay few (a gauge left in
/// the recorder would keep every key it ever named).
fn hot_keys(keys: &[HotKeyGauge]) -> String {
    let mut text = format!(
        "# HELP {HOT_KEYS} Write units per second of the partition keys written most in the consumer's last \
         finished minute (from the stream; top keys per table and index only)\n# TYPE {HOT_KEYS} gauge\n"
    );
    for key in keys {
        text.push_str(&format!(
            "{HOT_KEYS}{{table=\"{}\",index=\"{}\",key=\"{}\"}} {}\n",
            label(&key.table),
            label(&key.index),
            label(&key.key),
            key.units_per_second
        ));
    }
    text
}

/// A label value escaped as the text format wants it.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

//! `northwind-ops rehearse --counters`: the counters at the seed's scale.
//! For each stream shard count, consumer form and time of day asked for, a
//! fresh store (embedded and in memory, or fresh tables on `--endpoint-url`) behind the
//! throttle proxy (partition limits × `--scale`, 1.0 by default here) and
//! the simulated stream of that many shards (`sim::streams`), with a shard
//! split at the sale's peak; then the same flash sale (`loadgen`), and:
//!
//! - the consumers: two `serve` instances (processes of this binary, each
//!   with its consumer), or the Lambda form (`lambda` through the local
//!   event source mapping, `sim::lambda`) beside one `serve --no-consumer`;
//! - an open dashboard: the live stream of the first instance, whose
//!   `created` counter is timed against each order's acknowledgement
//!   (change → dashboard);
//! - at the end of a day: before the sale, today's counter items are filled
//!   as a late-evening day leaves them (every minute of the day has created,
//!   entered and left figures), through the consumer's own code, so whatever
//!   the counters' layout is, it is the one filled; the filling's records
//!   cancel out, so a recount still agrees.
//!
//! Printed per run: counters against a recount of the tables, records given
//! up to the dead-letter destination, throttles on the metrics table's keys
//! (the proxy's tally by key), metrics-table write units per order (every
//! write the run made to the metrics table, through the proxy, ÷ orders
//! created: the counters' apart from the audit records each order change's
//! writer puts there, and by item family), and the change → dashboard
//! latency.

use crate::model::{LiveEvent, Order, Role, Status};
use crate::server::auth::accounts;
use crate::server::sim::lambda::dead_letters::DeadLetters;
use crate::server::sim::lambda::runtime::FunctionConfig;
use crate::server::sim::lambda::{Mapping, MappingSettings, function_env};
use crate::server::sim::loadgen::{self, LoadReport, LoadgenArgs};
use crate::server::sim::rehearse::{DayTime, Form, RehearseError};
use crate::server::sim::report::Comparison;
use crate::server::sim::streams::{StreamOptions, StreamSim, StreamStats};
use crate::server::sim::throttle::buckets::Kind;
use crate::server::sim::throttle::{self, ProxyOptions, Tally, ThrottleError};
use crate::server::store::config::{StoreConfig, StoreKind};
use crate::server::store::{self, Store, TableCapacity, order_item};
use crate::server::stream::consumer::{Consumer, ConsumerOptions};
use aws_sdk_dynamodbstreams::primitives::DateTime as SdkDateTime;
use aws_sdk_dynamodbstreams::types::{OperationType, Record, StreamRecord, StreamViewType};
use chrono::{DateTime, NaiveDate, Utc};
use parking_lot::Mutex;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct CountersOptions {
    pub stream_shards: Vec<u32>,
    pub forms: Vec<Form>,
    pub days: Vec<DayTime>,
    pub scale: f64,
    pub load: LoadgenArgs,
    /// This program's binary: the `serve` instances and Lambda functions.
    pub binary: PathBuf,
    /// The Lambda form's batching window instead of the template's.
    pub batching_window: Option<Duration>,
}

impl CountersOptions {
    /// The options `rehearse --counters` was given; `binary` runs the
    /// `serve` instances and Lambda functions.
    pub fn of(args: &crate::server::sim::rehearse::RehearseArgs, binary: PathBuf) -> CountersOptions {
        CountersOptions {
            stream_shards: args.stream_shards.clone(),
            forms: args.forms.clone(),
            days: args.days.clone(),
            scale: args.scale(),
            load: crate::server::sim::rehearse::flash_sale(args),
            binary,
            batching_window: args.batching_window_secs.map(|secs| Duration::from_secs(u64::from(secs))),
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub form: Form,
    pub shards: u32,
    pub day: DayTime,
    pub load: LoadReport,
    /// What differs between the counters and a recount (empty: exact).
    pub off: Vec<String>,
    /// From the sale's end to the counters agreeing with the tables.
    pub settled: Option<Duration>,
    /// Records given up to the on-failure destination (the Lambda form).
    pub dead_letters: Option<u64>,
    pub proxy: Tally,
    pub metrics_table: String,
    /// Change → dashboard: p50 and p95, and orders the dashboard never showed.
    pub latency: Option<(Duration, Duration)>,
    pub unseen: usize,
    /// Records applied to fill the day before the sale.
    pub prefilled: usize,
    /// What the simulated stream served and refused.
    pub stream: StreamStats,
}

impl RunReport {
    /// Refusals on the metrics table's keys (the counters and what the
    /// consumers write beside them).
    pub fn counter_throttles(&self) -> u64 {
        self.proxy.by_key.iter().filter(|((resource, _), _)| *resource == self.metrics_table).map(|(_, n)| n).sum()
    }

    pub fn metrics_units_per_order(&self) -> f64 {
        let units = self.proxy.units.get(&(self.metrics_table.clone(), Kind::Write)).copied().unwrap_or(0.0);
        units / self.load.created.max(1) as f64
    }

    /// Of those, what the writers' audit trail took: each order change's
    /// audit records (`AUDIT#...`), written by the writer in the change's
    /// own transaction, not by the counters.
    pub fn audit_units_per_order(&self) -> f64 {
        let audit: f64 = self
            .proxy
            .writes_by_family
            .iter()
            .filter(|((table, family), _)| *table == self.metrics_table && family.starts_with("AUDIT"))
            .map(|(_, units)| units)
            .sum();
        audit / self.load.created.max(1) as f64
    }

    /// What the counters cost: every other metrics-table write, the
    /// consumers' (counters, checkpoints, leases, heat, capacity, hot keys,
    /// quality) and the writers' capacity records.
    pub fn counter_units_per_order(&self) -> f64 {
        self.metrics_units_per_order() - self.audit_units_per_order()
    }
}

/// Every run, one at a time (they would share the machine's cores).
pub async fn rehearse_counters(base: &StoreConfig, options: &CountersOptions) -> Result<Vec<RunReport>, RehearseError> {
    if options.stream_shards.is_empty() || options.stream_shards.iter().any(|s| !(1..=64).contains(s)) {
        return Err(RehearseError::Designs(format!(
            "--stream-shards {:?}: give shard counts from 1 to 64, e.g. 1,8,32",
            options.stream_shards
        )));
    }
    let mut reports = Vec::new();
    for &day in &options.days {
        for &form in &options.forms {
            for &shards in &options.stream_shards {
                if !options.load.quiet {
                    eprintln!("rehearsing the counters: {form:?} at {shards} stream shards, {day:?} of the day ...");
                }
                reports.push(one_run(base, options, form, shards, day).await?);
            }
        }
    }
    Ok(reports)
}

/// A run's scratch directory, removed afterwards.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> RehearseError {
    move |source| RehearseError::Io { what, source }
}

/// The engine of a run: fresh tables on the given endpoint, or a fresh
/// embedded store in memory (served on a loopback port, for the other
/// processes): the disk's speed is no part of a rehearsal's figures, as it is
/// no part of DynamoDB's.
pub(crate) struct Engine {
    pub(crate) config: StoreConfig,
    pub(crate) direct: Arc<Store>,
    pub(crate) url: String,
    pub(crate) embedded: Option<store::embedded::Embedded>,
}

pub(crate) async fn engine(base: &StoreConfig) -> Result<Engine, RehearseError> {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let mut config = StoreConfig {
        orders_table: format!("rehearse-{suffix}-orders"),
        metrics_table: format!("rehearse-{suffix}-metrics"),
        streams_endpoint_url: None,
        ..base.clone()
    };
    if base.kind() != StoreKind::Endpoint {
        config.store = Some(StoreKind::Embedded);
        config.embedded_in_memory = true;
        config.embedded_addr = "127.0.0.1:0".parse().expect("a socket address");
    }
    let (direct, embedded) = store::connect(&config).await?;
    let url = match &embedded {
        Some(embedded) => embedded.endpoint(),
        None => config.endpoint().unwrap_or_default(),
    };
    direct.provision(Some(TableCapacity::OnDemand)).await?;
    Ok(Engine { config, direct: Arc::new(direct), url, embedded })
}

async fn one_run(
    base: &StoreConfig,
    options: &CountersOptions,
    form: Form,
    shards: u32,
    day: DayTime,
) -> Result<RunReport, RehearseError> {
    let scratch = Scratch(std::env::temp_dir().join(format!("northwind-counters-{}", uuid::Uuid::new_v4().simple())));
    std::fs::create_dir_all(&scratch.0).map_err(io(format!("create {}", scratch.0.display())))?;
    let engine = engine(base).await?;
    let result = run_on(&engine, &scratch.0, options, form, shards, day).await;
    if engine.embedded.is_none() {
        for table in [&engine.config.orders_table, &engine.config.metrics_table] {
            let _ = engine.direct.client().delete_table().table_name(table).send().await;
        }
    }
    if let Some(embedded) = engine.embedded {
        embedded.shutdown().await;
    }
    result
}

async fn run_on(
    engine: &Engine,
    scratch: &Path,
    options: &CountersOptions,
    form: Form,
    shards: u32,
    day: DayTime,
) -> Result<RunReport, RehearseError> {
    let today = Utc::now().date_naive();
    let stop_proxy = CancellationToken::new();
    let proxy_options = ProxyOptions {
        upstream: engine.url.clone(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        scale: options.scale,
        // As on AWS: concurrent consumers' transactions on the same counter
        // items conflict (the local engines never refuse one).
        transaction_conflicts: true,
    };
    let (proxy_addr, proxy) = throttle::start(proxy_options, stop_proxy.clone().cancelled_owned()).await?;
    let sim = StreamSim::start(StreamOptions::new(&engine.url, Some(engine.config.orders_table.clone()), shards))
        .await
        .map_err(|e| RehearseError::Designs(e.to_string()))?;
    let prefilled = match day {
        DayTime::End => prefill(&engine.direct, today).await?,
        DayTime::Start => 0,
    };
    let proxied = StoreConfig {
        store: Some(StoreKind::Endpoint),
        endpoint_url: Some(format!("http://{proxy_addr}")),
        streams_endpoint_url: Some(sim.endpoint()),
        ..engine.config.clone()
    };
    let token = accounts::create_token(&engine.direct, "rehearsal", Role::Viewer, "rehearse")
        .await
        .map_err(|e| RehearseError::Designs(format!("a token for the dashboard: {e}")))?;
    let consumers = Consumers::start(options, &proxied, scratch, form).await?;
    let dashboard = Dashboard::open(&consumers.servers[0].base, &token, today).await?;
    let (loader, _) = store::connect(&proxied).await?;
    let load = run_sale(Arc::new(loader), options, &sim).await?;
    let load_ended = Instant::now();
    let off = settle(&engine.direct, today).await;
    let settled = off.is_empty().then(|| load_ended.elapsed());
    // The last changes reach an instance that did not apply them at its
    // follower's next read: wait for it before counting what was never seen.
    tokio::time::sleep(crate::server::service::follower::FOLLOW_EVERY * 2).await;
    let (latency, unseen) = dashboard.latency(&load.acked);
    let dead_letters = consumers.stop().await;
    let stream = sim.stop().await;
    stop_proxy.cancel();
    let proxy = proxy.await.map_err(|e| ThrottleError::Serve(std::io::Error::other(e)))??;
    Ok(RunReport {
        form,
        shards,
        day,
        load,
        off,
        settled,
        dead_letters,
        proxy,
        metrics_table: engine.config.metrics_table.clone(),
        latency,
        unseen,
        prefilled,
        stream,
    })
}

/// The sale, with one shard split at its peak (as DynamoDB splits a busy
/// partition).
async fn run_sale(store: Arc<Store>, options: &CountersOptions, sim: &StreamSim) -> Result<LoadReport, RehearseError> {
    let peak = Duration::from_secs(options.load.ramp + options.load.hold / 2);
    let split = async {
        tokio::time::sleep(peak).await;
        if let Err(err) = sim.split(None, None) {
            tracing::warn!(error = %err, "rehearsal: no shard split");
        }
    };
    let (load, ()) = tokio::join!(loadgen::run(store, &options.load), split);
    Ok(load?)
}

// ---- The day as a late evening leaves it ----------------------------------

/// Fills today's counter items as a late-evening day leaves them: for each
/// minute of the day, an order created then, confirmed and deleted then, its
/// three records applied by the consumer's own code under a checkpoint of
/// its own (so its transactions are the consumer's, whatever the counters'
/// layout). The state counters (created, PENDING, each status, the minute's
/// `c`) end where they began, so a recount still agrees; the history (the
/// minute's entered and left), the items' attributes and their size are a
/// whole day's. The phantom orders are on the day's shard count by the
/// rule (`shard_count`), recording none, as the order service writes. The
/// records applied.
pub async fn prefill(store: &Arc<Store>, day: NaiveDate) -> Result<usize, RehearseError> {
    let consumer = Consumer::new(store.clone(), ConsumerOptions::new("rehearsal-prefill"), None);
    let (arn, shard) = ("arn:northwind:rehearsal:prefill", format!("prefill-{day}"));
    let failed = |e: &dyn std::fmt::Display| RehearseError::Designs(format!("filling the day: {e}"));
    consumer.lease(arn, &shard).await.map_err(|e| failed(&e))?;
    let mut records = Vec::new();
    let shards = store.shards_for(day).await?;
    for minute in 0..24 * 60 {
        let at = day.and_hms_opt(minute / 60, minute % 60, 30).expect("a time of the day").and_utc();
        records.extend(phantom(&format!("prefill-{minute:04}"), at, shards, records.len())?);
    }
    let mut prev = None;
    for chunk in records.chunks(300) {
        prev = consumer.apply(arn, &shard, prev, chunk, false).await.map_err(|e| failed(&e))?;
    }
    Ok(records.len())
}

/// An order's creation, confirmation and deletion at `at`, as stream records
/// numbered from `first + 1`.
pub fn phantom(id: &str, at: DateTime<Utc>, shards: u32, first: usize) -> Result<Vec<Record>, RehearseError> {
    let pending = Order {
        order_id: id.to_string(),
        customer_id: Some("c-prefill".into()),
        status: Some(Status::Pending.into()),
        created_at: Some(at),
        updated_at: Some(at),
        total: Some(1999),
        currency: Some("USD".into()),
        items: Some(vec![crate::model::LineItem {
            sku: "TENT-2P".into(),
            name: "Tent".into(),
            quantity: 1,
            unit_price: 1999,
        }]),
        shipping_city: Some("Denver".into()),
        shipping_country: Some("US".into()),
        problems: Vec::new(),
    };
    let confirmed = Order { status: Some(Status::Confirmed.into()), ..pending.clone() };
    let image = |order: &Order| -> Result<_, RehearseError> {
        let item = order_item(order, shards)?;
        let json = crate::server::rules::units::item_to_json(&item);
        let value = serde_json::Value::Object(json);
        let stream: serde_dynamo::Item =
            serde_json::from_value(value).map_err(|e| RehearseError::Designs(e.to_string()))?;
        Ok(std::collections::HashMap::<String, aws_sdk_dynamodbstreams::types::AttributeValue>::from(stream))
    };
    let keys = {
        let mut keys = image(&pending)?;
        keys.retain(|name, _| name == crate::server::store::keys::PK);
        keys
    };
    let changes = [
        (OperationType::Insert, None, Some(image(&pending)?)),
        (OperationType::Modify, Some(image(&pending)?), Some(image(&confirmed)?)),
        (OperationType::Remove, Some(image(&confirmed)?), None),
    ];
    Ok(changes
        .into_iter()
        .enumerate()
        .map(|(i, (name, old, new))| {
            let data = StreamRecord::builder()
                .approximate_creation_date_time(SdkDateTime::from_secs(at.timestamp()))
                .set_keys(Some(keys.clone()))
                .set_old_image(old)
                .set_new_image(new)
                .sequence_number(format!("{:021}", first + i + 1))
                .size_bytes(500)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build();
            Record::builder()
                .event_id(format!("{id}-{i}"))
                .event_name(name)
                .event_version("1.1")
                .event_source("aws:dynamodb")
                .aws_region("us-east-1")
                .dynamodb(data)
                .build()
        })
        .collect())
}

// ---- The consumers ---------------------------------------------------------

/// A `serve` process of this binary, stopped by its pid.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    async fn start(
        binary: &Path,
        store: &StoreConfig,
        dir: &Path,
        name: &str,
        consumer: bool,
    ) -> Result<Server, RehearseError> {
        std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.log"));
        let mut command = Command::new(binary);
        command
            .args(["--store", "endpoint", "--endpoint-url", store.endpoint_url.as_deref().unwrap_or_default()])
            .args(["--streams-endpoint-url", store.streams_endpoint_url.as_deref().unwrap_or_default()])
            .args(["--orders-table", &store.orders_table, "--metrics-table", &store.metrics_table])
            .args(["--store-timeout-ms", "10000"])
            .arg("--data-dir")
            .arg(dir.join(name))
            .args(["serve", "--addr", "127.0.0.1:0", "--reconcile-minutes", "0", "--api-rate", "0"])
            .env("NORTHWIND_CURSOR_SECRET", "counters-rehearsal-cursor-secret-32-characters")
            .stdin(Stdio::null())
            .stdout(File::create(&out).map_err(io(format!("create {}", out.display())))?)
            .stderr(File::create(&err).map_err(io(format!("create {}", err.display())))?);
        if !consumer {
            command.arg("--no-consumer");
        }
        let mut child = command.spawn().map_err(io(format!("start {}", binary.display())))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let printed = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(base) = printed.lines().find_map(|l| l.strip_prefix("listening on ")) {
                return Ok(Server { child, base: base.trim().to_string() });
            }
            if Instant::now() > deadline || !matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(&err).unwrap_or_default();
                return Err(RehearseError::Designs(format!("{name} did not start serving:\n{log}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM by its pid (it hands its leases over), then SIGKILL if it
    /// has not stopped within 10 s.
    async fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct Consumers {
    servers: Vec<Server>,
    mapping: Option<Mapping>,
}

impl Consumers {
    async fn start(
        options: &CountersOptions,
        store: &StoreConfig,
        scratch: &Path,
        form: Form,
    ) -> Result<Consumers, RehearseError> {
        let binary = &options.binary;
        match form {
            Form::Serve => {
                let a = Server::start(binary, store, scratch, "serve-a", true).await?;
                let b = Server::start(binary, store, scratch, "serve-b", true).await?;
                Ok(Consumers { servers: vec![a, b], mapping: None })
            }
            Form::Lambda => {
                let dashboard = Server::start(binary, store, scratch, "serve", false).await?;
                let mut settings = MappingSettings::deployed().map_err(|e| RehearseError::Designs(e.to_string()))?;
                if let Some(window) = options.batching_window {
                    settings.batching_window = window;
                }
                let function = FunctionConfig {
                    binary: binary.clone(),
                    args: vec!["lambda".into()],
                    env: function_env(store).map_err(|e| RehearseError::Designs(e.to_string()))?,
                    name: "northwind-ops-consumer".into(),
                    memory_mb: settings.memory_mb,
                    timeout: settings.function_timeout,
                    work_dir: scratch.join("lambda"),
                };
                let (reader, _) = store::connect(store).await?;
                let letters = Arc::new(DeadLetters::new(Some(scratch.join("dead-letters.jsonl"))));
                let mapping = Mapping::start(Arc::new(reader), settings, function, letters);
                Ok(Consumers { servers: vec![dashboard], mapping: Some(mapping) })
            }
        }
    }

    /// Stops everything by pid; the records given up (Lambda form).
    async fn stop(self) -> Option<u64> {
        for server in self.servers {
            server.stop().await;
        }
        match self.mapping {
            Some(mapping) => Some(mapping.stop(Duration::from_secs(5)).await.given_up),
            None => None,
        }
    }
}

// ---- The dashboard and the counters ---------------------------------------

/// An open dashboard's live stream: when each `created` figure arrived.
struct Dashboard {
    seen: Arc<Mutex<Vec<(Instant, u64)>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Dashboard {
    async fn open(base: &str, token: &str, day: NaiveDate) -> Result<Dashboard, RehearseError> {
        let failed = |e: &dyn std::fmt::Display| RehearseError::Designs(format!("the dashboard's live stream: {e}"));
        let mut response = reqwest::Client::new()
            .get(format!("{base}/api/live?date={day}"))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| failed(&e))?;
        if !response.status().is_success() {
            return Err(failed(&response.status()));
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let collected = seen.clone();
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                let at = Instant::now();
                text.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = text.find("\n\n") {
                    let block: String = text.drain(..end + 2).collect();
                    for data in block.lines().filter_map(|line| line.strip_prefix("data:")) {
                        if let Ok(LiveEvent::Counters(counters)) = serde_json::from_str(data.trim()) {
                            collected.lock().push((at, counters.counts.created));
                        }
                    }
                }
            }
        });
        Ok(Dashboard { seen, reader })
    }

    /// Change → dashboard for the k-th order acknowledged: until the first
    /// `created` figure that counts k orders more than before the sale. The
    /// p50 and p95, and how many orders the dashboard never showed.
    fn latency(self, acked: &[Instant]) -> (Option<(Duration, Duration)>, usize) {
        self.reader.abort();
        let seen = self.seen.lock().clone();
        let before = seen.first().map_or(0, |(_, created)| *created);
        let mut latencies: Vec<Duration> = Vec::new();
        let mut unseen = 0;
        for (k, ack) in acked.iter().enumerate() {
            match seen.iter().find(|(at, created)| *created > before + k as u64 && at >= ack) {
                Some((at, _)) => latencies.push(at.duration_since(*ack)),
                None => unseen += 1,
            }
        }
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1];
        ((!latencies.is_empty()).then(|| (at(0.50), at(0.95))), unseen)
    }
}

/// Waits up to a minute for the counters to agree with the tables
/// (`Store::counter_differences`): what still differs.
pub(crate) async fn settle(store: &Store, day: NaiveDate) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let off = store.counter_differences(day).await;
        if off.is_empty() || Instant::now() > deadline {
            return off;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---- The table ---------------------------------------------------------

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// The runs side by side.
pub fn comparison(options: &CountersOptions, reports: &[RunReport]) -> Comparison {
    let load = &options.load;
    let setup = format!(
        "Flash sale: {:.0} orders/s rising to {:.0}/s over {} s, held {} s, back over {} s, {} writers; a stream \
         shard split at the peak; partition limits × {}. Latency: from an order's acknowledgement to the first \
         live `created` figure on an open dashboard that counts it.{}",
        load.rate,
        load.peak.unwrap_or(load.rate),
        load.ramp,
        load.hold,
        load.decay,
        load.writers,
        options.scale,
        options.batching_window.map_or(String::new(), |window| format!(
            " The Lambda form's batching window: {} s (not the template's).",
            window.as_secs()
        )),
    );
    let columns: Vec<String> = reports
        .iter()
        .map(|r| {
            let form = match r.form {
                Form::Serve => "2 × serve",
                Form::Lambda => "Lambda",
            };
            let day = match r.day {
                DayTime::Start => "00:01",
                DayTime::End => "23:59",
            };
            format!("{form}, {} shards, {day}", r.shards)
        })
        .collect();
    let mut table = Comparison::new(setup, columns);
    table
        .row("orders created (achieved/s)", reports, |r| format!("{} ({:.0}/s)", r.load.created, r.load.achieved_rate));
    table.row("counters vs recount", reports, |r| match (&r.settled, r.off.is_empty()) {
        (Some(after), true) => format!("exact, {:.1} s after the sale", after.as_secs_f64()),
        _ => format!("off: {}", r.off.join(", ")),
    });
    table.row("records given up (dead letters)", reports, |r| r.dead_letters.map_or("—".into(), |n| n.to_string()));
    table.row("throttles on metrics-table keys", reports, |r| {
        let hottest = r
            .proxy
            .hottest(1)
            .into_iter()
            .find(|((resource, _), _)| *resource == r.metrics_table)
            .map(|((_, key), n)| format!(" (most: {key}, {n})"))
            .unwrap_or_default();
        format!("{}{hottest}", r.counter_throttles())
    });
    table.row("metrics-table write units per order: the counters", reports, |r| {
        format!("{:.2}", r.counter_units_per_order())
    });
    table.row("… and the writers' audit trail (not the counters')", reports, |r| {
        format!("{:.2}", r.audit_units_per_order())
    });
    table.row("metrics-table write units per order, by item", reports, |r| {
        let orders = r.load.created.max(1) as f64;
        let mut families: Vec<(&String, f64)> = r
            .proxy
            .writes_by_family
            .iter()
            .filter(|((table, _), _)| *table == r.metrics_table)
            .map(|((_, family), units)| (family, units / orders))
            .filter(|(_, per_order)| *per_order >= 0.01)
            .collect();
        families.sort_by(|a, b| b.1.total_cmp(&a.1));
        families.iter().map(|(family, u)| format!("{family} {u:.2}")).collect::<Vec<_>>().join(", ")
    });
    table.row("metrics-table writes refused in conflict (sent again)", reports, |r| {
        r.proxy.conflicts.get(&r.metrics_table).copied().unwrap_or(0).to_string()
    });
    table.row("change → dashboard p50 / p95", reports, |r| match r.latency {
        Some((p50, p95)) => format!(
            "{} / {}{}",
            ms(p50),
            ms(p95),
            if r.unseen > 0 { format!(" ({} unseen)", r.unseen) } else { String::new() }
        ),
        None => "no change seen".into(),
    });
    // The engine's own wait, beside the dashboard's: every consumer commit
    // queues with these writes for the engine (Dynoxide serves one request
    // at a time), so a slow write here is a slow commit there.
    table.row("an order's write, due → acknowledged p50 / p99", reports, |r| match &r.load.write_latency {
        Some(p) => format!("{} / {}", ms(p.p50), ms(p.p99)),
        None => "—".into(),
    });
    table.row("day filled before the sale (records)", reports, |r| r.prefilled.to_string());
    table.row("stream calls: DescribeStream / GetRecords (refused)", reports, |r| {
        let calls = |op: &str| r.stream.calls.get(op).copied().unwrap_or(0);
        let refused: Vec<String> = r.stream.refused.iter().map(|(code, n)| format!("{code} {n}")).collect();
        format!(
            "{} / {} ({})",
            calls("DescribeStream"),
            calls("GetRecords"),
            if refused.is_empty() { "none".into() } else { refused.join(", ") }
        )
    });
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phantom_order_is_created_confirmed_and_deleted_in_its_minute() {
        let at = NaiveDate::from_ymd_opt(2026, 12, 4).unwrap().and_hms_opt(23, 59, 30).unwrap().and_utc();
        let records = phantom("prefill-1439", at, 10, 0).unwrap();
        let names: Vec<&str> = records.iter().map(|r| r.event_name().unwrap().as_str()).collect();
        assert_eq!(names, ["INSERT", "MODIFY", "REMOVE"]);
        let changes: Vec<_> = records.iter().map(|r| crate::server::stream::consumer::change(r).unwrap()).collect();
        assert!(changes[0].old.is_none() && changes[0].new.as_ref().unwrap().pending.is_some(), "enters PENDING");
        assert_eq!(changes[1].new.as_ref().unwrap().status, "CONFIRMED");
        assert!(changes[1].new.as_ref().unwrap().pending.is_none(), "and leaves it");
        assert!(changes[2].new.is_none(), "then is gone");
        assert!(changes.iter().all(|c| c.at == at), "all in the minute they fill");
        let json = crate::server::sim::wire::record(&records[0]);
        assert_eq!(json["dynamodb"]["Keys"]["PK"]["S"], "ORDER#prefill-1439");
    }
}

//! What every integration test binary shares: the two engines, the app on
//! port 0 against one of them, and order fixtures.
#![allow(dead_code)]

pub mod counters;
pub mod moto;
pub mod procs;

use chrono::{DateTime, Utc};
use clap::Parser;
use futures::StreamExt;
use northwind_ops::model::{Actor, LineItem, LiveEvent, Order, PendingPage, Role, Status};
use northwind_ops::server::auth::accounts;
use northwind_ops::server::cli::config::{Cli, ServeArgs, StoreConfig};
use northwind_ops::server::cursor::CursorCodec;
use northwind_ops::server::http::serve;
use northwind_ops::server::service::Service;
use northwind_ops::server::sim::plan_rehearsal::{ProxyRehearser, RehearsalBudget};
use northwind_ops::server::store::embedded::Embedded;
use northwind_ops::server::store::error::StoreError;
use northwind_ops::server::store::{self, Store, TableCapacity};
use northwind_ops::server::stream::live::{LiveHub, LiveLimits};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub const CURSOR_SECRET: &str = "integration-test-secret-of-32-chars";

#[derive(Clone, Debug)]
pub enum Engine {
    Dynoxide,
    DynamoDbLocal(String),
}

/// Both engines. DynamoDB Local must be running: a missing one fails the
/// test rather than letting it pass having checked half.
pub fn engines() -> Vec<Engine> {
    vec![Engine::Dynoxide, Engine::DynamoDbLocal(dynamodb_local())]
}

/// A DynamoDB Local of those `scripts/with-dynamodb-local.sh` runs (it says
/// why several), each test taking the next in turn.
pub fn dynamodb_local() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let all = std::env::var("NORTHWIND_TEST_DYNAMODB_LOCAL").expect(
        "NORTHWIND_TEST_DYNAMODB_LOCAL is not set: run the tests with `make test` \
         (or under scripts/with-dynamodb-local.sh)",
    );
    let endpoints: Vec<&str> = all.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    assert!(!endpoints.is_empty(), "NORTHWIND_TEST_DYNAMODB_LOCAL names no endpoint: {all:?}");
    let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    endpoints[next % endpoints.len()].to_string()
}

/// The URL another process reaches `engine` at: DynamoDB Local's, or the
/// embedded store's HTTP endpoint (served by this process).
pub fn endpoint_of(engine: &Engine, embedded: Option<&northwind_ops::server::store::embedded::Embedded>) -> String {
    match (engine, embedded) {
        (Engine::DynamoDbLocal(url), _) => url.clone(),
        (Engine::Dynoxide, Some(embedded)) => embedded.endpoint(),
        (Engine::Dynoxide, None) => unreachable!("the embedded store runs in this process"),
    }
}

/// The store settings of a test, made by the same parser the binary uses
/// (so its defaults are the binary's), with tables of its own.
pub fn store_config(engine: &Engine, dir: &Path, extra: &[&str]) -> StoreConfig {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let mut argv: Vec<String> = vec!["northwind-ops".into(), "--data-dir".into(), dir.display().to_string()];
    for (flag, table) in [("--orders-table", "orders"), ("--metrics-table", "metrics")] {
        if !extra.contains(&flag) {
            argv.extend([flag.to_string(), format!("{table}-{suffix}")]);
        }
    }
    // The suite runs many tests at once on two cores, so a call can wait
    // longer than a user's would: the default 4 s timed a setup write out
    // (CI, 2026-12-07). Tests of the timeout itself set their own.
    if !extra.contains(&"--store-timeout-ms") {
        argv.extend(["--store-timeout-ms".to_string(), "20000".to_string()]);
    }
    match engine {
        Engine::Dynoxide => argv.extend(["--store".into(), "embedded".into()]),
        Engine::DynamoDbLocal(url) => {
            argv.extend(["--store".into(), "endpoint".into(), "--endpoint-url".into(), url.clone()])
        }
    }
    argv.extend(extra.iter().map(|s| s.to_string()));
    let mut config = Cli::try_parse_from(argv).expect("test store flags parse").store;
    config.cursor_secret = Some(CURSOR_SECRET.into());
    config
}

/// `serve`'s settings with its defaults, listening on a free port, with the
/// API rate limit off (tests send bursts on purpose) unless `extra` sets it.
pub fn serve_args(extra: &[&str]) -> ServeArgs {
    let mut argv = vec!["northwind-ops", "serve", "--addr", "127.0.0.1:0"];
    if !extra.contains(&"--api-rate") {
        argv.extend(["--api-rate", "0"]);
    }
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).expect("test serve flags parse").command {
        Some(northwind_ops::server::cli::config::Command::Serve(args)) => *args,
        _ => unreachable!("the serve subcommand was named"),
    }
}

pub struct TestApp {
    pub engine: Engine,
    pub base: String,
    /// Sends an admin's API token with every request.
    pub http: reqwest::Client,
    /// An API token per role (made at start when the store is reachable).
    pub tokens: HashMap<Role, String>,
    pub store: Arc<Store>,
    pub service: Service,
    pub config: StoreConfig,
    stop: Option<oneshot::Sender<()>>,
    pub embedded: Option<Embedded>,
    pub dir: tempfile::TempDir,
}

impl TestApp {
    pub async fn spawn(engine: Engine) -> Self {
        Self::spawn_with(engine, &[], &[]).await
    }

    /// The app with extra store flags and extra serve flags.
    pub async fn spawn_with(engine: Engine, store_flags: &[&str], serve_flags: &[&str]) -> Self {
        Self::start(engine, store_flags, serve_flags, true).await
    }

    /// The app in front of a store it never reached (it may be down).
    pub async fn spawn_unprovisioned(engine: Engine, store_flags: &[&str]) -> Self {
        Self::start(engine, store_flags, &[], false).await
    }

    async fn start(engine: Engine, store_flags: &[&str], serve_flags: &[&str], provision: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = store_config(&engine, dir.path(), store_flags);
        let (store, embedded) = store::connect(&config).await.unwrap();
        let mut tokens = HashMap::new();
        if provision {
            store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
            for role in Role::ALL {
                let token = accounts::create_token(&store, &format!("test-{role}"), role, "tests").await.unwrap();
                tokens.insert(role, token);
            }
        }
        Self::serve(engine, config, store, embedded, dir, tokens, serve_flags).await
    }

    /// A second server on the same tables, as behind a load balancer.
    pub async fn another_instance(&self) -> TestApp {
        let endpoint = match &self.engine {
            Engine::Dynoxide => self.embedded.as_ref().unwrap().endpoint(),
            Engine::DynamoDbLocal(url) => url.clone(),
        };
        let dir = tempfile::tempdir().unwrap();
        let tables = ["--orders-table", &self.config.orders_table, "--metrics-table", &self.config.metrics_table];
        let config = store_config(&Engine::DynamoDbLocal(endpoint), dir.path(), &tables);
        let (store, _) = store::connect(&config).await.unwrap();
        Self::serve(self.engine.clone(), config, store, None, dir, self.tokens.clone(), &[]).await
    }

    async fn serve(
        engine: Engine,
        config: StoreConfig,
        store: Store,
        embedded: Option<Embedded>,
        dir: tempfile::TempDir,
        tokens: HashMap<Role, String>,
        serve_flags: &[&str],
    ) -> Self {
        let store = Arc::new(store);
        let args = serve_args(serve_flags);
        let live = LiveHub::new(LiveLimits {
            total: args.limits.max_live as usize,
            per_client: args.limits.max_live_per_client as usize,
        });
        let service = Service::new(store.clone(), Arc::new(CursorCodec::new(CURSOR_SECRET)), live)
            .with_stuck_after(args.stuck_after_minutes)
            .with_capacity(northwind_ops::server::service::figures::CapacitySettings {
                source: config.capacity_source(),
                ..Default::default()
            })
            .with_rehearser(Arc::new(ProxyRehearser::new(config.clone(), test_rehearsal_budget())));
        let (stop, stopped) = oneshot::channel::<()>();
        let (addr, _task) = serve::start(service.clone(), &args, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        // A store never reached has no tokens: a well-formed one still makes
        // requests reach the store (and find it down).
        let admin = tokens.get(&Role::Admin).cloned().unwrap_or_else(|| format!("nwo.test-admin.{}", "x".repeat(43)));
        Self {
            engine,
            base: format!("http://{addr}"),
            http: client_with_token(Some(&admin)),
            tokens,
            store,
            service,
            config,
            stop: Some(stop),
            embedded,
            dir,
        }
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Every page of the PENDING list, following `next` to the end.
    pub async fn all_pending(&self, query: &str) -> (Vec<String>, u64) {
        let (mut ids, mut read, mut cursor) = (Vec::new(), 0, None::<String>);
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/pending?{query}&cursor={c}"),
                None => format!("/api/pending?{query}"),
            };
            let (status, body) = self.get(&path).await;
            assert_eq!(status, 200, "{:?} {path}: {body}", self.engine);
            let page: PendingPage = serde_json::from_value(body).unwrap();
            read += page.items_read;
            ids.extend(page.orders.iter().map(|o| o.order_id.clone()));
            match page.next {
                Some(next) => cursor = Some(next),
                None => return (ids, read),
            }
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(embedded) = self.embedded.take() {
            embedded.shutdown().await;
        }
    }
}

/// A DynamoDB client of another writer (the order service): not the app's
/// store, so none of its calls is recorded by the app.
pub fn outside_client(app: &TestApp) -> aws_sdk_dynamodb::Client {
    let endpoint = match &app.engine {
        Engine::Dynoxide => app.embedded.as_ref().unwrap().endpoint(),
        Engine::DynamoDbLocal(url) => url.clone(),
    };
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("outside", "outside", None, None, "tests"))
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// A client that sends `token` as a bearer token with every request.
pub fn client_with_token(token: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = token {
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    }
    reqwest::Client::builder().default_headers(headers).build().unwrap()
}

impl TestApp {
    /// A client signed in with `role`'s token, or none.
    pub fn client_as(&self, role: Option<Role>) -> reqwest::Client {
        client_with_token(role.map(|r| self.tokens[&r].as_str()))
    }
}

pub fn order(id: &str, customer: &str, status: Status, created_at: DateTime<Utc>) -> Order {
    Order {
        order_id: id.into(),
        customer_id: Some(customer.into()),
        status: Some(status.into()),
        created_at: Some(created_at),
        updated_at: Some(created_at),
        total: Some(1999),
        currency: Some("USD".into()),
        items: Some(vec![LineItem { sku: "TENT-2P".into(), name: "Tent".into(), quantity: 1, unit_price: 1999 }]),
        shipping_city: Some("Denver".into()),
        shipping_country: Some("US".into()),
        problems: Vec::new(),
    }
}

pub fn new_order_json(id: &str, customer: &str) -> Value {
    json!({
        "orderId": id,
        "customerId": customer,
        "currency": "USD",
        "items": [{"sku": "LAMP-HD", "name": "Headlamp", "quantity": 2, "unitPrice": 3900}],
        "shippingCity": "Seattle",
        "shippingCountry": "US"
    })
}

pub async fn write_all(store: &Store, orders: Vec<Order>) {
    let results: Vec<Result<(), StoreError>> = futures::stream::iter(orders)
        .map(|o| async move { store.create_order(&o, &Actor::cli("tests")).await.map(drop) })
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result.unwrap();
    }
}

/// An open `GET /api/live`: every event, with when it arrived, collected in
/// the background until dropped.
pub struct LiveStream {
    events: Arc<Mutex<Vec<(Instant, LiveEvent)>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl LiveStream {
    /// Opens the stream and waits for its first event (the day's counters).
    pub async fn open(http: &reqwest::Client, base: &str, query: &str) -> LiveStream {
        let mut response = http.get(format!("{base}/api/live{query}")).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{base}/api/live{query}");
        let events = Arc::new(Mutex::new(Vec::new()));
        let collected = events.clone();
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                text.push_str(&String::from_utf8_lossy(&chunk));
                // Events end with a blank line; keep-alives are comment lines.
                while let Some(end) = text.find("\n\n") {
                    let block: String = text.drain(..end + 2).collect();
                    for data in block.lines().filter_map(|line| line.strip_prefix("data:")) {
                        let event: LiveEvent = serde_json::from_str(data.trim()).expect("a live event");
                        collected.lock().unwrap().push((Instant::now(), event));
                    }
                }
            }
        });
        let stream = LiveStream { events, reader };
        assert!(stream.wait_for(Duration::from_secs(10), |_| true).await.is_some(), "no first event from {base}");
        stream
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<(Instant, LiveEvent)> {
        self.events.lock().unwrap().clone()
    }

    /// When the first event that `wanted` accepts arrived, waiting up to `limit` for it.
    pub async fn wait_for(&self, limit: Duration, wanted: impl Fn(&LiveEvent) -> bool) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some((at, _)) = self.events.lock().unwrap().iter().find(|(_, e)| wanted(e)) {
                return Some(*at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for LiveStream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A sale plan's rehearsal in the tests: `serve`'s, shorter (6 seconds
/// and 2 at the base rate), at the same peak budget.
pub fn test_rehearsal_budget() -> RehearsalBudget {
    RehearsalBudget { seconds: 6, tail_seconds: 2, ..RehearsalBudget::default() }
}

/// The app's tables as a process of its own reaches them: over HTTP.
pub fn over_http(app: &TestApp) -> northwind_ops::server::cli::config::StoreConfig {
    let mut config = app.config.clone();
    config.store = Some(northwind_ops::server::store::config::StoreKind::Endpoint);
    // The embedded store's own endpoint, where this app runs it; else the
    // endpoint it reaches (DynamoDB Local, or another instance's store).
    config.endpoint_url = match &app.embedded {
        Some(embedded) => Some(embedded.endpoint()),
        None => app.config.endpoint_url.clone(),
    };
    config
}

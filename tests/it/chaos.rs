//! Chaos: the built binary as processes where a crash is the point. A
//! `serve` killed with SIGKILL mid-sale, DynamoDB Local stopped and started
//! again under load, two instances sharing one stream with one of them
//! killed, reconciliation running through a whole flash sale, and a stream
//! whose shard splits. Each ends with every counter family equal to its
//! recount (and reconciliation's dry runs finding no drift), and loadgen
//! finding every order it created.
//!
//! Every process started here is stopped by its own pid, whatever the
//! outcome (`Proc`'s drop). The scenarios take turns: on a small machine two
//! flash sales at once would measure the machine, not the code.

use crate::common;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration as Span, NaiveDate, Utc};
use common::counters::{consumer, drain};
use common::procs::{DynamoDbLocal, Proc};
use common::{Engine, LiveStream, TestApp, client_with_token, engines, new_order_json, order};
use northwind_ops::model::{LiveEvent, Order, PendingPage, Status};
use northwind_ops::server::store::embedded::Embedded;
use northwind_ops::server::store::keys::{self, attr};
use northwind_ops::server::store::{Store, order_item};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");
/// Every instance signs cursors with the same secret, as behind a load balancer.
const CURSOR_SECRET: &str = "chaos-tests-cursor-secret-of-32-characters";
/// A small flash sale: from 20 to 100 orders a second and back in 10 s
/// (DynamoDB Local on two cores takes some 60 to 100 a second).
#[rustfmt::skip]
const FLASH_SALE: [&str; 20] = [
    "loadgen", "--profile", "flash-sale", "--rate", "20", "--peak", "100", "--ramp", "3", "--hold", "4",
    "--decay", "3", "--duration", "10", "--close-after", "4", "--writers", "8", "--quiet",
];

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Tables of one scenario on one endpoint, the binary's flags to reach them,
/// an admin token, and a store of the test's own for checking the tables.
struct Cluster {
    endpoint: String,
    orders: String,
    metrics: String,
    dir: tempfile::TempDir,
    store: Arc<Store>,
    token: String,
    http: reqwest::Client,
}

/// A running `serve`.
struct Server {
    process: Proc,
    base: String,
}

impl Cluster {
    async fn new(endpoint: String) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let (orders, metrics) = (format!("chaos-orders-{suffix}"), format!("chaos-metrics-{suffix}"));
        let tables = ["--orders-table", orders.as_str(), "--metrics-table", metrics.as_str()];
        let config = common::store_config(&Engine::DynamoDbLocal(endpoint.clone()), dir.path(), &tables);
        let (store, _) = northwind_ops::server::store::connect(&config).await.unwrap();
        let mut cluster = Cluster {
            endpoint,
            orders,
            metrics,
            dir,
            store: Arc::new(store),
            token: String::new(),
            http: reqwest::Client::new(),
        };
        let (code, _, log) = cluster.run("provision", &["provision"], Duration::from_secs(60)).await;
        assert_eq!(code, Some(0), "{log}");
        let (code, token, log) = cluster
            .run("token", &["token", "create", "--name", "chaos", "--role", "admin"], Duration::from_secs(30))
            .await;
        assert_eq!(code, Some(0), "{log}");
        cluster.token = token.trim().to_string();
        cluster.http = client_with_token(Some(&cluster.token));
        cluster
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(["--endpoint-url", &self.endpoint, "--orders-table", &self.orders, "--metrics-table", &self.metrics])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(args)
            .env("NORTHWIND_CURSOR_SECRET", CURSOR_SECRET)
            .env("NORTHWIND_LOG", "info,aws_config=warn,aws_smithy_runtime=warn");
        command
    }

    fn spawn(&self, name: &str, args: &[&str]) -> Proc {
        Proc::spawn(self.command(args), self.dir.path(), name)
    }

    /// Runs a command to its end: exit code, standard output, and log.
    async fn run(&self, name: &str, args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
        self.spawn(name, args).finish(limit).await
    }

    /// `serve` on a free port, consumer included, once it listens.
    async fn serve(&self, name: &str) -> Server {
        let args = ["serve", "--addr", "127.0.0.1:0", "--reconcile-minutes", "0", "--api-rate", "0"];
        let mut process = self.spawn(name, &args);
        let Some(line) = process.line("listening on ", Duration::from_secs(60)).await else {
            panic!("{name} never listened\n{}", process.log_tail());
        };
        Server { base: line.trim_start_matches("listening on ").to_string(), process }
    }

    /// Who holds the lease of the stream's shard (local engines have one).
    async fn lease_owner(&self) -> Option<String> {
        let arn = self.store.stream_arn().await.ok()??;
        let out = self
            .store
            .client()
            .query()
            .table_name(&self.metrics)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(keys::checkpoint_pk(&arn)))
            .consistent_read(true)
            .send()
            .await
            .ok()?;
        out.items().first()?.get(attr::OWNER)?.as_s().ok().cloned()
    }

    /// Waits until the process with `pid` holds the lease (owner names carry
    /// the pid); how long it took.
    async fn wait_for_lease(&self, pid: u32, limit: Duration) -> Duration {
        let started = Instant::now();
        let mark = format!("-{pid}-");
        while !self.lease_owner().await.is_some_and(|owner| owner.contains(&mark)) {
            assert!(
                started.elapsed() < limit,
                "pid {pid} did not take the lease in {limit:?}: {:?}",
                self.lease_owner().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started.elapsed()
    }

    /// Waits until every counter of `day` equals its recount; how long it took.
    async fn settle(&self, day: NaiveDate, limit: Duration, servers: &[&Server]) -> Duration {
        let started = Instant::now();
        loop {
            let off = self.store.counter_differences(day).await;
            if off.is_empty() {
                return started.elapsed();
            }
            if started.elapsed() > limit {
                let logs: Vec<String> = servers.iter().map(|s| s.process.log_tail()).collect();
                panic!("counters still off after {limit:?}: {off:?}\n{}", logs.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Reconciliation's dry runs, PENDING and full: both must find no drift.
    async fn dry_runs(&self) -> String {
        let pending = ["reconcile", "--dry-run", "--grace-ms", "300"];
        let (code, out, log) = self.run("reconcile-dry-run", &pending, Duration::from_secs(60)).await;
        assert_eq!(code, Some(0), "{out}{log}");
        assert!(out.contains("drift +0") && !out.contains("(off:"), "{out}");
        let full = ["reconcile", "--full", "--dry-run", "--max-rcu-per-second", "5000", "--grace-ms", "300"];
        let (code, out_full, log) = self.run("reconcile-full-dry-run", &full, Duration::from_secs(60)).await;
        assert_eq!(code, Some(0), "{out_full}{log}");
        assert!(out_full.contains("drift +0; statuses off: none; minutes off: 0"), "{out_full}");
        format!("{}{}", out, out_full.lines().find(|l| l.contains(": created ")).unwrap_or_default())
    }

    /// `GET path` with the admin token: status and body.
    async fn page(&self, base: &str, path: &str) -> Option<(u16, String)> {
        let response = self.http.get(format!("{base}{path}")).send().await.ok()?;
        Some((response.status().as_u16(), response.text().await.unwrap_or_default()))
    }

    async fn metrics(&self, server: &Server) -> Value {
        let response = self.http.get(format!("{}/api/metrics/pending", server.base)).send().await.unwrap();
        response.json().await.unwrap()
    }
}

/// Orders loadgen created, from its summary; it must have found every one.
fn loadgen_created(code: Option<i32>, out: &str, log: &str) -> u64 {
    assert_eq!(code, Some(0), "loadgen failed:\n{out}\n{log}");
    let number = |prefix: &str| {
        out.lines().find_map(|l| l.strip_prefix(prefix)).and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    let created: u64 = number("orders created").unwrap_or_else(|| panic!("no summary:\n{out}"));
    assert!(out.contains(&format!("verified         {created} of {created} created orders")), "{out}");
    created
}

// ---- A serve instance killed mid-sale -------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_killed_mid_sale_and_restarted_leaves_every_counter_exact() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let cluster = Cluster::new(common::dynamodb_local()).await;
    let day = Utc::now().date_naive();
    let mut first = cluster.serve("serve-1").await;
    cluster.wait_for_lease(first.process.pid(), Duration::from_secs(15)).await;
    let mut load = cluster.spawn("loadgen", &FLASH_SALE);

    // Mid-sale, once it has applied a good part of what came so far.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut applied = 0;
    while Instant::now() < deadline && applied < 150 {
        applied = cluster.metrics(&first).await["freshness"]["recordsApplied"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(applied > 0 && load.running(), "the sale is under way: {applied} applied");
    first.process.kill9();
    let killed = Instant::now();
    let second = cluster.serve("serve-2").await;

    let (code, out, log) = load.finish(Duration::from_secs(120)).await;
    let created = loadgen_created(code, &out, &log);
    // The new instance takes the lease over once the dead one's runs out (15 s).
    cluster.wait_for_lease(second.process.pid(), Duration::from_secs(40)).await;
    let took_over = killed.elapsed();
    let settled = cluster.settle(day, Duration::from_secs(60), &[&second]).await;
    let dry_runs = cluster.dry_runs().await;
    println!(
        "killed serve-1 (pid {}) after it applied {applied} records; loadgen created {created} orders; serve-2 held \
         the lease by {:.1} s after the kill; counters exact {:.1} s after that; {:.1} s in all\n{dry_runs}",
        first.process.pid(),
        took_over.as_secs_f64(),
        settled.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

// ---- The store stopped under load -----------------------------------------

/// Pages while the store is down: each a 503 with the banner, asked every
/// half second. Only the first waits out the SDK's retries (up to 3 s);
/// after it the store's breaker fails calls at once, so the 10 s hold many
/// answers (4 or 5 before the breaker, 16 to 18 with it, 2026-12-03).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_local_stopped_for_10_s_under_load_answers_503_recovers_and_loses_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let mut local = DynamoDbLocal::start().await;
    let cluster = Cluster::new(local.endpoint()).await;
    let day = Utc::now().date_naive();
    let server = cluster.serve("serve").await;
    assert_eq!(cluster.page(&server.base, "/").await.map(|(status, _)| status), Some(200));
    let load = ["loadgen", "--rate", "25", "--duration", "24", "--close-after", "3", "--writers", "4", "--quiet"];
    let mut load = cluster.spawn("loadgen", &load);
    tokio::time::sleep(Duration::from_secs(4)).await;

    local.stop().await;
    let stopped = Instant::now();
    let mut answers = Vec::new();
    while stopped.elapsed() < Duration::from_secs(10) {
        let asked = Instant::now();
        let (status, body) = cluster.page(&server.base, "/").await.expect("the server answers while its store is down");
        answers.push((status, body.contains(r#"data-testid="store-down""#), asked.elapsed()));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (api_status, api_body) = cluster.page(&server.base, "/api/pending").await.unwrap();
    local.start_again().await;
    let back = Instant::now();
    let recovered = loop {
        if let Some((200, _)) = cluster.page(&server.base, "/").await {
            break back.elapsed();
        }
        assert!(back.elapsed() < Duration::from_secs(30), "pages did not recover\n{}", server.process.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let (code, out, log) = load.finish(Duration::from_secs(120)).await;
    let created = loadgen_created(code, &out, &log);
    let settled = cluster.settle(day, Duration::from_secs(60), &[&server]).await;
    let dry_runs = cluster.dry_runs().await;
    let slowest = answers.iter().map(|(_, _, took)| *took).max().unwrap_or_default();
    // The first waits out the retries; the breaker answers the rest.
    let slowest_after_first = answers.iter().skip(1).map(|(_, _, took)| *took).max().unwrap_or_default();
    println!(
        "store down {:.1} s: {} page answers, statuses {:?}, slowest {slowest:?} (after the first \
         {slowest_after_first:?}); pages answered 200 again {:.1} s \
         after it was back; loadgen created {created} ({}); counters exact {:.1} s later; {:.1} s in all\n{dry_runs}",
        back.duration_since(stopped).as_secs_f64(),
        answers.len(),
        answers.iter().map(|(status, _, _)| *status).collect::<Vec<_>>(),
        recovered.as_secs_f64(),
        out.lines().find(|l| l.starts_with("errors")).unwrap_or_default().trim(),
        settled.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(answers.len() >= 10, "pages answered at once, not each after retries: {answers:?}");
    assert!(
        answers.iter().all(|(status, banner, _)| *status == 503 && *banner),
        "every page a 503 with the banner: {answers:?}"
    );
    assert!(slowest < Duration::from_secs(5), "prompt answers: {answers:?}");
    assert_eq!(api_status, 503, "{api_body}");
    assert!(api_body.contains(r#""kind""#), "{api_body}");
}

// ---- Two instances, one killed ---------------------------------------------

/// An order created through one instance, and when its answer came.
struct Written {
    id: String,
    done: Instant,
    confirmed: bool,
}

/// Creates orders through `base`, one every `pause` until `stop`, confirming
/// every third at once (so it leaves PENDING); stops at the first refusal.
async fn write_through(
    http: reqwest::Client,
    base: String,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    pause: Duration,
) -> Vec<Written> {
    let mut written: Vec<Written> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let id = format!("{prefix}-{:04}", written.len());
        let Ok(response) = http.post(format!("{base}/api/orders")).json(&new_order_json(&id, "c-chaos")).send().await
        else {
            break;
        };
        assert_eq!(response.status().as_u16(), 201, "{id} through {base}");
        let confirmed = written.len().is_multiple_of(3);
        if confirmed {
            let change = json!({"from": "PENDING", "to": "CONFIRMED"});
            let response = http.post(format!("{base}/api/orders/{id}/status")).json(&change).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200, "{id} through {base}");
        }
        written.push(Written { id, done: Instant::now(), confirmed });
        tokio::time::sleep(pause).await;
    }
    written
}

/// What a dashboard does on `changed`: reads page one again. Every read,
/// with when its answer came and the orders it showed.
async fn reread_on_changed(
    live: Arc<LiveStream>,
    http: reqwest::Client,
    base: String,
    stop: Arc<AtomicBool>,
) -> Vec<(Instant, Vec<String>)> {
    let (mut reads, mut seen) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        let events = live.events();
        let changed = events[seen..].iter().any(|(_, e)| matches!(e, LiveEvent::Changed { .. }));
        seen = events.len();
        if changed {
            let page: PendingPage =
                http.get(format!("{base}/api/pending?limit=100")).send().await.unwrap().json().await.unwrap();
            reads.push((Instant::now(), page.orders.into_iter().map(|o| o.order_id).collect()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    reads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_one_killed_counters_exact_and_the_survivor_streams_the_others_writes() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let cluster = Cluster::new(common::dynamodb_local()).await;
    let day = Utc::now().date_naive();
    // The local engines keep one stream shard: A holds it, B's consumer waits.
    let mut a = cluster.serve("serve-a").await;
    cluster.wait_for_lease(a.process.pid(), Duration::from_secs(15)).await;
    let b = cluster.serve("serve-b").await;
    let live = Arc::new(LiveStream::open(&cluster.http, &b.base, "").await);
    let opened = Instant::now();
    let flag = || Arc::new(AtomicBool::new(false));
    let (stop_a, stop_b, stop_reading) = (flag(), flag(), flag());
    let reader =
        tokio::spawn(reread_on_changed(live.clone(), cluster.http.clone(), b.base.clone(), stop_reading.clone()));
    let pause = Duration::from_millis(150);
    let via_a = tokio::spawn(write_through(cluster.http.clone(), a.base.clone(), "via-a", stop_a.clone(), pause));
    let via_b = tokio::spawn(write_through(cluster.http.clone(), b.base.clone(), "via-b", stop_b.clone(), pause));

    tokio::time::sleep(Duration::from_secs(6)).await;
    stop_a.store(true, Ordering::Relaxed);
    let written_a = via_a.await.unwrap();
    // A is killed once its consumer has had a pass or two since its last
    // write (it pauses at most 200 ms): what is measured is how A's
    // commits reach B. An order A wrote and never committed reaches B's
    // page by B's own consumer once it takes the lease (the test of a
    // serve killed mid-sale), not by a `changed`.
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.process.kill9();
    let killed = Instant::now();
    // B takes the stream over once A's lease runs out, and writes go on through it.
    cluster.wait_for_lease(b.process.pid(), Duration::from_secs(40)).await;
    let took_over = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_b.store(true, Ordering::Relaxed);
    let written_b = via_b.await.unwrap();
    let settled = cluster.settle(day, Duration::from_secs(30), &[&b]).await;
    // Two more rounds of B's follower: nothing of B's own is pushed again.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    stop_reading.store(true, Ordering::Relaxed);
    let reads = reader.await.unwrap();
    let events = live.events();
    let figures = cluster.metrics(&b).await["live"].clone();
    let followed = opened.elapsed().as_secs_f64();

    // Every order written through A and still PENDING showed on B's page one,
    // read again on `changed`, within 3 s of its creation.
    let mut lags = Vec::new();
    for order in written_a.iter().filter(|w| !w.confirmed) {
        let shown = reads.iter().find(|(_, ids)| ids.contains(&order.id)).map(|(at, _)| *at);
        let shown = shown.unwrap_or_else(|| panic!("{} (written through A) never showed on B", order.id));
        lags.push(shown.saturating_duration_since(order.done));
    }
    let last_changed = events.iter().filter(|(_, e)| matches!(e, LiveEvent::Changed { .. })).map(|(at, _)| *at).max();
    let entered_after =
        events.iter().filter(|(at, e)| *at > killed + took_over && matches!(e, LiveEvent::Entered { .. })).count();
    let max_lag = lags.iter().max().copied().unwrap_or_default();
    let mean_lag = lags.iter().sum::<Duration>() / lags.len().max(1) as u32;
    let units = figures["readUnits"].as_f64().unwrap_or(0.0);
    let dry_runs = cluster.dry_runs().await;
    println!(
        "{} orders through A, {} through B; A killed, B held the lease {:.1} s later; counters exact {:.1} s after \
         writes stopped. A's orders on B's page one after `changed`: mean {mean_lag:?}, max {max_lag:?} ({} \
         orders, {} re-reads); B pushed {entered_after} rows of its own once it held the stream; B's follower: {figures} \
         = {:.2} read units a second over {followed:.0} s; {:.1} s in all\n{dry_runs}",
        written_a.len(),
        written_b.len(),
        took_over.as_secs_f64(),
        settled.as_secs_f64(),
        lags.len(),
        reads.len(),
        units / followed,
        started.elapsed().as_secs_f64()
    );
    assert!(lags.len() >= 10, "{} orders measured", lags.len());
    assert!(max_lag < Duration::from_secs(3), "{lags:?}");
    assert!(last_changed.is_some_and(|at| at < killed + Duration::from_secs(2)), "B pushed `changed` for its own rows");
    assert!(entered_after > 0, "B pushes its own consumer's rows itself");
    assert!(units > 0.0 && units / followed <= 2.5, "two read units a second for one watched day: {figures}");
}

// ---- A rolling restart --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_hands_the_lease_over_so_the_next_instance_streams_at_once() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::new(common::dynamodb_local()).await;
    let mut first = cluster.serve("serve-first").await;
    cluster.wait_for_lease(first.process.pid(), Duration::from_secs(15)).await;
    let (status, log) = first.process.finish_after_term(Duration::from_secs(30)).await;
    assert_eq!(status, Some(0), "{log}");

    // The next instance on the same store, a dashboard open on it at once,
    // and an order created through its API right away: without the handoff
    // its consumer waits for the old lease to expire (15 s).
    let restarted = Instant::now();
    let next = cluster.serve("serve-next").await;
    let live = LiveStream::open(&cluster.http, &next.base, "").await;
    let created = Instant::now();
    let response =
        cluster.http.post(format!("{}/api/orders", next.base)).json(&new_order_json("restart-1", "c-r")).send().await;
    assert_eq!(response.unwrap().status().as_u16(), 201);
    let wanted = |e: &LiveEvent| matches!(e, LiveEvent::Entered { order, .. } if order.order_id == "restart-1");
    let shown = live.wait_for(Duration::from_secs(20), wanted).await;
    let lag = shown.map(|at| at.saturating_duration_since(created));
    println!(
        "restarted: listening and live {:.2} s after the restart began; the order created then on the dashboard \
         after {lag:?}",
        (created - restarted).as_secs_f64()
    );
    assert!(lag.is_some_and(|lag| lag < Duration::from_millis(1_500)), "{lag:?}\n{}", next.process.log_tail());
    assert!(log.contains("lease handed over"), "{log}");
}

// ---- Reconciliation through a flash sale -----------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciling_every_few_seconds_through_a_flash_sale_repairs_nothing_and_ends_exact() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // Both engines: Dynoxide served from this process (the binaries reach it
    // by its address), and the shared DynamoDB Local.
    let dir = tempfile::tempdir().unwrap();
    let dynoxide = Embedded::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    reconcile_through_a_sale("Dynoxide", dynoxide.endpoint()).await;
    dynoxide.shutdown().await;
    reconcile_through_a_sale("DynamoDB Local", common::dynamodb_local()).await;
}

async fn reconcile_through_a_sale(engine: &str, endpoint: String) {
    let started = Instant::now();
    let cluster = Cluster::new(endpoint).await;
    let day = Utc::now().date_naive();
    let server = cluster.serve("serve").await;
    // Sales follow one another until three reconciliations have run during
    // one: how many fit in one sale depends on the machine's load (on a busy
    // 2-core machine, one on DynamoDB Local reading ~1,100 records takes most
    // of a 10-s sale), so the test counts them instead of timing them.
    let mut runs = Vec::new();
    let mut created = 0;
    let mut sales = 0;
    while runs.len() < 3 && sales < 4 {
        sales += 1;
        let mut load = cluster.spawn(&format!("loadgen-{sales}"), &FLASH_SALE);
        while load.running() {
            let name = format!("reconcile-{}", runs.len());
            let began = Instant::now();
            let args = ["reconcile", "--grace-ms", "500"];
            let (code, out, log) = cluster.run(&name, &args, Duration::from_secs(60)).await;
            assert_eq!(code, Some(0), "{engine}: {out}{log}");
            let clean = out.contains("drift +0") && !out.contains("(off:") && !out.contains("repaired");
            assert!(clean, "{engine}: a reconciliation during the sale found drift: {out}");
            runs.push(format!("sale {sales}, {:.1} s: {}", began.elapsed().as_secs_f64(), out.trim()));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let (code, out, log) = load.finish(Duration::from_secs(10)).await;
        created += loadgen_created(code, &out, &log);
    }
    let settled = cluster.settle(day, Duration::from_secs(60), &[&server]).await;
    let dry_runs = cluster.dry_runs().await;
    println!(
        "{engine}: {sales} sales created {created} orders; {} reconciliations during them, none found drift:\n{}\n\
         counters exact {:.1} s after the sale; {:.1} s in all\n{dry_runs}",
        runs.len(),
        runs.join("\n"),
        settled.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(runs.len() >= 3, "{engine}: {runs:?}");
}

// ---- A stream shard that splits --------------------------------------------

/// The write shards the recorded orders' index keys use (the default).
const SHARDS: u32 = 10;

/// One shard of a recorded stream: its records, as DynamoDB Streams sends them.
struct RecordedShard {
    id: String,
    parent: Option<String>,
    closed: bool,
    records: Vec<Value>,
    seqs: Vec<String>,
}

/// A DynamoDB Streams endpoint answering from records built in advance (the
/// local engines never split a shard). When a child's iterator is asked for,
/// it looks in the metrics table whether the parent was applied to its end.
struct RecordedStream {
    shards: Vec<RecordedShard>,
    store: Arc<Store>,
    /// Each call: the operation and the shard.
    calls: Mutex<Vec<String>>,
    /// Each child iterator asked for, and whether its parent was finished then.
    child_iterators: Mutex<Vec<(String, bool)>>,
}

impl RecordedStream {
    fn shard(&self, id: &str) -> &RecordedShard {
        self.shards.iter().find(|s| s.id == id).unwrap_or_else(|| panic!("no shard {id}"))
    }

    fn describe(&self, request: &Value) -> Value {
        let shards: Vec<Value> = self
            .shards
            .iter()
            .map(|s| {
                let mut range = json!({"StartingSequenceNumber": s.seqs[0]});
                if s.closed {
                    range["EndingSequenceNumber"] = json!(s.seqs.last().unwrap());
                }
                let mut shard = json!({"ShardId": s.id, "SequenceNumberRange": range});
                if let Some(parent) = &s.parent {
                    shard["ParentShardId"] = json!(parent);
                }
                shard
            })
            .collect();
        json!({"StreamDescription": {
            "StreamArn": request["StreamArn"], "StreamLabel": "recorded", "StreamStatus": "ENABLED",
            "StreamViewType": "NEW_AND_OLD_IMAGES", "TableName": "recorded",
            "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}], "Shards": shards
        }})
    }

    async fn iterator(&self, request: &Value) -> Value {
        let shard = self.shard(request["ShardId"].as_str().unwrap());
        let at = |seq: &Value| shard.seqs.iter().position(|s| Some(s.as_str()) == seq.as_str()).unwrap();
        let position = match request["ShardIteratorType"].as_str().unwrap() {
            "TRIM_HORIZON" => 0,
            "LATEST" => shard.records.len(),
            "AT_SEQUENCE_NUMBER" => at(&request["SequenceNumber"]),
            _ => at(&request["SequenceNumber"]) + 1,
        };
        if let Some(parent) = &shard.parent {
            let checkpoints = self.store.checkpoints(request["StreamArn"].as_str().unwrap()).await.unwrap();
            let done = checkpoints
                .get(parent)
                .is_some_and(|c| c.finished && c.seq.as_deref() == self.shard(parent).seqs.last().map(String::as_str));
            self.child_iterators.lock().unwrap().push((shard.id.clone(), done));
        }
        json!({"ShardIterator": format!("{}|{position}", shard.id)})
    }

    fn records(&self, request: &Value) -> Value {
        let (id, position) = request["ShardIterator"].as_str().unwrap().split_once('|').unwrap();
        let (shard, position) = (self.shard(id), position.parse::<usize>().unwrap());
        let end = (position + request["Limit"].as_u64().unwrap_or(1000) as usize).min(shard.records.len());
        let mut answer = json!({"Records": shard.records[position..end]});
        // A closed shard read to its end has no next iterator.
        if end < shard.records.len() || !shard.closed {
            answer["NextShardIterator"] = json!(format!("{id}|{end}"));
        }
        answer
    }
}

async fn answer(State(stream): State<Arc<RecordedStream>>, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let operation = target.rsplit('.').next().unwrap_or_default().to_string();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let about = request["ShardId"].as_str().or(request["ShardIterator"].as_str()).unwrap_or_default();
    stream.calls.lock().unwrap().push(format!("{operation} {}", about.split('|').next().unwrap_or_default()));
    let answer = match operation.as_str() {
        "DescribeStream" => stream.describe(&request),
        "GetShardIterator" => stream.iterator(&request).await,
        "GetRecords" => stream.records(&request),
        _ => return (StatusCode::BAD_REQUEST, format!("no {operation} here")).into_response(),
    };
    ([(header::CONTENT_TYPE, "application/x-amz-json-1.0")], answer.to_string()).into_response()
}

/// An attribute value in the JSON of the DynamoDB protocol.
fn wire(value: &aws_sdk_dynamodb::types::AttributeValue) -> Value {
    use aws_sdk_dynamodb::types::AttributeValue as V;
    match value {
        V::S(s) => json!({"S": s}),
        V::N(n) => json!({"N": n}),
        V::Bool(b) => json!({"BOOL": b}),
        V::Null(_) => json!({"NULL": true}),
        V::L(list) => json!({"L": list.iter().map(wire).collect::<Vec<_>>()}),
        V::M(map) => json!({"M": map.iter().map(|(k, v)| (k.clone(), wire(v))).collect::<serde_json::Map<_, _>>()}),
        other => panic!("no wire form for {other:?}"),
    }
}

/// Records of a stream shard, numbered from `first`, and the orders as they end.
struct Recorder<'a> {
    orders: &'a mut BTreeMap<String, Order>,
    records: Vec<Value>,
    seqs: Vec<String>,
    next: u64,
}

impl<'a> Recorder<'a> {
    fn new(orders: &'a mut BTreeMap<String, Order>, first: u64) -> Self {
        Recorder { orders, records: Vec::new(), seqs: Vec::new(), next: first }
    }

    /// One change of one order: `to` its new state, `None` to delete it.
    fn change(&mut self, id: &str, to: Option<Order>) {
        let old = match &to {
            Some(order) => self.orders.insert(id.to_string(), order.clone()),
            None => self.orders.remove(id),
        };
        let image = |order: &Order| {
            let item = order_item(order, SHARDS).unwrap();
            Value::Object(item.iter().map(|(k, v)| (k.clone(), wire(v))).collect())
        };
        let seq = format!("{:021}", self.next);
        self.next += 1;
        let at = to.as_ref().or(old.as_ref()).and_then(|o| o.updated_at).unwrap();
        let mut data = json!({
            "ApproximateCreationDateTime": at.timestamp() as f64,
            "Keys": {"PK": {"S": keys::order_pk(id)}},
            "SequenceNumber": seq, "SizeBytes": 200, "StreamViewType": "NEW_AND_OLD_IMAGES"
        });
        if let Some(old) = &old {
            data["OldImage"] = image(old);
        }
        if let Some(new) = &to {
            data["NewImage"] = image(new);
        }
        let name = match (&old, &to) {
            (None, _) => "INSERT",
            (_, None) => "REMOVE",
            _ => "MODIFY",
        };
        self.records.push(json!({
            "eventID": format!("e{seq}"), "eventName": name, "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "dynamodb": data
        }));
        self.seqs.push(seq);
    }

    fn moved(&mut self, id: &str, to: Status, at: DateTime<Utc>) {
        let mut order = self.orders[id].clone();
        order.status = Some(to.into());
        order.updated_at = Some(at);
        self.change(id, Some(order));
    }

    fn shard(self, id: &str, parent: Option<&str>, closed: bool) -> RecordedShard {
        RecordedShard {
            id: id.into(),
            parent: parent.map(str::to_string),
            closed,
            records: self.records,
            seqs: self.seqs,
        }
    }
}

/// A day's orders around a split: the parent shard holds their inserts and
/// first changes and is closed; each order's later changes are in the child
/// its key went to, and new orders too. Returns the shards and the orders
/// as they end.
fn split_stream(day: NaiveDate) -> (Vec<RecordedShard>, BTreeMap<String, Order>) {
    let start = day.and_hms_opt(0, 5, 0).unwrap().and_utc();
    let at = |s: i64| start + Span::seconds(s);
    let mut orders = BTreeMap::new();
    let mut parent = Recorder::new(&mut orders, 1_000);
    for i in 0..40 {
        parent.change(&format!("p-{i:02}"), Some(order(&format!("p-{i:02}"), "c-split", Status::Pending, at(i))));
    }
    for i in 0..6 {
        parent.moved(&format!("p-{i:02}"), Status::Confirmed, at(100 + i));
    }
    parent.moved("p-06", Status::Cancelled, at(110));
    let parent = parent.shard("shardId-parent", None, true);

    // After the split each key belongs to one child: its changes are there, in order.
    let child_of = |id: &str| keys::shard_of(id, 2) as usize;
    let mut changes: Vec<(String, Option<Status>)> = Vec::new();
    changes.extend(["p-00", "p-01"].map(|id| (id.to_string(), Some(Status::Shipped))));
    changes.extend((10..20).map(|i| (format!("p-{i:02}"), Some(Status::Confirmed))));
    changes.extend((20..23).map(|i| (format!("p-{i:02}"), Some(Status::Cancelled))));
    changes.extend((30..32).map(|i| (format!("p-{i:02}"), None)));
    let mut children = Vec::new();
    for (child, first) in [(0, 3_000), (1, 5_000)] {
        let mut recorder = Recorder::new(&mut orders, first);
        for (k, (id, to)) in changes.iter().enumerate().filter(|(_, (id, _))| child_of(id) == child) {
            match to {
                Some(status) => recorder.moved(id, *status, at(200 + k as i64)),
                None => recorder.change(id, None),
            }
        }
        for i in (0..10).filter(|i| child_of(&format!("n-{i:02}")) == child) {
            let id = format!("n-{i:02}");
            recorder.change(&id, Some(order(&id, "c-split", Status::Pending, at(300 + i))));
            if i < 3 {
                recorder.moved(&id, Status::Confirmed, at(400 + i));
            }
        }
        children.push(recorder.shard(&format!("shardId-child-{child}"), Some("shardId-parent"), false));
    }
    // Listed children first: the order DescribeStream lists shards in says
    // nothing of which to read first.
    children.push(parent);
    (children, orders)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_shard_split_the_parent_is_applied_before_its_children_and_counters_are_exact() {
    let _turn = ONE_AT_A_TIME.lock().await;
    for engine in engines() {
        let day = Utc::now().date_naive();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // The metrics table on a real engine; the stream from the recording.
        let app = TestApp::spawn_with(engine.clone(), &["--streams-endpoint-url", &url], &[]).await;
        // As every writer of PENDING orders does before the day's first: an
        // order counts as PENDING on a shard its day's readers read.
        assert_eq!(app.store.ensure_shards_recorded(day).await.unwrap(), SHARDS);
        let (shards, orders) = split_stream(day);
        let total: usize = shards.iter().map(|s| s.records.len()).sum();
        assert!(shards.iter().all(|s| !s.records.is_empty()), "both children have records");
        let stream = Arc::new(RecordedStream {
            shards,
            store: app.store.clone(),
            calls: Mutex::default(),
            child_iterators: Mutex::default(),
        });
        let router = axum::Router::new().route("/", axum::routing::post(answer)).with_state(stream.clone());
        let server = tokio::spawn(async move { axum::serve(listener, router).await });

        let reader = consumer(&app.store, "after-split", 15_000);
        let applied = drain(&reader).await;
        assert_eq!(applied as usize, total, "{engine:?}: every record applied once");
        let child_iterators = stream.child_iterators.lock().unwrap().clone();
        assert!(
            !child_iterators.is_empty() && child_iterators.iter().all(|(_, parent_done)| *parent_done),
            "{engine:?}: a child was read before its parent was applied to its end: {child_iterators:?}"
        );
        let arn = app.store.stream_arn().await.unwrap().unwrap();
        let checkpoints = app.store.checkpoints(&arn).await.unwrap();
        for shard in &stream.shards {
            let checkpoint = &checkpoints[&shard.id];
            assert_eq!(checkpoint.seq.as_ref(), shard.seqs.last(), "{engine:?}: {}", shard.id);
            assert_eq!(checkpoint.finished, shard.closed, "{engine:?}: {}", shard.id);
        }

        // The counters are the orders as they end, whatever the split.
        let counters = app.store.read_counters(day).await.unwrap();
        let pending: Vec<&Order> = orders.values().filter(|o| o.known_status() == Some(Status::Pending)).collect();
        let mut per_shard = vec![0i64; SHARDS as usize];
        for order in &pending {
            per_shard[keys::shard_of(&order.order_id, SHARDS) as usize] += 1;
        }
        assert_eq!(counters.pending, pending.len() as i64, "{engine:?}");
        assert_eq!(counters.per_shard, per_shard, "{engine:?}");
        assert_eq!(counters.created, orders.len() as i64, "{engine:?}");
        for status in Status::ALL {
            let n = orders.values().filter(|o| o.known_status() == Some(status)).count() as i64;
            assert_eq!(counters.per_status[&status], n, "{engine:?}: {status}");
        }
        assert_eq!(counters.created_per_minute.iter().sum::<i64>(), orders.len() as i64, "{engine:?}");
        let history: i64 =
            counters.entered_per_minute.iter().sum::<i64>() - counters.left_per_minute.iter().sum::<i64>();
        assert_eq!(history, counters.pending, "{engine:?}: the chart's backlog ends at the counter");
        let calls = stream.calls.lock().unwrap().clone();
        let first_child = calls.iter().position(|c| c.contains("child")).unwrap();
        let last_parent = calls.iter().rposition(|c| c.starts_with("GetRecords shardId-parent")).unwrap();
        assert!(last_parent < first_child, "{engine:?}: {calls:?}");
        println!(
            "{engine:?}: {total} records in 3 shards applied; {} calls to the recorded stream, the parent's last read \
             at call {last_parent}, the first of a child at {first_child}; PENDING {}, created {}",
            calls.len(),
            counters.pending,
            counters.created
        );
        server.abort();
        app.stop().await;
    }
}

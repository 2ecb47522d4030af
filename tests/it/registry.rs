//! Who consumes the stream: the one recorded consumer mode (issue 49). On
//! both engines:
//! - a switch is a compare-and-set: a stale one is refused with a 409 that
//!   names what is recorded, and only an admin switches;
//! - serve's in-process consumer stands down within a beat when the mode is
//!   `lambda` (its leases handed over, "standing down: mode is lambda", pages
//!   served all the same) and counts again when it is `serve` again;
//! - a switch serve → lambda → serve during writes, with the Lambda function
//!   driven by the local event source mapping beside serve's consumer all
//!   along, ends with every counter equal to a recount: nothing counted
//!   twice, nothing missed.

use crate::common;

use aws_sdk_dynamodbstreams::types::Record;
use common::counters::{consumer, delivered};
use common::{TestApp, new_order_json};
use northwind_ops::model::{Actor, ConsumerMode, Role};
use northwind_ops::server::sim::lambda::dead_letters::DeadLetters;
use northwind_ops::server::sim::lambda::{Mapping, MappingSettings, StartingPosition};
use northwind_ops::server::stream::consumer::Consumer;
use northwind_ops::server::stream::lambda::{LambdaConsumer, ShardOf};
use northwind_ops::server::stream::registry::{self, IN_PROCESS};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The heartbeat of the tests' in-process consumers: short, to see them react.
const BEAT: Duration = Duration::from_millis(200);

/// An in-process consumer run as serve runs it (guarded by the mode), its
/// status shown by `app`'s metrics API when `shown`.
fn guarded(app: &TestApp, owner: &str, shown: bool) -> (Arc<Consumer>, CancellationToken, tokio::task::JoinHandle<()>) {
    let consumer = consumer(&app.store, owner, 15_000);
    let consumer = Arc::new(if shown { consumer.reporting_to(app.service.consumer.clone()) } else { consumer });
    let stop = CancellationToken::new();
    let task =
        tokio::spawn(registry::run_in_process(consumer.clone(), app.store.clone(), owner.into(), BEAT, stop.clone()));
    (consumer, stop, task)
}

async fn wait_for(what: &str, within: Duration, done: impl AsyncFn() -> bool) -> Duration {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

async fn create(app: &TestApp, id: &str) {
    let (status, body) = app.post("/api/orders", new_order_json(id, "c-registry")).await;
    assert_eq!(status, 201, "{body}");
}

async fn put_mode(app: &TestApp, role: Role, body: serde_json::Value) -> (u16, serde_json::Value) {
    let response = app.client_as(Some(role)).put(format!("{}/api/consumer/mode", app.base)).json(&body).send().await;
    let response = response.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_switch_is_a_compare_and_set_and_a_stale_one_is_refused() {
    for engine in common::engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (code, mode) = app.get("/api/consumer/mode").await;
        assert_eq!(code, 200, "{mode}");
        assert_eq!(mode["mode"], "serve", "{engine:?}: none recorded is serve: {mode}");
        assert_eq!((mode["recorded"].as_bool(), mode["version"].as_u64()), (Some(false), Some(0)), "{mode}");

        // Only an admin switches.
        let (code, body) = put_mode(&app, Role::Ops, json!({"mode": "lambda"})).await;
        assert_eq!(code, 403, "{engine:?}: {body}");

        // Two admins read version 0; the first switch wins, the second is refused.
        let (code, first) = put_mode(&app, Role::Admin, json!({"mode": "lambda", "expectedVersion": 0})).await;
        assert_eq!(code, 200, "{first}");
        assert_eq!((first["mode"].as_str(), first["version"].as_u64()), (Some("lambda"), Some(1)), "{first}");
        let (code, stale) = put_mode(&app, Role::Admin, json!({"mode": "serve", "expectedVersion": 0})).await;
        assert_eq!(code, 409, "{engine:?}: a stale switch: {stale}");
        let why = stale["error"].as_str().unwrap_or_default();
        assert!(why.contains("lambda at version 1"), "{engine:?}: names what is recorded: {why}");
        assert_eq!(
            app.store.consumer_mode().await.unwrap().mode,
            ConsumerMode::Lambda,
            "the stale switch wrote nothing"
        );

        // From the version read now, it goes through.
        let (code, back) = put_mode(&app, Role::Admin, json!({"mode": "serve", "expectedVersion": 1})).await;
        assert_eq!(code, 200, "{back}");
        assert_eq!(back["version"], 2);
        let (code, bad) = put_mode(&app, Role::Admin, json!({"mode": "kinesis"})).await;
        assert_eq!(code, 400, "{engine:?}: {bad}");

        // The same compare-and-set under the store: of two switches from one reading, one wins.
        let store = app.store.clone();
        let (admin_a, admin_b) = (Actor::cli("admin-a"), Actor::cli("admin-b"));
        let (a, b) = tokio::join!(
            registry::switch_mode(&store, ConsumerMode::Lambda, Some(2), &admin_a, None),
            registry::switch_mode(&store, ConsumerMode::Lambda, Some(2), &admin_b, None),
        );
        assert_eq!(a.is_ok() as u8 + b.is_ok() as u8, 1, "{engine:?}: exactly one wins: {a:?} {b:?}");
        println!("{engine:?}: stale switch refused: {why}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stands_down_while_the_mode_is_lambda_and_counts_again_when_it_is_serve() {
    for engine in common::engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let day = chrono::Utc::now().date_naive();

        // No mode recorded: serve's consumer counts and records its heartbeat.
        let (first, stop_first, first_task) = guarded(&app, "instance-a", true);
        create(&app, "r-001").await;
        wait_for("the in-process consumer counted r-001", Duration::from_secs(30), async || {
            app.store.read_counters(day).await.unwrap().created == 1
        })
        .await;
        let entries = app.store.consumers().await.unwrap();
        assert!(entries.iter().any(|e| e.mode == IN_PROCESS && e.instance == "instance-a"), "{engine:?}: {entries:?}");

        // Switched to lambda: within a beat or two it stops, and says why.
        registry::switch_mode(&app.store, ConsumerMode::Lambda, None, &Actor::cli("tests"), None).await.unwrap();
        let took = wait_for("the in-process consumer stood down", BEAT * 10, async || {
            let status = first.status();
            status.refused.is_some() && !status.running
        })
        .await;
        let applied = first.status().records_applied;
        create(&app, "r-002").await;
        tokio::time::sleep(BEAT * 5).await;
        assert_eq!(first.status().records_applied, applied, "{engine:?}: nothing applied in lambda mode");
        assert_eq!(app.store.read_counters(day).await.unwrap().created, 1, "{engine:?}: the Lambda's to count");

        // A second instance starting now stands down at once.
        let (second, stop_second, second_task) = guarded(&app, "instance-b", false);
        wait_for("the second instance stood down", Duration::from_secs(5), async || second.status().refused.is_some())
            .await;
        assert!(!second.status().running && second.status().records_applied == 0, "{engine:?}");

        // The visible status; pages served all the same.
        let (code, metrics) = app.get("/api/metrics/pending").await;
        assert_eq!(code, 200, "{metrics}");
        let refused = metrics["freshness"]["consumerRefused"].as_str().unwrap_or_default();
        assert!(refused.starts_with("standing down: mode is lambda"), "{engine:?}: {metrics}");
        assert_eq!(metrics["freshness"]["consumerMode"]["mode"], "lambda", "{engine:?}: {metrics}");
        let (code, capacity) = app.get("/api/capacity").await;
        assert_eq!(code, 200, "{capacity}");
        assert_eq!(capacity["consumerMode"]["mode"], "lambda", "{engine:?}: the capacity page's figures show it");
        let (code, page) = app.get("/api/pending?limit=5").await;
        assert_eq!(code, 200, "{engine:?}: serve keeps serving: {page}");

        // Back to serve: both count again, from the checkpoint: r-002 once.
        registry::switch_mode(&app.store, ConsumerMode::Serve, None, &Actor::cli("tests"), None).await.unwrap();
        let resumed = wait_for("r-002 counted after the switch back", Duration::from_secs(30), async || {
            app.store.read_counters(day).await.unwrap().created == 2
        })
        .await;
        // Either instance may count it first; both stop standing down within a beat.
        wait_for("both instances count again", BEAT * 10, async || {
            first.status().refused.is_none() && second.status().refused.is_none()
        })
        .await;
        tokio::time::sleep(BEAT * 5).await;
        common::counters::assert_all_exact(&app, day).await;

        // The function, in serve mode, commits nothing and fails the whole
        // batch (the mapping then keeps the records), marker or window guarded.
        let before = app.store.read_counters(day).await.unwrap();
        let records = stream_records(&app).await;
        let function = LambdaConsumer::new(app.store.clone());
        let outcome = function.apply(&delivered(&records)).await;
        assert_eq!((outcome.failed_from, outcome.applied), (Some(0), 0), "{engine:?}: {outcome:?}");
        assert!(outcome.error.as_deref().unwrap_or_default().starts_with("standing down: mode is serve"));
        let arn = app.store.stream_arn().await.unwrap().unwrap();
        let shard_id = app.store.stream_shards(&arn).await.unwrap()[0].id.clone();
        let shard = ShardOf { stream_arn: arn, shard_id };
        let outcome = function.apply_shard(&shard, &delivered(&records), &mut Default::default()).await;
        assert_eq!((outcome.failed_from, outcome.applied), (Some(0), 0), "{engine:?}: {outcome:?}");
        assert_eq!(app.store.read_counters(day).await.unwrap(), before, "{engine:?}: nothing committed");
        assert_eq!(app.store.consumer_mode().await.unwrap().mode, ConsumerMode::Serve, "it records no mode");
        println!("{engine:?}: stood down {took:?} after the switch to lambda; counted again {resumed:?} after serve");

        for (stop, task) in [(stop_first, first_task), (stop_second, second_task)] {
            stop.cancel();
            task.await.unwrap();
        }
        app.stop().await;
    }
}

async fn shard_arn(app: &TestApp) -> String {
    app.store.stream_arn().await.unwrap().expect("the orders table has a stream")
}

/// The records of the stream's first shard, from its start.
async fn stream_records(app: &TestApp) -> Vec<Record> {
    let arn = shard_arn(app).await;
    let shard = app.store.stream_shards(&arn).await.unwrap()[0].id.clone();
    let (records, _) = common::counters::read_batch(&app.store, &arn, &shard, None, 1000).await;
    assert!(!records.is_empty(), "the orders written are in the stream");
    records
}

/// Orders created through the API, one every `every`, until `stop`; every
/// fourth confirmed, so the switch also hands over status changes.
async fn write_until(app: &TestApp, prefix: &str, every: Duration, stop: CancellationToken, written: &AtomicUsize) {
    let mut i = 0;
    while !stop.is_cancelled() {
        let id = format!("{prefix}-{i:05}");
        create(app, &id).await;
        if i % 4 == 3 {
            let (code, body) =
                app.post(&format!("/api/orders/{id}/status"), json!({"from": "PENDING", "to": "CONFIRMED"})).await;
            assert_eq!(code, 200, "{body}");
        }
        written.fetch_add(1, Ordering::Relaxed);
        i += 1;
        tokio::time::sleep(every).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_serve_lambda_serve_during_writes_counts_every_change_once() {
    for engine in common::engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let day = chrono::Utc::now().date_naive();
        registry::switch_mode(&app.store, ConsumerMode::Serve, None, &Actor::cli("tests"), None).await.unwrap();

        // Both forms run all along: serve's consumer, and the Lambda function
        // under the template's mapping (a tumbling window: shard checkpoints).
        let (in_process, stop_consumer, consumer_task) = guarded(&app, "instance-a", false);
        let mut settings = MappingSettings::deployed().unwrap();
        settings.starting_position = StartingPosition::TrimHorizon;
        let function =
            common::counters::lambda_function(&common::over_http(&app), &settings, app.dir.path().join("function"));
        let letters = Arc::new(DeadLetters::new(Some(app.dir.path().join("dead.jsonl"))));
        let mapping = Mapping::start(app.store.clone(), settings, function, letters);

        let written = AtomicUsize::new(0);
        let stop_writes = CancellationToken::new();
        let phases = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let serve_applied = in_process.status().records_applied;
            registry::switch_mode(&app.store, ConsumerMode::Lambda, None, &Actor::cli("tests"), None).await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
            let before_back = in_process.status().records_applied;
            registry::switch_mode(&app.store, ConsumerMode::Serve, None, &Actor::cli("tests"), None).await.unwrap();
            tokio::time::sleep(Duration::from_secs(3)).await;
            stop_writes.cancel();
            (serve_applied, before_back)
        };
        let ((serve_applied, before_back), ()) =
            tokio::join!(phases, write_until(&app, "h", Duration::from_millis(15), stop_writes.clone(), &written));
        let written = written.load(Ordering::Relaxed) as i64;

        let took = wait_for("the counters reach every order written", Duration::from_secs(60), async || {
            app.store.read_counters(day).await.unwrap().created >= written
        })
        .await;
        // Time for anything counted twice to show.
        tokio::time::sleep(Duration::from_secs(2)).await;
        common::counters::assert_all_exact(&app, day).await;
        let counters = app.store.read_counters(day).await.unwrap();
        assert_eq!(counters.created, written, "{engine:?}: every order once");
        let after = in_process.status().records_applied;
        let given_up = mapping.dead_letters().messages().len();
        let stats = mapping.stop(Duration::from_secs(5)).await;
        println!(
            "{engine:?}: {written} orders; serve applied {serve_applied} records before the switch, {} by the \
             switch back, {after} at the end; exact {took:?} after the writes; {given_up} ranges given up; the \
             mapping: {stats}",
            before_back
        );
        assert!(serve_applied > 0 && after > before_back, "{engine:?}: serve counted in both serve phases");
        assert!(stats.partial_failures > 0, "{engine:?}: the function stood down (failed batches) in serve mode");
        assert!(stats.records_done > 0, "{engine:?}: and counted in lambda mode");

        stop_consumer.cancel();
        consumer_task.await.unwrap();
        app.stop().await;
    }
}

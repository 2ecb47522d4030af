//! Who consumes the stream: the consumer registry. An in-process consumer
//! (serve's) runs and records itself; once the Lambda consumer has recorded
//! itself (as every `lambda` environment does when it applies a batch), the
//! in-process one stops and says why, a second instance refuses to start
//! its own, nothing is counted twice, and serve goes on serving pages.

use crate::common;

use common::counters::consumer;
use common::{TestApp, new_order_json};
use northwind_ops::server::stream::consumer::Consumer;
use northwind_ops::server::stream::lambda::LambdaConsumer;
use northwind_ops::server::stream::registry::{self, IN_PROCESS, LAMBDA};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The heartbeat of the tests' in-process consumers: short, to see them react.
const BEAT: Duration = Duration::from_millis(200);

/// An in-process consumer run as serve runs it (guarded by the registry),
/// its status shown by `app`'s metrics API when `shown`.
fn guarded(app: &TestApp, owner: &str, shown: bool) -> (Arc<Consumer>, CancellationToken, tokio::task::JoinHandle<()>) {
    let consumer = consumer(&app.store, owner, 15_000);
    let consumer = Arc::new(if shown { consumer.reporting_to(app.service.consumer.clone()) } else { consumer });
    let stop = CancellationToken::new();
    let task =
        tokio::spawn(registry::run_in_process(consumer.clone(), app.store.clone(), owner.into(), BEAT, stop.clone()));
    (consumer, stop, task)
}

async fn wait_for(what: &str, done: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create(app: &TestApp, id: &str) {
    let (status, body) = app.post("/api/orders", new_order_json(id, "c-registry")).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_consumer_stops_beside_a_live_lambda_consumer_and_serve_keeps_serving() {
    for engine in common::engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let day = chrono::Utc::now().date_naive();

        // Serve's consumer, no Lambda yet: it consumes and records itself.
        let (first, stop_first, first_task) = guarded(&app, "instance-a", true);
        create(&app, "r-001").await;
        wait_for("the in-process consumer counted r-001", async || {
            app.store.read_counters(day).await.unwrap().created == 1
        })
        .await;
        let entries = app.store.consumers().await.unwrap();
        assert!(entries.iter().any(|e| e.mode == IN_PROCESS && e.instance == "instance-a"), "{engine:?}: {entries:?}");
        assert!(first.status().refused.is_none());

        // The Lambda consumer applies a batch (here, an empty one): it records itself.
        LambdaConsumer::new(app.store.clone()).apply(&[]).await;
        let entries = app.store.consumers().await.unwrap();
        assert!(entries.iter().any(|e| e.mode == LAMBDA), "{engine:?}: the Lambda recorded itself: {entries:?}");

        // Within a heartbeat the in-process consumer stops, and says why.
        wait_for("the in-process consumer stopped", async || {
            let status = first.status();
            status.refused.is_some() && !status.running
        })
        .await;
        let applied = first.status().records_applied;
        create(&app, "r-002").await;
        tokio::time::sleep(BEAT * 5).await;
        assert_eq!(first.status().records_applied, applied, "{engine:?}: nothing applied beside the Lambda");
        assert_eq!(app.store.read_counters(day).await.unwrap().created, 1, "{engine:?}: the Lambda's to count");

        // A second instance starting now refuses at once.
        let (second, stop_second, second_task) = guarded(&app, "instance-b", false);
        wait_for("the second instance refused", async || second.status().refused.is_some()).await;
        tokio::time::sleep(BEAT * 3).await;
        let status = second.status();
        assert!(!status.running && status.records_applied == 0, "{engine:?}: {status:?}");

        // The visible status, and pages served all the same.
        let (code, metrics) = app.get("/api/metrics/pending").await;
        assert_eq!(code, 200, "{metrics}");
        let refused = metrics["freshness"]["consumerRefused"].as_str().unwrap_or_default();
        assert!(refused.contains("Lambda consumer") && refused.contains("--no-consumer"), "{engine:?}: {metrics}");
        let modes: Vec<&str> =
            metrics["freshness"]["consumers"].as_array().unwrap().iter().filter_map(|c| c["mode"].as_str()).collect();
        assert!(modes.contains(&LAMBDA) && modes.contains(&IN_PROCESS), "{engine:?}: {modes:?}");
        assert_eq!(metrics["freshness"]["consumerRunning"], false);
        let (code, page) = app.get("/api/pending?limit=5").await;
        assert_eq!(code, 200, "{engine:?}: serve keeps serving: {page}");
        println!("{engine:?}: {refused}");

        for (stop, task) in [(stop_first, first_task), (stop_second, second_task)] {
            stop.cancel();
            task.await.unwrap();
        }
        app.stop().await;
    }
}

//! Ready for the sale: sale plans through `/api/sales`, their go/no-go
//! through `/api/ready` and `northwind-ops ready`, on both engines. A plan
//! at a peak the design holds is ready once its day's shard count is
//! written; too few shards, a consumer too slow or never measured, and a
//! hot customer each give the verdict they should, naming the check and its
//! fix; bad input is a 400 that saves nothing, and a viewer writes nothing.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration, Timelike, Utc};
use common::counters::{consumer, drain};
use common::{Engine, TestApp, engines, order, outside_client};
use northwind_ops::model::{
    Actor, Readiness, Rehearsal, RehearsalEvent, RehearsalPhase, Rehearsals, Role, SalePlan, Status, Verdict, Writer,
};
use northwind_ops::server::auth::Principal;
use northwind_ops::server::store::{self, keys};
use northwind_ops::server::stream::consumer::ConsumerStatus;
use northwind_ops::server::stream::lag;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

/// Tomorrow at 09:00 UTC: a start in the future, on a day nobody wrote.
fn tomorrow_nine() -> String {
    let day = Utc::now().date_naive() + Duration::days(1);
    format!("{day}T09:00:00Z")
}

/// A plan at `peak` orders a second: an hour from tomorrow 09:00.
fn plan_json(name: &str, peak: f64, consumer: Option<f64>) -> Value {
    let mut plan = json!({
        "name": name, "peakOrdersPerSecond": peak, "start": tomorrow_nine(),
        "rampMinutes": 10, "holdMinutes": 30, "decayMinutes": 20, "itemBytes": 700
    });
    if let Some(rate) = consumer {
        plan["consumerRecordsPerSecond"] = json!(rate);
    }
    plan
}

/// Ops, as the service sees a caller.
fn ops() -> Principal {
    Principal { actor: Actor::cli("ready-test"), role: Role::Ops, client: None }
}

/// The plan's rehearsals once none runs (a minute at most).
async fn wait_for_rehearsal(app: &TestApp, name: &str) -> Rehearsals {
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, body) = app.get(&format!("/api/sales/{name}/rehearsal")).await;
        assert_eq!(status, 200, "{body}");
        let rehearsals: Rehearsals = serde_json::from_value(body).unwrap();
        if rehearsals.running.is_none() {
            return rehearsals;
        }
        assert!(Instant::now() < deadline, "the rehearsal of {name} is still running");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The plan's rehearsal stream (`/api/sales/{name}/rehearsal/live`): its
/// events as they arrive, and the task reading them.
async fn rehearsal_events(
    app: &TestApp,
    name: &str,
) -> (tokio::sync::mpsc::UnboundedReceiver<RehearsalEvent>, tokio::task::JoinHandle<()>) {
    let url = format!("{}/api/sales/{name}/rehearsal/live", app.base);
    let mut response = app.http.get(url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            // Events end with a blank line; keep-alives are comment lines.
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                for data in block.lines().filter_map(|line| line.strip_prefix("data:")) {
                    let event: RehearsalEvent = serde_json::from_str(data.trim()).expect("a rehearsal event");
                    if sender.send(event).is_err() {
                        return;
                    }
                }
            }
        }
    });
    (receiver, reader)
}

async fn readiness(app: &TestApp, name: &str) -> Readiness {
    let (status, body) = app.get(&format!("/api/ready?plan={name}")).await;
    assert_eq!(status, 200, "{:?}: {body}", app.engine);
    serde_json::from_value(body).unwrap()
}

fn verdict_of(readiness: &Readiness, id: &str) -> Verdict {
    readiness.checks.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no {id} check")).verdict
}

/// A few orders of different customers through the stream consumer, so the
/// recent history the hot-keys check reads was observed.
async fn observe_some_orders(app: &TestApp) {
    let running = consumer(&app.store, "ready-observer", 5_000);
    let outside = outside_client(app);
    let now = Utc::now();
    let shards = app.store.shards_for(now.date_naive()).await.unwrap();
    for i in 0..3 {
        let item =
            store::order_item(&order(&format!("r-{i}"), &format!("c-{i}"), Status::Pending, now), shards).unwrap();
        outside.put_item().table_name(&app.config.orders_table).set_item(Some(item)).send().await.unwrap();
    }
    drain(&running).await;
}

/// `northwind-ops ready` against the app's tables: its exit code and output.
fn cli_ready(app: &TestApp, extra: &[&str]) -> (i32, String) {
    let endpoint = match &app.engine {
        Engine::Dynoxide => app.embedded.as_ref().unwrap().endpoint(),
        Engine::DynamoDbLocal(url) => url.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().display().to_string();
    let output = Command::new(BIN)
        .args(["--store", "endpoint", "--endpoint-url", &endpoint, "--data-dir", &data])
        .args(["--orders-table", &app.config.orders_table, "--metrics-table", &app.config.metrics_table])
        .args(["--shards", "2", "ready"])
        .args(extra)
        .env("NORTHWIND_LOG", "error")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .expect("the binary runs");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_shards_is_a_no_go_until_the_days_count_is_written_then_ready() {
    for engine in engines() {
        // This server would give a new day 2 shards; 400 orders a second
        // through the console (its transactions billed twice) needs 3.
        let app = TestApp::spawn_with(engine.clone(), &["--shards", "2"], &[]).await;
        observe_some_orders(&app).await;
        let mut spring = plan_json("spring", 400.0, Some(5000.0));
        spring["writer"] = json!("console");
        let (status, body) = app.post("/api/sales", spring).await;
        assert_eq!(status, 201, "{engine:?}: {body}");
        // Written by another service, the same peak fits the 2 shards.
        let (status, body) = app.post("/api/sales", plan_json("spring-service", 400.0, Some(5000.0))).await;
        assert_eq!(status, 201, "{engine:?}: {body}");
        let service = readiness(&app, "spring-service").await;
        assert_eq!(service.plan.writer, Writer::Service);
        assert_eq!(verdict_of(&service, "shards"), Verdict::Ready, "{engine:?}: {service:#?}");
        let deleted = app.http.delete(format!("{}/api/sales/spring-service", app.base)).send().await.unwrap();
        assert_eq!(deleted.status(), 200);

        let before = readiness(&app, "spring").await;
        assert_eq!(before.verdict, Verdict::NoGo, "{engine:?}: {before:#?}");
        let shards = before.checks.iter().find(|c| c.id == "shards").unwrap();
        assert_eq!(shards.verdict, Verdict::NoGo);
        assert!(shards.reason.contains("under the 3"), "{}", shards.reason);
        let fix = shards.fix.as_ref().expect("a fix");
        assert_eq!(fix.action.as_deref(), Some("write-shards"));
        assert!(fix.command.as_deref().unwrap().contains("ready --plan spring --write-shards"), "{fix:?}");
        // Every other check holds at this peak; on a local engine the warm
        // throughput is unknown and said so, on-demand tables need no auto
        // scaling, and alarms do not apply.
        for id in ["warm-throughput", "auto-scaling", "counters", "consumer", "hot-keys", "alarms"] {
            assert_eq!(verdict_of(&before, id), Verdict::Ready, "{engine:?} {id}: {before:#?}");
        }
        let warm = before.checks.iter().find(|c| c.id == "warm-throughput").unwrap();
        assert!(
            warm.figures
                .iter()
                .filter(|f| f.label.contains("warm write units"))
                .all(|f| f.value.starts_with("unknown")),
            "{engine:?}: {warm:#?}"
        );

        // The CLI says the same, with its exit code: 2 for a no-go.
        let (code, text) = cli_ready(&app, &["--plan", "spring"]);
        assert_eq!(code, 2, "{engine:?}: {text}");
        assert!(text.contains("GO/NO-GO: NO-GO") && text.contains("[no-go] GSI2 write shards"), "{text}");

        // Written ahead: ready, and the day holds the count.
        let (status, body) = app.post("/api/sales/spring/shards", json!({})).await;
        assert_eq!(status, 200, "{engine:?}: {body}");
        assert_eq!(body["shards"], 3);
        assert_eq!(body["days"][0]["outcome"], "written");
        let day = Utc::now().date_naive() + Duration::days(1);
        assert_eq!(app.store.recorded_shards_fresh(day).await.unwrap(), Some(3));
        let after = readiness(&app, "spring").await;
        let not_ready: Vec<&str> =
            after.checks.iter().filter(|c| c.verdict != Verdict::Ready).map(|c| c.id.as_str()).collect();
        assert_eq!(not_ready, ["rehearsal"], "{engine:?}: {after:#?}");
        let rehearsal = after.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert_eq!(rehearsal.verdict, Verdict::Act, "never rehearsed: {rehearsal:#?}");
        assert!(rehearsal.fix.as_ref().unwrap().text.starts_with("run the rehearsal"), "{rehearsal:?}");
        assert_eq!(rehearsal.fix.as_ref().unwrap().action.as_deref(), Some("rehearse"));
        let (status, body) = app.post("/api/sales/spring/shards", json!({})).await;
        assert_eq!((status, body["days"][0]["outcome"].as_str()), (200, Some("already")), "written once");

        // Rehearsed through the service: the 3 shards hold 400 a second
        // scaled down, the result is filed with the plan, and it is ready.
        let started = Instant::now();
        let first = app.service.run_rehearsal("spring", &ops()).await.unwrap();
        let took = started.elapsed();
        assert_eq!(first.verdict, Some(Verdict::Ready), "{engine:?}: {first:#?}");
        assert_eq!(first.shape.shards, 3);
        assert_eq!(first.shape.written_by, Writer::Console);
        // What the proxy metered a change, beside what the checks predicted.
        assert_eq!(first.figures.as_ref().unwrap().metered.len(), 4, "{first:#?}");
        let checked = readiness(&app, "spring").await;
        let rehearsal_check = checked.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        let compared: Vec<String> = rehearsal_check
            .figures
            .iter()
            .filter(|f| f.label.contains("predicted → metered"))
            .map(|f| format!("{} {}", f.label, f.value))
            .collect();
        assert_eq!(compared.len(), 4, "{engine:?}: {rehearsal_check:#?}");
        eprintln!("{engine:?}: 400/s through the console, rehearsed: {compared:#?}");
        // Each prediction within 15% of what the proxy metered.
        assert!(compared.iter().all(|c| !c.contains("GAP")), "{engine:?}: {compared:#?}");
        assert!((first.shape.peak_orders_per_second / first.shape.scale - 400.0).abs() < 1e-6, "{first:#?}");
        let figures = first.figures.clone().unwrap();
        assert_eq!(figures.throttled, 0, "{figures:#?}");
        assert!(figures.created > 0 && figures.dashboard_readable, "{figures:#?}");
        eprintln!("{engine:?}: a rehearsal of 400/s at 3 shards took {took:?}: {figures:?}");
        // The rehearsal measured the consumer on this engine: the check
        // weighs that now, not the 5,000 entered (whatever its verdict,
        // every other check is ready).
        let after = readiness(&app, "spring").await;
        let consumer = after.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert!(consumer.reason.starts_with("consumer: measured "), "{engine:?}: {consumer:#?}");
        eprintln!("{engine:?}: {}", consumer.reason);
        let not_ready: Vec<&str> =
            after.checks.iter().filter(|c| c.verdict != Verdict::Ready).map(|c| c.id.as_str()).collect();
        assert!(not_ready.iter().all(|id| *id == "consumer"), "{engine:?}: {after:#?}");
        assert_eq!(after.verdict, consumer.verdict, "{engine:?}: {after:#?}");

        // A second, from the API in the background, followed on the plan's
        // stream: what is stored first, then its progress each second, then
        // its end. A start while it runs is a conflict; once done, the first
        // is kept beside it.
        let (mut events, reader) = rehearsal_events(&app, "spring").await;
        let next = async |events: &mut tokio::sync::mpsc::UnboundedReceiver<RehearsalEvent>| {
            tokio::time::timeout(std::time::Duration::from_secs(60), events.recv()).await.ok().flatten()
        };
        match next(&mut events).await {
            Some(RehearsalEvent::Rehearsals(stored)) => {
                assert!(stored.running.is_none(), "{engine:?}: {stored:#?}");
                assert_eq!(stored.latest.map(|r| r.started_at), Some(first.started_at), "{engine:?}");
            }
            other => panic!("{engine:?}: the stored rehearsals first, not {other:?}"),
        }
        let (status, body) = app.post("/api/sales/spring/rehearsal", json!({})).await;
        assert_eq!(status, 202, "{engine:?}: {body}");
        assert_eq!(body["state"], "running");
        let started: Rehearsal = serde_json::from_value(body.clone()).unwrap();
        let (status, body) = app.post("/api/sales/spring/rehearsal", json!({})).await;
        assert_eq!(status, 409, "{engine:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("running already"), "{body}");
        let (status, body) = app.get("/api/sales/spring/rehearsal").await;
        assert_eq!((status, body["running"]["state"].as_str()), (200, Some("running")), "{body}");
        let pushed = Instant::now();
        let mut progress = Vec::new();
        let finished = loop {
            match next(&mut events).await {
                Some(RehearsalEvent::Progress(p)) => {
                    assert_eq!((p.plan.as_str(), p.started_at), ("spring", started.started_at), "{engine:?}: {p:?}");
                    assert_eq!(p.seconds, started.shape.seconds(), "{engine:?}: {p:?}");
                    progress.push((p.elapsed_seconds, p.phase));
                }
                Some(RehearsalEvent::Finished(done)) => break done,
                other => panic!("{engine:?}: progress or the end, not {other:?} (after {progress:?})"),
            }
        };
        reader.abort();
        eprintln!(
            "{engine:?}: the rehearsal pushed {} progress events, {progress:?}, and its end after {:?}",
            progress.len(),
            pushed.elapsed()
        );
        assert_eq!(finished.started_at, started.started_at, "{engine:?}: the run started, ended");
        assert!(finished.verdict.is_some() && finished.finished_at.is_some(), "{engine:?}: {finished:#?}");
        assert!(progress.len() as u64 >= started.shape.seconds() / 2, "{engine:?}: {progress:?}");
        assert!(progress.windows(2).all(|w| w[0].0 <= w[1].0), "{engine:?}: the seconds only go up: {progress:?}");
        assert!(progress.iter().any(|(_, phase)| *phase == RehearsalPhase::Hold), "{engine:?}: {progress:?}");
        let done = wait_for_rehearsal(&app, "spring").await;
        let latest = done.latest.unwrap();
        assert_ne!(latest.started_at, first.started_at, "the second is the latest");
        assert_eq!(done.previous.unwrap().started_at, first.started_at, "the first kept beside it");
        // The second run measured the consumer again: the exit code is the
        // verdict's now.
        let now = readiness(&app, "spring").await;
        let (code, json_text) = cli_ready(&app, &["--plan", "spring", "--json"]);
        let exit = match now.verdict {
            Verdict::Ready => 0,
            Verdict::Act => 3,
            Verdict::NoGo => 2,
        };
        assert_eq!(code, exit, "{engine:?}: {json_text}");
        let parsed: Readiness = serde_json::from_str(&json_text).unwrap();
        assert_eq!(parsed.verdict, now.verdict);

        // A day written with too few is a no-go that writing cannot fix.
        let mut summer = plan_json("summer", 800.0, Some(10_000.0));
        summer["writer"] = json!("console");
        let (status, _) = app.post("/api/sales", summer).await;
        assert_eq!(status, 201);
        let summer = readiness(&app, "summer").await;
        assert_eq!(verdict_of(&summer, "shards"), Verdict::NoGo);
        let (status, body) = app.post("/api/sales/summer/shards", json!({})).await;
        assert_eq!(status, 409, "{engine:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("never changes"), "{body}");
        assert_eq!(app.store.recorded_shards_fresh(day).await.unwrap(), Some(3), "nothing changed");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_never_measured_is_unknown_and_one_too_slow_a_no_go() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        observe_some_orders(&app).await;
        let (status, body) = app.post("/api/sales", plan_json("autumn", 100.0, None)).await;
        assert_eq!(status, 201, "{body}");
        let (status, _) = app.post("/api/sales/autumn/shards", json!({})).await;
        assert_eq!(status, 200);
        let unknown = readiness(&app, "autumn").await;
        let consumer = unknown.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert_eq!(consumer.verdict, Verdict::Act, "{engine:?}: {consumer:#?}");
        assert!(consumer.reason.starts_with("unknown"), "{}", consumer.reason);
        assert_eq!(unknown.verdict, Verdict::Act, "{engine:?}: {unknown:#?}");
        let (code, text) = cli_ready(&app, &["--plan", "autumn"]);
        assert_eq!(code, 3, "{engine:?}: act has its own exit code: {text}");

        // Measured at 150 records a second, under the peak's 200.
        let response = app
            .http
            .put(format!("{}/api/sales/autumn", app.base))
            .json(&plan_json("autumn", 100.0, Some(150.0)))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let slow = readiness(&app, "autumn").await;
        assert_eq!(verdict_of(&slow, "consumer"), Verdict::NoGo, "{engine:?}: {slow:#?}");
        assert_eq!(slow.verdict, Verdict::NoGo);
        let fix = slow.checks.iter().find(|c| c.id == "consumer").unwrap().fix.clone().unwrap();
        assert!(fix.parameter.unwrap().starts_with("ConsumerConcurrency="));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plans_rehearsal_measures_its_consumer_and_the_check_uses_it() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        // Entered by hand at a rate far over the peak's: the measure replaces it.
        let (status, body) = app.post("/api/sales", plan_json("measured", 200.0, Some(1_000_000.0))).await;
        assert_eq!(status, 201, "{engine:?}: {body}");
        let entered = readiness(&app, "measured").await;
        let consumer = entered.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert!(consumer.reason.contains("entered on the plan (not measured)"), "{engine:?}: {consumer:#?}");

        let rehearsal = app.service.run_rehearsal("measured", &ops()).await.unwrap();
        let measured = rehearsal.figures.as_ref().and_then(|f| f.consumer.clone());
        let measured = measured.unwrap_or_else(|| panic!("{engine:?}: no consumer measured: {rehearsal:#?}"));
        eprintln!("{engine:?}: 200/s rehearsed at scale {}: the consumer {measured:?}", rehearsal.shape.scale);
        assert!(measured.records > 0 && measured.backlog_records > 0, "{measured:?}");
        assert!(measured.records_per_second.is_finite() && measured.records_per_second > 0.0, "{measured:?}");
        assert!(measured.caught_up, "a small run is caught up with: {measured:?}");
        assert_eq!(measured.scale, rehearsal.shape.scale);
        // Every change of the run was applied: created, and closed.
        let figures = rehearsal.figures.as_ref().unwrap();
        assert!(measured.records >= figures.created, "{measured:?} {figures:?}");
        // A record a change read: the stream's records a second at the peak
        // are what the checks predict, within 15%.
        let per_change = figures.stream_records_per_change.unwrap_or_else(|| panic!("{engine:?}: {figures:#?}"));
        assert!((per_change - 1.0).abs() <= 0.15, "{engine:?}: {per_change} records a change");

        // Recorded with the plan, through the store, and read back by the API.
        let stored = app.store.get_sale_plan("measured").await.unwrap().unwrap();
        assert_eq!(stored.consumer_measured.as_ref(), Some(&measured));
        let (status, body) = app.get("/api/sales").await;
        assert_eq!(status, 200);
        let listed = body["plans"].as_array().unwrap().iter().find(|p| p["name"] == "measured").unwrap().clone();
        assert_eq!(listed["consumerMeasured"]["records"], measured.records, "{listed}");

        // The check weighs the measure, not the figure entered, and says so.
        let checked = readiness(&app, "measured").await;
        let consumer = checked.checks.iter().find(|c| c.id == "consumer").unwrap();
        let scale = format!("(scale 1/{:.0})", 1.0 / measured.scale);
        assert!(
            consumer.reason.starts_with("consumer: measured ") && consumer.reason.contains(&scale),
            "{engine:?}: {consumer:#?}"
        );
        let verdict = if measured.records_per_second < 400.0 { Verdict::NoGo } else { consumer.verdict };
        assert_eq!(consumer.verdict, verdict, "under the peak's 400 records a second is a no-go: {consumer:#?}");
        let rehearsal_check = checked.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        let stream = rehearsal_check.figures.iter().find(|f| f.label.starts_with("stream: records a second"));
        let stream = stream.unwrap_or_else(|| panic!("{engine:?}: no stream row: {rehearsal_check:#?}"));
        assert!(stream.value.starts_with("400 → ") && !stream.value.contains("GAP"), "{engine:?}: {stream:?}");
        let (_, text) = cli_ready(&app, &["--plan", "measured"]);
        assert!(text.contains("consumer: measured "), "{engine:?}: {text}");

        // An edit of the plan keeps the measure.
        let response =
            app.http.put(format!("{}/api/sales/measured", app.base)).json(&plan_json("measured", 300.0, None)).send();
        assert_eq!(response.await.unwrap().status(), 200);
        let edited = app.store.get_sale_plan("measured").await.unwrap().unwrap();
        assert_eq!((edited.peak_orders_per_second, edited.consumer_measured), (300.0, Some(measured)));
        app.stop().await;
    }
}

/// BENCHMARKS.md's "predicted beside metered": for plans of 300, 2,000 and
/// 10,000 orders a second, from another service and through the console,
/// each figure the checks predict beside what the scaled rehearsal metered,
/// printed as the table's rows; none may be off by more than 15%.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_plans_rehearsed_meter_what_the_checks_predict() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let mut gaps = Vec::new();
        for peak in [300.0, 2_000.0, 10_000.0] {
            for writer in [Writer::Service, Writer::Console] {
                let name = format!("p{peak}-{}", writer.as_str());
                let mut plan = plan_json(&name, peak, None);
                plan["writer"] = json!(writer.as_str());
                let (status, body) = app.post("/api/sales", plan).await;
                assert_eq!(status, 201, "{engine:?}: {body}");
                let rehearsal = app.service.run_rehearsal(&name, &ops()).await.unwrap();
                let checked = readiness(&app, &name).await;
                let check = checked.checks.iter().find(|c| c.id == "rehearsal").unwrap();
                let compared: Vec<String> = check
                    .figures
                    .iter()
                    .filter(|f| f.label.contains("predicted → "))
                    .map(|f| format!("{} {}", f.label.split(':').next().unwrap_or_default(), f.value))
                    .collect();
                // The four tables and indexes, and the stream's records a second.
                assert_eq!(compared.len(), 5, "{engine:?} {name}: {check:#?}");
                assert!(compared.last().is_some_and(|c| c.starts_with("stream ")), "{engine:?} {name}: {compared:?}");
                gaps.extend(compared.iter().filter(|c| c.contains("GAP")).map(|c| format!("{name}: {c}")));
                let consumer = checked.checks.iter().find(|c| c.id == "consumer").unwrap();
                let figures = rehearsal.figures.clone().unwrap();
                eprintln!(
                    "ROW {engine:?} | {peak} | {} | scale {} at {} shards | {:.1} of {:.1} orders/s, {} throttled | {} | {}",
                    writer.as_str(),
                    rehearsal.shape.scale,
                    rehearsal.shape.shards,
                    figures.achieved_orders_per_second,
                    figures.target_orders_per_second.unwrap_or(0.0),
                    figures.throttled,
                    compared.join(" | "),
                    consumer.reason
                );
            }
        }
        assert!(gaps.is_empty(), "{engine:?}: over 15% off: {gaps:#?}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_customer_is_a_no_go_naming_it() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let running = consumer(&app.store, "ready-hot", 5_000);
        let outside = outside_client(&app);
        let now = Utc::now();
        let shards = app.store.shards_for(now.date_naive()).await.unwrap();
        // A bot orders 60 times; 60 other customers once each.
        for i in 0..120 {
            let customer = if i % 2 == 0 { "bot".to_string() } else { format!("human-{i}") };
            let item =
                store::order_item(&order(&format!("h-{i:03}"), &customer, Status::Pending, now), shards).unwrap();
            outside.put_item().table_name(&app.config.orders_table).set_item(Some(item)).send().await.unwrap();
        }
        drain(&running).await;
        // 1,100 orders a second of another service's: 2 WCU an order on GSI1,
        // 2,200 a second; the bot's half of them is over a partition's 1,000.
        let (status, body) = app.post("/api/sales", plan_json("winter", 1100.0, Some(10_000.0))).await;
        assert_eq!(status, 201, "{body}");
        let report = readiness(&app, "winter").await;
        let hot = report.checks.iter().find(|c| c.id == "hot-keys").unwrap();
        assert_eq!(hot.verdict, Verdict::NoGo, "{engine:?}: {hot:#?}");
        assert!(hot.reason.contains("CUSTOMER#bot"), "{}", hot.reason);
        assert!(hot.fix.as_ref().unwrap().text.contains("customer bot"), "{hot:?}");
        assert!(!hot.figures.iter().any(|f| f.label.contains("human")), "one order each is not hot: {hot:#?}");
        assert_eq!(report.verdict, Verdict::NoGo);
        // The same customer's share at a small sale is within budget.
        let (status, _) = app.post("/api/sales", plan_json("small", 20.0, Some(10_000.0))).await;
        assert_eq!(status, 201);
        assert_eq!(verdict_of(&readiness(&app, "small").await, "hot-keys"), Verdict::Ready);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_400_naming_the_field_and_saves_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let yesterday = format!("{}T09:00:00Z", Utc::now().date_naive() - Duration::days(1));
        let cases = [
            (json!({"peakOrdersPerSecond": 0}), "peakOrdersPerSecond"),
            (json!({"peakOrdersPerSecond": -3}), "peakOrdersPerSecond"),
            (json!({"peakOrdersPerSecond": "lots"}), "peakOrdersPerSecond"),
            (json!({"start": yesterday}), "start"),
            (json!({"start": "soon"}), "start"),
            (json!({"name": "bad\u{0007}name"}), "name"),
            (json!({"name": "n".repeat(65)}), "name"),
            (json!({"holdMinutes": 0}), "holdMinutes"),
            (json!({"itemBytes": 1_000_000}), "itemBytes"),
            (json!({"writer": "robot"}), "writer"),
            (json!({"writer": 3}), "writer"),
        ];
        for (change, field) in cases {
            let mut body = plan_json("ok-name", 100.0, None);
            for (k, v) in change.as_object().unwrap() {
                body[k] = v.clone();
            }
            let (status, answer) = app.post("/api/sales", body.clone()).await;
            assert_eq!(status, 400, "{engine:?} {body}: {answer}");
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(error.starts_with(field), "{engine:?}: {error:?} should name {field}");
        }
        let (status, body) = app.get("/api/sales").await;
        assert_eq!(status, 200);
        assert_eq!(body["plans"], json!([]), "{engine:?}: nothing saved");

        // A change refused leaves the plan as it was.
        let (status, _) = app.post("/api/sales", plan_json("kept", 100.0, None)).await;
        assert_eq!(status, 201);
        let response = app
            .http
            .put(format!("{}/api/sales/kept", app.base))
            .json(&plan_json("kept", -1.0, None))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let (_, kept) = app.get("/api/sales/kept").await;
        assert_eq!(kept["peakOrdersPerSecond"], 100.0);
        // A name taken is a conflict; a plan never made is not found.
        assert_eq!(app.post("/api/sales", plan_json("kept", 5.0, None)).await.0, 409);
        assert_eq!(app.get("/api/ready?plan=missing").await.0, 404);
        assert_eq!(app.get("/api/ready").await.0, 400);
        let (code, _) = cli_ready(&app, &["--plan", "missing"]);
        assert_eq!(code, 1, "an error, not a verdict");

        // Items in the table are input too: a plan written by hand with a
        // peak as text, or spanning years, is left out of the list, and
        // asked for by name it is a 409 that says what to do, never a 5xx.
        let outside = outside_client(&app);
        for (name, peak, hold) in [
            ("broken", AttributeValue::S("lots".into()), "30"),
            ("endless", AttributeValue::N("10".into()), "4000000000"),
        ] {
            let (pk, sk) = keys::sale_plan_key(name);
            let item = HashMap::from([
                ("PK".to_string(), AttributeValue::S(pk)),
                ("SK".to_string(), AttributeValue::S(sk)),
                ("name".to_string(), AttributeValue::S(name.into())),
                ("peakOrdersPerSecond".to_string(), peak),
                ("start".to_string(), AttributeValue::S(tomorrow_nine())),
                ("rampMinutes".to_string(), AttributeValue::N("1".into())),
                ("holdMinutes".to_string(), AttributeValue::N(hold.into())),
                ("decayMinutes".to_string(), AttributeValue::N("1".into())),
                ("itemBytes".to_string(), AttributeValue::N("700".into())),
                ("updatedAt".to_string(), AttributeValue::S(tomorrow_nine())),
                ("updatedBy".to_string(), AttributeValue::S("hand".into())),
            ]);
            outside.put_item().table_name(&app.config.metrics_table).set_item(Some(item)).send().await.unwrap();
            let (status, body) = app.get(&format!("/api/ready?plan={name}")).await;
            assert_eq!(status, 409, "{engine:?}: {body}");
            assert!(body["error"].as_str().unwrap().contains("delete it"), "{body}");
        }
        // A plan saved before plans said who writes the orders reads as
        // another service's; one naming a writer no version knows is left out.
        for (name, writer) in [("older", None), ("unknown-writer", Some("robot"))] {
            let (pk, sk) = keys::sale_plan_key(name);
            let mut item = HashMap::from([
                ("PK".to_string(), AttributeValue::S(pk)),
                ("SK".to_string(), AttributeValue::S(sk)),
                ("name".to_string(), AttributeValue::S(name.into())),
                ("peakOrdersPerSecond".to_string(), AttributeValue::N("10".into())),
                ("start".to_string(), AttributeValue::S(tomorrow_nine())),
                ("rampMinutes".to_string(), AttributeValue::N("1".into())),
                ("holdMinutes".to_string(), AttributeValue::N("30".into())),
                ("decayMinutes".to_string(), AttributeValue::N("1".into())),
                ("itemBytes".to_string(), AttributeValue::N("700".into())),
                ("updatedAt".to_string(), AttributeValue::S(tomorrow_nine())),
                ("updatedBy".to_string(), AttributeValue::S("hand".into())),
            ]);
            if let Some(writer) = writer {
                item.insert("writer".to_string(), AttributeValue::S(writer.into()));
            }
            outside.put_item().table_name(&app.config.metrics_table).set_item(Some(item)).send().await.unwrap();
        }
        let (status, older) = app.get("/api/sales/older").await;
        assert_eq!((status, older["writer"].as_str()), (200, Some("service")), "{engine:?}: {older}");
        assert_eq!(readiness(&app, "older").await.plan.writer, Writer::Service);
        assert_eq!(app.get("/api/ready?plan=unknown-writer").await.0, 409);
        let deleted = app.http.delete(format!("{}/api/sales/older", app.base)).send().await.unwrap();
        assert_eq!(deleted.status(), 200);
        let deleted = app.http.delete(format!("{}/api/sales/unknown-writer", app.base)).send().await.unwrap();
        assert_eq!(deleted.status(), 200);
        let (status, body) = app.get("/api/sales").await;
        assert_eq!(status, 200);
        let names: Vec<&str> = body["plans"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["kept"], "{engine:?}: the damaged ones are left out");
        let deleted = app.http.delete(format!("{}/api/sales/broken", app.base)).send().await.unwrap();
        assert_eq!(deleted.status(), 200, "a damaged plan can still be deleted");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_plans_and_verdicts_but_writes_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (status, _) = app.post("/api/sales", plan_json("gala", 100.0, None)).await;
        assert_eq!(status, 201);
        for role in [Role::Viewer, Role::Support] {
            let client = app.client_as(Some(role));
            let url = |path: &str| format!("{}{path}", app.base);
            let created = client.post(url("/api/sales")).json(&plan_json("mine", 10.0, None)).send().await.unwrap();
            assert_eq!(created.status(), 403, "{engine:?} {role:?}");
            let changed = client.put(url("/api/sales/gala")).json(&plan_json("gala", 10.0, None)).send().await.unwrap();
            assert_eq!(changed.status(), 403);
            assert_eq!(client.delete(url("/api/sales/gala")).send().await.unwrap().status(), 403);
            let written = client.post(url("/api/sales/gala/shards")).json(&json!({})).send().await.unwrap();
            assert_eq!(written.status(), 403);
            let rehearsed = client.post(url("/api/sales/gala/rehearsal")).json(&json!({})).send().await.unwrap();
            assert_eq!(rehearsed.status(), 403, "{engine:?} {role:?}");
            assert_eq!(client.get(url("/api/sales/gala/rehearsal")).send().await.unwrap().status(), 200);
            assert_eq!(client.get(url("/api/sales/gala/outcome")).send().await.unwrap().status(), 200);
            assert_eq!(client.get(url("/api/sales")).send().await.unwrap().status(), 200);
            assert_eq!(client.get(url("/api/ready?plan=gala")).send().await.unwrap().status(), 200);
        }
        let day = Utc::now().date_naive() + Duration::days(1);
        assert_eq!(app.store.recorded_shards_fresh(day).await.unwrap(), None, "no shard count written");
        let (_, rehearsals) = app.get("/api/sales/gala/rehearsal").await;
        assert_eq!(rehearsals, json!({"running": null, "latest": null, "previous": null}), "none started");
        let viewer = Principal { actor: Actor::cli("viewer"), role: Role::Viewer, client: None };
        assert!(app.service.run_rehearsal("gala", &viewer).await.is_err(), "the service refuses too");
        let (_, body) = app.get("/api/sales").await;
        assert_eq!(body["plans"].as_array().unwrap().len(), 1);
        assert_eq!(body["plans"][0]["peakOrdersPerSecond"], 100.0, "unchanged");
        // Ops may; the page offers the buttons to ops, not to a viewer.
        let ops = app.client_as(Some(Role::Ops));
        let deleted = ops.delete(format!("{}/api/sales/gala", app.base)).send().await.unwrap();
        assert_eq!(deleted.status(), 200);
        let viewer = app.client_as(Some(Role::Viewer));
        let page = viewer.get(format!("{}/sales", app.base)).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("Sale readiness") && !page.contains("plan-form"), "{engine:?}: no form for a viewer");
        assert!(!page.contains("rehearse-button"), "{engine:?}: no rehearsal button for a viewer");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_design_that_throttles_is_a_no_go_naming_the_rehearsal() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (status, body) = app.post("/api/sales", plan_json("flood", 2000.0, Some(100_000.0))).await;
        assert_eq!(status, 201, "{body}");
        // The sale's day holds one shard: every PENDING order of it in one
        // GSI2 partition, as before the redesign.
        let day = Utc::now().date_naive() + Duration::days(1);
        app.store.record_shards_ahead(day, 1).await.unwrap();
        let rehearsal = app.service.run_rehearsal("flood", &ops()).await.unwrap();
        assert_eq!(rehearsal.shape.shards, 1);
        // Rehearsed as the plan's orders come: another service's plain writes.
        assert_eq!(rehearsal.shape.written_by, Writer::Service);
        assert_eq!(rehearsal.verdict, Some(Verdict::NoGo), "{engine:?}: {rehearsal:#?}");
        let figures = rehearsal.figures.clone().unwrap();
        assert!(figures.throttled > 0, "{figures:#?}");
        assert!(figures.throttles.iter().any(|t| t.place == "GSI2"), "{figures:#?}");
        eprintln!("{engine:?}: 2,000/s at 1 shard, rehearsed: {figures:?}");
        assert_eq!(figures.metered.len(), 4, "{figures:#?}");
        let report = readiness(&app, "flood").await;
        let check = report.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert_eq!(check.verdict, Verdict::NoGo, "{engine:?}: {check:#?}");
        assert!(check.reason.contains("throttled") && check.reason.contains("1 shard"), "{}", check.reason);
        assert_eq!(report.verdict, Verdict::NoGo);

        // Items in the table are input too: a damaged rehearsal record is
        // left out, never a 5xx, and a claim that is not a time is taken over.
        let (pk, sk) = keys::sale_rehearsal_key("flood");
        let item = HashMap::from([
            ("PK".to_string(), AttributeValue::S(pk)),
            ("SK".to_string(), AttributeValue::S(sk)),
            ("latest".to_string(), AttributeValue::S("garbage".into())),
            ("running".to_string(), AttributeValue::N("3".into())),
            ("runningSince".to_string(), AttributeValue::S("soon".into())),
        ]);
        let outside = outside_client(&app);
        outside.put_item().table_name(&app.config.metrics_table).set_item(Some(item)).send().await.unwrap();
        let (status, body) = app.get("/api/sales/flood/rehearsal").await;
        assert_eq!((status, &body), (200, &json!({"running": null, "latest": null, "previous": null})));
        let report = readiness(&app, "flood").await;
        assert_eq!(verdict_of(&report, "rehearsal"), Verdict::Act, "never rehearsed, as far as can be read");
        let (status, body) = app.post("/api/sales/flood/rehearsal", json!({})).await;
        assert_eq!(status, 202, "{engine:?}: {body}");
        let done = wait_for_rehearsal(&app, "flood").await;
        assert_eq!(done.latest.unwrap().verdict, Some(Verdict::NoGo));
        assert!(done.previous.is_none(), "the damaged one is not kept");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_sale_the_plan_is_beside_the_peak_reached_and_unknowns_are_said() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let now = Utc::now();
        // A plan made earlier, whose sale started five minutes ago (the API
        // takes no start in the past: written to the store as it was then).
        let plan = SalePlan {
            name: "under-way".into(),
            peak_orders_per_second: 50.0,
            start: now - Duration::minutes(5),
            ramp_minutes: 1,
            hold_minutes: 30,
            decay_minutes: 1,
            item_bytes: 700,
            consumer_records_per_second: None,
            writer: Default::default(),
            consumer_measured: None,
            updated_at: now - Duration::days(1),
            updated_by: "alice".into(),
        };
        app.store.save_sale_plan(&plan, true).await.unwrap();
        let (status, body) = app.get("/api/sales/under-way/outcome").await;
        assert_eq!(status, 200, "{engine:?}: {body}");
        assert_eq!(body["phase"], "under-way");
        assert_eq!(body["peakOrdersPerSecond"], Value::Null, "nothing observed yet: {body}");
        assert!(body["peakNote"].as_str().unwrap().starts_with("unknown"), "{body}");
        assert_eq!(body["hotKeys"], Value::Null);

        // Twelve orders in this minute, through the stream consumer.
        let running = consumer(&app.store, "outcome", 5_000);
        let outside = outside_client(&app);
        let shards = app.store.shards_for(now.date_naive()).await.unwrap();
        for i in 0..12 {
            let item = store::order_item(&order(&format!("o-{i:02}"), &format!("c-{i}"), Status::Pending, now), shards)
                .unwrap();
            outside.put_item().table_name(&app.config.orders_table).set_item(Some(item)).send().await.unwrap();
        }
        drain(&running).await;
        // Items in the table are input too: a counter of two minutes ago
        // written as text by some other tool counts as nothing.
        let earlier = now - Duration::minutes(2);
        let (pk, sk) = keys::metric_minutes_key(earlier.date_naive(), earlier.hour());
        let minute = earlier.hour() * 60 + earlier.minute();
        outside
            .update_item()
            .table_name(&app.config.metrics_table)
            .key("PK", AttributeValue::S(pk))
            .key("SK", AttributeValue::S(sk))
            .update_expression("SET #c = :lots")
            .expression_attribute_names("#c", keys::minute_attribute('c', minute))
            .expression_attribute_values(":lots", AttributeValue::S("lots".into()))
            .send()
            .await
            .unwrap();
        let (status, body) = app.get("/api/sales/under-way/outcome").await;
        assert_eq!(status, 200, "{engine:?}: {body}");
        assert_eq!(body["ordersCreated"], 12, "{body}");
        assert_eq!(body["peakOrdersPerSecond"], 0.2, "12 in the busiest minute: {body}");
        let minute = now.timestamp() / 60 * 60;
        let peak_minute = chrono::DateTime::parse_from_rfc3339(body["peakMinute"].as_str().unwrap()).unwrap();
        assert_eq!(peak_minute.timestamp(), minute);
        assert!(body["minutesObserved"].as_u64().unwrap() >= 1, "{body}");
        // The consumer's lag is not recorded (this server runs none of its
        // own here): unknown, never guessed.
        assert_eq!(body["consumerBehindMs"], Value::Null);
        assert!(body["consumerNote"].as_str().unwrap().starts_with("unknown"), "{body}");
        assert!(body["hotKeys"].is_array(), "observed: known, {body}");

        // A consumer records the most it was behind, once a minute (here
        // every 200 ms): 1.5 s, then 0.3 s in the same minute keep 1.5 s.
        let (status, following) = tokio::sync::watch::channel(ConsumerStatus::default());
        let stop_recording = tokio_util::sync::CancellationToken::new();
        let recorder = tokio::spawn(lag::record(
            app.store.clone(),
            following,
            std::time::Duration::from_millis(200),
            stop_recording.clone(),
        ));
        for behind in [1_500, 300] {
            status.send_modify(|s| {
                (s.running, s.last_applied_at, s.behind_ms) = (true, Some(Utc::now()), Some(behind));
            });
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        stop_recording.cancel();
        recorder.await.unwrap();
        let (_, recorded) = app.get("/api/sales/under-way/outcome").await;
        assert_eq!(recorded["consumerBehindMs"], 1_500, "{engine:?}: the most in the minute: {recorded}");
        assert!(recorded["consumerNote"].as_str().unwrap().starts_with("the most"), "{recorded}");
        // A local engine never throttles: none, or unknown where nothing
        // of this app's calls was recorded; never a guess.
        match &body["throttles"] {
            Value::Null => assert!(body["throttlesNote"].as_str().unwrap().starts_with("unknown")),
            Value::Array(throttles) => assert!(throttles.is_empty(), "{body}"),
            other => panic!("{other}"),
        }

        // A sale still to come has nothing to show yet.
        let (status, _) = app.post("/api/sales", plan_json("later", 10.0, None)).await;
        assert_eq!(status, 201);
        let (status, body) = app.get("/api/sales/later/outcome").await;
        assert_eq!((status, body["phase"].as_str()), (200, Some("not-started")), "{body}");
        assert_eq!(app.get("/api/sales/missing/outcome").await.0, 404);
        app.stop().await;
    }
}

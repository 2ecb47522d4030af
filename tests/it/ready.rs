//! Ready for the sale: sale plans through `/api/sales`, their go/no-go
//! through `/api/ready` and `northwind-ops ready`, on both engines. A plan
//! at a peak the design holds is ready once its day's shard count is
//! written; too few shards, a consumer too slow or never measured, and a
//! hot customer each give the verdict they should, naming the check and its
//! fix; bad input is a 400 that saves nothing, and a viewer writes nothing.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration, Utc};
use common::counters::{consumer, drain};
use common::{Engine, TestApp, engines, order, outside_client};
use northwind_ops::model::{Readiness, Role, Status, Verdict};
use northwind_ops::server::store::{self, keys};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Command;

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
        // This server would give a new day 2 shards; 400 orders a second needs 3.
        let app = TestApp::spawn_with(engine.clone(), &["--shards", "2"], &[]).await;
        observe_some_orders(&app).await;
        let (status, body) = app.post("/api/sales", plan_json("spring", 400.0, Some(5000.0))).await;
        assert_eq!(status, 201, "{engine:?}: {body}");

        let before = readiness(&app, "spring").await;
        assert_eq!(before.verdict, Verdict::NoGo, "{engine:?}: {before:#?}");
        let shards = before.checks.iter().find(|c| c.id == "shards").unwrap();
        assert_eq!(shards.verdict, Verdict::NoGo);
        assert!(shards.reason.contains("under the 3"), "{}", shards.reason);
        let fix = shards.fix.as_ref().expect("a fix");
        assert_eq!(fix.action.as_deref(), Some("write-shards"));
        assert!(fix.command.as_deref().unwrap().contains("ready --plan spring --write-shards"), "{fix:?}");
        // Every other check holds at this peak; on a local engine the warm
        // throughput is unknown and said so, and alarms do not apply.
        for id in ["warm-throughput", "counters", "consumer", "hot-keys", "alarms"] {
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
        assert_eq!(after.verdict, Verdict::Ready, "{engine:?}: {after:#?}");
        let (status, body) = app.post("/api/sales/spring/shards", json!({})).await;
        assert_eq!((status, body["days"][0]["outcome"].as_str()), (200, Some("already")), "written once");
        let (code, json_text) = cli_ready(&app, &["--plan", "spring", "--json"]);
        assert_eq!(code, 0, "{engine:?}: {json_text}");
        let parsed: Readiness = serde_json::from_str(&json_text).unwrap();
        assert_eq!(parsed.verdict, Verdict::Ready);

        // A day written with too few is a no-go that writing cannot fix.
        let (status, _) = app.post("/api/sales", plan_json("summer", 800.0, Some(10_000.0))).await;
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
        let (status, body) = app.post("/api/sales", plan_json("winter", 700.0, Some(10_000.0))).await;
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
            assert_eq!(client.get(url("/api/sales")).send().await.unwrap().status(), 200);
            assert_eq!(client.get(url("/api/ready?plan=gala")).send().await.unwrap().status(), 200);
        }
        let day = Utc::now().date_naive() + Duration::days(1);
        assert_eq!(app.store.recorded_shards_fresh(day).await.unwrap(), None, "no shard count written");
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
        app.stop().await;
    }
}

//! Working the queue, against the real engines: bulk status changes (one
//! conditional change and one audit record per order, conflicts reported,
//! stoppable), exports that match the list page for page, and the filters.

use crate::common;

use chrono::{Duration, Utc};
use common::procs::DynamoDbLocal;
use common::{Engine, TestApp, engines, new_order_json, order};
use northwind_ops::model::{Order, Role, Status};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;

/// `count` PENDING orders of today, loaded in bulk (no audit records: a
/// bulk load, as an import would be), `spacing` ms apart, newest last.
async fn load(app: &TestApp, prefix: &str, count: usize, spacing: i64) -> Vec<Order> {
    let now = Utc::now();
    let orders: Vec<Order> = (0..count)
        .map(|i| {
            let at = now - Duration::milliseconds(spacing * (count - i) as i64);
            let mut o = order(&format!("{prefix}-{i:05}"), &format!("c-{}", i % 50), Status::Pending, at);
            o.shipping_country = Some(["NO", "US", "DE"][i % 3].into());
            o.total = Some(1000 + (i as i64 % 7) * 1000);
            o
        })
        .collect();
    for chunk in orders.chunks(500) {
        app.store.put_orders(chunk).await.unwrap();
    }
    orders
}

/// Polls a bulk run until it is no longer running.
async fn finished(app: &TestApp, id: &str) -> Value {
    for _ in 0..1200 {
        let (status, report) = app.get(&format!("/api/bulk/{id}")).await;
        assert_eq!(status, 200, "{report}");
        if report["state"] != "running" {
            return report;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("bulk run {id} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_change_over_5000_orders_changes_each_once_and_the_counters_follow() {
    // A DynamoDB Local of its own, fresh (`DynamoDbLocal::in_memory` says
    // why), and both engines at once: this test is the suite's last to
    // finish, with the other test thread idle.
    let local = DynamoDbLocal::in_memory().await;
    tokio::join!(bulk_change_on(Engine::Dynoxide), bulk_change_on(Engine::DynamoDbLocal(local.endpoint())));
}

/// 5,000 orders confirmed by one bulk run on `engine`, then checked.
async fn bulk_change_on(engine: Engine) {
    let app = TestApp::spawn(engine.clone()).await;
    let day = Utc::now().date_naive();
    let loading = std::time::Instant::now();
    let orders = load(&app, "bulk", 5_000, 5).await;
    let loaded = loading.elapsed();
    // Every PENDING order of the day: a filter, not a list of ids.
    let request = json!({"filter": {"date": day.to_string()}, "from": "PENDING", "to": "CONFIRMED", "reason": "paid"});
    let started = std::time::Instant::now();
    let (status, body) = app.post("/api/bulk/status", request).await;
    assert_eq!(status, 202, "{engine:?}: {body}");
    let id = body["id"].as_str().unwrap().to_string();
    let report = finished(&app, &id).await;
    let confirmed = started.elapsed();
    assert_eq!(report["state"], "done", "{report}");
    assert_eq!((report["total"].as_u64(), report["changed"].as_u64()), (Some(5_000), Some(5_000)), "{report}");
    assert!(report["conflicts"].as_array().unwrap().is_empty() && report["failed"].as_array().unwrap().is_empty());
    let (_, pending) = app.get("/api/pending").await;
    assert!(pending["orders"].as_array().unwrap().is_empty(), "{engine:?}: nothing left PENDING");

    // Each order changed once, recorded with the run's id.
    let mut recorded = HashSet::new();
    let mut path = format!("/api/audit?date={day}&limit=100");
    loop {
        let (status, page) = app.get(&path).await;
        assert_eq!(status, 200);
        for entry in page["entries"].as_array().unwrap() {
            assert_eq!(entry["bulkId"], id.as_str());
            assert_eq!((entry["from"].as_str(), entry["to"].as_str()), (Some("PENDING"), Some("CONFIRMED")));
            assert!(recorded.insert(entry["orderId"].as_str().unwrap().to_string()), "changed twice: {entry}");
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/api/audit?date={day}&limit=100&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(recorded.len(), orders.len(), "{engine:?}: one record per order");
    let status = app.store.get_order(&orders[1234].order_id).await.unwrap().unwrap().status;
    assert_eq!(status, Some(Status::Confirmed.into()));

    // The stream's counters follow: nothing PENDING, all confirmed. The
    // consumer reads batches of 500, as `serve`'s does (the tests' 40
    // would take a minute an engine over these 10,000 records: a shard
    // is read at most four times a second).
    let audited = started.elapsed() - confirmed;
    let draining = std::time::Instant::now();
    let consumer = common::counters::consumer_reading(&app.store, "bulk-counter", 15_000, 500);
    common::counters::drain(&consumer).await;
    println!(
        "{engine:?}: 5000 orders loaded in {:.1} s, confirmed in {:.1} s, their audit read in {:.1} s, \
         the stream's 10,000 records applied in {:.1} s",
        loaded.as_secs_f64(),
        confirmed.as_secs_f64(),
        audited.as_secs_f64(),
        draining.elapsed().as_secs_f64()
    );
    let counters = app.store.read_counters(day).await.unwrap();
    let recount = app.store.recount_pending(day).await.unwrap();
    assert_eq!((counters.pending, recount.total()), (0, 0), "{engine:?}");
    assert_eq!(counters.per_status[&Status::Confirmed], 5_000);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_changed_first_by_someone_else_are_reported_as_conflicts() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let ids: Vec<String> = (0..20).map(|i| format!("cf-{i:02}")).collect();
        for id in &ids {
            assert_eq!(app.post("/api/orders", new_order_json(id, "c-1")).await.0, 201);
        }
        for id in &ids[5..8] {
            let (status, _) =
                app.post(&format!("/api/orders/{id}/status"), json!({"from": "PENDING", "to": "CONFIRMED"})).await;
            assert_eq!(status, 200);
        }
        let request = json!({"orderIds": ids, "from": "PENDING", "to": "CANCELLED", "reason": "sold out"});
        let support = app.client_as(Some(Role::Support));
        let response = support.post(format!("{}/api/bulk/status", app.base)).json(&request).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::ACCEPTED, "{engine:?}");
        let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
        let report = finished(&app, &id).await;
        assert_eq!(report["changed"], 17, "{report}");
        let mut conflicts: Vec<&str> =
            report["conflicts"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        conflicts.sort_unstable();
        assert_eq!(conflicts, vec!["cf-05", "cf-06", "cf-07"]);
        assert_eq!(app.get("/api/orders/cf-06").await.1["status"], "CONFIRMED", "a conflict is left as it was");
        let (_, history) = app.get("/api/orders/cf-00/history").await;
        let last = history["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            (last["actor"].as_str(), last["reason"].as_str(), last["bulkId"].as_str()),
            (Some("test-support"), Some("sold out"), Some(id.as_str()))
        );

        // Support may cancel in bulk, not confirm; a cancellation needs a reason.
        let confirm = json!({"orderIds": ["cf-00"], "from": "PENDING", "to": "CONFIRMED"});
        let refused = app
            .client_as(Some(Role::Support))
            .post(format!("{}/api/bulk/status", app.base))
            .json(&confirm)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let (status, _) =
            app.post("/api/bulk/status", json!({"orderIds": ["cf-00"], "from": "PENDING", "to": "CANCELLED"})).await;
        assert_eq!(status, 400);
        let (status, _) = app.post("/api/bulk/status", json!({"from": "PENDING", "to": "CONFIRMED"})).await;
        assert_eq!(status, 400, "neither ids nor a filter");
        let (status, _) = app.get("/api/bulk/no-such-run").await;
        assert_eq!(status, 404);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_run_leaves_what_had_not_run_as_it_was() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let orders = load(&app, "stop", 2_000, 2).await;
    let ids: Vec<String> = orders.iter().map(|o| o.order_id.clone()).collect();
    let (status, body) =
        app.post("/api/bulk/status", json!({"orderIds": ids, "from": "PENDING", "to": "CONFIRMED"})).await;
    assert_eq!(status, 202, "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stop = app.http.delete(format!("{}/api/bulk/{id}", app.base)).send().await.unwrap();
    assert_eq!(stop.status(), StatusCode::OK);
    let report = finished(&app, &id).await;
    assert_eq!(report["state"], "cancelled", "{report}");
    let changed = report["changed"].as_u64().unwrap() as usize;
    assert!(changed > 0 && changed < 2_000, "stopped midway: {changed}");
    let (pending_ids, _) = app.all_pending("limit=100").await;
    assert_eq!(pending_ids.len(), 2_000 - changed, "exactly the unchanged are PENDING");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_match_the_list_page_for_page() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        load(&app, "exp", 2_000, 3).await;
        let (listed, _) = app.all_pending("limit=37").await;
        assert_eq!(listed.len(), 2_000);
        let csv = app.http.get(format!("{}/api/pending.csv", app.base)).send().await.unwrap();
        assert_eq!(csv.status(), 200);
        assert!(csv.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
        assert!(csv.headers()["content-disposition"].to_str().unwrap().contains("pending.csv"));
        let text = csv.text().await.unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("orderId,customerId,createdAt,total,currency,itemCount,shippingCity,shippingCountry,problems")
        );
        let exported: Vec<String> = lines.map(|l| l.split(',').next().unwrap().to_string()).collect();
        assert_eq!(exported, listed, "{engine:?}: the same orders, in the list's order");
        let jsonl = app
            .http
            .get(format!("{}/api/pending.jsonl?country=NO", app.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let norwegian: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(!norwegian.is_empty() && norwegian.iter().all(|o| o["shippingCountry"] == "NO"));
        assert_eq!(norwegian.len(), listed.len().div_ceil(3) - usize::from(2_000 % 3 == 0), "every third order");
        let history = app.http.get(format!("{}/api/customers/c-7/orders.csv", app.base)).send().await.unwrap();
        assert_eq!(history.status(), 200);
        assert_eq!(history.text().await.unwrap().lines().count(), 1 + 40, "{engine:?}: c-7 has every 50th order");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_keep_what_they_say_and_count_what_they_read() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let orders = load(&app, "flt", 600, 10).await;
        let check = |query: &str, keep: &dyn Fn(&Order) -> bool| {
            let mut want: Vec<&Order> = orders.iter().filter(|o| keep(o)).collect();
            want.sort_by(|a, b| (b.created_at, &b.order_id).cmp(&(a.created_at, &a.order_id)));
            (query.to_string(), want.iter().map(|o| o.order_id.clone()).collect::<Vec<_>>())
        };
        for (query, want) in [
            check("country=de", &|o| o.shipping_country.as_deref() == Some("DE")),
            check("minTotal=60", &|o| o.total >= Some(6000)),
            check("customer=c-3", &|o| o.customer_id.as_deref() == Some("c-3")),
            check("country=US&minTotal=30.5", &|o| {
                o.shipping_country.as_deref() == Some("US") && o.total >= Some(3050)
            }),
        ] {
            let (got, read) = app.all_pending(&format!("limit=25&{query}")).await;
            assert_eq!(got, want, "{engine:?} {query}");
            assert!(read as usize >= orders.len(), "{query}: every order passed over is read and counted ({read})");
        }
        // "Stuck" is a key range: only orders older than the threshold are read.
        let stuck_app = TestApp::spawn_with(engine.clone(), &[], &["--stuck-after-minutes", "1"]).await;
        let now = Utc::now();
        let old = order("old-1", "c-1", Status::Pending, now - Duration::minutes(5));
        let new = order("new-1", "c-1", Status::Pending, now);
        stuck_app.store.put_orders(&[old, new]).await.unwrap();
        let (got, _) = stuck_app.all_pending("stuck=1").await;
        assert_eq!(got, vec!["old-1"], "{engine:?}");
        for bad in ["country=NOR", "minTotal=-1", "minTotal=ten", "stuck=maybe", "customer=a%23b"] {
            assert_eq!(app.get(&format!("/api/pending?{bad}")).await.0, 400, "{bad}");
        }
        // A cursor from one filtered list does not continue another.
        let (_, page) = app.get("/api/pending?limit=5&country=NO").await;
        let cursor = page["next"].as_str().unwrap();
        assert_eq!(app.get(&format!("/api/pending?limit=5&country=DE&cursor={cursor}")).await.0, 400);
        stuck_app.stop().await;
        app.stop().await;
    }
}

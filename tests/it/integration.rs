//! Integration tests: the app on port 0, against real engines — the embedded
//! Dynoxide and DynamoDB Local (started by `scripts/with-dynamodb-local.sh`,
//! which `make test` runs this binary under). Every scenario runs on both.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration, NaiveDate};
use common::{Engine, TestApp, engines, new_order_json, order, write_all};
use northwind_ops::model::{Order, OrderPage, Status, iso_millis};
use northwind_ops::server::store::error::StoreError;
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{self, PendingFilter, TableCapacity};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_creates_then_verifies_and_names_differences() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        // Already created by spawn: a second run only verifies.
        let report = app.store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
        assert_eq!(
            report.to_string(),
            "orders table: exists and matches the key design; metrics table: exists and matches the key design",
            "{engine:?}"
        );

        // A table that exists with another design is reported, not changed.
        let client = app.store.client();
        let wrong = format!("wrong-{}", uuid::Uuid::new_v4().simple());
        client
            .create_table()
            .table_name(&wrong)
            .key_schema(
                aws_sdk_dynamodb::types::KeySchemaElement::builder()
                    .attribute_name("id")
                    .key_type(aws_sdk_dynamodb::types::KeyType::Hash)
                    .build()
                    .unwrap(),
            )
            .attribute_definitions(
                aws_sdk_dynamodb::types::AttributeDefinition::builder()
                    .attribute_name("id")
                    .attribute_type(aws_sdk_dynamodb::types::ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .billing_mode(aws_sdk_dynamodb::types::BillingMode::PayPerRequest)
            .send()
            .await
            .unwrap();
        // The embedded engine's file belongs to the running app: reach it over its endpoint.
        let endpoint = match &engine {
            Engine::Dynoxide => app.embedded.as_ref().unwrap().endpoint(),
            Engine::DynamoDbLocal(url) => url.clone(),
        };
        let config =
            common::store_config(&Engine::DynamoDbLocal(endpoint), app.dir.path(), &["--orders-table", &wrong]);
        let (store, embedded) = store::connect(&config).await.unwrap();
        assert!(embedded.is_none());
        let err = store.provision(Some(TableCapacity::OnDemand)).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, StoreError::SchemaMismatch { .. }), "{engine:?}: {text}");
        for expected in [
            "table key is [id HASH], want [PK HASH]",
            "index GSI1 is missing",
            "index GSI2 is missing",
            "stream is not enabled",
        ] {
            assert!(text.contains(expected), "{engine:?}: {text:?} lacks {expected:?}");
        }
        let after = client.describe_table().table_name(&wrong).send().await.unwrap().table.unwrap();
        assert!(after.global_secondary_indexes().is_empty(), "verification changed nothing");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioners_racing_for_new_tables_all_succeed() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let endpoint = match &engine {
            Engine::Dynoxide => app.embedded.as_ref().unwrap().endpoint(),
            Engine::DynamoDbLocal(url) => url.clone(),
        };
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let (orders, metrics) = (format!("race-orders-{suffix}"), format!("race-metrics-{suffix}"));
        let config = common::store_config(
            &Engine::DynamoDbLocal(endpoint),
            app.dir.path(),
            &["--orders-table", &orders, "--metrics-table", &metrics],
        );
        let mut stores = Vec::new();
        for _ in 0..4 {
            stores.push(store::connect(&config).await.unwrap().0);
        }
        // Each looks, finds nothing and creates: all but one find the table
        // there already, and verify it instead of failing.
        let reports =
            futures::future::join_all(stores.iter().map(|s| s.provision(Some(TableCapacity::OnDemand)))).await;
        for report in reports {
            let report = report.unwrap_or_else(|err| panic!("{engine:?}: {err}"));
            assert!(!report.to_string().contains("differ"), "{engine:?}: {report}");
        }
        assert!(stores[0].verify().await.is_ok(), "{engine:?}");
        app.stop().await;
    }
}

/// What the SDK's retry of a put that went through unanswered does: write
/// the same item again. That is our own write, not a conflict; another
/// writer's item under the same key still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_repeated_as_is_is_not_a_conflict_with_itself() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let token = store::Token {
            name: "retried".into(),
            role: northwind_ops::model::Role::Viewer,
            secret_hash: "ab".repeat(32),
            created_by: "tests".into(),
            created_at: chrono::Utc::now(),
            revoked: false,
        };
        app.store.create_token(&token).await.unwrap();
        app.store.create_token(&token).await.unwrap_or_else(|err| panic!("{engine:?}: {err}"));
        let other = store::Token { secret_hash: "cd".repeat(32), ..token.clone() };
        let err = app.store.create_token(&other).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{engine:?}: {err}");
        assert_eq!(app.store.get_token("retried").await.unwrap().unwrap().secret_hash, token.secret_hash);

        assert!(app.store.put_session("s-retried", "record", i64::MAX, true).await.unwrap());
        assert!(app.store.put_session("s-retried", "record", i64::MAX, true).await.unwrap(), "{engine:?}");
        assert!(!app.store.put_session("s-retried", "another", i64::MAX, true).await.unwrap(), "{engine:?}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_then_duplicate_is_a_conflict_and_overwrites_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (status, created) = app.post("/api/orders", new_order_json("dup-1", "cust-1")).await;
        assert_eq!(status, 201, "{engine:?}: {created}");
        assert_eq!(created["total"], 7800);
        assert_eq!(created["status"], "PENDING");

        let mut second = new_order_json("dup-1", "cust-2");
        second["shippingCity"] = json!("Oslo");
        let (status, body) = app.post("/api/orders", second).await;
        assert_eq!(status, 409, "{engine:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("already exists"));

        let (status, stored) = app.get("/api/orders/dup-1").await;
        assert_eq!(status, 200);
        assert_eq!(stored, created, "{engine:?}: the first order is untouched");

        let (status, body) = app.post("/api/orders", json!({"customerId": "c"})).await;
        assert_eq!(status, 400, "{engine:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("invalid request body"));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changes_are_conditional() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        app.post("/api/orders", new_order_json("st-1", "cust-1")).await;

        let (status, body) = app.post("/api/orders/st-1/status", json!({"from": "PENDING", "to": "CONFIRMED"})).await;
        assert_eq!(status, 200, "{engine:?}: {body}");
        assert_eq!(body["status"], "CONFIRMED");

        // A second agent still believing the order PENDING loses, visibly.
        let (status, body) = app
            .post("/api/orders/st-1/status", json!({"from": "PENDING", "to": "CANCELLED", "reason": "duplicate"}))
            .await;
        assert_eq!(status, 409, "{engine:?}: {body}");
        assert!(body["error"].as_str().unwrap().contains("is CONFIRMED"), "{body}");
        assert_eq!(app.get("/api/orders/st-1").await.1["status"], "CONFIRMED");

        let (status, _) = app.post("/api/orders/st-1/status", json!({"from": "CONFIRMED", "to": "DELIVERED"})).await;
        assert_eq!(status, 400, "not an allowed transition");
        let (status, _) = app.post("/api/orders/nope/status", json!({"from": "PENDING", "to": "CONFIRMED"})).await;
        assert_eq!(status, 404);
        let (status, _) = app.post("/api/orders/st-1/status", json!({"from": "PENDING"})).await;
        assert_eq!(status, 400);
        let (status, body) = app.post("/api/orders/st-1/status", json!({"from": "CONFIRMED", "to": "CANCELLED"})).await;
        assert_eq!(status, 400, "a cancellation without a reason: {body}");
        assert!(body["error"].as_str().unwrap().contains("reason"), "{body}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_that_leaves_pending_leaves_the_index() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        for i in 0..30 {
            app.post("/api/orders", new_order_json(&format!("sp-{i:02}"), "cust-1")).await;
        }
        app.post("/api/orders/sp-07/status", json!({"from": "PENDING", "to": "CONFIRMED"})).await;
        app.post("/api/orders/sp-19/status", json!({"from": "PENDING", "to": "CANCELLED", "reason": "duplicate"}))
            .await;

        let (ids, _) = app.all_pending("limit=7").await;
        assert_eq!(ids.len(), 28, "{engine:?}: {ids:?}");
        assert!(!ids.contains(&"sp-07".to_string()) && !ids.contains(&"sp-19".to_string()));

        // The index keys are gone from the item itself, not set to NULL.
        let item = app
            .store
            .client()
            .get_item()
            .table_name(&app.config.orders_table)
            .key("PK", AttributeValue::S(keys::order_pk("sp-07")))
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        assert!(!item.contains_key("GSI2PK") && !item.contains_key("GSI2SK"), "{engine:?}: {item:?}");
        assert!(item.contains_key("GSI1PK"), "still in the customer's history");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_the_pending_list_returns_every_order_once_newest_first() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let today = NaiveDate::from_ymd_opt(2026, 3, 14).unwrap();
        let base = |day: NaiveDate| day.and_hms_opt(0, 0, 0).unwrap().and_utc();
        let mut orders = Vec::new();
        for day in [today, today.pred_opt().unwrap()] {
            for i in 0..500u32 {
                // Groups of three share a createdAt: ties are broken by order id.
                let at = base(day) + Duration::seconds(i64::from(i / 3) * 97);
                let status = if i % 10 == 9 { Status::Shipped } else { Status::Pending };
                orders.push(order(&format!("pg-{day}-{i:03}"), &format!("c-{}", i % 40), status, at));
            }
        }
        let mut expected: Vec<&Order> = orders.iter().filter(|o| o.known_status() == Some(Status::Pending)).collect();
        expected.sort_by(|a, b| (b.created_at, &b.order_id).cmp(&(a.created_at, &a.order_id)));
        let expected: Vec<String> = expected.iter().map(|o| o.order_id.clone()).collect();
        write_all(&app.store, orders.clone()).await;

        let (ids, read) = app.all_pending(&format!("date={today}&days=2&limit=37")).await;
        assert_eq!(ids.len(), 900, "{engine:?}");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 900, "{engine:?}: no order twice");
        assert_eq!(ids, expected, "{engine:?}: newest first");
        let ratio = read as f64 / ids.len() as f64;
        println!("{engine:?}: read {read} index items for {} orders ({ratio:.2} per order)", ids.len());
        assert!(ratio <= 2.0, "{engine:?}: read {ratio:.2} items per order shown");

        // One day alone holds only that day's orders.
        let (ids, _) = app.all_pending(&format!("date={today}&limit=100")).await;
        assert_eq!(ids.len(), 450);
        assert!(ids.iter().all(|id| id.starts_with(&format!("pg-{today}"))));
        app.stop().await;
    }
}

/// Every page of `day` through the store, `limit` at a time.
async fn walk_pending(store: &store::Store, day: NaiveDate, limit: u32, filter: &PendingFilter) -> (Vec<String>, u64) {
    let (mut ids, mut read, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let page = store.pending_page(&[day], limit, after.as_deref(), filter).await.unwrap();
        assert!(page.orders.len() <= limit as usize);
        ids.extend(page.orders.iter().map(|o| o.order_id.clone()));
        read += page.items_read;
        match page.next_after {
            Some(next) => after = Some(next),
            None => return (ids, read),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pages_stay_exact_whatever_the_read_hints_say() {
    for engine in engines() {
        let app = TestApp::spawn_with(engine.clone(), &["--shards", "10"], &[]).await;
        let store = &app.store;
        let day = NaiveDate::from_ymd_opt(2026, 3, 14).unwrap();
        let base = day.and_hms_opt(9, 0, 0).unwrap().and_utc();
        // Bursts and lulls, and ties broken by order id.
        let orders: Vec<Order> = (0..240u32)
            .map(|i| {
                let at = base + Duration::seconds(i64::from(i / 4) * if i < 120 { 3 } else { 200 });
                order(&format!("h-{i:03}"), "c-1", Status::Pending, at)
            })
            .collect();
        let mut expected: Vec<&Order> = orders.iter().collect();
        expected.sort_by(|a, b| (b.created_at, &b.order_id).cmp(&(a.created_at, &a.order_id)));
        let expected: Vec<String> = expected.iter().map(|o| o.order_id.clone()).collect();
        write_all(store, orders.clone()).await;

        let newest = |at: &str| Some((format!("{at}#x"), std::time::Instant::now()));
        type Hint = (&'static str, Option<Vec<u64>>, Option<store::Pace>);
        let hints: Vec<Hint> = vec![
            ("none", None, None),
            ("far too fast a pace", None, Some(store::Pace { per_ms: 100.0, newest: None })),
            ("far too slow a pace", None, Some(store::Pace { per_ms: 1e-6, newest: None })),
            (
                "a newest key long gone",
                None,
                Some(store::Pace { per_ms: 0.01, newest: newest("2026-03-14T00:00:01.000Z") }),
            ),
            (
                "a newest key to come",
                None,
                Some(store::Pace { per_ms: 0.001, newest: newest("2026-03-14T23:00:00.000Z") }),
            ),
            ("every order on one shard", Some(vec![240, 0, 0, 0, 0, 0, 0, 0, 0, 0]), None),
            ("counts far too low", Some(vec![1; 10]), Some(store::Pace { per_ms: 0.002, newest: None })),
            ("counts for other shards", Some(vec![5, 5, 5]), None),
            ("counts of nothing", Some(vec![0; 10]), None),
        ];
        for (name, counts, pace) in hints {
            for limit in [1, 7, 25, 100] {
                store.hint_pending(day, counts.as_deref(), pace.clone());
                let (ids, _) = walk_pending(store, day, limit, &PendingFilter::default()).await;
                assert_eq!(ids, expected, "{engine:?}: {name}, pages of {limit}");
            }
            // Stuck only: a key range under the same hints.
            store.hint_pending(day, counts.as_deref(), pace.clone());
            let before = base + Duration::seconds(100);
            let stuck = PendingFilter { created_before: Some(before), ..PendingFilter::default() };
            let (ids, _) = walk_pending(store, day, 10, &stuck).await;
            let want: Vec<String> = expected
                .iter()
                .filter(|id| orders.iter().any(|o| &&o.order_id == id && o.created_at < Some(before)))
                .cloned()
                .collect();
            assert_eq!(ids, want, "{engine:?}: {name}, stuck only");
        }

        // A newer day is not read once the cursor is below it.
        let next = day.succ_opt().unwrap();
        let next_orders: Vec<Order> = (0..3u32)
            .map(|i| order(&format!("x-{i}"), "c-3", Status::Pending, next.and_hms_opt(1, 0, i).unwrap().and_utc()))
            .collect();
        write_all(store, next_orders).await;
        let all = PendingFilter::default();
        let first = store.pending_page(&[next, day], 25, None, &all).await.unwrap();
        assert_eq!(first.orders.len(), 25);
        let after = first.next_after.as_deref();
        store.hint_pending(day, None, None);
        let both = store.pending_page(&[next, day], 25, after, &all).await.unwrap();
        store.hint_pending(day, None, None);
        let alone = store.pending_page(&[day], 25, after, &all).await.unwrap();
        let ids = |page: &store::PendingRead| page.orders.iter().map(|o| o.order_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&both), ids(&alone));
        assert_eq!(both.rounds, alone.rounds, "{engine:?}: the newer day is not read again");

        // What the pages learn goes stale as newer orders arrive.
        store.hint_pending(day, None, None);
        let (ids, _) = walk_pending(store, day, 25, &PendingFilter::default()).await;
        assert_eq!(ids, expected);
        let later = base + Duration::hours(3);
        let newer: Vec<Order> = (0..60u32)
            .map(|i| order(&format!("n-{i:03}"), "c-2", Status::Pending, later + Duration::seconds(i64::from(i) / 2)))
            .collect();
        write_all(store, newer.clone()).await;
        let mut all: Vec<&Order> = orders.iter().chain(&newer).collect();
        all.sort_by(|a, b| (b.created_at, &b.order_id).cmp(&(a.created_at, &a.order_id)));
        let all: Vec<String> = all.iter().map(|o| o.order_id.clone()).collect();
        for limit in [5, 25] {
            let (ids, read) = walk_pending(store, day, limit, &PendingFilter::default()).await;
            assert_eq!(ids, all, "{engine:?}: a stale pace, pages of {limit}");
            println!("{engine:?}: pages of {limit} after a stale pace read {read} items for {}", ids.len());
        }
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customer_history_is_newest_first_across_pages() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let start = iso_millis::parse("2026-11-20T10:00:00Z").unwrap();
        let mine: Vec<Order> = (0..23)
            .map(|i| order(&format!("h-{i:02}"), "cust-7", Status::Delivered, start + Duration::hours(i)))
            .collect();
        let theirs = (0..5).map(|i| order(&format!("x-{i}"), "cust-8", Status::Pending, start + Duration::hours(i)));
        write_all(&app.store, mine.iter().cloned().chain(theirs).collect()).await;

        let (mut seen, mut cursor) = (Vec::new(), None::<String>);
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/customers/cust-7/orders?limit=5&cursor={c}"),
                None => "/api/customers/cust-7/orders?limit=5".to_string(),
            };
            let (status, body) = app.get(&path).await;
            assert_eq!(status, 200, "{engine:?}: {body}");
            let page: OrderPage = serde_json::from_value(body).unwrap();
            assert!(page.orders.len() <= 5);
            seen.extend(page.orders.into_iter().map(|o| o.order_id));
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<String> = (0..23).rev().map(|i| format!("h-{i:02}")).collect();
        assert_eq!(seen, expected, "{engine:?}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_cursors_and_parameters_are_400s() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        for i in 0..4 {
            app.post("/api/orders", new_order_json(&format!("b-{i}"), "cust-1")).await;
        }
        let (_, first) = app.get("/api/pending?limit=2").await;
        let cursor = first["next"].as_str().expect("a next page").to_string();
        let (status, _) = app.get(&format!("/api/pending?limit=2&cursor={cursor}")).await;
        assert_eq!(status, 200);

        let mut tampered = cursor.clone().into_bytes();
        tampered[3] = if tampered[3] == b'x' { b'y' } else { b'x' };
        let tampered = String::from_utf8(tampered).unwrap();
        let (_, customer) = app.get("/api/customers/cust-1/orders?limit=1").await;
        let foreign = customer["next"].as_str().unwrap().to_string();
        let cases = [
            "/api/orders/a%23b".to_string(),
            format!("/api/orders/{}", "x".repeat(65)),
            "/api/customers/c%20d/orders".to_string(),
            format!("/api/pending?cursor={tampered}"),
            "/api/pending?cursor=garbage".to_string(),
            format!("/api/pending?cursor={foreign}"),
            format!("/api/pending?date=2020-01-01&cursor={cursor}"),
            "/api/pending?limit=101".to_string(),
            "/api/pending?limit=abc".to_string(),
            "/api/pending?date=2026-02-30".to_string(),
            "/api/pending?days=0".to_string(),
        ];
        for path in cases {
            let (status, body) = app.get(&path).await;
            assert_eq!(status, 400, "{engine:?} {path}: {body}");
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}: {body}");
        }
        let (status, body) = app.get("/api/orders/missing-1").await;
        assert_eq!(status, 404, "{body}");
        let (status, _) = app.get("/healthz").await;
        assert_eq!(status, 200);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_is_a_503() {
    // A port nothing listens on: one the kernel found free.
    let port = common::procs::free_port();
    let app = TestApp::spawn_unprovisioned(Engine::DynamoDbLocal(format!("http://127.0.0.1:{port}")), &[]).await;
    for path in ["/readyz", "/api/orders/o-1", "/api/pending"] {
        let response = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 503, "{path}");
        assert!(response.headers().contains_key("retry-after"), "{path}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("unavailable"), "{body}");
        assert!(body["requestId"].as_str().is_some_and(|id| !id.is_empty()), "{body}");
        assert!(!body.to_string().contains(&port.to_string()), "no internals: {body}");
    }
    // Liveness does not depend on the store.
    assert_eq!(app.get("/healthz").await.0, 200);
    // The dashboard says so in a banner, with the same status.
    let response = app.http.get(format!("{}/", app.base)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let html = response.text().await.unwrap();
    assert!(html.contains("The order store is unreachable."), "{html}");
    app.stop().await;
}

/// The store stopped under a store client, and started again on the same
/// port and data: the first call finds it down after its retries, the next
/// is tried once, the calls after it fail at once unsent, one call per half
/// second is tried once, and the first one after the store is back succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_found_down_fails_calls_at_once_and_is_used_again_when_back() {
    use northwind_ops::server::store::error::Unavailable;
    use std::time::{Duration as Wait, Instant};
    let data = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let engine = store::embedded::Embedded::start(data.path(), addr).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(&Engine::DynamoDbLocal(engine.endpoint()), dir.path(), &[]);
    let (store, _) = store::connect(&config).await.unwrap();
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    assert!(store.get_order("o-1").await.unwrap().is_none());
    engine.shutdown().await;

    let call = async || {
        let asked = Instant::now();
        match store.get_order("o-1").await {
            Err(StoreError::Unavailable { kind: Unavailable::Unreachable, detail, .. }) => {
                (detail.contains("not sent"), asked.elapsed())
            }
            other => panic!("the store is down, so unreachable: {other:?}"),
        }
    };
    let (first_not_sent, first) = call().await;
    assert!(!first_not_sent, "the first call is sent (and retried)");
    let (next_not_sent, next) = call().await;
    assert!(!next_not_sent, "the next is sent too, once, to try the store");
    let mut refused = Vec::new();
    for _ in 0..20 {
        refused.push(call().await);
    }
    let sent = refused.iter().filter(|(not_sent, _)| !not_sent).count();
    assert!(refused.iter().any(|(not_sent, _)| *not_sent), "calls after those are not sent: {refused:?}");
    tokio::time::sleep(store::PROBE_EVERY).await;
    let (probe_not_sent, probe) = call().await;
    assert!(!probe_not_sent, "after the interval, a call goes through to try the store");

    let engine = store::embedded::Embedded::start(data.path(), addr).await.unwrap();
    let back = Instant::now();
    let recovered = loop {
        match store.get_order("o-1").await {
            Ok(found) => break (found, back.elapsed()),
            Err(StoreError::Unavailable { .. }) if back.elapsed() < Wait::from_secs(10) => {
                tokio::time::sleep(Wait::from_millis(50)).await
            }
            Err(err) => panic!("the store is back, but: {err}"),
        }
    };
    assert_eq!(recovered.0, None, "the same data, as it was");
    assert!(store.get_order("o-2").await.is_ok(), "and calls go as usual");
    let slowest_refused = refused.iter().map(|(_, took)| *took).max().unwrap_or_default();
    println!(
        "store down: the first call failed in {first:?} (its retries), the next, tried once, in {next:?}, the 20 \
         after it in at most {slowest_refused:?} ({sent} of them sent as probes), a probe after the interval in \
         {probe:?}; back: answered {:?} after the restart",
        recovered.1
    );
    engine.shutdown().await;
}

// ---- The stream consumer and its counters -------------------------------

use common::counters::{assert_exact, consumer, drain, read_batch, write_mix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_equal_a_recount_and_replays_change_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, created, per_status) = write_mix(&app).await;
        let first = consumer(&app.store, "consumer-a", 15_000);
        let applied = drain(&first).await;
        assert!(applied >= 100 + 15 + 5 + 10 + 2, "{engine:?}: applied {applied}");
        assert_exact(&app, day, created, &per_status).await;

        // Feed every record of the stream again, as a redelivery would.
        let arn = first.stream_arn().await.unwrap();
        for shard in app.store.stream_shards(&arn).await.unwrap() {
            let shard_id = shard.id.as_str();
            let iterator = app
                .store
                .streams()
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard_id)
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .unwrap()
                .shard_iterator
                .unwrap();
            let records = app
                .store
                .streams()
                .get_records()
                .shard_iterator(iterator)
                .send()
                .await
                .unwrap()
                .records
                .unwrap_or_default();
            if records.is_empty() {
                continue;
            }
            let replay = first.apply(&arn, shard_id, None, &records, false).await;
            assert!(matches!(replay, Err(StoreError::Conflict(_))), "{engine:?}: {replay:?}");
        }
        assert_exact(&app, day, created, &per_status).await;
        // A second pass of the same consumer finds nothing new.
        assert_eq!(drain(&first).await, 0);
        assert_exact(&app, day, created, &per_status).await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_fails_between_reading_and_applying_loses_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, created, per_status) = write_mix(&app).await;
        // A consumer takes a shard's lease, applies one batch, reads the
        // next, and dies before applying it.
        let crashing = consumer(&app.store, "crashes", 300);
        let arn = crashing.stream_arn().await.unwrap();
        let shard = app.store.stream_shards(&arn).await.unwrap().remove(0).id;
        assert!(crashing.lease(&arn, &shard).await.unwrap().is_some());
        let (first, next) = read_batch(&app.store, &arn, &shard, None, 40).await;
        let seq = crashing.apply(&arn, &shard, None, &first, false).await.unwrap();
        let (second, _) = read_batch(&app.store, &arn, &shard, next, 40).await;
        assert!(!second.is_empty() && seq.is_some(), "{engine:?}: two batches to read");
        let partial = app.store.read_counters(day).await.unwrap();
        assert!(partial.created > 0 && partial.created < created, "{engine:?}: one batch applied, {}", partial.created);
        drop(crashing);

        // A new process takes the lease over once it expires and resumes
        // after the checkpoint.
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let restarted = consumer(&app.store, "restarted", 15_000);
        drain(&restarted).await;
        assert_exact(&app, day, created, &per_status).await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_on_one_stream_count_once() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, created, per_status) = write_mix(&app).await;
        let a = consumer(&app.store, "twin-a", 15_000);
        let b = consumer(&app.store, "twin-b", 15_000);
        let (applied_a, applied_b) = tokio::join!(drain(&a), drain(&b));
        assert!(applied_a + applied_b >= 132, "{engine:?}: {applied_a} + {applied_b}");
        assert_exact(&app, day, created, &per_status).await;
        app.stop().await;
    }
}

// ---- Live on every instance ------------------------------------------------

use common::LiveStream;
use northwind_ops::model::LiveEvent;
use northwind_ops::server::service::follower::{self, FOLLOW_EVERY};
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};

async fn until(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.changed().await;
}

fn count(events: &[(std::time::Instant, LiveEvent)], kind: fn(&LiveEvent) -> bool) -> usize {
    events.iter().filter(|(_, e)| kind(e)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_one_instance_applies_reaches_every_instances_live_stream_once() {
    for engine in engines() {
        let a = TestApp::spawn(engine.clone()).await;
        let b = a.another_instance().await;
        // A's consumer applies every change and pushes it row by row; both
        // instances follow the day's version.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let applier = Arc::new(Consumer::new(a.store.clone(), ConsumerOptions::new("a"), Some(a.service.live.clone())));
        let tasks = [
            tokio::spawn({
                let (applier, stopped) = (applier.clone(), stopped.clone());
                async move { applier.run(until(stopped)).await }
            }),
            tokio::spawn(follower::run(a.service.clone(), FOLLOW_EVERY, until(stopped.clone()))),
            tokio::spawn(follower::run(b.service.clone(), FOLLOW_EVERY, until(stopped.clone()))),
        ];
        let (on_a, on_b) = (LiveStream::open(&a.http, &a.base, "").await, LiveStream::open(&b.http, &b.base, "").await);

        let mut lags = Vec::new();
        for i in 0..4u64 {
            let (status, body) = b.post("/api/orders", new_order_json(&format!("live-{i}"), "c-live")).await;
            assert_eq!(status, 201, "{body}");
            let written = std::time::Instant::now();
            let counted = |e: &LiveEvent| matches!(e, LiveEvent::Counters(c) if c.counts.created > i);
            let seen = on_b.wait_for(std::time::Duration::from_secs(3), counted).await;
            let seen = seen.unwrap_or_else(|| panic!("{engine:?}: order {i} not on B's live stream within 3 s"));
            lags.push(seen.saturating_duration_since(written));
        }
        assert!(
            on_b.wait_for(std::time::Duration::from_secs(3), |e| matches!(e, LiveEvent::Changed { .. }))
                .await
                .is_some(),
            "{engine:?}: B was told to read page one"
        );
        // Two more rounds of both followers: nothing pushed twice.
        tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
        let (events_a, events_b) = (on_a.events(), on_b.events());
        let entered = |e: &LiveEvent| matches!(e, LiveEvent::Entered { .. });
        let changed = |e: &LiveEvent| matches!(e, LiveEvent::Changed { .. });
        assert_eq!(count(&events_a, entered), 4, "{engine:?}: A pushed each row once");
        assert_eq!(count(&events_a, changed), 0, "{engine:?}: A's follower did not push A's own changes again");
        assert_eq!(count(&events_b, entered), 0, "{engine:?}: B never saw the rows");
        assert!((1..=4).contains(&count(&events_b, changed)), "{engine:?}: at most one `changed` a round");
        let (_, metrics) = b.get("/api/metrics/pending").await;
        let live = &metrics["live"];
        println!("{engine:?}: lags on B {lags:?}; B's follower: {live}");
        assert!(live["versionReads"].as_u64().unwrap() >= 3 && live["watchedDays"] == json!(1), "{live}");

        let _ = stop.send(true);
        for task in tasks {
            task.await.unwrap();
        }
        b.stop().await;
        a.stop().await;
    }
}

use northwind_ops::model::{Dashboard, PendingParams};

/// Whether a dashboard's list holds `order_id`.
fn lists(dashboard: &Dashboard, order_id: &str) -> bool {
    dashboard.page.orders.iter().any(|o| o.order_id == order_id)
}

/// One read of a dashboard view serves its viewers for a second; after that
/// the next viewer is answered from it at once while it is read again in the
/// background, so an order any writer adds shows a moment later, and nobody
/// waits for the re-read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_read_is_shared_for_a_second_then_renewed_behind_the_viewers() {
    for engine in engines() {
        let app = TestApp::spawn(engine).await;
        let params = PendingParams::default();
        let first = app.service.dashboard(&params, 30).await.unwrap();
        let read_at = std::time::Instant::now();
        // Written as the order service would, past this server's service:
        // nothing tells the shared read.
        write_all(&app.store, vec![order("swr-1", "cust-swr", Status::Pending, chrono::Utc::now())]).await;
        assert!(!lists(&first, "swr-1"));
        let within = app.service.dashboard(&params, 30).await.unwrap();
        if read_at.elapsed() < std::time::Duration::from_millis(900) {
            assert!(!lists(&within, "swr-1"), "{:?}: within its second the shared read answers", app.engine);
        }
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        let stale = app.service.dashboard(&params, 30).await.unwrap();
        assert!(
            !lists(&stale, "swr-1"),
            "{:?}: past its second, the old read answers while the next is made",
            app.engine
        );
        let mut fresh = false;
        for _ in 0..50 {
            if lists(&app.service.dashboard(&params, 30).await.unwrap(), "swr-1") {
                fresh = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(fresh, "{:?}: the background re-read brings the new order", app.engine);
        app.stop().await;
    }
}

//! Consumed capacity, shard heat, `/api/capacity` and `/metrics`, against
//! both engines (Dynoxide embedded and DynamoDB Local): what each engine
//! reports per operation is recorded per table and index, the minutes
//! persist and read back from a new store, the heat is exact and a replayed
//! batch adds none, and the Prometheus page parses with the figures moving.

use crate::common;
use crate::common::moto::Moto;

use aws_sdk_dynamodb::types::{AttributeValue, Get, TransactGetItem};
use chrono::{NaiveDate, Timelike, Utc};
use common::counters::{consumer, drain, read_batch};
use common::{TestApp, engines, new_order_json, order, outside_client, write_all};
use northwind_ops::model::{CapacityReport, Status};
use northwind_ops::server::store::error::StoreError;
use northwind_ops::server::store::keys;
use northwind_ops::server::store::usage::ReadWrite;
use northwind_ops::server::store::usage::{Resource, Tally, minute_start};
use northwind_ops::server::store::{self, PendingFilter, Store};
use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};
use std::collections::BTreeMap;

/// The units each resource got from the calls made since the last look,
/// summed over the minutes (taken, so the next look starts afresh).
fn taken(store: &Store) -> BTreeMap<(Resource, ReadWrite), f64> {
    let mut sums = BTreeMap::new();
    for tally in store.usage().take_minutes().values() {
        for (key, units) in &tally.units {
            *sums.entry(key.clone()).or_default() += units;
        }
    }
    sums
}

fn units(sums: &BTreeMap<(Resource, ReadWrite), f64>, resource: &Resource, access: ReadWrite) -> f64 {
    sums.get(&(resource.clone(), access)).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_records_its_units_per_table_and_index() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let store = &app.store;
        let orders = Resource::table(app.config.orders_table.clone());
        let gsi1 = Resource::index(app.config.orders_table.clone(), keys::GSI1);
        let gsi2 = Resource::index(app.config.orders_table.clone(), keys::GSI2);
        let metrics = Resource::table(app.config.metrics_table.clone());
        let now = Utc::now();
        let day = now.date_naive();
        taken(store);
        let mut seen = Vec::new();
        let mut check =
            |operation: &str, sums: BTreeMap<(Resource, ReadWrite), f64>, expect: &[(&Resource, ReadWrite)]| {
                for (resource, access) in expect {
                    assert!(
                        units(&sums, resource, *access) > 0.0,
                        "{engine:?}: {operation} recorded no {access} units on {resource}: {sums:?}"
                    );
                }
                seen.push(format!("{operation}: {sums:?}"));
            };

        write_all(store, vec![order("u-1", "c-1", Status::Pending, now)]).await;
        check(
            "TransactWriteItems (create)",
            taken(store),
            &[
                (&orders, ReadWrite::Write),
                (&gsi1, ReadWrite::Write),
                (&gsi2, ReadWrite::Write),
                (&metrics, ReadWrite::Write),
            ],
        );
        store.get_order("u-1").await.unwrap();
        check("GetItem", taken(store), &[(&orders, ReadWrite::Read)]);
        store.pending_page(&[day], 10, None, &PendingFilter::default()).await.unwrap();
        check("Query GSI2", taken(store), &[(&gsi2, ReadWrite::Read)]);
        store.customer_orders("c-1", 10, None).await.unwrap();
        check("Query GSI1", taken(store), &[(&gsi1, ReadWrite::Read)]);
        store.put_orders(&[order("u-2", "c-2", Status::Pending, now)]).await.unwrap();
        check("BatchWriteItem", taken(store), &[(&orders, ReadWrite::Write), (&gsi2, ReadWrite::Write)]);
        store.count_orders(&["u-1".into(), "u-2".into()]).await.unwrap();
        check("BatchGetItem", taken(store), &[(&orders, ReadWrite::Read)]);
        store.scan_orders(0, 1, None, 10).await.unwrap();
        check("Scan", taken(store), &[(&orders, ReadWrite::Read)]);
        let key = |pk: &str| {
            std::collections::HashMap::from([
                ("PK".to_string(), AttributeValue::S(pk.into())),
                ("SK".to_string(), AttributeValue::S("X".into())),
            ])
        };
        let client = store.client();
        let metrics_table = &app.config.metrics_table;
        client.put_item().table_name(metrics_table).set_item(Some(key("probe"))).send().await.unwrap();
        check("PutItem", taken(store), &[(&metrics, ReadWrite::Write)]);
        let add = client.update_item().table_name(metrics_table).set_key(Some(key("probe")));
        add.update_expression("ADD n :one")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await
            .unwrap();
        check("UpdateItem", taken(store), &[(&metrics, ReadWrite::Write)]);
        let get = Get::builder().table_name(metrics_table).set_key(Some(key("probe"))).build().unwrap();
        client.transact_get_items().transact_items(TransactGetItem::builder().get(get).build()).send().await.unwrap();
        check("TransactGetItems", taken(store), &[(&metrics, ReadWrite::Read)]);
        client.delete_item().table_name(metrics_table).set_key(Some(key("probe"))).send().await.unwrap();
        check("DeleteItem", taken(store), &[(&metrics, ReadWrite::Write)]);
        println!("{engine:?} reports ConsumedCapacity with INDEXES for:\n  {}", seen.join("\n  "));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_minutes_read_back_after_a_restart_and_none_twice() {
    for engine in engines() {
        // The store alone: no server holding the embedded engine's file.
        let dir = tempfile::tempdir().unwrap();
        let config = common::store_config(&engine, dir.path(), &[]);
        let (store, embedded) = store::connect(&config).await.unwrap();
        store.provision(Some(store::TableCapacity::OnDemand)).await.unwrap();
        let now = Utc::now();
        let day = now.date_naive();
        let orders: Vec<_> = (0..5).map(|i| order(&format!("r-{i}"), "c-1", Status::Pending, now)).collect();
        write_all(&store, orders).await;
        store.get_order("r-1").await.unwrap();
        let written: BTreeMap<i64, Tally> = store.usage().unflushed();
        let orders_table = config.orders_table.clone();
        let ours = |capacity: &store::CapacityDay| -> BTreeMap<(Resource, ReadWrite), Vec<f64>> {
            capacity
                .units
                .iter()
                .filter(|((r, _), _)| r.table == orders_table)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        // Unflushed minutes are read as they are, before and after a flush.
        let before = ours(&store.capacity_day(day).await.unwrap());
        assert!(store.flush_usage().await.unwrap() > 0, "{engine:?}");
        let after = ours(&store.capacity_day(day).await.unwrap());
        assert_eq!(before, after, "{engine:?}: a flushed minute is read once, not twice");
        let mut expected: BTreeMap<(Resource, ReadWrite), Vec<f64>> = BTreeMap::new();
        for (minute, tally) in &written {
            let start = minute_start(*minute);
            for ((resource, access), n) in &tally.units {
                if resource.table == config.orders_table && start.date_naive() == day {
                    let series = expected.entry((resource.clone(), *access)).or_insert_with(|| vec![0.0; 1440]);
                    series[(start.hour() * 60 + start.minute()) as usize] += n;
                }
            }
        }
        assert_eq!(after, expected, "{engine:?}");
        assert!(expected.keys().any(|(r, a)| r.index.as_deref() == Some("GSI2") && *a == ReadWrite::Write));

        // A restart: the store dropped, the embedded engine shut down and
        // opened again from its file.
        drop(store);
        if let Some(embedded) = embedded {
            embedded.shutdown().await;
        }
        let (again, embedded) = store::connect(&config).await.unwrap();
        let read_back = ours(&again.capacity_day(day).await.unwrap());
        assert_eq!(read_back, expected, "{engine:?}: the minutes survive a restart");
        drop(again);
        if let Some(embedded) = embedded {
            embedded.shutdown().await;
        }
    }
}

/// Writes to each shard of `day` over the day, from the heat items.
async fn heat_per_shard(store: &Store, day: NaiveDate) -> Vec<u64> {
    let heat = store.heat_day(day).await.unwrap();
    (0..heat.shards as usize).map(|s| heat.writes.iter().map(|m| m[s]).sum()).collect()
}

/// `n` PENDING orders of today written, by id.
async fn pending_orders(store: &Store, prefix: &str, n: usize) -> Vec<String> {
    let now = Utc::now();
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:03}")).collect();
    write_all(store, ids.iter().map(|id| order(id, &format!("c-{prefix}"), Status::Pending, now)).collect()).await;
    ids
}

/// One write per order on its GSI2 shard, of `shards`.
fn one_write_each(shards: u32, ids: &[String]) -> Vec<u64> {
    let mut expected = vec![0u64; shards as usize];
    for id in ids {
        expected[keys::shard_of(id, shards) as usize] += 1;
    }
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_heat_is_exact_and_a_replayed_batch_adds_none() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let store = app.store.clone();
        let day = Utc::now().date_naive();
        let ids = pending_orders(&store, "h", 30).await;
        let first = consumer(&store, "heat-1", 5_000);
        // The commits carry the heat; the pass that finds nothing new adds
        // it, once.
        assert!(first.poll().await.unwrap() > 0, "{engine:?}: the first pass applies the orders");
        let carried: u64 = heat_per_shard(&store, day).await.iter().sum();
        assert_eq!(carried, 0, "{engine:?}: no heat written with the commit");
        drain(&first).await;
        let shards = store.shards_for(day).await.unwrap();
        let mut expected = one_write_each(shards, &ids);
        assert_eq!(heat_per_shard(&store, day).await, expected, "{engine:?}: one write per order entering");

        // The first batch again, from the shard's start, as a consumer that
        // crashed before its checkpoint would replay it: refused, nothing added.
        let arn = first.stream_arn().await.unwrap();
        let shard = store.stream_shards(&arn).await.unwrap()[0].id.clone();
        let (records, _) = read_batch(&store, &arn, &shard, None, 10).await;
        assert!(!records.is_empty());
        let replay = first.apply(&arn, &shard, None, &records, false).await;
        assert!(matches!(replay, Err(StoreError::Conflict(_))), "{engine:?}: {replay:?}");
        assert_eq!(heat_per_shard(&store, day).await, expected, "{engine:?}: a replay adds no heat");

        // Ten leave PENDING: ten more writes, on their shards.
        for id in &ids[..10] {
            let (status, body) = app
                .post(&format!("/api/orders/{id}/status"), serde_json::json!({"from": "PENDING", "to": "CONFIRMED"}))
                .await;
            assert_eq!(status, 200, "{body}");
            expected[keys::shard_of(id, shards) as usize] += 1;
        }
        drain(&first).await;
        assert_eq!(heat_per_shard(&store, day).await, expected, "{engine:?}: leaving is a write too");
        app.stop().await;
    }
}

/// A consumer stopped right after a commit, before any pass found nothing
/// new and long before it would add them anyway, adds the observations it
/// carried as it stops: the heat of what it applied is there, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_adds_the_heat_it_carried() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let store = app.store.clone();
        let day = Utc::now().date_naive();
        let ids = pending_orders(&store, "s", 20).await;
        let running = consumer(&store, "stop-1", 5_000);
        let mut status = running.subscribe();
        let all = ids.len() as u64;
        let applied_all = async move {
            let _ = status.wait_for(|s| s.records_applied >= all).await;
        };
        running.run(applied_all).await;
        let expected = one_write_each(store.shards_for(day).await.unwrap(), &ids);
        assert_eq!(heat_per_shard(&store, day).await, expected, "{engine:?}: added as the consumer stopped");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_api_reports_the_day_and_refuses_a_bad_date() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        for bad in ["2026-13-01", "yesterday", "1999-12-31", "9999-01-01"] {
            let (status, body) = app.get(&format!("/api/capacity?date={bad}")).await;
            assert_eq!(status, 400, "{engine:?} {bad}: {body}");
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
        }
        for i in 0..12 {
            let (status, _) = app.post("/api/orders", new_order_json(&format!("a-{i:03}"), "c-api")).await;
            assert_eq!(status, 201);
        }
        let watcher = consumer(&app.store, "api-1", 5_000);
        drain(&watcher).await;
        let (status, body) = app.get("/api/capacity").await;
        assert_eq!(status, 200, "{engine:?}: {body}");
        let report: CapacityReport = serde_json::from_value(body).unwrap();
        assert_eq!(report.date, Utc::now().date_naive());
        let gsi2 = format!("{}/GSI2", app.config.orders_table);
        let gsi2_units = report.resources.iter().find(|r| r.resource == gsi2).expect("GSI2 is listed");
        assert!(gsi2_units.write_total > 0.0, "{engine:?}: {gsi2_units:?}");
        assert!(gsi2_units.minutes.iter().any(|m| m.write > 0.0));
        let heat: u64 = report.heat.minutes.iter().flat_map(|m| m.writes.iter()).sum();
        assert_eq!(heat, 12, "{engine:?}: twelve orders entered PENDING");
        let hottest = report.heat.hottest.as_ref().unwrap();
        assert!(!hottest.warning && hottest.utilisation < 0.01, "{hottest:?}");
        let plan = report.plan.as_ref().expect("a peak to plan for");
        assert!(plan.peak_orders_per_second > 0.0 && plan.shards >= 1, "{plan:?}");
        assert_eq!(plan.current_shards, 10);
        assert!(report.advice.iter().any(|a| a.resource == gsi2), "{:?}", report.advice);
        assert!(report.throttles.is_empty(), "the local engines never throttle: {:?}", report.throttles);
        assert!(report.recent.iter().any(|r| r.resource == gsi2 && r.write.iter().sum::<f64>() > 0.0));
        // Another day reads empty, and as that day.
        let (status, body) = app.get("/api/capacity?date=2001-02-03").await;
        assert_eq!(status, 200);
        let old: CapacityReport = serde_json::from_value(body).unwrap();
        assert!(old.resources.is_empty() && old.plan.is_none() && old.recent.is_empty(), "{old:?}");
        app.stop().await;
    }
}

type Scrape = MetricsExposition<PrometheusType, PrometheusValue>;

/// The sum of the samples of `family` whose labels include `labels` (0 when
/// none): a counter's or gauge's value, a histogram's count.
fn value(scrape: &Scrape, family: &str, labels: &[(&str, &str)]) -> f64 {
    let Some(family) = scrape.families.get(family) else { return 0.0 };
    family
        .iter_samples()
        .filter(|s| {
            let set = s.get_labelset().unwrap();
            labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v))
        })
        .map(|s| match &s.value {
            PrometheusValue::Counter(c) => c.value.as_f64(),
            PrometheusValue::Gauge(n) | PrometheusValue::Unknown(n) => n.as_f64(),
            PrometheusValue::Histogram(h) => h.count.unwrap_or(0) as f64,
            PrometheusValue::Summary(_) => 0.0,
        })
        .sum()
}

/// `/metrics` as a Prometheus server scrapes it, with `client`'s token.
async fn scrape(app: &TestApp, client: &reqwest::Client) -> Scrape {
    let response = client.get(format!("{}/metrics", app.base)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let text = response.text().await.unwrap();
    openmetrics_parser::prometheus::parse_prometheus(&text).unwrap_or_else(|e| panic!("{e:?} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text_and_move_with_the_work() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let viewer = app.client_as(Some(northwind_ops::model::Role::Viewer));
        let running = consumer(&app.store, "metrics-1", 5_000).reporting_to(app.service.consumer.clone());
        let before = scrape(&app, &viewer).await;
        let posts = 7;
        for i in 0..posts {
            let (status, _) = app.post("/api/orders", new_order_json(&format!("p-{i:03}"), "c-metrics")).await;
            assert_eq!(status, 201);
        }
        let (status, _) = app.get("/api/orders/p-000").await;
        assert_eq!(status, 200);
        drain(&running).await;
        let after = scrape(&app, &viewer).await;

        for family in [
            "northwind_http_requests_total",
            "northwind_http_request_duration_seconds",
            "northwind_store_calls_total",
            "northwind_store_call_duration_seconds",
            "northwind_dynamodb_consumed_capacity_units_total",
            "northwind_stream_consumer_lag_seconds",
            "northwind_stream_records_applied_total",
            "northwind_live_clients",
        ] {
            assert!(after.families.contains_key(family), "{engine:?}: {family} missing: {:?}", after.families.keys());
        }
        // Requests are counted by their route's pattern, never the raw path.
        let created = [("route", "/api/orders"), ("method", "POST"), ("status", "201")];
        let moved = value(&after, "northwind_http_requests_total", &created)
            - value(&before, "northwind_http_requests_total", &created);
        assert!(moved >= f64::from(posts), "{engine:?}: {moved}");
        assert!(value(&after, "northwind_http_requests_total", &[("route", "/api/orders/{order_id}")]) >= 1.0);
        assert_eq!(value(&after, "northwind_http_requests_total", &[("route", "/api/orders/p-000")]), 0.0);
        let histogram = &after.families["northwind_http_request_duration_seconds"];
        assert_eq!(histogram.family_type, PrometheusType::Histogram);
        assert!(
            value(&after, "northwind_store_calls_total", &[("operation", "TransactWriteItems"), ("outcome", "ok")])
                >= f64::from(posts)
        );
        // This test's tables are its own: their units are exactly what the store recorded, in whole units.
        let table = app.config.orders_table.as_str();
        let gsi2 = value(
            &after,
            "northwind_dynamodb_consumed_capacity_units_total",
            &[("table", table), ("index", "GSI2"), ("access", "write")],
        );
        assert!(gsi2 >= f64::from(posts), "{engine:?}: {gsi2}");
        let applied = value(&after, "northwind_stream_records_applied_total", &[]);
        assert!(applied >= f64::from(posts), "{engine:?}: {applied}");
        // No credentials: 401, in JSON, not the sign-in page.
        let anonymous = reqwest::Client::new().get(format!("{}/metrics", app.base)).send().await.unwrap();
        assert_eq!(anonymous.status(), 401);
        let body: serde_json::Value = anonymous.json().await.unwrap();
        assert!(body["error"].as_str().is_some());
        app.stop().await;
    }
}

/// Units the engine reported, per resource (`table`, `table/GSI1`, ...).
#[derive(Debug, Default)]
struct Reported(BTreeMap<String, f64>);

impl Reported {
    fn add(&mut self, capacity: Option<&aws_sdk_dynamodb::types::ConsumedCapacity>) {
        let Some(capacity) = capacity else { return };
        for (resource, _, units) in store::units_of(capacity, ReadWrite::Write) {
            *self.0.entry(resource.to_string()).or_default() += units;
        }
    }
}

/// An order with `lines` line items (about 60 bytes each), so sizes vary
/// across the 1 KB steps.
fn sized_order(id: &str, customer: &str, lines: usize, at: chrono::DateTime<Utc>) -> northwind_ops::model::Order {
    let mut order = order(id, customer, Status::Pending, at);
    order.items = Some(
        (0..lines.max(1))
            .map(|i| northwind_ops::model::LineItem {
                sku: format!("SKU-{i:04}"),
                name: format!("Line item number {i} of a long order"),
                quantity: 1,
                unit_price: 100,
            })
            .collect(),
    );
    order
}

/// The stream's write units per resource over the day.
fn stream_totals(capacity: &store::CapacityDay) -> BTreeMap<String, f64> {
    capacity.stream.iter().map(|(r, minutes)| (r.to_string(), minutes.iter().sum())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_outside_the_app_are_priced_from_the_stream_as_the_engine_reports_them() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let store = app.store.clone();
        let table = app.config.orders_table.clone();
        let outside = outside_client(&app);
        let now = Utc::now();
        let day = now.date_naive();
        let shards = store.shards_for(day).await.unwrap();
        let indexes = aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes;
        let mut reported = Reported::default();
        // Puts, as the order service writes them: sizes from 0.3 to 4 KB.
        let ids: Vec<String> = (0..60).map(|i| format!("x-{i:03}")).collect();
        for (i, id) in ids.iter().enumerate() {
            let item = store::order_item(&sized_order(id, &format!("c-{}", i % 7), i % 60, now), shards).unwrap();
            let out =
                outside.put_item().table_name(&table).set_item(Some(item)).return_consumed_capacity(indexes.clone());
            reported.add(out.send().await.unwrap().consumed_capacity());
        }
        let key = |id: &str| AttributeValue::S(keys::order_pk(id));
        // Updates that move an order out of GSI2, as the app's own do.
        for id in &ids[..20] {
            let out = outside
                .update_item()
                .table_name(&table)
                .key(keys::PK, key(id))
                .update_expression("SET #s = :c REMOVE GSI2PK, GSI2SK")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":c", AttributeValue::S("CONFIRMED".into()))
                .return_consumed_capacity(indexes.clone());
            reported.add(out.send().await.unwrap().consumed_capacity());
        }
        // A projected attribute changed in place; one GSI2 does not project.
        for id in &ids[20..30] {
            let out = outside
                .update_item()
                .table_name(&table)
                .key(keys::PK, key(id))
                .update_expression("SET #t = :t, note = :n")
                .expression_attribute_names("#t", "total")
                .expression_attribute_values(":t", AttributeValue::N("2999".into()))
                .expression_attribute_values(":n", AttributeValue::S("gift".into()))
                .return_consumed_capacity(indexes.clone());
            reported.add(out.send().await.unwrap().consumed_capacity());
        }
        for id in &ids[30..40] {
            let out = outside
                .update_item()
                .table_name(&table)
                .key(keys::PK, key(id))
                .update_expression("SET note = :n")
                .expression_attribute_values(":n", AttributeValue::S("not projected in GSI2".into()))
                .return_consumed_capacity(indexes.clone());
            reported.add(out.send().await.unwrap().consumed_capacity());
        }
        // Deletes, of orders in and out of GSI2.
        for id in ids[15..25].iter().chain(&ids[50..55]) {
            let out = outside
                .delete_item()
                .table_name(&table)
                .key(keys::PK, key(id))
                .return_consumed_capacity(indexes.clone());
            reported.add(out.send().await.unwrap().consumed_capacity());
        }
        // A batch of 20 puts.
        let requests: Vec<_> = (0..20)
            .map(|i| {
                let item =
                    store::order_item(&sized_order(&format!("b-{i:03}"), "c-batch", i * 3, now), shards).unwrap();
                let put = aws_sdk_dynamodb::types::PutRequest::builder().set_item(Some(item)).build().unwrap();
                aws_sdk_dynamodb::types::WriteRequest::builder().put_request(put).build()
            })
            .collect();
        let out = outside.batch_write_item().request_items(&table, requests).return_consumed_capacity(indexes.clone());
        for capacity in out.send().await.unwrap().consumed_capacity() {
            reported.add(Some(capacity));
        }

        let running = consumer(&store, "pricing-1", 5_000);
        drain(&running).await;
        let capacity = store.capacity_day(day).await.unwrap();
        let priced = stream_totals(&capacity);
        println!("{engine:?}: reported {:?}\n  priced from the stream {priced:?}", reported.0);
        for (resource, units) in &reported.0 {
            let ours = priced.get(resource).copied().unwrap_or(0.0);
            let off = (ours - units).abs() / units;
            assert!(off <= 0.02, "{engine:?}: {resource}: {ours} priced, {units} reported ({:.1}% off)", off * 100.0);
        }
        assert!(reported.0.len() == 3, "{engine:?}: the table and both indexes were written: {:?}", reported.0);
        assert!(capacity.observed_minutes() >= 1, "{engine:?}: the consumer marked the minutes it observed");

        // The first batch replayed: refused with its checkpoint, nothing added.
        let arn = running.stream_arn().await.unwrap();
        let shard = store.stream_shards(&arn).await.unwrap()[0].id.clone();
        let (records, _) = read_batch(&store, &arn, &shard, None, 40).await;
        let replay = running.apply(&arn, &shard, None, &records, false).await;
        assert!(matches!(replay, Err(StoreError::Conflict(_))), "{engine:?}: {replay:?}");
        assert_eq!(stream_totals(&store.capacity_day(day).await.unwrap()), priced, "{engine:?}: a replay adds nothing");

        // The API shows them, and says where they come from.
        let (status, body) = app.get("/api/capacity").await;
        assert_eq!(status, 200, "{body}");
        let report: CapacityReport = serde_json::from_value(body).unwrap();
        assert_eq!(report.source, "stream");
        let listed = report.resources.iter().find(|r| r.resource == table).expect("the orders table is listed");
        assert_eq!(listed.write_source, "stream");
        assert_eq!(listed.read_source, "this app's calls");
        assert!(listed.write_total >= priced[&table], "{engine:?}: {listed:?}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_keys_name_a_customer_ordering_in_a_loop() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let store = app.store.clone();
        let table = app.config.orders_table.clone();
        let outside = outside_client(&app);
        let running = consumer(&store, "hot-1", 5_000).reporting_to(app.service.consumer.clone());
        let now = Utc::now();
        let shards = store.shards_for(now.date_naive()).await.unwrap();
        // A bot orders 40 times; 40 other customers once each.
        for i in 0..80 {
            let customer = if i % 2 == 0 { "bot".to_string() } else { format!("human-{i}") };
            let item =
                store::order_item(&order(&format!("k-{i:03}"), &customer, Status::Pending, now), shards).unwrap();
            outside.put_item().table_name(&table).set_item(Some(item)).send().await.unwrap();
        }
        drain(&running).await;
        let capacity = store.capacity_day(now.date_naive()).await.unwrap();
        let gsi1 = format!("{table}/GSI1");
        let bot: u64 = capacity
            .hot
            .values()
            .flatten()
            .filter(|(resource, key, _)| *resource == gsi1 && key == "CUSTOMER#bot")
            .map(|(_, _, units)| units)
            .sum();
        assert!((30..=40).contains(&bot), "{engine:?}: the bot's GSI1 partition: {bot} units in {:?}", capacity.hot);
        assert!(
            capacity.hot.values().flatten().all(|(_, key, _)| !key.starts_with("CUSTOMER#human")),
            "{engine:?}: one order each is not hot: {:?}",
            capacity.hot
        );
        let (status, body) = app.get("/api/capacity").await;
        assert_eq!(status, 200);
        let report: CapacityReport = serde_json::from_value(body).unwrap();
        let hot = report.hot_keys.iter().find(|h| h.resource == gsi1).expect("GSI1 has a hot key");
        assert_eq!(hot.key, "CUSTOMER#bot", "{engine:?}: {:?}", report.hot_keys);
        assert!(hot.share > 0.0 && hot.share < 0.01, "{hot:?}");
        // /metrics: this instance's consumer's top keys of its last minute.
        let viewer = app.client_as(Some(northwind_ops::model::Role::Viewer));
        let text = viewer.get(format!("{}/metrics", app.base)).send().await.unwrap().text().await.unwrap();
        let lines: Vec<&str> =
            text.lines().filter(|l| l.starts_with("northwind_dynamodb_hot_key_write_units")).collect();
        assert!(lines.len() <= 3 * northwind_ops::server::stream::consumer::TOP_KEYS, "bounded: {lines:?}");
        openmetrics_parser::prometheus::parse_prometheus(&text).unwrap_or_else(|e| panic!("{e:?} in\n{text}"));
        app.stop().await;
    }
}

/// One datapoint of an AWS/DynamoDB metric, as DynamoDB would publish it.
async fn publish(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    name: &str,
    dimensions: &[(&str, &str)],
    at: chrono::DateTime<Utc>,
    value: f64,
) {
    use aws_sdk_cloudwatch::types::{Dimension, MetricDatum};
    let datum = MetricDatum::builder()
        .metric_name(name)
        .set_dimensions(Some(dimensions.iter().map(|(n, v)| Dimension::builder().name(*n).value(*v).build()).collect()))
        .timestamp(aws_sdk_cloudwatch::primitives::DateTime::from_secs(at.timestamp()))
        .value(value)
        .build();
    cloudwatch.put_metric_data().namespace("AWS/DynamoDB").metric_data(datum).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloudwatch_source_reads_dynamodbs_own_metrics_from_the_emulator() {
    let moto = Moto::start().await;
    let cloudwatch = moto.cloudwatch();
    let engine = engines().remove(0);
    let flags = ["--capacity-source", "cloudwatch", "--cloudwatch-endpoint-url", moto.url.as_str()];
    let app = TestApp::spawn_with(engine, &flags, &[]).await;
    let table = app.config.orders_table.clone();
    let minute = Utc::now() - chrono::Duration::minutes(5);
    let minute = minute - chrono::Duration::seconds(i64::from(minute.second()));
    let of_day = (minute.hour() * 60 + minute.minute()) as u16;
    publish(&cloudwatch, "ConsumedWriteCapacityUnits", &[("TableName", &table)], minute, 900.0).await;
    let gsi2 = [("TableName", table.as_str()), ("GlobalSecondaryIndexName", "GSI2")];
    publish(&cloudwatch, "ConsumedWriteCapacityUnits", &gsi2, minute, 600.0).await;
    publish(&cloudwatch, "ConsumedReadCapacityUnits", &[("TableName", &table)], minute, 30.5).await;
    publish(&cloudwatch, "WriteThrottleEvents", &gsi2, minute, 4.0).await;
    publish(&cloudwatch, "ThrottledRequests", &[("TableName", &table), ("Operation", "PutItem")], minute, 3.0).await;

    let (status, body) = app.get("/api/capacity").await;
    assert_eq!(status, 200, "{body}");
    let report: CapacityReport = serde_json::from_value(body).unwrap();
    assert_eq!(report.source, "cloudwatch");
    let find = |resource: &str| report.resources.iter().find(|r| r.resource == resource).cloned();
    let orders = find(&table).expect("the table is listed");
    assert_eq!((orders.write_total, orders.read_total), (900.0, 30.5));
    assert_eq!((orders.write_source.as_str(), orders.read_source.as_str()), ("CloudWatch", "CloudWatch"));
    let index = find(&format!("{table}/GSI2")).expect("GSI2 is listed");
    assert_eq!(index.write_total, 600.0);
    assert_eq!(index.minutes.iter().find(|m| m.write > 0.0).map(|m| m.minute), Some(of_day));
    let throttled =
        |reason: &str| report.throttles.iter().find(|t| t.reason == reason).map(|t| (t.resource.clone(), t.total));
    assert_eq!(throttled("WriteThrottleEvents"), Some((format!("table/{table}/index/GSI2"), 4)));
    assert_eq!(throttled("ThrottledRequests (PutItem)"), Some((format!("table/{table}"), 3)));
    assert_eq!(report.advice_window.source, "cloudwatch");
    assert!(report.advice.iter().all(|a| a.mode == "none"), "a table created just now: {:?}", report.advice);

    // Cached a minute: a datapoint published now is not read again at once.
    publish(&cloudwatch, "ConsumedWriteCapacityUnits", &gsi2, minute, 50.0).await;
    let (_, body) = app.get("/api/capacity").await;
    let again: CapacityReport = serde_json::from_value(body).unwrap();
    let index = again.resources.iter().find(|r| r.resource == format!("{table}/GSI2")).unwrap();
    assert_eq!(index.write_total, 600.0, "read from the minute-long cache");
    app.stop().await;
}

//! Items the app did not write, on both engines. Another writer (the order
//! service, a batch job, a migration, a hand fix) copies a real PENDING order
//! of today and changes it in one way, with its own SDK client: a missing
//! total, a total as a string, no `updatedAt`, a status this console does not
//! know (still in GSI2), a `createdAt` without milliseconds, a 300 KB extra
//! attribute, an empty line item list, numbers as strings, a list where a map
//! was, a ~400 KB item, text that does not look like UTF-8, a GSI2 key on
//! shard 57 of 10 (listed and counted all the same). Then every page, API route, export and server function
//! that can show them answers without a 5xx, each such row is flagged, the
//! exports are whole (read to the end: every row, and the marker), the
//! counters agree with the pages, and the data quality panel shows each kind
//! within 2 s of the writes (measured and printed).

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Utc;
use common::counters::assert_all_exact;
use common::{LiveStream, TestApp, engines, new_order_json, outside_client};
use northwind_ops::model::{
    LiveEvent, Order, OrderPage, OrderStatus, PendingPage, ProblemKind, QualityReport, Role, Status,
};
use northwind_ops::server::store::{Item, keys};
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CUSTOMER: &str = "c-foreign";
const SHARDS: u32 = 10;

/// One foreign order: its id, what was changed, and the drift it shows
/// (kind, field), every one of which the quality panel must count.
struct Foreign {
    id: &'static str,
    drift: &'static [(ProblemKind, &'static str)],
    /// Whether it is on today's PENDING list (a GSI2 key readers read).
    listed: bool,
    /// Whether its list row (GSI2's projection) can see what is wrong.
    row_flagged: bool,
    change: fn(&mut Item),
}

fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.into())
}

fn kinds() -> Vec<Foreign> {
    use ProblemKind::*;
    vec![
        Foreign {
            id: "f-no-total",
            drift: &[(Missing, "total")],
            listed: true,
            row_flagged: true,
            change: |i| drop(i.remove("total")),
        },
        Foreign {
            id: "f-total-string",
            drift: &[(Mistyped, "total")],
            listed: true,
            row_flagged: true,
            change: |i| drop(i.insert("total".into(), s("12.50"))),
        },
        Foreign {
            id: "f-no-updated",
            drift: &[(Missing, "updatedAt")],
            listed: true,
            row_flagged: false,
            change: |i| drop(i.remove("updatedAt")),
        },
        Foreign {
            id: "f-on-hold",
            drift: &[(UnknownStatus, "status")],
            listed: true,
            row_flagged: false,
            change: |i| drop(i.insert("status".into(), s("ON_HOLD"))),
        },
        Foreign {
            id: "f-no-millis",
            drift: &[(NotKeyForm, "createdAt"), (SortKey, "GSI1SK"), (SortKey, "GSI2SK")],
            listed: true,
            row_flagged: true,
            change: |i| {
                let created = i["createdAt"].as_s().unwrap().clone();
                let seconds = format!("{}Z", &created[..19]);
                let id = i["orderId"].as_s().unwrap().clone();
                i.insert("createdAt".into(), s(&seconds));
                // The writer built its keys from its own createdAt.
                i.insert("GSI1SK".into(), s(&format!("{seconds}#{id}")));
                i.insert("GSI2SK".into(), s(&format!("{seconds}#{id}")));
            },
        },
        Foreign {
            id: "f-big-attribute",
            drift: &[],
            listed: true,
            row_flagged: false,
            change: |i| drop(i.insert("notes".into(), s(&"n".repeat(300 * 1024)))),
        },
        Foreign {
            id: "f-empty-items",
            drift: &[(Invalid, "items")],
            listed: true,
            row_flagged: false,
            change: |i| drop(i.insert("items".into(), AttributeValue::L(Vec::new()))),
        },
        Foreign {
            id: "f-numbers-as-strings",
            drift: &[(Mistyped, "itemCount"), (Mistyped, "items")],
            listed: true,
            row_flagged: true,
            change: |i| {
                i.insert("itemCount".into(), s("2"));
                let line =
                    [("sku", s("LAMP-HD")), ("name", s("Headlamp")), ("quantity", s("2")), ("unitPrice", s("3900"))];
                let line = AttributeValue::M(line.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
                i.insert("items".into(), AttributeValue::L(vec![line]));
            },
        },
        Foreign {
            id: "f-list-for-map",
            drift: &[(Mistyped, "items")],
            listed: true,
            row_flagged: false,
            change: |i| {
                let line = AttributeValue::L(vec![s("LAMP-HD"), s("Headlamp"), AttributeValue::N("2".into())]);
                i.insert("items".into(), AttributeValue::L(vec![line]));
            },
        },
        Foreign {
            id: "f-400k",
            drift: &[],
            listed: true,
            row_flagged: false,
            // An item just under DynamoDB's 400 KB (409,600 bytes, names included).
            change: |i| drop(i.insert("payload".into(), s(&"p".repeat(405_000)))),
        },
        Foreign {
            id: "f-odd-text",
            drift: &[(Mistyped, "shippingCountry")],
            listed: true,
            row_flagged: true,
            change: |i| {
                // Text that does not look like UTF-8: replacement characters,
                // a lone surrogate's escape as text, mojibake, a direction
                // override, a NUL; and binary where text was.
                i.insert("shippingCity".into(), s("\u{FFFD}\u{FFFD} \\udc80 Ã©Ã¨ \u{202E}olsO\u{0}"));
                i.insert("shippingCountry".into(), AttributeValue::B(vec![0xff, 0xfe, 0x80, 0x00].into()));
            },
        },
        Foreign {
            id: "f-shard-57",
            drift: &[(ShardBeyondCount, "GSI2PK")],
            // Beyond the day's count, but counted, so read: listed (issue 48).
            listed: true,
            row_flagged: false,
            change: |i| {
                let day = &i["createdAt"].as_s().unwrap()[..10];
                i.insert("GSI2PK".into(), s(&format!("STATUS#PENDING#{day}#57")));
            },
        },
    ]
}

/// The template order as the app wrote it, re-keyed as another order of
/// the same customer (the copy another writer makes before its change).
fn copied(template: &Item, id: &str) -> Item {
    let mut item = template.clone();
    let created = template["createdAt"].as_s().unwrap();
    let at = northwind_ops::model::iso_millis::parse(created).unwrap();
    item.insert("PK".into(), s(&keys::order_pk(id)));
    item.insert("orderId".into(), s(id));
    item.insert("GSI1SK".into(), s(&keys::timeline_sk(&at, id)));
    item.insert("GSI2SK".into(), s(&keys::timeline_sk(&at, id)));
    item.insert("GSI2PK".into(), s(&keys::pending_pk(at.date_naive(), keys::shard_of(id, SHARDS))));
    item
}

/// Every answer of the test, to check that none was a 5xx.
#[derive(Default)]
struct Answers(Vec<(String, u16)>);

impl Answers {
    async fn get(&mut self, app: &TestApp, http: &reqwest::Client, path: &str) -> (u16, String) {
        let response = http.get(format!("{}{path}", app.base)).timeout(Duration::from_secs(30)).send().await.unwrap();
        let status = response.status().as_u16();
        // Read to the end: an export that broke off midway fails here.
        let body =
            response.text().await.unwrap_or_else(|err| panic!("{:?} {path}: the body broke off: {err}", app.engine));
        self.0.push((path.to_string(), status));
        (status, body)
    }

    async fn json(&mut self, app: &TestApp, path: &str) -> Value {
        let (status, body) = self.get(app, &app.http, path).await;
        assert_eq!(status, 200, "{:?} {path}: {body}", app.engine);
        serde_json::from_str(&body).unwrap()
    }

    async fn post(&mut self, app: &TestApp, path: &str, body: Value) -> (u16, Value) {
        let request = app.http.post(format!("{}{path}", app.base)).json(&body).timeout(Duration::from_secs(30));
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        self.0.push((format!("POST {path}"), status));
        (status, response.json().await.unwrap_or(Value::Null))
    }

    fn assert_no_server_error(&self, app: &TestApp) {
        let failed: Vec<&(String, u16)> = self.0.iter().filter(|(_, status)| *status >= 500).collect();
        assert!(failed.is_empty(), "{:?}: server errors: {failed:?}", app.engine);
        println!("{:?}: {} answers, none a 5xx", app.engine, self.0.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_items_are_read_flagged_counted_and_shown() {
    for engine in engines() {
        let app = TestApp::spawn_with(engine, &["--shards", "10"], &[]).await;
        let day = Utc::now().date_naive();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let consumer =
            Arc::new(Consumer::new(app.store.clone(), ConsumerOptions::new("foreign"), Some(app.service.live.clone())));
        let task = tokio::spawn({
            let consumer = consumer.clone();
            async move {
                consumer
                    .run(async move {
                        let _ = stopped.changed().await;
                    })
                    .await
            }
        });
        let mut answers = Answers::default();

        // A real PENDING order of today, through the API: the template.
        let (status, body) = answers.post(&app, "/api/orders", new_order_json("f-template", CUSTOMER)).await;
        assert_eq!(status, 201, "{body}");
        let outside = outside_client(&app);
        let table = &app.config.orders_table;
        let key = |id: &str| std::collections::HashMap::from([("PK".to_string(), s(&keys::order_pk(id)))]);
        let template = outside.get_item().table_name(table).set_key(Some(key("f-template"))).send().await.unwrap();
        let template = template.item.unwrap();
        let live = LiveStream::open(&app.http, &app.base, "").await;

        // Each foreign order, put by the other writer's own client.
        let foreign = kinds();
        for f in &foreign {
            let mut item = copied(&template, f.id);
            (f.change)(&mut item);
            outside.put_item().table_name(table).set_item(Some(item)).send().await.unwrap();
        }
        let written = Instant::now();

        // The drift and size panel shows every kind within 2 s.
        let wanted: BTreeSet<(ProblemKind, String)> =
            foreign.iter().flat_map(|f| f.drift.iter().map(|(k, field)| (*k, field.to_string()))).collect();
        // For comparison: when the day's counters had every order (the
        // engine's stream delay plus the consumer's, whatever it records).
        let mut counted: Option<Duration> = None;
        let (report, shown) = loop {
            let r: QualityReport = serde_json::from_value(answers.json(&app, "/api/quality").await).unwrap();
            if counted.is_none() && app.store.read_counters(day).await.unwrap().created == foreign.len() as i64 + 1 {
                counted = Some(written.elapsed());
            }
            let seen: BTreeSet<(ProblemKind, String)> = r.drift.iter().map(|d| (d.kind, d.field.clone())).collect();
            let largest = r.size.largest.first().is_some_and(|l| l.order_id.as_deref() == Some("f-400k"));
            if (wanted.is_subset(&seen) && largest) || written.elapsed() > Duration::from_secs(15) {
                break (r, written.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        println!(
            "{:?}: drift and sizes shown {} ms after the writes (the counters had them after {:?} ms)",
            app.engine,
            shown.as_millis(),
            counted.map(|c| c.as_millis())
        );
        let seen: BTreeSet<(ProblemKind, String)> = report.drift.iter().map(|d| (d.kind, d.field.clone())).collect();
        let missing: Vec<_> = wanted.difference(&seen).collect();
        assert!(missing.is_empty(), "{:?}: drift not shown: {missing:?} of {report:#?}", app.engine);
        // The figures commit with the counters, in the checkpoint's
        // transaction: on DynamoDB Local most of this is its stream's own delay.
        assert!(shown <= Duration::from_secs(2), "{:?}: shown {shown:?} after the writes, over 2 s", app.engine);
        check_quality(&app, &report, &foreign);

        // The capacity page shows the same, server-rendered.
        let (status, html) = answers.get(&app, &app.http, "/capacity").await;
        assert_eq!(status, 200);
        for (kind, field) in &wanted {
            let row = format!(r#"data-kind="{}" data-field="{field}""#, kind.as_str());
            assert!(html.contains(&row), "{:?}: the panel has no row {row}", app.engine);
        }
        assert!(html.contains(r#"href="/orders/f-no-total""#), "a sample links to its order");
        assert!(html.contains("f-400k"), "the largest item is named");

        // The list, its exports, and the dashboard.
        check_list(&app, &mut answers, &foreign).await;
        // Each order's page and JSON, its history, its customer's history.
        check_orders(&app, &mut answers, &foreign).await;
        // A live dashboard gets a foreign order's row, flagged.
        let row = |e: &LiveEvent| matches!(e, LiveEvent::Entered { order, .. } if order.order_id == "f-no-total");
        assert!(live.wait_for(Duration::from_secs(3), row).await.is_some(), "{:?}: not live", app.engine);
        let pushed = live.events().into_iter().find_map(|(_, e)| match e {
            LiveEvent::Entered { order, .. } if order.order_id == "f-no-total" => Some(order),
            _ => None,
        });
        let pushed = pushed.unwrap();
        assert!(pushed.total.is_none() && pushed.problems.iter().any(|p| p.field == "total"), "{pushed:?}");
        // An order on a shard beyond its day's count is counted, listed and
        // pushed like any other (and flagged on the quality panel).
        let beyond = |e: &LiveEvent| matches!(e, LiveEvent::Entered { order, .. } if order.order_id == "f-shard-57");
        assert!(live.wait_for(Duration::from_secs(3), beyond).await.is_some(), "{:?}: shard 57 not live", app.engine);

        // The counters agree with the pages: shard 57 is in the PENDING
        // count, as it is on the list; ON_HOLD counts under its own name.
        settle(&consumer).await;
        assert_all_exact(&app, day).await;
        let counters = app.store.read_counters(day).await.unwrap();
        assert_eq!(counters.pending, foreign.iter().filter(|f| f.listed).count() as i64 + 1, "{:?}", app.engine);
        assert_eq!(counters.created, foreign.len() as i64 + 1, "{:?}", app.engine);
        let metrics = answers.json(&app, "/api/metrics/pending").await;
        assert_eq!(metrics["pending"], counters.pending);

        // Status changes: none offered from another writer's status, and one
        // asked for anyway is a 409 that says why; an order missing its total
        // still moves on.
        let change = json!({"from": "PENDING", "to": "CONFIRMED"});
        let (status, body) = answers.post(&app, "/api/orders/f-on-hold/status", change.clone()).await;
        assert_eq!(status, 409, "{:?}: {body}", app.engine);
        assert!(body["error"].as_str().unwrap().contains("ON_HOLD"), "{body}");
        let fn_change = json!({"order_id": "f-on-hold", "from": "PENDING", "to": "CONFIRMED", "reason": null});
        let (status, body) = answers.post(&app, "/api/fn/change-status", fn_change).await;
        assert_eq!(status, 409, "{:?}: {body}", app.engine);
        let (status, body) = answers.post(&app, "/api/orders/f-no-total/status", change.clone()).await;
        assert_eq!(status, 200, "{:?}: {body}", app.engine);
        let moved: Order = serde_json::from_value(body).unwrap();
        assert_eq!((moved.known_status(), moved.total), (Some(Status::Confirmed), None));

        // "Select every matching order" and confirm them: every one is
        // changed but the one in a status this console does not know, which
        // is a conflict left as it was; nothing fails.
        let bulk = json!({"filter": {"date": day.to_string()}, "from": "PENDING", "to": "CONFIRMED"});
        let (status, body) = answers.post(&app, "/api/bulk/status", bulk).await;
        assert_eq!(status, 202, "{:?}: {body}", app.engine);
        let id = body["id"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        let report = loop {
            let report = answers.json(&app, &format!("/api/bulk/{id}")).await;
            assert!(Instant::now() < deadline, "{:?}: the bulk run did not end: {report}", app.engine);
            if report["state"] != "running" {
                break report;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(report["state"], "done", "{report}");
        assert_eq!(report["conflicts"], json!(["f-on-hold"]), "{report}");
        assert_eq!(report["failed"], json!([]), "{report}");
        let listed = foreign.iter().filter(|f| f.listed).count() as u64 + 1;
        assert_eq!(report["changed"], listed - 2, "all but f-on-hold and f-no-total (confirmed already): {report}");
        settle(&consumer).await;
        assert_all_exact(&app, day).await;

        answers.assert_no_server_error(&app);
        let _ = stop.send(true);
        task.await.unwrap();
        drop(live);
        app.stop().await;
    }
}

/// Until the consumer has applied everything written so far (it found
/// the stream's end, and nothing more came in a while).
async fn settle(consumer: &Consumer) {
    let applied = || {
        let status = consumer.status();
        status.records_applied + status.bad_records
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = applied();
    loop {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let now = applied();
        if now == last && consumer.status().behind_ms == Some(0) {
            return;
        }
        assert!(Instant::now() < deadline, "the consumer did not settle: {:?}", consumer.status());
        last = now;
    }
}

fn check_quality(app: &TestApp, report: &QualityReport, foreign: &[Foreign]) {
    let engine = &app.engine;
    // Every foreign order but two drifts, and the template does not.
    let drifting = foreign.iter().filter(|f| !f.drift.is_empty()).count() as u64;
    assert_eq!(report.items_drifted, drifting, "{engine:?}: {report:#?}");
    assert_eq!(report.items_written, foreign.len() as u64 + 1, "{engine:?}");
    for d in &report.drift {
        assert!(!d.samples.is_empty() && d.samples.len() <= 5, "{engine:?}: {d:?}");
        let of_kind: Vec<&str> = foreign
            .iter()
            .filter(|f| f.drift.iter().any(|(k, field)| *k == d.kind && *field == d.field))
            .map(|f| f.id)
            .collect();
        assert_eq!(d.items, of_kind.len() as u64, "{engine:?}: {d:?}");
        for sample in &d.samples {
            assert!(of_kind.contains(&sample.order_id.as_deref().unwrap()), "{engine:?}: {sample:?} in {d:?}");
        }
    }
    let size = &report.size;
    let biggest = &size.largest[0];
    assert!(biggest.bytes > 400_000 && biggest.bytes <= 409_600, "{engine:?}: {biggest:?}");
    assert_eq!(size.max, Some(biggest.bytes));
    assert_eq!(size.largest[1].order_id.as_deref(), Some("f-big-attribute"), "{engine:?}: {size:?}");
    assert_eq!(size.over_read_unit, 2, "{engine:?}: the 300 KB and the 400 KB items");
    assert!(size.p50.is_some_and(|p| p < 1024), "{engine:?}: most orders fit a write unit: {size:?}");
    let gsi1 = size.per_write.iter().find(|c| c.resource.ends_with("/GSI1")).unwrap();
    let table = size.per_write.iter().find(|c| !c.resource.contains('/')).unwrap();
    assert_eq!(gsi1.units, table.units, "{engine:?}: GSI1 projects ALL: a large item costs it as much");
    assert!(gsi1.per_write > 50.0, "{engine:?}: two items of 300 and 400 KB among 13 writes: {gsi1:?}");
    println!(
        "{engine:?}: {} items, p50 {:?} B, p95 {:?} B, max {:?} B; GSI1 {:.1} units per write",
        size.items, size.p50, size.p95, size.max, gsi1.per_write
    );
}

async fn check_list(app: &TestApp, answers: &mut Answers, foreign: &[Foreign]) {
    let engine = &app.engine;
    let listed: BTreeSet<&str> = foreign.iter().filter(|f| f.listed).map(|f| f.id).chain(["f-template"]).collect();
    // Every page of the list, at a page size that makes several.
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/pending?limit=5&cursor={c}"),
            None => "/api/pending?limit=5".to_string(),
        };
        let page: PendingPage = serde_json::from_value(answers.json(app, &path).await).unwrap();
        rows.extend(page.orders);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let ids: BTreeSet<&str> = rows.iter().map(|r| r.order_id.as_str()).collect();
    assert_eq!(ids, listed, "{engine:?}: the list shows every order a reader can read, once");
    assert_eq!(rows.len(), listed.len(), "{engine:?}: no row twice");
    for f in foreign.iter().filter(|f| f.listed) {
        let row = rows.iter().find(|r| r.order_id == f.id).unwrap();
        assert_eq!(!row.problems.is_empty(), f.row_flagged, "{engine:?}: {} flagged: {row:?}", f.id);
    }
    let no_total = rows.iter().find(|r| r.order_id == "f-no-total").unwrap();
    assert_eq!(no_total.total, None, "never a made-up 0");
    // A filter keeps only what it can read to match.
    let filtered: PendingPage = serde_json::from_value(answers.json(app, "/api/pending?minTotal=1").await).unwrap();
    assert!(filtered.orders.iter().all(|o| o.total.is_some()), "{engine:?}");

    // The exports, read to the end: every row once, and the marker.
    let (status, csv) = answers.get(app, &app.http, "/api/pending.csv").await;
    assert_eq!(status, 200);
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(header.last().map(String::as_str), Some("problems"));
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), listed.len(), "{engine:?}: the CSV is whole");
    for f in foreign.iter().filter(|f| f.listed) {
        let record = records.iter().find(|r| &r[0] == f.id).unwrap();
        assert_eq!(!record[8].is_empty(), f.row_flagged, "{engine:?}: {}: {record:?}", f.id);
    }
    let no_total = records.iter().find(|r| &r[0] == "f-no-total").unwrap();
    assert_eq!((&no_total[3], &no_total[8]), ("", "total is missing"));
    let (status, jsonl) = answers.get(app, &app.http, "/api/pending.jsonl").await;
    assert_eq!(status, 200);
    let lines: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), listed.len(), "{engine:?}: the JSON lines are whole");
    for line in &lines {
        let f = foreign.iter().find(|f| f.id == line["orderId"]);
        let flagged = line["problems"].as_array().is_some_and(|p| !p.is_empty());
        assert_eq!(flagged, f.is_some_and(|f| f.row_flagged), "{engine:?}: {line}");
    }

    // The dashboard, as a page and as its server function, for a viewer too.
    for role in [Role::Admin, Role::Viewer] {
        let (status, html) = answers.get(app, &app.client_as(Some(role)), "/").await;
        assert_eq!(status, 200, "{engine:?} {role}");
        assert!(html.contains(r#"data-order-id="f-no-total""#), "{engine:?}: a foreign row on page one");
        assert!(html.contains(r#"data-testid="problems-flag""#), "{engine:?}: flagged");
    }
    let (status, body) = answers.post(app, "/api/fn/dashboard", json!({"params": {}})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["page"]["orders"].as_array().unwrap().iter().any(|o| o["orderId"] == "f-total-string"));
}

async fn check_orders(app: &TestApp, answers: &mut Answers, foreign: &[Foreign]) {
    let engine = &app.engine;
    for f in foreign {
        let order: Order = serde_json::from_value(answers.json(app, &format!("/api/orders/{}", f.id)).await).unwrap();
        let problems: BTreeSet<(ProblemKind, &str)> =
            order.problems.iter().map(|p| (p.kind, p.field.as_str())).collect();
        for (kind, field) in f.drift {
            assert!(problems.contains(&(*kind, *field)), "{engine:?}: {} lacks {kind:?} {field}: {problems:?}", f.id);
        }
        let (status, html) = answers.get(app, &app.http, &format!("/orders/{}", f.id)).await;
        assert_eq!(status, 200, "{engine:?}: /orders/{}", f.id);
        assert_eq!(html.contains(r#"data-testid="problems""#), !order.problems.is_empty(), "{engine:?}: {}", f.id);
        let (status, _) = answers.post(app, "/api/fn/order", json!({"order_id": f.id})).await;
        assert_eq!(status, 200);
        let history = answers.json(app, &format!("/api/orders/{}/history", f.id)).await;
        assert!(history["history"].as_array().unwrap().is_empty(), "another writer's order has no audit trail here");
        let (status, _) = answers.get(app, &app.http, &format!("/search?q={}", f.id)).await;
        assert_eq!(status, 200);
    }
    let on_hold: Order = serde_json::from_value(answers.json(app, "/api/orders/f-on-hold").await).unwrap();
    assert_eq!(on_hold.status, Some(OrderStatus::Other("ON_HOLD".into())));
    let (_, html) = answers.get(app, &app.http, "/orders/f-on-hold").await;
    assert!(html.contains("ON_HOLD") && html.contains(r#"data-testid="no-actions""#), "no change offered");
    assert!(!html.contains("data-to="), "{engine:?}: no status button");
    let (_, html) = answers.get(app, &app.http, "/orders/f-no-total").await;
    assert!(html.contains("total is missing"), "{engine:?}: the page says why");

    // The customer's history: every order, newest first, across pages; flagged.
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/customers/{CUSTOMER}/orders?limit=4&cursor={c}"),
            None => format!("/api/customers/{CUSTOMER}/orders?limit=4"),
        };
        let page: OrderPage = serde_json::from_value(answers.json(app, &path).await).unwrap();
        ids.extend(page.orders.iter().map(|o| (o.order_id.clone(), !o.problems.is_empty())));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(ids.len(), foreign.len() + 1, "{engine:?}: every order of the customer once: {ids:?}");
    assert!(ids.iter().any(|(id, flagged)| id == "f-no-updated" && *flagged));
    let (status, html) = answers.get(app, &app.http, &format!("/customers/{CUSTOMER}")).await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"data-testid="problems-flag""#), "{engine:?}: the history flags its rows");
    let (status, _) =
        answers.post(app, "/api/fn/customer-orders", json!({"customer_id": CUSTOMER, "params": {}})).await;
    assert_eq!(status, 200);
    let (status, csv) = answers.get(app, &app.http, &format!("/api/customers/{CUSTOMER}/orders.csv")).await;
    assert_eq!(status, 200);
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), foreign.len() + 1, "{engine:?}: the history's CSV is whole");
    let on_hold = records.iter().find(|r| &r[0] == "f-on-hold").unwrap();
    assert_eq!(&on_hold[1], "ON_HOLD");
    assert!(on_hold[8].contains("not one this console knows"), "{on_hold:?}");
    let (status, _) = answers.post(app, "/api/fn/search", json!({"query": "f-on-hold"})).await;
    assert_eq!(status, 200);
}

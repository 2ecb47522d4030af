//! Every writer's PENDING orders on every day (issue 48). The order service
//! writes the orders table with its own client, one plain PutItem an order,
//! on days this console never wrote to (no shard-count record: the rule
//! gives them the configured count, `store::shard_count`), and sometimes on
//! a shard beyond the day's count. On both engines and with both consumer
//! forms (the in-process consumer of `serve`, and the Lambda function driven
//! by the local event source mapping):
//! - orders on a day 20 days back, today and tomorrow are listed by the API
//!   and counted within seconds, one on shard 57 of 10 included, and that
//!   one is flagged on the order page and the data quality panel;
//! - after the metrics table is deleted and made again (every count, counter
//!   and checkpoint lost) and the stream applied again from its start, every
//!   day's counters equal a recount, the sale day recorded with 32 shards is
//!   listed whole, and writing the count ahead records 32 again from what
//!   its partitions hold.
//!
//! The Lambda function's processes are stopped by their pids (the mapping's
//! `stop`), whatever the outcome.

use crate::common;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Days, NaiveDate, Utc};
use common::{Engine, TestApp, order, outside_client};
use northwind_ops::model::{Order, ProblemKind, QualityReport, Role, Status};
use northwind_ops::server::auth::accounts;
use northwind_ops::server::sim::lambda::dead_letters::DeadLetters;
use northwind_ops::server::sim::lambda::{Mapping, MappingSettings, StartingPosition};
use northwind_ops::server::store::{Store, TableCapacity, keys, order_item};
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The configured count, as the order service is configured too.
const SHARDS: u32 = 10;
/// How long a day's orders may take to be listed and counted.
const WITHIN: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    Serve,
    Lambda,
}

/// A consumer of the orders table's stream in one of the two forms.
enum Running {
    Serve { stop: tokio::sync::watch::Sender<bool>, task: tokio::task::JoinHandle<()> },
    Lambda(Mapping),
}

impl Running {
    async fn start(form: Form, app: &TestApp, name: &str) -> Running {
        match form {
            Form::Serve => {
                let consumer = Arc::new(Consumer::new(
                    app.store.clone(),
                    ConsumerOptions::new(name),
                    Some(app.service.live.clone()),
                ));
                let (stop, mut stopped) = tokio::sync::watch::channel(false);
                let task = tokio::spawn(async move {
                    consumer
                        .run(async move {
                            let _ = stopped.changed().await;
                        })
                        .await
                });
                Running::Serve { stop, task }
            }
            Form::Lambda => {
                let mut settings = MappingSettings::deployed().unwrap();
                // A mapping made anew reads the stream from its start.
                settings.starting_position = StartingPosition::TrimHorizon;
                let function =
                    common::counters::lambda_function(&common::over_http(app), &settings, app.dir.path().join(name));
                let letters = Arc::new(DeadLetters::new(Some(app.dir.path().join(format!("{name}-dead.jsonl")))));
                Running::Lambda(Mapping::start(app.store.clone(), settings, function, letters))
            }
        }
    }

    /// Stops the consumer; the Lambda form's dead letters (none expected).
    async fn stop(self) -> usize {
        match self {
            Running::Serve { stop, task } => {
                let _ = stop.send(true);
                let _ = task.await;
                0
            }
            Running::Lambda(mapping) => {
                let letters = mapping.dead_letters().messages().len();
                let stats = mapping.stop(Duration::from_secs(5)).await;
                println!("  the mapping: {stats}");
                letters
            }
        }
    }
}

/// Orders the order service puts on `day`, PENDING, one plain PutItem each
/// with its own client, on the day's count as the rule gives it (`shards`:
/// no record read, as a service configured like the console), the last of
/// them on shard `beyond` instead when given. Their ids.
async fn put_as_service(
    app: &TestApp,
    day: NaiveDate,
    prefix: &str,
    n: usize,
    shards: u32,
    beyond: Option<u32>,
) -> Vec<String> {
    let client = outside_client(app);
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}-{day}-{i}");
        let at = day.and_hms_opt(9, i as u32 / 60, i as u32 % 60).unwrap().and_utc();
        let mut item = order_item(&order(&id, "c-service", Status::Pending, at), shards).unwrap();
        if let (Some(shard), true) = (beyond, i == n - 1) {
            item.insert(keys::GSI2PK.into(), AttributeValue::S(keys::pending_pk(day, shard)));
        }
        client.put_item().table_name(&app.config.orders_table).set_item(Some(item)).send().await.unwrap();
        ids.push(id);
    }
    ids
}

/// Every page of a day's PENDING list, by the API.
async fn listed(app: &TestApp, day: NaiveDate) -> BTreeSet<String> {
    app.all_pending(&format!("date={day}&limit=3")).await.0.into_iter().collect()
}

/// Until every day lists exactly its orders and counts them, or `WITHIN`:
/// how long it took.
async fn until_listed_and_counted(app: &TestApp, days: &[(NaiveDate, Vec<String>)], what: &str) -> Duration {
    let started = Instant::now();
    loop {
        let mut off = Vec::new();
        for (day, ids) in days {
            let want: BTreeSet<String> = ids.iter().cloned().collect();
            let got = listed(app, *day).await;
            if got != want {
                off.push(format!("{day}: listed {got:?}, written {want:?}"));
            }
            let (status, metrics) = app.get(&format!("/api/metrics/pending?date={day}")).await;
            assert_eq!(status, 200, "{metrics}");
            if metrics["pending"] != ids.len() {
                off.push(format!("{day}: counted {} PENDING, written {}", metrics["pending"], ids.len()));
            }
        }
        if off.is_empty() {
            return started.elapsed();
        }
        assert!(started.elapsed() < WITHIN, "{:?} {what}: after {WITHIN:?}: {off:#?}", app.engine);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Until every state counter of each day equals its recount and a Scan.
async fn until_exact(store: &Store, days: &[NaiveDate], what: &str) {
    let started = Instant::now();
    loop {
        let mut off = Vec::new();
        for day in days {
            off.extend(store.counter_differences(*day).await.into_iter().map(|d| format!("{day}: {d}")));
        }
        if off.is_empty() {
            return;
        }
        assert!(started.elapsed() < WITHIN, "{what}: counters off after {WITHIN:?}: {off:#?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn days_around(today: NaiveDate) -> [NaiveDate; 3] {
    [today.checked_sub_days(Days::new(20)).unwrap(), today, today.checked_add_days(Days::new(1)).unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_writers_pending_orders_are_listed_counted_and_a_shard_beyond_flagged_on_any_day() {
    for engine in common::engines() {
        for form in [Form::Serve, Form::Lambda] {
            another_writer(engine.clone(), form).await;
        }
    }
}

async fn another_writer(engine: Engine, form: Form) {
    let app = TestApp::spawn_with(engine, &["--shards", &SHARDS.to_string()], &[]).await;
    let consumer = Running::start(form, &app, "writers").await;
    let today = Utc::now().date_naive();
    let days = days_around(today);
    let mut written = Vec::new();
    for (i, day) in days.iter().enumerate() {
        // Tomorrow's last order on shard 57 of 10: a writer with another count.
        let beyond = (i == 2).then_some(57);
        written.push((*day, put_as_service(&app, *day, "svc", 5, SHARDS, beyond).await));
    }
    // The console wrote nothing on these days: no count is recorded.
    let recorded = app.store.recorded_shards_now(&days).await.unwrap();
    assert!(recorded.values().all(Option::is_none), "{recorded:?}");

    let took = until_listed_and_counted(&app, &written, &format!("{form:?}")).await;
    println!(
        "{:?}, {form:?}: another writer's orders on 3 days listed and counted {took:?} after the writes",
        app.engine
    );
    until_exact(&app.store, &days, &format!("{:?} {form:?}", app.engine)).await;

    // The order beyond the count: listed (above), counted on its own shard,
    // and flagged with its key on the order page and the quality panel.
    let tomorrow = days[2];
    let beyond = written[2].1.last().unwrap().clone();
    let counters = app.store.read_counters(tomorrow).await.unwrap();
    assert_eq!(counters.per_shard.get(57), Some(&1), "{:?}", counters.per_shard);
    let (status, body) = app.get(&format!("/api/orders/{beyond}")).await;
    assert_eq!(status, 200, "{body}");
    let page: Order = serde_json::from_value(body).unwrap();
    assert!(page.problems.iter().any(|p| p.kind == ProblemKind::ShardBeyondCount), "{:?}", page.problems);
    // The Lambda form adds a window's quality figures when it closes.
    let window = northwind_ops::server::deploy::template::TUMBLING_WINDOW_SECONDS as u64;
    let within = WITHIN + if form == Form::Lambda { Duration::from_secs(window) } else { Duration::ZERO };
    let started = Instant::now();
    loop {
        // The panel is by the day a write was made (today), not the order's day.
        let (status, body) = app.get(&format!("/api/quality?date={today}")).await;
        assert_eq!(status, 200, "{body}");
        let report: QualityReport = serde_json::from_value(body).unwrap();
        let flagged = report.drift.iter().find(|d| d.kind == ProblemKind::ShardBeyondCount);
        if let Some(flagged) = flagged {
            let keys: Vec<&str> = flagged.samples.iter().map(|s| s.key.as_str()).collect();
            assert!(keys.iter().any(|k| k.contains(&beyond)), "{keys:?}");
            break;
        }
        assert!(started.elapsed() < within, "{:?} {form:?}: no drift on the quality panel: {report:?}", app.engine);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(consumer.stop().await, 0, "nothing given up");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_metrics_table_is_made_again_and_the_stream_replayed_every_day_equals_a_recount() {
    for engine in common::engines() {
        for form in [Form::Serve, Form::Lambda] {
            metrics_table_lost(engine.clone(), form).await;
        }
    }
}

async fn metrics_table_lost(engine: Engine, form: Form) {
    let app = TestApp::spawn_with(engine, &["--shards", &SHARDS.to_string()], &[]).await;
    let consumer = Running::start(form, &app, "before").await;
    let today = Utc::now().date_naive();
    let sale = today.checked_add_days(Days::new(1)).unwrap();
    // Tomorrow is a sale day, written ahead with 32 shards; the order
    // service reads the record and spreads its orders over them.
    assert_eq!(app.store.record_shards_ahead(sale, 32).await.unwrap(), northwind_ops::server::store::Recorded::Written);
    let mut written = vec![(sale, put_as_service(&app, sale, "sale", 64, 32, None).await)];
    for day in [days_around(today)[0], today] {
        written.push((day, put_as_service(&app, day, "svc", 6, SHARDS, None).await));
    }
    until_listed_and_counted(&app, &written, &format!("{form:?}, before")).await;
    let held: BTreeSet<u32> = app
        .store
        .read_counters(sale)
        .await
        .unwrap()
        .per_shard
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(s, _)| s as u32)
        .collect();
    assert!(held.iter().any(|s| *s >= SHARDS), "64 orders over 32 shards use some past 10: {held:?}");
    assert_eq!(consumer.stop().await, 0);

    // The metrics table is lost and made again: counts, counters and
    // checkpoints with it. A new instance (nothing in memory) and a new
    // consumer apply the whole stream again.
    let metrics = app.config.metrics_table.clone();
    app.store.client().delete_table().table_name(&metrics).send().await.unwrap();
    app.store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let mut again = app.another_instance().await;
    // The API tokens went with the table too: an admin's made anew.
    let token = accounts::create_token(&again.store, "after", Role::Admin, "tests").await.unwrap();
    again.http = common::client_with_token(Some(&token));
    assert_eq!(again.store.recorded_shards_now(&[sale]).await.unwrap()[&sale], None, "the record went with the table");
    let consumer = Running::start(form, &again, "after").await;
    let took = until_listed_and_counted(&again, &written, &format!("{form:?}, after the metrics table")).await;
    let days: Vec<NaiveDate> = written.iter().map(|(d, _)| *d).collect();
    until_exact(&again.store, &days, &format!("{:?} {form:?}, replayed", again.engine)).await;
    println!(
        "{:?}, {form:?}: after the metrics table was made again, every day listed and counted {took:?} into the replay",
        again.engine
    );
    // Written ahead again, the sale day's count is what its partitions hold.
    again.service.write_shards_ahead(sale.and_hms_opt(0, 0, 0).unwrap().and_utc()).await.unwrap();
    let highest = held.iter().max().copied().unwrap();
    assert_eq!(again.store.shards_for(sale).await.unwrap(), SHARDS.max(highest + 1), "rebuilt from the index");
    again.service.write_shards_ahead(Utc::now()).await.unwrap();
    assert_eq!(again.store.recorded_shards_now(&[today]).await.unwrap()[&today], Some(SHARDS), "today's written");
    assert_eq!(consumer.stop().await, 0, "nothing given up");
    again.stop().await;
    app.stop().await;
}

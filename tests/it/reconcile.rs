//! Reconciliation against real engines — the embedded Dynoxide and DynamoDB
//! Local — while consumers are behind, crash, hand leases over, and writes
//! go on: it must find exactly the damage done, and only that.

use crate::common;

use common::counters::{
    Paused, assert_all_exact, assert_exact, assert_pending_exact, consumer, damage, drain, read_batch, write_mix,
};
use common::{TestApp, engines, new_order_json};
use northwind_ops::model::{ReconcileRefusal, Status};
use northwind_ops::server::sim::wire;
use northwind_ops::server::store::error::StoreError;
use northwind_ops::server::store::keys;
use northwind_ops::server::stream::lambda::{Delivered, LambdaConsumer, ShardOf};
use northwind_ops::server::stream::reconcile::{
    FullOptions, PendingOutcome, ReconcileError, ReconcileOptions, Reconciler,
};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A reconciler for the local engines, which write the stream and the index
/// with the table: a short grace is enough.
fn reconciler(app: &TestApp, owner: &str) -> Reconciler {
    let mut options = ReconcileOptions::new(owner);
    options.grace = Duration::from_millis(150);
    options.lease = Duration::from_secs(10);
    Reconciler::new(app.store.clone(), options)
}

fn off(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(a, n)| (a.to_string(), *n)).collect()
}

/// Creates `n` orders through the API.
async fn create(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        let (status, body) = app.post("/api/orders", new_order_json(&format!("{prefix}-{i:03}"), "c-rec")).await;
        assert_eq!(status, 201, "{body}");
    }
}

async fn confirm(app: &TestApp, order_id: &str) {
    let (status, body) =
        app.post(&format!("/api/orders/{order_id}/status"), json!({"from": "PENDING", "to": "CONFIRMED"})).await;
    assert_eq!(status, 200, "{body}");
}

/// Creates orders (and confirms every third) through the API until `until`.
async fn keep_writing(http: reqwest::Client, base: String, prefix: String, until: Instant) -> usize {
    let mut i = 0;
    while Instant::now() < until {
        let id = format!("{prefix}-{i:04}");
        let created = http.post(format!("{base}/api/orders")).json(&new_order_json(&id, "c-busy")).send().await;
        assert_eq!(created.unwrap().status().as_u16(), 201);
        if i % 3 == 0 {
            let change = json!({"from": "PENDING", "to": "CONFIRMED"});
            let url = format!("{base}/api/orders/{id}/status");
            assert_eq!(http.post(url).json(&change).send().await.unwrap().status().as_u16(), 200);
        }
        i += 1;
    }
    i
}

async fn verification(app: &TestApp) -> Value {
    let (status, body) = app.get("/api/metrics/pending").await;
    assert_eq!(status, 200, "{body}");
    body["verification"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_indexed_before_the_consumer_applies_it_is_not_counted_twice() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, created, mut per_status) = write_mix(&app).await;
        let behind = consumer(&app.store, "behind", 15_000);
        drain(&behind).await;
        // The consumer reads the next 20 orders' records and stops short of
        // applying them; 10 more orders follow that nobody has read.
        create(&app, "late", 20).await;
        let paused = Paused::read(&app.store, &behind, 500).await;
        assert_eq!(paused.records.len(), 20, "{engine:?}");
        create(&app, "later", 10).await;
        let counter = app.store.read_counters(day).await.unwrap().pending;
        let recount = app.store.recount_pending(day).await.unwrap().total() as i64;
        assert_eq!(recount - counter, 30, "{engine:?}: what a plain recount takes for drift");

        let started = Instant::now();
        let outcome = reconciler(&app, "judge").pending(day, true).await.unwrap();
        println!("{engine:?}: {outcome:?} in {:?}", started.elapsed());
        assert_eq!((outcome.drift, outcome.repaired), (0, false), "{engine:?}: {outcome:?}");
        assert!(outcome.off.is_empty(), "{engine:?}: {outcome:?}");
        assert_eq!((outcome.counter, outcome.touched), (counter, 30), "{engine:?}");

        paused.apply(&behind).await;
        drain(&behind).await;
        per_status[0].1 += 30;
        assert_exact(&app, day, created + 30, &per_status).await;
        assert_all_exact(&app, day).await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_counter_is_repaired_while_a_consumer_is_mid_batch_and_writes_continue() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let mid = consumer(&app.store, "mid-batch", 15_000);
        drain(&mid).await;
        let damaged = [("pending", 7), ("shard0", 7), ("shard3", -3)];
        damage(&app, keys::metric_pending_key(day), &damaged).await;
        create(&app, "more", 15).await;
        let paused = Paused::read(&app.store, &mid, 500).await;
        let until = Instant::now() + Duration::from_secs(2);
        let writing = tokio::spawn(keep_writing(app.http.clone(), app.base.clone(), "busy".into(), until));

        let dry = reconciler(&app, "dry").pending(day, false).await.unwrap();
        assert_eq!((&dry.off, dry.repaired), (&off(&damaged), false), "{engine:?}: {dry:?}");
        assert!(verification(&app).await["pending"].is_null(), "{engine:?}: a dry run records nothing");
        let started = Instant::now();
        let fixed = reconciler(&app, "fixer").pending(day, true).await.unwrap();
        println!("{engine:?}: {fixed:?} in {:?}", started.elapsed());
        assert_eq!((&fixed.off, fixed.drift, fixed.repaired), (&off(&damaged), 7, true), "{engine:?}");
        let written = writing.await.unwrap();
        assert!(written > 0, "{engine:?}: writes went on");
        let checked = verification(&app).await;
        assert_eq!((&checked["pending"]["drift"], &checked["pending"]["repaired"]), (&json!(7), &json!(true)));
        assert!(checked["daily"].is_null() && checked["perMinute"] == json!("not verifiable: history"), "{checked}");

        paused.apply(&mid).await;
        drain(&mid).await;
        assert_all_exact(&app, day).await;
        let again = reconciler(&app, "again").pending(day, true).await.unwrap();
        assert!(again.off.is_empty() && !again.repaired, "{engine:?}: {again:?}");
        assert_eq!(verification(&app).await["pending"]["drift"], json!(0));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reconciliations_at_once_repair_once() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        drain(&consumer(&app.store, "twice", 15_000)).await;
        let (a, b) = (reconciler(&app, "a"), reconciler(&app, "b"));

        // Step by step: both judge the same snapshot's damage; only the first write lands.
        damage(&app, keys::metric_pending_key(day), &[("pending", 5), ("shard2", 5)]).await;
        let (mut run_a, mut run_b) = (a.begin_pending(day).await.unwrap(), b.begin_pending(day).await.unwrap());
        run_a.read_index().await.unwrap();
        run_b.read_index().await.unwrap();
        run_a.read_stream().await.unwrap();
        run_b.read_stream().await.unwrap();
        let first = run_a.finish(true).await.unwrap();
        assert_eq!((first.off.clone(), first.repaired), (off(&[("pending", 5), ("shard2", 5)]), true), "{engine:?}");
        let second = run_b.finish(true).await;
        assert!(matches!(second, Err(ReconcileError::Store(StoreError::Conflict(_)))), "{engine:?}: {second:?}");
        assert_pending_exact(&app, day).await;

        // At once, end to end: one repairs; the other finds nothing left,
        // starting over if it lost the race.
        damage(&app, keys::metric_pending_key(day), &[("pending", -4), ("shard1", -4)]).await;
        let (x, y) = tokio::join!(a.pending(day, true), b.pending(day, true));
        let outcomes: Vec<PendingOutcome> = vec![x.unwrap(), y.unwrap()];
        println!("{engine:?}: {outcomes:?}");
        assert_eq!(outcomes.iter().filter(|o| o.repaired).count(), 1, "{engine:?}: {outcomes:?}");
        assert_eq!(outcomes.iter().map(|o| o.drift).sum::<i64>(), -4, "{engine:?}: {outcomes:?}");
        assert_pending_exact(&app, day).await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_moving_to_another_consumer_mid_reconcile_changes_nothing() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, created, mut per_status) = write_mix(&app).await;
        // A consumer applies one batch of 40 records and dies holding the lease.
        let dies = consumer(&app.store, "dies", 300);
        let first = Paused::read(&app.store, &dies, 40).await;
        first.apply(&dies).await;
        drop(dies);
        damage(&app, keys::metric_pending_key(day), &[("pending", 2), ("shard1", 2)]).await;

        let judge = reconciler(&app, "judge");
        let mut run = judge.begin_pending(day).await.unwrap();
        // Between the snapshot and the index read, another consumer takes
        // the lease over and applies everything after the checkpoint.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let takes_over = consumer(&app.store, "takes-over", 15_000);
        assert!(drain(&takes_over).await >= 90, "{engine:?}");
        run.read_index().await.unwrap();
        // And it applies new orders while the stream is read.
        create(&app, "during", 5).await;
        let (read, _) = tokio::join!(run.read_stream(), drain(&takes_over));
        read.unwrap();
        let outcome = run.finish(true).await.unwrap();
        println!("{engine:?}: {outcome:?}");
        assert_eq!((outcome.off.clone(), outcome.repaired), (off(&[("pending", 2), ("shard1", 2)]), true));

        drain(&takes_over).await;
        per_status[0].1 += 5;
        assert_exact(&app, day, created + 5, &per_status).await;
        assert_all_exact(&app, day).await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_reconciliation_repairs_created_a_status_and_a_minute_while_a_consumer_is_behind() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let behind = consumer(&app.store, "behind", 15_000);
        drain(&behind).await;
        let (_, order) = app.get("/api/orders/m-020").await;
        let at = northwind_ops::model::iso_millis::parse(order["createdAt"].as_str().unwrap()).unwrap();
        let minute = keys::minute_attribute('c', chrono::Timelike::hour(&at) * 60 + chrono::Timelike::minute(&at));
        damage(&app, keys::metric_day_key(day), &[("created", 3), ("statusCONFIRMED", -2)]).await;
        // The minute's figure is off by 4 as read: +5 in its hour's item,
        // -1 in the whole-day item versions before the hourly split wrote.
        damage(&app, keys::metric_minutes_key(day, chrono::Timelike::hour(&at)), &[(&minute, 5)]).await;
        damage(&app, keys::metric_minutes_day_key(day), &[(&minute, -1)]).await;
        // The consumer falls behind: a batch read and not applied, and more after it.
        create(&app, "behind", 12).await;
        for i in 20..26 {
            confirm(&app, &format!("m-{i:03}")).await;
        }
        let paused = Paused::read(&app.store, &behind, 500).await;
        create(&app, "after", 5).await;
        confirm(&app, "behind-000").await;

        let options =
            FullOptions { since: day, until: day, rcu_per_second: 500.0, segments: 3, page: 25, progress: false };
        let r = reconciler(&app, "full");
        let dry = r.full(&options, false).await.unwrap();
        let want = (off(&[("created", 3), ("statusCONFIRMED", -2)]), off(&[(&minute, 4)]));
        assert_eq!((dry.days[0].off.clone(), dry.days[0].minutes_off.clone()), want, "{engine:?}: {dry:?}");
        assert!(!dry.days[0].repaired);
        // 60 days take 16 snapshots (26 items a day, 99 a transaction beside
        // the checkpoint): the day, in the last, is judged against its own.
        let since = day - chrono::Duration::days(59);
        let wide = r.full(&FullOptions { since, ..options.clone() }, false).await.unwrap();
        let (last, earlier) = wide.days.split_last().unwrap();
        assert_eq!((wide.days.len(), (last.off.clone(), last.minutes_off.clone())), (60, want.clone()));
        assert!(earlier.iter().all(|d| d.off.is_empty() && d.minutes_off.is_empty()), "{engine:?}: {wide:?}");
        let fixed = r.full(&options, true).await.unwrap();
        println!(
            "{engine:?}: {:?}; scanned {} items, {:.1} RCU in {:?}, {} records",
            fixed.days[0], fixed.scanned, fixed.consumed, fixed.elapsed, fixed.records
        );
        assert_eq!((fixed.days[0].off.clone(), fixed.days[0].minutes_off.clone()), want, "{engine:?}");
        assert!(fixed.days[0].repaired && fixed.scanned >= 115, "{engine:?}: {fixed:?}");
        let checked = verification(&app).await;
        assert_eq!((&checked["daily"]["drift"], &checked["daily"]["repaired"]), (&json!(3), &json!(true)));

        paused.apply(&behind).await;
        drain(&behind).await;
        assert_all_exact(&app, day).await;
        let again = r.full(&options, true).await.unwrap();
        assert!(again.days[0].off.is_empty() && again.days[0].minutes_off.is_empty(), "{engine:?}: {again:?}");
        app.stop().await;
    }
}

/// Random creates and status changes through the API, until `until`.
/// Creates and moves orders at random until `until`, and at least `least`
/// times (on a busy machine eight seconds may hold few writes).
async fn random_writes(http: reqwest::Client, base: String, seed: u64, until: Instant, least: usize) -> usize {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut open, mut writes) = (Vec::<(String, Status)>::new(), 0);
    while Instant::now() < until || writes < least {
        if open.is_empty() || rng.random_bool(0.6) {
            let id = format!("s{seed}-{writes:05}");
            let created = http.post(format!("{base}/api/orders")).json(&new_order_json(&id, "c-stress")).send().await;
            assert_eq!(created.unwrap().status().as_u16(), 201);
            open.push((id, Status::Pending));
        } else {
            let i = rng.random_range(0..open.len());
            let (id, from) = open[i].clone();
            let to = match (from, rng.random_bool(0.7)) {
                (Status::Pending, true) => Status::Confirmed,
                (Status::Pending, false) => Status::Cancelled,
                _ => Status::Shipped,
            };
            let change = json!({"from": from, "to": to, "reason": "stress"});
            let response = http.post(format!("{base}/api/orders/{id}/status")).json(&change).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 200);
            if to == Status::Confirmed {
                open[i].1 = to
            } else {
                open.swap_remove(i);
            }
        }
        writes += 1;
    }
    writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciling_every_200_ms_under_random_writes_finds_no_drift_and_ends_exact() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let day = chrono::Utc::now().date_naive();
        let live = Arc::new(consumer(&app.store, "live", 15_000));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = {
            let (live, mut stopped) = (live.clone(), stopped.clone());
            tokio::spawn(async move {
                live.run(async move {
                    let _ = stopped.changed().await;
                })
                .await
            })
        };
        let until = Instant::now() + Duration::from_secs(8);
        let writers: Vec<_> = (0..2)
            .map(|seed| tokio::spawn(random_writes(app.http.clone(), app.base.clone(), seed, until, 50)))
            .collect();
        let judge = reconciler(&app, "every-200ms");
        let mut outcomes = Vec::new();
        // Five runs at least: on a busy machine one run on DynamoDB Local can
        // take seconds (it waits for the consumer's positions), and the last
        // runs then judge what the writers left.
        while Instant::now() < until || outcomes.len() < 5 || writers.iter().any(|w| !w.is_finished()) {
            outcomes.push(judge.pending(day, true).await.unwrap());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut writes = 0;
        for writer in writers {
            writes += writer.await.unwrap();
        }
        let _ = stop.send(true);
        running.await.unwrap();
        drain(&live).await;
        drop(stopped);

        let drifts: Vec<i64> = outcomes.iter().map(|o| o.drift).collect();
        let touched: usize = outcomes.iter().map(|o| o.touched).sum();
        println!(
            "{engine:?}: {writes} writes, {} reconciliations, drifts {drifts:?}, {touched} orders judged from the stream",
            outcomes.len()
        );
        assert!(outcomes.len() >= 5 && writes >= 100, "{engine:?}: {} runs, {writes} writes", outcomes.len());
        assert!(outcomes.iter().all(|o| o.off.is_empty() && !o.repaired), "{engine:?}: {outcomes:?}");
        assert_all_exact(&app, day).await;
        app.stop().await;
    }
}

/// Every record of the stream (the local engines keep one shard) as Lambda
/// hands them over, once `least` show.
async fn lambda_records(app: &TestApp, least: usize) -> (String, String, Vec<Delivered>) {
    let arn = app.store.stream_arn().await.unwrap().expect("a stream");
    let shard = app.store.stream_shards(&arn).await.unwrap().remove(0).id;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (mut records, mut iterator) = (Vec::new(), None);
        loop {
            let (batch, next) = read_batch(&app.store, &arn, &shard, iterator, 1000).await;
            if batch.is_empty() {
                break;
            }
            records.extend(batch);
            iterator = next;
        }
        if records.len() >= least || Instant::now() > deadline {
            let delivered = records.iter().map(|r| Delivered::from_json(&wire::lambda_record(r, &arn))).collect();
            return (arn, shard, delivered);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The Lambda form in a tumbling window moves the same shard checkpoints
/// reconciliation anchors at: with the function behind by a batch, a
/// damaged counter is found and repaired, and nothing the function has
/// still to apply is taken for drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambda_form_in_a_tumbling_window_is_reconciled_and_its_drift_repaired() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        create(&app, "behind", 20).await;
        let (arn, shard_id, records) = lambda_records(&app, 1).await;
        let shard = ShardOf { stream_arn: arn, shard_id };
        let lambda = LambdaConsumer::new(app.store.clone());
        let (applied, behind) = records.split_at(records.len() - 20);
        // The window's observations, carried (the counters do not wait).
        let mut carried = Default::default();
        let outcome = lambda.apply_shard(&shard, applied, &mut carried).await;
        assert_eq!((outcome.applied, outcome.failed_from), (applied.len(), None), "{engine:?}: {outcome:?}");
        let damaged = [("pending", 4), ("shard1", 4)];
        damage(&app, keys::metric_pending_key(day), &damaged).await;

        let fixed = reconciler(&app, "lambda-fixer").pending(day, true).await.unwrap();
        println!("{engine:?}, the Lambda form 20 records behind: {fixed:?}");
        assert_eq!((&fixed.off, fixed.drift, fixed.repaired), (&off(&damaged), 4, true), "{engine:?}: {fixed:?}");
        assert_eq!(fixed.touched, 20, "{engine:?}: the records after the checkpoint are the function's to apply");

        let rest = lambda.apply_shard(&shard, behind, &mut carried).await;
        assert_eq!(rest.applied, 20, "{engine:?}: {rest:?}");
        let again = lambda.apply_shard(&shard, &records, &mut carried).await;
        assert_eq!((again.applied, again.already), (0, records.len()), "{engine:?}: all at or before the checkpoint");
        assert_all_exact(&app, day).await;
        let after = reconciler(&app, "lambda-again").pending(day, true).await.unwrap();
        assert!(after.off.is_empty() && !after.repaired, "{engine:?}: {after:?}");
        app.stop().await;
    }
}

/// Where the anchor cannot be exact, reconciliation refuses, typed, and says
/// why: a Lambda function without a tumbling window (marker mode) applied
/// records, which moved no checkpoint. The dry run writes nothing; a run
/// that would repair records the refusal where the verdicts are shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marker_mode_is_refused_with_its_reason_and_nothing_is_judged() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let (_, _, records) = lambda_records(&app, 1).await;
        let lambda = LambdaConsumer::new(app.store.clone());
        let outcome = lambda.apply(&records).await;
        assert_eq!((outcome.applied, outcome.failed_from), (records.len(), None), "{engine:?}: {outcome:?}");
        let damaged = [("pending", 3), ("shard0", 3)];
        damage(&app, keys::metric_pending_key(day), &damaged).await;

        let dry = reconciler(&app, "dry").pending(day, false).await;
        let Err(ReconcileError::Refused(why @ ReconcileRefusal::MarkerMode { .. })) = &dry else {
            panic!("{engine:?}: {dry:?}")
        };
        println!("{engine:?}: {}", dry.as_ref().unwrap_err());
        assert!(verification(&app).await["pendingRefused"].is_null(), "{engine:?}: a dry run records nothing");
        let refused = reconciler(&app, "fixer").pending(day, true).await;
        assert!(matches!(&refused, Err(ReconcileError::Refused(w)) if w == why), "{engine:?}: {refused:?}");
        let shown = verification(&app).await;
        assert_eq!(shown["pendingRefused"]["reason"]["kind"], json!("marker-mode"), "{shown}");
        assert!(shown["pendingRefused"]["message"].as_str().unwrap().starts_with("marker mode"), "{shown}");
        assert!(shown["pending"].is_null(), "{engine:?}: nothing judged: {shown}");
        let counters = app.store.read_counters(day).await.unwrap();
        assert_eq!(counters.pending_refused.as_ref().map(|(_, r)| r), Some(why));
        app.stop().await;
    }
}

/// A consumer far behind (a record older than the bound unapplied) is
/// refused; once it has caught up, the same reconciliation judges, and its
/// verdict ends the refusal shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_far_behind_is_refused_until_it_catches_up() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let late = consumer(&app.store, "late", 15_000);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let mut options = ReconcileOptions::new("bounded");
        options.grace = Duration::from_millis(150);
        options.far_behind = Duration::from_secs(2);
        let bounded = Reconciler::new(app.store.clone(), options);
        let refused = bounded.pending(day, true).await;
        let Err(ReconcileError::Refused(ReconcileRefusal::FarBehind { behind_secs, bound_secs: 2, .. })) = &refused
        else {
            panic!("{engine:?}: {refused:?}")
        };
        assert!(*behind_secs >= 2, "{engine:?}: {refused:?}");
        assert_eq!(verification(&app).await["pendingRefused"]["reason"]["kind"], json!("far-behind"));
        drain(&late).await;
        let judged = bounded.pending(day, true).await.unwrap();
        assert!(judged.off.is_empty() && !judged.repaired, "{engine:?}: {judged:?}");
        let shown = verification(&app).await;
        assert!(shown["pendingRefused"].is_null() && shown["pending"]["drift"] == json!(0), "{shown}");
        app.stop().await;
    }
}

/// `serve`'s periodic reconciliation repairs only on the second of two runs
/// that agree: a damaged counter is recorded by the first run, untouched,
/// and repaired by the next, which finds the same damage at a later anchor
/// (orders written and applied in between). A difference that changes
/// between runs is recorded anew, not applied; one gone by the next run is
/// dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_counter_is_repaired_only_by_the_second_of_two_runs_that_agree() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let applying = consumer(&app.store, "applying", 15_000);
        drain(&applying).await;
        let periodic = reconciler(&app, "periodic");
        let damaged = [("pending", 3), ("shard1", 3)];
        damage(&app, keys::metric_pending_key(day), &damaged).await;

        let first = periodic.pending_confirmed(day).await.unwrap();
        assert_eq!((&first.off, first.repaired, first.awaiting), (&off(&damaged), false, true), "{engine:?}");
        let left = app.store.counter_differences(day).await;
        assert!(left.iter().any(|d| d.contains("pending")), "{engine:?}: the first run changes nothing: {left:?}");
        let shown = verification(&app).await;
        assert_eq!((&shown["pending"]["drift"], &shown["pending"]["repaired"]), (&json!(3), &json!(false)));
        create(&app, "between", 10).await;
        drain(&applying).await;
        let second = periodic.pending_confirmed(day).await.unwrap();
        assert_eq!((&second.off, second.repaired, second.awaiting), (&off(&damaged), true, false), "{engine:?}");
        assert_all_exact(&app, day).await;

        // More damage after a first finding: the second run's differs.
        damage(&app, keys::metric_pending_key(day), &[("pending", 2), ("shard0", 2)]).await;
        let found = periodic.pending_confirmed(day).await.unwrap();
        assert!(found.awaiting && !found.repaired, "{engine:?}: {found:?}");
        damage(&app, keys::metric_pending_key(day), &[("pending", 1), ("shard0", 1)]).await;
        let changed = periodic.pending_confirmed(day).await.unwrap();
        assert_eq!((&changed.off, changed.awaiting), (&off(&[("pending", 3), ("shard0", 3)]), true), "{engine:?}");
        let agreed = periodic.pending_confirmed(day).await.unwrap();
        assert!(agreed.repaired, "{engine:?}: {agreed:?}");
        assert_all_exact(&app, day).await;

        // Damage undone before the next run: nothing to agree with, nothing applied.
        damage(&app, keys::metric_pending_key(day), &[("pending", -4), ("shard2", -4)]).await;
        assert!(periodic.pending_confirmed(day).await.unwrap().awaiting, "{engine:?}");
        damage(&app, keys::metric_pending_key(day), &[("pending", 4), ("shard2", 4)]).await;
        let gone = periodic.pending_confirmed(day).await.unwrap();
        assert!(gone.off.is_empty() && !gone.repaired && !gone.awaiting, "{engine:?}: {gone:?}");
        let again = periodic.pending_confirmed(day).await.unwrap();
        assert!(again.off.is_empty() && !again.repaired, "{engine:?}: {again:?}");
        assert_all_exact(&app, day).await;
        app.stop().await;
    }
}

/// A count that was right is never changed by runs that raced the
/// consumer: orders are written between the runs and during them while the
/// consumer is behind, and no run finds (or records) a difference; the
/// counter's `repairs` count stays absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_right_count_is_never_changed_by_runs_that_race_the_consumer() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (day, ..) = write_mix(&app).await;
        let racing = consumer(&app.store, "racing", 15_000);
        drain(&racing).await;
        let periodic = reconciler(&app, "periodic");
        for round in 0..4 {
            create(&app, &format!("race{round}"), 8).await;
            confirm(&app, &format!("race{round}-000")).await;
            if round % 2 == 0 {
                // Part of it applied: the consumer is mid-way.
                racing.poll().await.unwrap();
            }
            let until = Instant::now() + Duration::from_millis(800);
            let writing = tokio::spawn(keep_writing(app.http.clone(), app.base.clone(), format!("w{round}"), until));
            let run = periodic.pending_confirmed(day).await.unwrap();
            writing.await.unwrap();
            assert!(run.off.is_empty() && !run.repaired && !run.awaiting, "{engine:?}, round {round}: {run:?}");
        }
        drain(&racing).await;
        assert_all_exact(&app, day).await;
        let item = app
            .store
            .client()
            .get_item()
            .table_name(&app.config.metrics_table)
            .key(keys::PK, aws_sdk_dynamodb::types::AttributeValue::S(keys::metric_pending_key(day).0))
            .key(keys::SK, aws_sdk_dynamodb::types::AttributeValue::S(keys::metric_pending_key(day).1))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        assert!(!item.contains_key(keys::attr::REPAIRS), "{engine:?}: never repaired: {item:?}");
        app.stop().await;
    }
}

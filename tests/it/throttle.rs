//! The throttle proxy in front of the embedded Dynoxide store. With one
//! write shard every PENDING order of a day lands on one GSI2 partition,
//! which the proxy throttles as DynamoDB would (the table write refused,
//! the index named); with ten shards the same burst stays under the limit.

use crate::common;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::ThrottlingReason;
use chrono::{DateTime, Duration, TimeZone, Utc};
use clap::Parser;
use common::{Engine, order, store_config};
use futures::StreamExt;
use northwind_ops::model::{Actor, Order, Status};
use northwind_ops::server::cli::config::{Cli, Command, RehearseArgs, StoreConfig, StoreKind};
use northwind_ops::server::sim::loadgen::{self, LoadgenArgs};
use northwind_ops::server::sim::rehearse::{self, RehearseOptions};
use northwind_ops::server::sim::throttle::{self, ProxyOptions, Tally, ThrottleError};
use northwind_ops::server::store::embedded::Embedded;
use northwind_ops::server::store::error::{StoreError, Unavailable};
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{self, Lease, Store, TableCapacity, order_item};
use northwind_ops::server::stream::counters::Deltas;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// 40 write units a second per partition, and a bucket of 40. An order is
/// created in one transaction (the order and three audit copies), and a
/// transactional write costs twice: one partition takes a burst of 20
/// orders, then 20 a second.
const SCALE: f64 = 0.04;
/// Orders in the burst, written by this many writers at once.
const ORDERS: usize = 40;
const WRITERS: usize = 8;

/// The embedded store, the proxy in front of it, and a store for each.
struct Rig {
    /// Talks to the embedded store straight, to see what was written.
    direct: Store,
    /// The app's store, through the proxy.
    proxied: Arc<Store>,
    embedded: Embedded,
    stop: oneshot::Sender<()>,
    proxy: JoinHandle<Result<Tally, ThrottleError>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start(shards: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shards = shards.to_string();
        let config = store_config(&Engine::Dynoxide, dir.path(), &["--shards", &shards]);
        let (direct, embedded) = store::connect(&config).await.unwrap();
        let embedded = embedded.expect("the embedded store runs in this process");
        direct.provision(Some(TableCapacity::OnDemand)).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let options = ProxyOptions {
            upstream: embedded.endpoint(),
            listen: "127.0.0.1:0".parse().unwrap(),
            scale: SCALE,
            transaction_conflicts: false,
        };
        let (addr, proxy) = throttle::start(options, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
        // The same tables, through the proxy.
        let proxied_config =
            StoreConfig { store: Some(StoreKind::Endpoint), endpoint_url: Some(format!("http://{addr}")), ..config };
        let (proxied, none) = store::connect(&proxied_config).await.unwrap();
        assert!(none.is_none());
        Self { direct, proxied: Arc::new(proxied), embedded, stop, proxy, _dir: dir }
    }

    /// Stops the proxy (its tally comes back) and the embedded store.
    async fn stop(self) -> Tally {
        let Rig { direct, proxied, embedded, stop, proxy, _dir } = self;
        drop(proxied);
        let _ = stop.send(());
        let tally = proxy.await.unwrap().unwrap();
        drop(direct);
        embedded.shutdown().await;
        tally
    }
}

fn day() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 14, 10, 0, 0).unwrap()
}

/// A PENDING order of its own customer, so only GSI2 is shared.
fn pending(id: &str, at: DateTime<Utc>) -> Order {
    order(id, &format!("cust-{id}"), Status::Pending, at)
}

fn burst_orders(prefix: &str) -> Vec<Order> {
    (0..ORDERS).map(|i| pending(&format!("{prefix}-{i:03}"), day() + Duration::milliseconds(i as i64))).collect()
}

/// Creates the orders through the app's own write path, `WRITERS` at a
/// time; returns each order's outcome and the writes per second achieved.
async fn burst(store: &Store, orders: &[Order]) -> (Vec<(String, bool)>, f64) {
    let started = Instant::now();
    let outcomes: Vec<(String, bool)> =
        futures::stream::iter(orders)
            .map(|order| async move {
                (order.order_id.clone(), store.create_order(order, &Actor::cli("tests")).await.is_ok())
            })
            .buffer_unordered(WRITERS)
            .collect()
            .await;
    let rate = orders.len() as f64 / started.elapsed().as_secs_f64();
    (outcomes, rate)
}

fn reasons_of(err: &PutItemError) -> &[ThrottlingReason] {
    match err {
        PutItemError::ThrottlingException(e) => e.throttling_reasons(),
        PutItemError::ProvisionedThroughputExceededException(e) => e.throttling_reasons(),
        PutItemError::RequestLimitExceeded(e) => e.throttling_reasons(),
        _ => &[],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shard_throttles_the_pending_index_and_refuses_the_table_write() {
    let rig = Rig::start(1).await;
    let (outcomes, rate) = burst(&rig.proxied, &burst_orders("one")).await;

    // Then the SDK straight, without its retries, until a write is refused:
    // the GSI2 partition has been drained by the burst, so within a bucket's worth.
    let no_retries = aws_sdk_dynamodb::Client::from_conf(
        rig.proxied.client().config().to_builder().retry_config(RetryConfig::disabled()).build(),
    );
    let mut refused = None;
    for i in 0..200 {
        let order = pending(&format!("direct-{i:03}"), day() + Duration::seconds(1));
        let put = no_retries
            .put_item()
            .table_name(rig.proxied.orders_table())
            .set_item(Some(order_item(&order, 1).unwrap()))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        if let Err(err) = put {
            refused = Some((order.order_id, err));
            break;
        }
    }
    let (refused_id, err) = refused.expect("a write refused within 200 back-to-back writes on one partition");
    if let Some(raw) = err.raw_response() {
        let body = String::from_utf8_lossy(raw.body().bytes().unwrap_or_default());
        println!("the refusal: HTTP {} {body}", raw.status().as_u16());
    }
    let service = err.as_service_error().unwrap_or_else(|| panic!("not a service error: {err:?}"));
    assert!(
        matches!(service, PutItemError::ThrottlingException(_)),
        "on-demand tables throttle with ThrottlingException: {service:?}"
    );
    let reasons = reasons_of(service);
    assert!(
        reasons.iter().any(|r| r.reason() == Some("IndexWriteKeyRangeThroughputExceeded")
            && r.resource().is_some_and(|arn| arn.ends_with("/index/GSI2"))),
        "reasons: {reasons:?}"
    );
    // The app's error carries the same reasons, so it can name the index
    // that DynamoDB's message does not.
    let err = StoreError::from(err);
    assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }), "{err:?}");
    assert!(
        err.throttles().iter().any(|t| t.reason == "IndexWriteKeyRangeThroughputExceeded" && t.index() == Some("GSI2")),
        "{err}"
    );
    assert!(rig.direct.get_order(&refused_id).await.unwrap().is_none(), "the refused write reached the table");
    // Every order the app was told is created is there; no other is.
    for (id, created) in &outcomes {
        assert_eq!(rig.direct.get_order(id).await.unwrap().is_some(), *created, "order {id}");
    }
    let failed = outcomes.iter().filter(|(_, created)| !created).count();

    let tally = rig.stop().await;
    println!(
        "one shard: {ORDERS} orders by {WRITERS} writers at {rate:.0}/s against {}/s per partition; \
         {failed} failed after the SDK's retries\n{tally}",
        1000.0 * SCALE
    );
    assert!(tally.throttled_by("IndexWriteKeyRangeThroughputExceeded") >= 1);
    assert_eq!(
        tally.throttled_by("TableWriteKeyRangeThroughputExceeded"),
        0,
        "every order has its own table partition"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_shards_take_the_same_burst_without_a_throttle() {
    let orders = burst_orders("ten");
    // However fast the burst, no GSI2 partition gets more than its bucket.
    let mut per_shard = [0; 10];
    for order in &orders {
        per_shard[keys::shard_of(&order.order_id, 10) as usize] += 1;
    }
    // Two units an order: the transaction doubles its writes.
    assert!(per_shard.iter().all(|n| f64::from(2 * *n) <= 1000.0 * SCALE), "{per_shard:?}");

    let rig = Rig::start(10).await;
    let (outcomes, rate) = burst(&rig.proxied, &orders).await;
    for (id, created) in &outcomes {
        assert!(created, "order {id} was not created");
        assert!(rig.direct.get_order(id).await.unwrap().is_some(), "order {id}");
    }
    let tally = rig.stop().await;
    println!("ten shards: {ORDERS} orders at {rate:.0}/s, per shard {per_shard:?}\n{tally}");
    assert_eq!(tally.throttled_requests, 0, "{tally}");
}

/// `loadgen`'s settings as the binary parses them.
fn loadgen_args(flags: &[&str]) -> LoadgenArgs {
    let argv = ["northwind-ops", "loadgen"].into_iter().chain(flags.iter().copied());
    match Cli::try_parse_from(argv).expect("loadgen flags parse").command {
        Some(Command::Loadgen(args)) => args,
        _ => unreachable!("the loadgen subcommand was named"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadgen_tallies_the_proxys_throttles_by_index_and_reason() {
    let rig = Rig::start(1).await;
    let args =
        loadgen_args(&["--profile", "max", "--orders", "60", "--writers", "16", "--close-after", "0", "--quiet"]);
    let report = loadgen::run(rig.proxied.clone(), &args).await.unwrap();
    println!("{report}");
    assert!(report.created > 0 && report.verified == report.created, "{report}");
    // One shard: every order shares the day's GSI2 partition. An order is
    // created in a transaction, whose cancellation names the throttled
    // action's table but not the index: the proxy's tally names it.
    assert!(report.throttled > 0, "{report}");
    let place = format!("{} or its indexes", rig.proxied.orders_table());
    assert!(report.throttles.by_index.get(&place).is_some_and(|n| *n > 0), "{report}");
    assert!(report.throttles.by_reason.get("TransactionThrottlingError").is_some_and(|n| *n > 0), "{report}");
    assert!(!report.throttles.by_reason.contains_key("not named"), "{report}");
    let tally = rig.stop().await;
    assert!(tally.throttled_by("IndexWriteKeyRangeThroughputExceeded") >= 1, "{tally}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_checkpoint_commit_is_unavailable_not_a_conflict() {
    let rig = Rig::start(1).await;
    let stream_arn = "arn:aws:dynamodb:local:000000000000:table/orders/stream/test";
    let now = Utc::now().timestamp_millis();
    let lease = Lease { stream_arn, shard_id: "shard-1", owner: "consumer-1", until_ms: now + 60_000 };
    assert!(rig.proxied.take_lease(&lease, now).await.unwrap().is_some());
    // Back-to-back commits on the checkpoint's partition (two write units
    // each, as a transaction's actions are) until the proxy refuses one.
    let (deltas, seq) = (Deltas::default(), |i: usize| format!("{i:021}"));
    let mut prev: Option<String> = None;
    let mut refused = None;
    for i in 0..40 {
        match rig.proxied.commit_batch(&lease, prev.as_deref(), Some(&seq(i)), false, &deltas).await {
            Ok(()) => prev = Some(seq(i)),
            Err(err) => {
                refused = Some((i, err));
                break;
            }
        }
    }
    let (i, err) = refused.expect("a commit refused within 40 back-to-back on one partition");
    println!("commit {i} refused: {err}");
    assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }), "{err:?}");
    let stored = rig.direct.checkpoints(stream_arn).await.unwrap();
    assert_eq!(stored["shard-1"].seq, prev, "a refused commit moved the checkpoint");

    // The same batch goes through once the partition has refilled; a stale
    // one is still a conflict.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    rig.proxied.commit_batch(&lease, prev.as_deref(), Some(&seq(i)), false, &deltas).await.unwrap();
    let stale = rig.proxied.commit_batch(&lease, prev.as_deref(), Some(&seq(i + 1)), false, &deltas).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    rig.stop().await;
}

/// `rehearse`'s settings as the binary parses them.
fn rehearse_args(flags: &[&str]) -> RehearseArgs {
    let argv = ["northwind-ops", "rehearse"].into_iter().chain(flags.iter().copied());
    match Cli::try_parse_from(argv).expect("rehearse flags parse").command {
        Some(Command::Rehearse(args)) => args,
        _ => unreachable!("the rehearse subcommand was named"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rehearsal_throttles_the_one_partition_design_and_not_the_sharded_one() {
    // 40 orders a second at the peak, two write units each on GSI2: 80 units
    // a second on one partition against 20, or about 8 on each of ten.
    let flags = ["--scale", "0.02", "--rate", "5", "--peak", "40", "--ramp", "1", "--hold", "4", "--decay", "1"];
    let args = rehearse_args(&[&flags[..], &["--writers", "8", "--quiet"]].concat());
    let options = RehearseOptions {
        designs: args.designs.clone(),
        consumer_after: None,
        scale: args.scale(),
        load: rehearse::flash_sale(&args),
        read_every: std::time::Duration::from_millis(args.read_every_ms),
    };
    let dir = tempfile::tempdir().unwrap();
    let base = store_config(&Engine::Dynoxide, dir.path(), &[]);
    let reports = rehearse::rehearse(&base, &options).await.unwrap();
    let table = rehearse::comparison(&options, &reports);
    println!("{table:#?}");
    let [one, ten] = &reports[..] else { panic!("two designs: {reports:?}") };
    assert_eq!((one.shards, ten.shards), (1, 10));
    assert!(one.proxy.throttled_by("IndexWriteKeyRangeThroughputExceeded") > 0, "{}", one.proxy);
    assert!(one.proxy.reasons.keys().all(|r| r.resource.ends_with("/index/GSI2")), "{}", one.proxy);
    assert_eq!(ten.proxy.throttled_requests, 0, "{}", ten.proxy);
    assert!(ten.load.created > 0 && ten.load.errors == 0, "{}", ten.load);
    assert!(ten.load.write_latency.is_some() && ten.reads.readable(), "{table:#?}");
    // The table names the reason on the one-partition design and none on the ten.
    let reason = table.rows.iter().find(|(label, _)| label == "  IndexWriteKeyRangeThroughputExceeded on GSI2");
    let (_, cells) = reason.unwrap_or_else(|| panic!("no row for the reason: {table:#?}"));
    assert_eq!(table.columns.len(), 2, "{table:#?}");
    assert!(cells[0] != "0" && cells[1] == "0", "{cells:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_throttled_attempt_is_recorded_the_ones_the_sdk_retried_away_included() {
    // The Prometheus recorder, installed before the first attempt is counted.
    northwind_ops::server::telemetry::prometheus();
    let rig = Rig::start(1).await;
    let store = rig.proxied.clone();
    let before = store.usage().throttle_totals();
    // PutItem, which the SDK retries when throttled (a transaction's
    // cancellation it does not): its standard mode, 3 attempts a call.
    let max_attempts = store.client().config().retry_config().map_or(1, |r| r.max_attempts());
    assert_eq!(max_attempts, 3);
    let puts: Vec<bool> = futures::stream::iter(0..120)
        .map(|i| {
            let store = store.clone();
            async move {
                let order = pending(&format!("retried-{i:03}"), day() + Duration::milliseconds(i));
                store
                    .client()
                    .put_item()
                    .table_name(store.orders_table())
                    .set_item(Some(order_item(&order, 1).unwrap()))
                    .send()
                    .await
                    .is_ok()
            }
        })
        .buffer_unordered(WRITERS)
        .collect()
        .await;
    let failed = puts.iter().filter(|ok| !**ok).count() as u64;
    let after = store.usage().throttle_totals();
    let recorded: u64 = after.iter().map(|(k, n)| n - before.get(k).copied().unwrap_or(0)).sum();
    let on_gsi2 = after
        .iter()
        .filter(|((reason, resource), _)| {
            reason == "IndexWriteKeyRangeThroughputExceeded" && resource.ends_with("/index/GSI2")
        })
        .map(|(k, n)| n - before.get(k).copied().unwrap_or(0))
        .sum::<u64>();
    // The Prometheus counter saw them too (other tests of this binary may add to it).
    let text = northwind_ops::server::telemetry::render(&northwind_ops::server::telemetry::Snapshot {
        consumer_lag_seconds: None,
        records_applied: 0,
        bad_records: 0,
        live_clients: 0,
        hot_keys: Vec::new(),
    });
    let tally = rig.stop().await;
    println!(
        "{} puts, {failed} failed after {max_attempts} attempts each; the store recorded {recorded} throttled \
         attempts ({on_gsi2} on GSI2), the proxy refused {}",
        puts.len(),
        tally.throttled_requests
    );
    // Only this store talks through the proxy: every refusal is one recorded attempt.
    assert_eq!(recorded, tally.throttled_requests, "{tally}");
    assert_eq!(on_gsi2, recorded, "every one named GSI2's key range");
    // A call that failed was throttled on each of its attempts; more
    // throttled attempts than that were retried away by the SDK, and counted.
    assert!(recorded > failed * u64::from(max_attempts), "recorded {recorded}, failed {failed}");
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("northwind_dynamodb_throttled_attempts_total{")
                && l.contains("reason=\"IndexWriteKeyRangeThroughputExceeded\"")
                && l.contains(&format!("table=\"{}\"", store.orders_table()))
        })
        .unwrap_or_else(|| panic!("no throttle counter for the table in\n{text}"));
    let counted: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(counted as u64, on_gsi2, "{line}");
}

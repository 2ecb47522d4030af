//! What the consumer's commits cost in write units late in the day against
//! early: a write is billed by the larger of the item's size before and
//! after, so a counter item that grows through the day makes every commit
//! dearer. Measured through the throttle proxy (which prices each write from
//! the item it reads first, as DynamoDB bills it), one order per commit (the
//! quiet hours' case, where a commit's cost is an order's), after the day
//! has been filled as a late evening leaves it, and on a fresh day.

use crate::common;

use chrono::{Duration, NaiveDate};
use common::Engine;
use northwind_ops::server::cli::config::{StoreConfig, StoreKind};
use northwind_ops::server::sim::counters_rehearsal::{phantom, prefill};
use northwind_ops::server::sim::throttle::buckets::Kind;
use northwind_ops::server::sim::throttle::{self, ProxyOptions};
use northwind_ops::server::store::{self, TableCapacity};
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Orders applied, one commit each.
const ORDERS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_costs_about_the_same_write_units_at_23_59_as_at_00_01() {
    for engine in common::engines() {
        let early = units_per_order(&engine, false).await;
        let late = units_per_order(&engine, true).await;
        println!(
            "{engine:?}: metrics-table write units per order, one order per commit: 00:01 {early:.2}, 23:59 (day \
             filled) {late:.2}"
        );
        assert!(late - early <= 2.0, "{engine:?}: a late commit costs {late:.2} units against {early:.2}");
    }
}

/// Metrics-table write units the proxy charged per order, `ORDERS` orders
/// created at 23:59 after the day was filled (`late`), or at 00:01.
async fn units_per_order(engine: &Engine, late: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let config = common::store_config(engine, dir.path(), &["--store-timeout-ms", "20000"]);
    let (direct, embedded) = store::connect(&config).await.unwrap();
    direct.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    let direct = Arc::new(direct);
    let upstream = common::endpoint_of(engine, embedded.as_ref());
    let stop = CancellationToken::new();
    let options =
        ProxyOptions { upstream, listen: "127.0.0.1:0".parse().unwrap(), scale: 1.0, transaction_conflicts: false };
    let (addr, proxy) = throttle::start(options, stop.clone().cancelled_owned()).await.unwrap();
    let proxied_config = StoreConfig {
        store: Some(StoreKind::Endpoint),
        endpoint_url: Some(format!("http://{addr}")),
        ..config.clone()
    };
    let proxied = Arc::new(store::connect(&proxied_config).await.unwrap().0);

    let day = NaiveDate::from_ymd_opt(2026, 11, 27).unwrap();
    let shards = direct.ensure_shards_recorded(day).await.unwrap();
    if late {
        prefill(&direct, day).await.unwrap();
        let filled = direct.read_counters(day).await.unwrap();
        assert!(
            filled.entered_per_minute.iter().all(|n| *n == 1) && filled.left_per_minute.iter().all(|n| *n == 1),
            "{engine:?}: the day was filled: every minute has an order that entered and left PENDING"
        );
    }
    let at = if late { day.and_hms_opt(23, 59, 0) } else { day.and_hms_opt(0, 1, 0) }.unwrap().and_utc();
    let consumer = Consumer::new(proxied.clone(), ConsumerOptions::new("measure"), None);
    let (arn, shard) = ("arn:northwind:test:minutes", "measured");
    consumer.lease(arn, shard).await.unwrap();
    let mut prev = None;
    for i in 0..ORDERS {
        let records = phantom(&format!("measured-{i:03}"), at + Duration::seconds(i as i64), shards, i * 3).unwrap();
        prev = consumer.apply(arn, shard, prev, &records[..1], false).await.unwrap();
    }
    // The observations the commits carried are part of the cost.
    consumer.add_carried().await;
    stop.cancel();
    let tally = proxy.await.unwrap().unwrap();
    let counted = direct.read_counters(day).await.unwrap();
    let minute = if late { 23 * 60 + 59 } else { 1 };
    assert_eq!(counted.created_per_minute[minute], ORDERS as i64, "{engine:?}: every order counted in its minute");
    drop((proxied, direct, consumer));
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
    let units = tally.units.get(&(config.metrics_table.clone(), Kind::Write)).copied().unwrap_or(0.0);
    units / ORDERS as f64
}

//! `loadgen`, `throttle-proxy`, `stream-proxy` and `rehearse`: simulated
//! traffic, throttling and stream shards on loopback.

use super::{CliError, shutdown_signal};
use crate::server::cli::config::{RehearseArgs, StoreConfig, StreamProxyArgs, ThrottleProxyArgs};
use crate::server::sim::rehearse;
use crate::server::sim::report::Comparison;
use crate::server::store::Store;
use std::sync::Arc;

pub(super) async fn run_loadgen(store: Store, args: &crate::server::sim::loadgen::LoadgenArgs) -> Result<(), CliError> {
    store.verify().await?;
    let report = crate::server::sim::loadgen::run(Arc::new(store), args).await?;
    println!("{report}");
    if report.verified != report.created {
        return Err(CliError::Usage(format!(
            "{} of {} created orders are missing from the table",
            report.created - report.verified,
            report.created
        )));
    }
    Ok(())
}

pub(super) async fn run_throttle_proxy(args: &ThrottleProxyArgs) -> Result<(), CliError> {
    let options = crate::server::sim::throttle::ProxyOptions {
        upstream: args.upstream.clone(),
        listen: args.listen,
        scale: args.scale,
        transaction_conflicts: args.transaction_conflicts,
    };
    crate::server::sim::throttle::run(options, shutdown_signal()).await?;
    Ok(())
}

pub(super) async fn run_stream_proxy(store: &StoreConfig, args: &StreamProxyArgs) -> Result<(), CliError> {
    let options = crate::server::sim::streams::StreamOptions::from_args(args, &store.orders_table);
    crate::server::sim::streams::run(options, shutdown_signal()).await?;
    Ok(())
}

pub(super) async fn run_rehearse(base: &StoreConfig, args: &RehearseArgs) -> Result<(), CliError> {
    if args.counters {
        return run_rehearse_counters(base, args).await;
    }
    let options = rehearse::RehearseOptions {
        designs: args.designs.clone(),
        consumer_after: None,
        scale: args.scale(),
        load: rehearse::flash_sale(args),
        read_every: std::time::Duration::from_millis(args.read_every_ms),
    };
    let reports = rehearse::rehearse(base, &options).await?;
    print_comparison(&rehearse::comparison(&options, &reports));
    Ok(())
}

/// `rehearse --counters`: the counters at many stream shards, each consumer
/// form, the start and the end of a day.
async fn run_rehearse_counters(base: &StoreConfig, args: &RehearseArgs) -> Result<(), CliError> {
    use crate::server::sim::counters_rehearsal::{CountersOptions, comparison, rehearse_counters};
    let binary =
        std::env::current_exe().map_err(|source| CliError::Io { what: "find this program's binary".into(), source })?;
    let options = CountersOptions::of(args, binary);
    let reports = rehearse_counters(base, &options).await?;
    print_comparison(&comparison(&options, &reports));
    Ok(())
}

/// A rehearsal's runs side by side, as a plain table (`make rehearse` writes
/// the same figures into BENCHMARKS.md as markdown, through the benchmark).
fn print_comparison(comparison: &Comparison) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_BORDERS_ONLY_CONDENSED);
    table.set_header(std::iter::once(String::new()).chain(comparison.columns.iter().cloned()));
    for (label, cells) in &comparison.rows {
        table.add_row(std::iter::once(label.clone()).chain(cells.iter().cloned()));
    }
    println!("{}\n\n{table}", comparison.setup);
}

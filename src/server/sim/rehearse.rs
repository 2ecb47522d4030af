//! `northwind-ops rehearse`: the flash sale of Northwind's story, replayed
//! through the throttle proxy once per design, side by side. `--shards 1`
//! is the old design (every PENDING order of a day in one GSI2 partition),
//! `--shards 10` the redesign. Each design gets a fresh embedded store and
//! a proxy of its own, the same loadgen profile, and a reader polling the
//! PENDING dashboard's first page the whole time.
//!
//! What is printed per design: target and achieved orders a second, the
//! throttled attempts the proxy refused by reason and resource (every
//! attempt, the SDK's retries included, as the proxy sees each one), the
//! writes' latency from due to stored, and whether the dashboard stayed
//! readable (every read answered, and how fast).

use crate::model::ConsumerMeasurement;
use crate::server::capacity::planner::MAX_SHARDS;
use crate::server::rules::{PARTITION_READ_UNITS, PARTITION_WRITE_UNITS};
use crate::server::sim::consumer_rate::ConsumerRun;
use crate::server::sim::loadgen::{self, LoadReport, LoadgenArgs, Percentiles, Profile, WriteMode};
use crate::server::sim::report::Comparison;
use crate::server::sim::throttle::parse_scale;
use crate::server::sim::throttle::{self, ProxyOptions, Tally, ThrottleError};
use crate::server::store::config::{StoreConfig, StoreKind};
use crate::server::store::error::StoreError;
use crate::server::store::{self, ConnectError, PendingFilter, Store, TableCapacity};
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug, Clone)]
pub struct RehearseArgs {
    /// The GSI2 write shard counts to compare (1 is the old design)
    #[arg(long, value_delimiter = ',', default_value = "1,10")]
    pub designs: Vec<u32>,
    /// Multiplies the partition limits, so a laptop reaches them [default:
    /// 0.05; 1.0 with --counters]
    #[arg(long, value_parser = parse_scale)]
    pub scale: Option<f64>,
    /// Orders per second before and after the sale
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Orders per second at the sale's peak
    #[arg(long, default_value_t = 100.0)]
    pub peak: f64,
    /// Seconds from the base rate to the peak, at the peak, and back
    #[arg(long, default_value_t = 5)]
    pub ramp: u64,
    /// Seconds held at the peak, after the ramp up
    #[arg(long, default_value_t = 20)]
    pub hold: u64,
    /// Seconds from the peak back down to --rate, after the hold
    #[arg(long, default_value_t = 5)]
    pub decay: u64,
    /// Concurrent writers
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub writers: u32,
    /// How the sale's orders are written: as this console does (a
    /// transaction with its audit record) or as the order service does (one
    /// PutItem, no audit, no shard-count record)
    #[arg(long, value_enum, default_value_t = WriteMode::Realistic)]
    pub mode: WriteMode,
    /// Milliseconds between two reads of the dashboard's first page
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..))]
    pub read_every_ms: u64,
    /// No progress bars
    #[arg(long)]
    pub quiet: bool,
    /// Rehearse the counters instead of the index designs: the sale at each
    /// --stream-shards count, consumed by each of --forms, at each of
    /// --days, through the throttle proxy and a simulated stream of many
    /// shards (see docs/engineering.md, "How do I measure the counters at
    /// many shards?")
    #[arg(long)]
    pub counters: bool,
    /// Stream shard counts (--counters)
    #[arg(long, value_delimiter = ',', default_value = "1,8,32", requires = "counters")]
    pub stream_shards: Vec<u32>,
    /// Who consumes the stream (--counters)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "serve,lambda", requires = "counters")]
    pub forms: Vec<Form>,
    /// When in the day the sale comes: start (new counter items) or end
    /// (items holding a whole day) (--counters)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "start,end", requires = "counters")]
    pub days: Vec<DayTime>,
    /// The Lambda form's MaximumBatchingWindowInSeconds, to weigh a fuller
    /// batch against a change's time to the dashboards (--counters)
    /// [default: the template's]
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=300), requires = "counters")]
    pub batching_window_secs: Option<u32>,
}

/// Who consumes the stream.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Two `serve` instances, each with its in-process consumer.
    Serve,
    /// `lambda` through the local event source mapping, and one `serve
    /// --no-consumer` for the dashboard.
    Lambda,
}

/// When in the day the sale comes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DayTime {
    /// 00:01: the day's counter items are new.
    Start,
    /// 23:59: the day's counter items hold every minute of the day.
    End,
}

impl RehearseArgs {
    /// The partition limits' multiplier: as given, else 0.05 for the index
    /// designs (a laptop reaches it) and 1.0 for the counters (the real limits).
    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or(if self.counters { 1.0 } else { 0.05 })
    }
}

/// The PENDING dashboard's first page, as the page asks for it.
const DASHBOARD_PAGE: u32 = 50;

#[derive(Debug, Clone)]
pub struct RehearseOptions {
    /// The GSI2 write shard counts to compare, one design each.
    pub designs: Vec<u32>,
    /// The proxy's partition limits times this.
    pub scale: f64,
    /// The load each design takes (a flash sale, normally).
    pub load: LoadgenArgs,
    /// How often the dashboard reader asks for the first page.
    pub read_every: Duration,
    /// Start the stream consumer this far into the load and measure it
    /// (`consumer_rate`); `None`: no consumer runs.
    pub consumer_after: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum RehearseError {
    #[error("--designs: {0}")]
    Designs(String),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Proxy(#[from] ThrottleError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// One design's figures.
#[derive(Debug, Clone)]
pub struct DesignReport {
    pub shards: u32,
    pub load: LoadReport,
    /// What the proxy refused and charged.
    pub proxy: Tally,
    pub reads: ReadReport,
    /// What the stream consumer applied, when one ran.
    pub consumer: Option<ConsumerMeasurement>,
}

/// The dashboard reader's figures.
#[derive(Debug, Clone, Default)]
pub struct ReadReport {
    pub answered: u64,
    pub failed: u64,
    pub latency: Option<Percentiles>,
    /// The first failure, to say why.
    pub first_error: Option<String>,
}

impl ReadReport {
    pub fn readable(&self) -> bool {
        self.answered > 0 && self.failed == 0
    }
}

/// The flash-sale load `rehearse`'s flags describe: the profile runs once,
/// plus five seconds at the base rate for the last orders to close.
pub fn flash_sale(args: &RehearseArgs) -> LoadgenArgs {
    LoadgenArgs {
        profile: Profile::FlashSale,
        rate: args.rate,
        peak: Some(args.peak),
        duration: args.ramp + args.hold + args.decay + 5,
        ramp: args.ramp,
        hold: args.hold,
        decay: args.decay,
        orders: None,
        writers: args.writers,
        mode: args.mode,
        customers: 10_000,
        close_after: 10.0,
        seed: 1,
        quiet: args.quiet,
    }
}

/// Runs every design in turn (one at a time: they would share the CPU).
pub async fn rehearse(base: &StoreConfig, options: &RehearseOptions) -> Result<Vec<DesignReport>, RehearseError> {
    if options.designs.is_empty() || options.designs.iter().any(|s| !(1..=MAX_SHARDS).contains(s)) {
        return Err(RehearseError::Designs(format!(
            "{:?}: give shard counts from 1 to {MAX_SHARDS}, e.g. 1,10",
            options.designs
        )));
    }
    let mut reports = Vec::new();
    for &shards in &options.designs {
        if !options.load.quiet {
            eprintln!("rehearsing --shards {shards} ...");
        }
        reports.push(one_design(base, shards, options).await?);
    }
    Ok(reports)
}

/// One design on a fresh embedded store of its own, in memory: nothing of a
/// rehearsal is kept, and the disk's speed is no part of its figures.
async fn one_design(base: &StoreConfig, shards: u32, options: &RehearseOptions) -> Result<DesignReport, RehearseError> {
    let config = StoreConfig {
        store: Some(StoreKind::Embedded),
        embedded_in_memory: true,
        embedded_addr: "127.0.0.1:0".parse().expect("a socket address"),
        shards,
        ..base.clone()
    };
    let (direct, embedded) = store::connect(&config).await?;
    let embedded = embedded.expect("an embedded store runs in this process");
    let outcome = through_proxy(&config, &direct, &embedded.endpoint(), options).await;
    drop(direct);
    embedded.shutdown().await;
    let (load, proxy, reads, consumer) = outcome?;
    Ok(DesignReport { shards, load, proxy, reads, consumer })
}

/// Provisions, starts the proxy in front of `upstream`, and runs the load
/// and the dashboard reader through it.
async fn through_proxy(
    config: &StoreConfig,
    direct: &Store,
    upstream: &str,
    options: &RehearseOptions,
) -> Result<(LoadReport, Tally, ReadReport, Option<ConsumerMeasurement>), RehearseError> {
    direct.provision(Some(TableCapacity::OnDemand)).await?;
    let consumer = match options.consumer_after {
        Some(after) => Some(ConsumerRun::start(config, upstream, after).await?),
        None => None,
    };
    let stop_proxy = CancellationToken::new();
    let proxy_options = ProxyOptions {
        upstream: upstream.to_string(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        scale: options.scale,
        transaction_conflicts: false,
    };
    let (addr, proxy) = throttle::start(proxy_options, stop_proxy.clone().cancelled_owned()).await?;
    let proxied_config = StoreConfig {
        store: Some(StoreKind::Endpoint),
        endpoint_url: Some(format!("http://{addr}")),
        ..config.clone()
    };
    let (proxied, _) = store::connect(&proxied_config).await?;
    let proxied = Arc::new(proxied);
    let stop_reading = CancellationToken::new();
    let reader = tokio::spawn(read_dashboard(proxied.clone(), options.read_every, stop_reading.clone()));
    let load = loadgen::run(proxied.clone(), &options.load).await;
    stop_reading.cancel();
    let reads = reader.await.unwrap_or_default();
    let consumer = match consumer {
        Some(run) => run.finish(options.scale).await,
        None => None,
    };
    drop(proxied);
    stop_proxy.cancel();
    let tally = proxy.await.map_err(|e| ThrottleError::Serve(std::io::Error::other(e)))??;
    Ok((load?, tally, reads, consumer))
}

/// Asks for the dashboard's first page of today's PENDING orders every
/// `every` until told to stop; a read that fails after the SDK's retries
/// is a dashboard that did not load.
async fn read_dashboard(store: Arc<Store>, every: Duration, stop: CancellationToken) -> ReadReport {
    let mut report = ReadReport::default();
    let mut latency = loadgen::latency_histogram();
    let filter = PendingFilter::default();
    while !stop.is_cancelled() {
        let today = chrono::Utc::now().date_naive();
        let started = Instant::now();
        match store.pending_page(&[today], DASHBOARD_PAGE, None, &filter).await {
            Ok(_) => {
                report.answered += 1;
                latency.saturating_record(started.elapsed().as_micros().max(1) as u64);
            }
            Err(err) => {
                report.failed += 1;
                report.first_error.get_or_insert_with(|| err.to_string());
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
    if !latency.is_empty() {
        report.latency = Some(Percentiles::of(&latency));
    }
    report
}

/// `IndexWriteKeyRangeThroughputExceeded on GSI2` from the proxy's reason
/// and ARN (`...:table/<name>/index/GSI2`, or `...:table/<name>`).
fn place(resource: &str) -> String {
    match resource.split_once("/index/") {
        Some((_, index)) => index.to_string(),
        None => format!("table {}", resource.rsplit('/').next().unwrap_or(resource)),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// The designs side by side.
pub fn comparison(options: &RehearseOptions, reports: &[DesignReport]) -> Comparison {
    let load = &options.load;
    let setup = format!(
        "Flash sale: {:.0} orders/s rising to {:.0}/s over {} s, held {} s, back over {} s ({} s in all), \
         {} writers; orders close after {:.0} s on average. Partition limits × {} ({:.0} WCU/s and {:.0} RCU/s \
         per partition). The dashboard's first page ({DASHBOARD_PAGE} orders) read every {} ms.",
        load.rate,
        load.peak.unwrap_or(load.rate * 10.0),
        load.ramp,
        load.hold,
        load.decay,
        load.duration,
        load.writers,
        load.close_after,
        options.scale,
        PARTITION_WRITE_UNITS * options.scale,
        PARTITION_READ_UNITS * options.scale,
        options.read_every.as_millis(),
    );
    let columns: Vec<String> = reports
        .iter()
        .map(|r| {
            if r.shards == 1 { "`--shards 1` (one partition)".to_string() } else { format!("`--shards {}`", r.shards) }
        })
        .collect();
    let mut table = Comparison::new(setup, columns);
    table.row("orders/s: target (mean) → achieved", reports, |r| {
        format!("{:.0} → {:.0}", r.load.target_rate.unwrap_or(0.0), r.load.achieved_rate)
    });
    table.row("orders created / failed", reports, |r| format!("{} / {}", r.load.created, r.load.errors));
    table.row("attempts throttled (proxy)", reports, |r| r.proxy.throttled_requests.to_string());
    let reasons: BTreeSet<(String, String)> =
        reports.iter().flat_map(|r| r.proxy.reasons.keys().map(|k| (k.reason.clone(), place(&k.resource)))).collect();
    for (reason, place_name) in &reasons {
        table.row(format!("  {reason} on {place_name}"), reports, |r| {
            let n: u64 = r
                .proxy
                .reasons
                .iter()
                .filter(|(k, _)| &k.reason == reason && &place(&k.resource) == place_name)
                .map(|(_, n)| n)
                .sum();
            n.to_string()
        });
    }
    table.row("write latency p50 / p99 (due → stored)", reports, |r| match &r.load.write_latency {
        Some(l) => format!("{} / {}", ms(l.p50), ms(l.p99)),
        None => "none written".into(),
    });
    table.row("dashboard reads answered / failed", reports, |r| format!("{} / {}", r.reads.answered, r.reads.failed));
    table.row("dashboard read p50 / p99", reports, |r| match &r.reads.latency {
        Some(l) => format!("{} / {}", ms(l.p50), ms(l.p99)),
        None => "none answered".into(),
    });
    table.row("dashboard stayed readable", reports, |r| {
        if r.reads.readable() {
            "yes".to_string()
        } else {
            format!("no: {}", r.reads.first_error.as_deref().unwrap_or("no read answered"))
        }
    });
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_is_placed_on_its_index_or_its_table() {
        let arn = "arn:aws:dynamodb:ddblocal:000000000000:table/northwind-orders";
        assert_eq!(place(&format!("{arn}/index/GSI2")), "GSI2");
        assert_eq!(place(arn), "table northwind-orders");
    }
}

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

use crate::server::cli::config::{RehearseArgs, StoreConfig, StoreKind};
use crate::server::sim::loadgen::{self, LoadReport, LoadgenArgs, Percentiles, Profile, WriteMode};
use crate::server::sim::throttle::{self, ProxyOptions, Tally, ThrottleError};
use crate::server::store::error::StoreError;
use crate::server::store::{self, ConnectError, PendingFilter, Store, TableCapacity};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Where `--write` puts the table in a markdown file, replacing what is
/// between the two markers (or adding them before `make bench`'s reading).
pub const SECTION_START: &str = "<!-- rehearse: start (written by `make rehearse`) -->";
pub const SECTION_END: &str = "<!-- rehearse: end -->";

/// What `make bench` keeps of BENCHMARKS.md when it rewrites it: the
/// rehearsal goes before it.
pub const BENCHMARKS_READING_MARKER: &str = "<!-- Everything below this line is kept by `make bench`. -->";

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
        mode: WriteMode::Realistic,
        customers: 10_000,
        close_after: 10.0,
        seed: 1,
        quiet: args.quiet,
    }
}

/// Runs every design in turn (one at a time: they would share the CPU).
pub async fn rehearse(base: &StoreConfig, options: &RehearseOptions) -> Result<Vec<DesignReport>, RehearseError> {
    if options.designs.is_empty() || options.designs.iter().any(|s| !(1..=64).contains(s)) {
        return Err(RehearseError::Designs(format!(
            "{:?}: give shard counts from 1 to 64, e.g. 1,10",
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

/// A fresh embedded store for one design, removed afterwards.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn one_design(base: &StoreConfig, shards: u32, options: &RehearseOptions) -> Result<DesignReport, RehearseError> {
    let scratch = Scratch(std::env::temp_dir().join(format!("northwind-rehearse-{}", uuid::Uuid::new_v4().simple())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|source| RehearseError::Io { what: format!("create {}", scratch.0.display()), source })?;
    let config = StoreConfig {
        store: Some(StoreKind::Embedded),
        data_dir: scratch.0.clone(),
        embedded_addr: "127.0.0.1:0".parse().expect("a socket address"),
        shards,
        ..base.clone()
    };
    let (direct, embedded) = store::connect(&config).await?;
    let embedded = embedded.expect("an embedded store runs in this process");
    let outcome = through_proxy(&config, &direct, &embedded.endpoint(), options).await;
    drop(direct);
    embedded.shutdown().await;
    let (load, proxy, reads) = outcome?;
    Ok(DesignReport { shards, load, proxy, reads })
}

/// Provisions, starts the proxy in front of `upstream`, and runs the load
/// and the dashboard reader through it.
async fn through_proxy(
    config: &StoreConfig,
    direct: &Store,
    upstream: &str,
    options: &RehearseOptions,
) -> Result<(LoadReport, Tally, ReadReport), RehearseError> {
    direct.provision(Some(TableCapacity::OnDemand)).await?;
    let stop_proxy = CancellationToken::new();
    let proxy_options = ProxyOptions {
        upstream: upstream.to_string(),
        listen: "127.0.0.1:0".parse().expect("an address"),
        scale: options.scale,
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
    drop(proxied);
    stop_proxy.cancel();
    let tally = proxy.await.map_err(|e| ThrottleError::Serve(std::io::Error::other(e)))??;
    Ok((load?, tally, reads))
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

/// The side-by-side table, in markdown (it reads as plain text too).
pub fn table(options: &RehearseOptions, reports: &[DesignReport]) -> String {
    let load = &options.load;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Flash sale: {:.0} orders/s rising to {:.0}/s over {} s, held {} s, back over {} s ({} s in all), \
         {} writers; orders close after {:.0} s on average. Partition limits × {} ({:.0} WCU/s and {:.0} RCU/s \
         per partition). The dashboard's first page ({DASHBOARD_PAGE} orders) read every {} ms.\n",
        load.rate,
        load.peak.unwrap_or(load.rate * 10.0),
        load.ramp,
        load.hold,
        load.decay,
        load.duration,
        load.writers,
        load.close_after,
        options.scale,
        1000.0 * options.scale,
        3000.0 * options.scale,
        options.read_every.as_millis(),
    );
    let header: Vec<String> = reports
        .iter()
        .map(|r| {
            if r.shards == 1 { "`--shards 1` (one partition)".to_string() } else { format!("`--shards {}`", r.shards) }
        })
        .collect();
    let _ = writeln!(out, "| | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(reports.len()));
    let row = |out: &mut String, label: &str, cell: &dyn Fn(&DesignReport) -> String| {
        let cells: Vec<String> = reports.iter().map(cell).collect();
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    };
    row(&mut out, "orders/s: target (mean) → achieved", &|r| {
        format!("{:.0} → {:.0}", r.load.target_rate.unwrap_or(0.0), r.load.achieved_rate)
    });
    row(&mut out, "orders created / failed", &|r| format!("{} / {}", r.load.created, r.load.errors));
    row(&mut out, "attempts throttled (proxy)", &|r| r.proxy.throttled_requests.to_string());
    let reasons: BTreeSet<(String, String)> =
        reports.iter().flat_map(|r| r.proxy.reasons.keys().map(|k| (k.reason.clone(), place(&k.resource)))).collect();
    for (reason, place_name) in &reasons {
        row(&mut out, &format!("  {reason} on {place_name}"), &|r| {
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
    row(&mut out, "write latency p50 / p99 (due → stored)", &|r| match &r.load.write_latency {
        Some(l) => format!("{} / {}", ms(l.p50), ms(l.p99)),
        None => "none written".into(),
    });
    row(&mut out, "dashboard reads answered / failed", &|r| format!("{} / {}", r.reads.answered, r.reads.failed));
    row(&mut out, "dashboard read p50 / p99", &|r| match &r.reads.latency {
        Some(l) => format!("{} / {}", ms(l.p50), ms(l.p99)),
        None => "none answered".into(),
    });
    row(&mut out, "dashboard stayed readable", &|r| {
        if r.reads.readable() {
            "yes".to_string()
        } else {
            format!("no: {}", r.reads.first_error.as_deref().unwrap_or("no read answered"))
        }
    });
    out
}

/// Puts `table` between the section markers of the markdown file `path`,
/// replacing an earlier rehearsal or adding the section before `make
/// bench`'s hand-written reading (or at the end).
pub fn write_section(path: &Path, body: &str) -> Result<(), RehearseError> {
    let io = |what: String| move |source| RehearseError::Io { what, source };
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(io(format!("read {}", path.display()))(err)),
    };
    let section = format!("{SECTION_START}\n## Hot-partition rehearsal (`make rehearse`)\n\n{body}\n{SECTION_END}");
    let new = replace_section(&old, &section, BENCHMARKS_READING_MARKER);
    std::fs::write(path, new).map_err(io(format!("write {}", path.display())))
}

fn replace_section(old: &str, section: &str, reading_marker: &str) -> String {
    if let (Some(start), Some(end)) = (old.find(SECTION_START), old.find(SECTION_END))
        && start < end
    {
        return format!("{}{section}{}", &old[..start], &old[end + SECTION_END.len()..]);
    }
    match old.find(reading_marker) {
        Some(at) => format!("{}{section}\n\n{}", &old[..at], &old[at..]),
        None if old.is_empty() => format!("{section}\n"),
        None => format!("{}\n\n{section}\n", old.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READING: &str = "<!-- reading -->";

    #[test]
    fn the_section_is_added_before_the_reading_then_replaced_in_place() {
        let first = replace_section("# Benchmarks\n\nfigures\n\n<!-- reading -->\nkept", "S1", READING);
        assert_eq!(first, "# Benchmarks\n\nfigures\n\nS1\n\n<!-- reading -->\nkept");
        let with_markers = format!("a\n{SECTION_START}\nold\n{SECTION_END}\nb");
        assert_eq!(replace_section(&with_markers, "NEW", READING), "a\nNEW\nb");
        assert_eq!(replace_section("", "S", READING), "S\n");
        assert_eq!(replace_section("text\n\n", "S", READING), "text\n\nS\n");
    }

    #[test]
    fn a_throttle_is_placed_on_its_index_or_its_table() {
        let arn = "arn:aws:dynamodb:ddblocal:000000000000:table/northwind-orders";
        assert_eq!(place(&format!("{arn}/index/GSI2")), "GSI2");
        assert_eq!(place(arn), "table northwind-orders");
    }
}

//! Ready for the sale? One go/no-go over a sale plan, and for each check its
//! verdict (ready, act, no-go), the figures behind it and the one action
//! that fixes it. Pure: the service gathers the figures (the days' shard
//! counts, DescribeTable's settings, the recorded hot keys, the alarms) and
//! hands them in; nothing here reads a store.
//!
//! The checks, a file each (named as the check's id, `_` for `-`, and
//! `warm` for `warm-throughput`), with its tests beside it:
//!
//! - `shards`: the GSI2 shards the planner wants for the peak against each
//!   sale day's count (`store::shard_count`: recorded, else configured). A
//!   day's count is fixed once written (every writer and reader keeps it),
//!   so one written too low is a no-go, and so is a day not written yet
//!   whose configured count is too low, until written ahead (`write-shards`);
//! - `warm-throughput`: what each table and index must take at the peak
//!   (`planner::prewarm`, from `costs`: an order's writes as the plan's
//!   writer writes them, the counters on the metrics table) against its
//!   warm throughput, on-demand maximum or provisioned capacity as
//!   DescribeTable reports them. A figure an engine
//!   does not report is "unknown", never guessed;
//! - `auto-scaling`: for a provisioned table or index, Application Auto
//!   Scaling's maximum against what it must take at the peak, and a
//!   scheduled action raising the minimum to that before the start (with
//!   `FLOOR_LEAD_MINUTES` of lead); unknown off AWS unless an emulator
//!   was read;
//! - `counters`: the write units a second on the busiest counter partition
//!   of the metrics table at the peak (`costs::counter_load`: what the
//!   consumer writes), against a partition's 1,000;
//! - `consumer`: the stream records a second the sale makes against what the
//!   consumer was measured to apply (unknown when never measured);
//! - `hot-keys`: the GSI1 keys recorded hot recently, at the sale's scale;
//! - `alarms`: the CloudWatch alarms on the tables (AWS only);
//! - `rehearsal`: the plan's shape, scaled down, run through the throttle
//!   proxy at the sale day's shard count (`rehearsal_verdict` weighs a
//!   run): never run, or run on another version of the plan or shard
//!   count, is an action; a run that throttled or failed is a no-go.
//!
//! Apart from them: `fixes` builds the commands and template parameters
//! the checks hand out (`aws dynamodb update-table`, Application Auto
//! Scaling's scalable targets and scheduled actions), and `scheduled`
//! works out what a scheduled action sets and when. This file holds the
//! entry (`assess`), what the checks weigh and the helpers they share;
//! the test cases the checks share are in `cases`.

mod alarms;
mod auto_scaling;
#[cfg(test)]
mod cases;
mod consumer;
mod counters;
mod fixes;
mod hot_keys;
mod rehearsal;
mod scheduled;
mod shards;
mod warm;

pub use hot_keys::MIN_SCALED_MINUTE_UNITS;
pub use rehearsal::{REHEARSAL_MIN_ACHIEVED, rehearsal_verdict};
pub use shards::{design_shards, shards_needed, shards_to_write};

use crate::model::{Figure, Fix, Readiness, ReadinessCheck, Rehearsal, SalePlan, Verdict};
use crate::server::capacity::costs::{self, CHANGES_PER_ORDER, CounterLoad, Definitions, MeasuredWrites, OrderWrites};
use crate::server::capacity::planner::{self, DEFAULT_HEADROOM, PlanInput, Prewarm};
use crate::server::deploy::template::TableRole;
use crate::server::rules::PARTITION_WRITE_UNITS;
use crate::server::store::keys::GSI2;
use crate::server::store::{Alarm, ScalableTarget, ThroughputSettings};
use alarms::alarms_check;
use auto_scaling::auto_scaling_check;
use chrono::{DateTime, NaiveDate, Utc};
use consumer::consumer_check;
use counters::counters_check;
use hot_keys::hot_keys_check;
use rehearsal::rehearsal_check;
use shards::shards_check;
use warm::warm_check;

/// Stream records each order makes during a sale: its creation, and its
/// move out of PENDING (the planner's two changes).
pub const RECORDS_PER_ORDER: f64 = CHANGES_PER_ORDER;

/// How long before the sale's start a scheduled floor raise must run: a
/// scheduled action runs up to a minute or two after its time, and DynamoDB
/// then takes minutes to raise a table's provisioned capacity (an
/// UpdateTable), longer for a large raise; auto scaling alone would only
/// follow the ramp after two minutes over its target, throttling meanwhile.
pub const FLOOR_LEAD_MINUTES: i64 = 15;

/// What Application Auto Scaling was read to say (`store::autoscaling`).
#[derive(Clone, Copy, Debug)]
pub enum AutoScaling<'a> {
    /// Not read: a local engine has none, and no emulator was named.
    NotRead,
    /// Reading it failed: the store's error (a missing permission named).
    Failed(&'a str),
    /// The write scalable targets of the tables and indexes that have one.
    Read(&'a [ScalableTarget]),
}

impl AutoScaling<'_> {
    fn target(&self, resource: &str) -> Option<&ScalableTarget> {
        match self {
            AutoScaling::Read(targets) => targets.iter().find(|t| t.resource == resource),
            _ => None,
        }
    }
}

/// One minute a GSI1 key was recorded hot: its units, and the index's units
/// in the same minute.
#[derive(Clone, Debug, PartialEq)]
pub struct HotObservation {
    pub key: String,
    pub at: DateTime<Utc>,
    pub units: f64,
    pub index_units: f64,
}

/// Everything the checks weigh.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub plan: &'a SalePlan,
    pub now: DateTime<Utc>,
    /// AWS DynamoDB, not a local engine (which reports no warm throughput,
    /// never throttles, and has no alarms).
    pub on_aws: bool,
    pub orders_table: &'a str,
    pub metrics_table: &'a str,
    /// The configured count: a day not written yet has it.
    pub configured_shards: u32,
    /// Each sale day and its recorded shard count.
    pub recorded: &'a [(NaiveDate, Option<u32>)],
    /// What the checks cost the program's writes by: the orders table's
    /// indexes as provisioned, the counters' layout and the consumer's
    /// batching (`Definitions::program()`; a test hands in others).
    pub definitions: &'a Definitions,
    /// The stream's pricing of the last days, when read: an order's costs
    /// measured from it where it saw enough records.
    pub measured: Option<&'a MeasuredWrites>,
    /// DescribeTable's settings; `None` when they could not be read.
    pub throughput: Option<&'a [ThroughputSettings]>,
    /// The stream's shards now, when known.
    pub stream_shards: Option<u32>,
    /// Hot GSI1 keys over the window, and how many minutes of it the
    /// stream consumer observed (0: nothing is known of it).
    pub hot: &'a [HotObservation],
    pub observed_minutes: usize,
    pub hot_window_days: u32,
    /// The tables' alarms; `None` when not read (no CloudWatch client).
    pub alarms: Option<&'a [Alarm]>,
    /// Application Auto Scaling's write targets and scheduled actions.
    pub autoscaling: AutoScaling<'a>,
    /// The plan's last finished rehearsal, and whether one runs now.
    pub rehearsal: Option<&'a Rehearsal>,
    pub rehearsal_running: bool,
    /// The recorded consumer mode (which form counts), shown beside the
    /// consumer's rate; `None` when not read.
    pub consumer_mode: Option<&'a crate::model::ConsumerModeState>,
    /// The concurrency the Lambda consumer may use (`--consumer-concurrency`:
    /// its reserved concurrency, or the account's unreserved pool), when known.
    pub consumer_concurrency: Option<u32>,
}

impl Inputs<'_> {
    fn inputs_peak(&self) -> f64 {
        self.plan.peak_orders_per_second.max(f64::MIN_POSITIVE)
    }
}

/// What the plan's writes cost, worked out from `Inputs::definitions`.
#[derive(Clone, Debug)]
pub struct Sizing {
    /// One order's writes as the plan's writer writes them.
    pub writes: OrderWrites,
    pub shard_plan: planner::Plan,
    /// What each table and index takes at the peak.
    pub prewarm: Vec<Prewarm>,
    pub counters: CounterLoad,
}

/// The plan's costs: an order of the plan's size as the store writes it,
/// priced over the indexes as defined, the GSI2 shards its entries want,
/// the stream shards the table's writes make, and the counters the
/// consumer writes at that many shards.
pub fn sizing(inputs: &Inputs<'_>) -> Result<Sizing, planner::PlanError> {
    let (plan, defs) = (inputs.plan, inputs.definitions);
    let peak = plan.peak_orders_per_second;
    let cost = |e: costs::CostError| planner::PlanError::Sample(e.to_string());
    let order = costs::order_of_size(plan.item_bytes, inputs.configured_shards).map_err(cost)?;
    let writes = costs::order_writes(&defs.table, plan.writer, &order, inputs.configured_shards).map_err(cost)?;
    let writes = costs::with_measured(writes, inputs.measured);
    let entry = costs::index_entry_bytes(&defs.table, GSI2, &order, inputs.configured_shards).map_err(cost)?;
    let entry = u32::try_from(entry).unwrap_or(u32::MAX);
    // The shards from the entry as written (`shards_needed`'s figure, what
    // `write-shards` writes), not from a measured average: a fix must turn
    // this check ready.
    let shard_plan = planner::plan(&PlanInput::for_writer(peak, entry, plan.writer))?;
    let table = peak * writes.units_on("table");
    let stream_shards = stream_shards_for(inputs, table);
    let busiest_hour = plan.start + chrono::Duration::minutes(i64::from(plan.ramp_minutes));
    let counters =
        costs::counter_load(&defs.counters, busiest_hour, peak * CHANGES_PER_ORDER, stream_shards, shard_plan.shards)
            .map_err(cost)?;
    let prewarm = planner::prewarm(peak, &writes, Some(&counters));
    Ok(Sizing { writes, shard_plan, prewarm, counters })
}

/// The plan's go/no-go: every check, and the worst of their verdicts.
pub fn assess(inputs: &Inputs<'_>) -> Readiness {
    let plan = inputs.plan;
    let sizing = sizing(inputs);
    let shard_plan = sizing.as_ref().map(|s| s.shard_plan.clone()).map_err(Clone::clone);
    let prewarm = sizing.as_ref().ok().map(|s| s.prewarm.as_slice());
    let checks = vec![
        shards_check(inputs, &shard_plan),
        warm_check(inputs, prewarm),
        auto_scaling_check(inputs, prewarm),
        counters_check(inputs, sizing.as_ref().ok()),
        consumer_check(inputs, prewarm),
        hot_keys_check(inputs, prewarm),
        alarms_check(inputs),
        rehearsal_check(inputs, &shard_plan, sizing.as_ref().ok()),
    ];
    let verdict = checks.iter().map(|c| c.verdict).max().unwrap_or(Verdict::Ready);
    Readiness { plan: plan.clone(), verdict, checks, as_of: inputs.now }
}

fn figure(label: impl Into<String>, value: impl Into<String>) -> Figure {
    Figure { label: label.into(), value: value.into(), source: None }
}

/// A figure and where it came from.
fn sourced(label: impl Into<String>, value: impl Into<String>, source: impl Into<String>) -> Figure {
    Figure { source: Some(source.into()), ..figure(label, value) }
}

fn check(
    id: &str,
    title: &str,
    verdict: Verdict,
    reason: String,
    figures: Vec<Figure>,
    fix: Option<Fix>,
) -> ReadinessCheck {
    ReadinessCheck { id: id.into(), title: title.into(), verdict, reason, figures, fix }
}

fn fix_text(text: impl Into<String>) -> Fix {
    Fix { text: text.into(), command: None, parameter: None, action: None }
}

/// Whole numbers plain, others to one decimal.
fn num(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { format!("{value:.1}") }
}

/// The most a partition may take at the peak with the planner's headroom.
fn partition_budget() -> f64 {
    PARTITION_WRITE_UNITS / (1.0 + DEFAULT_HEADROOM)
}

/// A rate against one partition: no-go at or over the limit, act over the
/// budget that keeps the planner's headroom, else ready.
fn against_partition(units_per_second: f64) -> Verdict {
    if units_per_second >= PARTITION_WRITE_UNITS {
        Verdict::NoGo
    } else if units_per_second > partition_budget() {
        Verdict::Act
    } else {
        Verdict::Ready
    }
}

/// The resource DescribeTable names for a `planner::prewarm` entry, and the
/// template's parameter prefix for it.
fn resource_of(inputs: &Inputs<'_>, prewarm: &Prewarm) -> (String, String, Option<&'static str>) {
    match prewarm.resource.as_str() {
        "table" => (inputs.orders_table.to_string(), TableRole::Orders.prefix().to_string(), None),
        "metrics table" => (inputs.metrics_table.to_string(), TableRole::Metrics.prefix().to_string(), None),
        "GSI1" => {
            (format!("{}/GSI1", inputs.orders_table), format!("{}GSI1", TableRole::Orders.prefix()), Some("GSI1"))
        }
        _ => (format!("{}/GSI2", inputs.orders_table), format!("{}GSI2", TableRole::Orders.prefix()), Some("GSI2")),
    }
}

/// What the checks of the tables' settings (warm throughput, auto scaling)
/// weigh: what each table and index must take at the peak, and
/// DescribeTable's settings; else the check's verdict on what is missing.
fn sized<'a>(
    id: &str,
    title: &str,
    inputs: &Inputs<'a>,
    prewarm: Option<&'a [Prewarm]>,
) -> Result<(&'a [Prewarm], &'a [ThroughputSettings]), Box<ReadinessCheck>> {
    let Some(prewarm) = prewarm else {
        return Err(Box::new(check(
            id,
            title,
            Verdict::NoGo,
            "the planner cannot size this peak".into(),
            vec![],
            None,
        )));
    };
    let Some(settings) = inputs.throughput else {
        let reason = "unknown: DescribeTable could not be read".to_string();
        let fix = fix_text("run `northwind-ops provision` (the tables must exist) and check again");
        return Err(Box::new(check(id, title, Verdict::Act, reason, vec![], Some(fix))));
    };
    Ok((prewarm, settings))
}

/// The stream's shards at the peak: at least today's, and at least one per
/// 1,000 write units a second on the table (a stream shard per partition).
fn stream_shards_at_peak(inputs: &Inputs<'_>, prewarm: &[Prewarm]) -> u32 {
    let table = prewarm.iter().find(|p| p.resource == "table").map_or(0.0, |p| p.write_units_per_second);
    stream_shards_for(inputs, table)
}

fn stream_shards_for(inputs: &Inputs<'_>, table_units_per_second: f64) -> u32 {
    costs::stream_shards(table_units_per_second, inputs.stream_shards)
}

#[cfg(test)]
mod tests {
    use super::cases::{Case, plan};
    use super::fixes::shell_quote;
    use super::*;

    #[test]
    fn a_peak_the_design_holds_on_written_days_is_ready() {
        let readiness = Case::new(100.0, Some(10)).assess();
        assert_eq!(readiness.verdict, Verdict::Ready, "{readiness:#?}");
        let warm = readiness.checks.iter().find(|c| c.id == "warm-throughput").unwrap();
        assert!(warm.figures.iter().any(|f| f.value.starts_with("unknown")), "{warm:?}");
    }

    /// The figures BENCHMARKS.md lists: plans of 300, 2,000 and 10,000
    /// orders a second, written by another service and through the console.
    #[test]
    fn the_figures_by_peak_and_writer() {
        let mut rows = Vec::new();
        for peak in [300.0, 2000.0, 10_000.0] {
            for writer in crate::model::Writer::ALL {
                let mut case = Case::new(peak, Some(100));
                case.plan.writer = writer;
                let rehearsal = case.rehearsal();
                let sizing = sizing(&case.inputs(rehearsal.as_ref())).unwrap();
                let on = |resource: &str| {
                    sizing.prewarm.iter().find(|p| p.resource == resource).unwrap().write_units_per_second.ceil()
                };
                let (partition, busiest) = sizing.counters.busiest();
                println!(
                    "{peak:>6} orders/s {:<8} table {:>6} GSI1 {:>6} GSI2 {:>6} ({:>3} shards) metrics {:>6} \
                     (counters {:>5.0}) stream shards {:>3} busiest counter partition {busiest:>6.1} ({partition})",
                    writer.as_str(),
                    on("table"),
                    on("GSI1"),
                    on("GSI2"),
                    sizing.shard_plan.shards,
                    on("metrics table"),
                    sizing.counters.metrics_units_per_second.ceil(),
                    sizing.counters.stream_shards,
                );
                rows.push((peak, writer, on("table"), on("metrics table")));
            }
        }
        // 2,000 orders/s of another service's: 4,000 WCU/s on the table (a
        // put and an update of 1 WCU each), the metrics table only the
        // counters; through the console twice the table and 24,000 of audit.
        let row = |peak, writer| rows.iter().find(|r| r.0 == peak && r.1 == writer).unwrap();
        assert_eq!(row(2000.0, crate::model::Writer::Service).2, 4000.0);
        assert!(row(2000.0, crate::model::Writer::Service).3 < 200.0);
        assert_eq!(row(2000.0, crate::model::Writer::Console).2, 8000.0);
        assert!(row(2000.0, crate::model::Writer::Console).3 > 24_000.0);
    }

    #[test]
    fn the_sale_days_cross_midnight() {
        let mut late = plan(10.0);
        late.start = "2026-11-27T23:30:00Z".parse().unwrap();
        assert_eq!(late.days().len(), 2);
        assert_eq!(plan(10.0).days().len(), 1);
        assert_eq!(shell_quote("black friday"), "'black friday'");
    }
}

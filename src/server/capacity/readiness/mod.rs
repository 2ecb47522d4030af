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
//!   (`planner::prewarm`) against its warm throughput, on-demand maximum or
//!   provisioned capacity as DescribeTable reports them. A figure an engine
//!   does not report is "unknown", never guessed;
//! - `auto-scaling`: for a provisioned table or index, Application Auto
//!   Scaling's maximum against what it must take at the peak, and a
//!   scheduled action raising the minimum to that before the start (with
//!   `FLOOR_LEAD_MINUTES` of lead); unknown off AWS unless an emulator
//!   was read;
//! - `counters`: the write units a second on the busiest counter item of the
//!   metrics table at the peak, against a partition's 1,000;
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

pub use counters::COUNTER_ATTRIBUTE_BYTES;
pub use hot_keys::MIN_SCALED_MINUTE_UNITS;
pub use rehearsal::{REHEARSAL_MIN_ACHIEVED, rehearsal_verdict};
pub use shards::{design_shards, shards_needed, shards_to_write};

use crate::model::{Figure, Fix, Readiness, ReadinessCheck, Rehearsal, SalePlan, Verdict};
use crate::server::capacity::planner::{self, DEFAULT_HEADROOM, PlanInput, Prewarm};
use crate::server::deploy::template::TableRole;
use crate::server::rules::PARTITION_WRITE_UNITS;
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
pub const RECORDS_PER_ORDER: f64 = 2.0;

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
    /// One GSI2 entry, and one audit record, in bytes.
    pub gsi2_entry_bytes: u32,
    pub audit_bytes: u32,
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
}

impl Inputs<'_> {
    fn inputs_peak(&self) -> f64 {
        self.plan.peak_orders_per_second.max(f64::MIN_POSITIVE)
    }
}

/// The plan's go/no-go: every check, and the worst of their verdicts.
pub fn assess(inputs: &Inputs<'_>) -> Readiness {
    let plan = inputs.plan;
    let shard_plan = planner::plan(&PlanInput::for_app(plan.peak_orders_per_second, inputs.gsi2_entry_bytes));
    let prewarm = shard_plan
        .as_ref()
        .ok()
        .map(|p| planner::prewarm(plan.peak_orders_per_second, p, plan.item_bytes, inputs.audit_bytes));
    let checks = vec![
        shards_check(inputs, &shard_plan),
        warm_check(inputs, prewarm.as_deref()),
        auto_scaling_check(inputs, prewarm.as_deref()),
        counters_check(inputs, prewarm.as_deref(), &shard_plan),
        consumer_check(inputs, prewarm.as_deref()),
        hot_keys_check(inputs, prewarm.as_deref()),
        alarms_check(inputs),
        rehearsal_check(inputs, &shard_plan),
    ];
    let verdict = checks.iter().map(|c| c.verdict).max().unwrap_or(Verdict::Ready);
    Readiness { plan: plan.clone(), verdict, checks, as_of: inputs.now }
}

fn figure(label: impl Into<String>, value: impl Into<String>) -> Figure {
    Figure { label: label.into(), value: value.into() }
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
    let by_partitions = (table / PARTITION_WRITE_UNITS).ceil().max(1.0) as u32;
    by_partitions.max(inputs.stream_shards.unwrap_or(1))
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

    #[test]
    fn the_sale_days_cross_midnight() {
        let mut late = plan(10.0);
        late.start = "2026-11-27T23:30:00Z".parse().unwrap();
        assert_eq!(late.days().len(), 2);
        assert_eq!(plan(10.0).days().len(), 1);
        assert_eq!(shell_quote("black friday"), "'black friday'");
    }
}

//! Ready for the sale? One go/no-go over a sale plan, and for each check its
//! verdict (ready, act, no-go), the figures behind it and the one action
//! that fixes it. Pure: the service gathers the figures (the days' shard
//! counts, DescribeTable's settings, the recorded hot keys, the alarms) and
//! hands them in; nothing here reads a store.
//!
//! The checks:
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

use crate::model::{
    Figure, Fix, Readiness, ReadinessCheck, Rehearsal, RehearsalFigures, RehearsalState, SalePlan, Verdict,
};
use crate::server::capacity::planner::{self, DEFAULT_HEADROOM, MAX_SHARDS, PlanInput, Prewarm};
use crate::server::capacity::schedule::{self, Schedule};
use crate::server::deploy::template::{self, CONSUMER_BATCH_SIZE, CONSUMER_BATCH_WINDOW_SECONDS, Setting, TableRole};
use crate::server::rules::PARTITION_WRITE_UNITS;
use crate::server::store::autoscaling::write_target;
use crate::server::store::usage::ReadWrite;
use crate::server::store::{Alarm, ScalableTarget, ScheduledAction, ThroughputSettings, shard_count};
use chrono::{DateTime, Duration, NaiveDate, Timelike, Utc};

/// Stream records each order makes during a sale: its creation, and its
/// move out of PENDING (the planner's two changes).
pub const RECORDS_PER_ORDER: f64 = 2.0;
/// Bytes one counter attribute takes, about: a name such as `c1015` or
/// `m05s3` (5 or 6 bytes) and a small number (2 or 3).
pub const COUNTER_ATTRIBUTE_BYTES: u64 = 8;
/// Counter attributes per minute of the day in the minutes item: created,
/// entered and left PENDING.
const MINUTE_ATTRIBUTES: u64 = 3;
/// A minute of recorded GSI1 writes below this many units is too quiet to
/// scale a key's share from.
pub const MIN_SCALED_MINUTE_UNITS: f64 = 20.0;

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

/// The shard count the sale's peak needs (the planner's).
pub fn shards_needed(plan: &SalePlan, gsi2_entry_bytes: u32) -> Result<u32, planner::PlanError> {
    let shard_plan = planner::plan(&PlanInput::for_app(plan.peak_orders_per_second, gsi2_entry_bytes))?;
    Ok(shard_plan.shards)
}

/// What `write-shards` writes for a sale day: what the peak needs, never
/// fewer than the server's own `--shards` (a sale does not lower the
/// count chosen for ordinary days).
pub fn shards_to_write(needed: u32, configured: u32) -> u32 {
    needed.max(configured).min(MAX_SHARDS)
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

fn shards_check(inputs: &Inputs<'_>, shard_plan: &Result<planner::Plan, planner::PlanError>) -> ReadinessCheck {
    const ID: &str = "shards";
    const TITLE: &str = "GSI2 write shards";
    let plan = inputs.plan;
    let shard_plan = match shard_plan {
        Ok(p) => p,
        Err(err) => {
            let reason = format!("the planner cannot size this peak: {err}");
            return check(ID, TITLE, Verdict::NoGo, reason, vec![], Some(fix_text("correct the plan's peak")));
        }
    };
    let needed = shard_plan.shards;
    let mut figures = vec![
        figure("GSI2 write units a second at the peak", num(shard_plan.wcu_per_second_at_peak.ceil())),
        figure("shards needed (planner)", needed.to_string()),
    ];
    if shard_plan.capped {
        let reason = format!(
            "the peak of {} orders a second needs more than the {MAX_SHARDS} shards a day may have",
            num(plan.peak_orders_per_second)
        );
        let most = max_peak_at(MAX_SHARDS, shard_plan, plan.peak_orders_per_second);
        let fix = fix_text(format!("plan a peak of at most {} orders a second", num(most.floor())));
        return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(fix));
    }
    let (mut low, mut unwritten) = (Vec::new(), Vec::new());
    for (day, recorded) in inputs.recorded {
        match recorded {
            Some(n) => {
                figures.push(figure(format!("recorded count of {day}"), n.to_string()));
                if *n < needed {
                    low.push((*day, *n));
                }
            }
            None => {
                figures.push(figure(
                    format!("recorded count of {day}"),
                    format!(
                        "not written: the configured {} (every writer's count for a day with no record)",
                        inputs.configured_shards
                    ),
                ));
                unwritten.push(*day);
            }
        }
    }
    if let Some((day, n)) = low.first() {
        let most = max_peak_at(*n, shard_plan, plan.peak_orders_per_second);
        let reason = format!(
            "{day} is written with {n} shards, under the {needed} the peak needs, and a day's count never \
             changes once written"
        );
        let fix = fix_text(format!(
            "move the sale to a day whose count is not written yet, or plan a peak of at most {} orders a second",
            num(most.floor())
        ));
        return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(fix));
    }
    if !unwritten.is_empty() {
        let days = unwritten.iter().map(NaiveDate::to_string).collect::<Vec<_>>().join(", ");
        // Unwritten, a day has the configured count (`store::shard_count`):
        // too few is a no-go unless written ahead; enough is ready, and
        // `serve` records it two days ahead.
        if inputs.configured_shards < needed {
            let reason = format!(
                "the shard count of {days} is not written, so it is the configured {}, under the {needed} the \
                 peak needs",
                inputs.configured_shards
            );
            let write = shards_to_write(needed, inputs.configured_shards);
            let fix = Fix {
                text: format!("write {write} as the shard count of {days} now, ahead of the sale's first order"),
                command: Some(format!("northwind-ops ready --plan {} --write-shards", shell_quote(&plan.name))),
                parameter: None,
                action: Some("write-shards".into()),
            };
            return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(fix));
        }
        let reason = format!(
            "{days} not written yet: the configured {} shards, at least the {needed} the peak needs (serve \
             records each day's count two days ahead)",
            inputs.configured_shards
        );
        return check(ID, TITLE, Verdict::Ready, reason, figures, None);
    }
    let reason = format!("every sale day is written with at least the {needed} shards the peak needs");
    check(ID, TITLE, Verdict::Ready, reason, figures, None)
}

/// The shard count the sale's days will have: the lowest recorded; with
/// none recorded, the configured count (`store::shard_count`) when it is
/// enough, else what `write-shards` would write. A rehearsal tries this
/// design.
pub fn design_shards(recorded: &[(NaiveDate, Option<u32>)], needed: u32, configured: u32) -> u32 {
    recorded.iter().filter_map(|(_, n)| *n).min().unwrap_or_else(|| {
        let unwritten = shard_count::day_count(None, configured);
        if unwritten >= needed { unwritten } else { shards_to_write(needed, configured) }
    })
}

/// The share of its target rate a rehearsal must reach to say anything:
/// under it, the machine that ran it fell short, not the design.
pub const REHEARSAL_MIN_ACHIEVED: f64 = 0.75;

/// A rehearsal's verdict from its figures: throttled attempts, failed
/// writes or an unreadable dashboard are a no-go; a run that fell short
/// of its target rate without any of those says nothing (act: run again
/// on a quieter machine); else the design held.
pub fn rehearsal_verdict(figures: &RehearsalFigures) -> (Verdict, String) {
    if figures.throttled > 0 {
        let reasons = figures
            .throttles
            .iter()
            .map(|t| format!("{} {} on {}", t.total, t.reason, t.place))
            .collect::<Vec<_>>()
            .join(", ");
        return (Verdict::NoGo, format!("{} attempts were throttled ({reasons})", figures.throttled));
    }
    if figures.failed > 0 {
        return (Verdict::NoGo, format!("{} orders failed to be written", figures.failed));
    }
    if !figures.dashboard_readable {
        let why = format!(
            "{} of {} reads failed",
            figures.dashboard_failed,
            figures.dashboard_answered + figures.dashboard_failed
        );
        return (Verdict::NoGo, format!("the PENDING dashboard did not stay readable ({why})"));
    }
    let target = figures.target_orders_per_second.unwrap_or(0.0);
    if figures.achieved_orders_per_second < target * REHEARSAL_MIN_ACHIEVED {
        return (
            Verdict::Act,
            format!(
                "inconclusive: the run reached {} of its {} orders a second (the machine fell short, nothing \
                 throttled)",
                num(figures.achieved_orders_per_second),
                num(target)
            ),
        );
    }
    (
        Verdict::Ready,
        format!(
            "held: {} of {} orders a second, nothing throttled, the dashboard readable",
            num(figures.achieved_orders_per_second),
            num(target)
        ),
    )
}

fn rehearsal_check(inputs: &Inputs<'_>, shard_plan: &Result<planner::Plan, planner::PlanError>) -> ReadinessCheck {
    const ID: &str = "rehearsal";
    const TITLE: &str = "Rehearsal through the throttle proxy";
    let plan = inputs.plan;
    let design = shard_plan.as_ref().ok().map(|p| design_shards(inputs.recorded, p.shards, inputs.configured_shards));
    let run = Fix {
        text: "run the rehearsal: the plan's shape, scaled down, through the throttle proxy".into(),
        command: Some(format!("northwind-ops ready --plan {} --rehearse", shell_quote(&plan.name))),
        parameter: None,
        action: Some("rehearse".into()),
    };
    let mut figures = vec![];
    if inputs.rehearsal_running {
        figures.push(figure("rehearsal", "running now"));
    }
    let Some(last) = inputs.rehearsal else {
        let reason = if inputs.rehearsal_running {
            "the first rehearsal is running: check again when it is done".to_string()
        } else {
            "the plan was never rehearsed".to_string()
        };
        return check(ID, TITLE, Verdict::Act, reason, figures, (!inputs.rehearsal_running).then_some(run));
    };
    let shape = &last.shape;
    figures.push(figure("last run", format!("{} UTC by {}", last.started_at.format("%Y-%m-%d %H:%M"), last.by)));
    figures.push(figure(
        "shape rehearsed",
        format!(
            "{} orders a second at the peak with {} shard(s), partition limits × {}",
            num(shape.peak_orders_per_second),
            shape.shards,
            shape.scale
        ),
    ));
    if let Some(f) = &last.figures {
        figures.push(figure(
            "orders a second: target (mean) → achieved",
            format!("{} → {}", num(f.target_orders_per_second.unwrap_or(0.0)), num(f.achieved_orders_per_second)),
        ));
        figures.push(figure("attempts throttled", f.throttled.to_string()));
        figures.push(figure(
            "write p99",
            f.write_p99_ms.map_or("none written".into(), |ms| format!("{} ms", num(ms.round()))),
        ));
        figures.push(figure("dashboard stayed readable", if f.dashboard_readable { "yes" } else { "no" }));
    }
    if last.state == RehearsalState::Failed {
        let reason = format!("the last rehearsal failed to run: {}", last.reason);
        return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(run));
    }
    if last.plan_updated_at != plan.updated_at {
        let reason = "the plan changed since its last rehearsal".to_string();
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(run));
    }
    if design.is_some_and(|d| d != shape.shards) {
        let reason = format!(
            "the last rehearsal tried {} shard(s); the sale's days will have {}",
            shape.shards,
            design.unwrap_or_default()
        );
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(run));
    }
    let verdict = last.verdict.unwrap_or(Verdict::Act);
    let reason = format!("the last rehearsal, at {} shard(s): {}", shape.shards, last.reason);
    let fix = match verdict {
        Verdict::Ready => None,
        Verdict::Act => Some(run),
        Verdict::NoGo => Some(fix_text(
            "give the sale's days the shards the peak needs (the shards check), or plan a lower peak; then run \
             the rehearsal again",
        )),
    };
    check(ID, TITLE, verdict, reason, figures, fix)
}

/// The peak `shards` shards hold, at the plan's write units an order.
fn max_peak_at(shards: u32, shard_plan: &planner::Plan, peak: f64) -> f64 {
    let per_order = shard_plan.wcu_per_second_at_peak / peak.max(f64::MIN_POSITIVE);
    f64::from(shards) * shard_plan.per_partition_budget / per_order.max(f64::MIN_POSITIVE)
}

/// A plan name as one shell word.
fn shell_quote(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        name.to_string()
    } else {
        format!("'{}'", name.replace('\'', "'\\''"))
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

fn warm_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "warm-throughput";
    const TITLE: &str = "Warm throughput and capacity";
    let Some(prewarm) = prewarm else {
        return check(ID, TITLE, Verdict::NoGo, "the planner cannot size this peak".into(), vec![], None);
    };
    let Some(settings) = inputs.throughput else {
        let reason = "unknown: DescribeTable could not be read".to_string();
        let fix = fix_text("run `northwind-ops provision` (the tables must exist) and check again");
        return check(ID, TITLE, Verdict::Act, reason, vec![], Some(fix));
    };
    let mut figures = Vec::new();
    let (mut verdict, mut reasons, mut overrides, mut commands) = (Verdict::Ready, Vec::new(), Vec::new(), Vec::new());
    for need in prewarm {
        let (resource, prefix, index) = resource_of(inputs, need);
        let needed = need.write_units_per_second.ceil();
        figures.push(figure(format!("{resource}: write units a second at the peak"), num(needed)));
        let Some(found) = settings.iter().find(|s| s.resource == resource) else {
            figures.push(figure(format!("{resource}: settings"), "unknown (not described)"));
            verdict = verdict.max(Verdict::Act);
            reasons.push(format!("{resource} is not described"));
            continue;
        };
        let provisioned = found.billing_mode.as_deref() == Some("PROVISIONED");
        match found.warm_write_units {
            Some(warm) => figures.push(figure(format!("{resource}: warm write units a second"), warm.to_string())),
            None if inputs.on_aws => {
                figures.push(figure(format!("{resource}: warm write units a second"), "unknown (not reported)"));
            }
            None => figures.push(figure(
                format!("{resource}: warm write units a second"),
                "unknown (this engine does not report warm throughput; it never throttles)",
            )),
        }
        if provisioned {
            let capacity = found.provisioned_write_units;
            figures.push(figure(
                format!("{resource}: provisioned write units"),
                capacity.map_or("unknown".into(), |c| c.to_string()),
            ));
            let below = capacity.is_none_or(|c| (c as f64) < needed);
            if below && inputs.autoscaling.target(&resource).is_some() {
                // Auto scaling is to raise it: its own check weighs how.
                figures.push(figure(
                    format!("{resource}: capacity at the peak"),
                    "auto scaling's to raise (the auto scaling check weighs its maximum and floor)",
                ));
            } else if below {
                verdict = verdict.max(Verdict::Act);
                reasons.push(format!("{resource} is provisioned under the peak's {} write units", num(needed)));
                let min = template::parameter(&prefix, Setting::Min, ReadWrite::Write);
                let max = template::parameter(&prefix, Setting::Max, ReadWrite::Write);
                overrides.push(format!("{min}={}", num(needed)));
                overrides.push(format!("{max}={}", num(needed * 2.0)));
            }
            continue;
        }
        match found.on_demand_max_write_units {
            Some(max) if (max as f64) < needed => {
                figures.push(figure(format!("{resource}: on-demand maximum write units"), max.to_string()));
                verdict = verdict.max(Verdict::NoGo);
                reasons.push(format!("{resource}'s on-demand maximum of {max} is under the peak's {}", num(needed)));
                let name = template::parameter(&prefix, Setting::OnDemandMax, ReadWrite::Write);
                overrides.push(format!("{name}={}", num(needed * f64::from(planner::ON_DEMAND_MAX_HEADROOM))));
                commands.push(update_table(
                    inputs,
                    &resource,
                    index,
                    "OnDemandThroughput",
                    "MaxWriteRequestUnits",
                    needed * 2.0,
                ));
            }
            Some(max) => figures.push(figure(format!("{resource}: on-demand maximum write units"), max.to_string())),
            None => figures.push(figure(format!("{resource}: on-demand maximum write units"), "none set")),
        }
        match found.warm_write_units {
            Some(warm) if (warm as f64) < needed => {
                verdict = verdict.max(Verdict::Act);
                reasons.push(format!("{resource} is warm for {warm} write units a second, under {}", num(needed)));
                overrides.push(format!(
                    "{}={}",
                    template::parameter(&prefix, Setting::Warm, ReadWrite::Write),
                    num(needed)
                ));
                commands.push(update_table(inputs, &resource, index, "WarmThroughput", "WriteUnitsPerSecond", needed));
            }
            None if inputs.on_aws => {
                verdict = verdict.max(Verdict::Act);
                reasons.push(format!("{resource}'s warm throughput is unknown"));
            }
            _ => {}
        }
    }
    if !inputs.on_aws {
        // Its settings are reported, but nothing there limits a write.
        let reason = "not limiting here: a local engine never throttles (and reports no warm throughput: \
                      unknown); on AWS this check weighs the figures above"
            .to_string();
        return check(ID, TITLE, Verdict::Ready, reason, figures, None);
    }
    if verdict == Verdict::Ready {
        let reason = "every table and index takes the peak's write units at once".to_string();
        return check(ID, TITLE, verdict, reason, figures, None);
    }
    let fix = (!overrides.is_empty()).then(|| Fix {
        text: "set these template parameters and deploy (warm throughput is charged once when raised, and \
               cannot be lowered again; raise it a day ahead), or run the commands"
            .into(),
        command: (!commands.is_empty()).then(|| commands.join(" && ")),
        parameter: Some(overrides.join(" ")),
        action: None,
    });
    let fix = fix.or_else(|| Some(fix_text("check each table's settings with `aws dynamodb describe-table`")));
    check(ID, TITLE, verdict, reasons.join("; "), figures, fix)
}

/// A scheduled action and when it runs, or why that was not read.
type ReadAction<'a> = (&'a ScheduledAction, Result<Schedule, String>);

/// The last time `action` runs in `(after, until]`, within its own start
/// and end.
fn last_run(
    action: &ScheduledAction,
    schedule: &Schedule,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let after = action.start.map_or(after, |start| after.max(start - Duration::seconds(1)));
    let until = action.end.map_or(until, |end| until.min(end));
    if until <= after {
        return None;
    }
    schedule.last_run(after, until)
}

/// What a setting (`pick`: the minimum or the maximum) is at `at`: set by
/// the last scheduled action to run after `now`, else what it is now; and
/// the action and time that set it.
fn setting_at<'a>(
    actions: &[ReadAction<'a>],
    pick: fn(&ScheduledAction) -> Option<i32>,
    now_value: i32,
    now: DateTime<Utc>,
    at: DateTime<Utc>,
) -> (i32, Option<(&'a ScheduledAction, DateTime<Utc>)>) {
    let last = actions
        .iter()
        .filter_map(|(action, schedule)| {
            let value = pick(action)?;
            let ran = last_run(action, schedule.as_ref().ok()?, now, at)?;
            Some((ran, value, *action))
        })
        .max_by_key(|(ran, _, _)| *ran);
    match last {
        Some((ran, value, action)) => (value, Some((action, ran))),
        None => (now_value, None),
    }
}

/// The first scheduled action that sets `pick` under `needed` in
/// `(after, until]`, and when.
fn lowered_in<'a>(
    actions: &[ReadAction<'a>],
    pick: fn(&ScheduledAction) -> Option<i32>,
    needed: f64,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<(&'a ScheduledAction, i32, DateTime<Utc>)> {
    actions
        .iter()
        .filter_map(|(action, schedule)| {
            let value = pick(action).filter(|v| f64::from(*v) < needed)?;
            Some((*action, value, last_run(action, schedule.as_ref().ok()?, after, until)?))
        })
        .min_by_key(|(_, _, ran)| *ran)
}

/// "N (now)" or "N (scheduled action X at T)".
fn set_by(value: i32, by: Option<(&ScheduledAction, DateTime<Utc>)>) -> String {
    match by {
        Some((action, at)) => {
            format!("{value} (set by scheduled action {} at {} UTC)", action.name, at.format("%Y-%m-%d %H:%M"))
        }
        None => format!("{value} (now)"),
    }
}

/// A name as a scheduled action's: letters, digits, `-`, `_` and `.`.
fn action_name(plan: &str, resource: &str, what: &str) -> String {
    let slug = |text: &str| -> String {
        text.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect()
    };
    format!("sale-{}-{}-{what}", slug(plan), slug(resource))
}

fn put_scheduled_action(resource_id: &str, dimension: &str, name: &str, schedule: &str, min: f64) -> String {
    format!(
        "aws application-autoscaling put-scheduled-action --service-namespace dynamodb --resource-id {resource_id} \
         --scalable-dimension {dimension} --scheduled-action-name {name} --schedule '{schedule}' --timezone Etc/UTC \
         --scalable-target-action MinCapacity={}",
        num(min.ceil())
    )
}

fn register_scalable_target(resource_id: &str, dimension: &str, min: Option<f64>, max: f64) -> String {
    let min = min.map_or(String::new(), |m| format!(" --min-capacity {}", num(m.ceil())));
    format!(
        "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id {resource_id} \
         --scalable-dimension {dimension}{min} --max-capacity {}",
        num(max.ceil())
    )
}

/// What the auto scaling check found wrong, and how to put it right.
#[derive(Default)]
struct ScalingFixes {
    reasons: Vec<String>,
    parameters: Vec<String>,
    commands: Vec<String>,
    /// Whether a maximum is to be raised, and a floor scheduled.
    max: bool,
    floor: bool,
}

fn auto_scaling_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "auto-scaling";
    const TITLE: &str = "Auto scaling maximum and scheduled floor (provisioned)";
    let Some(prewarm) = prewarm else {
        return check(ID, TITLE, Verdict::NoGo, "the planner cannot size this peak".into(), vec![], None);
    };
    let Some(settings) = inputs.throughput else {
        let reason = "unknown: DescribeTable could not be read".to_string();
        let fix = fix_text("run `northwind-ops provision` (the tables must exist) and check again");
        return check(ID, TITLE, Verdict::Act, reason, vec![], Some(fix));
    };
    let provisioned: Vec<(&Prewarm, &ThroughputSettings)> = prewarm
        .iter()
        .filter_map(|need| {
            let (resource, _, _) = resource_of(inputs, need);
            let found = settings.iter().find(|s| s.resource == resource)?;
            (found.billing_mode.as_deref() == Some("PROVISIONED")).then_some((need, found))
        })
        .collect();
    if provisioned.is_empty() {
        let reason = "not applicable: every table and index is on demand (auto scaling moves provisioned capacity)";
        return check(
            ID,
            TITLE,
            Verdict::Ready,
            reason.into(),
            vec![figure("provisioned tables and indexes", "none")],
            None,
        );
    }
    let targets = match inputs.autoscaling {
        AutoScaling::Read(targets) => targets,
        AutoScaling::NotRead => {
            let figures = provisioned
                .iter()
                .flat_map(|(_, found)| {
                    ["auto scaling maximum", "scheduled floor before the start"]
                        .map(|what| figure(format!("{}: {what}", found.resource), "unknown (not on AWS)"))
                })
                .collect();
            if !inputs.on_aws {
                let reason = "not limiting here: a local engine has no auto scaling and never throttles; on AWS \
                              this check reads Application Auto Scaling"
                    .to_string();
                return check(ID, TITLE, Verdict::Ready, reason, figures, None);
            }
            let reason = "unknown: Application Auto Scaling was not read".to_string();
            return check(ID, TITLE, Verdict::Act, reason, figures, Some(describe_targets_fix()));
        }
        AutoScaling::Failed(err) => {
            let reason = format!("unknown: Application Auto Scaling could not be read: {err}");
            let figures = vec![figure("auto scaling", "unknown (not read)")];
            return check(ID, TITLE, Verdict::Act, reason, figures, Some(describe_targets_fix()));
        }
    };
    let mut figures = Vec::new();
    let mut fixes = ScalingFixes::default();
    for (need, found) in provisioned {
        let (resource, prefix, index) = resource_of(inputs, need);
        let needed = need.write_units_per_second.ceil();
        figures.push(figure(format!("{resource}: write units a second at the peak"), num(needed)));
        match targets.iter().find(|t| t.resource == resource) {
            Some(target) => weigh_target(inputs, target, &prefix, needed, &mut figures, &mut fixes),
            None => {
                let capacity = found.provisioned_write_units.unwrap_or(0);
                figures.push(figure(
                    format!("{resource}: scalable target"),
                    format!("none: the capacity is fixed at {capacity} write units"),
                ));
                if (capacity as f64) < needed {
                    fixes.reasons.push(format!(
                        "{resource} has no scalable target: its capacity stays at {capacity}, under the peak's {}",
                        num(needed)
                    ));
                    let table = resource.split('/').next().unwrap_or(inputs.orders_table);
                    let (resource_id, dimension) = write_target(table, index);
                    let named = Named {
                        resource: &resource,
                        resource_id: &resource_id,
                        dimension: &dimension,
                        prefix: &prefix,
                    };
                    let fixed = capacity.max(1) as f64;
                    fixes.raise_max(&named, needed, Some(fixed));
                    fixes.raise_floor(inputs.plan, &named, needed, fixed);
                }
            }
        }
    }
    if fixes.reasons.is_empty() {
        let reason = format!(
            "auto scaling may reach each provisioned table's and index's peak, and its minimum is raised to it at \
             least {FLOOR_LEAD_MINUTES} minutes before the start"
        );
        return check(ID, TITLE, Verdict::Ready, reason, figures, None);
    }
    let what = match (fixes.max, fixes.floor) {
        (true, true) => {
            "raise auto scaling's maximum over the peak, and schedule its minimum up to the peak before \
                         the start and back at the end"
        }
        (true, false) => "raise auto scaling's maximum over the peak",
        _ => "schedule auto scaling's minimum up to the peak before the start and back at the end",
    };
    let mut text = format!("{what}: set these template parameters and deploy, or run the commands");
    if fixes.floor {
        text.push_str(&format!(
            ". The raise runs {FLOOR_LEAD_MINUTES} minutes ahead: a scheduled action runs a minute or two after its \
             time and DynamoDB takes minutes to raise provisioned capacity, while auto scaling alone follows a ramp \
             only after two minutes over its target. The template's BatchRaiseSchedule and BatchLowerSchedule are \
             shared by every table and index and by the month-end batch: use them for the sale only when no batch \
             falls in between, else the commands"
        ));
    }
    let fix = Fix {
        text,
        command: (!fixes.commands.is_empty()).then(|| fixes.commands.join(" && ")),
        parameter: (!fixes.parameters.is_empty()).then(|| fixes.parameters.join(" ")),
        action: None,
    };
    check(ID, TITLE, Verdict::Act, fixes.reasons.join("; "), figures, Some(fix))
}

fn describe_targets_fix() -> Fix {
    Fix {
        text: "grant the server's role application-autoscaling:DescribeScalableTargets and \
               application-autoscaling:DescribeScheduledActions (docs/iam/serve.json), or list them yourself"
            .into(),
        command: Some("aws application-autoscaling describe-scalable-targets --service-namespace dynamodb".into()),
        parameter: None,
        action: None,
    }
}

/// A scalable target's maximum and minimum over the sale, from `FLOOR_LEAD_MINUTES`
/// before its start to its end, against `needed`.
fn weigh_target(
    inputs: &Inputs<'_>,
    target: &ScalableTarget,
    prefix: &str,
    needed: f64,
    figures: &mut Vec<Figure>,
    fixes: &mut ScalingFixes,
) {
    let resource = &target.resource;
    let named = Named { resource, resource_id: &target.resource_id, dimension: &target.dimension, prefix };
    let plan = inputs.plan;
    let raise_by = plan.start - Duration::minutes(FLOOR_LEAD_MINUTES);
    let end = plan.end();
    let actions: Vec<ReadAction<'_>> =
        target.actions.iter().map(|a| (a, schedule::parse(&a.schedule, a.timezone.as_deref()))).collect();
    for (action, read) in &actions {
        if let Err(why) = read {
            figures.push(figure(format!("{resource}: scheduled action {}", action.name), format!("not read: {why}")));
        }
    }
    let min_of = |a: &ScheduledAction| a.min;
    let max_of = |a: &ScheduledAction| a.max;
    // The maximum: what it is when the sale starts, unless lowered before its end.
    let (max, max_by) = setting_at(&actions, max_of, target.max, inputs.now, raise_by);
    figures.push(figure(format!("{resource}: auto scaling maximum"), set_by(max, max_by)));
    let max_lowered = lowered_in(&actions, max_of, needed, raise_by, end);
    if f64::from(max) < needed || max_lowered.is_some() {
        let reason = match max_lowered {
            Some((action, value, at)) if f64::from(max) >= needed => format!(
                "scheduled action {} sets {resource}'s auto scaling maximum to {value} at {} UTC, during the sale \
                 (the peak needs {})",
                action.name,
                at.format("%Y-%m-%d %H:%M"),
                num(needed)
            ),
            _ => format!("{resource}'s auto scaling maximum is {max}, under the peak's {}", num(needed)),
        };
        fixes.reasons.push(reason);
        fixes.raise_max(&named, needed, None);
    }
    // The minimum: raised to the peak by `raise_by`, and kept there to the end.
    let (floor, floor_by) = setting_at(&actions, min_of, target.min, inputs.now, raise_by);
    figures.push(figure(
        format!(
            "{resource}: auto scaling minimum {FLOOR_LEAD_MINUTES} minutes before the start ({} UTC)",
            raise_by.format("%Y-%m-%d %H:%M")
        ),
        set_by(floor, floor_by),
    ));
    let lowered = lowered_in(&actions, min_of, needed, raise_by, end);
    if f64::from(floor) >= needed && lowered.is_none() {
        return;
    }
    let (at_start, start_by) = setting_at(&actions, min_of, target.min, inputs.now, plan.start);
    let reason = match (lowered, start_by) {
        (Some((action, value, at)), _) if f64::from(floor) >= needed => format!(
            "scheduled action {} lowers {resource}'s minimum to {value} at {} UTC, before the sale's end",
            action.name,
            at.format("%Y-%m-%d %H:%M")
        ),
        (_, Some((action, at))) if f64::from(at_start) >= needed => format!(
            "scheduled action {} raises {resource}'s minimum to {at_start} at {} UTC, less than {FLOOR_LEAD_MINUTES} \
             minutes before the start",
            action.name,
            at.format("%Y-%m-%d %H:%M")
        ),
        _ => format!(
            "no scheduled action raises {resource}'s minimum ({floor}) to the peak's {} before the start",
            num(needed)
        ),
    };
    fixes.reasons.push(reason);
    fixes.raise_floor(plan, &named, needed, f64::from(target.min));
}

/// A provisioned table or index as its fixes name it: in the readiness
/// figures, to Application Auto Scaling, and in the template.
struct Named<'a> {
    resource: &'a str,
    resource_id: &'a str,
    dimension: &'a str,
    prefix: &'a str,
}

impl ScalingFixes {
    /// Auto scaling's maximum at twice the peak (as the warm check's
    /// `…WriteMax`); registering a new target sets its minimum too.
    fn raise_max(&mut self, named: &Named<'_>, needed: f64, min: Option<f64>) {
        let max = needed * 2.0;
        self.max = true;
        self.parameters.push(format!(
            "{}={}",
            template::parameter(named.prefix, Setting::Max, ReadWrite::Write),
            num(max)
        ));
        self.commands.push(register_scalable_target(named.resource_id, named.dimension, min, max));
    }

    /// The floor raised to the peak `FLOOR_LEAD_MINUTES` before the start
    /// and set back to `restore` at the end: the two scheduled actions, and
    /// the template's batch floor with its (shared) schedules.
    fn raise_floor(&mut self, plan: &SalePlan, named: &Named<'_>, needed: f64, restore: f64) {
        let (raise, lower) =
            (schedule::at(plan.start - Duration::minutes(FLOOR_LEAD_MINUTES)), schedule::at(plan.end()));
        let name = |what| action_name(&plan.name, named.resource, what);
        self.commands.push(put_scheduled_action(named.resource_id, named.dimension, &name("raise"), &raise, needed));
        self.commands.push(put_scheduled_action(named.resource_id, named.dimension, &name("lower"), &lower, restore));
        let batch_min = template::parameter(named.prefix, Setting::BatchMin, ReadWrite::Write);
        self.parameters.push(format!("{batch_min}={}", num(needed)));
        if !self.floor {
            self.parameters.push(format!("'{}={raise}'", template::BATCH_RAISE_SCHEDULE));
            self.parameters.push(format!("'{}={lower}'", template::BATCH_LOWER_SCHEDULE));
        }
        self.floor = true;
    }
}

/// The `aws dynamodb update-table` that sets `field.key` on a table or index.
fn update_table(
    inputs: &Inputs<'_>,
    resource: &str,
    index: Option<&str>,
    field: &str,
    key: &str,
    value: f64,
) -> String {
    let table = resource.split('/').next().unwrap_or(inputs.orders_table);
    let value = num(value.ceil());
    let option = field.chars().fold(String::new(), |mut out, c| {
        if c.is_ascii_uppercase() && !out.is_empty() {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
        out
    });
    match index {
        None => format!("aws dynamodb update-table --table-name {table} --{option} {key}={value}"),
        Some(index) => format!(
            "aws dynamodb update-table --table-name {table} --global-secondary-index-updates \
             '[{{\"Update\":{{\"IndexName\":\"{index}\",\"{field}\":{{\"{key}\":{value}}}}}}}]'"
        ),
    }
}

/// The stream's shards at the peak: at least today's, and at least one per
/// 1,000 write units a second on the table (a stream shard per partition).
fn stream_shards_at_peak(inputs: &Inputs<'_>, prewarm: &[Prewarm]) -> u32 {
    let table = prewarm.iter().find(|p| p.resource == "table").map_or(0.0, |p| p.write_units_per_second);
    let by_partitions = (table / PARTITION_WRITE_UNITS).ceil().max(1.0) as u32;
    by_partitions.max(inputs.stream_shards.unwrap_or(1))
}

fn counters_check(
    inputs: &Inputs<'_>,
    prewarm: Option<&[Prewarm]>,
    shard_plan: &Result<planner::Plan, planner::PlanError>,
) -> ReadinessCheck {
    const ID: &str = "counters";
    const TITLE: &str = "Counter items at the peak";
    let (Some(prewarm), Ok(shard_plan)) = (prewarm, shard_plan) else {
        return check(ID, TITLE, Verdict::NoGo, "the planner cannot size this peak".into(), vec![], None);
    };
    let plan = inputs.plan;
    let records = plan.peak_orders_per_second * RECORDS_PER_ORDER;
    let shards = stream_shards_at_peak(inputs, prewarm);
    // The consumer (the template's Lambda form) commits a batch of up to
    // BATCH_SIZE records a shard, waiting up to the batching window: each
    // commit is one transaction that updates each of the day's counter items.
    let batch = f64::from(CONSUMER_BATCH_SIZE);
    let window = f64::from(CONSUMER_BATCH_WINDOW_SECONDS.max(1));
    let commits = (f64::from(shards) / window).max(records / batch);
    // The minutes item grows all day (3 attributes a minute); the hour's heat
    // item holds a minute per shard. Each update is billed on the item's
    // size, twice in a transaction.
    let end = plan.end();
    let minute_of_day = u64::from(end.hour() * 60 + end.minute()) + 1;
    let minutes_bytes = minute_of_day * MINUTE_ATTRIBUTES * COUNTER_ATTRIBUTE_BYTES;
    let heat_bytes = 60 * u64::from(shard_plan.shards) * COUNTER_ATTRIBUTE_BYTES;
    let largest = minutes_bytes.max(heat_bytes);
    let units_per_update = 2.0 * largest.div_ceil(1024).max(1) as f64;
    let rate = commits * units_per_update;
    let figures = vec![
        figure("stream records a second at the peak", num(records)),
        figure("stream shards at the peak (at least)", shards.to_string()),
        figure("counter commits a second (each counter item updated once per commit)", num(commits)),
        figure(
            format!("minutes item at {} UTC, about", end.format("%H:%M")),
            format!("{} KB", minutes_bytes.div_ceil(1024)),
        ),
        figure("hour's heat item, about", format!("{} KB", heat_bytes.div_ceil(1024))),
        figure("write units per update (larger item, transaction ×2)", num(units_per_update)),
        figure("write units a second on the busiest counter item", num(rate)),
        figure("one partition's limit", num(PARTITION_WRITE_UNITS)),
    ];
    let verdict = against_partition(rate);
    let reason = match verdict {
        Verdict::Ready => format!("the busiest counter item takes about {} write units a second", num(rate)),
        _ => format!(
            "the busiest counter item would take about {} write units a second, against a partition's {} \
             (budget {} with headroom)",
            num(rate),
            num(PARTITION_WRITE_UNITS),
            num(partition_budget().floor())
        ),
    };
    let fix = (verdict != Verdict::Ready).then(|| Fix {
        text: "rehearse the counters at this peak and time of day through the throttle proxy; if they throttle, \
               move the sale earlier in the day (the minutes item is smaller) or lower the peak"
            .into(),
        command: Some(format!(
            "northwind-ops rehearse --counters --peak {} --scale 1.0 --days {}",
            num(plan.peak_orders_per_second),
            if end.hour() >= 12 { "end" } else { "start" }
        )),
        parameter: None,
        action: None,
    });
    check(ID, TITLE, verdict, reason, figures, fix)
}

fn consumer_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "consumer";
    const TITLE: &str = "Stream consumer";
    let plan = inputs.plan;
    let needed = plan.peak_orders_per_second * RECORDS_PER_ORDER;
    let shards = prewarm.map_or(1, |p| stream_shards_at_peak(inputs, p));
    let mut figures = vec![figure("stream records a second at the peak", num(needed))];
    let measure = Fix {
        text: "measure what the consumer applies at this peak, then record it on the plan \
               (consumerRecordsPerSecond)"
            .into(),
        command: Some(format!(
            "northwind-ops rehearse --counters --peak {} --scale 1.0",
            num(plan.peak_orders_per_second)
        )),
        parameter: None,
        action: None,
    };
    let Some(measured) = plan.consumer_records_per_second else {
        figures.push(figure("records a second the consumer applies (measured)", "unknown: never measured"));
        let reason = "unknown: the consumer's rate was never measured for this plan".to_string();
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(measure));
    };
    figures.push(figure("records a second the consumer applies (measured)", num(measured)));
    let headroom = needed * (1.0 + DEFAULT_HEADROOM);
    figures.push(figure("wanted, with headroom", num(headroom)));
    if measured < needed {
        let reason = format!(
            "the consumer applies {} records a second, under the peak's {}: the counters and the live \
             dashboard would fall behind",
            num(measured),
            num(needed)
        );
        let fix = Fix {
            text: format!("reserve at least one consumer per stream shard at the peak ({shards}) and measure again"),
            command: measure.command.clone(),
            parameter: Some(format!("ConsumerConcurrency={}", shards.max(10))),
            action: None,
        };
        return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(fix));
    }
    if measured < headroom {
        let reason = format!(
            "the consumer applies {} records a second: enough for the peak's {}, without the headroom of {}",
            num(measured),
            num(needed),
            num(headroom)
        );
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(measure));
    }
    let reason =
        format!("the consumer applies {} records a second, over {} with headroom", num(measured), num(headroom));
    check(ID, TITLE, Verdict::Ready, reason, figures, None)
}

fn hot_keys_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "hot-keys";
    const TITLE: &str = "Hot GSI1 keys";
    let gsi1 = prewarm.and_then(|p| p.iter().find(|p| p.resource == "GSI1")).map_or(0.0, |p| p.write_units_per_second);
    let days = inputs.hot_window_days;
    let mut figures = vec![
        figure("GSI1 write units a second at the peak", num(gsi1.ceil())),
        figure(
            format!("minutes observed by the stream consumer in the last {days} days"),
            inputs.observed_minutes.to_string(),
        ),
    ];
    if inputs.observed_minutes == 0 {
        let reason = format!("unknown: the stream consumer observed no minute in the last {days} days");
        let fix = fix_text("run the stream consumer (serve, consume or the Lambda) before the sale, then check again");
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(fix));
    }
    // Each key's busiest share of the index's writes in a minute, scaled to
    // the sale: a customer who kept that share would write that much.
    let mut worst: Vec<(String, f64, f64, DateTime<Utc>)> = Vec::new();
    for seen in inputs.hot.iter().filter(|h| h.index_units >= MIN_SCALED_MINUTE_UNITS && h.units > 0.0) {
        let share = (seen.units / seen.index_units).min(1.0);
        match worst.iter_mut().find(|w| w.0 == seen.key) {
            Some(w) if w.1 >= share => {}
            Some(w) => *w = (seen.key.clone(), share, share * gsi1, seen.at),
            None => worst.push((seen.key.clone(), share, share * gsi1, seen.at)),
        }
    }
    worst.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    worst.truncate(5);
    if worst.is_empty() {
        let reason = format!("no GSI1 key was hot in a busy minute of the last {days} days");
        return check(ID, TITLE, Verdict::Ready, reason, figures, None);
    }
    for (key, share, projected, at) in &worst {
        figures.push(figure(
            format!("{key} (busiest {} UTC)", at.format("%Y-%m-%d %H:%M")),
            format!(
                "{:.1}% of GSI1's writes; at the peak {} write units a second",
                share * 100.0,
                num(projected.ceil())
            ),
        ));
    }
    let (key, share, projected, _) = &worst[0];
    let verdict = against_partition(*projected);
    if verdict == Verdict::Ready {
        let reason = format!(
            "the hottest GSI1 key, {key}, would take {} write units a second at the peak",
            num(projected.ceil())
        );
        return check(ID, TITLE, verdict, reason, figures, None);
    }
    let customer = key.strip_prefix("CUSTOMER#").unwrap_or(key);
    let reason = format!(
        "{key} wrote {:.1}% of GSI1's writes in a busy minute: at the sale's peak that is {} write units a \
         second on one GSI1 partition (a partition takes {})",
        share * 100.0,
        num(projected.ceil()),
        num(PARTITION_WRITE_UNITS)
    );
    // What one order writes to its customer's GSI1 partition at the sale.
    let per_order = gsi1 / inputs.inputs_peak();
    let most = partition_budget() / per_order.max(f64::MIN_POSITIVE);
    let fix = fix_text(format!(
        "cap customer {customer}'s orders at the order API during the sale (at most {} a second keeps its \
         GSI1 partition within budget); a customer's key is one partition by design",
        num(most.floor().max(1.0))
    ));
    check(ID, TITLE, verdict, reason, figures, Some(fix))
}

fn alarms_check(inputs: &Inputs<'_>) -> ReadinessCheck {
    const ID: &str = "alarms";
    const TITLE: &str = "Alarms";
    if !inputs.on_aws {
        let reason = "not applicable: a local engine has no CloudWatch alarms".to_string();
        return check(ID, TITLE, Verdict::Ready, reason, vec![figure("alarms", "not applicable")], None);
    }
    let Some(alarms) = inputs.alarms else {
        let reason = "unknown: this server reads CloudWatch only with --capacity-source cloudwatch".to_string();
        let fix = Fix {
            text: "run serve (or this command) with --capacity-source cloudwatch, or list them yourself".into(),
            command: Some(format!("aws cloudwatch describe-alarms --alarm-name-prefix {}", inputs.orders_table)),
            parameter: None,
            action: None,
        };
        return check(ID, TITLE, Verdict::Act, reason, vec![figure("alarms", "unknown (not read)")], Some(fix));
    };
    let firing: Vec<&Alarm> = alarms.iter().filter(|a| a.state == "ALARM").collect();
    let mut figures = vec![figure("alarms on the tables", alarms.len().to_string())];
    figures.extend(firing.iter().map(|a| figure(a.name.clone(), a.state.clone())));
    if alarms.is_empty() {
        let reason = "no CloudWatch alarm watches the tables".to_string();
        let fix = Fix {
            text: "deploy the stack's template, which has alarms per table and index".into(),
            command: Some("northwind-ops template > template.json".into()),
            parameter: None,
            action: None,
        };
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(fix));
    }
    if !firing.is_empty() {
        let names = firing.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
        let reason = format!("{} alarm(s) firing now: {names}", firing.len());
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(fix_text("find and clear why before the sale")));
    }
    let reason = format!("{} alarms watch the tables, none firing", alarms.len());
    check(ID, TITLE, Verdict::Ready, reason, figures, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(peak: f64) -> SalePlan {
        SalePlan {
            name: "black-friday".into(),
            peak_orders_per_second: peak,
            start: "2026-11-27T09:00:00Z".parse().unwrap(),
            ramp_minutes: 10,
            hold_minutes: 30,
            decay_minutes: 20,
            item_bytes: 700,
            consumer_records_per_second: Some(peak * 4.0),
            updated_at: "2026-11-20T09:00:00Z".parse().unwrap(),
            updated_by: "alice".into(),
        }
    }

    fn settings(warm: Option<i64>) -> Vec<ThroughputSettings> {
        ["orders", "orders/GSI1", "orders/GSI2", "metrics"]
            .into_iter()
            .map(|resource| ThroughputSettings {
                resource: resource.into(),
                billing_mode: Some("PAY_PER_REQUEST".into()),
                warm_write_units: warm,
                ..Default::default()
            })
            .collect()
    }

    struct Case {
        plan: SalePlan,
        recorded: Vec<(NaiveDate, Option<u32>)>,
        throughput: Vec<ThroughputSettings>,
        hot: Vec<HotObservation>,
        on_aws: bool,
        alarms: Vec<Alarm>,
        /// The last rehearsal's verdict (at the sale days' shards), if run.
        rehearsed: Option<Verdict>,
        /// Application Auto Scaling's targets, when read.
        scaling: Option<Vec<ScalableTarget>>,
    }

    impl Case {
        fn new(peak: f64, recorded: Option<u32>) -> Self {
            let plan = plan(peak);
            let recorded = plan.days().into_iter().map(|d| (d, recorded)).collect();
            Case {
                plan,
                recorded,
                throughput: settings(None),
                hot: vec![],
                on_aws: false,
                alarms: vec![],
                rehearsed: Some(Verdict::Ready),
                scaling: None,
            }
        }

        fn rehearsal(&self) -> Option<Rehearsal> {
            let verdict = self.rehearsed?;
            let needed = shards_needed(&self.plan, 300).unwrap_or(1);
            Some(rehearsal(&self.plan, design_shards(&self.recorded, needed, 10), verdict))
        }

        fn assess(&self) -> Readiness {
            let rehearsal = self.rehearsal();
            assess(&Inputs {
                plan: &self.plan,
                now: "2026-11-20T10:00:00Z".parse().unwrap(),
                on_aws: self.on_aws,
                orders_table: "orders",
                metrics_table: "metrics",
                configured_shards: 10,
                recorded: &self.recorded,
                gsi2_entry_bytes: 300,
                audit_bytes: 300,
                throughput: Some(&self.throughput),
                stream_shards: Some(1),
                hot: &self.hot,
                observed_minutes: 600,
                hot_window_days: 7,
                alarms: self.on_aws.then_some(&self.alarms[..]),
                autoscaling: match &self.scaling {
                    Some(targets) => AutoScaling::Read(targets),
                    None => AutoScaling::NotRead,
                },
                rehearsal: rehearsal.as_ref(),
                rehearsal_running: false,
            })
        }
    }

    fn figures(throttled: u64, achieved: f64) -> RehearsalFigures {
        RehearsalFigures {
            target_orders_per_second: Some(40.0),
            achieved_orders_per_second: achieved,
            created: 400,
            failed: 0,
            throttled,
            throttles: (throttled > 0)
                .then(|| crate::model::ThrottleCount {
                    reason: "IndexWriteKeyRangeThroughputExceeded".into(),
                    place: "GSI2".into(),
                    resource: "table/orders/index/GSI2".into(),
                    total: throttled,
                    minutes: vec![],
                })
                .into_iter()
                .collect(),
            write_p50_ms: Some(5.0),
            write_p99_ms: Some(40.0),
            dashboard_answered: 30,
            dashboard_failed: 0,
            dashboard_p99_ms: Some(20.0),
            dashboard_readable: true,
        }
    }

    fn rehearsal(plan: &SalePlan, shards: u32, verdict: Verdict) -> Rehearsal {
        let figures = figures(if verdict == Verdict::NoGo { 12 } else { 0 }, 39.0);
        Rehearsal {
            plan: plan.name.clone(),
            plan_updated_at: plan.updated_at,
            plan_peak_orders_per_second: plan.peak_orders_per_second,
            started_at: "2026-11-20T09:30:00Z".parse().unwrap(),
            finished_at: Some("2026-11-20T09:30:25Z".parse().unwrap()),
            by: "alice".into(),
            state: RehearsalState::Done,
            verdict: Some(verdict),
            reason: rehearsal_verdict(&figures).1,
            shape: crate::model::RehearsalShape {
                scale: 0.02,
                shards,
                peak_orders_per_second: 40.0,
                base_orders_per_second: 4.0,
                ramp_seconds: 3,
                hold_seconds: 14,
                decay_seconds: 3,
                tail_seconds: 3,
                writers: 32,
            },
            figures: Some(figures),
        }
    }

    #[test]
    fn a_rehearsal_never_run_is_an_action_and_one_that_throttled_a_no_go() {
        let mut case = Case::new(100.0, Some(10));
        case.rehearsed = None;
        let readiness = case.assess();
        assert_eq!(readiness.verdict, Verdict::Act);
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert_eq!(check.verdict, Verdict::Act);
        let fix = check.fix.as_ref().unwrap();
        assert!(fix.text.starts_with("run the rehearsal"), "{fix:?}");
        assert_eq!(fix.action.as_deref(), Some("rehearse"));
        assert_eq!(fix.command.as_deref(), Some("northwind-ops ready --plan black-friday --rehearse"));
        case.rehearsed = Some(Verdict::NoGo);
        let readiness = case.assess();
        assert_eq!(readiness.verdict, Verdict::NoGo);
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert!(check.reason.contains("12 attempts were throttled"), "{}", check.reason);
        // The plan changed since: rehearse again.
        case.rehearsed = Some(Verdict::Ready);
        let mut stale = case.rehearsal().unwrap();
        stale.plan_updated_at = "2026-11-19T09:00:00Z".parse().unwrap();
        let mut inputs_case = case.assess();
        assert_eq!(verdict_of(&inputs_case, "rehearsal"), Verdict::Ready);
        inputs_case = assess(&Inputs {
            plan: &case.plan,
            now: "2026-11-20T10:00:00Z".parse().unwrap(),
            on_aws: false,
            orders_table: "orders",
            metrics_table: "metrics",
            configured_shards: 10,
            recorded: &case.recorded,
            gsi2_entry_bytes: 300,
            audit_bytes: 300,
            throughput: Some(&case.throughput),
            stream_shards: Some(1),
            hot: &[],
            observed_minutes: 600,
            hot_window_days: 7,
            alarms: None,
            autoscaling: AutoScaling::NotRead,
            rehearsal: Some(&stale),
            rehearsal_running: false,
        });
        let check = inputs_case.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert_eq!(check.verdict, Verdict::Act);
        assert!(check.reason.contains("changed"), "{}", check.reason);
    }

    #[test]
    fn a_rehearsal_is_weighed_by_its_throttles_then_its_rate() {
        assert_eq!(rehearsal_verdict(&figures(0, 38.0)).0, Verdict::Ready);
        assert_eq!(rehearsal_verdict(&figures(3, 38.0)).0, Verdict::NoGo);
        let (verdict, reason) = rehearsal_verdict(&figures(0, 10.0));
        assert_eq!(verdict, Verdict::Act);
        assert!(reason.starts_with("inconclusive"), "{reason}");
        let mut unreadable = figures(0, 38.0);
        unreadable.dashboard_readable = false;
        unreadable.dashboard_failed = 2;
        assert_eq!(rehearsal_verdict(&unreadable).0, Verdict::NoGo);
        assert_eq!(design_shards(&[], 3, 10), 10);
        let day: NaiveDate = "2026-11-27".parse().unwrap();
        assert_eq!(design_shards(&[(day, Some(1)), (day, None)], 3, 10), 1);
    }

    fn verdict_of(readiness: &Readiness, id: &str) -> Verdict {
        readiness.checks.iter().find(|c| c.id == id).unwrap().verdict
    }

    #[test]
    fn a_peak_the_design_holds_on_written_days_is_ready() {
        let readiness = Case::new(100.0, Some(10)).assess();
        assert_eq!(readiness.verdict, Verdict::Ready, "{readiness:#?}");
        let warm = readiness.checks.iter().find(|c| c.id == "warm-throughput").unwrap();
        assert!(warm.figures.iter().any(|f| f.value.starts_with("unknown")), "{warm:?}");
    }

    #[test]
    fn an_unwritten_day_has_the_configured_count_and_a_low_one_is_a_no_go() {
        let readiness = Case::new(100.0, None).assess();
        assert_eq!(verdict_of(&readiness, "shards"), Verdict::Ready, "the configured 10 shards do");
        let readiness = Case::new(2000.0, None).assess();
        assert_eq!(verdict_of(&readiness, "shards"), Verdict::NoGo, "this server's 10 would not");
        let shards = readiness.checks.iter().find(|c| c.id == "shards").unwrap();
        assert_eq!(shards.fix.as_ref().unwrap().action.as_deref(), Some("write-shards"));
        // 1,000 orders a second needs 4 WCU × 2 × ... more than 2 shards.
        let readiness = Case::new(1000.0, Some(2)).assess();
        assert_eq!(verdict_of(&readiness, "shards"), Verdict::NoGo);
        assert_eq!(readiness.verdict, Verdict::NoGo);
        let needed = shards_needed(&plan(1000.0), 300).unwrap();
        assert!(needed > 2, "{needed}");
        assert_eq!(verdict_of(&Case::new(1000.0, Some(needed)).assess(), "shards"), Verdict::Ready);
    }

    #[test]
    fn a_peak_over_a_hundred_shards_is_a_no_go() {
        let readiness = Case::new(100_000.0, Some(100)).assess();
        let shards = readiness.checks.iter().find(|c| c.id == "shards").unwrap();
        assert_eq!(shards.verdict, Verdict::NoGo);
        assert!(shards.reason.contains("more than the 100"), "{}", shards.reason);
    }

    #[test]
    fn warm_throughput_under_the_peak_asks_for_the_templates_parameter() {
        let mut case = Case::new(2000.0, Some(100));
        case.throughput = settings(Some(4000));
        case.on_aws = true;
        let readiness = case.assess();
        let warm = readiness.checks.iter().find(|c| c.id == "warm-throughput").unwrap();
        assert_eq!(warm.verdict, Verdict::Act, "{warm:?}");
        let parameter = warm.fix.as_ref().unwrap().parameter.clone().unwrap();
        assert!(
            parameter.contains("OrdersWarmWrite=8000") && parameter.contains("OrdersGSI1WarmWrite=8000"),
            "{parameter}"
        );
        // On AWS, a figure not reported is unknown, and that is an action.
        case.throughput = settings(None);
        assert_eq!(verdict_of(&case.assess(), "warm-throughput"), Verdict::Act);
    }

    #[test]
    fn an_on_demand_maximum_under_the_peak_is_a_no_go() {
        let mut case = Case::new(1000.0, Some(100));
        case.on_aws = true;
        case.throughput = settings(Some(100_000));
        case.throughput[1].on_demand_max_write_units = Some(1000);
        let warm = case.assess().checks.into_iter().find(|c| c.id == "warm-throughput").unwrap();
        assert_eq!(warm.verdict, Verdict::NoGo);
        assert!(warm.fix.unwrap().parameter.unwrap().contains("OrdersGSI1OnDemandMaxWrite=8000"));
    }

    #[test]
    fn a_consumer_never_measured_is_unknown_and_a_slow_one_a_no_go() {
        let mut case = Case::new(100.0, Some(10));
        case.plan.consumer_records_per_second = None;
        let readiness = case.assess();
        let consumer = readiness.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert_eq!(consumer.verdict, Verdict::Act);
        assert!(consumer.reason.starts_with("unknown"), "{}", consumer.reason);
        case.plan.consumer_records_per_second = Some(150.0);
        assert_eq!(verdict_of(&case.assess(), "consumer"), Verdict::NoGo);
        case.plan.consumer_records_per_second = Some(250.0);
        assert_eq!(verdict_of(&case.assess(), "consumer"), Verdict::Act, "no headroom");
    }

    #[test]
    fn counters_at_a_late_large_peak_are_a_no_go() {
        let mut case = Case::new(8000.0, Some(100));
        case.plan.start = "2026-11-27T22:00:00Z".parse().unwrap();
        let readiness = case.assess();
        let counters = readiness.checks.iter().find(|c| c.id == "counters").unwrap();
        assert_eq!(counters.verdict, Verdict::NoGo, "{counters:#?}");
        assert_eq!(verdict_of(&Case::new(50.0, Some(10)).assess(), "counters"), Verdict::Ready);
    }

    #[test]
    fn a_customer_with_a_large_share_of_gsi1_is_named() {
        let mut case = Case::new(1000.0, Some(100));
        let at = "2026-11-19T12:00:00Z".parse().unwrap();
        case.hot = vec![
            HotObservation { key: "CUSTOMER#bot".into(), at, units: 40.0, index_units: 80.0 },
            HotObservation { key: "CUSTOMER#quiet".into(), at, units: 11.0, index_units: 12.0 },
        ];
        let readiness = case.assess();
        let hot = readiness.checks.iter().find(|c| c.id == "hot-keys").unwrap();
        assert_eq!(hot.verdict, Verdict::NoGo, "{hot:#?}");
        assert!(hot.reason.contains("CUSTOMER#bot") && hot.fix.as_ref().unwrap().text.contains("bot"));
        assert!(!hot.figures.iter().any(|f| f.label.contains("quiet")), "a quiet minute is not scaled");
        // At a small peak the same share holds.
        let mut small = Case::new(50.0, Some(10));
        small.hot = case.hot.clone();
        assert_eq!(verdict_of(&small.assess(), "hot-keys"), Verdict::Ready);
    }

    #[test]
    fn alarms_are_not_applicable_locally_and_read_on_aws() {
        let local = Case::new(100.0, Some(10)).assess();
        assert_eq!(verdict_of(&local, "alarms"), Verdict::Ready);
        let mut aws = Case::new(100.0, Some(10));
        aws.on_aws = true;
        aws.throughput = settings(Some(100_000));
        assert_eq!(verdict_of(&aws.assess(), "alarms"), Verdict::Act, "no alarm at all");
        aws.alarms = vec![Alarm { name: "orders-throttles".into(), state: "OK".into() }];
        assert_eq!(aws.assess().verdict, Verdict::Ready);
        aws.alarms[0].state = "ALARM".into();
        assert_eq!(verdict_of(&aws.assess(), "alarms"), Verdict::Act);
    }

    /// Every table and index provisioned at `capacity` write units.
    fn provisioned(capacity: i64) -> Vec<ThroughputSettings> {
        settings(None)
            .into_iter()
            .map(|s| ThroughputSettings {
                billing_mode: Some("PROVISIONED".into()),
                provisioned_write_units: Some(capacity),
                ..s
            })
            .collect()
    }

    /// A write scalable target on every table and index.
    fn targets(min: i32, max: i32, actions: Vec<ScheduledAction>) -> Vec<ScalableTarget> {
        ["orders", "orders/GSI1", "orders/GSI2", "metrics"]
            .into_iter()
            .map(|resource| {
                let (table, index) = resource.split_once('/').map_or((resource, None), |(t, i)| (t, Some(i)));
                let (resource_id, dimension) = write_target(table, index);
                ScalableTarget { resource: resource.into(), resource_id, dimension, min, max, actions: actions.clone() }
            })
            .collect()
    }

    fn floor_raise(name: &str, schedule: &str, min: i32) -> ScheduledAction {
        ScheduledAction {
            name: name.into(),
            schedule: schedule.into(),
            timezone: Some("Etc/UTC".into()),
            start: None,
            end: None,
            min: Some(min),
            max: None,
        }
    }

    fn scaling_check(case: &Case) -> ReadinessCheck {
        case.assess().checks.into_iter().find(|c| c.id == "auto-scaling").unwrap()
    }

    /// A provisioned peak of 1,000 orders a second: far over 5 units.
    fn provisioned_case() -> Case {
        let mut case = Case::new(1000.0, Some(100));
        case.throughput = provisioned(5);
        case
    }

    #[test]
    fn on_demand_tables_need_no_auto_scaling_and_a_local_engine_reads_none() {
        let check = scaling_check(&Case::new(100.0, Some(10)));
        assert_eq!(check.verdict, Verdict::Ready);
        assert!(check.reason.starts_with("not applicable"), "{}", check.reason);
        let case = provisioned_case();
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Ready, "a local engine never throttles: {check:#?}");
        assert!(check.figures.iter().all(|f| f.value == "unknown (not on AWS)"), "{check:#?}");
        assert!(check.figures.iter().any(|f| f.label == "orders/GSI2: auto scaling maximum"), "{check:#?}");
    }

    #[test]
    fn auto_scaling_that_could_not_be_read_is_an_action_naming_the_permission() {
        let case = provisioned_case();
        let rehearsal = case.rehearsal();
        let denied = "the store refused the request: AccessDeniedException: no (the role needs \
                      application-autoscaling:DescribeScalableTargets; see docs/iam/serve.json)";
        let readiness = assess(&Inputs {
            plan: &case.plan,
            now: "2026-11-20T10:00:00Z".parse().unwrap(),
            on_aws: true,
            orders_table: "orders",
            metrics_table: "metrics",
            configured_shards: 10,
            recorded: &case.recorded,
            gsi2_entry_bytes: 300,
            audit_bytes: 300,
            throughput: Some(&case.throughput),
            stream_shards: Some(1),
            hot: &[],
            observed_minutes: 600,
            hot_window_days: 7,
            alarms: Some(&[]),
            autoscaling: AutoScaling::Failed(denied),
            rehearsal: rehearsal.as_ref(),
            rehearsal_running: false,
        });
        let check = readiness.checks.iter().find(|c| c.id == "auto-scaling").unwrap();
        assert_eq!(check.verdict, Verdict::Act);
        assert!(check.reason.contains("application-autoscaling:DescribeScalableTargets"), "{}", check.reason);
        assert!(check.fix.as_ref().unwrap().text.contains("DescribeScheduledActions"), "{check:#?}");
    }

    #[test]
    fn a_maximum_under_the_peak_is_an_action_with_the_templates_parameter_and_the_command() {
        let mut case = provisioned_case();
        let raised = floor_raise("sale-raise", "at(2026-11-27T08:30:00)", 100_000);
        case.scaling = Some(targets(5, 100, vec![raised.clone()]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act, "{check:#?}");
        assert!(check.reason.contains("orders's auto scaling maximum is 100, under the peak's"), "{}", check.reason);
        let fix = check.fix.unwrap();
        assert!(fix.text.starts_with("raise auto scaling's maximum over the peak:"), "{}", fix.text);
        let parameter = fix.parameter.unwrap();
        assert!(parameter.contains("OrdersWriteMax=") && parameter.contains("OrdersGSI2WriteMax="), "{parameter}");
        let command = fix.command.unwrap();
        assert!(
            command.contains(
                "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id \
                 table/orders/index/GSI2 --scalable-dimension dynamodb:index:WriteCapacityUnits --max-capacity "
            ),
            "{command}"
        );
        assert!(!command.contains("put-scheduled-action"), "the floor is raised already: {command}");
        // Raised over the peak: ready.
        case.scaling = Some(targets(5, 100_000, vec![raised]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Ready, "{check:#?}");
        let figure = check.figures.iter().find(|f| f.label.starts_with("orders/GSI1: auto scaling minimum")).unwrap();
        assert!(figure.label.contains("(2026-11-27 08:45 UTC)"), "{figure:?}");
        assert!(
            figure.value.contains("100000 (set by scheduled action sale-raise at 2026-11-27 08:30 UTC)"),
            "{figure:?}"
        );
        // A scheduled action lowering the maximum during the sale undoes it.
        let mut lower_max = floor_raise("max-down", "at(2026-11-27T09:30:00)", 5);
        (lower_max.min, lower_max.max) = (None, Some(10));
        case.scaling = Some(targets(100_000, 100_000, vec![lower_max]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act, "{check:#?}");
        assert!(check.reason.contains("max-down sets orders's auto scaling maximum to 10"), "{}", check.reason);
    }

    #[test]
    fn no_floor_raise_before_the_start_gives_the_scheduled_action_with_its_lead() {
        let mut case = provisioned_case();
        case.scaling = Some(targets(5, 100_000, vec![]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act, "{check:#?}");
        assert!(check.reason.contains("no scheduled action raises orders's minimum (5)"), "{}", check.reason);
        let fix = check.fix.unwrap();
        let command = fix.command.unwrap();
        assert!(
            command.contains(
                "aws application-autoscaling put-scheduled-action --service-namespace dynamodb --resource-id \
                 table/orders --scalable-dimension dynamodb:table:WriteCapacityUnits --scheduled-action-name \
                 sale-black-friday-orders-raise --schedule 'at(2026-11-27T08:45:00)' --timezone Etc/UTC \
                 --scalable-target-action MinCapacity="
            ),
            "{command}"
        );
        assert!(command.contains("--schedule 'at(2026-11-27T10:00:00)'"), "lowered at the end: {command}");
        assert!(command.contains("sale-black-friday-orders-GSI2-lower"), "{command}");
        assert!(fix.text.starts_with("schedule auto scaling's minimum up to the peak"), "{}", fix.text);
        assert!(fix.text.contains("15 minutes ahead"), "the lead is explained: {}", fix.text);
        let parameter = fix.parameter.unwrap();
        assert!(parameter.contains("OrdersGSI1WriteBatchMin="), "{parameter}");
        assert!(parameter.contains("'BatchRaiseSchedule=at(2026-11-27T08:45:00)'"), "{parameter}");
        assert_eq!(parameter.matches("BatchRaiseSchedule").count(), 1, "{parameter}");

        // A raise 5 minutes before the start is too late.
        case.scaling = Some(targets(5, 100_000, vec![floor_raise("late", "at(2026-11-27T08:55:00)", 100_000)]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act);
        assert!(check.reason.contains("less than 15 minutes before the start"), "{}", check.reason);
        // Every Friday at 08:30 covers a Friday sale (2026-11-27 is one).
        case.scaling = Some(targets(5, 100_000, vec![floor_raise("fridays", "cron(30 8 ? * FRI *)", 100_000)]));
        assert_eq!(scaling_check(&case).verdict, Verdict::Ready);
        // ... unless another lowers it during the sale.
        let actions = vec![
            floor_raise("fridays", "cron(30 8 ? * FRI *)", 100_000),
            floor_raise("early-lower", "at(2026-11-27T09:30:00)", 5),
        ];
        case.scaling = Some(targets(5, 100_000, actions));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act);
        assert!(
            check.reason.contains("early-lower lowers orders's minimum to 5 at 2026-11-27 09:30"),
            "{}",
            check.reason
        );
        // A schedule in another time zone is not read, and said so.
        let mut paris = floor_raise("paris", "at(2026-11-27T09:30:00)", 100_000);
        paris.timezone = Some("Europe/Paris".into());
        case.scaling = Some(targets(5, 100_000, vec![paris]));
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act);
        assert!(
            check.figures.iter().any(|f| f.value.starts_with("not read: its time zone Europe/Paris")),
            "{check:#?}"
        );
        // A minimum at the peak already holds.
        case.scaling = Some(targets(100_000, 100_000, vec![]));
        assert_eq!(scaling_check(&case).verdict, Verdict::Ready);
    }

    #[test]
    fn no_scalable_target_leaves_the_capacity_fixed() {
        let mut case = provisioned_case();
        case.scaling = Some(vec![]);
        let check = scaling_check(&case);
        assert_eq!(check.verdict, Verdict::Act, "{check:#?}");
        assert!(check.figures.iter().any(|f| f.value == "none: the capacity is fixed at 5 write units"), "{check:#?}");
        let command = check.fix.unwrap().command.unwrap();
        assert!(command.contains("register-scalable-target") && command.contains("--min-capacity 5"), "{command}");
        case.throughput = provisioned(1_000_000);
        assert_eq!(scaling_check(&case).verdict, Verdict::Ready, "enough fixed capacity");
    }

    #[test]
    fn on_aws_capacity_under_the_peak_is_auto_scalings_to_raise() {
        let mut case = provisioned_case();
        case.on_aws = true;
        assert_eq!(verdict_of(&case.assess(), "warm-throughput"), Verdict::Act, "fixed under the peak");
        case.scaling = Some(targets(5, 100_000, vec![floor_raise("raise", "at(2026-11-27T08:30:00)", 100_000)]));
        let readiness = case.assess();
        assert_eq!(verdict_of(&readiness, "warm-throughput"), Verdict::Ready, "{readiness:#?}");
        assert_eq!(verdict_of(&readiness, "auto-scaling"), Verdict::Ready, "{readiness:#?}");
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

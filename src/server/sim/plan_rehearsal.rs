//! A sale plan's rehearsal, as the service asks for it (`Rehearser`): the
//! plan's shape scaled down and run by `rehearse` (a scratch embedded
//! store, the throttle proxy in front of it, the flash-sale load and the
//! dashboard reader) at the sale day's shard count.
//!
//! Scaling: the run lasts a fixed short time (`RehearsalBudget::seconds`,
//! the plan's ramp, hold and decay in their proportions), and the plan's
//! peak is brought down to what this machine writes through the proxy
//! (`max_orders_per_second`) with the proxy's partition limits scaled by
//! the same factor (`rehearse --scale`), so the peak's ratio to the limits
//! is the plan's: a design that throttles at the plan's peak throttles in
//! the rehearsal. A peak already under the budget runs as it is (scale 1).

use crate::model::{MeteredUnits, RehearsalFigures, RehearsalShape, SalePlan, ThrottleCount, Writer};
use crate::server::service::rehearsal::{RehearsalRun, Rehearser};
use crate::server::sim::loadgen::{LoadgenArgs, Profile, WriteMode};
use crate::server::sim::rehearse::{self, DesignReport, RehearseOptions};
use crate::server::sim::throttle::buckets::Kind;
use crate::server::store::config::StoreConfig;
use crate::server::store::error::Throttle;
use std::time::Duration;

/// How long and how fast a rehearsal run may be on this machine.
#[derive(Clone, Debug)]
pub struct RehearsalBudget {
    /// Ramp, hold and decay together, seconds.
    pub seconds: u64,
    /// At the base rate afterwards, for the last orders to close.
    pub tail_seconds: u64,
    /// The highest peak run, orders a second: what a small machine's
    /// embedded store takes through the proxy with room to spare.
    pub max_orders_per_second: f64,
    pub writers: u32,
    /// How often the dashboard reader asks for the first page.
    pub read_every: Duration,
}

impl Default for RehearsalBudget {
    /// About 25 seconds at up to 40 orders a second (measured on 2 cores:
    /// see docs/engineering.md, "How is a sale plan rehearsed?").
    fn default() -> Self {
        RehearsalBudget {
            seconds: 20,
            tail_seconds: 3,
            max_orders_per_second: 40.0,
            writers: 32,
            read_every: Duration::from_millis(250),
        }
    }
}

/// The rehearsal of the service's plans.
pub struct ProxyRehearser {
    /// The store settings the scratch stores start from (their tables'
    /// names and such; each is a fresh embedded store of its own).
    base: StoreConfig,
    budget: RehearsalBudget,
}

impl ProxyRehearser {
    pub fn new(base: StoreConfig, budget: RehearsalBudget) -> Self {
        ProxyRehearser { base, budget }
    }
}

/// The plan's shape scaled into `budget`.
pub fn scaled_shape(plan: &SalePlan, shards: u32, budget: &RehearsalBudget) -> RehearsalShape {
    let peak = plan.peak_orders_per_second.max(f64::MIN_POSITIVE);
    let scale = (budget.max_orders_per_second / peak).min(1.0);
    let (ramp, hold, decay) = (plan.ramp_minutes, plan.hold_minutes.max(1), plan.decay_minutes);
    let total = f64::from(ramp + hold + decay);
    let seconds = |minutes: u32| (f64::from(minutes) / total * budget.seconds as f64).round() as u64;
    let (ramp_seconds, decay_seconds) = (seconds(ramp), seconds(decay));
    let hold_seconds = budget.seconds.saturating_sub(ramp_seconds + decay_seconds).max(1);
    let peak_orders_per_second = peak * scale;
    RehearsalShape {
        scale,
        shards,
        peak_orders_per_second,
        // `rehearse`'s own ratio: a tenth of the peak before and after.
        base_orders_per_second: peak_orders_per_second / 10.0,
        ramp_seconds,
        hold_seconds,
        decay_seconds,
        tail_seconds: budget.tail_seconds,
        writers: budget.writers,
        written_by: plan.writer,
    }
}

/// The load `rehearse` runs for a shape: its flash sale.
fn load(shape: &RehearsalShape) -> LoadgenArgs {
    LoadgenArgs {
        profile: Profile::FlashSale,
        rate: shape.base_orders_per_second,
        peak: Some(shape.peak_orders_per_second),
        duration: shape.seconds(),
        ramp: shape.ramp_seconds,
        hold: shape.hold_seconds,
        decay: shape.decay_seconds,
        orders: None,
        writers: shape.writers,
        // As the plan's orders will be written: this console's transactions
        // with audit records, or another service's plain writes.
        mode: match shape.written_by {
            Writer::Console => WriteMode::Realistic,
            Writer::Service => WriteMode::Service,
        },
        customers: 10_000,
        close_after: 10.0,
        seed: 1,
        quiet: true,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Write units a change the proxy charged on the orders table, its
/// indexes and the metrics table (named as `planner::prewarm` names them).
fn metered(report: &DesignReport, base: &StoreConfig) -> Vec<MeteredUnits> {
    let changes = (report.load.created + report.load.closed).max(1) as f64;
    let orders = &base.orders_table;
    let resources = [
        ("table", orders.clone()),
        ("GSI1", format!("{orders}/index/GSI1")),
        ("GSI2", format!("{orders}/index/GSI2")),
        ("metrics table", base.metrics_table.clone()),
    ];
    resources
        .into_iter()
        .map(|(resource, name)| MeteredUnits {
            resource: resource.into(),
            units_per_change: report.proxy.units.get(&(name, Kind::Write)).copied().unwrap_or(0.0) / changes,
        })
        .collect()
}

/// Stream records a change the run's consumer read: once it caught up it
/// had read every record of the run's stream (before, some were left
/// unread, and nothing is said).
fn stream_records_per_change(report: &DesignReport) -> Option<f64> {
    let changes = (report.load.created + report.load.closed).max(1) as f64;
    report.consumer.as_ref().filter(|c| c.caught_up).map(|c| c.records as f64 / changes)
}

/// What the service keeps of a design's report.
pub fn figures(report: &DesignReport, base: &StoreConfig) -> RehearsalFigures {
    let throttles = report
        .proxy
        .reasons
        .iter()
        .map(|(k, n)| ThrottleCount {
            reason: k.reason.clone(),
            place: Throttle { reason: k.reason.clone(), resource: k.resource.clone() }.place(),
            // `table/<name>[/index/<index>]`, without the ARN's account and region.
            resource: k.resource.split_once(":table/").map_or(k.resource.clone(), |(_, r)| format!("table/{r}")),
            total: *n,
            minutes: vec![],
        })
        .collect();
    RehearsalFigures {
        target_orders_per_second: report.load.target_rate,
        achieved_orders_per_second: report.load.achieved_rate,
        created: report.load.created,
        failed: report.load.errors,
        throttled: report.proxy.throttled_requests,
        throttles,
        write_p50_ms: report.load.write_latency.as_ref().map(|l| ms(l.p50)),
        write_p99_ms: report.load.write_latency.as_ref().map(|l| ms(l.p99)),
        dashboard_answered: report.reads.answered,
        dashboard_failed: report.reads.failed,
        dashboard_p99_ms: report.reads.latency.as_ref().map(|l| ms(l.p99)),
        dashboard_readable: report.reads.readable(),
        metered: metered(report, base),
        consumer: report.consumer.clone(),
        stream_records_per_change: stream_records_per_change(report),
    }
}

impl Rehearser for ProxyRehearser {
    fn shape(&self, plan: &SalePlan, shards: u32) -> RehearsalShape {
        scaled_shape(plan, shards, &self.budget)
    }

    fn run(&self, shape: RehearsalShape) -> RehearsalRun {
        let (base, read_every) = (self.base.clone(), self.budget.read_every);
        Box::pin(async move {
            let options = RehearseOptions {
                designs: vec![shape.shards],
                scale: shape.scale,
                load: load(&shape),
                read_every,
                // At the end of the hold, the run's changes so far waiting.
                consumer_after: Some(Duration::from_secs(shape.ramp_seconds + shape.hold_seconds)),
            };
            let reports = rehearse::rehearse(&base, &options).await.map_err(|e| e.to_string())?;
            reports.first().map(|r| figures(r, &base)).ok_or_else(|| "the rehearsal ran no design".to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(peak: f64, ramp: u32, hold: u32, decay: u32) -> SalePlan {
        SalePlan {
            name: "gala".into(),
            peak_orders_per_second: peak,
            start: "2026-11-27T09:00:00Z".parse().unwrap(),
            ramp_minutes: ramp,
            hold_minutes: hold,
            decay_minutes: decay,
            item_bytes: 700,
            consumer_records_per_second: None,
            writer: Default::default(),
            consumer_measured: None,
            updated_at: "2026-11-20T09:00:00Z".parse().unwrap(),
            updated_by: "alice".into(),
        }
    }

    #[test]
    fn the_peak_and_the_limits_scale_together_into_the_budget() {
        let budget = RehearsalBudget::default();
        let shape = scaled_shape(&plan(2000.0, 10, 30, 20), 10, &budget);
        assert_eq!(shape.peak_orders_per_second, 40.0);
        assert_eq!(shape.scale, 0.02, "2,000 a second against 1,000 WCU is 40 against 20");
        assert_eq!((shape.ramp_seconds, shape.hold_seconds, shape.decay_seconds), (3, 10, 7));
        // A small peak runs as it is, and a plan with no ramp has none.
        let small = scaled_shape(&plan(10.0, 0, 5, 0), 1, &budget);
        assert_eq!((small.scale, small.peak_orders_per_second), (1.0, 10.0));
        assert_eq!((small.ramp_seconds, small.hold_seconds, small.decay_seconds), (0, 20, 0));
        assert_eq!(load(&small).duration, 23);
    }
}

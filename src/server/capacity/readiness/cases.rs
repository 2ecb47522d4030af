//! The sale the checks' tests weigh (Black Friday, 2026-11-27 09:00 UTC),
//! and the inputs around it each test changes.

use super::*;
use crate::model::{RehearsalFigures, RehearsalState};

pub(super) fn plan(peak: f64) -> SalePlan {
    SalePlan {
        name: "black-friday".into(),
        peak_orders_per_second: peak,
        start: "2026-11-27T09:00:00Z".parse().unwrap(),
        ramp_minutes: 10,
        hold_minutes: 30,
        decay_minutes: 20,
        item_bytes: 700,
        consumer_records_per_second: Some(peak * 4.0),
        writer: crate::model::Writer::Service,
        consumer_measured: None,
        updated_at: "2026-11-20T09:00:00Z".parse().unwrap(),
        updated_by: "alice".into(),
    }
}

pub(super) fn settings(warm: Option<i64>) -> Vec<ThroughputSettings> {
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

pub(super) struct Case {
    pub(super) plan: SalePlan,
    pub(super) recorded: Vec<(NaiveDate, Option<u32>)>,
    pub(super) throughput: Vec<ThroughputSettings>,
    pub(super) hot: Vec<HotObservation>,
    pub(super) on_aws: bool,
    pub(super) alarms: Vec<Alarm>,
    /// The last rehearsal's verdict (at the sale days' shards), if run.
    pub(super) rehearsed: Option<Verdict>,
    /// Application Auto Scaling's targets, when read.
    pub(super) scaling: Option<Vec<ScalableTarget>>,
    /// What the checks cost the writes by: the program's unless a test
    /// changes a layout.
    pub(super) definitions: Definitions,
}

impl Case {
    pub(super) fn new(peak: f64, recorded: Option<u32>) -> Self {
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
            definitions: Definitions::program(),
        }
    }

    pub(super) fn rehearsal(&self) -> Option<Rehearsal> {
        let verdict = self.rehearsed?;
        let needed = shards_needed(&self.plan, 300).unwrap_or(1);
        Some(rehearsal(&self.plan, design_shards(&self.recorded, needed, 10), verdict))
    }

    /// The inputs the case describes, `rehearsal` the plan's last.
    pub(super) fn inputs<'a>(&'a self, rehearsal: Option<&'a Rehearsal>) -> Inputs<'a> {
        Inputs {
            plan: &self.plan,
            now: "2026-11-20T10:00:00Z".parse().unwrap(),
            on_aws: self.on_aws,
            orders_table: "orders",
            metrics_table: "metrics",
            configured_shards: 10,
            recorded: &self.recorded,
            definitions: &self.definitions,
            measured: None,
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
            rehearsal,
            rehearsal_running: false,
            consumer_mode: None,
            consumer_concurrency: None,
        }
    }

    pub(super) fn assess(&self) -> Readiness {
        let rehearsal = self.rehearsal();
        assess(&self.inputs(rehearsal.as_ref()))
    }
}

pub(super) fn figures(throttled: u64, achieved: f64) -> RehearsalFigures {
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
        metered: vec![],
        consumer: None,
        stream_records_per_change: None,
    }
}

pub(super) fn rehearsal(plan: &SalePlan, shards: u32, verdict: Verdict) -> Rehearsal {
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
            written_by: plan.writer,
        },
        figures: Some(figures),
    }
}

pub(super) fn verdict_of(readiness: &Readiness, id: &str) -> Verdict {
    readiness.checks.iter().find(|c| c.id == id).unwrap().verdict
}

//! `rehearsal`: the plan's last rehearsal through the throttle proxy, and
//! how a run's figures are weighed.

use super::fixes::shell_quote;
use super::shards::design_shards;
use super::{Inputs, RECORDS_PER_ORDER, Sizing, check, figure, fix_text, num, sourced};
use crate::model::{Figure, Fix, MeteredUnits, ReadinessCheck, RehearsalFigures, RehearsalState, Verdict};
use crate::server::capacity::costs::CHANGES_PER_ORDER;
use crate::server::capacity::planner;

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

/// The gap between a prediction and what the rehearsal metered that is
/// flagged: a check's figure that far off describes another program.
pub const PREDICTION_GAP: f64 = 0.15;

/// One figure a check predicted beside what the rehearsal measured, the
/// gap flagged over `PREDICTION_GAP`: every compared row is one of these.
struct Compared {
    label: String,
    predicted: f64,
    measured: f64,
    show: fn(f64) -> String,
    source: &'static str,
}

impl Compared {
    /// How far off the prediction is, of itself (a prediction of nothing
    /// with something measured: all of it).
    fn gap(&self) -> f64 {
        if self.predicted > 0.0 {
            (self.measured - self.predicted).abs() / self.predicted
        } else if self.measured > 0.0 {
            1.0
        } else {
            0.0
        }
    }

    fn figure(&self) -> Figure {
        let gap = self.gap();
        let flag = if gap > PREDICTION_GAP { " — GAP over 15%" } else { "" };
        let (show, predicted, measured) = (self.show, self.predicted, self.measured);
        sourced(
            self.label.clone(),
            format!("{} → {} ({:.0}%){flag}", show(predicted), show(measured), gap * 100.0),
            self.source,
        )
    }
}

/// Each table's and index's write units a change, as predicted
/// (`costs`) beside what the rehearsal's proxy metered. The metrics
/// table's prediction is the audit records only: the rehearsal's stream
/// consumer writes past the proxy (its rate is the consumer check's
/// figure, its counters the counters check's).
fn predicted_and_metered(sizing: &Sizing, metered: &[MeteredUnits]) -> Vec<Compared> {
    metered
        .iter()
        .map(|m| Compared {
            label: format!("{}: write units a change, predicted → metered", m.resource),
            predicted: sizing.writes.units_on(&m.resource) / CHANGES_PER_ORDER,
            measured: m.units_per_change,
            show: num2,
            source: if m.resource == "metrics table" {
                "predicted: the audit records (the rehearsal's consumer writes past the proxy); metered: the \
                 throttle proxy"
            } else {
                "predicted: the plan's costs; metered: the throttle proxy, over the orders created and closed"
            },
        })
        .collect()
}

/// The stream's records a second at the plan's peak, as the consumer and
/// shards checks predict them (`RECORDS_PER_ORDER` an order), beside the
/// records a change the rehearsal's consumer read, scaled back to the
/// peak's changes (`CHANGES_PER_ORDER` an order). None if its consumer
/// never caught up (or the run predates the figure).
fn stream_records(peak: f64, records_per_change: Option<f64>) -> Option<Compared> {
    records_per_change.map(|per_change| Compared {
        label: "stream: records a second at the peak, predicted → measured".into(),
        predicted: peak * RECORDS_PER_ORDER,
        measured: per_change * CHANGES_PER_ORDER * peak,
        show: num,
        source: "predicted: the plan's peak × the records an order; measured: the records the rehearsal's \
                 consumer read a change created or closed, scaled back to the peak's changes",
    })
}

fn num2(value: f64) -> String {
    format!("{value:.2}")
}

pub(super) fn rehearsal_check(
    inputs: &Inputs<'_>,
    shard_plan: &Result<planner::Plan, planner::PlanError>,
    sizing: Option<&Sizing>,
) -> ReadinessCheck {
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
        if let Some(sizing) = sizing
            && shape.written_by == plan.writer
        {
            let peak = plan.peak_orders_per_second;
            let compared = predicted_and_metered(sizing, &f.metered)
                .into_iter()
                .chain(stream_records(peak, f.stream_records_per_change));
            figures.extend(compared.map(|c| c.figure()));
        }
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

#[cfg(test)]
mod tests {
    use super::super::assess;
    use super::super::cases::{Case, figures, verdict_of};
    use super::*;
    use chrono::NaiveDate;

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
        inputs_case = assess(&Inputs { rehearsal: Some(&stale), ..case.inputs(None) });
        let check = inputs_case.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert_eq!(check.verdict, Verdict::Act);
        assert!(check.reason.contains("changed"), "{}", check.reason);
    }

    #[test]
    fn what_the_rehearsal_metered_is_shown_beside_the_prediction_a_gap_flagged() {
        let case = Case::new(100.0, Some(10));
        let mut rehearsal = case.rehearsal().unwrap();
        let metered = |resource: &str, units_per_change| MeteredUnits { resource: resource.into(), units_per_change };
        // Another service's plain writes: 1 WCU a change predicted on the
        // table (within 15% of 1.1), GSI1 metered at 2 (flagged).
        rehearsal.figures.as_mut().unwrap().metered = vec![metered("table", 1.1), metered("GSI1", 2.0)];
        let readiness = assess(&case.inputs(Some(&rehearsal)));
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        let value = |label: &str| check.figures.iter().find(|f| f.label.starts_with(label)).unwrap().value.clone();
        assert_eq!(value("table: write units a change"), "1.00 → 1.10 (10%)");
        assert_eq!(value("GSI1: write units a change"), "1.00 → 2.00 (100%) — GAP over 15%");
        assert_eq!(check.verdict, Verdict::Ready, "shown, not weighed: {check:#?}");
        // A consumer that never caught up said nothing of the stream.
        assert!(!check.figures.iter().any(|f| f.label.starts_with("stream")), "{check:#?}");
        // 100 orders a second at the peak: 200 records predicted; 1.05
        // records read a change is 210 scaled back, 1.3 is 260 (flagged).
        rehearsal.figures.as_mut().unwrap().stream_records_per_change = Some(1.05);
        let readiness = assess(&case.inputs(Some(&rehearsal)));
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        let stream = check.figures.iter().find(|f| f.label.starts_with("stream: records a second")).unwrap();
        assert_eq!(stream.value, "200 → 210 (5%)");
        assert!(stream.source.as_deref().unwrap_or_default().contains("scaled back"), "{stream:?}");
        rehearsal.figures.as_mut().unwrap().stream_records_per_change = Some(1.3);
        let readiness = assess(&case.inputs(Some(&rehearsal)));
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        let stream = check.figures.iter().find(|f| f.label.starts_with("stream: records a second")).unwrap();
        assert_eq!(stream.value, "200 → 260 (30%) — GAP over 15%");
        // A run of another writer's orders is not compared.
        rehearsal.shape.written_by = crate::model::Writer::Console;
        let readiness = assess(&case.inputs(Some(&rehearsal)));
        let check = readiness.checks.iter().find(|c| c.id == "rehearsal").unwrap();
        assert!(!check.figures.iter().any(|f| f.label.contains("predicted")), "{check:#?}");
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
}

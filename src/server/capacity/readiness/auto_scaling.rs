//! `auto-scaling`: for a provisioned table or index, auto scaling's maximum
//! against the peak, and a scheduled floor raised to it before the start.

use super::fixes::{Named, ScalingFixes, describe_targets_fix};
use super::scheduled::{ReadAction, lowered_in, set_by, setting_at};
use super::{AutoScaling, FLOOR_LEAD_MINUTES, Inputs, check, figure, num, resource_of, sized};
use crate::model::{Figure, Fix, ReadinessCheck, Verdict};
use crate::server::capacity::planner::Prewarm;
use crate::server::capacity::schedule;
use crate::server::store::autoscaling::write_target;
use crate::server::store::{ScalableTarget, ScheduledAction, ThroughputSettings};
use chrono::Duration;

pub(super) fn auto_scaling_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "auto-scaling";
    const TITLE: &str = "Auto scaling maximum and scheduled floor (provisioned)";
    let (prewarm, settings) = match sized(ID, TITLE, inputs, prewarm) {
        Ok(sized) => sized,
        Err(missing) => return *missing,
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

#[cfg(test)]
mod tests {
    use super::super::assess;
    use super::super::cases::{Case, settings, verdict_of};
    use super::*;

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
        let mut case = provisioned_case();
        case.on_aws = true;
        let rehearsal = case.rehearsal();
        let denied = "the store refused the request: AccessDeniedException: no (the role needs \
                      application-autoscaling:DescribeScalableTargets; see docs/iam/serve.json)";
        let readiness = assess(&Inputs { autoscaling: AutoScaling::Failed(denied), ..case.inputs(rehearsal.as_ref()) });
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
}

//! `warm-throughput`: what each table and index must take at the peak
//! against its warm throughput, on-demand maximum or provisioned capacity.

use super::fixes::update_table;
use super::{Inputs, check, figure, fix_text, num, resource_of, sized, sourced};
use crate::model::{Fix, ReadinessCheck, Verdict};
use crate::server::capacity::planner::{self, Prewarm};
use crate::server::deploy::template::{self, Setting};
use crate::server::store::usage::ReadWrite;

pub(super) fn warm_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "warm-throughput";
    const TITLE: &str = "Warm throughput and capacity";
    let (prewarm, settings) = match sized(ID, TITLE, inputs, prewarm) {
        Ok(sized) => sized,
        Err(missing) => return *missing,
    };
    let mut figures = Vec::new();
    let (mut verdict, mut reasons, mut overrides, mut commands) = (Verdict::Ready, Vec::new(), Vec::new(), Vec::new());
    for need in prewarm {
        let (resource, prefix, index) = resource_of(inputs, need);
        let needed = need.write_units_per_second.ceil();
        figures.push(sourced(
            format!("{resource}: write units a second at the peak"),
            num(needed),
            format!("{} ({})", need.source, need.why),
        ));
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

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, settings, verdict_of};
    use super::*;

    #[test]
    fn warm_throughput_under_the_peak_asks_for_the_templates_parameter() {
        let mut case = Case::new(2000.0, Some(100));
        case.throughput = settings(Some(4000));
        case.on_aws = true;
        // Another service's plain writes: 2 WCU an order, 4,000 a second.
        assert_eq!(verdict_of(&case.assess(), "warm-throughput"), Verdict::Ready);
        // Through the console, in transactions: twice that.
        case.plan.writer = crate::model::Writer::Console;
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
        case.plan.writer = crate::model::Writer::Console;
        case.on_aws = true;
        case.throughput = settings(Some(100_000));
        case.throughput[1].on_demand_max_write_units = Some(1000);
        let warm = case.assess().checks.into_iter().find(|c| c.id == "warm-throughput").unwrap();
        assert_eq!(warm.verdict, Verdict::NoGo);
        assert!(warm.fix.unwrap().parameter.unwrap().contains("OrdersGSI1OnDemandMaxWrite=8000"));
    }

    #[test]
    fn the_figures_follow_the_index_projections_as_provisioned() {
        // GSI1 as provisioned projects the whole order: a 3,000-B order is
        // 3 WCU an entry; keys only, 1 WCU on creation and nothing when only
        // the status moves. No edit here: the layout is the check's input.
        let figure = |case: &Case| {
            let warm = case.assess().checks.into_iter().find(|c| c.id == "warm-throughput").unwrap();
            let gsi1 = warm.figures.iter().find(|f| f.label == "orders/GSI1: write units a second at the peak");
            gsi1.unwrap().value.clone()
        };
        let mut case = Case::new(100.0, Some(10));
        case.plan.item_bytes = 3000;
        assert_eq!(figure(&case), "600");
        let gsi1 = case.definitions.table.indexes.iter_mut().find(|i| i.name == "GSI1").unwrap();
        gsi1.projection = crate::server::rules::layout::Projection::KeysOnly;
        assert_eq!(figure(&case), "100");
    }
}

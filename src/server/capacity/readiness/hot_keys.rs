//! `hot-keys`: the GSI1 keys recorded hot recently, at the sale's scale.

use super::{Inputs, against_partition, check, figure, fix_text, num, partition_budget};
use crate::model::{ReadinessCheck, Verdict};
use crate::server::capacity::planner::Prewarm;
use crate::server::rules::PARTITION_WRITE_UNITS;
use chrono::{DateTime, Utc};

/// A minute of recorded GSI1 writes below this many units is too quiet to
/// scale a key's share from.
pub const MIN_SCALED_MINUTE_UNITS: f64 = 20.0;

pub(super) fn hot_keys_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
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

#[cfg(test)]
mod tests {
    use super::super::HotObservation;
    use super::super::cases::{Case, verdict_of};
    use super::*;

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
}

//! `shards`: the GSI2 write shards the peak needs against each sale day's
//! count, and the shard counts the other checks and `write-shards` use.

use super::fixes::shell_quote;
use super::{Inputs, check, figure, fix_text, num};
use crate::model::{Fix, ReadinessCheck, SalePlan, Verdict};
use crate::server::capacity::planner::{self, MAX_SHARDS, PlanInput};
use crate::server::store::shard_count;
use chrono::NaiveDate;

/// The shard count the sale's peak needs (the planner's).
pub fn shards_needed(plan: &SalePlan, gsi2_entry_bytes: u32) -> Result<u32, planner::PlanError> {
    let shard_plan = planner::plan(&PlanInput::for_writer(plan.peak_orders_per_second, gsi2_entry_bytes, plan.writer))?;
    Ok(shard_plan.shards)
}

/// What `write-shards` writes for a sale day: what the peak needs, never
/// fewer than the server's own `--shards` (a sale does not lower the
/// count chosen for ordinary days).
pub fn shards_to_write(needed: u32, configured: u32) -> u32 {
    needed.max(configured).min(MAX_SHARDS)
}

pub(super) fn shards_check(
    inputs: &Inputs<'_>,
    shard_plan: &Result<planner::Plan, planner::PlanError>,
) -> ReadinessCheck {
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
        // `serve` records it before the day (a planned sale's count on its days).
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
             records the sale's count in the last two hours before the day)",
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

/// The peak `shards` shards hold, at the plan's write units an order.
fn max_peak_at(shards: u32, shard_plan: &planner::Plan, peak: f64) -> f64 {
    let per_order = shard_plan.wcu_per_second_at_peak / peak.max(f64::MIN_POSITIVE);
    f64::from(shards) * shard_plan.per_partition_budget / per_order.max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, plan, verdict_of};
    use super::*;

    #[test]
    fn an_unwritten_day_has_the_configured_count_and_a_low_one_is_a_no_go() {
        let readiness = Case::new(100.0, None).assess();
        assert_eq!(verdict_of(&readiness, "shards"), Verdict::Ready, "the configured 10 shards do");
        // 2,000 orders a second of another service's: 4,000 WCU/s, 6 shards.
        assert_eq!(verdict_of(&Case::new(2000.0, None).assess(), "shards"), Verdict::Ready);
        let mut console = Case::new(2000.0, None);
        console.plan.writer = crate::model::Writer::Console;
        let readiness = console.assess();
        assert_eq!(verdict_of(&readiness, "shards"), Verdict::NoGo, "through the console this server's 10 would not");
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
}

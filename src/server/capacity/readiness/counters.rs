//! `counters`: the write units a second on the busiest counter item of the
//! metrics table at the peak, against a partition's limit.

use super::{
    Inputs, RECORDS_PER_ORDER, against_partition, check, figure, num, partition_budget, stream_shards_at_peak,
};
use crate::model::{Fix, ReadinessCheck, Verdict};
use crate::server::capacity::planner::{self, Prewarm};
use crate::server::deploy::template::{CONSUMER_BATCH_SIZE, CONSUMER_BATCH_WINDOW_SECONDS};
use crate::server::rules::PARTITION_WRITE_UNITS;
use chrono::Timelike;

/// Bytes one counter attribute takes, about: a name such as `c1015` or
/// `m05s3` (5 or 6 bytes) and a small number (2 or 3).
pub const COUNTER_ATTRIBUTE_BYTES: u64 = 8;
/// Counter attributes per minute of the day in the minutes item: created,
/// entered and left PENDING.
const MINUTE_ATTRIBUTES: u64 = 3;

pub(super) fn counters_check(
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

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, verdict_of};
    use super::*;

    #[test]
    fn counters_at_a_late_large_peak_are_a_no_go() {
        let mut case = Case::new(8000.0, Some(100));
        case.plan.start = "2026-11-27T22:00:00Z".parse().unwrap();
        let readiness = case.assess();
        let counters = readiness.checks.iter().find(|c| c.id == "counters").unwrap();
        assert_eq!(counters.verdict, Verdict::NoGo, "{counters:#?}");
        assert_eq!(verdict_of(&Case::new(50.0, Some(10)).assess(), "counters"), Verdict::Ready);
    }
}

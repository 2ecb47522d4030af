//! `counters`: the write units a second on the busiest counter partition
//! of the metrics table at the peak, against a partition's limit. The
//! figures are the consumer's own writes (`costs::counter_load`): the
//! items its counting code writes in the sale's busiest hour, through a
//! stream shard's sub-item, at the commits the template's batching makes.
//! Every sub-item of an item shares its partition key, so a partition
//! takes every shard's commits, whatever the sub-item count; the sub-items
//! keep the shards' transactions from refusing each other.

use super::{Inputs, Sizing, against_partition, check, figure, num, partition_budget, sourced};
use crate::model::{Fix, ReadinessCheck, Verdict};
use crate::server::rules::PARTITION_WRITE_UNITS;
use chrono::Timelike;

pub(super) fn counters_check(inputs: &Inputs<'_>, sizing: Option<&Sizing>) -> ReadinessCheck {
    const ID: &str = "counters";
    const TITLE: &str = "Counter items at the peak";
    let Some(sizing) = sizing else {
        return check(ID, TITLE, Verdict::NoGo, "the planner cannot size this peak".into(), vec![], None);
    };
    let plan = inputs.plan;
    let load = &sizing.counters;
    let layout = &inputs.definitions.counters;
    let (busiest, rate) = load.busiest();
    let figures = vec![
        figure("stream records a second at the peak", num(load.records_per_second)),
        figure("stream shards at the peak (at least)", load.stream_shards.to_string()),
        figure(
            format!(
                "counter commits a second a shard (batches of up to {} records, {}-s window)",
                layout.batch_size, layout.batch_window_seconds
            ),
            num(load.commits_per_shard_second),
        ),
        figure(
            "largest counter sub-item by the busiest hour's end",
            format!("{} B ({})", load.largest_sub_item_bytes, load.largest_sub_item),
        ),
        figure(
            format!("stream shards writing one sub-item ({} sub-items an item)", layout.subs),
            load.shards_per_sub.to_string(),
        ),
        figure("write units a second on the busiest sub-item", num(load.sub_item_units_per_second)),
        sourced(
            format!("write units a second on the busiest counter partition ({busiest})"),
            num(rate),
            format!(
                "computed from the consumer's counting code and the template's batching: {}",
                load.steps.join("; ")
            ),
        ),
        figure("one partition's limit", num(PARTITION_WRITE_UNITS)),
    ];
    let verdict = against_partition(rate);
    let reason = match verdict {
        Verdict::Ready => format!("the busiest counter partition takes about {} write units a second", num(rate)),
        _ => format!(
            "the busiest counter partition ({busiest}) would take about {} write units a second, against a \
             partition's {} (budget {} with headroom)",
            num(rate),
            num(PARTITION_WRITE_UNITS),
            num(partition_budget().floor())
        ),
    };
    let end = plan.end();
    let fix = (verdict != Verdict::Ready).then(|| Fix {
        text: "rehearse the counters at this peak through the throttle proxy; if they throttle, lower the peak \
               or spread the stream over fewer shards' commits (a longer batching window)"
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
    use crate::server::capacity::costs::CounterLayout;

    fn value(case: &Case, label: &str) -> String {
        let readiness = case.assess();
        let counters = readiness.checks.into_iter().find(|c| c.id == "counters").unwrap();
        let found = counters.figures.iter().find(|f| f.label.starts_with(label));
        found.unwrap_or_else(|| panic!("no {label} in {counters:#?}")).value.clone()
    }

    #[test]
    fn the_counters_are_the_consumers_hourly_sub_items() {
        // The layout this check depends on: the busiest hour's minute item,
        // written through a shard's sub-item, about 1.5 KB by the hour's end
        // (180 attributes). A whole-day item, or another name, fails here.
        let case = Case::new(2000.0, Some(100));
        let largest = value(&case, "largest counter sub-item");
        assert!(largest.ends_with("(METRIC#MINUTES#2026-11-27 HOUR#09#S00)"), "{largest}");
        let bytes: u64 = largest.split(' ').next().unwrap().parse().unwrap();
        assert!((1200..2048).contains(&bytes), "{largest}");
        // 4,000 records/s over 4 stream shards: a commit a second each, 4 WCU.
        assert_eq!(value(&case, "counter commits a second a shard"), "1");
        assert_eq!(verdict_of(&case.assess(), "counters"), Verdict::Ready);
    }

    #[test]
    fn the_figures_follow_the_counters_layout_given() {
        // 20,000 orders/s: 40 stream shards over 16 sub-items: 3 a sub-item.
        let mut case = Case::new(20_000.0, Some(100));
        assert_eq!(value(&case, "stream shards writing one sub-item"), "3");
        let sub_item = value(&case, "write units a second on the busiest sub-item");
        let partition = value(&case, "write units a second on the busiest counter partition");
        // Four sub-items an item: ten shards on one, no edit to this check.
        case.definitions.counters = CounterLayout { subs: 4, ..CounterLayout::program() };
        assert_eq!(value(&case, "stream shards writing one sub-item"), "10");
        assert_ne!(value(&case, "write units a second on the busiest sub-item"), sub_item);
        // Every sub-item shares its item's partition: the partition's figure stays.
        assert_eq!(value(&case, "write units a second on the busiest counter partition"), partition);
        // Batches of 10 records: a hundred commits a second a shard, a no-go.
        case.definitions.counters = CounterLayout { batch_size: 10, ..CounterLayout::program() };
        assert_eq!(verdict_of(&case.assess(), "counters"), Verdict::NoGo);
    }
}

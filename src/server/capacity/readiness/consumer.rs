//! `consumer`: the stream records a second the sale makes against what the
//! consumer was measured to apply.

use super::{Inputs, RECORDS_PER_ORDER, check, figure, num, stream_shards_at_peak};
use crate::model::{Fix, ReadinessCheck, Verdict};
use crate::server::capacity::planner::{DEFAULT_HEADROOM, Prewarm};

pub(super) fn consumer_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    const ID: &str = "consumer";
    const TITLE: &str = "Stream consumer";
    let plan = inputs.plan;
    let needed = plan.peak_orders_per_second * RECORDS_PER_ORDER;
    let shards = prewarm.map_or(1, |p| stream_shards_at_peak(inputs, p));
    let mut figures = vec![figure("stream records a second at the peak", num(needed))];
    if let Some(mode) = inputs.consumer_mode {
        figures.push(figure("consumer mode (the form that counts)", mode.described()));
    }
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

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, verdict_of};
    use super::*;

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
}

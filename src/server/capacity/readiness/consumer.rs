//! `consumer`: the stream records a second the sale makes against what the
//! consumer was measured to apply, and, when the Lambda form counts, the
//! invocations its mapping runs at once against the concurrency it may use.

use super::{Inputs, RECORDS_PER_ORDER, check, figure, num, stream_shards_at_peak};
use crate::model::{ConsumerMode, Figure, Fix, ReadinessCheck, Verdict};
use crate::server::capacity::planner::{DEFAULT_HEADROOM, Prewarm};
use crate::server::deploy::template::PARALLELIZATION_FACTOR;

/// What an account's unreserved pool is unless it was raised: AWS's
/// default concurrency limit of a Region, shared by every function.
pub const ASSUMED_ACCOUNT_CONCURRENCY: u32 = 1000;

pub(super) fn consumer_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
    let mut checked = rate_check(inputs, prewarm);
    if inputs.consumer_mode.is_some_and(|m| m.mode == ConsumerMode::Lambda) {
        let shards = prewarm.map_or(1, |p| stream_shards_at_peak(inputs, p)).max(inputs.stream_shards.unwrap_or(0));
        let (figures, worse) = lambda_concurrency(shards, PARALLELIZATION_FACTOR, inputs.consumer_concurrency);
        checked.figures.extend(figures);
        if let Some((verdict, reason, fix)) = worse.filter(|(v, ..)| *v > checked.verdict) {
            (checked.verdict, checked.reason, checked.fix) = (verdict, reason, Some(fix));
        }
    }
    checked
}

/// The Lambda form's invocations at once against its concurrency: the
/// mapping runs one batch per open shard and `parallelization` per shard,
/// up to `shards` × `parallelization`. `known`: the concurrency the function
/// may use (its reserved concurrency, or the account's unreserved pool), as
/// configured (`--consumer-concurrency`); unknown, the account's default
/// pool is assumed, and said. The figures, and a verdict with its reason
/// and fix when short.
pub fn lambda_concurrency(
    shards: u32,
    parallelization: u32,
    known: Option<u32>,
) -> (Vec<Figure>, Option<(Verdict, String, Fix)>) {
    let needed = shards.max(1) * parallelization.max(1);
    let mut figures = vec![figure(
        "Lambda invocations at once (open shards at the peak × ParallelizationFactor)",
        format!("{needed} ({shards} × {parallelization})"),
    )];
    let (limit, assumed) = match known {
        Some(limit) => (limit, false),
        None => (ASSUMED_ACCOUNT_CONCURRENCY, true),
    };
    figures.push(figure(
        "concurrency the consumer function may use",
        match assumed {
            true => format!(
                "unknown: assumed {limit}, an account's default unreserved pool, shared with its other functions \
                 (say it with --consumer-concurrency)"
            ),
            false => format!("{limit} (--consumer-concurrency)"),
        },
    ));
    if limit >= needed {
        return (figures, None);
    }
    let fix = Fix {
        text: format!(
            "reserve at least {needed} concurrent executions for the consumer (or none, with an account pool over \
             {needed}), or raise the account's limit"
        ),
        command: None,
        parameter: Some(format!("ConsumerConcurrency={needed}")),
        action: None,
    };
    let reason = format!(
        "the Lambda consumer's mapping runs up to {needed} invocations at once ({shards} open shards × \
         ParallelizationFactor {parallelization}), over the {limit} it may use{}: {} shards would wait behind \
         the rest and the counters fall behind",
        if assumed { " (assumed)" } else { "" },
        needed - limit
    );
    let verdict = if assumed { Verdict::Act } else { Verdict::NoGo };
    (figures, Some((verdict, reason, fix)))
}

fn rate_check(inputs: &Inputs<'_>, prewarm: Option<&[Prewarm]>) -> ReadinessCheck {
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

    #[test]
    fn the_lambda_forms_invocations_at_once_are_checked_against_its_concurrency() {
        let (figures, short) = lambda_concurrency(32, 1, Some(10));
        let (verdict, reason, fix) = short.unwrap();
        assert_eq!(verdict, Verdict::NoGo);
        assert!(reason.contains("up to 32 invocations") && reason.contains("22 shards would wait"), "{reason}");
        assert_eq!(fix.parameter.as_deref(), Some("ConsumerConcurrency=32"));
        assert_eq!(figures[0].value, "32 (32 × 1)");
        assert!(lambda_concurrency(32, 2, Some(64)).1.is_none(), "exactly enough");
        let (figures, short) = lambda_concurrency(32, 1, None);
        assert!(short.is_none() && figures[1].value.starts_with("unknown: assumed 1000"), "{figures:?}");
        let (verdict, ..) = lambda_concurrency(600, 2, None).1.unwrap();
        assert_eq!(verdict, Verdict::Act, "over the assumed pool: said, not a no-go");
    }

    #[test]
    fn only_the_lambda_form_is_checked_for_concurrency() {
        let mut case = Case::new(100.0, Some(10));
        case.plan.consumer_records_per_second = Some(10_000.0);
        let serve = crate::model::ConsumerModeState::default_serve();
        let lambda = crate::model::ConsumerModeState { mode: ConsumerMode::Lambda, ..serve.clone() };
        let readiness = assess_with(&case, &serve, None);
        assert_eq!(verdict_of(&readiness, "consumer"), Verdict::Ready);
        let readiness = assess_with(&case, &lambda, Some(0));
        assert_eq!(verdict_of(&readiness, "consumer"), Verdict::NoGo, "no concurrency at all");
        let readiness = assess_with(&case, &lambda, None);
        let checked = readiness.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert_eq!(checked.verdict, Verdict::Ready);
        assert!(checked.figures.iter().any(|f| f.value.starts_with("unknown: assumed")), "{:?}", checked.figures);
    }

    fn assess_with(
        case: &Case,
        mode: &crate::model::ConsumerModeState,
        concurrency: Option<u32>,
    ) -> crate::model::Readiness {
        let rehearsal = case.rehearsal();
        let inputs =
            Inputs { consumer_mode: Some(mode), consumer_concurrency: concurrency, ..case.inputs(rehearsal.as_ref()) };
        super::super::assess(&inputs)
    }
}

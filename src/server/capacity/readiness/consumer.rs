//! `consumer`: the stream records a second the sale makes against what the
//! consumer was measured to apply: by the plan's rehearsal (recorded with
//! the plan), else a figure entered on the plan by hand before rehearsals
//! measured it; and, when the Lambda form counts, the invocations its
//! mapping runs at once against the concurrency it may use.

use super::fixes::shell_quote;
use super::{Inputs, RECORDS_PER_ORDER, check, figure, num, sourced, stream_shards_at_peak};
use crate::model::{ConsumerMeasurement, ConsumerMode, Figure, Fix, ReadinessCheck, SalePlan, Verdict, scale_fraction};
use crate::server::capacity::planner::{DEFAULT_HEADROOM, Prewarm};
use crate::server::deploy::template::PARALLELIZATION_FACTOR;

/// What an account's unreserved pool is unless it was raised: AWS's
/// default concurrency limit of a Region, shared by every function.
pub const ASSUMED_ACCOUNT_CONCURRENCY: u32 = 1000;

/// Where the consumer's rate comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ConsumerRate<'a> {
    /// The plan's rehearsal measured it.
    Measured(&'a ConsumerMeasurement),
    /// Someone entered it on the plan (`consumerRecordsPerSecond`).
    Entered(f64),
    Unknown,
}

impl ConsumerRate<'_> {
    /// A measurement wins over a figure entered by hand.
    pub(super) fn of(plan: &SalePlan) -> ConsumerRate<'_> {
        match (&plan.consumer_measured, plan.consumer_records_per_second) {
            (Some(measured), _) => ConsumerRate::Measured(measured),
            (None, Some(entered)) => ConsumerRate::Entered(entered),
            (None, None) => ConsumerRate::Unknown,
        }
    }

    /// "measured N records/s on <date> (scale 1/k)", or how else it is known.
    pub(super) fn described(&self) -> String {
        match self {
            ConsumerRate::Measured(m) => format!(
                "measured {} records/s on {} (scale {})",
                num(m.records_per_second),
                m.measured_at.format("%Y-%m-%d %H:%M UTC"),
                scale_fraction(m.scale)
            ),
            ConsumerRate::Entered(rate) => format!("{} records/s, entered on the plan (not measured)", num(*rate)),
            ConsumerRate::Unknown => "unknown: never measured".into(),
        }
    }

    fn source(&self) -> String {
        match self {
            ConsumerRate::Measured(m) => format!(
                "measured: the plan's rehearsal, the in-process consumer on its stream ({} shard(s)) from the end \
                 of the hold, {} records applied while it had a backlog of the run's changes{}",
                m.stream_shards,
                m.backlog_records,
                if m.caught_up { "" } else { "; it never caught up, so this is its rate still behind" }
            ),
            ConsumerRate::Entered(_) => "entered on the plan by hand: run the rehearsal to measure it".into(),
            ConsumerRate::Unknown => "the plan's rehearsal measures it".into(),
        }
    }
}

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
    let rate = ConsumerRate::of(plan);
    let measure = Fix {
        text: "run the plan's rehearsal: it measures what the consumer applies and records it with the plan".into(),
        command: Some(format!("northwind-ops ready --plan {} --rehearse", shell_quote(&plan.name))),
        parameter: None,
        action: Some("rehearse".into()),
    };
    figures.push(sourced("records a second the consumer applies", rate.described(), rate.source()));
    // What is compared: a measured rate per stream shard (both forms read
    // a stream's shards side by side: the Lambda one batch per shard at
    // once, the in-process consumer every shard each pass, and DynamoDB
    // Streams caps each shard's reads, not the stream's); a rate entered
    // by hand is the whole stream's.
    let (have, want, per) = match rate {
        ConsumerRate::Measured(m) => {
            let lag = match (m.lag_p50_ms, m.lag_p95_ms) {
                (Some(p50), Some(p95)) => format!("{} ms / {} ms", num(p50), num(p95)),
                _ => "unknown: no batch applied once caught up".into(),
            };
            figures.push(figure("change → counter once caught up, p50 / p95", lag));
            let (have, want) =
                (m.records_per_second / f64::from(m.stream_shards.max(1)), needed / f64::from(shards.max(1)));
            figures.push(sourced(
                "records a second a stream shard: measured → the peak's",
                format!("{} → {} ({} shard(s) at the peak)", num(have.round()), num(want.round()), shards),
                "the measured rate over the rehearsal's stream shards; the peak's records over its stream shards",
            ));
            (have, want, " a stream shard")
        }
        ConsumerRate::Entered(rate) => (rate, needed, ""),
        ConsumerRate::Unknown => {
            let reason = "unknown: the consumer's rate was never measured for this plan (its rehearsal measures it)";
            return check(ID, TITLE, Verdict::Act, reason.to_string(), figures, Some(measure));
        }
    };
    let headroom = want * (1.0 + DEFAULT_HEADROOM);
    figures.push(figure(format!("wanted{per}, with headroom"), num(headroom.round())));
    let said = format!("consumer: {}", rate.described());
    let peak = format!("the peak's {} records/s{per}", num(want.round()));
    if have < want {
        let reason = format!(
            "{said} ({}{per}), under {peak} ({} shard(s)): the counters and the live dashboard would fall behind",
            num(have.round()),
            shards
        );
        let fix = Fix {
            text: format!("reserve at least one consumer per stream shard at the peak ({shards}) and rehearse again"),
            command: measure.command.clone(),
            parameter: Some(format!("ConsumerConcurrency={}", shards.max(10))),
            action: Some("rehearse".into()),
        };
        return check(ID, TITLE, Verdict::NoGo, reason, figures, Some(fix));
    }
    if have < headroom {
        let reason = format!("{said}: enough for {peak}, without the headroom of {}", num(headroom.round()));
        return check(ID, TITLE, Verdict::Act, reason, figures, Some(measure));
    }
    let reason = format!("{said}, over {peak} with headroom ({})", num(headroom.round()));
    check(ID, TITLE, Verdict::Ready, reason, figures, None)
}

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, verdict_of};
    use super::*;

    fn measured(rate: f64) -> ConsumerMeasurement {
        ConsumerMeasurement {
            records_per_second: rate,
            records: 2_400,
            backlog_records: 1_100,
            caught_up: true,
            lag_p50_ms: Some(180.0),
            lag_p95_ms: Some(420.0),
            stream_shards: 1,
            scale: 0.02,
            measured_at: "2026-12-07T20:15:00Z".parse().unwrap(),
        }
    }

    #[test]
    fn a_consumer_never_measured_is_unknown_and_a_slow_one_a_no_go() {
        let mut case = Case::new(100.0, Some(10));
        case.plan.consumer_records_per_second = None;
        let readiness = case.assess();
        let consumer = readiness.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert_eq!(consumer.verdict, Verdict::Act);
        assert!(consumer.reason.starts_with("unknown"), "{}", consumer.reason);
        assert_eq!(consumer.fix.as_ref().unwrap().action.as_deref(), Some("rehearse"), "the rehearsal measures it");
        case.plan.consumer_records_per_second = Some(150.0);
        assert_eq!(verdict_of(&case.assess(), "consumer"), Verdict::NoGo);
        case.plan.consumer_records_per_second = Some(250.0);
        assert_eq!(verdict_of(&case.assess(), "consumer"), Verdict::Act, "no headroom");
    }

    #[test]
    fn a_measured_rate_wins_over_one_entered_and_says_when_and_at_what_scale() {
        let mut case = Case::new(100.0, Some(10));
        case.plan.consumer_records_per_second = Some(10_000.0);
        case.plan.consumer_measured = Some(measured(150.0));
        let readiness = case.assess();
        let consumer = readiness.checks.iter().find(|c| c.id == "consumer").unwrap();
        assert_eq!(consumer.verdict, Verdict::NoGo, "the measure, not the hand's figure: {consumer:#?}");
        assert!(
            consumer.reason.starts_with("consumer: measured 150 records/s on 2026-12-07 20:15 UTC (scale 1/50)"),
            "{}",
            consumer.reason
        );
        let rate = consumer.figures.iter().find(|f| f.label.starts_with("records a second")).unwrap();
        assert!(rate.source.as_deref().unwrap().starts_with("measured: the plan's rehearsal"), "{rate:?}");
        let share = consumer.figures.iter().find(|f| f.label.contains("a stream shard")).unwrap();
        assert!(share.value.starts_with("150 → "), "{share:?}");
        case.plan.consumer_measured = Some(measured(1_000.0));
        assert_eq!(verdict_of(&case.assess(), "consumer"), Verdict::Ready);
        assert_eq!(scale_fraction(1.0), "1");
        assert_eq!(scale_fraction(0.2), "1/5");
        assert_eq!(crate::model::consumer_summary(&case.plan), "1000 records/s on 2026-12-07 (scale 1/50)");
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

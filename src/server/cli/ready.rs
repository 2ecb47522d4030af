//! `ready --plan NAME [--json] [--write-shards] [--rehearse]`: a sale plan's go/no-go,
//! each check with its verdict, figures and fix, through the same service
//! as `GET /api/ready`. Exits 0 when ready, 3 when something must be done
//! first (act), 2 on a no-go (1 is any error).

use super::CliError;
use crate::model::{Actor, Readiness, Rehearsal, Role, Verdict};
use crate::server::auth::Principal;
use crate::server::cli::config::ReadyArgs;
use crate::server::cursor::CursorCodec;
use crate::server::service::Service;
use crate::server::sim::plan_rehearsal::{ProxyRehearser, RehearsalBudget};
use crate::server::store::Store;
use crate::server::store::config::StoreConfig;
use crate::server::stream::live::{LiveHub, LiveLimits};
use std::sync::Arc;

/// Exit codes of `ready`: what a script branches on.
pub const EXIT_NO_GO: u8 = 2;
pub const EXIT_ACT: u8 = 3;

pub(super) async fn run_ready(config: &StoreConfig, store: Store, args: &ReadyArgs) -> Result<(), CliError> {
    // `ready` signs no cursor: a throwaway secret, and nothing written to disk.
    let secret = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let live = LiveHub::new(LiveLimits { total: 0, per_client: 0 });
    let service = Service::new(Arc::new(store), Arc::new(CursorCodec::new(secret.into_bytes())), live)
        .with_rehearser(Arc::new(ProxyRehearser::new(config.clone(), RehearsalBudget::default())));
    // The command line holds the store's own credentials.
    let by = Principal { actor: Actor::cli("ready"), role: Role::Admin, client: None };
    if args.write_shards {
        let written = service.write_sale_shards(&args.plan, &by).await.map_err(api_error)?;
        for day in &written.days {
            eprintln!("{}: shard count {} ({})", day.date, written.shards, day.outcome);
        }
    }
    if args.rehearse {
        eprintln!("rehearsing {} ...", args.plan);
        let rehearsal = service.run_rehearsal(&args.plan, &by).await.map_err(api_error)?;
        eprint!("{}", rehearsal_text(&rehearsal));
    }
    let readiness = service.readiness(Some(&args.plan)).await.map_err(api_error)?;
    if args.json {
        let json = serde_json::to_string_pretty(&readiness).map_err(|e| CliError::Usage(e.to_string()))?;
        println!("{json}");
    } else {
        print!("{}", text(&readiness));
    }
    match readiness.verdict {
        Verdict::Ready => Ok(()),
        verdict => Err(CliError::NotReady { plan: args.plan.clone(), verdict }),
    }
}

/// The service's error as the command line says it.
fn api_error(err: crate::server::error::ApiError) -> CliError {
    CliError::Usage(err.to_string())
}

/// A rehearsal's result as text.
pub fn rehearsal_text(rehearsal: &Rehearsal) -> String {
    let shape = &rehearsal.shape;
    let mut out = format!(
        "rehearsal of {}: {} at {} shard(s), {:.1} orders a second at the peak (the plan's {} × {}), \
         {} s ramp, {} s hold, {} s decay\n",
        rehearsal.plan,
        rehearsal.verdict.map_or("running", Verdict::as_str).to_uppercase(),
        shape.shards,
        shape.peak_orders_per_second,
        rehearsal.plan_peak_orders_per_second,
        shape.scale,
        shape.ramp_seconds,
        shape.hold_seconds,
        shape.decay_seconds,
    );
    out.push_str(&format!("  {}\n", rehearsal.reason));
    if let Some(f) = &rehearsal.figures {
        out.push_str(&format!(
            "  orders/s target (mean) {:.1}, achieved {:.1}; {} created, {} failed; {} attempts throttled\n",
            f.target_orders_per_second.unwrap_or(0.0),
            f.achieved_orders_per_second,
            f.created,
            f.failed,
            f.throttled
        ));
        for t in &f.throttles {
            out.push_str(&format!("    {} on {}: {}\n", t.reason, t.place, t.total));
        }
        let p99 = f.write_p99_ms.map_or("none written".to_string(), |ms| format!("{ms:.0} ms"));
        out.push_str(&format!(
            "  write p99 {p99}; dashboard reads {} answered, {} failed\n",
            f.dashboard_answered, f.dashboard_failed
        ));
        match &f.consumer {
            Some(c) => out.push_str(&format!(
                "  consumer (in-process): {:.0} records/s while behind ({} records{}), change → counter p50 {} /                  p95 {}; recorded with the plan\n",
                c.records_per_second,
                c.backlog_records,
                if c.caught_up { "" } else { ", never caught up" },
                c.lag_p50_ms.map_or("unknown".into(), |ms| format!("{ms:.0} ms")),
                c.lag_p95_ms.map_or("unknown".into(), |ms| format!("{ms:.0} ms")),
            )),
            None => out.push_str("  consumer: applied nothing, not measured\n"),
        }
    }
    out
}

/// The report as text: the go/no-go, then each check.
pub fn text(readiness: &Readiness) -> String {
    let plan = &readiness.plan;
    let mut out = format!(
        "Sale plan {}: {} orders a second at the peak, from {} UTC (ramp {} min, hold {} min, decay {} min), \
         items of {} bytes\n",
        plan.name,
        plan.peak_orders_per_second,
        plan.start.format("%Y-%m-%d %H:%M"),
        plan.ramp_minutes,
        plan.hold_minutes,
        plan.decay_minutes,
        plan.item_bytes
    );
    out.push_str(&format!("GO/NO-GO: {}\n", readiness.verdict.as_str().to_uppercase()));
    for check in &readiness.checks {
        out.push_str(&format!("\n[{}] {}: {}\n", check.verdict, check.title, check.reason));
        for figure in &check.figures {
            out.push_str(&format!("    {}: {}\n", figure.label, figure.value));
        }
        if let Some(fix) = &check.fix {
            out.push_str(&format!("  fix: {}\n", fix.text));
            if let Some(command) = &fix.command {
                out.push_str(&format!("    command: {command}\n"));
            }
            if let Some(parameter) = &fix.parameter {
                out.push_str(&format!("    template parameters: {parameter}\n"));
            }
            match fix.action.as_deref() {
                Some("write-shards") => {
                    out.push_str("    or: POST /api/sales/{name}/shards, or the Sales page's button\n")
                }
                Some("rehearse") => {
                    out.push_str("    or: POST /api/sales/{name}/rehearsal, or the Sales page's button\n")
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ConsumerMeasurement, RehearsalFigures, RehearsalShape, RehearsalState};

    #[test]
    fn a_rehearsals_text_says_what_the_consumer_applied() {
        let at = "2026-12-07T20:00:00Z".parse().unwrap();
        let consumer = ConsumerMeasurement {
            records_per_second: 1_766.4,
            records: 900,
            backlog_records: 640,
            caught_up: true,
            lag_p50_ms: Some(480.0),
            lag_p95_ms: Some(990.0),
            stream_shards: 1,
            scale: 0.02,
            measured_at: at,
        };
        let figures = RehearsalFigures {
            target_orders_per_second: Some(24.0),
            achieved_orders_per_second: 24.0,
            created: 190,
            failed: 0,
            throttled: 0,
            throttles: vec![],
            write_p50_ms: Some(4.0),
            write_p99_ms: Some(30.0),
            dashboard_answered: 40,
            dashboard_failed: 0,
            dashboard_p99_ms: Some(20.0),
            dashboard_readable: true,
            metered: vec![],
            consumer: Some(consumer),
            stream_records_per_change: None,
        };
        let mut rehearsal = Rehearsal {
            plan: "gala".into(),
            plan_updated_at: at,
            plan_peak_orders_per_second: 2000.0,
            started_at: at,
            finished_at: Some(at),
            by: "alice".into(),
            state: RehearsalState::Done,
            verdict: Some(Verdict::Ready),
            reason: "held".into(),
            shape: RehearsalShape {
                scale: 0.02,
                shards: 10,
                peak_orders_per_second: 40.0,
                base_orders_per_second: 4.0,
                ramp_seconds: 3,
                hold_seconds: 10,
                decay_seconds: 7,
                tail_seconds: 3,
                writers: 32,
                written_by: Default::default(),
            },
            figures: Some(figures),
        };
        let text = rehearsal_text(&rehearsal);
        assert!(
            text.contains(
                "consumer (in-process): 1766 records/s while behind (640 records), change → counter p50 480 ms"
            ),
            "{text}"
        );
        rehearsal.figures.as_mut().unwrap().consumer = None;
        assert!(rehearsal_text(&rehearsal).contains("consumer: applied nothing, not measured"));
    }
}

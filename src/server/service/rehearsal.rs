//! A sale plan's rehearsal: its shape, scaled down, run through the
//! throttle proxy at the sale day's shard count, and the result filed with
//! the plan beside the one before. The running is not this layer's: the
//! service holds a `Rehearser` (the simulation's, handed in by whoever
//! builds the service for `serve` or `ready --rehearse`), so the service
//! never depends on the simulation. One rehearsal of a plan at a time, held
//! by a claim in the table (a second start is a conflict). The run's
//! progress, each second, and its end are pushed on the live hub for the
//! Sales pages following the plan.

use super::Service;
use crate::model::{
    ConsumerMeasurement, Permission, Rehearsal, RehearsalEvent, RehearsalFigures, RehearsalProgress, RehearsalShape,
    RehearsalState, Rehearsals, SalePlan, Verdict,
};
use crate::server::auth::Principal;
use crate::server::capacity::readiness;
use crate::server::error::ApiError;
use crate::server::store::error::StoreError;
use chrono::{SubsecRound, Utc};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A claim older than this belongs to a run whose server died: a new run
/// may take it over (a rehearsal lasts well under a minute).
pub const REHEARSAL_STALE: chrono::Duration = chrono::Duration::minutes(10);

/// A rehearsal under way: its figures, or why it could not run.
pub type RehearsalRun = Pin<Box<dyn Future<Output = Result<RehearsalFigures, String>> + Send>>;

/// Runs a plan's shape through the throttle proxy.
pub trait Rehearser: Send + Sync {
    /// The plan's shape as this rehearser runs it, at `shards` GSI2 shards:
    /// scaled down in time and rate, the partition limits by the same factor.
    fn shape(&self, plan: &SalePlan, shards: u32) -> RehearsalShape;
    /// Runs the shape on a scratch store of its own.
    fn run(&self, shape: RehearsalShape) -> RehearsalRun;
}

impl Service {
    /// Runs rehearsals with `rehearser` (`serve` and `ready --rehearse` do;
    /// without one, a start is refused as unavailable here).
    pub fn with_rehearser(mut self, rehearser: Arc<dyn Rehearser>) -> Self {
        self.rehearser = Some(rehearser);
        self
    }

    /// The plan's rehearsals: the one running, the latest and the previous.
    pub async fn rehearsals(&self, name: &str) -> Result<Rehearsals, ApiError> {
        self.sale_plan(name).await?;
        Ok(self.store.rehearsals(name, stale_before_ms()).await?)
    }

    /// Starts a rehearsal of the plan in the background (ops and admin):
    /// the running record, at once. A conflict while one runs.
    pub async fn start_rehearsal(&self, name: &str, by: &Principal) -> Result<Rehearsal, ApiError> {
        let (running, rehearser) = self.claim_rehearsal(name, by).await?;
        let (service, handed) = (self.clone(), running.clone());
        tokio::spawn(async move {
            if let Err(err) = service.finish_rehearsal(handed, rehearser).await {
                tracing::warn!(error = %err, "a rehearsal's result could not be filed");
            }
        });
        Ok(running)
    }

    /// Runs a rehearsal of the plan to its end (ops and admin).
    pub async fn run_rehearsal(&self, name: &str, by: &Principal) -> Result<Rehearsal, ApiError> {
        let (running, rehearser) = self.claim_rehearsal(name, by).await?;
        self.finish_rehearsal(running, rehearser).await
    }

    /// Checks who asks, works out the shape, and claims the plan's slot.
    async fn claim_rehearsal(&self, name: &str, by: &Principal) -> Result<(Rehearsal, Arc<dyn Rehearser>), ApiError> {
        by.require(Permission::PlanSales)?;
        let rehearser = self.rehearser.clone().ok_or_else(|| {
            ApiError::Busy(
                "this server runs no rehearsals: `serve` does, and so does `northwind-ops ready --plan NAME \
                 --rehearse`"
                    .into(),
            )
        })?;
        let plan = self.sale_plan(name).await?;
        let shards = self.design_shards(&plan).await?;
        let running = Rehearsal {
            plan: plan.name.clone(),
            plan_updated_at: plan.updated_at,
            plan_peak_orders_per_second: plan.peak_orders_per_second,
            // As stored (milliseconds): what the claim is matched on.
            started_at: Utc::now().trunc_subsecs(3),
            finished_at: None,
            by: by.actor.name.clone(),
            state: RehearsalState::Running,
            verdict: None,
            reason: "running".into(),
            shape: rehearser.shape(&plan, shards),
            figures: None,
        };
        if !self.store.start_rehearsal(&running, stale_before_ms()).await? {
            return Err(StoreError::Conflict(format!(
                "a rehearsal of {:?} is running already: wait for its result",
                plan.name
            ))
            .into());
        }
        tracing::info!(plan = %plan.name, shards, scale = running.shape.scale, "rehearsal started");
        let detail = format!("{shards} shards, scale {}", running.shape.scale);
        self.record(crate::model::AuditKind::RehearsalStarted, by, &plan.name, Some(detail)).await;
        Ok((running, rehearser))
    }

    /// Runs the claimed rehearsal and files its result (a run that could
    /// not run is filed too: failed, and why).
    async fn finish_rehearsal(
        &self,
        mut rehearsal: Rehearsal,
        rehearser: Arc<dyn Rehearser>,
    ) -> Result<Rehearsal, ApiError> {
        // Held until the result is filed and pushed: a page that connects
        // meanwhile is told this instance will push the end.
        let _rehearsing = self.live.rehearsing(&rehearsal.plan);
        let progress = self.push_progress(&rehearsal);
        let deadline = rehearsal_deadline(&rehearsal.shape);
        let result = tokio::time::timeout(deadline, rehearser.run(rehearsal.shape.clone()))
            .await
            .unwrap_or_else(|_| Err(format!("the rehearsal did not finish within {} s: stopped", deadline.as_secs())));
        drop(progress);
        rehearsal.finished_at = Some(Utc::now().trunc_subsecs(3));
        match result {
            Ok(figures) => {
                self.record_consumer(&rehearsal.plan, figures.consumer.as_ref()).await;
                let (verdict, reason) = readiness::rehearsal_verdict(&figures);
                rehearsal.state = RehearsalState::Done;
                rehearsal.verdict = Some(verdict);
                rehearsal.reason = reason;
                rehearsal.figures = Some(figures);
            }
            Err(why) => {
                rehearsal.state = RehearsalState::Failed;
                rehearsal.verdict = Some(Verdict::NoGo);
                rehearsal.reason = why;
            }
        }
        tracing::info!(plan = %rehearsal.plan, verdict = ?rehearsal.verdict, reason = %rehearsal.reason, "rehearsal done");
        let filed = self.store.finish_rehearsal(&rehearsal).await;
        // Pushed even when filing failed: the pages re-read what is stored.
        self.live.send_rehearsal(&RehearsalEvent::Finished(Box::new(rehearsal.clone())));
        if !filed? {
            tracing::warn!(plan = %rehearsal.plan, "the plan was deleted, or its claim taken over, during the rehearsal");
        }
        Ok(rehearsal)
    }

    /// Pushes the run's progress each second until the handle is dropped.
    fn push_progress(&self, running: &Rehearsal) -> tokio_util::task::AbortOnDropHandle<()> {
        let (live, running) = (self.live.clone(), running.clone());
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tick.tick().await;
                live.send_rehearsal(&RehearsalEvent::Progress(progress_of(&running, Utc::now())));
            }
        }))
    }

    /// Records what the run measured of the consumer with the plan, where
    /// the consumer check reads it (a plan deleted meanwhile: nothing). A
    /// failure is logged: the run's result is still filed (it holds the
    /// figure too), and its claim freed.
    async fn record_consumer(&self, plan: &str, measured: Option<&ConsumerMeasurement>) {
        let Some(measured) = measured else { return };
        match self.store.record_consumer_measurement(plan, measured).await {
            Ok(true) => tracing::info!(plan, records_per_second = measured.records_per_second, "consumer measured"),
            Ok(false) => tracing::warn!(plan, "the plan was deleted during the rehearsal: its consumer's rate is lost"),
            Err(err) => tracing::warn!(plan, error = %err, "the consumer's measured rate could not be recorded"),
        }
    }

    /// The shard count the sale's days will have (what a rehearsal tries).
    pub(super) async fn design_shards(&self, plan: &SalePlan) -> Result<u32, ApiError> {
        let needed = readiness::shards_needed(plan, self.gsi2_entry_bytes()?)
            .map_err(|e| ApiError::BadRequest(format!("peakOrdersPerSecond {e}")))?;
        let days = plan.days();
        let recorded = self.store.recorded_shards_now(&days).await?;
        let recorded: Vec<_> = days.iter().map(|d| (*d, recorded.get(d).copied().flatten())).collect();
        Ok(readiness::design_shards(&recorded, needed, self.store.shards()))
    }
}

/// Where the `running` rehearsal is at `now`.
fn progress_of(running: &Rehearsal, now: chrono::DateTime<Utc>) -> RehearsalProgress {
    let elapsed = (now - running.started_at).num_seconds().max(0) as u64;
    RehearsalProgress {
        plan: running.plan.clone(),
        started_at: running.started_at,
        elapsed_seconds: elapsed,
        seconds: running.shape.seconds(),
        phase: running.shape.phase_at(elapsed),
    }
}

/// How long a run of `shape` may take before it is stopped and filed as
/// failed: three times its planned length and a minute, so a run that hangs
/// frees its claim long before the claim goes stale.
fn rehearsal_deadline(shape: &RehearsalShape) -> std::time::Duration {
    std::time::Duration::from_secs(shape.seconds().saturating_mul(3).saturating_add(60))
}

/// Claims made before this (milliseconds since the epoch) are stale.
pub(super) fn stale_before_ms() -> i64 {
    (Utc::now() - REHEARSAL_STALE).timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> RehearsalShape {
        RehearsalShape {
            scale: 0.02,
            shards: 12,
            peak_orders_per_second: 40.0,
            base_orders_per_second: 4.0,
            ramp_seconds: 3,
            hold_seconds: 10,
            decay_seconds: 7,
            tail_seconds: 3,
            writers: 32,
            written_by: Default::default(),
        }
    }

    #[test]
    fn a_hung_run_is_stopped_well_before_its_claim_goes_stale() {
        let shape = shape();
        let deadline = rehearsal_deadline(&shape);
        assert_eq!(deadline.as_secs(), 23 * 3 + 60);
        assert!(chrono::Duration::from_std(deadline).unwrap() < REHEARSAL_STALE / 2);
    }

    #[test]
    fn progress_names_the_phase_the_load_is_in_then_filing() {
        use crate::model::RehearsalPhase::*;
        let started_at: chrono::DateTime<Utc> = "2026-11-27T09:00:00Z".parse().unwrap();
        let running = Rehearsal {
            plan: "gala".into(),
            plan_updated_at: started_at,
            plan_peak_orders_per_second: 2000.0,
            started_at,
            finished_at: None,
            by: "alice".into(),
            state: RehearsalState::Running,
            verdict: None,
            reason: "running".into(),
            shape: shape(),
            figures: None,
        };
        // Ramp 3 s, hold 10, decay 7, tail 3: 23 s of load.
        let at = |s: i64| progress_of(&running, started_at + chrono::Duration::seconds(s));
        let phases: Vec<_> = [0, 2, 3, 12, 13, 19, 20, 22, 23, 40].into_iter().map(|s| at(s).phase).collect();
        assert_eq!(phases, [Ramp, Ramp, Hold, Hold, Decay, Decay, Tail, Tail, Filing, Filing]);
        assert_eq!((at(12).elapsed_seconds, at(12).seconds), (12, 23));
        assert_eq!(at(-5).elapsed_seconds, 0, "a clock a little behind the start's");
    }
}

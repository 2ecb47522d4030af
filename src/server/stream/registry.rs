//! Who consumes the stream. The in-process consumer (`serve`, `consume`)
//! and the Lambda function (`lambda`) apply the same records to the same
//! counters. Which of them counts is one decision, recorded in the metrics
//! table (`Store::consumer_mode`: `serve` or `lambda`, switched only by
//! `northwind-ops consumer use` or `PUT /api/consumer/mode`, with a
//! compare-and-set on its version). No record means `serve`, until the
//! Lambda function records `lambda` at its first batch (a deployment with a
//! Lambda consumer is one that means it to count).
//!
//! Each form reads the mode and counts only when it is its own:
//! - the in-process consumer reads it every beat (`IN_PROCESS_BEAT`, 5 s)
//!   and, when it is `lambda`, stops (handing its leases over) and says
//!   "standing down: mode is lambda" (the log, `freshness.consumerRefused`);
//!   `serve` goes on serving the pages; it starts again when the mode is
//!   `serve` again;
//! - the Lambda function reads it at most every `MODE_FRESH` and, when it is
//!   `serve`, commits nothing and reports the whole batch failed: the event
//!   source mapping keeps the shard where it is and delivers the records
//!   again, so nothing is skipped. The shard checkpoints both forms move
//!   (with a condition on where each found it) decide where the other form
//!   resumes: a record at or before the checkpoint is not counted again.
//!
//! Each form still records a heartbeat in the registry (`CONSUMERS`), for
//! display, and in-process consumers count their peers by theirs.

use crate::model::{Actor, AuditKind, ConsumerMode, ConsumerModeState, SecurityEvent};
use crate::server::store::error::StoreError;
use crate::server::store::{ConsumerEntry, Store};
use crate::server::stream::consumer::Consumer;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The registry's mode of the consumer inside `serve` or `consume`.
pub const IN_PROCESS: &str = "in-process";
/// The registry's mode of the Lambda function.
pub const LAMBDA: &str = "lambda";
/// How often a Lambda environment records itself, at most.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// How often an in-process consumer records itself, counts its peers and
/// looks for a Lambda consumer: within a lease (15 s), so that the count of
/// peers the shards are shared among follows one that stops or dies about as
/// fast as its leases expire.
pub const IN_PROCESS_BEAT: Duration = Duration::from_secs(5);
/// How long after its last heartbeat an in-process consumer counts as live.
pub const IN_PROCESS_LIVE: Duration = Duration::from_secs(15);

/// The in-process consumers live at `now`, `instance` (the asker) included
/// whether or not it has recorded itself yet.
pub fn live_in_process(entries: &[ConsumerEntry], instance: &str, now: DateTime<Utc>) -> usize {
    let live = chrono::Duration::from_std(IN_PROCESS_LIVE).unwrap_or(chrono::Duration::seconds(15));
    let others = entries.iter().filter(|e| e.mode == IN_PROCESS && e.instance != instance && now - e.seen_at < live);
    others.count() + 1
}

/// How long the Lambda function trusts the mode it last read: a switch
/// takes effect in the function within this (in `serve` within a beat).
pub const MODE_FRESH: Duration = Duration::from_secs(2);

/// Why an in-process consumer does not count while the mode is `lambda`.
pub fn standing_down(state: &ConsumerModeState) -> String {
    let by = match (&state.changed_by, state.changed_at) {
        (Some(by), Some(at)) => format!(" (recorded by {by} at {})", at.format("%Y-%m-%d %H:%M:%S UTC")),
        _ => String::new(),
    };
    format!(
        "standing down: mode is {}{by}; the Lambda function counts, and `northwind-ops consumer use serve` makes \
         this instance count again",
        state.mode
    )
}

/// Runs `consumer` (an in-process one, registered as `instance`) while the
/// recorded mode is `serve`, until `stop`: every `every`, reads the mode
/// and the registry, then tells the consumer how many in-process consumers
/// share the shards and records this instance's heartbeat, or stops the
/// consumer (handing its leases over) and records why in its status. It
/// starts only after a read found the mode `serve`: a store that cannot be
/// read is a store the consumer could not write to either.
pub async fn run_in_process(
    consumer: Arc<Consumer>,
    store: Arc<Store>,
    instance: String,
    every: Duration,
    stop: CancellationToken,
) {
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    loop {
        match futures::try_join!(store.consumer_mode(), store.consumers()) {
            Ok((mode, _)) if mode.mode == ConsumerMode::Lambda => {
                let why = standing_down(&mode);
                if consumer.status().refused.as_deref() != Some(why.as_str()) {
                    tracing::warn!("{why}");
                }
                consumer.update_status(|status| status.refused = Some(why));
                if let Some((halt, task)) = running.take() {
                    halt.cancel();
                    let _ = task.await;
                }
            }
            Ok((_, entries)) => {
                let now = Utc::now();
                consumer.set_instances(live_in_process(&entries, &instance, now));
                let mut was_refused = false;
                consumer.update_status(|status| was_refused = status.refused.take().is_some());
                if was_refused {
                    tracing::info!("the consumer mode is serve again: consuming the stream from the checkpoints");
                }
                if running.is_none() {
                    let (halt, running_consumer) = (stop.child_token(), consumer.clone());
                    let until = halt.clone().cancelled_owned();
                    running = Some((halt, tokio::spawn(async move { running_consumer.run(until).await })));
                }
                if let Err(err) = store.record_consumer(IN_PROCESS, &instance, now).await {
                    tracing::warn!(error = %err, "the consumer registry: this instance's heartbeat failed");
                }
            }
            Err(err) => tracing::warn!(error = %err, "the consumer mode could not be read; checking again"),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
    if let Some((halt, task)) = running {
        halt.cancel();
        let _ = task.await;
        // Its leases were handed over: its peers need not wait for its
        // entry to go stale before they take them.
        if let Err(err) = store.forget_consumer(IN_PROCESS, &instance).await {
            tracing::warn!(error = %err, "the consumer registry: this instance's entry stays until it goes stale");
        }
    }
}

/// Records `mode`, from `expected` (the version the caller read; `None`:
/// the one read now), as `actor`: the one way the mode changes (`consumer
/// use`, `PUT /api/consumer/mode`). A mode already recorded is left as it is
/// (no new version). A stale `expected`, or another switch between the read
/// and the write, is a `Conflict` naming what is recorded now.
pub async fn switch_mode(
    store: &Store,
    mode: ConsumerMode,
    expected: Option<u64>,
    actor: &Actor,
    client: Option<IpAddr>,
) -> Result<ConsumerModeState, StoreError> {
    let now = store.consumer_mode().await?;
    let expected = expected.unwrap_or(now.version);
    if expected == now.version && now.recorded && now.mode == mode {
        return Ok(now);
    }
    let switched = store.switch_consumer_mode(mode, expected, &actor.name, Utc::now()).await?;
    audit_mode_switch(&now, &switched, &actor.name);
    let detail =
        format!("from {} (version {}) to {} (version {})", now.mode, now.version, switched.mode, switched.version);
    let event = SecurityEvent::new(AuditKind::ConsumerModeChanged, actor, client)
        .subject(switched.mode.as_str())
        .detail(detail);
    store.record_event_or_log(&event).await;
    Ok(switched)
}

/// A mode switch's log line (target `audit`). A person's switch is also a
/// security event in the audit trail (`switch_mode`); the Lambda's claim of
/// an unrecorded mode at its first batch is the deployment's, not a
/// person's, and is logged only (the function appends nothing to the trail).
pub fn audit_mode_switch(before: &ConsumerModeState, after: &ConsumerModeState, actor: &str) {
    tracing::info!(
        target: "audit",
        actor,
        from = %before.mode,
        from_recorded = before.recorded,
        to = %after.mode,
        version = after.version,
        "consumer mode switched"
    );
}

/// A Lambda environment's heartbeat in the registry: at most one write per
/// `HEARTBEAT`, however many batches it handles, and at once when it first
/// applies records guarded by markers (reconciliation refuses to judge
/// counters such records moved without a checkpoint: `reconcile::refusal`).
pub struct LambdaBeat {
    instance: String,
    /// When it last beat, and whether that beat said markers.
    last: Mutex<Option<(Instant, bool)>>,
}

impl LambdaBeat {
    /// Registered under the function's name (Lambda sets
    /// `AWS_LAMBDA_FUNCTION_NAME`), else `lambda`.
    pub fn from_env() -> Self {
        let instance = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok().filter(|n| !n.is_empty());
        Self { instance: instance.unwrap_or_else(|| LAMBDA.to_string()), last: Mutex::new(None) }
    }

    /// Records the heartbeat when one is due; `markers`: this batch's
    /// records are applied guarded by markers. A failure is logged, never
    /// the batch's: the records are applied all the same.
    pub async fn beat(&self, store: &Store, markers: bool) {
        {
            let mut last = self.last.lock();
            if last.is_some_and(|(at, said)| at.elapsed() < HEARTBEAT && (said || !markers)) {
                return;
            }
            *last = Some((Instant::now(), markers));
        }
        let result = match markers {
            true => store.record_consumer_with_markers(LAMBDA, &self.instance, Utc::now()).await,
            false => store.record_consumer(LAMBDA, &self.instance, Utc::now()).await,
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, "the consumer registry: the Lambda consumer's heartbeat failed");
            *self.last.lock() = None;
        }
    }
}

/// The Lambda function's reading of the mode: whether a batch may be
/// counted, read again at most every `MODE_FRESH`.
pub struct LambdaGate {
    instance: String,
    last: Mutex<Option<(Instant, ConsumerMode)>>,
}

impl LambdaGate {
    /// Records the mode under the function's name when it claims it.
    pub fn from_env() -> Self {
        Self { instance: LambdaBeat::from_env().instance, last: Mutex::new(None) }
    }

    /// The mode as recorded, or as last read within `MODE_FRESH`. With no
    /// mode recorded, the function records `lambda` (only where none is:
    /// a switch made meanwhile wins) and counts.
    pub async fn mode(&self, store: &Store) -> Result<ConsumerMode, StoreError> {
        if let Some((at, mode)) = *self.last.lock()
            && at.elapsed() < MODE_FRESH
        {
            return Ok(mode);
        }
        let mut state = store.consumer_mode().await?;
        if !state.recorded {
            match store.switch_consumer_mode(ConsumerMode::Lambda, 0, &self.instance, Utc::now()).await {
                Ok(claimed) => {
                    tracing::info!(function = self.instance, "no consumer mode recorded: recorded lambda");
                    audit_mode_switch(&state, &claimed, &self.instance);
                    state = claimed;
                }
                Err(StoreError::Conflict(_)) => state = store.consumer_mode().await?,
                Err(err) => return Err(err),
            }
        }
        *self.last.lock() = Some((Instant::now(), state.mode));
        Ok(state.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mode: &str, instance: &str, seen_at: DateTime<Utc>) -> ConsumerEntry {
        ConsumerEntry { mode: mode.into(), instance: instance.into(), seen_at }
    }

    #[test]
    fn only_live_in_process_peers_share_the_shards_and_a_lambda_is_none_of_them() {
        let now = Utc::now();
        let entries = vec![
            entry(IN_PROCESS, "host-1", now),
            entry(IN_PROCESS, "host-2", now - chrono::Duration::seconds(60)),
            entry(LAMBDA, "consumer", now),
        ];
        assert_eq!(live_in_process(&entries, "host-3", now), 2, "host-1 and the asker");
        assert_eq!(live_in_process(&entries, "host-1", now), 1);
    }

    #[test]
    fn standing_down_says_the_mode_who_recorded_it_and_how_to_switch_back() {
        let mut state = ConsumerModeState::default_serve();
        state.mode = ConsumerMode::Lambda;
        state.changed_by = Some("alice".into());
        state.changed_at = Some(Utc::now());
        let why = standing_down(&state);
        assert!(why.starts_with("standing down: mode is lambda") && why.contains("alice"), "{why}");
        assert!(why.contains("consumer use serve"), "{why}");
    }
}

//! Who consumes the stream. The in-process consumer (`serve`, `consume`)
//! and the Lambda function (`lambda`) apply the same records to the same
//! counters, each guarding against a second application its own way
//! (shard checkpoints; per-record markers): run side by side, each applies
//! every record once, so every change is counted twice. Each therefore
//! records itself in the consumer registry (`CONSUMERS` in the metrics
//! table) with a heartbeat, and an in-process consumer does not run while a
//! Lambda consumer is live: it refuses to start, or stops, and says why
//! (the log, and `freshness.consumerRefused` of `/api/metrics/pending`);
//! `serve` goes on serving the pages.
//!
//! A Lambda consumer counts as live for `LAMBDA_LIVE` after it last applied
//! a batch: Lambda invokes it only when the stream has records, so a quiet
//! hour says nothing of whether its event source mapping still exists; a day
//! is how long the stream keeps a record it may still deliver.

use crate::server::store::{ConsumerEntry, Store};
use crate::server::stream::consumer::Consumer;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The registry's mode of the consumer inside `serve` or `consume`.
pub const IN_PROCESS: &str = "in-process";
/// The registry's mode of the Lambda function.
pub const LAMBDA: &str = "lambda";
/// How long after its last batch a Lambda consumer counts as live.
pub const LAMBDA_LIVE: chrono::Duration = chrono::Duration::hours(24);
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

/// The Lambda consumer that makes an in-process one double-count, if any:
/// the one seen last.
pub fn live_lambda(entries: &[ConsumerEntry], now: DateTime<Utc>) -> Option<&ConsumerEntry> {
    entries.iter().filter(|e| e.mode == LAMBDA && now - e.seen_at < LAMBDA_LIVE).max_by_key(|e| e.seen_at)
}

/// Why an in-process consumer does not run beside `lambda`.
pub fn refusal(lambda: &ConsumerEntry) -> String {
    format!(
        "not consuming the stream: the Lambda consumer {} applied records at {} (the registry counts it live for \
         {} hours after), and two consumers would count every change twice; run serve with --no-consumer where \
         the Lambda form consumes",
        lambda.instance,
        lambda.seen_at.format("%Y-%m-%d %H:%M:%S UTC"),
        LAMBDA_LIVE.num_hours()
    )
}

/// Runs `consumer` (an in-process one, registered as `instance`) while no
/// Lambda consumer is live, until `stop`: every `every`, reads the registry,
/// then tells the consumer how many in-process consumers share the shards
/// and records this instance's heartbeat, or stops the consumer (handing
/// its leases over) and records why in its status. It starts only after a
/// read of the registry found no Lambda consumer: a store that cannot be
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
        match store.consumers().await {
            Ok(entries) => {
                let now = Utc::now();
                match live_lambda(&entries, now) {
                    Some(lambda) => {
                        let why = refusal(lambda);
                        if consumer.status().refused.as_deref() != Some(why.as_str()) {
                            tracing::warn!(lambda = %lambda.instance, "{why}");
                        }
                        consumer.update_status(|status| status.refused = Some(why));
                        if let Some((halt, task)) = running.take() {
                            halt.cancel();
                            let _ = task.await;
                        }
                    }
                    None => {
                        consumer.set_instances(live_in_process(&entries, &instance, now));
                        let mut was_refused = false;
                        consumer.update_status(|status| was_refused = status.refused.take().is_some());
                        if was_refused {
                            tracing::info!("no Lambda consumer is live any more: consuming the stream");
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
                }
            }
            Err(err) => tracing::warn!(error = %err, "the consumer registry could not be read; checking again"),
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

/// A Lambda environment's heartbeat in the registry: at most one write per
/// `HEARTBEAT`, however many batches it handles.
pub struct LambdaBeat {
    instance: String,
    last: Mutex<Option<Instant>>,
}

impl LambdaBeat {
    /// Registered under the function's name (Lambda sets
    /// `AWS_LAMBDA_FUNCTION_NAME`), else `lambda`.
    pub fn from_env() -> Self {
        let instance = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok().filter(|n| !n.is_empty());
        Self { instance: instance.unwrap_or_else(|| LAMBDA.to_string()), last: Mutex::new(None) }
    }

    /// Records the heartbeat when one is due. A failure is logged, never the
    /// batch's: the records are applied all the same.
    pub async fn beat(&self, store: &Store) {
        {
            let mut last = self.last.lock();
            if last.is_some_and(|at| at.elapsed() < HEARTBEAT) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(err) = store.record_consumer(LAMBDA, &self.instance, Utc::now()).await {
            tracing::warn!(error = %err, "the consumer registry: the Lambda consumer's heartbeat failed");
            *self.last.lock() = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mode: &str, instance: &str, seen_at: DateTime<Utc>) -> ConsumerEntry {
        ConsumerEntry { mode: mode.into(), instance: instance.into(), seen_at }
    }

    #[test]
    fn a_lambda_seen_within_a_day_is_live_and_in_process_instances_never_are() {
        let now = Utc::now();
        let entries = vec![
            entry(IN_PROCESS, "host-1", now),
            entry(LAMBDA, "old-function", now - chrono::Duration::hours(30)),
            entry(LAMBDA, "consumer", now - chrono::Duration::hours(3)),
            entry(LAMBDA, "consumer-2", now - chrono::Duration::hours(5)),
        ];
        assert_eq!(live_lambda(&entries, now).map(|e| e.instance.as_str()), Some("consumer"), "the latest");
        assert_eq!(live_lambda(&entries[..2], now), None, "a day-old Lambda is gone; in-process is never one");
        let why = refusal(&entries[2]);
        assert!(why.contains("consumer") && why.contains("--no-consumer") && why.contains("twice"), "{why}");
    }
}

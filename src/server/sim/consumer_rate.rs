//! The stream consumer in a plan's rehearsal: the in-process form
//! (`stream::consumer::Consumer`, its passes as `serve` runs them) on the
//! run's own stream (`sim::streams` in front of the scratch engine), to
//! measure what it applies a second and how far its counters trail the
//! changes.
//!
//! A consumer that follows a scaled-down sale applies what the sale offers
//! it, which says nothing of what it could apply. So it starts late, at the
//! end of the hold, with the run's changes so far waiting for it: what it
//! applies a second until its first pass that reads the stream to its end
//! (it has caught up) is its rate. After that it follows the decay and the tail:
//! the age of each batch's newest record when applied is the change →
//! counter lag. It writes to the engine directly, not through the throttle
//! proxy: the proxy's figures stay the writers' (the counters' own cost is
//! the counters check's, and `rehearse --counters`'s).

use crate::model::ConsumerMeasurement;
use crate::server::sim::rehearse::RehearseError;
use crate::server::sim::streams::{StreamOptions, StreamSim};
use crate::server::store::config::{StoreConfig, StoreKind};
use crate::server::store::{self};
use crate::server::stream::consumer::{Consumer, ConsumerOptions};
use chrono::{SubsecRound, Utc};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The in-process form's pause between two passes (`Consumer::run`'s).
const PAUSE: Duration = Duration::from_millis(20);
/// Longest the consumer may take to catch up once the load has ended.
const CATCH_UP: Duration = Duration::from_secs(30);
/// Records a GetRecords asks for: the in-process form's own.
fn batch() -> i32 {
    ConsumerOptions::new("").batch
}

/// The stream's shards in a rehearsal: the scaled-down sale's few records
/// a second fit one shard, as they would on DynamoDB Streams.
pub const STREAM_SHARDS: u32 = 1;

/// One pass of the consumer: when it ended (from the consumer's start),
/// the records it applied, and the age of the newest when applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass {
    pub ended: Duration,
    pub applied: u64,
    pub behind_ms: Option<i64>,
}

/// What the passes say, before the run's date and scale are added.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub records_per_second: f64,
    pub records: u64,
    pub backlog_records: u64,
    pub caught_up: bool,
    pub lag_p50_ms: Option<f64>,
    pub lag_p95_ms: Option<f64>,
}

/// The rate while it had a backlog and the lag after; `None` when it
/// applied nothing. A pass reads one batch of each shard (`full` records
/// at most, for all of them): it has drained the backlog at the first pass
/// that applied less, having read every shard to its end. The rate is the
/// records of the passes up to that one over their time; the lag, the
/// batches' after it. (No such pass: it never caught up, and the rate is
/// over every pass.)
pub fn measured(passes: &[Pass], full: u64) -> Option<Measured> {
    let first = passes.iter().position(|p| p.applied > 0)?;
    let drained = passes[first..].iter().position(|p| p.applied < full).map(|i| first + i);
    let backlog = &passes[..drained.map_or(passes.len(), |d| d + 1)];
    let backlog_records: u64 = backlog.iter().map(|p| p.applied).sum();
    let took = backlog.last().map_or(Duration::ZERO, |p| p.ended).as_secs_f64();
    let mut lags: Vec<i64> = drained
        .map(|d| passes[d + 1..].iter().filter(|p| p.applied > 0).filter_map(|p| p.behind_ms).collect())
        .unwrap_or_default();
    lags.sort_unstable();
    let at = |q: f64| {
        (!lags.is_empty()).then(|| lags[((lags.len() as f64 * q).ceil() as usize).clamp(1, lags.len()) - 1] as f64)
    };
    Some(Measured {
        records_per_second: if took > 0.0 { backlog_records as f64 / took } else { 0.0 },
        records: passes.iter().map(|p| p.applied).sum(),
        backlog_records,
        caught_up: drained.is_some(),
        lag_p50_ms: at(0.50),
        lag_p95_ms: at(0.95),
    })
}

/// The consumer under way beside a rehearsal's load.
pub struct ConsumerRun {
    sim: StreamSim,
    load_ended: CancellationToken,
    task: tokio::task::JoinHandle<Vec<Pass>>,
}

impl ConsumerRun {
    /// Follows the orders table's stream on `upstream` (the scratch engine)
    /// from now, and starts the consumer `after` from now.
    pub async fn start(config: &StoreConfig, upstream: &str, after: Duration) -> Result<ConsumerRun, RehearseError> {
        let options = StreamOptions::new(upstream, Some(config.orders_table.clone()), STREAM_SHARDS);
        let sim = StreamSim::start(options).await.map_err(|e| RehearseError::Designs(format!("the stream: {e}")))?;
        let direct = StoreConfig {
            store: Some(StoreKind::Endpoint),
            endpoint_url: Some(upstream.to_string()),
            streams_endpoint_url: Some(sim.endpoint()),
            ..config.clone()
        };
        let (store, _) = store::connect(&direct).await?;
        let consumer = Consumer::new(Arc::new(store), ConsumerOptions::new("rehearsal-consumer"), None);
        let load_ended = CancellationToken::new();
        let task = tokio::spawn(passes(consumer, after, load_ended.clone()));
        Ok(ConsumerRun { sim, load_ended, task })
    }

    /// Once the load has ended: waits for the consumer to catch up (at
    /// most `CATCH_UP`), stops it and the stream, and says what it measured.
    pub async fn finish(self, scale: f64) -> Option<ConsumerMeasurement> {
        self.load_ended.cancel();
        let passes = self.task.await.unwrap_or_default();
        self.sim.stop().await;
        let m = measured(&passes, u64::from(batch().unsigned_abs()) * u64::from(STREAM_SHARDS))?;
        Some(ConsumerMeasurement {
            records_per_second: m.records_per_second,
            records: m.records,
            backlog_records: m.backlog_records,
            caught_up: m.caught_up,
            lag_p50_ms: m.lag_p50_ms,
            lag_p95_ms: m.lag_p95_ms,
            stream_shards: STREAM_SHARDS,
            scale,
            measured_at: Utc::now().trunc_subsecs(3),
        })
    }
}

/// The consumer's passes, as `Consumer::run` makes them, from `after` (or
/// the load's end, if sooner) until a pass finds nothing new once the load
/// has ended (or `CATCH_UP` after it). A first pass at once, on a stream
/// still all but empty, describes it and takes the lease: what a consumer
/// already running has done, and no part of its rate (the records it
/// applies are not counted).
async fn passes(consumer: Consumer, after: Duration, load_ended: CancellationToken) -> Vec<Pass> {
    if let Err(err) = consumer.poll().await {
        tracing::warn!(error = %err, "rehearsal consumer: first pass failed");
    }
    tokio::select! {
        _ = tokio::time::sleep(after) => {}
        _ = load_ended.cancelled() => {}
    }
    let started = Instant::now();
    let mut ended_at: Option<Instant> = None;
    let mut passes = Vec::new();
    loop {
        let applied = match consumer.poll().await {
            Ok(applied) => applied,
            Err(err) => {
                tracing::warn!(error = %err, "rehearsal consumer: pass failed, retrying");
                0
            }
        };
        let behind_ms = if applied > 0 { consumer.status().behind_ms } else { Some(0) };
        passes.push(Pass { ended: started.elapsed(), applied, behind_ms });
        if load_ended.is_cancelled() {
            let since = *ended_at.get_or_insert_with(Instant::now);
            // Nothing new once the load has ended: every change applied.
            let caught_up = applied == 0 && passes.iter().any(|p| p.applied > 0);
            if caught_up || since.elapsed() > CATCH_UP {
                break;
            }
        }
        tokio::time::sleep(PAUSE).await;
    }
    consumer.add_carried().await;
    passes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(ms: u64, applied: u64, behind_ms: i64) -> Pass {
        Pass { ended: Duration::from_millis(ms), applied, behind_ms: Some(behind_ms) }
    }

    #[test]
    fn the_rate_is_the_backlogs_and_the_lag_what_follows() {
        let passes = [
            pass(30, 0, 0),
            pass(200, 500, 9_000),
            pass(400, 500, 5_000),
            pass(500, 200, 1_000),
            pass(750, 4, 300),
            pass(1_000, 6, 500),
            pass(1_030, 0, 0),
        ];
        let m = measured(&passes, 500).unwrap();
        assert_eq!((m.backlog_records, m.records), (1_200, 1_210));
        assert!((m.records_per_second - 2_400.0).abs() < 1e-9, "1,200 in 0.5 s: {m:?}");
        assert!(m.caught_up);
        assert_eq!((m.lag_p50_ms, m.lag_p95_ms), (Some(300.0), Some(500.0)));
        // Never caught up: the rate over every pass, and no lag.
        let behind = measured(&passes[..3], 500).unwrap();
        assert!(!behind.caught_up && behind.lag_p50_ms.is_none(), "{behind:?}");
        assert!((behind.records_per_second - 2_500.0).abs() < 1e-9, "{behind:?}");
        assert!(measured(&[pass(30, 0, 0)], 500).is_none(), "nothing applied, nothing measured");
    }
}

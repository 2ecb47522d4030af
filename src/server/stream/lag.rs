//! How far behind the stream a consumer was, kept minute by minute in the
//! metrics table (`Store::record_behind`), so that what happened during a
//! sale can be read after it: the status says only how far behind it is now.

use crate::server::store::Store;
use crate::server::stream::consumer::ConsumerStatus;
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often the most behind seen is written: once a minute a consumer.
pub const RECORD_EVERY: Duration = Duration::from_secs(60);

/// Until `stop`: follows the consumer's status and, every `every`, writes
/// the most it was behind since the last write (nothing while it applied
/// nothing: a consumer that does not run has no lag to tell).
pub async fn record(
    store: Arc<Store>,
    mut status: watch::Receiver<ConsumerStatus>,
    every: Duration,
    stop: CancellationToken,
) {
    let mut most: Option<u64> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let seen = status.borrow_and_update();
                if seen.running && seen.last_applied_at.is_some() {
                    let behind = seen.behind_ms.unwrap_or(0).max(0) as u64;
                    most = Some(most.map_or(behind, |m| m.max(behind)));
                }
            }
            _ = tick.tick() => {
                if let Some(ms) = most.take()
                    && let Err(err) = store.record_behind(Utc::now(), ms).await
                {
                    tracing::warn!(error = %err, "could not record how far behind the consumer was");
                }
            }
        }
    }
}

//! How far behind the stream a consumer was, kept minute by minute in the
//! metrics table (`Store::record_behind`), so that what happened during a
//! sale can be read after it: the status says only how far behind it is now.

use crate::server::store::Store;
use crate::server::stream::consumer::ConsumerStatus;
use chrono::Utc;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often the most behind seen is written: once a minute a consumer.
pub const RECORD_EVERY: Duration = Duration::from_secs(60);

/// The most a consumer was behind since it last wrote, written at most once
/// every `every` (the in-process consumer's task and each Lambda
/// environment hold one).
pub struct Gate {
    every: Duration,
    /// When it last wrote, and the most noted since.
    state: Mutex<(Option<Instant>, Option<u64>)>,
}

impl Gate {
    pub fn new(every: Duration) -> Self {
        Self { every, state: Mutex::new((None, None)) }
    }

    /// Notes that the consumer was `behind_ms` behind; writes the most noted
    /// when `every` has passed since the last write. A failed write is
    /// logged: the records were applied all the same.
    pub async fn note(&self, store: &Store, behind_ms: u64) {
        let due = {
            let mut state = self.state.lock();
            state.1 = Some(state.1.map_or(behind_ms, |most| most.max(behind_ms)));
            if state.0.is_some_and(|at| at.elapsed() < self.every) {
                return;
            }
            state.0 = Some(Instant::now());
            state.1.take()
        };
        if let Some(ms) = due {
            write(store, ms).await;
        }
    }

    /// Writes what was noted since the last write, if anything.
    pub async fn flush(&self, store: &Store) {
        let noted = self.state.lock().1.take();
        if let Some(ms) = noted {
            write(store, ms).await;
        }
    }
}

async fn write(store: &Store, behind_ms: u64) {
    if let Err(err) = store.record_behind(Utc::now(), behind_ms).await {
        tracing::warn!(error = %err, "could not record how far behind the consumer was");
    }
}

/// How far behind a status says the consumer is, once it has applied
/// records (a consumer that applied nothing has no lag to tell).
pub fn behind(status: &ConsumerStatus) -> Option<u64> {
    (status.running && status.last_applied_at.is_some()).then(|| status.behind_ms.unwrap_or(0).max(0) as u64)
}

/// Until `stop`: follows an in-process consumer's status and records how
/// far behind it was, at most once every `every`.
pub async fn record(
    store: Arc<Store>,
    mut status: watch::Receiver<ConsumerStatus>,
    every: Duration,
    stop: CancellationToken,
) {
    let gate = Gate::new(every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let behind = behind(&status.borrow_and_update());
                if let Some(ms) = behind {
                    gate.note(&store, ms).await;
                }
            }
        }
    }
    gate.flush(&store).await;
}

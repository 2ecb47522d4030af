//! Each coming day's GSI2 shard count, written ahead (`store::shard_count`,
//! rule 4): `serve` records today's and the next days' counts every hour,
//! so a writer that reads the record (`northwind-ops shards --day D`, or
//! the metrics item itself) finds it before the day's first order, and a
//! record lost with the metrics table is written again within the hour.

use crate::server::store::Store;
use crate::server::store::error::{StoreError, Unavailable};
use chrono::{NaiveDate, Utc};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Days recorded ahead: today and the two after it (a writer that caches a
/// day's count from the evening before finds tomorrow's).
pub const DAYS_AHEAD: u32 = 3;
/// How often they are written: a new day is recorded at least a day and
/// 23 hours before it starts.
pub const EVERY: Duration = Duration::from_secs(3600);

/// Records the counts of `DAYS_AHEAD` days from `today` where none is: the
/// days written now.
pub async fn write_ahead(store: &Store, today: NaiveDate) -> Result<Vec<NaiveDate>, StoreError> {
    store.record_days_ahead(today, DAYS_AHEAD).await
}

/// `write_ahead` now and every `every` until `stop`. A failure is logged
/// and tried again at the next turn (a missing table is no failure yet: the
/// tables may not be made).
pub async fn run(store: std::sync::Arc<Store>, every: Duration, stop: CancellationToken) {
    loop {
        match write_ahead(&store, Utc::now().date_naive()).await {
            Ok(days) if !days.is_empty() => tracing::info!(?days, "recorded the GSI2 shard count ahead"),
            Ok(_) => {}
            Err(StoreError::Unavailable { kind: Unavailable::NoTable, .. }) => {
                tracing::debug!("no metrics table yet: no shard count written ahead")
            }
            Err(err) => tracing::warn!(error = %err, "could not write the GSI2 shard counts ahead; tried again later"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

//! Each day's GSI2 shard count, written as the day comes (`store::shard_count`,
//! rule 4): `serve` records today's count every hour, and tomorrow's in the
//! last `BEFORE_THE_DAY` of today, so a writer that reads the record
//! (`northwind-ops shards --day D`, or the metrics item itself) finds it by
//! the day's first order, and a record lost with the metrics table is
//! written again within the hour. A day a sale plan covers gets the plan's
//! count (what `ready --write-shards` writes), so a planned sale is never
//! held to the configured count by this; until then a day stays open for a
//! plan's count to be written ahead.

use super::Service;
use crate::server::capacity::readiness;
use crate::server::error::ApiError;
use crate::server::store::error::{StoreError, Unavailable};
use chrono::{DateTime, Days, NaiveDate, Utc};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long before a day starts its count is written.
pub const BEFORE_THE_DAY: chrono::Duration = chrono::Duration::hours(2);
/// How often the counts are written: shorter than `BEFORE_THE_DAY`, so
/// tomorrow's is written before midnight.
pub const EVERY: Duration = Duration::from_secs(3600);

/// The days whose counts are written at `now`: today, and tomorrow in the
/// last `BEFORE_THE_DAY` of today.
pub fn days_to_write(now: DateTime<Utc>) -> Vec<NaiveDate> {
    let today = now.date_naive();
    let tomorrow = today.checked_add_days(Days::new(1));
    let soon =
        tomorrow.filter(|day| day.and_hms_opt(0, 0, 0).is_some_and(|start| now >= start.and_utc() - BEFORE_THE_DAY));
    std::iter::once(today).chain(soon).collect()
}

impl Service {
    /// Records the counts of `days_to_write(now)` where none is: a sale
    /// plan's count on its days, else the configured one. The days written.
    pub async fn write_shards_ahead(&self, now: DateTime<Utc>) -> Result<Vec<NaiveDate>, ApiError> {
        let days = days_to_write(now);
        let configured = self.store.shards();
        let mut counts: Vec<(NaiveDate, u32)> = days.iter().map(|day| (*day, configured)).collect();
        let bytes = self.gsi2_entry_bytes()?;
        for plan in self.sale_plans().await? {
            let Ok(needed) = readiness::shards_needed(&plan, bytes) else { continue };
            let planned = readiness::shards_to_write(needed, configured);
            for (day, count) in counts.iter_mut().filter(|(day, _)| plan.days().contains(day)) {
                tracing::debug!(%day, plan = plan.name, planned, "a sale plan's count written ahead");
                *count = (*count).max(planned);
            }
        }
        Ok(self.store.record_days_ahead(&counts).await?)
    }
}

/// `write_shards_ahead` now and every `every` until `stop`. A failure is
/// logged and tried again at the next turn (a missing table is no failure
/// yet: the tables may not be made).
pub async fn run(service: Service, every: Duration, stop: CancellationToken) {
    loop {
        match service.write_shards_ahead(Utc::now()).await {
            Ok(days) if !days.is_empty() => tracing::info!(?days, "recorded the GSI2 shard count of the day"),
            Ok(_) => {}
            Err(ApiError::Store(StoreError::Unavailable { kind: Unavailable::NoTable, .. })) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tomorrow_is_written_only_in_the_last_two_hours_of_today() {
        let at = |text: &str| crate::model::iso_millis::parse(text).unwrap();
        let day = |text: &str| NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap();
        assert_eq!(days_to_write(at("2026-12-07T09:00:00Z")), vec![day("2026-12-07")]);
        assert_eq!(days_to_write(at("2026-12-07T21:59:59Z")), vec![day("2026-12-07")]);
        assert_eq!(days_to_write(at("2026-12-07T22:00:00Z")), vec![day("2026-12-07"), day("2026-12-08")]);
        assert_eq!(days_to_write(at("2026-12-31T23:30:00Z")), vec![day("2026-12-31"), day("2027-01-01")]);
        assert!(chrono::Duration::from_std(EVERY).unwrap() < BEFORE_THE_DAY, "a turn falls in every window");
    }
}

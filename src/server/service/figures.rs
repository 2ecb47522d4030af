//! Figures about the tables and this instance: a day's counters and how
//! fresh and verified they are, the live counts, the capacity report, and
//! what a metrics scrape reads.

use super::Service;
use super::checks::parse_date;
use crate::model::{
    CapacityReport, Checked, Freshness, LiveCounters, LiveFigures, PendingMetrics, PerMinute, Verification,
};
use crate::server::capacity::report;
use crate::server::error::ApiError;
use chrono::{NaiveDate, Utc};

impl Service {
    /// A day's consumed capacity, throttles and shard heat, with the
    /// planner's and the advisor's tables over them.
    pub async fn capacity(&self, date: Option<&str>) -> Result<CapacityReport, ApiError> {
        let now = Utc::now();
        let day = parse_date(date, now)?;
        let (capacity, heat, counters) =
            futures::try_join!(self.store.capacity_day(day), self.store.heat_day(day), self.store.read_counters(day))?;
        let recent = if day == now.date_naive() { self.store.usage().recent(now) } else { Vec::new() };
        Ok(report::report(&report::Inputs {
            capacity: &capacity,
            heat: &heat,
            entered_per_minute: &counters.entered_per_minute,
            current_shards: counters.per_shard.len() as u32,
            recent: &recent,
            prices: &self.prices,
            as_of: now,
        }))
    }

    /// What a metrics scrape reads from this instance now.
    pub fn telemetry(&self) -> crate::server::http::telemetry::Snapshot {
        let status = self.consumer_status();
        crate::server::http::telemetry::Snapshot {
            consumer_lag_seconds: status.behind_ms.map(|ms| ms as f64 / 1000.0),
            records_applied: status.records_applied,
            bad_records: status.bad_records,
            live_clients: self.live.connected(),
        }
    }

    pub async fn pending_metrics(&self, date: Option<&str>) -> Result<PendingMetrics, ApiError> {
        let date = parse_date(date, Utc::now())?;
        let counters = self.store.read_counters(date).await?;
        let status = self.consumer_status();
        Ok(PendingMetrics {
            counts: counters.day_counts(),
            per_minute: PerMinute {
                created: counters.created_per_minute,
                entered: counters.entered_per_minute,
                left: counters.left_per_minute,
            },
            freshness: Freshness {
                as_of: Utc::now(),
                consumer_running: status.running,
                last_applied_at: status.last_applied_at,
                behind_ms: status.behind_ms,
                records_applied: status.records_applied,
                bad_records: status.bad_records,
                last_error_at: status.last_error_at,
            },
            verification: Verification {
                pending: counters.pending_verdict.as_ref().map(Checked::from),
                daily: counters.daily_verdict.as_ref().map(Checked::from),
                per_minute: "not verifiable: history",
            },
            live: self.live_figures(),
        })
    }

    fn live_figures(&self) -> LiveFigures {
        let (version_reads, read_units) = self.live.follow_cost();
        LiveFigures {
            connections: self.live.connected(),
            watched_days: self.live.watched_days().len(),
            version_reads,
            read_units,
        }
    }

    /// The counts of a day as `/api/live` first sends them, and the day's
    /// `version` they were read at (the follower starts from it).
    pub async fn live_counters(&self, date: NaiveDate) -> Result<(LiveCounters, i64), ApiError> {
        let (counts, version) = self.store.read_day_counts(date).await?;
        Ok((LiveCounters { counts, as_of: Utc::now(), behind_ms: self.consumer_behind_ms() }, version))
    }
}

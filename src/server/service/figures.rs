//! Figures about the tables and this instance: a day's counters and how
//! fresh and verified they are, the live counts, the capacity report, and
//! what a metrics scrape reads.

use super::Service;
use super::checks::parse_date;
use crate::model::{
    CapacityReport, Checked, ConsumerSeen, Freshness, LiveCounters, LiveFigures, PendingMetrics, PerMinute,
    QualityReport, Refused, Verification,
};
use crate::server::capacity::history;
use crate::server::capacity::report;
use crate::server::capacity::sources::{self, Figures};
use crate::server::error::ApiError;
use crate::server::store::CapacityDay;
use crate::server::store::config::CapacitySource;
use crate::server::store::error::StoreError;
use crate::server::store::usage::Resource;
use crate::server::stream::hotkeys::HotKey;
use crate::server::telemetry;
use chrono::{NaiveDate, Utc};
use std::sync::Arc;

/// Where the capacity figures come from, and the advisor's window.
#[derive(Clone)]
pub struct CapacitySettings {
    pub source: CapacitySource,
    /// Days the advisor weighs, today included.
    pub advice_days: u32,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        Self { source: CapacitySource::Stream, advice_days: DEFAULT_ADVICE_DAYS }
    }
}

/// The advisor's window unless told otherwise: two weeks.
pub const DEFAULT_ADVICE_DAYS: u32 = 14;

/// The `days` days up to `today`, oldest first.
pub fn window_days(today: NaiveDate, days: u32) -> Vec<NaiveDate> {
    (0..days).rev().filter_map(|back| today.checked_sub_days(chrono::Days::new(u64::from(back)))).collect()
}

impl Service {
    /// A day's consumed capacity, throttles and shard heat, with the
    /// planner's and the advisor's tables over them.
    /// A day's data quality, from the stream (every writer): drift per kind
    /// and field with its first keys, and the items' sizes, beside the day
    /// before's p95.
    pub async fn quality(&self, date: Option<&str>) -> Result<QualityReport, ApiError> {
        let now = Utc::now();
        let day = parse_date(date, now)?;
        let previous = async {
            match day.pred_opt() {
                Some(before) => self.store.quality_items(before).await,
                None => Ok(Vec::new()),
            }
        };
        let (items, before) = futures::try_join!(self.store.quality_items(day), previous)?;
        Ok(crate::server::stream::quality::report(day, now, &items, &before))
    }

    pub async fn capacity(&self, date: Option<&str>) -> Result<CapacityReport, ApiError> {
        let now = Utc::now();
        let day = parse_date(date, now)?;
        let (mut capacity, heat, counters, advice, shards, mode) = futures::try_join!(
            self.store.capacity_day(day),
            self.store.heat_day(day),
            self.store.read_counters(day),
            self.advice(),
            self.store.shards_for(day),
            self.store.consumer_mode(),
        )?;
        let figures = match self.capacity.source {
            CapacitySource::Stream => self.figures(&capacity),
            CapacitySource::CloudWatch => {
                let start = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
                let end = (start + chrono::Duration::days(1)).min(now);
                let read = self.store.cloudwatch_minutes(start, end).await?;
                let (figures, throttles) = sources::from_cloudwatch(&read, day, now);
                capacity.throttles = throttles;
                figures
            }
        };
        let recent = if day == now.date_naive() { self.store.usage().recent(now) } else { Vec::new() };
        let mut report = report::report(&report::Inputs {
            capacity: &capacity,
            figures: &figures,
            source: self.capacity.source,
            advice: &advice,
            heat: &heat,
            entered_per_minute: &counters.entered_per_minute,
            // The day's count, not how far its counters reach (an order
            // on a shard beyond it, another writer's, is drift).
            current_shards: shards,
            recent: &recent,
            as_of: now,
        });
        report.consumer_mode = Some(mode);
        Ok(report)
    }

    /// A day's figures as the capacity source gives them.
    fn figures(&self, capacity: &CapacityDay) -> Figures {
        sources::from_stream(capacity, self.store.orders_table())
    }

    /// The advisor over its window, worked out at most once a minute.
    async fn advice(&self) -> Result<Arc<report::Advice>, StoreError> {
        let today = Utc::now().date_naive();
        if let Some(advice) = self.advice.get(&today).await {
            return Ok(advice);
        }
        let days = window_days(today, self.capacity.advice_days);
        let now = Utc::now();
        let figures: Vec<Figures> = match self.capacity.source {
            CapacitySource::Stream => {
                let read =
                    futures::future::try_join_all(days.iter().map(|d| self.store.persisted_capacity_day(*d))).await?;
                read.iter().map(|c| self.figures(c)).collect()
            }
            CapacitySource::CloudWatch => {
                let start = days.first().copied().unwrap_or(today).and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
                let read = self.store.cloudwatch_minutes(start, now).await?;
                days.iter().map(|day| sources::from_cloudwatch(&read, *day, now).0).collect()
            }
        };
        let days: Vec<history::Day<'_>> =
            days.iter().zip(&figures).map(|(date, figures)| history::Day { date: *date, figures }).collect();
        let advice = Arc::new(report::advice(&days, Utc::now(), self.capacity.source, &self.prices));
        self.advice.insert(today, advice.clone()).await;
        Ok(advice)
    }

    /// What a metrics scrape reads from this instance now.
    pub fn telemetry(&self) -> telemetry::Snapshot {
        let status = self.consumer_status();
        telemetry::Snapshot {
            consumer_lag_seconds: status.behind_ms.map(|ms| ms as f64 / 1000.0),
            records_applied: status.records_applied,
            bad_records: status.bad_records,
            live_clients: self.live.connected(),
            hot_keys: status.hot_keys.iter().map(hot_key_gauge).collect(),
        }
    }

    pub async fn pending_metrics(&self, date: Option<&str>) -> Result<PendingMetrics, ApiError> {
        let date = parse_date(date, Utc::now())?;
        let (counters, consumers, mode) =
            futures::try_join!(self.store.read_counters(date), self.store.consumers(), self.store.consumer_mode())?;
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
                records_trimmed_at: status.trimmed_at,
                consumer_refused: status.refused,
                consumer_mode: mode,
                consumers: consumers
                    .into_iter()
                    .map(|c| ConsumerSeen { mode: c.mode, instance: c.instance, seen_at: c.seen_at })
                    .collect(),
            },
            verification: Verification {
                pending: counters.pending_verdict.as_ref().map(Checked::from),
                daily: counters.daily_verdict.as_ref().map(Checked::from),
                per_minute: "not verifiable: history",
                pending_refused: counters.pending_refused.as_ref().map(|(at, reason)| Refused {
                    at: *at,
                    reason: reason.clone(),
                    message: reason.to_string(),
                }),
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

/// A hot key as the metrics family shows it: its table and index apart, its
/// minute's units as a rate.
fn hot_key_gauge(key: &HotKey) -> telemetry::HotKeyGauge {
    let resource = Resource::parse(&key.resource).unwrap_or_else(|| Resource::table(key.resource.clone()));
    telemetry::HotKeyGauge {
        table: resource.table,
        index: resource.index.unwrap_or_default(),
        key: key.key.clone(),
        units_per_second: key.units as f64 / 60.0,
    }
}

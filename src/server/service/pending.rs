//! The PENDING list, its exports and the dashboard: a query checked into
//! its normal form, read through the store's merge, and a dashboard view
//! shared by everyone who opens it within a second (and served a little
//! longer while the next read is made).

use super::checks::{parse_date, parse_filters, parse_limit, parse_number};
use super::{DASHBOARD_FRESH, Service};
use crate::model::{Activity, Dashboard, MAX_DAYS, PendingOrder, PendingPage, PendingParams, Summary};
use crate::server::error::ApiError;
use crate::server::store::{Counters, PendingFilter};
use chrono::{DateTime, Days, NaiveDate, Timelike, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// One read of a dashboard view, shared by its viewers.
pub(crate) struct SharedRead {
    /// When the read began: what it shows is at least this fresh.
    read_at: Instant,
    dashboard: Arc<Dashboard>,
    /// Whether a viewer has started the read that replaces this one.
    refreshing: AtomicBool,
}

/// A PENDING list query, parsed and checked: the normal form every cache
/// key and cursor scope is made from (`limit=05` and `limit=5` are one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PendingQuery {
    pub date: NaiveDate,
    pub days: u32,
    pub limit: u32,
    /// The sort key to continue after, from a verified cursor.
    pub after: Option<String>,
    pub filters: Filters,
}

/// The PENDING list's filters, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Filters {
    pub stuck: bool,
    pub country: Option<String>,
    /// Minor units.
    pub min_total: Option<i64>,
    pub customer: Option<String>,
}

impl Filters {
    /// What the store keeps, "stuck" becoming a moment: created before now
    /// less the threshold.
    fn for_store(&self, stuck_after: chrono::Duration, now: DateTime<Utc>) -> PendingFilter {
        PendingFilter {
            created_before: self.stuck.then(|| now - stuck_after),
            country: self.country.clone(),
            min_total: self.min_total,
            customer: self.customer.clone(),
        }
    }

    /// The filters' part of a cursor's scope: a cursor from one filtered
    /// list does not continue another.
    fn scope(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            u8::from(self.stuck),
            self.country.as_deref().unwrap_or(""),
            self.min_total.map(|m| m.to_string()).unwrap_or_default(),
            self.customer.as_deref().unwrap_or("")
        )
    }
}

impl PendingQuery {
    fn scope(&self) -> String {
        format!("pending:{}:{}:{}", self.date, self.days, self.filters.scope())
    }

    /// The days covered, newest first.
    fn dates(&self) -> Vec<NaiveDate> {
        (0..self.days).filter_map(|back| self.date.checked_sub_days(Days::new(u64::from(back)))).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct DashboardKey {
    query: PendingQuery,
    stuck_after_minutes: u32,
}

impl Service {
    /// Checks a PENDING list query and puts it in its normal form.
    pub fn parse_pending(&self, params: &PendingParams) -> Result<PendingQuery, ApiError> {
        let date = parse_date(params.date.as_deref(), Utc::now())?;
        let days = parse_number("days", params.days.as_deref(), 1, 1, MAX_DAYS)?;
        let limit = parse_limit(params.limit.as_deref())?;
        let filters = parse_filters(params)?;
        let mut query = PendingQuery { date, days, limit, after: None, filters };
        query.after = self.decode_cursor(params.cursor.as_deref(), &query.scope())?;
        Ok(query)
    }

    pub async fn pending(&self, params: &PendingParams) -> Result<PendingPage, ApiError> {
        self.read_pending(&self.parse_pending(params)?).await
    }

    /// Every page of a PENDING list query, newest first, one page read at a
    /// time as the stream is polled (an export never holds the whole set).
    pub fn pending_pages(
        &self,
        query: PendingQuery,
    ) -> impl futures::Stream<Item = Result<Vec<PendingOrder>, ApiError>> + use<> {
        let service = self.clone();
        futures::stream::try_unfold(Some(query), move |query| {
            let service = service.clone();
            async move {
                let Some(mut query) = query else { return Ok(None) };
                let filter = query.filters.for_store(service.stuck_after, Utc::now());
                let read =
                    service.store.pending_page(&query.dates(), query.limit, query.after.as_deref(), &filter).await?;
                query.after = read.next_after;
                let next = query.after.is_some().then_some(query);
                Ok(Some((read.orders, next)))
            }
        })
    }

    async fn read_pending(&self, query: &PendingQuery) -> Result<PendingPage, ApiError> {
        let as_of = Utc::now();
        let filter = query.filters.for_store(self.stuck_after, as_of);
        let read = self.store.pending_page(&query.dates(), query.limit, query.after.as_deref(), &filter).await?;
        let scope = query.scope();
        Ok(PendingPage {
            orders: read.orders,
            next: read.next_after.map(|after| self.cursors.encode(&scope, &after)),
            items_read: read.items_read,
            date: query.date,
            days: query.days,
            as_of,
        })
    }

    /// The headline figures of a day, from the stream's counters. A day the
    /// consumer has not counted shows no figures: recounting the index on a
    /// page view would make its cost grow with the day's orders.
    pub async fn summary(&self, date: NaiveDate) -> Result<(Summary, Counters), ApiError> {
        let (counters, oldest) = futures::try_join!(self.store.read_counters(date), self.store.oldest_pending(date))?;
        Ok((Summary { counts: counters.day_counts(), oldest_pending: oldest }, counters))
    }

    pub async fn dashboard(&self, params: &PendingParams, stuck_after_minutes: u32) -> Result<Dashboard, ApiError> {
        let key = DashboardKey { query: self.parse_pending(params)?, stuck_after_minutes };
        if let Some(shared) = self.dashboards.get(&key).await {
            // Past its second, the first viewer to see it starts the next
            // read; everyone keeps this one until that read is in.
            if shared.read_at.elapsed() >= DASHBOARD_FRESH && !shared.refreshing.swap(true, Ordering::AcqRel) {
                self.refresh_dashboard(key, shared.clone());
            }
            return Ok((*shared.dashboard).clone());
        }
        // None yet (or cleared by a change): concurrent viewers of one view
        // wait for one read; a failed read is not kept.
        let shared = self
            .dashboards
            .try_get_with(key.clone(), async { self.read_shared(&key).await.map(Arc::new) })
            .await
            .map_err(|err| (*err).clone())?;
        Ok((*shared.dashboard).clone())
    }

    /// Reads `key` again in the background, replacing `stale` unless the
    /// views were cleared meanwhile (the read may predate that change).
    fn refresh_dashboard(&self, key: DashboardKey, stale: Arc<SharedRead>) {
        let service = self.clone();
        tokio::spawn(async move {
            let cleared = service.dashboards_cleared.load(Ordering::Acquire);
            match service.read_shared(&key).await {
                Ok(fresh) if service.dashboards_cleared.load(Ordering::Acquire) == cleared => {
                    service.dashboards.insert(key, Arc::new(fresh)).await;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!(error = %err, "dashboard re-read failed; the next viewer tries again");
                    stale.refreshing.store(false, Ordering::Release);
                }
            }
        });
    }

    pub(crate) fn forget_dashboards(&self) {
        self.dashboards_cleared.fetch_add(1, Ordering::AcqRel);
        self.dashboards.invalidate_all();
    }

    async fn read_shared(&self, key: &DashboardKey) -> Result<SharedRead, ApiError> {
        let read_at = Instant::now();
        let dashboard = Arc::new(self.read_dashboard(key).await?);
        Ok(SharedRead { read_at, dashboard, refreshing: AtomicBool::new(false) })
    }

    async fn read_dashboard(&self, key: &DashboardKey) -> Result<Dashboard, ApiError> {
        let (page, (summary, counters)) =
            futures::try_join!(self.read_pending(&key.query), self.summary(key.query.date))?;
        let activity = summary.counts.counted.then(|| activity(&counters, key.query.date, page.as_of));
        let behind_ms = self.consumer_status().behind_ms;
        Ok(Dashboard { page, summary, activity, behind_ms, stuck_after_minutes: key.stuck_after_minutes })
    }
}

/// A day's counters in ten-minute buckets: orders created, and the PENDING
/// backlog of the day's orders at the end of each bucket, up to the bucket
/// `as_of` falls in (a backlog the hours to come do not have yet is not
/// drawn as a flat line through them).
fn activity(counters: &Counters, day: NaiveDate, as_of: DateTime<Utc>) -> Activity {
    const BUCKET: usize = 10;
    let sum = |v: &[i64], b: usize| v.iter().skip(b * BUCKET).take(BUCKET).sum::<i64>();
    let buckets = 1440 / BUCKET;
    let elapsed = match day.cmp(&as_of.date_naive()) {
        std::cmp::Ordering::Less => buckets,
        std::cmp::Ordering::Equal => (as_of.time().num_seconds_from_midnight() as usize / 60) / BUCKET + 1,
        std::cmp::Ordering::Greater => 0,
    };
    let mut backlog = Vec::with_capacity(elapsed);
    let mut level = 0;
    for b in 0..elapsed {
        level += sum(&counters.entered_per_minute, b) - sum(&counters.left_per_minute, b);
        backlog.push(level);
    }
    Activity { created: (0..buckets).map(|b| sum(&counters.created_per_minute, b)).collect(), backlog }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_stops_at_now_on_today_and_runs_the_day_before() {
        let day = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let mut counters = Counters {
            entered_per_minute: vec![0; 1440],
            left_per_minute: vec![0; 1440],
            created_per_minute: vec![0; 1440],
            ..Default::default()
        };
        counters.entered_per_minute[5] = 3;
        counters.created_per_minute[5] = 3;
        counters.left_per_minute[25] = 1;
        let at = |h, m| day.and_hms_opt(h, m, 0).unwrap().and_utc();
        // 00:35: buckets 00:00, 00:10, 00:20 and 00:30 have happened.
        let now = activity(&counters, day, at(0, 35));
        assert_eq!(now.backlog, [3, 3, 2, 2]);
        assert_eq!(now.created.len(), 144);
        assert_eq!(activity(&counters, day, at(23, 59)).backlog.len(), 144);
        let yesterday = activity(&counters, day, at(0, 35) + chrono::Duration::days(1));
        assert_eq!((yesterday.backlog.len(), yesterday.backlog[143]), (144, 2));
        assert!(activity(&counters, day, at(0, 35) - chrono::Duration::days(1)).backlog.is_empty());
    }
}

//! What the JSON API and the pages both do: check the input, ask the store,
//! sign the cursors. Each operation is written once, here.
//!
//! Every accepted request costs a bounded number of store calls: dates are
//! kept to a window, a `days` range reads only days that hold PENDING
//! orders, page sizes are capped, and dashboard reads are shared.

pub mod bulk;
pub mod cursor;

use crate::model::{
    Activity, AuditEntry, AuditListing, AuditParams, CapacityReport, DEFAULT_PAGE_SIZE, Dashboard, DayCounts,
    LiveCounters, MAX_DAYS, MAX_PAGE_SIZE, NewOrder, Order, OrderPage, PageParams, PendingOrder, PendingPage,
    PendingParams, Permission, Role, SearchHit, Status, StatusChange, Summary, iso_millis, validate_id,
};
use crate::server::auth::Principal;
use crate::server::capacity::advisor::Prices;
use crate::server::capacity::report;
use crate::server::error::ApiError;
use crate::server::service::cursor::{CursorCodec, CursorError};
use crate::server::store::keys;
use crate::server::store::{
    Account, AccountChange, AccountSource, AuditScope, Counters, PendingFilter, Store, Token, Transition, Verdict,
};
use crate::server::stream::consumer::ConsumerStatus;
use crate::server::stream::live::LiveHub;
use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest accepted line-item count, quantity and string length.
const MAX_ITEMS: usize = 100;
const MAX_QUANTITY: u32 = 10_000;
const MAX_TEXT: usize = 200;
/// How far from now a client's `createdAt` may be: clock skew ahead, a
/// day's late imports behind.
const MAX_SKEW_SECONDS: i64 = 60;
const MAX_AGE_DAYS: i64 = 1;
/// The earliest day any request may name.
const FIRST_DAY: NaiveDate = NaiveDate::from_ymd_opt(2000, 1, 1).expect("a valid date");

/// How long one read of a dashboard view serves everyone who opens it: a
/// room full of screens costs the store one read a second, not one each.
/// Live pushes carry what happens in between; this server's own writes clear it.
const DASHBOARD_TTL: Duration = Duration::from_secs(1);
/// Distinct dashboard views kept at once.
const DASHBOARD_VIEWS: u64 = 1_000;

#[derive(Clone)]
pub struct Service {
    pub store: Arc<Store>,
    pub cursors: Arc<CursorCodec>,
    /// Where the stream consumer publishes, and `/api/live` listens.
    pub live: LiveHub,
    /// The running consumer's status, once one is started.
    pub consumer: Arc<Mutex<Option<Arc<Mutex<ConsumerStatus>>>>>,
    /// Recent dashboard reads, shared by every viewer of the same view.
    dashboards: moka::future::Cache<DashboardKey, Arc<Dashboard>>,
    /// How long an order may stay PENDING before it counts as stuck.
    stuck_after: chrono::Duration,
    /// What the capacity-mode advisor prices with.
    prices: Prices,
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
struct DashboardKey {
    query: PendingQuery,
    stuck_after_minutes: u32,
}

/// An account as the admin API shows it: no password hash.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub name: String,
    pub role: Role,
    pub source: AccountSource,
    pub disabled: bool,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
}

impl From<Account> for AccountView {
    fn from(a: Account) -> Self {
        AccountView { name: a.name, role: a.role, source: a.source, disabled: a.disabled, created_at: a.created_at }
    }
}

/// A token as the admin API shows it: no secret, no hash.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub name: String,
    pub role: Role,
    pub created_by: String,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    pub revoked: bool,
}

impl From<Token> for TokenView {
    fn from(t: Token) -> Self {
        TokenView { name: t.name, role: t.role, created_by: t.created_by, created_at: t.created_at, revoked: t.revoked }
    }
}

/// `POST /api/admin/tokens`.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
}

/// Which figures reconciliation has verified, and when: read from the
/// counter items, so every instance says the same.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// `pending` and `perShard`.
    pub pending: Option<Checked>,
    /// `created`, `perStatus` and `perMinute.created` (`reconcile --full`).
    pub daily: Option<Checked>,
    /// `perMinute.entered` and `perMinute.left`.
    pub per_minute: &'static str,
}

/// A reconciliation's verdict.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    /// Counter minus what it should have been (`pending`, or `created`).
    pub drift: i64,
    /// Whether anything was off, and so repaired.
    pub repaired: bool,
}

impl From<&Verdict> for Checked {
    fn from(verdict: &Verdict) -> Self {
        Checked { at: verdict.at, drift: verdict.drift, repaired: verdict.repaired }
    }
}

/// `GET /api/metrics/pending`: a day's counters and how fresh they are.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingMetrics {
    #[serde(flatten)]
    pub counts: DayCounts,
    pub per_minute: PerMinute,
    pub freshness: Freshness,
    pub verification: Verification,
    pub live: LiveFigures,
}

/// This instance's live connections and what following other instances'
/// changes has cost it (see `follower`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveFigures {
    pub connections: usize,
    pub watched_days: usize,
    /// Strongly consistent reads of a day's `version` since start.
    pub version_reads: u64,
    /// The read units they consumed, as the store reported them.
    pub read_units: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PerMinute {
    pub created: Vec<i64>,
    pub entered: Vec<i64>,
    pub left: Vec<i64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Freshness {
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    pub consumer_running: bool,
    #[serde(with = "iso_millis::option")]
    pub last_applied_at: Option<DateTime<Utc>>,
    pub behind_ms: Option<i64>,
    pub records_applied: u64,
    pub bad_records: u64,
    /// When the consumer last failed a pass; why is in the server's log.
    #[serde(with = "iso_millis::option")]
    pub last_error_at: Option<DateTime<Utc>>,
}

impl Service {
    pub fn new(store: Arc<Store>, cursors: Arc<CursorCodec>, live: LiveHub) -> Self {
        Self {
            store,
            cursors,
            live,
            consumer: Arc::new(Mutex::new(None)),
            dashboards: moka::future::Cache::builder()
                .max_capacity(DASHBOARD_VIEWS)
                .time_to_live(DASHBOARD_TTL)
                .build(),
            stuck_after: chrono::Duration::minutes(30),
            prices: Prices::default(),
        }
    }

    /// The advisor's prices (checked by whoever read them).
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = prices;
        self
    }

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

    /// Orders PENDING longer than `minutes` count as stuck.
    pub fn with_stuck_after(mut self, minutes: u32) -> Self {
        self.stuck_after = chrono::Duration::minutes(i64::from(minutes));
        self
    }

    /// How far this instance's consumer was behind at its last batch.
    pub(crate) fn consumer_behind_ms(&self) -> Option<i64> {
        self.consumer_status().behind_ms
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

    fn consumer_status(&self) -> ConsumerStatus {
        self.consumer
            .lock()
            .expect("consumer slot poisoned")
            .as_ref()
            .map(|status| status.lock().expect("status poisoned").clone())
            .unwrap_or_default()
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

    pub fn parse_day(&self, date: Option<&str>) -> Result<NaiveDate, ApiError> {
        parse_date(date, Utc::now())
    }

    pub async fn order(&self, order_id: &str) -> Result<Order, ApiError> {
        validate_id("order id", order_id).map_err(ApiError::BadRequest)?;
        self.store.get_order(order_id).await?.ok_or_else(|| ApiError::NotFound(format!("order {order_id} not found")))
    }

    pub async fn customer_orders(&self, customer_id: &str, params: &PageParams) -> Result<OrderPage, ApiError> {
        validate_id("customer id", customer_id).map_err(ApiError::BadRequest)?;
        let limit = parse_limit(params.limit.as_deref())?;
        let scope = format!("customer:{customer_id}");
        let after = self.decode_cursor(params.cursor.as_deref(), &scope)?;
        let page = self.store.customer_orders(customer_id, limit, after.as_deref()).await?;
        Ok(OrderPage { orders: page.orders, next: page.next_after.map(|after| self.cursors.encode(&scope, &after)) })
    }

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

    /// Every page of a customer's history, newest first, likewise.
    pub fn customer_pages(
        &self,
        customer_id: String,
    ) -> impl futures::Stream<Item = Result<Vec<Order>, ApiError>> + use<> {
        let store = self.store.clone();
        futures::stream::try_unfold((Some(None::<String>), customer_id), move |(after, customer_id)| {
            let store = store.clone();
            async move {
                let Some(after) = after else { return Ok(None) };
                let page = store.customer_orders(&customer_id, MAX_PAGE_SIZE, after.as_deref()).await?;
                let next = page.next_after.map(Some);
                Ok(Some((page.orders, (next, customer_id))))
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
        // Concurrent viewers of one view wait for one read; a failed read is not kept.
        let dashboard = self
            .dashboards
            .try_get_with(key.clone(), async { self.read_dashboard(&key).await.map(Arc::new) })
            .await
            .map_err(|err| (*err).clone())?;
        Ok((*dashboard).clone())
    }

    pub(crate) fn forget_dashboards(&self) {
        self.dashboards.invalidate_all();
    }

    async fn read_dashboard(&self, key: &DashboardKey) -> Result<Dashboard, ApiError> {
        let (page, (summary, counters)) =
            futures::try_join!(self.read_pending(&key.query), self.summary(key.query.date))?;
        let activity = summary.counts.counted.then(|| activity(&counters));
        let behind_ms = self.consumer_status().behind_ms;
        Ok(Dashboard { page, summary, activity, behind_ms, stuck_after_minutes: key.stuck_after_minutes })
    }

    /// An order with this id, else a customer with orders, else not found.
    pub async fn search(&self, query: &str) -> Result<SearchHit, ApiError> {
        let id = query.trim();
        let not_found = || ApiError::NotFound(format!("nothing found for {id:?}"));
        if validate_id("id", id).is_err() {
            return Err(not_found());
        }
        if self.store.get_order(id).await?.is_some() {
            return Ok(SearchHit::Order(id.to_string()));
        }
        let history = self.store.customer_orders(id, 1, None).await?;
        if !history.orders.is_empty() {
            return Ok(SearchHit::Customer(id.to_string()));
        }
        Err(not_found())
    }

    pub async fn create_order(&self, new: NewOrder, by: &Principal) -> Result<Order, ApiError> {
        by.require(Permission::ChangeOrders)?;
        let order = build_order(new, Utc::now()).map_err(ApiError::BadRequest)?;
        self.store.create_order(&order, &by.actor).await?;
        self.forget_dashboards();
        Ok(order)
    }

    /// Moves an order on, if `by`'s role may make this change (support may
    /// cancel; ops make every change), with its reason in the audit trail.
    pub async fn change_status(&self, order_id: &str, change: StatusChange, by: &Principal) -> Result<Order, ApiError> {
        validate_id("order id", order_id).map_err(ApiError::BadRequest)?;
        by.require(Permission::to_change_status(change.to))?;
        if !change.from.can_become(change.to) {
            return Err(ApiError::BadRequest(format!("an order cannot go from {} to {}", change.from, change.to)));
        }
        let reason = check_reason(change.reason.as_deref()).map_err(ApiError::BadRequest)?;
        if change.to == Status::Cancelled && reason.is_none() {
            return Err(ApiError::BadRequest("a cancellation needs a reason".into()));
        }
        let transition = Transition {
            order_id,
            from: change.from,
            to: change.to,
            at: Utc::now(),
            actor: &by.actor,
            reason,
            bulk_id: None,
        };
        let order = self.store.change_status(&transition).await?;
        self.forget_dashboards();
        Ok(order)
    }

    /// Every account (admin).
    pub async fn accounts(&self, by: &Principal) -> Result<Vec<AccountView>, ApiError> {
        by.require(Permission::Administer)?;
        Ok(self.store.list_accounts().await?.into_iter().map(AccountView::from).collect())
    }

    /// Disables an account (admin): its sessions end at their next request.
    pub async fn disable_account(&self, name: &str, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::Administer)?;
        crate::server::auth::accounts::validate_name("user name", name).map_err(ApiError::BadRequest)?;
        Ok(self.store.change_account(name, &AccountChange::Disable).await?)
    }

    /// Every API token, without its secret (admin).
    pub async fn tokens(&self, by: &Principal) -> Result<Vec<TokenView>, ApiError> {
        by.require(Permission::Administer)?;
        Ok(self.store.list_tokens().await?.into_iter().map(TokenView::from).collect())
    }

    /// A new token (admin); its text is returned once and never again.
    pub async fn create_token(&self, new: &NewToken, by: &Principal) -> Result<String, ApiError> {
        by.require(Permission::Administer)?;
        crate::server::auth::accounts::create_token(&self.store, &new.name, new.role, &by.actor.name).await
    }

    pub async fn revoke_token(&self, name: &str, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::Administer)?;
        crate::server::auth::accounts::validate_token_name(name).map_err(ApiError::BadRequest)?;
        Ok(self.store.revoke_token(name).await?)
    }

    /// An order's changes, oldest first.
    pub async fn order_history(&self, order_id: &str) -> Result<Vec<AuditEntry>, ApiError> {
        validate_id("order id", order_id).map_err(ApiError::BadRequest)?;
        Ok(self.store.order_timeline(order_id).await?)
    }

    /// A page of the audit trail: one actor's changes, else one day's,
    /// newest first.
    pub async fn audit(&self, params: &AuditParams) -> Result<AuditListing, ApiError> {
        let limit = parse_limit(params.limit.as_deref())?;
        let (scope, label) = match params.actor.as_deref().filter(|a| !a.is_empty()) {
            Some(actor) => {
                validate_actor(actor).map_err(ApiError::BadRequest)?;
                (AuditScope::Actor(actor.to_string()), format!("audit:actor:{actor}"))
            }
            None => {
                let day = parse_date(params.date.as_deref(), Utc::now())?;
                (AuditScope::Day(day), format!("audit:day:{day}"))
            }
        };
        let after = self.decode_cursor(params.cursor.as_deref(), &label)?;
        let page = self.store.audit_page(&scope, limit, after.as_deref()).await?;
        Ok(AuditListing {
            entries: page.entries,
            next: page.next_after.map(|after| self.cursors.encode(&label, &after)),
        })
    }

    fn decode_cursor(&self, cursor: Option<&str>, scope: &str) -> Result<Option<String>, ApiError> {
        let Some(cursor) = cursor.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let after = self.cursors.decode(cursor, scope)?;
        // Signed by us, so well formed; checked anyway before it reaches a query.
        if keys::parse_timeline_sk(&after).is_none() {
            return Err(CursorError::NoPosition.into());
        }
        Ok(Some(after))
    }
}

/// A day's counters in ten-minute buckets: orders created, and the PENDING
/// backlog of the day's orders at the end of each bucket.
fn activity(counters: &Counters) -> Activity {
    const BUCKET: usize = 10;
    let sum = |v: &[i64], b: usize| v.iter().skip(b * BUCKET).take(BUCKET).sum::<i64>();
    let buckets = 1440 / BUCKET;
    let mut backlog = Vec::with_capacity(buckets);
    let mut level = 0;
    for b in 0..buckets {
        level += sum(&counters.entered_per_minute, b) - sum(&counters.left_per_minute, b);
        backlog.push(level);
    }
    Activity { created: (0..buckets).map(|b| sum(&counters.created_per_minute, b)).collect(), backlog }
}

/// A `YYYY-MM-DD` day from 2000-01-01 to tomorrow (UTC), today when absent:
/// no request can make a reader walk centuries of empty days.
pub fn parse_date(text: Option<&str>, now: DateTime<Utc>) -> Result<NaiveDate, ApiError> {
    let Some(text) = text.filter(|d| !d.is_empty()) else {
        return Ok(now.date_naive());
    };
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| ApiError::BadRequest(format!("date {text:?} is not a YYYY-MM-DD date")))?;
    let tomorrow = now.date_naive().succ_opt().unwrap_or(NaiveDate::MAX);
    if !(FIRST_DAY..=tomorrow).contains(&date) {
        return Err(ApiError::BadRequest(format!("date {text} is outside {FIRST_DAY} to {tomorrow}")));
    }
    Ok(date)
}

/// The list's filters: a stuck flag, a two-letter country, a minimum total
/// in the currency's units, a customer id.
fn parse_filters(params: &PendingParams) -> Result<Filters, ApiError> {
    let present = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
    let stuck = match present(&params.stuck).as_deref() {
        None | Some("0") | Some("false") => false,
        Some("1") | Some("true") | Some("on") => true,
        Some(other) => return Err(ApiError::BadRequest(format!("stuck must be 1 or 0, not {other:?}"))),
    };
    let country = present(&params.country).map(|c| c.to_ascii_uppercase());
    if let Some(country) = &country
        && !(country.len() == 2 && country.chars().all(|c| c.is_ascii_uppercase()))
    {
        return Err(ApiError::BadRequest(format!("country {country:?} is not a two-letter code such as NO")));
    }
    let min_total = present(&params.min_total).map(|t| parse_amount(&t)).transpose()?;
    let customer = present(&params.customer);
    if let Some(customer) = &customer {
        validate_id("customer id", customer).map_err(ApiError::BadRequest)?;
    }
    Ok(Filters { stuck, country, min_total, customer })
}

/// An amount in a currency's units (`150`, `150.5`, `150.50`) as minor units.
fn parse_amount(text: &str) -> Result<i64, ApiError> {
    let bad = || ApiError::BadRequest(format!("minTotal {text:?} is not an amount such as 150 or 150.50"));
    let (units, cents) = text.split_once('.').unwrap_or((text, "0"));
    if units.is_empty()
        || cents.is_empty()
        || cents.len() > 2
        || !(units.chars().chain(cents.chars()).all(|c| c.is_ascii_digit()))
    {
        return Err(bad());
    }
    let units: i64 = units.parse().map_err(|_| bad())?;
    let cents: i64 = format!("{cents:0<2}").parse().map_err(|_| bad())?;
    units.checked_mul(100).and_then(|u| u.checked_add(cents)).ok_or_else(bad)
}

fn parse_limit(text: Option<&str>) -> Result<u32, ApiError> {
    parse_number("limit", text, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
}

fn parse_number(name: &str, text: Option<&str>, default: u32, min: u32, max: u32) -> Result<u32, ApiError> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(default);
    };
    match text.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::BadRequest(format!("{name} must be a whole number from {min} to {max}, not {text:?}"))),
    }
}

/// Checks a new order and completes it: id, status, times and total.
pub fn build_order(new: NewOrder, now: DateTime<Utc>) -> Result<Order, String> {
    let order_id = match new.order_id {
        Some(id) => id,
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    validate_id("order id", &order_id)?;
    validate_id("customer id", &new.customer_id)?;
    if let Some(status) = new.status.filter(|s| *s != Status::Pending) {
        return Err(format!("a new order starts PENDING, not {status}"));
    }
    let created_at = match new.created_at.as_deref() {
        None => now,
        Some(text) => iso_millis::parse(text)?,
    };
    check_created_at(created_at, now)?;
    // Millisecond precision, as stored: the keys and the item must agree.
    let created_at = iso_millis::parse(&iso_millis::format(&created_at))?;
    if !(new.currency.len() == 3 && new.currency.chars().all(|c| c.is_ascii_uppercase())) {
        return Err(format!("currency {:?} is not a three-letter code such as USD", new.currency));
    }
    if new.items.is_empty() || new.items.len() > MAX_ITEMS {
        return Err(format!("an order has 1 to {MAX_ITEMS} line items"));
    }
    let mut total: i64 = 0;
    for item in &new.items {
        check_text("sku", &item.sku)?;
        check_text("item name", &item.name)?;
        if !(1..=MAX_QUANTITY).contains(&item.quantity) {
            return Err(format!("quantity of {} must be 1 to {MAX_QUANTITY}", item.sku));
        }
        if item.unit_price < 0 {
            return Err(format!("unitPrice of {} is negative", item.sku));
        }
        total = item
            .unit_price
            .checked_mul(i64::from(item.quantity))
            .and_then(|line| total.checked_add(line))
            .ok_or("the order total is too large")?;
    }
    check_text("shippingCity", &new.shipping_city)?;
    check_text("shippingCountry", &new.shipping_country)?;
    Ok(Order {
        order_id,
        customer_id: new.customer_id,
        status: Status::Pending,
        created_at,
        updated_at: created_at,
        total,
        currency: new.currency,
        items: new.items,
        shipping_city: new.shipping_city,
        shipping_country: new.shipping_country,
    })
}

/// A reason is optional; given, it is short text like any other.
fn check_reason(reason: Option<&str>) -> Result<Option<&str>, String> {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        None => Ok(None),
        Some(reason) => check_text("reason", reason).map(|()| Some(reason)),
    }
}

/// An actor name as the audit trail files it: a user or token name.
fn validate_actor(actor: &str) -> Result<(), String> {
    crate::server::auth::accounts::validate_name("actor", actor)
}

/// Within a day before now (late imports) and a minute after (clock skew).
fn check_created_at(created_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), String> {
    if (created_at - now).num_seconds() > MAX_SKEW_SECONDS {
        return Err(format!("createdAt {} is in the future", iso_millis::format(&created_at)));
    }
    if (now - created_at).num_days() >= MAX_AGE_DAYS {
        return Err(format!(
            "createdAt {} is more than {MAX_AGE_DAYS} day in the past",
            iso_millis::format(&created_at)
        ));
    }
    Ok(())
}

/// Text shown to staff: not blank, not too long, and no control or
/// direction-override characters (which can make a page lie about what it
/// shows, e.g. reverse an order id).
pub(crate) fn check_text(name: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() || text.len() > MAX_TEXT {
        return Err(format!("{name} must be 1 to {MAX_TEXT} characters"));
    }
    if let Some(bad) = text.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(format!(
            "{name} has the character U+{:04X}: control and text-direction characters are not allowed",
            bad as u32
        ));
    }
    Ok(())
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LineItem;

    fn new_order() -> NewOrder {
        NewOrder {
            order_id: Some("o-1".into()),
            customer_id: "c-1".into(),
            status: None,
            created_at: Some("2026-11-29T08:00:00.1234Z".into()),
            currency: "USD".into(),
            items: vec![
                LineItem { sku: "A".into(), name: "Tent".into(), quantity: 2, unit_price: 1000 },
                LineItem { sku: "B".into(), name: "Stove".into(), quantity: 1, unit_price: 250 },
            ],
            shipping_city: "Oslo".into(),
            shipping_country: "NO".into(),
        }
    }

    fn now() -> DateTime<Utc> {
        iso_millis::parse("2026-11-29T09:00:00Z").unwrap()
    }

    #[test]
    fn a_new_order_is_completed() {
        let order = build_order(new_order(), now()).unwrap();
        assert_eq!(order.total, 2250);
        assert_eq!(order.status, Status::Pending);
        assert_eq!(iso_millis::format(&order.created_at), "2026-11-29T08:00:00.123Z");
        assert_eq!(order.item_count(), 3);
        let generated = build_order(NewOrder { order_id: None, ..new_order() }, now()).unwrap();
        assert!(validate_id("order id", &generated.order_id).is_ok());
        let explicit = build_order(NewOrder { status: Some(Status::Pending), ..new_order() }, now()).unwrap();
        assert_eq!(explicit.status, Status::Pending);
    }

    #[test]
    fn bad_orders_are_refused_with_a_reason() {
        let cases: Vec<(NewOrder, &str)> = vec![
            (NewOrder { order_id: Some("a#b".into()), ..new_order() }, "order id"),
            (NewOrder { customer_id: "".into(), ..new_order() }, "customer id"),
            (NewOrder { currency: "usd".into(), ..new_order() }, "currency"),
            (NewOrder { items: vec![], ..new_order() }, "line items"),
            (NewOrder { created_at: Some("2026-11-29T09:01:01Z".into()), ..new_order() }, "future"),
            (NewOrder { created_at: Some("2026-11-28T09:00:00Z".into()), ..new_order() }, "past"),
            (NewOrder { created_at: Some("0001-01-01T00:00:00Z".into()), ..new_order() }, "past"),
            (NewOrder { status: Some(Status::Delivered), ..new_order() }, "starts PENDING"),
            (NewOrder { shipping_city: " ".into(), ..new_order() }, "shippingCity"),
            (NewOrder { shipping_city: "Os\u{7}lo".into(), ..new_order() }, "U+0007"),
            (NewOrder { shipping_country: "N\u{202E}O".into(), ..new_order() }, "U+202E"),
        ];
        for (order, reason) in cases {
            let err = build_order(order, now()).unwrap_err();
            assert!(err.contains(reason), "{err:?} should mention {reason}");
        }
        let mut huge = new_order();
        huge.items[0].unit_price = i64::MAX;
        assert!(build_order(huge, now()).unwrap_err().contains("too large"));
        let mut newline = new_order();
        newline.items[0].name = "Tent\nDELIVERED".into();
        assert!(build_order(newline, now()).unwrap_err().contains("item name"));
    }

    #[test]
    fn numbers_are_bounded() {
        assert_eq!(parse_limit(None).unwrap(), DEFAULT_PAGE_SIZE);
        assert_eq!(parse_limit(Some("100")).unwrap(), 100);
        assert_eq!(parse_limit(Some("05")).unwrap(), 5);
        assert!(parse_limit(Some("101")).is_err());
        assert!(parse_limit(Some("0")).is_err());
        assert!(parse_limit(Some("ten")).is_err());
    }

    #[test]
    fn filters_are_checked_and_amounts_read_in_units() {
        assert_eq!(parse_amount("150").unwrap(), 15_000);
        assert_eq!(parse_amount("150.5").unwrap(), 15_050);
        assert_eq!(parse_amount("0.07").unwrap(), 7);
        for bad in ["", "-1", "1.234", "1,5", "abc", ".5", "5.", "99999999999999999999"] {
            assert!(parse_amount(bad).is_err(), "{bad}");
        }
        let params = |stuck: &str, country: &str| PendingParams {
            stuck: Some(stuck.into()),
            country: Some(country.into()),
            ..PendingParams::default()
        };
        let filters = parse_filters(&params("1", "no")).unwrap();
        assert!(filters.stuck);
        assert_eq!(filters.country.as_deref(), Some("NO"));
        assert!(parse_filters(&params("maybe", "")).is_err());
        assert!(parse_filters(&params("0", "NOR")).is_err());
    }

    #[test]
    fn dates_are_kept_to_a_window() {
        assert_eq!(parse_date(None, now()).unwrap(), now().date_naive());
        assert!(parse_date(Some("2026-11-30"), now()).is_ok(), "tomorrow");
        assert!(parse_date(Some("2000-01-01"), now()).is_ok());
        for bad in ["2026-12-01", "1999-12-31", "0001-01-01", "9999-12-31", "2026-02-30", "yesterday"] {
            assert!(matches!(parse_date(Some(bad), now()), Err(ApiError::BadRequest(_))), "{bad}");
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn no_text_makes_date_or_number_parsing_panic(text in ".{0,40}") {
                let _ = parse_date(Some(&text), now());
                let _ = parse_limit(Some(&text));
            }

            #[test]
            fn every_day_in_the_window_is_accepted_as_written(days in 0i64..9_830) {
                let day = FIRST_DAY + chrono::Duration::days(days);
                let text = day.format("%Y-%m-%d").to_string();
                prop_assert_eq!(parse_date(Some(&text), now()).ok(), Some(day));
            }
        }
    }
}

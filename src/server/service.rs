//! What the JSON API and the pages both do: check the input, ask the store,
//! sign the cursors. Each operation is written once, here.

use super::consumer::ConsumerStatus;
use super::cursor::CursorCodec;
use super::live::LiveHub;
use super::store::Counters;
use super::error::{ApiError, StoreError};
use super::store::Store;
use crate::model::{
    Activity, DEFAULT_PAGE_SIZE, Dashboard, LiveCounters, MAX_DAYS, SearchHit, Summary, MAX_PAGE_SIZE, NewOrder, Order, OrderPage, PageParams,
    PendingPage, PendingParams, Status, StatusChange, iso_millis, validate_id,
};
use chrono::{DateTime, Days, NaiveDate, Utc};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// Largest accepted line-item count, quantity and string length.
const MAX_ITEMS: usize = 100;
const MAX_QUANTITY: u32 = 10_000;
const MAX_TEXT: usize = 200;
/// How far in the future a client's `createdAt` may be (clock skew).
const MAX_SKEW_SECONDS: i64 = 60;

#[derive(Clone)]
pub struct Service {
    pub store: Arc<Store>,
    pub cursors: Arc<CursorCodec>,
    /// Where the stream consumer publishes, and `/api/live` listens.
    pub live: LiveHub,
    /// The running consumer's status, once one is started.
    pub consumer: Arc<Mutex<Option<Arc<Mutex<ConsumerStatus>>>>>,
    pub last_reconcile: Arc<Mutex<Option<LastReconcile>>>,
    /// Recent dashboard reads, shared by every viewer of the same view.
    dashboards: Arc<Mutex<HashMap<String, (Instant, Arc<OnceCell<Dashboard>>)>>>,
}

/// How long one read of a dashboard view serves everyone who opens it: a
/// room full of screens costs the store one read a second, not one each.
/// Live pushes carry what happens in between; this server's own writes clear it.
const DASHBOARD_TTL: Duration = Duration::from_secs(1);

/// The most recent reconciliation `serve` ran.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastReconcile {
    pub date: NaiveDate,
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    pub counter: i64,
    pub recount: u64,
    pub drift: i64,
    pub repaired: bool,
}

/// `GET /api/metrics/pending`: a day's counters and how fresh they are.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingMetrics {
    pub date: NaiveDate,
    pub pending: i64,
    pub per_shard: Vec<i64>,
    pub created: i64,
    pub per_status: std::collections::BTreeMap<String, i64>,
    pub per_minute: PerMinute,
    pub freshness: Freshness,
    pub last_reconcile: Option<LastReconcile>,
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
    pub last_error: Option<String>,
}

impl Service {
    pub fn new(store: Arc<Store>, cursors: Arc<CursorCodec>) -> Self {
        Self {
            store,
            cursors,
            live: LiveHub::default(),
            consumer: Arc::new(Mutex::new(None)),
            last_reconcile: Arc::new(Mutex::new(None)),
            dashboards: Arc::new(Mutex::new(HashMap::new())),
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
            date,
            pending: counters.pending,
            per_shard: counters.per_shard,
            created: counters.created,
            per_status: counters.per_status,
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
                last_error: status.last_error,
            },
            last_reconcile: self.last_reconcile.lock().expect("poisoned").clone(),
        })
    }

    /// The counters of a day as `/api/live` first sends them.
    pub async fn live_counters(&self, date: Option<&str>) -> Result<LiveCounters, ApiError> {
        let date = parse_date(date, Utc::now())?;
        let counters = self.store.read_counters(date).await?;
        Ok(LiveCounters {
            date,
            pending: counters.pending,
            per_shard: counters.per_shard,
            created: counters.created,
            as_of: Utc::now(),
            behind_ms: self.consumer_status().behind_ms,
        })
    }

    pub fn parse_day(&self, date: Option<&str>) -> Result<NaiveDate, ApiError> {
        parse_date(date, Utc::now())
    }

    /// Runs a reconciliation of `date` and remembers its outcome.
    pub async fn reconcile(&self, date: NaiveDate) -> Result<LastReconcile, ApiError> {
        let outcome = self.store.reconcile(date, true).await?;
        let last = LastReconcile {
            date,
            at: Utc::now(),
            counter: outcome.counter,
            recount: outcome.recount.total(),
            drift: outcome.drift,
            repaired: outcome.repaired,
        };
        *self.last_reconcile.lock().expect("poisoned") = Some(last.clone());
        Ok(last)
    }

    pub async fn order(&self, order_id: &str) -> Result<Order, ApiError> {
        validate_id("order id", order_id).map_err(ApiError::BadRequest)?;
        self.store
            .get_order(order_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("order {order_id} not found")).into())
    }

    pub async fn customer_orders(&self, customer_id: &str, params: &PageParams) -> Result<OrderPage, ApiError> {
        validate_id("customer id", customer_id).map_err(ApiError::BadRequest)?;
        let limit = parse_limit(params.limit.as_deref())?;
        let scope = format!("customer:{customer_id}");
        let after = self.decode_cursor(params.cursor.as_deref(), &scope)?;
        let page = self.store.customer_orders(customer_id, limit, after.as_deref()).await?;
        Ok(OrderPage {
            orders: page.orders,
            next: page.next_after.map(|after| self.cursors.encode(&scope, &after)),
        })
    }

    pub async fn pending(&self, params: &PendingParams) -> Result<PendingPage, ApiError> {
        let as_of = Utc::now();
        let date = parse_date(params.date.as_deref(), as_of)?;
        let days = parse_number("days", params.days.as_deref(), 1, 1, MAX_DAYS)?;
        let limit = parse_limit(params.limit.as_deref())?;
        let scope = format!("pending:{date}:{days}");
        let after = self.decode_cursor(params.cursor.as_deref(), &scope)?;
        let dates: Vec<NaiveDate> = (0..days)
            .filter_map(|back| date.checked_sub_days(Days::new(u64::from(back))))
            .collect();
        let read = self.store.pending_page(&dates, limit, after.as_deref()).await?;
        Ok(PendingPage {
            orders: read.orders,
            next: read.next_after.map(|after| self.cursors.encode(&scope, &after)),
            items_read: read.items_read,
            date,
            days,
            as_of,
        })
    }

    /// The headline figures of a day: the stream's counters, or, for a day
    /// the consumer has not counted, a recount of the index.
    pub async fn summary(&self, date: NaiveDate) -> Result<(Summary, Option<Counters>), ApiError> {
        let (counters, oldest) = futures::try_join!(self.store.read_counters(date), self.store.oldest_pending(date))?;
        if counters.exists {
            let summary = Summary {
                date,
                pending: counters.pending.max(0) as u64,
                per_shard: counters.per_shard.iter().map(|n| (*n).max(0) as u64).collect(),
                created: Some(counters.created.max(0) as u64),
                oldest_pending: oldest,
                source: "counters".into(),
            };
            return Ok((summary, Some(counters)));
        }
        let recount = self.store.recount_pending(date).await?;
        let summary = Summary {
            date,
            pending: recount.total(),
            per_shard: recount.per_shard,
            created: None,
            oldest_pending: oldest,
            source: "recount".into(),
        };
        Ok((summary, None))
    }

    pub async fn dashboard(&self, params: &PendingParams, stuck_after_minutes: u32) -> Result<Dashboard, ApiError> {
        let key = format!("{params:?}|{stuck_after_minutes}");
        let cell = {
            let mut cache = self.dashboards.lock().expect("dashboard cache poisoned");
            cache.retain(|_, (read_at, _)| read_at.elapsed() < DASHBOARD_TTL);
            cache.entry(key).or_insert_with(|| (Instant::now(), Arc::new(OnceCell::new()))).1.clone()
        };
        // Concurrent viewers wait for the one read; a failed read is not kept.
        let dashboard = cell.get_or_try_init(|| self.read_dashboard(params, stuck_after_minutes)).await?;
        Ok(dashboard.clone())
    }

    fn forget_dashboards(&self) {
        self.dashboards.lock().expect("dashboard cache poisoned").clear();
    }

    async fn read_dashboard(&self, params: &PendingParams, stuck_after_minutes: u32) -> Result<Dashboard, ApiError> {
        let page = self.pending(params).await?;
        let (summary, counters) = self.summary(page.date).await?;
        let activity = counters.map(|c| activity(&c));
        let behind_ms = self.consumer_status().behind_ms;
        Ok(Dashboard { page, summary, activity, behind_ms, stuck_after_minutes })
    }

    /// An order with this id, else a customer with orders, else not found.
    pub async fn search(&self, query: &str) -> Result<SearchHit, ApiError> {
        let id = query.trim();
        let not_found = || ApiError::Store(StoreError::NotFound(format!("nothing found for {id:?}")));
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

    pub async fn create_order(&self, new: NewOrder) -> Result<Order, ApiError> {
        let order = build_order(new, Utc::now()).map_err(ApiError::BadRequest)?;
        self.store.create_order(&order).await?;
        self.forget_dashboards();
        Ok(order)
    }

    pub async fn change_status(&self, order_id: &str, change: StatusChange) -> Result<Order, ApiError> {
        validate_id("order id", order_id).map_err(ApiError::BadRequest)?;
        if !change.from.can_become(change.to) {
            return Err(ApiError::BadRequest(format!(
                "an order cannot go from {} to {}",
                change.from, change.to
            )));
        }
        let order = self.store.change_status(order_id, change.from, change.to, Utc::now()).await?;
        self.forget_dashboards();
        Ok(order)
    }

    fn decode_cursor(&self, cursor: Option<&str>, scope: &str) -> Result<Option<String>, ApiError> {
        let Some(cursor) = cursor.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let after = self.cursors.decode(cursor, scope)?;
        // Signed by us, so well formed; checked anyway before it reaches a query.
        if super::keys::parse_timeline_sk(&after).is_none() {
            return Err(ApiError::BadRequest("bad cursor: it holds no valid position".into()));
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

pub fn parse_date(text: Option<&str>, now: DateTime<Utc>) -> Result<NaiveDate, ApiError> {
    match text.filter(|d| !d.is_empty()) {
        None => Ok(now.date_naive()),
        Some(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map_err(|_| ApiError::BadRequest(format!("date {text:?} is not a YYYY-MM-DD date"))),
    }
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
        _ => Err(ApiError::BadRequest(format!(
            "{name} must be a whole number from {min} to {max}, not {text:?}"
        ))),
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
    let created_at = match new.created_at.as_deref() {
        None => now,
        Some(text) => iso_millis::parse(text)?,
    };
    if (created_at - now).num_seconds() > MAX_SKEW_SECONDS {
        return Err(format!("createdAt {} is in the future", iso_millis::format(&created_at)));
    }
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
        status: new.status.unwrap_or(Status::Pending),
        created_at,
        updated_at: created_at,
        total,
        currency: new.currency,
        items: new.items,
        shipping_city: new.shipping_city,
        shipping_country: new.shipping_country,
    })
}

fn check_text(name: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() || text.len() > MAX_TEXT {
        return Err(format!("{name} must be 1 to {MAX_TEXT} characters"));
    }
    Ok(())
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
    }

    #[test]
    fn bad_orders_are_refused_with_a_reason() {
        let cases: Vec<(NewOrder, &str)> = vec![
            (NewOrder { order_id: Some("a#b".into()), ..new_order() }, "order id"),
            (NewOrder { customer_id: "".into(), ..new_order() }, "customer id"),
            (NewOrder { currency: "usd".into(), ..new_order() }, "currency"),
            (NewOrder { items: vec![], ..new_order() }, "line items"),
            (NewOrder { created_at: Some("2026-11-30T08:00:00Z".into()), ..new_order() }, "future"),
            (NewOrder { shipping_city: " ".into(), ..new_order() }, "shippingCity"),
        ];
        for (order, reason) in cases {
            let err = build_order(order, now()).unwrap_err();
            assert!(err.contains(reason), "{err:?} should mention {reason}");
        }
        let mut huge = new_order();
        huge.items[0].unit_price = i64::MAX;
        assert!(build_order(huge, now()).unwrap_err().contains("too large"));
    }

    #[test]
    fn numbers_are_bounded() {
        assert_eq!(parse_limit(None).unwrap(), DEFAULT_PAGE_SIZE);
        assert_eq!(parse_limit(Some("100")).unwrap(), 100);
        assert!(parse_limit(Some("101")).is_err());
        assert!(parse_limit(Some("0")).is_err());
        assert!(parse_limit(Some("ten")).is_err());
    }
}

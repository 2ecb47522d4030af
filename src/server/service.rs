//! What the JSON API and the pages both do: check the input, ask the store,
//! sign the cursors. Each operation is written once, here.

use super::cursor::CursorCodec;
use super::error::{ApiError, StoreError};
use super::store::Store;
use crate::model::{
    DEFAULT_PAGE_SIZE, Dashboard, MAX_DAYS, SearchHit, Summary, MAX_PAGE_SIZE, NewOrder, Order, OrderPage, PageParams,
    PendingPage, PendingParams, Status, StatusChange, iso_millis, validate_id,
};
use chrono::{DateTime, Days, NaiveDate, Utc};
use std::sync::Arc;

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
}

impl Service {
    pub fn new(store: Arc<Store>, cursors: Arc<CursorCodec>) -> Self {
        Self { store, cursors }
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
        let date = match params.date.as_deref().filter(|d| !d.is_empty()) {
            None => as_of.date_naive(),
            Some(text) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map_err(|_| ApiError::BadRequest(format!("date {text:?} is not a YYYY-MM-DD date")))?,
        };
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

    /// The headline figures of a day. Until the stream's counters exist they
    /// are recounted from the index.
    pub async fn summary(&self, date: NaiveDate) -> Result<Summary, ApiError> {
        let (recount, oldest) =
            futures::try_join!(self.store.recount_pending(date), self.store.oldest_pending(date))?;
        Ok(Summary {
            date,
            pending: recount.total(),
            per_shard: recount.per_shard,
            created: None,
            oldest_pending: oldest,
            source: "recount".into(),
        })
    }

    pub async fn dashboard(&self, params: &PendingParams, stuck_after_minutes: u32) -> Result<Dashboard, ApiError> {
        let page = self.pending(params).await?;
        let summary = self.summary(page.date).await?;
        Ok(Dashboard { page, summary, stuck_after_minutes })
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
        Ok(self.store.change_status(order_id, change.from, change.to, Utc::now()).await?)
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

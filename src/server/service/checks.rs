//! Input checks shared by the JSON API, the pages and the command line:
//! dates kept to a window, bounded numbers, the list's filters, and a new
//! order completed or refused with a reason.

use super::Filters;
use crate::model::{
    DEFAULT_PAGE_SIZE, Invalid, MAX_PAGE_SIZE, NewOrder, Order, PendingParams, Status, iso_millis, validate_id,
};
use crate::server::error::ApiError;
use chrono::{DateTime, NaiveDate, Utc};

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
pub(super) fn parse_filters(params: &PendingParams) -> Result<Filters, ApiError> {
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
        validate_id("customer id", customer)?;
    }
    Ok(Filters { stuck, country, min_total, customer })
}

/// An amount in a currency's units (`150`, `150.5`, `150.50`) as minor units.
fn parse_amount(text: &str) -> Result<i64, ApiError> {
    crate::model::parse_amount(text)
        .ok_or_else(|| ApiError::BadRequest(format!("minTotal {text:?} is not an amount such as 150 or 150.50")))
}

pub(super) fn parse_limit(text: Option<&str>) -> Result<u32, ApiError> {
    parse_number("limit", text, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
}

pub(super) fn parse_number(name: &str, text: Option<&str>, default: u32, min: u32, max: u32) -> Result<u32, ApiError> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(default);
    };
    match text.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::BadRequest(format!("{name} must be a whole number from {min} to {max}, not {text:?}"))),
    }
}

/// Checks a new order and completes it: id, status, times and total.
pub fn build_order(new: NewOrder, now: DateTime<Utc>) -> Result<Order, Invalid> {
    let order_id = match new.order_id {
        Some(id) => id,
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    validate_id("order id", &order_id)?;
    validate_id("customer id", &new.customer_id)?;
    if let Some(status) = new.status.filter(|s| *s != Status::Pending) {
        return Err(Invalid::NotPending(status));
    }
    let created_at = match new.created_at.as_deref() {
        None => now,
        Some(text) => iso_millis::parse(text).map_err(Invalid::Timestamp)?,
    };
    check_created_at(created_at, now)?;
    // Millisecond precision, as stored: the keys and the item must agree.
    let created_at = iso_millis::parse(&iso_millis::format(&created_at)).map_err(Invalid::Timestamp)?;
    if !(new.currency.len() == 3 && new.currency.chars().all(|c| c.is_ascii_uppercase())) {
        return Err(Invalid::Currency(new.currency));
    }
    if new.items.is_empty() || new.items.len() > MAX_ITEMS {
        return Err(Invalid::ItemCount(MAX_ITEMS));
    }
    let mut total: i64 = 0;
    for item in &new.items {
        check_text("sku", &item.sku)?;
        check_text("item name", &item.name)?;
        if !(1..=MAX_QUANTITY).contains(&item.quantity) {
            return Err(Invalid::Quantity { sku: item.sku.clone(), max: MAX_QUANTITY });
        }
        if item.unit_price < 0 {
            return Err(Invalid::NegativePrice(item.sku.clone()));
        }
        total = item
            .unit_price
            .checked_mul(i64::from(item.quantity))
            .and_then(|line| total.checked_add(line))
            .ok_or(Invalid::TotalTooLarge)?;
    }
    check_text("shippingCity", &new.shipping_city)?;
    check_text("shippingCountry", &new.shipping_country)?;
    Ok(Order {
        order_id,
        customer_id: Some(new.customer_id),
        status: Some(Status::Pending.into()),
        created_at: Some(created_at),
        updated_at: Some(created_at),
        total: Some(total),
        currency: Some(new.currency),
        items: Some(new.items),
        shipping_city: Some(new.shipping_city),
        shipping_country: Some(new.shipping_country),
        problems: Vec::new(),
    })
}

/// A reason is optional; given, it is short text like any other.
pub(super) fn check_reason(reason: Option<&str>) -> Result<Option<&str>, Invalid> {
    match reason.map(str::trim).filter(|r| !r.is_empty()) {
        None => Ok(None),
        Some(reason) => check_text("reason", reason).map(|()| Some(reason)),
    }
}

/// An actor name as the audit trail files it: a user or token name.
pub(super) fn validate_actor(actor: &str) -> Result<(), Invalid> {
    crate::server::auth::accounts::validate_name("actor", actor)
}

/// Within a day before now (late imports) and a minute after (clock skew).
fn check_created_at(created_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), Invalid> {
    if (created_at - now).num_seconds() > MAX_SKEW_SECONDS {
        return Err(Invalid::Future(iso_millis::format(&created_at)));
    }
    if (now - created_at).num_days() >= MAX_AGE_DAYS {
        return Err(Invalid::TooOld { at: iso_millis::format(&created_at), days: MAX_AGE_DAYS });
    }
    Ok(())
}

/// Text shown to staff: not blank, not too long, and no control or
/// direction-override characters (which can make a page lie about what it
/// shows, e.g. reverse an order id).
pub(crate) fn check_text(field: &'static str, text: &str) -> Result<(), Invalid> {
    if text.trim().is_empty() || text.len() > MAX_TEXT {
        return Err(Invalid::TextLength { field, max: MAX_TEXT });
    }
    if let Some(bad) = text.chars().find(|c| c.is_control() || is_bidi_control(*c)) {
        return Err(Invalid::Character { field, code: bad as u32 });
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
        assert_eq!(order.total, Some(2250));
        assert_eq!(order.known_status(), Some(Status::Pending));
        assert_eq!(iso_millis::format(&order.created_at.unwrap()), "2026-11-29T08:00:00.123Z");
        assert_eq!(order.item_count(), Some(3));
        let generated = build_order(NewOrder { order_id: None, ..new_order() }, now()).unwrap();
        assert!(validate_id("order id", &generated.order_id).is_ok());
        let explicit = build_order(NewOrder { status: Some(Status::Pending), ..new_order() }, now()).unwrap();
        assert_eq!(explicit.known_status(), Some(Status::Pending));
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
            let err = build_order(order, now()).unwrap_err().to_string();
            assert!(err.contains(reason), "{err:?} should mention {reason}");
        }
        let mut huge = new_order();
        huge.items[0].unit_price = i64::MAX;
        assert_eq!(build_order(huge, now()).unwrap_err(), Invalid::TotalTooLarge);
        let mut newline = new_order();
        newline.items[0].name = "Tent\nDELIVERED".into();
        assert_eq!(build_order(newline, now()).unwrap_err(), Invalid::Character { field: "item name", code: 0x0A });
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

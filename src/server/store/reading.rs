//! Orders read from items any writer may have written. DynamoDB enforces no
//! schema beyond the keys, and the orders table has other writers (the order
//! service, batch jobs, migrations, a hand edit): an item may miss a field,
//! hold another type than the app writes, or a status this console does not
//! know. Reading one never fails: every field is read on its own, what
//! cannot be read is left absent and named in the order's `problems`, in our
//! words, and nothing absent is given a made-up value.
//!
//! One reader for every page, API route, export and the stream consumer:
//! what a page flags is what the consumer counts as drift
//! (`stream::quality`), and how an order counts (`stream::counters::image_of`)
//! reads its fields the same way. Pure: items in, orders out.

use super::Item;
use super::keys::{self, GSI1PK, GSI1SK, GSI2PK, GSI2SK, PK, attr};
use crate::model::{LineItem, Order, OrderStatus, PendingOrder, Problem, ProblemKind, Status, iso_millis};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, NaiveDate, Utc};

/// The longest stretch of a value quoted in a problem.
const PREVIEW: usize = 40;

/// An order's full item as an order.
pub fn order(item: &Item) -> Order {
    let mut f = Fields::new(item);
    let head = f.head();
    let status = f.status();
    let updated_at = f.timestamp(attr::UPDATED_AT, false);
    let items = f.line_items();
    let order = Order {
        order_id: head.order_id,
        customer_id: head.customer_id,
        status,
        created_at: head.created_at,
        updated_at,
        total: head.total,
        currency: head.currency,
        items,
        shipping_city: head.shipping_city,
        shipping_country: head.shipping_country,
        problems: Vec::new(),
    };
    f.customer_key(&order);
    f.timeline_key(GSI1SK, &order.order_id, order.created_at);
    f.pending_keys(&order);
    Order { problems: f.problems, ..order }
}

/// A PENDING list row from a GSI2 entry (its keys and the projected
/// attributes, `keys::GSI2_PROJECTED`), or from a full item.
pub fn pending_row(item: &Item) -> PendingOrder {
    let mut f = Fields::new(item);
    let head = f.head();
    let item_count = f.count(attr::ITEM_COUNT);
    f.timeline_key(GSI2SK, &head.order_id, head.created_at);
    f.pending_day(head.created_at);
    PendingOrder {
        order_id: head.order_id,
        customer_id: head.customer_id,
        created_at: head.created_at,
        total: head.total,
        currency: head.currency,
        item_count,
        shipping_city: head.shipping_city,
        shipping_country: head.shipping_country,
        problems: f.problems,
    }
}

/// The GSI2 partition an item names: (day, shard), when its `GSI2PK` is a
/// PENDING key.
pub fn pending_partition(item: &Item) -> Option<(NaiveDate, u32)> {
    keys::parse_pending_pk(item.get(GSI2PK)?.as_s().ok()?)
}

/// What is wrong with an item's GSI2 key given its day's shard count
/// (`shard_count::day_count`): a shard beyond it. Such an order is still
/// listed and counted (readers read every shard the counter names), but
/// its writer used another count than the day's. (A key spelled otherwise
/// than the key design's is `Invalid`: `order` says so.)
pub fn shard_problem(item: &Item, count: u32) -> Option<Problem> {
    let (day, shard) = pending_partition(item)?;
    if !super::shard_count::is_beyond(shard, count) {
        return None;
    }
    let why = format!(
        "GSI2PK names shard {shard} of {day}, which has {count} shards: its writer used another shard count \
         (listed and counted from the day's counters, but every writer should use the day's count)"
    );
    Some(Problem { field: GSI2PK.into(), kind: ProblemKind::ShardBeyondCount, why })
}

/// The fields every read shares.
struct Head {
    order_id: String,
    customer_id: Option<String>,
    created_at: Option<DateTime<Utc>>,
    total: Option<i64>,
    currency: Option<String>,
    shipping_city: Option<String>,
    shipping_country: Option<String>,
}

/// One item being read, and what could not be read of it so far.
struct Fields<'a> {
    item: &'a Item,
    problems: Vec<Problem>,
}

impl<'a> Fields<'a> {
    fn new(item: &'a Item) -> Self {
        Self { item, problems: Vec::new() }
    }

    fn problem(&mut self, field: &str, kind: ProblemKind, why: String) {
        self.problems.push(Problem { field: field.to_string(), kind, why });
    }

    fn head(&mut self) -> Head {
        Head {
            order_id: self.order_id(),
            customer_id: self.text(attr::CUSTOMER_ID),
            created_at: self.timestamp(attr::CREATED_AT, true),
            total: self.whole(attr::TOTAL),
            currency: self.currency(),
            shipping_city: self.text(attr::SHIPPING_CITY),
            shipping_country: self.text(attr::SHIPPING_COUNTRY),
        }
    }

    /// An attribute, or a problem saying it is missing.
    fn get(&mut self, field: &str) -> Option<&'a AttributeValue> {
        let value = self.item.get(field);
        if value.is_none() {
            self.problem(field, ProblemKind::Missing, format!("{field} is missing"));
        }
        value
    }

    fn mistyped(&mut self, field: &str, value: &AttributeValue, expected: &str) {
        self.problem(field, ProblemKind::Mistyped, format!("{field} is {}, not {expected}", describe(value)));
    }

    fn text(&mut self, field: &str) -> Option<String> {
        match self.get(field)? {
            AttributeValue::S(text) if text.is_empty() => {
                self.problem(field, ProblemKind::Invalid, format!("{field} is an empty string"));
                None
            }
            AttributeValue::S(text) => Some(text.clone()),
            other => {
                self.mistyped(field, other, "a string");
                None
            }
        }
    }

    /// A whole number (minor units, a count); a fraction or a number past
    /// what the field holds is not one.
    fn whole(&mut self, field: &str) -> Option<i64> {
        let item = self.item;
        self.whole_at(field, field, item.get(field))
    }

    /// `whole` of a value found under `label` (a line item's own fields).
    fn whole_at(&mut self, field: &str, label: &str, value: Option<&AttributeValue>) -> Option<i64> {
        match value {
            None => {
                self.problem(field, ProblemKind::Missing, format!("{label} is missing"));
                None
            }
            Some(AttributeValue::N(n)) => match n.parse::<i64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    let why = format!("{label} is {}, not a whole number", preview(n));
                    self.problem(field, ProblemKind::Invalid, why);
                    None
                }
            },
            Some(other) => {
                let why = format!("{label} is {}, not a number", describe(other));
                self.problem(field, ProblemKind::Mistyped, why);
                None
            }
        }
    }

    fn count(&mut self, field: &str) -> Option<u32> {
        let n = self.whole(field)?;
        let count = u32::try_from(n).ok();
        if count.is_none() {
            self.problem(field, ProblemKind::Invalid, format!("{field} is {n}, not a count"));
        }
        count
    }

    /// A timestamp. One that reads but not in the sort keys' form is kept,
    /// and said (for `createdAt`, which the keys hold: it sorts apart).
    fn timestamp(&mut self, field: &str, key_form: bool) -> Option<DateTime<Utc>> {
        let text = self.text(field)?;
        let Ok(at) = iso_millis::parse(&text) else {
            let why = format!("{field} is {}, not an ISO-8601 timestamp", preview(&text));
            self.problem(field, ProblemKind::Invalid, why);
            return None;
        };
        if key_form && iso_millis::format(&at) != text {
            let why = format!(
                "{field} is {}, not in the sort keys' form ({}: UTC, three fractional digits), so it sorts apart",
                preview(&text),
                iso_millis::format(&at)
            );
            self.problem(field, ProblemKind::NotKeyForm, why);
        }
        Some(at)
    }

    /// The id the item's key names; `orderId` should say the same.
    fn order_id(&mut self) -> String {
        let from_key = self.item.get(PK).and_then(|v| v.as_s().ok()).and_then(|pk| keys::parse_order_pk(pk));
        let attribute = self.text(attr::ORDER_ID);
        match (from_key, attribute) {
            (Some(key), Some(attribute)) if key != attribute => {
                let why = format!("orderId is {}, but its key names order {key}", preview(&attribute));
                self.problem(attr::ORDER_ID, ProblemKind::Invalid, why);
                key.to_string()
            }
            (Some(key), _) => key.to_string(),
            (None, attribute) => {
                let pk = self.item.get(PK).map(describe).unwrap_or_else(|| "missing".into());
                self.problem(PK, ProblemKind::Invalid, format!("PK is {pk}, not an order key"));
                attribute.unwrap_or_default()
            }
        }
    }

    fn status(&mut self) -> Option<OrderStatus> {
        let text = self.text(attr::STATUS)?;
        let status = OrderStatus::from(text.as_str());
        if let OrderStatus::Other(other) = &status {
            let why = format!("status {} is not one this console knows", preview(other));
            self.problem(attr::STATUS, ProblemKind::UnknownStatus, why);
        }
        Some(status)
    }

    fn currency(&mut self) -> Option<String> {
        let currency = self.text(attr::CURRENCY)?;
        if currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Some(currency);
        }
        let why = format!("currency is {}, not a three-letter code", preview(&currency));
        self.problem(attr::CURRENCY, ProblemKind::Invalid, why);
        None
    }

    /// The line items that read whole; each that does not is a problem.
    fn line_items(&mut self) -> Option<Vec<LineItem>> {
        let lines = match self.get(attr::ITEMS)? {
            AttributeValue::L(lines) => lines,
            other => {
                self.mistyped(attr::ITEMS, other, "a list");
                return None;
            }
        };
        if lines.is_empty() {
            self.problem(attr::ITEMS, ProblemKind::Invalid, "items is an empty list".into());
        }
        let read: Vec<LineItem> = lines.iter().enumerate().filter_map(|(i, line)| self.line_item(i, line)).collect();
        Some(read)
    }

    fn line_item(&mut self, i: usize, line: &AttributeValue) -> Option<LineItem> {
        let AttributeValue::M(line) = line else {
            let why = format!("items[{i}] is {}, not a map", describe(line));
            self.problem(attr::ITEMS, ProblemKind::Mistyped, why);
            return None;
        };
        let text = |f: &mut Self, name: &str| match line.get(name) {
            Some(AttributeValue::S(s)) => Some(s.clone()),
            Some(other) => {
                let why = format!("items[{i}].{name} is {}, not a string", describe(other));
                f.problem(attr::ITEMS, ProblemKind::Mistyped, why);
                None
            }
            None => {
                f.problem(attr::ITEMS, ProblemKind::Missing, format!("items[{i}].{name} is missing"));
                None
            }
        };
        let sku = text(self, attr::SKU);
        let name = text(self, attr::LINE_NAME);
        let quantity = self.whole_at(attr::ITEMS, &format!("items[{i}].{}", attr::QUANTITY), line.get(attr::QUANTITY));
        let unit_price =
            self.whole_at(attr::ITEMS, &format!("items[{i}].{}", attr::UNIT_PRICE), line.get(attr::UNIT_PRICE));
        let quantity = quantity.and_then(|q| match u32::try_from(q) {
            Ok(q) => Some(q),
            Err(_) => {
                self.problem(attr::ITEMS, ProblemKind::Invalid, format!("items[{i}].quantity is {q}, not a count"));
                None
            }
        });
        Some(LineItem { sku: sku?, name: name?, quantity: quantity?, unit_price: unit_price? })
    }

    /// `GSI1PK` names the order's customer (else its history is elsewhere).
    fn customer_key(&mut self, order: &Order) {
        let Some(value) = self.get(GSI1PK) else { return };
        let expected = order.customer_id.as_deref().map(keys::customer_pk);
        match value.as_s() {
            Ok(key) if expected.as_deref().is_none_or(|e| e == key) => {}
            _ => {
                let why =
                    format!("GSI1PK is {}, not the key of customer {}", describe(value), show(&order.customer_id));
                self.problem(GSI1PK, ProblemKind::Invalid, why);
            }
        }
    }

    /// An index sort key should be `<createdAt>#<orderId>` in the keys'
    /// form: else the order sorts in the wrong place, or a page cursor
    /// cannot continue after it.
    fn timeline_key(&mut self, field: &str, order_id: &str, created_at: Option<DateTime<Utc>>) {
        let Some(value) = self.item.get(field) else {
            if field == GSI1SK {
                self.problem(
                    field,
                    ProblemKind::Missing,
                    "GSI1SK is missing: the order is in no customer history".into(),
                );
            }
            return;
        };
        let parsed = value.as_s().ok().and_then(|sk| keys::parse_timeline_sk(sk));
        let fits = match (parsed, created_at) {
            (Some((at, id)), Some(created)) => id == order_id && at == created,
            (Some((_, id)), None) => id == order_id,
            (None, _) => false,
        };
        if !fits {
            let expected = created_at.map(|at| keys::timeline_sk(&at, order_id));
            let why = format!(
                "{field} is {}, not <createdAt>#<orderId> ({})",
                describe(value),
                expected.as_deref().unwrap_or("createdAt unreadable")
            );
            self.problem(field, ProblemKind::SortKey, why);
        }
    }

    /// The GSI2 key's day should be the day the order was created.
    fn pending_day(&mut self, created_at: Option<DateTime<Utc>>) {
        let Some(value) = self.item.get(GSI2PK) else { return };
        match (pending_partition(self.item), created_at) {
            (None, _) => {
                let why = format!("GSI2PK is {}, not a PENDING key: the order is on no PENDING list", describe(value));
                self.problem(GSI2PK, ProblemKind::Invalid, why);
            }
            (Some((day, _)), Some(created)) if day != created.date_naive() => {
                let why = format!(
                    "GSI2PK names {day}, but the order was created on {}: it is listed under another day",
                    created.date_naive()
                );
                self.problem(GSI2PK, ProblemKind::KeyDay, why);
            }
            _ => {}
        }
    }

    /// A full item is in GSI2 while PENDING, and only then; while there it
    /// carries what the list shows.
    fn pending_keys(&mut self, order: &Order) {
        let in_gsi2 = self.item.contains_key(GSI2PK);
        match order.status.as_ref() {
            Some(OrderStatus::Known(Status::Pending)) if !in_gsi2 => {
                let why = "the order is PENDING but has no GSI2PK: it is on no PENDING list".to_string();
                self.problem(GSI2PK, ProblemKind::Missing, why);
            }
            Some(OrderStatus::Known(status)) if in_gsi2 && *status != Status::Pending => {
                let why = format!("the order is {status} but still has a GSI2PK: it shows on the PENDING list");
                self.problem(GSI2PK, ProblemKind::Invalid, why);
            }
            _ => {}
        }
        if in_gsi2 {
            self.pending_day(order.created_at);
            if !self.item.contains_key(GSI2SK) {
                self.problem(GSI2SK, ProblemKind::Missing, "GSI2SK is missing: the order is not in GSI2".into());
            }
            self.timeline_key(GSI2SK, &order.order_id, order.created_at);
            self.count(attr::ITEM_COUNT);
        }
    }
}

/// A value as a problem describes it: its type, and a short look at it.
fn describe(value: &AttributeValue) -> String {
    match value {
        AttributeValue::S(s) => format!("a string ({})", preview(s)),
        AttributeValue::N(n) => format!("a number ({})", preview(n)),
        AttributeValue::B(b) => format!("binary ({} bytes)", b.as_ref().len()),
        AttributeValue::Bool(b) => format!("a boolean ({b})"),
        AttributeValue::Null(_) => "null".into(),
        AttributeValue::L(l) => format!("a list ({} elements)", l.len()),
        AttributeValue::M(m) => format!("a map ({} entries)", m.len()),
        AttributeValue::Ss(s) => format!("a string set ({} elements)", s.len()),
        AttributeValue::Ns(s) => format!("a number set ({} elements)", s.len()),
        AttributeValue::Bs(s) => format!("a binary set ({} elements)", s.len()),
        _ => "a value of a type this console does not know".into(),
    }
}

/// Text quoted and escaped (control and direction characters made
/// visible), cut to `PREVIEW` characters.
fn preview(text: &str) -> String {
    let mut cut: String = text.chars().take(PREVIEW).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

fn show(value: &Option<String>) -> String {
    value.as_deref().map(preview).unwrap_or_else(|| "(unreadable)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::iso_millis;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.into())
    }

    fn line(sku: &str, quantity: &str, price: &str) -> AttributeValue {
        AttributeValue::M(
            [("sku", s(sku)), ("name", s("Tent")), ("quantity", n(quantity)), ("unitPrice", n(price))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// A PENDING order exactly as the app writes it.
    fn written() -> Item {
        let order = Order {
            order_id: "o-1".into(),
            customer_id: Some("c-1".into()),
            status: Some(Status::Pending.into()),
            created_at: Some(iso_millis::parse("2026-11-29T10:15:30.000Z").unwrap()),
            updated_at: Some(iso_millis::parse("2026-11-29T10:15:30.000Z").unwrap()),
            total: Some(2500),
            currency: Some("USD".into()),
            items: Some(vec![LineItem { sku: "TENT".into(), name: "Tent".into(), quantity: 2, unit_price: 1250 }]),
            shipping_city: Some("Oslo".into()),
            shipping_country: Some("NO".into()),
            problems: Vec::new(),
        };
        crate::server::store::order_item(&order, 10).unwrap()
    }

    fn fields(problems: &[Problem]) -> Vec<(&str, ProblemKind)> {
        problems.iter().map(|p| (p.field.as_str(), p.kind)).collect()
    }

    #[test]
    fn an_order_the_app_wrote_reads_whole_and_round_trips() {
        let order = order(&written());
        assert!(order.problems.is_empty(), "{:?}", order.problems);
        assert_eq!(order.total, Some(2500));
        assert_eq!(order.item_count(), Some(2));
        assert_eq!(order.known_status(), Some(Status::Pending));
        let row = pending_row(&written());
        assert!(row.problems.is_empty(), "{:?}", row.problems);
        assert_eq!((row.item_count, row.total), (Some(2), Some(2500)));
        // Every attribute name the reader uses is one the app writes.
        let item = written();
        for name in [
            attr::ORDER_ID,
            attr::CUSTOMER_ID,
            attr::STATUS,
            attr::CREATED_AT,
            attr::UPDATED_AT,
            attr::TOTAL,
            attr::CURRENCY,
            attr::ITEMS,
            attr::SHIPPING_CITY,
            attr::SHIPPING_COUNTRY,
            attr::ITEM_COUNT,
        ] {
            assert!(item.contains_key(name), "{name}");
        }
    }

    #[test]
    fn a_missing_total_is_absent_and_said_never_zero() {
        let mut item = written();
        item.remove("total");
        let order = order(&item);
        assert_eq!(order.total, None);
        assert_eq!(fields(&order.problems), [("total", ProblemKind::Missing)]);
        assert_eq!(order.problems[0].why, "total is missing");
        let row = pending_row(&item);
        assert_eq!((row.total, fields(&row.problems)), (None, vec![("total", ProblemKind::Missing)]));
    }

    #[test]
    fn numbers_as_strings_are_not_guessed_at() {
        let mut item = written();
        item.insert("total".into(), s("12.50"));
        item.insert("itemCount".into(), s("2"));
        let order = order(&item);
        assert_eq!(order.total, None);
        assert_eq!(order.problems[0].why, r#"total is a string ("12.50"), not a number"#);
        let row = pending_row(&item);
        assert_eq!((row.total, row.item_count), (None, None));
        assert_eq!(fields(&row.problems), [("total", ProblemKind::Mistyped), ("itemCount", ProblemKind::Mistyped)]);
        item.insert("total".into(), n("12.5"));
        assert_eq!(super::order(&item).problems[0].why, r#"total is "12.5", not a whole number"#);
    }

    #[test]
    fn an_unknown_status_is_kept_as_it_is_and_offers_no_change() {
        let mut item = written();
        item.insert("status".into(), s("ON_HOLD"));
        let order = order(&item);
        assert_eq!(order.status, Some(OrderStatus::Other("ON_HOLD".into())));
        assert!(order.status.as_ref().unwrap().next().is_empty());
        assert_eq!(fields(&order.problems), [("status", ProblemKind::UnknownStatus)]);
        assert_eq!(order.problems[0].why, r#"status "ON_HOLD" is not one this console knows"#);
        assert_eq!(serde_json::to_value(&order).unwrap()["status"], "ON_HOLD");
    }

    #[test]
    fn timestamps_out_of_the_key_form_read_and_are_said() {
        let mut item = written();
        item.remove("updatedAt");
        item.insert("createdAt".into(), s("2026-11-29T10:15:30Z"));
        let order = order(&item);
        assert_eq!(order.created_at, Some(iso_millis::parse("2026-11-29T10:15:30Z").unwrap()));
        assert_eq!(order.updated_at, None);
        assert_eq!(
            fields(&order.problems),
            [("createdAt", ProblemKind::NotKeyForm), ("updatedAt", ProblemKind::Missing)],
            "{:?}",
            order.problems
        );
        item.insert("createdAt".into(), s("yesterday"));
        let order = super::order(&item);
        assert_eq!(order.created_at, None);
        assert!(order.problems.iter().any(|p| p.field == "createdAt" && p.kind == ProblemKind::Invalid));
    }

    #[test]
    fn line_items_read_one_by_one() {
        let mut item = written();
        item.insert(
            "items".into(),
            AttributeValue::L(vec![line("A", "1", "100"), AttributeValue::L(vec![s("B")]), line("C", "\"2\"", "5")]),
        );
        let order = order(&item);
        assert_eq!(order.items.as_ref().map(Vec::len), Some(1), "the readable line");
        assert_eq!(order.item_count(), None, "a count of what could be read would be made up");
        let whys: Vec<&str> = order.problems.iter().map(|p| p.why.as_str()).collect();
        assert_eq!(
            whys,
            [r#"items[1] is a list (1 elements), not a map"#, r#"items[2].quantity is "\"2\"", not a whole number"#]
        );
        item.insert("items".into(), AttributeValue::L(Vec::new()));
        let order = super::order(&item);
        assert_eq!((order.item_count(), fields(&order.problems)), (None, vec![("items", ProblemKind::Invalid)]));
        item.insert("items".into(), AttributeValue::M(Default::default()));
        assert_eq!(fields(&super::order(&item).problems), [("items", ProblemKind::Mistyped)]);
    }

    #[test]
    fn the_keys_are_checked_against_the_fields() {
        let mut item = written();
        item.insert("GSI2SK".into(), s("2026-11-29T10:15:30Z#o-1"));
        item.insert("GSI2PK".into(), s("STATUS#PENDING#2026-11-28#3"));
        let problems = order(&item).problems;
        assert_eq!(fields(&problems), [("GSI2PK", ProblemKind::KeyDay), ("GSI2SK", ProblemKind::SortKey)]);
        let mut confirmed = written();
        confirmed.insert("status".into(), s("CONFIRMED"));
        assert_eq!(fields(&order(&confirmed).problems), [("GSI2PK", ProblemKind::Invalid)]);
        let mut lost = written();
        lost.remove("GSI2PK");
        lost.remove("GSI2SK");
        assert_eq!(fields(&order(&lost).problems), [("GSI2PK", ProblemKind::Missing)]);
        let mut renamed = written();
        renamed.insert("orderId".into(), s("o-2"));
        let order = order(&renamed);
        assert_eq!(order.order_id, "o-1", "the key names the order a link opens");
        assert_eq!(fields(&order.problems), [("orderId", ProblemKind::Invalid)]);
    }

    #[test]
    fn a_shard_beyond_the_days_count_is_said() {
        let mut item = written();
        item.insert("GSI2PK".into(), s("STATUS#PENDING#2026-11-29#57"));
        assert_eq!(shard_problem(&item, 100), None);
        let problem = shard_problem(&item, 10).unwrap();
        assert_eq!(problem.kind, ProblemKind::ShardBeyondCount);
        assert!(problem.why.contains("shard 57") && problem.why.contains("has 10 shards"), "{}", problem.why);
        assert_eq!(shard_problem(&written(), 10), None);
    }

    #[test]
    fn odd_text_is_quoted_escaped_and_cut() {
        let mut item = written();
        item.insert("shippingCity".into(), AttributeValue::B(vec![0xff, 0xfe, 0x00].into()));
        item.insert("customerId".into(), s("\u{202e}evil\u{fffd}\u{0}"));
        let order = order(&item);
        assert_eq!(order.shipping_city, None);
        let whys: Vec<&str> = order.problems.iter().map(|p| p.why.as_str()).collect();
        assert!(whys.contains(&"shippingCity is binary (3 bytes), not a string"), "{whys:?}");
        assert_eq!(preview(&"x".repeat(100)).chars().count(), PREVIEW + 3);
        assert!(preview("\u{202e}\u{0}").contains("\\u{202e}"), "{}", preview("\u{202e}"));
    }

    #[test]
    fn no_item_makes_the_reader_panic() {
        let empty = Item::new();
        let order = order(&empty);
        assert_eq!(order.order_id, "");
        assert!(order.problems.iter().any(|p| p.field == "PK"));
        let _ = pending_row(&empty);
        let mut junk = Item::new();
        for name in ["PK", "orderId", "total", "items", "createdAt", "GSI1SK", "GSI2PK", "GSI2SK", "itemCount"] {
            junk.insert(name.into(), AttributeValue::Null(true));
        }
        let _ = super::order(&junk);
        let _ = pending_row(&junk);
    }
}

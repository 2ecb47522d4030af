//! What an export's rows hold: the columns finance and carriers ask for, an
//! order's total in the currency's units. An order another writer left
//! incomplete is written with what it has (an empty cell for what could not
//! be read) and says why in its last column, `problems`: an export is whole,
//! every row of the list in it, or it fails.

use crate::model::{Order, PendingOrder, iso_millis, problems_text};

pub const PENDING_COLUMNS: [&str; 9] = [
    "orderId",
    "customerId",
    "createdAt",
    "total",
    "currency",
    "itemCount",
    "shippingCity",
    "shippingCountry",
    "problems",
];

pub const HISTORY_COLUMNS: [&str; 9] =
    ["orderId", "status", "createdAt", "total", "currency", "itemCount", "shippingCity", "shippingCountry", "problems"];

/// Minor units as a decimal amount: 12345 → "123.45".
fn amount(minor: i64) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

fn cell<T>(value: Option<T>, show: impl FnOnce(T) -> String) -> String {
    value.map(show).unwrap_or_default()
}

fn plain(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

/// Free text as a spreadsheet will not run it: a cell that starts like a
/// formula (`=`, `+`, `-`, `@`, a tab or a carriage return) gets a leading
/// quote. Other writers' text reaches exports too (ids cannot start so but
/// with `-`, and are left as they are).
fn text(value: &Option<String>) -> String {
    match value.as_deref() {
        Some(text) if text.starts_with(['=', '+', '-', '@', '\t', '\r']) => format!("'{text}"),
        Some(text) => text.to_string(),
        None => String::new(),
    }
}

pub fn pending_row(order: &PendingOrder) -> [String; 9] {
    [
        order.order_id.clone(),
        plain(&order.customer_id),
        cell(order.created_at, |at| iso_millis::format(&at)),
        cell(order.total, amount),
        plain(&order.currency),
        cell(order.item_count, |n| n.to_string()),
        text(&order.shipping_city),
        text(&order.shipping_country),
        problems_text(&order.problems),
    ]
}

pub fn history_row(order: &Order) -> [String; 9] {
    [
        order.order_id.clone(),
        text(&order.status.as_ref().map(|s| s.to_string())),
        cell(order.created_at, |at| iso_millis::format(&at)),
        cell(order.total, amount),
        plain(&order.currency),
        cell(order.item_count(), |n| n.to_string()),
        text(&order.shipping_city),
        text(&order.shipping_country),
        problems_text(&order.problems),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Problem, ProblemKind};

    #[test]
    fn amounts_are_in_the_currency_units() {
        assert_eq!(amount(12345), "123.45");
        assert_eq!(amount(7), "0.07");
        assert_eq!(amount(-250), "-2.50");
    }

    #[test]
    fn a_row_that_could_not_be_read_whole_has_what_it_has_and_says_why() {
        let order = PendingOrder {
            order_id: "o-1".into(),
            customer_id: Some("c-1".into()),
            created_at: None,
            total: None,
            currency: Some("USD".into()),
            item_count: Some(2),
            shipping_city: Some("=HYPERLINK(\"x\")".into()),
            shipping_country: None,
            problems: vec![
                Problem { field: "total".into(), kind: ProblemKind::Missing, why: "total is missing".into() },
                Problem { field: "createdAt".into(), kind: ProblemKind::Missing, why: "createdAt is missing".into() },
            ],
        };
        let row = pending_row(&order);
        assert_eq!(row[3], "", "no made-up total");
        assert_eq!(row[6], "'=HYPERLINK(\"x\")", "not a formula");
        assert_eq!(row[8], "total is missing; createdAt is missing");
        assert_eq!(row.len(), PENDING_COLUMNS.len());
    }
}

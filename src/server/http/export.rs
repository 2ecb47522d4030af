//! What an export's rows hold: the columns finance and carriers ask for, an
//! order's total in the currency's units.

use crate::model::{Order, PendingOrder, iso_millis};

pub const PENDING_COLUMNS: [&str; 8] =
    ["orderId", "customerId", "createdAt", "total", "currency", "itemCount", "shippingCity", "shippingCountry"];

pub const HISTORY_COLUMNS: [&str; 8] =
    ["orderId", "status", "createdAt", "total", "currency", "itemCount", "shippingCity", "shippingCountry"];

/// Minor units as a decimal amount: 12345 → "123.45".
fn amount(minor: i64) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

pub fn pending_row(order: &PendingOrder) -> [String; 8] {
    [
        order.order_id.clone(),
        order.customer_id.clone(),
        iso_millis::format(&order.created_at),
        amount(order.total),
        order.currency.clone(),
        order.item_count.to_string(),
        order.shipping_city.clone(),
        order.shipping_country.clone(),
    ]
}

pub fn history_row(order: &Order) -> [String; 8] {
    [
        order.order_id.clone(),
        order.status.to_string(),
        iso_millis::format(&order.created_at),
        amount(order.total),
        order.currency.clone(),
        order.item_count().to_string(),
        order.shipping_city.clone(),
        order.shipping_country.clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_in_the_currency_units() {
        assert_eq!(amount(12345), "123.45");
        assert_eq!(amount(7), "0.07");
        assert_eq!(amount(-250), "-2.50");
    }
}

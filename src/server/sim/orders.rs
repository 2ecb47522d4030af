//! Orders as a shop makes them: a catalog, cities, one to four line items.
//! The demo data (`seed`), `loadgen` and the benchmark draw from here.

use crate::model::{LineItem, Order, Status};
use chrono::{DateTime, Utc};
use rand::Rng;

const CATALOG: [(&str, &str, i64); 12] = [
    ("TENT-2P", "Ridgeline 2-person tent", 24900),
    ("BAG-20F", "Alpine down sleeping bag", 18900),
    ("PAD-INS", "Insulated sleeping pad", 8900),
    ("STOVE-1", "Canister stove", 4900),
    ("PACK-55", "Trailhead 55L backpack", 17900),
    ("JKT-RAIN", "Stormshell rain jacket", 13900),
    ("BOOT-HK", "Granite hiking boots", 15900),
    ("LAMP-HD", "Headlamp 400 lm", 3900),
    ("BTL-1L", "Insulated bottle 1 L", 2900),
    ("SOCK-MW", "Merino socks, 3 pairs", 2400),
    ("POLE-TR", "Trekking poles", 7900),
    ("FLT-H2O", "Water filter", 4500),
];

const CITIES: [(&str, &str); 10] = [
    ("Seattle", "US"),
    ("Denver", "US"),
    ("Portland", "US"),
    ("Vancouver", "CA"),
    ("Oslo", "NO"),
    ("Munich", "DE"),
    ("Lyon", "FR"),
    ("Bergen", "NO"),
    ("Boulder", "US"),
    ("Calgary", "CA"),
];

/// A PENDING order with 1 to 4 random line items and a random city.
pub fn random_order(rng: &mut impl Rng, order_id: String, customer_id: String, created_at: DateTime<Utc>) -> Order {
    let items: Vec<LineItem> = (0..rng.random_range(1..=4))
        .map(|_| {
            let (sku, name, price) = CATALOG[rng.random_range(0..CATALOG.len())];
            LineItem { sku: sku.into(), name: name.into(), quantity: rng.random_range(1..=3), unit_price: price }
        })
        .collect();
    let (city, country) = CITIES[rng.random_range(0..CITIES.len())];
    Order {
        order_id,
        customer_id: Some(customer_id),
        status: Some(Status::Pending.into()),
        created_at: Some(created_at),
        updated_at: Some(created_at),
        total: Some(items.iter().map(|i| i.unit_price * i64::from(i.quantity)).sum()),
        currency: Some(
            match country {
                "US" => "USD",
                "CA" => "CAD",
                _ => "EUR",
            }
            .into(),
        ),
        items: Some(items),
        shipping_city: Some(city.into()),
        shipping_country: Some(country.into()),
        problems: Vec::new(),
    }
}

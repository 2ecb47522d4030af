//! What one stream record's write cost, as DynamoDB bills it: write units on
//! the base table and on each global secondary index, each charged to the
//! partition key it wrote. Pure: a record's old and new images in, the
//! writes out, so every writer's writes are priced the same way, whoever
//! made them.
//!
//! The base table takes one unit per started KB of the larger of the old
//! and the new item (an insert: the new; a delete: the old), at least one;
//! each index what `rules::layout` says (the throttle proxy prices with the
//! same rules), checked here against what DynamoDB Local reports with
//! `ReturnConsumedCapacity: INDEXES`.
//!
//! What the stream cannot tell: whether a write was made in a transaction
//! (billed twice), and writes that changed nothing (an update to the same
//! values, a delete of a missing item, a failed condition), which DynamoDB
//! bills but records no stream record for. The figures assume every record
//! is a single, non-transactional write (see docs/architecture.md, "How
//! are every writer's write units priced from the stream?").

pub use crate::server::rules::layout::{Index, KeyPair, Projection};
use crate::server::rules::layout::{Side, image_of_map};
use crate::server::rules::units::{SizeError, WRITE_UNIT_BYTES, number_size};
use aws_sdk_dynamodbstreams::types::AttributeValue;
use std::collections::HashMap;

/// An item as a stream record carries it.
pub type Item = HashMap<String, AttributeValue>;

/// A table's key and its indexes: what pricing a write needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub key: KeyPair,
    pub indexes: Vec<Index>,
}

/// Write units charged to one partition key of the table (`index` None) or
/// of one index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub index: Option<String>,
    /// The partition key's value as text (a number's digits, a binary's
    /// base64); empty when the item lacks it.
    pub partition: String,
    pub units: u32,
}

impl Layout {
    /// The orders table as `provision` creates it: its key, and its
    /// indexes as provisioned (`store::order_indexes`).
    pub fn orders() -> Self {
        use crate::server::store::keys::PK;
        Self { key: KeyPair { hash: PK.into(), range: None }, indexes: crate::server::store::order_indexes() }
    }

    /// Every write one record made: the table's first, then each index's.
    /// `old` is None for an insert, `new` None for a delete.
    pub fn price(&self, old: Option<&Item>, new: Option<&Item>) -> Vec<Write> {
        let Some(either) = new.or(old) else { return Vec::new() };
        let size = [old, new].into_iter().flatten().map(item_size).max().unwrap_or(0);
        let mut writes =
            vec![Write { index: None, partition: key_text(either.get(&self.key.hash)), units: units(size) }];
        for index in &self.indexes {
            // Sizing a stream image never fails (a malformed number counts
            // its text), so there is no error to lose here.
            let Ok(index_writes) = index.writes(&self.key, old, new) else { continue };
            writes.extend(index_writes.into_iter().map(|write| {
                let image = match write.side {
                    Side::Old => old,
                    Side::New => new,
                };
                Write {
                    index: Some(index.name.clone()),
                    partition: key_text(image.and_then(|item| item.get(&index.key.hash))),
                    units: units(write.size),
                }
            }));
        }
        writes
    }
}

/// An item as the store builds it (`store::order_item`), as a stream
/// record would carry it: so what the program is about to write is priced
/// by the same rules as what the stream saw written.
pub fn stream_item(item: &crate::server::store::Item) -> Item {
    let item: serde_dynamo::Item = item.clone().into();
    item.into()
}

// A stream image, as the index rules read it (its sizes never fail).
image_of_map!(Item, |name: &str, value| Ok::<_, SizeError>(attribute_size(name, value)));

/// Write units for `size` bytes: one per started KB, at least one.
fn units(size: u64) -> u32 {
    size.div_ceil(WRITE_UNIT_BYTES).max(1) as u32
}

/// A partition key as text, as the page and `/metrics` name it.
pub fn key_text(value: Option<&AttributeValue>) -> String {
    match value {
        Some(AttributeValue::S(s)) => s.clone(),
        Some(AttributeValue::N(n)) => n.clone(),
        Some(AttributeValue::B(b)) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(b.as_ref())
        }
        _ => String::new(),
    }
}

/// An item's size: every attribute's name and value.
pub fn item_size(item: &Item) -> u64 {
    item.iter().map(|(name, value)| attribute_size(name, value)).sum()
}

fn attribute_size(name: &str, value: &AttributeValue) -> u64 {
    name.len() as u64 + value_size(value)
}

/// The size rules of `throttle::units`, on the stream's own types (a
/// number DynamoDB sent is well formed; one that is not counts its text).
fn value_size(value: &AttributeValue) -> u64 {
    let number = |n: &String| number_size(n).unwrap_or(n.len() as u64);
    match value {
        AttributeValue::S(s) => s.len() as u64,
        AttributeValue::N(n) => number(n),
        AttributeValue::B(b) => b.as_ref().len() as u64,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(items) => items.iter().map(|s| s.len() as u64).sum(),
        AttributeValue::Ns(items) => items.iter().map(number).sum(),
        AttributeValue::Bs(items) => items.iter().map(|b| b.as_ref().len() as u64).sum(),
        // 3 bytes for the list or map, 1 per element (and a map's names).
        AttributeValue::L(items) => 3 + items.iter().map(|v| 1 + value_size(v)).sum::<u64>(),
        AttributeValue::M(entries) => 3 + entries.iter().map(|(k, v)| 1 + attribute_size(k, v)).sum::<u64>(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    /// An order as the app writes it, with `pad` bytes of line items and in
    /// GSI2 when `shard` is given.
    fn order(id: &str, pad: usize, shard: Option<u32>) -> Item {
        let mut item = Item::from([
            ("PK".to_string(), s(&format!("ORDER#{id}"))),
            ("orderId".into(), s(id)),
            ("customerId".into(), s("c1")),
            ("createdAt".into(), s("2026-11-29T10:00:00.000Z")),
            ("GSI1PK".into(), s("CUSTOMER#c1")),
            ("GSI1SK".into(), s(&format!("2026-11-29T10:00:00.000Z#{id}"))),
            ("total".into(), AttributeValue::N("1999".into())),
            ("currency".into(), s("USD")),
            ("itemCount".into(), AttributeValue::N("1".into())),
            ("shippingCity".into(), s("Oslo")),
            ("shippingCountry".into(), s("NO")),
            ("status".into(), s(if shard.is_some() { "PENDING" } else { "CONFIRMED" })),
            ("items".into(), s(&"x".repeat(pad))),
        ]);
        if let Some(shard) = shard {
            item.insert("GSI2PK".into(), s(&format!("STATUS#PENDING#2026-11-29#{shard}")));
            item.insert("GSI2SK".into(), s(&format!("2026-11-29T10:00:00.000Z#{id}")));
        }
        item
    }

    /// (table, GSI1, GSI2) units, each summed over its writes.
    fn priced(old: Option<&Item>, new: Option<&Item>) -> (u32, u32, u32) {
        let writes = Layout::orders().price(old, new);
        let on = |index: Option<&str>| writes.iter().filter(|w| w.index.as_deref() == index).map(|w| w.units).sum();
        (on(None), on(Some("GSI1")), on(Some("GSI2")))
    }

    // Each case below is what DynamoDB Local (2026-01-16) reported for the
    // same call with `ReturnConsumedCapacity: INDEXES`.

    #[test]
    fn a_put_writes_the_table_and_each_index_it_enters() {
        assert_eq!(priced(None, Some(&order("1", 0, Some(3)))), (1, 1, 1));
        // 3,000 bytes of line items: 4 KB on the table and GSI1 (ALL), GSI2's
        // INCLUDE entry stays under 1 KB.
        assert_eq!(priced(None, Some(&order("2", 3000, Some(3)))), (4, 4, 1));
        assert_eq!(priced(None, Some(&order("3", 0, None))), (1, 1, 0), "not PENDING: not in GSI2");
    }

    #[test]
    fn an_update_is_charged_on_the_larger_item_and_the_larger_entry() {
        let big = order("2", 3000, Some(3));
        let smaller = order("2", 1500, Some(3));
        assert_eq!(priced(Some(&big), Some(&smaller)), (4, 4, 0), "GSI2's projected attributes did not change");
        assert_eq!(priced(Some(&big), Some(&big)), (4, 0, 0), "the same item: no index write");
    }

    #[test]
    fn leaving_the_sparse_index_deletes_the_old_entry() {
        let pending = order("1", 1500, Some(3));
        let mut confirmed = order("1", 1500, None);
        confirmed.insert("updatedAt".into(), s("2026-11-29T11:00:00.000Z"));
        // The table 2 KB, GSI1's entry updated in place (2 KB), GSI2's deleted.
        assert_eq!(priced(Some(&pending), Some(&confirmed)), (2, 2, 1));
        let mut back = confirmed.clone();
        back.insert("GSI2PK".into(), s("STATUS#PENDING#2026-11-29#1"));
        back.insert("GSI2SK".into(), s("x"));
        assert_eq!(priced(Some(&confirmed), Some(&back)), (2, 2, 1), "entering it again");
    }

    #[test]
    fn only_a_projected_attribute_changes_an_include_entry() {
        let pending = order("3", 2000, Some(3));
        let mut noted = pending.clone();
        noted.insert("note".into(), s("hi"));
        assert_eq!(priced(Some(&pending), Some(&noted)), (3, 3, 0), "GSI2 does not project `note`");
        let mut dearer = noted.clone();
        dearer.insert("total".into(), AttributeValue::N("2999".into()));
        assert_eq!(priced(Some(&noted), Some(&dearer)), (3, 3, 1));
    }

    #[test]
    fn a_new_index_key_is_a_delete_and_a_put_on_their_own_partitions() {
        let before = order("3", 2000, Some(3));
        let mut moved = before.clone();
        moved.insert("GSI1PK".into(), s("CUSTOMER#c2"));
        assert_eq!(priced(Some(&before), Some(&moved)), (3, 6, 0));
        let writes = Layout::orders().price(Some(&before), Some(&moved));
        let gsi1: Vec<&str> =
            writes.iter().filter(|w| w.index.as_deref() == Some("GSI1")).map(|w| w.partition.as_str()).collect();
        assert_eq!(gsi1, ["CUSTOMER#c1", "CUSTOMER#c2"]);
        let mut shard4 = before.clone();
        shard4.insert("GSI2PK".into(), s("STATUS#PENDING#2026-11-29#4"));
        assert_eq!(priced(Some(&before), Some(&shard4)), (3, 3, 2));
    }

    #[test]
    fn a_delete_is_charged_on_the_old_item_and_its_entries() {
        assert_eq!(priced(Some(&order("3", 2000, Some(3))), None), (3, 3, 1));
        assert!(Layout::orders().price(None, None).is_empty());
    }

    #[test]
    fn writes_name_their_partition_keys() {
        let writes = Layout::orders().price(None, Some(&order("9", 0, Some(7))));
        let keys: Vec<(Option<&str>, &str)> =
            writes.iter().map(|w| (w.index.as_deref(), w.partition.as_str())).collect();
        assert_eq!(
            keys,
            [(None, "ORDER#9"), (Some("GSI1"), "CUSTOMER#c1"), (Some("GSI2"), "STATUS#PENDING#2026-11-29#7")]
        );
    }

    #[test]
    fn sizes_follow_the_documented_rules_at_the_kilobyte_boundary() {
        // Entry of exactly 1,024 bytes: one unit; 1,025: two.
        let entry = |city: usize| {
            Item::from([
                ("PK".to_string(), s("ORDER#i")),
                ("GSI2PK".into(), s("STATUS#PENDING#2026-11-29#1")),
                ("GSI2SK".into(), s("t")),
                ("shippingCity".into(), s(&"c".repeat(city))),
                ("other".into(), s(&"z".repeat(3000))),
            ])
        };
        // 2 + 7 + 6 + 27 + 6 + 1 + 12 = 61 bytes besides the city's value.
        assert_eq!(priced(None, Some(&entry(963))).2, 1);
        assert_eq!(priced(None, Some(&entry(964))).2, 2);
        let nested = Item::from([
            ("PK".to_string(), s("ORDER#n")),
            ("m".into(), AttributeValue::M(HashMap::from([("k".to_string(), s("v"))]))),
            ("l".into(), AttributeValue::L(vec![AttributeValue::N("12".into()), AttributeValue::Bool(true)])),
        ]);
        // PK 9; m: 1 + (3 + 1 + 1 + 1); l: 1 + (3 + (1 + 2) + (1 + 1)).
        assert_eq!(item_size(&nested), 9 + 7 + 9);
    }
}

//! A table's key and its global secondary indexes, and what one write costs
//! each index: written once, for every kind of item this code holds (a
//! stream record's images, the throttle proxy's DynamoDB JSON).
//!
//! The rules (developer guide, "Global secondary indexes", write capacity
//! units), checked against what DynamoDB Local reports with
//! `ReturnConsumedCapacity: INDEXES` (the stream's pricing tests):
//!
//! - an index the item is in neither before nor after: nothing;
//! - entering the index (a put, or an update that adds its key): one write of
//!   the new entry; leaving it (a delete, or removing its key): one write of
//!   the old entry;
//! - staying under the same index key: one write when a projected attribute
//!   changed, of the larger of the old and new entry (as the base table),
//!   else nothing;
//! - moving to another index key: two writes, the old entry deleted on its
//!   partition and the new one put on its own;
//! - an entry is the table's key, the index's key and the projected
//!   attributes (ALL: the whole item; INCLUDE: the named ones). Its size is
//!   what a write of it costs; the 100 bytes of overhead per index item the
//!   guide names belong to storage only.

use super::units::SizeError;

/// A key: its partition (hash) attribute and its sort (range) attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPair {
    pub hash: String,
    pub range: Option<String>,
}

impl KeyPair {
    pub fn names(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.hash).chain(self.range.as_ref())
    }
}

/// Which attributes an index entry holds besides the keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Projection {
    All,
    KeysOnly,
    Include(Vec<String>),
}

/// One global secondary index: its name, key and projection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    pub name: String,
    pub key: KeyPair,
    pub projection: Projection,
}

/// An item as the rules read it, whatever holds it.
pub trait Image {
    /// Whether it has the attribute.
    fn has(&self, name: &str) -> bool;
    /// Whether the attribute is present in both and equal (or absent in both).
    fn same(&self, other: &Self, name: &str) -> bool;
    /// The attribute names it holds.
    fn names(&self) -> Vec<&str>;
    /// The size of the attributes `keep` accepts: each one's name and value.
    fn size_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<u64, SizeError>;
}

/// `Image` for an item held as a map of attribute names to values (one
/// with `contains_key`, `get`, `keys` and `iter`, as `HashMap` and
/// serde_json's `Map` have), each attribute sized by `$size(name, value)`
/// (a `Result<u64, SizeError>`): the throttle proxy's DynamoDB JSON and a
/// stream record's images are such maps of two value types, read alike.
macro_rules! image_of_map {
    ($item:ty, $size:expr) => {
        impl $crate::server::rules::layout::Image for $item {
            fn has(&self, name: &str) -> bool {
                self.contains_key(name)
            }

            fn same(&self, other: &Self, name: &str) -> bool {
                self.get(name) == other.get(name)
            }

            fn names(&self) -> Vec<&str> {
                self.keys().map(String::as_str).collect()
            }

            fn size_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<u64, $crate::server::rules::units::SizeError> {
                self.iter().filter(|(name, _)| keep(name)).map(|(name, value)| $size(name, value)).sum()
            }
        }
    };
}
pub(crate) use image_of_map;

/// Which image an index write writes the entry of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Old,
    New,
}

/// One write to an index: whose entry (its partition is that image's index
/// key) and the size it is billed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexWrite {
    pub side: Side,
    pub size: u64,
}

impl Index {
    /// A sparse index holds only the items that have both its key attributes.
    pub fn contains<I: Image>(&self, item: &I) -> bool {
        self.key.names().all(|name| item.has(name))
    }

    /// Whether an attribute is in this index's entries.
    pub fn holds(&self, table: &KeyPair, name: &str) -> bool {
        table.names().chain(self.key.names()).any(|k| k == name)
            || match &self.projection {
                Projection::All => true,
                Projection::KeysOnly => false,
                Projection::Include(names) => names.iter().any(|n| n == name),
            }
    }

    /// The size of an item's entry in this index.
    pub fn entry_size<I: Image>(&self, table: &KeyPair, item: &I) -> Result<u64, SizeError> {
        item.size_where(&|name| self.holds(table, name))
    }

    fn same_key<I: Image>(&self, old: &I, new: &I) -> bool {
        self.key.names().all(|name| old.same(new, name))
    }

    fn same_entry<I: Image>(&self, table: &KeyPair, old: &I, new: &I) -> bool {
        let held = |item: &I| item.names().into_iter().filter(|name| self.holds(table, name)).count();
        held(old) == held(new)
            && old.names().into_iter().filter(|name| self.holds(table, name)).all(|name| old.same(new, name))
    }

    /// The writes a table write of `old` into `new` makes on this index
    /// (`old` None: an insert; `new` None: a delete).
    pub fn writes<I: Image>(
        &self,
        table: &KeyPair,
        old: Option<&I>,
        new: Option<&I>,
    ) -> Result<Vec<IndexWrite>, SizeError> {
        let old = old.filter(|o| self.contains(*o));
        let new = new.filter(|n| self.contains(*n));
        let write = |side, item: &I| Ok(IndexWrite { side, size: self.entry_size(table, item)? });
        match (old, new) {
            (None, None) => Ok(Vec::new()),
            (None, Some(new)) => Ok(vec![write(Side::New, new)?]),
            (Some(old), None) => Ok(vec![write(Side::Old, old)?]),
            (Some(old), Some(new)) if self.same_key(old, new) => {
                if self.same_entry(table, old, new) {
                    Ok(Vec::new())
                } else {
                    let size = self.entry_size(table, old)?.max(self.entry_size(table, new)?);
                    Ok(vec![IndexWrite { side: Side::New, size }])
                }
            }
            (Some(old), Some(new)) => Ok(vec![write(Side::Old, old)?, write(Side::New, new)?]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The simplest image: attribute names to their values' sizes.
    impl Image for BTreeMap<&'static str, u64> {
        fn has(&self, name: &str) -> bool {
            self.contains_key(name)
        }
        fn same(&self, other: &Self, name: &str) -> bool {
            self.get(name) == other.get(name)
        }
        fn names(&self) -> Vec<&str> {
            self.keys().copied().collect()
        }
        fn size_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<u64, SizeError> {
            Ok(self.iter().filter(|(n, _)| keep(n)).map(|(n, v)| n.len() as u64 + v).sum())
        }
    }

    fn table() -> KeyPair {
        KeyPair { hash: "PK".into(), range: None }
    }

    fn gsi(projection: Projection) -> Index {
        Index { name: "G".into(), key: KeyPair { hash: "GPK".into(), range: Some("GSK".into()) }, projection }
    }

    fn item(pairs: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn entering_leaving_staying_and_moving() {
        let index = gsi(Projection::Include(vec!["a".into()]));
        let out = item(&[("PK", 10), ("b", 500)]);
        let in_a = item(&[("PK", 10), ("GPK", 5), ("GSK", 5), ("a", 100), ("b", 500)]);
        let in_a_bigger = item(&[("PK", 10), ("GPK", 5), ("GSK", 5), ("a", 900), ("b", 500)]);
        let in_b_changed = item(&[("PK", 10), ("GPK", 5), ("GSK", 5), ("a", 100), ("b", 7)]);
        let moved = item(&[("PK", 10), ("GPK", 6), ("GSK", 5), ("a", 100)]);
        let entry = 2 + 10 + 3 + 5 + 3 + 5 + 1 + 100;
        assert_eq!(index.writes(&table(), None, Some(&out)).unwrap(), vec![], "never in the index");
        assert_eq!(
            index.writes(&table(), Some(&out), Some(&in_a)).unwrap(),
            vec![IndexWrite { side: Side::New, size: entry }]
        );
        assert_eq!(
            index.writes(&table(), Some(&in_a), None).unwrap(),
            vec![IndexWrite { side: Side::Old, size: entry }]
        );
        assert_eq!(index.writes(&table(), Some(&in_a), Some(&in_b_changed)).unwrap(), vec![], "b is not projected");
        assert_eq!(
            index.writes(&table(), Some(&in_a_bigger), Some(&in_a)).unwrap(),
            vec![IndexWrite { side: Side::New, size: entry + 800 }],
            "the larger of the two entries"
        );
        let two = index.writes(&table(), Some(&in_a), Some(&moved)).unwrap();
        assert_eq!(two.iter().map(|w| w.side).collect::<Vec<_>>(), [Side::Old, Side::New], "a delete and a put");
    }

    #[test]
    fn projections_hold_the_keys_and_what_they_name() {
        let table = table();
        assert!(gsi(Projection::KeysOnly).holds(&table, "PK") && gsi(Projection::KeysOnly).holds(&table, "GSK"));
        assert!(!gsi(Projection::KeysOnly).holds(&table, "a"));
        assert!(gsi(Projection::All).holds(&table, "anything"));
        assert!(gsi(Projection::Include(vec!["a".into()])).holds(&table, "a"));
    }
}

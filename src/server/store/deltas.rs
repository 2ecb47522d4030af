//! Counter increments, summed per item and attribute: what the consumer
//! and reconciliation hand the store to write. The data alone; how a change
//! counts is `stream::counters`.

use crate::server::store::keys::{self, attr};
use chrono::NaiveDate;
use std::collections::BTreeMap;

/// A counter item's key (`PK`, `SK`).
pub type Key = (String, String);

/// Counter increments, summed per item and attribute, so that one write per
/// counter item applies a whole batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deltas {
    items: BTreeMap<Key, BTreeMap<String, i64>>,
}

impl Deltas {
    /// Adds `by` to one counter; a sum back at zero is dropped, so every
    /// increment kept is a write to make.
    pub fn add(&mut self, key: Key, attribute: String, by: i64) {
        let attributes = self.items.entry(key.clone()).or_default();
        let value = attributes.entry(attribute.clone()).or_default();
        *value += by;
        if *value == 0 {
            attributes.remove(&attribute);
            if attributes.is_empty() {
                self.items.remove(&key);
            }
        }
    }

    /// How much this batch raises each day's `version`.
    pub fn versions(&self) -> Vec<(NaiveDate, i64)> {
        self.days()
            .into_iter()
            .filter_map(|day| {
                let by = self.items.get(&keys::metric_pending_key(day))?.get(attr::VERSION)?;
                Some((day, *by))
            })
            .collect()
    }

    /// Adds `by` to each of `adds` (the hot keys a transaction carries).
    pub fn extend(&mut self, adds: &[(Key, String, i64)]) {
        for (key, attribute, by) in adds {
            self.add(key.clone(), attribute.clone(), *by);
        }
    }

    /// The increments of one counter item.
    pub fn get(&self, key: &Key) -> Option<&BTreeMap<String, i64>> {
        self.items.get(key)
    }

    /// Counter items touched, each with its non-zero increments.
    pub fn items(&self) -> impl Iterator<Item = (&Key, Vec<(&String, i64)>)> {
        self.items.iter().map(|(key, attributes)| (key, attributes.iter().map(|(a, by)| (a, *by)).collect()))
    }

    pub fn item_count(&self) -> usize {
        self.items().count()
    }

    /// The most attributes any one item gets: DynamoDB caps the size of an
    /// update expression, so a batch is cut before this grows too large.
    pub fn widest_item(&self) -> usize {
        self.items.values().map(BTreeMap::len).max().unwrap_or(0)
    }

    /// Days whose PENDING counters this batch changes.
    pub fn days(&self) -> Vec<NaiveDate> {
        let mut days: Vec<NaiveDate> = self.items.keys().filter_map(|(pk, _)| keys::metric_day_of(pk)).collect();
        days.sort_unstable();
        days.dedup();
        days
    }

    /// Moves the increments of the items `take` picks out into a `Deltas`
    /// of their own.
    pub fn split_off(&mut self, take: impl Fn(&Key) -> bool) -> Deltas {
        let (taken, kept) = std::mem::take(&mut self.items).into_iter().partition(|(key, _)| take(key));
        self.items = kept;
        Deltas { items: taken }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every increment as a row: `PK`, `SK`, attribute, by how much.
    pub fn rows(&self) -> Vec<(String, String, String, i64)> {
        let mut rows = Vec::new();
        for ((pk, sk), attributes) in &self.items {
            rows.extend(attributes.iter().map(|(a, by)| (pk.clone(), sk.clone(), a.clone(), *by)));
        }
        rows
    }

    /// The increments `rows` lists, summed.
    pub fn from_rows(rows: Vec<(String, String, String, i64)>) -> Deltas {
        let mut deltas = Deltas::default();
        for (pk, sk, attribute, by) in rows {
            deltas.add((pk, sk), attribute, by);
        }
        deltas
    }

    /// The same increments, those of a live counter item moved to its
    /// sub-item `sub` (`keys::counter_sub_key`): what a consumer's
    /// transaction writes.
    pub fn through_sub(&self, sub: u32) -> Deltas {
        let items = self
            .items
            .iter()
            .map(|(key, attributes)| {
                (keys::counter_sub_key(key, sub).unwrap_or_else(|| key.clone()), attributes.clone())
            })
            .collect();
        Deltas { items }
    }

    /// Adds every increment of `other`.
    pub fn merge(&mut self, other: Deltas) {
        for (key, attributes) in other.items {
            for (attribute, by) in attributes {
                self.add(key.clone(), attribute, by);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pk: &str) -> Key {
        (pk.to_string(), "SK".to_string())
    }

    #[test]
    fn items_split_off_leave_the_rest_and_rows_read_back_the_same() {
        let mut deltas = Deltas::default();
        deltas.add(key("A#1"), "n".into(), 2);
        deltas.add(key("B#1"), "n".into(), 3);
        deltas.add(key("B#1"), "m".into(), -1);
        let rows = deltas.rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(Deltas::from_rows(rows), deltas);
        let taken = deltas.split_off(|(pk, _)| pk.starts_with("B#"));
        assert_eq!(
            taken.rows(),
            [("B#1".into(), "SK".into(), "m".into(), -1), ("B#1".into(), "SK".into(), "n".into(), 3)]
        );
        assert_eq!(deltas.rows(), [("A#1".to_string(), "SK".to_string(), "n".to_string(), 2)]);
        assert!(!deltas.is_empty() && deltas.split_off(|_| true).item_count() == 1 && deltas.is_empty());
    }

    #[test]
    fn a_sub_takes_the_live_counters_and_leaves_the_rest() {
        let day = NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
        let mut deltas = Deltas::default();
        deltas.add(keys::metric_pending_key(day), "pending".into(), 2);
        deltas.add(keys::heat_key(day, 1), "m01s0".into(), 1);
        let through = deltas.through_sub(3);
        let sub = keys::counter_sub_key(&keys::metric_pending_key(day), 3).unwrap();
        assert_eq!(through.get(&sub).and_then(|a| a.get("pending")), Some(&2));
        assert!(through.get(&keys::metric_pending_key(day)).is_none());
        assert_eq!(through.get(&keys::heat_key(day, 1)), deltas.get(&keys::heat_key(day, 1)));
        assert_eq!(through.item_count(), 2);
    }
}

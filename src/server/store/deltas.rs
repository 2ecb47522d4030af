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

    /// Adds every increment of `other`.
    pub fn merge(&mut self, other: Deltas) {
        for (key, attributes) in other.items {
            for (attribute, by) in attributes {
                self.add(key.clone(), attribute, by);
            }
        }
    }
}

//! The partition keys written most per minute, as Contributor Insights shows
//! them, from the stream alone. Pure: the consumer feeds it the writes of
//! each transaction it is about to commit, and tells it when one committed.
//!
//! Keeping every key of every minute would store every order (each its own
//! base-table partition), so a key is persisted for a minute only once this
//! consumer has seen it take `THRESHOLD` write units in that minute: then its
//! whole count so far is added, and every later write of it that minute
//! too, in the same transaction as the checkpoint (a replayed batch adds
//! nothing). At most `CAP` keys per resource and minute are persisted.
//!
//! What that leaves out, and says: a key below the threshold, and a key
//! whose writes that minute were split between consumers (a lease handed
//! over mid-minute, or several stream shards held by several instances) is
//! low by at most `THRESHOLD` units for each consumer that did not see it
//! cross. A key at 1% of a partition's 1,000 WCU/s takes 600 units a minute:
//! the figures that matter are exact.

use crate::server::rules::PARTITION_WRITE_UNITS;
use crate::server::store::keys;
use crate::server::store::usage::{Resource, minute_start};
use chrono::Timelike;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Write units a key must take in a minute before it is persisted.
pub const THRESHOLD: u64 = 10;
/// Keys persisted per resource and minute, at most.
pub const CAP: usize = 20;
/// Minutes kept in memory behind the newest one seen.
const KEEP_MINUTES: i64 = 5;

/// (epoch minute, resource as filed, partition key).
pub type Slot = (i64, String, String);

/// The writes of one transaction, summed per slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    units: BTreeMap<Slot, u64>,
}

impl Chunk {
    pub fn add(&mut self, minute: i64, resource: &Resource, key: &str, units: u32) {
        *self.units.entry((minute, resource.to_string(), key.to_string())).or_default() += u64::from(units);
    }

    /// Distinct minutes: at most one item each in the transaction.
    pub fn minutes(&self) -> usize {
        let mut minutes: Vec<i64> = self.units.keys().map(|(m, _, _)| *m).collect();
        minutes.dedup();
        minutes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

/// What a transaction adds to the hot key items, and the slots it starts
/// persisting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// ((PK, SK), attribute, units to add).
    pub adds: Vec<((String, String), String, i64)>,
    marks: Vec<Slot>,
}

/// A key's units in one minute.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HotKey {
    pub resource: String,
    pub key: String,
    pub minute: i64,
    pub units: u64,
}

impl HotKey {
    /// Its share of one partition's write capacity, averaged over the minute.
    pub fn share(&self) -> f64 {
        self.units as f64 / 60.0 / PARTITION_WRITE_UNITS
    }
}

/// This consumer's counts, per minute and key, of what it committed.
#[derive(Debug, Default)]
pub struct Tracker {
    running: BTreeMap<i64, HashMap<(String, String), u64>>,
    persisted: HashSet<Slot>,
    per_resource: HashMap<(i64, String), usize>,
}

impl Tracker {
    /// The adds that keep the persisted slots exact, given what this
    /// consumer has committed before.
    pub fn plan(&self, chunk: &Chunk) -> Plan {
        let mut plan = Plan::default();
        let mut admitted: HashMap<(i64, String), usize> = HashMap::new();
        for ((minute, resource, key), &units) in &chunk.units {
            let slot = (*minute, resource.clone(), key.clone());
            let before = self.running.get(minute).and_then(|m| m.get(&(resource.clone(), key.clone()))).copied();
            let add = if self.persisted.contains(&slot) {
                units
            } else {
                let total = before.unwrap_or(0) + units;
                let taken = self.per_resource.get(&(*minute, resource.clone())).copied().unwrap_or(0);
                let admitted = admitted.entry((*minute, resource.clone())).or_default();
                if total < THRESHOLD || taken + *admitted >= CAP {
                    continue;
                }
                *admitted += 1;
                plan.marks.push(slot);
                total
            };
            let start = minute_start(*minute);
            let of_day = start.hour() * 60 + start.minute();
            let item = (keys::capacity_pk(start.date_naive()), keys::capacity_hot_sk(of_day));
            plan.adds.push((item, keys::hot_key_attribute(resource, key), add as i64));
        }
        plan
    }

    /// The transaction carrying `plan` committed: count its writes.
    pub fn committed(&mut self, chunk: &Chunk, plan: Plan) {
        for ((minute, resource, key), units) in &chunk.units {
            *self.running.entry(*minute).or_default().entry((resource.clone(), key.clone())).or_default() += units;
        }
        for slot in plan.marks {
            *self.per_resource.entry((slot.0, slot.1.clone())).or_default() += 1;
            self.persisted.insert(slot);
        }
        if let Some(&newest) = self.running.keys().next_back() {
            let oldest = newest - KEEP_MINUTES;
            self.running.retain(|m, _| *m >= oldest);
            self.persisted.retain(|(m, _, _)| *m >= oldest);
            self.per_resource.retain(|(m, _), _| *m >= oldest);
        }
    }

    /// The `n` keys with the most units per resource in `minute`, most first
    /// (ties by key), as this consumer counted them.
    pub fn top(&self, minute: i64, n: usize) -> Vec<HotKey> {
        let Some(counts) = self.running.get(&minute) else { return Vec::new() };
        let mut by_resource: BTreeMap<&str, Vec<(&str, u64)>> = BTreeMap::new();
        for ((resource, key), units) in counts {
            by_resource.entry(resource).or_default().push((key, *units));
        }
        by_resource
            .into_iter()
            .flat_map(|(resource, mut keys)| {
                keys.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
                keys.into_iter().take(n).map(move |(key, units)| HotKey {
                    resource: resource.to_string(),
                    key: key.to_string(),
                    minute,
                    units,
                })
            })
            .collect()
    }

    /// The newest minute this consumer committed writes of.
    pub fn newest(&self) -> Option<i64> {
        self.running.keys().next_back().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gsi1() -> Resource {
        Resource::index("orders", "GSI1")
    }

    /// Commits `chunk` as the consumer does; the adds it made.
    fn commit(tracker: &mut Tracker, chunk: &Chunk) -> Vec<(String, i64)> {
        let plan = tracker.plan(chunk);
        let adds = plan.adds.iter().map(|(_, attribute, by)| (attribute.clone(), *by)).collect();
        tracker.committed(chunk, plan);
        adds
    }

    const MINUTE: i64 = 29_372_295; // 2025-11-05T10:15Z

    #[test]
    fn a_key_is_persisted_whole_once_it_crosses_the_threshold_then_by_increments() {
        let mut tracker = Tracker::default();
        let mut chunk = Chunk::default();
        for _ in 0..6 {
            chunk.add(MINUTE, &gsi1(), "CUSTOMER#bot", 1);
        }
        chunk.add(MINUTE, &gsi1(), "CUSTOMER#quiet", 1);
        assert!(commit(&mut tracker, &chunk).is_empty(), "6 units: below the threshold");
        let mut more = Chunk::default();
        for _ in 0..5 {
            more.add(MINUTE, &gsi1(), "CUSTOMER#bot", 1);
        }
        assert_eq!(commit(&mut tracker, &more), [("orders/GSI1|CUSTOMER#bot".to_string(), 11)]);
        let mut last = Chunk::default();
        last.add(MINUTE, &gsi1(), "CUSTOMER#bot", 2);
        assert_eq!(commit(&mut tracker, &last), [("orders/GSI1|CUSTOMER#bot".to_string(), 2)]);
        // The persisted total equals every unit of the key.
        let top = tracker.top(MINUTE, 5);
        assert_eq!((top[0].key.as_str(), top[0].units), ("CUSTOMER#bot", 13));
        assert_eq!(top.len(), 2);
        let plan = tracker.plan(&last);
        assert_eq!(plan.adds[0].0, ("CAPACITY#2025-11-05".to_string(), "HOTKEYS#1015".to_string()));
    }

    #[test]
    fn a_replan_of_an_uncommitted_chunk_changes_nothing() {
        // A transaction that failed is planned again from the same state.
        let tracker = Tracker::default();
        let mut chunk = Chunk::default();
        chunk.add(MINUTE, &gsi1(), "CUSTOMER#bot", 12);
        assert_eq!(tracker.plan(&chunk), tracker.plan(&chunk));
    }

    #[test]
    fn at_most_cap_keys_per_resource_and_minute() {
        let mut tracker = Tracker::default();
        let mut chunk = Chunk::default();
        for k in 0..(CAP + 5) {
            chunk.add(MINUTE, &gsi1(), &format!("CUSTOMER#{k:02}"), 10);
            chunk.add(MINUTE, &Resource::table("orders"), &format!("ORDER#{k:02}"), 10);
        }
        let adds = commit(&mut tracker, &chunk);
        assert_eq!(adds.len(), 2 * CAP);
        let mut later = Chunk::default();
        later.add(MINUTE, &gsi1(), "CUSTOMER#new", 50);
        assert!(commit(&mut tracker, &later).is_empty(), "the minute is full");
        later = Chunk::default();
        later.add(MINUTE + 1, &gsi1(), "CUSTOMER#new", 50);
        assert_eq!(commit(&mut tracker, &later).len(), 1, "a new minute");
    }

    #[test]
    fn old_minutes_are_let_go_and_shares_are_of_a_partitions_thousand_units() {
        let mut tracker = Tracker::default();
        let mut chunk = Chunk::default();
        chunk.add(MINUTE, &gsi1(), "CUSTOMER#bot", 30_000);
        commit(&mut tracker, &chunk);
        assert!((tracker.top(MINUTE, 1)[0].share() - 0.5).abs() < 1e-9, "30,000 units a minute: 500/s of 1,000");
        let mut later = Chunk::default();
        later.add(MINUTE + 10, &gsi1(), "CUSTOMER#bot", 1);
        commit(&mut tracker, &later);
        assert!(tracker.top(MINUTE, 1).is_empty());
        assert_eq!(tracker.newest(), Some(MINUTE + 10));
    }
}

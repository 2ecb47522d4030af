//! The arithmetic of a reconciliation, with no I/O: what the counters should
//! hold in the consumer's applied view at a snapshot, and how far they are off.
//!
//! The applied view at the snapshot's positions P: an order the stream did
//! not change after P has the state the read (index or Scan) found, since
//! nothing changed it between P and the end of the read; an order it did
//! change has the state its first record after P shows as the old image.

use crate::server::stream::counters::{Deltas, Image, Key, state_counters};
use std::collections::{BTreeMap, HashMap};

/// The first record after a snapshot's positions of each order the stream
/// changed: the order's state in the applied view (`None`: it did not exist).
pub type Touched = HashMap<String, Option<Image>>;

/// What the counter items `keys` should hold: the sum of the state counters
/// of every order in the applied view. `read` gives each order the read
/// found, with the counters it names as read.
pub fn expected<'a>(
    read: impl IntoIterator<Item = (&'a str, Vec<(Key, String)>)>,
    touched: &Touched,
    keys: &[Key],
) -> Deltas {
    let mut expected = Deltas::default();
    let mut count = |counters: Vec<(Key, String)>| {
        for (key, attribute) in counters.into_iter().filter(|(key, _)| keys.contains(key)) {
            expected.add(key, attribute, 1);
        }
    };
    for (order_id, counters) in read {
        if !touched.contains_key(order_id) {
            count(counters);
        }
    }
    for state in touched.values().flatten() {
        count(state_counters(state));
    }
    expected
}

/// Counter minus expected for every state attribute either names, the
/// non-zero ones only: the damage to undo.
pub fn drift(counter: &BTreeMap<String, i64>, expected: Option<&BTreeMap<String, i64>>) -> BTreeMap<String, i64> {
    let empty = BTreeMap::new();
    let expected = expected.unwrap_or(&empty);
    let mut drift: BTreeMap<String, i64> = counter.clone();
    for (attribute, n) in expected {
        *drift.entry(attribute.clone()).or_default() -= n;
    }
    drift.retain(|_, d| *d != 0);
    drift
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::iso_millis;
    use crate::server::store::keys;
    use crate::server::stream::counters::pending_counters;
    use chrono::NaiveDate;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 29).unwrap()
    }

    fn state(id: &str, status: &str, shard: Option<u32>) -> Option<Image> {
        Some(Image {
            order_id: id.into(),
            status: status.into(),
            created_at: iso_millis::parse("2026-11-29T10:15:30Z").unwrap(),
            pending: shard.map(|s| (day(), s)),
            row: None,
        })
    }

    fn values(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(a, n)| (a.to_string(), *n)).collect()
    }

    /// The index holds `index` (order, shard); the stream changed `touched`
    /// after the snapshot; the counter said `counter`.
    fn pending_drift(index: &[(&str, u32)], touched: &Touched, counter: &[(&str, i64)]) -> BTreeMap<String, i64> {
        let key = keys::metric_pending_key(day());
        let read = index.iter().map(|(id, shard)| (*id, pending_counters(day(), *shard).to_vec()));
        let expected = expected(read, touched, std::slice::from_ref(&key));
        drift(&values(counter), expected.get(&key))
    }

    #[test]
    fn an_order_indexed_but_not_yet_applied_is_not_counted_twice() {
        // o-3 was created after the snapshot: the index has it, the counter
        // does not yet, and its first record is an insert.
        let touched = Touched::from([("o-3".to_string(), None)]);
        let counter = [("pending", 2), ("shard0", 1), ("shard1", 1)];
        assert!(pending_drift(&[("o-1", 0), ("o-2", 1), ("o-3", 1)], &touched, &counter).is_empty());
        // The old algorithm's answer: counter 2 against a recount of 3.
        assert_eq!(pending_drift(&[("o-1", 0), ("o-2", 1), ("o-3", 1)], &Touched::new(), &counter).len(), 2);
    }

    #[test]
    fn an_order_that_left_after_the_snapshot_still_counts_where_it_was() {
        // o-2 was confirmed after the snapshot: gone from the index, still in the counter.
        let touched = Touched::from([("o-2".to_string(), state("o-2", "PENDING", Some(1)))]);
        let counter = [("pending", 2), ("shard0", 1), ("shard1", 1)];
        assert!(pending_drift(&[("o-1", 0)], &touched, &counter).is_empty());
    }

    #[test]
    fn damage_is_found_in_the_total_and_in_each_shard() {
        let touched = Touched::from([("o-9".to_string(), None), ("o-2".to_string(), state("o-2", "PENDING", Some(1)))]);
        let counter = [("pending", 2 + 7 - 3), ("shard0", 1 + 7), ("shard1", 1 - 3), ("shard4", 0)];
        assert_eq!(
            pending_drift(&[("o-1", 0), ("o-9", 2)], &touched, &counter),
            values(&[("pending", 4), ("shard0", 7), ("shard1", -3)])
        );
        assert_eq!(pending_drift(&[("o-1", 0)], &Touched::new(), &[]), values(&[("pending", -1), ("shard0", -1)]));
    }

    #[test]
    fn daily_counters_use_the_scan_for_untouched_orders_and_the_stream_for_the_rest() {
        let (day_key, minutes_key) = (keys::metric_day_key(day()), keys::metric_minutes_key(day(), 10));
        let scanned =
            [state("o-1", "SHIPPED", None), state("o-2", "CONFIRMED", None), state("o-4", "PENDING", Some(0))];
        // After the snapshot: o-2 was created, o-3 deleted, o-4 changed (and was PENDING before).
        let touched = Touched::from([
            ("o-2".to_string(), None),
            ("o-3".to_string(), state("o-3", "CANCELLED", None)),
            ("o-4".to_string(), state("o-4", "PENDING", Some(0))),
        ]);
        let read = scanned.iter().flatten().map(|s| (s.order_id.as_str(), state_counters(s)));
        let expected = expected(read, &touched, &[day_key.clone(), minutes_key.clone()]);
        let counter = values(&[("created", 3), ("statusSHIPPED", 1), ("statusCANCELLED", 1), ("statusPENDING", 2)]);
        assert_eq!(drift(&counter, expected.get(&day_key)), values(&[("statusPENDING", 1)]));
        assert_eq!(drift(&values(&[("c1015", 3)]), expected.get(&minutes_key)), BTreeMap::new());
        assert!(expected.get(&keys::metric_pending_key(day())).is_none(), "only the snapshot's items");
    }
}

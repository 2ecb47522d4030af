//! What one change to an order does to the counters, derived from its old
//! and new images alone, so a write by any client is counted the same way.
//!
//! An order counts as PENDING for a day while it is in that day's GSI2
//! partitions (it has `GSI2PK`): the counters then equal a recount of the
//! index by construction.

use super::keys;
use crate::model::PendingOrder;
use chrono::{DateTime, NaiveDate, Timelike, Utc};
use std::collections::BTreeMap;

/// The parts of an order image the counters and live events need.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub order_id: String,
    pub status: String,
    pub created_at: DateTime<Utc>,
    /// Day and shard of its GSI2 partition, while it is PENDING.
    pub pending: Option<(NaiveDate, u32)>,
    /// What the dashboard list shows, when the image has it all.
    pub row: Option<PendingOrder>,
}

/// One record of the stream: an insert (no `old`), a modify, or a remove
/// (no `new`), at the time the stream recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub old: Option<Image>,
    pub new: Option<Image>,
    pub at: DateTime<Utc>,
}

/// What the dashboard is told as it happens.
#[derive(Clone, Debug, PartialEq)]
pub enum OrderEvent {
    Entered { day: NaiveDate, order: PendingOrder },
    Left { day: NaiveDate, order_id: String },
}

/// Counter increments, summed per item and attribute, so that one write per
/// counter item applies a whole batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deltas {
    items: BTreeMap<(String, String), BTreeMap<String, i64>>,
}

fn minute_of(at: &DateTime<Utc>) -> u32 {
    at.hour() * 60 + at.minute()
}

impl Deltas {
    fn add(&mut self, key: (String, String), attribute: String, by: i64) {
        *self.items.entry(key).or_default().entry(attribute).or_default() += by;
    }

    /// Adds the effect of one change.
    pub fn record(&mut self, change: &Change) {
        if let (None, Some(new)) = (&change.old, &change.new) {
            let day = new.created_at.date_naive();
            self.add(keys::metric_day_key(day), "created".into(), 1);
            self.add(keys::metric_minutes_key(day), keys::minute_attribute('c', minute_of(&new.created_at)), 1);
        }
        let old_status = change.old.as_ref().map(|i| (&i.status, i.created_at.date_naive()));
        let new_status = change.new.as_ref().map(|i| (&i.status, i.created_at.date_naive()));
        if old_status != new_status {
            if let Some((status, day)) = old_status {
                self.add(keys::metric_day_key(day), keys::status_attribute(status), -1);
            }
            if let Some((status, day)) = new_status {
                self.add(keys::metric_day_key(day), keys::status_attribute(status), 1);
            }
        }
        let old_pending = change.old.as_ref().and_then(|i| i.pending);
        let new_pending = change.new.as_ref().and_then(|i| i.pending);
        if old_pending == new_pending {
            return;
        }
        if let Some((day, shard)) = old_pending {
            self.add(keys::metric_pending_key(day), "pending".into(), -1);
            self.add(keys::metric_pending_key(day), keys::shard_attribute(shard), -1);
            // The chart shows a day's own orders leaving during that day.
            if new_pending.is_none() && change.at.date_naive() == day {
                self.add(keys::metric_minutes_key(day), keys::minute_attribute('l', minute_of(&change.at)), 1);
            }
        }
        if let Some((day, shard)) = new_pending {
            self.add(keys::metric_pending_key(day), "pending".into(), 1);
            self.add(keys::metric_pending_key(day), keys::shard_attribute(shard), 1);
            if old_pending.is_none() {
                let created = change.new.as_ref().map(|i| i.created_at).unwrap_or(change.at);
                self.add(keys::metric_minutes_key(day), keys::minute_attribute('e', minute_of(&created)), 1);
            }
        }
    }

    /// Counter items touched, each with its non-zero increments.
    pub fn items(&self) -> impl Iterator<Item = (&(String, String), Vec<(&String, i64)>)> {
        self.items.iter().filter_map(|(key, attributes)| {
            let nonzero: Vec<(&String, i64)> =
                attributes.iter().filter(|(_, by)| **by != 0).map(|(a, by)| (a, *by)).collect();
            (!nonzero.is_empty()).then_some((key, nonzero))
        })
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
        let mut days: Vec<NaiveDate> = self
            .items
            .keys()
            .filter_map(|(pk, _)| pk.rsplit('#').next())
            .filter_map(|day| NaiveDate::parse_from_str(day, "%Y-%m-%d").ok())
            .collect();
        days.sort_unstable();
        days.dedup();
        days
    }
}

/// The live events a change makes: an order entering or leaving a day's
/// PENDING list.
pub fn events(change: &Change) -> Vec<OrderEvent> {
    let old_pending = change.old.as_ref().and_then(|i| i.pending);
    let new_pending = change.new.as_ref().and_then(|i| i.pending);
    let mut events = Vec::new();
    if old_pending == new_pending {
        return events;
    }
    if let (Some((day, _)), Some(old)) = (old_pending, &change.old) {
        events.push(OrderEvent::Left { day, order_id: old.order_id.clone() });
    }
    if let (Some((day, _)), Some(row)) = (new_pending, change.new.as_ref().and_then(|i| i.row.clone())) {
        events.push(OrderEvent::Entered { day, order: row });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::iso_millis;

    fn at(s: &str) -> DateTime<Utc> {
        iso_millis::parse(s).unwrap()
    }

    fn image(status: &str, pending_shard: Option<u32>) -> Image {
        let created_at = at("2026-11-29T10:15:30Z");
        Image {
            order_id: "o-1".into(),
            status: status.into(),
            created_at,
            pending: pending_shard.map(|s| (created_at.date_naive(), s)),
            row: None,
        }
    }

    fn value(deltas: &Deltas, pk: &str, attribute: &str) -> i64 {
        deltas
            .items()
            .find(|((p, _), _)| p == pk)
            .and_then(|(_, attrs)| attrs.into_iter().find(|(a, _)| a.as_str() == attribute).map(|(_, v)| v))
            .unwrap_or(0)
    }

    #[test]
    fn a_pending_insert_counts_everywhere() {
        let mut deltas = Deltas::default();
        deltas.record(&Change { old: None, new: Some(image("PENDING", Some(3))), at: at("2026-11-29T10:15:31Z") });
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "pending"), 1);
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "shard3"), 1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "created"), 1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "statusPENDING"), 1);
        assert_eq!(value(&deltas, "METRIC#MINUTES#2026-11-29", "c1015"), 1);
        assert_eq!(value(&deltas, "METRIC#MINUTES#2026-11-29", "e1015"), 1);
        assert_eq!(deltas.days(), vec![NaiveDate::from_ymd_opt(2026, 11, 29).unwrap()]);
    }

    #[test]
    fn leaving_pending_moves_the_counts_and_a_round_trip_cancels_out() {
        let leave = Change {
            old: Some(image("PENDING", Some(3))),
            new: Some(image("CONFIRMED", None)),
            at: at("2026-11-29T11:00:00Z"),
        };
        let mut deltas = Deltas::default();
        deltas.record(&leave);
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "pending"), -1);
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "shard3"), -1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "statusPENDING"), -1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "statusCONFIRMED"), 1);
        assert_eq!(value(&deltas, "METRIC#MINUTES#2026-11-29", "l1100"), 1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "created"), 0, "a modify creates nothing");

        let mut both = Deltas::default();
        both.record(&Change { old: None, new: Some(image("PENDING", Some(3))), at: at("2026-11-29T10:15:31Z") });
        both.record(&Change { old: Some(image("PENDING", Some(3))), new: None, at: at("2026-11-29T10:20:00Z") });
        assert_eq!(value(&both, "METRIC#PENDING#2026-11-29", "pending"), 0);
        assert_eq!(value(&both, "METRIC#DAY#2026-11-29", "statusPENDING"), 0);
    }

    #[test]
    fn unrelated_changes_count_nothing_and_send_nothing() {
        let change = Change {
            old: Some(image("PENDING", Some(1))),
            new: Some(image("PENDING", Some(1))),
            at: at("2026-11-29T12:00:00Z"),
        };
        let mut deltas = Deltas::default();
        deltas.record(&change);
        assert_eq!(deltas.item_count(), 0);
        assert!(events(&change).is_empty());
    }

    #[test]
    fn events_say_who_entered_and_who_left() {
        let leave = Change {
            old: Some(image("PENDING", Some(3))),
            new: Some(image("SHIPPED", None)),
            at: at("2026-11-29T12:00:00Z"),
        };
        assert_eq!(
            events(&leave),
            vec![OrderEvent::Left { day: NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), order_id: "o-1".into() }]
        );
    }
}

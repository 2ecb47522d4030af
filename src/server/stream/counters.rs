//! What one change to an order does to the counters, derived from its old
//! and new images alone, so a write by any client is counted the same way.
//!
//! Two kinds of counters:
//! - state counters (`pending`, `shard<k>`, `created`, `status<S>`,
//!   `c<HHMM>`) count the orders that exist now and name them: each change
//!   takes its old state's counters down and its new state's up, so they
//!   equal a recount of the table (and, for PENDING, of GSI2) by
//!   construction, and reconciliation can check them;
//! - history counters (`e<HHMM>`, `l<HHMM>`: entered and left PENDING per
//!   minute; `m<MM>s<k>` of `HEAT#<date>#<HH>`: writes to each GSI2 shard
//!   per minute) record events that no table keeps, and cannot be checked.
//!
//! Shard heat counts the index writes DynamoDB makes on a day's GSI2
//! partitions during that day: an order entering a partition is one write,
//! leaving it another, and a change to an entry's projected attributes in
//! place a third kind. Writes to a day's partitions after the day (orders
//! leaving PENDING the next morning) are in no day's heat.
//!
//! How an item counts, whoever wrote it (`image_of`), is one rule for the
//! consumer, reconciliation and the pages alike:
//! - an item counts as an order when its order id (its key's, else
//!   `orderId`) and its `createdAt` (any ISO-8601 time) can be read: the
//!   day and minute it counts under. Whatever else it misses or mistypes (a
//!   total, a line item), it counts, as the pages show it (flagged);
//! - its status counts under its own name when that is a name a counter
//!   can carry (`A`-`Z` and `_`, at most 32: `statusON_HOLD` for another
//!   writer's `ON_HOLD`); a missing, mistyped or other status counts under
//!   `statusUNREADABLE`;
//! - it counts as PENDING for a day while it is in a GSI2 partition of that
//!   day a reader can read: its `GSI2PK` is a PENDING key exactly as the
//!   key design writes it, on a shard below `MAX_SHARDS`
//!   (`keys::parse_pending_pk`), whatever the day's shard count: readers
//!   read each shard beyond the count that the counter names
//!   (`store::shard_count`), so one on shard 57 of 10 is listed and counted
//!   (and flagged as drift: `stream::quality`). A key spelled otherwise is
//!   in no partition a reader queries: on no list, in no PENDING counter.

use crate::model::{PendingOrder, iso_millis};
pub use crate::server::store::deltas::{Deltas, Key};
use crate::server::store::keys::{self, GSI2PK, PK, attr};
use crate::server::store::usage::Resource;
use crate::server::store::{Item, reading};
use crate::server::stream::pricing::Write;
use chrono::{DateTime, NaiveDate, Timelike, Utc};

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

/// The status counter of an order whose status cannot be one.
pub const UNREADABLE_STATUS: &str = "UNREADABLE";
/// The longest status name counted under its own name.
const MAX_STATUS_NAME: usize = 32;

/// How `item` counts (see the module's rule); `None` for an item that is
/// not a readable order (no order id, or no readable `createdAt`): it
/// counts nowhere.
pub fn image_of(item: &Item) -> Option<Image> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str);
    let order_id = text(PK).and_then(|pk| keys::parse_order_pk(pk)).or(text(attr::ORDER_ID))?.to_string();
    let created_at = iso_millis::parse(text(attr::CREATED_AT)?).ok()?;
    let status = match text(attr::STATUS) {
        Some(status)
            if !status.is_empty()
                && status.len() <= MAX_STATUS_NAME
                && status.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') =>
        {
            status.to_string()
        }
        _ => UNREADABLE_STATUS.to_string(),
    };
    let pending = text(GSI2PK).and_then(keys::parse_pending_pk);
    // The list row, as the list shows it.
    let row = pending.map(|_| reading::pending_row(item));
    Some(Image { order_id, status, created_at, pending, row })
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

fn minute_of(at: &DateTime<Utc>) -> u32 {
    at.hour() * 60 + at.minute()
}

/// The minute counter item (of its day and hour) an event at `at` counts in.
fn minutes_key(at: &DateTime<Utc>) -> Key {
    keys::metric_minutes_key(at.date_naive(), at.hour())
}

/// The state counters one existing order adds one to: a state counter is
/// the number of existing orders that name it, so a recount can check it.
/// An order counts towards its day's `created`, its status and the minute it
/// was created, and, while it is in GSI2, towards that day's `pending` and
/// its shard.
pub fn state_counters(image: &Image) -> Vec<(Key, String)> {
    let day = image.created_at.date_naive();
    let mut counters = vec![
        (keys::metric_day_key(day), attr::CREATED.to_string()),
        (keys::metric_day_key(day), keys::status_attribute(&image.status)),
        (minutes_key(&image.created_at), keys::minute_attribute('c', minute_of(&image.created_at))),
    ];
    if let Some((day, shard)) = image.pending {
        counters.extend(pending_counters(day, shard));
    }
    counters
}

/// The counters an order in the GSI2 partition of (`day`, `shard`) adds to.
pub fn pending_counters(day: NaiveDate, shard: u32) -> [(Key, String); 2] {
    [
        (keys::metric_pending_key(day), attr::PENDING.to_string()),
        (keys::metric_pending_key(day), keys::shard_attribute(shard)),
    ]
}

/// How a change counts: the counting rules, on the store's `Deltas`.
impl Deltas {
    /// Adds the effect of one change: the old state's counters down, the
    /// new state's up (they cancel where nothing counted changed), the
    /// history of the minute, and one on the `version` of every day whose
    /// counters it moved (see `attr::VERSION`).
    pub fn record(&mut self, change: &Change) {
        let mut own = Deltas::default();
        for (key, attribute) in change.old.iter().flat_map(state_counters) {
            own.add(key, attribute, -1);
        }
        for (key, attribute) in change.new.iter().flat_map(state_counters) {
            own.add(key, attribute, 1);
        }
        own.record_history(change);
        own.record_heat(change);
        for day in own.days() {
            own.add(keys::metric_pending_key(day), attr::VERSION.to_string(), 1);
        }
        self.merge(own);
    }

    /// Writes to GSI2 shards during their own day, by minute (`HEAT#`).
    fn record_heat(&mut self, change: &Change) {
        for (day, shard) in index_writes(change) {
            if change.at.date_naive() == day {
                let key = keys::heat_key(day, change.at.hour());
                self.add(key, keys::heat_attribute(change.at.minute(), shard), 1);
            }
        }
    }

    /// `e<HHMM>` and `l<HHMM>`: orders of a day entering PENDING (at the
    /// minute they were created) and leaving it (at the minute they left,
    /// during their own day). History: no table holds it to recount.
    fn record_history(&mut self, change: &Change) {
        let old_pending = change.old.as_ref().and_then(|i| i.pending);
        let new_pending = change.new.as_ref().and_then(|i| i.pending);
        if let (Some((day, _)), None) = (old_pending, new_pending)
            && change.at.date_naive() == day
        {
            let key = keys::metric_minutes_key(day, change.at.hour());
            self.add(key, keys::minute_attribute('l', minute_of(&change.at)), 1);
        }
        if let (None, Some((day, _))) = (old_pending, new_pending) {
            let created = change.new.as_ref().map(|i| i.created_at).unwrap_or(change.at);
            let key = keys::metric_minutes_key(day, created.hour());
            self.add(key, keys::minute_attribute('e', minute_of(&created)), 1);
        }
    }

    /// The write units one stream record made (`pricing`), per table and
    /// index, on the `STREAM#` capacity item of the minute it was written:
    /// history, applied with the checkpoint like the heat.
    pub fn record_writes(&mut self, at: &DateTime<Utc>, table: &str, writes: &[Write]) {
        let pk = keys::capacity_pk(at.date_naive());
        let attribute = keys::capacity_minute_attribute('w', minute_of(at));
        for write in writes {
            let resource = match &write.index {
                Some(index) => Resource::index(table, index.as_str()),
                None => Resource::table(table),
            };
            let key = (pk.clone(), keys::capacity_stream_sk(&resource.to_string(), at.hour()));
            self.add(key, attribute.clone(), i64::from(write.units));
        }
    }
}

/// The GSI2 partitions (day, shard) one change writes to, once per write:
/// the entry put when an order enters, deleted when it leaves (both when it
/// moves), rewritten when a projected attribute changes in place.
pub fn index_writes(change: &Change) -> Vec<(NaiveDate, u32)> {
    let old = change.old.as_ref().and_then(|i| i.pending.map(|p| (p, &i.row)));
    let new = change.new.as_ref().and_then(|i| i.pending.map(|p| (p, &i.row)));
    match (old, new) {
        (Some((before, old_row)), Some((after, new_row))) if before == after => {
            if old_row != new_row {
                vec![after]
            } else {
                Vec::new()
            }
        }
        (old, new) => old.into_iter().chain(new).map(|(partition, _)| partition).collect(),
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
    use std::collections::BTreeMap;

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

    /// The increment of `attribute` over every item of partition `pk`.
    fn value(deltas: &Deltas, pk: &str, attribute: &str) -> i64 {
        deltas
            .items()
            .filter(|((p, _), _)| p == pk)
            .flat_map(|(_, attrs)| attrs.into_iter().filter(|(a, _)| a.as_str() == attribute).map(|(_, v)| v))
            .sum()
    }

    #[test]
    fn minute_figures_go_to_the_item_of_their_hour() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let mut deltas = Deltas::default();
        deltas.record(&Change { old: None, new: Some(image("PENDING", Some(3))), at: at("2026-11-29T10:15:31Z") });
        deltas.record(&Change {
            old: Some(image("PENDING", Some(3))),
            new: Some(image("CONFIRMED", None)),
            at: at("2026-11-29T23:59:10Z"),
        });
        let hour = |h: u32| deltas.get(&keys::metric_minutes_key(day, h)).cloned().unwrap_or_default();
        assert_eq!(hour(10), BTreeMap::from([("c1015".to_string(), 1), ("e1015".to_string(), 1)]));
        assert_eq!(hour(23), BTreeMap::from([("l2359".to_string(), 1)]), "left at 23:59: the last hour's item");
        assert!(deltas.get(&keys::metric_minutes_day_key(day)).is_none(), "the whole-day item is never written");
    }

    #[test]
    fn a_busy_day_keeps_every_minute_item_small() {
        // An order created, and one confirmed, every minute of the day: the
        // largest minute item holds one hour's 180 attributes, not 4,320.
        let mut deltas = Deltas::default();
        for minute in 0..1440i64 {
            let created = at("2026-11-29T00:00:30Z") + chrono::Duration::minutes(minute);
            let order =
                Image { created_at: created, pending: Some((created.date_naive(), 1)), ..image("PENDING", None) };
            deltas.record(&Change { old: None, new: Some(order.clone()), at: created });
            let confirmed = Image { status: "CONFIRMED".into(), pending: None, ..order.clone() };
            let left = Change { old: Some(order), new: Some(confirmed), at: created + chrono::Duration::seconds(20) };
            deltas.record(&left);
        }
        let minute_items: Vec<usize> = deltas
            .items()
            .filter(|((pk, _), _)| pk.starts_with("METRIC#MINUTES#"))
            .map(|(_, attrs)| attrs.len())
            .collect();
        assert_eq!(minute_items, vec![180; 24], "24 hours of 60 minutes × (c, e, l)");
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
        assert_eq!(deltas.versions(), vec![(NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), 1)]);
    }

    #[test]
    fn every_change_that_moves_a_days_counters_raises_its_version_even_when_they_cancel() {
        let mut deltas = Deltas::default();
        deltas.record(&Change { old: None, new: Some(image("PENDING", Some(3))), at: at("2026-11-29T10:15:31Z") });
        deltas.record(&Change { old: Some(image("PENDING", Some(3))), new: None, at: at("2026-11-29T10:15:32Z") });
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "pending"), 0);
        assert_eq!(deltas.versions(), vec![(NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), 2)]);
        let untouched = Change {
            old: Some(image("PENDING", Some(1))),
            new: Some(image("PENDING", Some(1))),
            at: at("2026-11-29T12:00:00Z"),
        };
        let mut none = Deltas::default();
        none.record(&untouched);
        assert!(none.versions().is_empty(), "a change no counter sees raises nothing");
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

        assert!(deltas.get(&keys::metric_day_key(leave.at.date_naive())).unwrap().get("created").is_none());

        let mut both = Deltas::default();
        both.record(&Change { old: None, new: Some(image("PENDING", Some(3))), at: at("2026-11-29T10:15:31Z") });
        both.record(&Change { old: Some(image("PENDING", Some(3))), new: None, at: at("2026-11-29T10:20:00Z") });
        assert_eq!(value(&both, "METRIC#PENDING#2026-11-29", "pending"), 0);
        assert_eq!(value(&both, "METRIC#DAY#2026-11-29", "statusPENDING"), 0);
        assert_eq!(value(&both, "METRIC#DAY#2026-11-29", "created"), 0, "created counts orders that exist");
        assert_eq!(value(&both, "METRIC#MINUTES#2026-11-29", "c1015"), 0);
        assert_eq!(value(&both, "METRIC#MINUTES#2026-11-29", "e1015"), 1, "history stays");
        assert_eq!(value(&both, "METRIC#MINUTES#2026-11-29", "l1020"), 1);
    }

    #[test]
    fn removing_an_order_takes_every_state_counter_down() {
        let mut deltas = Deltas::default();
        deltas.record(&Change { old: Some(image("CONFIRMED", None)), new: None, at: at("2026-11-30T09:00:00Z") });
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "created"), -1);
        assert_eq!(value(&deltas, "METRIC#DAY#2026-11-29", "statusCONFIRMED"), -1);
        assert_eq!(value(&deltas, "METRIC#MINUTES#2026-11-29", "c1015"), -1);
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "version"), 1, "the day changed");
        assert_eq!(value(&deltas, "METRIC#PENDING#2026-11-29", "pending"), 0, "nothing PENDING");
        assert_eq!(deltas.item_count(), 3, "no history");
    }

    #[test]
    fn state_counters_of_an_order_are_what_inserting_it_adds() {
        let pending = image("PENDING", Some(3));
        let mut deltas = Deltas::default();
        deltas.record(&Change { old: None, new: Some(pending.clone()), at: at("2026-11-29T10:15:31Z") });
        for (key, attribute) in state_counters(&pending) {
            assert_eq!(deltas.get(&key).and_then(|a| a.get(&attribute)), Some(&1), "{key:?} {attribute}");
        }
        assert_eq!(state_counters(&pending).len(), 5);
        assert_eq!(state_counters(&image("SHIPPED", None)).len(), 3);
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

    fn heat(deltas: &Deltas, hour: u32, attribute: &str) -> i64 {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        deltas.get(&keys::heat_key(day, hour)).and_then(|a| a.get(attribute)).copied().unwrap_or(0)
    }

    #[test]
    fn heat_counts_each_index_write_on_its_shard_and_minute() {
        let mut deltas = Deltas::default();
        let enter =
            |shard: u32, at: &str| Change { old: None, new: Some(image("PENDING", Some(shard))), at: self::at(at) };
        deltas.record(&enter(3, "2026-11-29T10:15:31Z"));
        deltas.record(&enter(3, "2026-11-29T10:15:59Z"));
        deltas.record(&enter(4, "2026-11-29T10:15:40Z"));
        deltas.record(&Change {
            old: Some(image("PENDING", Some(3))),
            new: Some(image("CONFIRMED", None)),
            at: at("2026-11-29T10:16:02Z"),
        });
        assert_eq!(heat(&deltas, 10, "m15s3"), 2);
        assert_eq!(heat(&deltas, 10, "m15s4"), 1);
        assert_eq!(heat(&deltas, 10, "m16s3"), 1, "leaving deletes the entry: a write");
        // Nothing in the index: no heat; the next day's departure: no day's heat.
        let mut other = Deltas::default();
        other.record(&Change {
            old: Some(image("SHIPPED", None)),
            new: Some(image("DELIVERED", None)),
            at: at("2026-11-29T11:00:00Z"),
        });
        other.record(&Change {
            old: Some(image("PENDING", Some(1))),
            new: Some(image("CANCELLED", None)),
            at: at("2026-11-30T00:05:00Z"),
        });
        assert!(other.items().all(|((pk, _), _)| !pk.starts_with("HEAT#")), "{other:?}");
    }

    #[test]
    fn heat_counts_an_in_place_rewrite_only_when_a_projected_attribute_changed() {
        let row = |total: i64| PendingOrder {
            order_id: "o-1".into(),
            customer_id: Some("c-1".into()),
            created_at: Some(at("2026-11-29T10:15:30Z")),
            total: Some(total),
            currency: Some("USD".into()),
            item_count: Some(1),
            shipping_city: Some("Oslo".into()),
            shipping_country: Some("NO".into()),
            problems: Vec::new(),
        };
        let with_row = |total: i64| Image { row: Some(row(total)), ..image("PENDING", Some(2)) };
        let change =
            |a: i64, b: i64| Change { old: Some(with_row(a)), new: Some(with_row(b)), at: at("2026-11-29T12:00:00Z") };
        assert_eq!(index_writes(&change(100, 100)), vec![]);
        assert_eq!(index_writes(&change(100, 200)), vec![(NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), 2)]);
    }

    #[test]
    fn heat_is_exact_and_a_replayed_batch_is_counted_once_by_its_checkpoint() {
        // The consumer applies a batch's deltas in one transaction with its
        // checkpoint (see `Store::commit_batch`): a replay fails the
        // checkpoint's condition and adds nothing. What it would add is
        // the same every time: heat depends on the records alone.
        let batch: Vec<Change> = (0..120)
            .map(|i| Change {
                old: None,
                new: Some(image("PENDING", Some(i % 10))),
                at: at("2026-11-29T10:15:00Z") + chrono::Duration::seconds(i64::from(i)),
            })
            .collect();
        let apply = |changes: &[Change]| {
            let mut deltas = Deltas::default();
            changes.iter().for_each(|c| deltas.record(c));
            deltas
        };
        let once = apply(&batch);
        assert_eq!(once, apply(&batch), "the same records, the same increments");
        let total: i64 = (0..10)
            .flat_map(|s| (15..17).map(move |m| (m, s)))
            .map(|(m, s)| heat(&once, 10, &format!("m{m}s{s}")))
            .sum();
        assert_eq!(total, 120, "one write per order entering PENDING, no more");
        assert_eq!(heat(&once, 10, "m15s0"), 6, "seconds 0, 10, 20, 30, 40, 50 of 10:15 on shard 0");
    }

    #[test]
    fn priced_writes_go_to_their_minutes_stream_item_and_move_no_day() {
        let write =
            |index: Option<&str>, units| Write { index: index.map(str::to_string), partition: "p".into(), units };
        let mut deltas = Deltas::default();
        let at = at("2026-11-29T10:15:31Z");
        deltas.record_writes(&at, "orders", &[write(None, 4), write(Some("GSI1"), 4), write(Some("GSI2"), 1)]);
        deltas.record_writes(&at, "orders", &[write(None, 1), write(Some("GSI2"), 2)]);
        let units = |sk: &str| {
            deltas.get(&("CAPACITY#2026-11-29".to_string(), sk.to_string())).and_then(|a| a.get("w1015")).copied()
        };
        assert_eq!(
            (units("STREAM#10#orders"), units("STREAM#10#orders/GSI1"), units("STREAM#10#orders/GSI2")),
            (Some(5), Some(4), Some(3))
        );
        assert!(deltas.days().is_empty() && deltas.versions().is_empty(), "no counter of a day moved");
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

//! A stream record read: its images as the table's items, the change it
//! makes to an order, when it was written, the writes it made priced, and
//! the days whose shard counts reading it needs.

use crate::server::store::keys::{self, GSI2PK};
use crate::server::store::{Item, shard_count};
use crate::server::stream::counters::{self, Change, Image};
use crate::server::stream::pricing::{self, Layout};
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::HashMap;

/// The shard count of each day a batch's GSI2 keys name
/// (`store::shard_count::day_count`), read before the batch is: a GSI2 key
/// on a shard beyond its day's count is drift (`quality`). Whether an order
/// counts as PENDING does not depend on it (`counters::image_of`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shards(HashMap<NaiveDate, u32>);

impl Shards {
    /// From each day's recorded count (`None`: none recorded) and the
    /// configured count, by the one rule.
    pub fn new(recorded: HashMap<NaiveDate, Option<u32>>, configured: u32) -> Self {
        Shards(recorded.into_iter().map(|(day, n)| (day, shard_count::day_count(n, configured))).collect())
    }

    /// The day's count, when the batch's days were read.
    pub fn count(&self, day: NaiveDate) -> Option<u32> {
        self.0.get(&day).copied()
    }
}

/// The days whose shard counts reading `records` needs: those their images'
/// GSI2 keys name.
pub fn gsi2_days<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<NaiveDate> {
    let mut days: Vec<NaiveDate> = records
        .into_iter()
        .filter_map(|record| record.dynamodb())
        .flat_map(|data| [data.old_image(), data.new_image()])
        .flatten()
        .filter_map(|image| keys::parse_pending_pk(image.get(GSI2PK)?.as_s().ok()?))
        .map(|(day, _)| day)
        .collect();
    days.sort_unstable();
    days.dedup();
    days
}

/// A stream image as the table's own item type: the one reader
/// (`store::reading`) and the counting rule read it as they read the table.
fn item_of(image: &HashMap<String, StreamValue>) -> Item {
    Item::from(serde_dynamo::Item::from(image.clone()))
}

/// A record's images as items (`None`: the record has no such image).
pub(super) fn images(record: &Record) -> (Option<Item>, Option<Item>) {
    match record.dynamodb() {
        Some(data) => (data.old_image().map(item_of), data.new_image().map(item_of)),
        None => (None, None),
    }
}

/// A change from a record's images: each counts as `counters::image_of`
/// says, an image that is not a readable order as none (it counts nowhere,
/// as reconciliation's recount finds it); `None` when neither image is one.
pub(super) fn change_of(old: Option<&Item>, new: Option<&Item>, at: DateTime<Utc>) -> Option<Change> {
    let old = old.and_then(counters::image_of);
    let new = new.and_then(counters::image_of);
    if old.is_none() && new.is_none() {
        return None;
    }
    Some(Change { old, new, at })
}

/// A stream record as a change; `None` for a record that is no readable order.
pub fn change(record: &Record) -> Option<Change> {
    let (old, new) = images(record);
    change_of(old.as_ref(), new.as_ref(), written_at(record))
}

/// When the stream recorded a write (now, for a record that does not say).
pub(super) fn written_at(record: &Record) -> DateTime<Utc> {
    record
        .dynamodb()
        .and_then(|d| d.approximate_creation_date_time())
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
        .unwrap_or_else(Utc::now)
}

/// The writes a record made, priced (any item, order or not: every writer's
/// writes cost capacity).
pub(super) fn priced(layout: &Layout, record: &Record) -> Vec<pricing::Write> {
    let Some(data) = record.dynamodb() else { return Vec::new() };
    layout.price(data.old_image(), data.new_image())
}

/// The order a record changes, and its state just before the change (`None`
/// when it did not exist, an insert, or did not count, an item that is no
/// readable order); `None` for a record whose key names no order. Every
/// GSI2 partition counts as listed: reconciliation judges one day's
/// partitions, each below its recorded count.
pub fn state_before(record: &Record) -> Option<(String, Option<Image>)> {
    let data = record.dynamodb()?;
    let pk = data.keys()?.get(keys::PK)?.as_s().ok()?;
    let order_id = keys::parse_order_pk(pk)?.to_string();
    let before = data.old_image().and_then(|image| counters::image_of(&item_of(image)));
    Some((order_id, before))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(item: &HashMap<String, StreamValue>) -> Option<Image> {
        counters::image_of(&item_of(item))
    }

    #[test]
    fn images_are_read_from_the_stream_format_by_one_rule() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let item = HashMap::from([
            ("PK".to_string(), StreamValue::S("ORDER#o-1".into())),
            ("status".to_string(), StreamValue::S("PENDING".into())),
            ("createdAt".to_string(), StreamValue::S("2026-11-29T10:15:30.000Z".into())),
            ("GSI2PK".to_string(), StreamValue::S("STATUS#PENDING#2026-11-29#3".into())),
        ]);
        let read = image(&item).unwrap();
        assert_eq!(read.order_id, "o-1", "the id from the key when orderId is missing");
        assert_eq!(read.pending, Some((day, 3)));
        let row = read.row.expect("a PENDING order's row, with what it has");
        assert!(row.total.is_none() && row.problems.iter().any(|p| p.field == "total"), "{row:?}");
        // A key on a shard beyond the day's count (57 of 10) is in a
        // partition readers read once it is counted: PENDING, whatever the
        // count; a key spelled otherwise is in none, and a corrupt one
        // neither; still an order.
        let mut beyond = item.clone();
        beyond.insert("GSI2PK".into(), StreamValue::S("STATUS#PENDING#2026-11-29#57".into()));
        assert_eq!(image(&beyond).unwrap().pending, Some((day, 57)));
        for unread in ["STATUS#PENDING#garbage", "STATUS#PENDING#2026-11-29#+3", "STATUS#PENDING#2026-11-29#100"] {
            let mut corrupt = item.clone();
            corrupt.insert("GSI2PK".into(), StreamValue::S(unread.into()));
            assert_eq!(image(&corrupt).unwrap().pending, None, "{unread}");
        }
        let shards = Shards::new(HashMap::from([(day, None)]), 10);
        assert_eq!(shards.count(day), Some(10), "a day with no record has the configured count");
        // Another writer's status counts under its own name; one that is not a name, under UNREADABLE.
        let mut on_hold = item.clone();
        on_hold.insert("status".into(), StreamValue::S("ON_HOLD".into()));
        assert_eq!(image(&on_hold).unwrap().status, "ON_HOLD");
        on_hold.insert("status".into(), StreamValue::N("3".into()));
        assert_eq!(image(&on_hold).unwrap().status, counters::UNREADABLE_STATUS);
        let record = |old: Option<HashMap<String, StreamValue>>| {
            let keys = HashMap::from([("PK".to_string(), StreamValue::S("ORDER#o-1".into()))]);
            let data = aws_sdk_dynamodbstreams::types::StreamRecord::builder().set_keys(Some(keys)).set_old_image(old);
            Record::builder().dynamodb(data.build()).build()
        };
        let (id, before) = state_before(&record(Some(item.clone()))).unwrap();
        assert_eq!((id.as_str(), before.unwrap().status.as_str()), ("o-1", "PENDING"));
        assert_eq!(state_before(&record(None)), Some(("o-1".into(), None)), "an insert: the order did not exist");
        // No createdAt: no order to count (no day, no minute), before or after.
        let mut timeless = item;
        timeless.remove("createdAt");
        assert!(image(&timeless).is_none());
        assert_eq!(state_before(&record(Some(timeless))), Some(("o-1".into(), None)));
        assert_eq!(gsi2_days([&record(Some(beyond))]), vec![day]);
    }
}

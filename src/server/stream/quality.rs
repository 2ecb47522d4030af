//! Schema drift and item-size creep, from the orders table's stream: the
//! consumer sees every write of every writer, so it is where both show.
//! Pure: each record's new image in (read by the pages' own reader,
//! `store::reading`, and sized and priced by `pricing`), counter increments
//! out, the counts added with the transaction that moves the consumer's
//! checkpoint, so a replayed batch adds nothing; the largest and the
//! samples a transaction chose are added right after it applies, outside
//! it (`keys::is_chosen_observation`: every shard's consumer adds to the
//! same hour's largest item, where transactions refused each other).
//!
//! Per day, in the metrics table (`keys::quality_pk`), every item bounded:
//! - an item per hour (`HOUR#<HH>`): records of the table, items written,
//!   items that drifted, items per drift kind and field (`k|<kind>|<field>`:
//!   the kinds are `model::ProblemKind`, the fields the few the reader
//!   names), a histogram of item sizes in fixed log-scale buckets (8 per
//!   doubling: p50 and p95 to within 9%), items over one write unit and one
//!   read unit, and the write units each table and index took;
//! - an item per hour of the largest items written (`LARGEST#<HH>`): a key is
//!   added when it is larger than the fifth largest this consumer has seen
//!   that day, at most `LARGEST_PER_HOUR` keys an hour; its value follows
//!   the key's largest size that hour;
//! - an item per drift kind and field (`SAMPLE#<kind>|<field>`): the first
//!   `SAMPLES` keys this consumer saw of it that day, with when.
//!
//! The largest and the samples are chosen by what this consumer has
//! committed, as hot keys are (`hotkeys`), and by what it read of the items
//! before it first wrote to an hour's largest or a day's samples (`seed`):
//! so a new consumer (a cold Lambda environment, a restart) adds only what
//! the items lack, and they stay bounded however many consumers write (at
//! 32 shards, 31 Lambda environments each adding their own 20 keys made an
//! hour's largest item 638 attributes, about 11 KB at some 17 bytes a key
//! and size: 11 write units, 22 in a transaction, each time one was added).
//! Consumers committing at the same moment may still each add a few keys.
//! The counts and the histogram are exact whatever reads the stream.

use crate::model::{
    DriftCount, DriftSample, LargeItem, ProblemKind, QualityReport, SizeFigures, WriteCost, validate_id,
};
use crate::server::rules::units::{READ_UNIT_BYTES, WRITE_UNIT_BYTES};
use crate::server::store::keys::{self, QualitySk, quality as attr};
use crate::server::store::usage::Resource;
use crate::server::store::{Item, reading};
use crate::server::stream::counters::{Deltas, Key};
use crate::server::stream::pricing::Write;
use chrono::{DateTime, NaiveDate, Timelike, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Keys kept per drift kind and field and day (per consumer).
pub const SAMPLES: usize = 5;
/// The largest items shown.
pub const LARGEST: usize = 5;
/// Keys one consumer adds to an hour's largest item, at most.
pub const LARGEST_PER_HOUR: usize = 20;
/// Histogram buckets per doubling of the size.
const BUCKETS_PER_DOUBLING: f64 = 8.0;
/// Days of choices kept in memory, the newest included.
const KEEP_DAYS: i64 = 2;

/// A drift kind and the field it is of.
pub type Drift = (ProblemKind, String);

/// Keys seen, each with when it was written.
type Seen = Vec<(DateTime<Utc>, String)>;

/// What an item drifts by: every problem the pages' reader finds in it,
/// and a GSI2 key on a shard its day's readers never read. `recorded` is
/// the recorded shard count of the day its GSI2 key names (`None`: none).
pub fn classify(item: &Item, count: Option<u32>) -> BTreeSet<Drift> {
    let order = reading::order(item);
    order
        .problems
        .into_iter()
        .chain(count.and_then(|count| reading::shard_problem(item, count)))
        .map(|problem| (problem.kind, problem.field))
        .collect()
}

/// What one stream record tells of the table's data.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub at: DateTime<Utc>,
    /// The item's table key, as text (`ORDER#<id>` for an order).
    pub key: String,
    /// The new image's size, as DynamoDB sizes it; `None` for a delete.
    pub size: Option<u64>,
    pub drift: BTreeSet<Drift>,
    /// Write units per table and index (`<table>[/<index>]`).
    pub units: Vec<(String, u32)>,
}

/// One record: its key, its new image (`None` for a delete) with its size,
/// the recorded shard count of the day its GSI2 key names, and its writes
/// as `pricing` priced them.
pub fn observe(
    key: String,
    new: Option<(&Item, u64)>,
    count: Option<u32>,
    table: &str,
    writes: &[Write],
    at: DateTime<Utc>,
) -> Observation {
    let units = writes
        .iter()
        .map(|write| {
            let resource = match &write.index {
                Some(index) => Resource::index(table, index.as_str()),
                None => Resource::table(table),
            };
            (resource.to_string(), write.units)
        })
        .collect();
    Observation {
        at,
        key,
        size: new.map(|(_, size)| size),
        drift: new.map(|(item, _)| classify(item, count)).unwrap_or_default(),
        units,
    }
}

fn bucket(size: u64) -> u32 {
    if size <= 1 { 0 } else { ((size as f64).log2() * BUCKETS_PER_DOUBLING).floor() as u32 }
}

/// The largest size a bucket holds.
fn bucket_top(bucket: u32) -> u64 {
    2f64.powf(f64::from(bucket + 1) / BUCKETS_PER_DOUBLING).ceil() as u64 - 1
}

/// One record into a transaction's increments (its hour's figures) and
/// the chunk of keys the transaction may sample or list as largest.
pub fn record(deltas: &mut Deltas, chunk: &mut Chunk, observation: &Observation) {
    let at = observation.at;
    let (day, hour) = (at.date_naive(), at.hour());
    let item = (keys::quality_pk(day), keys::quality_hour_sk(hour));
    let mut add = |attribute: String, by: i64| deltas.add(item.clone(), attribute, by);
    add(attr::WRITES.into(), 1);
    for (resource, units) in &observation.units {
        add(keys::resource_units_attribute(resource), i64::from(*units));
    }
    let Some(size) = observation.size else { return };
    add(attr::ITEMS.into(), 1);
    add(attr::BYTES.into(), size as i64);
    add(keys::size_bucket_attribute(bucket(size)), 1);
    if size > WRITE_UNIT_BYTES {
        add(attr::OVER_WRITE_UNIT.into(), 1);
    }
    if size > READ_UNIT_BYTES {
        add(attr::OVER_READ_UNIT.into(), 1);
    }
    if !observation.drift.is_empty() {
        add(attr::DRIFTED.into(), 1);
    }
    for (kind, field) in &observation.drift {
        add(keys::drift_attribute(kind.as_str(), field), 1);
        chunk.sample(day, (*kind, field.clone()), at, &observation.key);
    }
    chunk.large(day, hour, &observation.key, size);
}

/// The keys one transaction's records may sample or list as largest, and
/// the drift it counts (for `/metrics` once it commits).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunk {
    samples: BTreeMap<(NaiveDate, Drift), Seen>,
    largest: BTreeMap<(NaiveDate, u32), BTreeMap<String, u64>>,
    drift: BTreeMap<Drift, u64>,
}

impl Chunk {
    fn sample(&mut self, day: NaiveDate, drift: Drift, at: DateTime<Utc>, key: &str) {
        *self.drift.entry(drift.clone()).or_default() += 1;
        let keys = self.samples.entry((day, drift)).or_default();
        if keys.len() < SAMPLES && keys.iter().all(|(_, k)| k != key) {
            keys.push((at, key.to_string()));
        }
    }

    fn large(&mut self, day: NaiveDate, hour: u32, key: &str, size: u64) {
        let keys = self.largest.entry((day, hour)).or_default();
        let entry = keys.entry(key.to_string()).or_default();
        *entry = (*entry).max(size);
        if keys.len() > LARGEST_PER_HOUR {
            // The smallest of them can be none of the hour's largest.
            if let Some(smallest) = keys.iter().min_by_key(|(k, size)| (**size, (*k).clone())).map(|(k, _)| k.clone()) {
                keys.remove(&smallest);
            }
        }
    }

    /// Items a transaction may write for it, at most.
    pub fn items(&self) -> usize {
        self.samples.len() + self.largest.len()
    }

    /// Items per drift kind and field.
    pub fn drift(&self) -> &BTreeMap<Drift, u64> {
        &self.drift
    }
}

/// What a transaction adds for its chunk, and what this consumer then has
/// persisted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub adds: Vec<(Key, String, i64)>,
    sampled: Vec<(NaiveDate, Drift, String)>,
    sized: Vec<(NaiveDate, u32, String, u64)>,
}

/// What this consumer has committed, or read, of the samples and the largest.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    sampled: HashMap<(NaiveDate, Drift), HashSet<String>>,
    /// Sizes persisted per (day, hour) and key.
    sized: HashMap<(NaiveDate, u32), HashMap<String, u64>>,
    /// The hours whose largest, and the days whose samples, were read.
    seeded_hours: HashSet<(NaiveDate, u32)>,
    seeded_days: HashSet<NaiveDate>,
}

impl Tracker {
    /// The days whose items this consumer should read before it plans
    /// `chunk`: an hour's largest or a day's samples it has not read yet.
    pub fn unseeded(&self, chunk: &Chunk) -> BTreeSet<NaiveDate> {
        let hours = chunk.largest.keys().filter(|key| !self.seeded_hours.contains(key)).map(|(day, _)| *day);
        let days = chunk.samples.keys().map(|(day, _)| *day).filter(|day| !self.seeded_days.contains(day));
        hours.chain(days).collect()
    }

    /// What the day's quality items hold (`items`, every `QUALITY#<day>`
    /// item), as if this consumer had committed it; the hours and the
    /// samples of `chunk` on that day are then read.
    pub fn seed(&mut self, day: NaiveDate, items: &[Item], chunk: &Chunk) {
        for item in items {
            match Stored::read(item) {
                Some(Stored::Largest { hour, sizes }) => {
                    let sized = self.sized.entry((day, hour)).or_default();
                    for (key, size) in sizes {
                        let known = sized.entry(key.to_string()).or_default();
                        *known = (*known).max(size);
                    }
                }
                Some(Stored::Sample { drift, seen }) => {
                    let sampled = self.sampled.entry((day, drift)).or_default();
                    sampled.extend(seen.into_iter().map(|(_, key)| key.to_string()));
                }
                Some(Stored::Hour(_)) | None => {}
            }
        }
        self.seeded_hours.extend(chunk.largest.keys().filter(|(d, _)| *d == day).copied());
        self.seeded_days.insert(day);
    }

    /// The adds that keep the samples and the largest items, given what
    /// this consumer committed before. Transactions are committed one at a
    /// time (each `plan` is followed by its `committed` or dropped).
    pub fn plan(&self, chunk: &Chunk) -> Plan {
        let mut plan = Plan::default();
        for ((day, drift), keys) in &chunk.samples {
            let taken = self.sampled.get(&(*day, drift.clone()));
            let mut count = taken.map_or(0, HashSet::len);
            for (at, key) in keys {
                if count >= SAMPLES || taken.is_some_and(|t| t.contains(key)) {
                    continue;
                }
                count += 1;
                let item = (keys::quality_pk(*day), keys::quality_sample_sk(drift.0.as_str(), &drift.1));
                plan.adds.push((item, keys::quality_sample_attribute(at, key), 1));
                plan.sampled.push((*day, drift.clone(), key.clone()));
            }
        }
        for ((day, hour), sizes) in &chunk.largest {
            let known = self.sized.get(&(*day, *hour));
            let mut listed = known.map_or(0, HashMap::len);
            let floor = self.fifth_largest(*day);
            let mut by_size: Vec<(&String, &u64)> = sizes.iter().collect();
            by_size.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            // Only a chunk's five largest can be among the hour's: consumers
            // starting at once, before any reads another's keys, add five
            // each, not the hour's twenty.
            let mut new_keys = 0;
            for (key, &size) in by_size {
                let before = known.and_then(|k| k.get(key)).copied();
                let add = match before {
                    Some(before) if size > before => size - before,
                    Some(_) => continue,
                    None if new_keys < LARGEST
                        && listed < LARGEST_PER_HOUR
                        && floor.is_none_or(|floor| size > floor) =>
                    {
                        (listed, new_keys) = (listed + 1, new_keys + 1);
                        size
                    }
                    None => continue,
                };
                let item = (keys::quality_pk(*day), keys::quality_largest_sk(*hour));
                plan.adds.push((item, keys::bounded_key(key), add as i64));
                plan.sized.push((*day, *hour, key.clone(), size));
            }
        }
        plan
    }

    /// The fifth largest size persisted for a day (`None`: fewer than five).
    fn fifth_largest(&self, day: NaiveDate) -> Option<u64> {
        let mut sizes: Vec<u64> =
            self.sized.iter().filter(|((d, _), _)| *d == day).flat_map(|(_, keys)| keys.values().copied()).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        sizes.get(LARGEST - 1).copied()
    }

    /// The transaction carrying `plan` committed.
    pub fn committed(&mut self, plan: Plan) {
        for (day, drift, key) in plan.sampled {
            self.sampled.entry((day, drift)).or_default().insert(key);
        }
        for (day, hour, key, size) in plan.sized {
            let persisted = self.sized.entry((day, hour)).or_default().entry(key).or_default();
            *persisted = (*persisted).max(size);
        }
        let newest = self.sized.keys().map(|(d, _)| *d).chain(self.sampled.keys().map(|(d, _)| *d)).max();
        if let Some(oldest) = newest.and_then(|d| d.checked_sub_days(chrono::Days::new(KEEP_DAYS as u64 - 1))) {
            self.sampled.retain(|(d, _), _| *d >= oldest);
            self.sized.retain(|(d, _), _| *d >= oldest);
            self.seeded_hours.retain(|(d, _)| *d >= oldest);
            self.seeded_days.retain(|d| *d >= oldest);
        }
    }
}

/// A day's quality items read back as the report: `items` are the day's
/// (every `QUALITY#<day>` item), `previous` the day before's, for the p95
/// it is compared with.
pub fn report(day: NaiveDate, as_of: DateTime<Utc>, items: &[Item], previous: &[Item]) -> QualityReport {
    let day_figures = Figures::of(items);
    let size = day_figures.sizes();
    let previous_p95 = Figures::of(previous).sizes().p95;
    let growth = match (size.p95, previous_p95) {
        (Some(now), Some(before)) if now > before => Some(format!(
            "p95 item size grew from {before} to {now} bytes over the day before ({:+.0}%): find what writes larger \
             items (the largest below) before they cross a write unit",
            (now as f64 / before as f64 - 1.0) * 100.0
        )),
        _ => None,
    };
    QualityReport {
        date: day,
        as_of,
        items_written: day_figures.items,
        items_drifted: day_figures.drifted,
        drift: day_figures.drift(),
        size,
        previous_p95,
        growth,
    }
}

/// The orders table's records in some quality items (a day's), and the
/// write units the stream priced them at per table and index (`<table>`,
/// `<table>/<index>`): what a record cost, whoever wrote it.
pub fn priced_writes(items: &[Item]) -> (u64, BTreeMap<String, u64>) {
    let figures = Figures::of(items);
    (figures.writes, figures.units)
}

/// The figures of some quality items, summed over their hours.
#[derive(Default)]
struct Figures {
    writes: u64,
    items: u64,
    drifted: u64,
    bytes: u64,
    over_write_unit: u64,
    over_read_unit: u64,
    buckets: BTreeMap<u32, u64>,
    units: BTreeMap<String, u64>,
    drift: BTreeMap<(ProblemKind, String), u64>,
    samples: BTreeMap<Drift, Seen>,
    largest: HashMap<String, u64>,
}

impl Figures {
    fn of(items: &[Item]) -> Self {
        let mut figures = Figures::default();
        for item in items {
            match Stored::read(item) {
                Some(Stored::Hour(item)) => figures.hour(item),
                Some(Stored::Largest { sizes, .. }) => {
                    for (key, size) in sizes {
                        let largest = figures.largest.entry(key.to_string()).or_default();
                        *largest = (*largest).max(size);
                    }
                }
                Some(Stored::Sample { drift, seen }) => {
                    let samples = figures.samples.entry(drift).or_default();
                    samples.extend(seen.into_iter().map(|(at, key)| (at, key.to_string())));
                }
                None => {}
            }
        }
        figures
    }

    fn hour(&mut self, item: &Item) {
        for (name, value) in numbers(item) {
            let value = value.max(0) as u64;
            match name {
                attr::WRITES => self.writes += value,
                attr::ITEMS => self.items += value,
                attr::DRIFTED => self.drifted += value,
                attr::BYTES => self.bytes += value,
                attr::OVER_WRITE_UNIT => self.over_write_unit += value,
                attr::OVER_READ_UNIT => self.over_read_unit += value,
                _ => {
                    if let Some(bucket) = keys::parse_size_bucket_attribute(name) {
                        *self.buckets.entry(bucket).or_default() += value;
                    } else if let Some(resource) = keys::parse_resource_units_attribute(name) {
                        *self.units.entry(resource.to_string()).or_default() += value;
                    } else if let Some((kind, field)) = keys::parse_drift_attribute(name)
                        && let Ok(kind) = kind.parse::<ProblemKind>()
                    {
                        *self.drift.entry((kind, field.to_string())).or_default() += value;
                    }
                }
            }
        }
    }

    fn drift(&self) -> Vec<DriftCount> {
        let mut drift: Vec<DriftCount> = self
            .drift
            .iter()
            .map(|((kind, field), items)| {
                let mut samples = self.samples.get(&(*kind, field.clone())).cloned().unwrap_or_default();
                samples.sort();
                let mut seen = HashSet::new();
                samples.retain(|(_, key)| seen.insert(key.clone()));
                samples.truncate(SAMPLES);
                DriftCount {
                    kind: *kind,
                    field: field.clone(),
                    items: *items,
                    samples: samples
                        .into_iter()
                        .map(|(at, key)| DriftSample { order_id: order_of(&key), key, at })
                        .collect(),
                }
            })
            .collect();
        drift.sort_by(|a, b| b.items.cmp(&a.items).then(a.kind.cmp(&b.kind)).then(a.field.cmp(&b.field)));
        drift
    }

    fn sizes(&self) -> SizeFigures {
        let mut largest: Vec<LargeItem> = self
            .largest
            .iter()
            .map(|(key, bytes)| LargeItem { key: key.clone(), order_id: order_of(key), bytes: *bytes })
            .collect();
        largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.key.cmp(&b.key)));
        largest.truncate(LARGEST);
        let max = largest.first().map(|l| l.bytes);
        let percentile = |q: f64| {
            let rank = ((self.items as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            let top = self.buckets.iter().find_map(|(bucket, count)| {
                seen += count;
                (seen >= rank).then(|| bucket_top(*bucket))
            })?;
            Some(max.map_or(top, |max| top.min(max)))
        };
        let writes = self.writes;
        SizeFigures {
            items: self.items,
            p50: percentile(0.5),
            p95: percentile(0.95),
            max,
            mean: (self.items > 0).then(|| self.bytes / self.items),
            over_write_unit: self.over_write_unit,
            over_read_unit: self.over_read_unit,
            largest,
            writes,
            per_write: self
                .units
                .iter()
                .map(|(resource, units)| WriteCost {
                    resource: resource.clone(),
                    units: *units,
                    per_write: if writes > 0 { *units as f64 / writes as f64 } else { 0.0 },
                })
                .collect(),
        }
    }
}

/// A quality item as read back: what `Tracker::seed` and `report` both
/// take from it (the one reads the day's largest and samples again, the
/// other sums them over the day).
enum Stored<'a> {
    Hour(&'a Item),
    /// An hour's largest keys, each with its largest size.
    Largest {
        hour: u32,
        sizes: Vec<(&'a str, u64)>,
    },
    /// A drift kind and field's sampled keys, each with when it was written.
    Sample {
        drift: Drift,
        seen: Vec<(DateTime<Utc>, &'a str)>,
    },
}

impl<'a> Stored<'a> {
    /// `None` for an item that is none of them, or a drift kind this
    /// version does not know.
    fn read(item: &'a Item) -> Option<Self> {
        let sk = item.get(keys::SK)?.as_s().ok()?;
        match keys::parse_quality_sk(sk)? {
            QualitySk::Hour(_) => Some(Stored::Hour(item)),
            QualitySk::Largest(hour) => {
                let sizes = numbers(item).map(|(key, size)| (key, size.max(0) as u64)).collect();
                Some(Stored::Largest { hour, sizes })
            }
            QualitySk::Sample { kind, field } => {
                let kind = kind.parse::<ProblemKind>().ok()?;
                let seen = item.keys().filter_map(|name| keys::parse_quality_sample_attribute(name)).collect();
                Some(Stored::Sample { drift: (kind, field.to_string()), seen })
            }
        }
    }
}

/// An item's numeric attributes (the keys and anything else left out).
fn numbers(item: &Item) -> impl Iterator<Item = (&str, i64)> {
    item.iter().filter_map(|(name, value)| Some((name.as_str(), value.as_n().ok()?.parse::<i64>().ok()?)))
}

/// The order a table key names, when it names one a page can open.
fn order_of(key: &str) -> Option<String> {
    keys::parse_order_pk(key).filter(|id| validate_id("order id", id).is_ok()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LineItem, Order, Status, iso_millis};
    use aws_sdk_dynamodb::types::AttributeValue;

    fn at(s: &str) -> DateTime<Utc> {
        iso_millis::parse(s).unwrap()
    }

    fn written(id: &str) -> Item {
        let created = at("2026-11-29T10:15:30.000Z");
        let order = Order {
            order_id: id.into(),
            customer_id: Some("c-1".into()),
            status: Some(Status::Pending.into()),
            created_at: Some(created),
            updated_at: Some(created),
            total: Some(100),
            currency: Some("USD".into()),
            items: Some(vec![LineItem { sku: "A".into(), name: "A".into(), quantity: 1, unit_price: 100 }]),
            shipping_city: Some("Oslo".into()),
            shipping_country: Some("NO".into()),
            problems: Vec::new(),
        };
        crate::server::store::order_item(&order, 10).unwrap()
    }

    fn kinds(drift: &BTreeSet<Drift>) -> Vec<(ProblemKind, &str)> {
        drift.iter().map(|(k, f)| (*k, f.as_str())).collect()
    }

    #[test]
    fn an_order_as_the_app_writes_it_does_not_drift() {
        assert!(classify(&written("o-1"), Some(10)).is_empty());
    }

    #[test]
    fn every_kind_of_drift_is_classified_per_field() {
        let mut item = written("o-1");
        item.remove("total");
        item.insert("itemCount".into(), AttributeValue::S("1".into()));
        item.insert("status".into(), AttributeValue::S("ON_HOLD".into()));
        item.insert("createdAt".into(), AttributeValue::S("2026-11-29T10:15:30Z".into()));
        item.insert("GSI2PK".into(), AttributeValue::S("STATUS#PENDING#2026-11-28#57".into()));
        item.insert("GSI1SK".into(), AttributeValue::S("wrong".into()));
        assert_eq!(
            kinds(&classify(&item, Some(10))),
            [
                (ProblemKind::Missing, "total"),
                (ProblemKind::Mistyped, "itemCount"),
                (ProblemKind::UnknownStatus, "status"),
                (ProblemKind::NotKeyForm, "createdAt"),
                (ProblemKind::SortKey, "GSI1SK"),
                (ProblemKind::ShardBeyondCount, "GSI2PK"),
                (ProblemKind::KeyDay, "GSI2PK"),
            ]
        );
    }

    fn observation(key: &str, size: u64, drift: &[(ProblemKind, &str)], at: &str) -> Observation {
        Observation {
            at: self::at(at),
            key: key.into(),
            size: Some(size),
            drift: drift.iter().map(|(k, f)| (*k, f.to_string())).collect(),
            units: vec![("orders".into(), size.div_ceil(1024).max(1) as u32), ("orders/GSI1".into(), 1)],
        }
    }

    /// Records applied as the consumer does: increments, then the plan
    /// added at commit, into items as the store would hold them.
    fn apply(tracker: &mut Tracker, store: &mut BTreeMap<Key, BTreeMap<String, i64>>, batch: &[Observation]) {
        let (mut deltas, mut chunk) = (Deltas::default(), Chunk::default());
        for observation in batch {
            record(&mut deltas, &mut chunk, observation);
        }
        let plan = tracker.plan(&chunk);
        deltas.extend(&plan.adds);
        for (key, attributes) in deltas.items() {
            for (attribute, by) in attributes {
                *store.entry(key.clone()).or_default().entry(attribute.clone()).or_default() += by;
            }
        }
        tracker.committed(plan);
    }

    fn items(store: &BTreeMap<Key, BTreeMap<String, i64>>, pk: &str) -> Vec<Item> {
        store
            .iter()
            .filter(|((p, _), _)| p == pk)
            .map(|((p, sk), attributes)| {
                let mut item: Item =
                    attributes.iter().map(|(a, v)| (a.clone(), AttributeValue::N(v.to_string()))).collect();
                item.insert("PK".into(), AttributeValue::S(p.clone()));
                item.insert("SK".into(), AttributeValue::S(sk.clone()));
                item
            })
            .collect()
    }

    #[test]
    fn a_day_reads_back_with_its_drift_samples_and_sizes() {
        let (mut tracker, mut store) = (Tracker::default(), BTreeMap::new());
        let missing = [(ProblemKind::Missing, "total")];
        let batch: Vec<Observation> = (0..8)
            .map(|i| observation(&format!("ORDER#o-{i}"), 500 + i * 100, &missing, "2026-11-29T10:00:00.000Z"))
            .chain([observation("ORDER#big", 409_000, &[], "2026-11-29T11:30:00.000Z")])
            .collect();
        apply(&mut tracker, &mut store, &batch[..4]);
        apply(&mut tracker, &mut store, &batch[4..]);
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let report = report(day, at("2026-11-29T12:00:00Z"), &items(&store, "QUALITY#2026-11-29"), &[]);
        assert_eq!((report.items_written, report.items_drifted), (9, 8));
        assert_eq!(report.drift.len(), 1);
        let drift = &report.drift[0];
        assert_eq!((drift.kind, drift.field.as_str(), drift.items), (ProblemKind::Missing, "total", 8));
        let sampled: Vec<&str> = drift.samples.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(sampled, ["ORDER#o-0", "ORDER#o-1", "ORDER#o-2", "ORDER#o-3", "ORDER#o-4"], "the first five");
        assert_eq!(drift.samples[0].order_id.as_deref(), Some("o-0"));
        let size = &report.size;
        assert_eq!((size.items, size.max, size.over_write_unit, size.over_read_unit), (9, Some(409_000), 3, 1));
        assert_eq!(size.largest[0].order_id.as_deref(), Some("big"));
        let largest: Vec<u64> = size.largest.iter().map(|l| l.bytes).collect();
        assert_eq!(largest, [409_000, 1200, 1100, 1000, 900]);
        // The median of 500..1200 and one 400 KB item is about 900 bytes.
        let p50 = size.p50.unwrap();
        assert!((900..=981).contains(&p50), "{p50}");
        assert_eq!(size.p95, Some(409_000), "the top bucket, capped at the max");
        let table = size.per_write.iter().find(|c| c.resource == "orders").unwrap();
        let units: u64 = batch.iter().map(|o| u64::from(o.units[0].1)).sum();
        assert_eq!((table.units, size.writes), (units, 9));
        assert!((table.per_write - units as f64 / 9.0).abs() < 1e-9);
        let gsi1 = size.per_write.iter().find(|c| c.resource == "orders/GSI1").unwrap();
        assert_eq!(gsi1.units, 9);
        let sampled_items = store.keys().filter(|(_, sk)| sk.starts_with("SAMPLE#")).count();
        assert_eq!(sampled_items, 1);
        assert_eq!(store[&("QUALITY#2026-11-29".to_string(), "SAMPLE#missing|total".to_string())].len(), SAMPLES);
    }

    #[test]
    fn the_same_records_make_the_same_increments_and_a_replay_is_the_checkpoints_to_refuse() {
        let batch = [observation("ORDER#o-1", 700, &[(ProblemKind::Missing, "total")], "2026-11-29T10:00:00.000Z")];
        let increments = |tracker: &Tracker| {
            let (mut deltas, mut chunk) = (Deltas::default(), Chunk::default());
            record(&mut deltas, &mut chunk, &batch[0]);
            deltas.extend(&tracker.plan(&chunk).adds);
            deltas
        };
        let tracker = Tracker::default();
        assert_eq!(increments(&tracker), increments(&tracker));
    }

    #[test]
    fn a_key_growing_within_an_hour_follows_its_size_and_later_small_items_are_not_listed() {
        let (mut tracker, mut store) = (Tracker::default(), BTreeMap::new());
        for size in [2000, 3000, 2500] {
            apply(&mut tracker, &mut store, &[observation("ORDER#g", size, &[], "2026-11-29T10:00:00.000Z")]);
        }
        let largest = &store[&("QUALITY#2026-11-29".to_string(), "LARGEST#10".to_string())];
        assert_eq!(largest.get("ORDER#g"), Some(&3000));
        for i in 0..LARGEST {
            let key = format!("ORDER#b{i}");
            apply(&mut tracker, &mut store, &[observation(&key, 10_000, &[], "2026-11-29T10:00:00.000Z")]);
        }
        apply(&mut tracker, &mut store, &[observation("ORDER#small", 100, &[], "2026-11-29T10:00:00.000Z")]);
        let largest = &store[&("QUALITY#2026-11-29".to_string(), "LARGEST#10".to_string())];
        assert!(!largest.contains_key("ORDER#small"), "below the day's fifth largest");
        assert!(largest.len() <= LARGEST_PER_HOUR);
    }

    #[test]
    fn items_stay_bounded_however_many_consumers_write_when_each_reads_them_first() {
        let (mut store, day) = (BTreeMap::new(), NaiveDate::from_ymd_opt(2026, 11, 29).unwrap());
        let mut consumers: Vec<Tracker> = (0..30).map(|_| Tracker::default()).collect();
        for round in 0..3u64 {
            for (c, tracker) in consumers.iter_mut().enumerate() {
                let batch: Vec<Observation> = (0..25u64)
                    .map(|i| {
                        let key = format!("ORDER#c{c}-r{round}-{i}");
                        observation(&key, 1000 + i, &[(ProblemKind::Mistyped, "total")], "2026-11-29T10:00:00.000Z")
                    })
                    .collect();
                // As the consumer does before it plans: read what it lacks.
                let (mut deltas, mut chunk) = (Deltas::default(), Chunk::default());
                batch.iter().for_each(|o| record(&mut deltas, &mut chunk, o));
                if tracker.unseeded(&chunk).contains(&day) {
                    tracker.seed(day, &items(&store, "QUALITY#2026-11-29"), &chunk);
                }
                assert!(tracker.unseeded(&chunk).is_empty(), "read once an hour");
                apply(tracker, &mut store, &batch);
            }
        }
        let largest = &store[&("QUALITY#2026-11-29".to_string(), "LARGEST#10".to_string())];
        // Read once an hour, a consumer misses what others add later: a few
        // over the hour's twenty, not twenty each.
        assert!(largest.len() <= 2 * LARGEST_PER_HOUR, "{} keys", largest.len());
        let samples = &store[&("QUALITY#2026-11-29".to_string(), "SAMPLE#mistyped|total".to_string())];
        assert_eq!(samples.len(), SAMPLES);
        // Unread, each consumer adds its own: its chunk's five largest.
        let mut unread: Vec<Tracker> = (0..30).map(|_| Tracker::default()).collect();
        let mut alone = BTreeMap::new();
        for (c, tracker) in unread.iter_mut().enumerate() {
            let o = |i: u64| observation(&format!("ORDER#u{c}-{i}"), 1000 + i, &[], "2026-11-29T10:00:00.000Z");
            apply(tracker, &mut alone, &(0..25).map(o).collect::<Vec<_>>());
        }
        assert_eq!(alone[&("QUALITY#2026-11-29".to_string(), "LARGEST#10".to_string())].len(), 30 * LARGEST);
    }

    #[test]
    fn items_stay_bounded_however_many_keys_drift() {
        let (mut tracker, mut store) = (Tracker::default(), BTreeMap::new());
        for i in 0..2000u64 {
            let key = format!("ORDER#o-{i}");
            // Sizes rising all day: the worst case for the largest items.
            let o = observation(&key, 1000 + i, &[(ProblemKind::Mistyped, "total")], "2026-11-29T10:00:00.000Z");
            apply(&mut tracker, &mut store, &[o]);
        }
        for ((_, sk), attributes) in &store {
            let bound = if sk.starts_with("LARGEST#") { LARGEST_PER_HOUR } else { 100 };
            assert!(attributes.len() <= bound, "{sk}: {}", attributes.len());
        }
    }

    #[test]
    fn a_growing_p95_is_said() {
        let (mut tracker, mut today, mut before) = (Tracker::default(), BTreeMap::new(), BTreeMap::new());
        let yesterday: Vec<Observation> =
            (0..20).map(|i| observation(&format!("ORDER#y{i}"), 800, &[], "2026-11-28T10:00:00.000Z")).collect();
        let now: Vec<Observation> =
            (0..20).map(|i| observation(&format!("ORDER#t{i}"), 1600, &[], "2026-11-29T10:00:00.000Z")).collect();
        apply(&mut tracker, &mut before, &yesterday);
        apply(&mut tracker, &mut today, &now);
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let report = report(
            day,
            at("2026-11-29T12:00:00Z"),
            &items(&today, "QUALITY#2026-11-29"),
            &items(&before, "QUALITY#2026-11-28"),
        );
        assert_eq!(report.previous_p95, Some(800));
        assert!(report.growth.as_deref().is_some_and(|g| g.contains("800 to 1600")), "{:?}", report.growth);
    }

    #[test]
    fn buckets_are_eight_per_doubling() {
        assert_eq!(bucket(1024), 80);
        assert!(bucket_top(bucket(1000)) >= 1000 && bucket_top(bucket(1000)) < 1100);
        for size in [2u64, 3, 100, 1023, 1024, 1025, 4096, 409_600] {
            assert!(bucket_top(bucket(size)) >= size, "{size}");
            assert!(bucket_top(bucket(size)) as f64 <= size as f64 * 1.0906 + 1.0, "{size}");
        }
    }
}

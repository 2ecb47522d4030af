//! Consumed capacity and throttles, persisted a minute at a time, and the
//! GSI2 shard heat the stream consumer counts.
//!
//! Each process adds its own minutes to the day's `CAPACITY#<date>` items
//! (`ADD`, so processes sum) once a minute and at shutdown; a read merges the
//! minutes this process has not flushed yet. The same partition holds what
//! the stream consumer adds with its checkpoints (every writer's write units,
//! the hot keys) and the minutes it observed. A flush that fails keeps its
//! minutes for the next one. An `ADD` the SDK retries after a lost answer
//! may count twice: the figures are for capacity planning, not billing.

use super::items::{AddExpression, add_to_metric};
use super::{Item, Store};
use crate::server::store::error::{StoreError, unless_condition_failed};
use crate::server::store::keys::{self, CapacitySk};
use crate::server::store::usage::ReadWrite;
use crate::server::store::usage::{Resource, Tally, Usage, epoch_minute, minute_start};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use chrono::{DateTime, NaiveDate, Timelike, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const MINUTES: usize = 1440;
/// Attributes one `ADD` update sets at most: the expression stays far below
/// DynamoDB's 4 KB.
const ADDS_PER_UPDATE: usize = 100;

/// One day's consumed capacity and throttled attempts, minute by minute
/// (1440 each), from every process that flushed, and this one's unflushed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapacityDay {
    pub date: NaiveDate,
    pub units: BTreeMap<(Resource, ReadWrite), Vec<f64>>,
    /// By (reason, resource as filed: `table/<t>[/index/<i>]`).
    pub throttles: BTreeMap<(String, String), Vec<u64>>,
    /// Write units of this app's own transactions: a part of `units`' writes.
    pub transactional: BTreeMap<Resource, Vec<f64>>,
    /// Write units of every writer, priced from the stream by the consumer.
    pub stream: BTreeMap<Resource, Vec<f64>>,
    /// The minutes the stream consumer observed (1440, or empty: none).
    pub observed: Vec<bool>,
    /// The most a stream consumer was behind the stream in a minute of the
    /// day, in milliseconds, by minute of the day (`record_behind`).
    pub behind_ms: BTreeMap<u16, u64>,
    /// The keys written most, by minute of the day: (resource, key, units).
    pub hot: BTreeMap<u16, Vec<(String, String, u64)>>,
}

impl CapacityDay {
    fn empty(date: NaiveDate) -> Self {
        Self { date, ..Self::default() }
    }

    /// Adds one minute's tally (its minute of the day is `minute`).
    fn add(&mut self, minute: usize, tally: &Tally) {
        for ((resource, access), units) in &tally.units {
            self.units.entry((resource.clone(), *access)).or_insert_with(|| vec![0.0; MINUTES])[minute] += units;
        }
        for (key, n) in &tally.throttles {
            self.throttles.entry(key.clone()).or_insert_with(|| vec![0; MINUTES])[minute] += n;
        }
        for (resource, units) in &tally.transactional {
            self.transactional.entry(resource.clone()).or_insert_with(|| vec![0.0; MINUTES])[minute] += units;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.throttles.is_empty() && self.stream.is_empty()
    }

    /// Minutes the stream consumer observed.
    pub fn observed_minutes(&self) -> usize {
        self.observed.iter().filter(|o| **o).count()
    }
}

/// Writes to each GSI2 shard per minute of one day.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeatDay {
    pub date: NaiveDate,
    /// The day's shard count (at least one more than the highest shard seen).
    pub shards: u32,
    /// `writes[minute][shard]`, 1440 minutes.
    pub writes: Vec<Vec<u64>>,
}

/// What the periodic flush needs of the store, cheap to clone into a task.
#[derive(Clone)]
pub struct UsageFlusher {
    client: Client,
    metrics_table: String,
    usage: Arc<Usage>,
    /// Held for writing by a flush, for reading by a reader that merges the
    /// unflushed minutes: a minute is never seen twice, nor missed.
    gate: Arc<tokio::sync::RwLock<()>>,
}

/// One update of a flush, and the minutes it carries (given back if it fails).
struct Write {
    pk: String,
    sk: String,
    adds: Vec<(String, String)>,
    carries: BTreeMap<i64, Tally>,
}

impl UsageFlusher {
    pub(super) fn new(client: Client, metrics_table: String, usage: Arc<Usage>) -> Self {
        Self { client, metrics_table, usage, gate: Arc::default() }
    }

    /// Adds every unflushed minute to the metrics table; the number of
    /// updates made. What could not be written stays for the next flush.
    pub async fn flush(&self) -> Result<usize, StoreError> {
        let _gate = self.gate.write().await;
        let writes = writes(&self.usage.take_minutes());
        for (done, write) in writes.iter().enumerate() {
            if let Err(err) = self.update(write).await {
                for write in &writes[done..] {
                    self.usage.restore(write.carries.clone());
                }
                return Err(err);
            }
        }
        Ok(writes.len())
    }

    async fn update(&self, write: &Write) -> Result<(), StoreError> {
        let add = AddExpression::of(write.adds.iter().map(|(attribute, value)| (attribute.as_str(), value.clone())));
        add_to_metric(&self.client, &self.metrics_table, (&write.pk, &write.sk), add).await
    }
}

/// One attribute an update adds to: its name, the value added, and the
/// minute (with its share of that minute's tally) it carries.
struct Add {
    attribute: String,
    value: String,
    minute: i64,
    share: Tally,
}

/// The updates that add `minutes` to their days' items: one per item (and
/// per `ADDS_PER_UPDATE` attributes), each carrying its share of the minutes.
fn writes(minutes: &BTreeMap<i64, Tally>) -> Vec<Write> {
    let mut items: BTreeMap<(String, String), Vec<Add>> = BTreeMap::new();
    for (&minute, tally) in minutes {
        let start = minute_start(minute);
        let (pk, of_day) = (keys::capacity_pk(start.date_naive()), start.hour() * 60 + start.minute());
        for ((resource, access), units) in &tally.units {
            let kind = match access {
                ReadWrite::Read => 'r',
                ReadWrite::Write => 'w',
            };
            let mut share = Tally::default();
            share.units.insert((resource.clone(), *access), *units);
            let sk = keys::capacity_units_sk(&resource.to_string());
            let attribute = keys::capacity_minute_attribute(kind, of_day);
            items.entry((pk.clone(), sk)).or_default().push(Add { attribute, value: number(*units), minute, share });
        }
        for (resource, units) in &tally.transactional {
            let mut share = Tally::default();
            share.transactional.insert(resource.clone(), *units);
            let sk = keys::capacity_units_sk(&resource.to_string());
            let attribute = keys::capacity_minute_attribute('x', of_day);
            items.entry((pk.clone(), sk)).or_default().push(Add { attribute, value: number(*units), minute, share });
        }
        for ((reason, resource), n) in &tally.throttles {
            let mut share = Tally::default();
            share.throttles.insert((reason.clone(), resource.clone()), *n);
            let sk = keys::capacity_throttles_sk(reason, resource);
            let attribute = keys::capacity_minute_attribute('t', of_day);
            items.entry((pk.clone(), sk)).or_default().push(Add { attribute, value: n.to_string(), minute, share });
        }
    }
    let mut writes = Vec::new();
    for ((pk, sk), adds) in items {
        for chunk in adds.chunks(ADDS_PER_UPDATE) {
            let mut carries: BTreeMap<i64, Tally> = BTreeMap::new();
            for add in chunk {
                carries.entry(add.minute).or_default().merge(&add.share);
            }
            let adds = chunk.iter().map(|add| (add.attribute.clone(), add.value.clone())).collect();
            writes.push(Write { pk: pk.clone(), sk: sk.clone(), adds, carries });
        }
    }
    writes
}

/// A unit count as DynamoDB's number text: Rust prints floats without an
/// exponent, and units are halves or whole numbers in practice.
fn number(units: f64) -> String {
    format!("{units}")
}

fn float(item: &Item, attribute: &str) -> f64 {
    item.get(attribute).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok()).unwrap_or(0.0)
}

impl Store {
    /// What this process's calls consumed, not yet flushed, and its
    /// per-second ring.
    pub fn usage(&self) -> &Arc<Usage> {
        &self.usage.usage
    }

    /// The flush, for a task of its own.
    pub fn usage_flusher(&self) -> UsageFlusher {
        self.usage.clone()
    }

    /// Adds this process's unflushed minutes to the metrics table.
    pub async fn flush_usage(&self) -> Result<usize, StoreError> {
        self.usage.flush().await
    }

    /// The consumed capacity and throttles of `day`: every process's
    /// flushed minutes and this one's unflushed.
    pub async fn capacity_day(&self, day: NaiveDate) -> Result<CapacityDay, StoreError> {
        let _gate = self.usage.gate.read().await;
        let mut capacity = self.persisted_capacity_day(day).await?;
        for (minute, tally) in self.usage.usage.unflushed() {
            let start = minute_start(minute);
            if start.date_naive() == day {
                capacity.add((start.hour() * 60 + start.minute()) as usize, &tally);
            }
        }
        Ok(capacity)
    }

    /// The minutes of `day` in the metrics table only: what `advise` weighs,
    /// its own reads left out.
    pub async fn persisted_capacity_day(&self, day: NaiveDate) -> Result<CapacityDay, StoreError> {
        let mut capacity = CapacityDay::empty(day);
        for item in self.metrics_partition(keys::capacity_pk(day), false).await? {
            add_item(&mut capacity, &item);
        }
        Ok(capacity)
    }

    /// Marks the epoch minutes `from..=to` observed by the stream consumer
    /// (`SET o<HHMM> = 1`, so marking again changes nothing): one update per
    /// hour's item.
    pub async fn mark_observed(&self, from: i64, to: i64) -> Result<(), StoreError> {
        let mut hours: BTreeMap<(NaiveDate, u32), Vec<u32>> = BTreeMap::new();
        for minute in from..=to {
            let start = minute_start(minute);
            hours.entry((start.date_naive(), start.hour())).or_default().push(start.hour() * 60 + start.minute());
        }
        for ((day, hour), minutes) in hours {
            for chunk in minutes.chunks(ADDS_PER_UPDATE) {
                let mut update = self
                    .client
                    .update_item()
                    .table_name(&self.metrics_table)
                    .key(keys::PK, AttributeValue::S(keys::capacity_pk(day)))
                    .key(keys::SK, AttributeValue::S(keys::capacity_observed_sk(hour)))
                    .expression_attribute_values(":one", AttributeValue::N("1".into()));
                let mut sets = Vec::with_capacity(chunk.len());
                for (i, minute) in chunk.iter().enumerate() {
                    sets.push(format!("#o{i} = :one"));
                    update = update
                        .expression_attribute_names(format!("#o{i}"), keys::capacity_minute_attribute('o', *minute));
                }
                update.update_expression(format!("SET {}", sets.join(", "))).send().await?;
            }
        }
        Ok(())
    }

    /// Records that a stream consumer was `behind_ms` behind the stream in
    /// the minute of `at`, unless one recorded more there already: every
    /// consumer writes its own, and the minute keeps the most.
    pub async fn record_behind(&self, at: DateTime<Utc>, behind_ms: u64) -> Result<(), StoreError> {
        let minute = at.hour() * 60 + at.minute();
        let update = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(keys::capacity_pk(at.date_naive())))
            .key(keys::SK, AttributeValue::S(keys::capacity_observed_sk(at.hour())))
            .update_expression("SET #b = :ms")
            .condition_expression("attribute_not_exists(#b) OR NOT attribute_type(#b, :number) OR #b < :ms")
            .expression_attribute_names("#b", keys::capacity_minute_attribute('b', minute))
            .expression_attribute_values(":ms", AttributeValue::N(behind_ms.to_string()))
            .expression_attribute_values(":number", AttributeValue::S("N".into()))
            .send()
            .await;
        unless_condition_failed(update).map(|_| ())
    }

    /// Writes to each GSI2 shard per minute of `day`: the 24 hourly heat
    /// items in one BatchGetItem.
    pub async fn heat_day(&self, day: NaiveDate) -> Result<HeatDay, StoreError> {
        let keys = (0..24).map(|hour| super::key_item(keys::heat_key(day, hour))).collect();
        let request = KeysAndAttributes::builder().set_keys(Some(keys)).build()?;
        let days = [day];
        let (items, recorded) =
            futures::try_join!(self.batch_get(&self.metrics_table, request), self.day_shards(&days))?;
        let mut writes: HashMap<(usize, u32), u64> = HashMap::new();
        for item in &items {
            let hour = item.get(keys::PK).and_then(|v| v.as_s().ok()).and_then(|pk| pk.rsplit('#').next());
            let Some(hour) = hour.and_then(|h| h.parse::<usize>().ok()).filter(|h| *h < 24) else { continue };
            for (name, value) in item {
                let Some((minute, shard)) = keys::parse_heat_attribute(name) else { continue };
                let n = value.as_n().ok().and_then(|n| n.parse::<i64>().ok()).unwrap_or(0).max(0) as u64;
                writes.insert((hour * 60 + minute as usize, shard), n);
            }
        }
        let seen = writes.keys().map(|(_, shard)| shard + 1).max().unwrap_or(0);
        let shards = recorded[0].max(seen);
        let mut grid = vec![vec![0; shards as usize]; MINUTES];
        for ((minute, shard), n) in writes {
            grid[minute][shard as usize] = n;
        }
        Ok(HeatDay { date: day, shards, writes: grid })
    }
}

/// One persisted capacity item into the day's figures.
fn add_item(capacity: &mut CapacityDay, item: &Item) {
    let Some(sk) = item.get(keys::SK).and_then(|v| v.as_s().ok()) else { return };
    match keys::parse_capacity_sk(sk) {
        Some(CapacitySk::Units { resource }) => {
            let Some(resource) = Resource::parse(resource) else { return };
            for name in item.keys() {
                let (series, minute) = match keys::parse_minute_attribute(name) {
                    Some(('r', minute)) => (capacity.units.entry((resource.clone(), ReadWrite::Read)), minute),
                    Some(('w', minute)) => (capacity.units.entry((resource.clone(), ReadWrite::Write)), minute),
                    Some(('x', minute)) => {
                        let series =
                            capacity.transactional.entry(resource.clone()).or_insert_with(|| vec![0.0; MINUTES]);
                        series[minute as usize] += float(item, name);
                        continue;
                    }
                    _ => continue,
                };
                series.or_insert_with(|| vec![0.0; MINUTES])[minute as usize] += float(item, name);
            }
        }
        Some(CapacitySk::Stream { resource }) => {
            let Some(resource) = Resource::parse(resource) else { return };
            for name in item.keys() {
                if let Some(('w', minute)) = keys::parse_minute_attribute(name) {
                    let series = capacity.stream.entry(resource.clone()).or_insert_with(|| vec![0.0; MINUTES]);
                    series[minute as usize] += float(item, name);
                }
            }
        }
        Some(CapacitySk::Hot { minute }) => {
            let mut keys: Vec<(String, String, u64)> = item
                .iter()
                .filter_map(|(name, value)| {
                    let (resource, key) = keys::parse_hot_key_attribute(name)?;
                    let units = value.as_n().ok()?.parse::<f64>().ok()?.max(0.0) as u64;
                    Some((resource.to_string(), key.to_string(), units))
                })
                .collect();
            keys.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
            capacity.hot.insert(minute as u16, keys);
        }
        Some(CapacitySk::Observed) => {
            if capacity.observed.is_empty() {
                capacity.observed = vec![false; MINUTES];
            }
            for name in item.keys() {
                match keys::parse_minute_attribute(name) {
                    Some(('o', minute)) => capacity.observed[minute as usize] = true,
                    Some(('b', minute)) => {
                        if let Some(ms) = item[name].as_n().ok().and_then(|n| n.parse::<u64>().ok()) {
                            capacity.behind_ms.insert(minute as u16, ms);
                        }
                    }
                    _ => {}
                }
            }
        }
        Some(CapacitySk::Throttles { reason, resource }) => {
            let key = (reason.to_string(), resource.to_string());
            for name in item.keys() {
                if let Some(('t', minute)) = keys::parse_minute_attribute(name) {
                    let n = float(item, name).max(0.0) as u64;
                    capacity.throttles.entry(key.clone()).or_insert_with(|| vec![0; MINUTES])[minute as usize] += n;
                }
            }
        }
        None => {}
    }
}

/// The epoch minute a day's minute is (for tests and tools that write
/// known traces).
pub fn day_minute(day: NaiveDate, minute_of_day: u32) -> i64 {
    epoch_minute(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()) + i64::from(minute_of_day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::error::Throttle;

    #[test]
    fn a_flush_is_one_add_per_item_and_carries_its_minutes() {
        let usage = Usage::default();
        let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
        let gsi2 = Resource::index("orders", "GSI2");
        usage.consumed(at("2026-11-29T10:15:30Z"), &gsi2, ReadWrite::Write, 1.5);
        usage.consumed(at("2026-11-29T10:16:30Z"), &gsi2, ReadWrite::Write, 2.0);
        usage.consumed(at("2026-11-29T23:59:59Z"), &gsi2, ReadWrite::Read, 0.5);
        usage.consumed(at("2026-11-30T00:00:00Z"), &gsi2, ReadWrite::Read, 0.5);
        usage.throttled(
            at("2026-11-29T10:15:31Z"),
            &Throttle { reason: "ThrottlingException".into(), resource: "table/orders".into() },
        );
        let minutes = usage.take_minutes();
        let writes = writes(&minutes);
        type Summary = (String, String, Vec<(String, String)>);
        let summary: Vec<Summary> = writes.iter().map(|w| (w.pk.clone(), w.sk.clone(), w.adds.clone())).collect();
        let pair = |a: &str, v: &str| (a.to_string(), v.to_string());
        assert_eq!(
            summary,
            vec![
                (
                    "CAPACITY#2026-11-29".into(),
                    "THROTTLES#ThrottlingException#table/orders".into(),
                    vec![pair("t1015", "1")]
                ),
                (
                    "CAPACITY#2026-11-29".into(),
                    "UNITS#orders/GSI2".into(),
                    vec![pair("w1015", "1.5"), pair("w1016", "2"), pair("r2359", "0.5")]
                ),
                ("CAPACITY#2026-11-30".into(), "UNITS#orders/GSI2".into(), vec![pair("r0000", "0.5")]),
            ]
        );
        // What the writes carry is exactly what was taken.
        let mut carried: BTreeMap<i64, Tally> = BTreeMap::new();
        for write in &writes {
            for (minute, tally) in &write.carries {
                carried.entry(*minute).or_default().merge(tally);
            }
        }
        assert_eq!(carried, minutes);
    }

    #[test]
    fn persisted_items_read_back_per_minute() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let mut capacity = CapacityDay::empty(day);
        let n = |v: &str| AttributeValue::N(v.into());
        let item: Item = HashMap::from([
            (keys::SK.to_string(), AttributeValue::S("UNITS#orders/GSI2".into())),
            ("w1015".to_string(), n("3.5")),
            ("r0000".to_string(), n("0.5")),
            ("junk".to_string(), n("9")),
        ]);
        add_item(&mut capacity, &item);
        assert_eq!(capacity.units[&(Resource::index("orders", "GSI2"), ReadWrite::Write)][615], 3.5);
        assert_eq!(capacity.units[&(Resource::index("orders", "GSI2"), ReadWrite::Read)][0], 0.5);
        let throttles: Item = HashMap::from([
            (keys::SK.to_string(), AttributeValue::S("THROTTLES#ThrottlingException#table/orders".into())),
            ("t1015".to_string(), n("2")),
        ]);
        add_item(&mut capacity, &throttles);
        assert_eq!(capacity.throttles[&("ThrottlingException".into(), "table/orders".into())][615], 2);
        assert_eq!(day_minute(day, 615), epoch_minute("2026-11-29T10:15:00Z".parse().unwrap()));
    }
}

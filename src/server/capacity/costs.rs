//! What the program's writes cost at a sale's peak, worked out from the
//! definitions the program writes with, never from copies of them:
//!
//! - an order's writes: its item as `store::order_item` builds it (padded to
//!   the plan's size), created PENDING and moved out of it, priced by the
//!   stream's rules (`stream::pricing`) over the orders table's indexes as
//!   provisioned (`store::order_indexes`); through the console each change is
//!   a transaction (billed twice) with the audit records `store::audit_items`
//!   builds;
//! - the counters: the items the consumer's counting code (`Deltas::record`)
//!   writes in the sale's busiest hour, through a stream shard's sub-item
//!   (`Deltas::through_sub`, `keys::COUNTER_SUBS`), each sized by the same
//!   billing rule, at the commits the template's batching makes.
//!
//! The layouts are values (`Definitions`), so a test can hand in another
//! (a projection, a sub-item count) and see every figure move with it.

use crate::model::{AuditEntry, LineItem, Order, SignIn, Status, Writer};
use crate::server::deploy::template::{CONSUMER_BATCH_SIZE, CONSUMER_BATCH_WINDOW_SECONDS, TUMBLING_WINDOW_SECONDS};
use crate::server::rules::PARTITION_WRITE_UNITS;
use crate::server::rules::units::{self, WRITE_UNIT_BYTES, item_to_json};
use crate::server::store::deltas::Key;
use crate::server::store::{Item, audit_items, keys, order_item};
use crate::server::stream::counters::{Change, Deltas, Image};
use crate::server::stream::pricing::{Layout, Write, stream_item};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, DurationRound, NaiveDate, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// What the checks cost the program's writes by.
#[derive(Clone, Debug, PartialEq)]
pub struct Definitions {
    /// The orders table's key and indexes as provisioned.
    pub table: Layout,
    pub counters: CounterLayout,
}

impl Definitions {
    /// As this program writes.
    pub fn program() -> Self {
        Self { table: Layout::orders(), counters: CounterLayout::program() }
    }
}

/// How the consumer writes the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterLayout {
    /// Sub-items each live counter item is written through: a stream
    /// shard's commits go to one (`keys::counter_sub_for`).
    pub subs: u32,
    /// The event source mapping's batch (records) and batching window.
    pub batch_size: u32,
    pub batch_window_seconds: u32,
    /// The observations (shard heat) are carried this long, then written
    /// once by the call that closes the window; 0: with every commit.
    pub tumbling_window_seconds: u32,
}

impl CounterLayout {
    /// The template's consumer (the Lambda form) and the key design's
    /// sub-items.
    pub fn program() -> Self {
        Self {
            subs: keys::COUNTER_SUBS,
            batch_size: CONSUMER_BATCH_SIZE,
            batch_window_seconds: CONSUMER_BATCH_WINDOW_SECONDS,
            tumbling_window_seconds: TUMBLING_WINDOW_SECONDS,
        }
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot cost {what}: {why}")]
pub struct CostError {
    what: &'static str,
    why: String,
}

fn cost_error(what: &'static str) -> impl Fn(String) -> CostError {
    move |why| CostError { what, why }
}

/// Write units one table or index takes per order.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceWrites {
    /// `table`, an index's name, or `metrics table`.
    pub resource: String,
    pub units_per_order: f64,
    /// The arithmetic.
    pub why: String,
    /// Where it came from (`COMPUTED`, or the days it was measured on).
    pub source: String,
}

/// The source of a figure worked out from the program's definitions.
pub const COMPUTED: &str = "assumed: computed from the key design (the order item as written, the indexes as \
                            provisioned)";

/// What one order costs as `writer` writes it: created PENDING, then moved
/// out of PENDING (two changes).
#[derive(Clone, Debug, PartialEq)]
pub struct OrderWrites {
    pub writer: Writer,
    /// Bytes of the order's item as written, and of its GSI2 entry.
    pub item_bytes: u64,
    pub resources: Vec<ResourceWrites>,
}

impl OrderWrites {
    pub fn units_on(&self, resource: &str) -> f64 {
        self.resources.iter().find(|r| r.resource == resource).map_or(0.0, |r| r.units_per_order)
    }
}

/// Changes an order makes during a sale: its creation, and its move out of
/// PENDING. Each is one stream record.
pub const CHANGES_PER_ORDER: f64 = 2.0;

/// An order as the app writes one, for sizing: a generated 32-character id,
/// four items, a mid-length city.
pub fn typical_order() -> Order {
    let at = DateTime::parse_from_rfc3339("2026-11-29T08:15:42.123Z").expect("a valid time").with_timezone(&Utc);
    let item = |sku: &str, quantity| LineItem { sku: sku.into(), name: sku.into(), quantity, unit_price: 4675 };
    Order {
        order_id: "3f2b8c1e9a7d4e6f8b0c2d4e6f8a0b1c".into(),
        customer_id: Some("cust-00042".into()),
        status: Some(Status::Pending.into()),
        created_at: Some(at),
        updated_at: Some(at),
        total: Some(18700),
        currency: Some("USD".into()),
        items: Some(vec![item("TENT-2P", 2), item("LAMP-HD", 2)]),
        shipping_city: Some("Vancouver".into()),
        shipping_country: Some("CA".into()),
        problems: Vec::new(),
    }
}

/// The size of an item as DynamoDB bills a write of it.
pub fn item_bytes(item: &Item) -> Result<u64, String> {
    units::item_size(&item_to_json(item)).map_err(|e| e.0)
}

fn write_units(bytes: u64) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// The typical order with its first line item's name lengthened until its
/// item, as `order_item` writes it, is at least `bytes` (the plan's order
/// size): line items are in the table and GSI1 (ALL), not in GSI2's entry.
pub fn order_of_size(bytes: u32, shards: u32) -> Result<Order, CostError> {
    let error = cost_error("the plan's order");
    let mut order = typical_order();
    let size =
        |order: &Order| item_bytes(&order_item(order, shards).map_err(|e| error(e.to_string()))?).map_err(&error);
    let short = u64::from(bytes).saturating_sub(size(&order)?);
    if let Some(first) = order.items.as_mut().and_then(|items| items.first_mut()) {
        first.name.push_str(&"x".repeat(short as usize));
    }
    Ok(order)
}

/// What one order costs each table and index as `writer` writes it.
pub fn order_writes(layout: &Layout, writer: Writer, order: &Order, shards: u32) -> Result<OrderWrites, CostError> {
    let error = cost_error("an order's writes");
    let created = order_item(order, shards).map_err(|e| error(e.to_string()))?;
    let at = order.created_at.ok_or_else(|| error("no creation time".into()))?;
    let moved_order =
        Order { status: Some(Status::Confirmed.into()), updated_at: Some(at + Duration::seconds(30)), ..order.clone() };
    let moved = order_item(&moved_order, shards).map_err(|e| error(e.to_string()))?;
    let (created, moved) = (stream_item(&created), stream_item(&moved));
    let writes: Vec<Write> = [layout.price(None, Some(&created)), layout.price(Some(&created), Some(&moved))].concat();
    let transactional = writer == Writer::Console;
    let factor = if transactional { 2.0 } else { 1.0 };
    let how = if transactional { " × 2 (transactions)" } else { " (plain writes)" };
    let mut resources = Vec::new();
    let mut priced = |resource: &str, index: Option<&str>| {
        let units: Vec<u32> = writes.iter().filter(|w| w.index.as_deref() == index).map(|w| w.units).collect();
        let sum: u32 = units.iter().sum();
        let parts: Vec<String> = units.iter().map(u32::to_string).collect();
        resources.push(ResourceWrites {
            resource: resource.into(),
            units_per_order: f64::from(sum) * factor,
            why: format!(
                "{} WCU over the order's {} write{} (created, moved out of PENDING){how}",
                if parts.is_empty() { "0".into() } else { parts.join(" + ") },
                units.len(),
                if units.len() == 1 { "" } else { "s" },
            ),
            source: COMPUTED.into(),
        });
    };
    priced("table", None);
    for index in &layout.indexes {
        priced(&index.name, Some(index.name.as_str()));
    }
    resources.push(audit_writes(writer, order, at)?);
    let item_bytes = item_bytes(&order_item(order, shards).map_err(|e| error(e.to_string()))?).map_err(&error)?;
    Ok(OrderWrites { writer, item_bytes, resources })
}

/// The audit records an order's two changes write on the metrics table:
/// none from another service; through the console, each change's records
/// (`audit_items`) in its transaction.
fn audit_writes(writer: Writer, order: &Order, at: DateTime<Utc>) -> Result<ResourceWrites, CostError> {
    let resource = "metrics table".to_string();
    if writer == Writer::Service {
        return Ok(ResourceWrites {
            resource,
            units_per_order: 0.0,
            why: "no audit records (another writer)".into(),
            source: COMPUTED.into(),
        });
    }
    let error = cost_error("an order's audit records");
    let entry = AuditEntry {
        at,
        order_id: order.order_id.clone(),
        actor: "checkout-service".into(),
        method: SignIn::Token,
        from: Some(Status::Pending),
        to: Status::Confirmed,
        reason: None,
        bulk_id: None,
    };
    let records = audit_items(&entry, "0123456789abcdef0123456789abcdef").map_err(|e| error(e.to_string()))?;
    let bytes = records.iter().map(item_bytes).collect::<Result<Vec<u64>, String>>().map_err(&error)?;
    let per_change: f64 = bytes.iter().map(|b| write_units(*b)).sum();
    let largest = bytes.iter().max().copied().unwrap_or(0);
    Ok(ResourceWrites {
        resource,
        units_per_order: CHANGES_PER_ORDER * per_change * 2.0,
        why: format!(
            "{} changes × {} audit records ({largest} B at most: {} WCU together) × 2 (transactions)",
            CHANGES_PER_ORDER,
            records.len(),
            per_change
        ),
        source: COMPUTED.into(),
    })
}

/// The stream's pricing of recent days: the orders table's records and the
/// write units they took on the table and each index (`table`, `GSI1`, ...),
/// every writer's (the stream cannot tell writers apart).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeasuredWrites {
    /// The days that had records, first to last.
    pub days: Vec<NaiveDate>,
    pub records: u64,
    pub units: BTreeMap<String, u64>,
}

/// The fewest records a per-order figure is measured from: fewer, and the
/// computed one stands.
pub const MIN_MEASURED_RECORDS: u64 = 1000;

/// `writes` with each table's and index's figure measured where the stream
/// priced enough records: the units a record took × the records an order
/// makes, doubled for the console's transactions (the stream prices each
/// record once). The metrics table's audit records are in no stream: they
/// stay computed. Each figure says which it is.
pub fn with_measured(mut writes: OrderWrites, measured: Option<&MeasuredWrites>) -> OrderWrites {
    let factor = if writes.writer == Writer::Console { 2.0 } else { 1.0 };
    let Some(measured) = measured.filter(|m| m.records >= MIN_MEASURED_RECORDS) else {
        let records = measured.map_or(0, |m| m.records);
        for r in writes.resources.iter_mut().filter(|r| r.resource != "metrics table") {
            r.source = format!(
                "{COMPUTED}; not measured: the stream priced {records} records in the days read (at least \
                 {MIN_MEASURED_RECORDS} wanted)"
            );
        }
        return writes;
    };
    let days = match (measured.days.first(), measured.days.last()) {
        (Some(first), Some(last)) if first != last => format!("{first} to {last}"),
        (Some(day), _) => day.to_string(),
        _ => "no day".into(),
    };
    for r in writes.resources.iter_mut() {
        let Some(units) = measured.units.get(&r.resource) else { continue };
        let per_record = *units as f64 / measured.records as f64;
        r.units_per_order = per_record * CHANGES_PER_ORDER * factor;
        r.why = format!(
            "{units} WCU over {} records: {} a record × {CHANGES_PER_ORDER} records an order{}",
            measured.records,
            fmt(per_record),
            if factor > 1.0 { " × 2 (transactions)" } else { "" }
        );
        r.source = format!("measured: the stream's pricing of every writer's records on {days}");
    }
    writes
}

/// The size of one GSI2 entry of a PENDING `order`, as `layout` projects it.
pub fn index_entry_bytes(layout: &Layout, index: &str, order: &Order, shards: u32) -> Result<u64, CostError> {
    let error = cost_error("an index entry");
    let item = stream_item(&order_item(order, shards).map_err(|e| error(e.to_string()))?);
    let index = layout.indexes.iter().find(|i| i.name == index).ok_or_else(|| error(format!("no index {index}")))?;
    if !index.contains(&item) {
        return Err(error(format!("order {} is not in {}", order.order_id, index.name)));
    }
    index.entry_size(&layout.key, &item).map_err(|e| error(e.0))
}

/// The stream's shards at a peak: at least those known now, and at least
/// one per partition's 1,000 write units a second on the table (DynamoDB
/// keeps a stream shard per table partition).
pub fn stream_shards(table_units_per_second: f64, known: Option<u32>) -> u32 {
    let by_partitions = (table_units_per_second / PARTITION_WRITE_UNITS).ceil().max(1.0) as u32;
    by_partitions.max(known.unwrap_or(1))
}

/// What the consumer's counter writes take at a sale's peak.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterLoad {
    pub stream_shards: u32,
    pub records_per_second: f64,
    /// Commits a second each stream shard makes (one per batch).
    pub commits_per_shard_second: f64,
    /// Stream shards whose commits share one sub-item.
    pub shards_per_sub: u32,
    /// The largest sub-item at the end of the busiest hour, and its bytes.
    pub largest_sub_item: String,
    pub largest_sub_item_bytes: u64,
    /// Write units a second on the busiest sub-item.
    pub sub_item_units_per_second: f64,
    /// Each counter partition (key) and its write units a second, busiest
    /// first: every sub-item of an item shares its partition key.
    pub partitions: Vec<(String, f64)>,
    /// All the counter writes on the metrics table, units a second.
    pub metrics_units_per_second: f64,
    /// The arithmetic.
    pub steps: Vec<String>,
}

impl CounterLoad {
    pub fn busiest(&self) -> (&str, f64) {
        self.partitions.first().map_or(("none", 0.0), |(pk, units)| (pk.as_str(), *units))
    }
}

/// The counter items one stream shard's records write in the hour of `at`
/// (an order created and one moved out of PENDING each minute, orders on
/// every GSI2 shard), and the attributes each holds by the hour's end: the
/// consumer's counting code (`Deltas::record`), through one sub-item.
fn counter_items(at: DateTime<Utc>, gsi2_shards: u32) -> BTreeMap<Key, BTreeSet<String>> {
    let hour = at.duration_trunc(Duration::hours(1)).unwrap_or(at);
    let day = hour.date_naive();
    let image = |id: String, status: &str, created_at, pending| Image {
        order_id: id,
        status: status.into(),
        created_at,
        pending,
        row: None,
    };
    let mut written: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    for minute in 0..60 {
        let now = hour + Duration::minutes(minute);
        let mut changes = Vec::new();
        for shard in 0..gsi2_shards.max(1) {
            let id = format!("o-{minute}-{shard}");
            changes.push(Change { old: None, new: Some(image(id, "PENDING", now, Some((day, shard)))), at: now });
        }
        let left = image(format!("o-{minute}-0"), "PENDING", now, Some((day, 0)));
        let confirmed = Image { status: "CONFIRMED".into(), pending: None, ..left.clone() };
        changes.push(Change { old: Some(left), new: Some(confirmed), at: now + Duration::seconds(30) });
        for change in changes {
            let mut deltas = Deltas::default();
            deltas.record(&change);
            for (key, attributes) in deltas.through_sub(0).items() {
                written.entry(key.clone()).or_default().extend(attributes.into_iter().map(|(a, _)| a.clone()));
            }
        }
    }
    written
}

/// The bytes of a counter item holding `attributes`, each a count of
/// `count` (its digits are what a number is billed by).
fn counter_item_bytes((pk, sk): &Key, attributes: &BTreeSet<String>, count: u64) -> Result<u64, String> {
    let mut item: Item = attributes.iter().map(|a| (a.clone(), AttributeValue::N(count.to_string()))).collect();
    item.insert(keys::PK.into(), AttributeValue::S(pk.clone()));
    item.insert(keys::SK.into(), AttributeValue::S(sk.clone()));
    item_bytes(&item)
}

/// The counter writes at `records_per_second` over `stream_shards`, in the
/// hour of `at`, with `gsi2_shards` write shards, as `layout` writes them.
pub fn counter_load(
    layout: &CounterLayout,
    at: DateTime<Utc>,
    records_per_second: f64,
    stream_shards: u32,
    gsi2_shards: u32,
) -> Result<CounterLoad, CostError> {
    let error = cost_error("the counters");
    let stream_shards = stream_shards.max(1);
    let per_shard = records_per_second / f64::from(stream_shards);
    let batch = f64::from(layout.batch_size.max(1));
    let window = f64::from(layout.batch_window_seconds.max(1));
    // A batch is sent when full or when the window ends, and never holds
    // less than one record.
    let commits = (per_shard / batch).max(1.0 / window).min(per_shard);
    let shards_per_sub = stream_shards.div_ceil(layout.subs.max(1));
    // The counts an item holds by the hour's end: the hour's orders of a
    // shard (their digits are billed).
    let count = (per_shard * 3600.0 / CHANGES_PER_ORDER).ceil().max(1.0) as u64;
    let items = counter_items(at, gsi2_shards);
    let mut steps = vec![
        format!(
            "{} records/s over {stream_shards} stream shards: {} a shard; batches of up to {} records, \
             a {}-s window: {} commits a second a shard",
            fmt(records_per_second),
            fmt(per_shard),
            layout.batch_size,
            layout.batch_window_seconds,
            fmt(commits)
        ),
        format!(
            "{stream_shards} stream shards over {} sub-items an item: up to {shards_per_sub} shards' commits \
             on one sub-item",
            layout.subs
        ),
    ];
    let mut partitions: BTreeMap<String, f64> = BTreeMap::new();
    let (mut largest, mut largest_bytes, mut sub_units) = (String::new(), 0, 0.0);
    for (key, attributes) in &items {
        let bytes = counter_item_bytes(key, attributes, count).map_err(&error)?;
        // Each write is an update in a transaction (with the shard's
        // checkpoint, or the window's marker): billed twice.
        let units = 2.0 * write_units(bytes);
        let observation = keys::is_observation(key);
        let rate = if observation && layout.tumbling_window_seconds > 0 {
            f64::from(stream_shards) / f64::from(layout.tumbling_window_seconds) * units
        } else {
            f64::from(stream_shards) * commits * units
        };
        *partitions.entry(key.0.clone()).or_default() += rate;
        steps.push(format!(
            "{} {}: {} attributes, {bytes} B: {} WCU an update{} → {} WCU/s",
            key.0,
            key.1,
            attributes.len(),
            fmt(units),
            if observation && layout.tumbling_window_seconds > 0 {
                format!(", once a {}-s window a shard", layout.tumbling_window_seconds)
            } else {
                ", every commit".into()
            },
            fmt(rate)
        ));
        if keys::is_counter_sub_sk(&key.1) && bytes > largest_bytes {
            (largest, largest_bytes) = (format!("{} {}", key.0, key.1), bytes);
            sub_units = f64::from(shards_per_sub) * commits * units;
        }
    }
    // The shard's checkpoint, moved by every commit: a small item.
    let checkpoint = f64::from(stream_shards) * commits * 2.0;
    let metrics_units_per_second = partitions.values().sum::<f64>() + checkpoint;
    steps.push(format!(
        "checkpoints: {} WCU/s; all counter writes {} WCU/s",
        fmt(checkpoint),
        fmt(metrics_units_per_second)
    ));
    let mut partitions: Vec<(String, f64)> = partitions.into_iter().collect();
    partitions.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(CounterLoad {
        stream_shards,
        records_per_second,
        commits_per_shard_second: commits,
        shards_per_sub,
        largest_sub_item: largest,
        largest_sub_item_bytes: largest_bytes,
        sub_item_units_per_second: sub_units,
        partitions,
        metrics_units_per_second,
        steps,
    })
}

fn fmt(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { format!("{value:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::rules::layout::Projection;

    fn at() -> DateTime<Utc> {
        "2026-11-27T09:30:00Z".parse().unwrap()
    }

    #[test]
    fn the_order_item_is_padded_to_the_plans_size() {
        let order = order_of_size(2000, 10).unwrap();
        let bytes = item_bytes(&order_item(&order, 10).unwrap()).unwrap();
        assert_eq!(bytes, 2000);
        // Smaller than the typical order: the typical one.
        assert_eq!(order_of_size(10, 10).unwrap(), typical_order());
    }

    #[test]
    fn another_writer_pays_plain_writes_and_no_audit() {
        let order = order_of_size(700, 10).unwrap();
        let layout = Layout::orders();
        let service = order_writes(&layout, Writer::Service, &order, 10).unwrap();
        // Created (put: 1 WCU) and moved (update of a 700-B item: 1 WCU).
        assert_eq!(service.units_on("table"), 2.0);
        // GSI1 projects ALL: the put, and the status change in place.
        assert_eq!(service.units_on("GSI1"), 2.0);
        // GSI2: the entry put on creation, deleted on the move.
        assert_eq!(service.units_on("GSI2"), 2.0);
        assert_eq!(service.units_on("metrics table"), 0.0);
        let console = order_writes(&layout, Writer::Console, &order, 10).unwrap();
        assert_eq!(console.units_on("table"), 4.0);
        assert_eq!(console.units_on("GSI2"), 4.0);
        // 2 changes × 3 audit records of 1 WCU × 2.
        assert_eq!(console.units_on("metrics table"), 12.0, "{:?}", console.resources);
    }

    #[test]
    fn the_costs_follow_the_index_projections_as_provisioned() {
        let order = order_of_size(3000, 10).unwrap();
        let mut layout = Layout::orders();
        let all = order_writes(&layout, Writer::Service, &order, 10).unwrap();
        // GSI1 projects ALL: 3 KB entries, 3 WCU each write.
        assert_eq!(all.units_on("GSI1"), 6.0);
        layout.indexes.iter_mut().find(|i| i.name == "GSI1").unwrap().projection = Projection::KeysOnly;
        let keys_only = order_writes(&layout, Writer::Service, &order, 10).unwrap();
        // Keys only: 1 WCU for the put, and no write when only the status changes.
        assert_eq!(keys_only.units_on("GSI1"), 1.0);
        let gsi2 = |layout: &Layout| index_entry_bytes(layout, "GSI2", &order, 10).unwrap();
        let before = gsi2(&layout);
        layout.indexes.iter_mut().find(|i| i.name == "GSI2").unwrap().projection = Projection::All;
        assert!(gsi2(&layout) >= 3000 && before < 400, "{before} → {}", gsi2(&layout));
    }

    #[test]
    fn the_streams_pricing_measures_a_writers_orders_when_it_saw_enough() {
        let order = order_of_size(700, 10).unwrap();
        let computed = order_writes(&Layout::orders(), Writer::Service, &order, 10).unwrap();
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        // Another service writes larger items than the typical order: 3 WCU
        // a record on the table and GSI1, 1 on GSI2.
        let measured = MeasuredWrites {
            days: vec![day(20), day(26)],
            records: 10_000,
            units: BTreeMap::from([("table".into(), 30_000), ("GSI1".into(), 30_000), ("GSI2".into(), 10_000)]),
        };
        let service = with_measured(computed.clone(), Some(&measured));
        assert_eq!((service.units_on("table"), service.units_on("GSI2")), (6.0, 2.0));
        let table = service.resources.iter().find(|r| r.resource == "table").unwrap();
        assert!(
            table.source.starts_with("measured") && table.source.ends_with("2026-11-20 to 2026-11-26"),
            "{table:?}"
        );
        let audit = service.resources.iter().find(|r| r.resource == "metrics table").unwrap();
        assert_eq!(audit.source, COMPUTED, "no stream sees the audit records");
        // Through the console: the same records, in transactions.
        let console = order_writes(&Layout::orders(), Writer::Console, &order, 10).unwrap();
        assert_eq!(with_measured(console, Some(&measured)).units_on("table"), 12.0);
        // Too few records: the computed figure, saying why.
        let few = MeasuredWrites { records: 10, ..measured };
        let assumed = with_measured(computed.clone(), Some(&few));
        assert_eq!(assumed.units_on("table"), computed.units_on("table"));
        let table = assumed.resources.iter().find(|r| r.resource == "table").unwrap();
        assert!(table.source.starts_with("assumed") && table.source.contains("10 records"), "{table:?}");
    }

    #[test]
    fn the_counter_items_are_the_consumers_hourly_sub_items() {
        let items = counter_items(at(), 12);
        let minutes = items.iter().find(|(k, _)| k.0.starts_with("METRIC#MINUTES#")).unwrap();
        // The hour's item through a sub-item: 60 minutes × created, entered, left.
        assert!(keys::is_counter_sub_sk(&minutes.0.1), "{:?}", minutes.0);
        assert_eq!(minutes.1.len(), 180);
        // The heat: a minute per GSI2 shard, not through sub-items.
        let heat = items.iter().find(|(k, _)| keys::is_observation(k)).unwrap();
        assert_eq!(heat.1.len(), 60 * 12);
        let load = counter_load(&CounterLayout::program(), at(), 4000.0, 4, 12).unwrap();
        // About 1.5 KB: 2 WCU an update, 4 in a transaction.
        assert!((1200..2048).contains(&load.largest_sub_item_bytes), "{load:#?}");
        assert_eq!(load.commits_per_shard_second, 1.0);
    }

    #[test]
    fn the_sub_item_count_changes_the_figures() {
        let program = CounterLayout::program();
        let load = counter_load(&program, at(), 40_000.0, 40, 60).unwrap();
        let fewer = counter_load(&CounterLayout { subs: 4, ..program }, at(), 40_000.0, 40, 60).unwrap();
        assert_eq!((load.shards_per_sub, fewer.shards_per_sub), (40u32.div_ceil(keys::COUNTER_SUBS), 10));
        assert!(fewer.sub_item_units_per_second > load.sub_item_units_per_second);
        // A larger batch window: fewer commits, less on every item.
        let slower = counter_load(&CounterLayout { batch_window_seconds: 5, ..program }, at(), 400.0, 4, 2).unwrap();
        let quick = counter_load(&program, at(), 400.0, 4, 2).unwrap();
        assert!(slower.busiest().1 < quick.busiest().1, "{slower:#?} {quick:#?}");
    }
}

//! The key schema. Every `ORDER#`, `CUSTOMER#`, `STATUS#` and `METRIC#` string
//! is built and parsed here and nowhere else.
//!
//! - orders table: `PK` = `ORDER#<orderId>`
//! - GSI1, a customer's history: `GSI1PK` = `CUSTOMER#<customerId>`,
//!   `GSI1SK` = `<createdAt>#<orderId>`
//! - GSI2, operations, sparse and write-sharded:
//!   `GSI2PK` = `STATUS#PENDING#<yyyy-mm-dd>#<shard>`, `GSI2SK` = `<createdAt>#<orderId>`
//! - metrics table (`PK`, `SK`): the shard count used for each day, the
//!   stream's counters, the consumer's checkpoints, the consumed capacity
//!   and throttles per minute, the GSI2 shard heat.
//!
//! Attribute names that expressions name (`attr`) live here too, so that a
//! rename is one edit.

use crate::model::iso_millis;
use chrono::{DateTime, NaiveDate, Utc};

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1: &str = "GSI1";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
pub const GSI2: &str = "GSI2";
pub const GSI2PK: &str = "GSI2PK";
pub const GSI2SK: &str = "GSI2SK";

/// The order attributes GSI2 projects besides the keys: what the PENDING list
/// shows (see `model::PendingOrder`), and nothing else.
pub const GSI2_PROJECTED: [&str; 8] =
    ["orderId", "customerId", "createdAt", "total", "currency", "itemCount", "shippingCity", "shippingCountry"];

/// The most write shards a day may have: readers fan out over every one, so
/// a corrupt shard-count item must not make them build millions of queries.
pub const MAX_SHARDS: u32 = 100;

/// Attribute names used in expressions, besides the keys.
pub mod attr {
    /// Order items.
    pub const STATUS: &str = "status";
    pub const UPDATED_AT: &str = "updatedAt";
    pub const ITEM_COUNT: &str = "itemCount";
    /// The shard-count item of a day.
    pub const SHARDS: &str = "shards";
    /// Counter items.
    pub const PENDING: &str = "pending";
    pub const CREATED: &str = "created";
    /// Counter items: repairs made by reconciliation, and its last verdict.
    pub const REPAIRS: &str = "repairs";
    pub const VERIFIED_AT: &str = "verifiedAt";
    pub const VERIFIED_DRIFT: &str = "verifiedDrift";
    pub const VERIFIED_REPAIRED: &str = "verifiedRepaired";
    pub const VERIFIED_BY: &str = "verifiedBy";
    /// Counter items: why the last reconciliation refused to judge them
    /// (`model::ReconcileRefusal` as JSON, with `reconcileRefusedAt`), until one judges them.
    pub const RECONCILE_REFUSED: &str = "reconcileRefused";
    pub const RECONCILE_REFUSED_AT: &str = "reconcileRefusedAt";
    /// A reconciliation's finding waiting for the next run to agree
    /// (`keys::reconcile_finding_key`): what it would change, with its anchor, as JSON.
    pub const FINDING: &str = "finding";
    /// The consumer registry: when a Lambda function last applied records
    /// guarded by per-record markers (no tumbling window).
    pub const MARKERS_AT: &str = "markersAt";
    /// A day's PENDING counter item: raised by every consumer transaction
    /// that changes any of the day's counters, so that every instance can
    /// see, with one small read, that something changed.
    pub const VERSION: &str = "version";
    /// Order attributes a reconciliation reads.
    pub const ORDER_ID: &str = "orderId";
    pub const CREATED_AT: &str = "createdAt";
    /// Checkpoint and lease items: the lease and the position reached.
    pub const OWNER: &str = "owner";
    pub const LEASE_UNTIL: &str = "leaseUntil";
    pub const SEQ: &str = "seq";
    pub const FINISHED: &str = "finished";
    /// An applied range (`applied_range_key`): its first and last records'
    /// sequence numbers (the key holds them padded, for order).
    pub const FIRST: &str = "first";
    pub const LAST: &str = "last";
    /// When records after the checkpoint were found trimmed, unread.
    pub const TRIMMED_AT: &str = "trimmedAt";
    /// Sessions: the record, and its expiry (the metrics table's TTL
    /// attribute, in seconds since the epoch).
    pub const RECORD: &str = "record";
    pub const EXPIRES_AT: &str = "expiresAt";
    /// Accounts and tokens (the serde names of `store::Account` and
    /// `store::Token`, for the updates that set one of them).
    pub const NAME: &str = "name";
    pub const ROLE: &str = "role";
    pub const SOURCE: &str = "source";
    pub const DISPLAY_NAME: &str = "displayName";
    pub const PASSWORD_HASH: &str = "passwordHash";
    pub const DISABLED: &str = "disabled";
    pub const REVOKED: &str = "revoked";
    /// The consumer registry: how an entry consumes, and when it was last
    /// seen doing so (milliseconds since the epoch).
    pub const MODE: &str = "mode";
    pub const SEEN_AT: &str = "seenAt";
    /// The recorded consumer mode (`consumer_mode_key`): who switched it
    /// and when (milliseconds since the epoch); its `version` is `VERSION`.
    pub const CHANGED_AT: &str = "changedAt";
    pub const CHANGED_BY: &str = "changedBy";
    /// Bulk operations: someone asked the run to stop.
    pub const CANCEL_REQUESTED: &str = "cancelRequested";
    /// A plan's rehearsals: the one running and since when (milliseconds
    /// since the epoch, what a second start is refused on), and the last
    /// two finished.
    pub const REHEARSAL_RUNNING: &str = "running";
    pub const REHEARSAL_SINCE: &str = "runningSince";
    pub const REHEARSAL_LATEST: &str = "latest";
    pub const REHEARSAL_PREVIOUS: &str = "previous";
    /// A plan's item: what its rehearsal measured of the stream consumer
    /// (`model::SalePlan::consumer_measured`'s serde name).
    pub const CONSUMER_MEASURED: &str = "consumerMeasured";
    /// Audit records: what a record records (`model::AuditKind`; none on
    /// order changes written before kinds existed), and the other serde
    /// names of `model::AuditEntry` and `model::SecurityEvent` as the
    /// tolerant reader (`store::audit`) reads them one by one.
    pub const KIND: &str = "kind";
    pub const AT: &str = "at";
    pub const ACTOR: &str = "actor";
    pub const METHOD: &str = "method";
    pub const CLIENT: &str = "client";
    pub const SUBJECT: &str = "subject";
    pub const REFUSED: &str = "refused";
    pub const DETAIL: &str = "detail";
    pub const FROM: &str = "from";
    pub const TO: &str = "to";
    pub const REASON: &str = "reason";
    pub const BULK_ID: &str = "bulkId";

    /// The other attributes of an order item (the serde names of
    /// `model::Order`, checked by a test), as the tolerant reader
    /// (`store::reading`) names them in what it could not read.
    pub const CUSTOMER_ID: &str = "customerId";
    pub const TOTAL: &str = "total";
    pub const CURRENCY: &str = "currency";
    pub const ITEMS: &str = "items";
    pub const SHIPPING_CITY: &str = "shippingCity";
    pub const SHIPPING_COUNTRY: &str = "shippingCountry";
    /// A line item's attributes (`model::LineItem`).
    pub const SKU: &str = "sku";
    pub const LINE_NAME: &str = "name";
    pub const QUANTITY: &str = "quantity";
    pub const UNIT_PRICE: &str = "unitPrice";
}

const ORDER: &str = "ORDER#";
const CUSTOMER: &str = "CUSTOMER#";
const PENDING: &str = "STATUS#PENDING#";
const SHARDS: &str = "SHARDS#";
const SHARDS_SK: &str = "CONFIG";
const METRIC_PENDING: &str = "METRIC#PENDING#";
const METRIC_DAY: &str = "METRIC#DAY#";
const METRIC_MINUTES: &str = "METRIC#MINUTES#";
const METRIC_SK: &str = "COUNT";
/// An hour's item of a day's minute counters (`metric_minutes_key`).
const METRIC_HOUR_SK: &str = "HOUR#";
const CHECKPOINT: &str = "CHECKPOINT#";
const SHARD: &str = "SHARD#";
const USERS: &str = "USERS";
const USER: &str = "USER#";
const TOKENS: &str = "TOKENS";
const TOKEN: &str = "TOKEN#";
const SESSION: &str = "SESSION#";
const SESSION_SK: &str = "SESSION";
const BULK: &str = "BULK#";
const BULK_SK: &str = "REPORT";
const AUDIT_ORDER: &str = "AUDIT#ORDER#";
const AUDIT_DAY: &str = "AUDIT#DAY#";
const AUDIT_ACTOR: &str = "AUDIT#ACTOR#";

/// Write shards of the audit trail's day and actor partitions: a flash sale
/// writes a record per change, more than one partition should take.
pub const AUDIT_SHARDS: u32 = 10;
const RECONCILE: &str = "RECONCILE#";
const READER_SK: &str = "READER";
const FINDING_SK: &str = "FINDING#";
const CAPACITY: &str = "CAPACITY#";
const CAPACITY_UNITS: &str = "UNITS#";
const CAPACITY_THROTTLES: &str = "THROTTLES#";
const CAPACITY_STREAM: &str = "STREAM#";
const CAPACITY_HOT: &str = "HOTKEYS#";
const CAPACITY_OBSERVED: &str = "OBSERVED#";
/// Separates a hot key attribute's resource from the key (`hot_key_attribute`).
const HOT_KEY_SEPARATOR: char = '|';
/// Longest partition key kept whole in a hot key attribute's name.
const HOT_KEY_MAX: usize = 200;
const HEAT: &str = "HEAT#";
const HEAT_SK: &str = "COUNT";
const APPLIED: &str = "APPLIED#";
const QUALITY: &str = "QUALITY#";
const QUALITY_HOUR: &str = "HOUR#";
const QUALITY_LARGEST: &str = "LARGEST#";
const QUALITY_SAMPLE: &str = "SAMPLE#";
const APPLIED_SK: &str = "RECORD";
const WINDOW: &str = "WINDOW#";
/// The applied ranges of a stream shard (`applied_range_key`).
const RANGES: &str = "RANGES#";
/// Sale plans: one partition, a plan per item (a handful, read whole).
const SALES: &str = "SALES";
const SALE_PLAN: &str = "PLAN#";
/// A plan's rehearsals, beside it in the plans' partition.
const SALE_REHEARSAL: &str = "REHEARSAL#";
/// The consumer registry: one partition, an item per consumer.
const CONSUMERS: &str = "CONSUMERS";

mod access;
pub use access::{
    AUDIT_PARTITIONS, CREDENTIAL_PARTITIONS, METRICS_ACCESS, METRICS_PARTITIONS, MetricsAccess, leading_keys_pattern,
    metrics_access, partition_of,
};

pub fn order_pk(order_id: &str) -> String {
    format!("{ORDER}{order_id}")
}

pub fn parse_order_pk(pk: &str) -> Option<&str> {
    pk.strip_prefix(ORDER).filter(|id| !id.is_empty())
}

pub fn customer_pk(customer_id: &str) -> String {
    format!("{CUSTOMER}{customer_id}")
}

/// The sort key of both indexes. Ids never contain `#` (see
/// `model::validate_id`), and timestamps have a fixed width, so these strings
/// sort by time first and break ties by order id.
pub fn timeline_sk(created_at: &DateTime<Utc>, order_id: &str) -> String {
    format!("{}#{order_id}", iso_millis::format(created_at))
}

pub fn parse_timeline_sk(sk: &str) -> Option<(DateTime<Utc>, &str)> {
    let (at, order_id) = sk.split_once('#')?;
    let at = iso_millis::parse(at).ok()?;
    // Only the canonical spelling is a key: anything else would sort wrongly.
    (iso_millis::format(&at) == sk[..sk.len() - order_id.len() - 1]
        && crate::model::validate_id("order id", order_id).is_ok())
    .then_some((at, order_id))
}

pub fn pending_pk(day: NaiveDate, shard: u32) -> String {
    format!("{PENDING}{}#{shard}", day.format("%Y-%m-%d"))
}

/// The GSI2 sort key bound at the start of `day`: every key of the day sorts
/// at or above it, every key of the day before below it.
pub fn day_start(day: NaiveDate) -> String {
    format!("{}T00:00:00.000Z", day.format("%Y-%m-%d"))
}

/// The (day, shard) of a GSI2 partition key, when it is one a reader can
/// read: exactly as `pending_pk` writes it (no `+7`, `07` or `2026-1-5`,
/// which name partitions no reader queries) and on a shard below
/// `MAX_SHARDS`. Any other key is on no PENDING list (the quality panel
/// names it).
pub fn parse_pending_pk(pk: &str) -> Option<(NaiveDate, u32)> {
    let rest = pk.strip_prefix(PENDING)?;
    let (day, shard) = rest.split_once('#')?;
    let parsed = (NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?, shard.parse().ok()?);
    (parsed.1 < MAX_SHARDS && pending_pk(parsed.0, parsed.1) == pk).then_some(parsed)
}

/// Whether a `GSI2PK` looks like a PENDING key (its prefix) but names no
/// partition a reader reads (`parse_pending_pk`).
pub fn is_unreadable_pending_pk(pk: &str) -> bool {
    pk.starts_with(PENDING) && parse_pending_pk(pk).is_none()
}

/// Whether a sort key read from an index can be a page's position: any
/// printable ASCII key of a sane length (`just_below` works on it), the
/// app's own (`timeline_sk`) and other writers' alike.
pub fn is_position(sk: &str) -> bool {
    !sk.is_empty() && sk.len() <= 512 && sk.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// A bound just below `key` for inclusive ranges: no key of this schema
/// sorts between it and `key`. Key strings are ASCII no higher than `z`
/// (ids are validated), so the last character lowered by one and followed by
/// DEL characters stays above every smaller key.
pub fn just_below(key: &str) -> String {
    let mut bytes = key.as_bytes().to_vec();
    match bytes.pop() {
        Some(last) if last > 0 && last.is_ascii() => {
            bytes.push(last - 1);
            bytes.extend([0x7f; crate::model::MAX_ID_LEN + 32]);
            String::from_utf8(bytes).expect("ASCII stays UTF-8")
        }
        _ => String::new(),
    }
}

/// The shard of an order: xxHash3 of its id, mod `shards`. xxh3 is a fixed,
/// documented function, so every build on every platform agrees on it
/// (std's `DefaultHasher` promises neither).
pub fn shard_of(order_id: &str, shards: u32) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(order_id.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// Key of the metrics item that records how many shards a day's PENDING
/// orders were written over, so readers fan out over the right partitions
/// even after the setting changes.
pub fn shard_count_key(day: NaiveDate) -> (String, String) {
    (format!("{SHARDS}{}", day.format("%Y-%m-%d")), SHARDS_SK.to_string())
}

/// Key of a sale plan (`SALES` / `PLAN#<name>`).
pub fn sale_plan_key(name: &str) -> (String, String) {
    (SALES.to_string(), format!("{SALE_PLAN}{name}"))
}

/// Key of a sale plan's rehearsals (`SALES` / `REHEARSAL#<name>`): the one
/// running and the last two finished, in one item.
pub fn sale_rehearsal_key(name: &str) -> (String, String) {
    (SALES.to_string(), format!("{SALE_REHEARSAL}{name}"))
}

/// Whether a sort key of the plans' partition is a plan's (not its
/// rehearsals').
pub fn is_sale_plan_sk(sk: &str) -> bool {
    sk.starts_with(SALE_PLAN)
}

/// The partition every sale plan is in.
pub fn sales_pk() -> &'static str {
    SALES
}

/// The day a shard-count item's partition key names.
pub fn parse_shard_count_pk(pk: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(pk.strip_prefix(SHARDS)?, "%Y-%m-%d").ok()
}

/// Counter item of the orders of `day` that are PENDING now: attribute
/// `pending`, and `shard<k>` for each write shard.
pub fn metric_pending_key(day: NaiveDate) -> (String, String) {
    (format!("{METRIC_PENDING}{}", day.format("%Y-%m-%d")), METRIC_SK.to_string())
}

/// Counter item of the orders created on `day`: `created`, and
/// `status<STATUS>` for how many of them are in each status now.
pub fn metric_day_key(day: NaiveDate) -> (String, String) {
    (format!("{METRIC_DAY}{}", day.format("%Y-%m-%d")), METRIC_SK.to_string())
}

/// Counter item of one hour of `day` by minute: `c<HHMM>` created,
/// `e<HHMM>` entered PENDING, `l<HHMM>` left PENDING (orders created that
/// day), for the minutes of `hour` (0 to 23). One item per hour, so that no
/// item grows past about 1.5 KB (180 attributes) through the day: a
/// consumer's update of the current minute is billed by the item's size, and
/// the whole day's 4,320 attributes in one item (about 34 KB by midnight)
/// cost 34 write units a commit. The day's hours share a partition
/// (`metric_minutes_pk`), so one Query reads them all.
pub fn metric_minutes_key(day: NaiveDate, hour: u32) -> (String, String) {
    (metric_minutes_pk(day), format!("{METRIC_HOUR_SK}{hour:02}"))
}

/// The partition of a day's minute counter items: the hours'
/// (`metric_minutes_key`) and the one whole-day item written before the
/// split (`metric_minutes_day_key`). Readers sum every item of it.
pub fn metric_minutes_pk(day: NaiveDate) -> String {
    format!("{METRIC_MINUTES}{}", day.format("%Y-%m-%d"))
}

/// The whole day's minute counter item that versions before the hourly
/// split wrote (same attributes): never written any more, but read (summed
/// with the hours') and reconciled, so days counted before an upgrade stay
/// right.
pub fn metric_minutes_day_key(day: NaiveDate) -> (String, String) {
    (metric_minutes_pk(day), METRIC_SK.to_string())
}

/// Every minute counter item a day may have: the old whole-day item, then
/// the 24 hours'.
pub fn metric_minutes_keys(day: NaiveDate) -> Vec<(String, String)> {
    std::iter::once(metric_minutes_day_key(day)).chain((0..24).map(|hour| metric_minutes_key(day, hour))).collect()
}

/// How many sub-items each live counter item (`metric_pending_key`,
/// `metric_day_key`, `metric_minutes_key`) is written through. A consumer's
/// transaction adds a batch's increments to the sub-items its stream shard
/// picks (`counter_sub_for`), not to the item itself: with every shard
/// writing the same three items, concurrent transactions of different
/// shards refused each other (some 700 conflicts in a 20-second sale at 32
/// shards, each charged and sent again). Readers sum the item and its
/// sub-items, which share its partition, so one Query reads them; the item
/// itself keeps what was counted before the split, reconciliation's repairs
/// and verdicts. Sixteen keeps a snapshot of one item, its sub-items and
/// the checkpoints of up to 83 stream shards inside one TransactGetItems.
pub const COUNTER_SUBS: u32 = 16;
/// Sort-key suffix of a sub-item: `COUNT#S07`, `HOUR#10#S07`.
const COUNTER_SUB: &str = "#S";

/// Whether `key` is a live counter item itself (not a sub-item): the only
/// items written through sub-items.
fn is_live_counter_key((pk, sk): &(String, String)) -> bool {
    let whole = |prefix: &str| pk.starts_with(prefix) && sk == METRIC_SK;
    let hour = pk.starts_with(METRIC_MINUTES)
        && sk.strip_prefix(METRIC_HOUR_SK).is_some_and(|h| h.len() == 2 && h.bytes().all(|b| b.is_ascii_digit()));
    whole(METRIC_PENDING) || whole(METRIC_DAY) || hour
}

/// The sub-item `sub` (below `COUNTER_SUBS`) of a live counter item; `None`
/// for any other key, which is written as it is.
pub fn counter_sub_key(key: &(String, String), sub: u32) -> Option<(String, String)> {
    is_live_counter_key(key).then(|| (key.0.clone(), format!("{}{COUNTER_SUB}{:02}", key.1, sub % COUNTER_SUBS)))
}

/// Every sub-item a live counter item may have (none for any other key).
pub fn counter_sub_keys(key: &(String, String)) -> Vec<(String, String)> {
    (0..COUNTER_SUBS).filter_map(|sub| counter_sub_key(key, sub)).collect()
}

/// The sub-item a stream shard's commits write first (or a Lambda record's,
/// by its event id, when the event does not name the shard): xxh3, fixed on
/// every platform, so one shard keeps to one sub-item unless a send is
/// refused in conflict (then the next one: `conflicts::CounterSends`).
pub fn counter_sub_for(id: &str) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(id.as_bytes()) % u64::from(COUNTER_SUBS)) as u32
}

/// Whether a sort key of a counter partition is a sub-item's.
pub fn is_counter_sub_sk(sk: &str) -> bool {
    sk.rsplit_once(COUNTER_SUB).is_some_and(|(_, n)| n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The day a counter item of `metric_pending_key`, `metric_day_key` or
/// `metric_minutes_key` is for.
pub fn metric_day_of(pk: &str) -> Option<NaiveDate> {
    let day = [METRIC_PENDING, METRIC_DAY, METRIC_MINUTES].into_iter().find_map(|prefix| pk.strip_prefix(prefix))?;
    NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()
}

pub fn shard_attribute(shard: u32) -> String {
    format!("shard{shard}")
}

/// The shard a counter attribute counts, when it is one `shard_attribute`
/// writes (below `MAX_SHARDS`).
pub fn parse_shard_attribute(name: &str) -> Option<u32> {
    let shard: u32 = name.strip_prefix("shard")?.parse().ok()?;
    (shard < MAX_SHARDS && shard_attribute(shard) == name).then_some(shard)
}

pub fn status_attribute(status: &str) -> String {
    format!("status{status}")
}

/// `kind` is `c`, `e` or `l`; `minute` counts from midnight, 0 to 1439.
pub fn minute_attribute(kind: char, minute: u32) -> String {
    format!("{kind}{:02}{:02}", minute / 60, minute % 60)
}

/// Whether an attribute of a counter item is a state counter, one that
/// equals a number of existing orders and so can be recounted: `pending`,
/// `shard<k>`, `created`, `status<STATUS>`, `c<HHMM>`. The history counters
/// (`e<HHMM>`, `l<HHMM>`) and the bookkeeping attributes are not.
pub fn is_state_attribute(name: &str) -> bool {
    let digits = |s: &str, n: Option<usize>| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && n.is_none_or(|n| s.len() == n)
    };
    match name {
        attr::PENDING | attr::CREATED => true,
        _ if name.starts_with('c') => digits(&name[1..], Some(4)),
        _ if name.starts_with("shard") => digits(&name[5..], None),
        _ => name
            .strip_prefix("status")
            .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')),
    }
}

/// The lease that lets one reconciliation at a time read a stream (DynamoDB
/// Streams serves at most two readers per shard: the consumer and it).
pub fn reconcile_reader_key(stream_arn: &str) -> (String, String) {
    (format!("{RECONCILE}{stream_arn}"), READER_SK.to_string())
}

/// A reconciliation's finding about counter item `counter`, anchored on
/// the stream `stream_arn`, waiting for the next run to agree before it is
/// repaired (beside the reader lease).
pub fn reconcile_finding_key(stream_arn: &str, (pk, sk): &(String, String)) -> (String, String) {
    (format!("{RECONCILE}{stream_arn}"), format!("{FINDING_SK}{pk}#{sk}"))
}

/// The stream consumer's lease and checkpoint of one stream shard.
pub fn checkpoint_key(stream_arn: &str, shard_id: &str) -> (String, String) {
    (checkpoint_pk(stream_arn), format!("{SHARD}{shard_id}"))
}

/// The partition holding every checkpoint of one stream.
pub fn checkpoint_pk(stream_arn: &str) -> String {
    format!("{CHECKPOINT}{stream_arn}")
}

/// The stream shard a checkpoint item's sort key names.
pub fn parse_checkpoint_sk(sk: &str) -> Option<&str> {
    sk.strip_prefix(SHARD).filter(|id| !id.is_empty())
}

/// The marker of one stream record the Lambda consumer applied, by the
/// record's `eventID` (unique per stream record): written with
/// `attribute_not_exists` in the transaction that applies the record, so a
/// record delivered again changes nothing. It carries `expiresAt` (the
/// metrics table's TTL attribute), well past the stream's 24 hours.
pub fn applied_key(event_id: &str) -> (String, String) {
    (format!("{APPLIED}{event_id}"), APPLIED_SK.to_string())
}

/// Digits a sequence number is padded to in a sort key, so that keys sort
/// as the numbers do: DynamoDB Streams' are 21 to 40 digits long.
const SEQ_DIGITS: usize = 40;

/// A stream sequence number as a sort key part: zero-padded to
/// `SEQ_DIGITS`, so that string order is numeric order (as
/// `stream::reconcile::compare_seq` compares them).
pub fn seq_sort_key(seq: &str) -> String {
    format!("{:0>width$}", seq.trim_start_matches('0'), width = SEQ_DIGITS)
}

/// The partition of a stream shard's applied ranges.
pub fn applied_ranges_pk(stream_arn: &str, shard_id: &str) -> String {
    format!("{RANGES}{stream_arn}#{shard_id}")
}

/// One applied range of a stream shard: the records from `first` to `last`
/// that one counter commit applied, written in that transaction (with
/// `expiresAt`, once the stream no longer keeps them). Sorted by the last
/// record, then the first, so a Query from a sequence number on finds the
/// ranges that end at or after it, in order.
pub fn applied_range_key(stream_arn: &str, shard_id: &str, first: &str, last: &str) -> (String, String) {
    (applied_ranges_pk(stream_arn, shard_id), applied_range_sk(last, first))
}

/// The sort key of an applied range ending at `last` (the lowest such when
/// `first` is empty: where a Query for the ranges ending at or after
/// `last` starts).
pub fn applied_range_sk(last: &str, first: &str) -> String {
    match first {
        "" => seq_sort_key(last),
        first => format!("{}#{}", seq_sort_key(last), seq_sort_key(first)),
    }
}

/// Whether a metrics item holds observations that are sums and nothing
/// else (the stream-priced capacity and hot keys, the shard heat, the
/// quality's hourly counts), which only the capacity and quality pages read,
/// rather than counters the live pages follow: what a Lambda tumbling window
/// may carry to its close. Not the quality's largest items and samples: a
/// consumer chooses what to add to those by what it read of them
/// (`quality::Tracker::seed`), so they are written when chosen.
pub fn is_observation((pk, sk): &(String, String)) -> bool {
    pk.starts_with(CAPACITY) || pk.starts_with(HEAT) || (pk.starts_with(QUALITY) && sk.starts_with(QUALITY_HOUR))
}

/// Whether a metrics item is the quality's largest items or samples: chosen
/// by a consumer from what it read of them, so added as soon as the
/// transaction that chose them has applied, but outside it. Every consumer
/// that commits at the same moment adds to the same hour's largest item: in
/// the transaction, at 32 shards, that item was where nearly all the
/// transactions refused in conflict collided (62 of 80 in one test run).
pub fn is_chosen_observation((pk, sk): &(String, String)) -> bool {
    pk.starts_with(QUALITY) && !sk.starts_with(QUALITY_HOUR)
}

/// The marker id of what a tumbling window carried, added by the call that
/// closes it: one per shard, window and first record carried, so a closing
/// call delivered again adds nothing.
pub fn window_marker_id(shard_id: &str, window_start: &str, since: &str) -> String {
    format!("{WINDOW}{shard_id}#{window_start}#{since}")
}

/// An entry of the consumer registry: a consumer of the stream, by how it
/// consumes (`in-process`, `lambda`) and its instance (a process's owner id,
/// a Lambda function's name). A mode never contains `#`, so it is the sort
/// key's part before the first one, whatever the instance holds.
pub fn consumer_key(mode: &str, instance: &str) -> (String, String) {
    (CONSUMERS.to_string(), format!("{mode}#{instance}"))
}

/// The recorded consumer mode: one item beside the registry's entries (its
/// sort key has no `#`, so it is no entry), so every command that reads
/// the registry may read it with no new IAM grant.
pub fn consumer_mode_key() -> (String, String) {
    (CONSUMERS.to_string(), "MODE".to_string())
}

/// The partition holding every entry of the consumer registry.
pub fn consumers_pk() -> &'static str {
    CONSUMERS
}

/// The mode and instance a registry entry's sort key names.
pub fn parse_consumer_sk(sk: &str) -> Option<(&str, &str)> {
    sk.split_once('#').filter(|(mode, instance)| !mode.is_empty() && !instance.is_empty())
}

/// Every local account lives in one partition (a few hundred items at most),
/// so listing them is a Query, not a Scan.
pub fn user_key(name: &str) -> (String, String) {
    (USERS.to_string(), format!("{USER}{name}"))
}

pub fn users_pk() -> &'static str {
    USERS
}

pub fn token_key(name: &str) -> (String, String) {
    (TOKENS.to_string(), format!("{TOKEN}{name}"))
}

pub fn tokens_pk() -> &'static str {
    TOKENS
}

/// A bulk operation's report.
pub fn bulk_key(id: &str) -> (String, String) {
    (format!("{BULK}{id}"), BULK_SK.to_string())
}

pub fn session_key(id: &str) -> (String, String) {
    (format!("{SESSION}{id}"), SESSION_SK.to_string())
}

/// The sort key of an audit record: time first, then a unique id, so a
/// partition reads newest first and two changes in one millisecond both stay.
pub fn audit_sk(at: &DateTime<Utc>, event_id: &str) -> String {
    format!("{}#{event_id}", iso_millis::format(at))
}

/// The time an audit record's sort key starts with.
pub fn parse_audit_sk(sk: &str) -> Option<DateTime<Utc>> {
    iso_millis::parse(sk.split_once('#')?.0).ok()
}

/// An order's own timeline.
pub fn audit_order_pk(order_id: &str) -> String {
    format!("{AUDIT_ORDER}{order_id}")
}

/// One write shard of a day's changes (by the change's event id).
pub fn audit_day_pk(day: NaiveDate, shard: u32) -> String {
    format!("{AUDIT_DAY}{}#{shard}", day.format("%Y-%m-%d"))
}

/// One write shard of an actor's changes.
pub fn audit_actor_pk(actor: &str, shard: u32) -> String {
    format!("{AUDIT_ACTOR}{actor}#{shard}")
}

/// The partition of one day's consumed capacity and throttles: an item per
/// table or index (`capacity_units_sk`) and per throttling reason and
/// resource (`capacity_throttles_sk`), one attribute per minute
/// (`capacity_minute_attribute`), added to once a minute by each process.
pub fn capacity_pk(day: NaiveDate) -> String {
    format!("{CAPACITY}{}", day.format("%Y-%m-%d"))
}

/// `resource` is a table name, or `<table>/<index>`.
pub fn capacity_units_sk(resource: &str) -> String {
    format!("{CAPACITY_UNITS}{resource}")
}

/// `resource` is what the throttle named, less its ARN's prefix
/// (`table/<table>/index/<index>`).
pub fn capacity_throttles_sk(reason: &str, resource: &str) -> String {
    format!("{CAPACITY_THROTTLES}{reason}#{resource}")
}

/// Write units of every writer in one hour (0 to 23), priced from the orders
/// table's stream by the consumer (`w<HHMM>`), added in the transaction that
/// moves its checkpoint. An item an hour keeps each one small: a write is
/// billed by the size of the item it changes.
pub fn capacity_stream_sk(resource: &str, hour: u32) -> String {
    format!("{CAPACITY_STREAM}{hour:02}#{resource}")
}

/// The partition keys written most in one minute of the day (0 to 1439),
/// from the stream: one attribute per key (`hot_key_attribute`), its write
/// units in that minute.
pub fn capacity_hot_sk(minute: u32) -> String {
    format!("{CAPACITY_HOT}{:02}{:02}", minute / 60, minute % 60)
}

/// The minutes of one hour the stream consumer observed (`o<HHMM>`): it had
/// read every record written before them, so a minute without units was
/// idle, not unknown.
pub fn capacity_observed_sk(hour: u32) -> String {
    format!("{CAPACITY_OBSERVED}{hour:02}")
}

/// `<resource>|<partition key>`; a key longer than 200 bytes is cut there and
/// given its hash, so that it stays one attribute.
pub fn hot_key_attribute(resource: &str, key: &str) -> String {
    format!("{resource}{HOT_KEY_SEPARATOR}{}", bounded_key(key))
}

/// The resource and the key a hot key attribute names.
pub fn parse_hot_key_attribute(name: &str) -> Option<(&str, &str)> {
    let (resource, key) = name.split_once(HOT_KEY_SEPARATOR)?;
    (!resource.is_empty()).then_some((resource, key))
}

/// What a capacity item's sort key holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapacitySk<'a> {
    Units { resource: &'a str },
    Throttles { reason: &'a str, resource: &'a str },
    Stream { resource: &'a str },
    Hot { minute: u32 },
    Observed,
}

pub fn parse_capacity_sk(sk: &str) -> Option<CapacitySk<'_>> {
    if let Some(resource) = sk.strip_prefix(CAPACITY_UNITS) {
        return (!resource.is_empty()).then_some(CapacitySk::Units { resource });
    }
    if let Some(rest) = sk.strip_prefix(CAPACITY_STREAM) {
        let (hour, resource) = rest.split_once('#')?;
        let hour_ok = hour.len() == 2 && hour.parse::<u32>().is_ok_and(|h| h < 24);
        return (hour_ok && !resource.is_empty()).then_some(CapacitySk::Stream { resource });
    }
    if let Some(hhmm) = sk.strip_prefix(CAPACITY_HOT) {
        return parse_minute_attribute(&format!("h{hhmm}")).map(|(_, minute)| CapacitySk::Hot { minute });
    }
    if let Some(hour) = sk.strip_prefix(CAPACITY_OBSERVED) {
        return (hour.len() == 2 && hour.parse::<u32>().is_ok_and(|h| h < 24)).then_some(CapacitySk::Observed);
    }
    let (reason, resource) = sk.strip_prefix(CAPACITY_THROTTLES)?.split_once('#')?;
    (!reason.is_empty() && !resource.is_empty()).then_some(CapacitySk::Throttles { reason, resource })
}

/// `kind` is `r` (read units), `w` (write units), `x` (write units of this
/// app's transactions, a part of `w`), `t` (throttled attempts) or `o` (a
/// minute observed); `minute` counts from midnight, 0 to 1439.
pub fn capacity_minute_attribute(kind: char, minute: u32) -> String {
    minute_attribute(kind, minute)
}

/// The kind and minute of a capacity item's attribute (`w1015`).
pub fn parse_minute_attribute(name: &str) -> Option<(char, u32)> {
    let mut chars = name.chars();
    let kind = chars.next()?;
    let digits = chars.as_str();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (hour, minute): (u32, u32) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
    (hour < 24 && minute < 60).then_some((kind, hour * 60 + minute))
}

/// Writes to each GSI2 shard in one hour of `day` (`hour` 0 to 23): one
/// attribute per minute and shard (`heat_attribute`), at most 60 × 100.
pub fn heat_key(day: NaiveDate, hour: u32) -> (String, String) {
    (format!("{HEAT}{}#{hour:02}", day.format("%Y-%m-%d")), HEAT_SK.to_string())
}

/// `m<MM>s<shard>`: writes to `shard` during minute `minute` of the hour.
pub fn heat_attribute(minute_of_hour: u32, shard: u32) -> String {
    format!("m{minute_of_hour:02}s{shard}")
}

/// The minute of the hour and the shard a heat attribute names.
pub fn parse_heat_attribute(name: &str) -> Option<(u32, u32)> {
    let (minute, shard) = name.strip_prefix('m')?.split_once('s')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if minute.len() != 2 || !all_digits(minute) || !all_digits(shard) {
        return None;
    }
    let (minute, shard): (u32, u32) = (minute.parse().ok()?, shard.parse().ok()?);
    (minute < 60 && shard < MAX_SHARDS).then_some((minute, shard))
}

/// The data quality of one day, from the stream (`stream::quality`): an
/// item per hour of figures (`quality_hour_sk`), per hour the largest items
/// written (`quality_largest_sk`), and per drift kind the first keys seen
/// (`quality_sample_sk`). Every item stays small: at most a few hundred
/// attributes of a few bytes each.
pub fn quality_pk(day: NaiveDate) -> String {
    format!("{QUALITY}{}", day.format("%Y-%m-%d"))
}

/// One hour's figures (0 to 23): items written, the size histogram, drift
/// per kind and field, write units per table and index.
pub fn quality_hour_sk(hour: u32) -> String {
    format!("{QUALITY_HOUR}{hour:02}")
}

/// One hour's largest items: an attribute per item key, its size in bytes.
pub fn quality_largest_sk(hour: u32) -> String {
    format!("{QUALITY_LARGEST}{hour:02}")
}

/// The first keys seen of one drift kind and field: an attribute per key
/// (`quality_sample_attribute`).
pub fn quality_sample_sk(kind: &str, field: &str) -> String {
    format!("{QUALITY_SAMPLE}{kind}{HOT_KEY_SEPARATOR}{field}")
}

/// What a quality item's sort key holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QualitySk<'a> {
    Hour(u32),
    Largest(u32),
    Sample { kind: &'a str, field: &'a str },
}

pub fn parse_quality_sk(sk: &str) -> Option<QualitySk<'_>> {
    let hour = |h: &str| h.parse::<u32>().ok().filter(|h| *h < 24 && sk.len() == QUALITY_HOUR.len() + 2);
    if let Some(h) = sk.strip_prefix(QUALITY_HOUR) {
        return hour(h).map(QualitySk::Hour);
    }
    if let Some(h) = sk.strip_prefix(QUALITY_LARGEST) {
        return h
            .parse::<u32>()
            .ok()
            .filter(|h| *h < 24 && sk.len() == QUALITY_LARGEST.len() + 2)
            .map(QualitySk::Largest);
    }
    let (kind, field) = sk.strip_prefix(QUALITY_SAMPLE)?.split_once(HOT_KEY_SEPARATOR)?;
    (!kind.is_empty() && !field.is_empty()).then_some(QualitySk::Sample { kind, field })
}

/// Attributes of an hour's quality item.
pub mod quality {
    /// Records of the orders table (every write: put, update, delete).
    pub const WRITES: &str = "w";
    /// Items written (a record's new image): what the sizes are of.
    pub const ITEMS: &str = "n";
    /// Items written that did not hold what the access patterns need.
    pub const DRIFTED: &str = "d";
    /// Items written over one write unit (1 KB), over one read unit (4 KB).
    pub const OVER_WRITE_UNIT: &str = "o1k";
    pub const OVER_READ_UNIT: &str = "o4k";
    /// Sums of the items' sizes, in bytes.
    pub const BYTES: &str = "b";
}

/// Items of one drift kind and field in an hour: `k|<kind>|<field>`.
pub fn drift_attribute(kind: &str, field: &str) -> String {
    format!("k{HOT_KEY_SEPARATOR}{kind}{HOT_KEY_SEPARATOR}{field}")
}

pub fn parse_drift_attribute(name: &str) -> Option<(&str, &str)> {
    let (kind, field) = name.strip_prefix('k')?.strip_prefix(HOT_KEY_SEPARATOR)?.split_once(HOT_KEY_SEPARATOR)?;
    (!kind.is_empty() && !field.is_empty()).then_some((kind, field))
}

/// Items of one size bucket in an hour: `z<bucket>`.
pub fn size_bucket_attribute(bucket: u32) -> String {
    format!("z{bucket}")
}

pub fn parse_size_bucket_attribute(name: &str) -> Option<u32> {
    let digits = name.strip_prefix('z')?;
    (!digits.is_empty() && digits.len() <= 4 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// Write units one table or index (`<table>[/<index>]`) took in an hour:
/// `u|<resource>`.
pub fn resource_units_attribute(resource: &str) -> String {
    format!("u{HOT_KEY_SEPARATOR}{resource}")
}

pub fn parse_resource_units_attribute(name: &str) -> Option<&str> {
    name.strip_prefix('u')?.strip_prefix(HOT_KEY_SEPARATOR).filter(|r| !r.is_empty())
}

/// A sampled key: `<when written>|<key>`, the key cut as a hot key's is.
pub fn quality_sample_attribute(at: &DateTime<Utc>, key: &str) -> String {
    format!("{}{HOT_KEY_SEPARATOR}{}", iso_millis::format(at), bounded_key(key))
}

pub fn parse_quality_sample_attribute(name: &str) -> Option<(DateTime<Utc>, &str)> {
    let (at, key) = name.split_once(HOT_KEY_SEPARATOR)?;
    Some((iso_millis::parse(at).ok()?, key))
}

/// A key as an attribute name: whole up to 200 bytes, else cut there and
/// given its hash (attribute names are bounded; keys written by others are not).
pub fn bounded_key(key: &str) -> String {
    if key.len() <= HOT_KEY_MAX {
        return key.to_string();
    }
    let mut cut = HOT_KEY_MAX;
    while !key.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…{:016x}", &key[..cut], xxhash_rust::xxh3::xxh3_64(key.as_bytes()))
}

#[cfg(test)]
mod tests;

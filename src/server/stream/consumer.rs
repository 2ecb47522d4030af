//! The consumer of the orders table's stream: it keeps the counters in the
//! metrics table and tells the live hub about every order that enters or
//! leaves a day's PENDING list. Its transactions also raise each changed
//! day's `version`, which other instances' followers watch.
//!
//! A stream delivers records at least once, and a consumer may crash or run
//! twice, so:
//! - each stream shard is held by one consumer at a time, through a lease in
//!   the metrics table (conditional writes, an owner and an expiry); a lease
//!   not renewed is taken over;
//! - a batch's counter increments and the advance of the shard's checkpoint
//!   are one transaction, conditioned on the previous checkpoint: a batch is
//!   applied exactly once, and a crash between steps loses nothing;
//! - parents are read to their end before their children; new shards start
//!   at TRIM_HORIZON; a restart resumes after the checkpoint.
//!
//! Every record is also priced as DynamoDB bills the write (`pricing`): its
//! write units per table and index, and the keys it wrote (`hotkeys`),
//! committed with the checkpoint, so every writer's writes are counted once.
//! Those observations, and the others that are plain sums (shard heat, the
//! quality's hourly counts: `keys::is_observation`), are not written in the
//! transaction itself: this consumer sums what it committed and adds it
//! every `CARRY_FOR`, soon after a pass finds nothing new, and when it
//! stops (as the Lambda form adds a tumbling window's). Each transaction
//! rewrote those items for the few records of a pass, most of a commit's
//! cost at 8 shards and more. The adds run beside the passes, never in
//! them, so a record's counters never wait for them. The price is that a
//! process killed without stopping loses what it had not added yet,
//! normally its last `CARRY_FOR` of them (the counters, never). Once a pass
//! has read every shard it holds to its end with everything committed
//! before added, the consumer marks the minutes up to now as observed (see
//! `Store::mark_observed`).
//!
//! What a record means and how a transaction of records is applied is one
//! code path, `Applier`, shared with the Lambda function (`stream::lambda`),
//! which guards each record with a marker instead of a shard checkpoint.
//!
//! The same transaction carries each record's data quality counts
//! (`quality`: drift kinds and item sizes, by the pages' own reader); the
//! largest items and samples it chose are added right after it applies
//! (`keys::is_chosen_observation`).
//!
//! Every call to the store goes through `Store`; this module decides what
//! to read and what a batch means.

use crate::model::LiveEvent;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, GSI2PK};
use crate::server::store::shard_count;
use crate::server::store::usage::{Resource, epoch_minute};
use crate::server::store::{
    Checkpoint, CheckpointMove, Holder, Item, Lease, Marked, Marker, Store, StreamBatch, StreamShard, TRANSACTION_ITEMS,
};
use crate::server::stream::counters::{self, Change, Deltas, Image};
use crate::server::stream::hotkeys::{self, HotKey};
use crate::server::stream::live::LiveHub;
use crate::server::stream::pricing::{self, Layout};
use crate::server::stream::quality;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use chrono::{DateTime, NaiveDate, Utc};
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counter items one transaction may touch, leaving room for the checkpoint
/// (DynamoDB allows 100 items per transaction).
const MAX_COUNTER_ITEMS: usize = 90;
/// Attributes one counter update may add to (the update expression is
/// limited to 4 KB; each `#aN :vN` takes up to a dozen bytes).
const MAX_ATTRIBUTES: usize = 120;
/// Reads of a shard in one pass when its iterator expired or its records
/// were trimmed under it, before the pass moves on.
const READ_TRIES: u32 = 3;
/// How long the stream's description is reused (see `Consumer::described`).
const DESCRIBE_EVERY: Duration = Duration::from_secs(10);
/// The least time between two GetRecords on one shard: DynamoDB Streams
/// refuses a shard's sixth call in a second (`LimitExceededException`), and
/// Lambda's pollers read a shard four times a second; so does this consumer.
const READ_SPACING: Duration = Duration::from_millis(250);

/// The least age of a description read again because another consumer
/// finished a shard whose children it does not list: a stream whose last
/// shards closed without children (its stream disabled) would otherwise be
/// described at every pass.
const CHILDREN_LOOKED_FOR_EVERY: Duration = Duration::from_secs(1);

/// Longest the observations a consumer committed wait before they are
/// added (see the module's comment): a few of a pass's items, once in so
/// many passes, and one write unit each, not two.
const CARRY_FOR: Duration = Duration::from_secs(5);

/// How soon after a pass that found nothing new the observations carried
/// are added: a stream that goes quiet has its figures in at once, and a
/// busy one's passes that find a shard or two idle do not add every time.
const ADD_WHEN_IDLE_AFTER: Duration = Duration::from_millis(100);

/// The observations this consumer committed and has not added yet.
#[derive(Default)]
struct Carried {
    deltas: Deltas,
    /// Some are being added now (taken out of `deltas`): until that ends,
    /// an empty `deltas` does not mean all were added.
    adding: bool,
}

impl Carried {
    /// Whether everything committed so far has been added.
    fn settled(&self) -> bool {
        self.deltas.is_empty() && !self.adding
    }
}

/// Observations taken out of `Carried` to be added: what is left of them
/// goes back when this is dropped, the add done, failed, or its future
/// dropped midway (then `adding` would otherwise stay set for good).
struct Taken<'a> {
    from: &'a Mutex<Carried>,
    deltas: Deltas,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut carried = self.from.lock();
        carried.adding = false;
        carried.deltas.merge(std::mem::take(&mut self.deltas));
    }
}

/// The stream as last described.
struct Described {
    arn: String,
    shards: Vec<StreamShard>,
    at: Instant,
}

#[derive(Clone, Debug)]
pub struct ConsumerOptions {
    /// Who holds the leases: unique per running consumer.
    pub owner: String,
    pub lease: Duration,
    /// Records asked for per GetRecords.
    pub batch: i32,
    /// Longest pause between polls of an idle stream.
    pub idle: Duration,
    /// Price every record's write units and hot keys (always, but for the
    /// benchmark that measures what that costs).
    pub pricing: bool,
}

impl ConsumerOptions {
    pub fn new(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(15),
            batch: 500,
            idle: Duration::from_millis(200),
            pricing: true,
        }
    }
}

/// What the consumer has done, for the dashboard and the metrics API.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumerStatus {
    pub running: bool,
    pub shards_held: usize,
    pub records_applied: u64,
    pub bad_records: u64,
    pub last_applied_at: Option<DateTime<Utc>>,
    /// How old the newest record of the last batch was when it was applied.
    pub behind_ms: Option<i64>,
    /// When the last pass failed (what failed goes to the log, not the API).
    pub last_error_at: Option<DateTime<Utc>>,
    /// When this consumer last found records trimmed before it read them
    /// (their changes are missing from the counters: `reconcile --full`).
    pub trimmed_at: Option<DateTime<Utc>>,
    /// Why this instance does not consume although asked to (another
    /// consumer would count every change twice: `stream::registry`).
    pub refused: Option<String>,
    /// The keys written most, per table and index, in the last minute this
    /// consumer finished (at most `TOP_KEYS` each): what `/metrics` shows.
    pub hot_keys: Vec<HotKey>,
}

/// Hot keys per table and index that `/metrics` shows: bounded cardinality.
pub const TOP_KEYS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the orders table has no stream: run `northwind-ops provision` on a table with one")]
    NoStream,
    #[error("every shard's pass failed ({0} shards; each named in the log)")]
    ShardsFailed(usize),
}

/// One shard's batch, read in a pass and not yet applied.
struct ShardRead {
    shard_id: String,
    /// The checkpoint the batch follows.
    prev: Option<String>,
    records: Vec<Record>,
    /// Where reading goes on (`None`: the shard is closed and this batch is
    /// its last).
    next: Option<String>,
}

impl ShardRead {
    fn closed(&self) -> bool {
        self.next.is_none()
    }

    fn last_seq(&self) -> Option<String> {
        self.records.iter().rev().find_map(|r| r.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string))
    }
}

/// What a pass found in one shard.
enum ShardPass {
    /// Another consumer holds it.
    NotHeld,
    /// Read to its current end: nothing to apply.
    AtEnd,
    Read(ShardRead),
}

/// Where this consumer is in one shard.
#[derive(Default)]
struct ShardCursor {
    iterator: Option<String>,
    /// The checkpoint this consumer last wrote or read.
    seq: Option<String>,
    /// When this consumer last called GetRecords on the shard.
    read_at: Option<Instant>,
}

impl ShardCursor {
    /// How long until the shard may be read again (`READ_SPACING`).
    fn wait(&self) -> Duration {
        self.read_at.map_or(Duration::ZERO, |at| READ_SPACING.saturating_sub(at.elapsed()))
    }
}

pub struct Consumer {
    store: Arc<Store>,
    options: ConsumerOptions,
    /// What records mean and how they are committed.
    core: Applier,
    cursors: tokio::sync::Mutex<HashMap<String, ShardCursor>>,
    /// The stream's ARN and shards as last described (`described`).
    described: tokio::sync::Mutex<Option<Described>>,
    /// Until when this consumer surely holds each lease (by its own clock).
    held: Mutex<HashMap<String, Instant>>,
    /// The last minute marked observed, by this consumer.
    observed_to: tokio::sync::Mutex<Option<i64>>,
    /// In-process consumers reading the stream, this one included, as the
    /// registry last said (`set_instances`); 1 until told: then every shard
    /// is this consumer's to take.
    instances: AtomicUsize,
    carried: Mutex<Carried>,
    /// Wakes the adding of the carried observations (a pass found nothing
    /// new, or the consumer stops).
    add_soon: tokio::sync::Notify,
}

/// What stream records mean for the counters, and how the increments of
/// some records are committed with what guards them against a second
/// application: one code path for `consume` (the shard's checkpoint) and
/// the Lambda function (a marker per record).
pub struct Applier {
    store: Arc<Store>,
    hub: Option<LiveHub>,
    /// Where the status goes: a watch channel, so a reader (the service)
    /// always sees the latest without holding a lock the consumer takes.
    status: Arc<tokio::sync::watch::Sender<ConsumerStatus>>,
    /// The orders table's key and indexes, to price each record.
    layout: Layout,
    /// Price every record (see `ConsumerOptions::pricing`).
    pricing: bool,
    /// The keys written per minute, of what this process committed.
    hot: Mutex<hotkeys::Tracker>,
    /// The drift samples and largest items this process committed.
    quality: Mutex<quality::Tracker>,
}

/// One record as a transaction takes it: its change (`None`: not a
/// readable order, priced only), when it was written, and the writes it
/// made, priced.
pub struct Reading {
    pub change: Option<Change>,
    pub at: DateTime<Utc>,
    writes: Vec<pricing::Write>,
    /// Its data quality figures (`None`: a record without images).
    quality: Option<quality::Observation>,
}

/// The increments of the records gathered for one transaction: counters,
/// write units and the keys written.
#[derive(Clone, Default)]
pub struct Increments {
    deltas: Deltas,
    chunk: hotkeys::Chunk,
    quality: quality::Chunk,
}

impl Increments {
    /// These increments and one more record's.
    pub fn with(&self, reading: &Reading, table: &str) -> Increments {
        let mut next = self.clone();
        record_one(&mut next.deltas, &mut next.chunk, reading.change.as_ref(), &reading.at, table, &reading.writes);
        if let Some(observation) = &reading.quality {
            quality::record(&mut next.deltas, &mut next.quality, observation);
        }
        next
    }

    /// Items the transaction writes for them, at most (each minute with hot
    /// keys is at most one more, and so is each drift sample and largest
    /// item it may add to).
    pub fn items(&self) -> usize {
        self.deltas.item_count() + self.chunk.minutes() + self.quality.items()
    }

    /// Whether they no longer fit a transaction that has `room` items for
    /// them, or an item's update expression.
    pub fn too_big(&self, room: usize) -> bool {
        self.items() > room || self.deltas.widest_item() > MAX_ATTRIBUTES
    }

    /// Days whose counters they change.
    pub fn days(&self) -> Vec<NaiveDate> {
        self.deltas.days()
    }
}

/// What keeps a transaction's records from being applied twice.
pub enum Guard<'a> {
    /// Each shard's checkpoint moves from its `prev` to its `seq`, under a
    /// lease (`consume`) or as the mapping's one batch of the shard
    /// (`lambda` with a tumbling window): a replayed batch fails its
    /// condition.
    Checkpoints(&'a [CheckpointMove<'a>]),
    /// A marker per record, put only where none exists (the Lambda function).
    Markers(&'a [Marker<'a>]),
}

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
fn images(record: &Record) -> (Option<Item>, Option<Item>) {
    match record.dynamodb() {
        Some(data) => (data.old_image().map(item_of), data.new_image().map(item_of)),
        None => (None, None),
    }
}

/// A change from a record's images: each counts as `counters::image_of`
/// says, an image that is not a readable order as none (it counts nowhere,
/// as reconciliation's recount finds it); `None` when neither image is one.
fn change_of(old: Option<&Item>, new: Option<&Item>, at: DateTime<Utc>) -> Option<Change> {
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
fn written_at(record: &Record) -> DateTime<Utc> {
    record
        .dynamodb()
        .and_then(|d| d.approximate_creation_date_time())
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
        .unwrap_or_else(Utc::now)
}

/// The writes a record made, priced (any item, order or not: every writer's
/// writes cost capacity).
fn priced(layout: &Layout, record: &Record) -> Vec<pricing::Write> {
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

/// The shards to read now: not finished, and whose parent (if still
/// listed) is finished, so that an item's changes are applied in order.
fn readable<'a>(shards: &'a [StreamShard], checkpoints: &HashMap<String, Checkpoint>) -> Vec<&'a StreamShard> {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    let finished = |id: &str| checkpoints.get(id).is_some_and(|c| c.finished);
    shards
        .iter()
        .filter(|s| !finished(&s.id))
        .filter(|s| s.parent.as_deref().is_none_or(|p| !listed.contains(p) || finished(p)))
        .collect()
}

/// Whether a shard the description lists was finished (by any consumer)
/// with none of its children listed: the description predates the split,
/// and the children, readable now, are unknown to this consumer. Without
/// this, an instance that did not read the parent to its close found its
/// share of the children only at its next full description, up to
/// `DESCRIBE_EVERY` later, while the other instance, holding its share, left
/// them unread.
fn children_unlisted(shards: &[StreamShard], checkpoints: &HashMap<String, Checkpoint>) -> bool {
    let parents: HashSet<&str> = shards.iter().filter_map(|s| s.parent.as_deref()).collect();
    shards.iter().any(|s| checkpoints.get(&s.id).is_some_and(|c| c.finished) && !parents.contains(s.id.as_str()))
}

impl Consumer {
    pub fn new(store: Arc<Store>, options: ConsumerOptions, hub: Option<LiveHub>) -> Self {
        Self {
            core: Applier::new(store.clone(), hub, options.pricing),
            store,
            options,
            cursors: tokio::sync::Mutex::new(HashMap::new()),
            described: tokio::sync::Mutex::new(None),
            held: Mutex::new(HashMap::new()),
            observed_to: tokio::sync::Mutex::new(None),
            instances: AtomicUsize::new(1),
            carried: Mutex::new(Carried::default()),
            add_soon: tokio::sync::Notify::new(),
        }
    }

    /// How many in-process consumers read the stream, this one included:
    /// each takes at most its fair share of the shards (see `poll`).
    pub fn set_instances(&self, instances: usize) {
        self.instances.store(instances.max(1), Ordering::Relaxed);
    }

    /// Its status now.
    pub fn status(&self) -> ConsumerStatus {
        self.core.status()
    }

    /// Reports its status to `status` (the service's) instead of a channel
    /// of its own.
    pub fn reporting_to(mut self, status: Arc<tokio::sync::watch::Sender<ConsumerStatus>>) -> Self {
        self.core.status = status;
        self
    }

    pub fn update_status(&self, change: impl FnOnce(&mut ConsumerStatus)) {
        self.core.update_status(change);
    }

    /// Its status as it changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<ConsumerStatus> {
        self.core.status.subscribe()
    }

    /// Polls until `shutdown` resolves, pausing while the stream is idle,
    /// and adds the observations carried beside it. Errors are logged and
    /// retried, never fatal.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        self.update_status(|s| s.running = true);
        let stopped = tokio::sync::Notify::new();
        let polling = async {
            self.poll_until(shutdown).await;
            stopped.notify_one();
        };
        tokio::join!(polling, self.add_carried_until(&stopped));
        self.add_carried().await;
        self.hand_over().await;
        self.update_status(|s| s.running = false);
    }

    async fn poll_until(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut pause = Duration::from_millis(20);
        loop {
            pause = match self.poll().await {
                Ok(0) => {
                    // Every held shard was read to its current end.
                    self.update_status(|s| s.behind_ms = Some(0));
                    (pause * 2).min(self.options.idle)
                }
                Ok(_) => Duration::from_millis(20),
                Err(err) => {
                    tracing::warn!(error = %err, "stream consumer: pass failed, retrying");
                    self.update_status(|s| s.last_error_at = Some(Utc::now()));
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Adds the observations carried every `CARRY_FOR`, and soon after a
    /// pass that found nothing new, until `stopped`: in the same task as
    /// the passes, but never in one (see the module's comment).
    async fn add_carried_until(&self, stopped: &tokio::sync::Notify) {
        loop {
            tokio::select! {
                _ = stopped.notified() => return,
                _ = self.add_soon.notified() => tokio::time::sleep(ADD_WHEN_IDLE_AFTER).await,
                _ = tokio::time::sleep(CARRY_FOR) => {}
            }
            self.add_carried().await;
        }
    }

    /// Releases every lease this consumer holds, after its last checkpoint
    /// (the loop only stops between passes), so another instance takes the
    /// shards at once instead of waiting up to a lease for them to expire.
    async fn hand_over(&self) {
        let shards: Vec<String> = self.held.lock().drain().map(|(id, _)| id).collect();
        if shards.is_empty() {
            return;
        }
        let stream_arn = match self.stream_arn().await {
            Ok(arn) => arn,
            Err(err) => return tracing::warn!(error = %err, "could not hand the leases over; they expire instead"),
        };
        for shard_id in &shards {
            self.release(&stream_arn, shard_id).await;
        }
    }

    /// Gives one lease back, after this consumer's last checkpoint of it.
    async fn release(&self, stream_arn: &str, shard_id: &str) {
        let lease = self.lease_for(stream_arn, shard_id);
        match self.store.release_lease(&lease).await {
            Ok(true) => tracing::info!(shard_id, "lease handed over"),
            Ok(false) => tracing::info!(shard_id, "lease already taken over"),
            Err(err) => tracing::warn!(shard_id, error = %err, "could not hand the lease over; it expires instead"),
        }
    }

    /// The shards of `readable` whose lease this consumer holds now.
    fn leased<'a>(&self, readable: &[&'a StreamShard]) -> Vec<&'a StreamShard> {
        let held = self.held.lock();
        let now = Instant::now();
        readable.iter().copied().filter(|s| held.get(&s.id).is_some_and(|until| *until > now)).collect()
    }

    /// Leases beyond this consumer's fair share are handed over (between
    /// commits: the pass has ended), for a consumer that joined to take.
    async fn shed_surplus(&self, stream_arn: &str, readable: &[&StreamShard], fair: usize) {
        let leased = self.leased(readable);
        for shard in leased.iter().skip(fair) {
            tracing::info!(shard_id = shard.id, fair, "more than a fair share of the shards: handing one over");
            self.cursors.lock().await.remove(&shard.id);
            self.mark_held(&shard.id, false);
            self.release(stream_arn, &shard.id).await;
        }
    }

    pub async fn stream_arn(&self) -> Result<String, ConsumerError> {
        self.store.stream_arn().await?.ok_or(ConsumerError::NoStream)
    }

    /// The stream's ARN (DescribeTable) and shards (DescribeStream, a call
    /// per 100 shards), described again after `DESCRIBE_EVERY`, or at once
    /// once a shard has been read to its close (its children are to be
    /// found) or a shard's pass failed: a pass every 200 ms need not ask
    /// DynamoDB Streams (10 DescribeStream a second per stream) every time.
    async fn described(&self) -> Result<(String, Vec<StreamShard>), ConsumerError> {
        let mut described = self.described.lock().await;
        if let Some(d) = described.as_ref().filter(|d| d.at.elapsed() < DESCRIBE_EVERY) {
            return Ok((d.arn.clone(), d.shards.clone()));
        }
        let arn = self.stream_arn().await?;
        let shards = self.store.stream_shards(&arn).await?;
        *described = Some(Described { arn: arn.clone(), shards: shards.clone(), at: Instant::now() });
        Ok((arn, shards))
    }

    /// The stream is described again at the next pass.
    async fn describe_again(&self) {
        *self.described.lock().await = None;
    }

    /// The description and the checkpoints, described again first when
    /// another consumer finished a shard whose children this one does not
    /// list (see `children_unlisted`).
    async fn described_with_checkpoints(
        &self,
    ) -> Result<(String, Vec<StreamShard>, HashMap<String, Checkpoint>), ConsumerError> {
        let (mut arn, mut shards) = self.described().await?;
        let checkpoints = self.store.checkpoints(&arn).await?;
        if children_unlisted(&shards, &checkpoints) {
            let mut described = self.described.lock().await;
            if described.as_ref().is_some_and(|d| d.at.elapsed() >= CHILDREN_LOOKED_FOR_EVERY) {
                *described = None;
                drop(described);
                (arn, shards) = self.described().await?;
            }
        }
        Ok((arn, shards, checkpoints))
    }

    /// One pass over every shard of the stream: the records applied.
    pub async fn poll(&self) -> Result<u64, ConsumerError> {
        let (stream_arn, shards, checkpoints) = self.described_with_checkpoints().await?;
        let (mut held, mut caught_up, mut failed, mut reads) = (0, true, 0, Vec::new());
        let readable = readable(&shards, &checkpoints);
        // Leases are spread evenly: this consumer takes a free or expired
        // lease only while it holds fewer than its share, and hands over
        // what it holds beyond it, so a consumer that starts gets its share
        // and one that stops (or dies: its registry entry goes stale as its
        // leases expire) leaves its shards to the others.
        let fair = readable.len().div_ceil(self.instances.load(Ordering::Relaxed));
        let started = Instant::now();
        let now_ms = Utc::now().timestamp_millis();
        for shard in readable.iter().copied() {
            let mine = !self.leased(&[shard]).is_empty();
            let theirs = checkpoints.get(&shard.id).is_some_and(|c| c.held_by_other(&self.options.owner, now_ms));
            if !mine && (theirs || self.leased(&readable).len() >= fair) {
                continue;
            }
            // Each shard fails alone: one that cannot be read or committed
            // (its checkpoint refused, its partition throttled) is tried
            // again at the next pass while the others go on.
            match self.pass_shard(&stream_arn, &shard.id).await {
                Ok(ShardPass::NotHeld) => {}
                Ok(ShardPass::AtEnd) => held += 1,
                Ok(ShardPass::Read(read)) => {
                    held += 1;
                    caught_up = false;
                    reads.push(read);
                }
                Err(err) => {
                    self.shard_failed(&shard.id, &err).await;
                    (failed, caught_up) = (failed + 1, false);
                }
            }
        }
        // The shards' batches are applied together: the day's counter items
        // are written once a pass, not once a shard.
        let (read_in, shards_read) = (started.elapsed(), reads.len());
        let (applied, failed_commits) = self.apply_reads(&stream_arn, reads).await;
        failed += failed_commits;
        if applied > 0 {
            // What a change waits for between its write and its counters:
            // the pass's reads (each shard at most four times a second) and
            // its commits.
            tracing::debug!(
                held,
                shards_read,
                applied,
                read_ms = read_in.as_millis() as u64,
                apply_ms = (started.elapsed() - read_in).as_millis() as u64,
                "stream consumer: pass"
            );
        }
        self.shed_surplus(&stream_arn, &readable, fair).await;
        self.update_status(|s| s.shards_held = held.min(fair));
        // Minutes are marked observed only with everything read before
        // them added; what is not yet is added soon, and the next pass
        // marks them.
        if caught_up && held > 0 {
            if self.carried.lock().settled() {
                self.observe().await;
            } else {
                self.add_soon.notify_one();
            }
        }
        if failed > 0 && applied == 0 && held == 0 {
            return Err(ConsumerError::ShardsFailed(failed));
        }
        Ok(applied)
    }

    /// One shard's part of a pass: its next batch, read and not yet applied.
    async fn pass_shard(&self, stream_arn: &str, shard_id: &str) -> Result<ShardPass, ConsumerError> {
        // A lease with more than half its time left is not renewed on
        // every pass: an idle stream costs a write per shard per half-lease.
        let checkpoint = if self.holds(shard_id) {
            None
        } else {
            match self.lease(stream_arn, shard_id).await? {
                Some(checkpoint) => Some(checkpoint),
                None => return Ok(ShardPass::NotHeld),
            }
        };
        self.read_shard(stream_arn, shard_id, checkpoint).await
    }

    /// A shard whose pass failed: logged, and the stream described again.
    async fn shard_failed(&self, shard_id: &str, err: &(dyn std::fmt::Display + Sync)) {
        tracing::warn!(shard_id, error = %err, "stream consumer: this shard's pass failed");
        self.describe_again().await;
        self.update_status(|s| s.last_error_at = Some(Utc::now()));
    }

    /// Adds the observations carried so far, taken out while they are
    /// written so that commits go on meanwhile; what could not be added
    /// (and only it: `drain_deltas`) is put back for the next time. Public
    /// for callers that `poll` themselves.
    pub async fn add_carried(&self) {
        let mut taken = {
            let mut carried = self.carried.lock();
            if carried.deltas.is_empty() || carried.adding {
                return;
            }
            carried.adding = true;
            Taken { from: &self.carried, deltas: std::mem::take(&mut carried.deltas) }
        };
        if let Err(err) = self.store.drain_deltas(&mut taken.deltas).await {
            tracing::warn!(error = %err, "stream consumer: the observations carried could not be added; kept for the next time");
        }
    }

    /// Marks the minutes since this consumer's last mark, up to now, as
    /// observed: every record written before now that it reads has been
    /// applied, and the stream keeps every write (24 h). At most once a
    /// minute; a mark that fails is tried at the next pass.
    async fn observe(&self) {
        let now = epoch_minute(Utc::now());
        let mut observed_to = self.observed_to.lock().await;
        if *observed_to == Some(now) {
            return;
        }
        let from = observed_to.map_or(now, |last| (last + 1).max(now - 24 * 60));
        match self.store.mark_observed(from, now).await {
            Ok(()) => *observed_to = Some(now),
            Err(err) => tracing::warn!(error = %err, "could not mark the observed minutes"),
        }
    }

    /// Takes or renews the lease of a shard; `None` while another live
    /// consumer holds it.
    pub async fn lease(&self, stream_arn: &str, shard_id: &str) -> Result<Option<Checkpoint>, ConsumerError> {
        let lease = self.lease_for(stream_arn, shard_id);
        let checkpoint = self.store.take_lease(&lease, Utc::now().timestamp_millis()).await?;
        self.mark_held(shard_id, checkpoint.is_some());
        Ok(checkpoint)
    }

    fn lease_for<'a>(&'a self, stream_arn: &'a str, shard_id: &'a str) -> Lease<'a> {
        Lease {
            stream_arn,
            shard_id,
            owner: &self.options.owner,
            until_ms: Utc::now().timestamp_millis() + self.options.lease.as_millis() as i64,
        }
    }

    fn holds(&self, shard_id: &str) -> bool {
        let held = self.held.lock();
        held.get(shard_id).is_some_and(|until| until.saturating_duration_since(Instant::now()) > self.options.lease / 2)
    }

    fn mark_held(&self, shard_id: &str, holding: bool) {
        let mut held = self.held.lock();
        if holding {
            held.insert(shard_id.to_string(), Instant::now() + self.options.lease);
        } else {
            held.remove(shard_id);
        }
    }

    /// Reads a shard whose lease this consumer holds, one batch; `checkpoint`
    /// is what the store says when the lease was just taken or renewed. The
    /// cursor moves on only once the batch is applied (`advance`).
    async fn read_shard(
        &self,
        stream_arn: &str,
        shard_id: &str,
        checkpoint: Option<Checkpoint>,
    ) -> Result<ShardPass, ConsumerError> {
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(shard_id.to_string()).or_default();
        if let Some(checkpoint) = checkpoint
            && cursor.seq != checkpoint.seq
        {
            // Someone else moved this shard on (or this is a restart): resume
            // from the checkpoint, not from a stale iterator.
            *cursor = ShardCursor { iterator: None, seq: checkpoint.seq, read_at: cursor.read_at };
        }
        for _ in 0..READ_TRIES {
            let iterator = match cursor.iterator.take() {
                Some(iterator) => iterator,
                None => match self.store.shard_iterator(stream_arn, shard_id, cursor.seq.as_deref()).await {
                    Ok(iterator) => iterator,
                    // The records after the checkpoint are gone: asking for
                    // them again would fail forever.
                    Err(StoreError::Trimmed(_)) => self.resume_after_trim(stream_arn, shard_id).await?,
                    Err(err) => return Err(err.into()),
                },
            };
            let waited = cursor.wait();
            tokio::time::sleep(waited).await;
            let read_at = Instant::now();
            cursor.read_at = Some(read_at);
            let (records, next) = match self.store.get_records(&iterator, self.options.batch).await? {
                StreamBatch::Records { records, next } => {
                    let (waited_ms, read_ms) = (waited.as_millis() as u64, read_at.elapsed().as_millis() as u64);
                    tracing::trace!(shard_id, records = records.len(), waited_ms, read_ms, "stream consumer: read");
                    (records, next)
                }
                StreamBatch::Expired => continue,
                StreamBatch::Trimmed => {
                    cursor.iterator = Some(self.resume_after_trim(stream_arn, shard_id).await?);
                    continue;
                }
            };
            if records.is_empty() && next.is_some() {
                cursor.iterator = next;
                return Ok(ShardPass::AtEnd);
            }
            let read = ShardRead { shard_id: shard_id.to_string(), prev: cursor.seq.clone(), records, next };
            return Ok(ShardPass::Read(read));
        }
        Ok(ShardPass::AtEnd)
    }

    /// A shard's batch was applied: its checkpoint is now `seq`, and reading
    /// goes on after it (a closed shard's children are to be found).
    async fn advance(&self, read: ShardRead, seq: Option<String>) {
        let closed = read.closed();
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(read.shard_id).or_default();
        (cursor.seq, cursor.iterator) = (seq, read.next);
        drop(cursors);
        if closed {
            self.describe_again().await;
        }
    }

    /// Lease lost, or the batch was applied already: the shard starts over
    /// from whatever checkpoint is stored.
    async fn start_over(&self, shard_id: &str, why: &str) {
        tracing::info!(shard_id, why, "checkpoint moved; re-reading it");
        self.cursors.lock().await.remove(shard_id);
        self.mark_held(shard_id, false);
    }

    /// Applies the batches a pass read, several shards a transaction (each
    /// checkpoint moved in it): the records applied, and the shards whose
    /// batch could not be (tried again at the next pass).
    async fn apply_reads(&self, stream_arn: &str, reads: Vec<ShardRead>) -> (u64, usize) {
        let all: Vec<Record> = reads.iter().flat_map(|r| r.records.iter().cloned()).collect();
        let shards = match self.core.shards(&all).await {
            Ok(shards) => shards,
            Err(err) => {
                for read in &reads {
                    self.shard_failed(&read.shard_id, &err).await;
                }
                return (0, reads.len());
            }
        };
        let table = self.store.orders_table().to_string();
        let (mut applied, mut failed) = (0, 0);
        let mut group: Vec<(ShardRead, Vec<Reading>)> = Vec::new();
        let mut increments = Increments::default();
        for read in reads {
            let readings: Vec<Reading> = read.records.iter().map(|r| self.read_record(r, &shards, &read)).collect();
            let alone = readings.iter().fold(Increments::default(), |i, r| i.with(r, &table));
            let merged = readings.iter().fold(increments.clone(), |i, r| i.with(r, &table));
            // Room for the counter items beside each shard's checkpoint.
            if !group.is_empty() && merged.too_big(TRANSACTION_ITEMS.saturating_sub(group.len() + 1)) {
                let (a, f) = self.commit_group(stream_arn, std::mem::take(&mut group), &increments).await;
                (applied, failed) = (applied + a, failed + f);
                increments = Increments::default();
            }
            if alone.too_big(MAX_COUNTER_ITEMS) {
                // Too big for one transaction even alone: split by `apply`.
                let (a, f) = self.apply_alone(stream_arn, read).await;
                (applied, failed) = (applied + a, failed + f);
                continue;
            }
            increments = if group.is_empty() { alone } else { merged };
            group.push((read, readings));
        }
        if !group.is_empty() {
            let (a, f) = self.commit_group(stream_arn, group, &increments).await;
            (applied, failed) = (applied + a, failed + f);
        }
        (applied, failed)
    }

    fn read_record(&self, record: &Record, shards: &Shards, read: &ShardRead) -> Reading {
        let reading = self.core.read(record, shards);
        if reading.change.is_none() {
            let seq = record.dynamodb().and_then(|d| d.sequence_number());
            tracing::warn!(shard_id = read.shard_id, sequence = ?seq, "a stream record that is not a readable order: priced only");
        }
        reading
    }

    /// One transaction for the batches of `group`; if it fails, each shard
    /// alone, so that one shard's moved checkpoint holds up no other.
    async fn commit_group(
        &self,
        stream_arn: &str,
        group: Vec<(ShardRead, Vec<Reading>)>,
        increments: &Increments,
    ) -> (u64, usize) {
        let leases: Vec<Lease<'_>> = group.iter().map(|(r, _)| self.lease_for(stream_arn, &r.shard_id)).collect();
        let seqs: Vec<Option<String>> = group.iter().map(|(r, _)| r.last_seq().or_else(|| r.prev.clone())).collect();
        let moves: Vec<CheckpointMove<'_>> = group
            .iter()
            .zip(&leases)
            .zip(&seqs)
            .map(|(((read, _), lease), seq)| CheckpointMove {
                holder: Holder::Lease(lease),
                prev: read.prev.as_deref(),
                seq: seq.as_deref(),
                finished: read.closed(),
            })
            .collect();
        let mut observations = Deltas::default();
        let committed =
            self.core.commit_carrying(increments, Guard::Checkpoints(&moves), Some(&mut observations)).await;
        self.carried.lock().deltas.merge(observations);
        drop(moves);
        match committed {
            Ok(_) => {
                let mut batch = Batch::default();
                let mut records = 0;
                for ((read, readings), seq) in group.into_iter().zip(seqs) {
                    // The checkpoint write renewed the lease too.
                    self.mark_held(&read.shard_id, true);
                    readings.iter().for_each(|r| batch.add(r));
                    records += read.records.len() as u64;
                    self.advance(read, seq).await;
                }
                batch.changed(increments);
                self.core.record_progress(records, &batch);
                self.core.publish(batch).await;
                (records, 0)
            }
            Err(err) if group.len() > 1 => {
                tracing::info!(error = %err, shards = group.len(), "a transaction of several shards failed: each alone");
                let (mut applied, mut failed) = (0, 0);
                for (read, _) in group {
                    let (a, f) = self.apply_alone(stream_arn, read).await;
                    (applied, failed) = (applied + a, failed + f);
                }
                (applied, failed)
            }
            Err(err) => {
                let read = group.into_iter().next().map(|(read, _)| read).expect("a group of one");
                self.settle_failure(&read.shard_id, err).await
            }
        }
    }

    /// One shard's batch in as many transactions as it needs (`apply`).
    async fn apply_alone(&self, stream_arn: &str, read: ShardRead) -> (u64, usize) {
        match self.apply(stream_arn, &read.shard_id, read.prev.clone(), &read.records, read.closed()).await {
            Ok(seq) => {
                let records = read.records.len() as u64;
                self.advance(read, seq).await;
                (records, 0)
            }
            Err(err) => self.settle_failure(&read.shard_id, err).await,
        }
    }

    /// A batch that was not applied: a moved checkpoint starts the shard
    /// over (no failure); anything else fails the shard's pass.
    async fn settle_failure(&self, shard_id: &str, err: StoreError) -> (u64, usize) {
        match err {
            StoreError::Conflict(why) => {
                self.start_over(shard_id, &why).await;
                (0, 0)
            }
            err => {
                self.shard_failed(shard_id, &err).await;
                (0, 1)
            }
        }
    }

    /// Records written to a shard after its checkpoint were trimmed (the
    /// stream keeps them 24 hours) before this consumer read them: their
    /// changes are lost to the counters. Reading goes on from the oldest
    /// record kept (TRIM_HORIZON), the checkpoint moving on from where it
    /// was with the next commit; the loss is logged, shown in the status
    /// (`trimmed_at`) and recorded on the checkpoint item (`trimmedAt`), for
    /// `reconcile --full` to repair the state counters.
    async fn resume_after_trim(&self, stream_arn: &str, shard_id: &str) -> Result<String, ConsumerError> {
        let now = Utc::now();
        tracing::error!(
            shard_id,
            "stream records were trimmed before they were read: resuming at the oldest record kept; the counters \
             need `reconcile --full` over the days before it"
        );
        self.update_status(|s| s.trimmed_at = Some(now));
        if let Err(err) = self.store.mark_trimmed(stream_arn, shard_id, now).await {
            tracing::warn!(shard_id, error = %err, "could not record the trimmed records on the checkpoint");
        }
        Ok(self.store.shard_iterator(stream_arn, shard_id, None).await?)
    }

    /// Applies records of one shard, read after checkpoint `prev`, in as few
    /// transactions as the limits allow; returns the new checkpoint.
    pub async fn apply(
        &self,
        stream_arn: &str,
        shard_id: &str,
        mut prev: Option<String>,
        records: &[Record],
        closes_shard: bool,
    ) -> Result<Option<String>, StoreError> {
        let lease = self.lease_for(stream_arn, shard_id);
        let table = self.store.orders_table().to_string();
        let shards = self.core.shards(records).await?;
        let mut batch = Batch::default();
        let mut increments = Increments::default();
        let mut last_seq: Option<String> = None;
        for record in records {
            let seq = record.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string);
            let reading = self.core.read(record, &shards);
            if reading.change.is_none() {
                tracing::warn!(shard_id, sequence = ?seq, "a stream record that is not a readable order: priced only");
            }
            let mut next = increments.with(&reading, &table);
            if next.too_big(MAX_COUNTER_ITEMS) && last_seq.is_some() {
                // Commit what fits, then start the next transaction with this record.
                prev = self.commit(&lease, prev, last_seq.take(), false, &increments).await?;
                batch.changed(&increments);
                next = Increments::default().with(&reading, &table);
            }
            increments = next;
            batch.add(&reading);
            last_seq = seq.or(last_seq);
        }
        if !records.is_empty() || closes_shard {
            prev = self.commit(&lease, prev, last_seq, closes_shard, &increments).await?;
        }
        batch.changed(&increments);
        self.core.record_progress(records.len() as u64, &batch);
        self.core.publish(batch).await;
        Ok(prev)
    }

    /// One transaction; the checkpoint it leaves.
    async fn commit(
        &self,
        lease: &Lease<'_>,
        prev: Option<String>,
        seq: Option<String>,
        finished: bool,
        increments: &Increments,
    ) -> Result<Option<String>, StoreError> {
        let holder = Holder::Lease(lease);
        let moves = [CheckpointMove { holder, prev: prev.as_deref(), seq: seq.as_deref(), finished }];
        self.core.commit(increments, Guard::Checkpoints(&moves)).await?;
        // The checkpoint write renewed the lease too.
        self.mark_held(lease.shard_id, true);
        Ok(seq.or(prev))
    }
}

impl Applier {
    pub fn new(store: Arc<Store>, hub: Option<LiveHub>, pricing: bool) -> Self {
        Self {
            store,
            hub,
            status: Arc::new(tokio::sync::watch::Sender::new(ConsumerStatus::default())),
            layout: Layout::orders(),
            pricing,
            hot: Mutex::new(hotkeys::Tracker::default()),
            quality: Mutex::new(quality::Tracker::default()),
        }
    }

    /// Its status now.
    pub fn status(&self) -> ConsumerStatus {
        self.status.borrow().clone()
    }

    fn update_status(&self, change: impl FnOnce(&mut ConsumerStatus)) {
        self.status.send_modify(change);
    }

    /// The orders table, whose stream this is.
    pub fn table(&self) -> &str {
        self.store.orders_table()
    }

    /// The shard counts reading `records` needs (see `Shards`): one read of
    /// the days not known yet (a count once recorded is kept).
    pub async fn shards(&self, records: &[Record]) -> Result<Shards, StoreError> {
        let days = gsi2_days(records);
        if days.is_empty() {
            return Ok(Shards::default());
        }
        Ok(Shards::new(self.store.recorded_shards_now(&days).await?, self.store.shards()))
    }

    /// What a record means: its change, when, its writes priced, and its
    /// data quality figures.
    pub fn read(&self, record: &Record, shards: &Shards) -> Reading {
        let at = written_at(record);
        let (old, new) = images(record);
        let change = change_of(old.as_ref(), new.as_ref(), at);
        let writes = if self.pricing { priced(&self.layout, record) } else { Vec::new() };
        let quality = record.dynamodb().filter(|_| old.is_some() || new.is_some()).map(|data| {
            let key = pricing::key_text(data.keys().and_then(|k| k.get(keys::PK)));
            let size = data.new_image().map(pricing::item_size);
            let count = new.as_ref().and_then(crate::server::store::reading::pending_partition);
            let count = count.and_then(|(day, _)| shards.count(day));
            quality::observe(key, new.as_ref().zip(size), count, self.table(), &writes, at)
        });
        Reading { change, at, writes, quality }
    }

    /// One transaction of `increments` (and the hot keys they make), guarded
    /// by `guard`. Its raises of the days' versions are counted as this
    /// instance's own while the follower cannot read them (it holds the same
    /// lock), so they are pushed once; hot keys count only what committed.
    /// A checkpoint that moved is a `Conflict`; markers that exist are
    /// `Marked::AlreadyApplied`, and nothing was written.
    pub async fn commit(&self, increments: &Increments, guard: Guard<'_>) -> Result<Marked, StoreError> {
        self.commit_carrying(increments, guard, None).await
    }

    /// `commit`, but the observations' increments (`keys::is_observation`)
    /// are not written: once the rest committed they are added to `carried`,
    /// for the caller to write later (a Lambda tumbling window's close, the
    /// in-process consumer's `add_carried`).
    pub async fn commit_carrying(
        &self,
        increments: &Increments,
        guard: Guard<'_>,
        carried: Option<&mut Deltas>,
    ) -> Result<Marked, StoreError> {
        let asked = Instant::now();
        let mut versions = match &self.hub {
            Some(hub) => Some(hub.versions().await),
            None => None,
        };
        let locked_ms = asked.elapsed().as_millis() as u64;
        let plan = self.hot.lock().plan(&increments.chunk);
        self.seed_quality(&increments.quality).await;
        let quality = self.quality.lock().plan(&increments.quality);
        let mut applied = increments.deltas.clone();
        applied.extend(&plan.adds);
        applied.extend(&quality.adds);
        let chosen = applied.split_off(keys::is_chosen_observation);
        let observations = match carried {
            Some(_) => applied.split_off(keys::is_observation),
            None => Deltas::default(),
        };
        let sending = Instant::now();
        let outcome = match guard {
            Guard::Checkpoints(moves) => {
                self.store.commit_batches(moves, &applied).await?;
                Marked::Applied
            }
            Guard::Markers(markers) => self.store.commit_marked(markers, &applied).await?,
        };
        let total_ms = asked.elapsed().as_millis() as u64;
        let sent_ms = sending.elapsed().as_millis() as u64;
        tracing::trace!(locked_ms, sent_ms, total_ms, items = applied.items().count(), "stream consumer: commit");
        if outcome == Marked::Applied {
            self.add_chosen(&chosen).await;
            if let Some(carried) = carried {
                carried.merge(observations);
            }
            if let Some(versions) = versions.as_mut() {
                versions.committed(&increments.deltas.versions());
            }
            self.counted(&increments.chunk, plan);
            self.quality.lock().committed(quality);
            for ((kind, field), items) in increments.quality.drift() {
                crate::server::telemetry::drift(kind.as_str(), field, *items);
            }
        }
        Ok(outcome)
    }

    /// Reads what the quality items already hold before this consumer first
    /// adds to an hour's largest or a day's samples (`quality::Tracker::seed`).
    /// Best effort: unread, it adds its own, as before.
    async fn seed_quality(&self, chunk: &quality::Chunk) {
        let days = self.quality.lock().unseeded(chunk);
        for day in days {
            match self.store.quality_items(day).await {
                Ok(items) => self.quality.lock().seed(day, &items, chunk),
                Err(err) => tracing::warn!(error = %err, %day, "the day's quality items could not be read"),
            }
        }
    }

    /// A committed transaction's writes into the hot keys, and the keys of
    /// the last finished minute into the status.
    fn counted(&self, chunk: &hotkeys::Chunk, plan: hotkeys::Plan) {
        if chunk.is_empty() {
            return;
        }
        let top = {
            let mut hot = self.hot.lock();
            hot.committed(chunk, plan);
            let finished = epoch_minute(Utc::now()) - 1;
            hot.top(finished.min(hot.newest().unwrap_or(finished)), TOP_KEYS)
        };
        self.update_status(|s| s.hot_keys = top);
    }

    /// `records` were applied (`batch.bad` of them unreadable, priced only).
    pub fn record_progress(&self, records: u64, batch: &Batch) {
        let now = Utc::now();
        self.update_status(|s| {
            s.records_applied += records - batch.bad;
            s.bad_records += batch.bad;
            if records > 0 {
                s.last_applied_at = Some(now);
                s.behind_ms = batch.newest.map(|at| (now - at).num_milliseconds().max(0));
            }
        });
    }

    /// Adds the quality's largest items and samples a transaction chose,
    /// once it has applied (`keys::is_chosen_observation`). One that cannot
    /// be added is lost, as a stopped process's carried observations are:
    /// a figure of the quality page, never a counter.
    async fn add_chosen(&self, chosen: &Deltas) {
        if chosen.is_empty() {
            return;
        }
        if let Err(err) = self.store.add_deltas(chosen).await {
            tracing::warn!(error = %err, "the quality's largest items and samples of a commit could not be added");
        }
    }

    /// Tells this instance's dashboards what `batch` changed.
    pub async fn publish(&self, batch: Batch) {
        let Some(hub) = &self.hub else { return };
        for event in batch.events {
            hub.send(match event {
                counters::OrderEvent::Entered { day, order } => LiveEvent::Entered { date: day, order },
                counters::OrderEvent::Left { day, order_id } => LiveEvent::Left { date: day, order_id },
            });
        }
        let asked = Instant::now();
        let behind_ms = self.status.borrow().behind_ms;
        // Counters are read only for days someone watches; a connection
        // opened after this check read them itself, after the commit.
        for day in batch.days.into_iter().filter(|day| hub.is_watched(*day)) {
            match self.store.read_day_counts(day).await {
                Ok((counts, _)) => hub.send_counts(counts, behind_ms),
                Err(err) => tracing::warn!(error = %err, "could not read the counters to push them"),
            }
        }
        tracing::trace!(ms = asked.elapsed().as_millis() as u64, "stream consumer: published");
    }
}

/// What one applied batch means for the dashboards.
#[derive(Default)]
pub struct Batch {
    days: BTreeSet<NaiveDate>,
    events: Vec<counters::OrderEvent>,
    newest: Option<DateTime<Utc>>,
    bad: u64,
}

impl Batch {
    /// One record of the batch, applied.
    pub fn add(&mut self, reading: &Reading) {
        match &reading.change {
            Some(change) => {
                self.newest = self.newest.max(Some(change.at));
                self.events.extend(counters::events(change));
            }
            None => self.bad += 1,
        }
    }

    /// The days whose counters a transaction of the batch changed.
    pub fn changed(&mut self, increments: &Increments) {
        self.days.extend(increments.days());
    }
}

/// One record into a transaction's increments: its counters (when it is a
/// readable order), its write units, and the keys it wrote.
fn record_one(
    deltas: &mut Deltas,
    chunk: &mut hotkeys::Chunk,
    change: Option<&Change>,
    at: &DateTime<Utc>,
    table: &str,
    writes: &[pricing::Write],
) {
    if let Some(change) = change {
        deltas.record(change);
    }
    deltas.record_writes(at, table, writes);
    let minute = epoch_minute(*at);
    for write in writes {
        let resource = match &write.index {
            Some(index) => Resource::index(table, index.as_str()),
            None => Resource::table(table),
        };
        chunk.add(minute, &resource, &write.partition, write.units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> StreamShard {
        StreamShard { id: id.into(), parent: parent.map(str::to_string) }
    }

    #[test]
    fn children_wait_for_their_parent_to_finish() {
        let shards = vec![shard("p", None), shard("c1", Some("p")), shard("c2", Some("p")), shard("o", Some("gone"))];
        let ids = |c: &HashMap<String, Checkpoint>| {
            readable(&shards, c).into_iter().map(|s| s.id.clone()).collect::<Vec<_>>()
        };
        let none = HashMap::new();
        assert_eq!(ids(&none), vec!["p", "o"], "a parent no longer listed does not hold its child back");
        let done = HashMap::from([(
            "p".to_string(),
            Checkpoint { seq: Some("9".into()), finished: true, ..Default::default() },
        )]);
        assert_eq!(ids(&done), vec!["c1", "c2", "o"]);
    }

    #[test]
    fn a_shard_finished_without_its_children_listed_calls_for_a_new_description() {
        let finished = |id: &str| {
            HashMap::from([(
                id.to_string(),
                Checkpoint { seq: Some("9".into()), finished: true, ..Default::default() },
            )])
        };
        let before_split = vec![shard("p", None), shard("q", None)];
        assert!(!children_unlisted(&before_split, &HashMap::new()), "nothing finished");
        assert!(children_unlisted(&before_split, &finished("p")), "p finished, its children unknown");
        let after_split = vec![shard("p", None), shard("q", None), shard("c1", Some("p")), shard("c2", Some("p"))];
        assert!(!children_unlisted(&after_split, &finished("p")), "p's children are listed");
        assert!(!children_unlisted(&before_split, &finished("gone")), "a finished shard no longer listed");
    }

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

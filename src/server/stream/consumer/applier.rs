//! `Applier`: what stream records mean for the counters, and how the
//! increments of some records are committed with what guards them against
//! a second application; shared with the Lambda function.

use super::records::{Shards, change_of, gsi2_days, images, priced, written_at};
use super::{ConsumerStatus, TOP_KEYS};
use crate::model::LiveEvent;
use crate::server::store::error::StoreError;
use crate::server::store::keys;
use crate::server::store::usage::{Resource, epoch_minute};
use crate::server::store::{CheckpointMove, Marked, Marker, RangeOf, Store};
use crate::server::stream::counters::{self, Change, Deltas};
use crate::server::stream::hotkeys;
use crate::server::stream::live::LiveHub;
use crate::server::stream::pricing::{self, Layout};
use crate::server::stream::quality;
use aws_sdk_dynamodbstreams::types::Record;
use chrono::{DateTime, NaiveDate, Utc};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// Attributes one counter update may add to (the update expression is
/// limited to 4 KB; each `#aN :vN` takes up to a dozen bytes).
const MAX_ATTRIBUTES: usize = 120;

/// What stream records mean for the counters, and how the increments of
/// some records are committed with what guards them against a second
/// application: one code path for `consume` (the shard's checkpoint) and
/// the Lambda function (a marker per record).
pub struct Applier {
    store: Arc<Store>,
    hub: Option<LiveHub>,
    /// Where the status goes: a watch channel, so a reader (the service)
    /// always sees the latest without holding a lock the consumer takes.
    pub(super) status: Arc<tokio::sync::watch::Sender<ConsumerStatus>>,
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
    /// A replay: a marker per record, the records' applied range, and the
    /// shard's checkpoint moved past them where the replay moves it.
    Replayed { markers: &'a [Marker<'a>], range: RangeOf<'a>, checkpoint: Option<CheckpointMove<'a>> },
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

    pub(super) fn update_status(&self, change: impl FnOnce(&mut ConsumerStatus)) {
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
            Guard::Markers(markers) => self.store.commit_marked(markers, None, None, &applied).await?,
            Guard::Replayed { markers, range, checkpoint } => {
                self.store.commit_marked(markers, Some(&range), checkpoint.as_ref(), &applied).await?
            }
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

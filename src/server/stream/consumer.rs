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
//! Every call to the store goes through `Store`; this module decides what
//! to read and what a batch means.

use crate::model::{LiveEvent, PendingOrder, iso_millis};
use crate::server::store::error::StoreError;
use crate::server::store::{Checkpoint, Lease, Store, StreamBatch, StreamShard};
use crate::server::stream::counters::{self, Change, Deltas, Image};
use crate::server::stream::live::LiveHub;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Counter items one transaction may touch, leaving room for the checkpoint
/// (DynamoDB allows 100 items per transaction).
const MAX_COUNTER_ITEMS: usize = 90;
/// Attributes one counter update may add to (the update expression is
/// limited to 4 KB; each `#aN :vN` takes up to a dozen bytes).
const MAX_ATTRIBUTES: usize = 120;
/// Batches read from one shard in one pass before moving to the next shard.
const BATCHES_PER_PASS: u32 = 20;

#[derive(Clone, Debug)]
pub struct ConsumerOptions {
    /// Who holds the leases: unique per running consumer.
    pub owner: String,
    pub lease: Duration,
    /// Records asked for per GetRecords.
    pub batch: i32,
    /// Longest pause between polls of an idle stream.
    pub idle: Duration,
}

impl ConsumerOptions {
    pub fn new(owner: impl Into<String>) -> Self {
        Self { owner: owner.into(), lease: Duration::from_secs(15), batch: 500, idle: Duration::from_millis(200) }
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
}

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the orders table has no stream: run `northwind-ops provision` on a table with one")]
    NoStream,
}

/// Where this consumer is in one shard.
#[derive(Default)]
struct ShardCursor {
    iterator: Option<String>,
    /// The checkpoint this consumer last wrote or read.
    seq: Option<String>,
}

pub struct Consumer {
    store: Arc<Store>,
    options: ConsumerOptions,
    hub: Option<LiveHub>,
    status: Arc<Mutex<ConsumerStatus>>,
    cursors: tokio::sync::Mutex<HashMap<String, ShardCursor>>,
    /// Until when this consumer surely holds each lease (by its own clock).
    held: Mutex<HashMap<String, Instant>>,
}

/// The parts of an order image the counters read, as stored.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderImage {
    order_id: String,
    status: String,
    #[serde(with = "iso_millis")]
    created_at: DateTime<Utc>,
    /// Present while the order is in GSI2 (see `keys::GSI2PK`).
    #[serde(rename = "GSI2PK")]
    gsi2_pk: Option<String>,
}

/// An image as the counters see it; `None` for an item that is not a
/// readable order (it is counted as a bad record and skipped).
fn image(item: &HashMap<String, StreamValue>) -> Option<Image> {
    let order: OrderImage = serde_dynamo::from_item(item.clone()).ok()?;
    let pending = match &order.gsi2_pk {
        None => None,
        Some(pk) => Some(crate::server::store::keys::parse_pending_pk(pk)?),
    };
    // The list row, when the image holds every attribute the list shows.
    let row: Option<PendingOrder> = serde_dynamo::from_item(item.clone()).ok();
    Some(Image { order_id: order.order_id, status: order.status, created_at: order.created_at, pending, row })
}

/// A stream record as a change; `None` for a record that cannot be read.
pub fn change(record: &Record) -> Option<Change> {
    let data = record.dynamodb()?;
    let old = data.old_image().map(image).map_or(Some(None), |i| i.map(Some))?;
    let new = data.new_image().map(image).map_or(Some(None), |i| i.map(Some))?;
    if old.is_none() && new.is_none() {
        return None;
    }
    let at = data
        .approximate_creation_date_time()
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
        .unwrap_or_else(Utc::now);
    Some(Change { old, new, at })
}

/// The order a record changes, and its state just before the change (`None`
/// when it did not exist: an insert); `None` for a record that cannot be read.
pub fn state_before(record: &Record) -> Option<(String, Option<Image>)> {
    let data = record.dynamodb()?;
    let pk = data.keys()?.get(crate::server::store::keys::PK)?.as_s().ok()?;
    let order_id = crate::server::store::keys::parse_order_pk(pk)?.to_string();
    match data.old_image() {
        None => Some((order_id, None)),
        Some(item) => Some((order_id, Some(image(item)?))),
    }
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

impl Consumer {
    pub fn new(store: Arc<Store>, options: ConsumerOptions, hub: Option<LiveHub>) -> Self {
        Self {
            store,
            options,
            hub,
            status: Arc::new(Mutex::new(ConsumerStatus::default())),
            cursors: tokio::sync::Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
        }
    }

    pub fn status(&self) -> Arc<Mutex<ConsumerStatus>> {
        self.status.clone()
    }

    fn update_status(&self, change: impl FnOnce(&mut ConsumerStatus)) {
        change(&mut self.status.lock().expect("status lock poisoned"));
    }

    /// Polls until `shutdown` resolves, pausing while the stream is idle.
    /// Errors are logged and retried, never fatal.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        self.update_status(|s| s.running = true);
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
        self.update_status(|s| s.running = false);
    }

    pub async fn stream_arn(&self) -> Result<String, ConsumerError> {
        self.store.stream_arn().await?.ok_or(ConsumerError::NoStream)
    }

    /// One pass over every shard of the stream: the records applied.
    pub async fn poll(&self) -> Result<u64, ConsumerError> {
        let stream_arn = self.stream_arn().await?;
        let shards = self.store.stream_shards(&stream_arn).await?;
        let checkpoints = self.store.checkpoints(&stream_arn).await?;
        let (mut applied, mut held) = (0, 0);
        for shard in readable(&shards, &checkpoints) {
            // A lease with more than half its time left is not renewed on
            // every pass: an idle stream costs a write per shard per half-lease.
            let checkpoint = if self.holds(&shard.id) {
                None
            } else {
                match self.lease(&stream_arn, &shard.id).await? {
                    Some(checkpoint) => Some(checkpoint),
                    None => continue,
                }
            };
            held += 1;
            applied += self.read_shard(&stream_arn, &shard.id, checkpoint).await?;
        }
        self.update_status(|s| s.shards_held = held);
        Ok(applied)
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
        let held = self.held.lock().expect("lease map poisoned");
        held.get(shard_id).is_some_and(|until| until.saturating_duration_since(Instant::now()) > self.options.lease / 2)
    }

    fn mark_held(&self, shard_id: &str, holding: bool) {
        let mut held = self.held.lock().expect("lease map poisoned");
        if holding {
            held.insert(shard_id.to_string(), Instant::now() + self.options.lease);
        } else {
            held.remove(shard_id);
        }
    }

    /// Reads a shard whose lease this consumer holds; `checkpoint` is what
    /// the store says when the lease was just taken or renewed.
    async fn read_shard(
        &self,
        stream_arn: &str,
        shard_id: &str,
        checkpoint: Option<Checkpoint>,
    ) -> Result<u64, ConsumerError> {
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(shard_id.to_string()).or_default();
        if let Some(checkpoint) = checkpoint
            && cursor.seq != checkpoint.seq
        {
            // Someone else moved this shard on (or this is a restart): resume
            // from the checkpoint, not from a stale iterator.
            *cursor = ShardCursor { iterator: None, seq: checkpoint.seq };
        }
        let mut applied = 0;
        for _ in 0..BATCHES_PER_PASS {
            let iterator = match cursor.iterator.take() {
                Some(iterator) => iterator,
                None => self.store.shard_iterator(stream_arn, shard_id, cursor.seq.as_deref()).await?,
            };
            let (records, next) = match self.store.get_records(&iterator, self.options.batch).await? {
                StreamBatch::Records { records, next } => (records, next),
                StreamBatch::Expired => continue,
                StreamBatch::Trimmed => {
                    tracing::error!(
                        shard_id,
                        "stream records were trimmed before they were read: counters need `reconcile`"
                    );
                    cursor.iterator = Some(self.store.shard_iterator(stream_arn, shard_id, None).await?);
                    continue;
                }
            };
            let closed = next.is_none();
            if records.is_empty() && !closed {
                cursor.iterator = next;
                break;
            }
            match self.apply(stream_arn, shard_id, cursor.seq.clone(), &records, closed).await {
                Ok(seq) => {
                    applied += records.len() as u64;
                    cursor.seq = seq;
                    cursor.iterator = next;
                }
                Err(StoreError::Conflict(why)) => {
                    // Lease lost, or the batch was applied already: start over
                    // from whatever checkpoint is stored.
                    tracing::info!(shard_id, why, "checkpoint moved; re-reading it");
                    cursors.remove(shard_id);
                    self.mark_held(shard_id, false);
                    return Ok(applied);
                }
                Err(err) => return Err(err.into()),
            }
            if closed {
                break;
            }
        }
        Ok(applied)
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
        let mut batch = Batch::default();
        let mut deltas = Deltas::default();
        let mut last_seq: Option<String> = None;
        for record in records {
            let seq = record.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string);
            let Some(change) = change(record) else {
                batch.bad += 1;
                tracing::warn!(shard_id, sequence = ?seq, "skipping a stream record that is not a readable order");
                last_seq = seq.or(last_seq);
                continue;
            };
            let mut next = deltas.clone();
            next.record(&change);
            if too_big(&next) && last_seq.is_some() {
                // Commit what fits, then start the next transaction with this change.
                prev = self.commit(&lease, prev, last_seq.take(), false, &deltas).await?;
                batch.days.extend(deltas.days());
                next = Deltas::default();
                next.record(&change);
            }
            deltas = next;
            batch.add(&change);
            last_seq = seq.or(last_seq);
        }
        if !records.is_empty() || closes_shard {
            prev = self.commit(&lease, prev, last_seq, closes_shard, &deltas).await?;
        }
        batch.days.extend(deltas.days());
        self.record_progress(records.len() as u64, &batch);
        self.publish(batch).await;
        Ok(prev)
    }

    /// One transaction; the checkpoint it leaves. Its raises of the days'
    /// versions are counted as this instance's own while the follower cannot
    /// read them (it holds the same lock), so they are pushed once.
    async fn commit(
        &self,
        lease: &Lease<'_>,
        prev: Option<String>,
        seq: Option<String>,
        finished: bool,
        deltas: &Deltas,
    ) -> Result<Option<String>, StoreError> {
        let mut versions = match &self.hub {
            Some(hub) => Some(hub.versions().await),
            None => None,
        };
        self.store.commit_batch(lease, prev.as_deref(), seq.as_deref(), finished, deltas).await?;
        if let Some(versions) = versions.as_mut() {
            versions.committed(&deltas.versions());
        }
        // The checkpoint write renewed the lease too.
        self.mark_held(lease.shard_id, true);
        Ok(seq.or(prev))
    }

    fn record_progress(&self, records: u64, batch: &Batch) {
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

    async fn publish(&self, batch: Batch) {
        let Some(hub) = &self.hub else { return };
        for event in batch.events {
            hub.send(match event {
                counters::OrderEvent::Entered { day, order } => LiveEvent::Entered { date: day, order },
                counters::OrderEvent::Left { day, order_id } => LiveEvent::Left { date: day, order_id },
            });
        }
        let behind_ms = self.status.lock().expect("status lock poisoned").behind_ms;
        // Counters are read only for days someone watches; a connection
        // opened after this check read them itself, after the commit.
        for day in batch.days.into_iter().filter(|day| hub.is_watched(*day)) {
            match self.store.read_day_counts(day).await {
                Ok((counts, _)) => hub.send_counts(counts, behind_ms),
                Err(err) => tracing::warn!(error = %err, "could not read the counters to push them"),
            }
        }
    }
}

/// What one applied batch means for the dashboards.
#[derive(Default)]
struct Batch {
    days: BTreeSet<NaiveDate>,
    events: Vec<counters::OrderEvent>,
    newest: Option<DateTime<Utc>>,
    bad: u64,
}

impl Batch {
    fn add(&mut self, change: &Change) {
        self.newest = self.newest.max(Some(change.at));
        self.events.extend(counters::events(change));
    }
}

fn too_big(deltas: &Deltas) -> bool {
    deltas.item_count() > MAX_COUNTER_ITEMS || deltas.widest_item() > MAX_ATTRIBUTES
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
        let done = HashMap::from([("p".to_string(), Checkpoint { seq: Some("9".into()), finished: true })]);
        assert_eq!(ids(&done), vec!["c1", "c2", "o"]);
    }

    #[test]
    fn images_are_read_from_the_stream_format() {
        let item = HashMap::from([
            ("orderId".to_string(), StreamValue::S("o-1".into())),
            ("status".to_string(), StreamValue::S("PENDING".into())),
            ("createdAt".to_string(), StreamValue::S("2026-11-29T10:15:30.000Z".into())),
            ("GSI2PK".to_string(), StreamValue::S("STATUS#PENDING#2026-11-29#3".into())),
        ]);
        let image = image(&item).unwrap();
        assert_eq!(image.pending, Some((NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), 3)));
        assert!(image.row.is_none(), "no list row without every listed attribute");
        let mut corrupt = item.clone();
        corrupt.insert("GSI2PK".into(), StreamValue::S("STATUS#PENDING#garbage".into()));
        assert!(super::image(&corrupt).is_none());
        let record = |old: Option<HashMap<String, StreamValue>>| {
            let keys = HashMap::from([("PK".to_string(), StreamValue::S("ORDER#o-1".into()))]);
            let data = aws_sdk_dynamodbstreams::types::StreamRecord::builder().set_keys(Some(keys)).set_old_image(old);
            Record::builder().dynamodb(data.build()).build()
        };
        let (id, before) = state_before(&record(Some(item.clone()))).unwrap();
        assert_eq!((id.as_str(), before.unwrap().status.as_str()), ("o-1", "PENDING"));
        assert_eq!(state_before(&record(None)), Some(("o-1".into(), None)), "an insert: the order did not exist");
        assert_eq!(state_before(&record(Some(corrupt.clone()))), None);
        let mut not_an_order = item;
        not_an_order.remove("orderId");
        assert!(super::image(&not_an_order).is_none());
    }
}

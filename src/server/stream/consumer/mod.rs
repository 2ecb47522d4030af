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
//! to read and what a batch means: this file the passes over the shards
//! and their leases, `read` one shard's next batch, `commit` a pass's
//! batches into transactions, `applier` the `Applier`, and `records` what
//! one record says.

mod applier;
mod commit;
mod read;
mod records;

pub use applier::{Applier, Batch, Guard, Increments, Reading};
pub use records::{Shards, change, gsi2_days, state_before};

use crate::server::store::error::StoreError;
use crate::server::store::usage::epoch_minute;
use crate::server::store::{Checkpoint, Lease, Store, StreamShard};
use crate::server::stream::counters::Deltas;
use crate::server::stream::hotkeys::HotKey;
use crate::server::stream::live::LiveHub;
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use read::{ShardCursor, ShardPass};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the stream's description is reused (see `Consumer::described`).
const DESCRIBE_EVERY: Duration = Duration::from_secs(10);

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
    /// Listed shards this consumer has seen finished (`checkpoints`).
    finished: Mutex<HashSet<String>>,
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
            finished: Mutex::new(HashSet::new()),
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
        let mut checkpoints = self.checkpoints(&arn, &shards).await?;
        if children_unlisted(&shards, &checkpoints) {
            let mut described = self.described.lock().await;
            if described.as_ref().is_some_and(|d| d.at.elapsed() >= CHILDREN_LOOKED_FOR_EVERY) {
                *described = None;
                drop(described);
                (arn, shards) = self.described().await?;
                checkpoints = self.checkpoints(&arn, &shards).await?;
            }
        }
        Ok((arn, shards, checkpoints))
    }

    /// The checkpoints of the listed shards: read for those not known to be
    /// finished, remembered for the others. A finished shard's checkpoint
    /// never moves again, so once this consumer has seen one it does not
    /// read it again (while the shard is listed): a pass reads about as
    /// many checkpoints as the stream has open shards, the same in its first
    /// minute as after a day of rollovers and splits (some 200 listed at 32
    /// open), not every checkpoint the stream ever had.
    async fn checkpoints(
        &self,
        stream_arn: &str,
        shards: &[StreamShard],
    ) -> Result<HashMap<String, Checkpoint>, ConsumerError> {
        let unknown: Vec<String> = {
            let finished = self.finished.lock();
            shards.iter().filter(|s| !finished.contains(&s.id)).map(|s| s.id.clone()).collect()
        };
        let mut checkpoints = self.store.checkpoints_of(stream_arn, &unknown).await?;
        let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
        let mut finished = self.finished.lock();
        finished.retain(|id| listed.contains(id.as_str()));
        finished.extend(checkpoints.iter().filter(|(_, c)| c.finished).map(|(id, _)| id.clone()));
        for id in finished.iter() {
            checkpoints.entry(id.clone()).or_insert_with(|| Checkpoint { finished: true, ..Checkpoint::default() });
        }
        Ok(checkpoints)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> StreamShard {
        StreamShard { id: id.into(), parent: parent.map(str::to_string), end: None }
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
}

//! Anchoring a reconciliation: snapshots of counter items together with the
//! stream positions the consumer had reached, and the read of the stream
//! after those positions that says which orders changed since.

use super::drift::Touched;
use super::{ReconcileError, Reconciler};
use crate::server::store::error::StoreError;
use crate::server::store::{
    Checkpoint, CounterItem, Snapshot, StreamBatch, StreamShard, TRANSACT_GET_MAX, backoff, snapshot_items,
};
use crate::server::stream::consumer::state_before;
use crate::server::stream::counters::Key;
use aws_sdk_dynamodbstreams::types::Record;
use backon::Retryable;
use chrono::{DateTime, Utc};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Snapshots retried while the stream's shards change under them.
const SETTLE_TRIES: u32 = 5;
/// Records asked for per GetRecords.
const BATCH: i32 = 1000;
/// Pause between reads of a shard that has nothing new (DynamoDB Streams
/// allows five GetRecords a second per shard).
const POLL: Duration = Duration::from_millis(250);
/// A stream call refused for throughput (a shard's five GetRecords a second
/// are shared with the consumers, reading every 250 ms; a stream's ten
/// DescribeStream calls with every reader) is sent again this many times,
/// with the store's backoff, before the run fails.
const THROTTLED_TRIES: u32 = 8;

/// Where the consumer stood in one shard at a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// Nothing applied yet: every record of the shard is after it.
    Start,
    /// Applied up to and including this sequence number.
    After(String),
    /// Read to its end: no record is after it.
    Finished,
}

impl Position {
    fn of(checkpoint: Option<&Checkpoint>) -> Self {
        match checkpoint {
            Some(c) if c.finished => Position::Finished,
            Some(Checkpoint { seq: Some(seq), .. }) => Position::After(seq.clone()),
            _ => Position::Start,
        }
    }

    /// Whether the record numbered `seq` comes after this position.
    pub fn precedes(&self, seq: &str) -> bool {
        match self {
            Position::Start => true,
            Position::After(applied) => compare_seq(seq, applied) == Ordering::Greater,
            Position::Finished => false,
        }
    }
}

/// Whether a checkpoint not yet marked finished has applied the whole of
/// its closed shard: it stands at or past the shard's
/// `EndingSequenceNumber`, so no record of the shard is after it. A shard
/// counts as closed only with an end *and* a child listed (`has_child`):
/// a rollover or a split lists the children with the closed parent, and
/// the local engines give their one open shard an end too (the last record
/// so far), which must not finish it. An open shard, or a checkpoint with
/// no position, has not.
pub fn at_shard_end(checkpoint: &Checkpoint, shard: &StreamShard, has_child: bool) -> bool {
    match (&checkpoint.seq, &shard.end) {
        (Some(seq), Some(end)) => has_child && !checkpoint.finished && compare_seq(seq, end) != Ordering::Less,
        _ => false,
    }
}

/// `keys` cut into snapshots, `group` keys at a time kept together, each
/// reading at most `room` items (a counter costs its item and its
/// sub-items: `snapshot_items`); `None` when one group alone does not fit.
fn chunks(keys: &[Key], group: usize, room: usize) -> Option<Vec<&[Key]>> {
    let mut chunks = Vec::new();
    let (mut start, mut end) = (0, 0);
    while end < keys.len() {
        let next = (end + group.max(1)).min(keys.len());
        if snapshot_items(&keys[start..next]) <= room {
            end = next;
        } else if start == end {
            return None;
        } else {
            chunks.push(&keys[start..end]);
            start = end;
        }
    }
    if start < end {
        chunks.push(&keys[start..end]);
    }
    Some(chunks)
}

/// How many of `moving` unfinished shards' checkpoints to read inside each
/// snapshot, and the snapshots (`chunks`): as many as fit beside the
/// largest group of counters; `None` when one group alone fills a
/// TransactGetItems.
fn fit(keys: &[Key], group: usize, moving: usize) -> Option<(usize, Vec<&[Key]>)> {
    (0..=moving.min(TRANSACT_GET_MAX))
        .rev()
        .find_map(|inside| chunks(keys, group, TRANSACT_GET_MAX - inside).map(|chunks| (inside, chunks)))
}

/// Sequence numbers are decimal strings of varying width: compared as numbers.
pub fn compare_seq(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// One snapshot: counter items and the positions they are consistent with.
#[derive(Clone, Debug)]
pub struct Taken {
    pub keys: Vec<Key>,
    pub counters: Vec<CounterItem>,
    pub positions: HashMap<String, Position>,
}

impl Taken {
    fn position(&self, shard_id: &str) -> &Position {
        self.positions.get(shard_id).unwrap_or(&Position::Start)
    }
}

/// Snapshots of counter items (several when they do not fit one
/// transaction), each with the consumer's positions in every shard.
#[derive(Clone, Debug)]
pub struct Anchor {
    pub stream_arn: String,
    pub shards: Vec<StreamShard>,
    pub taken: Vec<Taken>,
    /// When the last snapshot had been read.
    pub at: Instant,
    /// The same moment, by the clock (what `refusal::far_behind` measures from).
    pub taken_at: DateTime<Utc>,
}

/// What the read of the stream after an anchor found.
#[derive(Clone, Debug, Default)]
pub struct StreamRead {
    /// Per snapshot (as in `Anchor::taken`): the orders changed after its positions.
    pub touched: Vec<Touched>,
    pub records: u64,
    /// Records that name no readable order (the consumer skips them too).
    pub unreadable: u64,
    /// The oldest record after a snapshot's position (unapplied at the
    /// anchor): its shard and when it was written.
    pub oldest_unapplied: Option<(String, DateTime<Utc>)>,
}

impl Reconciler {
    /// Snapshots of `keys`, in groups of `group` keys kept in one snapshot.
    /// The shards are listed before and after: a shard that appears in
    /// between may hold records the snapshot's checkpoints do not cover, so
    /// the snapshots are taken again.
    ///
    /// Only the checkpoints that can still move are read with the counters:
    /// a finished shard's never moves again (the consumer reads a shard's
    /// children only once it is finished), so read before the snapshot it
    /// is its position at the snapshot too. After a day of rollovers a
    /// stream lists some 200 shards, of which only the open ones (and a
    /// closed one not yet read to its end) move; see `snapshot_beside` for
    /// when even those do not fit one TransactGetItems.
    pub(super) async fn anchor(&self, keys: &[Key], group: usize) -> Result<Anchor, ReconcileError> {
        let stream_arn = self.store.stream_arn().await?.ok_or(ReconcileError::NoStream)?;
        for _ in 0..SETTLE_TRIES {
            let shards = self.shards_listed(&stream_arn).await?;
            let ids: Vec<String> = shards.iter().map(|s| s.id.clone()).collect();
            let read = self.checkpoints_unless_finished(&stream_arn, &shards).await?;
            let finished = |id: &String| read.get(id).is_some_and(|c| c.finished);
            // Not started first: the likeliest to stay still if some must
            // be read beside the snapshot rather than in it.
            let mut moving: Vec<String> = ids.iter().filter(|id| !finished(id)).cloned().collect();
            moving.sort_by_key(|id| read.get(id).is_some_and(|c| c.seq.is_some()));
            let Some((inside, chunks)) = fit(keys, group, moving.len()) else {
                return Err(ReconcileError::TooManyShards { shards: moving.len(), items: group });
            };
            let (beside, inside) = moving.split_at(moving.len() - inside);
            let mut taken = Vec::new();
            for chunk in chunks {
                let (snapshot, beside) = self.snapshot_beside(chunk, &stream_arn, inside, beside).await?;
                let mut positions: HashMap<String, Position> =
                    ids.iter().filter(|id| finished(id)).map(|id| (id.clone(), Position::Finished)).collect();
                for id in inside {
                    positions.insert(id.clone(), Position::of(snapshot.checkpoints.get(id)));
                }
                for (id, checkpoint) in beside {
                    positions.insert(id, Position::of(checkpoint.as_ref()));
                }
                taken.push(Taken { keys: chunk.to_vec(), counters: snapshot.counters, positions });
            }
            let (at, taken_at) = (Instant::now(), Utc::now());
            let known: HashSet<&String> = ids.iter().collect();
            if self.shards_listed(&stream_arn).await?.iter().all(|s| known.contains(&s.id)) {
                return Ok(Anchor { stream_arn, shards, taken, at, taken_at });
            }
        }
        Err(ReconcileError::Unsettled(SETTLE_TRIES))
    }

    /// The checkpoints of `shards`, read unless an earlier anchor saw them
    /// finished (then remembered as finished): what the anchor reads before
    /// its snapshots stays about the open shards, however many are listed.
    /// A closed shard's checkpoint at its end (`at_shard_end`) is finished
    /// here, and in the store with its expiry: the Lambda form never learns
    /// that a shard ended, so without this its rolled-over shards'
    /// checkpoints would be kept, and read, for ever.
    async fn checkpoints_unless_finished(
        &self,
        stream_arn: &str,
        shards: &[StreamShard],
    ) -> Result<HashMap<String, Checkpoint>, ReconcileError> {
        let unknown: Vec<String> = {
            let finished = self.finished.lock();
            shards.iter().filter(|s| !finished.contains(&s.id)).map(|s| s.id.clone()).collect()
        };
        let mut read = self.store.checkpoints_of(stream_arn, &unknown).await?;
        let parents: HashSet<&str> = shards.iter().filter_map(|s| s.parent.as_deref()).collect();
        for shard in shards {
            if let Some(checkpoint) = read.get_mut(&shard.id)
                && at_shard_end(checkpoint, shard, parents.contains(shard.id.as_str()))
            {
                let seq = checkpoint.seq.as_deref().unwrap_or_default();
                // Finished whether or not the mark is written: the position
                // is exact either way, and the next run tries the mark again.
                if self.options.mark_finished {
                    match self.store.finish_checkpoint(stream_arn, &shard.id, seq).await {
                        Ok(_) => {
                            tracing::debug!(shard = shard.id, seq, "a closed shard's checkpoint at its end: finished")
                        }
                        Err(err) => tracing::info!(shard = shard.id, error = %err, "a finished checkpoint not marked"),
                    }
                }
                checkpoint.finished = true;
            }
        }
        let listed: HashSet<&String> = shards.iter().map(|s| &s.id).collect();
        let mut finished = self.finished.lock();
        finished.retain(|id| listed.contains(id));
        finished.extend(read.iter().filter(|(_, c)| c.finished).map(|(id, _)| id.clone()));
        for id in finished.iter() {
            read.entry(id.clone()).or_insert_with(|| Checkpoint { finished: true, ..Checkpoint::default() });
        }
        Ok(read)
    }

    /// One snapshot of `chunk` with the checkpoints of `inside`, and the
    /// checkpoints of `beside` as they were at that snapshot.
    ///
    /// `beside` is empty unless more shards are unfinished than fit one
    /// TransactGetItems with a counter and its sub-items (83, at 16 sub-items:
    /// a table of over 83 partitions, or a closed shard not yet read to its
    /// end for each of many open ones). Their checkpoints are then read
    /// (strongly consistent) just before the snapshot and just after it: a
    /// checkpoint's sequence number only grows and `finished` is only ever
    /// set, so one found the same twice did not move in between, and was at
    /// the snapshot's moment what both reads say. One that moved may have
    /// moved with increments the snapshot saw or did not see, so the three
    /// reads are made again, up to `SETTLE_TRIES` times; a stream busy in
    /// every one of its shards can keep moving them, and then the anchor is
    /// refused and says why, rather than anchored where it cannot be exact.
    async fn snapshot_beside(
        &self,
        chunk: &[Key],
        stream_arn: &str,
        inside: &[String],
        beside: &[String],
    ) -> Result<(Snapshot, Vec<(String, Option<Checkpoint>)>), ReconcileError> {
        let state = |c: Option<&Checkpoint>| c.map(|c| (c.seq.clone(), c.finished));
        for _ in 0..SETTLE_TRIES {
            let before =
                if beside.is_empty() { HashMap::new() } else { self.store.checkpoints_of(stream_arn, beside).await? };
            let snapshot = self.store.snapshot(chunk, stream_arn, inside).await?;
            if beside.is_empty() {
                return Ok((snapshot, Vec::new()));
            }
            let after = self.store.checkpoints_of(stream_arn, beside).await?;
            if beside.iter().all(|id| state(before.get(id)) == state(after.get(id))) {
                let positions = beside.iter().map(|id| (id.clone(), before.get(id).cloned())).collect();
                return Ok((snapshot, positions));
            }
        }
        Err(ReconcileError::Unsteady {
            unfinished: inside.len() + beside.len(),
            beside: beside.len(),
            tries: SETTLE_TRIES,
        })
    }

    /// Reads the stream after the anchor's positions, parents before
    /// children, until every shard is closed or caught up with `read_end`
    /// (the moment the index or Scan read ended) plus the grace.
    pub(super) async fn read_stream(
        &self,
        anchor: &Anchor,
        read_end: DateTime<Utc>,
    ) -> Result<StreamRead, ReconcileError> {
        let mut lease = self.reader_lease(&anchor.stream_arn).await?;
        let result = self.read_lineages(anchor, read_end, &mut lease).await;
        if let Err(err) = self.store.release_reader_lease(&anchor.stream_arn, &self.options.owner).await {
            tracing::warn!(error = %err, "could not give the stream-reader lease back; it runs out by itself");
        }
        if let Ok(read) = &result
            && read.unreadable > 0
        {
            // The consumer skips these too; the orders they name are judged by the index.
            tracing::warn!(unreadable = read.unreadable, "stream records that name no readable order");
        }
        result
    }

    async fn read_lineages(
        &self,
        anchor: &Anchor,
        read_end: DateTime<Utc>,
        lease: &mut ReaderLease,
    ) -> Result<StreamRead, ReconcileError> {
        let until = Until::new(read_end, self.options.grace);
        let mut read = StreamRead { touched: vec![Touched::new(); anchor.taken.len()], ..Default::default() };
        // Shard id -> whether it was read to its close (`false`: caught up, open).
        let mut ended: HashMap<String, bool> = HashMap::new();
        for shard in &anchor.shards {
            if anchor.taken.iter().all(|t| *t.position(&shard.id) == Position::Finished) {
                ended.insert(shard.id.clone(), true);
            }
        }
        let mut listed = anchor.shards.clone();
        loop {
            let next = ready(&listed, &ended);
            if next.is_empty() {
                return Ok(read);
            }
            for shard in next {
                let closed = self.read_shard(anchor, &shard.id, &until, &mut read, lease).await?;
                ended.insert(shard.id, closed);
            }
            // Shards split while being read have children to read too.
            listed = self.shards_listed(&anchor.stream_arn).await?;
        }
    }

    /// Reads one shard from the earliest snapshot position; whether it was
    /// read to its close.
    async fn read_shard(
        &self,
        anchor: &Anchor,
        shard_id: &str,
        until: &Until,
        read: &mut StreamRead,
        lease: &mut ReaderLease,
    ) -> Result<bool, ReconcileError> {
        let positions: Vec<&Position> = anchor.taken.iter().map(|t| t.position(shard_id)).collect();
        let mut last = earliest(&positions);
        let mut iterator = self.iterator(anchor, shard_id, last.as_deref()).await?;
        loop {
            lease.renew_if_due(self).await?;
            let batch = (|| self.store.get_records(&iterator, BATCH))
                .retry(backoff(THROTTLED_TRIES))
                .sleep(tokio::time::sleep)
                .when(StoreError::is_throttled)
                .await?;
            let (records, next) = match batch {
                StreamBatch::Records { records, next } => (records, next),
                StreamBatch::Expired => {
                    iterator = self.iterator(anchor, shard_id, last.as_deref()).await?;
                    continue;
                }
                StreamBatch::Trimmed => return Err(ReconcileError::Trimmed(shard_id.to_string())),
            };
            let mut past_end = false;
            for record in &records {
                read.note(shard_id, record, &positions);
                past_end |= until.is_past(record);
                last = seq_of(record).or(last);
            }
            let Some(next) = next else { return Ok(true) };
            if past_end || (records.is_empty() && until.passed()) {
                return Ok(false);
            }
            if records.is_empty() {
                tokio::time::sleep(POLL).await;
            }
            iterator = next;
        }
    }

    async fn iterator(&self, anchor: &Anchor, shard_id: &str, after: Option<&str>) -> Result<String, ReconcileError> {
        match self.store.shard_iterator(&anchor.stream_arn, shard_id, after).await {
            Err(StoreError::Trimmed(_)) => Err(ReconcileError::Trimmed(shard_id.to_string())),
            other => Ok(other?),
        }
    }

    /// The stream's shards, the listing retried while throttled.
    async fn shards_listed(&self, stream_arn: &str) -> Result<Vec<StreamShard>, StoreError> {
        (|| self.store.stream_shards(stream_arn))
            .retry(backoff(THROTTLED_TRIES))
            .sleep(tokio::time::sleep)
            .when(StoreError::is_throttled)
            .await
    }

    /// Takes the stream-reader lease, waiting up to one lease period for
    /// another reconciliation to finish its read.
    async fn reader_lease(&self, stream_arn: &str) -> Result<ReaderLease, ReconcileError> {
        let mut lease = ReaderLease { stream_arn: stream_arn.to_string(), renew_at: Instant::now() };
        let give_up = Instant::now() + self.options.lease;
        while !lease.take(self).await? {
            if Instant::now() > give_up {
                return Err(ReconcileError::ReaderBusy(self.options.lease));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(lease)
    }
}

/// The stream-reader lease as this reconciliation holds it.
pub(super) struct ReaderLease {
    stream_arn: String,
    /// When half of it has run: time to renew.
    renew_at: Instant,
}

impl ReaderLease {
    async fn take(&mut self, reconciler: &Reconciler) -> Result<bool, StoreError> {
        let now = Utc::now().timestamp_millis();
        let until = now + reconciler.options.lease.as_millis() as i64;
        let taken = reconciler.store.take_reader_lease(&self.stream_arn, &reconciler.options.owner, until, now).await?;
        self.renew_at = Instant::now() + reconciler.options.lease / 2;
        Ok(taken)
    }

    async fn renew_if_due(&mut self, reconciler: &Reconciler) -> Result<(), ReconcileError> {
        if Instant::now() < self.renew_at {
            return Ok(());
        }
        match self.take(reconciler).await? {
            true => Ok(()),
            false => Err(ReconcileError::LeaseLost),
        }
    }
}

/// When a shard counts as caught up: DynamoDB documents stream records as
/// near-real-time without a bound, so every write made before the read
/// ended is assumed readable within the grace.
struct Until {
    /// An empty read after this instant: nothing more to come.
    deadline: Instant,
    /// A record created after this (stream times are rounded down to the
    /// second) was written after the read ended; a shard's records are in
    /// the order of their writes, so every earlier write was before it.
    after: DateTime<Utc>,
}

impl Until {
    fn new(read_end: DateTime<Utc>, grace: Duration) -> Self {
        let since_end = (Utc::now() - read_end).to_std().unwrap_or_default();
        Self {
            deadline: Instant::now() + grace.saturating_sub(since_end),
            after: read_end + chrono::Duration::seconds(1),
        }
    }

    fn passed(&self) -> bool {
        Instant::now() > self.deadline
    }

    fn is_past(&self, record: &Record) -> bool {
        written_at(record).is_some_and(|t| t > self.after)
    }
}

impl StreamRead {
    /// Notes a record's order as changed after every snapshot whose position
    /// the record follows, unless an earlier record of it already was.
    fn note(&mut self, shard_id: &str, record: &Record, positions: &[&Position]) {
        self.records += 1;
        let Some(seq) = seq_of(record) else {
            self.unreadable += 1;
            return;
        };
        if positions.iter().any(|p| p.precedes(&seq))
            && let Some(written) = written_at(record)
            && self.oldest_unapplied.as_ref().is_none_or(|(_, oldest)| written < *oldest)
        {
            self.oldest_unapplied = Some((shard_id.to_string(), written));
        }
        let Some((order_id, before)) = state_before(record) else {
            self.unreadable += 1;
            return;
        };
        for (touched, position) in self.touched.iter_mut().zip(positions) {
            if position.precedes(&seq) && !touched.contains_key(&order_id) {
                touched.insert(order_id.clone(), before.clone());
            }
        }
    }
}

/// When a record was written, as the stream says (to the second).
fn written_at(record: &Record) -> Option<DateTime<Utc>> {
    let at = record.dynamodb().and_then(|d| d.approximate_creation_date_time());
    at.and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
}

fn seq_of(record: &Record) -> Option<String> {
    record.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string)
}

/// The position to start reading from: the earliest of the snapshots'
/// (`None`: the shard's start).
fn earliest(positions: &[&Position]) -> Option<String> {
    let mut earliest: Option<&str> = None;
    for position in positions {
        match position {
            Position::Start => return None,
            Position::After(seq) => {
                earliest = Some(earliest.map_or(seq, |e| if compare_seq(seq, e).is_lt() { seq } else { e }))
            }
            Position::Finished => {}
        }
    }
    earliest.map(str::to_string)
}

/// Shards not read yet whose parent is gone or was read to its close. A
/// shard whose parent was still open when caught up holds only records
/// written after the read's end.
fn ready(listed: &[StreamShard], ended: &HashMap<String, bool>) -> Vec<StreamShard> {
    let ids: HashSet<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    listed
        .iter()
        .filter(|s| !ended.contains_key(&s.id))
        .filter(|s| s.parent.as_deref().is_none_or(|p| !ids.contains(p) || ended.get(p) == Some(&true)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_hold_as_many_counters_with_their_sub_items_as_fit() {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
        let minutes = crate::server::store::keys::metric_minutes_keys(day);
        // The old whole-day item alone, then 24 hours of 17 items each.
        let sizes = |chunks: Vec<&[Key]>| chunks.iter().map(|c| c.len()).collect::<Vec<_>>();
        assert_eq!(sizes(chunks(&minutes, 1, 100 - 32).unwrap()), [4, 4, 4, 4, 4, 4, 1]);
        assert_eq!(sizes(chunks(&minutes, 1, 17).unwrap()), [1; 25]);
        assert_eq!(chunks(&minutes, 1, 16), None, "an hour and its sub-items do not fit");
        assert_eq!(chunks(&minutes[..1], 1, 1).map(sizes), Some(vec![1]));
        assert_eq!(chunks(&minutes, 2, 100).map(sizes), Some(vec![6, 4, 4, 4, 4, 3]));
    }

    #[test]
    fn as_many_checkpoints_go_inside_a_snapshot_as_fit_beside_a_counter() {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 5).unwrap();
        let pending = [crate::server::store::keys::metric_pending_key(day)];
        let items = snapshot_items(&pending);
        assert_eq!(fit(&pending, 1, 32).map(|(inside, c)| (inside, c.len())), Some((32, 1)), "all inside");
        assert_eq!(fit(&pending, 1, 250).map(|(inside, _)| inside), Some(TRANSACT_GET_MAX - items), "the rest beside");
        assert_eq!(fit(&pending, 1, 0).map(|(inside, _)| inside), Some(0));
        let minutes = crate::server::store::keys::metric_minutes_keys(day);
        assert_eq!(fit(&minutes, 1, 90).map(|(inside, c)| (inside, c.len())), Some((83, 25)), "an hour a snapshot");
    }

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        assert_eq!(compare_seq("000000000000000000010", "9"), Ordering::Greater);
        assert_eq!(compare_seq("100", "099"), Ordering::Greater);
        assert_eq!(compare_seq("0042", "42"), Ordering::Equal);
        assert!(Position::After("41".into()).precedes("42"));
        assert!(!Position::After("42".into()).precedes("42"));
        assert!(Position::Start.precedes("1") && !Position::Finished.precedes("99"));
    }

    #[test]
    fn a_checkpoint_at_or_past_its_closed_shards_end_is_finished() {
        let shard =
            |end: Option<&str>| StreamShard { id: "s".into(), end: end.map(str::to_string), ..Default::default() };
        let at = |seq: Option<&str>| Checkpoint { seq: seq.map(str::to_string), ..Checkpoint::default() };
        assert!(at_shard_end(&at(Some("0100")), &shard(Some("100")), true), "at the end, written wider");
        assert!(at_shard_end(&at(Some("101")), &shard(Some("100")), true), "past it");
        assert!(!at_shard_end(&at(Some("99")), &shard(Some("100")), true), "a record left");
        assert!(!at_shard_end(&at(Some("100")), &shard(None), true), "still open");
        assert!(!at_shard_end(&at(Some("100")), &shard(Some("100")), false), "an end but no child: open");
        assert!(!at_shard_end(&at(None), &shard(Some("100")), true), "not started");
        let done = Checkpoint { finished: true, ..at(Some("100")) };
        assert!(!at_shard_end(&done, &shard(Some("100")), true), "already marked: nothing to write");
    }

    #[test]
    fn reading_starts_at_the_earliest_snapshot_position() {
        let (a, b) = (Position::After("0120".into()), Position::After("99".into()));
        assert_eq!(earliest(&[&a, &b, &Position::Finished]).as_deref(), Some("99"));
        assert_eq!(earliest(&[&a, &Position::Start]), None);
    }

    #[test]
    fn children_are_read_after_a_parent_read_to_its_close_only() {
        let shard = |id: &str, parent: Option<&str>| StreamShard {
            id: id.into(),
            parent: parent.map(str::to_string),
            end: None,
        };
        let listed = vec![shard("p", None), shard("c", Some("p")), shard("o", Some("gone"))];
        let ids = |ended: &HashMap<String, bool>| ready(&listed, ended).into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(&HashMap::new()), vec!["p", "o"]);
        assert_eq!(ids(&HashMap::from([("p".into(), true), ("o".into(), false)])), vec!["c"]);
        assert!(ids(&HashMap::from([("p".into(), false), ("o".into(), false)])).is_empty(), "p still open");
    }
}

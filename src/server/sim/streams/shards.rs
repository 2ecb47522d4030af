//! One simulated stream: its shards, which record goes to which, sequence
//! numbers, splits, trimming and the per-shard read limit. Pure: every
//! operation is told the time, so the tests drive the clock.
//!
//! How DynamoDB Streams behaves, and so this: each partition of the table
//! has a shard, and an item's changes are in the shard of its partition in
//! the order they were made. A partition that splits closes its shard (it
//! gets an `EndingSequenceNumber`) and two new shards, each naming it as
//! `ParentShardId`, take its keys: every record of a key in the parent comes
//! before every one in the child. Here a shard owns a range of a 64-bit hash
//! of the partition key; a split cuts the range in two.

use aws_sdk_dynamodbstreams::types::{AttributeValue, Record};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// DynamoDB Streams' limits, and the simulation's clock settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// How long an iterator may be used (15 minutes on AWS).
    pub iterator_ttl: Duration,
    /// How long records are kept (24 hours on AWS).
    pub retention: Duration,
    /// Records one GetRecords may return (1,000 on AWS).
    pub max_records: usize,
    /// Bytes one GetRecords may return (1 MB on AWS), by the records' `SizeBytes`.
    pub max_bytes: u64,
    /// GetRecords calls a shard takes a second (5 on AWS); 0: no limit.
    pub reads_per_shard_second: u32,
    /// DescribeStream calls the stream takes a second (10 on AWS); 0: no limit.
    pub describes_per_second: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            iterator_ttl: Duration::from_secs(15 * 60),
            retention: Duration::from_secs(24 * 60 * 60),
            max_records: 1000,
            max_bytes: 1024 * 1024,
            reads_per_shard_second: 5,
            describes_per_second: 10,
        }
    }
}

/// What DynamoDB Streams answers instead of records; each is the exception
/// of the same name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("{0}")]
    ResourceNotFound(String),
    #[error("{0}")]
    TrimmedDataAccess(String),
    #[error("{0}")]
    ExpiredIterator(String),
    #[error("{0}")]
    LimitExceeded(String),
    #[error("{0}")]
    Validation(String),
}

impl StreamError {
    /// The exception's name, as the `__type` of the answer.
    pub fn code(&self) -> &'static str {
        match self {
            StreamError::ResourceNotFound(_) => "ResourceNotFoundException",
            StreamError::TrimmedDataAccess(_) => "TrimmedDataAccessException",
            StreamError::ExpiredIterator(_) => "ExpiredIteratorException",
            StreamError::LimitExceeded(_) => "LimitExceededException",
            StreamError::Validation(_) => "ValidationException",
        }
    }
}

/// A sequence number: 21 digits, as DynamoDB's are, so that they compare the
/// same as text and as numbers.
pub fn seq_text(seq: u128) -> String {
    format!("{seq:021}")
}

pub fn parse_seq(text: &str) -> Option<u128> {
    (!text.is_empty() && text.len() <= 38 && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// The first sequence number handed out: 21 digits from the start.
const FIRST_SEQ: u128 = 100_000_000_000_000_000_000;

struct Stored {
    seq: u128,
    /// When the record arrived in the stream: what retention counts from.
    at: Instant,
    record: Record,
}

/// The calls of the last second, for a limit of calls a second (a shard's
/// GetRecords, the stream's DescribeStream).
#[derive(Default)]
struct PerSecond(VecDeque<Instant>);

impl PerSecond {
    /// Counts a call at `now`, unless `limit` calls came in the second
    /// before it: then it is refused (`false`) and not counted. A limit of
    /// 0 refuses nothing.
    fn take(&mut self, now: Instant, limit: u32) -> bool {
        if limit == 0 {
            return true;
        }
        while self.0.front().is_some_and(|at| now.saturating_duration_since(*at) >= Duration::from_secs(1)) {
            self.0.pop_front();
        }
        if self.0.len() >= limit as usize {
            return false;
        }
        self.0.push_back(now);
        true
    }
}

/// One shard, open or closed.
pub struct Shard {
    pub id: String,
    pub parent: Option<String>,
    /// The partition-key hashes it owns, both ends included.
    lo: u64,
    hi: u64,
    pub start_seq: u128,
    /// Set when the shard closed: its last sequence number.
    pub end_seq: Option<u128>,
    records: VecDeque<Stored>,
    /// The highest sequence number trimmed away, if any.
    trimmed_through: Option<u128>,
    closed_at: Option<Instant>,
    /// Records it took while open: the busiest open shard splits first.
    received: u64,
    /// When its recent GetRecords calls were answered (the last second's).
    reads: PerSecond,
}

impl Shard {
    pub fn is_open(&self) -> bool {
        self.end_seq.is_none()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn owns(&self, hash: u64) -> bool {
        self.is_open() && self.lo <= hash && hash <= self.hi
    }
}

/// Where an iterator reads from: the first record at or after a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position(pub u128);

/// How an iterator is asked for (`ShardIteratorType`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    TrimHorizon,
    Latest,
    At(u128),
    After(u128),
}

/// What one GetRecords gives: records, and where to go on from (`None`
/// once a closed shard has been read to its end).
pub struct Read {
    pub records: Vec<Record>,
    pub next: Option<Position>,
}

/// The simulated shards of one stream.
pub struct Shards {
    /// Every shard, in the order created (parents before their children).
    shards: Vec<Shard>,
    next_seq: u128,
    /// Makes shard ids unique to this stream.
    salt: u64,
    created: u64,
    /// The partition-key attribute records are routed by (`None`: all keys).
    hash_key: Option<String>,
    /// When the last DescribeStream calls were answered.
    describes: PerSecond,
}

impl Shards {
    /// `count` open shards splitting the hash space evenly.
    pub fn new(count: u32, salt: u64, hash_key: Option<String>, now_ms: i64) -> Shards {
        let count = u64::from(count.max(1));
        let mut shards = Shards {
            shards: Vec::new(),
            next_seq: FIRST_SEQ,
            salt,
            created: 0,
            hash_key,
            describes: PerSecond::default(),
        };
        let width = u64::MAX / count;
        for i in 0..count {
            let lo = i * width;
            let hi = if i + 1 == count { u64::MAX } else { (i + 1) * width - 1 };
            shards.open(None, lo, hi, now_ms);
        }
        shards
    }

    fn open(&mut self, parent: Option<String>, lo: u64, hi: u64, now_ms: i64) -> String {
        // AWS's form: `shardId-<20 digits of creation time>-<8 hex>`.
        let tag = xxhash_rust::xxh3::xxh3_64(&[self.salt.to_le_bytes(), self.created.to_le_bytes()].concat());
        let id = format!("shardId-{:020}-{:08x}", now_ms.max(0), tag as u32);
        self.created += 1;
        // The starting number is the shard's own: its records come after it.
        let start_seq = self.take_seq();
        self.shards.push(Shard {
            id: id.clone(),
            parent,
            lo,
            hi,
            start_seq,
            end_seq: None,
            records: VecDeque::new(),
            trimmed_through: None,
            closed_at: None,
            received: 0,
            reads: PerSecond::default(),
        });
        id
    }

    fn take_seq(&mut self) -> u128 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    pub fn all(&self) -> &[Shard] {
        &self.shards
    }

    pub fn open_count(&self) -> usize {
        self.shards.iter().filter(|s| s.is_open()).count()
    }

    fn shard(&self, id: &str) -> Result<&Shard, StreamError> {
        self.shards.iter().find(|s| s.id == id).ok_or_else(|| {
            StreamError::ResourceNotFound(format!("Requested resource not found: Shard: {id} in Stream"))
        })
    }

    fn shard_mut(&mut self, id: &str) -> Result<&mut Shard, StreamError> {
        self.shards.iter_mut().find(|s| s.id == id).ok_or_else(|| {
            StreamError::ResourceNotFound(format!("Requested resource not found: Shard: {id} in Stream"))
        })
    }

    /// The hash a record is routed by: its partition key's value (every
    /// key attribute when the key schema is not known), as text.
    pub fn hash_of(&self, record: &Record) -> u64 {
        let keys = record.dynamodb().and_then(|d| d.keys());
        let mut parts: Vec<String> = match (keys, &self.hash_key) {
            (Some(keys), Some(name)) => keys.get(name).map(|v| vec![key_text(name, v)]).unwrap_or_default(),
            (Some(keys), None) => keys.iter().map(|(name, v)| key_text(name, v)).collect(),
            (None, _) => Vec::new(),
        };
        parts.sort();
        xxhash_rust::xxh3::xxh3_64(parts.join("\u{1f}").as_bytes())
    }

    /// Adds a record from the table to the open shard of its key, with that
    /// shard's next sequence number; returns the shard's id.
    pub fn ingest(&mut self, mut record: Record, now: Instant) -> String {
        let hash = self.hash_of(&record);
        let seq = self.take_seq();
        if let Some(data) = record.dynamodb.as_mut() {
            data.sequence_number = Some(seq_text(seq));
        }
        let shard = match self.shards.iter_mut().find(|s| s.owns(hash)) {
            Some(shard) => shard,
            // The open shards always cover the whole hash space.
            None => unreachable!("no open shard owns hash {hash}"),
        };
        shard.records.push_back(Stored { seq, at: now, record });
        shard.received += 1;
        shard.id.clone()
    }

    /// Splits an open shard (the busiest when none is named): it closes at
    /// its last record, and two children take its keys. Returns the
    /// children's ids.
    pub fn split(&mut self, id: Option<&str>, now: Instant, now_ms: i64) -> Result<(String, String), StreamError> {
        let index = match id {
            Some(id) => {
                let index = self.shards.iter().position(|s| s.id == id).ok_or_else(|| {
                    StreamError::ResourceNotFound(format!("Requested resource not found: Shard: {id} in Stream"))
                })?;
                if !self.shards[index].is_open() {
                    return Err(StreamError::Validation(format!("shard {id} is closed: only an open shard splits")));
                }
                index
            }
            None => self
                .shards
                .iter()
                .enumerate()
                .filter(|(_, s)| s.is_open() && s.lo < s.hi)
                .max_by_key(|(_, s)| s.received)
                .map(|(i, _)| i)
                .ok_or_else(|| StreamError::Validation("no open shard can split".into()))?,
        };
        let (lo, hi) = (self.shards[index].lo, self.shards[index].hi);
        if lo == hi {
            return Err(StreamError::Validation("the shard owns a single hash and cannot split".into()));
        }
        let parent = &mut self.shards[index];
        parent.end_seq = Some(parent.records.back().map_or(parent.start_seq, |r| r.seq));
        parent.closed_at = Some(now);
        let parent_id = parent.id.clone();
        let mid = lo + (hi - lo) / 2;
        let left = self.open(Some(parent_id.clone()), lo, mid, now_ms);
        let right = self.open(Some(parent_id), mid + 1, hi, now_ms);
        Ok((left, right))
    }

    /// Rolls every open shard over, as DynamoDB Streams does every few
    /// hours without a split: each closes at its last record and one child
    /// takes all its keys. Returns (parent, child) ids.
    pub fn rollover(&mut self, now: Instant, now_ms: i64) -> Vec<(String, String)> {
        let open: Vec<usize> = (0..self.shards.len()).filter(|&i| self.shards[i].is_open()).collect();
        let mut rolled = Vec::with_capacity(open.len());
        for index in open {
            let parent = &mut self.shards[index];
            parent.end_seq = Some(parent.records.back().map_or(parent.start_seq, |r| r.seq));
            parent.closed_at = Some(now);
            let (parent_id, lo, hi, received) = (parent.id.clone(), parent.lo, parent.hi, parent.received);
            let child = self.open(Some(parent_id.clone()), lo, hi, now_ms);
            // The child carries the parent's load, so a scheduled split
            // still picks the busiest key range.
            self.shards.last_mut().expect("just opened").received = received;
            rolled.push((parent_id, child));
        }
        rolled
    }

    /// Drops the records older than `retention`; a closed shard whose
    /// records are all gone and that closed longer ago than that is gone
    /// too (DynamoDB deletes such shards).
    pub fn trim(&mut self, now: Instant, retention: Duration) {
        for shard in &mut self.shards {
            while shard.records.front().is_some_and(|r| now.saturating_duration_since(r.at) >= retention) {
                let gone = shard.records.pop_front().map(|r| r.seq);
                shard.trimmed_through = gone.or(shard.trimmed_through);
            }
        }
        self.shards.retain(|s| {
            s.is_open()
                || !s.records.is_empty()
                || s.closed_at.is_none_or(|at| now.saturating_duration_since(at) < retention)
        });
    }

    /// Where an iterator of this kind starts (GetShardIterator).
    pub fn iterator(&self, id: &str, start: &Start) -> Result<Position, StreamError> {
        let shard = self.shard(id)?;
        let horizon = shard.trimmed_through.map_or(shard.start_seq, |t| t + 1);
        let position = match start {
            Start::TrimHorizon => horizon,
            // Past every record there is now: a closed shard's end, or the
            // next number handed out.
            Start::Latest => shard.end_seq.map_or(self.next_seq, |end| end + 1),
            Start::At(seq) | Start::After(seq) => {
                let seq = *seq;
                if seq < shard.start_seq || shard.end_seq.is_some_and(|end| seq > end) || seq >= self.next_seq {
                    return Err(StreamError::Validation(format!(
                        "Invalid SequenceNumber {} for shard {id}: outside the shard's range",
                        seq_text(seq)
                    )));
                }
                let position = if matches!(start, Start::After(_)) { seq + 1 } else { seq };
                if position < horizon {
                    return Err(trimmed(id, position));
                }
                position
            }
        };
        Ok(Position(position))
    }

    /// GetRecords: up to `limit` records from `position`, under the shard's
    /// calls-per-second limit.
    pub fn read(
        &mut self,
        id: &str,
        position: Position,
        limit: usize,
        now: Instant,
        limits: &Limits,
    ) -> Result<Read, StreamError> {
        let shard = self.shard_mut(id)?;
        if shard.trimmed_through.is_some_and(|t| t >= position.0) {
            return Err(trimmed(id, position.0));
        }
        if !shard.reads.take(now, limits.reads_per_shard_second) {
            return Err(StreamError::LimitExceeded(format!(
                "Rate exceeded for shard {id}: at most {} GetRecords calls a second",
                limits.reads_per_shard_second
            )));
        }
        let first = shard.records.partition_point(|r| r.seq < position.0);
        let (mut records, mut bytes, mut next) = (Vec::new(), 0u64, position.0);
        for stored in shard.records.range(first..) {
            let size = stored.record.dynamodb().and_then(|d| d.size_bytes()).unwrap_or(0).max(0) as u64;
            if records.len() >= limit || (!records.is_empty() && bytes + size > limits.max_bytes) {
                break;
            }
            bytes += size;
            records.push(stored.record.clone());
            next = stored.seq + 1;
        }
        // A closed shard is read to its end once no record is left at or
        // after `next`: past its last record, or (a shard closed without a
        // record, its end its own starting number) at its start.
        let at_end = shard.end_seq.is_some() && shard.records.back().is_none_or(|r| r.seq < next);
        Ok(Read { records, next: (!at_end).then_some(Position(next)) })
    }

    /// Counts a DescribeStream call against the stream's limit.
    pub fn describe_call(&mut self, now: Instant, limits: &Limits) -> Result<(), StreamError> {
        if !self.describes.take(now, limits.describes_per_second) {
            return Err(StreamError::LimitExceeded(format!(
                "Rate exceeded: at most {} DescribeStream calls a second",
                limits.describes_per_second
            )));
        }
        Ok(())
    }

    /// Records held per shard, by id.
    pub fn held(&self) -> HashMap<String, usize> {
        self.shards.iter().map(|s| (s.id.clone(), s.records.len())).collect()
    }
}

fn trimmed(id: &str, position: u128) -> StreamError {
    StreamError::TrimmedDataAccess(format!(
        "Attempted to access a sequence number ({}) of shard {id} beyond the trim horizon",
        seq_text(position)
    ))
}

/// A key value as text: its type and its value, so `S "1"` and `N "1"` differ.
fn key_text(name: &str, value: &AttributeValue) -> String {
    let value = match value {
        AttributeValue::S(s) => format!("S:{s}"),
        AttributeValue::N(n) => format!("N:{n}"),
        AttributeValue::B(b) => format!("B:{}", b.as_ref().iter().map(|x| format!("{x:02x}")).collect::<String>()),
        other => format!("{other:?}"),
    };
    format!("{name}={value}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodbstreams::types::StreamRecord;

    fn record(key: &str, n: u32) -> Record {
        let keys = HashMap::from([("PK".to_string(), AttributeValue::S(key.into()))]);
        let data = StreamRecord::builder().set_keys(Some(keys)).sequence_number("upstream").size_bytes(100).build();
        Record::builder().event_id(format!("{key}-{n}")).dynamodb(data).build()
    }

    fn ids(records: &[Record]) -> Vec<String> {
        records.iter().map(|r| r.event_id().unwrap().to_string()).collect()
    }

    fn seq_of(record: &Record) -> u128 {
        parse_seq(record.dynamodb().unwrap().sequence_number().unwrap()).unwrap()
    }

    fn unlimited() -> Limits {
        Limits { reads_per_shard_second: 0, ..Limits::default() }
    }

    fn read_all(shards: &mut Shards, id: &str, now: Instant) -> (Vec<Record>, bool) {
        let mut position = shards.iterator(id, &Start::TrimHorizon).unwrap();
        let mut out = Vec::new();
        loop {
            let read = shards.read(id, position, 1000, now, &unlimited()).unwrap();
            let empty = read.records.is_empty();
            out.extend(read.records);
            match read.next {
                None => return (out, true),
                Some(_) if empty => return (out, false),
                Some(next) => position = next,
            }
        }
    }

    #[test]
    fn a_key_stays_in_one_shard_in_order_and_the_shards_cover_every_hash() {
        let now = Instant::now();
        let mut shards = Shards::new(8, 1, Some("PK".into()), 0);
        assert_eq!(shards.open_count(), 8);
        let mut home: HashMap<String, String> = HashMap::new();
        for n in 0..20 {
            for key in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"] {
                let shard = shards.ingest(record(key, n), now);
                assert_eq!(home.entry(key.to_string()).or_insert(shard.clone()), &shard, "{key} moved");
            }
        }
        let used: std::collections::HashSet<&String> = home.values().collect();
        assert!(used.len() > 2, "ten keys spread over more than two of eight shards: {used:?}");
        for shard in shards.all().iter().map(|s| s.id.clone()).collect::<Vec<_>>() {
            let (records, closed) = read_all(&mut shards, &shard, now);
            assert!(!closed);
            let seqs: Vec<u128> = records.iter().map(seq_of).collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "increasing within a shard");
            for key in home.iter().filter(|(_, s)| **s == shard).map(|(k, _)| k) {
                let mine: Vec<String> =
                    ids(&records).into_iter().filter(|id| id.starts_with(&format!("{key}-"))).collect();
                let expected: Vec<String> = (0..20).map(|n| format!("{key}-{n}")).collect();
                assert_eq!(mine, expected, "every record of {key}, in order");
            }
        }
    }

    #[test]
    fn a_split_closes_the_parent_at_its_last_record_and_children_take_its_keys() {
        let now = Instant::now();
        let mut shards = Shards::new(1, 2, Some("PK".into()), 0);
        let parent = shards.all()[0].id.clone();
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        for key in &keys {
            shards.ingest(record(key, 0), now);
        }
        let (left, right) = shards.split(None, now, 1).unwrap();
        for key in &keys {
            shards.ingest(record(key, 1), now);
        }
        let (before, closed) = read_all(&mut shards, &parent, now);
        assert!(closed, "the parent reads to its end and says so");
        assert_eq!(before.len(), 40);
        let end = shards.all()[0].end_seq.unwrap();
        assert_eq!(end, seq_of(before.last().unwrap()));
        let (l, _) = read_all(&mut shards, &left, now);
        let (r, _) = read_all(&mut shards, &right, now);
        assert_eq!(l.len() + r.len(), 40, "every later record is in one child");
        assert!(!l.is_empty() && !r.is_empty(), "both children take keys");
        assert!(l.iter().chain(&r).all(|rec| seq_of(rec) > end), "children's numbers come after the parent's");
        for shard in [&left, &right] {
            assert_eq!(shards.shard(shard).unwrap().parent.as_deref(), Some(parent.as_str()));
        }
        assert!(matches!(shards.split(Some(&parent), now, 2), Err(StreamError::Validation(_))));
        assert!(matches!(shards.split(Some("shardId-nope"), now, 2), Err(StreamError::ResourceNotFound(_))));
        // A closed shard's LATEST is past its end: nothing more is read.
        let latest = shards.iterator(&parent, &Start::Latest).unwrap();
        assert!(shards.read(&parent, latest, 10, now, &unlimited()).unwrap().next.is_none());
    }

    #[test]
    fn positions_older_than_retention_are_trimmed_and_empty_closed_shards_go() {
        let t0 = Instant::now();
        let retention = Duration::from_secs(10);
        let mut shards = Shards::new(1, 3, Some("PK".into()), 0);
        let id = shards.all()[0].id.clone();
        shards.ingest(record("a", 0), t0);
        shards.ingest(record("a", 1), t0 + Duration::from_secs(5));
        let first = shards.iterator(&id, &Start::TrimHorizon).unwrap();
        let old = seq_of(&read_all(&mut shards, &id, t0).0[0]);
        shards.trim(t0 + Duration::from_secs(11), retention);
        assert!(matches!(shards.iterator(&id, &Start::At(old)), Err(StreamError::TrimmedDataAccess(_))));
        assert!(shards.iterator(&id, &Start::After(old)).is_ok(), "just past the trimmed record is kept");
        assert!(
            matches!(shards.read(&id, first, 10, t0, &unlimited()), Err(StreamError::TrimmedDataAccess(_))),
            "an iterator taken before the trim reads trimmed data"
        );
        let (kept, _) = read_all(&mut shards, &id, t0);
        assert_eq!(ids(&kept), vec!["a-1"], "TRIM_HORIZON starts at the oldest record kept");
        shards.split(None, t0 + Duration::from_secs(12), 1).unwrap();
        shards.trim(t0 + Duration::from_secs(40), retention);
        assert_eq!(shards.all().len(), 2, "the closed parent, its records trimmed, is deleted");
        assert!(shards.all().iter().all(Shard::is_open));
    }

    #[test]
    fn a_rollover_closes_every_open_shard_and_one_child_takes_all_its_keys() {
        let t0 = Instant::now();
        let retention = Duration::from_secs(10);
        let mut shards = Shards::new(4, 6, Some("PK".into()), 0);
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let home: HashMap<String, String> = keys.iter().map(|k| (k.clone(), shards.ingest(record(k, 0), t0))).collect();
        let rolled = shards.rollover(t0 + Duration::from_secs(1), 1);
        assert_eq!(rolled.len(), 4, "every open shard rolls over");
        assert_eq!((shards.open_count(), shards.all().len()), (4, 8));
        let child_of: HashMap<String, String> = rolled.iter().cloned().collect();
        for key in &keys {
            let now_in = shards.ingest(record(key, 1), t0 + Duration::from_secs(1));
            assert_eq!(now_in, child_of[&home[key]], "{key} goes on in its shard's one child");
        }
        for (parent, child) in &rolled {
            let (before, closed) = read_all(&mut shards, parent, t0);
            assert!(closed, "a rolled-over shard reads to its end");
            let end = shards.shard(parent).unwrap().end_seq.unwrap();
            let (after, _) = read_all(&mut shards, child, t0);
            assert!(after.iter().all(|r| seq_of(r) > end));
            assert_eq!(before.len(), after.len(), "the child took exactly its parent's keys");
        }
        // A shard that closed without a record reads to its end too.
        let mut quiet = Shards::new(1, 7, Some("PK".into()), 0);
        let (parent, _) = quiet.rollover(t0, 1).remove(0);
        assert_eq!(read_all(&mut quiet, &parent, t0), (Vec::new(), true), "an empty closed shard ends");
        // Rolled twice more, then retention passes: only the lineage of
        // the last retention period stays listed.
        shards.rollover(t0 + Duration::from_secs(5), 2);
        shards.rollover(t0 + Duration::from_secs(9), 3);
        assert_eq!(shards.all().len(), 16);
        shards.trim(t0 + Duration::from_secs(16), retention);
        assert_eq!(shards.all().len(), 8, "the shards closed over 10 s ago, records trimmed, are gone");
    }

    #[test]
    fn reads_are_limited_per_shard_per_second_and_by_count() {
        let now = Instant::now();
        let limits = Limits { max_records: 1000, ..Limits::default() };
        let mut shards = Shards::new(2, 4, Some("PK".into()), 0);
        for n in 0..30 {
            shards.ingest(record("x", n), now);
        }
        let id = shards.all().iter().find(|s| !s.is_empty()).unwrap().id.clone();
        let position = shards.iterator(&id, &Start::TrimHorizon).unwrap();
        for _ in 0..5 {
            assert_eq!(shards.read(&id, position, 7, now, &limits).unwrap().records.len(), 7);
        }
        assert!(matches!(shards.read(&id, position, 7, now, &limits), Err(StreamError::LimitExceeded(_))));
        let later = now + Duration::from_millis(1000);
        assert!(shards.read(&id, position, 7, later, &limits).is_ok(), "a second later it answers again");
        let tight = Limits { max_bytes: 250, reads_per_shard_second: 0, ..Limits::default() };
        assert_eq!(shards.read(&id, position, 100, later, &tight).unwrap().records.len(), 2, "1 MB, scaled down");
        for _ in 0..10 {
            shards.describe_call(now, &limits).unwrap();
        }
        assert!(matches!(shards.describe_call(now, &limits), Err(StreamError::LimitExceeded(_))));
    }

    #[test]
    fn sequence_numbers_are_21_digits_and_bad_ones_are_refused() {
        assert_eq!(seq_text(FIRST_SEQ), "100000000000000000000");
        assert_eq!(parse_seq("100000000000000000042"), Some(FIRST_SEQ + 42));
        for bad in ["", "12a", "-1", &"9".repeat(39)] {
            assert_eq!(parse_seq(bad), None, "{bad}");
        }
        let shards = Shards::new(1, 5, None, 0);
        let id = shards.all()[0].id.clone();
        assert!(id.starts_with("shardId-00000000000000000000-"), "{id}");
        assert!(matches!(shards.iterator(&id, &Start::At(FIRST_SEQ + 100)), Err(StreamError::Validation(_))));
    }
}

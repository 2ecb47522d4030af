//! `replay`: the records the Lambda consumer gave up on, delivered again.
//!
//! When the event source mapping gives up on a batch (its retries or its
//! record age spent), it sends the on-failure destination an invocation
//! record that holds no records, only where they are: the stream, the shard
//! and the first and last sequence numbers (`DDBStreamBatchInfo`). While the
//! stream still keeps them (24 hours; the template gives up after 6, so a
//! replay has 18), this reads that range of the shard again and applies it
//! with the Lambda consumer's own code, but for what was applied before:
//!
//! - every counter commit that knows its shard (the in-process consumer's,
//!   a Lambda tumbling window's, a replay's) records in its transaction the
//!   range of the shard's records it applied (`store::applied`); a record
//!   inside one of the shard's applied ranges is skipped. So a windowed
//!   batch given up after some of its records were committed (a timeout, a
//!   window close that failed) counts those once;
//! - the Lambda function without a window names no shard: each record's
//!   `APPLIED#<eventID>` marker, which the replay writes too, makes a
//!   record applied before change nothing.
//!
//! What a consumer will still apply is left to it. While the recorded mode
//! is `serve`, the in-process consumer applies every record after the
//! shard's checkpoint: the replay applies only those at or before it (given
//! up by the Lambda function before a switch, and passed by its next
//! batch), and leaves the rest, so it runs safely beside a live in-process
//! consumer. While it is `lambda`, the mapping never delivers a given-up
//! record again: the replay applies every one not applied, and moves the
//! shard's checkpoint past those after it, in the same transaction
//! (conditioned on where it read it), so that a later switch to `serve`
//! does not apply them again from the checkpoint. Each transaction records
//! its range, so a range replayed twice counts once.

use crate::model::ConsumerMode;
use crate::server::store::error::StoreError;
use crate::server::store::{AppliedRange, Store, StreamBatch};
use crate::server::stream::lambda::{Delivered, LambdaConsumer, ReplayOf, ShardOf};
use crate::server::stream::reconcile::compare_seq;
use aws_sdk_dynamodbstreams::types::Record;
use serde_json::Value;
use std::cmp::Ordering;
use std::time::Duration;

/// Records asked for per GetRecords.
const BATCH: i32 = 1000;
/// Between two reads of the shard (DynamoDB Streams takes five a second).
const READ_SPACING: Duration = Duration::from_millis(250);
/// Empty answers in a row before an open shard counts as read to its end
/// (DynamoDB Streams may answer empty before the records that follow).
const EMPTY_READS: u32 = 8;
/// Times a page's records are planned again (checkpoint, ranges and mode
/// read again) after a transaction failed, before the replay stops.
const REPLANS: u32 = 3;

/// One range of one shard that the mapping gave up on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenUp {
    pub stream_arn: String,
    pub shard_id: String,
    pub first: String,
    pub last: String,
    /// How many records the message says the range holds.
    pub batch_size: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("message {line}: not JSON: {why}")]
    NotJson { line: usize, why: String },
    #[error(
        "message {line}: no DDBStreamBatchInfo.{field}: not an on-failure record of a DynamoDB stream event source \
         mapping"
    )]
    Missing { line: usize, field: &'static str },
    #[error("message {line}: startSequenceNumber {first} comes after endSequenceNumber {last}")]
    Backwards { line: usize, first: String, last: String },
    #[error("no message to replay: the input is empty")]
    Empty,
    #[error(
        "the stream no longer keeps shard {shard_id} from {first} (it keeps records 24 hours): those records are \
         lost to the counters; run `reconcile --full` over the days they changed"
    )]
    Trimmed { shard_id: String, first: String },
    #[error("record {seq} of shard {shard_id} could not be applied: {why}; replay again once it can be")]
    Failed { shard_id: String, seq: String, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one range came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Records of the range found in the stream.
    pub read: usize,
    /// Applied now.
    pub applied: usize,
    /// Applied before (in an applied range of the shard, or their markers
    /// exist): nothing changed.
    pub already: usize,
    /// Not readable orders: counted as bad, as the consumer does.
    pub skipped: usize,
    /// After the shard's checkpoint while the recorded mode is `serve`:
    /// left to the in-process consumer, which applies them.
    pub left: usize,
}

impl Replayed {
    /// Two ranges' figures added up.
    pub fn plus(&self, other: &Replayed) -> Replayed {
        Replayed {
            read: self.read + other.read,
            applied: self.applied + other.applied,
            already: self.already + other.already,
            skipped: self.skipped + other.skipped,
            left: self.left + other.left,
        }
    }
}

/// What a replay does with one record it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Applied now (its marker still guards it).
    Apply,
    /// Inside an applied range of the shard: applied before.
    Covered,
    /// Left to the in-process consumer (mode `serve`, after the checkpoint).
    Left,
}

/// Whether the record numbered `seq` lies inside one of `ranges` (both
/// ends included; sequence numbers compared as numbers).
pub fn covered(seq: &str, ranges: &[AppliedRange]) -> bool {
    ranges
        .iter()
        .any(|r| compare_seq(&r.first, seq) != Ordering::Greater && compare_seq(seq, &r.last) != Ordering::Greater)
}

/// What to do with each record (by sequence number, in order): skip what
/// the shard's applied `ranges` cover; while the recorded `mode` is
/// `serve`, leave what comes after the shard's `checkpoint` (none: every
/// record) to the in-process consumer; apply the rest.
pub fn plan(seqs: &[&str], ranges: &[AppliedRange], checkpoint: Option<&str>, mode: ConsumerMode) -> Vec<Plan> {
    seqs.iter()
        .map(|seq| {
            let after_checkpoint = checkpoint.is_none_or(|at| compare_seq(seq, at) == Ordering::Greater);
            if covered(seq, ranges) {
                Plan::Covered
            } else if mode == ConsumerMode::Serve && after_checkpoint {
                Plan::Left
            } else {
                Plan::Apply
            }
        })
        .collect()
}

/// The ranges of the on-failure records in `text`: one JSON message a line
/// (as `lambda-local` writes them), or an SQS message whose `Body` is one (as
/// `aws sqs receive-message` prints them, one a line).
pub fn parse_messages(text: &str) -> Result<Vec<GivenUp>, ReplayError> {
    let ranges = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| parse_message(i + 1, line))
        .collect::<Result<Vec<_>, _>>()?;
    if ranges.is_empty() {
        return Err(ReplayError::Empty);
    }
    Ok(ranges)
}

fn parse_message(line: usize, text: &str) -> Result<GivenUp, ReplayError> {
    let not_json = |err: serde_json::Error| ReplayError::NotJson { line, why: err.to_string() };
    let mut message: Value = serde_json::from_str(text).map_err(not_json)?;
    if let Some(body) = message.get("Body").and_then(Value::as_str) {
        message = serde_json::from_str(body).map_err(not_json)?;
    }
    let info = &message["DDBStreamBatchInfo"];
    let field = |field: &'static str| {
        info[field].as_str().filter(|v| !v.is_empty()).map(str::to_string).ok_or(ReplayError::Missing { line, field })
    };
    let range = GivenUp {
        stream_arn: field("streamArn")?,
        shard_id: field("shardId")?,
        first: field("startSequenceNumber")?,
        last: field("endSequenceNumber")?,
        batch_size: info["batchSize"].as_u64(),
    };
    if compare_seq(&range.first, &range.last) == Ordering::Greater {
        return Err(ReplayError::Backwards { line, first: range.first, last: range.last });
    }
    Ok(range)
}

/// Reads `range` from its shard and applies it, in order, stopping at the
/// first record that cannot be applied (nothing after it is applied).
pub async fn replay(store: &Store, consumer: &LambdaConsumer, range: &GivenUp) -> Result<Replayed, ReplayError> {
    let trimmed = || ReplayError::Trimmed { shard_id: range.shard_id.clone(), first: range.first.clone() };
    let mut iterator = match store.shard_iterator_at(&range.stream_arn, &range.shard_id, &range.first).await {
        Ok(iterator) => iterator,
        Err(StoreError::Trimmed(_)) => return Err(trimmed()),
        Err(err) => return Err(err.into()),
    };
    let (mut replayed, mut last_read, mut empty) = (Replayed::default(), None::<String>, 0);
    loop {
        let (records, next) = match store.get_records(&iterator, BATCH).await? {
            StreamBatch::Records { records, next } => (records, next),
            StreamBatch::Trimmed => return Err(trimmed()),
            StreamBatch::Expired => {
                iterator = match &last_read {
                    Some(seq) => store.shard_iterator(&range.stream_arn, &range.shard_id, Some(seq)).await?,
                    None => store.shard_iterator_at(&range.stream_arn, &range.shard_id, &range.first).await?,
                };
                continue;
            }
        };
        let read_all = records.len();
        let within: Vec<Record> = records.into_iter().take_while(|r| !after(r, &range.last)).collect();
        let past_end = within.len() < read_all;
        if let Some(seq) = within.last().and_then(sequence) {
            last_read = Some(seq.to_string());
        }
        apply(store, consumer, range, within, &mut replayed).await?;
        empty = if read_all == 0 { empty + 1 } else { 0 };
        match next {
            Some(next) if !past_end && last_read.as_deref() != Some(range.last.as_str()) && empty < EMPTY_READS => {
                iterator = next;
                tokio::time::sleep(READ_SPACING).await;
            }
            _ => return Ok(replayed),
        }
    }
}

/// Applies the records of one page that were not applied (`plan`), read
/// against the shard's checkpoint, applied ranges and the recorded mode as
/// they are now. After a transaction failed (the checkpoint moved, say),
/// the records not applied are planned again, from a fresh reading.
async fn apply(
    store: &Store,
    consumer: &LambdaConsumer,
    range: &GivenUp,
    records: Vec<Record>,
    replayed: &mut Replayed,
) -> Result<(), ReplayError> {
    replayed.read += records.len();
    let mut pending: Vec<Delivered> = records
        .into_iter()
        .filter(|r| sequence(r).is_some())
        .map(|r| Delivered {
            event_id: r.event_id().map(str::to_string),
            seq: sequence(&r).map(str::to_string),
            record: Some(r),
        })
        .collect();
    let mut replans = 0;
    while let (Some(first), Some(last)) = (pending.first(), pending.last()) {
        let (first, last) = (first.seq.clone().unwrap_or_default(), last.seq.clone().unwrap_or_default());
        let mode = store.consumer_mode().await?.mode;
        let checkpoint = store.checkpoint(&range.stream_arn, &range.shard_id).await?.seq;
        let ranges = store.applied_ranges(&range.stream_arn, &range.shard_id, &first, &last).await?;
        let seqs: Vec<&str> = pending.iter().map(|d| d.seq.as_deref().unwrap_or_default()).collect();
        let plans = plan(&seqs, &ranges, checkpoint.as_deref(), mode);
        replayed.already += plans.iter().filter(|p| **p == Plan::Covered).count();
        replayed.left += plans.iter().filter(|p| **p == Plan::Left).count();
        let to_apply: Vec<Delivered> =
            pending.into_iter().zip(&plans).filter(|(_, p)| **p == Plan::Apply).map(|(d, _)| d).collect();
        let shard = ShardOf { stream_arn: range.stream_arn.clone(), shard_id: range.shard_id.clone() };
        let moves = mode == ConsumerMode::Lambda;
        let outcome = consumer.apply_replay(&to_apply, &ReplayOf { shard, checkpoint, moves }).await;
        replayed.applied += outcome.applied;
        replayed.already += outcome.already;
        replayed.skipped += outcome.skipped;
        let Some(from) = outcome.failed_from else { return Ok(()) };
        replans += 1;
        if replans > REPLANS {
            return Err(ReplayError::Failed {
                shard_id: range.shard_id.clone(),
                seq: to_apply[from].seq.clone().unwrap_or_default(),
                why: outcome.error.unwrap_or_default(),
            });
        }
        tracing::info!(error = ?outcome.error, shard = range.shard_id, "a replayed transaction failed: planned again");
        pending = to_apply.into_iter().skip(from).collect();
    }
    Ok(())
}

fn sequence(record: &Record) -> Option<&str> {
    record.dynamodb().and_then(|d| d.sequence_number())
}

/// Whether `record` comes after the range's last record.
fn after(record: &Record, last: &str) -> bool {
    sequence(record).is_some_and(|seq| compare_seq(seq, last) == Ordering::Greater)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = r#"{"requestContext":{"condition":"RetryAttemptsExhausted"},"DDBStreamBatchInfo":{"shardId":"shardId-1","startSequenceNumber":"900","endSequenceNumber":"1000","batchSize":3,"streamArn":"arn:aws:dynamodb:us-east-1:1:table/t/stream/s"}}"#;

    #[test]
    fn a_dead_letter_message_is_read_plain_or_as_an_sqs_message() {
        let wrapped = serde_json::json!({"MessageId": "m", "Body": MESSAGE}).to_string();
        let ranges = parse_messages(&format!("{MESSAGE}\n\n{wrapped}\n")).unwrap();
        assert_eq!(ranges.len(), 2);
        assert_eq!(ranges[0], ranges[1]);
        assert_eq!((ranges[0].first.as_str(), ranges[0].last.as_str()), ("900", "1000"));
        assert_eq!(ranges[0].batch_size, Some(3));
    }

    #[test]
    fn what_is_not_a_message_is_named_by_its_line() {
        let err = parse_messages(&format!("{MESSAGE}\nnot json")).unwrap_err();
        assert!(matches!(err, ReplayError::NotJson { line: 2, .. }), "{err}");
        let err = parse_messages(r#"{"DDBStreamBatchInfo":{"shardId":"s"}}"#).unwrap_err();
        assert!(err.to_string().contains("message 1: no DDBStreamBatchInfo.streamArn"), "{err}");
        let backwards = MESSAGE.replace("\"900\"", "\"1001\"");
        assert!(matches!(parse_messages(&backwards), Err(ReplayError::Backwards { line: 1, .. })));
        assert!(matches!(parse_messages("\n \n"), Err(ReplayError::Empty)));
    }

    fn range(first: &str, last: &str) -> AppliedRange {
        AppliedRange { first: first.into(), last: last.into() }
    }

    #[test]
    fn a_record_is_covered_inside_a_range_ends_included_by_number() {
        let ranges = [range("100", "199"), range("300", "300")];
        for (seq, inside) in
            [("99", false), ("100", true), ("150", true), ("199", true), ("200", false), ("300", true), ("301", false)]
        {
            assert_eq!(covered(seq, &ranges), inside, "{seq}");
        }
        // Numbers, not text: "1000" comes after "199", and leading zeros say nothing.
        assert!(!covered("1000", &ranges));
        assert!(covered("0150", &ranges));
        assert!(!covered("150", &[]));
        // DynamoDB's 21-to-40-digit numbers.
        let long = [range("49000000000000000000001", "49000000000000000000009")];
        assert!(covered("49000000000000000000005", &long));
        assert!(!covered("5000000000000000000005", &long), "one digit fewer: smaller");
    }

    #[test]
    fn a_partly_committed_range_is_applied_where_it_was_not_whatever_the_mode() {
        // A windowed batch 1..6 given up after 1..3 were committed (the
        // checkpoint at 3, or moved on to 9 by the shard's next batch).
        let seqs = ["1", "2", "3", "4", "5", "6"];
        let committed = [range("1", "3")];
        use Plan::*;
        let lambda = plan(&seqs, &committed, Some("3"), ConsumerMode::Lambda);
        assert_eq!(lambda, [Covered, Covered, Covered, Apply, Apply, Apply]);
        let passed = plan(&seqs, &[range("1", "3"), range("7", "9")], Some("9"), ConsumerMode::Serve);
        assert_eq!(passed, [Covered, Covered, Covered, Apply, Apply, Apply], "at or before the checkpoint");
        // `serve` applies what follows its checkpoint itself.
        let serve = plan(&seqs, &committed, Some("3"), ConsumerMode::Serve);
        assert_eq!(serve, [Covered, Covered, Covered, Left, Left, Left]);
        assert_eq!(plan(&seqs[..2], &[], None, ConsumerMode::Serve), [Left, Left], "no checkpoint: from the start");
        // Replayed once: the replay's own range covers the rest.
        let again = plan(&seqs, &[range("1", "3"), range("4", "6")], Some("6"), ConsumerMode::Lambda);
        assert!(again.iter().all(|p| *p == Covered), "{again:?}");
    }
}

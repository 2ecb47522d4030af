//! `replay`: the records the Lambda consumer gave up on, delivered again.
//!
//! When the event source mapping gives up on a batch (its retries or its
//! record age spent), it sends the on-failure destination an invocation
//! record that holds no records, only where they are: the stream, the shard
//! and the first and last sequence numbers (`DDBStreamBatchInfo`). While the
//! stream still keeps them (24 hours; the template gives up after 6, so a
//! replay has 18), this reads that range of the shard again and applies it
//! with the Lambda consumer's own code: each record's `APPLIED#<eventID>`
//! marker makes a record applied before change nothing, so a range replayed
//! twice, or one Lambda later delivered after all, counts once.
//!
//! Only for the Lambda form: the in-process consumer guards by shard
//! checkpoints, not markers, so a record it applied would be counted again.
//! A replay refuses while an in-process consumer is live in the registry.

use crate::server::store::error::StoreError;
use crate::server::store::{ConsumerEntry, Store, StreamBatch};
use crate::server::stream::lambda::{Delivered, LambdaConsumer};
use crate::server::stream::reconcile::compare_seq;
use crate::server::stream::registry::{IN_PROCESS, IN_PROCESS_LIVE};
use aws_sdk_dynamodbstreams::types::Record;
use chrono::{DateTime, Utc};
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
    #[error(
        "an in-process consumer ({instance}) is live: it counts by shard checkpoints, not by markers, and a replay \
         would count again what it applied; replay only where the Lambda form consumes the stream"
    )]
    InProcessConsumer { instance: String },
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
    /// Applied before (their markers exist): nothing changed.
    pub already: usize,
    /// Not readable orders: counted as bad, as the consumer does.
    pub skipped: usize,
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

/// The in-process consumer a replay must not run beside, if one is live
/// (its heartbeat is at most three beats old).
pub fn in_process_consumer(entries: &[ConsumerEntry], now: DateTime<Utc>) -> Option<&ConsumerEntry> {
    let live = chrono::Duration::from_std(IN_PROCESS_LIVE).unwrap_or(chrono::Duration::seconds(15));
    entries.iter().filter(|e| e.mode == IN_PROCESS && now - e.seen_at < live).max_by_key(|e| e.seen_at)
}

/// Refuses while an in-process consumer is live (see the module's words).
pub async fn check_no_in_process(store: &Store) -> Result<(), ReplayError> {
    let entries = store.consumers().await?;
    match in_process_consumer(&entries, Utc::now()) {
        Some(entry) => Err(ReplayError::InProcessConsumer { instance: entry.instance.clone() }),
        None => Ok(()),
    }
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
        apply(consumer, range, &within, &mut replayed).await?;
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

async fn apply(
    consumer: &LambdaConsumer,
    range: &GivenUp,
    records: &[Record],
    replayed: &mut Replayed,
) -> Result<(), ReplayError> {
    if records.is_empty() {
        return Ok(());
    }
    let delivered: Vec<Delivered> = records
        .iter()
        .map(|r| Delivered {
            event_id: r.event_id().map(str::to_string),
            seq: sequence(r).map(str::to_string),
            record: Some(r.clone()),
        })
        .collect();
    let outcome = consumer.apply(&delivered).await;
    replayed.read += records.len();
    replayed.applied += outcome.applied;
    replayed.already += outcome.already;
    replayed.skipped += outcome.skipped;
    match outcome.failed_from {
        Some(i) => Err(ReplayError::Failed {
            shard_id: range.shard_id.clone(),
            seq: delivered[i].seq.clone().unwrap_or_default(),
            why: outcome.error.unwrap_or_default(),
        }),
        None => Ok(()),
    }
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

    #[test]
    fn only_a_recent_in_process_heartbeat_refuses_a_replay() {
        let now = Utc::now();
        let entry = |mode: &str, secs: i64| ConsumerEntry {
            mode: mode.into(),
            instance: format!("{mode}-{secs}"),
            seen_at: now - chrono::Duration::seconds(secs),
        };
        assert!(in_process_consumer(&[entry(IN_PROCESS, 60), entry("lambda", 1)], now).is_none());
        assert_eq!(
            in_process_consumer(&[entry(IN_PROCESS, 5)], now).map(|e| e.instance.as_str()),
            Some("in-process-5")
        );
    }
}

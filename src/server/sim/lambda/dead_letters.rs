//! The on-failure destination of the local event source mapping: what
//! Lambda sends to an SQS queue (or SNS topic) when it gives up on stream
//! records, kept in memory and, when a file is named, one message a line.
//!
//! The message is Lambda's invocation record for a DynamoDB stream, as AWS
//! documents it ("Retain discarded records for a DynamoDB event source"): the
//! request and response context, and `DDBStreamBatchInfo` with the shard, the
//! first and last sequence numbers, when the first and last records arrived,
//! how many records, and the stream's ARN. It holds no record: they are read
//! again from the stream with those positions, while the stream keeps them.

use aws_sdk_dynamodbstreams::types::Record;
use chrono::{DateTime, SecondsFormat, Utc};
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

/// Why records were given up (`requestContext.condition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// Every retry failed (`MaximumRetryAttempts`).
    RetryAttemptsExhausted,
    /// Older than `MaximumRecordAgeInSeconds` before they could be delivered.
    RecordAgeExceeded,
}

impl Condition {
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::RetryAttemptsExhausted => "RetryAttemptsExhausted",
            Condition::RecordAgeExceeded => "RecordAgeExceeded",
        }
    }
}

/// How the function answered the last invocation of the records given up
/// (`None`: given up before any invocation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastResponse {
    /// `Unhandled` when the function failed; absent when it answered with
    /// batch item failures.
    pub function_error: Option<String>,
}

/// One batch given up.
pub struct GivenUp<'a> {
    pub condition: Condition,
    pub request_id: String,
    pub function_arn: &'a str,
    /// Invocations of these records so far.
    pub invocations: u32,
    pub response: Option<LastResponse>,
    pub shard_id: &'a str,
    pub stream_arn: &'a str,
    pub records: &'a [Record],
}

/// DynamoDB stream records' arrival times are whole seconds in these messages.
fn arrival(record: &Record) -> String {
    let at = record
        .dynamodb()
        .and_then(|d| d.approximate_creation_date_time())
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), 0))
        .unwrap_or_else(Utc::now);
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn seq(record: Option<&Record>) -> Value {
    json!(record.and_then(|r| r.dynamodb()).and_then(|d| d.sequence_number()).unwrap_or_default())
}

/// The invocation record Lambda sends for `given_up`.
pub fn message(given_up: &GivenUp<'_>, now: DateTime<Utc>) -> Value {
    let (first, last) = (given_up.records.first(), given_up.records.last());
    let mut out = json!({
        "requestContext": {
            "requestId": given_up.request_id,
            "functionArn": given_up.function_arn,
            "condition": given_up.condition.as_str(),
            "approximateInvokeCount": given_up.invocations,
        },
        "version": "1.0",
        "timestamp": now.to_rfc3339_opts(SecondsFormat::Millis, true),
        "DDBStreamBatchInfo": {
            "shardId": given_up.shard_id,
            "startSequenceNumber": seq(first),
            "endSequenceNumber": seq(last),
            "approximateArrivalOfFirstRecord": first.map(arrival),
            "approximateArrivalOfLastRecord": last.map(arrival),
            "batchSize": given_up.records.len(),
            "streamArn": given_up.stream_arn,
        }
    });
    if let Some(response) = &given_up.response {
        let mut context = json!({"statusCode": 200, "executedVersion": "$LATEST"});
        if let Some(error) = &response.function_error {
            context["functionError"] = json!(error);
        }
        out["responseContext"] = context;
    }
    out
}

/// The destination: messages in memory, and appended to a file if named.
#[derive(Default)]
pub struct DeadLetters {
    file: Option<PathBuf>,
    messages: Mutex<Vec<Value>>,
}

impl DeadLetters {
    pub fn new(file: Option<PathBuf>) -> DeadLetters {
        DeadLetters { file, messages: Mutex::default() }
    }

    pub fn send(&self, message: Value) {
        tracing::error!(%message, "local Lambda: records given up, sent to the on-failure destination");
        if let Some(path) = &self.file {
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                // One write a message: shards give up concurrently, and
                // `writeln!` writes a value's pieces one call each, which
                // interleaved with another shard's into lines not JSON.
                .and_then(|mut file| file.write_all(format!("{message}\n").as_bytes()));
            if let Err(err) = written {
                tracing::error!(error = %err, path = %path.display(), "local Lambda: cannot write the dead letter");
            }
        }
        self.messages.lock().push(message);
    }

    /// Every message sent so far.
    pub fn messages(&self) -> Vec<Value> {
        self.messages.lock().clone()
    }

    /// Records given up so far (the messages' batch sizes added).
    pub fn records(&self) -> u64 {
        self.messages.lock().iter().filter_map(|m| m["DDBStreamBatchInfo"]["batchSize"].as_u64()).sum()
    }

    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodbstreams::primitives::DateTime as SdkDateTime;
    use aws_sdk_dynamodbstreams::types::StreamRecord;

    fn record(seq: &str, secs: i64) -> Record {
        let data =
            StreamRecord::builder().sequence_number(seq).approximate_creation_date_time(SdkDateTime::from_secs(secs));
        Record::builder().dynamodb(data.build()).build()
    }

    #[test]
    fn the_message_has_the_shape_lambda_sends_for_a_stream_batch() {
        let records = [record("800000000003126276362", 1_573_690_399), record("800000000003126276363", 1_573_690_400)];
        let given_up = GivenUp {
            condition: Condition::RetryAttemptsExhausted,
            request_id: "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81".into(),
            function_arn: "arn:aws:lambda:us-east-2:123456789012:function:myfunction",
            invocations: 11,
            response: Some(LastResponse { function_error: Some("Unhandled".into()) }),
            shard_id: "shardId-00000001573689847184-864758bb",
            stream_arn: "arn:aws:dynamodb:us-east-2:123456789012:table/mytable/stream/2019-11-14T00:04:06.388",
            records: &records,
        };
        let now = DateTime::parse_from_rfc3339("2019-11-14T00:13:49.717Z").unwrap().with_timezone(&Utc);
        assert_eq!(
            message(&given_up, now),
            json!({
                "requestContext": {
                    "requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81",
                    "functionArn": "arn:aws:lambda:us-east-2:123456789012:function:myfunction",
                    "condition": "RetryAttemptsExhausted",
                    "approximateInvokeCount": 11
                },
                "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
                "version": "1.0",
                "timestamp": "2019-11-14T00:13:49.717Z",
                "DDBStreamBatchInfo": {
                    "shardId": "shardId-00000001573689847184-864758bb",
                    "startSequenceNumber": "800000000003126276362",
                    "endSequenceNumber": "800000000003126276363",
                    "approximateArrivalOfFirstRecord": "2019-11-14T00:13:19Z",
                    "approximateArrivalOfLastRecord": "2019-11-14T00:13:20Z",
                    "batchSize": 2,
                    "streamArn": "arn:aws:dynamodb:us-east-2:123456789012:table/mytable/stream/2019-11-14T00:04:06.388"
                }
            })
        );
        let aged = GivenUp { condition: Condition::RecordAgeExceeded, response: None, ..given_up };
        let aged = message(&aged, now);
        assert_eq!(aged["requestContext"]["condition"], "RecordAgeExceeded");
        assert!(aged.get("responseContext").is_none(), "given up before any invocation");
    }

    #[test]
    fn the_destination_keeps_every_message_and_writes_one_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dead-letters.jsonl");
        let letters = DeadLetters::new(Some(path.clone()));
        letters.send(json!({"DDBStreamBatchInfo": {"batchSize": 3}}));
        letters.send(json!({"DDBStreamBatchInfo": {"batchSize": 1}}));
        assert_eq!(letters.records(), 4);
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(text.lines().count(), 2);
    }
}

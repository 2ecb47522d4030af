//! The Lambda DynamoDB event as the consumer reads it: its records (as the
//! DynamoDB Streams API's `Record`, the type `consume` reads), and a
//! windowed event's shard, window and the state it carries from call to call.

use crate::server::stream::counters::Deltas;
use aws_lambda_events::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::primitives::DateTime as SdkDateTime;
use aws_sdk_dynamodbstreams::types::{AttributeValue, OperationType, Record, StreamRecord};
use serde_json::Value;
use std::collections::HashMap;

/// One record of a Lambda DynamoDB event, as the consumer reads it.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// `eventID`: the key of the record's marker.
    pub event_id: Option<String>,
    /// `dynamodb.SequenceNumber`: what a failure is reported by.
    pub seq: Option<String>,
    /// The record as the DynamoDB Streams API gives it (the type `consume`
    /// reads); `None` for JSON that is not a stream record.
    pub record: Option<Record>,
}

impl Delivered {
    /// One element of the event's `Records`; never fails: what cannot be
    /// read is kept as such, to be counted as bad.
    pub fn from_json(value: &Value) -> Delivered {
        let seq = value.pointer("/dynamodb/SequenceNumber").and_then(Value::as_str).map(str::to_string);
        match serde_json::from_value::<EventRecord>(value.clone()) {
            Ok(event) => Delivered {
                event_id: Some(event.event_id.clone()).filter(|id| !id.is_empty()),
                seq: event.change.sequence_number.clone().or(seq),
                record: Some(stream_record(event)),
            },
            Err(err) => {
                tracing::warn!(error = %err, sequence = ?seq, "a Lambda event record that is not a stream record");
                Delivered { event_id: None, seq, record: None }
            }
        }
    }
}

/// A Lambda event record as the DynamoDB Streams API's `Record`: the same
/// fields (an absent image is an empty map in the Lambda shape).
pub fn stream_record(event: EventRecord) -> Record {
    let data = event.change;
    let item = |item: serde_dynamo::Item| (!item.is_empty()).then(|| HashMap::<String, AttributeValue>::from(item));
    let at = data.approximate_creation_date_time;
    // Absent from the event: the epoch, which means "not said".
    let at = (at.timestamp_millis() != 0).then(|| SdkDateTime::from_millis(at.timestamp_millis()));
    let stream = StreamRecord::builder()
        .set_keys(item(data.keys))
        .set_new_image(item(data.new_image))
        .set_old_image(item(data.old_image))
        .set_sequence_number(data.sequence_number)
        .size_bytes(data.size_bytes)
        .set_approximate_creation_date_time(at)
        .build();
    Record::builder()
        .event_id(event.event_id)
        .event_name(OperationType::from(event.event_name.as_str()))
        .set_event_version(event.event_version)
        .set_event_source(event.event_source)
        .aws_region(event.aws_region)
        .dynamodb(stream)
        .build()
}

/// The stream shard a batch came from. Lambda names it only in the events
/// of a mapping with a tumbling window (`shardId`, `eventSourceARN`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardOf {
    pub stream_arn: String,
    pub shard_id: String,
}

/// A windowed event's own fields: its shard, when the window started,
/// whether it is the call that closes it, and what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub shard: ShardOf,
    pub start: String,
    pub closing: bool,
    pub carried: Carried,
}

impl Window {
    /// `None` for an event without a window (or one that does not say its
    /// shard): each record is then guarded by its marker.
    pub fn of(event: &Value) -> Option<Window> {
        let text = |value: Option<&Value>| value.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let shard_id = text(event.get("shardId"))?;
        let stream_arn =
            text(event.get("eventSourceARN")).or_else(|| text(event.pointer("/Records/0/eventSourceARN")))?;
        let closing = event.get("isFinalInvokeForWindow").and_then(Value::as_bool).unwrap_or(false);
        let start = text(event.pointer("/window/start")).unwrap_or_default();
        let carried = Carried::from_state(event.get("state"));
        Some(Window { shard: ShardOf { stream_arn, shard_id }, start, closing, carried })
    }
}

/// The observations a window carries from call to call of one shard, and
/// the first record they came with (naming them in the close's marker).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    pub since: Option<String>,
    pub deltas: Deltas,
}

/// The `state` fields: the first record's sequence number, and the
/// increments as JSON rows `[PK, SK, attribute, by]`.
const STATE_SINCE: &str = "since";
const STATE_ADDS: &str = "adds";

impl Carried {
    /// What a `state` carries: nothing when it is empty, or unreadable
    /// (then said: those observations are lost, the counters are not).
    pub fn from_state(state: Option<&Value>) -> Carried {
        let Some(adds) = state.and_then(|s| s.get(STATE_ADDS)) else { return Carried::default() };
        let rows = adds.as_str().and_then(|text| serde_json::from_str(text).ok());
        let Some(rows) = rows else {
            let bytes = adds.to_string().len();
            tracing::error!(bytes, "a window's state that is not this function's: its observations are dropped");
            return Carried::default();
        };
        let since = state.and_then(|s| s.get(STATE_SINCE)).and_then(Value::as_str).map(str::to_string);
        Carried { since, deltas: Deltas::from_rows(rows) }
    }

    pub fn to_state(&self) -> HashMap<String, String> {
        let mut state = HashMap::new();
        if !self.deltas.is_empty() {
            state.insert(STATE_ADDS.to_string(), self.rows_json());
            state.insert(STATE_SINCE.to_string(), self.since.clone().unwrap_or_default());
        }
        state
    }

    fn rows_json(&self) -> String {
        serde_json::to_string(&self.deltas.rows()).unwrap_or_default()
    }
}

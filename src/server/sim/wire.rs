//! Stream records in the JSON of the wire: the DynamoDB Streams API's
//! `GetRecords` answer (what the simulated stream sends) and a Lambda
//! DynamoDB event's record (what the local event source mapping hands the
//! function). Both are the SDK's `Record` written out; the event adds the
//! stream's ARN.

use aws_sdk_dynamodbstreams::types::{AttributeValue, Record};
use serde_json::{Map, Value, json};

// `item_to_json` and `value_to_json`, for the stream's own `AttributeValue`.
crate::server::rules::units::dynamodb_json!(AttributeValue);

/// A record as `GetRecords` answers it.
pub fn record(record: &Record) -> Value {
    let mut out = Map::new();
    let mut text = |name: &str, value: Option<&str>| {
        if let Some(value) = value {
            out.insert(name.to_string(), json!(value));
        }
    };
    text("eventID", record.event_id());
    text("eventName", record.event_name().map(|n| n.as_str()));
    text("eventVersion", record.event_version());
    text("eventSource", record.event_source());
    text("awsRegion", record.aws_region());
    if let Some(data) = record.dynamodb() {
        out.insert("dynamodb".into(), change(data));
    }
    if let Some(identity) = record.user_identity() {
        let mut who = Map::new();
        if let Some(id) = identity.principal_id() {
            who.insert("PrincipalId".into(), json!(id));
        }
        if let Some(kind) = identity.r#type() {
            who.insert("Type".into(), json!(kind));
        }
        out.insert("userIdentity".into(), Value::Object(who));
    }
    Value::Object(out)
}

/// The `dynamodb` part of a record: keys, images, sequence number, size.
fn change(data: &aws_sdk_dynamodbstreams::types::StreamRecord) -> Value {
    let mut out = Map::new();
    if let Some(at) = data.approximate_creation_date_time() {
        out.insert("ApproximateCreationDateTime".into(), json!(at.as_secs_f64()));
    }
    for (name, image) in [("Keys", data.keys()), ("NewImage", data.new_image()), ("OldImage", data.old_image())] {
        if let Some(image) = image {
            out.insert(name.into(), Value::Object(item_to_json(image)));
        }
    }
    if let Some(seq) = data.sequence_number() {
        out.insert("SequenceNumber".into(), json!(seq));
    }
    if let Some(size) = data.size_bytes() {
        out.insert("SizeBytes".into(), json!(size));
    }
    if let Some(view) = data.stream_view_type() {
        out.insert("StreamViewType".into(), json!(view.as_str()));
    }
    Value::Object(out)
}

/// A record as Lambda puts it in a DynamoDB event: the API's record, with
/// `eventSourceARN` (the stream's ARN) and `eventSource` as Lambda sets it.
pub fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let mut out = self::record(record);
    if let Value::Object(fields) = &mut out {
        fields.insert("eventSourceARN".into(), json!(stream_arn));
        fields.entry("eventSource").or_insert_with(|| json!("aws:dynamodb"));
        fields.entry("eventVersion").or_insert_with(|| json!("1.1"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodbstreams::primitives::{Blob, DateTime};
    use aws_sdk_dynamodbstreams::types::{OperationType, StreamRecord, StreamViewType};
    use std::collections::HashMap;

    #[test]
    fn every_attribute_type_is_written_as_dynamodb_writes_it() {
        let value = AttributeValue::M(HashMap::from([
            ("s".to_string(), AttributeValue::S("x".into())),
            ("n".to_string(), AttributeValue::N("1.5".into())),
            ("b".to_string(), AttributeValue::B(Blob::new(b"hi".to_vec()))),
            ("bs".to_string(), AttributeValue::Bs(vec![Blob::new(b"a".to_vec())])),
            ("ss".to_string(), AttributeValue::Ss(vec!["a".into()])),
            ("ns".to_string(), AttributeValue::Ns(vec!["2".into()])),
            ("l".to_string(), AttributeValue::L(vec![AttributeValue::Bool(true), AttributeValue::Null(true)])),
        ]));
        assert_eq!(
            value_to_json(&value),
            json!({"M": {
                "s": {"S": "x"}, "n": {"N": "1.5"}, "b": {"B": "aGk="}, "bs": {"BS": ["YQ=="]},
                "ss": {"SS": ["a"]}, "ns": {"NS": ["2"]}, "l": {"L": [{"BOOL": true}, {"NULL": true}]}
            }})
        );
    }

    #[test]
    fn a_record_is_written_as_get_records_answers_it_and_as_lambda_hands_it_over() {
        let keys = HashMap::from([("PK".to_string(), AttributeValue::S("ORDER#o-1".into()))]);
        let data = StreamRecord::builder()
            .approximate_creation_date_time(DateTime::from_secs(1_764_411_330))
            .set_keys(Some(keys.clone()))
            .set_new_image(Some(keys))
            .sequence_number("100000000000000000042")
            .size_bytes(40)
            .stream_view_type(StreamViewType::NewAndOldImages)
            .build();
        let record = Record::builder()
            .event_id("e-1")
            .event_name(OperationType::Insert)
            .event_version("1.1")
            .event_source("aws:dynamodb")
            .aws_region("us-east-1")
            .dynamodb(data)
            .build();
        let written = super::record(&record);
        assert_eq!(
            written,
            json!({
                "eventID": "e-1", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": 1_764_411_330.0, "Keys": {"PK": {"S": "ORDER#o-1"}},
                    "NewImage": {"PK": {"S": "ORDER#o-1"}}, "SequenceNumber": "100000000000000000042",
                    "SizeBytes": 40, "StreamViewType": "NEW_AND_OLD_IMAGES"
                }
            })
        );
        let event = lambda_record(&record, "arn:aws:dynamodb:us-east-1:0:table/t/stream/x");
        assert_eq!(event["eventSourceARN"], "arn:aws:dynamodb:us-east-1:0:table/t/stream/x");
        assert_eq!(event["dynamodb"], written["dynamodb"]);
    }
}

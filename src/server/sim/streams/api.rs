//! The DynamoDB Streams JSON protocol as the simulated stream answers it
//! (`X-Amz-Target: DynamoDBStreams_20120810.<Operation>`), and two paths of
//! of its own: `POST /_sim/split[?shard=ID&stream=ARN]`,
//! `POST /_sim/rollover[?stream=ARN]` and `GET /_sim/stats`.

use super::shards::{Position, Start, StreamError, parse_seq, seq_text};
use super::{Followed, Inner, now_ms};
use crate::server::sim::wire;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Uri, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

const TARGET_PREFIX: &str = "DynamoDBStreams_20120810.";
const ERROR_NAMESPACE: &str = "com.amazonaws.dynamodb.v20120810#";
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// Shards and streams a Describe or List answers at most (AWS: 100).
const PAGE: usize = 100;

pub(super) async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    match (method, uri.path()) {
        (Method::POST, "/_sim/split") => return split(&inner, uri.query().unwrap_or_default()),
        (Method::POST, "/_sim/rollover") => return rollover(&inner, uri.query().unwrap_or_default()),
        (Method::GET, "/_sim/stats") => return answer(StatusCode::OK, &json!(format!("{}", inner.stats()))),
        _ => {}
    }
    let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let operation = target.strip_prefix(TARGET_PREFIX).unwrap_or(target).to_string();
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => return refuse(&inner, &operation, StreamError::Validation(format!("the body is not JSON: {err}"))),
    };
    inner.count(|s| *s.calls.entry(operation.clone()).or_default() += 1);
    let result = match operation.as_str() {
        "DescribeStream" => describe_stream(&inner, &request).await,
        "ListStreams" => Ok(list_streams(&inner, &request)),
        "GetShardIterator" => shard_iterator(&inner, &request).await,
        "GetRecords" => records(&inner, &request).await,
        _ => {
            let body = json!({
                "__type": format!("{ERROR_NAMESPACE}UnknownOperationException"),
                "message": format!("the stream proxy does not answer {target:?}"),
            });
            return answer(StatusCode::BAD_REQUEST, &body);
        }
    };
    match result {
        Ok(body) => answer(StatusCode::OK, &body),
        Err(err) => refuse(&inner, &operation, err),
    }
}

fn answer(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// The exception, as DynamoDB Streams sends it: a 400 with `__type` and `message`.
fn refuse(inner: &Inner, operation: &str, err: StreamError) -> Response<Body> {
    tracing::debug!(operation, error = %err, "stream proxy: refused");
    inner.count(|s| *s.refused.entry(err.code().to_string()).or_default() += 1);
    answer(
        StatusCode::BAD_REQUEST,
        &json!({"__type": format!("{ERROR_NAMESPACE}{}", err.code()), "message": err.to_string()}),
    )
}

fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').filter_map(|pair| pair.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

fn rollover(inner: &Inner, query: &str) -> Response<Body> {
    match inner.only_or(param(query, "stream").as_deref()) {
        Ok(stream) => {
            let rolled = inner.roll_over(&stream);
            answer(StatusCode::OK, &json!({"children": rolled.into_iter().map(|(_, child)| child).collect::<Vec<_>>()}))
        }
        Err(err) => answer(StatusCode::BAD_REQUEST, &json!({"error": err.to_string()})),
    }
}

fn split(inner: &Inner, query: &str) -> Response<Body> {
    let param = |name: &str| param(query, name);
    let split = inner.only_or(param("stream").as_deref()).map_err(|e| e.to_string()).and_then(|stream| {
        let children = stream.shards.lock().split(param("shard").as_deref(), Instant::now(), now_ms());
        children.map_err(|e| e.to_string())
    });
    match split {
        Ok((left, right)) => {
            inner.count(|s| s.splits += 1);
            answer(StatusCode::OK, &json!({"children": [left, right]}))
        }
        Err(why) => answer(StatusCode::BAD_REQUEST, &json!({"error": why})),
    }
}

fn text<'a>(request: &'a Value, field: &str) -> Result<&'a str, StreamError> {
    request[field].as_str().ok_or_else(|| StreamError::Validation(format!("{field} is required")))
}

/// `Limit`: absent, or a whole number in `1..=most`.
fn limit(request: &Value, most: usize) -> Result<usize, StreamError> {
    match &request["Limit"] {
        Value::Null => Ok(most),
        value => value.as_u64().filter(|n| (1..=most as u64).contains(n)).map(|n| n as usize).ok_or_else(|| {
            StreamError::Validation(format!(
                "1 validation error detected: Value '{value}' at 'limit' failed to satisfy constraint: Member must \
                 have value less than or equal to {most} and greater than or equal to 1"
            ))
        }),
    }
}

async fn describe_stream(inner: &Arc<Inner>, request: &Value) -> Result<Value, StreamError> {
    let stream = inner.stream(text(request, "StreamArn")?).await?;
    let limit = limit(request, PAGE)?;
    let mut shards = stream.shards.lock();
    shards.describe_call(Instant::now(), &inner.options.limits)?;
    let child_of = match (request["ShardFilter"]["Type"].as_str(), request["ShardFilter"]["ShardId"].as_str()) {
        (Some("CHILD_SHARDS"), Some(parent)) => Some(parent.to_string()),
        (Some(other), _) if other != "CHILD_SHARDS" => {
            return Err(StreamError::Validation(format!("ShardFilter Type {other:?} is not CHILD_SHARDS")));
        }
        (Some(_), None) => return Err(StreamError::Validation("a CHILD_SHARDS filter needs a ShardId".into())),
        _ => None,
    };
    let listed: Vec<&super::shards::Shard> =
        shards.all().iter().filter(|s| child_of.as_ref().is_none_or(|p| s.parent.as_ref() == Some(p))).collect();
    let from = match request["ExclusiveStartShardId"].as_str() {
        Some(start) => listed.iter().position(|s| s.id == start).map_or(0, |i| i + 1),
        None => 0,
    };
    let page: Vec<Value> = listed[from..].iter().take(limit).map(|s| shard_json(s)).collect();
    let mut description = json!({
        "StreamArn": stream.arn, "StreamLabel": stream.label, "StreamStatus": "ENABLED",
        "StreamViewType": stream.view_type, "CreationRequestDateTime": stream.created_secs,
        "TableName": stream.table,
        "KeySchema": stream.key_schema.iter().map(|(name, kind)| json!({"AttributeName": name, "KeyType": kind})).collect::<Vec<_>>(),
        "Shards": page,
    });
    if from + limit < listed.len() {
        description["LastEvaluatedShardId"] = json!(listed[from + limit - 1].id);
    }
    Ok(json!({"StreamDescription": description}))
}

fn shard_json(shard: &super::shards::Shard) -> Value {
    let mut range = json!({"StartingSequenceNumber": seq_text(shard.start_seq)});
    if let Some(end) = shard.end_seq {
        range["EndingSequenceNumber"] = json!(seq_text(end));
    }
    let mut out = json!({"ShardId": shard.id, "SequenceNumberRange": range});
    if let Some(parent) = &shard.parent {
        out["ParentShardId"] = json!(parent);
    }
    out
}

fn list_streams(inner: &Inner, request: &Value) -> Value {
    let table = request["TableName"].as_str();
    let mut streams: Vec<Arc<Followed>> =
        inner.streams.lock().values().filter(|s| table.is_none_or(|t| t == s.table)).cloned().collect();
    streams.sort_by(|a, b| a.arn.cmp(&b.arn));
    let limit = request["Limit"].as_u64().map_or(PAGE, |n| (n as usize).clamp(1, PAGE));
    let from = match request["ExclusiveStartStreamArn"].as_str() {
        Some(start) => streams.iter().position(|s| s.arn == start).map_or(0, |i| i + 1),
        None => 0,
    };
    let page: Vec<Value> = streams[from..]
        .iter()
        .take(limit)
        .map(|s| json!({"StreamArn": s.arn, "TableName": s.table, "StreamLabel": s.label}))
        .collect();
    let mut out = json!({"Streams": page});
    if from + limit < streams.len() {
        out["LastEvaluatedStreamArn"] = json!(streams[from + limit - 1].arn);
    }
    out
}

/// What an iterator says: the stream, the shard, where, and when it was
/// given. Opaque to clients, as DynamoDB's are.
#[derive(serde::Serialize, serde::Deserialize)]
struct Token {
    #[serde(rename = "a")]
    arn: String,
    #[serde(rename = "s")]
    shard: String,
    #[serde(rename = "p")]
    position: String,
    #[serde(rename = "t")]
    issued_ms: i64,
}

impl Token {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str) -> Result<Token, StreamError> {
        let bad = || StreamError::Validation("Invalid ShardIterator: not one this stream gave".into());
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        serde_json::from_slice(&bytes).map_err(|_| bad())
    }
}

async fn shard_iterator(inner: &Arc<Inner>, request: &Value) -> Result<Value, StreamError> {
    let stream = inner.stream(text(request, "StreamArn")?).await?;
    let shard = text(request, "ShardId")?;
    let seq = || {
        let seq = text(request, "SequenceNumber")?;
        parse_seq(seq).ok_or_else(|| StreamError::Validation(format!("Invalid SequenceNumber {seq:?}")))
    };
    let start = match text(request, "ShardIteratorType")? {
        "TRIM_HORIZON" => Start::TrimHorizon,
        "LATEST" => Start::Latest,
        "AT_SEQUENCE_NUMBER" => Start::At(seq()?),
        "AFTER_SEQUENCE_NUMBER" => Start::After(seq()?),
        other => {
            return Err(StreamError::Validation(format!(
                "ShardIteratorType {other:?} is not one of TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER"
            )));
        }
    };
    let position = stream.shards.lock().iterator(shard, &start)?;
    Ok(json!({"ShardIterator": iterator(&stream.arn, shard, position)}))
}

fn iterator(arn: &str, shard: &str, position: Position) -> String {
    Token { arn: arn.to_string(), shard: shard.to_string(), position: position.0.to_string(), issued_ms: now_ms() }
        .encode()
}

async fn records(inner: &Arc<Inner>, request: &Value) -> Result<Value, StreamError> {
    let given = Token::decode(text(request, "ShardIterator")?)?;
    let limit = limit(request, inner.options.limits.max_records)?;
    let ttl = inner.options.limits.iterator_ttl.as_millis() as i64;
    if now_ms() - given.issued_ms > ttl {
        return Err(StreamError::ExpiredIterator(format!(
            "Iterator expired. The iterator was created at time {} while right now it is {} (an iterator lasts {} s)",
            given.issued_ms,
            now_ms(),
            ttl / 1000
        )));
    }
    let stream = inner.stream(&given.arn).await?;
    let position =
        Position(given.position.parse().map_err(|_| StreamError::Validation("Invalid ShardIterator".into()))?);
    let read = stream.shards.lock().read(&given.shard, position, limit, Instant::now(), &inner.options.limits)?;
    inner.count(|s| s.served += read.records.len() as u64);
    let records: Vec<Value> = read.records.iter().map(wire::record).collect();
    let mut out = json!({"Records": records});
    if let Some(next) = read.next {
        out["NextShardIterator"] = json!(iterator(&stream.arn, &given.shard, next));
    }
    Ok(out)
}

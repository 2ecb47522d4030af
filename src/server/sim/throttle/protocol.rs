//! The DynamoDB JSON protocol as far as the proxy reads and writes it: which
//! operation a request is, the writes and reads of the metered operations,
//! and the answers DynamoDB gives when it throttles.

use super::buckets::Kind;
use super::schema::{Billing, Item, TableSchema};
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// The `X-Amz-Target` prefix of the table operations.
pub const TARGET_PREFIX: &str = "DynamoDB_20120810.";
/// The `__type` prefix of DynamoDB's errors.
const ERROR_NAMESPACE: &str = "com.amazonaws.dynamodb.v20120810#";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected request: {0}")]
pub struct ProtocolError(pub String);

/// The operation of a table request, from its `X-Amz-Target`; None for
/// anything else (streams, or no target).
pub fn operation(target: Option<&str>) -> Option<&str> {
    target?.strip_prefix(TARGET_PREFIX)
}

/// One item write of a PutItem, UpdateItem, DeleteItem, a BatchWriteItem's
/// request or a TransactWriteItems' action.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub table: String,
    pub action: Action,
    pub transactional: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// With its condition, which may admit no existing item (see
    /// `Write::assumes_absent`).
    Put {
        item: Item,
        condition: Option<String>,
        names: Map<String, Value>,
    },
    Update {
        key: Item,
        expression: Option<String>,
        names: Map<String, Value>,
        values: Map<String, Value>,
    },
    Delete {
        key: Item,
    },
    ConditionCheck {
        key: Item,
    },
}

impl Write {
    /// Whether the put can only succeed where there is no item: then the
    /// old item need not be read (the app's create path).
    pub fn assumes_absent(&self, schema: &TableSchema) -> bool {
        let Action::Put { condition: Some(condition), names, .. } = &self.action else {
            return false;
        };
        let compact: String = condition.chars().filter(|c| !c.is_whitespace()).collect();
        let Some(inner) = compact.strip_prefix("attribute_not_exists(").and_then(|r| r.strip_suffix(')')) else {
            return false;
        };
        let name =
            if inner.starts_with('#') { names.get(inner).and_then(Value::as_str).unwrap_or_default() } else { inner };
        name == schema.key.hash
    }
}

fn text(body: &Value, field: &str) -> Result<String, ProtocolError> {
    body.get(field).and_then(Value::as_str).map(str::to_string).ok_or_else(|| ProtocolError(format!("no {field}")))
}

fn object(body: &Value, field: &str) -> Result<Map<String, Value>, ProtocolError> {
    body.get(field).and_then(Value::as_object).cloned().ok_or_else(|| ProtocolError(format!("no {field}")))
}

fn optional_object(body: &Value, field: &str) -> Map<String, Value> {
    body.get(field).and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The writes of PutItem, UpdateItem and DeleteItem (one), and of
/// TransactWriteItems (one per action, in order).
pub fn writes(operation: &str, body: &Value) -> Result<Vec<Write>, ProtocolError> {
    match operation {
        "PutItem" => Ok(vec![put(body, false)?]),
        "UpdateItem" => Ok(vec![update(body, false)?]),
        "DeleteItem" => Ok(vec![delete(body, false)?]),
        "TransactWriteItems" => body
            .get("TransactItems")
            .and_then(Value::as_array)
            .ok_or_else(|| ProtocolError("no TransactItems".into()))?
            .iter()
            .map(transact_action)
            .collect(),
        other => Err(ProtocolError(format!("{other} is not a write"))),
    }
}

fn transact_action(action: &Value) -> Result<Write, ProtocolError> {
    if let Some(inner) = action.get("Put") {
        put(inner, true)
    } else if let Some(inner) = action.get("Update") {
        update(inner, true)
    } else if let Some(inner) = action.get("Delete") {
        delete(inner, true)
    } else if let Some(inner) = action.get("ConditionCheck") {
        Ok(Write {
            table: text(inner, "TableName")?,
            action: Action::ConditionCheck { key: object(inner, "Key")? },
            transactional: true,
        })
    } else {
        Err(ProtocolError(format!("unknown transaction action {action}")))
    }
}

fn put(body: &Value, transactional: bool) -> Result<Write, ProtocolError> {
    Ok(Write {
        table: text(body, "TableName")?,
        action: Action::Put {
            item: object(body, "Item")?,
            condition: body.get("ConditionExpression").and_then(Value::as_str).map(str::to_string),
            names: optional_object(body, "ExpressionAttributeNames"),
        },
        transactional,
    })
}

fn update(body: &Value, transactional: bool) -> Result<Write, ProtocolError> {
    Ok(Write {
        table: text(body, "TableName")?,
        action: Action::Update {
            key: object(body, "Key")?,
            expression: body.get("UpdateExpression").and_then(Value::as_str).map(str::to_string),
            names: optional_object(body, "ExpressionAttributeNames"),
            values: optional_object(body, "ExpressionAttributeValues"),
        },
        transactional,
    })
}

fn delete(body: &Value, transactional: bool) -> Result<Write, ProtocolError> {
    Ok(Write { table: text(body, "TableName")?, action: Action::Delete { key: object(body, "Key")? }, transactional })
}

/// A BatchWriteItem's requests: table, position in its list, and the write.
pub fn batch_writes(body: &Value) -> Result<Vec<(String, usize, Write)>, ProtocolError> {
    let tables =
        body.get("RequestItems").and_then(Value::as_object).ok_or_else(|| ProtocolError("no RequestItems".into()))?;
    let mut writes = Vec::new();
    for (table, requests) in tables {
        let requests = requests.as_array().ok_or_else(|| ProtocolError(format!("RequestItems of {table}")))?;
        for (position, request) in requests.iter().enumerate() {
            let action = if let Some(put) = request.get("PutRequest") {
                Action::Put { item: object(put, "Item")?, condition: None, names: Map::new() }
            } else if let Some(delete) = request.get("DeleteRequest") {
                Action::Delete { key: object(delete, "Key")? }
            } else {
                return Err(ProtocolError(format!("unknown batch request {request}")));
            };
            writes.push((table.clone(), position, Write { table: table.clone(), action, transactional: false }));
        }
    }
    Ok(writes)
}

/// Splits a BatchWriteItem or BatchGetItem body: `keep(table, position)`
/// says which requests go on. Returns the body to forward (None if nothing
/// is kept) and the requests held back, in the shape of `UnprocessedItems`
/// (`UnprocessedKeys` for gets: the same per-table settings, fewer keys).
pub fn split_batch(body: &Value, keep: impl Fn(&str, usize) -> bool) -> (Option<Value>, Map<String, Value>) {
    let mut forward = body.clone();
    let mut held = Map::new();
    let Some(tables) = forward.get_mut("RequestItems").and_then(Value::as_object_mut) else {
        return (None, held);
    };
    for (table, requests) in tables.iter_mut() {
        // BatchGetItem nests its keys under "Keys", BatchWriteItem lists requests.
        let (list, settings) = match requests {
            Value::Array(list) => (list, None),
            Value::Object(entry) => {
                let settings = entry.clone();
                match entry.get_mut("Keys") {
                    Some(Value::Array(list)) => (list, Some(settings)),
                    _ => continue,
                }
            }
            _ => continue,
        };
        let (kept, dropped): (Vec<_>, Vec<_>) =
            std::mem::take(list).into_iter().enumerate().partition(|(i, _)| keep(table, *i));
        *list = kept.into_iter().map(|(_, v)| v).collect();
        if !dropped.is_empty() {
            let dropped: Vec<Value> = dropped.into_iter().map(|(_, v)| v).collect();
            held.insert(
                table.clone(),
                match settings {
                    Some(mut settings) => {
                        settings.insert("Keys".into(), Value::Array(dropped));
                        Value::Object(settings)
                    }
                    None => Value::Array(dropped),
                },
            );
        }
    }
    tables.retain(|_, requests| match requests {
        Value::Array(list) => !list.is_empty(),
        Value::Object(entry) => entry.get("Keys").and_then(Value::as_array).is_some_and(|k| !k.is_empty()),
        _ => false,
    });
    let any = !tables.is_empty();
    (any.then_some(forward), held)
}

/// Adds requests held back by the proxy to an upstream answer's
/// `UnprocessedItems` (or `UnprocessedKeys`).
pub fn merge_unprocessed(answer: &mut Value, field: &str, held: Map<String, Value>) {
    if held.is_empty() {
        return;
    }
    let Some(answer) = answer.as_object_mut() else {
        return;
    };
    let unprocessed = answer.entry(field).or_insert_with(|| json!({}));
    if !unprocessed.is_object() {
        *unprocessed = json!({});
    }
    let unprocessed = unprocessed.as_object_mut().expect("made an object above");
    for (table, requests) in held {
        match (unprocessed.get_mut(&table), requests) {
            (Some(Value::Array(have)), Value::Array(more)) => have.extend(more),
            (Some(Value::Object(have)), Value::Object(more)) => {
                let more_keys = more.get("Keys").and_then(Value::as_array).cloned().unwrap_or_default();
                if let Some(Value::Array(keys)) = have.get_mut("Keys") {
                    keys.extend(more_keys);
                }
            }
            (_, requests) => {
                unprocessed.insert(table, requests);
            }
        }
    }
}

/// A BatchGetItem's keys: table, position, key, and whether strongly consistent.
pub fn batch_gets(body: &Value) -> Result<Vec<(String, usize, Item, bool)>, ProtocolError> {
    let tables =
        body.get("RequestItems").and_then(Value::as_object).ok_or_else(|| ProtocolError("no RequestItems".into()))?;
    let mut gets = Vec::new();
    for (table, entry) in tables {
        let consistent = entry.get("ConsistentRead").and_then(Value::as_bool).unwrap_or(false);
        let keys =
            entry.get("Keys").and_then(Value::as_array).ok_or_else(|| ProtocolError(format!("no Keys for {table}")))?;
        for (position, key) in keys.iter().enumerate() {
            let key = key.as_object().cloned().ok_or_else(|| ProtocolError(format!("a key of {table}")))?;
            gets.push((table.clone(), position, key, consistent));
        }
    }
    Ok(gets)
}

/// What a Query reads: the index (None: the table), the partition key value
/// from its key condition, and whether it asked for a consistent read.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTarget {
    pub table: String,
    pub index: Option<String>,
    pub partition: Value,
    pub consistent: bool,
}

/// Reads a Query's target; the partition comes from the `<hash key> = :v`
/// part of its KeyConditionExpression (the only equality a key condition
/// can make on the partition key).
pub fn query_target(body: &Value, schema: &TableSchema) -> Result<QueryTarget, ProtocolError> {
    let index = body.get("IndexName").and_then(Value::as_str).map(str::to_string);
    let hash = match &index {
        Some(name) => &schema.index(name).ok_or_else(|| ProtocolError(format!("no index {name}")))?.key.hash,
        None => &schema.key.hash,
    };
    let condition = text(body, "KeyConditionExpression")?;
    let names = optional_object(body, "ExpressionAttributeNames");
    let values = optional_object(body, "ExpressionAttributeValues");
    let partition = split_and(&condition)
        .into_iter()
        .filter_map(|part| {
            let (left, right) = part.trim().trim_matches(['(', ')']).split_once('=')?;
            let (left, right) = (left.trim(), right.trim());
            // `a = :v` or `:v = a`.
            let (name, placeholder) = if right.starts_with(':') { (left, right) } else { (right, left) };
            let name = if name.starts_with('#') { names.get(name)?.as_str()? } else { name };
            (name == hash).then(|| values.get(placeholder).cloned()).flatten()
        })
        .next()
        .ok_or_else(|| ProtocolError(format!("no equality on {hash} in {condition:?}")))?;
    Ok(QueryTarget {
        table: schema.name.clone(),
        consistent: index.is_none() && body.get("ConsistentRead").and_then(Value::as_bool).unwrap_or(false),
        index,
        partition,
    })
}

/// Splits a condition at the word AND, in any case.
fn split_and(condition: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, lower) = (0, condition.to_ascii_lowercase());
    let mut from = 0;
    while let Some(found) = lower[from..].find("and") {
        let at = from + found;
        let before = lower[..at].chars().next_back().is_none_or(char::is_whitespace);
        let after = lower[at + 3..].chars().next().is_none_or(char::is_whitespace);
        if before && after {
            parts.push(&condition[start..at]);
            start = at + 3;
        }
        from = at + 3;
    }
    parts.push(&condition[start..]);
    parts
}

/// Why a request was refused: a table's or an index's partition was over
/// its limit for reads or writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason {
    pub reason: String,
    pub resource: String,
}

impl Reason {
    /// `<Table|Index><Read|Write>KeyRangeThroughputExceeded` on the table's
    /// or the index's ARN ("Diagnosing throttling", "ThrottlingReason").
    pub fn key_range(schema: &TableSchema, index: Option<&str>, kind: Kind) -> Self {
        let operation = match kind {
            Kind::Read => "Read",
            Kind::Write => "Write",
        };
        match index.and_then(|name| schema.index(name)) {
            Some(index) => {
                Reason { reason: format!("Index{operation}KeyRangeThroughputExceeded"), resource: index.arn.clone() }
            }
            None => {
                Reason { reason: format!("Table{operation}KeyRangeThroughputExceeded"), resource: schema.arn.clone() }
            }
        }
    }

    fn is_index(&self) -> bool {
        self.reason.starts_with("Index")
    }
}

/// The 400 DynamoDB answers when it throttles. On-demand tables get a
/// `ThrottlingException`, provisioned ones a
/// `ProvisionedThroughputExceededException`, each with its usual message;
/// the reasons go in the field each exception's model names: `throttlingReasons`
/// on ThrottlingException, `ThrottlingReasons` on the other (the SDK reads
/// exactly these names).
pub fn throttled(billing: Billing, reasons: &[Reason]) -> Value {
    let index = reasons.iter().any(Reason::is_index);
    let (exception, field, message) = match (billing, index) {
        (Billing::OnDemand, false) => (
            "ThrottlingException",
            "throttlingReasons",
            "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html",
        ),
        (Billing::OnDemand, true) => (
            "ThrottlingException",
            "throttlingReasons",
            "Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.",
        ),
        (Billing::Provisioned, false) => (
            "ProvisionedThroughputExceededException",
            "ThrottlingReasons",
            "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
        ),
        (Billing::Provisioned, true) => (
            "ProvisionedThroughputExceededException",
            "ThrottlingReasons",
            "The level of configured provisioned throughput for one or more global secondary indexes of the table was exceeded. Consider increasing your provisioning level for the under-provisioned global secondary indexes with the UpdateTable API",
        ),
    };
    let reasons: Vec<Value> = reasons.iter().map(|r| json!({"reason": r.reason, "resource": r.resource})).collect();
    json!({"__type": format!("{ERROR_NAMESPACE}{exception}"), "message": message, field: reasons})
}

/// A throttled transaction: DynamoDB cancels the whole of it with a
/// `TransactionCanceledException` whose reasons, one per action in order,
/// say `ThrottlingError` where an action was throttled and `None` elsewhere
/// ("Key range throughput exceeded", TransactWriteItems' cancellation reasons).
pub fn transaction_throttled(throttled: &[bool]) -> Value {
    let codes: Vec<&str> = throttled.iter().map(|t| if *t { "ThrottlingError" } else { "None" }).collect();
    let reasons: Vec<Value> = throttled
        .iter()
        .map(|t| {
            if *t {
                json!({"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly."})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    json!({
        "__type": format!("{ERROR_NAMESPACE}TransactionCanceledException"),
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    })
}

/// A transaction some of whose items another transaction in flight is
/// writing: DynamoDB cancels it with `TransactionConflict` on those actions
/// ("Transaction is ongoing for the item") and `None` on the others.
pub fn transaction_conflicted(conflicting: &[bool]) -> Value {
    let codes: Vec<&str> = conflicting.iter().map(|c| if *c { "TransactionConflict" } else { "None" }).collect();
    let reasons: Vec<Value> = conflicting
        .iter()
        .map(|c| match c {
            true => json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}),
            false => json!({"Code": "None"}),
        })
        .collect();
    json!({
        "__type": format!("{ERROR_NAMESPACE}TransactionCanceledException"),
        "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{}]", codes.join(", ")),
        "CancellationReasons": reasons,
    })
}

/// A single write to an item a transaction in flight is writing.
pub fn write_conflicted() -> Value {
    json!({
        "__type": format!("{ERROR_NAMESPACE}TransactionConflictException"),
        "message": "Transaction is ongoing for the item",
    })
}

/// The items a TransactGetItems reads: (table, key).
pub fn transact_gets(body: &Value) -> Result<Vec<(String, Item)>, ProtocolError> {
    body.get("TransactItems")
        .and_then(Value::as_array)
        .ok_or_else(|| ProtocolError("no TransactItems".into()))?
        .iter()
        .map(|action| {
            let get = action.get("Get").ok_or_else(|| ProtocolError(format!("not a Get: {action}")))?;
            Ok((text(get, "TableName")?, object(get, "Key")?))
        })
        .collect()
}

/// A key as one string, whatever order its attributes came in.
pub fn key_text(key: &Item) -> String {
    let sorted: std::collections::BTreeMap<&String, &Value> = key.iter().collect();
    serde_json::to_string(&sorted).unwrap_or_default()
}

/// Whether an upstream answer says the table is gone.
pub fn is_resource_not_found(status: u16, body: &[u8]) -> bool {
    status == 400 && std::str::from_utf8(body).is_ok_and(|b| b.contains("ResourceNotFoundException"))
}

/// DynamoDB JSON to SDK values, for the keys of the proxy's own reads.
pub fn item_from_json(item: &Item) -> Result<HashMap<String, AttributeValue>, ProtocolError> {
    item.iter().map(|(name, value)| Ok((name.clone(), value_from_json(value)?))).collect()
}

fn value_from_json(value: &Value) -> Result<AttributeValue, ProtocolError> {
    let bad = || ProtocolError(format!("attribute value {value}"));
    let (kind, inner) = crate::server::rules::units::single_entry(value).map_err(|_| bad())?;
    let strings = |v: &Value| -> Result<Vec<String>, ProtocolError> {
        v.as_array().ok_or_else(bad)?.iter().map(|s| s.as_str().map(str::to_string).ok_or_else(bad)).collect()
    };
    let blob = |s: &str| -> Result<aws_sdk_dynamodb::primitives::Blob, ProtocolError> {
        base64::engine::general_purpose::STANDARD.decode(s).map(Into::into).map_err(|_| bad())
    };
    Ok(match kind {
        "S" => AttributeValue::S(inner.as_str().ok_or_else(bad)?.to_string()),
        "N" => AttributeValue::N(inner.as_str().ok_or_else(bad)?.to_string()),
        "B" => AttributeValue::B(blob(inner.as_str().ok_or_else(bad)?)?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().ok_or_else(bad)?),
        "NULL" => AttributeValue::Null(inner.as_bool().ok_or_else(bad)?),
        "SS" => AttributeValue::Ss(strings(inner)?),
        "NS" => AttributeValue::Ns(strings(inner)?),
        "BS" => AttributeValue::Bs(strings(inner)?.iter().map(|s| blob(s)).collect::<Result<_, _>>()?),
        "L" => {
            AttributeValue::L(inner.as_array().ok_or_else(bad)?.iter().map(value_from_json).collect::<Result<_, _>>()?)
        }
        "M" => AttributeValue::M(item_from_json(inner.as_object().ok_or_else(bad)?)?),
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::rules::units::item_to_json;
    use crate::server::sim::throttle::schema::tests::{item, orders};

    #[test]
    fn only_table_operations_have_an_operation() {
        assert_eq!(operation(Some("DynamoDB_20120810.PutItem")), Some("PutItem"));
        assert_eq!(operation(Some("DynamoDBStreams_20120810.GetRecords")), None);
        assert_eq!(operation(None), None);
    }

    #[test]
    fn reads_the_apps_conditional_put() {
        let body = json!({
            "TableName": "orders", "Item": {"PK": {"S": "ORDER#1"}},
            "ConditionExpression": "attribute_not_exists(PK)", "ReturnConsumedCapacity": "INDEXES",
        });
        let writes = writes("PutItem", &body).unwrap();
        assert_eq!(writes.len(), 1);
        assert!(writes[0].assumes_absent(&orders()));
        let aliased = json!({
            "TableName": "orders", "Item": {"PK": {"S": "ORDER#1"}},
            "ConditionExpression": "attribute_not_exists( #pk )", "ExpressionAttributeNames": {"#pk": "PK"},
        });
        assert!(writes_of(&aliased)[0].assumes_absent(&orders()));
        let other = json!({"TableName": "orders", "Item": {}, "ConditionExpression": "attribute_not_exists(GSI1PK)"});
        assert!(!writes_of(&other)[0].assumes_absent(&orders()));
    }

    fn writes_of(body: &Value) -> Vec<Write> {
        writes("PutItem", body).unwrap()
    }

    #[test]
    fn reads_every_action_of_a_transaction() {
        let body = json!({"TransactItems": [
            {"Update": {"TableName": "metrics", "Key": {"PK": {"S": "a"}}, "UpdateExpression": "ADD n :v",
                        "ExpressionAttributeValues": {":v": {"N": "1"}}}},
            {"Put": {"TableName": "metrics", "Item": {"PK": {"S": "b"}}}},
            {"Delete": {"TableName": "metrics", "Key": {"PK": {"S": "c"}}}},
            {"ConditionCheck": {"TableName": "metrics", "Key": {"PK": {"S": "d"}}, "ConditionExpression": "attribute_exists(PK)"}},
        ]});
        let writes = writes("TransactWriteItems", &body).unwrap();
        assert_eq!(writes.len(), 4);
        assert!(writes.iter().all(|w| w.transactional && w.table == "metrics"));
        assert!(matches!(&writes[0].action, Action::Update { expression: Some(e), .. } if e == "ADD n :v"));
        assert!(matches!(writes[3].action, Action::ConditionCheck { .. }));
    }

    #[test]
    fn splits_a_batch_write_and_reports_the_rest_as_unprocessed() {
        let body = json!({"RequestItems": {"orders": [
            {"PutRequest": {"Item": {"PK": {"S": "1"}}}},
            {"DeleteRequest": {"Key": {"PK": {"S": "2"}}}},
            {"PutRequest": {"Item": {"PK": {"S": "3"}}}},
        ]}});
        assert_eq!(batch_writes(&body).unwrap().len(), 3);
        let (forward, held) = split_batch(&body, |_, i| i != 1);
        let forward = forward.unwrap();
        assert_eq!(forward["RequestItems"]["orders"].as_array().unwrap().len(), 2);
        assert_eq!(held["orders"], json!([{"DeleteRequest": {"Key": {"PK": {"S": "2"}}}}]));
        let mut answer = json!({"UnprocessedItems": {}});
        merge_unprocessed(&mut answer, "UnprocessedItems", held);
        assert_eq!(answer["UnprocessedItems"]["orders"].as_array().unwrap().len(), 1);
        let (nothing, held) = split_batch(&body, |_, _| false);
        assert!(nothing.is_none());
        assert_eq!(held["orders"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn splits_a_batch_get_keeping_its_settings() {
        let body = json!({"RequestItems": {"orders": {
            "Keys": [{"PK": {"S": "1"}}, {"PK": {"S": "2"}}], "ConsistentRead": true, "ProjectionExpression": "PK",
        }}});
        assert_eq!(batch_gets(&body).unwrap()[1], ("orders".into(), 1, item(json!({"PK": {"S": "2"}})), true));
        let (forward, held) = split_batch(&body, |_, i| i == 0);
        assert_eq!(forward.unwrap()["RequestItems"]["orders"]["Keys"], json!([{"PK": {"S": "1"}}]));
        assert_eq!(
            held["orders"],
            json!({"Keys": [{"PK": {"S": "2"}}], "ConsistentRead": true, "ProjectionExpression": "PK"})
        );
        let mut answer = json!({"Responses": {}, "UnprocessedKeys": {"orders": {"Keys": [{"PK": {"S": "9"}}]}}});
        merge_unprocessed(&mut answer, "UnprocessedKeys", held);
        assert_eq!(answer["UnprocessedKeys"]["orders"]["Keys"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn finds_the_partition_of_the_apps_queries() {
        let schema = orders();
        let body = json!({
            "TableName": "orders", "IndexName": "GSI2",
            "KeyConditionExpression": "GSI2PK = :p AND GSI2SK BETWEEN :floor AND :below",
            "ExpressionAttributeValues": {":p": {"S": "STATUS#PENDING#2025-01-01#0"}, ":floor": {"S": "a"}, ":below": {"S": "b"}},
        });
        let target = query_target(&body, &schema).unwrap();
        assert_eq!(target.index.as_deref(), Some("GSI2"));
        assert_eq!(target.partition, json!({"S": "STATUS#PENDING#2025-01-01#0"}));
        assert!(!target.consistent);
        let table = json!({
            "TableName": "orders", "ConsistentRead": true,
            "KeyConditionExpression": "(#k = :pk)", "ExpressionAttributeNames": {"#k": "PK"},
            "ExpressionAttributeValues": {":pk": {"S": "ORDER#1"}},
        });
        let target = query_target(&table, &schema).unwrap();
        assert_eq!((target.index, target.consistent), (None, true));
        let swapped = json!({"TableName": "orders", "KeyConditionExpression": ":c = PK", "ExpressionAttributeValues": {":c": {"S": "x"}}});
        assert_eq!(query_target(&swapped, &schema).unwrap().partition, json!({"S": "x"}));
        let unknown = json!({"TableName": "orders", "IndexName": "GSI9", "KeyConditionExpression": "a = :b"});
        assert!(query_target(&unknown, &schema).is_err());
    }

    #[test]
    fn a_refusal_is_shaped_as_dynamodb_sends_it() {
        let schema = orders();
        let reason = Reason::key_range(&schema, Some("GSI2"), Kind::Write);
        assert_eq!(reason.reason, "IndexWriteKeyRangeThroughputExceeded");
        assert_eq!(reason.resource, "arn:aws:dynamodb:us-east-1:000000000000:table/orders/index/GSI2");
        let body = throttled(Billing::OnDemand, std::slice::from_ref(&reason));
        assert_eq!(body["__type"], "com.amazonaws.dynamodb.v20120810#ThrottlingException");
        assert_eq!(body["throttlingReasons"][0]["reason"], "IndexWriteKeyRangeThroughputExceeded");
        let body = throttled(Billing::Provisioned, &[Reason::key_range(&schema, None, Kind::Read)]);
        assert_eq!(body["__type"], "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException");
        assert_eq!(body["ThrottlingReasons"][0]["reason"], "TableReadKeyRangeThroughputExceeded");
        assert_eq!(body["ThrottlingReasons"][0]["resource"], schema.arn);
        let cancelled = transaction_throttled(&[false, true]);
        assert_eq!(cancelled["CancellationReasons"][1]["Code"], "ThrottlingError");
        assert_eq!(cancelled["CancellationReasons"][0]["Code"], "None");
    }

    #[test]
    fn sdk_values_round_trip_through_dynamodb_json() {
        let original = item(json!({
            "s": {"S": "x"}, "n": {"N": "1.5"}, "b": {"B": "aGVsbG8="}, "t": {"BOOL": true}, "z": {"NULL": true},
            "ss": {"SS": ["a"]}, "ns": {"NS": ["1"]}, "bs": {"BS": ["AA=="]},
            "l": {"L": [{"S": "a"}, {"M": {"k": {"N": "2"}}}]},
        }));
        let sdk = item_from_json(&original).unwrap();
        assert_eq!(item_to_json(&sdk), original);
        assert!(item_from_json(&item(json!({"x": {"Q": 1}}))).is_err());
    }

    #[test]
    fn a_conflict_is_answered_as_dynamodb_answers_it() {
        let cancelled = transaction_conflicted(&[false, true]);
        assert_eq!(cancelled["__type"], "com.amazonaws.dynamodb.v20120810#TransactionCanceledException");
        assert_eq!(cancelled["CancellationReasons"][0]["Code"], "None");
        assert_eq!(cancelled["CancellationReasons"][1]["Code"], "TransactionConflict");
        assert!(cancelled["Message"].as_str().unwrap().ends_with("[None, TransactionConflict]"));
        assert_eq!(write_conflicted()["__type"], "com.amazonaws.dynamodb.v20120810#TransactionConflictException");
        let gets = transact_gets(&json!({"TransactItems": [{"Get": {"TableName": "m", "Key": {"PK": {"S": "a"}}}}]}));
        assert_eq!(gets.unwrap()[0].0, "m");
        assert!(transact_gets(&json!({"TransactItems": [{"Put": {}}]})).is_err());
        let (a, b) =
            (item(json!({"PK": {"S": "x"}, "SK": {"S": "y"}})), item(json!({"SK": {"S": "y"}, "PK": {"S": "x"}})));
        assert_eq!(key_text(&a), key_text(&b), "the same key whatever the attributes' order");
    }
}

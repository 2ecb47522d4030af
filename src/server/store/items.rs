//! Shapes the store's parts share against the metrics table: an item read
//! by its key, an item written only where none is, numbers added to an
//! item's attributes, and the condition under which a lease is taken.

use super::error::{StoreError, unless_condition_failed};
use super::keys::{self, attr};
use super::{Item, Store};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

impl Store {
    /// One item of the metrics table by its key; strongly consistent when asked.
    pub(super) async fn metric_item(
        &self,
        (pk, sk): (String, String),
        consistent: bool,
    ) -> Result<Option<Item>, StoreError> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .consistent_read(consistent)
            .send()
            .await?
            .item)
    }

    /// A record of the metrics table, read strongly consistent.
    pub(super) async fn metric_record<T: serde::de::DeserializeOwned>(
        &self,
        key: (String, String),
    ) -> Result<Option<T>, StoreError> {
        Ok(self.metric_item(key, true).await?.map(serde_dynamo::from_item).transpose()?)
    }

    /// Writes `attributes` under `key` unless an item is there already:
    /// `false` then, and nothing is written. The item found is compared with
    /// ours first: when the SDK retries a put whose first attempt went
    /// through unanswered (a timeout under load), the retry finds our own
    /// item, and that is a success, not someone else's.
    pub(super) async fn put_metric_if_absent(
        &self,
        key: (String, String),
        attributes: Item,
    ) -> Result<bool, StoreError> {
        let item = keyed(key.clone(), attributes);
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .set_item(Some(item.clone()))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await;
        if unless_condition_failed(put)?.is_some() {
            return Ok(true);
        }
        Ok(self.metric_item(key, true).await?.is_some_and(|found| found == item))
    }

    /// Deletes the metrics table's item under `key`, whether or not there is one.
    pub(super) async fn delete_metric(&self, (pk, sk): (String, String)) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .send()
            .await?;
        Ok(())
    }

    /// Sets one attribute of an item that must exist: `false` when there is
    /// no item under `key`, and nothing is written.
    pub(super) async fn set_on_existing_metric(
        &self,
        (pk, sk): (String, String),
        attribute: &str,
        value: AttributeValue,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #a = :v")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_names("#a", attribute)
            .expression_attribute_values(":v", value)
            .send()
            .await;
        Ok(unless_condition_failed(update)?.is_some())
    }
}

/// An `ADD` of numbers to one item's attributes, names and values as
/// placeholders (`#aN`, `:vN`: attribute names may be reserved words or
/// hold `#`).
pub(super) struct AddExpression {
    /// `#aN :vN`, one an attribute.
    pub terms: Vec<String>,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl AddExpression {
    /// `adds`: each attribute and the number added to it, as DynamoDB's
    /// number text.
    pub fn of<'a>(adds: impl IntoIterator<Item = (&'a str, String)>) -> AddExpression {
        let (mut terms, mut names, mut values) = (Vec::new(), HashMap::new(), HashMap::new());
        for (i, (attribute, number)) in adds.into_iter().enumerate() {
            terms.push(format!("#a{i} :v{i}"));
            names.insert(format!("#a{i}"), attribute.to_string());
            values.insert(format!(":v{i}"), AttributeValue::N(number));
        }
        AddExpression { terms, names, values }
    }

    /// Of counter increments.
    pub fn of_increments(increments: &[(&String, i64)]) -> AddExpression {
        Self::of(increments.iter().map(|(attribute, by)| (attribute.as_str(), by.to_string())))
    }

    pub fn expression(&self) -> String {
        format!("ADD {}", self.terms.join(", "))
    }
}

/// One UpdateItem adding `add` to the metrics table's item under `key`
/// (created if there is none).
pub(super) async fn add_to_metric(
    client: &Client,
    metrics_table: &str,
    (pk, sk): (&str, &str),
    add: AddExpression,
) -> Result<(), StoreError> {
    client
        .update_item()
        .table_name(metrics_table)
        .key(keys::PK, AttributeValue::S(pk.to_string()))
        .key(keys::SK, AttributeValue::S(sk.to_string()))
        .update_expression(add.expression())
        .set_expression_attribute_names(Some(add.names))
        .set_expression_attribute_values(Some(add.values))
        .send()
        .await?;
    Ok(())
}

/// An item's attributes with its keys.
pub(super) fn keyed((pk, sk): (String, String), mut item: Item) -> Item {
    item.insert(keys::PK.to_string(), AttributeValue::S(pk));
    item.insert(keys::SK.to_string(), AttributeValue::S(sk));
    item
}

/// The condition under which `:me` takes or renews a lease kept in `owner`
/// and `leaseUntil`: nobody holds it, `:me` does, or its holder let it run
/// out before `:now`. Names and values from `lease_names` and `lease_values`.
pub(super) const LEASE_FREE: &str = "attribute_not_exists(#owner) OR #owner = :me OR #until < :now";

pub(super) fn lease_names() -> HashMap<String, String> {
    HashMap::from([("#owner".into(), attr::OWNER.into()), ("#until".into(), attr::LEASE_UNTIL.into())])
}

pub(super) fn lease_values(owner: &str, now_ms: i64) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (":me".into(), AttributeValue::S(owner.to_string())),
        (":now".into(), AttributeValue::N(now_ms.to_string())),
    ])
}

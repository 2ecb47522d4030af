//! The order write path and the per-order and per-customer reads.

use super::{Store, is_condition_failure};
use crate::model::{Order, Status, iso_millis};
use crate::server::error::StoreError;
use crate::server::keys::{self, GSI1, GSI1PK, GSI1SK, GSI2PK, GSI2SK, PK};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// One page of a customer's history, and the sort key to continue after.
pub struct HistoryPage {
    pub orders: Vec<Order>,
    pub next_after: Option<String>,
}

/// The full item for an order: its attributes, its keys, and the GSI2 keys
/// only while it is PENDING (absent, never NULL, otherwise).
pub fn order_item(order: &Order, shards: u32) -> Result<Item, StoreError> {
    let mut item: Item = serde_dynamo::to_item(order)?;
    let timeline = keys::timeline_sk(&order.created_at, &order.order_id);
    let mut put = |name: &str, value: String| item.insert(name.to_string(), AttributeValue::S(value));
    put(PK, keys::order_pk(&order.order_id));
    put(GSI1PK, keys::customer_pk(&order.customer_id));
    put(GSI1SK, timeline.clone());
    if order.status == Status::Pending {
        let shard = keys::shard_of(&order.order_id, shards);
        put(GSI2PK, keys::pending_pk(order.created_at.date_naive(), shard));
        put(GSI2SK, timeline);
    }
    // The PENDING list shows the item count without reading the line items.
    item.insert("itemCount".into(), AttributeValue::N(order.item_count().to_string()));
    Ok(item)
}

impl Store {
    /// Writes a new order; an existing order id is a conflict and is left as it was.
    pub async fn create_order(&self, order: &Order) -> Result<(), StoreError> {
        self.create_order_measured(order).await.map(|_| ())
    }

    /// `create_order`, also returning the capacity the write consumed, per
    /// table and index.
    pub async fn create_order_measured(
        &self,
        order: &Order,
    ) -> Result<Option<aws_sdk_dynamodb::types::ConsumedCapacity>, StoreError> {
        let shards = if order.status == Status::Pending {
            self.ensure_shards_recorded(order.created_at.date_naive()).await?
        } else {
            self.shards
        };
        let put = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(order_item(order, shards)?))
            .condition_expression("attribute_not_exists(PK)")
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match put {
            Ok(out) => Ok(out.consumed_capacity),
            Err(err) if is_condition_failure(&err) => Err(StoreError::Conflict(format!(
                "order {} already exists",
                order.order_id
            ))),
            Err(err) => Err(err.into()),
        }
    }

    pub async fn get_order(&self, order_id: &str) -> Result<Option<Order>, StoreError> {
        let item = self
            .client
            .get_item()
            .table_name(&self.orders_table)
            .key(PK, AttributeValue::S(keys::order_pk(order_id)))
            .consistent_read(true)
            .send()
            .await?
            .item;
        item.map(|item| serde_dynamo::from_item(item).map_err(StoreError::from))
            .transpose()
    }

    /// Moves an order from `from` to `to` in one conditional update, so a
    /// change made meanwhile by someone else is a conflict, never overwritten.
    /// Leaving PENDING removes the GSI2 keys: the order leaves the index.
    pub async fn change_status(
        &self,
        order_id: &str,
        from: Status,
        to: Status,
        at: DateTime<Utc>,
    ) -> Result<Order, StoreError> {
        let mut update = "SET #status = :to, updatedAt = :at".to_string();
        if from == Status::Pending {
            update.push_str(" REMOVE GSI2PK, GSI2SK");
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.orders_table)
            .key(PK, AttributeValue::S(keys::order_pk(order_id)))
            .update_expression(update)
            .condition_expression("attribute_exists(PK) AND #status = :from")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":to", AttributeValue::S(to.as_str().into()))
            .expression_attribute_values(":from", AttributeValue::S(from.as_str().into()))
            .expression_attribute_values(":at", AttributeValue::S(iso_millis::format(&at)))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                let item = out.attributes.ok_or_else(|| {
                    StoreError::Data(format!("update of order {order_id} returned no item"))
                })?;
                Ok(serde_dynamo::from_item(item)?)
            }
            Err(err) if is_condition_failure(&err) => match self.get_order(order_id).await? {
                None => Err(StoreError::NotFound(format!("order {order_id} not found"))),
                Some(current) => Err(StoreError::Conflict(format!(
                    "order {order_id} is {}, not {from}: it was changed by someone else",
                    current.status
                ))),
            },
            Err(err) => Err(err.into()),
        }
    }

    /// A customer's orders, newest first, after the sort key `after`.
    pub async fn customer_orders(
        &self,
        customer_id: &str,
        limit: u32,
        after: Option<&str>,
    ) -> Result<HistoryPage, StoreError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.orders_table)
            .index_name(GSI1)
            .expression_attribute_values(":c", AttributeValue::S(keys::customer_pk(customer_id)))
            .scan_index_forward(false)
            // One more than the page, to know whether another page follows.
            .limit(limit as i32 + 1);
        query = match after {
            Some(after) => query
                .key_condition_expression("GSI1PK = :c AND GSI1SK < :after")
                .expression_attribute_values(":after", AttributeValue::S(after.into())),
            None => query.key_condition_expression("GSI1PK = :c"),
        };
        let items = query.send().await?.items.unwrap_or_default();
        let more = items.len() > limit as usize;
        let orders: Vec<Order> = items
            .into_iter()
            .take(limit as usize)
            .map(serde_dynamo::from_item)
            .collect::<Result<_, _>>()?;
        let next_after = more
            .then(|| orders.last().map(|o| keys::timeline_sk(&o.created_at, &o.order_id)))
            .flatten();
        Ok(HistoryPage { orders, next_after })
    }
}

//! The order write path and the per-order and per-customer reads.

use super::{Item, Store, reading};
use crate::model::{Actor, AuditEntry, Order, Status, iso_millis};
use crate::server::store::error::{StoreError, TransactionFailure, transaction_failure};
use crate::server::store::keys::{self, GSI1, GSI1PK, GSI1SK, GSI2PK, GSI2SK, PK, attr};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, Put, ReturnConsumedCapacity, TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};

/// One page of a customer's history, and the sort key to continue after.
pub struct HistoryPage {
    pub orders: Vec<Order>,
    pub next_after: Option<String>,
}

/// A status change's condition: the order exists, in the status it leaves.
const STATUS_CONDITION: &str = "attribute_exists(PK) AND #status = :from";

/// The update a status change makes to the order's item, whoever writes it:
/// the new status and time, and leaving PENDING removes the GSI2 keys (the
/// order leaves the index). Its expression, names and values.
fn status_update(
    change: &Transition<'_>,
) -> (String, std::collections::HashMap<String, String>, std::collections::HashMap<String, AttributeValue>) {
    let mut update = "SET #status = :to, #updated = :at".to_string();
    if change.from == Status::Pending {
        update.push_str(&format!(" REMOVE {GSI2PK}, {GSI2SK}"));
    }
    let names = [("#status", attr::STATUS), ("#updated", attr::UPDATED_AT)];
    let values = [
        (":to", AttributeValue::S(change.to.as_str().into())),
        (":from", AttributeValue::S(change.from.as_str().into())),
        (":at", AttributeValue::S(iso_millis::format(&change.at))),
    ];
    (
        update,
        names.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        values.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    )
}

/// The full item for an order: its attributes, its keys, and the GSI2 keys
/// only while it is PENDING (absent, never NULL, otherwise).
pub fn order_item(order: &Order, shards: u32) -> Result<Item, StoreError> {
    let (Some(created_at), Some(customer_id), Some(items)) = (order.created_at, &order.customer_id, &order.items)
    else {
        return Err(StoreError::Data(format!("order {} lacks what the keys are made of", order.order_id)));
    };
    let mut item: Item = serde_dynamo::to_item(order)?;
    let timeline = keys::timeline_sk(&created_at, &order.order_id);
    let mut put = |name: &str, value: String| item.insert(name.to_string(), AttributeValue::S(value));
    put(PK, keys::order_pk(&order.order_id));
    put(GSI1PK, keys::customer_pk(customer_id));
    put(GSI1SK, timeline.clone());
    if order.known_status() == Some(Status::Pending) {
        let shard = keys::shard_of(&order.order_id, shards);
        put(GSI2PK, keys::pending_pk(created_at.date_naive(), shard));
        put(GSI2SK, timeline);
    }
    // The PENDING list shows the item count without reading the line items.
    let count: u32 = items.iter().map(|item| item.quantity).sum();
    item.insert(attr::ITEM_COUNT.into(), AttributeValue::N(count.to_string()));
    Ok(item)
}

/// A status change as the store applies it.
#[derive(Clone, Debug)]
pub struct Transition<'a> {
    pub order_id: &'a str,
    pub from: Status,
    pub to: Status,
    pub at: DateTime<Utc>,
    pub actor: &'a Actor,
    pub reason: Option<&'a str>,
    pub bulk_id: Option<&'a str>,
}

impl Store {
    /// Writes a new order and its audit record in one transaction; an
    /// existing order id is a conflict and leaves everything as it was.
    /// Returns the capacity consumed, per table and index.
    pub async fn create_order(&self, order: &Order, actor: &Actor) -> Result<Vec<ConsumedCapacity>, StoreError> {
        let shards = self.shards_to_write(order).await?;
        let put = Put::builder()
            .table_name(&self.orders_table)
            .set_item(Some(order_item(order, shards)?))
            .condition_expression("attribute_not_exists(PK)")
            .build()?;
        let (Some(at), Some(status)) = (order.created_at, order.known_status()) else {
            return Err(StoreError::Data(format!("order {} has no creation time or status to record", order.order_id)));
        };
        let entry = AuditEntry {
            at,
            order_id: order.order_id.clone(),
            actor: actor.name.clone(),
            method: actor.method,
            from: None,
            to: status,
            reason: None,
            bulk_id: None,
        };
        let mut items = vec![TransactWriteItem::builder().put(put).build()];
        items.extend(self.audit_puts(&entry)?);
        match self.transact(items).await {
            Ok(capacity) => Ok(capacity),
            Err(TransactionFailure::Conditions(_)) => {
                Err(StoreError::Conflict(format!("order {} already exists", order.order_id)))
            }
            Err(TransactionFailure::Failed(err)) => Err(err),
        }
    }

    /// One order, read as it is (`reading::order`: what cannot be read is
    /// named, never fatal), with a GSI2 key that names a shard its day's
    /// readers never read said too.
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
        let Some(item) = item else { return Ok(None) };
        let mut order = reading::order(&item);
        if let Some((day, _)) = reading::pending_partition(&item) {
            let count = self.shards_for(day).await?;
            order.problems.extend(reading::shard_problem(&item, count));
        }
        Ok(Some(order))
    }

    /// Moves an order from `from` to `to` with its audit record, in one
    /// transaction conditioned on the current status: a change made meanwhile
    /// by someone else is a conflict (and leaves no record), never
    /// overwritten. Leaving PENDING removes the GSI2 keys: the order leaves
    /// the index.
    pub async fn change_status(&self, change: &Transition<'_>) -> Result<Order, StoreError> {
        let (expression, names, values) = status_update(change);
        let update = Update::builder()
            .table_name(&self.orders_table)
            .key(PK, AttributeValue::S(keys::order_pk(change.order_id)))
            .update_expression(expression)
            .condition_expression(STATUS_CONDITION)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()?;
        let entry = AuditEntry {
            at: change.at,
            order_id: change.order_id.to_string(),
            actor: change.actor.name.clone(),
            method: change.actor.method,
            from: Some(change.from),
            to: change.to,
            reason: change.reason.map(str::to_string),
            bulk_id: change.bulk_id.map(str::to_string),
        };
        let mut items = vec![TransactWriteItem::builder().update(update).build()];
        items.extend(self.audit_puts(&entry)?);
        match self.transact(items).await {
            // A transaction returns no item: read the order as it now is.
            Ok(_) => self
                .get_order(change.order_id)
                .await?
                .ok_or_else(|| StoreError::Data(format!("order {} vanished after its change", change.order_id))),
            Err(TransactionFailure::Conditions(_)) => Err(self.why_not(change).await?),
            Err(TransactionFailure::Failed(err)) => Err(err),
        }
    }

    /// Moves an order as the order service does: the same update as
    /// `change_status`, one plain UpdateItem, no transaction and no audit
    /// record (what a sale written by another service costs).
    pub async fn change_status_as_service(&self, change: &Transition<'_>) -> Result<(), StoreError> {
        let (expression, names, values) = status_update(change);
        let update = self
            .client
            .update_item()
            .table_name(&self.orders_table)
            .key(PK, AttributeValue::S(keys::order_pk(change.order_id)))
            .update_expression(expression)
            .condition_expression(STATUS_CONDITION)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        match crate::server::store::error::unless_condition_failed(update)? {
            Some(_) => Ok(()),
            None => Err(self.why_not(change).await?),
        }
    }

    /// Why a status change's condition failed: the order is gone, or moved.
    async fn why_not(&self, change: &Transition<'_>) -> Result<StoreError, StoreError> {
        Ok(match self.get_order(change.order_id).await? {
            None => StoreError::NotFound(format!("order {} not found", change.order_id)),
            Some(current) => match &current.status {
                Some(status) if current.known_status().is_none() => StoreError::Conflict(format!(
                    "order {} is {status}, a status this console does not know: it takes no status change here",
                    change.order_id
                )),
                Some(status) => StoreError::Conflict(format!(
                    "order {} is {status}, not {}: it was changed by someone else",
                    change.order_id, change.from
                )),
                None => StoreError::Conflict(format!(
                    "order {}'s status cannot be read: it takes no status change until it is repaired",
                    change.order_id
                )),
            },
        })
    }

    /// One TransactWriteItems with a client token, so the SDK's retry of a
    /// transaction that did go through answers success, not a failed
    /// condition (a change would otherwise look refused and be made twice).
    async fn transact(&self, items: Vec<TransactWriteItem>) -> Result<Vec<ConsumedCapacity>, TransactionFailure> {
        let tables: Vec<String> = items.iter().map(|item| action_table(item).to_string()).collect();
        let out = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(uuid::Uuid::new_v4().simple().to_string())
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match out {
            Ok(out) => Ok(out.consumed_capacity.unwrap_or_default()),
            Err(err) => Err(transaction_failure(err, &tables)),
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
        let page = &items[..items.len().min(limit as usize)];
        // The page continues after the last key read, as the index holds
        // it: an order whose fields cannot be read still has its key.
        let next_after = more.then(|| page.last().and_then(|item| item.get(GSI1SK)?.as_s().ok().cloned())).flatten();
        let orders = page.iter().map(reading::order).collect();
        Ok(HistoryPage { orders, next_after })
    }
}

/// What `put_orders` did.
#[derive(Debug, Default)]
pub struct BatchPut {
    pub written: usize,
    /// BatchWriteItem calls that left items unprocessed (throttled), each
    /// followed by a retry of those items.
    pub retries: u64,
    /// Capacity consumed, per table and index, as the store reported it.
    pub capacity: Vec<ConsumedCapacity>,
}

/// Attempts per batch before its unprocessed items count as failed.
const BATCH_ATTEMPTS: u32 = 10;
/// BatchWriteItem takes at most 25 items.
const BATCH_ITEMS: usize = 25;

impl Store {
    /// Writes orders with BatchWriteItem, 25 to a request, unconditionally
    /// (a put of the same order twice writes it twice, to the same result),
    /// retrying unprocessed items with jittered backoff, as a batch job or
    /// the order service would: a PENDING order on its day's count by the
    /// rule (`shard_count`), recording none. For bulk loads; the app's own
    /// writes are conditional (`create_order`).
    pub async fn put_orders(&self, orders: &[Order]) -> Result<BatchPut, StoreError> {
        let mut report = BatchPut::default();
        for chunk in orders.chunks(BATCH_ITEMS) {
            let mut requests = Vec::with_capacity(chunk.len());
            for order in chunk {
                let shards = self.service_shards(order).await?;
                let put = aws_sdk_dynamodb::types::PutRequest::builder()
                    .set_item(Some(order_item(order, shards)?))
                    .build()?;
                requests.push(aws_sdk_dynamodb::types::WriteRequest::builder().put_request(put).build());
            }
            self.write_batch(requests, &mut report).await?;
            report.written += chunk.len();
        }
        Ok(report)
    }

    /// Creates one order as the order service does: one PutItem (only where
    /// the order does not exist: a `Conflict` otherwise), no audit, a
    /// PENDING order on its day's count by the rule (`shard_count`),
    /// recording none.
    pub async fn create_order_as_service(&self, order: &Order) -> Result<Vec<ConsumedCapacity>, StoreError> {
        let shards = self.service_shards(order).await?;
        let put = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(order_item(order, shards)?))
            .condition_expression("attribute_not_exists(PK)")
            .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match crate::server::store::error::unless_condition_failed(put)? {
            Some(out) => Ok(out.consumed_capacity.into_iter().collect()),
            None => Err(StoreError::Conflict(format!("order {} exists already", order.order_id))),
        }
    }

    /// The shard count another writer uses for an order: its day's by the
    /// rule, read, never recorded.
    async fn service_shards(&self, order: &Order) -> Result<u32, StoreError> {
        match (order.known_status(), order.created_at) {
            (Some(Status::Pending), Some(created_at)) => self.shards_for(created_at.date_naive()).await,
            _ => Ok(self.shards),
        }
    }

    /// The shard count to write an order with, recording it for a PENDING
    /// order's day first.
    async fn shards_to_write(&self, order: &Order) -> Result<u32, StoreError> {
        if let (Some(Status::Pending), Some(created_at)) = (order.known_status(), order.created_at) {
            self.ensure_shards_recorded(created_at.date_naive()).await
        } else {
            Ok(self.shards)
        }
    }

    async fn write_batch(
        &self,
        mut requests: Vec<aws_sdk_dynamodb::types::WriteRequest>,
        report: &mut BatchPut,
    ) -> Result<(), StoreError> {
        let mut pauses = backon::BackoffBuilder::build(super::backoff(BATCH_ATTEMPTS - 1));
        for _ in 0..BATCH_ATTEMPTS {
            let out = self
                .client
                .batch_write_item()
                .request_items(&self.orders_table, requests)
                .return_consumed_capacity(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes)
                .send()
                .await?;
            report.capacity.extend(out.consumed_capacity.unwrap_or_default());
            requests = out.unprocessed_items.and_then(|mut u| u.remove(&self.orders_table)).unwrap_or_default();
            if requests.is_empty() {
                return Ok(());
            }
            report.retries += 1;
            if let Some(pause) = pauses.next() {
                tokio::time::sleep(pause).await;
            }
        }
        Err(StoreError::unavailable(
            crate::server::store::error::Unavailable::Throttled,
            format!("{} items still unprocessed after {BATCH_ATTEMPTS} attempts", requests.len()),
        ))
    }

    /// How many of these orders exist, read back 100 keys at a time.
    pub async fn count_orders(&self, order_ids: &[String]) -> Result<u64, StoreError> {
        let mut found = 0u64;
        for chunk in order_ids.chunks(100) {
            let keys = chunk
                .iter()
                .map(|id| std::collections::HashMap::from([(PK.to_string(), AttributeValue::S(keys::order_pk(id)))]))
                .collect();
            let request = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .projection_expression(PK)
                .build()?;
            found += self.batch_get(&self.orders_table, request).await?.len() as u64;
        }
        Ok(found)
    }
}

/// The table a transaction's action writes: to name where it was
/// throttled, and where its capacity goes (`interceptor`).
pub(super) fn action_table(item: &TransactWriteItem) -> &str {
    let table = item
        .put()
        .map(|p| p.table_name())
        .or(item.update().map(|u| u.table_name()))
        .or(item.delete().map(|d| d.table_name()))
        .or(item.condition_check().map(|c| c.table_name()));
    table.unwrap_or("unknown")
}

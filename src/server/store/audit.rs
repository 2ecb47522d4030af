//! The audit trail: every create and status change, written in the same
//! transaction as the change itself (no change without its record, no record
//! without its change), three times, so that each view is a Query:
//!
//! - `AUDIT#ORDER#<orderId>`: the order's timeline, oldest first;
//! - `AUDIT#DAY#<date>#<shard>`: every change of a day, newest first;
//! - `AUDIT#ACTOR#<actor>#<shard>`: every change by one actor, newest first.
//!
//! The day and actor views are spread over `AUDIT_SHARDS` partitions by the
//! change's id (a sale writes hundreds of records a second), and read by
//! merging those partitions newest first.

use super::{Item, Store};
use crate::model::AuditEntry;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, AUDIT_SHARDS};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::NaiveDate;
use futures::future::try_join_all;

/// The most changes one order's timeline answers with.
const MAX_TIMELINE: i32 = 500;

/// Which changes to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditScope {
    Day(NaiveDate),
    Actor(String),
}

impl AuditScope {
    fn partition(&self, shard: u32) -> String {
        match self {
            AuditScope::Day(day) => keys::audit_day_pk(*day, shard),
            AuditScope::Actor(actor) => keys::audit_actor_pk(actor, shard),
        }
    }
}

/// One page of the audit trail, and the sort key to continue after.
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next_after: Option<String>,
}

/// The audit records one change is written as, one per view (the order's
/// timeline, the day's and the actor's shard of `event_id`): what
/// `audit_puts` writes, and what the capacity checks size and count.
pub fn audit_items(entry: &AuditEntry, event_id: &str) -> Result<Vec<Item>, StoreError> {
    let sk = keys::audit_sk(&entry.at, event_id);
    let shard = keys::shard_of(event_id, AUDIT_SHARDS);
    let record: Item = serde_dynamo::to_item(entry)?;
    Ok([
        keys::audit_order_pk(&entry.order_id),
        keys::audit_day_pk(entry.at.date_naive(), shard),
        keys::audit_actor_pk(&entry.actor, shard),
    ]
    .into_iter()
    .map(|pk| {
        let mut item = record.clone();
        item.insert(keys::PK.into(), AttributeValue::S(pk));
        item.insert(keys::SK.into(), AttributeValue::S(sk.clone()));
        item
    })
    .collect())
}

impl Store {
    /// The three puts that record `entry`, for the change's transaction.
    pub(super) fn audit_puts(&self, entry: &AuditEntry) -> Result<Vec<TransactWriteItem>, StoreError> {
        let event_id = uuid::Uuid::new_v4().simple().to_string();
        audit_items(entry, &event_id)?
            .into_iter()
            .map(|item| {
                let put = Put::builder().table_name(&self.metrics_table).set_item(Some(item)).build()?;
                Ok(TransactWriteItem::builder().put(put).build())
            })
            .collect()
    }

    /// An order's changes, oldest first.
    pub async fn order_timeline(&self, order_id: &str) -> Result<Vec<AuditEntry>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(keys::audit_order_pk(order_id)))
            .scan_index_forward(true)
            .limit(MAX_TIMELINE)
            .send()
            .await?;
        out.items.unwrap_or_default().into_iter().map(|item| Ok(serde_dynamo::from_item(item)?)).collect()
    }

    /// A page of a day's or an actor's changes, newest first, after `after`.
    /// Each shard is read for up to a page and the answers merged: at most
    /// `AUDIT_SHARDS` Queries, one round.
    pub async fn audit_page(
        &self,
        scope: &AuditScope,
        limit: u32,
        after: Option<&str>,
    ) -> Result<AuditPage, StoreError> {
        let reads = (0..AUDIT_SHARDS).map(|shard| self.read_audit_partition(scope.partition(shard), limit, after));
        let mut rows: Vec<(String, AuditEntry)> = Vec::new();
        let mut more = false;
        for (items, partition_more) in try_join_all(reads).await? {
            more |= partition_more;
            rows.extend(items);
        }
        rows.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        more |= rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_after = if more { rows.last().map(|(sk, _)| sk.clone()) } else { None };
        Ok(AuditPage { entries: rows.into_iter().map(|(_, entry)| entry).collect(), next_after })
    }

    async fn read_audit_partition(
        &self,
        pk: String,
        limit: u32,
        after: Option<&str>,
    ) -> Result<(Vec<(String, AuditEntry)>, bool), StoreError> {
        let query = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .scan_index_forward(false)
            .limit(limit as i32);
        let query = match after {
            Some(after) => query
                .key_condition_expression("PK = :pk AND SK < :after")
                .expression_attribute_values(":after", AttributeValue::S(after.to_string())),
            None => query.key_condition_expression("PK = :pk"),
        };
        let out = query.send().await?;
        let more = out.last_evaluated_key().is_some_and(|k| !k.is_empty());
        let rows = out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|mut item| {
                let sk = match item.remove(keys::SK) {
                    Some(AttributeValue::S(sk)) => sk,
                    _ => return Err(StoreError::Data("an audit record without a sort key".into())),
                };
                Ok((sk, serde_dynamo::from_item(item)?))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((rows, more))
    }
}

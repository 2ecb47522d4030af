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
//!
//! Security events (sign-ins, accounts, tokens, sale plans, shard counts,
//! rehearsals, repairs: `model::AuditKind`) are written beside them, to the
//! day and actor views, with a `kind`.
//!
//! The trail is append-only: every put is conditioned on
//! `attribute_not_exists(PK)` (a put over a record fails), and nothing here
//! updates or deletes a record. Records carry the table's TTL attribute when
//! the operator sets a retention period (`--audit-retention-days`).

use super::{Item, Store};
use crate::model::{AuditEntry, AuditKind, AuditRecord, SecurityEvent, iso_millis};
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, AUDIT_SHARDS, attr};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, NaiveDate, Utc};
use futures::future::try_join_all;
use serde::de::DeserializeOwned;

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

/// Which records of a scope to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindFilter {
    Any,
    One(AuditKind),
    /// Every kind but order changes.
    Security,
}

/// One page of the audit trail, and the sort key to continue after.
pub struct AuditPage {
    pub entries: Vec<AuditRecord>,
    pub next_after: Option<String>,
}

/// The audit records one change is written as, one per view (the order's
/// timeline, the day's and the actor's shard of `event_id`), with their
/// kind: what `audit_puts` writes (adding the expiry the store's retention
/// sets), and what the capacity checks size and count.
pub fn audit_items(entry: &AuditEntry, event_id: &str) -> Result<Vec<Item>, StoreError> {
    let sk = keys::audit_sk(&entry.at, event_id);
    let shard = keys::shard_of(event_id, AUDIT_SHARDS);
    let mut record: Item = serde_dynamo::to_item(entry)?;
    record.insert(attr::KIND.into(), AttributeValue::S(AuditKind::OrderChange.as_str().into()));
    let partitions = [
        keys::audit_order_pk(&entry.order_id),
        keys::audit_day_pk(entry.at.date_naive(), shard),
        keys::audit_actor_pk(&entry.actor, shard),
    ];
    Ok(records_under(&record, &partitions, &sk))
}

/// The records a security event is written as: in its day's and its
/// actor's views, under `event_id`.
fn security_items(event: &SecurityEvent, event_id: &str) -> Result<Vec<Item>, StoreError> {
    let sk = keys::audit_sk(&event.at, event_id);
    let shard = keys::shard_of(event_id, AUDIT_SHARDS);
    let record: Item = serde_dynamo::to_item(event)?;
    let partitions = [keys::audit_day_pk(event.at.date_naive(), shard), keys::audit_actor_pk(&event.actor, shard)];
    Ok(records_under(&record, &partitions, &sk))
}

/// `record` under each partition, with sort key `sk`.
fn records_under(record: &Item, partitions: &[String], sk: &str) -> Vec<Item> {
    partitions
        .iter()
        .map(|pk| {
            let mut item = record.clone();
            item.insert(keys::PK.into(), AttributeValue::S(pk.clone()));
            item.insert(keys::SK.into(), AttributeValue::S(sk.to_string()));
            item
        })
        .collect()
}

impl Store {
    /// The three puts that record `entry`, for the change's transaction.
    pub(super) fn audit_puts(&self, entry: &AuditEntry) -> Result<Vec<TransactWriteItem>, StoreError> {
        let event_id = uuid::Uuid::new_v4().simple().to_string();
        self.append_puts(audit_items(entry, &event_id)?, &entry.at)
    }

    /// Puts of `items`, each only where no record is (the trail is
    /// append-only), each with its expiry when records have one.
    fn append_puts(&self, items: Vec<Item>, at: &DateTime<Utc>) -> Result<Vec<TransactWriteItem>, StoreError> {
        let expires = self.audit_retention.map(|retention| (*at + retention).timestamp());
        items
            .into_iter()
            .map(|mut item| {
                if let Some(expires) = expires {
                    item.insert(attr::EXPIRES_AT.into(), AttributeValue::N(expires.to_string()));
                }
                let put = Put::builder()
                    .table_name(&self.metrics_table)
                    .set_item(Some(item))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", keys::PK)
                    .build()?;
                Ok(TransactWriteItem::builder().put(put).build())
            })
            .collect()
    }

    /// The puts that record a security event, under a new id: in its day's
    /// and its actor's views.
    pub(super) fn security_puts(&self, event: &SecurityEvent) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.security_puts_as(event, &uuid::Uuid::new_v4().simple().to_string())
    }

    fn security_puts_as(&self, event: &SecurityEvent, event_id: &str) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.append_puts(security_items(event, event_id)?, &event.at)
    }

    /// Records a security event (both copies or neither).
    pub async fn record_event(&self, event: &SecurityEvent) -> Result<(), StoreError> {
        self.record_event_as(event, &uuid::Uuid::new_v4().simple().to_string()).await
    }

    /// Records a security event under the id given: a second record with
    /// the same time and id is refused (`Conflict`), never written over the
    /// first. Public so that a test can try.
    pub async fn record_event_as(&self, event: &SecurityEvent, event_id: &str) -> Result<(), StoreError> {
        let puts = self.security_puts_as(event, event_id)?;
        match self.client.transact_write_items().set_transact_items(Some(puts)).send().await {
            Ok(_) => Ok(()),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_transaction_canceled_exception()) => {
                Err(StoreError::Conflict(format!("audit record {event_id} exists already: the trail is append-only")))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Records a security event; a failure is logged, not returned: the
    /// action it records has happened already.
    pub async fn record_event_or_log(&self, event: &SecurityEvent) {
        if let Err(err) = self.record_event(event).await {
            tracing::error!(error = %err, kind = %event.kind, actor = %event.actor, "a security event could not be recorded");
        }
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

    /// A page of a day's or an actor's records of `kinds`, newest first,
    /// after `after`. Each shard is read for up to a page and the answers
    /// merged: at most `AUDIT_SHARDS` Queries, one round. A filtered shard
    /// may stop early having found few: the page then ends where the
    /// least-read shard stopped (the records past it are not known yet), so
    /// it may hold fewer than `limit`, and the next continues from there.
    pub async fn audit_page(
        &self,
        scope: &AuditScope,
        kinds: KindFilter,
        limit: u32,
        after: Option<&str>,
    ) -> Result<AuditPage, StoreError> {
        let reads =
            (0..AUDIT_SHARDS).map(|shard| self.read_audit_partition(scope.partition(shard), kinds, limit, after));
        let mut rows: Vec<(String, AuditRecord)> = Vec::new();
        // The highest sort key a shard stopped at: every shard is read whole
        // down to it.
        let mut frontier: Option<String> = None;
        for (items, stopped_at) in try_join_all(reads).await? {
            rows.extend(items);
            if let Some(stopped_at) = stopped_at
                && frontier.as_ref().is_none_or(|f| &stopped_at > f)
            {
                frontier = Some(stopped_at);
            }
        }
        if let Some(frontier) = &frontier {
            rows.retain(|(sk, _)| sk >= frontier);
        }
        rows.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        let next_after = if rows.len() > limit as usize {
            rows.truncate(limit as usize);
            rows.last().map(|(sk, _)| sk.clone())
        } else {
            frontier
        };
        Ok(AuditPage { entries: rows.into_iter().map(|(_, entry)| entry).collect(), next_after })
    }

    /// Up to `limit` records of a partition after `after` (fewer when
    /// filtered), and the sort key it stopped at when there are more.
    async fn read_audit_partition(
        &self,
        pk: String,
        kinds: KindFilter,
        limit: u32,
        after: Option<&str>,
    ) -> Result<(Vec<(String, AuditRecord)>, Option<String>), StoreError> {
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
        let order_change = AttributeValue::S(AuditKind::OrderChange.as_str().into());
        let query = match kinds {
            KindFilter::Any => query,
            // Order changes written before kinds existed have none.
            KindFilter::One(AuditKind::OrderChange) => query
                .filter_expression("attribute_not_exists(#kind) OR #kind = :kind")
                .expression_attribute_names("#kind", attr::KIND)
                .expression_attribute_values(":kind", order_change),
            KindFilter::One(kind) => query
                .filter_expression("#kind = :kind")
                .expression_attribute_names("#kind", attr::KIND)
                .expression_attribute_values(":kind", AttributeValue::S(kind.as_str().into())),
            KindFilter::Security => query
                .filter_expression("attribute_exists(#kind) AND #kind <> :kind")
                .expression_attribute_names("#kind", attr::KIND)
                .expression_attribute_values(":kind", order_change),
        };
        let out = query.send().await?;
        let stopped_at = out.last_evaluated_key().and_then(|k| match k.get(keys::SK) {
            Some(AttributeValue::S(sk)) => Some(sk.clone()),
            _ => None,
        });
        let rows = out.items.unwrap_or_default().into_iter().filter_map(audit_record).collect();
        Ok((rows, stopped_at))
    }
}

/// A record of the trail as read, whatever it holds: its time from the sort
/// key (always there), every other field read alone, and what could not be
/// read named. `None` only for an item without a sort key (none is).
fn audit_record(item: Item) -> Option<(String, AuditRecord)> {
    let sk = match item.get(keys::SK) {
        Some(AttributeValue::S(sk)) => sk.clone(),
        _ => return None,
    };
    let mut problems = Vec::new();
    let at = text(&item, attr::AT)
        .and_then(|at| iso_millis::parse(&at).ok())
        .or_else(|| keys::parse_audit_sk(&sk))
        .unwrap_or_default();
    let kind = match text(&item, attr::KIND) {
        None => AuditKind::OrderChange,
        Some(kind) => match AuditKind::parse(&kind) {
            AuditKind::Unknown => {
                problems.push(format!("kind {:?} unknown", kind.chars().take(80).collect::<String>()));
                AuditKind::Unknown
            }
            known => known,
        },
    };
    let mut record = AuditRecord {
        at,
        kind,
        actor: text(&item, attr::ACTOR),
        method: parsed(&item, attr::METHOD, &mut problems),
        client: text(&item, attr::CLIENT),
        subject: text(&item, attr::SUBJECT),
        refused: parsed(&item, attr::REFUSED, &mut problems),
        detail: text(&item, attr::DETAIL),
        order_id: text(&item, attr::ORDER_ID),
        from: parsed(&item, attr::FROM, &mut problems),
        to: parsed(&item, attr::TO, &mut problems),
        reason: text(&item, attr::REASON),
        bulk_id: text(&item, attr::BULK_ID),
        problems: Vec::new(),
    };
    for (field, present) in [(attr::ACTOR, record.actor.is_some()), (attr::AT, text(&item, attr::AT).is_some())] {
        if !present {
            problems.push(format!("{field} missing"));
        }
    }
    record.problems = problems;
    Some((sk, record))
}

/// A string attribute, if it is one.
fn text(item: &Item, name: &str) -> Option<String> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A string attribute read as `T` (an enum's serde name); one that is there
/// but does not read is named in `problems`.
fn parsed<T: DeserializeOwned>(item: &Item, name: &str, problems: &mut Vec<String>) -> Option<T> {
    let value = item.get(name)?;
    let (read, shown) = match value {
        AttributeValue::S(s) => (serde_json::from_value(serde_json::Value::String(s.clone())).ok(), format!("{s:?}")),
        AttributeValue::Null(_) => return None,
        _ => (None, "not a string".to_string()),
    };
    if read.is_none() {
        // Cut short: whatever the item held is shown, never all of it.
        let shown: String = shown.chars().take(80).collect();
        problems.push(format!("{name} {shown} unreadable"));
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Actor, Refusal, SignIn, Status};

    #[test]
    fn every_field_the_app_writes_reads_back_by_the_names_in_keys() {
        let actor = Actor { name: "alice".into(), method: SignIn::Password };
        let event = SecurityEvent::new(AuditKind::SignInRefused, &actor, Some([10, 0, 0, 7].into()))
            .subject("alice")
            .refused(Refusal::WrongPassword)
            .detail("three in a row");
        let mut item: Item = serde_dynamo::to_item(&event).unwrap();
        item.insert(keys::SK.into(), AttributeValue::S(keys::audit_sk(&event.at, "id")));
        let (_, read) = audit_record(item).unwrap();
        assert!(read.problems.is_empty(), "{:?}", read.problems);
        assert_eq!(
            (read.kind, read.actor.as_deref(), read.method),
            (event.kind, Some("alice"), Some(SignIn::Password))
        );
        assert_eq!((read.client.as_deref(), read.subject.as_deref()), (Some("10.0.0.7"), Some("alice")));
        assert_eq!(
            (read.refused, read.detail.as_deref(), read.at),
            (Some(Refusal::WrongPassword), Some("three in a row"), event.at)
        );

        let change = AuditEntry {
            at: event.at,
            order_id: "o-1".into(),
            actor: "bob".into(),
            method: SignIn::Token,
            from: Some(Status::Pending),
            to: Status::Cancelled,
            reason: Some("asked".into()),
            bulk_id: Some("b-1".into()),
        };
        let mut item: Item = serde_dynamo::to_item(&change).unwrap();
        item.insert(keys::SK.into(), AttributeValue::S(keys::audit_sk(&change.at, "id")));
        let (_, read) = audit_record(item).unwrap();
        assert!(read.problems.is_empty(), "{:?}", read.problems);
        assert_eq!(
            (read.kind, read.order_id.as_deref(), read.from, read.to),
            (AuditKind::OrderChange, Some("o-1"), Some(Status::Pending), Some(Status::Cancelled))
        );
        assert_eq!((read.reason.as_deref(), read.bulk_id.as_deref()), (Some("asked"), Some("b-1")));
    }
}

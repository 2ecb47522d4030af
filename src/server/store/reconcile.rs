//! What reconciliation asks of DynamoDB: a consistent snapshot of counter
//! items and checkpoints, the members of the index, a Scan of the orders,
//! the repair of a counter by a delta, and the lease of the stream reader.

use super::checkpoints::checkpoint_of;
use super::items::{AddExpression, LEASE_FREE, keyed, lease_names, lease_values};
use super::{Checkpoint, Item, Store, backoff, key_item};
use crate::model::{ReconcileRefusal, iso_millis};
use crate::server::store::deltas::Key;
use crate::server::store::error::{StoreError, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::operation::transact_get_items::TransactGetItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, Delete, Get, Put, ReturnConsumedCapacity, TransactGetItem, TransactWriteItem, Update,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use backon::Retryable;
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::{BTreeMap, HashMap};

/// Items one TransactGetItems may read.
pub const TRANSACT_GET_MAX: usize = 100;
/// Attempts at a snapshot that collides with the consumer's transactions.
const SNAPSHOT_ATTEMPTS: u32 = 6;

/// A counter item as a snapshot saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterItem {
    pub exists: bool,
    /// Its state counters (see `keys::is_state_attribute`).
    pub values: BTreeMap<String, i64>,
    /// Its `repairs` count, for the repair's condition (`None`: never repaired).
    pub repairs: Option<i64>,
}

/// Counter items and checkpoints read by one TransactGetItems: the consumer
/// writes both in one transaction, so they are a consistent pair.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// In the order the keys were given.
    pub counters: Vec<CounterItem>,
    /// By shard id; a shard that has none has not been started.
    pub checkpoints: HashMap<String, Checkpoint>,
}

/// One page of a Scan of the orders table: the items as read (with only
/// what the state counters need); how each counts is the consumer's rule
/// (`stream::counters::image_of`), applied by reconciliation.
pub struct ScanPage {
    pub items: Vec<Item>,
    /// Read capacity units consumed, when the engine says.
    pub consumed: Option<f64>,
    pub scanned: u64,
    pub next: Option<Item>,
}

/// A repair of one counter item: increments, and the verdict recorded.
#[derive(Clone, Debug)]
pub struct CounterRepair {
    pub key: Key,
    /// What the snapshot saw of `repairs`: the write is made only if no
    /// repair has been made since.
    pub seen_repairs: Option<i64>,
    /// Increments; a non-empty list counts as one repair.
    pub adds: Vec<(String, i64)>,
    pub verdict: Option<Verdict>,
}

/// A reconciliation's finding about one counter item, written with a
/// round of repairs: put (`json`), or deleted (`None`).
#[derive(Clone, Debug)]
pub struct FindingWrite {
    pub stream_arn: String,
    pub counter: Key,
    pub json: Option<String>,
}

/// What a reconciliation found, as stored on the counter item.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub at: DateTime<Utc>,
    pub drift: i64,
    pub repaired: bool,
    pub by: String,
}

/// The orders table's read capacity, for pacing a Scan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadCapacity {
    /// Provisioned read capacity units; `None` for an on-demand table.
    pub provisioned: Option<i64>,
    /// DynamoDB's estimate of the item count (refreshed every few hours).
    pub item_count: Option<i64>,
}

impl Store {
    /// One TransactGetItems of `counters`, each with its sub-items
    /// (`keys::COUNTER_SUBS`), and of the checkpoint of every shard in
    /// `shards`; retried while it collides with a transaction. Each counter
    /// comes back as its item and sub-items summed.
    pub async fn snapshot(
        &self,
        counters: &[Key],
        stream_arn: &str,
        shards: &[String],
    ) -> Result<Snapshot, StoreError> {
        let items = snapshot_items(counters) + shards.len();
        if items > TRANSACT_GET_MAX {
            return Err(StoreError::Rejected(format!(
                "a snapshot of {items} items (counters with their sub-items, and checkpoints) exceeds the \
                 {TRANSACT_GET_MAX} a transaction may read"
            )));
        }
        let mut request = self.client.transact_get_items();
        let counter_keys =
            counters.iter().flat_map(|key| std::iter::once(key.clone()).chain(keys::counter_sub_keys(key)));
        let checkpoint_keys = shards.iter().map(|shard| keys::checkpoint_key(stream_arn, shard));
        for key in counter_keys.chain(checkpoint_keys) {
            let get = Get::builder().table_name(&self.metrics_table).set_key(Some(key_item(key))).build()?;
            request = request.transact_items(TransactGetItem::builder().get(get).build());
        }
        let cancelled = |err: &SdkError<TransactGetItemsError, HttpResponse>| {
            err.as_service_error().is_some_and(|e| e.is_transaction_canceled_exception())
        };
        let sent = (|| request.clone().send())
            .retry(backoff(SNAPSHOT_ATTEMPTS - 1))
            .sleep(tokio::time::sleep)
            .when(cancelled)
            .await;
        match sent {
            Ok(out) => {
                self.count_checkpoint_reads(shards.len());
                let items: Vec<Option<Item>> = out.responses.unwrap_or_default().into_iter().map(|r| r.item).collect();
                let sizes: Vec<usize> = counters.iter().map(|key| 1 + keys::counter_sub_keys(key).len()).collect();
                Ok(snapshot_of(items, &sizes, shards))
            }
            Err(err) if cancelled(&err) => {
                Err(StoreError::Conflict("the snapshot kept colliding with the consumer's transactions".into()))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The ids of the orders in one GSI2 partition: every page, keys only.
    pub async fn pending_members(&self, day: NaiveDate, shard: u32) -> Result<Vec<String>, StoreError> {
        let mut pages = self
            .partition_query(day, shard)
            .projection_expression("#id")
            .expression_attribute_names("#id", attr::ORDER_ID)
            .into_paginator()
            .items()
            .send();
        let mut ids = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item?;
            let id = item.get(attr::ORDER_ID).and_then(|v| v.as_s().ok());
            ids.push(id.ok_or_else(|| StoreError::Data(format!("a GSI2 item without an order id: {item:?}")))?.clone());
        }
        Ok(ids)
    }

    /// One page of one segment of a strongly consistent parallel Scan of
    /// the orders, reading only what the state counters need.
    pub async fn scan_orders(
        &self,
        segment: i32,
        segments: i32,
        start: Option<Item>,
        limit: i32,
    ) -> Result<ScanPage, StoreError> {
        let out = self
            .client
            .scan()
            .table_name(&self.orders_table)
            .segment(segment)
            .total_segments(segments)
            .set_exclusive_start_key(start)
            .limit(limit)
            .consistent_read(true)
            .projection_expression("#pk, #id, #status, #created, #gsi2")
            .expression_attribute_names("#pk", keys::PK)
            .expression_attribute_names("#id", attr::ORDER_ID)
            .expression_attribute_names("#status", attr::STATUS)
            .expression_attribute_names("#created", attr::CREATED_AT)
            .expression_attribute_names("#gsi2", keys::GSI2PK)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        Ok(ScanPage {
            items: out.items.unwrap_or_default(),
            consumed: out.consumed_capacity.and_then(|c| c.capacity_units),
            scanned: out.scanned_count.max(0) as u64,
            next: out.last_evaluated_key.filter(|k| !k.is_empty()),
        })
    }

    /// The orders table's provisioned read capacity and item count.
    pub async fn read_capacity(&self) -> Result<ReadCapacity, StoreError> {
        let table = self.client.describe_table().table_name(&self.orders_table).send().await?.table;
        let table = table.ok_or_else(|| StoreError::Data(format!("no description of {}", self.orders_table)))?;
        let on_demand =
            table.billing_mode_summary().and_then(|b| b.billing_mode()) == Some(&BillingMode::PayPerRequest);
        let units = table.provisioned_throughput().and_then(|p| p.read_capacity_units()).filter(|u| *u > 0);
        Ok(ReadCapacity { provisioned: units.filter(|_| !on_demand), item_count: table.item_count })
    }

    /// Applies repairs in one transaction, each only if its item's `repairs`
    /// is still what the snapshot saw: a `Conflict` (nothing written) when
    /// another reconciliation repaired first. `ADD` commutes with the
    /// consumer's increments, which never touch `repairs`.
    pub async fn repair_counters(&self, repairs: &[CounterRepair]) -> Result<(), StoreError> {
        self.repair_counters_with(repairs, None).await
    }

    /// `repair_counters`, with a finding put or deleted in the same
    /// transaction (`keys::reconcile_finding_key`): a finding recorded with
    /// its verdict, or removed by the repair that agreed with it.
    pub async fn repair_counters_with(
        &self,
        repairs: &[CounterRepair],
        finding: Option<&FindingWrite>,
    ) -> Result<(), StoreError> {
        let mut transaction = self.client.transact_write_items();
        let mut writes = 0;
        for repair in repairs.iter().filter(|r| !r.adds.is_empty() || r.verdict.is_some()) {
            transaction = transaction.transact_items(TransactWriteItem::builder().update(self.repair(repair)?).build());
            writes += 1;
        }
        if writes == 0 {
            return Ok(());
        }
        if let Some(finding) = finding {
            transaction = transaction.transact_items(self.finding_write(finding)?);
        }
        // The changes made, in the trail, in the same transaction: no repair
        // without its record.
        if let Some(event) = repair_event(repairs) {
            for put in self.security_puts(&event)? {
                transaction = transaction.transact_items(put);
            }
        }
        match transaction.send().await {
            Ok(_) => Ok(()),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_transaction_canceled_exception()) => {
                Err(StoreError::Conflict("another reconciliation repaired these counters first".into()))
            }
            Err(err) => Err(err.into()),
        }
    }

    fn repair(&self, repair: &CounterRepair) -> Result<Update, StoreError> {
        let (pk, sk) = repair.key.clone();
        let mut add = AddExpression::of(repair.adds.iter().map(|(attribute, by)| (attribute.as_str(), by.to_string())));
        let repaired = !add.terms.is_empty();
        if repaired {
            add.terms.push("#repairs :one".into());
        }
        let mut expression = if repaired { add.expression() } else { String::new() };
        let mut update = Update::builder()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .set_expression_attribute_names(Some(add.names))
            .set_expression_attribute_values(Some(add.values))
            .expression_attribute_names("#repairs", attr::REPAIRS);
        if repaired {
            update = update.expression_attribute_values(":one", AttributeValue::N("1".into()));
        }
        if let Some(verdict) = &repair.verdict {
            update = with_verdict(update, verdict)
                .expression_attribute_names("#refused", attr::RECONCILE_REFUSED)
                .expression_attribute_names("#refusedAt", attr::RECONCILE_REFUSED_AT);
            // A verdict ends the last refusal.
            expression.push_str(
                " SET #vat = :vat, #vdrift = :vdrift, #vrep = :vrep, #vby = :vby REMOVE #refused, #refusedAt",
            );
        }
        update = match &repair.seen_repairs {
            Some(seen) => update
                .condition_expression("#repairs = :seen")
                .expression_attribute_values(":seen", AttributeValue::N(seen.to_string())),
            None => update.condition_expression("attribute_not_exists(#repairs)"),
        };
        Ok(update.update_expression(expression.trim()).build()?)
    }

    /// The finding recorded about counter item `counter` anchored on
    /// `stream_arn`, as written (JSON), read strongly consistent.
    pub async fn reconcile_finding(&self, stream_arn: &str, counter: &Key) -> Result<Option<String>, StoreError> {
        let item = self.metric_item(keys::reconcile_finding_key(stream_arn, counter), true).await?;
        Ok(item.and_then(|item| item.get(attr::FINDING).and_then(|v| v.as_s().ok()).cloned()))
    }

    fn finding_write(&self, finding: &FindingWrite) -> Result<TransactWriteItem, StoreError> {
        let (pk, sk) = keys::reconcile_finding_key(&finding.stream_arn, &finding.counter);
        Ok(match &finding.json {
            Some(json) => {
                let item = Item::from([(attr::FINDING.to_string(), AttributeValue::S(json.clone()))]);
                let put =
                    Put::builder().table_name(&self.metrics_table).set_item(Some(keyed((pk, sk), item))).build()?;
                TransactWriteItem::builder().put(put).build()
            }
            None => {
                let delete = Delete::builder()
                    .table_name(&self.metrics_table)
                    .key(keys::PK, AttributeValue::S(pk))
                    .key(keys::SK, AttributeValue::S(sk))
                    .build()?;
                TransactWriteItem::builder().delete(delete).build()
            }
        })
    }

    /// Records on a counter item why reconciliation refused to judge it
    /// (`model::ReconcileRefusal`, as JSON), until a verdict removes it. One
    /// UpdateItem, no condition: it changes no counter.
    pub async fn record_refusal(
        &self,
        key: &Key,
        refusal: &ReconcileRefusal,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let json = serde_json::to_string(refusal).map_err(|e| StoreError::Data(e.to_string()))?;
        let (pk, sk) = key.clone();
        self.client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #refused = :refused, #refusedAt = :at")
            .expression_attribute_names("#refused", attr::RECONCILE_REFUSED)
            .expression_attribute_names("#refusedAt", attr::RECONCILE_REFUSED_AT)
            .expression_attribute_values(":refused", AttributeValue::S(json))
            .expression_attribute_values(":at", AttributeValue::S(iso_millis::format(&at)))
            .send()
            .await?;
        Ok(())
    }

    /// Takes or renews the stream-reader lease; `false` while another
    /// reconciliation holds it.
    pub async fn take_reader_lease(
        &self,
        stream_arn: &str,
        owner: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let lease = Item::from([
            (attr::OWNER.to_string(), AttributeValue::S(owner.to_string())),
            (attr::LEASE_UNTIL.to_string(), AttributeValue::N(until_ms.to_string())),
        ]);
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .set_item(Some(keyed(keys::reconcile_reader_key(stream_arn), lease)))
            .condition_expression(LEASE_FREE)
            .set_expression_attribute_names(Some(lease_names()))
            .set_expression_attribute_values(Some(lease_values(owner, now_ms)))
            .send()
            .await;
        Ok(unless_condition_failed(put)?.is_some())
    }

    /// Gives the stream-reader lease back, if this owner still holds it.
    pub async fn release_reader_lease(&self, stream_arn: &str, owner: &str) -> Result<(), StoreError> {
        let (pk, sk) = keys::reconcile_reader_key(stream_arn);
        let delete = self
            .client
            .delete_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .condition_expression("#owner = :me")
            .expression_attribute_names("#owner", attr::OWNER)
            .expression_attribute_values(":me", AttributeValue::S(owner.to_string()))
            .send()
            .await;
        unless_condition_failed(delete).map(|_| ())
    }
}

fn with_verdict(
    update: aws_sdk_dynamodb::types::builders::UpdateBuilder,
    verdict: &Verdict,
) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    update
        .expression_attribute_names("#vat", attr::VERIFIED_AT)
        .expression_attribute_names("#vdrift", attr::VERIFIED_DRIFT)
        .expression_attribute_names("#vrep", attr::VERIFIED_REPAIRED)
        .expression_attribute_names("#vby", attr::VERIFIED_BY)
        .expression_attribute_values(":vat", AttributeValue::S(iso_millis::format(&verdict.at)))
        .expression_attribute_values(":vdrift", AttributeValue::N(verdict.drift.to_string()))
        .expression_attribute_values(":vrep", AttributeValue::Bool(verdict.repaired))
        .expression_attribute_values(":vby", AttributeValue::S(verdict.by.clone()))
}

/// Items a snapshot of `counters` reads besides the checkpoints: each
/// counter item and its sub-items.
pub fn snapshot_items(counters: &[Key]) -> usize {
    counters.iter().map(|key| 1 + keys::counter_sub_keys(key).len()).sum()
}

/// A snapshot from the items read, in the order asked: each counter's
/// `sizes` items (the item, then its sub-items), then a checkpoint a shard.
fn snapshot_of(mut items: Vec<Option<Item>>, sizes: &[usize], shards: &[String]) -> Snapshot {
    let checkpoint_items = items.split_off(sizes.iter().sum::<usize>().min(items.len()));
    let checkpoints = shards
        .iter()
        .zip(checkpoint_items)
        .filter_map(|(shard, item)| Some((shard.clone(), checkpoint_of(&item?))))
        .collect();
    let mut rest = items.as_slice();
    let mut counters = Vec::new();
    for size in sizes {
        let (group, after) = rest.split_at((*size).min(rest.len()));
        counters.push(counter_item(group));
        rest = after;
    }
    Snapshot { counters, checkpoints }
}

/// A counter as a snapshot read it: its item (`group[0]`, where its
/// `repairs` count is) and its sub-items, state counters summed.
fn counter_item(group: &[Option<Item>]) -> CounterItem {
    let number = |v: &AttributeValue| v.as_n().ok().and_then(|n| n.parse::<i64>().ok());
    let mut counter = CounterItem {
        repairs: group.first().and_then(Option::as_ref).and_then(|item| item.get(attr::REPAIRS)).and_then(number),
        ..CounterItem::default()
    };
    for item in group.iter().flatten() {
        counter.exists = true;
        for (name, value) in item.iter().filter(|(name, _)| keys::is_state_attribute(name)) {
            if let Some(n) = number(value) {
                *counter.values.entry(name.clone()).or_default() += n;
            }
        }
    }
    counter
}

/// The verdict stored on a counter item, if a reconciliation left one.
pub fn verdict_of(item: &Item) -> Option<Verdict> {
    Some(Verdict {
        at: iso_millis::parse(item.get(attr::VERIFIED_AT)?.as_s().ok()?).ok()?,
        drift: item.get(attr::VERIFIED_DRIFT)?.as_n().ok()?.parse().ok()?,
        repaired: item.get(attr::VERIFIED_REPAIRED).and_then(|v| v.as_bool().ok()).copied().unwrap_or(false),
        by: item.get(attr::VERIFIED_BY).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default(),
    })
}

/// The refusal stored on a counter item, if the last reconciliation refused.
pub fn refused_of(item: &Item) -> Option<(DateTime<Utc>, ReconcileRefusal)> {
    let at = iso_millis::parse(item.get(attr::RECONCILE_REFUSED_AT)?.as_s().ok()?).ok()?;
    Some((at, serde_json::from_str(item.get(attr::RECONCILE_REFUSED)?.as_s().ok()?).ok()?))
}

/// The security event of a round of repairs that changed counters: each
/// change as `PK SK attribute +n`. `None` when it only files verdicts.
fn repair_event(repairs: &[CounterRepair]) -> Option<crate::model::SecurityEvent> {
    let changes: Vec<String> = repairs
        .iter()
        .flat_map(|r| r.adds.iter().map(move |(attribute, by)| format!("{} {} {attribute} {by:+}", r.key.0, r.key.1)))
        .collect();
    if changes.is_empty() {
        return None;
    }
    let by = repairs.iter().find_map(|r| r.verdict.as_ref().map(|v| v.by.clone()));
    let actor = crate::model::Actor::cli("reconcile");
    // A record stays small however many minutes were repaired.
    const SHOWN: usize = 200;
    let mut detail = changes.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ");
    if changes.len() > SHOWN {
        detail.push_str(&format!("; and {} more", changes.len() - SHOWN));
    }
    if let Some(by) = by {
        detail = format!("{detail} (by {by})");
    }
    Some(crate::model::SecurityEvent::new(crate::model::AuditKind::ReconciliationRepair, &actor, None).detail(detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_pairs_counters_and_checkpoints_by_position() {
        let counter = HashMap::from([
            ("pending".to_string(), AttributeValue::N("4".into())),
            ("shard1".to_string(), AttributeValue::N("4".into())),
            ("e1015".to_string(), AttributeValue::N("9".into())),
            ("repairs".to_string(), AttributeValue::N("2".into())),
        ]);
        let checkpoint = HashMap::from([("seq".to_string(), AttributeValue::S("000000000000000000042".into()))]);
        let shards = vec!["s-1".to_string(), "s-2".to_string()];
        let sub = HashMap::from([
            ("pending".to_string(), AttributeValue::N("-1".into())),
            ("shard0".to_string(), AttributeValue::N("2".into())),
            ("repairs".to_string(), AttributeValue::N("7".into())),
        ]);
        let items = vec![Some(counter), None, Some(sub), None, Some(checkpoint), None];
        let snapshot = snapshot_of(items, &[3, 1], &shards);
        // The item and its sub-items summed; the repairs count is the item's.
        let summed = BTreeMap::from([("pending".into(), 3), ("shard0".into(), 2), ("shard1".into(), 4)]);
        assert_eq!(snapshot.counters[0].values, summed);
        assert_eq!(snapshot.counters[0].repairs, Some(2));
        assert!(!snapshot.counters[1].exists);
        assert_eq!(snapshot.checkpoints["s-1"].seq.as_deref(), Some("000000000000000000042"));
        assert!(!snapshot.checkpoints.contains_key("s-2"), "no checkpoint item: not started");
    }
}

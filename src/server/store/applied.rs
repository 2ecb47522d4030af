//! The Lambda consumer's transaction: the counter increments of some stream
//! records, and a marker per record (`keys::applied_key`) put only where
//! none exists. Lambda hands records over without their stream shard, so
//! there is no shard checkpoint to move: each record is applied once
//! because its marker is written with its increments, or not at all.
//!
//! And the applied ranges (`keys::applied_range_key`): every commit that
//! knows its shard (the in-process consumer's, a Lambda tumbling window's,
//! a replay's) records in its own transaction the first and last record it
//! applied of each shard, one small item per shard and commit, kept while
//! the stream keeps those records. `replay` reads them and skips what they
//! cover.

use super::conflicts::{CounterSends, send_retrying_conflicts};
use super::items::{AddExpression, add_to_metric};
use super::{CheckpointMove, Store};
use crate::server::store::deltas::Deltas;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, CancellationReason, Put, TransactWriteItem};
use std::collections::HashMap;

/// How long a marker is kept (the metrics table's TTL): the stream keeps a
/// record 24 hours, and Lambda retries a record no longer than that.
const KEEP_SECS: i64 = 7 * 24 * 3600;

/// DynamoDB's limit of actions in one transaction.
pub const TRANSACTION_ITEMS: usize = 100;

/// Most attributes one update of `add_deltas` adds to: an update
/// expression is limited in size.
const ADDS_PER_UPDATE: usize = 100;

/// A marker is put only where none exists.
const MARKER_ABSENT: &str = "attribute_not_exists(PK)";

/// A marker item: its key, its expiry, and the record's sequence number.
fn marker_item(marker: &Marker<'_>) -> HashMap<String, AttributeValue> {
    let (pk, sk) = keys::applied_key(marker.event_id);
    let expires = chrono::Utc::now().timestamp() + KEEP_SECS;
    let mut item = HashMap::from([
        (keys::PK.to_string(), AttributeValue::S(pk)),
        (keys::SK.to_string(), AttributeValue::S(sk)),
        (attr::EXPIRES_AT.to_string(), AttributeValue::N(expires.to_string())),
    ]);
    if let Some(seq) = marker.seq {
        item.insert(attr::SEQ.to_string(), AttributeValue::S(seq.to_string()));
    }
    item
}

/// One stream record's marker: its event id, and its sequence number (kept
/// on the marker, for whoever looks).
#[derive(Clone, Copy, Debug)]
pub struct Marker<'a> {
    pub event_id: &'a str,
    pub seq: Option<&'a str>,
}

/// What `commit_marked` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marked {
    /// Every marker and every increment was written.
    Applied,
    /// Nothing was written: the markers at these positions (of those given)
    /// exist, so their records were applied before.
    AlreadyApplied(Vec<usize>),
}

/// How long an applied range is kept (`expiresAt`, the metrics table's
/// TTL): the stream's retention (24 hours, after which its records can no
/// longer be replayed) and a day more, as DynamoDB trims records within
/// that day but not to the second, and TTL deletes within days of expiry.
pub const RANGE_KEPT_SECS: i64 = 2 * 24 * 3600;

/// Applied ranges read per page of `applied_ranges`' Query.
const RANGES_PAGE: i32 = 100;

/// Records of one stream shard that one commit applied, from `first` to
/// `last` (sequence numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeOf<'a> {
    pub stream_arn: &'a str,
    pub shard_id: &'a str,
    pub first: &'a str,
    pub last: &'a str,
}

/// An applied range as read back: its first and last sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedRange {
    pub first: String,
    pub last: String,
}

impl Store {
    /// The Put of an applied range, for a commit's transaction: no
    /// condition (a range written twice by a transaction sent again is the
    /// same item).
    pub(super) fn applied_range_put(&self, range: &RangeOf<'_>) -> Result<TransactWriteItem, StoreError> {
        let (pk, sk) = keys::applied_range_key(range.stream_arn, range.shard_id, range.first, range.last);
        let expires = chrono::Utc::now().timestamp() + RANGE_KEPT_SECS;
        let item = HashMap::from([
            (keys::PK.to_string(), AttributeValue::S(pk)),
            (keys::SK.to_string(), AttributeValue::S(sk)),
            (attr::FIRST.to_string(), AttributeValue::S(range.first.to_string())),
            (attr::LAST.to_string(), AttributeValue::S(range.last.to_string())),
            (attr::EXPIRES_AT.to_string(), AttributeValue::N(expires.to_string())),
        ]);
        let put = Put::builder().table_name(&self.metrics_table).set_item(Some(item)).build()?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The applied ranges of a shard that may hold records from `first` to
    /// `last`: a Query (strongly consistent, `RANGES_PAGE` items a page) of
    /// the ranges ending at or after `first`, in order of their last
    /// record, up to the first that starts after `last`. A shard's commits
    /// apply its records in order, one range after another, and a replay's
    /// lie within the range it replays, so no range after that one reaches
    /// back to `last`; what the stream's later hours committed is not read.
    pub async fn applied_ranges(
        &self,
        stream_arn: &str,
        shard_id: &str,
        first: &str,
        last: &str,
    ) -> Result<Vec<AppliedRange>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("#pk = :pk AND #sk >= :from")
            .expression_attribute_names("#pk", keys::PK)
            .expression_attribute_names("#sk", keys::SK)
            .expression_attribute_values(":pk", AttributeValue::S(keys::applied_ranges_pk(stream_arn, shard_id)))
            .expression_attribute_values(":from", AttributeValue::S(keys::applied_range_sk(first, "")))
            .consistent_read(true)
            .limit(RANGES_PAGE)
            .into_paginator()
            .items()
            .send();
        let end = keys::seq_sort_key(last);
        let mut ranges = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item?;
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            let (Some(first), Some(last)) = (text(attr::FIRST), text(attr::LAST)) else {
                return Err(StoreError::Data(format!("an applied range without its first or last record: {item:?}")));
            };
            if keys::seq_sort_key(&first) > end {
                break;
            }
            ranges.push(AppliedRange { first, last });
        }
        Ok(ranges)
    }
}

impl Store {
    /// One transaction: a marker per record, each conditioned on not
    /// existing, and the counter increments of those records. A marker that
    /// exists cancels the whole transaction: the caller drops its record and
    /// tries the rest again. A cancellation by conflicts with other
    /// transactions alone is sent again, with backoff (`conflicts`). Any
    /// other cancellation is an error and writes nothing (throttled, or
    /// still in conflict after those retries: `Unavailable`; refused, e.g. a
    /// counter that is not a number: `Rejected`).
    ///
    /// A replay, which knows the records' shard, also records their
    /// `range`, and may move the shard's `checkpoint` past them (its
    /// condition failing is a `Conflict`, and nothing was written).
    pub async fn commit_marked(
        &self,
        markers: &[Marker<'_>],
        range: Option<&RangeOf<'_>>,
        checkpoint: Option<&CheckpointMove<'_>>,
        deltas: &Deltas,
    ) -> Result<Marked, StoreError> {
        let mut puts = markers
            .iter()
            .map(|marker| {
                let put = Put::builder()
                    .table_name(&self.metrics_table)
                    .set_item(Some(marker_item(marker)))
                    .condition_expression(MARKER_ABSENT);
                Ok(TransactWriteItem::builder().put(put.build()?).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        if let Some(range) = range {
            puts.push(self.applied_range_put(range)?);
        }
        // Where the checkpoint's reason is among the cancellation's.
        let checkpoint_at = checkpoint.map(|_| puts.len());
        if let Some(checkpoint) = checkpoint {
            puts.push(TransactWriteItem::builder().update(self.checkpoint_update(checkpoint)?).build());
        }
        // The live counters go to sub-items (`keys::COUNTER_SUBS`), picked
        // by the first record: batches of different shards rarely share one.
        let sub = markers.first().map_or(0, |m| keys::counter_sub_for(m.event_id));
        let sends = CounterSends::new(puts, sub, |sub| self.counter_updates(deltas, sub))?;
        match send_retrying_conflicts(&self.client, &sends, "commit_marked").await {
            Ok(_) => Ok(Marked::Applied),
            Err(err) => match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    let reasons = cancelled.cancellation_reasons();
                    // An engine that gives no reasons: one record's marker
                    // can still be looked up.
                    if let ([], [marker]) = (reasons, markers)
                        && self.applied(marker.event_id).await?
                    {
                        return Ok(Marked::AlreadyApplied(vec![0]));
                    }
                    marked_cancelled(markers.len(), checkpoint_at, reasons)
                }
                _ => Err(err.into()),
            },
        }
    }
}

impl Store {
    /// Adds `deltas` item by item, each an UpdateItem of its own (at most
    /// `ADDS_PER_UPDATE` attributes each), not a transaction: every shard's
    /// Lambda window closes at the same moment and adds to the same
    /// observation items, where transactions would refuse each other (and
    /// each item would be charged twice). What was added before an error
    /// stays added.
    pub async fn add_deltas(&self, deltas: &Deltas) -> Result<(), StoreError> {
        self.drain_deltas(&mut deltas.clone()).await
    }

    /// `add_deltas`, taking each update's increments out of `deltas` once it
    /// is made: after an error `deltas` holds what was not added, so adding
    /// them again adds nothing twice (the in-process consumer's carried
    /// observations).
    pub async fn drain_deltas(&self, deltas: &mut Deltas) -> Result<(), StoreError> {
        let rows = deltas.rows();
        for item in rows.chunk_by(|a, b| (&a.0, &a.1) == (&b.0, &b.1)) {
            for chunk in item.chunks(ADDS_PER_UPDATE) {
                let (pk, sk) = (&chunk[0].0, &chunk[0].1);
                let increments: Vec<(&String, i64)> =
                    chunk.iter().map(|(_, _, attribute, by)| (attribute, *by)).collect();
                add_to_metric(&self.client, &self.metrics_table, (pk, sk), AddExpression::of_increments(&increments))
                    .await?;
                for (pk, sk, attribute, by) in chunk {
                    deltas.add((pk.clone(), sk.clone()), attribute.clone(), -by);
                }
            }
        }
        Ok(())
    }

    /// Puts `marker` only where none exists, alone (one write unit, where a
    /// transaction is charged two): whether this call put it.
    pub async fn put_marker(&self, marker: &Marker<'_>) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .set_item(Some(marker_item(marker)))
            .condition_expression(MARKER_ABSENT);
        match put.send().await {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// Whether a stream record's marker exists (a strongly consistent read).
    pub async fn applied(&self, event_id: &str) -> Result<bool, StoreError> {
        Ok(self.metric_item(keys::applied_key(event_id), true).await?.is_some())
    }
}

/// Why `commit_marked`'s transaction was cancelled, from the reasons DynamoDB
/// gives one per action, the markers first. Only markers can fail a
/// condition (the increments have none), so a `ConditionalCheckFailed`
/// names a record applied before; anything else wrote nothing and is an
/// error.
/// A replay's checkpoint (at `checkpoint_at`) that is not where it was read
/// is a `Conflict`, whatever else failed: the replay reads it again.
fn marked_cancelled(
    markers: usize,
    checkpoint_at: Option<usize>,
    reasons: &[CancellationReason],
) -> Result<Marked, StoreError> {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
    let detail = || format!("the transaction applying {markers} stream records was cancelled: [{}]", codes.join(", "));
    if checkpoint_at.is_some_and(|at| codes.get(at) == Some(&"ConditionalCheckFailed")) {
        return Err(StoreError::Conflict("the shard's checkpoint moved while the records were replayed".into()));
    }
    let failed: Vec<usize> =
        codes.iter().enumerate().filter(|(_, c)| **c == "ConditionalCheckFailed").map(|(i, _)| i).collect();
    let others = codes.iter().any(|c| !matches!(*c, "None" | "ConditionalCheckFailed"));
    if !failed.is_empty() && !others && failed.iter().all(|i| *i < markers) {
        return Ok(Marked::AlreadyApplied(failed));
    }
    Err(super::checkpoints::cancelled_otherwise(&codes, detail()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::error::Unavailable;

    fn cancelled(markers: usize, codes: &[&str]) -> Result<Marked, StoreError> {
        let reasons: Vec<CancellationReason> =
            codes.iter().map(|code| CancellationReason::builder().code(*code).build()).collect();
        marked_cancelled(markers, None, &reasons)
    }

    #[test]
    fn existing_markers_are_named_by_position() {
        let codes = ["None", "ConditionalCheckFailed", "None", "ConditionalCheckFailed", "None"];
        assert_eq!(cancelled(4, &codes).unwrap(), Marked::AlreadyApplied(vec![1, 3]));
    }

    #[test]
    fn anything_else_is_an_error_that_wrote_nothing() {
        let err = cancelled(2, &["None", "None", "ValidationError"]).unwrap_err();
        assert!(matches!(err, StoreError::Rejected(ref d) if d.contains("ValidationError")), "{err:?}");
        // A marker that exists beside another failure: not only "applied before".
        let err = cancelled(2, &["ConditionalCheckFailed", "None", "ValidationError"]).unwrap_err();
        assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
        let err = cancelled(1, &["None", "ThrottlingError"]).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }), "{err:?}");
        let err = cancelled(1, &["None", "TransactionConflict"]).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Busy, .. }), "{err:?}");
        // An engine that gives no reasons: nothing is known here, nothing
        // assumed (`commit_marked` looks a lone record's marker up).
        assert!(matches!(cancelled(1, &[]).unwrap_err(), StoreError::Rejected(_)));
    }

    #[test]
    fn a_replays_moved_checkpoint_is_a_conflict_whatever_else_failed() {
        let reasons = |codes: &[&str]| -> Vec<CancellationReason> {
            codes.iter().map(|code| CancellationReason::builder().code(*code).build()).collect()
        };
        // Two markers, the range, the checkpoint, a counter.
        let codes = ["ConditionalCheckFailed", "None", "None", "ConditionalCheckFailed", "None"];
        assert!(matches!(marked_cancelled(2, Some(3), &reasons(&codes)), Err(StoreError::Conflict(_))));
        // The checkpoint where it was read: the existing marker decides.
        let codes = ["ConditionalCheckFailed", "None", "None", "None", "None"];
        assert_eq!(marked_cancelled(2, Some(3), &reasons(&codes)).unwrap(), Marked::AlreadyApplied(vec![0]));
    }
}

//! The stream consumer's leases and checkpoints, and the transaction that
//! applies a batch of counter increments together with its checkpoint.

use super::conflicts::{CounterSends, send_retrying_conflicts};
use super::items::{AddExpression, LEASE_FREE, lease_names, lease_values};
use super::{Item, RangeOf, Store};
use crate::server::store::deltas::Deltas;
use crate::server::store::error::{StoreError, Unavailable, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, KeysAndAttributes, ReturnValue, TransactWriteItem, Update,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// How long a finished shard's checkpoint is kept (the metrics table's TTL,
/// `expiresAt`, from when it was finished): the stream's retention (24
/// hours: the shard's last record, written before it finished, is trimmed
/// by then, and the closed shard stops being listed), and as much again,
/// as DynamoDB trims records and deletes shards within that day but not to
/// the second. Until then a listed shard's checkpoint is always there: one
/// missing would read as "not started", and its records be applied again.
pub const FINISHED_KEPT_SECS: i64 = 2 * 24 * 3600;

/// How far a stream shard has been applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// The sequence number of the last record applied.
    pub seq: Option<String>,
    /// The shard was closed and read to its end.
    pub finished: bool,
    /// Who holds the shard's lease, and until when (milliseconds since the
    /// epoch; `0` once handed over).
    pub lease: Option<(String, i64)>,
}

impl Checkpoint {
    /// Whether a consumer other than `owner` holds the lease at `now_ms`:
    /// `take_lease` would be refused (its condition, `LEASE_FREE`, read
    /// here), so a consumer looking for a share of the shards need not send
    /// it, a failed conditional write that costs a write unit all the same.
    pub fn held_by_other(&self, owner: &str, now_ms: i64) -> bool {
        self.lease.as_ref().is_some_and(|(holder, until)| holder != owner && *until >= now_ms)
    }
}

/// Who holds a stream shard, and until when (milliseconds since the epoch).
#[derive(Clone, Copy, Debug)]
pub struct Lease<'a> {
    pub stream_arn: &'a str,
    pub shard_id: &'a str,
    pub owner: &'a str,
    pub until_ms: i64,
}

/// Who moves a shard's checkpoint, and so what guards the move besides
/// the checkpoint itself.
#[derive(Clone, Copy, Debug)]
pub enum Holder<'a> {
    /// A consumer under its lease (`consume`): the lease must be its own,
    /// and the move renews it.
    Lease(&'a Lease<'a>),
    /// Lambda's event source mapping, which delivers a shard one batch at a
    /// time (`ParallelizationFactor` 1) and holds no lease in this table:
    /// only the checkpoint guards the move (`lambda`).
    Mapping { stream_arn: &'a str, shard_id: &'a str },
}

impl<'a> Holder<'a> {
    pub fn stream_arn(&self) -> &'a str {
        match self {
            Holder::Lease(lease) => lease.stream_arn,
            Holder::Mapping { stream_arn, .. } => stream_arn,
        }
    }

    pub fn shard_id(&self) -> &'a str {
        match self {
            Holder::Lease(lease) => lease.shard_id,
            Holder::Mapping { shard_id, .. } => shard_id,
        }
    }
}

/// A shard's checkpoint moved by a commit: from `prev` to `seq` (`None`:
/// where it is), `finished` once the closed shard has been read to its end.
/// `first`: the first record the commit applies of the shard (to `seq`),
/// recorded as its applied range in the same transaction (`None`: it
/// applies no record of the shard, or records no range).
#[derive(Clone, Copy, Debug)]
pub struct CheckpointMove<'a> {
    pub holder: Holder<'a>,
    pub prev: Option<&'a str>,
    pub seq: Option<&'a str>,
    pub finished: bool,
    pub first: Option<&'a str>,
}

impl<'a> CheckpointMove<'a> {
    /// The range of records the commit applies, if it records one.
    pub fn range(&self) -> Option<RangeOf<'a>> {
        let (first, last) = (self.first?, self.seq?);
        Some(RangeOf { stream_arn: self.holder.stream_arn(), shard_id: self.holder.shard_id(), first, last })
    }
}

impl Store {
    /// Every checkpoint of a stream, by shard id: its whole `CHECKPOINT#`
    /// partition, every shard of the last two days (for tests and
    /// inspection; a pass reads by key, `checkpoints_of`).
    pub async fn checkpoints(&self, stream_arn: &str) -> Result<HashMap<String, Checkpoint>, StoreError> {
        let items = self.metrics_partition(keys::checkpoint_pk(stream_arn), true).await?;
        let mut checkpoints = HashMap::new();
        for item in items {
            let shard = item.get(keys::SK).and_then(|v| v.as_s().ok()).and_then(|sk| keys::parse_checkpoint_sk(sk));
            if let Some(shard) = shard {
                checkpoints.insert(shard.to_string(), checkpoint_of(&item));
            }
        }
        Ok(checkpoints)
    }

    /// The checkpoints of `shard_ids`, read strongly consistent (BatchGetItem,
    /// 100 keys a call), by shard id; a shard with none is absent. What a
    /// pass reads, instead of the stream's whole `CHECKPOINT#` partition
    /// (`checkpoints`), which holds every shard of the last two days.
    pub async fn checkpoints_of(
        &self,
        stream_arn: &str,
        shard_ids: &[String],
    ) -> Result<HashMap<String, Checkpoint>, StoreError> {
        let mut checkpoints = HashMap::new();
        for chunk in shard_ids.chunks(100) {
            let keys = chunk.iter().map(|id| super::key_item(keys::checkpoint_key(stream_arn, id))).collect();
            let request = KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build()?;
            let items = self.batch_get(&self.metrics_table, request).await?;
            self.count_checkpoint_reads(chunk.len());
            for item in items {
                let sk = item.get(keys::SK).and_then(|v| v.as_s().ok());
                if let Some(shard) = sk.and_then(|sk| keys::parse_checkpoint_sk(sk)) {
                    checkpoints.insert(shard.to_string(), checkpoint_of(&item));
                }
            }
        }
        Ok(checkpoints)
    }

    /// Checkpoint items this store has read (`checkpoints_of`, snapshots).
    pub fn checkpoint_items_read(&self) -> u64 {
        self.checkpoint_items_read.load(Ordering::Relaxed)
    }

    pub(super) fn count_checkpoint_reads(&self, items: usize) {
        self.checkpoint_items_read.fetch_add(items as u64, Ordering::Relaxed);
    }

    /// One shard's checkpoint, read strongly consistent (a commit just
    /// before is seen).
    pub async fn checkpoint(&self, stream_arn: &str, shard_id: &str) -> Result<Checkpoint, StoreError> {
        let item = self.metric_item(keys::checkpoint_key(stream_arn, shard_id), true).await?;
        Ok(item.as_ref().map(checkpoint_of).unwrap_or_default())
    }

    /// Takes or renews the lease of a shard, returning its checkpoint;
    /// `None` while another consumer holds an unexpired lease.
    pub async fn take_lease(&self, lease: &Lease<'_>, now_ms: i64) -> Result<Option<Checkpoint>, StoreError> {
        let result = self
            .lease_update(lease)
            .update_expression("SET #owner = :me, #until = :until")
            .condition_expression(LEASE_FREE)
            .set_expression_attribute_names(Some(lease_names()))
            .set_expression_attribute_values(Some(lease_values(lease.owner, now_ms)))
            .expression_attribute_values(":until", AttributeValue::N(lease.until_ms.to_string()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        Ok(unless_condition_failed(result)?.map(|out| checkpoint_of(&out.attributes.unwrap_or_default())))
    }

    /// Gives a lease back, so the next consumer takes the shard at once
    /// instead of waiting for it to expire (a graceful handoff). Only the
    /// owner's lease is released: one taken over meanwhile is left alone.
    /// Whether this consumer still held it.
    pub async fn release_lease(&self, lease: &Lease<'_>) -> Result<bool, StoreError> {
        let result = self
            .lease_update(lease)
            .update_expression("SET #until = :zero")
            .condition_expression("#owner = :me")
            .set_expression_attribute_names(Some(lease_names()))
            .expression_attribute_values(":me", AttributeValue::S(lease.owner.to_string()))
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .send()
            .await;
        Ok(unless_condition_failed(result)?.is_some())
    }

    /// Marks a checkpoint finished, with its expiry (`FINISHED_KEPT_SECS`),
    /// where it stands at `seq`: the closed shard's last record (its
    /// `EndingSequenceNumber`) or past it, so nothing in the shard is left
    /// to apply. For the Lambda form, whose events never say a shard ended:
    /// reconciliation, which lists the shards, finishes them. Conditioned on
    /// the sequence number, so it never moves a checkpoint; whether it was
    /// still there (a finished one is left as it is).
    pub async fn finish_checkpoint(&self, stream_arn: &str, shard_id: &str, seq: &str) -> Result<bool, StoreError> {
        let (pk, sk) = keys::checkpoint_key(stream_arn, shard_id);
        let expires = chrono::Utc::now().timestamp() + FINISHED_KEPT_SECS;
        let result = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #finished = :finished, #expires = :expires")
            .condition_expression("#seq = :seq AND attribute_not_exists(#finished)")
            .expression_attribute_names("#seq", attr::SEQ)
            .expression_attribute_names("#finished", attr::FINISHED)
            .expression_attribute_names("#expires", attr::EXPIRES_AT)
            .expression_attribute_values(":seq", AttributeValue::S(seq.to_string()))
            .expression_attribute_values(":finished", AttributeValue::Bool(true))
            .expression_attribute_values(":expires", AttributeValue::N(expires.to_string()))
            .send()
            .await;
        Ok(unless_condition_failed(result)?.is_some())
    }

    /// Records on a shard's checkpoint item that records after its
    /// checkpoint were trimmed before they were read (`trimmedAt`).
    pub async fn mark_trimmed(
        &self,
        stream_arn: &str,
        shard_id: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), StoreError> {
        let (pk, sk) = keys::checkpoint_key(stream_arn, shard_id);
        self.client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #trimmed = :at")
            .expression_attribute_names("#trimmed", attr::TRIMMED_AT)
            .expression_attribute_values(":at", AttributeValue::S(crate::model::iso_millis::format(&at)))
            .send()
            .await?;
        Ok(())
    }

    /// An UpdateItem of a lease's checkpoint item.
    fn lease_update(
        &self,
        lease: &Lease<'_>,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        let (pk, sk) = keys::checkpoint_key(lease.stream_arn, lease.shard_id);
        self.client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
    }

    /// One transaction: the counter increments of a batch, and the shard's
    /// checkpoint moved from `prev` to `seq` by the lease holder (renewing
    /// the lease). See `commit_batches`.
    pub async fn commit_batch(
        &self,
        lease: &Lease<'_>,
        prev: Option<&str>,
        seq: Option<&str>,
        finished: bool,
        deltas: &Deltas,
    ) -> Result<(), StoreError> {
        let moves = [CheckpointMove { holder: Holder::Lease(lease), prev, seq, finished, first: None }];
        self.commit_batches(&moves, deltas).await
    }

    /// One transaction: the counter increments of the batches of one or more
    /// shards, and each shard's checkpoint moved from its `prev` to its
    /// `seq` by its holder (renewing a lease). A checkpoint that is not at
    /// `prev`, or a lease someone else holds, is a `Conflict` and
    /// changes nothing: so a batch is applied exactly once, whoever replays
    /// it. A transaction in conflict with another one is sent again, with
    /// backoff (`conflicts`); one cancelled for any other reason (throttled,
    /// or still in conflict after those retries) changes nothing either, and
    /// is `Unavailable`: the same batches go again later. Several shards in
    /// one transaction write the day's counter items once for all of them,
    /// through the first shard's sub-items (`keys::COUNTER_SUBS`). Each
    /// move that names its `first` record puts the shard's applied range
    /// (after the checkpoints, whose reasons come first): two items a
    /// shard, not one per record.
    pub async fn commit_batches(&self, moves: &[CheckpointMove<'_>], deltas: &Deltas) -> Result<(), StoreError> {
        let mut checkpoints = moves
            .iter()
            .map(|m| Ok(TransactWriteItem::builder().update(self.checkpoint_update(m)?).build()))
            .collect::<Result<Vec<_>, StoreError>>()?;
        for range in moves.iter().filter_map(CheckpointMove::range) {
            checkpoints.push(self.applied_range_put(&range)?);
        }
        // The live counters go to the sub-items of the first shard: each
        // shard to its own, so that shards do not refuse each other.
        let sub = moves.first().map_or(0, |m| keys::counter_sub_for(m.holder.shard_id()));
        let sends = CounterSends::new(checkpoints, sub, |sub| self.counter_updates(deltas, sub))?;
        match send_retrying_conflicts(&self.client, &sends, "commit_batch").await {
            Ok(_) => Ok(()),
            Err(err) => match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    let shards: Vec<&str> = moves.iter().map(|m| m.holder.shard_id()).collect();
                    Err(batch_cancelled(&shards, cancelled.cancellation_reasons()))
                }
                _ => Err(err.into()),
            },
        }
    }

    pub(super) fn checkpoint_update(&self, m: &CheckpointMove<'_>) -> Result<Update, StoreError> {
        let (pk, sk) = keys::checkpoint_key(m.holder.stream_arn(), m.holder.shard_id());
        let mut sets = Vec::new();
        let mut conditions = Vec::new();
        let mut update = Update::builder()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .expression_attribute_names("#seq", attr::SEQ);
        if let Holder::Lease(lease) = m.holder {
            sets.push("#until = :until");
            conditions.push("#owner = :me");
            update = update
                .expression_attribute_names("#owner", attr::OWNER)
                .expression_attribute_names("#until", attr::LEASE_UNTIL)
                .expression_attribute_values(":me", AttributeValue::S(lease.owner.to_string()))
                .expression_attribute_values(":until", AttributeValue::N(lease.until_ms.to_string()));
        }
        if let Some(seq) = m.seq {
            sets.push("#seq = :seq");
            update = update.expression_attribute_values(":seq", AttributeValue::S(seq.to_string()));
        }
        if m.finished {
            // A finished shard's checkpoint never moves again: it expires
            // once the shard is no longer listed (`FINISHED_KEPT_SECS`).
            let expires = chrono::Utc::now().timestamp() + FINISHED_KEPT_SECS;
            sets.push("#finished = :finished");
            sets.push("#expires = :expires");
            update = update
                .expression_attribute_names("#finished", attr::FINISHED)
                .expression_attribute_names("#expires", attr::EXPIRES_AT)
                .expression_attribute_values(":finished", AttributeValue::Bool(true))
                .expression_attribute_values(":expires", AttributeValue::N(expires.to_string()));
        }
        match m.prev {
            Some(prev) => {
                conditions.push("#seq = :prev");
                update = update.expression_attribute_values(":prev", AttributeValue::S(prev.to_string()));
            }
            None => conditions.push("attribute_not_exists(#seq)"),
        }
        if sets.is_empty() {
            // A mapping's move always names where it moves to.
            return Err(StoreError::Rejected(format!("a checkpoint move of {} to nowhere", m.holder.shard_id())));
        }
        Ok(update
            .condition_expression(conditions.join(" AND "))
            .update_expression(format!("SET {}", sets.join(", ")))
            .build()?)
    }

    /// One counter item's increments as an `ADD` update.
    /// The increments of `deltas` as update actions, the live counters' on
    /// sub-item `sub`.
    pub(super) fn counter_updates(&self, deltas: &Deltas, sub: u32) -> Result<Vec<TransactWriteItem>, StoreError> {
        deltas
            .through_sub(sub)
            .items()
            .map(|(key, increments)| {
                Ok(TransactWriteItem::builder().update(self.increments(key, &increments)?).build())
            })
            .collect()
    }

    pub(super) fn increments(
        &self,
        (pk, sk): &(String, String),
        increments: &[(&String, i64)],
    ) -> Result<Update, StoreError> {
        let add = AddExpression::of_increments(increments);
        Ok(Update::builder()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk.clone()))
            .key(keys::SK, AttributeValue::S(sk.clone()))
            .update_expression(add.expression())
            .set_expression_attribute_names(Some(add.names))
            .set_expression_attribute_values(Some(add.values))
            .build()?)
    }
}

/// Why `commit_batch`'s transaction was cancelled, from the reasons DynamoDB
/// gives one per action, the checkpoint's first. Only the checkpoint's own
/// condition failing is a `Conflict` (the consumer then drops its cursor and
/// re-reads the checkpoint); a throttled action or a conflict with another
/// transaction is `Unavailable` (the consumer keeps its cursor and retries).
fn batch_cancelled(shards: &[&str], reasons: &[CancellationReason]) -> StoreError {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
    let detail =
        || format!("the transaction applying a batch of {} was cancelled: [{}]", shards.join(", "), codes.join(", "));
    // The checkpoints come first: one not where this consumer left it.
    let moved: Vec<&str> =
        shards.iter().zip(&codes).filter(|(_, code)| **code == "ConditionalCheckFailed").map(|(s, _)| *s).collect();
    if !moved.is_empty() || codes.is_empty() {
        // An engine that gives no reasons: a conflict, as re-reading the
        // checkpoint is always safe.
        let which = if moved.is_empty() { shards.join(", ") } else { moved.join(", ") };
        return StoreError::Conflict(format!("the checkpoint of {which} is not where this consumer left it"));
    }
    cancelled_otherwise(&codes, detail())
}

/// A consumer's transaction cancelled for something other than its own
/// conditions: throttled or in conflict with another transaction (wrote
/// nothing, goes again later), or refused.
pub(super) fn cancelled_otherwise(codes: &[&str], detail: String) -> StoreError {
    if codes.iter().any(|c| matches!(*c, "ThrottlingError" | "ProvisionedThroughputExceeded")) {
        StoreError::unavailable(Unavailable::Throttled, detail)
    } else if codes.contains(&"TransactionConflict") {
        StoreError::unavailable(Unavailable::Busy, detail)
    } else {
        StoreError::Rejected(detail)
    }
}

pub(super) fn checkpoint_of(item: &Item) -> Checkpoint {
    Checkpoint {
        seq: item.get(attr::SEQ).and_then(|v| v.as_s().ok()).cloned(),
        finished: item.get(attr::FINISHED).and_then(|v| v.as_bool().ok()).copied().unwrap_or(false),
        lease: item.get(attr::OWNER).and_then(|v| v.as_s().ok()).map(|owner| {
            let until = item.get(attr::LEASE_UNTIL).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok());
            (owner.clone(), until.unwrap_or(0))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled(codes: &[&str]) -> StoreError {
        let reasons: Vec<CancellationReason> =
            codes.iter().map(|code| CancellationReason::builder().code(*code).build()).collect();
        batch_cancelled(&["shard-1"], &reasons)
    }

    #[test]
    fn of_several_shards_the_one_whose_checkpoint_moved_is_named() {
        let reasons: Vec<CancellationReason> = ["None", "ConditionalCheckFailed", "None"]
            .iter()
            .map(|code| CancellationReason::builder().code(*code).build())
            .collect();
        let err = batch_cancelled(&["shard-1", "shard-2"], &reasons);
        assert!(
            matches!(&err, StoreError::Conflict(why) if why.contains("shard-2") && !why.contains("shard-1")),
            "{err:?}"
        );
    }

    #[test]
    fn only_the_checkpoints_failed_condition_is_a_conflict() {
        assert!(matches!(cancelled(&["ConditionalCheckFailed", "None"]), StoreError::Conflict(_)));
        // The checkpoint's condition decides, whatever else was refused.
        assert!(matches!(cancelled(&["ConditionalCheckFailed", "ThrottlingError"]), StoreError::Conflict(_)));
        assert!(matches!(cancelled(&[]), StoreError::Conflict(_)));
    }

    #[test]
    fn a_throttled_or_conflicting_transaction_is_retried_not_a_conflict() {
        for codes in
            [&["None", "ThrottlingError"][..], &["ThrottlingError"], &["ProvisionedThroughputExceeded", "None"]]
        {
            let err = cancelled(codes);
            let StoreError::Unavailable { kind: Unavailable::Throttled, detail, .. } = &err else {
                panic!("{codes:?}: {err:?}")
            };
            let named = codes.iter().find(|code| **code != "None").unwrap();
            assert!(detail.contains(named), "{detail}");
        }
        let err = cancelled(&["None", "TransactionConflict"]);
        assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Busy, .. }), "{err:?}");
        let err = cancelled(&["None", "ValidationError"]);
        assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
    }

    #[test]
    fn a_lease_is_theirs_while_another_owner_holds_it_unexpired() {
        let item = |owner: Option<&str>, until: Option<&str>| {
            let mut item = Item::new();
            if let Some(owner) = owner {
                item.insert(attr::OWNER.into(), AttributeValue::S(owner.into()));
            }
            if let Some(until) = until {
                item.insert(attr::LEASE_UNTIL.into(), AttributeValue::N(until.into()));
            }
            checkpoint_of(&item)
        };
        assert!(item(Some("b"), Some("2000")).held_by_other("a", 1000), "b's, unexpired");
        assert!(!item(Some("b"), Some("999")).held_by_other("a", 1000), "b's, expired");
        assert!(!item(Some("b"), Some("0")).held_by_other("a", 1000), "handed over");
        assert!(!item(Some("a"), Some("2000")).held_by_other("a", 1000), "a's own");
        assert!(!item(None, None).held_by_other("a", 1000), "never leased");
        assert!(!item(Some("b"), Some("not a number")).held_by_other("a", 1000), "unreadable: take_lease decides");
    }
}

//! Committing what a pass read: several shards' batches in one transaction
//! (each checkpoint moved in it), a batch too big for one split over
//! several, and a failure settled shard by shard.

use super::Consumer;
use super::applier::{Batch, Guard, Increments, Reading};
use super::read::ShardRead;
use super::records::Shards;
use crate::server::store::error::StoreError;
use crate::server::store::{CheckpointMove, Holder, Lease, TRANSACTION_ITEMS};
use crate::server::stream::counters::Deltas;
use aws_sdk_dynamodbstreams::types::Record;

/// Counter items one transaction may touch, leaving room for the checkpoint
/// and the applied range (DynamoDB allows 100 items per transaction).
const MAX_COUNTER_ITEMS: usize = 90;

/// Items a shard's batch puts in a transaction beside its counters: its
/// checkpoint and its applied range.
const ITEMS_PER_SHARD: usize = 2;

impl Consumer {
    /// Applies the batches a pass read, several shards a transaction (each
    /// checkpoint moved in it): the records applied, and the shards whose
    /// batch could not be (tried again at the next pass).
    pub(super) async fn apply_reads(&self, stream_arn: &str, reads: Vec<ShardRead>) -> (u64, usize) {
        let all: Vec<Record> = reads.iter().flat_map(|r| r.records.iter().cloned()).collect();
        let shards = match self.core.shards(&all).await {
            Ok(shards) => shards,
            Err(err) => {
                for read in &reads {
                    self.shard_failed(&read.shard_id, &err).await;
                }
                return (0, reads.len());
            }
        };
        let table = self.store.orders_table().to_string();
        let (mut applied, mut failed) = (0, 0);
        let mut group: Vec<(ShardRead, Vec<Reading>)> = Vec::new();
        let mut increments = Increments::default();
        for read in reads {
            let readings: Vec<Reading> = read.records.iter().map(|r| self.read_record(r, &shards, &read)).collect();
            let alone = readings.iter().fold(Increments::default(), |i, r| i.with(r, &table));
            let merged = readings.iter().fold(increments.clone(), |i, r| i.with(r, &table));
            // Room for the counter items beside each shard's checkpoint and range.
            let guards = ITEMS_PER_SHARD * (group.len() + 1);
            let full = guards > TRANSACTION_ITEMS || merged.too_big(TRANSACTION_ITEMS.saturating_sub(guards));
            if !group.is_empty() && full {
                let (a, f) = self.commit_group(stream_arn, std::mem::take(&mut group), &increments).await;
                (applied, failed) = (applied + a, failed + f);
                increments = Increments::default();
            }
            if alone.too_big(MAX_COUNTER_ITEMS) {
                // Too big for one transaction even alone: split by `apply`.
                let (a, f) = self.apply_alone(stream_arn, read).await;
                (applied, failed) = (applied + a, failed + f);
                continue;
            }
            increments = if group.is_empty() { alone } else { merged };
            group.push((read, readings));
        }
        if !group.is_empty() {
            let (a, f) = self.commit_group(stream_arn, group, &increments).await;
            (applied, failed) = (applied + a, failed + f);
        }
        (applied, failed)
    }

    fn read_record(&self, record: &Record, shards: &Shards, read: &ShardRead) -> Reading {
        let reading = self.core.read(record, shards);
        if reading.change.is_none() {
            let seq = record.dynamodb().and_then(|d| d.sequence_number());
            tracing::warn!(shard_id = read.shard_id, sequence = ?seq, "a stream record that is not a readable order: priced only");
        }
        reading
    }

    /// One transaction for the batches of `group`; if it fails, each shard
    /// alone, so that one shard's moved checkpoint holds up no other.
    async fn commit_group(
        &self,
        stream_arn: &str,
        group: Vec<(ShardRead, Vec<Reading>)>,
        increments: &Increments,
    ) -> (u64, usize) {
        let leases: Vec<Lease<'_>> = group.iter().map(|(r, _)| self.lease_for(stream_arn, &r.shard_id)).collect();
        let seqs: Vec<Option<String>> = group.iter().map(|(r, _)| r.last_seq().or_else(|| r.prev.clone())).collect();
        let firsts: Vec<Option<String>> = group.iter().map(|(r, _)| r.first_seq()).collect();
        let moves: Vec<CheckpointMove<'_>> = group
            .iter()
            .zip(&leases)
            .zip(seqs.iter().zip(&firsts))
            .map(|(((read, _), lease), (seq, first))| CheckpointMove {
                holder: Holder::Lease(lease),
                prev: read.prev.as_deref(),
                seq: seq.as_deref(),
                finished: read.closed(),
                first: first.as_deref(),
            })
            .collect();
        let mut observations = Deltas::default();
        let committed =
            self.core.commit_carrying(increments, Guard::Checkpoints(&moves), Some(&mut observations)).await;
        self.carried.lock().deltas.merge(observations);
        drop(moves);
        match committed {
            Ok(_) => {
                let mut batch = Batch::default();
                let mut records = 0;
                for ((read, readings), seq) in group.into_iter().zip(seqs) {
                    // The checkpoint write renewed the lease too.
                    self.mark_held(&read.shard_id, true);
                    readings.iter().for_each(|r| batch.add(r));
                    records += read.records.len() as u64;
                    self.advance(read, seq).await;
                }
                batch.changed(increments);
                self.core.record_progress(records, &batch);
                self.core.publish(batch).await;
                (records, 0)
            }
            Err(err) if group.len() > 1 => {
                tracing::info!(error = %err, shards = group.len(), "a transaction of several shards failed: each alone");
                let (mut applied, mut failed) = (0, 0);
                for (read, _) in group {
                    let (a, f) = self.apply_alone(stream_arn, read).await;
                    (applied, failed) = (applied + a, failed + f);
                }
                (applied, failed)
            }
            Err(err) => {
                let read = group.into_iter().next().map(|(read, _)| read).expect("a group of one");
                self.settle_failure(&read.shard_id, err).await
            }
        }
    }

    /// One shard's batch in as many transactions as it needs (`apply`).
    async fn apply_alone(&self, stream_arn: &str, read: ShardRead) -> (u64, usize) {
        match self.apply(stream_arn, &read.shard_id, read.prev.clone(), &read.records, read.closed()).await {
            Ok(seq) => {
                let records = read.records.len() as u64;
                self.advance(read, seq).await;
                (records, 0)
            }
            Err(err) => self.settle_failure(&read.shard_id, err).await,
        }
    }

    /// A batch that was not applied: a moved checkpoint starts the shard
    /// over (no failure); anything else fails the shard's pass.
    async fn settle_failure(&self, shard_id: &str, err: StoreError) -> (u64, usize) {
        match err {
            StoreError::Conflict(why) => {
                self.start_over(shard_id, &why).await;
                (0, 0)
            }
            err => {
                self.shard_failed(shard_id, &err).await;
                (0, 1)
            }
        }
    }

    /// Applies records of one shard, read after checkpoint `prev`, in as few
    /// transactions as the limits allow; returns the new checkpoint.
    pub async fn apply(
        &self,
        stream_arn: &str,
        shard_id: &str,
        mut prev: Option<String>,
        records: &[Record],
        closes_shard: bool,
    ) -> Result<Option<String>, StoreError> {
        let lease = self.lease_for(stream_arn, shard_id);
        let table = self.store.orders_table().to_string();
        let shards = self.core.shards(records).await?;
        let mut batch = Batch::default();
        let mut increments = Increments::default();
        // The first and last records of the transaction being gathered.
        let (mut first_seq, mut last_seq): (Option<String>, Option<String>) = (None, None);
        for record in records {
            let seq = record.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string);
            let reading = self.core.read(record, &shards);
            if reading.change.is_none() {
                tracing::warn!(shard_id, sequence = ?seq, "a stream record that is not a readable order: priced only");
            }
            let mut next = increments.with(&reading, &table);
            if next.too_big(MAX_COUNTER_ITEMS) && last_seq.is_some() {
                // Commit what fits, then start the next transaction with this record.
                let applied = (first_seq.take(), last_seq.take());
                prev = self.commit(&lease, prev, applied, false, &increments).await?;
                batch.changed(&increments);
                next = Increments::default().with(&reading, &table);
            }
            increments = next;
            batch.add(&reading);
            first_seq = first_seq.or(seq.clone());
            last_seq = seq.or(last_seq);
        }
        if !records.is_empty() || closes_shard {
            prev = self.commit(&lease, prev, (first_seq, last_seq), closes_shard, &increments).await?;
        }
        batch.changed(&increments);
        self.core.record_progress(records.len() as u64, &batch);
        self.core.publish(batch).await;
        Ok(prev)
    }

    /// One transaction, applying the records from `first` to `seq` (its
    /// applied range); the checkpoint it leaves.
    async fn commit(
        &self,
        lease: &Lease<'_>,
        prev: Option<String>,
        (first, seq): (Option<String>, Option<String>),
        finished: bool,
        increments: &Increments,
    ) -> Result<Option<String>, StoreError> {
        let holder = Holder::Lease(lease);
        let (prev_at, first) = (prev.as_deref(), first.as_deref());
        let moves = [CheckpointMove { holder, prev: prev_at, seq: seq.as_deref(), finished, first }];
        self.core.commit(increments, Guard::Checkpoints(&moves)).await?;
        // The checkpoint write renewed the lease too.
        self.mark_held(lease.shard_id, true);
        Ok(seq.or(prev))
    }
}

//! Reading a shard: one batch at a time, spaced as DynamoDB Streams allows,
//! an expired iterator taken again and trimmed records skipped (and said);
//! the shard's cursor moves on once the batch is applied.

use super::{Consumer, ConsumerError};
use crate::server::store::error::StoreError;
use crate::server::store::{Checkpoint, StreamBatch};
use aws_sdk_dynamodbstreams::types::Record;
use chrono::Utc;
use std::time::{Duration, Instant};

/// Reads of a shard in one pass when its iterator expired or its records
/// were trimmed under it, before the pass moves on.
const READ_TRIES: u32 = 3;
/// The least time between two GetRecords on one shard: DynamoDB Streams
/// refuses a shard's sixth call in a second (`LimitExceededException`), and
/// Lambda's pollers read a shard four times a second; so does this consumer.
const READ_SPACING: Duration = Duration::from_millis(250);

/// One shard's batch, read in a pass and not yet applied.
pub(super) struct ShardRead {
    pub(super) shard_id: String,
    /// The checkpoint the batch follows.
    pub(super) prev: Option<String>,
    pub(super) records: Vec<Record>,
    /// Where reading goes on (`None`: the shard is closed and this batch is
    /// its last).
    pub(super) next: Option<String>,
}

impl ShardRead {
    pub(super) fn closed(&self) -> bool {
        self.next.is_none()
    }

    pub(super) fn last_seq(&self) -> Option<String> {
        self.records.iter().rev().find_map(|r| r.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string))
    }

    /// The first record's sequence number: where the batch's applied range
    /// starts.
    pub(super) fn first_seq(&self) -> Option<String> {
        self.records.iter().find_map(|r| r.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string))
    }
}

/// What a pass found in one shard.
pub(super) enum ShardPass {
    /// Another consumer holds it.
    NotHeld,
    /// Read to its current end: nothing to apply.
    AtEnd,
    Read(ShardRead),
}

/// Where this consumer is in one shard.
#[derive(Default)]
pub(super) struct ShardCursor {
    iterator: Option<String>,
    /// The checkpoint this consumer last wrote or read.
    seq: Option<String>,
    /// When this consumer last called GetRecords on the shard.
    read_at: Option<Instant>,
}

impl ShardCursor {
    /// How long until the shard may be read again (`READ_SPACING`).
    fn wait(&self) -> Duration {
        self.read_at.map_or(Duration::ZERO, |at| READ_SPACING.saturating_sub(at.elapsed()))
    }
}

impl Consumer {
    /// Reads a shard whose lease this consumer holds, one batch; `checkpoint`
    /// is what the store says when the lease was just taken or renewed. The
    /// cursor moves on only once the batch is applied (`advance`).
    pub(super) async fn read_shard(
        &self,
        stream_arn: &str,
        shard_id: &str,
        checkpoint: Option<Checkpoint>,
    ) -> Result<ShardPass, ConsumerError> {
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(shard_id.to_string()).or_default();
        if let Some(checkpoint) = checkpoint
            && cursor.seq != checkpoint.seq
        {
            // Someone else moved this shard on (or this is a restart): resume
            // from the checkpoint, not from a stale iterator.
            *cursor = ShardCursor { iterator: None, seq: checkpoint.seq, read_at: cursor.read_at };
        }
        for _ in 0..READ_TRIES {
            let iterator = match cursor.iterator.take() {
                Some(iterator) => iterator,
                None => match self.store.shard_iterator(stream_arn, shard_id, cursor.seq.as_deref()).await {
                    Ok(iterator) => iterator,
                    // The records after the checkpoint are gone: asking for
                    // them again would fail forever.
                    Err(StoreError::Trimmed(_)) => self.resume_after_trim(stream_arn, shard_id).await?,
                    Err(err) => return Err(err.into()),
                },
            };
            let waited = cursor.wait();
            tokio::time::sleep(waited).await;
            let read_at = Instant::now();
            cursor.read_at = Some(read_at);
            let (records, next) = match self.store.get_records(&iterator, self.options.batch).await? {
                StreamBatch::Records { records, next } => {
                    let (waited_ms, read_ms) = (waited.as_millis() as u64, read_at.elapsed().as_millis() as u64);
                    tracing::trace!(shard_id, records = records.len(), waited_ms, read_ms, "stream consumer: read");
                    (records, next)
                }
                StreamBatch::Expired => continue,
                StreamBatch::Trimmed => {
                    cursor.iterator = Some(self.resume_after_trim(stream_arn, shard_id).await?);
                    continue;
                }
            };
            if records.is_empty() && next.is_some() {
                cursor.iterator = next;
                return Ok(ShardPass::AtEnd);
            }
            let read = ShardRead { shard_id: shard_id.to_string(), prev: cursor.seq.clone(), records, next };
            return Ok(ShardPass::Read(read));
        }
        Ok(ShardPass::AtEnd)
    }

    /// A shard's batch was applied: its checkpoint is now `seq`, and reading
    /// goes on after it (a closed shard's children are to be found).
    pub(super) async fn advance(&self, read: ShardRead, seq: Option<String>) {
        let closed = read.closed();
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(read.shard_id).or_default();
        (cursor.seq, cursor.iterator) = (seq, read.next);
        drop(cursors);
        if closed {
            self.describe_again().await;
        }
    }

    /// Lease lost, or the batch was applied already: the shard starts over
    /// from whatever checkpoint is stored.
    pub(super) async fn start_over(&self, shard_id: &str, why: &str) {
        tracing::info!(shard_id, why, "checkpoint moved; re-reading it");
        self.cursors.lock().await.remove(shard_id);
        self.mark_held(shard_id, false);
    }

    /// Records written to a shard after its checkpoint were trimmed (the
    /// stream keeps them 24 hours) before this consumer read them: their
    /// changes are lost to the counters. Reading goes on from the oldest
    /// record kept (TRIM_HORIZON), the checkpoint moving on from where it
    /// was with the next commit; the loss is logged, shown in the status
    /// (`trimmed_at`) and recorded on the checkpoint item (`trimmedAt`), for
    /// `reconcile --full` to repair the state counters.
    async fn resume_after_trim(&self, stream_arn: &str, shard_id: &str) -> Result<String, ConsumerError> {
        let now = Utc::now();
        tracing::error!(
            shard_id,
            "stream records were trimmed before they were read: resuming at the oldest record kept; the counters \
             need `reconcile --full` over the days before it"
        );
        self.update_status(|s| s.trimmed_at = Some(now));
        if let Err(err) = self.store.mark_trimmed(stream_arn, shard_id, now).await {
            tracing::warn!(shard_id, error = %err, "could not record the trimmed records on the checkpoint");
        }
        Ok(self.store.shard_iterator(stream_arn, shard_id, None).await?)
    }
}

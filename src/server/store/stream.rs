//! Reading the orders table's stream: its shards, iterators and records.

use super::Store;
use crate::server::store::error::StoreError;
use aws_sdk_dynamodbstreams::error::ProvideErrorMetadata;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};

/// One shard of the stream, the shard it was split from, and for a closed
/// shard its `EndingSequenceNumber`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamShard {
    pub id: String,
    pub parent: Option<String>,
    /// The last sequence number of a closed shard (`None` while open).
    pub end: Option<String>,
}

/// What one GetRecords answered.
#[derive(Debug)]
pub enum StreamBatch {
    /// Records (possibly none), and the iterator to continue with; `None`
    /// once a closed shard has been read to its end.
    Records { records: Vec<Record>, next: Option<String> },
    /// The iterator is older than 15 minutes: ask for a new one.
    Expired,
    /// The records after the position were trimmed (older than 24 hours).
    Trimmed,
}

impl Store {
    /// The ARN of the orders table's stream, if it has one.
    pub async fn stream_arn(&self) -> Result<Option<String>, StoreError> {
        let table = self.client.describe_table().table_name(&self.orders_table).send().await?.table;
        Ok(table.and_then(|t| t.latest_stream_arn))
    }

    /// Every shard of the stream, open and closed, in the order listed.
    pub async fn stream_shards(&self, stream_arn: &str) -> Result<Vec<StreamShard>, StoreError> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .streams
                .describe_stream()
                .stream_arn(stream_arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .await?;
            let Some(description) = out.stream_description else { break };
            shards.extend(description.shards.unwrap_or_default().into_iter().filter_map(|s| {
                let end = s.sequence_number_range.as_ref().and_then(|r| r.ending_sequence_number.clone());
                Some(StreamShard { id: s.shard_id?, parent: s.parent_shard_id, end })
            }));
            start = description.last_evaluated_shard_id;
            if start.is_none() {
                break;
            }
        }
        Ok(shards)
    }

    /// An iterator just after `after` (a sequence number), or at the oldest
    /// record kept when there is no position yet; `Trimmed` when the records
    /// after `after` are no longer kept.
    pub async fn shard_iterator(
        &self,
        stream_arn: &str,
        shard_id: &str,
        after: Option<&str>,
    ) -> Result<String, StoreError> {
        match after {
            Some(seq) => self.iterator(stream_arn, shard_id, ShardIteratorType::AfterSequenceNumber, Some(seq)).await,
            None => self.iterator(stream_arn, shard_id, ShardIteratorType::TrimHorizon, None).await,
        }
    }

    /// An iterator at the record numbered `seq` (that record first);
    /// `Trimmed` when it is no longer kept.
    pub async fn shard_iterator_at(&self, stream_arn: &str, shard_id: &str, seq: &str) -> Result<String, StoreError> {
        self.iterator(stream_arn, shard_id, ShardIteratorType::AtSequenceNumber, Some(seq)).await
    }

    async fn iterator(
        &self,
        stream_arn: &str,
        shard_id: &str,
        kind: ShardIteratorType,
        seq: Option<&str>,
    ) -> Result<String, StoreError> {
        let request = self.streams.get_shard_iterator().stream_arn(stream_arn).shard_id(shard_id);
        let request = request.shard_iterator_type(kind.clone()).set_sequence_number(seq.map(str::to_string));
        let out = match request.send().await {
            Ok(out) => out,
            Err(err) if err.as_service_error().and_then(|e| e.code()) == Some("TrimmedDataAccessException") => {
                return Err(StoreError::Trimmed(format!("shard {shard_id} {} {seq:?}", kind.as_str())));
            }
            Err(err) => return Err(err.into()),
        };
        out.shard_iterator
            .ok_or_else(|| StoreError::Rejected(format!("GetShardIterator gave no iterator for {shard_id}")))
    }

    pub async fn get_records(&self, iterator: &str, limit: i32) -> Result<StreamBatch, StoreError> {
        match self.streams.get_records().shard_iterator(iterator).limit(limit).send().await {
            Ok(out) => {
                Ok(StreamBatch::Records { records: out.records.unwrap_or_default(), next: out.next_shard_iterator })
            }
            Err(err) => match err.as_service_error().and_then(|e| e.code()) {
                Some("ExpiredIteratorException") => Ok(StreamBatch::Expired),
                Some("TrimmedDataAccessException") => Ok(StreamBatch::Trimmed),
                _ => Err(err.into()),
            },
        }
    }
}

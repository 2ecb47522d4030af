//! The stream consumer as an AWS Lambda function (`northwind-ops lambda`):
//! Lambda reads the orders table's stream and hands its records over in
//! batches (the DynamoDB event), through the Lambda Runtime API that
//! `lambda_runtime` polls. What a record means and how records are committed
//! is the consumer's own code (`consumer::Applier`); only what guards a
//! record against a second application differs.
//!
//! Lambda delivers a batch at least once. With a tumbling window (the
//! template's `TumblingWindowInSeconds`) each event names its stream shard
//! (`shardId`), and the batch is guarded as `consume` guards it: the
//! transaction that applies records moves the shard's checkpoint item over
//! them (the same item the in-process consumer keeps, and reconciliation
//! anchors at), only from where it was read; a record at or before the
//! checkpoint was applied before. That is one item per transaction, however
//! many records (and the shard's applied range beside it, which `replay`
//! skips: a batch given up after part of it committed is replayed only for
//! the rest), and it holds because Lambda delivers a shard one batch at a
//! time (`ParallelizationFactor` 1, which the template sets).
//!
//! Within a window only the counters the live pages follow are written with
//! the checkpoint. The observations that are plain sums (stream-priced
//! capacity and hot keys, shard heat, the quality's hourly counts:
//! `keys::is_observation`) are summed in the window's `state`, which Lambda
//! hands from one call of a shard's window to the next, and added once by
//! the call that closes the window, guarded by a marker of their own: at 32
//! shards each invocation otherwise rewrote those items for a handful of
//! records. The capacity and quality pages see a shard's figures up to a
//! window late. A state Lambda does not hand on (after an invocation that
//! failed having committed some records), or a close that fails after its
//! marker, loses observations, never counts.
//!
//! An event without a window says nothing of the shard, so each record's
//! increments are written in one transaction with a marker of its own
//! (`APPLIED#<eventID>`), put only where none exists. A transaction
//! cancelled because some markers exist wrote nothing: those records were
//! applied before, and the rest are committed again without them. `replay`
//! applies a dead-letter range this way, each transaction also recording
//! the records' applied range (it knows their shard), and moving the
//! shard's checkpoint where `stream::replay` says.
//!
//! A record that cannot be applied (the store refuses it, or is down) is
//! reported in a partial batch response (`ReportBatchItemFailures`) with
//! every record after it, and nothing after it is applied: Lambda retries
//! the shard from that record, in order, and the records before it are not
//! delivered again. A record that is not a readable order is counted as bad
//! and skipped, as `consume` does (priced only, when it has images).

use crate::model::ConsumerMode;
mod budget;
mod event;

pub use budget::Budget;
use budget::Throttled;
pub use event::{Carried, Delivered, ShardOf, Window, stream_record};

use crate::server::store::error::StoreError;
use crate::server::store::keys;
use crate::server::store::{CheckpointMove, Holder, Marked, Marker, RangeOf, Store, TRANSACTION_ITEMS};
use crate::server::stream::consumer::{Applier, Batch, Guard, Increments, Reading};
use crate::server::stream::counters::Deltas;
use crate::server::stream::lag;
use crate::server::stream::reconcile::compare_seq;
use crate::server::stream::registry::{LambdaBeat, LambdaGate};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_sdk_dynamodbstreams::types::Record;
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum LambdaError {
    #[error("the event is not a DynamoDB stream event: it has no Records array")]
    NotAStreamEvent,
    #[error(
        "record {position} of the batch could not be applied and has no SequenceNumber to report it by: \
         the whole batch is failed, to be delivered again"
    )]
    Unreportable { position: usize },
    #[error("the window's observations could not be added (the closing call is failed, to be made again): {0}")]
    WindowClose(StoreError),
}

/// The function's answer: the batch item failures, and for a windowed
/// event the state Lambda hands to the window's next call (the window's
/// observations so far; empty once closed). Lambda takes a windowed answer
/// without `state` as failed.
#[derive(Debug, Default, serde::Serialize)]
pub struct Response {
    #[serde(flatten)]
    pub failures: DynamoDbEventResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<HashMap<String, String>>,
}

/// What one batch came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Records applied now (the unreadable ones among them, priced only).
    pub applied: usize,
    /// Records applied before: their markers exist.
    pub already: usize,
    /// Records skipped as unreadable: no event id or no stream record.
    pub skipped: usize,
    /// The first record that could not be applied: it and every record after
    /// it are failures, and none of them was applied.
    pub failed_from: Option<usize>,
    /// Why it failed.
    pub error: Option<String>,
    /// Commits refused for throughput and sent again after a pause.
    pub throttle_retries: usize,
}

/// The Lambda function's state between invocations (an execution
/// environment is reused): the consumer's core, hot keys included.
pub struct LambdaConsumer {
    core: Applier,
    store: Arc<Store>,
    /// Its entry in the consumer registry, for display (`registry`); none
    /// for `replay`, which is no consumer.
    beat: Option<LambdaBeat>,
    /// The recorded mode, which says whether the function counts; none for
    /// `replay`, which applies what the function gave up whatever the mode
    /// (and never records one).
    gate: Option<LambdaGate>,
    /// How far behind the stream its batches were, recorded once a minute.
    lag: lag::Gate,
}

impl LambdaConsumer {
    /// The Lambda function's consumer: it counts only while the recorded
    /// mode is `lambda` (recording it where none is).
    pub fn new(store: Arc<Store>) -> Self {
        let mut consumer = Self::for_replay(store);
        consumer.beat = Some(LambdaBeat::from_env());
        consumer.gate = Some(LambdaGate::from_env());
        consumer
    }

    /// The same code for `replay`: no heartbeat, no reading of the mode, so
    /// a replay never stands a consumer down nor records a mode.
    pub fn for_replay(store: Arc<Store>) -> Self {
        let lag = lag::Gate::new(lag::RECORD_EVERY);
        Self { core: Applier::new(store.clone(), None, true), store, beat: None, gate: None, lag }
    }

    /// Whether the batch may be counted: the mode is `lambda` (or this is a
    /// replay). When not, the reason, to fail the whole batch by: the event
    /// source mapping then holds the shard, and the records stay in the
    /// stream for whichever form counts (from the shared checkpoints).
    async fn standing_down(&self) -> Option<String> {
        let gate = self.gate.as_ref()?;
        match gate.mode(&self.store).await {
            Ok(ConsumerMode::Lambda) => None,
            Ok(mode) => Some(format!("standing down: mode is {mode}; the batch is left to the stream")),
            Err(err) => Some(format!("the consumer mode could not be read: {err}")),
        }
    }

    /// Applies a batch's records in order, as few transactions as the limits
    /// allow; each record at most once, whoever delivered it before: each
    /// record's marker guards it (an event without a tumbling window, which
    /// does not name its shard).
    pub async fn apply(&self, records: &[Delivered]) -> Outcome {
        self.apply_guarded(records, Given::Markers, Budget::default_from_now()).await
    }

    /// Applies records of one shard that `replay` read again: each guarded
    /// by its marker, as `apply` does, each transaction recording its
    /// records' applied range, and moving the shard's checkpoint from
    /// `checkpoint` past them where `moves` (see `stream::replay`).
    pub async fn apply_replay(&self, records: &[Delivered], replay: &ReplayOf) -> Outcome {
        self.apply_guarded(records, Given::Replay(replay), Budget::default_from_now()).await
    }

    /// Applies a batch of one shard's records in order: each transaction
    /// moves the shard's checkpoint over the records it applies, and a
    /// record at or before the checkpoint was applied before (an event with
    /// a tumbling window, which names its shard; Lambda delivers a shard one
    /// batch at a time when `ParallelizationFactor` is 1). The observations
    /// of what committed are added to `carried`, not written.
    pub async fn apply_shard(&self, shard: &ShardOf, records: &[Delivered], carried: &mut Deltas) -> Outcome {
        self.apply_guarded(records, Given::Window(shard, carried), Budget::default_from_now()).await
    }

    async fn apply_guarded(&self, records: &[Delivered], given: Given<'_>, budget: Budget) -> Outcome {
        let mut outcome = Outcome::default();
        let refused = if records.is_empty() { None } else { self.standing_down().await };
        if let Some(beat) = &self.beat {
            // Records applied with markers move no checkpoint: said in the
            // registry, for reconciliation to refuse to anchor on them.
            let markers = matches!(given, Given::Markers);
            beat.beat(&self.store, markers && refused.is_none() && !records.is_empty()).await;
        }
        if records.is_empty() {
            return outcome;
        }
        if let Some(why) = refused {
            tracing::info!(records = records.len(), "{why}");
            outcome.failed_from = Some(0);
            outcome.error = Some(why);
            return outcome;
        }
        let readings = match self.readings(records).await {
            Ok(readings) => readings,
            Err(err) => {
                // Nothing can be read before this: every record fails, to be delivered again.
                tracing::error!(error = %err, "the days' shard counts could not be read");
                if !records.is_empty() {
                    outcome.failed_from = Some(0);
                    outcome.error = Some(err.to_string());
                }
                return outcome;
            }
        };
        // Records not to put in a transaction: skipped, or applied before.
        let mut done: Vec<bool> = readings.iter().map(Option::is_none).collect();
        for (d, _) in records.iter().zip(&readings).filter(|(_, r)| r.is_none()) {
            tracing::warn!(sequence = ?d.seq, "a stream record without an event id or images: skipped");
            outcome.skipped += 1;
        }
        let guarding = match given {
            Given::Window(shard, carried) => {
                self.shard_guarding(shard, carried, records, &mut done, &mut outcome).await
            }
            Given::Markers => Some(Guarding::Markers),
            Given::Replay(replay) => Some(Guarding::Replay { replay, prev: replay.checkpoint.clone() }),
        };
        let batch = match guarding {
            Some(mut guarding) => {
                let mut throttled = Throttled::new(budget);
                self.commit_groups(records, &readings, &mut done, &mut outcome, &mut guarding, &mut throttled).await
            }
            None => Batch::default(),
        };
        self.core.record_progress(outcome.applied as u64, &batch);
        if outcome.applied > 0
            && let Some(ms) = self.core.status().behind_ms
        {
            self.lag.note(&self.store, ms.max(0) as u64).await;
        }
        outcome
    }

    /// What each record means (`None`: unreadable, to be skipped).
    async fn readings(&self, records: &[Delivered]) -> Result<Vec<Option<Reading>>, StoreError> {
        let stream_records: Vec<Record> = records.iter().filter_map(|d| d.record.clone()).collect();
        let shards = self.core.shards(&stream_records).await?;
        Ok(records
            .iter()
            .map(|d| match (&d.event_id, &d.record) {
                (Some(_), Some(record)) => {
                    let reading = self.core.read(record, &shards);
                    if reading.change.is_none() {
                        tracing::warn!(sequence = ?d.seq, "a stream record that is not a readable order: priced only");
                    }
                    Some(reading)
                }
                _ => None,
            })
            .collect())
    }

    /// The records from `start` that go in one transaction: at most `most`,
    /// as many as fit beside their guards (`per_record` items each, and
    /// `fixed` items for the whole group).
    fn group(
        &self,
        readings: &[Option<Reading>],
        done: &[bool],
        start: usize,
        most: usize,
        per_record: usize,
        fixed: usize,
    ) -> (Increments, Vec<usize>, usize) {
        let table = self.core.table();
        let (mut increments, mut group, mut end) = (Increments::default(), Vec::new(), start);
        while end < readings.len() && group.len() < most {
            let Some(reading) = readings[end].as_ref().filter(|_| !done[end]) else {
                end += 1;
                continue;
            };
            let next = increments.with(reading, table);
            let guards = (group.len() + 1) * per_record + fixed;
            let room = TRANSACTION_ITEMS.saturating_sub(guards);
            if !group.is_empty() && (guards > TRANSACTION_ITEMS || next.too_big(room)) {
                break;
            }
            (increments, end) = (next, end + 1);
            group.push(end - 1);
        }
        (increments, group, end)
    }

    /// Applies the records not done, in order, as few transactions as the
    /// limits allow, each guarded as `guarding` says. After a transaction
    /// failed, its records go one at a time, to find the one that fails and
    /// apply those before it; that one and every record after it fail.
    async fn commit_groups(
        &self,
        records: &[Delivered],
        readings: &[Option<Reading>],
        done: &mut [bool],
        outcome: &mut Outcome,
        guarding: &mut Guarding<'_>,
        throttled: &mut Throttled,
    ) -> Batch {
        let mut batch = Batch::default();
        let (mut start, mut one_by_one_until) = (0, 0);
        // Items in a transaction beside the increments: a marker a record,
        // or the shard's one checkpoint and its applied range; a replay's
        // markers, range and checkpoint.
        let (per_record, fixed) = match guarding {
            Guarding::Markers => (1, 0),
            Guarding::Shard { .. } => (0, 2),
            Guarding::Replay { .. } => (1, 2),
        };
        while start < records.len() {
            if done[start] {
                start += 1;
                continue;
            }
            let most = if start < one_by_one_until { 1 } else { usize::MAX };
            let (increments, group, end) = self.group(readings, done, start, most, per_record, fixed);
            match self.commit_group(records, &group, &increments, guarding, done, outcome).await {
                Step::Applied => {
                    applied(&mut batch, readings, &group, &increments, outcome);
                    start = end;
                }
                Step::Again => {}
                // A transaction refused for throughput wrote nothing: the
                // same group goes again after a pause, while the
                // invocation has time, rather than fail the batch (Lambda
                // would retry it a few times, then give it up to the
                // dead-letter queue and move past it).
                Step::Failed(err) if err.is_throttled() && throttled.wait(&err).await => {
                    outcome.throttle_retries += 1;
                }
                Step::Failed(err) if group.len() > 1 && !matches!(err, StoreError::Conflict(_)) => {
                    tracing::warn!(error = %err, records = group.len(), "a transaction of stream records failed: one at a time");
                    one_by_one_until = end;
                }
                Step::Failed(err) => {
                    failed(records, group[0], &err, outcome);
                    break;
                }
            }
        }
        batch
    }

    /// One transaction of `group`'s records. Records found applied before
    /// (their markers exist, or the checkpoint moved past them) are done,
    /// and the rest go `Again`.
    async fn commit_group(
        &self,
        records: &[Delivered],
        group: &[usize],
        increments: &Increments,
        guarding: &mut Guarding<'_>,
        done: &mut [bool],
        outcome: &mut Outcome,
    ) -> Step {
        match guarding {
            Guarding::Markers => {
                let markers = markers_of(records, group);
                match self.core.commit(increments, Guard::Markers(&markers)).await {
                    Ok(Marked::Applied) => Step::Applied,
                    Ok(Marked::AlreadyApplied(positions)) => {
                        already_applied(records, group, positions, done, outcome);
                        Step::Again
                    }
                    Err(err) => Step::Failed(err),
                }
            }
            Guarding::Replay { replay, prev } => {
                let markers = markers_of(records, group);
                let (first, last) = (seq_of(records, group.first()), seq_of(records, group.last()));
                let (Some(first), Some(last)) = (first, last) else {
                    // `replay` reads records from the shard: each has its number.
                    return Step::Failed(StoreError::Data("a replayed record without a sequence number".into()));
                };
                let shard = &replay.shard;
                let range = RangeOf { stream_arn: &shard.stream_arn, shard_id: &shard.shard_id, first, last };
                let holder = Holder::Mapping { stream_arn: &shard.stream_arn, shard_id: &shard.shard_id };
                let passes = prev.as_deref().is_none_or(|at| compare_seq(last, at) == Ordering::Greater);
                let checkpoint = (replay.moves && passes).then_some(CheckpointMove {
                    holder,
                    prev: prev.as_deref(),
                    seq: Some(last),
                    finished: false,
                    first: None,
                });
                let moved = checkpoint.is_some();
                match self.core.commit(increments, Guard::Replayed { markers: &markers, range, checkpoint }).await {
                    Ok(Marked::Applied) => {
                        if moved {
                            *prev = Some(last.to_string());
                        }
                        Step::Applied
                    }
                    Ok(Marked::AlreadyApplied(positions)) => {
                        already_applied(records, group, positions, done, outcome);
                        Step::Again
                    }
                    Err(err) => Step::Failed(err),
                }
            }
            Guarding::Shard { shard, prev, rereads, carried } => {
                let first = seq_of(records, group.first());
                let last = seq_of(records, group.last());
                let holder = Holder::Mapping { stream_arn: &shard.stream_arn, shard_id: &shard.shard_id };
                let moves = [CheckpointMove { holder, prev: prev.as_deref(), seq: last, finished: false, first }];
                match self.core.commit_carrying(increments, Guard::Checkpoints(&moves), Some(&mut **carried)).await {
                    Ok(_) => {
                        *prev = last.map(str::to_string);
                        Step::Applied
                    }
                    Err(StoreError::Conflict(why)) if *rereads < CHECKPOINT_REREADS => {
                        tracing::warn!(why, shard = shard.shard_id, "the shard's checkpoint moved: read again");
                        *rereads += 1;
                        match self.checkpoint(shard, records, done, outcome).await {
                            Ok(now) => {
                                *prev = now;
                                Step::Again
                            }
                            Err(err) => Step::Failed(err),
                        }
                    }
                    Err(err) => Step::Failed(err),
                }
            }
        }
    }

    /// The guard of a batch of one shard: its checkpoint, read first (the
    /// records at or before it are done); `None` when it cannot be read,
    /// and the batch then failed. A record without a sequence number, which
    /// the checkpoint cannot be moved to (none of Lambda's), is skipped.
    async fn shard_guarding<'a>(
        &self,
        shard: &'a ShardOf,
        carried: &'a mut Deltas,
        records: &[Delivered],
        done: &mut [bool],
        outcome: &mut Outcome,
    ) -> Option<Guarding<'a>> {
        for (i, record) in records.iter().enumerate() {
            if !done[i] && record.seq.is_none() {
                tracing::warn!(position = i, event = ?record.event_id, "a stream record without a sequence number: skipped");
                done[i] = true;
                outcome.skipped += 1;
            }
        }
        match self.checkpoint(shard, records, done, outcome).await {
            Ok(prev) => Some(Guarding::Shard { shard, prev, rereads: 0, carried }),
            Err(err) => {
                if let Some(first) = (0..records.len()).find(|&i| !done[i]) {
                    failed(records, first, &err, outcome);
                }
                None
            }
        }
    }

    /// The shard's checkpoint; the records at or before it, not yet done,
    /// are done now, as applied before.
    async fn checkpoint(
        &self,
        shard: &ShardOf,
        records: &[Delivered],
        done: &mut [bool],
        outcome: &mut Outcome,
    ) -> Result<Option<String>, StoreError> {
        let checkpoint = self.store.checkpoint(&shard.stream_arn, &shard.shard_id).await?.seq;
        if let Some(at) = checkpoint.as_deref() {
            for (i, record) in records.iter().enumerate() {
                let before = record.seq.as_deref().is_some_and(|seq| compare_seq(seq, at) != Ordering::Greater);
                if before && !done[i] {
                    tracing::debug!(sequence = ?record.seq, "a stream record applied before: skipped");
                    done[i] = true;
                    outcome.already += 1;
                }
            }
        }
        Ok(checkpoint)
    }
}

/// What guards a batch's transactions: each record's marker, or the shard's
/// checkpoint, as last read (and where the window's observations go); a
/// replay's markers and range, and the checkpoint as it last moved it.
enum Guarding<'a> {
    Markers,
    Shard { shard: &'a ShardOf, prev: Option<String>, rereads: u32, carried: &'a mut Deltas },
    Replay { replay: &'a ReplayOf, prev: Option<String> },
}

/// What a batch says of its shard, as it was given: nothing (each record's
/// marker guards it), a tumbling window's, or a replay's.
enum Given<'a> {
    Markers,
    Window(&'a ShardOf, &'a mut Deltas),
    Replay(&'a ReplayOf),
}

/// A replay's records' shard: where its checkpoint was read, and whether
/// the replay's transactions move it past what they apply (`stream::replay`
/// says when).
#[derive(Clone, Debug)]
pub struct ReplayOf {
    pub shard: ShardOf,
    pub checkpoint: Option<String>,
    pub moves: bool,
}

/// The markers of a group's records.
fn markers_of<'r>(records: &'r [Delivered], group: &[usize]) -> Vec<Marker<'r>> {
    group
        .iter()
        .map(|&i| Marker {
            event_id: records[i].event_id.as_deref().unwrap_or_default(),
            seq: records[i].seq.as_deref(),
        })
        .collect()
}

/// The sequence number of a group's record at `position`.
fn seq_of<'r>(records: &'r [Delivered], position: Option<&usize>) -> Option<&'r str> {
    position.and_then(|&i| records[i].seq.as_deref())
}

/// The records of a group whose markers exist: applied before, done.
fn already_applied(
    records: &[Delivered],
    group: &[usize],
    positions: Vec<usize>,
    done: &mut [bool],
    outcome: &mut Outcome,
) {
    for position in positions {
        tracing::debug!(sequence = ?records[group[position]].seq, "a stream record applied before: skipped");
        done[group[position]] = true;
        outcome.already += 1;
    }
}

/// What one transaction came to.
enum Step {
    Applied,
    /// Some records were found applied before: the group is made again.
    Again,
    Failed(StoreError),
}

/// How many times an invocation reads a moved checkpoint again before it
/// reports the batch failed (Lambda then delivers it again).
const CHECKPOINT_REREADS: u32 = 3;

/// A group's records committed.
fn applied(
    batch: &mut Batch,
    readings: &[Option<Reading>],
    group: &[usize],
    increments: &Increments,
    outcome: &mut Outcome,
) {
    for &i in group {
        batch.add(readings[i].as_ref().expect("only readable records are grouped"));
    }
    batch.changed(increments);
    outcome.applied += group.len();
}

/// The record at `position` could not be applied: it and every one after it fail.
fn failed(records: &[Delivered], position: usize, err: &StoreError, outcome: &mut Outcome) {
    tracing::error!(error = %err, sequence = ?records[position].seq, "a stream record could not be applied");
    outcome.failed_from = Some(position);
    outcome.error = Some(err.to_string());
}

/// The partial batch response: the failed record and every one after it, by
/// sequence number, in order. Empty when everything was applied.
pub fn response(records: &[Delivered], outcome: &Outcome) -> Result<DynamoDbEventResponse, LambdaError> {
    let mut response = DynamoDbEventResponse::default();
    if let Some(from) = outcome.failed_from {
        for (position, record) in records.iter().enumerate().skip(from) {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(record.seq.clone().ok_or(LambdaError::Unreportable { position })?);
            response.batch_item_failures.push(failure);
        }
    }
    Ok(response)
}

/// The namespace and name of the failed-records metric the function
/// publishes: a partial batch failure is no Lambda `Errors`, so the
/// template's alarm watches this instead.
pub const METRIC_NAMESPACE: &str = "NorthwindOps";
pub const FAILED_RECORDS: &str = "FailedRecords";

/// One line of CloudWatch embedded metric format: Lambda's log delivery
/// turns it into the `FailedRecords` metric of the function (by
/// `FunctionName`), with no call to CloudWatch from here.
pub fn metrics_line(function: &str, failed: usize, at: chrono::DateTime<chrono::Utc>) -> String {
    serde_json::json!({
        "_aws": {
            "Timestamp": at.timestamp_millis(),
            "CloudWatchMetrics": [{
                "Namespace": METRIC_NAMESPACE,
                "Dimensions": [["FunctionName"]],
                "Metrics": [{ "Name": FAILED_RECORDS, "Unit": "Count" }]
            }]
        },
        "FunctionName": function,
        FAILED_RECORDS: failed
    })
    .to_string()
}

/// One invocation: a DynamoDB event in, the batch item failures out, and
/// how many records failed as a metric line on standard output.
pub async fn handle(consumer: &LambdaConsumer, event: &Value, budget: Budget) -> Result<Response, LambdaError> {
    let result = handle_records(consumer, event, budget).await;
    let failed = match &result {
        Ok(response) => response.failures.batch_item_failures.len(),
        Err(_) => event.get("Records").and_then(Value::as_array).map_or(0, Vec::len),
    };
    let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_default();
    println!("{}", metrics_line(&function, failed, chrono::Utc::now()));
    result
}

async fn handle_records(consumer: &LambdaConsumer, event: &Value, budget: Budget) -> Result<Response, LambdaError> {
    let mut window = Window::of(event);
    let records = match event.get("Records").and_then(Value::as_array) {
        Some(records) => records.as_slice(),
        // A window's closing call may come without records.
        None if window.as_ref().is_some_and(|w| w.closing) => &[],
        None => return Err(LambdaError::NotAStreamEvent),
    };
    let delivered: Vec<Delivered> = records.iter().map(Delivered::from_json).collect();
    let outcome = match window.as_mut() {
        Some(_) if delivered.is_empty() => Outcome::default(),
        Some(window) => {
            let carried = &mut window.carried;
            if carried.since.is_none() {
                carried.since = delivered.iter().find_map(|d| d.seq.clone());
            }
            consumer.apply_guarded(&delivered, Given::Window(&window.shard, &mut carried.deltas), budget).await
        }
        None => consumer.apply_guarded(&delivered, Given::Markers, budget).await,
    };
    let state = match window.as_mut() {
        Some(window) if window.closing => {
            consumer.close_window(window).await.map_err(LambdaError::WindowClose)?;
            Some(HashMap::new())
        }
        Some(window) => Some(window.carried.to_state()),
        None => None,
    };
    tracing::info!(
        shard = window.as_ref().map(|w| w.shard.shard_id.as_str()),
        records = delivered.len(),
        applied = outcome.applied,
        already_applied = outcome.already,
        skipped = outcome.skipped,
        throttle_retries = outcome.throttle_retries,
        failed_from = ?outcome.failed_from,
        "stream batch"
    );
    Ok(Response { failures: response(&delivered, &outcome)?, state })
}

impl LambdaConsumer {
    /// Adds what `window` carried, at most once: its marker first, put only
    /// where none exists, then the increments, item by item (`add_deltas`:
    /// every shard closes its window at once, and transactions on the same
    /// items would refuse each other). A close that fails after its marker
    /// is made again by Lambda and adds nothing: what it had not added is
    /// lost, as the module's comment says, never added twice.
    async fn close_window(&self, window: &Window) -> Result<(), StoreError> {
        if window.carried.deltas.is_empty() {
            return Ok(());
        }
        let since = window.carried.since.as_deref().unwrap_or_default();
        let id = keys::window_marker_id(&window.shard.shard_id, &window.start, since);
        let marker = Marker { event_id: &id, seq: None };
        if !self.store.put_marker(&marker).await? {
            tracing::info!(shard = window.shard.shard_id, "a window's observations were added before");
            return Ok(());
        }
        self.store.add_deltas(&window.carried.deltas).await
    }
}

/// Serves invocations from the Lambda Runtime API (`AWS_LAMBDA_RUNTIME_API`)
/// until it stops answering.
pub async fn run(store: Arc<Store>) -> Result<(), lambda_runtime::Error> {
    let consumer = Arc::new(LambdaConsumer::new(store));
    lambda_runtime::run(lambda_runtime::service_fn(move |event: lambda_runtime::LambdaEvent<Value>| {
        let consumer = consumer.clone();
        // The runtime logs each invocation in a span with its request id.
        let budget = Budget::from_deadline_ms(event.context.deadline as i64);
        async move { handle(&consumer, &event.payload, budget).await.map_err(lambda_runtime::Error::from) }
    }))
    .await
}

/// The environment the Lambda runtime reads, each variable that is missing
/// or unreadable named (the runtime would panic on it).
pub fn check_environment(var: impl Fn(&str) -> Option<String>) -> Result<(), String> {
    let mut missing = Vec::new();
    for name in ["AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_VERSION"] {
        if var(name).is_none_or(|v| v.is_empty()) {
            missing.push(name.to_string());
        }
    }
    let api = "AWS_LAMBDA_RUNTIME_API";
    if var(api).and_then(|v| v.parse::<http::Uri>().ok()).is_none_or(|uri| uri.authority().is_none()) {
        missing.push(format!("{api} (host:port)"));
    }
    let memory = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE";
    if var(memory).and_then(|v| v.parse::<i32>().ok()).is_none() {
        missing.push(format!("{memory} (a whole number of MB)"));
    }
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "`lambda` runs inside AWS Lambda, which sets {}; missing: {}",
            "the Runtime API's address and the function's name, version and memory",
            missing.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::stream::consumer::change;
    use aws_sdk_dynamodbstreams::types::OperationType;
    use serde_json::json;

    fn event_record(seq: &str, new_status: Option<&str>, old_status: Option<&str>) -> Value {
        let image = |status: &str| {
            json!({
                "PK": {"S": "ORDER#o-1"}, "orderId": {"S": "o-1"}, "status": {"S": status},
                "createdAt": {"S": "2026-11-29T10:15:30.000Z"}, "total": {"N": "1999"}
            })
        };
        let mut data = json!({
            "ApproximateCreationDateTime": 1_764_411_330.0,
            "Keys": {"PK": {"S": "ORDER#o-1"}},
            "SequenceNumber": seq, "SizeBytes": 120, "StreamViewType": "NEW_AND_OLD_IMAGES"
        });
        if let Some(status) = new_status {
            data["NewImage"] = image(status);
        }
        if let Some(status) = old_status {
            data["OldImage"] = image(status);
        }
        json!({
            "eventID": format!("e-{seq}"), "eventName": if old_status.is_some() { "MODIFY" } else { "INSERT" },
            "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-29T00:00:00.000",
            "dynamodb": data
        })
    }

    #[test]
    fn a_lambda_record_reads_as_the_streams_api_record() {
        let delivered = Delivered::from_json(&event_record("100", Some("CONFIRMED"), Some("PENDING")));
        assert_eq!(delivered.event_id.as_deref(), Some("e-100"));
        assert_eq!(delivered.seq.as_deref(), Some("100"));
        let record = delivered.record.unwrap();
        assert_eq!(record.event_name(), Some(&OperationType::Modify));
        let modified = change(&record).expect("a readable order");
        assert_eq!(modified.old.unwrap().status, "PENDING");
        assert_eq!(modified.new.unwrap().status, "CONFIRMED");
        assert_eq!(modified.at.timestamp(), 1_764_411_330);
        let insert = Delivered::from_json(&event_record("101", Some("PENDING"), None)).record.unwrap();
        assert!(insert.dynamodb().unwrap().old_image().is_none(), "an absent image is no image");
        assert!(change(&insert).unwrap().old.is_none());
    }

    #[test]
    fn what_is_not_a_record_is_kept_to_be_counted_not_a_panic() {
        for bad in [json!(null), json!("text"), json!({"dynamodb": {"SequenceNumber": "7"}}), json!({"eventID": 3})] {
            let delivered = Delivered::from_json(&bad);
            assert!(delivered.record.is_none() || delivered.event_id.is_none(), "{bad}");
        }
        assert_eq!(Delivered::from_json(&json!({"dynamodb": {"SequenceNumber": "7"}})).seq.as_deref(), Some("7"));
    }

    #[test]
    fn failures_are_the_failed_record_and_every_one_after_it() {
        let records: Vec<Delivered> = ["1", "2", "3", "4"]
            .iter()
            .map(|seq| Delivered::from_json(&event_record(seq, Some("PENDING"), None)))
            .collect();
        let ok = response(&records, &Outcome { applied: 4, ..Outcome::default() }).unwrap();
        assert_eq!(serde_json::to_value(&ok).unwrap(), json!({"batchItemFailures": []}));
        let failed = response(&records, &Outcome { applied: 1, failed_from: Some(1), ..Outcome::default() }).unwrap();
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"batchItemFailures": [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}, {"itemIdentifier": "4"}]})
        );
        let mut unnumbered = records.clone();
        unnumbered[2].seq = None;
        let outcome = Outcome { failed_from: Some(1), ..Outcome::default() };
        assert!(matches!(response(&unnumbered, &outcome), Err(LambdaError::Unreportable { position: 2 })));
    }

    fn carried(items: usize, attributes: usize) -> Carried {
        let mut deltas = Deltas::default();
        for i in 0..items {
            for a in 0..attributes {
                deltas.add(
                    (format!("CAPACITY#2026-12-04#{i:03}"), "STREAM#17".into()),
                    format!("w{a:03}"),
                    1 + a as i64,
                );
            }
        }
        Carried { since: Some("100".into()), deltas }
    }

    #[test]
    fn a_window_carries_its_observations_in_the_state_and_reads_them_back() {
        let carried = carried(3, 2);
        let state = serde_json::to_value(carried.to_state()).unwrap();
        assert_eq!(Carried::from_state(Some(&state)), carried);
        assert_eq!(serde_json::to_value(Carried::default().to_state()).unwrap(), json!({}), "nothing carried: {{}}");
        for nothing in [json!({}), json!({"1": 282}), json!({"adds": "not rows"}), json!({"adds": 3})] {
            assert_eq!(Carried::from_state(Some(&nothing)), Carried::default(), "{nothing}");
        }
        assert_eq!(Carried::from_state(None), Carried::default());
    }

    #[test]
    fn a_windowed_event_names_its_shard_and_its_answer_carries_a_state() {
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-29T00:00:00.000";
        let mut event = json!({
            "Records": [event_record("1", Some("PENDING"), None)],
            "window": {"start": "2026-12-04T17:00:00Z", "end": "2026-12-04T17:01:00Z"},
            "state": {}, "shardId": "shardId-0001", "eventSourceARN": arn,
            "isFinalInvokeForWindow": false, "isWindowTerminatedEarly": false
        });
        let shard = ShardOf { stream_arn: arn.into(), shard_id: "shardId-0001".into() };
        let start = "2026-12-04T17:00:00Z".to_string();
        let carried = Carried::default();
        assert_eq!(Window::of(&event), Some(Window { shard: shard.clone(), start, closing: false, carried }));
        event["isFinalInvokeForWindow"] = json!(true);
        assert!(Window::of(&event).unwrap().closing);
        // The ARN of the records when the event leaves it out.
        event.as_object_mut().unwrap().remove("eventSourceARN");
        assert_eq!(Window::of(&event).map(|w| w.shard), Some(shard));
        for unnamed in [json!({"Records": []}), json!({"Records": [], "shardId": ""}), json!({"shardId": "s"})] {
            assert_eq!(Window::of(&unnamed), None, "{unnamed}");
        }

        let windowed = Response { state: Some(HashMap::new()), ..Response::default() };
        assert_eq!(serde_json::to_value(&windowed).unwrap(), json!({"batchItemFailures": [], "state": {}}));
        let bare = Response::default();
        assert_eq!(serde_json::to_value(&bare).unwrap(), json!({"batchItemFailures": []}), "no state without a window");
    }

    #[test]
    fn the_failed_records_line_is_embedded_metric_format() {
        let at = chrono::DateTime::from_timestamp_millis(1_764_411_330_123).unwrap();
        let line: Value = serde_json::from_str(&metrics_line("northwind-consumer", 3, at)).unwrap();
        assert_eq!(line["_aws"]["Timestamp"], 1_764_411_330_123i64);
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], METRIC_NAMESPACE);
        assert_eq!(directive["Dimensions"], json!([["FunctionName"]]));
        assert_eq!(directive["Metrics"], json!([{"Name": "FailedRecords", "Unit": "Count"}]));
        // Each dimension and metric named in the directive is a member of its own.
        assert_eq!(line["FunctionName"], "northwind-consumer");
        assert_eq!(line[FAILED_RECORDS], 3);
    }

    #[test]
    fn the_runtime_environment_is_checked_and_named() {
        let all = |name: &str| {
            Some(match name {
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" => "128".to_string(),
                "AWS_LAMBDA_RUNTIME_API" => "127.0.0.1:9001".to_string(),
                other => format!("{other}-value"),
            })
        };
        assert!(check_environment(all).is_ok());
        let with_api = |api: &'static str| {
            move |name: &str| if name == "AWS_LAMBDA_RUNTIME_API" { Some(api.to_string()) } else { all(name) }
        };
        assert!(check_environment(with_api("127.0.0.1:9001")).is_ok());
        for bad in ["", "not a uri", "/just/a/path"] {
            let err = check_environment(with_api(bad)).unwrap_err();
            assert!(err.contains("missing: AWS_LAMBDA_RUNTIME_API"), "{bad}: {err}");
        }
        let err = check_environment(|name: &str| all(name).filter(|_| name != "AWS_LAMBDA_FUNCTION_NAME")).unwrap_err();
        assert!(err.contains("missing: AWS_LAMBDA_FUNCTION_NAME"), "{err}");
        let err =
            check_environment(
                |name: &str| {
                    if name == "AWS_LAMBDA_FUNCTION_MEMORY_SIZE" { Some("lots".into()) } else { all(name) }
                },
            )
            .unwrap_err();
        assert!(err.contains("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), "{err}");
    }
}

//! The consumer of the orders table's stream: it keeps the counters in the
//! metrics table and tells the live hub about every order that enters or
//! leaves a day's PENDING list.
//!
//! A stream delivers records at least once, and a consumer may crash or run
//! twice, so:
//! - each stream shard is held by one consumer at a time, through a lease in
//!   the metrics table (conditional writes, an owner and an expiry); a lease
//!   not renewed is taken over;
//! - a batch's counter increments and the advance of the shard's checkpoint
//!   are one transaction, conditioned on the previous checkpoint: a batch is
//!   applied exactly once, and a crash between steps loses nothing;
//! - parents are read to their end before their children; new shards start
//!   at TRIM_HORIZON; a restart resumes after the checkpoint.

use super::counters::{self, Change, Deltas, Image};
use super::error::StoreError;
use super::keys;
use super::live::LiveHub;
use super::store::Store;
use crate::model::{LiveCounters, LiveEvent, PendingOrder, iso_millis};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem, Update};
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record, Shard, ShardIteratorType};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Counter items one transaction may touch, leaving room for the checkpoint
/// (DynamoDB allows 100 items per transaction).
const MAX_COUNTER_ITEMS: usize = 90;
/// Attributes one counter update may add to (the update expression is
/// limited to 4 KB; each `#aN :vN` takes up to a dozen bytes).
const MAX_ATTRIBUTES: usize = 120;
/// Batches read from one shard in one pass before moving to the next shard.
const BATCHES_PER_PASS: u32 = 20;

#[derive(Clone, Debug)]
pub struct ConsumerOptions {
    /// Who holds the leases: unique per running consumer.
    pub owner: String,
    pub lease: Duration,
    /// Records asked for per GetRecords.
    pub batch: i32,
    /// Longest pause between polls of an idle stream.
    pub idle: Duration,
    /// Fault injection for tests: fail after reading this many batches and
    /// before applying the last one, as a crash there would.
    pub fail_before_apply: Option<u32>,
}

impl ConsumerOptions {
    pub fn new(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(15),
            batch: 500,
            idle: Duration::from_millis(200),
            fail_before_apply: None,
        }
    }
}

/// What the consumer has done, for the dashboard and the metrics API.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumerStatus {
    pub running: bool,
    pub shards_held: usize,
    pub records_applied: u64,
    pub bad_records: u64,
    pub last_applied_at: Option<DateTime<Utc>>,
    /// How old the newest record of the last batch was when it was applied.
    pub behind_ms: Option<i64>,
    pub last_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the orders table has no stream: run `northwind-ops provision` on a table with one")]
    NoStream,
    #[error("injected failure between reading and applying a batch")]
    Injected,
}

#[derive(Default)]
struct ShardCursor {
    iterator: Option<String>,
    /// The checkpoint this consumer last wrote or read.
    seq: Option<String>,
}

struct Checkpoint {
    seq: Option<String>,
    finished: bool,
}

pub struct Consumer {
    store: Arc<Store>,
    options: ConsumerOptions,
    hub: Option<LiveHub>,
    status: Arc<Mutex<ConsumerStatus>>,
    cursors: tokio::sync::Mutex<HashMap<String, ShardCursor>>,
    /// Until when this consumer surely holds each lease (by its own clock).
    held: Mutex<HashMap<String, std::time::Instant>>,
    batches_read: AtomicU32,
}

fn stream_text(image: &HashMap<String, StreamValue>, name: &str) -> Option<String> {
    image.get(name).and_then(|v| v.as_s().ok()).cloned()
}

fn stream_number<T: std::str::FromStr>(image: &HashMap<String, StreamValue>, name: &str) -> Option<T> {
    image.get(name).and_then(|v| v.as_n().ok()).and_then(|n| n.parse().ok())
}

/// The parts of a stream image the counters use; `None` for an item that is
/// not a readable order.
fn image(item: &HashMap<String, StreamValue>) -> Option<Image> {
    let order_id = stream_text(item, "orderId")?;
    let created_at = iso_millis::parse(&stream_text(item, "createdAt")?).ok()?;
    let pending = stream_text(item, keys::GSI2PK).map(|pk| keys::parse_pending_pk(&pk)).map(|p| p.ok_or(()));
    let pending = match pending {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(())) => return None,
    };
    let row = (|| {
        Some(PendingOrder {
            order_id: order_id.clone(),
            customer_id: stream_text(item, "customerId")?,
            created_at,
            total: stream_number(item, "total")?,
            currency: stream_text(item, "currency")?,
            item_count: stream_number(item, "itemCount")?,
            shipping_city: stream_text(item, "shippingCity")?,
        })
    })();
    Some(Image { order_id, status: stream_text(item, "status")?, created_at, pending, row })
}

/// A stream record as a change; `None` for a record that cannot be read.
pub fn change(record: &Record) -> Option<Change> {
    let data = record.dynamodb()?;
    let old = match data.old_image() {
        Some(item) => Some(image(item)?),
        None => None,
    };
    let new = match data.new_image() {
        Some(item) => Some(image(item)?),
        None => None,
    };
    if old.is_none() && new.is_none() {
        return None;
    }
    let at = data
        .approximate_creation_date_time()
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
        .unwrap_or_else(Utc::now);
    Some(Change { old, new, at })
}

fn service_code<E: aws_sdk_dynamodbstreams::error::ProvideErrorMetadata, R>(
    err: &aws_sdk_dynamodbstreams::error::SdkError<E, R>,
) -> Option<String> {
    err.as_service_error().and_then(|e| e.code()).map(str::to_string)
}

impl Consumer {
    pub fn new(store: Arc<Store>, options: ConsumerOptions, hub: Option<LiveHub>) -> Self {
        Self {
            store,
            options,
            hub,
            status: Arc::new(Mutex::new(ConsumerStatus::default())),
            cursors: tokio::sync::Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            batches_read: AtomicU32::new(0),
        }
    }

    pub fn status(&self) -> Arc<Mutex<ConsumerStatus>> {
        self.status.clone()
    }

    fn update_status(&self, change: impl FnOnce(&mut ConsumerStatus)) {
        change(&mut self.status.lock().expect("status lock poisoned"));
    }

    /// Polls until `shutdown` resolves, pausing while the stream is idle.
    /// Errors are logged and retried, never fatal.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        self.update_status(|s| s.running = true);
        let mut pause = Duration::from_millis(20);
        loop {
            let outcome = self.poll().await;
            pause = match outcome {
                Ok(0) => {
                    // Every held shard was read to its current end.
                    self.update_status(|s| s.behind_ms = Some(0));
                    (pause * 2).min(self.options.idle)
                }
                Ok(_) => Duration::from_millis(20),
                Err(err) => {
                    tracing::warn!(error = %err, "stream consumer: pass failed, retrying");
                    self.update_status(|s| s.last_error = Some(err.to_string()));
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
        self.update_status(|s| s.running = false);
    }

    /// One pass over every shard of the stream: the records applied.
    pub async fn poll(&self) -> Result<u64, ConsumerError> {
        let stream_arn = self.stream_arn().await?;
        let shards = self.shards(&stream_arn).await?;
        let checkpoints = self.checkpoints(&stream_arn).await?;
        let listed: std::collections::HashSet<&str> = shards.iter().filter_map(|s| s.shard_id()).collect();
        let finished = |id: &str| checkpoints.get(id).is_some_and(|c| c.finished);
        let mut applied = 0;
        let mut held = 0;
        for shard in &shards {
            let Some(id) = shard.shard_id() else { continue };
            if finished(id) {
                continue;
            }
            // A child waits until its parent has been read to its end.
            if let Some(parent) = shard.parent_shard_id()
                && listed.contains(parent)
                && !finished(parent)
            {
                continue;
            }
            // A lease with more than half its time left is not renewed on
            // every pass: an idle stream costs a write per shard per half-lease.
            let checkpoint = if self.holds(id) {
                None
            } else {
                match self.take_lease(&stream_arn, id).await? {
                    Some(checkpoint) => Some(checkpoint),
                    None => continue,
                }
            };
            held += 1;
            applied += self.read_shard(&stream_arn, id, checkpoint).await?;
        }
        self.update_status(|s| s.shards_held = held);
        Ok(applied)
    }

    pub async fn stream_arn(&self) -> Result<String, ConsumerError> {
        let table = self
            .store
            .client()
            .describe_table()
            .table_name(self.store.orders_table())
            .send()
            .await
            .map_err(StoreError::from)?
            .table;
        table.and_then(|t| t.latest_stream_arn).ok_or(ConsumerError::NoStream)
    }

    pub async fn shards(&self, stream_arn: &str) -> Result<Vec<Shard>, ConsumerError> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let out = self
                .store
                .streams()
                .describe_stream()
                .stream_arn(stream_arn)
                .set_exclusive_start_shard_id(start.clone())
                .send()
                .await
                .map_err(StoreError::from)?;
            let Some(description) = out.stream_description else { break };
            shards.extend(description.shards.unwrap_or_default());
            start = description.last_evaluated_shard_id;
            if start.is_none() {
                break;
            }
        }
        Ok(shards)
    }

    async fn checkpoints(&self, stream_arn: &str) -> Result<HashMap<String, Checkpoint>, ConsumerError> {
        let (pk, _) = keys::checkpoint_key(stream_arn, "");
        let mut pages = self
            .store
            .client()
            .query()
            .table_name(self.store.metrics_table())
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut checkpoints = HashMap::new();
        while let Some(item) = pages.next().await {
            let item = item.map_err(StoreError::from)?;
            let Some(shard) = item.get(keys::SK).and_then(|v| v.as_s().ok()).and_then(|sk| sk.strip_prefix("SHARD#")) else {
                continue;
            };
            checkpoints.insert(shard.to_string(), checkpoint_of(&item));
        }
        Ok(checkpoints)
    }

    /// Takes or renews the lease of a shard; `None` while another live
    /// consumer holds it.
    async fn take_lease(&self, stream_arn: &str, shard_id: &str) -> Result<Option<Checkpoint>, ConsumerError> {
        let (pk, sk) = keys::checkpoint_key(stream_arn, shard_id);
        let now = Utc::now().timestamp_millis();
        let result = self
            .store
            .client()
            .update_item()
            .table_name(self.store.metrics_table())
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #owner = :me, #until = :until")
            .condition_expression("attribute_not_exists(#owner) OR #owner = :me OR #until < :now")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#until", "leaseUntil")
            .expression_attribute_values(":me", AttributeValue::S(self.options.owner.clone()))
            .expression_attribute_values(":until", AttributeValue::N(self.lease_until().to_string()))
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => {
                self.mark_held(shard_id, true);
                Ok(Some(checkpoint_of(&out.attributes.unwrap_or_default())))
            }
            Err(err) if super::store::is_condition_failure(&err) => {
                self.mark_held(shard_id, false);
                Ok(None)
            }
            Err(err) => Err(StoreError::from(err).into()),
        }
    }

    fn holds(&self, shard_id: &str) -> bool {
        let held = self.held.lock().expect("lease map poisoned");
        held.get(shard_id).is_some_and(|until| {
            until.saturating_duration_since(std::time::Instant::now()) > self.options.lease / 2
        })
    }

    fn mark_held(&self, shard_id: &str, holding: bool) {
        let mut held = self.held.lock().expect("lease map poisoned");
        if holding {
            held.insert(shard_id.to_string(), std::time::Instant::now() + self.options.lease);
        } else {
            held.remove(shard_id);
        }
    }

    fn lease_until(&self) -> i64 {
        Utc::now().timestamp_millis() + self.options.lease.as_millis() as i64
    }

    /// Reads a shard whose lease this consumer holds; `checkpoint` is what
    /// the store says when the lease was just taken or renewed.
    async fn read_shard(&self, stream_arn: &str, shard_id: &str, checkpoint: Option<Checkpoint>) -> Result<u64, ConsumerError> {
        let mut cursors = self.cursors.lock().await;
        let cursor = cursors.entry(shard_id.to_string()).or_default();
        if let Some(checkpoint) = checkpoint
            && cursor.seq != checkpoint.seq
        {
            // Someone else moved this shard on (or this is a restart): resume
            // from the checkpoint, not from a stale iterator.
            *cursor = ShardCursor { iterator: None, seq: checkpoint.seq };
        }
        let mut applied = 0;
        for _ in 0..BATCHES_PER_PASS {
            let iterator = match cursor.iterator.clone() {
                Some(iterator) => iterator,
                None => self.iterator(stream_arn, shard_id, cursor.seq.as_deref()).await?,
            };
            let out = self.store.streams().get_records().shard_iterator(&iterator).limit(self.options.batch).send().await;
            let out = match out {
                Ok(out) => out,
                Err(err) => match service_code(&err).as_deref() {
                    Some("ExpiredIteratorException") => {
                        cursor.iterator = None;
                        continue;
                    }
                    Some("TrimmedDataAccessException") => {
                        tracing::error!(shard_id, "stream records were trimmed before they were read: counters need `reconcile`");
                        cursor.iterator = Some(self.iterator(stream_arn, shard_id, None).await?);
                        continue;
                    }
                    _ => return Err(StoreError::from(err).into()),
                },
            };
            let records = out.records.unwrap_or_default();
            let closed = out.next_shard_iterator.is_none();
            if !records.is_empty() {
                let read = self.batches_read.fetch_add(1, Ordering::SeqCst) + 1;
                if self.options.fail_before_apply.is_some_and(|n| read >= n) {
                    return Err(ConsumerError::Injected);
                }
            }
            if records.is_empty() && !closed {
                cursor.iterator = out.next_shard_iterator;
                break;
            }
            match self.apply(stream_arn, shard_id, cursor.seq.clone(), &records, closed).await {
                Ok(seq) => {
                    applied += records.len() as u64;
                    cursor.seq = seq;
                    cursor.iterator = out.next_shard_iterator;
                }
                Err(StoreError::Conflict(why)) => {
                    // Lease lost, or the batch was applied already: start over
                    // from whatever checkpoint is stored.
                    tracing::info!(shard_id, why, "checkpoint moved; re-reading it");
                    cursors.remove(shard_id);
                    self.mark_held(shard_id, false);
                    return Ok(applied);
                }
                Err(err) => return Err(err.into()),
            }
            if closed {
                break;
            }
        }
        Ok(applied)
    }

    async fn iterator(&self, stream_arn: &str, shard_id: &str, after: Option<&str>) -> Result<String, ConsumerError> {
        let request = self.store.streams().get_shard_iterator().stream_arn(stream_arn).shard_id(shard_id);
        let request = match after {
            Some(seq) => request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(seq),
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let out = request.send().await.map_err(StoreError::from)?;
        out.shard_iterator.ok_or_else(|| StoreError::Dynamo("GetShardIterator returned no iterator".into()).into())
    }

    /// Applies records of one shard in as few transactions as the limits
    /// allow; returns the new checkpoint.
    pub async fn apply(
        &self,
        stream_arn: &str,
        shard_id: &str,
        mut prev: Option<String>,
        records: &[Record],
        closes_shard: bool,
    ) -> Result<Option<String>, StoreError> {
        let mut deltas = Deltas::default();
        let mut days = std::collections::BTreeSet::new();
        let mut events = Vec::new();
        let mut newest: Option<DateTime<Utc>> = None;
        let mut bad = 0u64;
        let mut pending_seq: Option<String> = None;
        for (i, record) in records.iter().enumerate() {
            let seq = record.dynamodb().and_then(|d| d.sequence_number()).map(str::to_string);
            match change(record) {
                Some(change) => {
                    let mut next = deltas.clone();
                    next.record(&change);
                    let too_big = next.item_count() > MAX_COUNTER_ITEMS || next.widest_item() > MAX_ATTRIBUTES;
                    if too_big && pending_seq.is_some() {
                        prev = self.commit(stream_arn, shard_id, prev, pending_seq.take(), &deltas, false).await?;
                        days.extend(deltas.days());
                        deltas = Deltas::default();
                        deltas.record(&change);
                    } else {
                        deltas = next;
                    }
                    newest = newest.max(Some(change.at));
                    events.extend(counters::events(&change));
                }
                None => {
                    bad += 1;
                    tracing::warn!(shard_id, sequence = ?seq, "skipping a stream record that is not a readable order");
                }
            }
            if seq.is_some() {
                pending_seq = seq;
            }
            let last = i + 1 == records.len();
            if last {
                prev = self.commit(stream_arn, shard_id, prev, pending_seq.take(), &deltas, closes_shard).await?;
            }
        }
        if records.is_empty() && closes_shard {
            prev = self.commit(stream_arn, shard_id, prev.clone(), None, &deltas, true).await?;
        }
        let now = Utc::now();
        self.update_status(|s| {
            s.records_applied += records.len() as u64 - bad;
            s.bad_records += bad;
            if !records.is_empty() {
                s.last_applied_at = Some(now);
                s.behind_ms = newest.map(|at| (now - at).num_milliseconds().max(0));
            }
            s.last_error = None;
        });
        days.extend(deltas.days());
        self.publish(days, events).await;
        Ok(prev)
    }

    /// One transaction: the counters, and the checkpoint moved from `prev`
    /// to `seq` by the lease holder.
    async fn commit(
        &self,
        stream_arn: &str,
        shard_id: &str,
        prev: Option<String>,
        seq: Option<String>,
        deltas: &Deltas,
        finished: bool,
    ) -> Result<Option<String>, StoreError> {
        let (pk, sk) = keys::checkpoint_key(stream_arn, shard_id);
        let mut sets = vec!["#until = :until".to_string()];
        let mut checkpoint = Update::builder()
            .table_name(self.store.metrics_table())
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#until", "leaseUntil")
            .expression_attribute_names("#seq", "seq")
            .expression_attribute_values(":me", AttributeValue::S(self.options.owner.clone()))
            .expression_attribute_values(":until", AttributeValue::N(self.lease_until().to_string()));
        if let Some(seq) = &seq {
            sets.push("#seq = :seq".into());
            checkpoint = checkpoint.expression_attribute_values(":seq", AttributeValue::S(seq.clone()));
        }
        if finished {
            sets.push("finished = :finished".into());
            checkpoint = checkpoint.expression_attribute_values(":finished", AttributeValue::Bool(true));
        }
        checkpoint = match &prev {
            Some(prev) => checkpoint
                .condition_expression("#owner = :me AND #seq = :prev")
                .expression_attribute_values(":prev", AttributeValue::S(prev.clone())),
            None => checkpoint.condition_expression("#owner = :me AND attribute_not_exists(#seq)"),
        };
        let checkpoint = checkpoint.update_expression(format!("SET {}", sets.join(", "))).build()?;
        let mut transaction = self
            .store
            .client()
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(checkpoint).build());
        for ((pk, sk), increments) in deltas.items() {
            let mut update = Update::builder()
                .table_name(self.store.metrics_table())
                .key(keys::PK, AttributeValue::S(pk.clone()))
                .key(keys::SK, AttributeValue::S(sk.clone()));
            let mut adds = Vec::new();
            for (i, (attribute, by)) in increments.into_iter().enumerate() {
                adds.push(format!("#a{i} :v{i}"));
                update = update
                    .expression_attribute_names(format!("#a{i}"), attribute)
                    .expression_attribute_values(format!(":v{i}"), AttributeValue::N(by.to_string()));
            }
            let update = update.update_expression(format!("ADD {}", adds.join(", "))).build()?;
            transaction = transaction.transact_items(TransactWriteItem::builder().update(update).build());
        }
        match transaction.send().await {
            Ok(_) => {
                // The checkpoint write renewed the lease too.
                self.mark_held(shard_id, true);
                Ok(seq.or(prev))
            }
            Err(err) => {
                let cancelled = err
                    .as_service_error()
                    .is_some_and(|e| e.is_transaction_canceled_exception());
                if cancelled {
                    Err(StoreError::Conflict(format!("checkpoint of {shard_id} is not where this consumer left it")))
                } else {
                    Err(err.into())
                }
            }
        }
    }

    async fn publish(&self, days: std::collections::BTreeSet<chrono::NaiveDate>, events: Vec<counters::OrderEvent>) {
        let Some(hub) = &self.hub else { return };
        for event in events {
            hub.send(match event {
                counters::OrderEvent::Entered { day, order } => LiveEvent::Entered { date: day, order },
                counters::OrderEvent::Left { day, order_id } => LiveEvent::Left { date: day, order_id },
            });
        }
        let behind_ms = self.status.lock().expect("status lock poisoned").behind_ms;
        for day in days {
            match self.store.read_counters(day).await {
                Ok(c) => hub.send(LiveEvent::Counters(LiveCounters {
                    date: day,
                    pending: c.pending,
                    per_shard: c.per_shard,
                    created: c.created,
                    as_of: Utc::now(),
                    behind_ms,
                })),
                Err(err) => tracing::warn!(error = %err, "could not read the counters to push them"),
            }
        }
    }
}

fn checkpoint_of(item: &HashMap<String, AttributeValue>) -> Checkpoint {
    Checkpoint {
        seq: item.get("seq").and_then(|v| v.as_s().ok()).cloned(),
        finished: item.get("finished").and_then(|v| v.as_bool().ok()).copied().unwrap_or(false),
    }
}


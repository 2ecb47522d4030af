//! The mapping itself: shards found and read, batches made and delivered,
//! failures retried, bisected or given up. See the module above for what
//! Lambda does that this does.

use super::dead_letters::{Condition, DeadLetters, GivenUp, LastResponse, message};
use super::runtime::{Answer, FunctionConfig, InvokeError, Pool};
use super::{MappingSettings, StartingPosition};
use crate::server::sim::wire;
use crate::server::store::error::StoreError;
use crate::server::store::{Store, StreamBatch};
use aws_sdk_dynamodbstreams::types::{KeyType, Record, ShardIteratorType};
use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

/// Lambda polls a shard at a base rate of 4 times a second.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// How often the stream's shards are listed, for new ones (splits).
const LIST_EVERY: Duration = Duration::from_secs(1);
/// Retries wait this long, doubling, up to `RETRY_MOST`.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MOST: Duration = Duration::from_secs(3);

/// What the mapping did, for the tests, the rehearsal and the command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MappingStats {
    /// Invocations made (retries included).
    pub invocations: u64,
    /// Records handed to the function (a record delivered twice counts twice).
    pub records_delivered: u64,
    /// Records the function took: each once.
    pub records_done: u64,
    /// Invocations answered with batch item failures.
    pub partial_failures: u64,
    /// Invocations that failed: an error answer, an exit, a timeout.
    pub function_errors: u64,
    pub timeouts: u64,
    pub bisections: u64,
    pub retries: u64,
    /// Records given up to the on-failure destination, and its messages.
    pub given_up: u64,
    pub dead_letters: u64,
    /// Execution environments started, and the most invocations at once.
    pub environments: usize,
    pub most_concurrent: usize,
    pub shards_read: usize,
    pub shards_finished: usize,
    /// Times a shard's position was found trimmed (records lost to retention).
    pub trimmed: u64,
    /// Stream reads that failed (and were tried again).
    pub read_errors: u64,
    /// How old the newest record of a batch was when the function took it
    /// (Lambda's `IteratorAge`): the last, and the most.
    pub behind_ms: Option<i64>,
    pub most_behind_ms: i64,
    /// Tumbling windows closed with a call of their own (no records).
    pub windows_closed: u64,
}

impl std::fmt::Display for MappingStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "local Lambda summary: {} records taken by the function in {} invocations ({} records delivered, \
             retries included)",
            self.records_done, self.invocations, self.records_delivered
        )?;
        writeln!(
            f,
            "  failures: {} partial, {} function errors ({} timeouts); {} retries, {} bisections",
            self.partial_failures, self.function_errors, self.timeouts, self.retries, self.bisections
        )?;
        writeln!(
            f,
            "  given up: {} records in {} messages to the on-failure destination",
            self.given_up, self.dead_letters
        )?;
        writeln!(
            f,
            "  {} execution environments, at most {} invocations at once; {} shards read, {} to their end",
            self.environments, self.most_concurrent, self.shards_read, self.shards_finished
        )?;
        write!(
            f,
            "  iterator age: {} ms last, {} ms at most; {} trimmed positions, {} stream read errors",
            self.behind_ms.unwrap_or(0),
            self.most_behind_ms,
            self.trimmed,
            self.read_errors
        )
    }
}

struct Inner {
    store: Arc<Store>,
    settings: MappingSettings,
    pool: Pool,
    dead_letters: Arc<DeadLetters>,
    function_arn: String,
    stats: Mutex<MappingStats>,
    /// Shards read to their end and delivered.
    finished: Mutex<HashSet<String>>,
    stop: CancellationToken,
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Inner {
    fn count(&self, change: impl FnOnce(&mut MappingStats)) {
        change(&mut self.stats.lock());
    }

    fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(task);
        self.tasks.lock().push(handle.abort_handle());
        handle
    }

    /// Waits `pause`, or less if the mapping stops: whether it still runs.
    async fn pause(&self, pause: Duration) -> bool {
        tokio::select! {
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep(pause) => true,
        }
    }
}

/// The running mapping: it reads the stream of `store`'s orders table.
pub struct Mapping {
    inner: Arc<Inner>,
}

impl Mapping {
    pub fn start(
        store: Arc<Store>,
        settings: MappingSettings,
        function: FunctionConfig,
        dead_letters: Arc<DeadLetters>,
    ) -> Mapping {
        let inner = Arc::new(Inner {
            function_arn: function.arn(),
            pool: Pool::new(function),
            store,
            settings,
            dead_letters,
            stats: Mutex::default(),
            finished: Mutex::default(),
            stop: CancellationToken::new(),
            tasks: Mutex::default(),
        });
        inner.spawn(coordinate(inner.clone()));
        Mapping { inner }
    }

    pub fn stats(&self) -> MappingStats {
        let mut stats = self.inner.stats.lock().clone();
        stats.environments = self.inner.pool.started();
        stats.most_concurrent = self.inner.pool.most_busy();
        stats.dead_letters = self.inner.dead_letters.messages().len() as u64;
        stats
    }

    /// The pids of the function's execution environments running now.
    pub fn environment_pids(&self) -> Vec<u32> {
        self.inner.pool.pids()
    }

    pub fn dead_letters(&self) -> &DeadLetters {
        &self.inner.dead_letters
    }

    pub fn settings(&self) -> &MappingSettings {
        &self.inner.settings
    }

    /// Stops polling; batches being delivered get up to `grace` to finish,
    /// then every environment is stopped by its pid.
    pub async fn stop(self, grace: Duration) -> MappingStats {
        self.inner.stop.cancel();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.inner.tasks.lock().iter().any(|t| !t.is_finished()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for task in self.inner.tasks.lock().drain(..) {
            task.abort();
        }
        // Aborted tasks drop their environments (each stopped by its pid);
        // the idle ones are stopped here.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.inner.pool.stop();
        self.stats()
    }
}

/// Finds the stream and its shards, and starts a poller for each shard
/// whose parent is done (or gone), until the mapping stops.
async fn coordinate(inner: Arc<Inner>) {
    let arn = loop {
        match inner.store.stream_arn().await {
            Ok(Some(arn)) => break arn,
            Ok(None) => tracing::warn!("local Lambda: the orders table has no stream yet"),
            Err(err) => tracing::warn!(error = %err, "local Lambda: cannot find the orders table's stream"),
        }
        if !inner.pause(Duration::from_millis(500)).await {
            return;
        }
    };
    let hash_key = hash_key(&inner.store, &arn).await;
    let (mut started, mut initial): (HashSet<String>, Option<HashSet<String>>) = (HashSet::new(), None);
    loop {
        match inner.store.stream_shards(&arn).await {
            Ok(shards) => {
                let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
                let initial = initial.get_or_insert_with(|| shards.iter().map(|s| s.id.clone()).collect());
                for shard in &shards {
                    let finished = inner.finished.lock().clone();
                    let parent_done =
                        shard.parent.as_deref().is_none_or(|p| !listed.contains(p) || finished.contains(p));
                    if started.contains(&shard.id) || !parent_done {
                        continue;
                    }
                    // Shards found at start begin where the mapping says;
                    // every later one (a split's children) at its start.
                    let latest =
                        initial.contains(&shard.id) && inner.settings.starting_position == StartingPosition::Latest;
                    started.insert(shard.id.clone());
                    inner.count(|s| s.shards_read += 1);
                    let reader = ShardReader {
                        inner: inner.clone(),
                        arn: arn.clone(),
                        shard: shard.id.clone(),
                        hash_key: hash_key.clone(),
                    };
                    inner.spawn(reader.run(latest));
                }
            }
            Err(err) => {
                inner.count(|s| s.read_errors += 1);
                tracing::warn!(error = %err, "local Lambda: cannot list the stream's shards");
            }
        }
        if !inner.pause(LIST_EVERY).await {
            return;
        }
    }
}

/// The partition key attribute records are split by, from the stream's key
/// schema (`None`: every key attribute).
async fn hash_key(store: &Store, arn: &str) -> Option<String> {
    let described = store.streams().describe_stream().stream_arn(arn).limit(1).send().await.ok()?;
    let key = described.stream_description?.key_schema?.into_iter().find(|k| *k.key_type() == KeyType::Hash)?;
    Some(key.attribute_name().to_string())
}

/// A record's lane among the shard's concurrent batches: a hash of its
/// partition key, so a key's records always take the same one.
fn lane_of(record: &Record, hash_key: Option<&str>, lanes: usize) -> usize {
    if lanes <= 1 {
        return 0;
    }
    let keys = record.dynamodb().and_then(|d| d.keys());
    let mut parts: Vec<String> = keys
        .map(|keys| {
            keys.iter()
                .filter(|(name, _)| hash_key.is_none_or(|h| h == name.as_str()))
                .map(|(name, value)| format!("{name}={}", wire::value_to_json(value)))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    (xxhash_rust::xxh3::xxh3_64(parts.join("\u{1f}").as_bytes()) % lanes as u64) as usize
}

fn seq(record: &Record) -> Option<&str> {
    record.dynamodb().and_then(|d| d.sequence_number())
}

/// How old a record is, by the time the stream gives for its write.
fn age(record: &Record) -> Duration {
    let written = record.dynamodb().and_then(|d| d.approximate_creation_date_time()).map(|t| t.as_secs_f64());
    written.map_or(Duration::ZERO, |at| {
        Duration::from_secs_f64((Utc::now().timestamp_millis() as f64 / 1000.0 - at).max(0.0))
    })
}

/// One shard's poller: it reads the shard in order and hands each record to
/// the lane of its key; once the shard is read to its end and every lane
/// has delivered, the shard is finished and its children may start.
struct ShardReader {
    inner: Arc<Inner>,
    arn: String,
    shard: String,
    hash_key: Option<String>,
}

impl ShardReader {
    async fn run(self, latest: bool) {
        let inner = self.inner.clone();
        let lanes = inner.settings.parallelization_factor.max(1);
        let depth = inner.settings.batch_size.max(1) * 2;
        let context = Arc::new(Delivery { inner: inner.clone(), arn: self.arn.clone(), shard: self.shard.clone() });
        let (mut senders, mut tasks) = (Vec::new(), Vec::new());
        for _ in 0..lanes {
            let (tx, rx) = mpsc::channel::<Record>(depth);
            senders.push(tx);
            tasks.push(inner.spawn(lane(context.clone(), rx)));
        }
        let read_to_end = self.read(&senders, latest).await;
        drop(senders);
        for task in tasks {
            let _ = task.await;
        }
        if read_to_end && !inner.stop.is_cancelled() {
            inner.finished.lock().insert(self.shard.clone());
            inner.count(|s| s.shards_finished += 1);
            tracing::info!(shard = self.shard, "local Lambda: a shard read and delivered to its end");
        }
    }

    /// Reads until the shard ends (`true`) or the mapping stops.
    async fn read(&self, lanes: &[mpsc::Sender<Record>], latest: bool) -> bool {
        let inner = &self.inner;
        let limit = (inner.settings.batch_size * lanes.len()).clamp(1, 1000) as i32;
        let (mut after, mut latest, mut iterator) = (None::<String>, latest, None::<String>);
        let mut last_call: Option<Instant> = None;
        loop {
            if let Some(at) = last_call {
                let wait = POLL_EVERY.saturating_sub(at.elapsed());
                if !wait.is_zero() && !inner.pause(wait).await {
                    return false;
                }
            }
            if inner.stop.is_cancelled() {
                return false;
            }
            let current = match iterator.take() {
                Some(iterator) => iterator,
                None => match self.iterator(after.as_deref(), latest).await {
                    Ok(iterator) => iterator,
                    Err(StoreError::Trimmed(why)) => {
                        self.trimmed(&why);
                        (after, latest) = (None, false);
                        continue;
                    }
                    Err(err) => {
                        self.read_failed(&err).await;
                        continue;
                    }
                },
            };
            latest = false;
            last_call = Some(Instant::now());
            match inner.store.get_records(&current, limit).await {
                Ok(StreamBatch::Records { records, next }) => {
                    for record in records {
                        after = seq(&record).map(str::to_string).or(after);
                        let lane = lane_of(&record, self.hash_key.as_deref(), lanes.len());
                        tokio::select! {
                            _ = inner.stop.cancelled() => return false,
                            sent = lanes[lane].send(record) => if sent.is_err() { return false },
                        }
                    }
                    match next {
                        Some(next) => iterator = Some(next),
                        None => return true,
                    }
                }
                Ok(StreamBatch::Expired) => {}
                Ok(StreamBatch::Trimmed) => {
                    self.trimmed("GetRecords");
                    after = None;
                }
                Err(err) => self.read_failed(&err).await,
            }
        }
    }

    async fn iterator(&self, after: Option<&str>, latest: bool) -> Result<String, StoreError> {
        if after.is_none() && latest {
            let out = self
                .inner
                .store
                .streams()
                .get_shard_iterator()
                .stream_arn(&self.arn)
                .shard_id(&self.shard)
                .shard_iterator_type(ShardIteratorType::Latest)
                .send()
                .await
                .map_err(StoreError::from)?;
            return out.shard_iterator.ok_or_else(|| StoreError::Rejected("GetShardIterator gave no iterator".into()));
        }
        self.inner.store.shard_iterator(&self.arn, &self.shard, after).await
    }

    /// Lambda goes on from the oldest record the stream still has: what
    /// was trimmed is lost to the function.
    fn trimmed(&self, why: &str) {
        self.inner.count(|s| s.trimmed += 1);
        tracing::error!(shard = self.shard, why, "local Lambda: the shard's position was trimmed; records were lost");
    }

    async fn read_failed(&self, err: &StoreError) {
        self.inner.count(|s| s.read_errors += 1);
        tracing::warn!(shard = self.shard, error = %err, "local Lambda: a stream read failed; trying again");
        self.inner.pause(Duration::from_secs(1)).await;
    }
}

/// What a lane delivers for: the mapping, the stream and the shard.
struct Delivery {
    inner: Arc<Inner>,
    arn: String,
    shard: String,
}

/// One of a shard's concurrent batches: gathers its records into batches
/// and delivers them one after another, in order; closes its tumbling
/// window when it ends, when the shard ends, and when the mapping stops (a
/// window's state holds what the function has not written yet).
async fn lane(delivery: Arc<Delivery>, mut records: mpsc::Receiver<Record>) {
    let (size, window) = (delivery.inner.settings.batch_size.max(1), delivery.inner.settings.batching_window);
    let mut open: Option<OpenWindow> = None;
    loop {
        let closes_in = open.as_ref().map(|w| (w.end - Utc::now()).to_std().unwrap_or(Duration::ZERO));
        let first = tokio::select! {
            _ = delivery.inner.stop.cancelled() => {
                delivery.close(&mut open).await;
                return;
            }
            _ = tokio::time::sleep(closes_in.unwrap_or(RETRY_MOST)), if closes_in.is_some() => {
                delivery.close(&mut open).await;
                continue;
            }
            first = records.recv() => match first {
                Some(first) => first,
                None => {
                    delivery.close(&mut open).await;
                    return;
                }
            },
        };
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + window;
        while batch.len() < size {
            let more = if window.is_zero() {
                records.try_recv().ok()
            } else {
                tokio::time::timeout_at(deadline, records.recv()).await.ok().flatten()
            };
            match more {
                Some(record) => batch.push(record),
                None => break,
            }
        }
        delivery.deliver(batch, &mut open).await;
    }
}

/// A lane's tumbling window: when it starts and ends (aligned to the
/// clock), and the state the function's last answer in it gave.
#[derive(Clone, Debug)]
struct OpenWindow {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    state: Value,
}

impl OpenWindow {
    fn at(now: DateTime<Utc>, length: Duration) -> OpenWindow {
        let length_ms = (length.as_millis() as i64).max(1);
        let start_ms = now.timestamp_millis().div_euclid(length_ms) * length_ms;
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or(now);
        OpenWindow { start: at(start_ms), end: at(start_ms + length_ms), state: json!({}) }
    }

    /// The fields Lambda adds to an event of the window.
    fn fields(&self, event: &mut Value, delivery: &Delivery, closing: bool) {
        let iso = |at: &DateTime<Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        event["window"] = json!({"start": iso(&self.start), "end": iso(&self.end)});
        event["state"] = self.state.clone();
        event["shardId"] = json!(delivery.shard);
        event["eventSourceARN"] = json!(delivery.arn);
        event["isFinalInvokeForWindow"] = json!(closing);
        event["isWindowTerminatedEarly"] = json!(false);
    }
}

/// What the function's answer says of the batch.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Done,
    /// The first failed record's position: it and every record after it
    /// are delivered again.
    FailedFrom(usize),
    /// An answer Lambda takes as the whole batch failing.
    Failed(String),
}

/// Reads a partial batch response as Lambda does: no list, or an empty one,
/// is success; the lowest reported record is where the batch resumes; an
/// identifier that is empty, missing or no record of the batch fails all of
/// it; so does an answer in a tumbling window (`windowed`) without `state`.
fn verdict(body: &Value, records: &[Record], report_failures: bool, windowed: bool) -> Verdict {
    if windowed && !body.get("state").is_some_and(Value::is_object) {
        return Verdict::Failed(format!("an answer in a tumbling window without a state: {body}"));
    }
    if !report_failures {
        return Verdict::Done;
    }
    let failures = match body.get("batchItemFailures") {
        None | Some(Value::Null) => return Verdict::Done,
        Some(Value::Array(failures)) => failures,
        Some(other) => return Verdict::Failed(format!("batchItemFailures is {other}, not a list")),
    };
    let mut first: Option<usize> = None;
    for failure in failures {
        let Some(id) = failure.get("itemIdentifier").and_then(Value::as_str).filter(|id| !id.is_empty()) else {
            return Verdict::Failed(format!("a batch item failure without an itemIdentifier: {failure}"));
        };
        let Some(position) = records.iter().position(|r| seq(r) == Some(id)) else {
            return Verdict::Failed(format!("itemIdentifier {id} is no record of the batch"));
        };
        first = Some(first.map_or(position, |f| f.min(position)));
    }
    first.map_or(Verdict::Done, Verdict::FailedFrom)
}

impl Delivery {
    /// Delivers a batch until the function takes every record or they are
    /// given up: partial failures resume from the reported record, a failed
    /// invocation is bisected (when set) or retried, with the limits of the
    /// mapping.
    async fn deliver(&self, batch: Vec<Record>, open: &mut Option<OpenWindow>) {
        let inner = &self.inner;
        let settings = &inner.settings;
        let mut pending: VecDeque<Vec<Record>> = VecDeque::from([batch]);
        // Failed invocations of the batch at the head of `pending`.
        let mut failures: u32 = 0;
        let mut last: Option<LastResponse> = None;
        let mut request_id = String::new();
        while let Some(mut current) = pending.pop_front() {
            if inner.stop.is_cancelled() {
                return;
            }
            if let Some(most) = settings.max_record_age {
                let aged = current.iter().take_while(|r| age(r) > most).count();
                if aged > 0 {
                    let rest = current.split_off(aged);
                    self.give_up(Condition::RecordAgeExceeded, &current, failures, last.clone(), &request_id);
                    current = rest;
                }
                if current.is_empty() {
                    (failures, last) = (0, None);
                    continue;
                }
            }
            let mut event =
                json!({"Records": current.iter().map(|r| wire::lambda_record(r, &self.arn)).collect::<Vec<_>>()});
            if let Some(length) = settings.tumbling_window {
                if open.as_ref().is_some_and(|w| w.end <= Utc::now()) {
                    self.close(open).await;
                }
                open.get_or_insert_with(|| OpenWindow::at(Utc::now(), length)).fields(&mut event, self, false);
            }
            inner.count(|s| {
                s.invocations += 1;
                s.records_delivered += current.len() as u64;
            });
            request_id = uuid::Uuid::new_v4().to_string();
            let answer = inner.pool.invoke(event).await;
            let windowed = settings.tumbling_window.is_some();
            if let (Ok(Answer::Response(body)), Some(window)) = (&answer, open.as_mut())
                && let Some(state) = body.get("state").filter(|s| s.is_object())
            {
                window.state = state.clone();
            }
            let failed_whole = match &answer {
                Ok(Answer::Response(body)) => {
                    match verdict(body, &current, settings.report_batch_item_failures, windowed) {
                        Verdict::Done => {
                            self.done(&current);
                            (failures, last) = (0, None);
                            continue;
                        }
                        Verdict::FailedFrom(from) => {
                            inner.count(|s| s.partial_failures += 1);
                            self.done(&current[..from]);
                            if from > 0 {
                                failures = 0;
                            }
                            current.drain(..from);
                            last = Some(LastResponse { function_error: None });
                            None
                        }
                        Verdict::Failed(why) => Some(why),
                    }
                }
                Ok(Answer::Error(body)) => Some(format!("the function failed: {body}")),
                Err(err) => {
                    if matches!(err, InvokeError::Timeout(_)) {
                        inner.count(|s| s.timeouts += 1);
                    }
                    Some(err.to_string())
                }
            };
            if let Some(why) = failed_whole {
                inner.count(|s| s.function_errors += 1);
                tracing::warn!(shard = self.shard, records = current.len(), why, "local Lambda: an invocation failed");
                last = Some(LastResponse { function_error: Some("Unhandled".into()) });
                if settings.bisect_on_error && current.len() > 1 {
                    // Halves cost no retry; the first is delivered first.
                    inner.count(|s| s.bisections += 1);
                    let second = current.split_off(current.len() / 2);
                    pending.push_front(second);
                    pending.push_front(current);
                    continue;
                }
            }
            failures += 1;
            if settings.max_retries.is_some_and(|most| failures > most) {
                self.give_up(Condition::RetryAttemptsExhausted, &current, failures, last.clone(), &request_id);
                (failures, last) = (0, None);
                continue;
            }
            inner.count(|s| s.retries += 1);
            let wait = RETRY_FIRST.saturating_mul(1 << (failures - 1).min(8)).min(RETRY_MOST);
            if !inner.pause(wait).await {
                return;
            }
            pending.push_front(current);
        }
    }

    /// The call that ends a tumbling window: no records, the window's last
    /// state. Made again until it succeeds, as Lambda holds the shard until
    /// then, or until the mapping stops (one call more once stopping).
    async fn close(&self, open: &mut Option<OpenWindow>) {
        let Some(window) = open.take() else { return };
        let mut event = json!({"Records": []});
        window.fields(&mut event, self, true);
        let mut failures: u32 = 0;
        loop {
            self.inner.count(|s| s.invocations += 1);
            let failed = match self.inner.pool.invoke(event.clone()).await {
                Ok(Answer::Response(_)) => {
                    self.inner.count(|s| s.windows_closed += 1);
                    return;
                }
                Ok(Answer::Error(body)) => body.to_string(),
                Err(err) => err.to_string(),
            };
            tracing::warn!(shard = self.shard, failed, "local Lambda: a window's closing call failed");
            failures += 1;
            self.inner.count(|s| s.retries += 1);
            let wait = RETRY_FIRST.saturating_mul(1 << (failures - 1).min(8)).min(RETRY_MOST);
            if !self.inner.pause(wait).await {
                return;
            }
        }
    }

    fn done(&self, records: &[Record]) {
        if records.is_empty() {
            return;
        }
        let behind = records.last().map(|r| age(r).as_millis() as i64);
        self.inner.count(|s| {
            s.records_done += records.len() as u64;
            s.behind_ms = behind;
            s.most_behind_ms = s.most_behind_ms.max(behind.unwrap_or(0));
        });
    }

    fn give_up(
        &self,
        condition: Condition,
        records: &[Record],
        invocations: u32,
        last: Option<LastResponse>,
        request_id: &str,
    ) {
        let request_id = if request_id.is_empty() { uuid::Uuid::new_v4().to_string() } else { request_id.to_string() };
        let given_up = GivenUp {
            condition,
            request_id,
            function_arn: &self.inner.function_arn,
            invocations,
            response: last,
            shard_id: &self.shard,
            stream_arn: &self.arn,
            records,
        };
        self.inner.dead_letters.send(message(&given_up, Utc::now()));
        self.inner.count(|s| s.given_up += records.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodbstreams::types::{AttributeValue, StreamRecord};
    use std::collections::HashMap;

    fn record(key: &str, seq: &str) -> Record {
        let keys = HashMap::from([("PK".to_string(), AttributeValue::S(key.into()))]);
        Record::builder().dynamodb(StreamRecord::builder().set_keys(Some(keys)).sequence_number(seq).build()).build()
    }

    #[test]
    fn a_partial_batch_response_is_read_as_lambda_reads_it() {
        let records: Vec<Record> = ["1", "2", "3", "4"].iter().map(|s| record("k", s)).collect();
        let failures = |ids: Value| json!({"batchItemFailures": ids});
        let verdict = |body: &Value, records: &[Record], report: bool| verdict(body, records, report, false);
        assert_eq!(verdict(&json!(null), &records, true), Verdict::Done);
        assert_eq!(verdict(&json!({}), &records, true), Verdict::Done);
        assert_eq!(verdict(&failures(json!([])), &records, true), Verdict::Done);
        let two = failures(json!([{"itemIdentifier": "4"}, {"itemIdentifier": "2"}]));
        assert_eq!(verdict(&two, &records, true), Verdict::FailedFrom(1), "the lowest one");
        assert_eq!(verdict(&two, &records, false), Verdict::Done, "ignored unless the mapping reports failures");
        for bad in [
            json!([{"itemIdentifier": ""}]),
            json!([{"itemIdentifier": null}]),
            json!([{"id": "2"}]),
            json!([{"itemIdentifier": "9"}]),
        ] {
            assert!(matches!(verdict(&failures(bad.clone()), &records, true), Verdict::Failed(_)), "{bad}");
        }
        assert!(matches!(verdict(&failures(json!("2")), &records, true), Verdict::Failed(_)));
    }

    #[test]
    fn an_answer_in_a_tumbling_window_needs_a_state() {
        let records: Vec<Record> = ["1", "2"].iter().map(|s| record("k", s)).collect();
        assert_eq!(verdict(&json!({"batchItemFailures": [], "state": {}}), &records, true, true), Verdict::Done);
        let failed = json!({"batchItemFailures": [{"itemIdentifier": "2"}], "state": {"a": "1"}});
        assert_eq!(verdict(&failed, &records, true, true), Verdict::FailedFrom(1));
        for stateless in [json!({"batchItemFailures": []}), json!({"state": "x"}), json!(null)] {
            assert!(matches!(verdict(&stateless, &records, true, true), Verdict::Failed(_)), "{stateless}");
        }
    }

    #[test]
    fn windows_are_aligned_to_the_clock() {
        let at = DateTime::parse_from_rfc3339("2026-12-04T17:41:25.300Z").unwrap().with_timezone(&Utc);
        let window = OpenWindow::at(at, Duration::from_secs(60));
        assert_eq!(window.start.to_rfc3339(), "2026-12-04T17:41:00+00:00");
        assert_eq!(window.end.to_rfc3339(), "2026-12-04T17:42:00+00:00");
        assert!(window.start <= at && at < window.end);
    }

    #[test]
    fn a_key_always_takes_the_same_lane_and_keys_spread_over_lanes() {
        let lanes: HashSet<usize> = (0..50).map(|i| lane_of(&record(&format!("k{i}"), "1"), Some("PK"), 4)).collect();
        assert_eq!(lanes.len(), 4, "50 keys over 4 lanes");
        for i in 0..20 {
            let key = format!("k{i}");
            assert_eq!(lane_of(&record(&key, "1"), Some("PK"), 4), lane_of(&record(&key, "2"), Some("PK"), 4));
        }
        assert_eq!(lane_of(&record("k1", "1"), Some("PK"), 1), 0);
    }
}

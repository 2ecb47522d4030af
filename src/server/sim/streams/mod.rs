//! `northwind-ops stream-proxy`: a DynamoDB stream of many shards, simulated
//! on loopback in front of a local engine. DynamoDB Local and Dynoxide give
//! each table's stream one shard; on AWS a table has a shard per partition
//! (Northwind's, at 5,000 WCU, at least five) and a busy partition splits.
//! This follows the engine's own stream from its start and serves it again,
//! through the DynamoDB Streams JSON protocol (DescribeStream, ListStreams,
//! GetShardIterator, GetRecords), as N shards:
//!
//! - each record goes to the shard that owns a hash of its partition key, so
//!   a key's records stay in order in one shard lineage;
//! - sequence numbers are the simulation's own, increasing within a shard and
//!   from a parent to its children;
//! - a shard splits on demand (`POST /_sim/split`, or `StreamSim::split`) or
//!   on a schedule: it closes (`EndingSequenceNumber`) and two children
//!   (`ParentShardId`) take its keys, every record of the parent before any
//!   of a child's;
//! - every open shard rolls over on a schedule (`--rollover-every-secs`; AWS:
//!   about every 4 hours): it closes and one child takes all its keys, so a
//!   day's lineage (a 32-shard table lists about 200 shards by evening) fits
//!   in minutes with a short period and a short retention;
//! - iterators expire (15 minutes, settable), records older than retention
//!   (24 hours, settable) are trimmed (`TrimmedDataAccessException`), and
//!   closed shards whose records are gone disappear;
//! - GetRecords returns at most 1,000 records or 1 MB and a shard takes at
//!   most 5 calls a second, DescribeStream 10 a second
//!   (`LimitExceededException`), as DynamoDB Streams answers.
//!
//! Not simulated: the time a record takes to reach a real stream (here: the
//! follower's poll, 50 ms), read throughput per shard in bytes, and the
//! engines' own write path (the records are the engine's).

mod api;
pub mod shards;

use crate::server::store::{StoreTimeouts, endpoint_sdk_config};
use aws_sdk_dynamodbstreams::error::ProvideErrorMetadata;
use aws_sdk_dynamodbstreams::types::{KeyType, ShardIteratorType};
use axum::Router;
use clap::Args;
use parking_lot::Mutex;
use shards::{Limits, Shards, StreamError};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Args, Debug, Clone)]
pub struct StreamProxyArgs {
    /// The engine whose stream to follow, e.g. http://127.0.0.1:8000 (the
    /// orders table is --orders-table)
    #[arg(long, env = "NORTHWIND_STREAM_UPSTREAM")]
    pub upstream: String,

    /// Address to listen on; point --streams-endpoint-url at it
    #[arg(long, env = "NORTHWIND_STREAM_LISTEN", default_value = "127.0.0.1:8020")]
    pub listen: SocketAddr,

    /// Shards the stream starts with (`--shards` is the index's write shards)
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub stream_shards: u32,

    /// Split the busiest open shard every this many seconds (also on demand:
    /// POST /_sim/split)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub split_every_secs: Option<u64>,

    /// Roll every open shard over (it closes, one child takes its keys)
    /// every this many seconds (AWS: about 4 hours)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub rollover_every_secs: Option<u64>,

    /// How long an iterator may be used, in seconds (AWS: 15 minutes)
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub iterator_ttl_secs: u64,

    /// How long records are kept, in seconds (AWS: 24 hours)
    #[arg(long, default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    pub retention_secs: u64,

    /// GetRecords calls a shard takes a second (AWS: 5); 0 for no limit
    #[arg(long, default_value_t = 5)]
    pub reads_per_shard_second: u32,

    /// DescribeStream calls a stream takes a second (AWS: 10); 0 for no limit
    #[arg(long, default_value_t = 10)]
    pub describes_per_second: u32,
}

/// How the simulated stream behaves.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// The engine behind (http only).
    pub upstream: String,
    /// The table whose stream is followed from the start (any other stream
    /// is followed from the first request naming it).
    pub table: Option<String>,
    pub listen: SocketAddr,
    /// Shards each stream starts with, 1 to 64.
    pub shards: u32,
    /// Split the busiest open shard this often.
    pub split_every: Option<Duration>,
    /// Roll every open shard over this often.
    pub rollover_every: Option<Duration>,
    pub limits: Limits,
    /// How often the engine's stream is read when it had nothing new.
    pub poll: Duration,
}

impl StreamOptions {
    pub fn new(upstream: impl Into<String>, table: Option<String>, shards: u32) -> Self {
        Self {
            upstream: upstream.into(),
            table,
            listen: "127.0.0.1:0".parse().expect("a socket address"),
            shards,
            split_every: None,
            rollover_every: None,
            limits: Limits::default(),
            poll: Duration::from_millis(50),
        }
    }

    pub fn from_args(args: &StreamProxyArgs, table: &str) -> Self {
        Self {
            listen: args.listen,
            split_every: args.split_every_secs.map(Duration::from_secs),
            rollover_every: args.rollover_every_secs.map(Duration::from_secs),
            limits: Limits {
                iterator_ttl: Duration::from_secs(args.iterator_ttl_secs),
                retention: Duration::from_secs(args.retention_secs),
                reads_per_shard_second: args.reads_per_shard_second,
                describes_per_second: args.describes_per_second,
                ..Limits::default()
            },
            ..Self::new(&args.upstream, Some(table.to_string()), args.stream_shards)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StreamSimError {
    #[error("--upstream {url}: {why}")]
    Upstream { url: String, why: String },
    #[error("--shards {0}: a stream starts with 1 to 64 shards")]
    Shards(u32),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("no stream is followed yet: {0}")]
    NoStream(String),
    #[error(transparent)]
    Stream(#[from] StreamError),
}

/// What the simulated stream did, for the tests and the command's summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Records read from the engine and put in a shard.
    pub ingested: u64,
    /// Records sent in GetRecords answers (a record read twice counts twice).
    pub served: u64,
    /// Calls answered, by operation (refusals included).
    pub calls: BTreeMap<String, u64>,
    /// Refusals, by exception.
    pub refused: BTreeMap<String, u64>,
    pub splits: u64,
    /// Shards closed by a rollover (each with one child).
    pub rollovers: u64,
    /// Shards now: open, and closed still listed.
    pub open_shards: usize,
    pub closed_shards: usize,
}

impl std::fmt::Display for StreamStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "stream proxy summary: {} records from the engine, {} served", self.ingested, self.served)?;
        writeln!(
            f,
            "  shards: {} open, {} closed; {} splits, {} rolled over",
            self.open_shards, self.closed_shards, self.splits, self.rollovers
        )?;
        for (op, n) in &self.calls {
            writeln!(f, "  {op}: {n} calls")?;
        }
        let refused: Vec<String> = self.refused.iter().map(|(code, n)| format!("{code} {n}")).collect();
        write!(f, "  refused: {}", if refused.is_empty() { "none".into() } else { refused.join(", ") })
    }
}

/// One stream followed: the engine's description of it and its simulated shards.
pub(crate) struct Followed {
    arn: String,
    table: String,
    label: String,
    view_type: String,
    /// (attribute, HASH or RANGE)
    key_schema: Vec<(String, String)>,
    created_secs: f64,
    shards: Mutex<Shards>,
}

pub(crate) struct Inner {
    options: StreamOptions,
    tables: aws_sdk_dynamodb::Client,
    upstream: aws_sdk_dynamodbstreams::Client,
    streams: Mutex<HashMap<String, Arc<Followed>>>,
    stats: Mutex<StreamStats>,
    stop: CancellationToken,
    tasks: TaskTracker,
}

/// The simulated stream, serving on loopback until stopped.
pub struct StreamSim {
    inner: Arc<Inner>,
    addr: SocketAddr,
}

/// Longest one of the follower's calls to the engine may take.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(5);
/// A scheduled split stops once this many shards are open.
const MAX_OPEN_SHARDS: usize = 256;

impl StreamSim {
    /// Binds and starts serving; the table's stream (when named) is
    /// followed as soon as the table has one.
    pub async fn start(options: StreamOptions) -> Result<StreamSim, StreamSimError> {
        if !(1..=64).contains(&options.shards) {
            return Err(StreamSimError::Shards(options.shards));
        }
        let upstream = upstream_base(&options.upstream)?;
        let sdk = endpoint_sdk_config(&upstream, StoreTimeouts::from_operation(UPSTREAM_TIMEOUT)).await;
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| StreamSimError::Listen { addr: options.listen, source })?;
        let addr = listener.local_addr().map_err(|source| StreamSimError::Listen { addr: options.listen, source })?;
        let inner = Arc::new(Inner {
            tables: aws_sdk_dynamodb::Client::new(&sdk),
            upstream: aws_sdk_dynamodbstreams::Client::new(&sdk),
            options,
            streams: Mutex::new(HashMap::new()),
            stats: Mutex::new(StreamStats::default()),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        let app = Router::new().fallback(api::handle).with_state(inner.clone());
        let stop = inner.stop.clone();
        inner.tasks.spawn(async move {
            if let Err(err) = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await {
                tracing::error!(error = %err, "stream proxy: the server stopped");
            }
        });
        if let Some(table) = inner.options.table.clone() {
            inner.tasks.spawn(discover(inner.clone(), table));
        }
        if let Some(every) = inner.options.split_every {
            inner.tasks.spawn(on_schedule(inner.clone(), every, split_one));
        }
        if let Some(every) = inner.options.rollover_every {
            inner.tasks.spawn(on_schedule(inner.clone(), every, |inner, stream| drop(inner.roll_over(stream))));
        }
        Ok(StreamSim { inner, addr })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to give `--streams-endpoint-url`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Splits a shard of the stream (the busiest open one when `shard` is
    /// `None`; the stream followed when only one is): the children's ids.
    pub fn split(&self, arn: Option<&str>, shard: Option<&str>) -> Result<(String, String), StreamSimError> {
        let stream = self.inner.only_or(arn)?;
        let children = stream.shards.lock().split(shard, Instant::now(), now_ms())?;
        self.inner.stats.lock().splits += 1;
        tracing::info!(stream = stream.arn, left = children.0, right = children.1, "stream proxy: a shard split");
        Ok(children)
    }

    /// Rolls every open shard of the stream over (the stream followed when
    /// only one is): (parent, child) ids.
    pub fn rollover(&self, arn: Option<&str>) -> Result<Vec<(String, String)>, StreamSimError> {
        let stream = self.inner.only_or(arn)?;
        Ok(self.inner.roll_over(&stream))
    }

    pub fn stats(&self) -> StreamStats {
        self.inner.stats()
    }

    /// The ARNs of the streams followed.
    pub fn streams(&self) -> Vec<String> {
        self.inner.streams.lock().keys().cloned().collect()
    }

    /// Stops serving and following; what it did.
    pub async fn stop(self) -> StreamStats {
        self.inner.stop.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.stats()
    }
}

impl Inner {
    fn stats(&self) -> StreamStats {
        let mut stats = self.stats.lock().clone();
        let (mut open, mut closed) = (0, 0);
        for stream in self.streams.lock().values() {
            let shards = stream.shards.lock();
            open += shards.open_count();
            closed += shards.all().len() - shards.open_count();
        }
        (stats.open_shards, stats.closed_shards) = (open, closed);
        stats
    }

    /// Rolls every open shard of `stream` over: (parent, child) ids.
    fn roll_over(&self, stream: &Followed) -> Vec<(String, String)> {
        let rolled = stream.shards.lock().rollover(Instant::now(), now_ms());
        self.count(|s| s.rollovers += rolled.len() as u64);
        tracing::info!(stream = stream.arn, shards = rolled.len(), "stream proxy: the shards rolled over");
        rolled
    }

    fn count(&self, change: impl FnOnce(&mut StreamStats)) {
        change(&mut self.stats.lock());
    }

    fn only_or(&self, arn: Option<&str>) -> Result<Arc<Followed>, StreamSimError> {
        let streams = self.streams.lock();
        match arn {
            Some(arn) => streams.get(arn).cloned().ok_or_else(|| StreamSimError::NoStream(arn.to_string())),
            None if streams.len() == 1 => Ok(streams.values().next().cloned().expect("one stream")),
            None => Err(StreamSimError::NoStream(format!("{} streams followed: name one", streams.len()))),
        }
    }

    /// The stream of this ARN, followed from now on if it was not yet and
    /// the engine has it.
    async fn stream(self: &Arc<Self>, arn: &str) -> Result<Arc<Followed>, StreamError> {
        if let Some(stream) = self.streams.lock().get(arn) {
            return Ok(stream.clone());
        }
        let not_found =
            || StreamError::ResourceNotFound(format!("Requested resource not found: Stream: {arn} not found"));
        let described = self.upstream.describe_stream().stream_arn(arn).limit(1).send().await;
        let Some(description) = described.ok().and_then(|out| out.stream_description) else {
            return Err(not_found());
        };
        let key_schema: Vec<(String, String)> = description
            .key_schema()
            .iter()
            .map(|k| (k.attribute_name().to_string(), k.key_type().as_str().to_string()))
            .collect();
        let hash_key = description
            .key_schema()
            .iter()
            .find(|k| *k.key_type() == KeyType::Hash)
            .map(|k| k.attribute_name().to_string());
        let salt = xxhash_rust::xxh3::xxh3_64(arn.as_bytes());
        let followed = Arc::new(Followed {
            arn: arn.to_string(),
            table: description.table_name().unwrap_or_default().to_string(),
            label: description.stream_label().unwrap_or_default().to_string(),
            view_type: description.stream_view_type().map_or("NEW_AND_OLD_IMAGES", |v| v.as_str()).to_string(),
            key_schema,
            created_secs: description.creation_request_date_time().map_or(0.0, |t| t.as_secs_f64()),
            shards: Mutex::new(Shards::new(self.options.shards, salt, hash_key, now_ms())),
        });
        let mut streams = self.streams.lock();
        if let Some(raced) = streams.get(arn) {
            return Ok(raced.clone());
        }
        streams.insert(arn.to_string(), followed.clone());
        self.tasks.spawn(follow(self.clone(), followed.clone()));
        tracing::info!(stream = arn, shards = self.options.shards, "stream proxy: following the engine's stream");
        Ok(followed)
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn upstream_base(url: &str) -> Result<String, StreamSimError> {
    let error = |why: &str| StreamSimError::Upstream { url: url.to_string(), why: why.to_string() };
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| error(&e.to_string()))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(error("must be an http:// URL with a host (a local engine)"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Follows the table's stream once it has one, and its next one if the
/// table is made again.
async fn discover(inner: Arc<Inner>, table: String) {
    let mut known: Option<String> = None;
    while !inner.stop.is_cancelled() {
        let described = inner.tables.describe_table().table_name(&table).send().await;
        let arn = described.ok().and_then(|out| out.table).and_then(|t| t.latest_stream_arn);
        if let Some(arn) = arn.filter(|arn| known.as_ref() != Some(arn)) {
            match inner.stream(&arn).await {
                Ok(_) => known = Some(arn),
                Err(err) => tracing::debug!(error = %err, "stream proxy: the table's stream is not readable yet"),
            }
        }
        let pause = if known.is_some() { Duration::from_secs(2) } else { Duration::from_millis(100) };
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Calls `each` on every followed stream every `every`, until the proxy
/// stops: the scheduled splits and rollovers.
async fn on_schedule(inner: Arc<Inner>, every: Duration, each: fn(&Inner, &Followed)) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let streams: Vec<Arc<Followed>> = inner.streams.lock().values().cloned().collect();
        for stream in streams {
            each(&inner, &stream);
        }
    }
}

/// A scheduled split of one of `stream`'s open shards, while it has fewer
/// than `MAX_OPEN_SHARDS`.
fn split_one(inner: &Inner, stream: &Followed) {
    let mut shards = stream.shards.lock();
    if shards.open_count() >= MAX_OPEN_SHARDS {
        return;
    }
    match shards.split(None, Instant::now(), now_ms()) {
        Ok((left, right)) => {
            inner.count(|s| s.splits += 1);
            tracing::info!(stream = stream.arn, left, right, "stream proxy: a shard split on schedule");
        }
        Err(err) => tracing::warn!(error = %err, "stream proxy: no shard could split"),
    }
}

/// The follower's place in one of the engine's shards.
#[derive(Default)]
struct UpstreamShard {
    parent: Option<String>,
    iterator: Option<String>,
    /// The last record taken from it.
    seq: Option<String>,
    done: bool,
}

/// Reads the engine's stream from its start, every shard parents first,
/// putting each record into the simulated shards; trims them as it goes.
async fn follow(inner: Arc<Inner>, stream: Arc<Followed>) {
    let mut upstream: BTreeMap<String, UpstreamShard> = BTreeMap::new();
    let mut listed: Option<Instant> = None;
    loop {
        if listed.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) || upstream.values().all(|s| s.done) {
            match list_upstream(&inner, &stream.arn).await {
                Ok(shards) => {
                    for (id, parent) in shards {
                        upstream.entry(id).or_insert_with(|| UpstreamShard { parent, ..Default::default() });
                    }
                    listed = Some(Instant::now());
                }
                Err(err) => {
                    tracing::warn!(error = %err, stream = stream.arn, "stream proxy: cannot list the engine's shards")
                }
            }
        }
        let readable: Vec<String> = upstream
            .iter()
            .filter(|(_, s)| !s.done)
            .filter(|(_, s)| s.parent.as_ref().is_none_or(|p| upstream.get(p).is_none_or(|p| p.done)))
            .map(|(id, _)| id.clone())
            .collect();
        let mut got = 0;
        for id in readable {
            let shard = upstream.get_mut(&id).expect("listed");
            match read_upstream(&inner, &stream, &id, shard).await {
                Ok(n) => got += n,
                Err(err) => tracing::warn!(error = %err, shard = id, "stream proxy: cannot read the engine's stream"),
            }
        }
        stream.shards.lock().trim(Instant::now(), inner.options.limits.retention);
        let pause = if got > 0 { Duration::from_millis(5) } else { inner.options.poll };
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

async fn list_upstream(inner: &Inner, arn: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let (mut shards, mut start) = (Vec::new(), None::<String>);
    loop {
        let out = inner
            .upstream
            .describe_stream()
            .stream_arn(arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(|e| crate::server::store::error::describe(&e))?;
        let Some(description) = out.stream_description else { break };
        start = description.last_evaluated_shard_id.clone();
        shards.extend(
            description.shards.unwrap_or_default().into_iter().filter_map(|s| Some((s.shard_id?, s.parent_shard_id))),
        );
        if start.is_none() {
            break;
        }
    }
    Ok(shards)
}

/// Takes what one of the engine's shards has new; the records taken.
async fn read_upstream(inner: &Inner, stream: &Followed, id: &str, shard: &mut UpstreamShard) -> Result<usize, String> {
    let mut taken = 0;
    loop {
        let iterator = match shard.iterator.take() {
            Some(iterator) => iterator,
            None => {
                let request = inner.upstream.get_shard_iterator().stream_arn(&stream.arn).shard_id(id);
                let request = match &shard.seq {
                    Some(seq) => {
                        request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(seq)
                    }
                    None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
                };
                match request.send().await {
                    Ok(out) => out.shard_iterator.ok_or("GetShardIterator gave no iterator")?,
                    Err(err) if err.as_service_error().and_then(|e| e.code()) == Some("TrimmedDataAccessException") => {
                        tracing::error!(
                            shard = id,
                            "stream proxy: the engine trimmed records before they were followed"
                        );
                        shard.seq = None;
                        continue;
                    }
                    Err(err) => return Err(crate::server::store::error::describe(&err)),
                }
            }
        };
        let out = match inner.upstream.get_records().shard_iterator(iterator).limit(1000).send().await {
            Ok(out) => out,
            Err(err) => match err.as_service_error().and_then(|e| e.code()) {
                // Renewed from the last record taken.
                Some("ExpiredIteratorException") => continue,
                Some("TrimmedDataAccessException") => {
                    shard.seq = None;
                    continue;
                }
                _ => return Err(crate::server::store::error::describe(&err)),
            },
        };
        let records = out.records.unwrap_or_default();
        let n = records.len();
        if n > 0 {
            let now = Instant::now();
            shard.seq = records.last().and_then(|r| r.dynamodb()).and_then(|d| d.sequence_number()).map(str::to_string);
            let mut shards = stream.shards.lock();
            for record in records {
                shards.ingest(record, now);
            }
            drop(shards);
            inner.count(|s| s.ingested += n as u64);
            taken += n;
        }
        match out.next_shard_iterator {
            None => {
                shard.done = true;
                return Ok(taken);
            }
            Some(next) if n == 0 => {
                shard.iterator = Some(next);
                return Ok(taken);
            }
            Some(next) => shard.iterator = Some(next),
        }
    }
}

/// The command: serves until `shutdown`, then prints what it did.
pub async fn run(
    options: StreamOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), StreamSimError> {
    let sim = StreamSim::start(options.clone()).await?;
    // Scripts read this line to find the port when --listen has port 0.
    println!(
        "stream proxy listening on {} (upstream {}, {} shards a stream, following {})",
        sim.endpoint(),
        options.upstream,
        options.shards,
        options.table.as_deref().unwrap_or("streams as they are asked for")
    );
    shutdown.await;
    println!("{}", sim.stop().await);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_must_be_a_local_http_endpoint() {
        assert_eq!(upstream_base("http://127.0.0.1:8000/").unwrap(), "http://127.0.0.1:8000");
        assert!(upstream_base("https://streams.dynamodb.us-east-1.amazonaws.com").is_err());
        assert!(upstream_base("127.0.0.1:8000").is_err());
    }
}

//! The traffic simulator: orders at a rate that follows a profile (steady,
//! a flash sale's ramp-hold-decay, a month-end batch), written by concurrent
//! writers, and an operations side that moves them out of PENDING after a
//! random delay, so the PENDING set rises and falls as in a real sale.

use crate::model::{Actor, Status};
use crate::server::sim::orders::random_order;
use crate::server::store::error::{NOT_NAMED, StoreError, Throttle, Unavailable};
use crate::server::store::{Store, Transition, backoff};
use aws_sdk_dynamodb::types::ConsumedCapacity;
use backon::Retryable;
use chrono::Utc;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Attempts per write before it counts as an error.
const MAX_ATTEMPTS: u32 = 10;
/// BatchWriteItem takes at most 25 items.
const BATCH: usize = 25;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// A steady --rate.
    Baseline,
    /// From --rate up to --peak over --ramp seconds, held for --hold, back down over --decay.
    FlashSale,
    /// Three times --rate for the whole --duration.
    MonthEnd,
    /// As fast as the writers go: measures the ceiling.
    Max,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WriteMode {
    /// One conditional transaction per order with its audit record: this
    /// console's own write path (the day's shard count recorded first).
    Realistic,
    /// One conditional PutItem per order, as the order service writes: no
    /// audit, the day's shard count by the rule, recording none.
    Service,
    /// BatchWriteItem, 25 orders a request: bulk loading.
    Bulk,
}

#[derive(Clone, Debug, clap::Args)]
pub struct LoadgenArgs {
    /// The traffic's shape over the run
    #[arg(long, value_enum, default_value_t = Profile::Baseline)]
    pub profile: Profile,
    /// Orders per second at baseline
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Orders per second at a flash sale's peak [default: 10 × --rate]
    #[arg(long)]
    pub peak: Option<f64>,
    /// Seconds the run lasts
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Flash sale: seconds from baseline to peak, at peak, and back
    #[arg(long, default_value_t = 10)]
    pub ramp: u64,
    /// Flash sale: seconds held at the peak, after the ramp up
    #[arg(long, default_value_t = 20)]
    pub hold: u64,
    /// Flash sale: seconds from the peak back down to --rate, after the hold
    #[arg(long, default_value_t = 20)]
    pub decay: u64,
    /// Stop after this many orders
    #[arg(long)]
    pub orders: Option<u64>,
    /// Concurrent writers
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub writers: u32,
    /// How each order is written: as this console writes it, as the order
    /// service does, or in bulk
    #[arg(long, value_enum, default_value_t = WriteMode::Realistic)]
    pub mode: WriteMode,
    /// Distinct customers (a few order often, most rarely)
    #[arg(long, default_value_t = 10_000)]
    pub customers: u32,
    /// Mean seconds an order stays PENDING before operations confirm or cancel it (0: never)
    #[arg(long, default_value_t = 20.0)]
    pub close_after: f64,
    /// Random seed of the generated orders and customers: the same seed
    /// writes the same orders (their times aside)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress bar (for logs and benchmarks)
    #[arg(long)]
    pub quiet: bool,
}

impl LoadgenArgs {
    /// Orders per second `t` seconds into the run (0 for "no limit").
    pub fn rate_at(&self, t: f64) -> f64 {
        let peak = self.peak.unwrap_or(self.rate * 10.0);
        let (ramp, hold, decay) = (self.ramp as f64, self.hold as f64, self.decay as f64);
        match self.profile {
            Profile::Baseline => self.rate,
            Profile::MonthEnd => self.rate * 3.0,
            Profile::Max => 0.0,
            Profile::FlashSale if t < ramp => self.rate + (peak - self.rate) * t / ramp.max(1e-9),
            Profile::FlashSale if t < ramp + hold => peak,
            Profile::FlashSale if t < ramp + hold + decay => {
                peak - (peak - self.rate) * (t - ramp - hold) / decay.max(1e-9)
            }
            Profile::FlashSale => self.rate,
        }
    }
}

#[derive(Debug, Default)]
struct Tally {
    created: AtomicU64,
    closed: AtomicU64,
    retries: AtomicU64,
    errors: AtomicU64,
    capacity: Mutex<BTreeMap<String, f64>>,
    /// Microseconds from an order's creation (when it was due) to its
    /// write succeeding: queueing behind busy writers and every retry count.
    latency: Mutex<Option<Histogram<u64>>>,
    /// Throttles that came back to loadgen after the SDK's own retries.
    surfaced: AtomicU64,
    /// Batch rounds that left items unprocessed (no error, so no attempt
    /// the store's recorder counts).
    unprocessed: AtomicU64,
}

/// Throttled attempts by the index and by the reason DynamoDB named; an
/// attempt refused for two reasons counts under each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Throttles {
    /// By index name, "table" for the table itself.
    pub by_index: BTreeMap<String, u64>,
    /// By reason, e.g. `IndexWriteKeyRangeThroughputExceeded`.
    pub by_reason: BTreeMap<String, u64>,
}

impl Throttles {
    /// `count` attempts throttled for `throttles` (none named: `not named`).
    pub fn add(&mut self, throttles: &[Throttle], count: u64) {
        if count == 0 {
            return;
        }
        let indexes: BTreeSet<String> = throttles.iter().map(Throttle::place).collect();
        let reasons: BTreeSet<String> = throttles.iter().map(|t| t.reason.clone()).collect();
        for (counts, names) in [(&mut self.by_index, indexes), (&mut self.by_reason, reasons)] {
            if names.is_empty() {
                *counts.entry(NOT_NAMED.into()).or_default() += count;
            }
            for name in names {
                *counts.entry(name).or_default() += count;
            }
        }
    }

    /// Every attempt the store's recorder counted between two of its
    /// totals (`Usage::throttle_totals`), each filed under one reason.
    pub fn between(before: &BTreeMap<(String, String), u64>, after: &BTreeMap<(String, String), u64>) -> (u64, Self) {
        let mut throttles = Throttles::default();
        let mut attempts = 0;
        for ((reason, resource), n) in after {
            let n = n - before.get(&(reason.clone(), resource.clone())).copied().unwrap_or(0);
            if n > 0 {
                attempts += n;
                throttles.add(&[Throttle { reason: reason.clone(), resource: resource.clone() }], n);
            }
        }
        (attempts, throttles)
    }
}

impl Tally {
    fn written(&self, order: &crate::model::Order) {
        self.created.fetch_add(1, Ordering::Relaxed);
        // Its due time: loadgen's own orders always carry one.
        let due = order.created_at.unwrap_or_else(Utc::now);
        let micros = (Utc::now() - due).num_microseconds().unwrap_or(i64::MAX).max(1) as u64;
        let mut latency = self.latency.lock();
        let histogram = latency.get_or_insert_with(latency_histogram);
        histogram.saturating_record(micros);
    }

    fn consumed(&self, capacity: Option<&ConsumedCapacity>) {
        let Some(capacity) = capacity else { return };
        let mut totals = self.capacity.lock();
        let table = capacity.table().and_then(|t| t.capacity_units()).or(capacity.capacity_units()).unwrap_or(0.0);
        *totals.entry("table".into()).or_default() += table;
        for (index, units) in capacity.global_secondary_indexes().into_iter().flatten() {
            *totals.entry(index.clone()).or_default() += units.capacity_units().unwrap_or(0.0);
        }
    }

    /// A throttle that reached loadgen (the SDK gave up retrying, or does
    /// not retry it: a cancelled transaction); loadgen retries it. Its
    /// attempts are counted by the store's recorder.
    fn surfaced(&self) {
        self.surfaced.fetch_add(1, Ordering::Relaxed);
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
pub struct LoadReport {
    pub created: u64,
    pub closed: u64,
    pub elapsed: Duration,
    /// Mean of the profile's rate over the run (None for `max`).
    pub target_rate: Option<f64>,
    pub achieved_rate: f64,
    pub capacity: BTreeMap<String, f64>,
    /// Every attempt refused by throttling: the store's recorder counts each
    /// one, those the SDK retried away included, plus the batch rounds that
    /// left items unprocessed.
    pub throttled: u64,
    pub throttles: Throttles,
    /// Of those, the throttles that came back to loadgen after the SDK's
    /// retries (loadgen retried them itself).
    pub throttled_surfaced: u64,
    pub retries: u64,
    pub errors: u64,
    /// Orders found in the table at the end, of those created.
    pub verified: u64,
    /// From an order being due to its write succeeding (one-by-one writes).
    pub write_latency: Option<Percentiles>,
    /// When each order's creation was acknowledged, earliest first: what a
    /// change's way to a dashboard is timed from.
    pub acked: Vec<Instant>,
}

/// Microseconds from 1 µs to an hour, three significant figures; longer
/// saturates at an hour.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds and precision are valid")
}

/// A latency distribution's median, 99th percentile and worst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Percentiles {
    pub fn of(histogram: &Histogram<u64>) -> Self {
        let micros = Duration::from_micros;
        Percentiles {
            p50: micros(histogram.value_at_quantile(0.50)),
            p99: micros(histogram.value_at_quantile(0.99)),
            max: micros(histogram.max()),
        }
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(f, "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms", ms(self.p50), ms(self.p99), ms(self.max))
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "orders created   {}", self.created)?;
        writeln!(f, "moved out of PENDING {}", self.closed)?;
        writeln!(f, "elapsed          {:.1} s", self.elapsed.as_secs_f64())?;
        match self.target_rate {
            Some(target) => {
                writeln!(f, "rate             {:.0}/s achieved of {target:.0}/s target", self.achieved_rate)?
            }
            None => writeln!(f, "rate             {:.0}/s (as fast as possible)", self.achieved_rate)?,
        }
        for (name, units) in &self.capacity {
            writeln!(f, "capacity         {units:.1} WCU on {name}")?;
        }
        writeln!(
            f,
            "throttles        {} attempts ({} reached loadgen after the SDK's retries)",
            self.throttled, self.throttled_surfaced
        )?;
        if self.throttled > 0 {
            writeln!(f, "  by index       {:?}", self.throttles.by_index)?;
            writeln!(f, "  by reason      {:?}", self.throttles.by_reason)?;
        }
        if let Some(latency) = &self.write_latency {
            writeln!(f, "write latency    {latency}")?;
        }
        writeln!(f, "retries          {}", self.retries)?;
        writeln!(f, "errors           {}", self.errors)?;
        write!(f, "verified         {} of {} created orders are in the table", self.verified, self.created)
    }
}

/// Who loadgen's writes are recorded as, in the audit trail.
fn actor() -> Actor {
    Actor::cli("loadgen")
}

/// Runs the load and checks, at the end, that every order it created is stored.
pub async fn run(store: Arc<Store>, args: &LoadgenArgs) -> Result<LoadReport, StoreError> {
    let tally = Arc::new(Tally::default());
    // Throttled attempts are read from the store's recorder, which sees
    // every attempt, the SDK's retries included: counted here, a throttle
    // the SDK retried away would never be seen.
    let throttles_before = store.usage().throttle_totals();
    let (order_tx, order_rx) = mpsc::channel::<crate::model::Order>(4 * BATCH * args.writers as usize);
    let order_rx = Arc::new(tokio::sync::Mutex::new(order_rx));
    let (close_tx, close_rx) = mpsc::unbounded_channel::<(Instant, String)>();
    let created_ids = Arc::new(Mutex::new(Vec::<String>::new()));
    let acked = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let started = Instant::now();

    let progress = progress_bar(args, started, tally.clone());
    let closer = tokio::spawn(close_orders(store.clone(), close_rx, tally.clone(), args.mode));
    let writers: Vec<_> = (0..args.writers)
        .map(|_| {
            let (store, rx, tally, ids, acks, close_tx) =
                (store.clone(), order_rx.clone(), tally.clone(), created_ids.clone(), acked.clone(), close_tx.clone());
            let (mode, close_after, seed) = (args.mode, args.close_after, args.seed);
            tokio::spawn(async move {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ rand::random::<u64>());
                let mut after_write = |id: &str| {
                    ids.lock().push(id.to_string());
                    acks.lock().push(Instant::now());
                    if close_after > 0.0 {
                        let delay = Duration::from_secs_f64(-close_after * (1.0 - rng.random::<f64>()).ln());
                        let _ = close_tx.send((Instant::now() + delay, id.to_string()));
                    }
                };
                match mode {
                    WriteMode::Realistic | WriteMode::Service => {
                        write_one_by_one(&store, &rx, &tally, &mut after_write, mode).await
                    }
                    WriteMode::Bulk => write_in_batches(&store, &rx, &tally, &mut after_write).await,
                }
            })
        })
        .collect();
    drop(close_tx);
    generate(args, order_tx, started).await;
    for writer in writers {
        let _ = writer.await;
    }
    let elapsed = started.elapsed();
    closer.abort();
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let ids = std::mem::take(&mut *created_ids.lock());
    let verified = store.count_orders(&ids).await?;
    let (attempts, mut throttles) = Throttles::between(&throttles_before, &store.usage().throttle_totals());
    let unprocessed = tally.unprocessed.load(Ordering::Relaxed);
    throttles.add(&[], unprocessed);
    let created = tally.created.load(Ordering::Relaxed);
    let target_rate = (args.profile != Profile::Max).then(|| {
        // Over the profile's span, not the drain after it.
        let secs = elapsed.min(Duration::from_secs(args.duration)).as_secs_f64().max(1e-9);
        let steps = 1000;
        (0..steps).map(|i| args.rate_at(secs * f64::from(i) / f64::from(steps))).sum::<f64>() / f64::from(steps)
    });
    Ok(LoadReport {
        created,
        closed: tally.closed.load(Ordering::Relaxed),
        elapsed,
        target_rate,
        achieved_rate: created as f64 / elapsed.as_secs_f64().max(1e-9),
        capacity: tally.capacity.lock().clone(),
        throttled: attempts + unprocessed,
        throttles,
        throttled_surfaced: tally.surfaced.load(Ordering::Relaxed),
        retries: tally.retries.load(Ordering::Relaxed),
        errors: tally.errors.load(Ordering::Relaxed),
        verified,
        write_latency: tally.latency.lock().as_ref().map(Percentiles::of),
        acked: {
            let mut acked = std::mem::take(&mut *acked.lock());
            acked.sort();
            acked
        },
    })
}

/// Emits orders on the profile's schedule until the duration or the order
/// count is reached; a full channel (writers behind) slows it down.
async fn generate(args: &LoadgenArgs, tx: mpsc::Sender<crate::model::Order>, started: Instant) {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let run_id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
    let limit = args.orders.unwrap_or(u64::MAX);
    let duration = Duration::from_secs(args.duration);
    let (mut emitted, mut due) = (0u64, 0.0f64);
    let mut last = Instant::now();
    while emitted < limit && started.elapsed() < duration {
        let now = Instant::now();
        let rate = args.rate_at(started.elapsed().as_secs_f64());
        due += rate * (now - last).as_secs_f64();
        last = now;
        let allowed = if rate <= 0.0 { limit } else { due.floor() as u64 };
        while emitted < allowed.min(limit) {
            let customer = (f64::from(args.customers) * rng.random::<f64>().powi(3)) as u32;
            let order =
                random_order(&mut rng, format!("lg{run_id}-{emitted:08}"), format!("cust-{customer:05}"), Utc::now());
            if tx.send(order).await.is_err() {
                return;
            }
            emitted += 1;
            if rate <= 0.0 && started.elapsed() >= duration {
                return;
            }
        }
        if rate > 0.0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn write_one_by_one(
    store: &Store,
    rx: &tokio::sync::Mutex<mpsc::Receiver<crate::model::Order>>,
    tally: &Tally,
    after_write: &mut impl FnMut(&str),
    mode: WriteMode,
) {
    loop {
        let Some(order) = rx.lock().await.recv().await else { return };
        let by = actor();
        let write = || async {
            match mode {
                WriteMode::Service => store.create_order_as_service(&order).await,
                _ => store.create_order(&order, &by).await,
            }
        };
        let written = write
            .retry(backoff(MAX_ATTEMPTS - 1))
            .sleep(tokio::time::sleep)
            .when(|err| matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }))
            .notify(|_, _| tally.surfaced())
            .await;
        match written {
            Ok(capacity) => {
                for capacity in &capacity {
                    tally.consumed(Some(capacity));
                }
                tally.written(&order);
                after_write(&order.order_id);
            }
            Err(err) => {
                tracing::warn!(order = order.order_id, error = %err, "write failed");
                tally.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

async fn write_in_batches(
    store: &Store,
    rx: &tokio::sync::Mutex<mpsc::Receiver<crate::model::Order>>,
    tally: &Tally,
    after_write: &mut impl FnMut(&str),
) {
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(order) => batch.push(order),
                    Err(_) => break,
                }
            }
        }
        match store.put_orders(&batch).await {
            Ok(put) => {
                for capacity in &put.capacity {
                    tally.consumed(Some(capacity));
                }
                // Unprocessed items come back without an error or a reason.
                tally.unprocessed.fetch_add(put.retries, Ordering::Relaxed);
                tally.retries.fetch_add(put.retries, Ordering::Relaxed);
                tally.created.fetch_add(put.written as u64, Ordering::Relaxed);
                for order in &batch {
                    after_write(&order.order_id);
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "batch write failed");
                tally.errors.fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// The operations side: confirms (nine in ten) or cancels each order when
/// its time comes, as the orders were written (`WriteMode::Service`: the
/// order service's plain update; else this console's transaction).
async fn close_orders(
    store: Arc<Store>,
    mut rx: mpsc::UnboundedReceiver<(Instant, String)>,
    tally: Arc<Tally>,
    mode: WriteMode,
) {
    let mut due: BinaryHeap<Reverse<(Instant, String)>> = BinaryHeap::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(8));
    loop {
        tokio::select! {
            next = rx.recv() => match next {
                Some(entry) => due.push(Reverse(entry)),
                None if due.is_empty() => return,
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        while due.peek().is_some_and(|Reverse((at, _))| *at <= Instant::now()) {
            let Reverse((_, id)) = due.pop().expect("peeked");
            let (store, tally) = (store.clone(), tally.clone());
            let permit = gate.clone().acquire_owned().await.expect("semaphore open");
            tokio::spawn(async move {
                let to = if rand::random::<f64>() < 0.9 { Status::Confirmed } else { Status::Cancelled };
                let actor = actor();
                let change = Transition {
                    order_id: &id,
                    from: Status::Pending,
                    to,
                    at: Utc::now(),
                    actor: &actor,
                    reason: Some("loadgen: the operations side"),
                    bulk_id: None,
                };
                let closed = match mode {
                    WriteMode::Service => store.change_status_as_service(&change).await.is_ok(),
                    _ => store.change_status(&change).await.is_ok(),
                };
                if closed {
                    tally.closed.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
        }
    }
}

fn progress_bar(args: &LoadgenArgs, started: Instant, tally: Arc<Tally>) -> Option<indicatif::ProgressBar> {
    if args.quiet {
        return None;
    }
    let bar = match args.orders {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new(args.duration),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}")
            .expect("a valid template"),
    );
    let counts_orders = args.orders.is_some();
    let ticker = bar.clone();
    tokio::spawn(async move {
        while !ticker.is_finished() {
            let created = tally.created.load(Ordering::Relaxed);
            let closed = tally.closed.load(Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            ticker.set_position(if counts_orders { created } else { secs as u64 });
            ticker.set_message(format!(
                "{:.0} orders/s · PENDING {} · errors {} · retries {}",
                created as f64 / secs,
                created.saturating_sub(closed),
                tally.errors.load(Ordering::Relaxed),
                tally.retries.load(Ordering::Relaxed)
            ));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn throttle(reason: &str, resource: &str) -> Throttle {
        Throttle { reason: reason.into(), resource: resource.into() }
    }

    #[test]
    fn throttles_are_tallied_by_the_index_and_the_reason_dynamodb_names() {
        let table = "arn:aws:dynamodb:us-east-1:123456789012:table/northwind-orders";
        let gsi2 = format!("{table}/index/GSI2");
        let mut throttles = Throttles::default();
        throttles.add(&[throttle("IndexWriteKeyRangeThroughputExceeded", &gsi2)], 1);
        throttles.add(
            &[
                throttle("IndexWriteKeyRangeThroughputExceeded", &gsi2),
                throttle("TableWriteKeyRangeThroughputExceeded", table),
            ],
            1,
        );
        throttles.add(&[], 1);
        let counts = |pairs: &[(&str, u64)]| pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(throttles.by_index, counts(&[("GSI2", 2), ("table", 1), (NOT_NAMED, 1)]));
        assert_eq!(
            throttles.by_reason,
            counts(&[
                ("IndexWriteKeyRangeThroughputExceeded", 2),
                ("TableWriteKeyRangeThroughputExceeded", 1),
                (NOT_NAMED, 1)
            ])
        );
    }

    #[test]
    fn a_runs_throttles_are_the_recorders_difference() {
        let key = |reason: &str, resource: &str| (reason.to_string(), resource.to_string());
        let before = BTreeMap::from([(key("ThrottlingException", "table/orders"), 4)]);
        let after = BTreeMap::from([
            (key("ThrottlingException", "table/orders"), 6),
            (key("IndexWriteKeyRangeThroughputExceeded", "table/orders/index/GSI2"), 3),
            (key(NOT_NAMED, "table/orders"), 1),
        ]);
        let (attempts, throttles) = Throttles::between(&before, &after);
        assert_eq!(attempts, 6);
        assert_eq!(throttles.by_index.get("GSI2"), Some(&3));
        assert_eq!(throttles.by_index.get("table"), Some(&2));
        assert_eq!(throttles.by_index.get(NOT_NAMED), Some(&1), "a throttle without reasons names no place");
        assert_eq!(throttles.by_reason.get("ThrottlingException"), Some(&2));
        let mut none = Throttles::default();
        none.add(&[], 0);
        assert_eq!(none, Throttles::default(), "no attempts, no entry");
    }

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: LoadgenArgs,
    }

    fn args(extra: &[&str]) -> LoadgenArgs {
        let mut argv = vec!["loadgen"];
        argv.extend_from_slice(extra);
        Wrapper::parse_from(argv).args
    }

    #[test]
    fn a_flash_sale_ramps_holds_and_decays() {
        let sale = args(&[
            "--profile",
            "flash-sale",
            "--rate",
            "10",
            "--peak",
            "100",
            "--ramp",
            "10",
            "--hold",
            "20",
            "--decay",
            "10",
        ]);
        assert_eq!(sale.rate_at(0.0), 10.0);
        assert_eq!(sale.rate_at(5.0), 55.0);
        assert_eq!(sale.rate_at(15.0), 100.0);
        assert_eq!(sale.rate_at(35.0), 55.0);
        assert_eq!(sale.rate_at(60.0), 10.0);
        assert_eq!(args(&["--profile", "month-end", "--rate", "10"]).rate_at(3.0), 30.0);
        assert_eq!(args(&["--rate", "7"]).rate_at(100.0), 7.0);
    }
}

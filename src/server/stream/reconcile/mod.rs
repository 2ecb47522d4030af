//! Reconciliation: checks the stream consumer's state counters against the
//! tables and undoes any damage with a delta, never an overwrite.
//!
//! A recount is anchored at stream positions: one TransactGetItems reads a
//! counter item together with every shard's checkpoint, which the consumer
//! writes in the same transactions, so the counter is exactly the effect of
//! the records up to those positions, plus the damage. The index (or a Scan)
//! is then read, and the stream after the positions: an order no record
//! after them changed has, in the consumer's applied view, the state the
//! read found; an order one did change has the state that record's old
//! image shows. The counter minus that applied view is the damage, and an
//! `ADD` of its opposite is right whatever the consumer applies meanwhile.
//! docs/architecture.md ("How does reconciliation keep the counters
//! exact?") gives the whole argument.

mod agreement;
mod anchor;
mod drift;
mod full;
pub mod refusal;

pub use agreement::{CONFIRM_WITHIN, Finding, agrees};
pub use anchor::{Anchor, Position, StreamRead, at_shard_end, compare_seq};
pub use drift::{Touched, drift, expected};
pub use full::{DayOutcome, FullOptions, FullOutcome, scan_rate};

use crate::model::ReconcileRefusal;
use crate::server::store::error::StoreError;
use crate::server::store::keys::{self, attr};
use crate::server::store::{CounterItem, CounterRepair, FindingWrite, Store, Verdict};
use crate::server::stream::counters::{Key, pending_counters};
use chrono::{DateTime, NaiveDate, Utc};
use futures::future::try_join_all;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A periodic run refused for throughput or timed out is run again this
/// many times, the pause growing by `THROTTLED_PAUSE` each time (45 s in
/// all, inside a minute's period), before it counts as failed: a stream
/// shard's five GetRecords a second are shared with the consumers (and the
/// Lambda mapping, where both forms run), a stream's ten DescribeStream
/// calls a second with every reader, a throttled metrics table refuses its
/// writes, and a busy store answers late; any of them failed the whole run,
/// until the next period.
const THROTTLED_RUNS: u32 = 5;
const THROTTLED_PAUSE: Duration = Duration::from_secs(3);

fn is_transient(outcome: &Result<PendingOutcome, ReconcileError>) -> bool {
    use crate::server::store::error::Unavailable;
    matches!(
        outcome,
        Err(ReconcileError::Store(StoreError::Unavailable {
            kind: Unavailable::Throttled | Unavailable::TimedOut,
            ..
        }))
    )
}

/// Increments one repair write makes to one item (DynamoDB limits an update
/// expression to 4 KB).
const MAX_REPAIR_ATTRIBUTES: usize = 100;

#[derive(Clone, Debug)]
pub struct ReconcileOptions {
    /// Who reconciles: recorded with the verdict and on the reader lease.
    pub owner: String,
    /// How long after a write its stream record and its index entry are
    /// assumed readable (DynamoDB documents both as near-real-time, with no
    /// bound).
    pub grace: Duration,
    /// The stream-reader lease: how long it lasts unless renewed.
    pub lease: Duration,
    /// Runs started over when another reconciliation repairs first.
    pub tries: u32,
    /// How old a record still unapplied at the anchor may be before the
    /// consumer counts as far behind and reconciliation refuses
    /// (`refusal::far_behind`).
    pub far_behind: Duration,
    /// How long after a run's finding the next run may agree with it and
    /// repair (`Repair::Confirmed`).
    pub confirm_within: Duration,
    /// Whether a closed shard's checkpoint found at its end is marked
    /// finished in the store (so that it expires). Off for the web tier
    /// alone (`serve --no-consumer`), whose role writes no checkpoint:
    /// there it is remembered as finished in memory only, which keeps its
    /// passes as cheap; the consumer's roles and `reconcile` mark it.
    pub mark_finished: bool,
}

/// What a run may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// A dry run: judges, writes nothing.
    No,
    /// Repairs what it finds at once (`reconcile` without `--dry-run`: a
    /// person's explicit call).
    Now,
    /// Records what it finds and changes nothing; repairs a difference only
    /// when it agrees with the previous run's recorded finding
    /// (`agreement::agrees`): `serve`'s periodic run.
    Confirmed,
}

impl ReconcileOptions {
    pub fn new(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            grace: Duration::from_secs(2),
            lease: Duration::from_secs(60),
            tries: 5,
            far_behind: refusal::FAR_BEHIND,
            confirm_within: CONFIRM_WITHIN,
            mark_finished: true,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the orders table has no stream: reconciliation is anchored on it")]
    NoStream,
    #[error(
        "cannot verify: the stream no longer holds the records after the consumer's position in shard {0} \
         (they are kept 24 hours)"
    )]
    Trimmed(String),
    #[error(
        "cannot verify: {items} counter item(s) with their sub-items do not fit one TransactGetItems (at most \
         100 items) ({shards} unfinished stream shards)"
    )]
    TooManyShards { shards: usize, items: usize },
    #[error(
        "cannot verify now: {unfinished} stream shards are unfinished, more than one TransactGetItems reads \
         with a counter, and the checkpoints of the {beside} read beside it moved during each of {tries} \
         snapshots; try again when the stream is quieter"
    )]
    Unsteady { unfinished: usize, beside: usize, tries: u32 },
    #[error("another reconciliation held the stream-reader lease for {0:?}; try again later")]
    ReaderBusy(Duration),
    #[error("the stream-reader lease ran out and was taken over mid-read")]
    LeaseLost,
    #[error("another reconciliation repaired the counters of {0} first, {1} times in a row; try again")]
    Raced(NaiveDate, u32),
    #[error("the stream's shards kept changing while the snapshot was taken ({0} tries)")]
    Unsettled(u32),
    #[error("{0}")]
    Usage(String),
    /// The anchor cannot be exact here: nothing judged, nothing repaired.
    #[error("reconciliation refused: {0}")]
    Refused(ReconcileRefusal),
}

pub struct Reconciler {
    store: Arc<Store>,
    options: ReconcileOptions,
    /// Listed shards seen finished by an earlier anchor: their checkpoints
    /// never move again, so `serve`'s periodic runs do not read them again.
    finished: parking_lot::Mutex<std::collections::HashSet<String>>,
}

/// What a reconciliation of a day's PENDING counters found and did.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingOutcome {
    pub day: NaiveDate,
    /// `pending` at the snapshot, and what the applied view says it should be.
    pub counter: i64,
    pub expected: i64,
    /// `counter - expected`.
    pub drift: i64,
    /// Every attribute that was off (`pending`, `shard<k>`), by how much.
    pub off: BTreeMap<String, i64>,
    pub index_items: u64,
    /// Orders the stream changed after the snapshot, and records read.
    pub touched: usize,
    pub records: u64,
    pub repaired: bool,
    /// A difference recorded, not repaired: the next run repairs it if it
    /// finds the same (`Repair::Confirmed`).
    pub awaiting: bool,
    /// Runs it took (another reconciliation repairing first starts one over).
    pub tries: u32,
}

/// A repair to make: the drift undone, with the snapshot's `repairs` count.
struct Plan {
    key: Key,
    seen: Option<i64>,
    adds: Vec<(String, i64)>,
    verdict: Option<Verdict>,
}

impl Plan {
    fn undo(key: Key, counter: &CounterItem, off: &BTreeMap<String, i64>, verdict: Verdict) -> Self {
        let adds = off.iter().map(|(attribute, d)| (attribute.clone(), -d)).collect();
        Plan { key, seen: counter.repairs, adds, verdict: Some(verdict) }
    }
}

impl Reconciler {
    pub fn new(store: Arc<Store>, options: ReconcileOptions) -> Self {
        Self { store, options, finished: Default::default() }
    }

    /// `serve`'s periodic reconciliation: every `every` (the first run one
    /// `every` after the start), today's PENDING counters checked and
    /// repaired once two runs agree (`Repair::Confirmed`), until `stop`; each run's result handed to `seen` (serve
    /// logs it; the day rehearsal, `sim::day_rehearsal`, records it) with
    /// the runs it took: one refused for throughput or timed out is run
    /// again after a pause (`THROTTLED_RUNS`).
    pub async fn every(
        &self,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
        mut seen: impl FnMut(&Result<PendingOutcome, ReconcileError>, u32),
    ) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
            let (mut outcome, mut runs) = (self.pending_confirmed(Utc::now().date_naive()).await, 1);
            for again in 1..=THROTTLED_RUNS {
                if !is_transient(&outcome) {
                    break;
                }
                tracing::info!(
                    again,
                    "reconciliation refused for throughput or timed out; running it again after a pause"
                );
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(THROTTLED_PAUSE * again) => {}
                }
                outcome = self.pending_confirmed(Utc::now().date_naive()).await;
                runs += 1;
            }
            seen(&outcome, runs);
        }
    }

    /// Checks the PENDING counters of `day` and, with `repair`, undoes the
    /// drift; started over when another reconciliation repairs first.
    pub async fn pending(&self, day: NaiveDate, repair: bool) -> Result<PendingOutcome, ReconcileError> {
        self.pending_with(day, if repair { Repair::Now } else { Repair::No }).await
    }

    /// Checks the PENDING counters of `day`; repairs a difference only when
    /// the previous run found the same at a comparable anchor, else records
    /// it for the next run (`Repair::Confirmed`).
    pub async fn pending_confirmed(&self, day: NaiveDate) -> Result<PendingOutcome, ReconcileError> {
        self.pending_with(day, Repair::Confirmed).await
    }

    pub async fn pending_with(&self, day: NaiveDate, repair: Repair) -> Result<PendingOutcome, ReconcileError> {
        let result = self.pending_tries(day, repair).await;
        if repair != Repair::No
            && let Err(ReconcileError::Refused(why)) = &result
        {
            // Shown where the verdicts are (`verification.pendingRefused`);
            // a dry run writes nothing.
            self.store.record_refusal(&keys::metric_pending_key(day), why, Utc::now()).await?;
        }
        result
    }

    async fn pending_tries(&self, day: NaiveDate, repair: Repair) -> Result<PendingOutcome, ReconcileError> {
        for attempt in 1..=self.options.tries {
            let mut run = self.begin_pending(day).await?;
            run.read_index().await?;
            run.read_stream().await?;
            match run.finish_with(repair).await {
                Err(ReconcileError::Store(StoreError::Conflict(why))) => {
                    tracing::info!(%day, why, "reconciliation raced another; starting over");
                }
                Ok(outcome) => return Ok(PendingOutcome { tries: attempt, ..outcome }),
                Err(err) => return Err(err),
            }
        }
        Err(ReconcileError::Raced(day, self.options.tries))
    }

    /// The first step, the snapshot; the others are `PendingRun`'s. Public
    /// so that tests can put a consumer's moves between the steps.
    pub async fn begin_pending(&self, day: NaiveDate) -> Result<PendingRun<'_>, ReconcileError> {
        self.refuse_marker_mode().await?;
        let anchor = self.anchor(&[keys::metric_pending_key(day)], 1).await?;
        Ok(PendingRun { reconciler: self, day, anchor, index: Vec::new(), read_end: None, stream: None })
    }

    /// Applies plans in rounds of at most `MAX_REPAIR_ATTRIBUTES` increments
    /// per item, each round conditioned on the `repairs` count the previous
    /// rounds left. A `Conflict` in a later round leaves the earlier rounds
    /// in place: each is a correct delta by itself.
    async fn repair(&self, plans: &[Plan], finding: Option<FindingWrite>) -> Result<(), StoreError> {
        let rounds = plans.iter().map(|p| p.adds.len().div_ceil(MAX_REPAIR_ATTRIBUTES)).max().unwrap_or(0).max(1);
        for round in 0..rounds {
            let writes: Vec<CounterRepair> = plans
                .iter()
                .map(|plan| {
                    let done = plan.adds.len().div_ceil(MAX_REPAIR_ATTRIBUTES).min(round) as i64;
                    CounterRepair {
                        key: plan.key.clone(),
                        seen_repairs: if done == 0 { plan.seen } else { Some(plan.seen.unwrap_or(0) + done) },
                        adds: plan
                            .adds
                            .iter()
                            .skip(round * MAX_REPAIR_ATTRIBUTES)
                            .take(MAX_REPAIR_ATTRIBUTES)
                            .cloned()
                            .collect(),
                        verdict: plan.verdict.clone().filter(|_| round + 1 == rounds),
                    }
                })
                .collect();
            let last = round + 1 == rounds;
            self.store.repair_counters_with(&writes, finding.as_ref().filter(|_| last)).await?;
        }
        Ok(())
    }

    /// Refused where a Lambda function applied records guarded by markers
    /// within the stream's retention (`refusal::marker_mode`).
    async fn refuse_marker_mode(&self) -> Result<(), ReconcileError> {
        let (mode, seen) = futures::try_join!(self.store.consumer_mode(), self.store.consumers_with_markers())?;
        match refusal::marker_mode(&seen, mode.mode, Utc::now()) {
            Some(why) => Err(ReconcileError::Refused(why)),
            None => Ok(()),
        }
    }

    /// Refused where the read after the anchor found a record unapplied
    /// longer than `far_behind` (`refusal::far_behind`).
    fn refuse_far_behind(&self, anchor: &Anchor, read: &StreamRead) -> Result<(), ReconcileError> {
        let oldest = read.oldest_unapplied.as_ref().map(|(shard, at)| (shard.as_str(), *at));
        match refusal::far_behind(oldest, anchor.taken_at, self.options.far_behind) {
            Some(why) => Err(ReconcileError::Refused(why)),
            None => Ok(()),
        }
    }

    fn verdict(&self, drift: i64, repaired: bool) -> Verdict {
        Verdict { at: Utc::now(), drift, repaired, by: self.options.owner.clone() }
    }
}

/// A PENDING reconciliation under way: anchored, then the index, then the
/// stream, then the verdict.
pub struct PendingRun<'a> {
    reconciler: &'a Reconciler,
    day: NaiveDate,
    anchor: Anchor,
    /// Order ids in each GSI2 partition of the day.
    index: Vec<(u32, Vec<String>)>,
    read_end: Option<DateTime<Utc>>,
    stream: Option<StreamRead>,
}

impl PendingRun<'_> {
    /// Reads every GSI2 partition of the day, once the grace has passed
    /// since the snapshot: GSI2 is updated asynchronously, and every write
    /// the consumer had applied must show in it.
    pub async fn read_index(&mut self) -> Result<(), ReconcileError> {
        let store = &self.reconciler.store;
        tokio::time::sleep_until((self.anchor.at + self.reconciler.options.grace).into()).await;
        // Every readable partition, not only those below the day's count:
        // the consumer counts an order in any of them (`store::shard_count`).
        let day = self.day;
        self.index = try_join_all(
            (0..keys::MAX_SHARDS)
                .map(|shard| async move { Ok::<_, StoreError>((shard, store.pending_members(day, shard).await?)) }),
        )
        .await?;
        self.read_end = Some(Utc::now());
        Ok(())
    }

    /// Reads the stream after the snapshot's positions.
    pub async fn read_stream(&mut self) -> Result<(), ReconcileError> {
        let read_end = self.read_end.ok_or_else(|| ReconcileError::Usage("read the index first".into()))?;
        let read = self.reconciler.read_stream(&self.anchor, read_end).await?;
        self.reconciler.refuse_far_behind(&self.anchor, &read)?;
        self.stream = Some(read);
        Ok(())
    }

    /// Judges the counter and, with `repair`, undoes the drift and records
    /// the verdict; a `Conflict` when another reconciliation repaired first.
    pub async fn finish(self, repair: bool) -> Result<PendingOutcome, ReconcileError> {
        self.finish_with(if repair { Repair::Now } else { Repair::No }).await
    }

    /// Judges the counter and does what `repair` says: nothing, repair now,
    /// or record the finding and repair only one the previous run agrees
    /// with. The verdict, the repair and the finding (recorded, or removed
    /// once repaired or no longer found) go in one transaction, conditioned
    /// on the `repairs` count the snapshot saw.
    pub async fn finish_with(self, repair: Repair) -> Result<PendingOutcome, ReconcileError> {
        let stream = self.stream.as_ref().ok_or_else(|| ReconcileError::Usage("read the stream first".into()))?;
        let key = keys::metric_pending_key(self.day);
        let (taken, touched) = (&self.anchor.taken[0], &stream.touched[0]);
        let counter = &taken.counters[0];
        let read = self.index.iter().flat_map(|(shard, ids)| {
            ids.iter().map(move |id| (id.as_str(), pending_counters(self.day, *shard).to_vec()))
        });
        let expected = expected(read, touched, std::slice::from_ref(&key));
        let off = drift(&counter.values, expected.get(&key));
        let total = off.get(attr::PENDING).copied().unwrap_or(0);
        let found = Finding {
            at: Utc::now(),
            stream_arn: self.anchor.stream_arn.clone(),
            repairs: counter.repairs,
            off: off.clone(),
            anchor: Finding::anchor_of(&taken.positions),
        };
        let (repaired, awaiting) = match repair {
            Repair::No => (false, false),
            Repair::Now => (!off.is_empty(), false),
            Repair::Confirmed if off.is_empty() => (false, false),
            Repair::Confirmed => {
                let previous = self.reconciler.store.reconcile_finding(&found.stream_arn, &key).await?;
                let previous = previous.and_then(|json| serde_json::from_str::<Finding>(&json).ok());
                let agreed = previous.is_some_and(|p| agrees(&p, &found, self.reconciler.options.confirm_within));
                (agreed, !agreed)
            }
        };
        if repair != Repair::No && (counter.exists || !off.is_empty()) {
            let verdict = self.reconciler.verdict(total, repaired);
            let mut plan = Plan::undo(key.clone(), counter, &off, verdict);
            if repaired {
                // A repair is a change too: every instance's dashboards show it.
                plan.adds.push((attr::VERSION.to_string(), 1));
            } else {
                plan.adds.clear();
            }
            let json = awaiting
                .then(|| serde_json::to_string(&found))
                .transpose()
                .map_err(|e| ReconcileError::Usage(format!("a finding that does not serialize: {e}")))?;
            let finding = FindingWrite { stream_arn: found.stream_arn.clone(), counter: key.clone(), json };
            self.reconciler.repair(&[plan], Some(finding)).await?;
        }
        let pending = counter.values.get(attr::PENDING).copied().unwrap_or(0);
        Ok(PendingOutcome {
            day: self.day,
            counter: pending,
            expected: pending - total,
            drift: total,
            off,
            index_items: self.index.iter().map(|(_, ids)| ids.len() as u64).sum(),
            touched: touched.len(),
            records: stream.records,
            repaired,
            awaiting,
            tries: 1,
        })
    }
}

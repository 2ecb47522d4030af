//! The live hub: the stream consumer and the follower publish here, and
//! every open `GET /api/live` connection receives what concerns its day.
//! The hub also admits connections: a total cap and a cap per client
//! address, so a runaway script cannot hold every slot. And it keeps which
//! days are watched, and how far this instance has published each of them
//! (see `follower`), so that a change is pushed once: row by row by the
//! instance whose consumer applied it, as a `changed` by every other.
//! Rehearsals under way are pushed on a channel of their own (the Sales
//! page's `GET /api/sales/{name}/rehearsal/live`, admitted by the same caps),
//! so the dashboards' connections never see them.

use crate::model::{DayCounts, LiveCounters, LiveEvent, RehearsalEvent};
use chrono::NaiveDate;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Events buffered per slow subscriber before it is told to resync.
const BUFFER: usize = 1024;
/// Rehearsal events buffered per slow subscriber: one a second per run.
const REHEARSAL_BUFFER: usize = 64;

/// An event as every connection sends it: serialized once when published,
/// shared by all (with 1,000 dashboards open, serializing per connection
/// was most of the cost of a push).
#[derive(Debug)]
pub struct Pushed {
    /// The day it concerns (`None`: every day's connections).
    pub date: Option<NaiveDate>,
    /// The `LiveEvent` as JSON: the SSE event's data.
    pub json: String,
}

impl Pushed {
    pub fn of(event: &LiveEvent) -> Arc<Pushed> {
        // A LiveEvent is plain data: serializing it cannot fail.
        let json = serde_json::to_string(event).unwrap_or_default();
        Arc::new(Pushed { date: event.date(), json })
    }
}

/// A rehearsal's event, serialized once, with the plan it concerns.
#[derive(Debug)]
pub struct PlanPushed {
    pub plan: String,
    pub json: String,
}

impl PlanPushed {
    pub fn of(plan: &str, event: &RehearsalEvent) -> Arc<PlanPushed> {
        // A RehearsalEvent is plain data: serializing it cannot fail.
        let json = serde_json::to_string(event).unwrap_or_default();
        Arc::new(PlanPushed { plan: plan.to_string(), json })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveLimits {
    pub total: usize,
    pub per_client: usize,
}

impl Default for LiveLimits {
    fn default() -> Self {
        Self { total: 2_000, per_client: 50 }
    }
}

#[derive(Clone)]
pub struct LiveHub {
    sender: broadcast::Sender<Arc<Pushed>>,
    rehearsals: broadcast::Sender<Arc<PlanPushed>>,
    /// The plans whose rehearsal this instance is running.
    rehearsing: Arc<Mutex<HashMap<String, usize>>>,
    closing: CancellationToken,
    limits: LiveLimits,
    open: Arc<Mutex<Open>>,
    /// Open connections per day they watch.
    watched: Arc<Mutex<HashMap<NaiveDate, usize>>>,
    /// Held by the consumer across each commit and by the follower across
    /// each read of the versions, so that every raise of a version is either
    /// counted as this instance's own or read as someone else's, never both.
    versions: Arc<tokio::sync::Mutex<Versions>>,
    follow_stats: Arc<FollowStats>,
}

/// How far this instance has published each followed day: the `version`
/// last accounted for, and the raises its own consumer has committed since
/// (it pushed those itself, row by row).
#[derive(Debug, Default)]
pub struct Versions {
    days: HashMap<NaiveDate, Published>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Published {
    version: i64,
    own: i64,
}

impl Versions {
    /// Starts following `day` from the version a new connection's first
    /// counters were read at, unless it is followed already.
    pub fn follow_from(&mut self, day: NaiveDate, version: i64) {
        self.days.entry(day).or_insert(Published { version, own: 0 });
    }

    pub fn follows(&self, day: NaiveDate) -> bool {
        self.days.contains_key(&day)
    }

    /// Forgets the days nobody watches any more.
    pub fn keep(&mut self, watched: &[NaiveDate]) {
        self.days.retain(|day, _| watched.contains(day));
    }

    /// Raises this instance's consumer committed (its own: pushed already).
    pub fn committed(&mut self, raises: &[(NaiveDate, i64)]) {
        for (day, by) in raises {
            if let Some(published) = self.days.get_mut(day) {
                published.own += by;
            }
        }
    }

    /// Takes the version just read for `day`: whether it moved by more than
    /// this instance's own commits, so that someone else changed the day.
    /// Anything unexplained counts as a change: a needless re-read costs
    /// little, a missed change leaves a screen wrong.
    pub fn moved(&mut self, day: NaiveDate, version: i64) -> bool {
        let Some(published) = self.days.get_mut(&day) else { return false };
        let moved = version != published.version + published.own;
        *published = Published { version, own: 0 };
        moved
    }
}

/// What following costs: version reads made, and their read units.
#[derive(Debug, Default)]
struct FollowStats {
    reads: AtomicU64,
    /// Thousandths of a read unit (atomics hold integers).
    milli_units: AtomicU64,
}

/// One connection watching a day; dropping it stops counting it.
pub struct Watching {
    watched: Arc<Mutex<HashMap<NaiveDate, usize>>>,
    day: NaiveDate,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut watched = self.watched.lock();
        if let Some(n) = watched.get_mut(&self.day) {
            *n -= 1;
            if *n == 0 {
                watched.remove(&self.day);
            }
        }
    }
}

/// A rehearsal this instance runs; dropping it stops counting it.
pub struct Rehearsing {
    rehearsing: Arc<Mutex<HashMap<String, usize>>>,
    plan: String,
}

impl Drop for Rehearsing {
    fn drop(&mut self) {
        let mut rehearsing = self.rehearsing.lock();
        if let Some(n) = rehearsing.get_mut(&self.plan) {
            *n -= 1;
            if *n == 0 {
                rehearsing.remove(&self.plan);
            }
        }
    }
}

#[derive(Default)]
struct Open {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// Why a live connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("this server holds as many live connections as it takes; try again later")]
    Full,
    #[error("too many live connections from your address; close some tabs")]
    TooManyFromClient,
}

/// One admitted connection; dropping it frees the slot.
pub struct Admission {
    open: Arc<Mutex<Open>>,
    client: IpAddr,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        open.total -= 1;
        if let Some(n) = open.per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.per_client.remove(&self.client);
            }
        }
    }
}

impl Default for LiveHub {
    fn default() -> Self {
        Self::new(LiveLimits::default())
    }
}

impl LiveHub {
    pub fn new(limits: LiveLimits) -> Self {
        Self {
            sender: broadcast::channel(BUFFER).0,
            rehearsals: broadcast::channel(REHEARSAL_BUFFER).0,
            rehearsing: Arc::default(),
            closing: CancellationToken::new(),
            limits,
            open: Arc::default(),
            watched: Arc::default(),
            versions: Arc::default(),
            follow_stats: Arc::default(),
        }
    }

    /// Counts a connection as watching `day` for as long as the guard lives.
    pub fn watch(&self, day: NaiveDate) -> Watching {
        *self.watched.lock().entry(day).or_default() += 1;
        Watching { watched: self.watched.clone(), day }
    }

    /// Days some open connection watches, oldest first.
    pub fn watched_days(&self) -> Vec<NaiveDate> {
        let mut days: Vec<NaiveDate> = self.watched.lock().keys().copied().collect();
        days.sort_unstable();
        days
    }

    pub fn is_watched(&self, day: NaiveDate) -> bool {
        self.watched.lock().contains_key(&day)
    }

    /// How far this instance has published each followed day, locked: the
    /// consumer holds the lock across each commit, the follower across its reads.
    pub async fn versions(&self) -> tokio::sync::MutexGuard<'_, Versions> {
        self.versions.lock().await
    }

    /// Counts one version read and the read units it consumed.
    pub fn count_read(&self, units: Option<f64>) {
        self.follow_stats.reads.fetch_add(1, Ordering::Relaxed);
        let milli = (units.unwrap_or(0.0) * 1000.0).round() as u64;
        self.follow_stats.milli_units.fetch_add(milli, Ordering::Relaxed);
    }

    /// Version reads made since start, and the read units they consumed.
    pub fn follow_cost(&self) -> (u64, f64) {
        let stats = &self.follow_stats;
        (stats.reads.load(Ordering::Relaxed), stats.milli_units.load(Ordering::Relaxed) as f64 / 1000.0)
    }

    pub fn send(&self, event: LiveEvent) {
        // No subscriber is not an error: nobody is watching.
        if self.sender.receiver_count() > 0 {
            let _ = self.sender.send(Pushed::of(&event));
        }
    }

    pub fn send_counts(&self, counts: DayCounts, behind_ms: Option<i64>) {
        self.send(LiveEvent::Counters(LiveCounters { counts, as_of: chrono::Utc::now(), behind_ms }));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Pushed>> {
        self.sender.subscribe()
    }

    /// Pushes a rehearsal's progress or end to the connections following its plan.
    pub fn send_rehearsal(&self, event: &RehearsalEvent) {
        if let Some(plan) = event.plan()
            && self.rehearsals.receiver_count() > 0
        {
            let _ = self.rehearsals.send(PlanPushed::of(plan, event));
        }
    }

    pub fn subscribe_rehearsals(&self) -> broadcast::Receiver<Arc<PlanPushed>> {
        self.rehearsals.subscribe()
    }

    /// Counts `plan` as rehearsed by this instance for as long as the guard lives.
    pub fn rehearsing(&self, plan: &str) -> Rehearsing {
        *self.rehearsing.lock().entry(plan.to_string()).or_default() += 1;
        Rehearsing { rehearsing: self.rehearsing.clone(), plan: plan.to_string() }
    }

    /// Whether this instance runs `plan`'s rehearsal (else another may, and
    /// its progress is not pushed here).
    pub fn rehearses(&self, plan: &str) -> bool {
        self.rehearsing.lock().contains_key(plan)
    }

    /// A slot for one more connection from `client`, or why not.
    pub fn admit(&self, client: IpAddr) -> Result<Admission, Refused> {
        let mut open = self.open.lock();
        if open.total >= self.limits.total {
            return Err(Refused::Full);
        }
        let mine = open.per_client.entry(client).or_default();
        if *mine >= self.limits.per_client {
            return Err(Refused::TooManyFromClient);
        }
        *mine += 1;
        open.total += 1;
        Ok(Admission { open: self.open.clone(), client })
    }

    /// Connections open now.
    pub fn connected(&self) -> usize {
        self.open.lock().total
    }

    /// Ends every open event stream: the server is shutting down, and a
    /// graceful shutdown waits for open responses to finish.
    pub fn close(&self) {
        self.closing.cancel();
    }

    /// Resolves once `close` has been called.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.closing.clone().cancelled_owned()
    }

    /// Cancelled when `close` is called: work that must stop at shutdown
    /// takes a child of it.
    pub fn closing(&self) -> CancellationToken {
        self.closing.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_in_total_and_per_client_and_freed_on_drop() {
        let hub = LiveHub::new(LiveLimits { total: 3, per_client: 2 });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = hub.admit(a).unwrap();
        let _second = hub.admit(a).unwrap();
        assert_eq!(hub.admit(a).err(), Some(Refused::TooManyFromClient));
        let _third = hub.admit(b).unwrap();
        assert_eq!(hub.admit(b).err(), Some(Refused::Full));
        drop(first);
        assert_eq!(hub.connected(), 2);
        assert!(hub.admit(a).is_ok());
    }

    #[test]
    fn rehearsal_events_reach_their_channel_only_and_runs_are_counted_while_they_last() {
        use crate::model::{RehearsalEvent, RehearsalPhase, RehearsalProgress};
        let hub = LiveHub::default();
        let (mut days, mut rehearsals) = (hub.subscribe(), hub.subscribe_rehearsals());
        let progress = RehearsalProgress {
            plan: "gala".into(),
            started_at: chrono::Utc::now(),
            elapsed_seconds: 3,
            seconds: 23,
            phase: RehearsalPhase::Hold,
        };
        hub.send_rehearsal(&RehearsalEvent::Progress(progress));
        let pushed = rehearsals.try_recv().unwrap();
        assert_eq!(pushed.plan, "gala");
        assert!(
            pushed.json.contains(r#""type":"progress""#) && pushed.json.contains(r#""phase":"hold""#),
            "{}",
            pushed.json
        );
        assert!(days.try_recv().is_err(), "the dashboards' connections never see it");
        // A snapshot is one connection's, never broadcast.
        hub.send_rehearsal(&RehearsalEvent::Rehearsals(Default::default()));
        assert!(rehearsals.try_recv().is_err());

        let (first, second) = (hub.rehearsing("gala"), hub.rehearsing("gala"));
        assert!(hub.rehearses("gala") && !hub.rehearses("spring"));
        drop(first);
        assert!(hub.rehearses("gala"));
        drop(second);
        assert!(!hub.rehearses("gala"));
    }

    #[test]
    fn watched_days_are_counted_per_connection() {
        let hub = LiveHub::default();
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let (first, second) = (hub.watch(day), hub.watch(day));
        assert_eq!(hub.watched_days(), vec![day]);
        drop(first);
        assert!(hub.is_watched(day));
        drop(second);
        assert!(hub.watched_days().is_empty());
    }

    #[test]
    fn a_version_moved_only_by_this_instances_own_commits_is_not_a_change() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let mut versions = Versions::default();
        assert!(!versions.moved(day, 7), "a day not followed is not read");
        versions.follow_from(day, 10);
        versions.follow_from(day, 99);
        assert!(!versions.moved(day, 10), "the first connection's own version");
        versions.committed(&[(day, 3)]);
        assert!(!versions.moved(day, 13), "its own consumer's raises: pushed row by row already");
        versions.committed(&[(day, 2)]);
        assert!(versions.moved(day, 16), "someone else's raise among its own");
        assert!(versions.moved(day, 4), "a version gone back (the item rewritten) is a change too");
        versions.keep(&[]);
        assert!(!versions.follows(day));
    }
}

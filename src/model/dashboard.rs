//! What the PENDING dashboard and its live stream show: a day's counts,
//! the list, the chart, and how fresh the figures are.

use super::*;

/// A day's counts, as the stream's counters hold them: the one type the
/// service, the API, the live events and the pages share. The counters are
/// signed in the store (a repair may pass through negative values); they are
/// clamped to zero once, where they are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DayCounts {
    #[serde(with = "day")]
    pub date: NaiveDate,
    /// Whether the stream consumer has counted anything for this day; when
    /// not, every figure is unknown rather than zero.
    pub counted: bool,
    /// PENDING orders of the day now.
    pub pending: u64,
    /// The same, per write shard (shard 0 first).
    pub per_shard: Vec<u64>,
    /// Orders created that day.
    pub created: u64,
    /// Orders created that day, by the status they are in now.
    pub per_status: BTreeMap<Status, u64>,
}

/// The headline figures of one day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub counts: DayCounts,
    #[serde(default, with = "iso_millis::option")]
    pub oldest_pending: Option<DateTime<Utc>>,
}

/// Everything the dashboard shows, read in one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    pub page: PendingPage,
    pub summary: Summary,
    /// The chart's data, when the stream's counters are kept.
    pub activity: Option<Activity>,
    /// Milliseconds the stream consumer was behind at its last batch.
    pub behind_ms: Option<i64>,
    pub stuck_after_minutes: u32,
}
/// A day's counts as pushed to the live dashboards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LiveCounters {
    #[serde(flatten)]
    pub counts: DayCounts,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// How far the consumer was behind the stream at its last batch.
    pub behind_ms: Option<i64>,
}

/// What `GET /api/live` pushes, one JSON object per server-sent event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LiveEvent {
    Counters(LiveCounters),
    #[serde(rename_all = "camelCase")]
    Entered {
        #[serde(with = "day")]
        date: NaiveDate,
        order: PendingOrder,
    },
    #[serde(rename_all = "camelCase")]
    Left {
        #[serde(with = "day")]
        date: NaiveDate,
        order_id: String,
    },
    /// The day's orders changed in ways this server saw only as a number
    /// (another instance applied them): page one is to be read again.
    #[serde(rename_all = "camelCase")]
    Changed {
        #[serde(with = "day")]
        date: NaiveDate,
    },
    /// Events were missed: read the page again.
    Resync,
}

impl LiveEvent {
    pub fn date(&self) -> Option<NaiveDate> {
        match self {
            LiveEvent::Counters(c) => Some(c.counts.date),
            LiveEvent::Entered { date, .. } | LiveEvent::Left { date, .. } | LiveEvent::Changed { date } => Some(*date),
            LiveEvent::Resync => None,
        }
    }
}

/// A day's activity in ten-minute buckets, for the chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Orders created in each bucket.
    pub created: Vec<i64>,
    /// PENDING orders of the day at the end of each bucket.
    pub backlog: Vec<i64>,
}
/// Which figures reconciliation has verified, and when: read from the
/// counter items, so every instance says the same.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// `pending` and `perShard`.
    pub pending: Option<Checked>,
    /// `created`, `perStatus` and `perMinute.created` (`reconcile --full`).
    pub daily: Option<Checked>,
    /// `perMinute.entered` and `perMinute.left`.
    pub per_minute: &'static str,
    /// The last time reconciliation of `pending` refused to judge, and why
    /// (`null`: it never did, or judged since).
    pub pending_refused: Option<Refused>,
}

/// Why reconciliation would not judge the counters: its anchor (the shard
/// checkpoints the counters are consistent with) cannot be exact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ReconcileRefusal {
    /// A Lambda function guarding each record with a marker (a mapping
    /// without a tumbling window) applied records within the stream's
    /// retention: they moved no shard checkpoint, so the checkpoints do not
    /// say which records the counters hold.
    #[serde(rename_all = "camelCase")]
    MarkerMode {
        /// The function, as the registry names it.
        instance: String,
        #[serde(with = "iso_millis")]
        seen_at: DateTime<Utc>,
        /// The recorded consumer mode when refused.
        mode: ConsumerMode,
    },
    /// The consumer is far behind: a record older than the bound had not
    /// been applied (a stopped or failing consumer, records near their
    /// 24-hour trim, a range the mapping may give up).
    #[serde(rename_all = "camelCase")]
    FarBehind { shard: String, behind_secs: u64, bound_secs: u64 },
}

impl std::fmt::Display for ReconcileRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileRefusal::MarkerMode { instance, seen_at, mode } => write!(
                f,
                "marker mode: the Lambda function {instance} applied records guarded by per-record markers (no \
                 tumbling window) at {}, within the stream's 24-hour retention, so the shard checkpoints do not \
                 say what the counters hold (consumer mode {mode}); give the mapping a tumbling window and wait a \
                 day",
                seen_at.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            ReconcileRefusal::FarBehind { shard, behind_secs, bound_secs } => write!(
                f,
                "the consumer is far behind: a record of shard {shard} written {behind_secs} s ago is not applied \
                 (the bound is {bound_secs} s); reconcile once it has caught up"
            ),
        }
    }
}

/// A refusal as recorded on the counter item.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    pub reason: ReconcileRefusal,
    /// The reason in words.
    pub message: String,
}

/// A reconciliation's verdict.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    /// Counter minus what it should have been (`pending`, or `created`).
    pub drift: i64,
    /// Whether anything was off, and so repaired.
    pub repaired: bool,
}

/// `GET /api/metrics/pending`: a day's counters and how fresh they are.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingMetrics {
    #[serde(flatten)]
    pub counts: DayCounts,
    pub per_minute: PerMinute,
    pub freshness: Freshness,
    pub verification: Verification,
    pub live: LiveFigures,
}

/// This instance's live connections and what following other instances'
/// changes has cost it (see `follower`).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LiveFigures {
    pub connections: usize,
    pub watched_days: usize,
    /// Strongly consistent reads of a day's `version` since start.
    pub version_reads: u64,
    /// The read units they consumed, as the store reported them.
    pub read_units: f64,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PerMinute {
    pub created: Vec<i64>,
    pub entered: Vec<i64>,
    pub left: Vec<i64>,
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Freshness {
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    pub consumer_running: bool,
    #[serde(with = "iso_millis::option")]
    pub last_applied_at: Option<DateTime<Utc>>,
    pub behind_ms: Option<i64>,
    pub records_applied: u64,
    pub bad_records: u64,
    /// When the consumer last failed a pass; why is in the server's log.
    #[serde(with = "iso_millis::option")]
    pub last_error_at: Option<DateTime<Utc>>,
    /// When this instance's consumer last found stream records trimmed
    /// before it read them: their changes are missing from the counters
    /// until `reconcile --full` repairs them.
    #[serde(with = "iso_millis::option")]
    pub records_trimmed_at: Option<DateTime<Utc>>,
    /// Why this instance's consumer does not run although it was asked to
    /// (the recorded mode is `lambda`: "standing down: mode is lambda").
    pub consumer_refused: Option<String>,
    /// The recorded consumer mode: which form counts.
    pub consumer_mode: ConsumerModeState,
    /// Every consumer the registry knows, with when it was last seen.
    pub consumers: Vec<ConsumerSeen>,
}

/// A consumer of the stream as the registry last saw it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConsumerSeen {
    /// `in-process` (serve, consume) or `lambda`.
    pub mode: String,
    /// The process's owner id, or the Lambda function's name.
    pub instance: String,
    #[serde(with = "iso_millis")]
    pub seen_at: DateTime<Utc>,
}

/// Which form of the stream consumer counts: the one recorded decision
/// (`northwind-ops consumer use`, `PUT /api/consumer/mode`). The other form
/// stands down; both keep their heartbeats in the registry, for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ConsumerMode {
    /// The in-process consumer of `serve` (or `consume`).
    Serve,
    /// The Lambda function driven by the event source mapping.
    Lambda,
}

impl ConsumerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerMode::Serve => "serve",
            ConsumerMode::Lambda => "lambda",
        }
    }
}

impl std::fmt::Display for ConsumerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConsumerMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "serve" => Ok(ConsumerMode::Serve),
            "lambda" => Ok(ConsumerMode::Lambda),
            other => Err(format!("unknown consumer mode {other:?}: expected serve or lambda")),
        }
    }
}

/// The consumer mode as recorded in the metrics table. No item is
/// `serve`, version 0: a fresh deployment counts in `serve` until someone
/// (or the Lambda function, at its first batch) records a mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConsumerModeState {
    pub mode: ConsumerMode,
    /// Whether a mode is recorded (else `mode` is the default, `serve`).
    pub recorded: bool,
    /// Moves by one at every switch; a switch names the version it saw
    /// (`expectedVersion`) and is refused when it moved meanwhile. 0: none.
    pub version: u64,
    #[serde(with = "iso_millis::option")]
    pub changed_at: Option<DateTime<Utc>>,
    /// Who recorded it: a user or token name, `cli`, or the Lambda function.
    pub changed_by: Option<String>,
}

impl ConsumerModeState {
    /// What an absent item means.
    pub fn default_serve() -> Self {
        ConsumerModeState { mode: ConsumerMode::Serve, recorded: false, version: 0, changed_at: None, changed_by: None }
    }

    /// The mode in words: which form counts, and who chose it when.
    pub fn described(&self) -> String {
        match (&self.changed_by, self.changed_at, self.recorded) {
            (_, _, false) => format!("{} (none recorded: the default)", self.mode),
            (Some(by), Some(at), true) => format!("{} (by {by}, {})", self.mode, at.format("%Y-%m-%d %H:%M UTC")),
            _ => self.mode.to_string(),
        }
    }
}

/// `PUT /api/consumer/mode`: the mode to record, and the version it was
/// read at (refused with a 409 when it moved since; left out, the version
/// read just before the write).
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsumerModeSwitch {
    pub mode: ConsumerMode,
    pub expected_version: Option<u64>,
}

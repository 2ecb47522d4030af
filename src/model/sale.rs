//! Sale plans and their readiness: what a planned flash sale asks of the
//! tables, and one go/no-go with a verdict, the figures and the fix of each
//! check (worked out by `server::capacity::readiness`).

use super::*;

/// Longest sale plan name accepted.
pub const MAX_PLAN_NAME: usize = 64;
/// The most minutes each of ramp, hold and decay may last: a day.
pub const MAX_PHASE_MINUTES: u32 = 24 * 60;
/// The highest peak accepted, in orders a second: well past any sale, low
/// enough that no figure derived from it overflows.
pub const MAX_PEAK: f64 = 1_000_000.0;
/// The largest item DynamoDB takes.
pub const MAX_ITEM_BYTES: u32 = 400 * 1024;

/// Who writes a sale's orders, which decides what each order costs the
/// tables (`capacity::costs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Writer {
    /// Another service (the order service) writes them: plain PutItem and
    /// UpdateItem, no transaction, no audit record.
    #[default]
    Service,
    /// This console writes them: each change a transaction (billed twice)
    /// with its audit records on the metrics table.
    Console,
}

impl Writer {
    pub const ALL: [Writer; 2] = [Writer::Service, Writer::Console];

    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Service => "service",
            Writer::Console => "console",
        }
    }

    pub fn parse(text: &str) -> Option<Writer> {
        Writer::ALL.into_iter().find(|w| w.as_str() == text)
    }

    /// In words, for the page and the figures.
    pub fn describe(self) -> &'static str {
        match self {
            Writer::Service => "another service writes them (PutItem/UpdateItem)",
            Writer::Console => "through this console (transactions with audit records)",
        }
    }
}

/// A planned sale: its peak, when it starts, how it ramps up, holds and
/// decays, and how large an order item is expected to be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SalePlan {
    pub name: String,
    pub peak_orders_per_second: f64,
    #[serde(with = "iso_millis")]
    pub start: DateTime<Utc>,
    pub ramp_minutes: u32,
    pub hold_minutes: u32,
    pub decay_minutes: u32,
    /// Bytes of one order item as written (table and GSI1 write units).
    pub item_bytes: u32,
    /// What the stream consumer was measured to apply, records a second
    /// (a rehearsal's figure), when someone measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_records_per_second: Option<f64>,
    /// Who writes the orders; a plan saved before this field reads as
    /// another service.
    #[serde(default)]
    pub writer: Writer,
    /// What the plan's last rehearsal measured of the stream consumer,
    /// recorded by the rehearsal (never by the plan form; kept when the
    /// plan is edited). The consumer check prefers it to the figure above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_measured: Option<ConsumerMeasurement>,
    #[serde(with = "iso_millis")]
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

impl SalePlan {
    /// Whether every figure is one the plan form accepts: an item written
    /// by hand or by another tool may hold anything, and a plan spanning
    /// centuries must not make a check read every day of them.
    pub fn within_limits(&self) -> bool {
        let rate_ok = |r: f64| r.is_finite() && r > 0.0 && r <= MAX_PEAK * 10.0;
        rate_ok(self.peak_orders_per_second)
            && self.peak_orders_per_second <= MAX_PEAK
            && [self.ramp_minutes, self.hold_minutes, self.decay_minutes].iter().all(|m| *m <= MAX_PHASE_MINUTES)
            && (1..=MAX_ITEM_BYTES).contains(&self.item_bytes)
            && self.consumer_records_per_second.is_none_or(rate_ok)
            && self.consumer_measured.as_ref().is_none_or(|m| rate_ok(m.records_per_second))
    }

    /// When the sale is over: start, ramp, hold and decay.
    pub fn end(&self) -> DateTime<Utc> {
        let minutes = i64::from(self.ramp_minutes) + i64::from(self.hold_minutes) + i64::from(self.decay_minutes);
        self.start + chrono::Duration::minutes(minutes)
    }

    /// The days (UTC) the sale writes orders on, first to last.
    pub fn days(&self) -> Vec<NaiveDate> {
        let (first, last) = (self.start.date_naive(), self.end().date_naive());
        first.iter_days().take_while(|d| *d <= last).collect()
    }
}

/// `POST /api/sales` and `PUT /api/sales/{name}`: every field as sent,
/// checked by the server field by field (a number may come as a string, as
/// a page's form sends it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SalePlanInput {
    #[serde(default)]
    pub name: Option<serde_json::Value>,
    #[serde(default)]
    pub peak_orders_per_second: Option<serde_json::Value>,
    #[serde(default)]
    pub start: Option<serde_json::Value>,
    #[serde(default)]
    pub ramp_minutes: Option<serde_json::Value>,
    #[serde(default)]
    pub hold_minutes: Option<serde_json::Value>,
    #[serde(default)]
    pub decay_minutes: Option<serde_json::Value>,
    #[serde(default)]
    pub item_bytes: Option<serde_json::Value>,
    #[serde(default)]
    pub consumer_records_per_second: Option<serde_json::Value>,
    /// `service` (the default) or `console`.
    #[serde(default)]
    pub writer: Option<serde_json::Value>,
}

/// A check's verdict, and the plan's overall one (the worst of its checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub enum Verdict {
    #[serde(rename = "ready")]
    Ready,
    /// Something must be done first, or could not be known.
    #[serde(rename = "act")]
    Act,
    #[serde(rename = "no-go")]
    NoGo,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::Act => "act",
            Verdict::NoGo => "no-go",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One figure behind a verdict: what it is and its value, in words
/// ("unknown" when it could not be read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Figure {
    pub label: String,
    pub value: String,
    /// Where the figure came from, when the checks work it out from
    /// something the reader should be able to judge: computed from the key
    /// design (and what), or measured (where and on which days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The one thing that turns a check ready: a command to run, a template
/// parameter to set, or an action this app takes (`action`, e.g.
/// `write-shards`, offered as a button and an API call).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Fix {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReadinessCheck {
    /// `shards`, `warm-throughput`, `auto-scaling`, `counters`, `consumer`, `hot-keys`, `alarms`, `rehearsal`.
    pub id: String,
    pub title: String,
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    pub figures: Vec<Figure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// `GET /api/ready?plan=`: the go/no-go of a plan, and each check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    pub plan: SalePlan,
    pub verdict: Verdict,
    pub checks: Vec<ReadinessCheck>,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
}

/// `POST /api/sales/{name}/shards`: what writing the sale's days' shard
/// counts ahead did, day by day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShardsWritten {
    pub shards: u32,
    pub days: Vec<DayShards>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DayShards {
    #[serde(with = "day")]
    pub date: NaiveDate,
    /// `written`, or `already` (the same count was there).
    pub outcome: String,
}

/// How a rehearsal of a plan went: still running, done (its verdict says
/// how), or failed to run (why is in `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RehearsalState {
    Running,
    Done,
    Failed,
}

/// A plan's shape as rehearsed: scaled down in time (a fixed short run)
/// and in rate, with the partition limits scaled by the same factor as the
/// peak, so the peak's ratio to the limits is the plan's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RehearsalShape {
    /// The partition limits and the plan's rates times this.
    pub scale: f64,
    /// The GSI2 write shards of the design rehearsed (the sale day's).
    pub shards: u32,
    /// The plan's peak times `scale`.
    pub peak_orders_per_second: f64,
    /// Before and after the sale, orders a second.
    pub base_orders_per_second: f64,
    pub ramp_seconds: u64,
    pub hold_seconds: u64,
    pub decay_seconds: u64,
    /// Seconds at the base rate after the decay, for the last orders to close.
    pub tail_seconds: u64,
    pub writers: u32,
    /// Who wrote the orders, as the plan says (a run recorded before this
    /// field: the console, as rehearsals then wrote).
    #[serde(default = "console")]
    pub written_by: Writer,
}

fn console() -> Writer {
    Writer::Console
}

impl RehearsalShape {
    /// How long the run's load lasts: ramp, hold, decay and tail.
    pub fn seconds(&self) -> u64 {
        self.ramp_seconds + self.hold_seconds + self.decay_seconds + self.tail_seconds
    }
}

/// Where a run of a shape is, by the seconds since it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RehearsalPhase {
    Ramp,
    Hold,
    Decay,
    /// At the base rate, for the last orders to close.
    Tail,
    /// The load is over: the figures are being read and filed.
    Filing,
}

impl RehearsalPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            RehearsalPhase::Ramp => "ramping up",
            RehearsalPhase::Hold => "at the peak",
            RehearsalPhase::Decay => "ramping down",
            RehearsalPhase::Tail => "at the base rate",
            RehearsalPhase::Filing => "reading and filing the figures",
        }
    }
}

impl RehearsalShape {
    /// The phase of the load `elapsed` seconds into the run.
    pub fn phase_at(&self, elapsed: u64) -> RehearsalPhase {
        let ends = [
            (self.ramp_seconds, RehearsalPhase::Ramp),
            (self.hold_seconds, RehearsalPhase::Hold),
            (self.decay_seconds, RehearsalPhase::Decay),
            (self.tail_seconds, RehearsalPhase::Tail),
        ];
        let mut end = 0;
        for (seconds, phase) in ends {
            end += seconds;
            if elapsed < end {
                return phase;
            }
        }
        RehearsalPhase::Filing
    }
}

/// A rehearsal under way, as the server running it pushes it each second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RehearsalProgress {
    pub plan: String,
    #[serde(with = "iso_millis")]
    pub started_at: DateTime<Utc>,
    /// Seconds since the run started.
    pub elapsed_seconds: u64,
    /// The load's planned length (`shape.seconds()`); filing the figures takes a few more.
    pub seconds: u64,
    pub phase: RehearsalPhase,
}

/// What `GET /api/sales/{name}/rehearsal/live` pushes, one JSON object per
/// server-sent event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum RehearsalEvent {
    /// The plan's rehearsals as stored: first on every connection, and again
    /// whenever they change while another server runs the plan's rehearsal.
    Rehearsals(Box<Rehearsals>),
    /// The run under way on this server, each second.
    Progress(RehearsalProgress),
    /// A run ended, its result filed.
    Finished(Box<Rehearsal>),
}

impl RehearsalEvent {
    /// The plan it concerns (`None`: the snapshot, sent to one connection only).
    pub fn plan(&self) -> Option<&str> {
        match self {
            RehearsalEvent::Rehearsals(_) => None,
            RehearsalEvent::Progress(p) => Some(&p.plan),
            RehearsalEvent::Finished(r) => Some(&r.plan),
        }
    }
}

/// What one rehearsed design did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RehearsalFigures {
    /// The profile's mean rate over the run, orders a second.
    pub target_orders_per_second: Option<f64>,
    pub achieved_orders_per_second: f64,
    pub created: u64,
    /// Orders whose write failed after every retry.
    pub failed: u64,
    /// Attempts the proxy refused (the SDK's retries included), and by
    /// reason and place (no minutes: the run lasts less than one).
    pub throttled: u64,
    pub throttles: Vec<ThrottleCount>,
    /// From an order being due to its write succeeding, milliseconds.
    pub write_p50_ms: Option<f64>,
    pub write_p99_ms: Option<f64>,
    /// The PENDING dashboard's first page, read through the proxy all along.
    pub dashboard_answered: u64,
    pub dashboard_failed: u64,
    pub dashboard_p99_ms: Option<f64>,
    pub dashboard_readable: bool,
    /// Write units a change the throttle proxy metered on each table and
    /// index (`table`, `GSI1`, `GSI2`, `metrics table`): the orders created
    /// and closed in the run. A run recorded before: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metered: Vec<MeteredUnits>,
    /// What the stream consumer (in-process form) sustained on the run's
    /// stream. A run recorded before, or one whose consumer applied
    /// nothing: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<ConsumerMeasurement>,
    /// Stream records a change the run's consumer read (every record of
    /// the run's stream, over the orders created and closed). None: a run
    /// recorded before, or one whose consumer never caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_records_per_change: Option<f64>,
}

impl ConsumerMeasurement {
    /// "1,766 records/s on 2026-12-07 (scale 1/10)": the plans table's cell.
    pub fn summary(&self) -> String {
        format!(
            "{:.0} records/s on {} (scale {}){}",
            self.records_per_second,
            self.measured_at.format("%Y-%m-%d"),
            scale_fraction(self.scale),
            if self.caught_up { "" } else { ", never caught up" }
        )
    }
}

/// A rehearsal's scale as a fraction of the plan: "1/50", or "1" as planned.
pub fn scale_fraction(scale: f64) -> String {
    if scale > 0.0 && scale < 1.0 { format!("1/{:.0}", 1.0 / scale) } else { "1".into() }
}

/// What a plans table shows of the consumer's rate: measured, or not yet.
pub fn consumer_summary(plan: &SalePlan) -> String {
    plan.consumer_measured.as_ref().map_or_else(|| "not measured: rehearse".to_string(), ConsumerMeasurement::summary)
}

/// The stream consumer measured in a plan's rehearsal: the in-process
/// consumer started on the run's stream once a backlog had built up (at
/// the end of the hold), so what it applies a second until it has caught up
/// is what it can apply, not what the scaled-down load offered it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConsumerMeasurement {
    /// Records a second applied while it had a backlog.
    pub records_per_second: f64,
    /// Records applied in all, and of them while it had a backlog.
    pub records: u64,
    pub backlog_records: u64,
    /// Whether it caught up with the stream before the run ended (if not,
    /// the rate is over the whole run, still behind).
    pub caught_up: bool,
    /// Change → counter once caught up: from a record's change to its
    /// counters applied (the newest record of each batch), milliseconds.
    /// The stream stamps a change to the second, so these are to a second
    /// (a lag of 0.5 s reads 0 to 1 s).
    pub lag_p50_ms: Option<f64>,
    pub lag_p95_ms: Option<f64>,
    /// The simulated stream's shard count.
    pub stream_shards: u32,
    /// The run's rate against the plan's (1 when run as it is).
    pub scale: f64,
    #[serde(with = "iso_millis")]
    pub measured_at: DateTime<Utc>,
}

/// Write units a change one table or index took in a rehearsal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MeteredUnits {
    pub resource: String,
    pub units_per_change: f64,
}

/// One rehearsal of a plan, as stored with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Rehearsal {
    pub plan: String,
    /// The plan as rehearsed (its `updatedAt`): a plan changed since is
    /// rehearsed again.
    #[serde(with = "iso_millis")]
    pub plan_updated_at: DateTime<Utc>,
    /// The plan's peak, before scaling.
    pub plan_peak_orders_per_second: f64,
    #[serde(with = "iso_millis")]
    pub started_at: DateTime<Utc>,
    #[serde(default, with = "iso_millis::option")]
    pub finished_at: Option<DateTime<Utc>>,
    pub by: String,
    pub state: RehearsalState,
    /// Ready (held), act (inconclusive) or no-go (throttled, failed
    /// writes, the dashboard unreadable, or the run failed); none while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Why, in one sentence.
    pub reason: String,
    pub shape: RehearsalShape,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<RehearsalFigures>,
}

/// `GET /api/sales/{name}/rehearsal`: the one running, if any, and the
/// last two finished, the latest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Rehearsals {
    #[serde(default)]
    pub running: Option<Rehearsal>,
    #[serde(default)]
    pub latest: Option<Rehearsal>,
    #[serde(default)]
    pub previous: Option<Rehearsal>,
}

/// Where a sale is in its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SalePhase {
    NotStarted,
    UnderWay,
    Over,
}

/// A key recorded among the most written in a minute of the sale.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HotKeySeen {
    /// The table or index, as recorded (`<table>/GSI1`, ...).
    pub resource: String,
    pub key: String,
    /// Its write units in its busiest minute.
    pub units: u64,
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
}

/// `GET /api/sales/{name}/outcome`: the plan beside what happened over the
/// part of its window already past. A figure nothing recorded is `null`,
/// with the reason in its note: unknown, never guessed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SaleOutcome {
    pub plan: SalePlan,
    pub phase: SalePhase,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// The part of the window looked at: from the start to the end or now.
    #[serde(default, with = "iso_millis::option")]
    pub from: Option<DateTime<Utc>>,
    #[serde(default, with = "iso_millis::option")]
    pub to: Option<DateTime<Utc>>,
    /// Whole minutes of that part, and how many of them the stream
    /// consumer observed (its counters and hot keys cover only those).
    pub minutes: u64,
    pub minutes_observed: u64,
    /// Orders created in the window, from the consumer's minute counters.
    pub orders_created: Option<u64>,
    /// The busiest minute's mean rate, orders a second, and that minute.
    pub peak_orders_per_second: Option<f64>,
    #[serde(default, with = "iso_millis::option")]
    pub peak_minute: Option<DateTime<Utc>>,
    pub peak_note: String,
    /// Throttled requests of this app's own calls, by reason and place.
    pub throttles: Option<Vec<ThrottleCount>>,
    pub throttles_note: String,
    /// How far the consumer was behind, milliseconds.
    pub consumer_behind_ms: Option<i64>,
    pub consumer_note: String,
    /// The keys written most in a minute of the window, the busiest first.
    pub hot_keys: Option<Vec<HotKeySeen>>,
    pub hot_keys_note: String,
}

//! Scheduled floor raises: when auto scaling alone would throttle at the
//! start of a burst (the month-end batch), a scheduled minimum from 10
//! minutes before it to its end.

use super::autoscaling::{desired, simulate_with};
use super::{Advice, Mode, Prices, Series, account};
use crate::server::store::usage::ReadWrite;
use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::Serialize;

/// A floor raise before a burst that auto scaling alone cannot follow.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledFloor {
    pub access: ReadWrite,
    /// When the minimum capacity is raised (10 minutes before the burst)
    /// and when it is set back.
    pub raise_at: DateTime<Utc>,
    pub lower_at: DateTime<Utc>,
    /// The minimum capacity while raised: what the burst wants at 70%.
    pub min_capacity: u32,
    /// The minimum to set back (what the minutes before the burst wanted).
    pub restore_capacity: u32,
    /// `cron(...)` when the burst falls on a month's last day (every month),
    /// else `at(...)` of the one seen.
    pub raise_schedule: String,
    pub lower_schedule: String,
}

impl ScheduledFloor {
    /// The two `aws application-autoscaling put-scheduled-action
    /// --cli-input-json` documents: the raise, and the setting back.
    pub fn put_scheduled_actions(&self, table: &str, index: Option<&str>) -> Vec<serde_json::Value> {
        let (resource_id, dimension) = match index {
            Some(index) => (format!("table/{table}/index/{index}"), "index"),
            None => (format!("table/{table}"), "table"),
        };
        let unit = match self.access {
            ReadWrite::Read => "ReadCapacityUnits",
            ReadWrite::Write => "WriteCapacityUnits",
        };
        let name = resource_id.replace('/', "-");
        let action = |suffix: &str, schedule: &str, min: u32| {
            serde_json::json!({
                "ServiceNamespace": "dynamodb",
                "ScheduledActionName": format!("{name}-{}-{suffix}", self.access),
                "ResourceId": resource_id,
                "ScalableDimension": format!("dynamodb:{dimension}:{unit}"),
                "Schedule": schedule,
                "Timezone": "Etc/UTC",
                "ScalableTargetAction": {"MinCapacity": min},
            })
        };
        vec![
            action("raise", &self.raise_schedule, self.min_capacity),
            action("lower", &self.lower_schedule, self.restore_capacity),
        ]
    }
}

/// Provisioned with a scheduled floor raise before each burst auto scaling
/// could not follow, when that throttles nothing and is still cheaper.
pub(super) fn with_floor(
    advice: &mut Advice,
    series: &Series,
    reads: &[Option<f64>],
    writes: &[Option<f64>],
    first_minute_of_day: usize,
    prices: &Prices,
) {
    let mut schedule = Vec::new();
    let mut sides = Vec::new();
    for (units, access) in [(reads, ReadWrite::Read), (writes, ReadWrite::Write)] {
        let plain = simulate_with(units, first_minute_of_day, &[]);
        let floors = bursts(units, &plain.throttled);
        let floor = floor_of(&floors, units.len());
        let side = account(units, first_minute_of_day, prices, access, &floor);
        if side.throttled_minutes > 0 {
            return;
        }
        for burst in floors {
            let Some(floor) = scheduled(series, &burst, access) else { return };
            schedule.push(floor);
        }
        sides.push(side);
    }
    let write = sides.pop().expect("two sides");
    let read = sides.pop().expect("two sides");
    let provisioned_monthly = read.provisioned_monthly + write.provisioned_monthly;
    if provisioned_monthly < advice.on_demand_monthly {
        advice.mode = Mode::Provisioned;
        advice.provisioned_monthly = provisioned_monthly;
        advice.read = read;
        advice.write = write;
        advice.schedule = schedule;
    }
}

/// One burst auto scaling could not follow: the floor it needs, from when
/// to when (minute indexes, the end excluded).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Burst {
    raise: usize,
    lower: usize,
    floor: u32,
    restore: u32,
}

/// Minutes raised before a burst starts.
pub(super) const RAISE_AHEAD_MINUTES: usize = 10;
/// Throttled minutes further apart than this are separate bursts.
const BURST_GAP_MINUTES: usize = 60;

/// The bursts behind throttled minutes: each starts at its first throttled
/// minute, wants the capacity of its busiest minute, and lasts while the
/// minutes stay above half of that.
pub(super) fn bursts(units: &[Option<f64>], throttled: &[usize]) -> Vec<Burst> {
    let mut bursts: Vec<Burst> = Vec::new();
    for &start in throttled {
        if bursts.last().is_some_and(|b| start < b.lower + BURST_GAP_MINUTES) {
            continue;
        }
        let level = |m: usize| units.get(m).copied().flatten().unwrap_or(0.0);
        let peak = (start..units.len().min(start + 4 * 60)).map(level).fold(0.0, f64::max);
        let mut end = start;
        while end < units.len() && level(end) >= peak / 2.0 {
            end += 1;
        }
        let raise = start.saturating_sub(RAISE_AHEAD_MINUTES);
        let before = (raise.saturating_sub(60)..raise).map(level).fold(0.0, f64::max);
        bursts.push(Burst { raise, lower: end, floor: desired(peak), restore: desired(before) });
    }
    bursts
}

/// The minimum capacity of every minute the bursts ask for (0: none).
pub(super) fn floor_of(bursts: &[Burst], minutes: usize) -> Vec<u32> {
    let mut floor = vec![0; minutes];
    for burst in bursts {
        for minute in &mut floor[burst.raise..burst.lower.min(minutes)] {
            *minute = (*minute).max(burst.floor);
        }
    }
    floor
}

/// A burst as a scheduled action: every month when it fell on a month's
/// last day (the month-end batch), else once at the time it was seen.
/// `None` for a burst at the very start of the span (nothing to schedule
/// ahead of).
pub(super) fn scheduled(series: &Series, burst: &Burst, access: ReadWrite) -> Option<ScheduledFloor> {
    if burst.raise == 0 {
        return None;
    }
    let at = |minute: usize| series.start + chrono::Duration::minutes(minute as i64);
    let (raise_at, lower_at) = (at(burst.raise), at(burst.lower));
    let month_end = |t: DateTime<Utc>| (t + chrono::Duration::days(1)).month() != t.month();
    let schedule = |t: DateTime<Utc>, monthly: bool| {
        if monthly {
            let day = if month_end(t) { "L" } else { "1" };
            format!("cron({} {} {day} * ? *)", t.minute(), t.hour())
        } else {
            format!("at({})", t.format("%Y-%m-%dT%H:%M:%S"))
        }
    };
    let monthly = month_end(raise_at);
    Some(ScheduledFloor {
        access,
        raise_at,
        lower_at,
        min_capacity: burst.floor,
        restore_capacity: burst.restore,
        raise_schedule: schedule(raise_at, monthly),
        lower_schedule: schedule(lower_at, monthly),
    })
}

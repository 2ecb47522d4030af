//! What Application Auto Scaling's scheduled actions set, and when: the
//! schedule arithmetic the auto scaling check weighs a sale's window with.

use crate::server::capacity::schedule::Schedule;
use crate::server::store::ScheduledAction;
use chrono::{DateTime, Duration, Utc};

/// A scheduled action and when it runs, or why that was not read.
pub(super) type ReadAction<'a> = (&'a ScheduledAction, Result<Schedule, String>);

/// The last time `action` runs in `(after, until]`, within its own start
/// and end.
fn last_run(
    action: &ScheduledAction,
    schedule: &Schedule,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let after = action.start.map_or(after, |start| after.max(start - Duration::seconds(1)));
    let until = action.end.map_or(until, |end| until.min(end));
    if until <= after {
        return None;
    }
    schedule.last_run(after, until)
}

/// What a setting (`pick`: the minimum or the maximum) is at `at`: set by
/// the last scheduled action to run after `now`, else what it is now; and
/// the action and time that set it.
pub(super) fn setting_at<'a>(
    actions: &[ReadAction<'a>],
    pick: fn(&ScheduledAction) -> Option<i32>,
    now_value: i32,
    now: DateTime<Utc>,
    at: DateTime<Utc>,
) -> (i32, Option<(&'a ScheduledAction, DateTime<Utc>)>) {
    let last = actions
        .iter()
        .filter_map(|(action, schedule)| {
            let value = pick(action)?;
            let ran = last_run(action, schedule.as_ref().ok()?, now, at)?;
            Some((ran, value, *action))
        })
        .max_by_key(|(ran, _, _)| *ran);
    match last {
        Some((ran, value, action)) => (value, Some((action, ran))),
        None => (now_value, None),
    }
}

/// The first scheduled action that sets `pick` under `needed` in
/// `(after, until]`, and when.
pub(super) fn lowered_in<'a>(
    actions: &[ReadAction<'a>],
    pick: fn(&ScheduledAction) -> Option<i32>,
    needed: f64,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<(&'a ScheduledAction, i32, DateTime<Utc>)> {
    actions
        .iter()
        .filter_map(|(action, schedule)| {
            let value = pick(action).filter(|v| f64::from(*v) < needed)?;
            Some((*action, value, last_run(action, schedule.as_ref().ok()?, after, until)?))
        })
        .min_by_key(|(_, _, ran)| *ran)
}

/// "N (now)" or "N (scheduled action X at T)".
pub(super) fn set_by(value: i32, by: Option<(&ScheduledAction, DateTime<Utc>)>) -> String {
    match by {
        Some((action, at)) => {
            format!("{value} (set by scheduled action {} at {} UTC)", action.name, at.format("%Y-%m-%d %H:%M"))
        }
        None => format!("{value} (now)"),
    }
}

//! Where reconciliation's anchor cannot be exact, and it refuses to judge
//! (and so to repair) rather than "repair" a count that was right. Pure:
//! the reconciler gathers what these judge.
//!
//! The anchor is exact when the counters are exactly the effect of the
//! records up to the shard checkpoints read with them. Two cases break it:
//! - *Marker mode*: a Lambda function without a tumbling window guards each
//!   record with a marker and moves no checkpoint, so records it applied lie
//!   after the checkpoints and would be taken for unapplied ones. Refused
//!   while such a function applied records within the stream's retention
//!   (24 hours: after that, every record it applied is gone from the stream
//!   and the checkpoints' shards with it).
//! - *A consumer far behind*: a record older than the bound
//!   (`ReconcileOptions::far_behind`, 15 minutes unless told) was not yet
//!   applied. A consumer that keeps up is seconds behind; one this far
//!   behind is stopped, failing or throttled, its records near their
//!   24-hour trim, and the mapping may give a range up to the dead-letter
//!   queue and move its checkpoint past records it never applied (which
//!   `replay` applies later): a repair then would count them twice.

use crate::model::{ConsumerMode, ReconcileRefusal};
use crate::server::stream::registry::LAMBDA;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// How long after a Lambda function last applied records guarded by
/// markers reconciliation refuses: the stream's retention.
pub const MARKERS_REFUSED_FOR: Duration = Duration::from_secs(24 * 3600);
/// The default bound on how old an unapplied record may be.
pub const FAR_BEHIND: Duration = Duration::from_secs(15 * 60);

/// Refused when a Lambda function (registry mode `lambda`) applied records
/// guarded by markers within `MARKERS_REFUSED_FOR` of `now`: the latest
/// such function. `seen` is (registry mode, instance, `markersAt`).
pub fn marker_mode(
    seen: &[(String, String, DateTime<Utc>)],
    mode: ConsumerMode,
    now: DateTime<Utc>,
) -> Option<ReconcileRefusal> {
    let window = chrono::Duration::from_std(MARKERS_REFUSED_FOR).unwrap_or(chrono::Duration::days(1));
    seen.iter()
        .filter(|(registry_mode, _, at)| registry_mode == LAMBDA && now - *at < window)
        .max_by_key(|(_, _, at)| *at)
        .map(|(_, instance, at)| ReconcileRefusal::MarkerMode { instance: instance.clone(), seen_at: *at, mode })
}

/// Refused when the oldest record found unapplied at the anchor (`oldest`:
/// its shard and when it was written) was written more than `bound` before
/// the anchor was taken (`at`).
pub fn far_behind(
    oldest: Option<(&str, DateTime<Utc>)>,
    at: DateTime<Utc>,
    bound: Duration,
) -> Option<ReconcileRefusal> {
    let (shard, written) = oldest?;
    let behind = (at - written).to_std().unwrap_or_default();
    (behind > bound).then(|| ReconcileRefusal::FarBehind {
        shard: shard.to_string(),
        behind_secs: behind.as_secs(),
        bound_secs: bound.as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lambda_that_applied_records_with_markers_within_a_day_refuses() {
        let now = Utc::now();
        let seen = |mode: &str, hours: i64| (mode.to_string(), "fn".to_string(), now - chrono::Duration::hours(hours));
        let refused = marker_mode(&[seen(LAMBDA, 30), seen(LAMBDA, 2)], ConsumerMode::Lambda, now);
        assert_eq!(
            refused,
            Some(ReconcileRefusal::MarkerMode {
                instance: "fn".into(),
                seen_at: now - chrono::Duration::hours(2),
                mode: ConsumerMode::Lambda
            })
        );
        assert!(refused.unwrap().to_string().starts_with("marker mode: the Lambda function fn"));
        assert_eq!(marker_mode(&[seen(LAMBDA, 25)], ConsumerMode::Serve, now), None, "over a day ago: trimmed");
        assert_eq!(marker_mode(&[seen("in-process", 0)], ConsumerMode::Serve, now), None);
        assert_eq!(marker_mode(&[], ConsumerMode::Lambda, now), None, "checkpoints only");
    }

    #[test]
    fn a_record_unapplied_longer_than_the_bound_refuses() {
        let at = Utc::now();
        let bound = Duration::from_secs(600);
        let written = |secs: i64| at - chrono::Duration::seconds(secs);
        let refused = far_behind(Some(("s-1", written(601))), at, bound);
        assert_eq!(
            refused,
            Some(ReconcileRefusal::FarBehind { shard: "s-1".into(), behind_secs: 601, bound_secs: 600 })
        );
        assert_eq!(far_behind(Some(("s-1", written(600))), at, bound), None, "at the bound");
        assert_eq!(far_behind(Some(("s-1", written(-3))), at, bound), None, "written after the anchor");
        assert_eq!(far_behind(None, at, bound), None, "caught up");
    }
}

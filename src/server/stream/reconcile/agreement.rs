//! Two runs that agree before a repair (`serve`'s periodic reconciliation).
//!
//! A run that finds a difference records it (what it would change, and the
//! anchor it found it at) and changes nothing; the next run repairs only if
//! it finds the same difference at a comparable anchor, else it records its
//! own finding. Damage stays put: a delta on a counter is there at every
//! later anchor, whatever the consumer applies meanwhile. A difference that
//! comes from a run gone wrong (an index or a stream record later than the
//! grace, a race no argument foresaw) is tied to its moment and does not
//! come back the same at the next anchor, so it is never applied. Pure: the
//! reconciler reads and writes the findings.

use super::anchor::Position;
use super::compare_seq;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// How long a finding waits for a run to agree with it, unless told: two
/// of `serve`'s periods (10 minutes) and a margin.
pub const CONFIRM_WITHIN: Duration = Duration::from_secs(25 * 60);

/// What a run found and would change, and where it was anchored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub at: DateTime<Utc>,
    pub stream_arn: String,
    /// The counter item's `repairs` at the snapshot (a repair in between
    /// makes the anchors incomparable).
    pub repairs: Option<i64>,
    /// Each attribute that was off, by how much.
    pub off: BTreeMap<String, i64>,
    /// The consumer's position in each unfinished shard at the snapshot
    /// (`None`: its start).
    pub anchor: BTreeMap<String, Option<String>>,
}

impl Finding {
    /// The unfinished shards' positions of a snapshot.
    pub fn anchor_of(positions: &HashMap<String, Position>) -> BTreeMap<String, Option<String>> {
        positions
            .iter()
            .filter_map(|(shard, position)| match position {
                Position::Start => Some((shard.clone(), None)),
                Position::After(seq) => Some((shard.clone(), Some(seq.clone()))),
                Position::Finished => None,
            })
            .collect()
    }
}

/// Whether `now` confirms `previous`: the same difference, on the same
/// stream, with no repair in between, found within `within` after it, at
/// an anchor that is comparable: no position behind the earlier one's (a
/// checkpoint only moves forward; one that went back is another history).
/// A shard the earlier anchor had unfinished and this one does not list
/// has finished since.
pub fn agrees(previous: &Finding, now: &Finding, within: Duration) -> bool {
    let after = now.at >= previous.at && (now.at - previous.at).to_std().is_ok_and(|d| d <= within);
    let forward = previous.anchor.iter().all(|(shard, before)| match (before, now.anchor.get(shard)) {
        (_, None) | (None, Some(_)) => true,
        (Some(_), Some(None)) => false,
        (Some(before), Some(Some(seq))) => compare_seq(seq, before) != Ordering::Less,
    });
    !now.off.is_empty()
        && now.off == previous.off
        && now.stream_arn == previous.stream_arn
        && now.repairs == previous.repairs
        && after
        && forward
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(secs: i64, off: &[(&str, i64)], anchor: &[(&str, Option<&str>)]) -> Finding {
        let at = DateTime::from_timestamp(1_765_000_000 + secs, 0).unwrap();
        Finding {
            at,
            stream_arn: "arn".into(),
            repairs: Some(2),
            off: off.iter().map(|(a, n)| (a.to_string(), *n)).collect(),
            anchor: anchor.iter().map(|(s, p)| (s.to_string(), p.map(str::to_string))).collect(),
        }
    }

    #[test]
    fn the_same_difference_at_a_later_anchor_agrees() {
        let first = finding(0, &[("pending", 3), ("shard1", 3)], &[("a", Some("10")), ("b", None)]);
        let later = finding(600, &[("pending", 3), ("shard1", 3)], &[("a", Some("0120")), ("b", Some("5"))]);
        assert!(agrees(&first, &later, CONFIRM_WITHIN));
        assert!(agrees(&first, &first, CONFIRM_WITHIN), "a quiet stream: the same anchor");
        let finished = finding(600, &[("pending", 3), ("shard1", 3)], &[("c", Some("1"))]);
        assert!(agrees(&first, &finished, CONFIRM_WITHIN), "a and b finished since, c new");
    }

    #[test]
    fn anything_else_is_a_new_finding() {
        let first = finding(0, &[("pending", 3), ("shard1", 3)], &[("a", Some("10"))]);
        let other = finding(600, &[("pending", 5), ("shard1", 5)], &[("a", Some("12"))]);
        assert!(!agrees(&first, &other, CONFIRM_WITHIN), "another difference");
        let behind = finding(600, &[("pending", 3), ("shard1", 3)], &[("a", Some("9"))]);
        assert!(!agrees(&first, &behind, CONFIRM_WITHIN), "a checkpoint went back");
        let restarted = finding(600, &[("pending", 3), ("shard1", 3)], &[("a", None)]);
        assert!(!agrees(&first, &restarted, CONFIRM_WITHIN), "back to the start");
        let stale = finding(3600, &[("pending", 3), ("shard1", 3)], &[("a", Some("12"))]);
        assert!(!agrees(&first, &stale, CONFIRM_WITHIN), "too long after");
        assert!(!agrees(&stale, &first, CONFIRM_WITHIN), "before it");
        let repaired = Finding { repairs: Some(3), ..finding(600, &[("pending", 3), ("shard1", 3)], &[]) };
        assert!(!agrees(&first, &repaired, CONFIRM_WITHIN), "a repair in between");
        let moved = Finding { stream_arn: "another".into(), ..finding(600, &[("pending", 3), ("shard1", 3)], &[]) };
        assert!(!agrees(&first, &moved, CONFIRM_WITHIN), "another stream");
        let nothing = finding(600, &[], &[]);
        assert!(!agrees(&finding(0, &[], &[]), &nothing, CONFIRM_WITHIN), "nothing to repair");
    }
}

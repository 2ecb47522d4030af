//! The persisted minutes (`store::CapacityDay`) as the advisor's series: one
//! per table and index, over one span of consecutive minutes.
//!
//! The span runs from the first minute any resource consumed anything to the
//! last. A running app flushes its own writes to the metrics table, so while
//! one runs every minute has data; a gap inside the span is a quiet
//! minute, and minutes before the first or after the last are unknown, not
//! idle, so they are left out rather than counted as zero.

use super::advisor::{Access, Minute, Series};
use super::usage::{Resource, minute_start};
use crate::server::store::{CapacityDay, day_minute};
use std::collections::BTreeMap;

/// Every resource's series over the span the days have data for, oldest
/// minute first; none when nothing was recorded.
pub fn series(days: &[CapacityDay]) -> Vec<Series> {
    let mut by_resource: BTreeMap<Resource, BTreeMap<i64, Minute>> = BTreeMap::new();
    for day in days {
        for ((resource, access), units) in &day.units {
            let minutes = by_resource.entry(resource.clone()).or_default();
            for (minute, &n) in units.iter().enumerate().filter(|(_, n)| **n > 0.0) {
                let entry = minutes.entry(day_minute(day.date, minute as u32)).or_default();
                match access {
                    Access::Read => entry.read_units += n,
                    Access::Write => entry.write_units += n,
                }
            }
        }
    }
    let first = by_resource.values().filter_map(|m| m.keys().next()).min().copied();
    let last = by_resource.values().filter_map(|m| m.keys().next_back()).max().copied();
    let (Some(first), Some(last)) = (first, last) else { return Vec::new() };
    by_resource
        .into_iter()
        .map(|(resource, minutes)| Series {
            resource: resource.to_string(),
            start: minute_start(first),
            minutes: (first..=last).map(|m| minutes.get(&m).copied().unwrap_or_default()).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn day(date: NaiveDate, entries: &[(&str, Access, usize, f64)]) -> CapacityDay {
        let mut day = CapacityDay { date, ..CapacityDay::default() };
        for (resource, access, minute, n) in entries {
            let series =
                day.units.entry((Resource::parse(resource).unwrap(), *access)).or_insert_with(|| vec![0.0; 1440]);
            series[*minute] = *n;
        }
        day
    }

    #[test]
    fn the_span_runs_from_the_first_minute_with_data_to_the_last_across_days() {
        let first = NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
        let second = first.succ_opt().unwrap();
        let days = [
            day(first, &[("orders", Access::Write, 1438, 60.0)]),
            day(second, &[("orders/GSI2", Access::Read, 1, 30.0), ("orders", Access::Write, 0, 120.0)]),
        ];
        let series = series(&days);
        assert_eq!(series.len(), 2);
        let orders = &series[0];
        assert_eq!(orders.resource, "orders");
        assert_eq!(orders.start, "2026-11-28T23:58:00Z".parse::<chrono::DateTime<chrono::Utc>>().unwrap());
        let writes: Vec<f64> = orders.minutes.iter().map(|m| m.write_units).collect();
        assert_eq!(writes, [60.0, 0.0, 120.0, 0.0], "23:58, a quiet 23:59, 00:00, 00:01");
        let gsi2 = &series[1];
        assert_eq!((gsi2.resource.as_str(), gsi2.minutes.len()), ("orders/GSI2", 4), "the same span for each");
        assert_eq!(gsi2.minutes[3].read_units, 30.0);
        assert!(super::series(&[CapacityDay { date: first, ..CapacityDay::default() }]).is_empty());
    }
}

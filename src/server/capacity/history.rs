//! A window of days' figures (`sources::Figures`) as the advisor's series:
//! one per table and index, over every minute of the window, each marked
//! observed or not by the source of its writes. A minute the source
//! observed with no traffic is zero; a minute nobody observed is unknown,
//! and the advisor leaves it out. Coverage is the observed minutes over the
//! window's.

use super::advisor::{Minute, Series};
use super::sources::Figures;
use crate::server::store::usage::{ReadWrite, Resource};
use chrono::{DateTime, NaiveDate, Utc};
use std::collections::BTreeSet;

const MINUTES: usize = 1440;

/// One day of a window.
pub struct Day<'a> {
    pub date: NaiveDate,
    pub figures: &'a Figures,
}

/// The window the advisor weighs, and how much of it was observed.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub start: DateTime<Utc>,
    /// Minutes from `start` to the end (now, or the last day's end).
    pub minutes: usize,
    pub observed: usize,
}

impl Window {
    /// Observed minutes over the window's, 0 to 1.
    pub fn coverage(&self) -> f64 {
        if self.minutes == 0 { 0.0 } else { self.observed as f64 / self.minutes as f64 }
    }
}

/// Every resource's series over `days` (oldest first), cut at `end`; the
/// window they cover.
pub fn series(days: &[Day<'_>], end: DateTime<Utc>) -> (Vec<Series>, Window) {
    let Some(first) = days.first() else {
        return (Vec::new(), Window { start: end, minutes: 0, observed: 0 });
    };
    let start = first.date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    let length = ((end - start).num_minutes().max(0) as usize).min(days.len() * MINUTES);
    let mut observed = vec![false; length];
    for (d, day) in days.iter().enumerate() {
        for (m, seen) in day.figures.observed.iter().enumerate() {
            if let Some(slot) = observed.get_mut(d * MINUTES + m) {
                *slot = *seen;
            }
        }
    }
    let resources: BTreeSet<&Resource> =
        days.iter().flat_map(|d| d.figures.units.keys().map(|(resource, _)| resource)).collect();
    let series = resources
        .into_iter()
        .map(|resource| {
            let mut minutes = vec![Minute::default(); length];
            for (d, day) in days.iter().enumerate() {
                for (access, side) in [ReadWrite::Read, ReadWrite::Write]
                    .into_iter()
                    .filter_map(|access| day.figures.side(resource, access).map(|side| (access, side)))
                {
                    for (m, units) in side.minutes.iter().enumerate() {
                        let Some(minute) = minutes.get_mut(d * MINUTES + m) else { break };
                        match access {
                            ReadWrite::Read => minute.read_units += units,
                            ReadWrite::Write => minute.write_units += units,
                        }
                    }
                }
            }
            Series { resource: resource.to_string(), start, minutes, observed: observed.clone() }
        })
        .collect();
    let seen = observed.iter().filter(|o| **o).count();
    (series, Window { start, minutes: length, observed: seen })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::capacity::sources::{Origin, Side};
    use crate::server::store::usage::ReadWrite;

    fn figures(entries: &[(&str, ReadWrite, usize, f64)], observed: std::ops::Range<usize>) -> Figures {
        let mut figures = Figures { observed: vec![false; MINUTES], ..Figures::default() };
        for m in observed {
            figures.observed[m] = true;
        }
        for (resource, access, minute, n) in entries {
            let side = figures
                .units
                .entry((Resource::parse(resource).unwrap(), *access))
                .or_insert_with(|| Side { minutes: vec![0.0; MINUTES], origin: Origin::Stream });
            side.minutes[*minute] = *n;
        }
        figures
    }

    #[test]
    fn the_window_runs_over_every_day_to_the_end_with_observed_minutes_marked() {
        let first = NaiveDate::from_ymd_opt(2026, 11, 28).unwrap();
        let second = first.succ_opt().unwrap();
        let (a, b) = (
            figures(&[("orders", ReadWrite::Write, 1438, 60.0)], 1430..1440),
            figures(&[("orders/GSI2", ReadWrite::Read, 1, 30.0), ("orders", ReadWrite::Write, 0, 120.0)], 0..2),
        );
        let days = [Day { date: first, figures: &a }, Day { date: second, figures: &b }];
        let end: DateTime<Utc> = "2026-11-29T00:03:00Z".parse().unwrap();
        let (series, window) = series(&days, end);
        assert_eq!((window.minutes, window.observed), (1443, 12), "10 + 2 observed of 1440 + 3");
        assert!((window.coverage() - 12.0 / 1443.0).abs() < 1e-12);
        let orders = &series[0];
        assert_eq!((orders.resource.as_str(), orders.minutes.len()), ("orders", 1443));
        assert_eq!(orders.start, "2026-11-28T00:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!((orders.minutes[1438].write_units, orders.minutes[1440].write_units), (60.0, 120.0));
        assert_eq!(orders.observed_minutes(), 12);
        assert_eq!(series[1].minutes[1441].read_units, 30.0, "the same window for each resource");
        assert!(super::series(&[], end).0.is_empty());
    }
}

//! Where each capacity figure comes from, and the figures of one day as the
//! chosen source gives them. Pure: the store (or CloudWatch) read, this
//! decides.
//!
//! - **stream** (every engine): write units of every writer to the orders
//!   table and its indexes, priced from its stream by the consumer; this
//!   app's own transactions add the second half DynamoDB bills for them,
//!   which the stream cannot see (the interceptor recorded what they
//!   consumed: the stream priced half of it). Reads are in no stream: they
//!   are this app's own calls. The metrics table (no stream) is this app's
//!   own calls too: nothing else writes it.
//! - **cloudwatch** (AWS): what DynamoDB itself reports per table and index.
//! - **app calls**: what this app's processes consumed, as the SDK's
//!   interceptor recorded each answer.

use crate::server::store::CapacityDay;
use crate::server::store::cloudwatch::CloudWatchMinutes;
use crate::server::store::usage::ReadWrite;
use crate::server::store::usage::Resource;
use crate::server::store::usage::epoch_minute;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

const MINUTES: usize = 1440;

/// Where one series of figures comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Origin {
    /// Priced from the table's stream: every writer.
    Stream,
    /// DynamoDB's own figures, from CloudWatch.
    CloudWatch,
    /// This app's own calls, as DynamoDB answered them.
    AppCalls,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Stream => "stream",
            Origin::CloudWatch => "CloudWatch",
            Origin::AppCalls => "this app's calls",
        })
    }
}

/// One resource's units per minute of a day (1440), and where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    pub minutes: Vec<f64>,
    pub origin: Origin,
}

/// A day's units per table and index, read and write, each with its origin,
/// and the minutes its source observed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub units: BTreeMap<(Resource, ReadWrite), Side>,
    /// Minutes the write source observed (a minute not observed is unknown,
    /// not idle); 1440 entries, all false when none.
    pub observed: Vec<bool>,
}

impl Figures {
    pub fn side(&self, resource: &Resource, access: ReadWrite) -> Option<&Side> {
        self.units.get(&(resource.clone(), access))
    }

    pub fn observed_minutes(&self) -> usize {
        self.observed.iter().filter(|o| **o).count()
    }
}

/// The day's figures with the stream as the source of writes for
/// `streamed` (the orders table): every writer's writes as the consumer
/// priced them, plus half of what this app's own transactions consumed.
pub fn from_stream(day: &CapacityDay, streamed: &str) -> Figures {
    let mut units: BTreeMap<(Resource, ReadWrite), Side> = BTreeMap::new();
    let app = |minutes: &Vec<f64>| Side { minutes: minutes.clone(), origin: Origin::AppCalls };
    for ((resource, access), minutes) in &day.units {
        if *access == ReadWrite::Read || resource.table != streamed {
            units.insert((resource.clone(), *access), app(minutes));
        }
    }
    let streamed_resources = day.stream.keys().chain(day.transactional.keys()).filter(|r| r.table == streamed);
    for resource in streamed_resources {
        let mut minutes = day.stream.get(resource).cloned().unwrap_or_else(|| vec![0.0; MINUTES]);
        if let Some(transactional) = day.transactional.get(resource) {
            // DynamoDB bills a transactional write twice; the stream priced
            // it once, the interceptor saw both halves.
            for (minute, units) in minutes.iter_mut().zip(transactional) {
                *minute += units / 2.0;
            }
        }
        units.insert((resource.clone(), ReadWrite::Write), Side { minutes, origin: Origin::Stream });
    }
    // Every resource says where both its sides come from, consumed or not.
    let resources: Vec<Resource> = units.keys().map(|(resource, _)| resource.clone()).collect();
    for resource in resources {
        let write_origin = if resource.table == streamed { Origin::Stream } else { Origin::AppCalls };
        for (access, origin) in [(ReadWrite::Read, Origin::AppCalls), (ReadWrite::Write, write_origin)] {
            units.entry((resource.clone(), access)).or_insert_with(|| Side { minutes: vec![0.0; MINUTES], origin });
        }
    }
    let observed = if day.observed.len() == MINUTES { day.observed.clone() } else { vec![false; MINUTES] };
    Figures { units, observed }
}

/// Minutes CloudWatch takes to publish a minute's datapoints: the newest
/// ones are not yet observed.
pub const CLOUDWATCH_LAG_MINUTES: i64 = 2;

/// One day's figures from DynamoDB's own CloudWatch metrics, and its
/// throttles as CloudWatch counts them (by metric, and by operation for
/// `ThrottledRequests`). Every minute since the table was created up to
/// CloudWatch's lag before `now` is observed: a minute without a datapoint
/// had no traffic.
pub fn from_cloudwatch(
    read: &CloudWatchMinutes,
    day: NaiveDate,
    now: DateTime<Utc>,
) -> (Figures, BTreeMap<(String, String), Vec<u64>>) {
    let day_start = epoch_minute(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    let first = epoch_minute(read.start);
    let created = read.created.map_or(i64::MIN, epoch_minute);
    let last = epoch_minute(now) - CLOUDWATCH_LAG_MINUTES;
    let observed: Vec<bool> = (0..MINUTES as i64).map(|m| day_start + m >= created && day_start + m < last).collect();
    let at = |series: &Vec<Option<f64>>, m: usize| {
        let index = day_start + m as i64 - first;
        (index >= 0).then(|| series.get(index as usize).copied().flatten()).flatten()
    };
    let mut units = BTreeMap::new();
    let mut throttles = BTreeMap::new();
    for (key, series) in &read.series {
        let minutes: Vec<f64> = (0..MINUTES).map(|m| at(series, m).unwrap_or(0.0)).collect();
        let access = match key.name {
            "ConsumedReadCapacityUnits" => Some(ReadWrite::Read),
            "ConsumedWriteCapacityUnits" => Some(ReadWrite::Write),
            _ => None,
        };
        if let Some(access) = access {
            units.insert((key.resource.clone(), access), Side { minutes, origin: Origin::CloudWatch });
            continue;
        }
        if key.name.ends_with("ThrottleEvents") || key.name == "ThrottledRequests" {
            let reason = match key.operation {
                Some(operation) => format!("{} ({operation})", key.name),
                None => key.name.to_string(),
            };
            let place = match &key.resource.index {
                Some(index) => format!("table/{}/index/{index}", key.resource.table),
                None => format!("table/{}", key.resource.table),
            };
            let counts: Vec<u64> = minutes.iter().map(|n| n.max(0.0).round() as u64).collect();
            if counts.iter().any(|n| *n > 0) {
                throttles.insert((reason, place), counts);
            }
        }
    }
    (Figures { units, observed }, throttles)
}

/// The capacity provisioned for each table and index at its latest
/// datapoint (none when on demand).
pub fn provisioned(read: &CloudWatchMinutes) -> BTreeMap<(Resource, ReadWrite), f64> {
    read.series
        .iter()
        .filter_map(|(key, series)| {
            let access = match key.name {
                "ProvisionedReadCapacityUnits" => ReadWrite::Read,
                "ProvisionedWriteCapacityUnits" => ReadWrite::Write,
                _ => return None,
            };
            let latest = series.iter().rev().flatten().next()?;
            Some(((key.resource.clone(), access), *latest))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn series(minute: usize, units: f64) -> Vec<f64> {
        let mut series = vec![0.0; MINUTES];
        series[minute] = units;
        series
    }

    #[test]
    fn writes_of_the_streamed_table_come_from_the_stream_reads_and_other_tables_from_the_app() {
        let orders = Resource::table("orders");
        let gsi2 = Resource::index("orders", "GSI2");
        let metrics = Resource::table("metrics");
        let mut day = CapacityDay { date: NaiveDate::from_ymd_opt(2026, 11, 29).unwrap(), ..CapacityDay::default() };
        // The app created one order in a transaction (2 units on each, as
        // DynamoDB bills it) and another writer put 300 orders.
        day.units.insert((orders.clone(), ReadWrite::Write), series(600, 2.0));
        day.units.insert((orders.clone(), ReadWrite::Read), series(600, 0.5));
        day.units.insert((metrics.clone(), ReadWrite::Write), series(600, 6.0));
        day.transactional.insert(orders.clone(), series(600, 2.0));
        day.transactional.insert(gsi2.clone(), series(600, 2.0));
        day.transactional.insert(metrics.clone(), series(600, 6.0));
        day.stream.insert(orders.clone(), series(600, 301.0));
        day.stream.insert(gsi2.clone(), series(600, 301.0));
        let figures = from_stream(&day, "orders");
        let write = figures.side(&orders, ReadWrite::Write).unwrap();
        assert_eq!((write.minutes[600], write.origin), (302.0, Origin::Stream), "301 priced once + the second unit");
        assert_eq!(figures.side(&gsi2, ReadWrite::Write).unwrap().minutes[600], 302.0);
        let read = figures.side(&orders, ReadWrite::Read).unwrap();
        assert_eq!((read.minutes[600], read.origin), (0.5, Origin::AppCalls));
        let metrics_write = figures.side(&metrics, ReadWrite::Write).unwrap();
        assert_eq!((metrics_write.minutes[600], metrics_write.origin), (6.0, Origin::AppCalls), "not streamed");
        assert_eq!(figures.observed_minutes(), 0, "nothing observed: every minute unknown");
    }

    #[test]
    fn cloudwatch_minutes_are_observed_from_the_tables_creation_to_its_lag() {
        use crate::server::store::cloudwatch::metric_keys;
        let keys = metric_keys("orders", "metrics");
        let start: DateTime<Utc> = "2026-11-29T00:00:00Z".parse().unwrap();
        let mut read = CloudWatchMinutes {
            start,
            minutes: 1440,
            created: Some("2026-11-29T10:00:00Z".parse().unwrap()),
            ..Default::default()
        };
        let write = keys
            .iter()
            .position(|k| k.name == "ConsumedWriteCapacityUnits" && k.resource.index.as_deref() == Some("GSI2"))
            .unwrap();
        let throttled =
            keys.iter().position(|k| k.name == "ThrottledRequests" && k.operation == Some("PutItem")).unwrap();
        read.add(&keys, &format!("q{write}"), "2026-11-29T10:15:00Z".parse().unwrap(), 300.0);
        read.add(&keys, &format!("q{throttled}"), "2026-11-29T10:15:00Z".parse().unwrap(), 7.0);
        let now: DateTime<Utc> = "2026-11-29T12:00:30Z".parse().unwrap();
        let (figures, throttles) = from_cloudwatch(&read, start.date_naive(), now);
        let side = figures.side(&Resource::index("orders", "GSI2"), ReadWrite::Write).unwrap();
        assert_eq!((side.minutes[615], side.origin), (300.0, Origin::CloudWatch));
        // 10:00 to 11:58 (12:00 less the 2 minutes CloudWatch takes).
        assert_eq!(figures.observed_minutes(), 118);
        assert_eq!(throttles[&("ThrottledRequests (PutItem)".to_string(), "table/orders".to_string())][615], 7);
    }
}

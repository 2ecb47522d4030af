//! The capacity page's figures (`model::CapacityReport`) from what the store
//! read: the day's units and throttles, its shard heat, its orders per
//! minute, with the planner and the advisor run over them. Pure: no store
//! access, no clock.

use super::advisor::{self, Prices, Verdict};
use super::costs;
use super::history::{self, Window};
use super::planner::{self, PlanInput};
use super::sources::Figures;
use crate::model::{
    AccessUse, AdviceWindow, CapacityReport, HeatMinute, HotKeyMinute, HotShard, ModeAdvice, RecentUnits,
    ResourceUnits, ShardHeat, ShardPlan, ThrottleCount, UnitsMinute, Writer,
};
use crate::server::rules::PARTITION_WRITE_UNITS;
use crate::server::store::config::CapacitySource;
use crate::server::store::error::Throttle;
use crate::server::store::usage::ReadWrite;
use crate::server::store::usage::{Resource, Tally};
use crate::server::store::{CapacityDay, HeatDay};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// The share of a partition's write limit above which the page warns.
pub const WARN_ABOVE: f64 = 0.8;

/// What the report is made of.
pub struct Inputs<'a> {
    /// The day's throttles and hot keys as the store holds them.
    pub capacity: &'a CapacityDay,
    /// The day's units, as the source gives them.
    pub figures: &'a Figures,
    pub source: CapacitySource,
    /// The advice over its window (`advice`), worked out by the caller.
    pub advice: &'a Advice,
    pub heat: &'a HeatDay,
    /// Orders of the day that entered PENDING, per minute (1440).
    pub entered_per_minute: &'a [i64],
    /// The day's recorded shard count.
    pub current_shards: u32,
    /// This process's last seconds (`Usage::recent`), empty for another day.
    pub recent: &'a [(i64, Tally)],
    pub as_of: DateTime<Utc>,
}

/// Hot keys listed per table and index for a day.
const HOT_KEYS_LISTED: usize = 10;

pub fn report(inputs: &Inputs<'_>) -> CapacityReport {
    CapacityReport {
        date: inputs.capacity.date,
        as_of: inputs.as_of,
        source: inputs.source.to_string(),
        resources: resources(inputs.figures),
        throttles: throttles(inputs.capacity),
        heat: heat(inputs.heat, units_per_write()),
        plan: plan(inputs.entered_per_minute, inputs.current_shards),
        advice: inputs.advice.verdicts.clone(),
        advice_window: inputs.advice.window.clone(),
        hot_keys: hot_keys(inputs.capacity),
        recent: recent(inputs.recent),
        consumer_mode: None,
    }
}

/// The advisor's verdicts over a window, as the page and the API show them.
#[derive(Clone, Debug, PartialEq)]
pub struct Advice {
    pub verdicts: Vec<ModeAdvice>,
    pub window: AdviceWindow,
}

/// The advisor over a window of days (oldest first) ending at `end`.
pub fn advice(days: &[history::Day<'_>], end: DateTime<Utc>, source: CapacitySource, prices: &Prices) -> Advice {
    let (series, window) = history::series(days, end);
    let verdicts = series
        .iter()
        .filter_map(|series| match advisor::recommend(series, prices) {
            Ok(verdict) => Some(mode_advice(&verdict, series)),
            Err(err) => {
                tracing::warn!(resource = series.resource, error = %err, "no advice");
                None
            }
        })
        .collect();
    Advice { verdicts, window: advice_window(&window, days.len() as u32, source) }
}

fn advice_window(window: &Window, days: u32, source: CapacitySource) -> AdviceWindow {
    AdviceWindow {
        source: source.to_string(),
        days,
        start: window.start,
        minutes: window.minutes,
        observed_minutes: window.observed,
        coverage: window.coverage(),
    }
}

/// The day's hot keys: per table and index, the key-minutes with the most
/// units, most first.
fn hot_keys(capacity: &CapacityDay) -> Vec<HotKeyMinute> {
    let mut all: Vec<HotKeyMinute> = capacity
        .hot
        .iter()
        .flat_map(|(minute, keys)| {
            keys.iter().map(move |(resource, key, units)| HotKeyMinute {
                resource: resource.clone(),
                key: key.clone(),
                minute: *minute,
                units: *units,
                share: *units as f64 / 60.0 / PARTITION_WRITE_UNITS,
            })
        })
        .collect();
    all.sort_by(|a, b| {
        (&a.resource, std::cmp::Reverse(a.units), a.minute, &a.key).cmp(&(
            &b.resource,
            std::cmp::Reverse(b.units),
            b.minute,
            &b.key,
        ))
    });
    let mut kept: Vec<HotKeyMinute> = Vec::new();
    for hot in all {
        if kept.iter().filter(|k| k.resource == hot.resource).count() < HOT_KEYS_LISTED {
            kept.push(hot);
        }
    }
    kept
}

/// Bytes of the typical order's GSI2 entry (the planner's sizing; the
/// shard number's digits do not change it).
fn typical_entry_bytes(shards: u32) -> Option<u32> {
    planner::gsi2_entry_bytes(&planner::typical_order(), shards).ok()
}

/// Write units of one GSI2 entry of a typical order.
fn units_per_write() -> u32 {
    typical_entry_bytes(1).map_or(1, |bytes| bytes.div_ceil(1024).max(1))
}

fn resources(figures: &Figures) -> Vec<ResourceUnits> {
    let names: BTreeSet<&Resource> = figures.units.keys().map(|(r, _)| r).collect();
    names
        .into_iter()
        .map(|resource| {
            let side = |access| figures.side(resource, access);
            let source = |access| side(access).map_or("-".to_string(), |s| s.origin.to_string());
            let (read_source, write_source) = (source(ReadWrite::Read), source(ReadWrite::Write));
            let (read, write) = (side(ReadWrite::Read).map(|s| &s.minutes), side(ReadWrite::Write).map(|s| &s.minutes));
            let at = |series: Option<&Vec<f64>>, minute: usize| series.map_or(0.0, |s| s[minute]);
            let minutes = (0..1440)
                .map(|m| UnitsMinute { minute: m as u16, read: at(read, m), write: at(write, m) })
                .filter(|m| m.read > 0.0 || m.write > 0.0)
                .collect();
            let total = |series: Option<&Vec<f64>>| series.map_or(0.0, |s| s.iter().sum());
            ResourceUnits {
                resource: resource.to_string(),
                table: resource.table.clone(),
                index: resource.index.clone(),
                minutes,
                read_total: total(read),
                write_total: total(write),
                read_source,
                write_source,
            }
        })
        .collect()
}

fn throttles(capacity: &CapacityDay) -> Vec<ThrottleCount> {
    let mut counts: Vec<ThrottleCount> = capacity
        .throttles
        .iter()
        .map(|((reason, resource), per_minute)| {
            let throttle = Throttle { reason: reason.clone(), resource: resource.clone() };
            ThrottleCount {
                reason: reason.clone(),
                place: throttle.place(),
                resource: resource.clone(),
                total: per_minute.iter().sum(),
                minutes: per_minute.iter().enumerate().filter(|(_, n)| **n > 0).map(|(m, n)| (m as u16, *n)).collect(),
            }
        })
        .collect();
    counts.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.reason.cmp(&b.reason)));
    counts
}

fn heat(day: &HeatDay, units_per_write: u32) -> ShardHeat {
    let minutes: Vec<HeatMinute> = day
        .writes
        .iter()
        .enumerate()
        .filter(|(_, shards)| shards.iter().any(|n| *n > 0))
        .map(|(minute, shards)| HeatMinute { minute: minute as u16, writes: shards.clone() })
        .collect();
    // Ties go to the earliest minute and the lowest shard.
    let hottest = minutes
        .iter()
        .flat_map(|m| m.writes.iter().enumerate().map(move |(shard, n)| (*n, m.minute, shard as u32)))
        .fold(None::<(u64, u16, u32)>, |best, candidate| match best {
            Some(best) if best.0 >= candidate.0 => Some(best),
            _ => Some(candidate),
        })
        .map(|(writes, minute, shard)| {
            let units_per_second = writes as f64 * f64::from(units_per_write) / 60.0;
            let utilisation = units_per_second / PARTITION_WRITE_UNITS;
            HotShard { minute, shard, writes, units_per_second, utilisation, warning: utilisation > WARN_ABOVE }
        });
    ShardHeat {
        shards: day.shards,
        minutes,
        units_per_write,
        partition_limit: PARTITION_WRITE_UNITS,
        warn_above: WARN_ABOVE,
        hottest,
    }
}

/// The planner at the day's busiest minute of orders entering PENDING,
/// sized by writer as a Sales plan's checks size it (`planner::plan` over
/// the GSI2 entry `costs` computes): as another service writes the orders
/// (the plans' default, plain writes), beside what this console's
/// transactions would need.
fn plan(entered_per_minute: &[i64], current_shards: u32) -> Option<ShardPlan> {
    let (minute, &peak) = entered_per_minute.iter().enumerate().max_by_key(|(m, n)| (**n, std::cmp::Reverse(*m)))?;
    if peak <= 0 {
        return None;
    }
    let peak_orders_per_second = peak as f64 / 60.0;
    let index_item_bytes = typical_entry_bytes(current_shards.max(1))?;
    let sized = |writer| planner::plan(&PlanInput::for_writer(peak_orders_per_second, index_item_bytes, writer)).ok();
    let writer = Writer::default();
    let plan = sized(writer)?;
    let console = sized(Writer::Console)?;
    let mut steps = vec![format!("Sized as the orders' writer: {}.", writer.describe())];
    steps.extend(plan.steps);
    steps.push(format!("Through this console instead ({}): {} shards.", Writer::Console.describe(), console.shards));
    Some(ShardPlan {
        peak_orders_per_second,
        peak_minute: minute as u16,
        index_item_bytes,
        shards: plan.shards,
        capped: plan.capped,
        current_shards,
        steps,
        writer,
        source: format!("{}; the orders' writer assumed: {}", costs::COMPUTED, writer.describe()),
        console_shards: console.shards,
    })
}

fn mode_advice(verdict: &Verdict, series: &advisor::Series) -> ModeAdvice {
    let side = |u: &advisor::Utilisation| AccessUse {
        average_per_second: u.average_per_second,
        peak_per_second: u.peak_per_second,
        average_utilisation: u.average_utilisation,
    };
    match verdict {
        Verdict::NotEnoughHistory { resource, observed } => ModeAdvice {
            resource: resource.clone(),
            mode: "none".into(),
            scheduled_actions: Vec::new(),
            minutes: *observed,
            on_demand_monthly: 0.0,
            provisioned_monthly: 0.0,
            read: AccessUse { average_per_second: 0.0, peak_per_second: 0.0, average_utilisation: 0.0 },
            write: AccessUse { average_per_second: 0.0, peak_per_second: 0.0, average_utilisation: 0.0 },
            reason: Verdict::not_enough_history(*observed),
        },
        Verdict::Advice(advice) => {
            let resource = Resource::parse(&series.resource);
            let (table, index) =
                resource.as_ref().map_or((series.resource.as_str(), None), |r| (r.table.as_str(), r.index.as_deref()));
            ModeAdvice {
                resource: advice.resource.clone(),
                mode: advice.mode.to_string(),
                scheduled_actions: advice
                    .schedule
                    .iter()
                    .flat_map(|floor| floor.put_scheduled_actions(table, index))
                    .map(|json| serde_json::to_string_pretty(&json).unwrap_or_default())
                    .collect(),
                minutes: advice.minutes,
                on_demand_monthly: advice.on_demand_monthly,
                provisioned_monthly: advice.provisioned_monthly,
                read: side(&advice.read),
                write: side(&advice.write),
                reason: advice.reason.clone(),
            }
        }
    }
}

fn recent(seconds: &[(i64, Tally)]) -> Vec<RecentUnits> {
    let names: BTreeSet<&Resource> = seconds.iter().flat_map(|(_, t)| t.units.keys().map(|(r, _)| r)).collect();
    names
        .into_iter()
        .map(|resource| {
            let of = |access| {
                seconds.iter().map(|(_, t)| t.units.get(&(resource.clone(), access)).copied().unwrap_or(0.0)).collect()
            };
            RecentUnits { resource: resource.to_string(), read: of(ReadWrite::Read), write: of(ReadWrite::Write) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn date() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 29).unwrap()
    }

    #[test]
    fn the_hottest_shard_minute_is_measured_against_the_partition_limit() {
        let mut writes = vec![vec![0u64; 4]; 1440];
        writes[600][2] = 30;
        writes[601][1] = 49_000;
        writes[602][3] = 49_000;
        let heat = heat(&HeatDay { date: date(), shards: 4, writes }, 1);
        assert_eq!(heat.minutes.len(), 3);
        let hot = heat.hottest.unwrap();
        assert_eq!((hot.minute, hot.shard, hot.writes), (601, 1, 49_000), "the earliest of a tie");
        // 49,000 writes in a minute: 816.7 WCU/s of 1,000, above 80%.
        assert!((hot.units_per_second - 816.666).abs() < 0.01);
        assert!(hot.warning);
        let mut calm = vec![vec![0u64; 1]; 1440];
        calm[0][0] = 48_000;
        assert!(
            !super::heat(&HeatDay { date: date(), shards: 1, writes: calm }, 1).hottest.unwrap().warning,
            "exactly 80%"
        );
    }

    fn sale_plan() -> crate::model::SalePlan {
        serde_json::from_value(serde_json::json!({
            "name": "gala", "peakOrdersPerSecond": 1.0, "start": "2026-12-08T09:00:00Z",
            "rampMinutes": 10, "holdMinutes": 30, "decayMinutes": 20, "itemBytes": 700,
            "updatedAt": "2026-12-07T09:00:00Z", "updatedBy": "alice"
        }))
        .unwrap()
    }

    #[test]
    fn the_plan_is_for_the_busiest_minute() {
        let mut entered = vec![0i64; 1440];
        entered[615] = 60_000;
        let plan = plan(&entered, 10).unwrap();
        assert_eq!((plan.peak_minute, plan.peak_orders_per_second), (615, 1000.0));
        // Another service's plain writes: 1,000 orders/s × 2 index writes ×
        // 1 WCU × 1.5 headroom / 1,000 = 3 shards; through the console each
        // is doubled in a transaction: 6. As a Sales plan sizes them.
        assert_eq!((plan.writer, plan.shards, plan.console_shards), (Writer::Service, 3, 6));
        let sale = |writer| {
            crate::server::capacity::readiness::shards_needed(
                &crate::model::SalePlan { peak_orders_per_second: 1000.0, writer, ..sale_plan() },
                plan.index_item_bytes,
            )
            .unwrap()
        };
        assert_eq!((sale(Writer::Service), sale(Writer::Console)), (plan.shards, plan.console_shards));
        assert!(plan.source.starts_with("assumed: computed from the key design"), "{}", plan.source);
        assert!(plan.steps[0].contains("another service"), "{:?}", plan.steps);
        assert!(plan.steps.iter().any(|s| s.starts_with("shards = ceil(")), "{:?}", plan.steps);
        assert!(super::plan(&[0; 1440], 10).is_none(), "no orders, no plan");
    }

    #[test]
    fn units_and_throttles_are_listed_per_resource_and_reason() {
        let mut capacity = CapacityDay { date: date(), ..CapacityDay::default() };
        let mut writes = vec![0.0; 1440];
        writes[10] = 120.0;
        capacity.units.insert((Resource::index("orders", "GSI2"), ReadWrite::Write), writes);
        let mut reads = vec![0.0; 1440];
        reads[11] = 0.5;
        capacity.units.insert((Resource::table("orders"), ReadWrite::Read), reads);
        let mut throttled = vec![0u64; 1440];
        throttled[10] = 7;
        capacity
            .throttles
            .insert(("IndexWriteKeyRangeThroughputExceeded".into(), "table/orders/index/GSI2".into()), throttled);
        let listed = resources(&crate::server::capacity::sources::from_stream(&capacity, "none-streamed"));
        assert_eq!(listed.iter().map(|r| r.resource.as_str()).collect::<Vec<_>>(), ["orders", "orders/GSI2"]);
        assert_eq!(listed[1].minutes, vec![UnitsMinute { minute: 10, read: 0.0, write: 120.0 }]);
        assert_eq!((listed[0].read_total, listed[1].write_total), (0.5, 120.0));
        let counts = throttles(&capacity);
        assert_eq!((counts[0].place.as_str(), counts[0].total), ("GSI2", 7));
        assert_eq!(counts[0].minutes, vec![(10, 7)]);
        assert_eq!(
            (listed[0].read_source.as_str(), listed[1].write_source.as_str()),
            ("this app's calls", "this app's calls")
        );
        let figures = crate::server::capacity::sources::from_stream(&capacity, "none-streamed");
        let days = [history::Day { date: date(), figures: &figures }];
        let end = date().and_hms_opt(12, 0, 0).unwrap().and_utc();
        let advice = advice(&days, end, CapacitySource::Stream, &Prices::default());
        assert_eq!(advice.verdicts.len(), 2, "one verdict per table and index");
        assert_eq!(advice.verdicts[1].mode, "none");
        assert_eq!(
            advice.verdicts[1].reason,
            "not enough history: 0 minutes observed; choose after at least a day, better two to four weeks"
        );
        assert_eq!((advice.window.minutes, advice.window.observed_minutes), (720, 0));
    }

    #[test]
    fn hot_keys_are_listed_per_resource_most_first() {
        let mut capacity = CapacityDay { date: date(), ..CapacityDay::default() };
        capacity.hot.insert(
            600,
            vec![("orders/GSI1".into(), "CUSTOMER#bot".into(), 30_000), ("orders".into(), "ORDER#1".into(), 12)],
        );
        capacity.hot.insert(601, vec![("orders/GSI1".into(), "CUSTOMER#bot".into(), 45_000)]);
        let hot = hot_keys(&capacity);
        let listed: Vec<(&str, u16, u64)> = hot.iter().map(|h| (h.resource.as_str(), h.minute, h.units)).collect();
        assert_eq!(listed, [("orders", 600, 12), ("orders/GSI1", 601, 45_000), ("orders/GSI1", 600, 30_000)]);
        assert!((hot[1].share - 0.75).abs() < 1e-12, "45,000 a minute is 750/s of 1,000");
    }
}

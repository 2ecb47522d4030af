//! The capacity-mode advisor: from the capacity one resource (a table or one
//! GSI) consumed, minute by minute, what it would have cost on demand and
//! what provisioned with auto scaling, and which mode is cheaper.
//!
//! The provisioned side replays DynamoDB auto scaling the way AWS's
//! capacity-mode evaluation models it ("Evaluate your table's capacity mode",
//! Amazon DynamoDB Developer Guide), for reads and writes separately:
//!
//! - Utilisation of a minute is its consumption per second (units / 60)
//!   over the capacity provisioned during that minute.
//! - Target utilisation is 70%: the capacity auto scaling wants for a minute
//!   is its consumption per second / 0.70, rounded up to whole units, at
//!   least 1. The first minute starts at that capacity.
//! - Scale out once utilisation has been above 70% (strictly) for 2
//!   consecutive minutes.
//! - Scale in once utilisation has been "at least 20% below the target" for
//!   15 consecutive minutes. We read the 20% as percentage points of
//!   utilisation, 70% − 20 = 50%, and "at least" as inclusive: a minute at
//!   or below 50% counts (not 80% of the target, which would be 56%).
//! - Decreases are limited per UTC day ("Service, account, and table quotas
//!   in Amazon DynamoDB", provisioned throughput decreases): the first 4 at
//!   any time, then one more whenever the previous decrease is at least 60
//!   minutes old. A decrease the quota refuses is retried every following
//!   minute that still qualifies.
//! - A new capacity applies from the minute after the decision.
//! - A minute consuming more per second than its provisioned capacity is
//!   counted as throttled: with provisioned capacity those requests would
//!   have failed. Burst capacity is not modelled, so this is pessimistic.
//!
//! - A minute nobody observed is left out: it costs nothing either way and
//!   counts towards nothing; the state of auto scaling carries over it, and
//!   its streaks (minutes above or below) start again after it.
//! - Scheduled floor raises: when provisioned is cheaper but auto scaling
//!   would have throttled at the start of a burst (the month-end batch), the
//!   advisor tries an Application Auto Scaling scheduled action that raises
//!   the minimum capacity to what the burst wants from 10 minutes before it
//!   to its end, replays the minutes with that floor, and recommends it
//!   when nothing throttles and it is still cheaper.
//! - No recommendation on less than a day of observed minutes (`recommend`).
//!
//! Costs: on demand, every consumed unit as one request unit (write units at
//! the write price, read units at the read price); provisioned, every minute's
//! capacity at the unit-hour price / 60. Monthly figures scale the simulated
//! span to a 30-day month: cost × (30 × 1440 minutes) / minutes simulated.

mod autoscaling;
mod floor;
mod prices;

pub use floor::ScheduledFloor;
pub use prices::{Prices, PricesError};

use crate::server::store::usage::ReadWrite;
#[cfg(test)]
use autoscaling::simulate;
use autoscaling::simulate_with;
use chrono::{DateTime, Timelike, Utc};
use floor::{RAISE_AHEAD_MINUTES, with_floor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Auto scaling's target utilisation, in percent, as the template sets it.
pub const TARGET_PERCENT: f64 = crate::server::rules::AUTO_SCALING_TARGET_PERCENT;
const MINUTES_PER_DAY: usize = 24 * 60;
const MONTH_MINUTES: f64 = 30.0 * MINUTES_PER_DAY as f64;

/// Capacity units consumed during one minute (the sum over the minute, as
/// CloudWatch's `Sum` of `ConsumedRead/WriteCapacityUnits` at a 60 s period).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Minute {
    pub read_units: f64,
    pub write_units: f64,
}

/// Consecutive minutes of one resource, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// The table, or `table/index`, the figures are for.
    pub resource: String,
    /// When the first minute began. Its time of day places the decrease
    /// quota's UTC days; its date, a scheduled action.
    pub start: DateTime<Utc>,
    pub minutes: Vec<Minute>,
    /// Which minutes were observed (the same length as `minutes`); empty:
    /// every one. An unobserved minute is unknown, not idle.
    #[serde(default)]
    pub observed: Vec<bool>,
}

impl Series {
    fn is_observed(&self, minute: usize) -> bool {
        self.observed.get(minute).copied().unwrap_or(self.observed.is_empty())
    }

    /// Minutes observed.
    pub fn observed_minutes(&self) -> usize {
        (0..self.minutes.len()).filter(|m| self.is_observed(*m)).count()
    }
}

/// Observed minutes below which the advisor recommends no mode: a day.
pub const MIN_OBSERVED_MINUTES: usize = MINUTES_PER_DAY;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    OnDemand,
    Provisioned,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::OnDemand => "on-demand",
            Mode::Provisioned => "provisioned",
        })
    }
}

/// One side (reads or writes) of a resource over the simulated span.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Utilisation {
    pub average_per_second: f64,
    pub peak_per_second: f64,
    /// Consumed ÷ provisioned over the whole span, of the capacity the
    /// simulation ended up paying for (0 to 1; above 1 only when throttled).
    pub average_utilisation: f64,
    /// Mean provisioned units over the span.
    pub provisioned_average: f64,
    pub on_demand_monthly: f64,
    pub provisioned_monthly: f64,
    /// Minutes that consumed more than the capacity provisioned for them.
    pub throttled_minutes: u32,
    pub scale_outs: u32,
    pub scale_ins: u32,
    /// The least and the most capacity auto scaling held (a scheduled
    /// floor included).
    pub provisioned_min: u32,
    pub provisioned_max: u32,
}

/// How far above the most auto scaling held its maximum is set: room for
/// growth, and the template's near-ceiling alarm fires at 80% of it, before
/// it binds.
pub const MAX_HEADROOM: u32 = 2;

impl Utilisation {
    /// Auto scaling's minimum and maximum for this side, from the replay:
    /// the least it held, and `MAX_HEADROOM` times the most.
    pub fn scaling_range(&self) -> (u32, u32) {
        let min = self.provisioned_min.max(1);
        (min, (self.provisioned_max * MAX_HEADROOM).max(min))
    }
}

/// The mode of a table with its indexes, from the advice of each (they
/// share their table's mode): provisioned when that costs less in all and
/// none of them would throttle under auto scaling, its floors included.
pub fn table_mode(advices: &[&Advice]) -> Mode {
    let throttles = |a: &Advice| a.read.throttled_minutes + a.write.throttled_minutes > 0;
    let provisioned: f64 = advices.iter().map(|a| a.provisioned_monthly).sum();
    let on_demand: f64 = advices.iter().map(|a| a.on_demand_monthly).sum();
    if !advices.is_empty() && !advices.iter().any(|a| throttles(a)) && provisioned < on_demand {
        Mode::Provisioned
    } else {
        Mode::OnDemand
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    pub resource: String,
    pub mode: Mode,
    /// Minutes simulated; the monthly figures scale them to 30 days.
    pub minutes: usize,
    pub on_demand_monthly: f64,
    pub provisioned_monthly: f64,
    pub read: Utilisation,
    pub write: Utilisation,
    /// One paragraph naming the figures behind `mode`.
    pub reason: String,
    /// The scheduled floor raises provisioned needs (empty when auto scaling
    /// alone follows every ramp, or on demand is advised).
    pub schedule: Vec<ScheduledFloor>,
}

/// What the advisor says of one resource over a window.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Advice(Box<Advice>),
    /// Less than `MIN_OBSERVED_MINUTES` observed: no mode recommended.
    NotEnoughHistory {
        resource: String,
        observed: usize,
    },
}

impl Verdict {
    /// Why no mode is recommended, in words.
    pub fn not_enough_history(observed: usize) -> String {
        let amount = if observed == 1 { "1 minute".to_string() } else { format!("{observed} minutes") };
        format!("not enough history: {amount} observed; choose after at least a day, better two to four weeks")
    }
}

/// `advise`, but only on at least a day of observed minutes: the decision
/// hinges on measured utilisation over weeks, not on a few minutes.
pub fn recommend(series: &Series, prices: &Prices) -> Result<Verdict, AdviceError> {
    let observed = series.observed_minutes();
    if observed < MIN_OBSERVED_MINUTES {
        prices.check("the prices given")?;
        return Ok(Verdict::NotEnoughHistory { resource: series.resource.clone(), observed });
    }
    Ok(Verdict::Advice(Box::new(advise(series, prices)?)))
}

#[derive(Debug, thiserror::Error)]
pub enum AdviceError {
    #[error("no consumed capacity for {resource}: there is nothing to advise on")]
    NoData { resource: String },
    #[error("{resource}, minute {minute}: {access} units {value} are not a number of zero or more")]
    BadMinute { resource: String, minute: usize, access: ReadWrite, value: f64 },
    #[error(transparent)]
    Prices(#[from] PricesError),
}

/// Compare on-demand with provisioned capacity under auto scaling for one
/// resource, and recommend the cheaper (on-demand on a tie: nothing to
/// manage). Costs are monthly: the span scaled to 30 days.
pub fn advise(series: &Series, prices: &Prices) -> Result<Advice, AdviceError> {
    prices.check("the prices given")?;
    if series.observed_minutes() == 0 {
        return Err(AdviceError::NoData { resource: series.resource.clone() });
    }
    let reads = units(series, ReadWrite::Read)?;
    let writes = units(series, ReadWrite::Write)?;
    let first_minute_of_day = (series.start.num_seconds_from_midnight() / 60) as usize;
    let read = account(&reads, first_minute_of_day, prices, ReadWrite::Read, &[]);
    let write = account(&writes, first_minute_of_day, prices, ReadWrite::Write, &[]);
    let on_demand_monthly = read.on_demand_monthly + write.on_demand_monthly;
    let provisioned_monthly = read.provisioned_monthly + write.provisioned_monthly;
    // Cheaper is not enough: a mode that would have refused requests (auto
    // scaling lagging a sale) is what the redesign exists to avoid.
    let throttles = read.throttled_minutes + write.throttled_minutes > 0;
    let mode = if provisioned_monthly < on_demand_monthly && !throttles { Mode::Provisioned } else { Mode::OnDemand };
    let mut advice = Advice {
        resource: series.resource.clone(),
        mode,
        minutes: series.observed_minutes(),
        on_demand_monthly,
        provisioned_monthly,
        read,
        write,
        reason: String::new(),
        schedule: Vec::new(),
    };
    if throttles && provisioned_monthly < on_demand_monthly {
        with_floor(&mut advice, series, &reads, &writes, first_minute_of_day, prices);
    }
    advice.reason = reason(&advice, prices);
    Ok(advice)
}

/// One side's units per minute, each a finite number of zero or more, and
/// `None` for a minute not observed.
fn units(series: &Series, access: ReadWrite) -> Result<Vec<Option<f64>>, AdviceError> {
    series
        .minutes
        .iter()
        .enumerate()
        .map(|(minute, m)| {
            let value = match access {
                ReadWrite::Read => m.read_units,
                ReadWrite::Write => m.write_units,
            };
            if !series.is_observed(minute) {
                Ok(None)
            } else if value.is_finite() && value >= 0.0 {
                Ok(Some(value))
            } else {
                Err(AdviceError::BadMinute { resource: series.resource.clone(), minute, access, value })
            }
        })
        .collect()
}

/// Simulate one side (with a minimum capacity per minute, `floor`, where
/// given) and price both modes for it, over its observed minutes.
fn account(
    units: &[Option<f64>],
    first_minute_of_day: usize,
    prices: &Prices,
    access: ReadWrite,
    floor: &[u32],
) -> Utilisation {
    let simulation = simulate_with(units, first_minute_of_day, floor);
    let minutes = (units.iter().flatten().count() as f64).max(1.0);
    let consumed: f64 = units.iter().flatten().sum();
    // Every minute holds at least 1 unit, so this is never zero.
    let paid_unit_minutes: f64 = simulation.provisioned.iter().map(|&p| f64::from(p)).sum::<f64>().max(1.0);
    let to_month = MONTH_MINUTES / minutes;
    Utilisation {
        average_per_second: consumed / (60.0 * minutes),
        peak_per_second: units.iter().flatten().copied().fold(0.0, f64::max) / 60.0,
        average_utilisation: consumed / (60.0 * paid_unit_minutes),
        provisioned_average: paid_unit_minutes / minutes,
        on_demand_monthly: consumed * prices.on_demand_per_unit(access) * to_month,
        provisioned_monthly: paid_unit_minutes * prices.provisioned_per_unit_hour(access) / 60.0 * to_month,
        throttled_minutes: simulation.throttled_minutes,
        scale_outs: simulation.increases.len() as u32,
        scale_ins: simulation.decreases.len() as u32,
        provisioned_min: simulation.provisioned.iter().copied().min().unwrap_or(1),
        provisioned_max: simulation.provisioned.iter().copied().max().unwrap_or(1),
    }
}

fn reason(advice: &Advice, prices: &Prices) -> String {
    let throttles = advice.write.throttled_minutes + advice.read.throttled_minutes > 0;
    let verdict = match advice.mode {
        Mode::Provisioned => "Provisioned with auto scaling is cheaper",
        Mode::OnDemand if throttles && advice.provisioned_monthly < advice.on_demand_monthly => {
            "On-demand, though provisioned is cheaper, because auto scaling would have throttled"
        }
        Mode::OnDemand => "On-demand is cheaper",
    };
    let mut text = format!(
        "{verdict}: {} a month provisioned with auto scaling against {} on demand \
         ({} minutes of data scaled to a 30-day month). {}",
        dollars(advice.provisioned_monthly),
        dollars(advice.on_demand_monthly),
        advice.minutes,
        utilisation_reason(advice, prices),
    );
    for floor in &advice.schedule {
        text.push_str(&format!(
            " Auto scaling alone cannot follow the {} burst at {} (it reacts after 2 minutes above 70%, and \
             throttled meanwhile): raise the minimum {} capacity to {} units at {} ({}) and set it back to {} at \
             {} ({}); with that, nothing throttles.",
            floor.access,
            (floor.raise_at + chrono::Duration::minutes(RAISE_AHEAD_MINUTES as i64)).format("%Y-%m-%d %H:%M UTC"),
            floor.access,
            floor.min_capacity,
            floor.raise_at.format("%H:%M"),
            floor.raise_schedule,
            floor.restore_capacity,
            floor.lower_at.format("%H:%M"),
            floor.lower_schedule,
        ));
    }
    if advice.mode == Mode::Provisioned && advice.schedule.is_empty() {
        text.push_str(" Auto scaling alone follows every ramp in these minutes.");
    }
    let (writes, reads) = (advice.write.throttled_minutes, advice.read.throttled_minutes);
    if writes + reads > 0 {
        text.push_str(&format!(
            " With provisioned capacity, {writes} minutes of writes and {reads} minutes of reads \
             would have been throttled: they consumed more than auto scaling had provisioned \
             (burst capacity might absorb some)."
        ));
    }
    text
}

/// Utilisation against the break-even, said once when reads and writes share
/// it (as at the default prices).
fn utilisation_reason(advice: &Advice, prices: &Prices) -> String {
    let percent = |fraction: f64| fraction * 100.0;
    let (write, read) = (percent(advice.write.average_utilisation), percent(advice.read.average_utilisation));
    let (write_even, read_even) = (
        percent(prices.break_even_utilisation(ReadWrite::Write)),
        percent(prices.break_even_utilisation(ReadWrite::Read)),
    );
    let (write_premium, read_premium) =
        (prices.on_demand_premium(ReadWrite::Write), prices.on_demand_premium(ReadWrite::Read));
    // Compared as printed: equal to the shown precision is one figure.
    if format!("{write_even:.1}") == format!("{read_even:.1}") {
        format!(
            "Writes would use {write:.1}% and reads {read:.1}% of the provisioned capacity on \
             average; provisioned pays off above {write_even:.1}% (on demand costs \
             {write_premium:.2}x fully used provisioned capacity)."
        )
    } else {
        format!(
            "Writes would use {write:.1}% of the provisioned capacity on average against a \
             break-even of {write_even:.1}% (on demand costs {write_premium:.2}x fully used \
             provisioned capacity); reads {read:.1}% against {read_even:.1}% ({read_premium:.2}x)."
        )
    }
}

/// Cents for sums above a dollar, tenths of a cent below, where idle
/// resources live.
fn dollars(amount: f64) -> String {
    if amount >= 1.0 { format!("${amount:.2}") } else { format!("${amount:.4}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0)
    }

    fn assert_close(actual: f64, expected: f64) {
        assert!(close(actual, expected), "{actual} != {expected}");
    }

    fn noon() -> DateTime<Utc> {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    fn writes(units: &[f64]) -> Series {
        Series {
            resource: "northwind-orders/GSI2".into(),
            start: noon(),
            minutes: units.iter().map(|&write_units| Minute { read_units: 0.0, write_units }).collect(),
            observed: Vec::new(),
        }
    }

    /// `count` minutes of `units` each.
    fn run(units: f64, count: usize) -> Vec<f64> {
        vec![units; count]
    }

    #[test]
    fn default_prices_make_on_demand_about_3_5x_and_break_even_about_29_percent() {
        let prices = Prices::default();
        for access in [ReadWrite::Read, ReadWrite::Write] {
            // Writes: (0.625 / 1e6) / (0.00065 / 3600) = 6.25e-7 / 1.8056e-7 = 3.4615;
            // reads: (0.125 / 1e6) / (0.00013 / 3600) = 1.25e-7 / 3.6111e-8 = 3.4615.
            assert_close(prices.on_demand_premium(access), 0.625e-6 * 3600.0 / 0.00065);
            assert!((prices.on_demand_premium(access) - 3.46).abs() < 0.01);
            // Break-even 1 / 3.4615 = 28.9%.
            assert!((prices.break_even_utilisation(access) - 0.289).abs() < 0.001);
        }
    }

    #[test]
    fn prices_file_overrides_only_the_fields_it_names() {
        let prices =
            Prices::from_json_str(r#"{"provisionedWcuHour": 0.00074, "onDemandReadPerMillion": 0.25}"#, "p.json")
                .unwrap();
        assert_eq!(
            prices,
            Prices { provisioned_wcu_hour: 0.00074, on_demand_read_per_million: 0.25, ..Prices::default() }
        );
        assert_eq!(Prices::from_json_str("{}", "p.json").unwrap(), Prices::default());
        // Integers are prices too.
        assert_eq!(
            Prices::from_json_str(r#"{"onDemandWritePerMillion": 1}"#, "p.json").unwrap().on_demand_write_per_million,
            1.0
        );
    }

    #[test]
    fn prices_file_errors_name_the_file_and_the_field() {
        let err = |text| Prices::from_json_str(text, "prices.json").unwrap_err().to_string();
        let unknown = err(r#"{"provisionedWcuHours": 1}"#);
        assert!(unknown.contains("prices.json") && unknown.contains("`provisionedWcuHours`"), "{unknown}");
        let wrong_type = err(r#"{"provisionedRcuHour": "cheap"}"#);
        assert!(wrong_type.contains("`provisionedRcuHour`") && wrong_type.contains("cheap"), "{wrong_type}");
        let negative = err(r#"{"onDemandReadPerMillion": -0.1}"#);
        assert!(negative.contains("`onDemandReadPerMillion`") && negative.contains("positive"), "{negative}");
        assert!(err(r#"{"onDemandReadPerMillion": 0}"#).contains("`onDemandReadPerMillion`"));
        assert!(matches!(
            Prices::from_json_str("[0.625]", "prices.json"),
            Err(PricesError::Syntax { origin, .. }) if origin == "prices.json"
        ));
        assert!(matches!(Prices::from_json_str("{", "x"), Err(PricesError::Syntax { .. })));
    }

    #[test]
    fn prices_file_is_read_from_disk_and_a_missing_one_is_named() {
        let path = std::env::temp_dir().join(format!("northwind-prices-{}.json", std::process::id()));
        std::fs::write(&path, r#"{"onDemandWritePerMillion": 1.25}"#).unwrap();
        let prices = Prices::from_json_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(prices.unwrap().on_demand_write_per_million, 1.25);
        let missing = Prices::from_json_file(&path).unwrap_err();
        assert!(matches!(missing, PricesError::Read { .. }));
        assert!(missing.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn price_field_names_are_the_ones_serde_uses() {
        let json = serde_json::to_value(Prices::default()).unwrap();
        let mut names: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut fields = Prices::FIELDS.to_vec();
        names.sort_unstable();
        fields.sort_unstable();
        assert_eq!(names, fields);
    }

    #[test]
    fn flat_high_utilisation_recommends_provisioned_with_exact_costs() {
        // 600 write units every minute for a day: 10 per second.
        let advice = advise(&writes(&run(600.0, 1440)), &Prices::default()).unwrap();
        // Writes want ceil(10 / 0.7) = ceil(14.29) = 15 units, at 10 / 15 = 66.7%
        // utilisation: never above 70%, never at or below 50%, so 15 all day.
        assert_eq!(advice.write.provisioned_average, 15.0);
        assert_eq!((advice.write.scale_outs, advice.write.scale_ins), (0, 0));
        assert_close(advice.write.average_utilisation, 10.0 / 15.0);
        assert_eq!((advice.write.average_per_second, advice.write.peak_per_second), (10.0, 10.0));
        // Provisioned writes: 15 units × 1440 min = 21,600 unit-minutes
        //   × $0.00065 / 60 = $0.234 a day, × 30 = $7.02 a month.
        assert_close(advice.write.provisioned_monthly, 7.02);
        // Provisioned reads: 1 unit (the minimum) × 1440 min × $0.00013 / 60
        //   = $0.00312 a day, × 30 = $0.0936 a month.
        assert_close(advice.read.provisioned_monthly, 0.0936);
        assert_close(advice.provisioned_monthly, 7.1136);
        // On demand: 600 × 1440 = 864,000 write units × $0.625 / 1e6 = $0.54 a
        //   day, × 30 = $16.20 a month; no reads.
        assert_close(advice.on_demand_monthly, 16.2);
        assert_eq!(advice.mode, Mode::Provisioned);
        assert!(advice.reason.contains("$7.11") && advice.reason.contains("$16.20"), "{}", advice.reason);
        assert!(
            advice.reason.contains("Writes would use 66.7% and reads 0.0%")
                && advice.reason.contains("pays off above 28.9%")
                && advice.reason.contains("3.46x"),
            "{}",
            advice.reason
        );
        assert!(!advice.reason.contains("throttled"), "{}", advice.reason);
    }

    #[test]
    fn two_minute_spikes_once_an_hour_recommend_on_demand() {
        // Each hour: minutes 30 and 31 consume 60,000 write units (1000/s),
        // the other 58 nothing. A single-minute spike would never scale out
        // (see the next test), so the spike lasts the 2 minutes auto scaling
        // needs, and provisioned capacity pays for its own slowness.
        let hour: Vec<f64> = (0..60).map(|m| if m == 30 || m == 31 { 60_000.0 } else { 0.0 }).collect();
        let day = hour.repeat(24);
        let advice = advise(&writes(&day), &Prices::default()).unwrap();
        // Per hour: 1 unit until minute 31, which scales out to
        // ceil(1000 / 0.7) = 1429 from minute 32; minutes 32..=46 are 15 idle
        // minutes, so minute 46 scales back in to 1 (one decrease an hour,
        // 60 minutes apart, so the daily quota never bites).
        assert_eq!((advice.write.scale_outs, advice.write.scale_ins), (24, 24));
        // Minutes 30 and 31 run at 1 unit: throttled, 2 × 24 = 48.
        assert_eq!(advice.write.throttled_minutes, 48);
        // Provisioned writes: (15 × 1429 + 45 × 1) = 21,480 unit-minutes an hour
        //   × 24 = 515,520 × $0.00065 / 60 = $5.5848 a day, × 30 = $167.544.
        assert_close(advice.write.provisioned_monthly, 167.544);
        // Plus reads at the 1-unit minimum, $0.0936: $167.6376 a month.
        assert_close(advice.provisioned_monthly, 167.6376);
        // On demand: 2 × 60,000 × 24 = 2,880,000 units × $0.625 / 1e6 = $1.80
        //   a day, × 30 = $54.00 a month.
        assert_close(advice.on_demand_monthly, 54.0);
        assert_eq!(advice.mode, Mode::OnDemand);
        assert!(advice.reason.starts_with("On-demand is cheaper"), "{}", advice.reason);
        assert!(advice.reason.contains("48 minutes of writes"), "{}", advice.reason);
    }

    #[test]
    fn single_minute_spikes_never_scale_out_and_are_reported_as_throttled() {
        // One minute of 60,000 units an hour never keeps utilisation above
        // the target for 2 minutes: capacity stays at 1 and every spike is
        // throttled. Provisioned then looks cheap only because it would have
        // refused the traffic: the advice is on-demand, and says why.
        let hour: Vec<f64> = (0..60).map(|m| if m == 30 { 60_000.0 } else { 0.0 }).collect();
        let advice = advise(&writes(&hour.repeat(24)), &Prices::default()).unwrap();
        assert_eq!(advice.write.scale_outs, 0);
        assert_eq!(advice.write.provisioned_average, 1.0);
        assert_eq!(advice.write.throttled_minutes, 24);
        // 1 unit × 1440 min × $0.00065 / 60 = $0.0156 a day (+ $0.00312 reads)
        //   = $0.01872 × 30 = $0.5616; on demand 1,440,000 × $0.625 / 1e6 × 30 = $27.
        assert_close(advice.provisioned_monthly, 0.5616);
        assert_close(advice.on_demand_monthly, 27.0);
        assert_eq!(advice.mode, Mode::OnDemand);
        assert!(advice.reason.starts_with("On-demand, though provisioned is cheaper"), "{}", advice.reason);
        assert!(advice.reason.contains("24 minutes of writes"), "{}", advice.reason);
        assert!(advice.reason.contains("throttled"), "{}", advice.reason);
    }

    #[test]
    fn scale_out_after_exactly_two_minutes_above_target() {
        // 420 units a minute = 7/s wants exactly 10 units (70%, not above).
        // From minute 5, 600 a minute = 10/s: 100% of 10 units.
        let units = [run(420.0, 5), run(600.0, 5)].concat();
        let simulation = simulate(&units, 0);
        // Minutes 5 and 6 are above; minute 6 scales out to ceil(10 / 0.7) = 15,
        // in force from minute 7.
        assert_eq!(simulation.provisioned, [10, 10, 10, 10, 10, 10, 10, 15, 15, 15]);
        assert_eq!(simulation.increases, [6]);
        // 10/s on 10 units is full, not over: nothing throttled.
        assert_eq!(simulation.throttled_minutes, 0);
    }

    #[test]
    fn one_minute_above_target_at_a_time_does_not_scale_out() {
        let simulation = simulate(&[420.0, 420.0, 600.0, 420.0, 600.0, 420.0], 0);
        assert_eq!(simulation.provisioned, [10; 6]);
        assert!(simulation.increases.is_empty());
    }

    #[test]
    fn scale_in_after_fifteen_minutes_at_or_below_half() {
        // Minute 0: 600 a minute starts at 15 units (66.7%). Then 60 a minute,
        // 1/s: 6.7% of 15 units.
        let units = [run(600.0, 1), run(60.0, 20)].concat();
        let simulation = simulate(&units, 0);
        // Minutes 1..=15 are the 15 low minutes; minute 15 scales in to
        // ceil(1 / 0.7) = 2, in force from minute 16.
        assert_eq!(simulation.provisioned, [run_u32(15, 16), run_u32(2, 5)].concat());
        assert_eq!(simulation.decreases, [15]);
    }

    #[test]
    fn exactly_half_counts_as_twenty_points_below_target() {
        // 450 a minute = 7.5/s is exactly 50% of 15 units: counts as low, and
        // scales in to ceil(7.5 / 0.7) = ceil(10.7) = 11.
        let simulation = simulate(&[run(600.0, 1), run(450.0, 16)].concat(), 0);
        assert_eq!(simulation.decreases, [15]);
        assert_eq!(simulation.provisioned[16], 11);
        // 451 is above 50%: never low.
        let simulation = simulate(&[run(600.0, 1), run(451.0, 30)].concat(), 0);
        assert!(simulation.decreases.is_empty());
    }

    #[test]
    fn fourteen_low_minutes_do_not_scale_in() {
        // 14 low minutes, one at 66.7% resets the count, 14 more.
        let units = [run(600.0, 1), run(60.0, 14), run(600.0, 1), run(60.0, 14)].concat();
        let simulation = simulate(&units, 0);
        assert!(simulation.decreases.is_empty());
        assert_eq!(simulation.provisioned, run_u32(15, 30));
    }

    /// Four cycles of 2 busy minutes (4200 a minute = 70/s, which wants 100
    /// units) and 15 idle ones, then 2 busy minutes and 70 idle ones.
    fn five_scale_ins() -> Vec<f64> {
        let cycle = [run(4200.0, 2), run(0.0, 15)].concat();
        [cycle.repeat(4), run(4200.0, 2), run(0.0, 70)].concat()
    }

    #[test]
    fn four_decreases_a_day_then_one_an_hour() {
        // Starting at 12:00 UTC, all in one day. Cycle k's busy minutes are
        // 17k and 17k+1; from the second cycle on they meet 1 unit and scale
        // out at 17k+1. Its 15 idle minutes end at 17k+16, which scales in:
        // decreases at 16, 33, 50 and 67, the day's 4 free ones. The last busy
        // pair scales out at 69; idle from minute 70, the 15th idle minute is
        // 84, but the last decrease (67) is only 17 minutes old: refused,
        // retried each minute until 67 + 60 = 127.
        let simulation = simulate(&five_scale_ins(), 12 * 60);
        assert_eq!(simulation.decreases, [16, 33, 50, 67, 127]);
        assert_eq!(simulation.increases, [18, 35, 52, 69]);
        assert_eq!((simulation.provisioned[127], simulation.provisioned[128]), (100, 1));
    }

    #[test]
    fn decrease_quota_starts_afresh_each_utc_day() {
        // The same minutes starting at 22:50 UTC: minute 70 is midnight, so
        // the 5th decrease (minute 84, 00:14) is the new day's first and
        // needs no hour's gap.
        let simulation = simulate(&five_scale_ins(), 22 * 60 + 50);
        assert_eq!(simulation.decreases, [16, 33, 50, 67, 84]);
        // And through advise, from the series' start time.
        let mut series = writes(&five_scale_ins());
        series.start = "2026-11-29T22:50:00Z".parse().unwrap();
        assert_eq!(advise(&series, &Prices::default()).unwrap().write.scale_ins, 5);
    }

    #[test]
    fn throttled_minutes_are_counted() {
        // 10 units (420 a minute), then 900 a minute = 15/s: over 10 units for
        // minutes 5 and 6, until the scale-out at 6 brings ceil(15 / 0.7) = 22.
        let units = [run(420.0, 5), run(900.0, 5)].concat();
        let simulation = simulate(&units, 0);
        assert_eq!(simulation.throttled_minutes, 2);
        assert_eq!(simulation.provisioned[7], 22);
        let advice = advise(&writes(&units), &Prices::default()).unwrap();
        assert_eq!((advice.write.throttled_minutes, advice.read.throttled_minutes), (2, 0));
        assert!(advice.reason.contains("2 minutes of writes and 0 minutes of reads"), "{}", advice.reason);
    }

    #[test]
    fn reads_and_writes_scale_separately() {
        let series = Series {
            resource: "northwind-orders".into(),
            start: noon(),
            minutes: (0..30)
                .map(|m| Minute { read_units: 420.0, write_units: if m < 10 { 420.0 } else { 60.0 } })
                .collect(),
            observed: Vec::new(),
        };
        let advice = advise(&series, &Prices::default()).unwrap();
        assert_eq!(advice.read.provisioned_average, 10.0);
        assert_eq!((advice.read.scale_ins, advice.write.scale_ins), (0, 1));
    }

    #[test]
    fn reason_names_each_break_even_when_prices_differ() {
        // Reads at twice the default unit-hour price: break-even
        // (0.00026 / 3600) / (0.125 / 1e6) = 57.8%, on demand 1.73x.
        let prices = Prices { provisioned_rcu_hour: 0.00026, ..Prices::default() };
        let advice = advise(&writes(&run(600.0, 60)), &prices).unwrap();
        assert!(
            advice.reason.contains("break-even of 28.9% (on demand costs 3.46x")
                && advice.reason.contains("reads 0.0% against 57.8% (1.73x)"),
            "{}",
            advice.reason
        );
    }

    #[test]
    fn empty_series_is_a_typed_error() {
        let err = advise(&writes(&[]), &Prices::default()).unwrap_err();
        assert!(matches!(&err, AdviceError::NoData { resource } if resource == "northwind-orders/GSI2"));
        assert!(err.to_string().contains("nothing to advise on"));
    }

    #[test]
    fn bad_minutes_and_prices_are_typed_errors() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let err = advise(&writes(&[60.0, bad]), &Prices::default()).unwrap_err();
            assert!(matches!(err, AdviceError::BadMinute { minute: 1, access: ReadWrite::Write, .. }), "{err}");
        }
        let free = Prices { provisioned_rcu_hour: 0.0, ..Prices::default() };
        let err = advise(&writes(&[60.0]), &free).unwrap_err();
        assert!(err.to_string().contains("`provisionedRcuHour`"), "{err}");
    }

    #[test]
    fn an_idle_resource_costs_the_minimum_and_no_nan() {
        let advice = advise(&writes(&run(0.0, 60)), &Prices::default()).unwrap();
        assert_eq!(advice.on_demand_monthly, 0.0);
        assert_eq!(advice.mode, Mode::OnDemand);
        assert_eq!(advice.write.average_utilisation, 0.0);
        // 1 WCU + 1 RCU for 30 days: 720 h × ($0.00065 + $0.00013) = $0.5616.
        assert_close(advice.provisioned_monthly, 0.5616);
        assert!(!advice.reason.contains("NaN"));
    }

    /// Fourteen days of write units from 2026-11-17 00:00 UTC (the last is
    /// November 30th, a month's last day), every minute observed.
    fn fortnight(units: impl Fn(usize) -> f64) -> Series {
        let minutes = (0..14 * MINUTES_PER_DAY).map(|m| Minute { read_units: 0.0, write_units: units(m) }).collect();
        Series {
            resource: "northwind-orders".into(),
            start: "2026-11-17T00:00:00Z".parse().unwrap(),
            minutes,
            observed: Vec::new(),
        }
    }

    fn advice_of(series: &Series) -> Advice {
        match recommend(series, &Prices::default()).unwrap() {
            Verdict::Advice(advice) => *advice,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn minutes_of_history_recommend_nothing_and_say_why() {
        let mut series = fortnight(|_| 600.0);
        series.observed = vec![false; series.minutes.len()];
        series.observed[100] = true;
        series.observed[101] = true;
        let verdict = recommend(&series, &Prices::default()).unwrap();
        assert_eq!(verdict, Verdict::NotEnoughHistory { resource: "northwind-orders".into(), observed: 2 });
        assert_eq!(
            Verdict::not_enough_history(2),
            "not enough history: 2 minutes observed; choose after at least a day, better two to four weeks"
        );
        // A day less a minute is still not a day; a day is.
        series.observed = (0..series.minutes.len()).map(|m| m < MIN_OBSERVED_MINUTES - 1).collect();
        assert!(matches!(
            recommend(&series, &Prices::default()).unwrap(),
            Verdict::NotEnoughHistory { observed: 1439, .. }
        ));
        series.observed[MIN_OBSERVED_MINUTES - 1] = true;
        assert!(matches!(recommend(&series, &Prices::default()).unwrap(), Verdict::Advice(_)));
    }

    #[test]
    fn unobserved_minutes_cost_nothing_and_scale_nothing() {
        // Two observed weeks of steady 600 a minute, with the middle day
        // unknown: the same monthly figures as every minute observed.
        let steady = fortnight(|_| 600.0);
        let mut gap = steady.clone();
        gap.observed = (0..gap.minutes.len()).map(|m| !(7 * 1440..8 * 1440).contains(&m)).collect();
        gap.minutes[7 * 1440 + 5].write_units = 1e9;
        let (whole, holed) = (advice_of(&steady), advice_of(&gap));
        assert_eq!(holed.minutes, 13 * 1440);
        assert_close(holed.on_demand_monthly, whole.on_demand_monthly);
        assert_close(holed.provisioned_monthly, whole.provisioned_monthly);
        assert_eq!(holed.write.throttled_minutes, 0, "the unknown minute's units are not counted");
    }

    #[test]
    fn a_steady_fortnight_recommends_provisioned_as_worked_by_hand() {
        // 600 units a minute = 10/s wants ceil(10 / 0.7) = 15 units, all
        // fortnight: 15 × $0.00065 × 720 h = $7.02 a month, and reads at the
        // 1-unit minimum, $0.0936: $7.1136. On demand: 600 × 43,200 minutes
        // = 25.92 M units × $0.625 / M = $16.20.
        let advice = advice_of(&fortnight(|_| 600.0));
        assert_eq!(advice.mode, Mode::Provisioned);
        assert_close(advice.provisioned_monthly, 7.1136);
        assert_close(advice.on_demand_monthly, 16.2);
        assert!(advice.schedule.is_empty());
        assert!(advice.reason.contains("Auto scaling alone follows every ramp"), "{}", advice.reason);
    }

    #[test]
    fn a_spiky_fortnight_recommends_on_demand_as_worked_by_hand() {
        // Each hour, minutes 30 and 31 take 60,000 units and the rest none
        // (see `two_minute_spikes_once_an_hour_recommend_on_demand` for the
        // hour's arithmetic): $167.6376 provisioned against $54 on demand a
        // month, and 2 throttled minutes an hour: a floor raise before each
        // spike would cost more still, so on demand.
        let advice = advice_of(&fortnight(|m| if m % 60 == 30 || m % 60 == 31 { 60_000.0 } else { 0.0 }));
        assert_eq!(advice.mode, Mode::OnDemand);
        assert_close(advice.provisioned_monthly, 167.6376);
        assert_close(advice.on_demand_monthly, 54.0);
        assert_eq!(advice.write.throttled_minutes, 2 * 24 * 14);
        assert!(advice.schedule.is_empty());
    }

    #[test]
    fn the_month_end_batch_gets_a_scheduled_floor_raise_worked_by_hand() {
        // Steady 600 a minute (15 units); on November 30th from 22:00 to
        // midnight the batch writes 3x, 1,800 a minute = 30/s. Auto scaling
        // alone: 22:00 and 22:01 run 30/s on 15 units (throttled), then
        // scale out to ceil(30 / 0.7) = 43 from 22:02: on demand is advised.
        let batch_start = 13 * 1440 + 22 * 60;
        let series = fortnight(|m| if m >= batch_start { 1800.0 } else { 600.0 });
        let plain = simulate(&series.minutes.iter().map(|m| m.write_units).collect::<Vec<_>>(), 0);
        assert_eq!(plain.throttled, [batch_start, batch_start + 1]);
        // With the floor raised to 43 from 21:50 to the batch's end (the
        // span's end, midnight), nothing throttles: 43 units run 30/s at
        // 69.8%, never above 70% (no scale-out) nor at or below 50% long
        // enough to scale in (21:50-21:59, 10 minutes at 23%).
        // Write unit-minutes: 20,160 × 15 + 130 × (43 − 15) = 306,040;
        //   × $0.00065 / 60 = $3.315433 for the 14 days, × 30/14 = $7.104500.
        // Reads, the 1-unit minimum: $0.0936. Provisioned: $7.198100.
        // On demand: 20,160 × 600 + 120 × 1,200 = 12,240,000 units
        //   × $0.625 / M = $7.65, × 30/14 = $16.392857.
        let advice = advice_of(&series);
        assert_eq!(advice.mode, Mode::Provisioned, "{}", advice.reason);
        assert_close(advice.provisioned_monthly, 7.1981);
        assert_close(advice.on_demand_monthly, 16.392857142857142);
        assert_eq!(advice.write.throttled_minutes, 0);
        let floor = &advice.schedule[..];
        assert_eq!(floor.len(), 1);
        assert_eq!((floor[0].min_capacity, floor[0].restore_capacity), (43, 15));
        assert_eq!(floor[0].raise_at, "2026-11-30T21:50:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(floor[0].raise_schedule, "cron(50 21 L * ? *)", "every month's last day");
        assert_eq!(floor[0].lower_schedule, "cron(0 0 1 * ? *)");
        let actions = floor[0].put_scheduled_actions("northwind-orders", Some("GSI2"));
        assert_eq!(actions[0]["ResourceId"], "table/northwind-orders/index/GSI2");
        assert_eq!(actions[0]["ScalableDimension"], "dynamodb:index:WriteCapacityUnits");
        assert_eq!(actions[0]["ScalableTargetAction"]["MinCapacity"], 43);
        assert_eq!(actions[1]["ScalableTargetAction"]["MinCapacity"], 15);
        // The template's range: the least held, twice the most (the floor's 43).
        assert_eq!(advice.write.scaling_range(), (15, 86));
        assert_eq!(advice.read.scaling_range(), (1, 2));
        assert_eq!(table_mode(&[&advice]), Mode::Provisioned);
        let mut throttled = advice.clone();
        throttled.write.throttled_minutes = 1;
        assert_eq!(table_mode(&[&advice, &throttled]), Mode::OnDemand, "an index that would throttle decides");
        assert_eq!(table_mode(&[]), Mode::OnDemand);
        assert!(
            advice.reason.contains("Auto scaling alone cannot follow the write burst at 2026-11-30 22:00 UTC"),
            "{}",
            advice.reason
        );
    }

    fn run_u32(units: u32, count: usize) -> Vec<u32> {
        vec![units; count]
    }
}

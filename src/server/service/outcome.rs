//! After the sale: a plan beside what happened over the part of its window
//! already past, from what the table recorded: the stream consumer's minute
//! counters of created orders (the peak reached), the throttles this app's
//! calls met (its capacity recorder), the keys the consumer recorded as
//! written most, and the consumer's lag where it is known. A figure nothing
//! recorded is unknown and said so, never guessed; items that do not read
//! count as nothing recorded.

use super::Service;
use crate::model::{HotKeySeen, SaleOutcome, SalePhase, SalePlan, ThrottleCount};
use crate::server::error::ApiError;
use crate::server::store::error::Throttle;
use crate::server::store::usage::{epoch_minute, minute_start};
use crate::server::store::{CapacityDay, Counters};
use chrono::{DateTime, NaiveDate, Timelike, Utc};
use std::collections::BTreeMap;

/// The most hot keys an outcome lists.
const HOT_KEYS_SHOWN: usize = 10;

impl Service {
    /// The plan beside what happened in its window so far.
    pub async fn sale_outcome(&self, name: &str) -> Result<SaleOutcome, ApiError> {
        let plan = self.sale_plan(name).await?;
        let now = Utc::now();
        if now < plan.start {
            return Ok(not_started(plan, now));
        }
        let to = plan.end().min(now);
        let phase = if now >= plan.end() { SalePhase::Over } else { SalePhase::UnderWay };
        let days: Vec<NaiveDate> = plan.start.date_naive().iter_days().take_while(|d| *d <= to.date_naive()).collect();
        let today = now.date_naive();
        let read = futures::future::try_join_all(days.iter().map(|day| async move {
            let capacity = if *day == today {
                self.store.capacity_day(*day).await
            } else {
                self.store.persisted_capacity_day(*day).await
            };
            Ok::<_, crate::server::store::error::StoreError>((self.store.read_counters(*day).await?, capacity?))
        }))
        .await?;
        let behind_now = (phase == SalePhase::UnderWay).then(|| self.consumer_behind_ms()).flatten();
        Ok(weigh(plan, now, to, phase, &read, behind_now))
    }
}

fn not_started(plan: SalePlan, now: DateTime<Utc>) -> SaleOutcome {
    let why = "the sale has not started".to_string();
    SaleOutcome {
        plan,
        phase: SalePhase::NotStarted,
        as_of: now,
        from: None,
        to: None,
        minutes: 0,
        minutes_observed: 0,
        orders_created: None,
        peak_orders_per_second: None,
        peak_minute: None,
        peak_note: why.clone(),
        throttles: None,
        throttles_note: why.clone(),
        consumer_behind_ms: None,
        consumer_note: why.clone(),
        hot_keys: None,
        hot_keys_note: why,
    }
}

/// One minute of the window in its day's records.
struct Minute<'a> {
    start: DateTime<Utc>,
    index: usize,
    counters: &'a Counters,
    capacity: &'a CapacityDay,
}

/// The outcome from each day's counters and capacity records.
fn weigh(
    plan: SalePlan,
    now: DateTime<Utc>,
    to: DateTime<Utc>,
    phase: SalePhase,
    days: &[(Counters, CapacityDay)],
    behind_now: Option<i64>,
) -> SaleOutcome {
    let from = plan.start;
    // Whole minutes: those holding the start and the end count whole.
    let minutes: Vec<Minute<'_>> = (epoch_minute(from)..=epoch_minute(to))
        .filter_map(|m| {
            let start = minute_start(m);
            let (counters, capacity) = days.iter().find(|(c, _)| c.date == start.date_naive())?;
            Some(Minute { start, index: (start.hour() * 60 + start.minute()) as usize, counters, capacity })
        })
        .collect();
    let observed = minutes.iter().filter(|m| m.capacity.observed.get(m.index).copied().unwrap_or(false)).count();
    let (created, peak, peak_note) = peak_of(&minutes, observed);
    let (throttles, throttles_note) = throttles_of(&minutes);
    let (hot_keys, hot_keys_note) = hot_keys_of(&minutes, observed);
    let (consumer_behind_ms, consumer_note) = lag_of(&minutes, behind_now);
    SaleOutcome {
        plan,
        phase,
        as_of: now,
        from: Some(from),
        to: Some(to),
        minutes: minutes.len() as u64,
        minutes_observed: observed as u64,
        orders_created: created,
        peak_orders_per_second: peak.map(|(rate, _)| rate),
        peak_minute: peak.map(|(_, at)| at),
        peak_note,
        throttles,
        throttles_note,
        consumer_behind_ms,
        consumer_note,
        hot_keys,
        hot_keys_note,
    }
}

/// The most the consumers were behind the stream in any minute of the
/// window (each records its most once a minute), or now while the sale is
/// under way if that is more.
fn lag_of(minutes: &[Minute<'_>], behind_now: Option<i64>) -> (Option<i64>, String) {
    let recorded: Vec<u64> =
        minutes.iter().filter_map(|m| m.capacity.behind_ms.get(&(m.index as u16)).copied()).collect();
    let most = recorded.iter().max().map(|ms| i64::try_from(*ms).unwrap_or(i64::MAX));
    match (most, behind_now) {
        (None, None) => (
            None,
            "unknown: no consumer recorded its lag in the window (an in-process consumer records the most it was \
             behind once a minute while it applies records)"
                .into(),
        ),
        (None, Some(now)) => {
            (Some(now), "how far this server's consumer is behind now; no lag was recorded in the window".into())
        }
        (Some(most), now) => (
            Some(most.max(now.unwrap_or(0))),
            format!(
                "the most a consumer was behind the stream, in {} of {} minutes of the window with a recorded lag",
                recorded.len(),
                minutes.len()
            ),
        ),
    }
}

type Peak = (Option<u64>, Option<(f64, DateTime<Utc>)>, String);

/// Orders created in the window and its busiest minute, from the minute
/// counters: known where the consumer observed a minute or counted an order.
fn peak_of(minutes: &[Minute<'_>], observed: usize) -> Peak {
    let created = |m: &Minute<'_>| m.counters.created_per_minute.get(m.index).copied().unwrap_or(0).max(0) as u64;
    let counted: Vec<&Minute<'_>> = minutes
        .iter()
        .filter(|m| m.capacity.observed.get(m.index).copied().unwrap_or(false) || created(m) > 0)
        .collect();
    if counted.is_empty() {
        let note = "unknown: the stream consumer observed no minute of the window and counted no order in it";
        return (None, None, note.into());
    }
    let total = counted.iter().map(|m| created(m)).sum();
    let busiest = counted.iter().max_by_key(|m| (created(m), std::cmp::Reverse(m.start))).expect("not empty");
    let note = format!(
        "the busiest whole minute's mean, from the stream consumer's minute counters ({} of {} minutes observed)",
        observed,
        minutes.len()
    );
    (Some(total), Some((created(busiest) as f64 / 60.0, busiest.start)), note)
}

/// Throttles of this app's calls in the window, by reason and place:
/// known where its capacity recorder recorded anything in the window.
fn throttles_of(minutes: &[Minute<'_>]) -> (Option<Vec<ThrottleCount>>, String) {
    let recorded = minutes.iter().any(|m| {
        m.capacity.units.values().any(|u| u.get(m.index).is_some_and(|u| *u > 0.0))
            || m.capacity.throttles.values().any(|t| t.get(m.index).is_some_and(|t| *t > 0))
    });
    if !recorded {
        let note = "unknown: nothing of this app's calls was recorded in the window (its capacity recorder \
                    files each minute's calls and throttles)";
        return (None, note.into());
    }
    let mut counts: BTreeMap<(String, String), ThrottleCount> = BTreeMap::new();
    for m in minutes {
        for ((reason, resource), per_minute) in &m.capacity.throttles {
            let n = per_minute.get(m.index).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let throttle = Throttle { reason: reason.clone(), resource: resource.clone() };
            let count = counts.entry((reason.clone(), resource.clone())).or_insert_with(|| ThrottleCount {
                reason: reason.clone(),
                place: throttle.place(),
                resource: resource.clone(),
                total: 0,
                minutes: vec![],
            });
            count.total += n;
            count.minutes.push((m.index as u16, n));
        }
    }
    let mut throttles: Vec<ThrottleCount> = counts.into_values().collect();
    throttles.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.reason.cmp(&b.reason)));
    let note = "the throttles this app's own calls met, as its capacity recorder filed them; other writers' \
                are not seen here (CloudWatch's ThrottledRequests has them on AWS)";
    (Some(throttles), note.into())
}

/// The keys recorded as written most in a minute of the window, each at its
/// busiest: known where the consumer observed a minute.
fn hot_keys_of(minutes: &[Minute<'_>], observed: usize) -> (Option<Vec<HotKeySeen>>, String) {
    if observed == 0 {
        let note = "unknown: the stream consumer observed no minute of the window";
        return (None, note.into());
    }
    let mut busiest: BTreeMap<(String, String), HotKeySeen> = BTreeMap::new();
    for m in minutes {
        for (resource, key, units) in m.capacity.hot.get(&(m.index as u16)).into_iter().flatten() {
            let seen = HotKeySeen { resource: resource.clone(), key: key.clone(), units: *units, at: m.start };
            busiest
                .entry((resource.clone(), key.clone()))
                .and_modify(|b| {
                    if seen.units > b.units {
                        *b = seen.clone();
                    }
                })
                .or_insert(seen);
        }
    }
    let mut keys: Vec<HotKeySeen> = busiest.into_values().collect();
    keys.sort_by(|a, b| b.units.cmp(&a.units).then_with(|| a.key.cmp(&b.key)));
    keys.truncate(HOT_KEYS_SHOWN);
    let note = format!(
        "the keys the stream consumer recorded as written most in a minute, each in its busiest ({observed} of {} \
         minutes observed)",
        minutes.len()
    );
    (Some(keys), note)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(start: &str, hold: u32) -> SalePlan {
        SalePlan {
            name: "gala".into(),
            peak_orders_per_second: 10.0,
            start: start.parse().unwrap(),
            ramp_minutes: 0,
            hold_minutes: hold,
            decay_minutes: 0,
            item_bytes: 700,
            consumer_records_per_second: None,
            writer: Default::default(),
            consumer_measured: None,
            updated_at: "2026-11-20T09:00:00Z".parse().unwrap(),
            updated_by: "alice".into(),
        }
    }

    fn day(date: &str) -> (Counters, CapacityDay) {
        let date: NaiveDate = date.parse().unwrap();
        let counters = Counters { date, created_per_minute: vec![0; 1440], ..Counters::default() };
        (counters, CapacityDay { date, ..CapacityDay::default() })
    }

    #[test]
    fn nothing_recorded_is_unknown_and_a_counted_minute_is_the_peak() {
        let plan = plan("2026-11-27T23:58:00Z", 4);
        let (now, to) = ("2026-11-28T01:00:00Z".parse().unwrap(), plan.end());
        let mut days = vec![day("2026-11-27"), day("2026-11-28")];
        let outcome = weigh(plan.clone(), now, to, SalePhase::Over, &days, None);
        assert_eq!(outcome.minutes, 5, "23:58 to 00:02, whole minutes");
        assert_eq!(outcome.peak_orders_per_second, None);
        assert!(outcome.peak_note.starts_with("unknown"));
        assert_eq!(outcome.throttles, None);
        assert_eq!(outcome.hot_keys, None);
        assert_eq!(outcome.consumer_behind_ms, None);
        // 120 orders at 00:01, 30 at 23:59; 23:50 is outside the window.
        days[1].0.created_per_minute[1] = 120;
        days[0].0.created_per_minute[1439] = 30;
        days[0].0.created_per_minute[1430] = 6000;
        days[1].1.observed = vec![true; 1440];
        days[1].1.throttles.insert(("ThrottlingException".into(), "table/orders/index/GSI2".into()), vec![2; 1440]);
        days[1].1.hot.insert(1, vec![("orders/GSI1".into(), "CUSTOMER#bot".into(), 40)]);
        let outcome = weigh(plan, now, to, SalePhase::Over, &days, None);
        assert_eq!(outcome.orders_created, Some(150));
        assert_eq!(outcome.peak_orders_per_second, Some(2.0));
        assert_eq!(outcome.peak_minute, Some("2026-11-28T00:01:00Z".parse().unwrap()));
        assert_eq!(outcome.minutes_observed, 3);
        let throttles = outcome.throttles.unwrap();
        assert_eq!((throttles.len(), throttles[0].total, throttles[0].place.as_str()), (1, 6, "GSI2"));
        assert_eq!(throttles[0].minutes, vec![(0, 2), (1, 2), (2, 2)]);
        assert_eq!(outcome.hot_keys.unwrap()[0].key, "CUSTOMER#bot");
    }
}

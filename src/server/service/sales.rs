//! Sale plans and their readiness: the plans' input checked field by field,
//! the figures a readiness check weighs gathered from the store, and a sale
//! day's shard count written ahead. The verdicts are
//! `capacity::readiness`'s.

use super::Service;
use super::checks::check_text;
use super::figures::window_days;
use crate::model::{
    AuditKind, DayShards, Invalid, MAX_ITEM_BYTES, MAX_PEAK, MAX_PHASE_MINUTES, MAX_PLAN_NAME, Permission, Readiness,
    SalePlan, SalePlanInput, ShardsWritten, Writer, iso_millis,
};
use crate::server::auth::Principal;
use crate::server::capacity::costs::{Definitions, MeasuredWrites};
use crate::server::capacity::planner;
use crate::server::capacity::readiness::{self, AutoScaling, HotObservation, Inputs};
use crate::server::error::ApiError;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::usage::Resource;
use crate::server::store::{CapacityDay, Recorded, ScalableTarget};
use crate::server::stream::quality;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

/// How far ahead a sale may be planned.
const MAX_DAYS_AHEAD: i64 = 400;
/// A start this far in the past still counts as now (clocks differ).
const START_SKEW_SECONDS: i64 = 60;
/// Days of recorded hot keys a readiness check weighs.
pub const HOT_WINDOW_DAYS: u32 = 7;

/// What the trail keeps of a plan as saved: its figures.
fn plan_summary(plan: &SalePlan) -> String {
    format!(
        "peak {}/s from {}, ramp {} min, hold {} min, decay {} min, {} bytes an order",
        plan.peak_orders_per_second,
        iso_millis::format(&plan.start),
        plan.ramp_minutes,
        plan.hold_minutes,
        plan.decay_minutes,
        plan.item_bytes
    )
}

/// A plan name: 1 to 64 characters, no control or text-direction characters.
pub fn check_plan_name(name: &str) -> Result<(), Invalid> {
    if name.trim().is_empty() || name.chars().count() > MAX_PLAN_NAME {
        return Err(Invalid::TextLength { field: "name", max: MAX_PLAN_NAME });
    }
    check_text("name", name)
}

/// A plan from its input, every field checked and named when wrong.
pub fn parse_plan(input: &SalePlanInput, now: DateTime<Utc>, by: &str) -> Result<SalePlan, ApiError> {
    let name = match &input.name {
        Some(Value::String(name)) => name.clone(),
        Some(other) => return Err(bad("name", format!("must be text, not {other}"))),
        None => return Err(bad("name", "is missing")),
    };
    check_plan_name(&name)?;
    let peak = number("peakOrdersPerSecond", input.peak_orders_per_second.as_ref())?
        .ok_or_else(|| bad("peakOrdersPerSecond", "is missing"))?;
    if !(peak > 0.0 && peak <= MAX_PEAK) {
        return Err(bad("peakOrdersPerSecond", format!("must be a positive number up to {MAX_PEAK}, not {peak}")));
    }
    let start = parse_start(input.start.as_ref(), now)?;
    let phase = |field: &'static str, value: Option<&Value>, min: u64| -> Result<u32, ApiError> {
        let minutes = whole(field, value)?.ok_or_else(|| bad(field, "is missing"))?;
        if !(min..=u64::from(MAX_PHASE_MINUTES)).contains(&minutes) {
            return Err(bad(field, format!("must be {min} to {MAX_PHASE_MINUTES} minutes, not {minutes}")));
        }
        Ok(minutes as u32)
    };
    let ramp_minutes = phase("rampMinutes", input.ramp_minutes.as_ref(), 0)?;
    let hold_minutes = phase("holdMinutes", input.hold_minutes.as_ref(), 1)?;
    let decay_minutes = phase("decayMinutes", input.decay_minutes.as_ref(), 0)?;
    let item_bytes = match whole("itemBytes", input.item_bytes.as_ref())? {
        Some(bytes) if (1..=u64::from(MAX_ITEM_BYTES)).contains(&bytes) => bytes as u32,
        Some(bytes) => return Err(bad("itemBytes", format!("must be 1 to {MAX_ITEM_BYTES} bytes, not {bytes}"))),
        None => planner::typical_item_bytes().map_err(|e| bad("itemBytes", e.to_string()))?,
    };
    let consumer = number("consumerRecordsPerSecond", input.consumer_records_per_second.as_ref())?;
    if let Some(rate) = consumer
        && !(rate > 0.0 && rate <= MAX_PEAK * 10.0)
    {
        return Err(bad("consumerRecordsPerSecond", format!("must be a positive number, not {rate}")));
    }
    let writer = match &input.writer {
        None | Some(Value::Null) => Writer::default(),
        Some(Value::String(text)) if text.trim().is_empty() => Writer::default(),
        Some(Value::String(text)) => Writer::parse(text.trim()).ok_or_else(|| {
            bad("writer", format!("must be one of {}, not {text:?}", Writer::ALL.map(Writer::as_str).join(", ")))
        })?,
        Some(other) => return Err(bad("writer", format!("must be text, not {other}"))),
    };
    Ok(SalePlan {
        name,
        peak_orders_per_second: peak,
        start,
        ramp_minutes,
        hold_minutes,
        decay_minutes,
        item_bytes,
        consumer_records_per_second: consumer,
        writer,
        consumer_measured: None,
        updated_at: now,
        updated_by: by.to_string(),
    })
}

fn bad(field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("{field} {why}"))
}

/// A JSON number, or text holding one (a form's field); empty text is absent.
fn number(field: &str, value: Option<&Value>) -> Result<Option<f64>, ApiError> {
    let parsed = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
        Some(Value::String(text)) => text.trim().parse::<f64>().ok(),
        Some(Value::Number(n)) => n.as_f64(),
        Some(_) => None,
    };
    match parsed {
        Some(n) if n.is_finite() => Ok(Some(n)),
        _ => Err(bad(field, format!("must be a number, not {}", value.map(Value::to_string).unwrap_or_default()))),
    }
}

/// A whole number of at least zero.
fn whole(field: &str, value: Option<&Value>) -> Result<Option<u64>, ApiError> {
    match number(field, value)? {
        None => Ok(None),
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 1e12 => Ok(Some(n as u64)),
        Some(n) => Err(bad(field, format!("must be a whole number of at least 0, not {n}"))),
    }
}

/// The start: an ISO-8601 time (a form's `YYYY-MM-DDTHH:MM` is read as UTC),
/// not in the past and within `MAX_DAYS_AHEAD`.
fn parse_start(value: Option<&Value>, now: DateTime<Utc>) -> Result<DateTime<Utc>, ApiError> {
    let text = match value {
        Some(Value::String(text)) if !text.trim().is_empty() => text.trim(),
        None | Some(Value::Null) | Some(Value::String(_)) => return Err(bad("start", "is missing")),
        Some(other) => return Err(bad("start", format!("must be an ISO-8601 time in UTC, not {other}"))),
    };
    let start = iso_millis::parse(text)
        .ok()
        .or_else(|| DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc)))
        .or_else(|| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M").ok().map(|t| t.and_utc()))
        .or_else(|| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").ok().map(|t| t.and_utc()))
        .ok_or_else(|| bad("start", format!("{text:?} is not an ISO-8601 time such as 2026-11-27T09:00:00Z")))?;
    if start < now - chrono::Duration::seconds(START_SKEW_SECONDS) {
        return Err(bad("start", format!("{} is in the past", iso_millis::format(&start))));
    }
    if start > now + chrono::Duration::days(MAX_DAYS_AHEAD) {
        return Err(bad("start", format!("must be within {MAX_DAYS_AHEAD} days from now")));
    }
    Ok(start)
}

impl Service {
    /// Every sale plan, by name.
    pub async fn sale_plans(&self) -> Result<Vec<SalePlan>, ApiError> {
        Ok(self.store.list_sale_plans().await?)
    }

    pub async fn sale_plan(&self, name: &str) -> Result<SalePlan, ApiError> {
        check_plan_name(name)?;
        self.store.get_sale_plan(name).await?.ok_or_else(|| no_plan(name))
    }

    /// A new plan (ops and admin).
    pub async fn create_sale_plan(&self, input: &SalePlanInput, by: &Principal) -> Result<SalePlan, ApiError> {
        by.require(Permission::PlanSales)?;
        let plan = parse_plan(input, Utc::now(), &by.actor.name)?;
        self.store.save_sale_plan(&plan, true).await?;
        self.record(AuditKind::SalePlanCreated, by, &plan.name, Some(plan_summary(&plan))).await;
        Ok(plan)
    }

    /// A plan changed (ops and admin): the name in the body, if any, must be
    /// the plan's own.
    pub async fn update_sale_plan(
        &self,
        name: &str,
        input: &SalePlanInput,
        by: &Principal,
    ) -> Result<SalePlan, ApiError> {
        by.require(Permission::PlanSales)?;
        check_plan_name(name)?;
        let mut input = input.clone();
        match &input.name {
            None => input.name = Some(Value::String(name.to_string())),
            Some(Value::String(given)) if given == name => {}
            Some(_) => return Err(bad("name", "cannot be changed: create a plan under the new name")),
        }
        let mut plan = parse_plan(&input, Utc::now(), &by.actor.name)?;
        // The form does not carry what a rehearsal measured: an edit keeps it
        // (the consumer's rate does not depend on the plan's figures).
        plan.consumer_measured = self.store.get_sale_plan(name).await?.and_then(|p| p.consumer_measured);
        self.store.save_sale_plan(&plan, false).await?;
        self.record(AuditKind::SalePlanChanged, by, &plan.name, Some(plan_summary(&plan))).await;
        Ok(plan)
    }

    pub async fn delete_sale_plan(&self, name: &str, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::PlanSales)?;
        check_plan_name(name)?;
        if !self.store.delete_sale_plan(name).await? {
            return Err(no_plan(name));
        }
        self.record(AuditKind::SalePlanDeleted, by, name, None).await;
        Ok(())
    }

    /// Writes the shard count the plan's peak needs (at least this server's
    /// `--shards`) as the count of each sale day not written yet (ops and
    /// admin). A day written with another
    /// count is a conflict: a day's count never changes once written.
    pub async fn write_sale_shards(&self, name: &str, by: &Principal) -> Result<ShardsWritten, ApiError> {
        by.require(Permission::PlanSales)?;
        let plan = self.sale_plan(name).await?;
        let needed = readiness::shards_needed(&plan, self.gsi2_entry_bytes()?)
            .map_err(|e| bad("peakOrdersPerSecond", e.to_string()))?;
        let shards = readiness::shards_to_write(needed, self.store.shards());
        let days = plan.days();
        // Every day first: a refusal must leave nothing half-written.
        let recorded = self.store.recorded_shards_now(&days).await?;
        let mut written_before = days.iter().filter_map(|d| recorded.get(d).copied().flatten().map(|n| (*d, n)));
        if let Some((day, n)) = written_before.find(|(_, n)| *n != shards) {
            return Err(StoreError::Conflict(format!(
                "{day} is written with {n} shards already, not {shards}: a day's shard count never changes once \
                 written (its orders are filed under it)"
            ))
            .into());
        }
        let mut written = Vec::new();
        for day in days {
            if recorded.get(&day).copied().flatten() == Some(shards) {
                written.push(DayShards { date: day, outcome: "already".into() });
                continue;
            }
            let outcome = match self.store.record_shards_ahead(day, shards).await? {
                Recorded::Written => "written",
                Recorded::Already => "already",
                Recorded::Other(n) => {
                    return Err(StoreError::Conflict(format!(
                        "{day} was written with {n} shards meanwhile, not {shards}: a day's shard count never \
                         changes once written"
                    ))
                    .into());
                }
            };
            written.push(DayShards { date: day, outcome: outcome.into() });
        }
        let days_written: Vec<String> =
            written.iter().filter(|d| d.outcome == "written").map(|d| d.date.to_string()).collect();
        if !days_written.is_empty() {
            let detail = format!("{shards} shards for {}", days_written.join(", "));
            self.record(AuditKind::ShardsWritten, by, &plan.name, Some(detail)).await;
        }
        Ok(ShardsWritten { shards, days: written })
    }

    /// The go/no-go of a plan, with each check's figures and fix.
    pub async fn readiness(&self, name: Option<&str>) -> Result<Readiness, ApiError> {
        let name = name.filter(|n| !n.is_empty()).ok_or_else(|| bad("plan", "is missing: name a sale plan"))?;
        let plan = self.sale_plan(name).await?;
        let now = Utc::now();
        let days = plan.days();
        let (recorded, throughput, hot, alarms, rehearsals, scaling, measured, mode) = futures::try_join!(
            self.store.recorded_shards_now(&days),
            self.throughput_or_unknown(),
            self.hot_history(now),
            self.alarms_or_unknown(),
            self.store.rehearsals(&plan.name, super::rehearsal::stale_before_ms()),
            self.scaling_or_error(),
            self.measured_writes(now),
            self.store.consumer_mode(),
        )?;
        let autoscaling = match &scaling {
            Ok(Some(targets)) => AutoScaling::Read(targets),
            Ok(None) => AutoScaling::NotRead,
            Err(err) => AutoScaling::Failed(err),
        };
        let recorded: Vec<_> = days.iter().map(|d| (*d, recorded.get(d).copied().flatten())).collect();
        let definitions = Definitions::program();
        let (observations, observed_minutes) = hot;
        Ok(readiness::assess(&Inputs {
            plan: &plan,
            now,
            on_aws: self.store.on_aws(),
            orders_table: self.store.orders_table(),
            metrics_table: self.store.metrics_table(),
            configured_shards: self.store.shards(),
            recorded: &recorded,
            definitions: &definitions,
            measured: Some(&measured),
            throughput: throughput.as_deref(),
            stream_shards: None,
            hot: &observations,
            observed_minutes,
            hot_window_days: HOT_WINDOW_DAYS,
            alarms: alarms.as_deref(),
            autoscaling,
            rehearsal: rehearsals.latest.as_ref(),
            rehearsal_running: rehearsals.running.is_some(),
            consumer_mode: Some(&mode),
            consumer_concurrency: self.consumer_concurrency,
        }))
    }

    /// One GSI2 entry of a typical order, in bytes.
    pub(super) fn gsi2_entry_bytes(&self) -> Result<u32, ApiError> {
        planner::gsi2_entry_bytes(&planner::typical_order(), self.store.shards())
            .map_err(|e| ApiError::BadRequest(e.to_string()))
    }

    /// DescribeTable's settings, or `None` when a table is missing.
    async fn throughput_or_unknown(&self) -> Result<Option<Vec<crate::server::store::ThroughputSettings>>, StoreError> {
        match self.store.throughput_settings().await {
            Ok(settings) => Ok(Some(settings)),
            Err(StoreError::Unavailable { kind: Unavailable::NoTable, .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The tables' alarms; `None` when not read (off AWS, no CloudWatch
    /// client, or CloudWatch failing: the log has why).
    async fn alarms_or_unknown(&self) -> Result<Option<Vec<crate::server::store::Alarm>>, StoreError> {
        if !self.store.on_aws() {
            return Ok(None);
        }
        match self.store.table_alarms().await {
            Ok(alarms) => Ok(alarms),
            Err(err) => {
                tracing::warn!(error = %err, "the tables' alarms could not be read");
                Ok(None)
            }
        }
    }

    /// Application Auto Scaling's write targets (`None`: not read here), or
    /// why they could not be read: a figure of the check, not a failure of
    /// the whole readiness (the log has it too).
    async fn scaling_or_error(&self) -> Result<Result<Option<Vec<ScalableTarget>>, String>, StoreError> {
        Ok(self.store.write_scaling().await.map_err(|err| {
            tracing::warn!(error = %err, "the tables' auto scaling could not be read");
            err.to_string()
        }))
    }

    /// The stream's pricing of the orders table's records over the window
    /// (the quality items the consumer writes every hour), by table and
    /// index: what an order costs as it is really written.
    async fn measured_writes(&self, now: DateTime<Utc>) -> Result<MeasuredWrites, StoreError> {
        let days = window_days(now.date_naive(), HOT_WINDOW_DAYS);
        let read = futures::future::try_join_all(days.iter().map(|day| self.store.quality_items(*day))).await?;
        let table = self.store.orders_table();
        let index_prefix = format!("{table}/");
        let mut measured = MeasuredWrites::default();
        for (day, items) in days.iter().zip(read) {
            let (records, units) = quality::priced_writes(&items);
            if records == 0 {
                continue;
            }
            measured.days.push(*day);
            measured.records += records;
            for (resource, n) in units {
                let name = match resource.strip_prefix(&index_prefix) {
                    Some(index) => index.to_string(),
                    None if resource == table => "table".to_string(),
                    None => continue,
                };
                *measured.units.entry(name).or_default() += n;
            }
        }
        Ok(measured)
    }

    /// The GSI1 keys recorded hot over the window, each with the index's
    /// units in its minute, and how many minutes the consumer observed.
    async fn hot_history(&self, now: DateTime<Utc>) -> Result<(Vec<HotObservation>, usize), StoreError> {
        let today = now.date_naive();
        let days = window_days(today, HOT_WINDOW_DAYS);
        let read = futures::future::try_join_all(days.iter().map(|day| async move {
            if *day == today {
                self.store.capacity_day(*day).await
            } else {
                self.store.persisted_capacity_day(*day).await
            }
        }))
        .await?;
        let gsi1 = Resource::index(self.store.orders_table(), "GSI1");
        let mut observations = Vec::new();
        let mut observed = 0;
        for capacity in &read {
            observed += capacity.observed_minutes();
            observations.extend(hot_of(capacity, &gsi1));
        }
        Ok((observations, observed))
    }
}

/// The hot GSI1 keys of a day, with the index's units in each one's minute.
fn hot_of(capacity: &CapacityDay, gsi1: &Resource) -> Vec<HotObservation> {
    let name = gsi1.to_string();
    let index = capacity.stream.get(gsi1);
    let start = capacity.date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    capacity
        .hot
        .iter()
        .flat_map(|(minute, keys)| keys.iter().map(move |key| (*minute, key)))
        .filter(|(_, (resource, _, _))| *resource == name)
        .map(|(minute, (_, key, units))| {
            let index_units = index.and_then(|m| m.get(usize::from(minute))).copied().unwrap_or(0.0);
            HotObservation {
                key: key.clone(),
                at: start + chrono::Duration::minutes(i64::from(minute)),
                units: *units as f64,
                // A minute's total is never below its hottest key's units.
                index_units: index_units.max(*units as f64),
            }
        })
        .collect()
}

fn no_plan(name: &str) -> ApiError {
    ApiError::NotFound(format!("no sale plan named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        "2026-11-20T10:00:00Z".parse().unwrap()
    }

    fn input(fields: Value) -> SalePlanInput {
        let mut base = json!({
            "name": "black-friday", "peakOrdersPerSecond": 500, "start": "2026-11-27T09:00:00Z",
            "rampMinutes": 10, "holdMinutes": 30, "decayMinutes": 20, "itemBytes": 700
        });
        for (k, v) in fields.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn refused(fields: Value) -> String {
        parse_plan(&input(fields), now(), "alice").unwrap_err().to_string()
    }

    #[test]
    fn a_plan_is_read_from_numbers_or_a_forms_text() {
        let plan = parse_plan(&input(json!({})), now(), "alice").unwrap();
        assert_eq!((plan.peak_orders_per_second, plan.hold_minutes, plan.item_bytes), (500.0, 30, 700));
        let form = input(json!({"peakOrdersPerSecond": "250.5", "start": "2026-11-27T09:00", "itemBytes": ""}));
        let plan = parse_plan(&form, now(), "alice").unwrap();
        assert_eq!(plan.peak_orders_per_second, 250.5);
        assert_eq!(plan.start, "2026-11-27T09:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert!(plan.item_bytes > 100, "the typical order's size when not given");
    }

    #[test]
    fn each_bad_field_is_named() {
        for peak in [json!(0), json!(-5), json!("abc"), json!("NaN"), json!(null), json!(true), json!(1e9)] {
            assert!(refused(json!({ "peakOrdersPerSecond": peak })).starts_with("peakOrdersPerSecond"), "{peak}");
        }
        assert!(refused(json!({"start": "2026-11-19T09:00:00Z"})).contains("in the past"));
        assert!(refused(json!({"start": "tomorrow"})).starts_with("start"));
        assert!(refused(json!({"name": "a\u{7}b"})).starts_with("name has the character U+0007"));
        assert!(refused(json!({"name": "x".repeat(65)})).starts_with("name must be 1 to 64"));
        assert!(refused(json!({"name": "   "})).starts_with("name must be 1 to 64"));
        assert!(refused(json!({"holdMinutes": 0})).starts_with("holdMinutes"));
        assert!(refused(json!({"rampMinutes": 1.5})).starts_with("rampMinutes"));
        assert!(refused(json!({"itemBytes": 500_000})).starts_with("itemBytes"));
        assert!(refused(json!({"consumerRecordsPerSecond": -1})).starts_with("consumerRecordsPerSecond"));
    }
}

//! `GET /api/capacity` and the capacity page: units, throttles, heat, hot
//! keys, the planner and the advisor.

use super::*;

/// `GET /api/capacity` and the capacity page: one day's consumed capacity,
/// throttles and GSI2 shard heat, with the shard planner's and the
/// capacity-mode advisor's tables over them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    #[serde(with = "day")]
    pub date: NaiveDate,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// The capacity source: `stream` (write units priced from the orders
    /// table's stream, every writer) or `cloudwatch` (DynamoDB's own).
    pub source: String,
    /// Per table and index, the table first.
    pub resources: Vec<ResourceUnits>,
    /// Throttled attempts by reason and where, most first.
    pub throttles: Vec<ThrottleCount>,
    pub heat: ShardHeat,
    /// The planner's table for the day's peak order rate, when there was one.
    pub plan: Option<ShardPlan>,
    /// The advisor's verdict per table and index over its window.
    pub advice: Vec<ModeAdvice>,
    /// The window the advice weighs, and how much of it was observed.
    pub advice_window: AdviceWindow,
    /// The partition keys written most during the day, per table and index
    /// (from the stream), most first.
    pub hot_keys: Vec<HotKeyMinute>,
    /// This instance's calls, per second, over the last five minutes (today
    /// only; other instances are counted in the minutes once they flush).
    pub recent: Vec<RecentUnits>,
    /// The recorded consumer mode: which form of the stream consumer counts
    /// (`None` when not read).
    #[serde(default)]
    pub consumer_mode: Option<ConsumerModeState>,
}

/// Units one table or index consumed during the day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceUnits {
    /// `orders`, or `orders/GSI2` for an index.
    pub resource: String,
    pub table: String,
    pub index: Option<String>,
    /// The minutes with any units, in order.
    pub minutes: Vec<UnitsMinute>,
    pub read_total: f64,
    pub write_total: f64,
    /// Where the read and the write figures come from: `stream`,
    /// `CloudWatch` or `this app's calls`.
    pub read_source: String,
    pub write_source: String,
}

/// A partition key's write units in one minute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HotKeyMinute {
    pub resource: String,
    pub key: String,
    pub minute: u16,
    pub units: u64,
    /// Of one partition's 1,000 write units a second, averaged over the minute.
    pub share: f64,
}

/// The advisor's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdviceWindow {
    pub source: String,
    pub days: u32,
    #[serde(with = "iso_millis")]
    pub start: DateTime<Utc>,
    pub minutes: usize,
    pub observed_minutes: usize,
    /// Observed minutes over the window's, 0 to 1.
    pub coverage: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UnitsMinute {
    /// Minutes since midnight UTC, 0 to 1439.
    pub minute: u16,
    pub read: f64,
    pub write: f64,
}

/// Throttled attempts (retried ones included) for one reason at one place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ThrottleCount {
    /// As DynamoDB names it, e.g. `IndexWriteKeyRangeThroughputExceeded`.
    pub reason: String,
    /// The index, `table`, `<table> or its indexes` (a transaction), or
    /// `not named`.
    pub place: String,
    /// The resource as DynamoDB named it, without its ARN's account and region.
    pub resource: String,
    pub total: u64,
    /// (minute of the day, attempts), the minutes with any.
    pub minutes: Vec<(u16, u64)>,
}

/// Writes to each GSI2 shard per minute of the day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShardHeat {
    pub shards: u32,
    /// The minutes with any writes, each with one count per shard.
    pub minutes: Vec<HeatMinute>,
    /// Write units one index write costs (the planner's entry size).
    pub units_per_write: u32,
    /// Write units a second one partition serves.
    pub partition_limit: f64,
    /// The share of the limit above which the page warns.
    pub warn_above: f64,
    pub hottest: Option<HotShard>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeatMinute {
    pub minute: u16,
    pub writes: Vec<u64>,
}

/// The shard-minute with the most writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HotShard {
    pub minute: u16,
    pub shard: u32,
    pub writes: u64,
    /// Averaged over the minute: a second within it may have been hotter.
    pub units_per_second: f64,
    /// `units_per_second` over the partition limit.
    pub utilisation: f64,
    pub warning: bool,
}

/// The shard planner's arithmetic for an observed peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShardPlan {
    /// Orders entering PENDING in the busiest minute, per second.
    pub peak_orders_per_second: f64,
    pub peak_minute: u16,
    pub index_item_bytes: u32,
    pub shards: u32,
    /// More shards than the app allows would be needed.
    pub capped: bool,
    /// The day's shard count as recorded.
    pub current_shards: u32,
    pub steps: Vec<String>,
    /// Whose writes the plan is sized as (the Sales plans' default: another
    /// service's plain writes), and where its figures come from.
    #[serde(default)]
    pub writer: Writer,
    #[serde(default)]
    pub source: String,
    /// The shards the same minute would need through this console (its
    /// transactions bill each index write twice).
    #[serde(default)]
    pub console_shards: u32,
}

/// The capacity-mode advisor's verdict on one table or index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModeAdvice {
    pub resource: String,
    /// `on-demand`, `provisioned`, or `none` (not enough history).
    pub mode: String,
    /// `aws application-autoscaling put-scheduled-action --cli-input-json`
    /// documents provisioned needs (a floor raise before a burst and its
    /// setting back), pretty-printed.
    pub scheduled_actions: Vec<String>,
    pub minutes: usize,
    pub on_demand_monthly: f64,
    pub provisioned_monthly: f64,
    pub read: AccessUse,
    pub write: AccessUse,
    pub reason: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccessUse {
    pub average_per_second: f64,
    pub peak_per_second: f64,
    /// Of the capacity auto scaling would have provisioned, 0 to 1.
    pub average_utilisation: f64,
}

/// Per-second units of one table or index over the last five minutes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RecentUnits {
    pub resource: String,
    /// Oldest second first.
    pub read: Vec<f64>,
    pub write: Vec<f64>,
}

//! The seed's capacity mechanics as code, for the table and each GSI
//! separately (an index throttles on its own, and its writes throttle the
//! table's):
//!
//! - provisioned: the capacity starts at the minimum; Application Auto
//!   Scaling keeps it at the advisor's target utilisation (70%) between the
//!   minimum and the maximum, and, when a `BatchMin` is set, a scheduled
//!   action raises the minimum before the month-end batch and sets it back
//!   after (auto scaling reacts only after two minutes above target, and a
//!   3x batch would throttle meanwhile). `advise` prints every value;
//! - on demand: a maximum throughput per table and index, a cap on what a
//!   runaway writer can cost (`plan` prints values for a sale's peak);
//! - either: warm throughput, what the table takes at once without
//!   splitting partitions first (`plan`), left unset at 0.
//!
//! CloudFormation sets the provisioned capacity only when the template's
//! value changes (it compares templates, not the table), so a stack update
//! that leaves the minimum alone leaves auto scaling's capacity alone.

use super::{
    Deployment, TableOrIndex, TableRole, billing_mode, if_, no_value, provisioned_condition, reference, side_name, sub,
};
use crate::server::rules::AUTO_SCALING_TARGET_PERCENT;
use crate::server::store::TableCapacity;
use crate::server::store::usage::ReadWrite;
use serde_json::{Map, Value, json};

pub const BATCH_RAISE_SCHEDULE: &str = "BatchRaiseSchedule";
pub const BATCH_LOWER_SCHEDULE: &str = "BatchLowerSchedule";
/// On-demand maxima until `plan` says otherwise: above a large sale
/// (some 2,500 orders a second written in transactions), well under the
/// account's 40,000 per table.
pub const DEFAULT_ON_DEMAND_MAX_READ: i64 = 20_000;
pub const DEFAULT_ON_DEMAND_MAX_WRITE: i64 = 10_000;
/// The provisioned maximum's default, as a multiple of the minimum.
const DEFAULT_MAX_FACTOR: i64 = 20;
/// `provision`'s default capacity, the minimum's default in on-demand mode.
const DEFAULT_MIN: i64 = 5;

/// One setting of one table or index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Provisioned: auto scaling's minimum (and the starting capacity).
    Min,
    /// Provisioned: auto scaling's maximum.
    Max,
    /// Provisioned: the minimum from the batch raise to the batch lower (0: no schedule).
    BatchMin,
    /// On demand: the most request units a second.
    OnDemandMax,
    /// Warm throughput (0: not set).
    Warm,
}

/// The parameter of one setting: `parameter("OrdersGSI2", Setting::Min, Write)`
/// is `OrdersGSI2WriteMin`.
pub fn parameter(prefix: &str, setting: Setting, side: ReadWrite) -> String {
    let side = side_name(side);
    match setting {
        Setting::Min => format!("{prefix}{side}Min"),
        Setting::Max => format!("{prefix}{side}Max"),
        Setting::BatchMin => format!("{prefix}{side}BatchMin"),
        Setting::OnDemandMax => format!("{prefix}OnDemandMax{side}"),
        Setting::Warm => format!("{prefix}Warm{side}"),
    }
}

/// The billing mode parameter of a table: `OrdersBillingMode`.
pub fn billing_parameter(role: TableRole) -> String {
    format!("{}BillingMode", role.prefix())
}

const SIDES: [ReadWrite; 2] = [ReadWrite::Read, ReadWrite::Write];

/// The capacity parameters, conditions and auto scaling of every table and
/// index.
pub(super) fn add(
    deployment: &Deployment,
    parameters: &mut Map<String, Value>,
    conditions: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
) {
    for (role, def) in deployment.tables() {
        parameters.insert(
            billing_parameter(role),
            json!({
                "Type": "String",
                "AllowedValues": ["PAY_PER_REQUEST", "PROVISIONED"],
                "Default": billing_mode(def.capacity),
                "Description": format!("{}: on demand, or provisioned with auto scaling (advise says which)", def.name)
            }),
        );
        conditions.insert(
            provisioned_condition(role),
            json!({ "Fn::Equals": [reference(&billing_parameter(role)), "PROVISIONED"] }),
        );
    }
    parameters.insert(
        BATCH_RAISE_SCHEDULE.into(),
        schedule_parameter("cron(0 22 L * ? *)", "When every BatchMin takes effect, in UTC (advise prints it)"),
    );
    parameters.insert(
        BATCH_LOWER_SCHEDULE.into(),
        schedule_parameter("cron(0 4 1 * ? *)", "When the minimum goes back to Min, in UTC (advise prints it)"),
    );
    for sized in deployment.tables_and_indexes() {
        add_sized(&sized, parameters, conditions, resources);
    }
}

fn schedule_parameter(default: &str, description: &str) -> Value {
    json!({
        "Type": "String",
        "Default": default,
        "AllowedPattern": "^(cron|at)\\(.+\\)$",
        "Description": description
    })
}

fn add_sized(
    sized: &TableOrIndex<'_>,
    parameters: &mut Map<String, Value>,
    conditions: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
) {
    let prefix = sized.prefix();
    let label = sized.label();
    for side in SIDES {
        let word = side_name(side).to_lowercase();
        let min = match (sized.table.capacity, side) {
            (TableCapacity::Provisioned { read, .. }, ReadWrite::Read) => read,
            (TableCapacity::Provisioned { write, .. }, ReadWrite::Write) => write,
            (TableCapacity::OnDemand, _) => DEFAULT_MIN,
        };
        let number = |default: i64, least: i64, description: String| json!({ "Type": "Number", "Default": default, "MinValue": least, "Description": description });
        let on_demand_max = match side {
            ReadWrite::Read => DEFAULT_ON_DEMAND_MAX_READ,
            ReadWrite::Write => DEFAULT_ON_DEMAND_MAX_WRITE,
        };
        for (setting, value) in [
            (Setting::Min, number(min, 1, format!("{label}: provisioned {word} capacity, auto scaling's minimum"))),
            (Setting::Max, number(min * DEFAULT_MAX_FACTOR, 1, format!("{label}: auto scaling's {word} maximum"))),
            (Setting::BatchMin, number(0, 0, format!("{label}: {word} minimum during the batch (0: none)"))),
            (
                Setting::OnDemandMax,
                number(on_demand_max, 1, format!("{label}: on-demand {word} units a second at most")),
            ),
            (Setting::Warm, number(0, 0, format!("{label}: warm {word} units a second (0: not set)"))),
        ] {
            parameters.insert(parameter(&prefix, setting, side), value);
        }
        conditions.insert(
            batch_condition(&prefix, side),
            json!({ "Fn::And": [
                { "Condition": sized.provisioned() },
                { "Fn::Not": [{ "Fn::Equals": [reference(&parameter(&prefix, Setting::BatchMin, side)), "0"] }] }
            ] }),
        );
        conditions.insert(
            warm_condition(&prefix, Some(side)),
            json!({ "Fn::Not": [{ "Fn::Equals": [reference(&parameter(&prefix, Setting::Warm, side)), "0"] }] }),
        );
        resources.insert(scaling_target(&prefix, side), scalable_target(sized, side));
        resources.insert(format!("{prefix}{}Tracking", side_name(side)), tracking_policy(sized, side));
    }
    conditions.insert(
        warm_condition(&prefix, None),
        json!({ "Fn::And": SIDES.map(|side| json!({ "Condition": warm_condition(&prefix, Some(side)) })) }),
    );
}

fn batch_condition(prefix: &str, side: ReadWrite) -> String {
    format!("{prefix}{}Batch", side_name(side))
}

/// `OrdersWarmRead`, `OrdersWarmWrite`; `OrdersWarm`: both.
fn warm_condition(prefix: &str, side: Option<ReadWrite>) -> String {
    format!("{prefix}Warm{}", side.map_or("", side_name))
}

/// The logical id of a side's scalable target: `OrdersGSI2WriteScaling`.
pub(super) fn scaling_target(prefix: &str, side: ReadWrite) -> String {
    format!("{prefix}{}Scaling", side_name(side))
}

/// What a table's or index's resource says of its capacity: provisioned at
/// the minimum, or on demand with its maxima; warm throughput where set.
pub(super) fn throughput(sized: &TableOrIndex<'_>) -> Map<String, Value> {
    let prefix = sized.prefix();
    let provisioned = sized.provisioned();
    let value = |setting, side| reference(&parameter(&prefix, setting, side));
    let mut properties = Map::new();
    properties.insert(
        "ProvisionedThroughput".into(),
        if_(
            &provisioned,
            json!({
                "ReadCapacityUnits": value(Setting::Min, ReadWrite::Read),
                "WriteCapacityUnits": value(Setting::Min, ReadWrite::Write)
            }),
            no_value(),
        ),
    );
    properties.insert(
        "OnDemandThroughput".into(),
        if_(
            &provisioned,
            no_value(),
            json!({
                "MaxReadRequestUnits": value(Setting::OnDemandMax, ReadWrite::Read),
                "MaxWriteRequestUnits": value(Setting::OnDemandMax, ReadWrite::Write)
            }),
        ),
    );
    // Either side, or both: each branch names only what is set.
    let (read, write) = (value(Setting::Warm, ReadWrite::Read), value(Setting::Warm, ReadWrite::Write));
    properties.insert(
        "WarmThroughput".into(),
        if_(
            &warm_condition(&prefix, None),
            json!({ "ReadUnitsPerSecond": read, "WriteUnitsPerSecond": write }),
            if_(
                &warm_condition(&prefix, Some(ReadWrite::Read)),
                json!({ "ReadUnitsPerSecond": read }),
                if_(
                    &warm_condition(&prefix, Some(ReadWrite::Write)),
                    json!({ "WriteUnitsPerSecond": write }),
                    no_value(),
                ),
            ),
        ),
    );
    properties
}

/// Application Auto Scaling's target for one side of a table or index,
/// with the batch's scheduled floor when it has one.
fn scalable_target(sized: &TableOrIndex<'_>, side: ReadWrite) -> Value {
    let prefix = sized.prefix();
    let table = sized.role.logical_id();
    let (resource_id, kind) = match sized.index {
        Some(index) => (sub(&format!("table/${{{table}}}/index/{index}")), "index"),
        None => (sub(&format!("table/${{{table}}}")), "table"),
    };
    let value = |setting| reference(&parameter(&prefix, setting, side));
    let action = |name: &str, schedule: &str, min: Value| {
        json!({
            "ScheduledActionName": format!("{prefix}{}{name}", side_name(side)),
            "Schedule": reference(schedule),
            "Timezone": "Etc/UTC",
            "ScalableTargetAction": { "MinCapacity": min }
        })
    };
    json!({
        "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
        "Condition": sized.provisioned(),
        "Properties": {
            "ServiceNamespace": "dynamodb",
            "ResourceId": resource_id,
            "ScalableDimension": format!("dynamodb:{kind}:{}CapacityUnits", side_name(side)),
            "MinCapacity": value(Setting::Min),
            "MaxCapacity": value(Setting::Max),
            "ScheduledActions": if_(
                &batch_condition(&prefix, side),
                json!([
                    action("BatchRaise", BATCH_RAISE_SCHEDULE, value(Setting::BatchMin)),
                    action("BatchLower", BATCH_LOWER_SCHEDULE, value(Setting::Min))
                ]),
                no_value()
            )
        }
    })
}

/// Target tracking at the advisor's target utilisation.
fn tracking_policy(sized: &TableOrIndex<'_>, side: ReadWrite) -> Value {
    let prefix = sized.prefix();
    json!({
        "Type": "AWS::ApplicationAutoScaling::ScalingPolicy",
        "Condition": sized.provisioned(),
        "Properties": {
            "PolicyName": format!("{prefix}{}Tracking", side_name(side)),
            "PolicyType": "TargetTrackingScaling",
            "ScalingTargetId": reference(&scaling_target(&prefix, side)),
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": AUTO_SCALING_TARGET_PERCENT,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": format!("DynamoDB{}CapacityUtilization", side_name(side))
                }
            }
        }
    })
}

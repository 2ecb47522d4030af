//! The alarms, all to one SNS topic, on alarm and on recovery.
//!
//! Per table and per GSI, reads and writes apart (an index throttles on
//! its own), one alarm per throttling reason DynamoDB publishes, since each
//! has its own remedy: a hot key range (more GSI2 shards: `plan`), the
//! capacity (provisioned) or the cap (on demand) reached, the account's
//! quota; and one when consumption nears that capacity or cap. There is no
//! metric of one partition's consumption: a hot key shows as key-range
//! throttles, not as a table-wide sum against one partition's 1,000.
//!
//! Each needs M of N minutes, not N of N: a failure that comes and goes
//! still fires.

use super::capacity::{Setting, parameter};
use super::{Deployment, TableOrIndex, dimension, if_, reference, side_name};
use crate::server::store::usage::ReadWrite;
use crate::server::stream::lambda::{FAILED_RECORDS, METRIC_NAMESPACE};
use serde_json::{Map, Value, json};

/// How far behind the consumer may fall before it pages someone: the
/// dashboard's figures are then a minute stale.
const ITERATOR_AGE_ALARM_MS: u32 = 60_000;
/// "Near" the ceiling: the percentage of it that raises the alarm.
const NEAR_PERCENT: f64 = 80.0;
/// Console 5XX answers a minute that page someone.
const CONSOLE_ERRORS_PER_MINUTE: f64 = 10.0;

/// M of N minutes.
#[derive(Clone, Copy)]
struct Of(u32, u32);

/// Throttles recur: two minutes in five.
const THROTTLES: Of = Of(2, 5);
/// A level held: three minutes in five.
const HELD: Of = Of(3, 5);

pub(super) fn add(deployment: &Deployment, conditions: &mut Map<String, Value>, resources: &mut Map<String, Value>) {
    conditions.insert("AlarmMail".into(), json!({ "Fn::Not": [{ "Fn::Equals": [reference("AlarmEmail"), ""] }] }));
    // CloudWatch cannot publish to a topic under the AWS managed SNS key,
    // so the topic is not encrypted: alarms carry no data.
    resources.insert("AlarmTopic".into(), json!({ "Type": "AWS::SNS::Topic", "Properties": {} }));
    resources.insert(
        "AlarmMailSubscription".into(),
        json!({
            "Type": "AWS::SNS::Subscription",
            "Condition": "AlarmMail",
            "Properties": { "TopicArn": reference("AlarmTopic"), "Protocol": "email", "Endpoint": reference("AlarmEmail") }
        }),
    );
    for sized in deployment.tables_and_indexes() {
        for side in [ReadWrite::Read, ReadWrite::Write] {
            resources.extend(throttle_alarms(&sized, side));
        }
    }
    resources.extend(consumer_alarms(deployment));
    resources.extend(console_alarms());
}

/// A table's or index's alarms on one side.
fn throttle_alarms(sized: &TableOrIndex<'_>, side: ReadWrite) -> Map<String, Value> {
    let prefix = sized.prefix();
    let label = sized.label();
    let s = side_name(side);
    let word = s.to_lowercase();
    let dimensions = sized.dimensions();
    let provisioned = sized.provisioned();
    let events = |metric: Value| single("AWS/DynamoDB", metric, "Sum", dimensions.clone(), 60);
    let mut alarms = Map::new();
    alarms.insert(
        format!("{prefix}{s}KeyRangeThrottles"),
        alarm(
            json!(format!("{label}: {word}s throttled on a hot key range (a partition's limit)")),
            THROTTLES,
            0.0,
            events(json!(format!("{s}KeyRangeThroughputThrottleEvents"))),
        ),
    );
    alarms.insert(
        format!("{prefix}{s}CapacityThrottles"),
        alarm(
            json!(format!("{label}: {word}s throttled at the provisioned capacity or the on-demand maximum")),
            THROTTLES,
            0.0,
            events(if_(
                &provisioned,
                json!(format!("{s}ProvisionedThroughputThrottleEvents")),
                json!(format!("{s}MaxOnDemandThroughputThrottleEvents")),
            )),
        ),
    );
    alarms.insert(
        format!("{prefix}{s}AccountThrottles"),
        alarm(
            json!(format!("{label}: {word}s throttled at the account's quota")),
            THROTTLES,
            0.0,
            events(json!(format!("{s}AccountLimitThrottleEvents"))),
        ),
    );
    // Consumption a second as a percentage of the ceiling: auto scaling's
    // maximum (provisioned), or the on-demand maximum.
    let ceiling = if_(
        &provisioned,
        reference(&parameter(&prefix, Setting::Max, side)),
        reference(&parameter(&prefix, Setting::OnDemandMax, side)),
    );
    let consumed = metric_query("m", "AWS/DynamoDB", json!(format!("Consumed{s}CapacityUnits")), "Sum", dimensions);
    let percent = json!({
        "Id": "e",
        "Expression": { "Fn::Sub": ["100*m/60/${Ceiling}", { "Ceiling": ceiling }] },
        "Label": "percent of the ceiling",
        "ReturnData": true
    });
    alarms.insert(
        format!("{prefix}{s}NearCeiling"),
        alarm(
            json!(format!(
                "{label}: {word}s above {NEAR_PERCENT:.0}% of their ceiling (auto scaling's Max, or OnDemandMax)"
            )),
            HELD,
            NEAR_PERCENT,
            math(vec![consumed, percent]),
        ),
    );
    alarms
}

/// The consumer's alarms: behind the stream, failing whole batches or
/// records, throttled, not invoked at all while the table is written, and
/// records given up on (the counters miss them until delivered again).
fn consumer_alarms(deployment: &Deployment) -> Map<String, Value> {
    let function = json!([dimension("FunctionName", reference("Consumer"))]);
    let lambda = |metric: &str, stat: &str| single("AWS/Lambda", json!(metric), stat, function.clone(), 60);
    let mut alarms = Map::new();
    alarms.insert(
        "ConsumerIteratorAge".into(),
        alarm(
            json!("The stream consumer is over a minute behind the orders table"),
            HELD,
            f64::from(ITERATOR_AGE_ALARM_MS),
            lambda("IteratorAge", "Maximum"),
        ),
    );
    alarms.insert(
        "ConsumerErrors".into(),
        alarm(json!("The stream consumer failed whole invocations"), THROTTLES, 0.0, lambda("Errors", "Sum")),
    );
    alarms.insert(
        "ConsumerFailedRecords".into(),
        alarm(
            json!("The stream consumer reported records it could not apply (they are retried)"),
            THROTTLES,
            0.0,
            single(METRIC_NAMESPACE, json!(FAILED_RECORDS), "Sum", function.clone(), 60),
        ),
    );
    alarms.insert(
        "ConsumerThrottles".into(),
        alarm(json!("The stream consumer's invocations were throttled"), HELD, 0.0, lambda("Throttles", "Sum")),
    );
    let writes = metric_query(
        "w",
        "AWS/DynamoDB",
        json!("ConsumedWriteCapacityUnits"),
        "Sum",
        json!([dimension("TableName", json!(deployment.orders.name))]),
    );
    let invocations = metric_query("i", "AWS/Lambda", json!("Invocations"), "Sum", function);
    let idle = json!({
        "Id": "e",
        "Expression": "IF(FILL(w, 0) > 0 AND FILL(i, 0) == 0, 1, 0)",
        "Label": "written, not invoked",
        "ReturnData": true
    });
    // Five minutes in a row: a batch of writes at a minute's end is read in
    // the next one.
    alarms.insert(
        "ConsumerNotInvoked".into(),
        alarm(
            json!("The orders table is written and the consumer is not invoked (the mapping is off or broken)"),
            Of(5, 5),
            0.0,
            math(vec![writes, invocations, idle]),
        ),
    );
    let queue = json!([dimension("QueueName", json!({ "Fn::GetAtt": ["ConsumerDeadLetters", "QueueName"] }))]);
    alarms.insert(
        "ConsumerGaveUp".into(),
        alarm(
            json!("The consumer gave records up to its dead-letter queue: replay them within the stream's 24 h"),
            Of(1, 1),
            0.0,
            single("AWS/SQS", json!("ApproximateNumberOfMessagesVisible"), "Maximum", queue, 300),
        ),
    );
    alarms
}

/// The console's: targets failing their health check, and 5XX answers.
fn console_alarms() -> Map<String, Value> {
    let balancer = dimension("LoadBalancer", json!({ "Fn::GetAtt": ["LoadBalancer", "LoadBalancerFullName"] }));
    let group = dimension("TargetGroup", json!({ "Fn::GetAtt": ["TargetGroup", "TargetGroupFullName"] }));
    let mut unhealthy = alarm(
        json!("Console tasks fail the balancer's health check (/healthz)"),
        HELD,
        0.0,
        single(
            "AWS/ApplicationELB",
            json!("UnHealthyHostCount"),
            "Maximum",
            json!([balancer.clone(), group.clone()]),
            60,
        ),
    );
    unhealthy["Condition"] = json!("Console");
    let targets = metric_query(
        "t",
        "AWS/ApplicationELB",
        json!("HTTPCode_Target_5XX_Count"),
        "Sum",
        json!([balancer.clone(), group]),
    );
    let own = metric_query("b", "AWS/ApplicationELB", json!("HTTPCode_ELB_5XX_Count"), "Sum", json!([balancer]));
    let sum = json!({ "Id": "e", "Expression": "FILL(t, 0) + FILL(b, 0)", "Label": "5XX", "ReturnData": true });
    let mut errors = alarm(
        json!("The console answered 5XX (the store down, or no healthy task)"),
        HELD,
        CONSOLE_ERRORS_PER_MINUTE,
        math(vec![targets, own, sum]),
    );
    errors["Condition"] = json!("Console");
    let mut alarms = Map::new();
    alarms.insert("ConsoleUnhealthyTargets".into(), unhealthy);
    alarms.insert("ConsoleErrors".into(), errors);
    alarms
}

fn single(namespace: &str, metric: Value, statistic: &str, dimensions: Value, period: u32) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert("Namespace".into(), json!(namespace));
    properties.insert("MetricName".into(), metric);
    properties.insert("Dimensions".into(), dimensions);
    properties.insert("Statistic".into(), json!(statistic));
    properties.insert("Period".into(), json!(period));
    properties
}

fn metric_query(id: &str, namespace: &str, metric: Value, stat: &str, dimensions: Value) -> Value {
    json!({
        "Id": id,
        "ReturnData": false,
        "MetricStat": {
            "Metric": { "Namespace": namespace, "MetricName": metric, "Dimensions": dimensions },
            "Period": 60,
            "Stat": stat
        }
    })
}

fn math(metrics: Vec<Value>) -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert("Metrics".into(), Value::Array(metrics));
    properties
}

/// An alarm: above `threshold` in M of N periods, a missing datum no alarm.
fn alarm(description: Value, of: Of, threshold: f64, mut properties: Map<String, Value>) -> Value {
    let Of(m, n) = of;
    properties.insert("AlarmDescription".into(), description);
    properties.insert("ComparisonOperator".into(), json!("GreaterThanThreshold"));
    properties.insert("Threshold".into(), json!(threshold));
    properties.insert("EvaluationPeriods".into(), json!(n));
    properties.insert("DatapointsToAlarm".into(), json!(m));
    properties.insert("TreatMissingData".into(), json!("notBreaching"));
    properties.insert("AlarmActions".into(), json!([reference("AlarmTopic")]));
    properties.insert("OKActions".into(), json!([reference("AlarmTopic")]));
    json!({ "Type": "AWS::CloudWatch::Alarm", "Properties": properties })
}

//! `northwind-ops template`: the CloudFormation template of the whole
//! service on AWS, generated from the table definitions `provision` uses
//! (so the two cannot drift) and the policies of `docs/iam/`:
//!
//! - both tables, with point-in-time recovery, deletion protection, KMS
//!   encryption and `Retain` policies, in either billing mode (a parameter
//!   per table); provisioned, Application Auto Scaling on the table and on
//!   each GSI separately at the advisor's target utilisation, with a
//!   scheduled floor raise before the month-end batch; on demand, a
//!   maximum throughput per table and index; warm throughput on either
//!   (`capacity`);
//! - the stream consumer as a Lambda function with its event source
//!   mapping, dead-letter queue and log group (`consumer`);
//! - the console: `serve` on ECS Fargate behind an Application Load
//!   Balancer, its secrets in Secrets Manager, scaled on requests per
//!   target; `DeployConsole=false` leaves it out (`console`);
//! - alarms on DynamoDB's throttling reasons per table and GSI, how near
//!   each is to its ceiling, and the consumer's and the console's health,
//!   all to one SNS topic (`alarms`).
//!
//! Parameter names are part of the interface: `advise` and `plan` print
//! values for them (`parameter_overrides`).

mod alarms;
mod capacity;
mod console;
mod consumer;
pub use consumer::{
    BATCH_SIZE as CONSUMER_BATCH_SIZE, BATCH_WINDOW_SECONDS as CONSUMER_BATCH_WINDOW_SECONDS, PARALLELIZATION_FACTOR,
    TUMBLING_WINDOW_SECONDS,
};

use crate::server::store::usage::ReadWrite;
use crate::server::store::{TableCapacity, TableDef};
use aws_sdk_dynamodb::types::ProjectionType;
use serde_json::{Map, Value, json};

pub use capacity::{
    BATCH_LOWER_SCHEDULE, BATCH_RAISE_SCHEDULE, DEFAULT_ON_DEMAND_MAX_READ, DEFAULT_ON_DEMAND_MAX_WRITE, Setting,
    billing_parameter, parameter,
};

/// An image by digest: a tag is mutable (ECS resolves it at each task
/// start, Lambda once at deploy time, so the two could run different
/// code); a digest is one image.
pub const IMAGE_BY_DIGEST: &str = r"^[^@\s]+@sha256:[0-9a-f]{64}$";

/// The condition that the console's tasks consume the stream themselves
/// (`ConsumerRunsIn=console`).
const IN_PROCESS: &str = "ConsumerInProcess";

/// The largest template CloudFormation takes from S3. It is over the
/// 51,200 bytes `aws cloudformation deploy` takes from a file (alarms and
/// auto scaling for every table and index, in either billing mode), so the
/// deploy names a bucket (docs/aws.md, "How do I go from an empty account
/// to a working console?", step 2).
pub const TEMPLATE_URL_LIMIT: usize = 1_000_000;

/// What a deployment is generated for.
pub struct Deployment {
    pub orders: TableDef,
    pub metrics: TableDef,
}

/// Which of the two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableRole {
    Orders,
    Metrics,
}

impl TableRole {
    /// The prefix of its parameters, conditions and alarms.
    pub fn prefix(self) -> &'static str {
        match self {
            TableRole::Orders => "Orders",
            TableRole::Metrics => "Metrics",
        }
    }

    /// Its resource's logical id.
    pub fn logical_id(self) -> &'static str {
        match self {
            TableRole::Orders => "OrdersTable",
            TableRole::Metrics => "MetricsTable",
        }
    }
}

/// A table or one of its GSIs: what the stack sizes, scales and alarms on
/// one by one, since an index throttles independently of its table.
pub struct TableOrIndex<'a> {
    pub role: TableRole,
    pub table: &'a TableDef,
    pub index: Option<&'static str>,
}

impl TableOrIndex<'_> {
    /// `Orders`, `OrdersGSI2`, `Metrics`: the prefix of its parameters.
    pub fn prefix(&self) -> String {
        format!("{}{}", self.role.prefix(), self.index.unwrap_or_default())
    }

    /// Its CloudWatch dimensions.
    fn dimensions(&self) -> Value {
        let mut dimensions = vec![dimension("TableName", json!(self.table.name))];
        if let Some(index) = self.index {
            dimensions.push(dimension("GlobalSecondaryIndexName", json!(index)));
        }
        Value::Array(dimensions)
    }

    /// What people call it: `northwind-orders/GSI2`.
    fn label(&self) -> String {
        match self.index {
            Some(index) => format!("{}/{index}", self.table.name),
            None => self.table.name.clone(),
        }
    }

    /// The condition under which its table is provisioned.
    fn provisioned(&self) -> String {
        provisioned_condition(self.role)
    }
}

impl Deployment {
    fn tables(&self) -> [(TableRole, &TableDef); 2] {
        [(TableRole::Orders, &self.orders), (TableRole::Metrics, &self.metrics)]
    }

    /// Every table and GSI.
    pub fn tables_and_indexes(&self) -> Vec<TableOrIndex<'_>> {
        self.tables()
            .into_iter()
            .flat_map(|(role, table)| {
                std::iter::once(None)
                    .chain(table.indexes.iter().map(|index| Some(index.name)))
                    .map(move |index| TableOrIndex { role, table, index })
            })
            .collect()
    }
}

/// The whole template.
pub fn template(deployment: &Deployment) -> Value {
    let mut parameters = Map::new();
    let mut conditions = Map::new();
    let mut resources = Map::new();
    parameters.extend(deployment_parameters());
    for (role, def) in deployment.tables() {
        resources.insert(role.logical_id().into(), table(role, def));
    }
    conditions.insert(IN_PROCESS.into(), json!({ "Fn::Equals": [reference("ConsumerRunsIn"), "console"] }));
    capacity::add(deployment, &mut parameters, &mut conditions, &mut resources);
    consumer::add(deployment, &mut parameters, &mut conditions, &mut resources);
    console::add(deployment, &mut parameters, &mut conditions, &mut resources);
    alarms::add(deployment, &mut conditions, &mut resources);
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "Northwind Ops: the orders and metrics tables, the stream consumer, the console on ECS behind \
                        a load balancer, and their alarms (generated by `northwind-ops template`)",
        "Metadata": { "AWS::CloudFormation::Interface": { "ParameterGroups": parameter_groups(&parameters) } },
        "Parameters": parameters,
        "Rules": console::rules(),
        "Conditions": conditions,
        "Resources": resources,
        "Outputs": outputs()
    })
}

/// The parameters every part of the stack shares.
fn deployment_parameters() -> Map<String, Value> {
    let mut parameters = Map::new();
    parameters.insert(
        "ImageUri".into(),
        json!({
            "Type": "String",
            "AllowedPattern": IMAGE_BY_DIGEST,
            "ConstraintDescription": "the image by digest: REPOSITORY@sha256:<64 hex digits>, not a tag",
            "Description": "The Northwind Ops image by digest (make image, pushed to ECR: REPOSITORY@sha256:...), \
                            the same for the console's tasks and the consumer"
        }),
    );
    parameters.insert(
        "ConsumerRunsIn".into(),
        json!({
            "Type": "String",
            "AllowedValues": ["lambda", "console"],
            "Default": "lambda",
            "Description": "Who consumes the orders stream: the Lambda function (the console's tasks then run \
                            serve --no-consumer, with the web tier's policy), or the console's tasks (the \
                            function's mapping is disabled; the tasks take the serve policy)"
        }),
    );
    parameters.insert(
        "Architecture".into(),
        json!({
            "Type": "String",
            "AllowedValues": ["x86_64", "arm64"],
            "Default": host_architecture(),
            "Description": "The image's CPU architecture (the machine that built it)"
        }),
    );
    parameters.insert(
        "AlarmEmail".into(),
        json!({
            "Type": "String",
            "Default": "",
            "Description": "An address the alarm topic mails (confirm the subscription); empty: subscribe to the topic yourself"
        }),
    );
    parameters.insert(
        "RecoveryPeriodDays".into(),
        json!({
            "Type": "Number",
            "Default": 35,
            "MinValue": 1,
            "MaxValue": 35,
            "Description": "Days of point-in-time recovery kept for both tables"
        }),
    );
    parameters.insert(
        "LogRetentionDays".into(),
        json!({
            "Type": "Number",
            "Default": 30,
            "AllowedValues": [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653],
            "Description": "Days the consumer's and the console's logs are kept"
        }),
    );
    parameters
}

/// The architecture this binary was built for: the image holds this build.
fn host_architecture() -> &'static str {
    if cfg!(target_arch = "aarch64") { "arm64" } else { "x86_64" }
}

/// The console groups the parameters by part, in this order.
fn parameter_groups(parameters: &Map<String, Value>) -> Value {
    let group = |label: &str, pick: &dyn Fn(&str) -> bool| {
        json!({
            "Label": { "default": label },
            "Parameters": parameters.keys().filter(|name| pick(name)).collect::<Vec<_>>()
        })
    };
    let is_capacity =
        |name: &str| name.starts_with("Orders") || name.starts_with("Metrics") || name.starts_with("Batch");
    let is_console = |name: &str| console::PARAMETERS.contains(&name);
    json!([
        group("Deployment", &|n| !is_capacity(n) && !is_console(n)),
        group("Console", &is_console),
        group("Capacity", &is_capacity),
    ])
}

fn outputs() -> Value {
    let mut outputs = json!({
        "OrdersStreamArn": { "Value": { "Fn::GetAtt": ["OrdersTable", "StreamArn"] } },
        "ServePolicyArn": {
            "Description": "The policy of serve with its in-process consumer, for whatever runs it outside this stack",
            "Value": { "Ref": "ServePolicy" }
        },
        "WebPolicyArn": {
            "Description": "The policy of serve --no-consumer (the web tier alone), for whatever runs it outside this stack",
            "Value": { "Ref": "WebPolicy" }
        },
        "DeadLetterQueueUrl": { "Value": { "Ref": "ConsumerDeadLetters" } },
        "AlarmTopicArn": { "Value": { "Ref": "AlarmTopic" } }
    });
    if let Value::Object(map) = &mut outputs {
        map.extend(console::outputs());
    }
    outputs
}

/// A table's CloudFormation resource: the same keys, attributes, indexes,
/// stream and time to live `provision` creates, its capacity from the
/// stack's parameters (whose defaults are the `--billing` flags'), and
/// what a table of orders needs in production: point-in-time recovery,
/// deletion protection (besides `Retain`, which only guards against
/// deleting the stack), encryption with the account's DynamoDB KMS key.
pub fn table(role: TableRole, def: &TableDef) -> Value {
    let whole = TableOrIndex { role, table: def, index: None };
    let mut properties = Map::new();
    properties.insert("TableName".into(), json!(def.name));
    properties.insert("KeySchema".into(), key_schema(def.keys.iter().map(|(name, kind)| (*name, kind.as_str()))));
    properties.insert(
        "AttributeDefinitions".into(),
        def.attributes.iter().map(|name| json!({ "AttributeName": name, "AttributeType": "S" })).collect(),
    );
    properties.insert("BillingMode".into(), json!({ "Ref": billing_parameter(role) }));
    properties.extend(capacity::throughput(&whole));
    if !def.indexes.is_empty() {
        let indexes = def.indexes.iter().map(|index| gsi(role, def, index)).collect();
        properties.insert("GlobalSecondaryIndexes".into(), Value::Array(indexes));
    }
    if let Some(view) = &def.stream {
        properties.insert("StreamSpecification".into(), json!({ "StreamViewType": view.as_str() }));
    }
    if let Some(attribute) = def.ttl {
        properties.insert("TimeToLiveSpecification".into(), json!({ "AttributeName": attribute, "Enabled": true }));
    }
    properties.insert(
        "PointInTimeRecoverySpecification".into(),
        json!({ "PointInTimeRecoveryEnabled": true, "RecoveryPeriodInDays": { "Ref": "RecoveryPeriodDays" } }),
    );
    properties.insert("DeletionProtectionEnabled".into(), json!(true));
    properties.insert("SSESpecification".into(), json!({ "SSEEnabled": true, "SSEType": "KMS" }));
    kept(json!({ "Type": "AWS::DynamoDB::Table", "Properties": properties }))
}

fn gsi(role: TableRole, def: &TableDef, index: &crate::server::store::IndexSpec) -> Value {
    let mut projection = Map::new();
    projection.insert("ProjectionType".into(), json!(index.projection.as_str()));
    if index.projection == ProjectionType::Include {
        projection.insert("NonKeyAttributes".into(), json!(index.include));
    }
    let mut gsi = Map::new();
    gsi.insert("IndexName".into(), json!(index.name));
    gsi.insert("KeySchema".into(), key_schema([(index.hash, "HASH"), (index.range, "RANGE")]));
    gsi.insert("Projection".into(), Value::Object(projection));
    gsi.extend(capacity::throughput(&TableOrIndex { role, table: def, index: Some(index.name) }));
    Value::Object(gsi)
}

fn key_schema<'a>(keys: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    keys.into_iter().map(|(name, kind)| json!({ "AttributeName": name, "KeyType": kind })).collect()
}

/// The billing mode a table's parameter defaults to.
fn billing_mode(capacity: TableCapacity) -> &'static str {
    match capacity {
        TableCapacity::OnDemand => "PAY_PER_REQUEST",
        TableCapacity::Provisioned { .. } => "PROVISIONED",
    }
}

/// The condition that a table is provisioned: `OrdersProvisioned`.
fn provisioned_condition(role: TableRole) -> String {
    format!("{}Provisioned", role.prefix())
}

/// How `serve` in the stack treats the orders stream: it runs no consumer
/// of its own while the Lambda function consumes the stream (two would
/// count every change twice; the function's mapping is disabled when the
/// tasks consume). Its reconciliation, anchored at the consumer's shard
/// checkpoints, runs every `ReconcileMinutes` (console.rs).
fn consumer_mode_environment() -> Vec<(&'static str, Value)> {
    vec![("NORTHWIND_NO_CONSUMER", if_(IN_PROCESS, json!("false"), json!("true")))]
}

/// `Retain` on deletion and on replacement: for what holds data.
fn kept(mut resource: Value) -> Value {
    resource["DeletionPolicy"] = json!("Retain");
    resource["UpdateReplacePolicy"] = json!("Retain");
    resource
}

fn dimension(name: &str, value: Value) -> Value {
    json!({ "Name": name, "Value": value })
}

fn side_name(side: ReadWrite) -> &'static str {
    match side {
        ReadWrite::Read => "Read",
        ReadWrite::Write => "Write",
    }
}

fn no_value() -> Value {
    json!({ "Ref": "AWS::NoValue" })
}

fn if_(condition: &str, yes: Value, no: Value) -> Value {
    json!({ "Fn::If": [condition, yes, no] })
}

fn reference(name: &str) -> Value {
    json!({ "Ref": name })
}

/// `Fn::Sub` of `text`.
fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

/// A policy of `docs/iam/` for this deployment's tables.
fn policy(text: &str, deployment: &Deployment, replace: &[(&str, &str)]) -> Value {
    super::iam::document(text, &deployment.orders.name, &deployment.metrics.name, replace)
}

/// `--parameter-overrides` form: `Name=value` pairs, space-separated.
pub fn parameter_overrides(values: &[(String, String)]) -> String {
    values.iter().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(capacity: TableCapacity) -> Deployment {
        Deployment {
            orders: TableDef::orders("northwind-orders", capacity),
            metrics: TableDef::metrics("northwind-metrics", capacity),
        }
    }

    #[test]
    fn every_table_and_index_is_sized_once() {
        let deployment = deployment(TableCapacity::OnDemand);
        let prefixes: Vec<String> = deployment.tables_and_indexes().iter().map(TableOrIndex::prefix).collect();
        assert_eq!(prefixes, ["Orders", "OrdersGSI1", "OrdersGSI2", "Metrics"]);
    }

    #[test]
    fn policies_name_the_deployment_tables_and_the_partition() {
        let deployment = Deployment {
            orders: TableDef::orders("shop-orders", TableCapacity::OnDemand),
            metrics: TableDef::metrics("shop-metrics", TableCapacity::OnDemand),
        };
        let text = template(&deployment).to_string();
        assert!(text.contains("table/shop-orders"));
        assert!(text.contains("${AWS::Region}"));
        assert!(!text.contains("northwind-orders") && !text.contains("${Region}"), "{text}");
        assert!(!text.contains("arn:aws:"), "every ARN names ${{AWS::Partition}}");
    }

    #[test]
    fn the_template_fits_cloudformations_limits() {
        for capacity in [TableCapacity::OnDemand, TableCapacity::Provisioned { read: 5, write: 5 }] {
            let template = template(&deployment(capacity));
            let size = format!("{template:#}").len();
            assert!(size < TEMPLATE_URL_LIMIT, "{size} bytes");
            let count = |section: &str| template[section].as_object().unwrap().len();
            assert!(count("Resources") <= 500 && count("Parameters") <= 200 && count("Outputs") <= 200);
        }
    }

    #[test]
    fn serve_in_the_stack_consumes_only_where_the_stack_says_and_reconciles_against_the_checkpoints() {
        let environment = consumer_mode_environment();
        let no_consumer = if_(IN_PROCESS, json!("false"), json!("true"));
        assert!(environment.contains(&("NORTHWIND_NO_CONSUMER", no_consumer)));
        let template = template(&deployment(TableCapacity::OnDemand));
        assert_eq!(template["Parameters"]["ConsumerRunsIn"]["Default"], "lambda");
        let mapping = &template["Resources"]["ConsumerEvents"]["Properties"];
        assert_eq!(mapping["Enabled"], if_(IN_PROCESS, json!(false), json!(true)), "one consumer at a time");
        let role = &template["Resources"]["TaskRole"]["Properties"]["ManagedPolicyArns"];
        assert_eq!(role, &json!([if_(IN_PROCESS, reference("ServePolicy"), reference("WebPolicy"))]));
        assert!(mapping["TumblingWindowInSeconds"].as_u64().is_some_and(|w| w > 0), "the Lambda writes checkpoints");
        assert_eq!(mapping["ParallelizationFactor"], 1, "one batch of a shard at a time");
        let serve =
            template["Resources"].as_object().unwrap().values().find(|r| r["Type"] == "AWS::ECS::TaskDefinition");
        let variables = &serve.unwrap()["Properties"]["ContainerDefinitions"][0]["Environment"];
        let reconcile = variables.as_array().unwrap().iter().find(|v| v["Name"] == "NORTHWIND_RECONCILE_MINUTES");
        assert_eq!(reconcile.unwrap()["Value"], json!({"Ref": "ReconcileMinutes"}));
        assert_eq!(template["Parameters"]["ReconcileMinutes"]["Default"], 10);
        // The audit trail's retention, within what serve's flag takes.
        let retention = variables.as_array().unwrap().iter().find(|v| v["Name"] == "NORTHWIND_AUDIT_RETENTION_DAYS");
        assert_eq!(retention.unwrap()["Value"], json!({"Ref": "AuditRetentionDays"}));
        let parameter = &template["Parameters"]["AuditRetentionDays"];
        assert_eq!((parameter["Default"].as_u64(), parameter["MaxValue"].as_u64()), (Some(0), Some(36_500)));
        // The balancer is the trusted proxy: a list serve parses.
        let trusted = variables.as_array().unwrap().iter().find(|v| v["Name"] == "NORTHWIND_TRUSTED_PROXIES");
        let trusted = crate::server::auth::client::TrustedProxies::parse(trusted.unwrap()["Value"].as_str().unwrap());
        assert!(trusted.unwrap().contains("10.0.3.7".parse().unwrap()));
    }
}

//! The deployment as code. `northwind-ops template`:
//! - deploys to moto's CloudFormation, in both billing modes and with and
//!   without the console, and updates from on demand to provisioned; what
//!   moto creates and what it skips (it has no alarms, no auto scaling, no
//!   Secrets Manager in CloudFormation) is listed, and a structural test
//!   covers what it skips;
//! - passes cfn-lint, its informational checks included;
//! - declares, field by field, the tables `provision` creates (read back
//!   with DescribeTable and DescribeTimeToLive), on both engines and in both
//!   billing modes.
//!
//! And `healthcheck`, the container's health check, against a running
//! serve and a closed port.

use crate::common;
use crate::common::moto::Moto;

use aws_sdk_cloudformation::types::{Capability, Parameter, StackStatus};
use aws_sdk_dynamodb::types::TableDescription;
use northwind_ops::server::deploy::template::{self, TableRole};
use northwind_ops::server::store::{self, TableCapacity, TableDef};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

fn template_of(flags: &[&str]) -> Value {
    let out = Command::new(BIN).arg("template").args(flags).output().expect("run northwind-ops template");
    assert!(out.status.success(), "template failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the template is JSON")
}

const PROVISIONED: [&str; 6] = ["--billing", "provisioned", "--read-capacity", "20", "--write-capacity", "40"];

// ---------------------------------------------------------------------------
// What CloudFormation makes of a template, for the structural test and the
// comparison with `provision`.

/// A template resolved for parameter values: conditions evaluated,
/// resources whose condition is false left out, `Fn::If` chosen, `Ref`s to
/// parameters replaced by their values (numbers as numbers) and
/// `AWS::NoValue` dropped. `Ref`s to resources, `Fn::GetAtt` and `Fn::Sub`
/// stay as they are.
struct Resolved {
    conditions: HashMap<String, bool>,
    resources: Map<String, Value>,
}

fn resolve(template: &Value, overrides: &[(&str, &str)]) -> Resolved {
    let mut parameters = HashMap::new();
    for (name, declared) in template["Parameters"].as_object().unwrap() {
        let given = overrides.iter().find(|(n, _)| n == name).map(|(_, v)| json!(v));
        let value = given.or_else(|| declared.get("Default").cloned()).unwrap_or_else(|| json!(format!("<{name}>")));
        let value = match declared["Type"].as_str() {
            Some("Number") => json!(value.as_f64().unwrap_or_else(|| value.as_str().unwrap().parse::<f64>().unwrap())),
            Some("CommaDelimitedList") => {
                json!(value.as_str().unwrap_or_default().split(',').map(str::to_string).collect::<Vec<_>>())
            }
            _ => value,
        };
        parameters.insert(name.clone(), value);
    }
    for (name, _) in overrides {
        assert!(parameters.contains_key(*name), "{name} is no parameter of the template");
    }
    let declared = template["Conditions"].as_object().unwrap();
    let mut conditions = HashMap::new();
    for name in declared.keys() {
        let value = condition(&declared[name], declared, &parameters);
        conditions.insert(name.clone(), value);
    }
    let mut resources = Map::new();
    for (name, resource) in template["Resources"].as_object().unwrap() {
        if resource.get("Condition").and_then(Value::as_str).is_some_and(|c| !conditions[c]) {
            continue;
        }
        if let Some(resolved) = value(resource, &conditions, &parameters) {
            resources.insert(name.clone(), resolved);
        }
    }
    Resolved { conditions, resources }
}

fn condition(expression: &Value, declared: &Map<String, Value>, parameters: &HashMap<String, Value>) -> bool {
    let all =
        |list: &Value| list.as_array().unwrap().iter().map(|e| condition(e, declared, parameters)).collect::<Vec<_>>();
    let text = |operand: &Value| -> String {
        let operand = match operand.get("Fn::Join") {
            Some(join) => {
                let items = value(&join[1], &HashMap::new(), parameters).unwrap();
                json!(
                    items
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| i.as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                        .join(join[0].as_str().unwrap())
                )
            }
            None => value(operand, &HashMap::new(), parameters).unwrap(),
        };
        match operand {
            Value::String(s) => s,
            Value::Number(n) => {
                n.as_f64().map_or(n.to_string(), |f| if f.fract() == 0.0 { format!("{f:.0}") } else { f.to_string() })
            }
            other => other.to_string(),
        }
    };
    let (operator, operands) = expression.as_object().unwrap().iter().next().unwrap();
    match operator.as_str() {
        "Fn::Equals" => text(&operands[0]) == text(&operands[1]),
        "Fn::Not" => !all(operands)[0],
        "Fn::And" => all(operands).into_iter().all(|b| b),
        "Fn::Or" => all(operands).into_iter().any(|b| b),
        "Condition" => condition(&declared[operands.as_str().unwrap()], declared, parameters),
        other => panic!("condition function {other}"),
    }
}

fn value(node: &Value, conditions: &HashMap<String, bool>, parameters: &HashMap<String, Value>) -> Option<Value> {
    match node {
        Value::Object(fields) => {
            if let Some(Value::String(name)) = fields.get("Ref")
                && fields.len() == 1
            {
                return match name.as_str() {
                    "AWS::NoValue" => None,
                    _ => Some(parameters.get(name).cloned().unwrap_or_else(|| node.clone())),
                };
            }
            if let Some(choice) = fields.get("Fn::If") {
                let chosen = if conditions[choice[0].as_str().unwrap()] { &choice[1] } else { &choice[2] };
                return value(chosen, conditions, parameters);
            }
            Some(Value::Object(
                fields.iter().filter_map(|(k, v)| value(v, conditions, parameters).map(|v| (k.clone(), v))).collect(),
            ))
        }
        Value::Array(items) => {
            Some(Value::Array(items.iter().filter_map(|v| value(v, conditions, parameters)).collect()))
        }
        other => Some(other.clone()),
    }
}

// ---------------------------------------------------------------------------

#[test]
fn the_template_passes_cfn_lint_informational_checks_included() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        ("on-demand", vec![]),
        ("provisioned", PROVISIONED.to_vec()),
        ("named", vec!["--orders-table", "shop.orders_v2", "--metrics-table", "shop-metrics"]),
    ] {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(&template_of(&flags)).unwrap()).unwrap();
        // -c I: the informational checks too; --non-zero-exit-code
        // informational: any finding at all fails.
        let lint = Command::new("cfn-lint")
            .args(["-c", "I", "--non-zero-exit-code", "informational"])
            .arg(&path)
            .output()
            .expect("cfn-lint is installed by scripts/setup.sh (pip install cfn-lint)");
        let findings = format!("{}{}", String::from_utf8_lossy(&lint.stdout), String::from_utf8_lossy(&lint.stderr));
        assert!(lint.status.success() && findings.trim().is_empty(), "cfn-lint on the {name} template:\n{findings}");
        println!("{name}: cfn-lint (informational checks included) found nothing");
    }
}

#[test]
fn a_bad_table_name_is_refused_by_template_as_by_provision() {
    let out = Command::new(BIN).args(["template", "--orders-table", "no spaces"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--orders-table"), "{err}");
}

/// Every DynamoDB metric the alarms may name, from "DynamoDB Metrics and
/// dimensions" (Amazon DynamoDB Developer Guide): the throttling reasons
/// DynamoDB publishes per table and GSI, and consumed capacity.
const DYNAMODB_METRICS: [&str; 10] = [
    "ReadKeyRangeThroughputThrottleEvents",
    "WriteKeyRangeThroughputThrottleEvents",
    "ReadProvisionedThroughputThrottleEvents",
    "WriteProvisionedThroughputThrottleEvents",
    "ReadMaxOnDemandThroughputThrottleEvents",
    "WriteMaxOnDemandThroughputThrottleEvents",
    "ReadAccountLimitThrottleEvents",
    "WriteAccountLimitThrottleEvents",
    "ConsumedReadCapacityUnits",
    "ConsumedWriteCapacityUnits",
];

/// A console's network, name, certificate and who may reach it.
const CONSOLE: [(&str, &str); 6] = [
    ("VpcId", "vpc-0123456789abcdef0"),
    ("LoadBalancerSubnetIds", "subnet-0123456789abcdef0,subnet-0123456789abcdef1"),
    ("TaskSubnetIds", "subnet-0123456789abcdef0,subnet-0123456789abcdef1"),
    ("DomainName", "ops.example.com"),
    ("CertificateArn", "arn:aws:acm:us-east-1:123456789012:certificate/0"),
    ("IngressCidr", "203.0.113.0/24"),
];

/// An image by digest, as ImageUri takes it.
const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/northwind-ops@sha256:\
                     0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// What moto skips, checked here instead: the alarms (their metrics,
/// dimensions and M of N) and the auto scaling of every table and GSI, in
/// both billing modes; the data-safety settings; the console's wiring.
#[test]
fn every_table_and_index_has_its_alarms_and_scaling_in_both_modes() {
    let template = template_of(&[]);
    let text = template.to_string();
    assert!(!text.contains("arn:aws:"), "every ARN names ${{AWS::Partition}}");
    for mode in ["PAY_PER_REQUEST", "PROVISIONED"] {
        let mut values = CONSOLE.to_vec();
        values.extend([("OrdersBillingMode", mode), ("MetricsBillingMode", mode), ("OrdersGSI2WriteBatchMin", "400")]);
        let resolved = resolve(&template, &values);
        let r = &resolved.resources;
        let provisioned = mode == "PROVISIONED";
        let sized = [
            ("Orders", "northwind-orders", None),
            ("OrdersGSI1", "northwind-orders", Some("GSI1")),
            ("OrdersGSI2", "northwind-orders", Some("GSI2")),
            ("Metrics", "northwind-metrics", None),
        ];
        for (prefix, table, index) in sized {
            let mut dimensions = vec![json!({ "Name": "TableName", "Value": table })];
            if let Some(index) = index {
                dimensions.push(json!({ "Name": "GlobalSecondaryIndexName", "Value": index }));
            }
            for side in ["Read", "Write"] {
                let capacity = if provisioned { "ProvisionedThroughput" } else { "MaxOnDemandThroughput" };
                for (alarm, metric) in [
                    ("KeyRangeThrottles", format!("{side}KeyRangeThroughputThrottleEvents")),
                    ("CapacityThrottles", format!("{side}{capacity}ThrottleEvents")),
                    ("AccountThrottles", format!("{side}AccountLimitThrottleEvents")),
                ] {
                    let name = format!("{prefix}{side}{alarm}");
                    let p = &r[&name]["Properties"];
                    assert_eq!(r[&name]["Type"], "AWS::CloudWatch::Alarm", "{name}");
                    assert_eq!(p["Namespace"], "AWS/DynamoDB", "{name}");
                    assert_eq!(p["MetricName"], json!(metric), "{name}");
                    assert!(DYNAMODB_METRICS.contains(&metric.as_str()), "{metric}");
                    assert_eq!(p["Dimensions"], json!(dimensions), "{name}");
                    assert_eq!((&p["Statistic"], &p["Period"]), (&json!("Sum"), &json!(60)), "{name}");
                    assert_eq!((&p["DatapointsToAlarm"], &p["EvaluationPeriods"]), (&json!(2), &json!(5)), "{name}");
                    assert_eq!(
                        (&p["ComparisonOperator"], &p["Threshold"]),
                        (&json!("GreaterThanThreshold"), &json!(0.0))
                    );
                }
                // Near the ceiling: consumption a second against the
                // scaling maximum or the on-demand maximum of this resource.
                let name = format!("{prefix}{side}NearCeiling");
                let p = &r[&name]["Properties"];
                let metric = &p["Metrics"][0]["MetricStat"];
                assert_eq!(metric["Metric"]["MetricName"], json!(format!("Consumed{side}CapacityUnits")), "{name}");
                assert_eq!(metric["Metric"]["Dimensions"], json!(dimensions), "{name}");
                let ceiling = &p["Metrics"][1]["Expression"]["Fn::Sub"];
                assert_eq!(ceiling[0], "100*m/60/${Ceiling}", "{name}");
                // The template's defaults: 5 units a side, 20 times that at most.
                let expected = if provisioned {
                    json!(100.0)
                } else {
                    json!(if side == "Read" {
                        template::DEFAULT_ON_DEMAND_MAX_READ
                    } else {
                        template::DEFAULT_ON_DEMAND_MAX_WRITE
                    } as f64)
                };
                assert_eq!(ceiling[1]["Ceiling"], expected, "{name}");
                assert_eq!(
                    (&p["DatapointsToAlarm"], &p["EvaluationPeriods"], &p["Threshold"]),
                    (&json!(3), &json!(5), &json!(80.0))
                );
                // Auto scaling, provisioned only: its own target and policy.
                let scaling = format!("{prefix}{side}Scaling");
                assert_eq!(r.contains_key(&scaling), provisioned, "{scaling}");
                assert_eq!(r.contains_key(&format!("{prefix}{side}Tracking")), provisioned);
                if provisioned {
                    let target = &r[&scaling]["Properties"];
                    let kind = if index.is_some() { "index" } else { "table" };
                    assert_eq!(target["ScalableDimension"], json!(format!("dynamodb:{kind}:{side}CapacityUnits")));
                    let logical = if table == "northwind-orders" { "OrdersTable" } else { "MetricsTable" };
                    let id =
                        index.map_or(format!("table/${{{logical}}}"), |i| format!("table/${{{logical}}}/index/{i}"));
                    assert_eq!(target["ResourceId"], json!({ "Fn::Sub": id }));
                    assert_eq!((&target["MinCapacity"], &target["MaxCapacity"]), (&json!(5.0), &json!(100.0)));
                    let policy = &r[&format!("{prefix}{side}Tracking")]["Properties"]["TargetTrackingScalingPolicyConfiguration"];
                    assert_eq!(policy["TargetValue"], 70.0);
                    assert_eq!(
                        policy["PredefinedMetricSpecification"]["PredefinedMetricType"],
                        json!(format!("DynamoDB{side}CapacityUtilization"))
                    );
                    let actions = &target["ScheduledActions"];
                    if prefix == "OrdersGSI2" && side == "Write" {
                        assert_eq!(actions[0]["ScalableTargetAction"]["MinCapacity"], 400.0);
                        assert_eq!(actions[0]["Schedule"], "cron(0 22 L * ? *)");
                        assert_eq!(actions[1]["ScalableTargetAction"]["MinCapacity"], 5.0, "back to the minimum");
                    } else {
                        assert!(actions.is_null(), "{scaling}: no batch floor set");
                    }
                }
            }
        }
        // The tables: capacity in the mode's terms, and what keeps the data.
        for table in ["OrdersTable", "MetricsTable"] {
            let t = &r[table];
            assert_eq!((&t["DeletionPolicy"], &t["UpdateReplacePolicy"]), (&json!("Retain"), &json!("Retain")));
            let p = &t["Properties"];
            assert_eq!(p["BillingMode"], mode);
            assert_eq!(p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"], true);
            assert_eq!(p["DeletionProtectionEnabled"], true);
            assert_eq!(p["SSESpecification"], json!({ "SSEEnabled": true, "SSEType": "KMS" }));
            assert_eq!(p.get("ProvisionedThroughput").is_some(), provisioned, "{table}");
            assert_eq!(p.get("OnDemandThroughput").is_some(), !provisioned, "{table}");
            assert!(p.get("WarmThroughput").is_none(), "{table}: not set at 0");
            for gsi in p["GlobalSecondaryIndexes"].as_array().into_iter().flatten() {
                assert_eq!(gsi.get("ProvisionedThroughput").is_some(), provisioned);
                assert_eq!(gsi.get("OnDemandThroughput").is_some(), !provisioned);
            }
        }
        for kept in ["ConsumerDeadLetters", "ConsumerLogs", "ConsoleLogs", "CursorSecret"] {
            assert_eq!(r[kept]["DeletionPolicy"], "Retain", "{kept}");
        }
        // The consumer: its own failed-records metric, throttles, not
        // invoked while the table is written; M of N.
        let consumer = |name: &str| &r[name]["Properties"];
        assert_eq!(consumer("ConsumerFailedRecords")["Namespace"], "NorthwindOps");
        assert_eq!(consumer("ConsumerFailedRecords")["MetricName"], "FailedRecords");
        assert_eq!(
            consumer("ConsumerFailedRecords")["Dimensions"],
            json!([{ "Name": "FunctionName", "Value": { "Ref": "Consumer" } }])
        );
        assert_eq!(consumer("ConsumerThrottles")["MetricName"], "Throttles");
        let idle = consumer("ConsumerNotInvoked");
        assert_eq!(idle["Metrics"][2]["Expression"], "IF(FILL(w, 0) > 0 AND FILL(i, 0) == 0, 1, 0)");
        assert_eq!(idle["Metrics"][0]["MetricStat"]["Metric"]["MetricName"], "ConsumedWriteCapacityUnits");
        assert_eq!(idle["Metrics"][1]["MetricStat"]["Metric"]["MetricName"], "Invocations");
        for (name, resource) in r.iter().filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm") {
            let p = &resource["Properties"];
            let (m, n) = (p["DatapointsToAlarm"].as_u64().unwrap(), p["EvaluationPeriods"].as_u64().unwrap());
            assert!(m <= n, "{name}");
            assert!(
                m < n || ["ConsumerNotInvoked", "ConsumerGaveUp"].contains(&name.as_str()),
                "{name}: {m} of {n} misses what comes and goes"
            );
            assert_eq!(p["AlarmActions"], json!([{ "Ref": "AlarmTopic" }]), "{name}");
            assert_eq!(p["OKActions"], json!([{ "Ref": "AlarmTopic" }]), "{name}");
        }
        // A record given up can still be read from the stream (24 h).
        assert_eq!(r["ConsumerEvents"]["Properties"]["MaximumRecordAgeInSeconds"], 6 * 3600);
        assert_eq!(
            r["Consumer"]["Properties"]["Architectures"],
            json!([if cfg!(target_arch = "aarch64") { "arm64" } else { "x86_64" }])
        );
        // Unreserved by default: the open shards bound it (consumer.rs).
        assert!(r["Consumer"]["Properties"].get("ReservedConcurrentExecutions").is_none());
        assert_eq!(r["ConsumerEvents"]["Properties"]["Enabled"], true, "the Lambda consumes");
        // The web tier alone: its own policy; no web ACL, no access logs unless asked.
        assert_eq!(r["TaskRole"]["Properties"]["ManagedPolicyArns"], json!([{ "Ref": "WebPolicy" }]));
        assert!(!r.contains_key("WebAcl") && !r.contains_key("WebAclAssociation"));
        assert!(!r["LoadBalancer"].to_string().contains("access_logs"));
        let ingress = &r["LoadBalancerSecurityGroup"]["Properties"]["SecurityGroupIngress"];
        assert!(ingress.as_array().unwrap().iter().all(|rule| rule["CidrIp"] == "203.0.113.0/24"), "{ingress}");
        // The console: health check, timing, consumer mode, secrets.
        let group = &r["TargetGroup"]["Properties"];
        assert_eq!(group["HealthCheckPath"], "/healthz");
        assert!(
            group["TargetGroupAttributes"]
                .as_array()
                .unwrap()
                .contains(&json!({ "Key": "deregistration_delay.timeout_seconds", "Value": "30" }))
        );
        let balancer = &r["LoadBalancer"]["Properties"]["LoadBalancerAttributes"];
        assert!(
            balancer.as_array().unwrap().contains(&json!({ "Key": "idle_timeout.timeout_seconds", "Value": "60" }))
        );
        let container = &r["TaskDefinition"]["Properties"]["ContainerDefinitions"][0];
        let env: BTreeMap<&str, &Value> = container["Environment"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["Name"].as_str().unwrap(), &e["Value"]))
            .collect();
        // The Lambda consumes (ConsumerRunsIn=lambda, the default): no consumer in the tasks.
        assert_eq!(env["NORTHWIND_NO_CONSUMER"], "true");
        // Reconciled every ReconcileMinutes (10), anchored at the Lambda's checkpoints.
        assert_eq!(env["NORTHWIND_RECONCILE_MINUTES"].as_f64(), Some(10.0));
        assert_eq!(env["NORTHWIND_IDLE_TIMEOUT_SECS"], "75");
        assert!(!env.contains_key("NORTHWIND_OIDC_ISSUER"), "no OpenID Connect unless given");
        assert_eq!(
            container["Secrets"],
            json!([{ "Name": "NORTHWIND_CURSOR_SECRET", "ValueFrom": { "Ref": "CursorSecret" } }])
        );
        assert_eq!(container["HealthCheck"]["Command"], json!(["CMD", "/northwind-ops", "healthcheck"]));
        let tracking = &r["ConsoleTracking"]["Properties"]["TargetTrackingScalingPolicyConfiguration"];
        assert_eq!(tracking["PredefinedMetricSpecification"]["PredefinedMetricType"], "ALBRequestCountPerTarget");
        assert!(resolved.conditions["Console"]);
    }
    // OpenID Connect, when given: its settings and its secret.
    let mut values = CONSOLE.to_vec();
    values.extend([
        ("OidcIssuer", "https://id.example.com"),
        ("OidcClientId", "ops"),
        ("OidcClientSecretArn", "arn:aws:secretsmanager:us-east-1:1:secret:oidc"),
    ]);
    let oidc = resolve(&template, &values);
    let container = &oidc.resources["TaskDefinition"]["Properties"]["ContainerDefinitions"][0];
    assert_eq!(container["Secrets"][1]["Name"], "NORTHWIND_OIDC_CLIENT_SECRET");
    assert!(container["Environment"].as_array().unwrap().iter().any(|e| e["Name"] == "NORTHWIND_OIDC_ISSUER"));
    // The edge, when asked: a web ACL with its rate rule on the balancer,
    // access logs to a bucket; the tasks consuming in-process take the
    // serve policy and the Lambda's mapping is off; a reservation.
    let mut values = CONSOLE.to_vec();
    values.extend([
        ("WafRateLimit", "2000"),
        ("AccessLogsBucket", "northwind-logs"),
        ("ConsumerRunsIn", "console"),
        ("ConsumerConcurrency", "32"),
        ("ImageUri", IMAGE),
    ]);
    let edge = resolve(&template, &values);
    let r = &edge.resources;
    let rule = &r["WebAcl"]["Properties"]["Rules"][0];
    assert_eq!(rule["Statement"]["RateBasedStatement"]["Limit"], 2000.0);
    assert_eq!(rule["Statement"]["RateBasedStatement"]["AggregateKeyType"], "IP");
    assert_eq!(rule["Action"], json!({ "Block": {} }));
    assert_eq!(r["WebAcl"]["Properties"]["Scope"], "REGIONAL");
    assert_eq!(r["WebAclAssociation"]["Properties"]["ResourceArn"], json!({ "Ref": "LoadBalancer" }));
    let balancer = r["LoadBalancer"]["Properties"]["LoadBalancerAttributes"].as_array().unwrap();
    for attribute in [
        json!({ "Key": "access_logs.s3.enabled", "Value": "true" }),
        json!({ "Key": "access_logs.s3.bucket", "Value": "northwind-logs" }),
    ] {
        assert!(balancer.contains(&attribute), "{attribute}");
    }
    assert_eq!(r["TaskRole"]["Properties"]["ManagedPolicyArns"], json!([{ "Ref": "ServePolicy" }]));
    let container = &r["TaskDefinition"]["Properties"]["ContainerDefinitions"][0];
    let env = container["Environment"].as_array().unwrap();
    assert!(env.contains(&json!({ "Name": "NORTHWIND_NO_CONSUMER", "Value": "false" })), "{env:?}");
    assert_eq!(r["ConsumerEvents"]["Properties"]["Enabled"], false, "one consumer at a time");
    assert_eq!(r["Consumer"]["Properties"]["ReservedConcurrentExecutions"], 32.0);
    // The image by digest for both, never a tag: the parameter's pattern
    // (CloudFormation's, a Java regex; Python's reads it the same) and both
    // resources naming the one parameter.
    let pattern = template["Parameters"]["ImageUri"]["AllowedPattern"].as_str().unwrap();
    assert_eq!(container["Image"], IMAGE);
    assert_eq!(r["Consumer"]["Properties"]["Code"]["ImageUri"], IMAGE);
    let cidr = template["Parameters"]["IngressCidr"]["AllowedPattern"].as_str().unwrap();
    assert!(template["Parameters"]["IngressCidr"]["Default"] == "", "no default range: a console needs one given");
    let rules = template["Rules"]["ConsoleNeedsItsNetworkAndName"]["Assertions"].to_string();
    assert!(rules.contains("DeployConsole=true needs IngressCidr"), "{rules}");
    for (pattern, value, matches) in [
        (pattern, IMAGE, true),
        (pattern, "123456789012.dkr.ecr.us-east-1.amazonaws.com/northwind-ops:1.0", false),
        (pattern, "northwind-ops@sha256:0123", false),
        (pattern, "northwind-ops:latest@sha256:", false),
        (cidr, "203.0.113.0/24", true),
        (cidr, "0.0.0.0/0", true),
        (cidr, "", true),
        (cidr, "203.0.113.0", false),
        (cidr, "300.0.113.0/24", false),
        (cidr, "203.0.113.0/33", false),
    ] {
        let out = Command::new("python3")
            .args(["-c", "import re,sys; sys.exit(0 if re.fullmatch(sys.argv[1], sys.argv[2]) else 1)", pattern, value])
            .output()
            .unwrap();
        assert_eq!(out.status.success(), matches, "{pattern} against {value:?}");
    }

    // DeployConsole=false: no console, no console alarm; the serve policy stays.
    let bare = resolve(&template, &[("DeployConsole", "false")]);
    for (name, resource) in &bare.resources {
        let kind = resource["Type"].as_str().unwrap();
        let console = kind.starts_with("AWS::ECS::")
            || kind.starts_with("AWS::ElasticLoadBalancingV2::")
            || kind.starts_with("AWS::WAFv2::")
            || name.starts_with("Console")
            || name == "CursorSecret";
        assert!(!console, "{name} with DeployConsole=false");
    }
    assert!(bare.resources.contains_key("ServePolicy") && bare.resources.contains_key("Consumer"));
    assert!(bare.resources.contains_key("WebPolicy"));
}

// ---------------------------------------------------------------------------

/// Fields the stack sets and `provision` does not: recovery, protection,
/// encryption, the on-demand maximum and warm throughput.
const STACK_ONLY: [&str; 5] = [
    "PointInTimeRecoverySpecification",
    "DeletionProtectionEnabled",
    "SSESpecification",
    "OnDemandThroughput",
    "WarmThroughput",
];

#[tokio::test(flavor = "multi_thread")]
async fn the_template_declares_the_tables_provision_creates() {
    for engine in common::engines() {
        for capacity in [TableCapacity::OnDemand, TableCapacity::Provisioned { read: 7, write: 3 }] {
            let dir = tempfile::tempdir().unwrap();
            let config = common::store_config(&engine, dir.path(), &[]);
            let (store, embedded) = store::connect(&config).await.unwrap();
            store.provision(Some(capacity)).await.unwrap();
            let deployment = template::Deployment {
                orders: TableDef::orders(&config.orders_table, capacity),
                metrics: TableDef::metrics(&config.metrics_table, capacity),
            };
            // The parameters' defaults are the capacity's.
            let resolved = resolve(&template::template(&deployment), &[]);
            for (role, def) in [(TableRole::Orders, &deployment.orders), (TableRole::Metrics, &deployment.metrics)] {
                let mut declared = resolved.resources[role.logical_id()]["Properties"].clone();
                for field in STACK_ONLY {
                    declared.as_object_mut().unwrap().remove(field);
                }
                for gsi in
                    declared.get_mut("GlobalSecondaryIndexes").and_then(Value::as_array_mut).into_iter().flatten()
                {
                    for field in STACK_ONLY {
                        gsi.as_object_mut().unwrap().remove(field);
                    }
                }
                let created = described(&store, &def.name).await;
                assert_eq!(
                    created,
                    normalised(integers(declared)),
                    "{engine:?} {capacity:?}: table {} as created differs from the template",
                    def.name
                );
            }
            if let Some(embedded) = embedded {
                embedded.shutdown().await;
            }
        }
    }
}

/// Whole numbers as integers, as DescribeTable gives them.
fn integers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => json!(n.as_f64().unwrap() as i64),
        Value::Array(items) => Value::Array(items.into_iter().map(integers).collect()),
        Value::Object(fields) => Value::Object(fields.into_iter().map(|(k, v)| (k, integers(v))).collect()),
        other => other,
    }
}

/// A created table in the template's terms, from DescribeTable and
/// DescribeTimeToLive.
async fn described(store: &store::Store, table: &str) -> Value {
    let client = store.client();
    let description = client.describe_table().table_name(table).send().await.unwrap().table.unwrap();
    let ttl = client.describe_time_to_live().table_name(table).send().await.unwrap();
    let mut properties = properties_of(&description);
    if let Some(ttl) = ttl.time_to_live_description()
        && ttl.time_to_live_status().is_some_and(|s| s.as_str() == "ENABLED" || s.as_str() == "ENABLING")
    {
        properties["TimeToLiveSpecification"] =
            json!({ "AttributeName": ttl.attribute_name().unwrap_or_default(), "Enabled": true });
    }
    normalised(properties)
}

fn properties_of(table: &TableDescription) -> Value {
    let keys = |schema: &[aws_sdk_dynamodb::types::KeySchemaElement]| -> Value {
        schema
            .iter()
            .map(|k| json!({ "AttributeName": k.attribute_name(), "KeyType": k.key_type().as_str() }))
            .collect()
    };
    let throughput = |read: Option<i64>, write: Option<i64>| match (read, write) {
        (Some(r), Some(w)) if r > 0 || w > 0 => Some(json!({ "ReadCapacityUnits": r, "WriteCapacityUnits": w })),
        _ => None,
    };
    let mut properties = json!({
        "TableName": table.table_name(),
        "KeySchema": keys(table.key_schema()),
        "AttributeDefinitions": table
            .attribute_definitions()
            .iter()
            .map(|a| json!({ "AttributeName": a.attribute_name(), "AttributeType": a.attribute_type().as_str() }))
            .collect::<Value>(),
        // DynamoDB Local leaves the billing mode out of a provisioned table's summary.
        "BillingMode": table
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .map_or("PROVISIONED", |m| m.as_str()),
    });
    let provisioned = table.provisioned_throughput();
    if let Some(t) = throughput(
        provisioned.and_then(|p| p.read_capacity_units()),
        provisioned.and_then(|p| p.write_capacity_units()),
    ) {
        properties["ProvisionedThroughput"] = t;
    }
    let indexes: Vec<Value> = table
        .global_secondary_indexes()
        .iter()
        .map(|index| {
            let projection = index.projection().unwrap();
            let mut declared = json!({
                "IndexName": index.index_name(),
                "KeySchema": keys(index.key_schema()),
                "Projection": { "ProjectionType": projection.projection_type().unwrap().as_str() },
            });
            if !projection.non_key_attributes().is_empty() {
                declared["Projection"]["NonKeyAttributes"] = json!(projection.non_key_attributes());
            }
            let provisioned = index.provisioned_throughput();
            if let Some(t) = throughput(
                provisioned.and_then(|p| p.read_capacity_units()),
                provisioned.and_then(|p| p.write_capacity_units()),
            ) {
                declared["ProvisionedThroughput"] = t;
            }
            declared
        })
        .collect();
    if !indexes.is_empty() {
        properties["GlobalSecondaryIndexes"] = Value::Array(indexes);
    }
    if let Some(stream) = table.stream_specification().filter(|s| s.stream_enabled()) {
        properties["StreamSpecification"] = json!({ "StreamViewType": stream.stream_view_type().map(|v| v.as_str()) });
    }
    properties
}

/// Lists whose order DynamoDB does not keep, sorted, so a comparison sees
/// only real differences.
fn normalised(mut properties: Value) -> Value {
    let by = |field: &'static str| move |a: &Value, b: &Value| a[field].as_str().cmp(&b[field].as_str());
    if let Some(list) = properties["AttributeDefinitions"].as_array_mut() {
        list.sort_by(by("AttributeName"));
    }
    if let Some(list) = properties.get_mut("GlobalSecondaryIndexes").and_then(Value::as_array_mut) {
        list.sort_by(by("IndexName"));
        for index in list {
            if let Some(include) = index["Projection"].get_mut("NonKeyAttributes").and_then(Value::as_array_mut) {
                include.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
    }
    properties
}

// ---------------------------------------------------------------------------

/// Resource types moto's CloudFormation does not implement: it skips them
/// (and says so in its log). The structural test above covers them.
const MOTO_HAS_NO: [&str; 7] = [
    "AWS::CloudWatch::Alarm",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::ApplicationAutoScaling::ScalingPolicy",
    "AWS::SecretsManager::Secret",
    "AWS::CertificateManager::Certificate",
    "AWS::WAFv2::WebACL",
    "AWS::WAFv2::WebACLAssociation",
];

/// A VPC with two subnets and a hosted zone, as a stack of its own: the
/// network a console's stack is given.
const NETWORK: &str = r#"{
  "Resources": {
    "Vpc": { "Type": "AWS::EC2::VPC", "Properties": { "CidrBlock": "10.0.0.0/16" } },
    "A": { "Type": "AWS::EC2::Subnet", "Properties": { "VpcId": { "Ref": "Vpc" }, "CidrBlock": "10.0.0.0/24", "AvailabilityZone": "us-east-1a" } },
    "B": { "Type": "AWS::EC2::Subnet", "Properties": { "VpcId": { "Ref": "Vpc" }, "CidrBlock": "10.0.1.0/24", "AvailabilityZone": "us-east-1b" } },
    "Zone": { "Type": "AWS::Route53::HostedZone", "Properties": { "Name": "example.com" } }
  },
  "Outputs": {
    "VpcId": { "Value": { "Ref": "Vpc" } },
    "SubnetIds": { "Value": { "Fn::Join": [",", [{ "Ref": "A" }, { "Ref": "B" }]] } },
    "ZoneId": { "Value": { "Ref": "Zone" } }
  }
}"#;

fn parameters(values: &[(String, String)]) -> Vec<Parameter> {
    values.iter().map(|(k, v)| Parameter::builder().parameter_key(k).parameter_value(v).build()).collect()
}

/// A stack's status, from ListStacks (moto's DescribeStacks evaluates the
/// outputs, which fails once it has dropped an updated table).
async fn status(cfn: &aws_sdk_cloudformation::Client, stack: &str) -> StackStatus {
    for _ in 0..100 {
        let stacks = cfn.list_stacks().send().await.unwrap();
        let summary = stacks.stack_summaries().iter().find(|s| s.stack_name() == Some(stack)).cloned();
        let status = summary.and_then(|s| s.stack_status().cloned()).expect("the stack is listed");
        if !status.as_str().ends_with("IN_PROGRESS") {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{stack} is still in progress");
}

async fn create(
    cfn: &aws_sdk_cloudformation::Client,
    stack: &str,
    body: &str,
    values: &[(String, String)],
) -> StackStatus {
    cfn.create_stack()
        .stack_name(stack)
        .template_body(body)
        .set_parameters(Some(parameters(values)))
        .capabilities(Capability::CapabilityIam)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{stack}: {:?}", e.into_service_error()));
    status(cfn, stack).await
}

/// Prints what moto made of a stack against what the template asks for
/// with these parameters; returns the skipped resources by type.
async fn report(
    cfn: &aws_sdk_cloudformation::Client,
    stack: &str,
    template: &Value,
    values: &[(String, String)],
) -> BTreeMap<String, Vec<String>> {
    let overrides: Vec<(&str, &str)> = values.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let wanted = resolve(template, &overrides).resources;
    let resources = cfn.describe_stack_resources().stack_name(stack).send().await.unwrap();
    let made: BTreeMap<String, String> = resources
        .stack_resources()
        .iter()
        // moto lists what it skipped too, without a logical id.
        .filter(|r| r.logical_resource_id().is_some_and(|id| !id.is_empty()))
        .filter_map(|r| Some((r.logical_resource_id()?.to_string(), r.resource_type()?.to_string())))
        .collect();
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, resource) in &wanted {
        let kind = resource["Type"].as_str().unwrap().to_string();
        match made.get(name) {
            Some(made) => {
                assert_eq!(made, &kind, "{stack}: {name}");
                *created.entry(kind).or_default() += 1;
            }
            None => skipped.entry(kind).or_default().push(name.clone()),
        }
    }
    for name in made.keys() {
        assert!(wanted.contains_key(name), "{stack}: moto made {name}, which these parameters leave out");
    }
    println!("{stack}: moto created {} of the {} resources these parameters ask for:", made.len(), wanted.len());
    for (kind, count) in &created {
        println!("  created  {count:>3} {kind}");
    }
    for (kind, names) in &skipped {
        println!("  skipped  {:>3} {kind} ({})", names.len(), names.join(", "));
    }
    skipped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_deploys_to_motos_cloudformation_and_updates_from_on_demand_to_provisioned() {
    let moto = Moto::start().await;
    let cfn = moto.cloudformation();
    assert_eq!(create(&cfn, "network", NETWORK, &[]).await, StackStatus::CreateComplete);
    let network = cfn.describe_stacks().stack_name("network").send().await.unwrap();
    let output = |key: &str| {
        let outputs = network.stacks()[0].outputs();
        outputs.iter().find(|o| o.output_key() == Some(key)).and_then(|o| o.output_value()).unwrap().to_string()
    };
    let certificate = moto
        .json_call("acm", "CertificateManager.RequestCertificate", json!({ "DomainName": "ops.example.com" }))
        .await["CertificateArn"]
        .as_str()
        .unwrap()
        .to_string();
    let console: Vec<(String, String)> = [
        ("ImageUri", IMAGE.to_string()),
        ("IngressCidr", "203.0.113.0/24".to_string()),
        ("VpcId", output("VpcId")),
        ("LoadBalancerSubnetIds", output("SubnetIds")),
        ("TaskSubnetIds", output("SubnetIds")),
        ("DomainName", "ops.example.com".into()),
        ("CertificateArn", certificate),
        ("HostedZoneId", output("ZoneId")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let dynamodb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .endpoint_url(&moto.url)
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("t", "t", None, None, "tests"))
            .build(),
    );
    let billing = |table: &'static str| {
        let dynamodb = dynamodb.clone();
        async move {
            let table = dynamodb.describe_table().table_name(table).send().await.unwrap().table.unwrap();
            table.billing_mode_summary().and_then(|b| b.billing_mode()).map(|m| m.as_str().to_string())
        }
    };

    // On demand, the console included; then provisioned; then without the console.
    let mut all_skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let on_demand = template_of(&["--orders-table", "a-orders", "--metrics-table", "a-metrics"]);
    let provisioned =
        template_of(&[&["--orders-table", "b-orders", "--metrics-table", "b-metrics"][..], &PROVISIONED[..]].concat());
    let bare = template_of(&["--orders-table", "c-orders", "--metrics-table", "c-metrics"]);
    let without_console: Vec<(String, String)> =
        vec![("ImageUri".into(), console[0].1.clone()), ("DeployConsole".into(), "false".into())];
    // The provisioned stack with the edge's options: a web ACL (which moto
    // skips), access logs, the tasks consuming in-process.
    let mut edge = console.clone();
    edge.extend(
        [("WafRateLimit", "2000"), ("AccessLogsBucket", "northwind-logs"), ("ConsumerRunsIn", "console")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    for (stack, template, values) in [
        ("on-demand", &on_demand, &console),
        ("provisioned", &provisioned, &edge),
        ("no-console", &bare, &without_console),
    ] {
        let status = create(&cfn, stack, &template.to_string(), values).await;
        assert_eq!(status, StackStatus::CreateComplete, "{stack}");
        for (kind, names) in report(&cfn, stack, template, values).await {
            all_skipped.entry(kind).or_default().extend(names);
        }
    }
    assert_eq!(billing("a-orders").await.as_deref(), Some("PAY_PER_REQUEST"));
    assert_eq!(billing("b-orders").await.as_deref(), Some("PROVISIONED"));
    let b = dynamodb.describe_table().table_name("b-orders").send().await.unwrap().table.unwrap();
    let gsi2 = b.global_secondary_indexes().iter().find(|i| i.index_name() == Some("GSI2")).unwrap();
    assert_eq!(gsi2.provisioned_throughput().and_then(|t| t.write_capacity_units()), Some(40), "the minimum");
    for kind in all_skipped.keys() {
        assert!(
            MOTO_HAS_NO.contains(&kind.as_str()),
            "moto skipped {kind}, which it implements: {:?}",
            all_skipped[kind]
        );
    }

    // The update: on demand to provisioned, both tables, by parameter.
    let mut update = console.clone();
    update.extend(
        [("OrdersBillingMode", "PROVISIONED"), ("MetricsBillingMode", "PROVISIONED")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    cfn.update_stack()
        .stack_name("on-demand")
        .template_body(on_demand.to_string())
        .set_parameters(Some(parameters(&update)))
        .capabilities(Capability::CapabilityIam)
        .send()
        .await
        .unwrap_or_else(|e| panic!("update: {:?}", e.into_service_error()));
    assert_eq!(status(&cfn, "on-demand").await, StackStatus::UpdateComplete);
    let skipped = report(&cfn, "on-demand", &on_demand, &update).await;
    let scaling = skipped.get("AWS::ApplicationAutoScaling::ScalableTarget").map_or(0, Vec::len);
    assert_eq!(scaling, 2 * 4 + 1, "a target per side of each table and index, and the service's");
    // moto's CloudFormation has no update for a table: it completes the
    // update, leaves the table as it was and drops it from the stack.
    let tables = skipped.get("AWS::DynamoDB::Table").cloned().unwrap_or_default();
    println!(
        "on-demand: moto kept a-orders {:?} after the update and dropped {tables:?} from the stack (it has no table \
         update); the provisioned tables are checked by the structural test",
        billing("a-orders").await
    );
    for kind in skipped.keys() {
        assert!(MOTO_HAS_NO.contains(&kind.as_str()) || kind == "AWS::DynamoDB::Table", "{kind}");
    }
}

// ---------------------------------------------------------------------------

/// `healthcheck` as the container host runs it.
async fn healthcheck(args: Vec<String>, env: Vec<(&'static str, String)>) -> (Option<i32>, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(BIN)
            .arg("healthcheck")
            .args(&args)
            .env_remove("NORTHWIND_ADDR")
            .env_remove("LEPTOS_SITE_ADDR")
            .envs(env)
            .env("NORTHWIND_LOG", "error")
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_asks_a_running_serve_and_names_what_is_wrong() {
    let app = common::TestApp::spawn(common::Engine::Dynoxide).await;
    let url = |path: &str| vec!["--url".to_string(), format!("{}{path}", app.base)];
    let (code, stdout, stderr) = healthcheck(url("/healthz"), vec![]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with(&format!("ok: {}/healthz answered 200 in ", app.base)), "{stdout}");
    let (code, _, stderr) = healthcheck(url("/readyz"), vec![]).await;
    assert_eq!(code, Some(0), "the tables answer: {stderr}");
    // No --url: serve's own address, as its settings give it.
    let addr = app.base.trim_start_matches("http://").to_string();
    let (code, stdout, stderr) = healthcheck(vec![], vec![("NORTHWIND_ADDR", addr.clone())]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains(&format!("http://{addr}/healthz")), "{stdout}");
    // Another status: named, with what it answered.
    let (code, _, stderr) = healthcheck(url("/api/pending"), vec![]).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("answered 401, not 200: {\"error\""), "{stderr}");

    // A load balancer names the target by its address: the probes answer it,
    // the pages do not.
    let probe = reqwest::Client::new();
    for (path, status) in [("/healthz", 200), ("/readyz", 200), ("/api/pending", 421)] {
        let response = probe.get(format!("{}{path}", app.base)).header("host", "10.0.3.7:3000").send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path} with the target's IP as its Host");
    }
    app.stop().await;

    // A closed port, and one that never answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (code, _, stderr) = healthcheck(vec!["--url".into(), format!("http://{closed}/healthz")], vec![]).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("nothing answers there") && stderr.to_lowercase().contains("refused"), "{stderr}");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let started = std::time::Instant::now();
    let args = vec![
        "--url".into(),
        format!("http://{}/healthz", silent.local_addr().unwrap()),
        "--timeout-secs".into(),
        "1".into(),
    ];
    let (code, _, stderr) = healthcheck(args, vec![]).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no answer within 1 s"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    drop(silent);
}

// ---------------------------------------------------------------------------

/// The DescribeTable calls `serve` has made, from its own `/metrics`.
async fn describe_table_calls(base: &str, client: &reqwest::Client) -> f64 {
    let text = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines()
        .filter(|line| line.starts_with("northwind_store_calls_total{") && line.contains("operation=\"DescribeTable\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `/readyz` needs no sign-in and a balancer or a script may ask it as
/// often as it likes: a process of its own (its `/metrics` counts only its
/// calls), asked by 32 clients at once for 3 seconds, makes at most one
/// store call a second for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_from_one_store_call_a_second_however_many_ask() {
    use crate::common::procs::Proc;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let command = |args: &[&str]| {
        let mut command = Command::new(BIN);
        command
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(args)
            .env("NORTHWIND_CURSOR_SECRET", common::CURSOR_SECRET)
            .env_remove("NORTHWIND_ADDR")
            .env("NORTHWIND_LOG", "warn");
        command
    };
    let (code, _, log) =
        Proc::spawn(command(&["provision"]), dir.path(), "provision").finish(Duration::from_secs(60)).await;
    assert_eq!(code, Some(0), "{log}");
    let create = ["token", "create", "--name", "probe", "--role", "admin"];
    let (code, token, log) = Proc::spawn(command(&create), dir.path(), "token").finish(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{log}");
    let serve = ["serve", "--addr", "127.0.0.1:0", "--no-consumer", "--reconcile-minutes", "0", "--api-rate", "0"];
    let mut server = Proc::spawn(command(&serve), dir.path(), "serve");
    let Some(line) = server.line("listening on ", Duration::from_secs(60)).await else {
        panic!("serve never listened\n{}", server.log_tail());
    };
    let base = line.trim_start_matches("listening on ").trim().to_string();
    let admin = common::client_with_token(Some(token.trim()));
    let probe = reqwest::Client::new();
    assert_eq!(probe.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
    tokio::time::sleep(READINESS_SETTLE).await;
    let before = describe_table_calls(&base, &admin).await;

    let started = Instant::now();
    let run_for = Duration::from_secs(3);
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let (probe, url) = (probe.clone(), format!("{base}/readyz"));
            tokio::spawn(async move {
                let (mut ok, mut other) = (0u64, 0u64);
                while started.elapsed() < run_for {
                    match probe.get(&url).send().await.map(|r| r.status().as_u16()) {
                        Ok(200) => ok += 1,
                        _ => other += 1,
                    }
                }
                (ok, other)
            })
        })
        .collect();
    let (mut ok, mut other) = (0, 0);
    for client in clients {
        let (o, x) = client.await.unwrap();
        ok += o;
        other += x;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let calls = describe_table_calls(&base, &admin).await - before;
    println!(
        "/readyz: {} answers ({ok} ready, {other} other) from 32 clients in {elapsed:.2} s ({:.0} a second); \
         DescribeTable calls meanwhile: {calls} ({:.2} a second)",
        ok + other,
        (ok + other) as f64 / elapsed,
        calls / elapsed
    );
    assert_eq!(other, 0, "every probe answered ready");
    assert!(ok > 100, "the probes were many: {ok}");
    assert!(calls >= 1.0, "the check is made, not skipped: {calls}");
    assert!(calls <= elapsed.ceil() + 1.0, "{calls} store calls in {elapsed:.2} s");
    let (code, _) = server.finish_after_term(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{}", server.log_tail());
}

/// Past the first check's second, so the hammering starts on its own.
const READINESS_SETTLE: std::time::Duration = std::time::Duration::from_millis(1100);

//! The console: `serve` on ECS Fargate behind an Application Load
//! Balancer. `DeployConsole=false` leaves all of it out (the serve policy
//! stays, for a team that runs serve elsewhere).
//!
//! How the two health endpoints are used here:
//! - `/healthz` (the process answers) is the target group's health check
//!   and, through `healthcheck`, the container's: a failing task is taken
//!   out of the balancer and replaced. It does not touch DynamoDB, so a
//!   store outage does not make ECS replace every task (the pages show the
//!   outage themselves, with a 503 and a banner).
//! - `/readyz` (the tables answer, with this task's role) is not a probe
//!   here: a failing readiness would take every task out at once in a
//!   store outage, and an ALB has no "out of rotation but alive" state. It
//!   is the smoke test after a deploy (docs/aws.md, step 5): it proves
//!   the role, the table names and the network path to DynamoDB.
//!
//! Timing, from the stop of a task: the balancer stops sending it new
//! requests and lets those under way finish for the deregistration delay,
//! longer than serve's longest request; then ECS sends SIGTERM, and serve
//! finishes what is left and exits well within the stop timeout. The
//! balancer's idle timeout is under serve's keep-alive, so the balancer
//! always closes an idle connection first (a connection closed by the
//! server as the balancer reuses it would be an intermittent 502).

use super::{Deployment, consumer_mode_environment, if_, kept, no_value, policy, reference, sub};
use crate::server::deploy::iam;
use serde_json::{Map, Value, json};

/// The port serve listens on in the image (LEPTOS_SITE_ADDR).
const SERVE_PORT: u16 = 3000;
/// serve's keep-alive (`--idle-timeout-secs`), set explicitly.
pub(super) const KEEP_ALIVE_SECS: u64 = 75;
pub(super) const BALANCER_IDLE_TIMEOUT_SECS: u64 = 60;
pub(super) const DEREGISTRATION_DELAY_SECS: u64 = 30;
/// Seconds between SIGTERM and SIGKILL (Fargate allows up to 120).
pub(super) const STOP_TIMEOUT_SECS: u64 = 30;
const CONTAINER: &str = "serve";

/// The console's parameters, for their group in the console.
pub(super) const PARAMETERS: [&str; 21] = [
    "DeployConsole",
    "DomainName",
    "CertificateArn",
    "HostedZoneId",
    "VpcId",
    "LoadBalancerSubnetIds",
    "TaskSubnetIds",
    "TaskPublicIp",
    "IngressCidr",
    "WafRateLimit",
    "AccessLogsBucket",
    "TaskCpu",
    "TaskMemory",
    "ConsoleMinTasks",
    "ConsoleMaxTasks",
    "RequestsPerTarget",
    "ReconcileMinutes",
    "AuditRetentionDays",
    "OidcIssuer",
    "OidcClientId",
    "OidcClientSecretArn",
];

pub(super) fn add(
    deployment: &Deployment,
    parameters: &mut Map<String, Value>,
    conditions: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
) {
    parameters.extend(console_parameters());
    let given = |name: &str| json!({ "Fn::Not": [{ "Fn::Equals": [reference(name), ""] }] });
    let listed = |name: &str| json!({ "Fn::Not": [{ "Fn::Equals": [{ "Fn::Join": ["", reference(name)] }, ""] }] });
    // The network is part of the condition, though the rules already
    // require it: what a console resource names is then never empty.
    conditions.insert(
        "Console".into(),
        json!({ "Fn::And": [
            { "Fn::Equals": [reference("DeployConsole"), "true"] },
            given("VpcId"),
            listed("LoadBalancerSubnetIds"),
            listed("TaskSubnetIds")
        ] }),
    );
    conditions.insert(
        "ConsoleOidc".into(),
        json!({ "Fn::And": [{ "Condition": "Console" }, given("OidcIssuer"), given("OidcClientSecretArn")] }),
    );
    conditions.insert(
        "ConsoleCertificateGiven".into(),
        json!({ "Fn::And": [{ "Condition": "Console" }, given("CertificateArn")] }),
    );
    conditions.insert(
        "ConsoleCertificate".into(),
        json!({ "Fn::And": [{ "Condition": "Console" }, { "Fn::Equals": [reference("CertificateArn"), ""] }] }),
    );
    conditions.insert("ConsoleDns".into(), json!({ "Fn::And": [{ "Condition": "Console" }, given("HostedZoneId")] }));
    conditions.insert(
        "ConsoleWaf".into(),
        json!({ "Fn::And": [
            { "Condition": "Console" },
            { "Fn::Not": [{ "Fn::Equals": [reference("WafRateLimit"), "0"] }] }
        ] }),
    );
    conditions.insert(
        "ConsoleAccessLogs".into(),
        json!({ "Fn::And": [{ "Condition": "Console" }, given("AccessLogsBucket")] }),
    );
    conditions.insert("Arm64".into(), json!({ "Fn::Equals": [reference("Architecture"), "arm64"] }));
    // Whoever runs serve, here or elsewhere, takes one of these: the web
    // tier alone (the Lambda consumes) or with its in-process consumer.
    resources.insert(
        "ServePolicy".into(),
        json!({
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "Description": "Northwind Ops serve with its in-process consumer (docs/iam/serve.json)",
                "PolicyDocument": policy(iam::SERVE, deployment, &[])
            }
        }),
    );
    resources.insert(
        "WebPolicy".into(),
        json!({
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {
                "Description": "Northwind Ops serve --no-consumer, the web tier alone (docs/iam/web.json)",
                "PolicyDocument": policy(iam::WEB, deployment, &[])
            }
        }),
    );
    for (name, resource) in [
        ("Cluster", cluster()),
        ("ConsoleLogs", log_group()),
        ("CursorSecret", cursor_secret()),
        ("TaskExecutionRole", execution_role()),
        ("TaskRole", task_role()),
        ("LoadBalancerSecurityGroup", balancer_security_group()),
        ("TaskSecurityGroup", task_security_group()),
        ("TaskIngress", task_ingress()),
        ("LoadBalancer", load_balancer()),
        ("TargetGroup", target_group()),
        ("HttpsListener", https_listener()),
        ("HttpListener", http_listener()),
        ("TaskDefinition", task_definition(deployment)),
        ("Service", service()),
        ("ConsoleScaling", service_scaling()),
        ("ConsoleTracking", service_tracking()),
    ] {
        resources.insert(name.into(), with_condition(resource, "Console"));
    }
    resources.insert("Certificate".into(), with_condition(certificate(), "ConsoleCertificate"));
    resources.insert("DnsRecord".into(), with_condition(dns_record(), "ConsoleDns"));
    resources.insert("WebAcl".into(), with_condition(web_acl(), "ConsoleWaf"));
    resources.insert("WebAclAssociation".into(), with_condition(web_acl_association(), "ConsoleWaf"));
}

fn with_condition(mut resource: Value, condition: &str) -> Value {
    resource["Condition"] = json!(condition);
    resource
}

fn console_parameters() -> Map<String, Value> {
    let text =
        |default: &str, description: &str| json!({ "Type": "String", "Default": default, "Description": description });
    let list = |description: &str| json!({ "Type": "CommaDelimitedList", "Default": "", "Description": description });
    let number = |default: u32, least: u32, description: &str| json!({ "Type": "Number", "Default": default, "MinValue": least, "Description": description });
    let choice = |values: &[&str], default: &str, description: &str| json!({ "Type": "String", "AllowedValues": values, "Default": default, "Description": description });
    let mut parameters = Map::new();
    for (name, value) in [
        ("DeployConsole", choice(&["true", "false"], "true", "false: no console here (serve runs elsewhere)")),
        ("DomainName", text("", "The console's host name (https://DomainName)")),
        (
            "CertificateArn",
            text("", "An ACM certificate for DomainName; empty: one is made, validated in HostedZoneId"),
        ),
        ("HostedZoneId", text("", "The Route 53 zone of DomainName: its alias record is made there")),
        ("VpcId", text("", "The VPC of the balancer and the tasks")),
        ("LoadBalancerSubnetIds", list("Public subnets of the balancer, in two zones or more")),
        (
            "TaskSubnetIds",
            list("Subnets of the tasks (private, with a NAT or VPC endpoints; or public, with TaskPublicIp)"),
        ),
        ("TaskPublicIp", choice(&["DISABLED", "ENABLED"], "DISABLED", "ENABLED for tasks in public subnets")),
        (
            "IngressCidr",
            json!({
                "Type": "String",
                "Default": "",
                "AllowedPattern": INGRESS_CIDR_PATTERN,
                "ConstraintDescription": "an IPv4 CIDR range, such as 203.0.113.0/24",
                "Description": "Addresses that may reach the console (required with the console): your office or VPN \
                                range; 0.0.0.0/0 opens it to the whole internet (then set WafRateLimit)"
            }),
        ),
        (
            "WafRateLimit",
            json!({
                "Type": "Number",
                "Default": 0,
                "MinValue": 0,
                "MaxValue": 2_000_000_000,
                "Description": "A WAF web ACL on the balancer blocks a client address over this many requests in 5 \
                                minutes (at least 10; 0: no web ACL)"
            }),
        ),
        (
            "AccessLogsBucket",
            text("", "An S3 bucket for the balancer's access logs (its policy lets ELB write); empty: none"),
        ),
        ("TaskCpu", choice(&["256", "512", "1024", "2048", "4096"], "512", "CPU units of a task")),
        ("TaskMemory", text("1024", "MiB of a task (a size Fargate allows for TaskCpu)")),
        ("ConsoleMinTasks", number(2, 1, "Tasks at least (one per zone keeps a zone's loss harmless)")),
        ("ConsoleMaxTasks", number(6, 1, "Tasks at most")),
        ("RequestsPerTarget", number(3000, 1, "Requests a minute per task that scaling keeps to")),
        (
            "ReconcileMinutes",
            number(
                10,
                0,
                "Minutes between the console's reconciliations of the PENDING counters (0: none; 0 for the first day \
                 of a stack upgraded from one whose consumer had no tumbling window)",
            ),
        ),
        ("AuditRetentionDays", audit_retention()),
        ("OidcIssuer", text("", "OpenID Connect issuer URL; empty: local accounts only")),
        ("OidcClientId", text("", "OpenID Connect client id")),
        ("OidcClientSecretArn", text("", "The Secrets Manager secret holding the OpenID Connect client secret")),
    ] {
        parameters.insert(name.into(), value);
    }
    parameters
}

/// What CloudFormation checks before it starts: a console needs its
/// network, its name and a certificate; OpenID Connect all its settings.
pub(super) fn rules() -> Value {
    let given = |name: &str| json!({ "Fn::Not": [{ "Fn::Equals": [reference(name), ""] }] });
    let listed = |name: &str| json!({ "Fn::Not": [{ "Fn::EachMemberEquals": [reference(name), ""] }] });
    let assert = |test: Value, why: &str| json!({ "Assert": test, "AssertDescription": why });
    json!({
        "ConsoleNeedsItsNetworkAndName": {
            "RuleCondition": { "Fn::Equals": [reference("DeployConsole"), "true"] },
            "Assertions": [
                assert(given("VpcId"), "DeployConsole=true needs VpcId"),
                assert(listed("LoadBalancerSubnetIds"), "DeployConsole=true needs LoadBalancerSubnetIds"),
                assert(listed("TaskSubnetIds"), "DeployConsole=true needs TaskSubnetIds"),
                assert(given("DomainName"), "DeployConsole=true needs DomainName"),
                assert(
                    given("IngressCidr"),
                    "DeployConsole=true needs IngressCidr, the addresses that may reach the console (0.0.0.0/0: \
                     anyone)"
                ),
                assert(
                    json!({ "Fn::Or": [given("CertificateArn"), given("HostedZoneId")] }),
                    "DeployConsole=true needs CertificateArn, or HostedZoneId to make one"
                )
            ]
        },
        "OidcNeedsAllItsSettings": {
            "RuleCondition": given("OidcIssuer"),
            "Assertions": [
                assert(given("OidcClientId"), "OidcIssuer needs OidcClientId"),
                assert(given("OidcClientSecretArn"), "OidcIssuer needs OidcClientSecretArn")
            ]
        }
    })
}

pub(super) fn outputs() -> Map<String, Value> {
    let mut outputs = Map::new();
    outputs.insert("ConsoleUrl".into(), json!({ "Condition": "Console", "Value": sub("https://${DomainName}") }));
    outputs.insert(
        "LoadBalancerDnsName".into(),
        json!({
            "Condition": "Console",
            "Description": "Point DomainName here when its zone is not HostedZoneId",
            "Value": { "Fn::GetAtt": ["LoadBalancer", "DNSName"] }
        }),
    );
    outputs
}

fn cluster() -> Value {
    json!({
        "Type": "AWS::ECS::Cluster",
        "Properties": { "ClusterSettings": [{ "Name": "containerInsights", "Value": "enabled" }] }
    })
}

fn log_group() -> Value {
    kept(json!({ "Type": "AWS::Logs::LogGroup", "Properties": { "RetentionInDays": reference("LogRetentionDays") } }))
}

/// The secret that signs page cursors, the same for every task (a cursor
/// from one is read by another): generated here, never seen by anyone.
fn cursor_secret() -> Value {
    kept(json!({
        "Type": "AWS::SecretsManager::Secret",
        "Properties": {
            "Description": "Northwind Ops: the key that signs page cursors (NORTHWIND_CURSOR_SECRET)",
            "GenerateSecretString": { "PasswordLength": 64, "ExcludePunctuation": true }
        }
    }))
}

fn ecs_trust() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Service": "ecs-tasks.amazonaws.com" },
            "Action": "sts:AssumeRole",
            "Condition": {
                "ArnLike": { "aws:SourceArn": sub("arn:${AWS::Partition}:ecs:${AWS::Region}:${AWS::AccountId}:*") },
                "StringEquals": { "aws:SourceAccount": reference("AWS::AccountId") }
            }
        }]
    })
}

/// What ECS needs to start a task: the image, the log stream, the secrets.
fn execution_role() -> Value {
    json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": ecs_trust(),
            "ManagedPolicyArns": [sub("arn:${AWS::Partition}:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy")],
            "Policies": [{
                "PolicyName": "northwind-console-secrets",
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [{
                        "Effect": "Allow",
                        "Action": "secretsmanager:GetSecretValue",
                        "Resource": [
                            reference("CursorSecret"),
                            if_("ConsoleOidc", reference("OidcClientSecretArn"), no_value())
                        ]
                    }]
                }
            }]
        }
    })
}

/// What serve does: the web tier alone while the Lambda consumes
/// (docs/iam/web.json: no checkpoint write, no audit item changed or
/// deleted), with its in-process consumer otherwise (docs/iam/serve.json).
fn task_role() -> Value {
    json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": ecs_trust(),
            "ManagedPolicyArns": [if_(super::IN_PROCESS, reference("ServePolicy"), reference("WebPolicy"))]
        }
    })
}

fn balancer_security_group() -> Value {
    let ingress = |port: u16, what: &str| {
        json!({
            "IpProtocol": "tcp", "FromPort": port, "ToPort": port,
            "CidrIp": reference("IngressCidr"), "Description": what
        })
    };
    json!({
        "Type": "AWS::EC2::SecurityGroup",
        "Properties": {
            "GroupDescription": "Northwind Ops balancer: HTTPS in, to the tasks out",
            "VpcId": reference("VpcId"),
            "SecurityGroupIngress": [ingress(443, "HTTPS"), ingress(80, "HTTP, redirected to HTTPS")],
            "SecurityGroupEgress": [{
                "IpProtocol": "tcp", "FromPort": SERVE_PORT, "ToPort": SERVE_PORT,
                "DestinationSecurityGroupId": reference("TaskSecurityGroup"), "Description": "to the tasks"
            }]
        }
    })
}

fn task_security_group() -> Value {
    json!({
        "Type": "AWS::EC2::SecurityGroup",
        "Properties": {
            "GroupDescription": "Northwind Ops tasks: the balancer in, HTTPS out",
            "VpcId": reference("VpcId"),
            "SecurityGroupEgress": [{
                "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0",
                "Description": "AWS APIs, ECR and the OpenID Connect provider"
            }]
        }
    })
}

/// The tasks' ingress on its own, so neither group names the other first.
fn task_ingress() -> Value {
    json!({
        "Type": "AWS::EC2::SecurityGroupIngress",
        "Properties": {
            "GroupId": reference("TaskSecurityGroup"),
            "IpProtocol": "tcp", "FromPort": SERVE_PORT, "ToPort": SERVE_PORT,
            "SourceSecurityGroupId": reference("LoadBalancerSecurityGroup"),
            "Description": "from the balancer"
        }
    })
}

fn attributes(pairs: &[(&str, String)]) -> Value {
    pairs.iter().map(|(key, value)| json!({ "Key": key, "Value": value })).collect()
}

fn load_balancer() -> Value {
    json!({
        "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
        "Properties": {
            "Type": "application",
            "Scheme": "internet-facing",
            "Subnets": reference("LoadBalancerSubnetIds"),
            "SecurityGroups": [reference("LoadBalancerSecurityGroup")],
            "LoadBalancerAttributes": balancer_attributes()
        }
    })
}

/// The balancer's settings, and its access logs when a bucket is given.
fn balancer_attributes() -> Value {
    let mut list = attributes(&[
        ("idle_timeout.timeout_seconds", BALANCER_IDLE_TIMEOUT_SECS.to_string()),
        ("routing.http.drop_invalid_header_fields.enabled", "true".into()),
    ]);
    let logs = |key: &str, value: Value| if_("ConsoleAccessLogs", json!({ "Key": key, "Value": value }), no_value());
    if let Value::Array(items) = &mut list {
        items.push(logs("access_logs.s3.enabled", json!("true")));
        items.push(logs("access_logs.s3.bucket", reference("AccessLogsBucket")));
        items.push(logs("access_logs.s3.prefix", json!(ACCESS_LOGS_PREFIX)));
    }
    list
}

/// An IPv4 CIDR range, or nothing (a stack without the console).
pub(super) const INGRESS_CIDR_PATTERN: &str = r"^$|^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";
/// Where in AccessLogsBucket the balancer writes.
const ACCESS_LOGS_PREFIX: &str = "northwind-console";

/// The optional web application firewall: one rate-based rule per client
/// address (the balancer sees the client's own address), over WafRateLimit
/// requests in five minutes blocked until it falls under. It sits before
/// serve's own limits (per client and per account), which it does not
/// replace: it stops a flood before it reaches a task at all.
fn web_acl() -> Value {
    let visibility = |metric: &str| json!({ "SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": metric });
    json!({
        "Type": "AWS::WAFv2::WebACL",
        "Properties": {
            "Description": "Northwind Ops console: requests per client address",
            "Scope": "REGIONAL",
            "DefaultAction": { "Allow": {} },
            "VisibilityConfig": visibility("northwind-console"),
            "Rules": [{
                "Name": "RatePerClientAddress",
                "Priority": 0,
                "Action": { "Block": {} },
                "Statement": {
                    "RateBasedStatement": {
                        "Limit": reference("WafRateLimit"),
                        "EvaluationWindowSec": 300,
                        "AggregateKeyType": "IP"
                    }
                },
                "VisibilityConfig": visibility("northwind-console-rate")
            }]
        }
    })
}

fn web_acl_association() -> Value {
    json!({
        "Type": "AWS::WAFv2::WebACLAssociation",
        "Properties": {
            "ResourceArn": reference("LoadBalancer"),
            "WebACLArn": { "Fn::GetAtt": ["WebAcl", "Arn"] }
        }
    })
}

fn target_group() -> Value {
    json!({
        "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
        "Properties": {
            "VpcId": reference("VpcId"),
            "TargetType": "ip",
            "Protocol": "HTTP",
            "Port": SERVE_PORT,
            "HealthCheckPath": "/healthz",
            "HealthCheckIntervalSeconds": 10,
            "HealthCheckTimeoutSeconds": 5,
            "HealthyThresholdCount": 2,
            "UnhealthyThresholdCount": 3,
            "Matcher": { "HttpCode": "200" },
            "TargetGroupAttributes": attributes(&[
                ("deregistration_delay.timeout_seconds", DEREGISTRATION_DELAY_SECS.to_string()),
                // Live streams hold a connection for long: count what is
                // outstanding rather than take turns.
                ("load_balancing.algorithm.type", "least_outstanding_requests".into()),
            ])
        }
    })
}

fn https_listener() -> Value {
    json!({
        "Type": "AWS::ElasticLoadBalancingV2::Listener",
        "Properties": {
            "LoadBalancerArn": reference("LoadBalancer"),
            "Port": 443,
            "Protocol": "HTTPS",
            "SslPolicy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
            "Certificates": [{
                "CertificateArn": if_("ConsoleCertificateGiven", reference("CertificateArn"), reference("Certificate"))
            }],
            "DefaultActions": [{ "Type": "forward", "TargetGroupArn": reference("TargetGroup") }]
        }
    })
}

fn http_listener() -> Value {
    json!({
        "Type": "AWS::ElasticLoadBalancingV2::Listener",
        "Properties": {
            "LoadBalancerArn": reference("LoadBalancer"),
            "Port": 80,
            "Protocol": "HTTP",
            "DefaultActions": [{
                "Type": "redirect",
                "RedirectConfig": { "Protocol": "HTTPS", "Port": "443", "StatusCode": "HTTP_301" }
            }]
        }
    })
}

fn certificate() -> Value {
    json!({
        "Type": "AWS::CertificateManager::Certificate",
        "Properties": {
            "DomainName": reference("DomainName"),
            "ValidationMethod": "DNS",
            "DomainValidationOptions": [{ "DomainName": reference("DomainName"), "HostedZoneId": reference("HostedZoneId") }]
        }
    })
}

fn dns_record() -> Value {
    json!({
        "Type": "AWS::Route53::RecordSet",
        "Properties": {
            "HostedZoneId": reference("HostedZoneId"),
            "Name": reference("DomainName"),
            "Type": "A",
            "AliasTarget": {
                "DNSName": { "Fn::GetAtt": ["LoadBalancer", "DNSName"] },
                "HostedZoneId": { "Fn::GetAtt": ["LoadBalancer", "CanonicalHostedZoneID"] },
                "EvaluateTargetHealth": true
            }
        }
    })
}

/// How long the audit trail keeps a record: serve's `--audit-retention-days`
/// and its range (a value past it would stop the tasks at start).
fn audit_retention() -> Value {
    json!({
        "Type": "Number",
        "Default": 0,
        "MinValue": 0,
        "MaxValue": 36_500,
        "Description": "Days the audit trail keeps a record (the metrics table's TTL removes it after); 0: kept for ever",
    })
}

/// The proxies serve believes `X-Forwarded-For` from: the private ranges.
/// The tasks admit only the balancer's security group, and the balancer
/// is internet-facing, so every peer is one of its nodes (a private address
/// of the VPC) and every client it names has a public one.
const TRUSTED_PROXIES: &str = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16";

/// serve's environment: the tables, the public URL, the keep-alive, the
/// balancer as the trusted proxy, the consumer mode, OpenID Connect when it
/// is set.
fn environment(deployment: &Deployment) -> Value {
    let pair = |name: &str, value: Value| json!({ "Name": name, "Value": value });
    let mut variables = vec![
        pair("NORTHWIND_STORE", json!("aws")),
        pair("NORTHWIND_ORDERS_TABLE", json!(deployment.orders.name)),
        pair("NORTHWIND_METRICS_TABLE", json!(deployment.metrics.name)),
        pair("NORTHWIND_PUBLIC_URL", sub("https://${DomainName}")),
        pair("NORTHWIND_IDLE_TIMEOUT_SECS", json!(KEEP_ALIVE_SECS.to_string())),
        pair("NORTHWIND_TRUSTED_PROXIES", json!(TRUSTED_PROXIES)),
        pair("AWS_REGION", reference("AWS::Region")),
    ];
    variables.extend(consumer_mode_environment().into_iter().map(|(name, value)| pair(name, value)));
    // Anchored at the Lambda's shard checkpoints (its tumbling window).
    variables.push(pair("NORTHWIND_RECONCILE_MINUTES", reference("ReconcileMinutes")));
    variables.push(pair("NORTHWIND_AUDIT_RETENTION_DAYS", reference("AuditRetentionDays")));
    for (name, parameter) in [("NORTHWIND_OIDC_ISSUER", "OidcIssuer"), ("NORTHWIND_OIDC_CLIENT_ID", "OidcClientId")] {
        variables.push(if_("ConsoleOidc", pair(name, reference(parameter)), no_value()));
    }
    Value::Array(variables)
}

fn task_definition(deployment: &Deployment) -> Value {
    json!({
        "Type": "AWS::ECS::TaskDefinition",
        "Properties": {
            "RequiresCompatibilities": ["FARGATE"],
            "NetworkMode": "awsvpc",
            "Cpu": reference("TaskCpu"),
            "Memory": reference("TaskMemory"),
            "RuntimePlatform": {
                "OperatingSystemFamily": "LINUX",
                "CpuArchitecture": if_("Arm64", json!("ARM64"), json!("X86_64"))
            },
            "ExecutionRoleArn": { "Fn::GetAtt": ["TaskExecutionRole", "Arn"] },
            "TaskRoleArn": { "Fn::GetAtt": ["TaskRole", "Arn"] },
            "ContainerDefinitions": [{
                "Name": CONTAINER,
                // By digest (ImageUri's pattern): every task runs the
                // image the Lambda runs, whenever it starts.
                "Image": reference("ImageUri"),
                "Essential": true,
                "Command": ["serve"],
                "PortMappings": [{ "ContainerPort": SERVE_PORT, "Protocol": "tcp" }],
                "Environment": environment(deployment),
                "Secrets": [
                    { "Name": "NORTHWIND_CURSOR_SECRET", "ValueFrom": reference("CursorSecret") },
                    if_(
                        "ConsoleOidc",
                        json!({ "Name": "NORTHWIND_OIDC_CLIENT_SECRET", "ValueFrom": reference("OidcClientSecretArn") }),
                        no_value()
                    )
                ],
                // The image has no shell: its own binary asks /healthz.
                "HealthCheck": {
                    "Command": ["CMD", "/northwind-ops", "healthcheck"],
                    "Interval": 15,
                    "Timeout": 5,
                    "Retries": 3,
                    "StartPeriod": 30
                },
                "StopTimeout": STOP_TIMEOUT_SECS,
                // With the cursor secret given and the store on AWS, serve
                // writes no file.
                "ReadonlyRootFilesystem": true,
                "Ulimits": [{ "Name": "nofile", "SoftLimit": 65_536, "HardLimit": 65_536 }],
                "LogConfiguration": {
                    "LogDriver": "awslogs",
                    "Options": {
                        "awslogs-group": reference("ConsoleLogs"),
                        "awslogs-region": reference("AWS::Region"),
                        "awslogs-stream-prefix": CONTAINER
                    }
                }
            }]
        }
    })
}

fn service() -> Value {
    json!({
        "Type": "AWS::ECS::Service",
        // The target group must belong to a balancer before a service uses it.
        "DependsOn": ["HttpsListener"],
        "Properties": {
            "Cluster": reference("Cluster"),
            "TaskDefinition": reference("TaskDefinition"),
            "LaunchType": "FARGATE",
            "DesiredCount": reference("ConsoleMinTasks"),
            "NetworkConfiguration": {
                "AwsvpcConfiguration": {
                    "Subnets": reference("TaskSubnetIds"),
                    "SecurityGroups": [reference("TaskSecurityGroup")],
                    "AssignPublicIp": reference("TaskPublicIp")
                }
            },
            "LoadBalancers": [{ "ContainerName": CONTAINER, "ContainerPort": SERVE_PORT, "TargetGroupArn": reference("TargetGroup") }],
            "HealthCheckGracePeriodSeconds": 60,
            "DeploymentConfiguration": {
                "MinimumHealthyPercent": 100,
                "MaximumPercent": 200,
                "DeploymentCircuitBreaker": { "Enable": true, "Rollback": true }
            },
            "PropagateTags": "SERVICE",
            "EnableECSManagedTags": true
        }
    })
}

fn service_scaling() -> Value {
    json!({
        "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
        "Properties": {
            "ServiceNamespace": "ecs",
            "ScalableDimension": "ecs:service:DesiredCount",
            "ResourceId": sub("service/${Cluster}/${Service.Name}"),
            "MinCapacity": reference("ConsoleMinTasks"),
            "MaxCapacity": reference("ConsoleMaxTasks")
        }
    })
}

/// Requests per task: what a console's load is (CPU follows it, and live
/// streams are one request each however long they last).
fn service_tracking() -> Value {
    json!({
        "Type": "AWS::ApplicationAutoScaling::ScalingPolicy",
        "Properties": {
            "PolicyName": "ConsoleRequestsPerTask",
            "PolicyType": "TargetTrackingScaling",
            "ScalingTargetId": reference("ConsoleScaling"),
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": reference("RequestsPerTarget"),
                "ScaleInCooldown": 300,
                "ScaleOutCooldown": 60,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "ALBRequestCountPerTarget",
                    "ResourceLabel": { "Fn::Join": ["/", [
                        { "Fn::GetAtt": ["LoadBalancer", "LoadBalancerFullName"] },
                        { "Fn::GetAtt": ["TargetGroup", "TargetGroupFullName"] }
                    ]] }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::http::config::ServeArgs;

    #[test]
    fn the_balancer_closes_idle_connections_first_and_drains_longer_than_a_request() {
        let serve = ServeArgs::default();
        const { assert!(BALANCER_IDLE_TIMEOUT_SECS < KEEP_ALIVE_SECS) };
        assert_eq!(KEEP_ALIVE_SECS, serve.limits.idle_timeout_secs, "the stack sets serve's own default");
        assert!(DEREGISTRATION_DELAY_SECS > serve.limits.request_timeout_secs, "requests under way finish");
        assert!(STOP_TIMEOUT_SECS > serve.limits.request_timeout_secs, "serve finishes before SIGKILL");
        const { assert!(STOP_TIMEOUT_SECS <= 120, "Fargate's most") };
    }
}

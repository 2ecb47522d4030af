//! The IAM of a deployment: the policies of `docs/iam/`, one per command
//! or role of a process, as the template's roles take them. The metrics
//! table holds accounts, sessions, tokens and the audit trail beside the
//! counters, so every statement on its items names the partitions its
//! command reaches (`dynamodb:LeadingKeys`) with the actions it makes
//! there. Those statements are generated from the code's own list
//! (`store::keys::METRICS_ACCESS`, by `metrics_statements`) and written into
//! the files by `make docs` (`northwind-ops docs --write docs`); the other
//! statements (the orders table, its stream, CloudWatch, logs) are the
//! files' own. The tests below hold each file to what the code generates.

use crate::server::store::keys::{METRICS_ACCESS, METRICS_PARTITIONS, MetricsAccess, leading_keys_pattern};
use serde_json::{Value, json};

/// The web tier alone: `serve --no-consumer`, the stack's console tasks
/// (the Lambda consumes the stream). It cannot delete, update or overwrite
/// a checkpoint, nor update or delete an audit item.
pub const WEB: &str = include_str!("../../../docs/iam/web.json");
/// `serve` with its in-process consumer (and reconciliation).
pub const SERVE: &str = include_str!("../../../docs/iam/serve.json");
/// The Lambda consumer's execution role.
pub const LAMBDA: &str = include_str!("../../../docs/iam/lambda.json");

/// Every policy of `docs/iam/`, by file name.
pub const POLICIES: [(&str, &str); 12] = [
    ("admin", include_str!("../../../docs/iam/admin.json")),
    ("advise", include_str!("../../../docs/iam/advise.json")),
    ("consume", include_str!("../../../docs/iam/consume.json")),
    ("lambda", LAMBDA),
    ("loadgen", include_str!("../../../docs/iam/loadgen.json")),
    ("provision", include_str!("../../../docs/iam/provision.json")),
    ("reconcile", include_str!("../../../docs/iam/reconcile.json")),
    ("replay", include_str!("../../../docs/iam/replay.json")),
    ("seed", include_str!("../../../docs/iam/seed.json")),
    ("serve-provision", include_str!("../../../docs/iam/serve-provision.json")),
    ("serve", SERVE),
    ("web", WEB),
];

/// The metrics table as `docs/iam/` names it.
const METRICS_ARN: &str = "arn:aws:dynamodb:${Region}:${Account}:table/northwind-metrics";
/// The actions on the metrics table's items that the generated statements
/// grant, and no hand-written statement may.
const READ_ACTIONS: [&str; 3] = ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query"];
const ITEM_ACTIONS: [&str; 9] = [
    "dynamodb:BatchGetItem",
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
];

/// One statement on the metrics table's items: `actions` on the partitions
/// `families`, and never on a request without a partition key (a Scan).
fn metrics_statement(sid: &str, actions: &[&str], families: &[&str]) -> Value {
    json!({
        "Sid": sid,
        "Effect": "Allow",
        "Action": actions,
        "Resource": [METRICS_ARN],
        "Condition": {
            "ForAllValues:StringLike": {
                "dynamodb:LeadingKeys": families.iter().map(|f| leading_keys_pattern(f)).collect::<Vec<_>>()
            },
            "Null": { "dynamodb:LeadingKeys": "false" }
        }
    })
}

/// The statements of a command's policy on the metrics table's items, from
/// what its code does there: one for its reads, and one per set of write
/// actions, each naming the partitions that take exactly that set (so an
/// audit partition, only ever put, is in a statement without UpdateItem
/// or DeleteItem).
pub fn metrics_statements(access: &MetricsAccess) -> Vec<Value> {
    let ordered = |list: &[&str]| METRICS_PARTITIONS.into_iter().filter(|f| list.contains(f)).collect::<Vec<_>>();
    let mut statements = Vec::new();
    if !access.reads.is_empty() {
        statements.push(metrics_statement("MetricsReads", &READ_ACTIONS, &ordered(access.reads)));
    }
    let sets: [(&str, [bool; 3]); 7] = [
        ("MetricsPutsUpdatesAndDeletes", [true, true, true]),
        ("MetricsPutsAndUpdates", [true, true, false]),
        ("MetricsUpdatesAndDeletes", [false, true, true]),
        ("MetricsPutsAndDeletes", [true, false, true]),
        ("MetricsPutsOnly", [true, false, false]),
        ("MetricsUpdatesOnly", [false, true, false]),
        ("MetricsDeletesOnly", [false, false, true]),
    ];
    let actions = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"];
    for (sid, set) in sets {
        let families: Vec<&str> = METRICS_PARTITIONS
            .into_iter()
            .filter(|f| [access.puts, access.updates, access.deletes].map(|list| list.contains(f)) == set)
            .collect();
        if !families.is_empty() {
            let mut granted: Vec<&str> = actions.iter().zip(set).filter(|(_, on)| *on).map(|(a, _)| *a).collect();
            granted.sort_unstable();
            statements.push(metrics_statement(sid, &granted, &families));
        }
    }
    statements
}

/// Whether a statement of a policy file grants actions on the metrics
/// table's items (and is then generated).
fn on_metrics_items(statement: &Value) -> bool {
    let listed = |value: &Value| match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => vec![],
    };
    listed(&statement["Resource"]).iter().any(|r| r == METRICS_ARN)
        && listed(&statement["Action"]).iter().any(|a| ITEM_ACTIONS.contains(&a.as_str()))
}

/// A policy file as the code makes it: its own statements, and those on the
/// metrics table's items generated where the first of them stood (at the
/// end when it had none).
pub fn generated(command: &str, committed: &str) -> String {
    // The texts are this crate's own files, checked by the tests below.
    let mut policy: Value = serde_json::from_str(committed).expect("the docs/iam policies are JSON");
    if let Some(access) = METRICS_ACCESS.iter().find(|access| access.command == command) {
        let statements = policy["Statement"].as_array_mut().expect("a policy has statements");
        let at = statements.iter().position(on_metrics_items).unwrap_or(statements.len());
        statements.retain(|s| !on_metrics_items(s));
        let at = at.min(statements.len());
        statements.splice(at..at, metrics_statements(access));
    }
    let mut text = serde_json::to_string_pretty(&policy).expect("JSON prints");
    text.push('\n');
    text
}

/// IAM's StringLike: `*` any run of characters, `?` any one.
fn like(pattern: &str, text: &str) -> bool {
    match pattern.chars().next() {
        None => text.is_empty(),
        Some('*') => (0..=text.len()).filter(|i| text.is_char_boundary(*i)).any(|i| like(&pattern[1..], &text[i..])),
        Some(c) => {
            let mut chars = text.chars();
            chars.next().is_some_and(|t| c == '?' || c == t) && like(&pattern[c.len_utf8()..], chars.as_str())
        }
    }
}

/// Whether the policy `text` (a file of `docs/iam/`) allows `action` on an
/// item of `table` (as `docs/iam/` names it: `northwind-orders`,
/// `northwind-metrics`) or one of its indexes, whose partition key is `pk`
/// (`None`: the request names none, a Scan), as IAM reads its statements:
/// an Allow whose Action and Resource match and whose conditions hold (a
/// condition this reader does not know never holds). For the tests that
/// hold each role's policy to the calls its code makes.
pub fn allows(text: &str, action: &str, table: &str, pk: Option<&str>) -> bool {
    let Ok(policy) = serde_json::from_str::<Value>(text) else { return false };
    let listed = |value: &Value| match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => vec![],
    };
    let arn = format!("arn:aws:dynamodb:${{Region}}:${{Account}}:table/{table}");
    let on_table = |resource: &str| like(resource, &arn) || like(resource, &format!("{arn}/index/GSI"));
    let holds = |condition: &Value| match condition {
        Value::Null => true,
        Value::Object(tests) => tests.iter().all(|(operator, keys)| match operator.as_str() {
            "ForAllValues:StringLike" => keys.as_object().is_some_and(|keys| {
                keys.iter().all(|(key, patterns)| {
                    key == "dynamodb:LeadingKeys" && pk.is_some_and(|pk| listed(patterns).iter().any(|p| like(p, pk)))
                })
            }),
            "Null" => keys.as_object().is_some_and(|keys| {
                keys.iter().all(|(key, null)| key == "dynamodb:LeadingKeys" && (null == "true") == pk.is_none())
            }),
            _ => false,
        }),
        _ => false,
    };
    policy["Statement"].as_array().into_iter().flatten().any(|statement| {
        statement["Effect"] == "Allow"
            && listed(&statement["Action"]).iter().any(|a| like(a, action))
            && listed(&statement["Resource"]).iter().any(|r| on_table(r))
            && holds(&statement["Condition"])
    })
}

/// Every policy file as the code makes it, by its path under `docs/`.
pub fn generated_files() -> Vec<(String, String)> {
    POLICIES.iter().map(|(name, text)| (format!("iam/{name}.json"), generated(name, text))).collect()
}

/// The tables' names as `docs/iam/` writes them.
const DOC_ORDERS: &str = "table/northwind-orders";
const DOC_METRICS: &str = "table/northwind-metrics";

/// A policy of `docs/iam/` for a stack: its placeholders become the stack's
/// partition, region and account, its tables the deployment's, and every
/// string with a `${...}` in it an `Fn::Sub`. `replace` narrows anything
/// else (a log group).
pub fn document(text: &str, orders: &str, metrics: &str, replace: &[(&str, &str)]) -> Value {
    let mut text = text
        .replace("arn:aws:", "arn:${AWS::Partition}:")
        .replace("${Region}", "${AWS::Region}")
        .replace("${Account}", "${AWS::AccountId}")
        .replace(DOC_ORDERS, &format!("table/{orders}"))
        .replace(DOC_METRICS, &format!("table/{metrics}"));
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    // The texts are this crate's own files, checked by the tests below.
    let document: Value = serde_json::from_str(&text).expect("the docs/iam policies are JSON");
    substituted(document)
}

fn substituted(value: Value) -> Value {
    match value {
        Value::String(text) if text.contains("${") => json!({ "Fn::Sub": text }),
        Value::Array(items) => Value::Array(items.into_iter().map(substituted).collect()),
        Value::Object(fields) => Value::Object(fields.into_iter().map(|(k, v)| (k, substituted(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::keys::{self, AUDIT_PARTITIONS};
    use chrono::NaiveDate;
    use std::collections::BTreeSet;

    const READS: [&str; 4] = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan"];
    const WRITES: [&str; 5] = [
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:ConditionCheckItem",
    ];

    fn statements(command: &str) -> Vec<Value> {
        let text = POLICIES.iter().find(|(name, _)| *name == command).unwrap_or_else(|| panic!("{command}")).1;
        let policy: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("docs/iam/{command}.json: {e}"));
        policy["Statement"].as_array().unwrap().clone()
    }

    fn strings(value: &Value) -> Vec<String> {
        match value {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => vec![],
        }
    }

    /// The statements on the metrics table's items with any of `actions`,
    /// each with the partition patterns it allows.
    fn on_metrics_items(command: &str, actions: &[&str]) -> Vec<(String, BTreeSet<String>)> {
        statements(command)
            .into_iter()
            .filter(|s| strings(&s["Resource"]).iter().any(|r| r == METRICS_ARN))
            .filter(|s| strings(&s["Action"]).iter().any(|a| actions.contains(&a.as_str())))
            .map(|s| {
                let sid = s["Sid"].as_str().unwrap_or("?").to_string();
                let condition = &s["Condition"];
                assert_eq!(
                    condition["Null"]["dynamodb:LeadingKeys"], "false",
                    "{command} {sid}: a request without a partition key (a Scan) must not pass"
                );
                let patterns = strings(&condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]);
                assert!(!patterns.is_empty(), "{command} {sid}: no dynamodb:LeadingKeys condition");
                (sid, patterns.into_iter().collect())
            })
            .collect()
    }

    fn allows(command: &str, actions: &[&str], pk: &str) -> bool {
        on_metrics_items(command, actions).iter().any(|(_, patterns)| patterns.iter().any(|p| like(p, pk)))
    }

    #[test]
    fn every_policy_is_json_with_statements() {
        for (name, text) in POLICIES {
            let policy: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("docs/iam/{name}.json: {e}"));
            assert_eq!(policy["Version"], "2012-10-17", "{name}");
            for statement in policy["Statement"].as_array().unwrap() {
                assert!(statement["Sid"].is_string() && statement["Effect"] == "Allow", "{name}: {statement}");
            }
        }
    }

    #[test]
    fn every_policy_file_is_what_the_code_generates() {
        for (name, text) in POLICIES {
            assert!(
                generated(name, text) == text,
                "docs/iam/{name}.json is not what store::keys::METRICS_ACCESS makes of it: run `make docs`\n{}",
                generated(name, text)
            );
        }
        for access in METRICS_ACCESS {
            assert!(POLICIES.iter().any(|(name, _)| *name == access.command), "docs/iam/{}.json", access.command);
        }
    }

    #[test]
    fn each_policy_reaches_the_metrics_partitions_of_its_command_with_its_actions_and_no_other() {
        let wanted = |list: &[&str]| list.iter().map(|p| leading_keys_pattern(p)).collect::<BTreeSet<_>>();
        let union = |statements: Vec<(String, BTreeSet<String>)>| {
            statements.into_iter().flat_map(|(_, patterns)| patterns).collect::<BTreeSet<_>>()
        };
        for access in METRICS_ACCESS {
            let command = access.command;
            for (action, list) in [
                ("dynamodb:PutItem", access.puts),
                ("dynamodb:UpdateItem", access.updates),
                ("dynamodb:DeleteItem", access.deletes),
            ] {
                assert_eq!(union(on_metrics_items(command, &[action])), wanted(list), "{command}: {action}");
            }
            for action in ["dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem", "dynamodb:Scan"] {
                assert!(on_metrics_items(command, &[action]).is_empty(), "{command}: {action}");
            }
            let reads = union(on_metrics_items(command, &READS));
            assert!(reads.is_superset(&wanted(access.reads)), "{command}: reads {reads:?}");
            let writes: Vec<&str> = access.writes().collect();
            let reachable: BTreeSet<String> = wanted(access.reads).union(&wanted(&writes)).cloned().collect();
            assert!(reads.is_subset(&reachable), "{command}: reads {reads:?} beyond {reachable:?}");
        }
        for command in ["provision", "serve-provision"] {
            assert!(keys::metrics_access(command).is_none());
            let items: Vec<&str> = READS.iter().chain(&WRITES).copied().collect();
            assert!(on_metrics_items(command, &items).is_empty(), "{command} reads or writes no item");
        }
    }

    /// The test: the internet-facing web tier (and serve with its
    /// consumer) can add to the audit trail but never update or delete an
    /// item of it; the web tier alone cannot write a checkpoint at all.
    #[test]
    fn the_web_tier_cannot_delete_or_change_audit_items_or_checkpoints() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let audit = [keys::audit_order_pk("o-1"), keys::audit_day_pk(day, 3), keys::audit_actor_pk("alice", 0)];
        let checkpoint = keys::checkpoint_key("arn:aws:dynamodb:us-east-1:1:table/o/stream/x", "shardId-1").0;
        assert_eq!(audit.iter().filter_map(|pk| keys::partition_of(pk)).collect::<Vec<_>>(), AUDIT_PARTITIONS);
        for command in ["web", "serve"] {
            for pk in audit.iter().chain([&checkpoint]) {
                assert!(!allows(command, &["dynamodb:DeleteItem"], pk), "{command} may delete {pk}");
            }
            for pk in &audit {
                assert!(!allows(command, &["dynamodb:UpdateItem"], pk), "{command} may update {pk}");
                assert!(allows(command, &["dynamodb:PutItem"], pk), "{command} appends to {pk}");
            }
        }
        assert!(!allows("web", &WRITES, &checkpoint), "the web tier writes no checkpoint");
        assert!(allows("web", &READS, &checkpoint), "reconciliation anchors at the checkpoints");
        assert!(allows("serve", &["dynamodb:UpdateItem"], &checkpoint), "the in-process consumer moves them");
        for command in POLICIES.map(|(name, _)| name) {
            for pk in &audit {
                let change = ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"];
                assert!(!allows(command, &change, pk), "{command} may change {pk}");
            }
        }
        // What the web tier does delete: a session, a sale plan, its lease.
        for pk in [keys::session_key("s-1").0, keys::sale_plan_key("bf").0, keys::reconcile_reader_key("arn").0] {
            assert!(allows("web", &["dynamodb:DeleteItem"], &pk), "web deletes {pk}");
        }
    }

    #[test]
    fn the_consumers_cannot_reach_accounts_sessions_or_tokens() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let credentials = [keys::user_key("alice").0, keys::token_key("ci").0, keys::session_key("s-1").0];
        let items: Vec<&str> = READS.iter().chain(&WRITES).copied().collect();
        for command in ["consume", "lambda", "replay", "reconcile", "seed", "loadgen", "advise"] {
            for pk in &credentials {
                assert!(!allows(command, &items, pk), "{command} reaches {pk}");
            }
        }
        for command in ["web", "serve", "admin"] {
            for pk in &credentials[..2] {
                assert!(allows(command, &WRITES, pk), "{command} writes {pk}");
            }
        }
        assert!(allows("serve", &WRITES, &credentials[2]), "serve keeps the sessions");
        assert!(allows("web", &WRITES, &credentials[2]), "so does the web tier alone");
        // What the consumers write, they may write.
        for (command, pk) in [
            ("lambda", keys::applied_key("e-1").0),
            ("lambda", keys::metric_pending_key(day).0),
            ("lambda", keys::capacity_pk(day)),
            ("consume", keys::checkpoint_key("arn:aws:dynamodb:x", "s").0),
            ("consume", keys::metric_minutes_key(day, 23).0),
            ("consume", keys::heat_key(day, 3).0),
            ("seed", keys::audit_day_pk(day, 1)),
            ("admin", keys::capacity_pk(day)),
        ] {
            assert!(allows(command, &WRITES, &pk), "{command} must write {pk}");
        }
        assert!(!allows("consume", &WRITES, &keys::applied_key("e-1").0), "the markers are the Lambda's");
        assert!(!allows("advise", &WRITES, &keys::capacity_pk(day)), "advise writes nothing");
    }

    #[test]
    fn the_policy_reader_reads_statements_as_iam_does() {
        let read = super::allows;
        let audit = keys::audit_order_pk("o-1");
        assert!(read(WEB, "dynamodb:PutItem", "northwind-metrics", Some(&audit)));
        assert!(!read(WEB, "dynamodb:DeleteItem", "northwind-metrics", Some(&audit)));
        assert!(!read(WEB, "dynamodb:PutItem", "northwind-metrics", None), "no key: the Null condition");
        assert!(!read(WEB, "dynamodb:Query", "northwind-metrics", Some("ORDER#o-1")), "no such partition");
        assert!(read(WEB, "dynamodb:PutItem", "northwind-orders", Some("ORDER#o-1")), "the orders table");
        assert!(read(WEB, "dynamodb:Query", "northwind-orders", Some("STATUS#PENDING#2026-11-29#0")), "its GSIs");
        assert!(!read(WEB, "dynamodb:DeleteItem", "northwind-orders", Some("ORDER#o-1")));
        assert!(!read(WEB, "dynamodb:PutItem", "shop-orders", Some("ORDER#o-1")), "another table");
    }

    #[test]
    fn like_is_iams_string_like() {
        assert!(like("METRIC#PENDING#*", "METRIC#PENDING#2026-11-29"));
        assert!(like("USERS", "USERS") && !like("USERS", "USERSX") && !like("USERS*", "TOKENS"));
        assert!(like("A?C*", "ABCdef") && !like("A?C", "AC"));
    }

    #[test]
    fn a_stack_document_names_its_partition_region_account_and_tables() {
        let text =
            document(LAMBDA, "shop-orders", "shop-metrics", &[("/aws/lambda/*", "${ConsumerLogs}:*")]).to_string();
        assert!(text.contains("arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/shop-metrics"));
        assert!(text.contains("log-group:${ConsumerLogs}:*"), "{text}");
        assert!(!text.contains("arn:aws:") && !text.contains("northwind-") && !text.contains("${Region}"), "{text}");
    }
}

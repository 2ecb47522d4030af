//! The IAM of a deployment: the policies of `docs/iam/`, one per command,
//! as the template's roles take them. The metrics table holds accounts,
//! sessions and tokens beside the counters, so every statement on it names
//! the partitions its command reaches (`dynamodb:LeadingKeys`), from the
//! lists in `store::keys` (`METRICS_ACCESS`); the tests below hold each
//! policy to its list.

use serde_json::{Value, json};

/// What the console's tasks need (`serve --no-consumer`, and what it would
/// need with its own consumer and reconciliation).
pub const SERVE: &str = include_str!("../../../docs/iam/serve.json");
/// The Lambda consumer's execution role.
pub const LAMBDA: &str = include_str!("../../../docs/iam/lambda.json");

/// Every policy of `docs/iam/`, by file name.
pub const POLICIES: [(&str, &str); 11] = [
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
];

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
    use crate::server::store::keys::{self, METRICS_ACCESS, leading_keys_pattern};
    use chrono::NaiveDate;
    use std::collections::BTreeSet;

    const METRICS_ARN: &str = "arn:aws:dynamodb:${Region}:${Account}:table/northwind-metrics";
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

    /// IAM's StringLike: `*` any run of characters, `?` any one.
    fn like(pattern: &str, text: &str) -> bool {
        match pattern.chars().next() {
            None => text.is_empty(),
            Some('*') => {
                (0..=text.len()).filter(|i| text.is_char_boundary(*i)).any(|i| like(&pattern[1..], &text[i..]))
            }
            Some(c) => {
                let mut chars = text.chars();
                chars.next().is_some_and(|t| c == '?' || c == t) && like(&pattern[c.len_utf8()..], chars.as_str())
            }
        }
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
    fn each_policy_reaches_the_metrics_partitions_of_its_command_and_no_other() {
        for access in METRICS_ACCESS {
            let command = access.command;
            let wanted = |list: &[&str]| list.iter().map(|p| leading_keys_pattern(p)).collect::<BTreeSet<_>>();
            let union = |statements: Vec<(String, BTreeSet<String>)>| {
                statements.into_iter().flat_map(|(_, patterns)| patterns).collect::<BTreeSet<_>>()
            };
            assert_eq!(union(on_metrics_items(command, &WRITES)), wanted(access.writes), "{command}: writes");
            let reads = union(on_metrics_items(command, &READS));
            assert!(reads.is_superset(&wanted(access.reads)), "{command}: reads {reads:?}");
            let reachable: BTreeSet<String> = wanted(access.reads).union(&wanted(access.writes)).cloned().collect();
            assert!(reads.is_subset(&reachable), "{command}: reads {reads:?} beyond {reachable:?}");
            for statement in statements(command) {
                let metrics = strings(&statement["Resource"]).iter().any(|r| r == METRICS_ARN);
                assert!(
                    !(metrics && strings(&statement["Action"]).iter().any(|a| a == "dynamodb:Scan")),
                    "{command}: a Scan of the metrics table reads every partition"
                );
            }
        }
        for command in ["provision", "serve-provision"] {
            assert!(keys::metrics_access(command).is_none());
            let items: Vec<&str> = READS.iter().chain(&WRITES).copied().collect();
            assert!(on_metrics_items(command, &items).is_empty(), "{command} reads or writes no item");
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
        for command in ["serve", "admin"] {
            for pk in &credentials[..2] {
                assert!(allows(command, &WRITES, pk), "{command} writes {pk}");
            }
        }
        assert!(allows("serve", &WRITES, &credentials[2]), "serve keeps the sessions");
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

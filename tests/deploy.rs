//! The deployment as code: `northwind-ops template` passes cfn-lint, and the
//! tables it declares are, field by field, the tables `provision` creates
//! (read back with DescribeTable and DescribeTimeToLive), on both engines
//! and in both billing modes.

mod common;

use aws_sdk_dynamodb::types::TableDescription;
use northwind_ops::server::deploy::template;
use northwind_ops::server::store::{self, TableCapacity, TableDef};
use serde_json::{Value, json};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

fn template_of(flags: &[&str]) -> Value {
    let out = Command::new(BIN).arg("template").args(flags).output().expect("run northwind-ops template");
    assert!(out.status.success(), "template failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the template is JSON")
}

#[test]
fn the_template_passes_cfn_lint_in_both_billing_modes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        ("on-demand", vec![]),
        ("provisioned", vec!["--billing", "provisioned", "--read-capacity", "20", "--write-capacity", "40"]),
    ] {
        let template = template_of(&flags);
        let resources = template["Resources"].as_object().unwrap();
        // Two tables, each table and GSI alarmed, the consumer and its mapping.
        assert_eq!(resources.values().filter(|r| r["Type"] == "AWS::DynamoDB::Table").count(), 2);
        assert!(resources.values().filter(|r| r["Type"] == "AWS::CloudWatch::Alarm").count() >= 4 * 3 + 3);
        let mapping = &resources["ConsumerEvents"]["Properties"];
        assert_eq!(mapping["FunctionResponseTypes"], json!(["ReportBatchItemFailures"]));
        assert_eq!(mapping["BisectBatchOnFunctionError"], json!(true));
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(&template).unwrap()).unwrap();
        let lint = Command::new("cfn-lint")
            .arg(&path)
            .output()
            .expect("cfn-lint is installed by scripts/setup.sh (pip install cfn-lint)");
        assert!(
            lint.status.success(),
            "cfn-lint found problems in the {name} template:\n{}{}",
            String::from_utf8_lossy(&lint.stdout),
            String::from_utf8_lossy(&lint.stderr)
        );
    }
}

#[test]
fn a_bad_table_name_is_refused_by_template_as_by_provision() {
    let out = Command::new(BIN).args(["template", "--orders-table", "no spaces"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--orders-table"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_template_declares_the_tables_provision_creates() {
    for engine in common::engines() {
        for capacity in [TableCapacity::OnDemand, TableCapacity::Provisioned { read: 7, write: 3 }] {
            let dir = tempfile::tempdir().unwrap();
            let config = common::store_config(&engine, dir.path(), &[]);
            let (store, embedded) = store::connect(&config).await.unwrap();
            store.provision(Some(capacity)).await.unwrap();
            for def in
                [TableDef::orders(&config.orders_table, capacity), TableDef::metrics(&config.metrics_table, capacity)]
            {
                let declared = normalised(template::table(&def)["Properties"].clone());
                let created = described(&store, &def.name).await;
                assert_eq!(
                    created, declared,
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

//! What the proxy knows of a table, learned from the upstream's
//! DescribeTable: its key, its global secondary indexes (key and projection),
//! its ARN and billing mode; and what a write costs on it and its indexes.

use super::buckets::{BucketKey, Draw, Kind, Resource};
use crate::server::rules::layout::{self, Index};
pub use crate::server::rules::layout::{KeyPair, Projection};
use crate::server::rules::units::{self, SizeError};
use aws_sdk_dynamodb::types::{BillingMode, KeySchemaElement, KeyType, ProjectionType, TableDescription};
use serde_json::{Map, Value};

/// An item in DynamoDB JSON.
pub type Item = Map<String, Value>;

/// Used for ARNs when the upstream describes none (local engines may not).
const LOCAL_ARN_PREFIX: &str = "arn:aws:dynamodb:us-east-1:000000000000:table/";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billing {
    OnDemand,
    Provisioned,
}

/// An index as the proxy knows it: the rules' layout, and its ARN (the
/// resource a throttle names).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSchema {
    pub arn: String,
    pub layout: Index,
}

impl std::ops::Deref for IndexSchema {
    type Target = Index;

    fn deref(&self) -> &Index {
        &self.layout
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    pub name: String,
    pub arn: String,
    pub billing: Billing,
    pub key: KeyPair,
    pub indexes: Vec<IndexSchema>,
}

#[derive(Debug, thiserror::Error)]
#[error("table {table}: {what}")]
pub struct SchemaError {
    table: String,
    what: String,
}

impl TableSchema {
    pub fn from_description(table: &TableDescription) -> Result<Self, SchemaError> {
        let name = table.table_name().unwrap_or_default().to_string();
        let error = |what: &str| SchemaError { table: name.clone(), what: what.to_string() };
        let key = key_pair(table.key_schema()).ok_or_else(|| error("no HASH key in the key schema"))?;
        let arn = table.table_arn().map(str::to_string).unwrap_or_else(|| format!("{LOCAL_ARN_PREFIX}{name}"));
        let mut indexes = Vec::new();
        for index in table.global_secondary_indexes() {
            let index_name = index.index_name().unwrap_or_default().to_string();
            let key =
                key_pair(index.key_schema()).ok_or_else(|| error(&format!("index {index_name} has no HASH key")))?;
            let projection = match index.projection().and_then(|p| p.projection_type()) {
                Some(ProjectionType::KeysOnly) => Projection::KeysOnly,
                Some(ProjectionType::Include) => {
                    Projection::Include(index.projection().map(|p| p.non_key_attributes().to_vec()).unwrap_or_default())
                }
                _ => Projection::All,
            };
            indexes.push(IndexSchema {
                arn: index.index_arn().map(str::to_string).unwrap_or_else(|| format!("{arn}/index/{index_name}")),
                layout: Index { name: index_name, key, projection },
            });
        }
        Ok(Self { billing: billing(table), name, arn, key, indexes })
    }

    pub fn index(&self, name: &str) -> Option<&IndexSchema> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The primary key attributes of an item, as GetItem takes them.
    pub fn key_of(&self, item: &Item) -> Option<Item> {
        let mut key = Item::new();
        for name in std::iter::once(&self.key.hash).chain(&self.key.range) {
            key.insert(name.clone(), item.get(name)?.clone());
        }
        Some(key)
    }

    /// The bucket of an item's partition on the base table.
    pub fn bucket(&self, item: &Item, kind: Kind) -> Option<BucketKey> {
        Some(BucketKey {
            resource: Resource::table(&self.name),
            partition: partition_of(item.get(&self.key.hash)?),
            kind,
        })
    }

    /// Everything a write of `old` into `new` draws (None: no item before,
    /// or none after, a delete). The base table takes the larger of the two
    /// sizes (a delete, the old one; at least one unit); each index takes
    /// what `IndexSchema::writes` says. Transactions cost double.
    pub fn write_draws(
        &self,
        old: Option<&Item>,
        new: Option<&Item>,
        transactional: bool,
    ) -> Result<Vec<Draw>, SizeError> {
        let factor = if transactional { 2.0 } else { 1.0 };
        let sizes = [old, new].into_iter().flatten().map(units::item_size).collect::<Result<Vec<_>, _>>()?;
        let base_units = units::write_units(sizes.into_iter().max().unwrap_or(0));
        let mut draws = Vec::new();
        if let Some(key) = new.or(old).and_then(|item| self.bucket(item, Kind::Write)) {
            draws.push(Draw { key, units: base_units * factor });
        }
        for index in &self.indexes {
            for write in index.writes(&self.key, old, new)? {
                draws.push(Draw {
                    key: BucketKey {
                        resource: Resource::index(&self.name, &index.name),
                        partition: write.partition,
                        kind: Kind::Write,
                    },
                    units: units::write_units(write.size) * factor,
                });
            }
        }
        Ok(draws)
    }

    /// What a write whose result the proxy cannot work out draws: the base
    /// table by the old item, and each index the item is in one write of
    /// its old entry, as if the index key had not changed.
    pub fn fallback_draws(&self, old: Option<&Item>, key: &Item, transactional: bool) -> Result<Vec<Draw>, SizeError> {
        let factor = if transactional { 2.0 } else { 1.0 };
        let item = old.unwrap_or(key);
        let mut draws = Vec::new();
        if let Some(bucket) = self.bucket(item, Kind::Write) {
            draws.push(Draw { key: bucket, units: units::write_units(units::item_size(item)?) * factor });
        }
        for index in self.indexes.iter().filter(|i| old.is_some_and(|o| i.contains(o))) {
            let entry = index.entry(&self.key, item);
            if let Some(partition) = item.get(&index.key.hash).map(partition_of) {
                draws.push(Draw {
                    key: BucketKey { resource: Resource::index(&self.name, &index.name), partition, kind: Kind::Write },
                    units: units::write_units(units::item_size(&entry)?) * factor,
                });
            }
        }
        Ok(draws)
    }
}

/// One write to an index: its partition and the entry's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexWrite {
    pub partition: String,
    pub size: u64,
}

impl IndexSchema {
    /// The index entry of an item: the table's key, the index's key and the
    /// projected attributes (what `rules::layout` sizes).
    pub fn entry(&self, table_key: &KeyPair, item: &Item) -> Item {
        item.iter()
            .filter(|(name, _)| self.holds(table_key, name))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }

    /// The index writes of a table write (`rules::layout`'s rules), each
    /// charged to the index partition of the entry it writes.
    pub fn writes(
        &self,
        table_key: &KeyPair,
        old: Option<&Item>,
        new: Option<&Item>,
    ) -> Result<Vec<IndexWrite>, SizeError> {
        let writes = self.layout.writes(table_key, old, new)?;
        Ok(writes
            .into_iter()
            .filter_map(|write| {
                let image = match write.side {
                    layout::Side::Old => old,
                    layout::Side::New => new,
                }?;
                Some(IndexWrite { partition: partition_of(image.get(&self.key.hash)?), size: write.size })
            })
            .collect())
    }
}

// An item in DynamoDB JSON, as the index rules read it.
layout::image_of_map!(Item, units::attribute_size);

/// A partition key value as a bucket name: its JSON, unique per value.
pub fn partition_of(value: &Value) -> String {
    value.to_string()
}

fn key_pair(schema: &[KeySchemaElement]) -> Option<KeyPair> {
    let find = |kind: KeyType| schema.iter().find(|k| *k.key_type() == kind).map(|k| k.attribute_name().to_string());
    Some(KeyPair { hash: find(KeyType::Hash)?, range: find(KeyType::Range) })
}

/// On-demand unless the table says provisioned, or (engines that leave out
/// the billing summary) has provisioned capacity.
fn billing(table: &TableDescription) -> Billing {
    match table.billing_mode_summary().and_then(|s| s.billing_mode()) {
        Some(BillingMode::PayPerRequest) => Billing::OnDemand,
        Some(BillingMode::Provisioned) => Billing::Provisioned,
        _ => {
            let throughput = table.provisioned_throughput();
            let provisioned = throughput
                .is_some_and(|t| t.read_capacity_units().unwrap_or(0) > 0 || t.write_capacity_units().unwrap_or(0) > 0);
            if provisioned { Billing::Provisioned } else { Billing::OnDemand }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::{
        BillingModeSummary, GlobalSecondaryIndexDescription, Projection as SdkProjection,
        ProvisionedThroughputDescription,
    };
    use serde_json::json;

    fn element(name: &str, kind: KeyType) -> KeySchemaElement {
        KeySchemaElement::builder().attribute_name(name).key_type(kind).build().unwrap()
    }

    /// The orders table as `provision` creates it.
    pub(crate) fn orders() -> TableSchema {
        TableSchema {
            name: "orders".into(),
            arn: "arn:aws:dynamodb:us-east-1:000000000000:table/orders".into(),
            billing: Billing::OnDemand,
            key: KeyPair { hash: "PK".into(), range: None },
            indexes: vec![
                IndexSchema {
                    arn: "arn:aws:dynamodb:us-east-1:000000000000:table/orders/index/GSI1".into(),
                    layout: Index {
                        name: "GSI1".into(),
                        key: KeyPair { hash: "GSI1PK".into(), range: Some("GSI1SK".into()) },
                        projection: Projection::All,
                    },
                },
                IndexSchema {
                    arn: "arn:aws:dynamodb:us-east-1:000000000000:table/orders/index/GSI2".into(),
                    layout: Index {
                        name: "GSI2".into(),
                        key: KeyPair { hash: "GSI2PK".into(), range: Some("GSI2SK".into()) },
                        projection: Projection::Include(vec!["total".into()]),
                    },
                },
            ],
        }
    }

    pub(crate) fn item(value: Value) -> Item {
        value.as_object().unwrap().clone()
    }

    fn pending(id: &str, shard: u32) -> Item {
        item(json!({
            "PK": {"S": format!("ORDER#{id}")},
            "GSI1PK": {"S": "CUSTOMER#c1"}, "GSI1SK": {"S": format!("t#{id}")},
            "GSI2PK": {"S": format!("STATUS#PENDING#2025-01-01#{shard}")}, "GSI2SK": {"S": format!("t#{id}")},
            "status": {"S": "PENDING"}, "total": {"N": "1999"}, "note": {"S": "x"},
        }))
    }

    fn units_on(draws: &[Draw], resource: &str) -> Vec<f64> {
        draws.iter().filter(|d| d.key.resource.to_string() == resource).map(|d| d.units).collect()
    }

    #[test]
    fn reads_keys_projections_arns_and_billing_from_describe_table() {
        let description = TableDescription::builder()
            .table_name("orders")
            .key_schema(element("PK", KeyType::Hash))
            .billing_mode_summary(BillingModeSummary::builder().billing_mode(BillingMode::PayPerRequest).build())
            .global_secondary_indexes(
                GlobalSecondaryIndexDescription::builder()
                    .index_name("GSI2")
                    .key_schema(element("GSI2PK", KeyType::Hash))
                    .key_schema(element("GSI2SK", KeyType::Range))
                    .projection(
                        SdkProjection::builder()
                            .projection_type(ProjectionType::Include)
                            .non_key_attributes("total")
                            .build(),
                    )
                    .build(),
            )
            .build();
        let schema = TableSchema::from_description(&description).unwrap();
        assert_eq!(schema.key, KeyPair { hash: "PK".into(), range: None });
        assert_eq!(schema.billing, Billing::OnDemand);
        assert_eq!(schema.arn, "arn:aws:dynamodb:us-east-1:000000000000:table/orders");
        let gsi2 = schema.index("GSI2").unwrap();
        assert_eq!(gsi2.arn, format!("{}/index/GSI2", schema.arn));
        assert_eq!(gsi2.projection, Projection::Include(vec!["total".into()]));
        assert_eq!(gsi2.key.range.as_deref(), Some("GSI2SK"));

        let provisioned = TableDescription::builder()
            .table_name("t")
            .table_arn("arn:aws:dynamodb:eu-west-1:1:table/t")
            .key_schema(element("PK", KeyType::Hash))
            .provisioned_throughput(
                ProvisionedThroughputDescription::builder().read_capacity_units(5).write_capacity_units(5).build(),
            )
            .build();
        let schema = TableSchema::from_description(&provisioned).unwrap();
        assert_eq!(schema.billing, Billing::Provisioned);
        assert_eq!(schema.arn, "arn:aws:dynamodb:eu-west-1:1:table/t");
    }

    #[test]
    fn a_sparse_index_holds_only_items_with_both_key_attributes() {
        let gsi2 = &orders().indexes[1];
        let mut order = pending("1", 0);
        assert!(gsi2.contains(&order));
        order.remove("GSI2SK");
        assert!(!gsi2.contains(&order));
    }

    #[test]
    fn index_entries_hold_the_keys_and_the_projection() {
        let table = orders();
        let order = pending("1", 0);
        let all = table.indexes[0].entry(&table.key, &order);
        assert_eq!(all, order);
        let include = table.indexes[1].entry(&table.key, &order);
        let mut names: Vec<&str> = include.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["GSI2PK", "GSI2SK", "PK", "total"]);
        let keys_only = IndexSchema {
            layout: Index { projection: Projection::KeysOnly, ..table.indexes[1].layout.clone() },
            ..table.indexes[1].clone()
        };
        assert_eq!(keys_only.entry(&table.key, &order).len(), 3);
    }

    #[test]
    fn a_new_pending_order_writes_the_table_and_both_indexes_once() {
        let table = orders();
        let order = pending("1", 3);
        let draws = table.write_draws(None, Some(&order), false).unwrap();
        assert_eq!(units_on(&draws, "orders"), [1.0]);
        assert_eq!(units_on(&draws, "orders/index/GSI1"), [1.0]);
        assert_eq!(units_on(&draws, "orders/index/GSI2"), [1.0]);
        let gsi2 = draws.iter().find(|d| d.key.resource.index.as_deref() == Some("GSI2")).unwrap();
        assert_eq!(gsi2.key.partition, r#"{"S":"STATUS#PENDING#2025-01-01#3"}"#);
        assert_eq!(gsi2.key.kind, Kind::Write);
    }

    #[test]
    fn leaving_the_sparse_index_is_one_write_of_the_old_entry() {
        let table = orders();
        let old = pending("1", 3);
        let mut new = old.clone();
        new.insert("status".into(), json!({"S": "CONFIRMED"}));
        new.remove("GSI2PK");
        new.remove("GSI2SK");
        let gsi2 = &table.indexes[1];
        let writes = gsi2.writes(&table.key, Some(&old), Some(&new)).unwrap();
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].partition, r#"{"S":"STATUS#PENDING#2025-01-01#3"}"#);
        assert_eq!(writes[0].size, units::item_size(&gsi2.entry(&table.key, &old)).unwrap());
        // GSI1 projects ALL and status changed: one write of the new entry.
        assert_eq!(table.indexes[0].writes(&table.key, Some(&old), Some(&new)).unwrap().len(), 1);
    }

    #[test]
    fn changing_the_index_key_is_two_writes_one_per_partition() {
        let table = orders();
        let old = pending("1", 3);
        let new = pending("1", 4);
        let writes = table.indexes[1].writes(&table.key, Some(&old), Some(&new)).unwrap();
        let partitions: Vec<&str> = writes.iter().map(|w| w.partition.as_str()).collect();
        assert_eq!(partitions, [r#"{"S":"STATUS#PENDING#2025-01-01#3"}"#, r#"{"S":"STATUS#PENDING#2025-01-01#4"}"#]);
    }

    #[test]
    fn include_projections_ignore_attributes_they_do_not_project() {
        let table = orders();
        let gsi2 = &table.indexes[1];
        let old = pending("1", 3);
        let mut new = old.clone();
        new.insert("note".into(), json!({"S": "changed"}));
        assert!(gsi2.writes(&table.key, Some(&old), Some(&new)).unwrap().is_empty());
        new.insert("total".into(), json!({"N": "2500"}));
        assert_eq!(gsi2.writes(&table.key, Some(&old), Some(&new)).unwrap().len(), 1);
        // Out of the index before and after: nothing, whatever changes.
        let (mut a, mut b) = (old.clone(), new.clone());
        a.remove("GSI2PK");
        b.remove("GSI2PK");
        assert!(gsi2.writes(&table.key, Some(&a), Some(&b)).unwrap().is_empty());
    }

    #[test]
    fn the_base_table_takes_the_larger_item_and_transactions_double() {
        let table = orders();
        let small = pending("1", 3);
        let mut big = small.clone();
        big.insert("note".into(), json!({"S": "x".repeat(2800)}));
        let draws = table.write_draws(Some(&big), Some(&small), false).unwrap();
        assert_eq!(units_on(&draws, "orders"), [3.0]);
        let draws = table.write_draws(Some(&big), None, true).unwrap();
        assert_eq!(units_on(&draws, "orders"), [6.0]);
        // Leaves both indexes: GSI1 carries the big note (ALL), GSI2 not.
        assert_eq!(units_on(&draws, "orders/index/GSI1"), [6.0]);
        assert_eq!(units_on(&draws, "orders/index/GSI2"), [2.0]);
    }

    #[test]
    fn a_delete_of_nothing_costs_one_unit() {
        let table = orders();
        let key = item(json!({"PK": {"S": "ORDER#gone"}}));
        let draws = table.fallback_draws(None, &key, false).unwrap();
        assert_eq!(draws.len(), 1);
        assert_eq!(draws[0].units, 1.0);
    }
}

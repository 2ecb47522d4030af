//! Creates the two tables, or checks that existing ones match the key design
//! and names every difference without changing anything.

use super::Store;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::keys::{self, GSI1, GSI1PK, GSI1SK, GSI2, GSI2PK, GSI2SK, PK, SK};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::create_table::{CreateTableError, CreateTableOutput};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode as SdkBilling, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ProvisionedThroughput, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableDescription, TableStatus,
};
use std::fmt;
use std::time::{Duration, Instant};

/// How long to wait for new tables to become ACTIVE (AWS takes a while).
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Verified,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisionReport {
    pub orders: Outcome,
    pub metrics: Outcome,
}

impl fmt::Display for ProvisionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = |o: Outcome| match o {
            Outcome::Created => "created",
            Outcome::Verified => "exists and matches the key design",
        };
        write!(f, "orders table: {}; metrics table: {}", word(self.orders), word(self.metrics))
    }
}

/// Warm throughput of a table (`orders`) or an index (`orders/GSI2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmThroughput {
    pub resource: String,
    pub read_units_per_second: Option<i64>,
    pub write_units_per_second: Option<i64>,
}

/// One index as the key design wants it.
pub struct IndexSpec {
    pub name: &'static str,
    pub hash: &'static str,
    pub range: &'static str,
    pub projection: ProjectionType,
    pub include: &'static [&'static str],
}

const ORDER_INDEXES: [IndexSpec; 2] = [
    // Customer history returns whole orders.
    IndexSpec { name: GSI1, hash: GSI1PK, range: GSI1SK, projection: ProjectionType::All, include: &[] },
    IndexSpec {
        name: GSI2,
        hash: GSI2PK,
        range: GSI2SK,
        projection: ProjectionType::Include,
        include: &keys::GSI2_PROJECTED,
    },
];

/// The orders table's indexes as `provision` creates them and the
/// template declares them, as the write-pricing rules read an index
/// (`rules::layout`): the stream's pricing and the capacity checks price
/// with this, so a projection changed here changes every figure.
pub fn order_indexes() -> Vec<crate::server::rules::layout::Index> {
    use crate::server::rules::layout::{Index, KeyPair, Projection};
    ORDER_INDEXES
        .iter()
        .map(|spec| Index {
            name: spec.name.into(),
            key: KeyPair { hash: spec.hash.into(), range: Some(spec.range.into()) },
            projection: match spec.projection {
                ProjectionType::All => Projection::All,
                ProjectionType::Include => Projection::Include(spec.include.iter().map(|s| s.to_string()).collect()),
                _ => Projection::KeysOnly,
            },
        })
        .collect()
}

/// A table as the key design wants it. `provision` creates and checks
/// tables from this, and `template` declares them from it, so the two
/// cannot drift apart.
pub struct TableDef {
    pub name: String,
    /// The table's key: the hash key, then the range key if any.
    pub keys: &'static [(&'static str, KeyType)],
    /// Every key attribute of the table and its indexes (all strings).
    pub attributes: &'static [&'static str],
    pub indexes: &'static [IndexSpec],
    pub stream: Option<StreamViewType>,
    /// The attribute DynamoDB expires items by.
    pub ttl: Option<&'static str>,
    pub capacity: TableCapacity,
}

impl TableDef {
    /// The orders table: one item per order, its stream feeding the
    /// counters consumer with both images of each change.
    pub fn orders(name: impl Into<String>, capacity: TableCapacity) -> Self {
        TableDef {
            name: name.into(),
            keys: &[(PK, KeyType::Hash)],
            attributes: &[PK, GSI1PK, GSI1SK, GSI2PK, GSI2SK],
            indexes: &ORDER_INDEXES,
            stream: Some(StreamViewType::NewAndOldImages),
            ttl: None,
            capacity,
        }
    }

    /// The metrics table: counters, checkpoints, leases, accounts and
    /// sessions. No stream: the consumer's checkpoint writes must not feed
    /// one. Sessions expire by TTL.
    pub fn metrics(name: impl Into<String>, capacity: TableCapacity) -> Self {
        TableDef {
            name: name.into(),
            keys: &[(PK, KeyType::Hash), (SK, KeyType::Range)],
            attributes: &[PK, SK],
            indexes: &[],
            stream: None,
            ttl: Some(keys::attr::EXPIRES_AT),
            capacity,
        }
    }
}

/// The capacity of tables this program creates, for each table and index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TableCapacity {
    /// Pay per request: no capacity to plan.
    #[default]
    OnDemand,
    Provisioned {
        read: i64,
        write: i64,
    },
}

impl Store {
    /// The two tables as this store names them, with `capacity`.
    pub fn table_defs(&self, capacity: TableCapacity) -> [TableDef; 2] {
        [TableDef::orders(&self.orders_table, capacity), TableDef::metrics(&self.metrics_table, capacity)]
    }

    /// Creates the tables that are missing (with `capacity`), or, given
    /// none, only checks them: a missing table is then `NoTable`. Existing
    /// tables are checked against the key design and never changed.
    pub async fn provision(&self, capacity: Option<TableCapacity>) -> Result<ProvisionReport, StoreError> {
        let defs = self.table_defs(capacity.unwrap_or_default());
        let mut outcomes = [Outcome::Verified; 2];
        for (def, outcome) in defs.iter().zip(outcomes.iter_mut()) {
            *outcome = self.ensure(def, capacity.is_some()).await?;
        }
        for (def, outcome) in defs.iter().zip(outcomes) {
            self.wait_active(&def.name).await?;
            if let (Some(attribute), Outcome::Created) = (def.ttl, outcome) {
                self.expire_by(&def.name, attribute).await?;
            }
        }
        let [orders, metrics] = outcomes;
        Ok(ProvisionReport { orders, metrics })
    }

    /// Turns on time to live: DynamoDB deletes expired items by itself
    /// (reads check the expiry too, since it does so lazily, within days).
    async fn expire_by(&self, table: &str, attribute: &str) -> Result<(), StoreError> {
        let spec = aws_sdk_dynamodb::types::TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(attribute)
            .build()?;
        self.client.update_time_to_live().table_name(table).time_to_live_specification(spec).send().await?;
        Ok(())
    }

    /// The warm throughput DescribeTable reports for each table and index
    /// (what it can take at once without scaling): AWS reports it, the local
    /// engines may not, and then the figures are `None`.
    pub async fn warm_throughput(&self) -> Result<Vec<WarmThroughput>, StoreError> {
        let mut found = Vec::new();
        for table in [&self.orders_table, &self.metrics_table] {
            let Some(description) = self.describe(table).await? else {
                return Err(StoreError::unavailable(Unavailable::NoTable, format!("table {table} does not exist")));
            };
            let warm = description.warm_throughput();
            found.push(WarmThroughput {
                resource: table.clone(),
                read_units_per_second: warm.and_then(|w| w.read_units_per_second()),
                write_units_per_second: warm.and_then(|w| w.write_units_per_second()),
            });
            for index in description.global_secondary_indexes() {
                let warm = index.warm_throughput();
                found.push(WarmThroughput {
                    resource: format!("{table}/{}", index.index_name().unwrap_or("?")),
                    read_units_per_second: warm.and_then(|w| w.read_units_per_second()),
                    write_units_per_second: warm.and_then(|w| w.write_units_per_second()),
                });
            }
        }
        Ok(found)
    }

    /// Checks that the tables exist and match the key design.
    pub async fn verify(&self) -> Result<ProvisionReport, StoreError> {
        self.provision(None).await
    }

    async fn ensure(&self, def: &TableDef, create: bool) -> Result<Outcome, StoreError> {
        if let Some(description) = self.describe(&def.name).await? {
            check(&def.name, differences(def, &description))?;
            return Ok(Outcome::Verified);
        }
        if !create {
            return Err(StoreError::unavailable(
                Unavailable::NoTable,
                format!("table {} does not exist (run `northwind-ops provision`, or serve with --provision)", def.name),
            ));
        }
        if self.create(def).await? {
            tracing::info!(table = %def.name, "created the table");
            return Ok(Outcome::Created);
        }
        // Another provisioner created it between our look and our create, or
        // the SDK retried a create that had gone through: check what is there.
        let description = self.describe(&def.name).await?.ok_or_else(|| {
            StoreError::Rejected(format!("table {} was reported to exist and then not found", def.name))
        })?;
        check(&def.name, differences(def, &description))?;
        Ok(Outcome::Verified)
    }

    pub(super) async fn describe(&self, table: &str) -> Result<Option<TableDescription>, StoreError> {
        match self.client.describe_table().table_name(table).send().await {
            Ok(out) => Ok(out.table),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Creates a table: `false` when it exists already.
    async fn create(&self, def: &TableDef) -> Result<bool, StoreError> {
        let mut request = self.client.create_table().table_name(&def.name);
        for (name, kind) in def.keys {
            request = request.key_schema(key(name, kind.clone()));
        }
        for name in def.attributes {
            request = request.attribute_definitions(string_attribute(name)?);
        }
        if let Some(view) = &def.stream {
            request = request.stream_specification(
                StreamSpecification::builder().stream_enabled(true).stream_view_type(view.clone()).build()?,
            );
        }
        for spec in def.indexes {
            let mut projection = Projection::builder().projection_type(spec.projection.clone());
            for attribute in spec.include {
                projection = projection.non_key_attributes(*attribute);
            }
            let mut index = GlobalSecondaryIndex::builder()
                .index_name(spec.name)
                .key_schema(key(spec.hash, KeyType::Hash))
                .key_schema(key(spec.range, KeyType::Range))
                .projection(projection.build());
            if let Some(throughput) = throughput(def.capacity)? {
                index = index.provisioned_throughput(throughput);
            }
            request = request.global_secondary_indexes(index.build()?);
        }
        request = match throughput(def.capacity)? {
            Some(throughput) => request.billing_mode(SdkBilling::Provisioned).provisioned_throughput(throughput),
            None => request.billing_mode(SdkBilling::PayPerRequest),
        };
        created(request.send().await)
    }

    async fn wait_active(&self, table: &str) -> Result<(), StoreError> {
        let started = Instant::now();
        loop {
            let description = self.describe(table).await?;
            let active = description.as_ref().is_some_and(|t| {
                t.table_status() == Some(&TableStatus::Active)
                    && t.global_secondary_indexes()
                        .iter()
                        .all(|i| i.index_status().is_none_or(|s| *s == IndexStatus::Active))
            });
            if active {
                return Ok(());
            }
            if started.elapsed() > ACTIVE_TIMEOUT {
                return Err(StoreError::unavailable(
                    Unavailable::NoTable,
                    format!("table {table} is not ACTIVE after {}s", ACTIVE_TIMEOUT.as_secs()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn check(table: &str, differences: Vec<String>) -> Result<(), StoreError> {
    if differences.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaMismatch { table: table.to_string(), differences })
    }
}

/// How an existing table differs from its definition, in words.
fn differences(def: &TableDef, table: &TableDescription) -> Vec<String> {
    let mut differences = key_differences("table key", table.key_schema(), def.keys);
    differences.extend(type_differences(table, def.attributes));
    for spec in def.indexes {
        differences.extend(index_differences(table, spec));
    }
    let stream = table.stream_specification().filter(|s| s.stream_enabled());
    match (&def.stream, stream) {
        (None, Some(_)) => differences.push(format!("a stream is enabled; table {} must have none", def.name)),
        (Some(want), None) => differences.push(format!("the stream is not enabled (want {})", want.as_str())),
        (Some(want), Some(have)) if have.stream_view_type() != Some(want) => differences.push(format!(
            "the stream shows {}, want {}",
            have.stream_view_type().map_or("nothing", |v| v.as_str()),
            want.as_str()
        )),
        _ => {}
    }
    differences
}

fn index_differences(table: &TableDescription, spec: &IndexSpec) -> Vec<String> {
    let Some(index) = table.global_secondary_indexes().iter().find(|i| i.index_name() == Some(spec.name)) else {
        return vec![format!("index {} is missing", spec.name)];
    };
    let mut differences = key_differences(
        &format!("index {} key", spec.name),
        index.key_schema(),
        &[(spec.hash, KeyType::Hash), (spec.range, KeyType::Range)],
    );
    let projection = index.projection();
    let kind = projection.and_then(|p| p.projection_type());
    if kind != Some(&spec.projection) {
        differences.push(format!(
            "index {} projects {}, want {}",
            spec.name,
            kind.map_or("nothing", |k| k.as_str()),
            spec.projection.as_str()
        ));
    } else if spec.projection == ProjectionType::Include {
        let mut have: Vec<&str> =
            projection.map(|p| p.non_key_attributes().iter().map(String::as_str).collect()).unwrap_or_default();
        let mut want: Vec<&str> = spec.include.to_vec();
        have.sort_unstable();
        want.sort_unstable();
        if have != want {
            differences.push(format!("index {} includes [{}], want [{}]", spec.name, have.join(", "), want.join(", ")));
        }
    }
    differences
}

fn key_differences(what: &str, have: &[KeySchemaElement], want: &[(&str, KeyType)]) -> Vec<String> {
    let have: Vec<(&str, &KeyType)> = have.iter().map(|k| (k.attribute_name(), k.key_type())).collect();
    let want: Vec<(&str, &KeyType)> = want.iter().map(|(name, kind)| (*name, kind)).collect();
    if have == want {
        return vec![];
    }
    let show = |keys: &[(&str, &KeyType)]| {
        keys.iter().map(|(name, kind)| format!("{name} {}", kind.as_str())).collect::<Vec<_>>().join(", ")
    };
    vec![format!("{what} is [{}], want [{}]", show(&have), show(&want))]
}

fn type_differences(table: &TableDescription, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter_map(|name| {
            let kind =
                table.attribute_definitions().iter().find(|a| a.attribute_name() == *name).map(|a| a.attribute_type());
            match kind {
                Some(ScalarAttributeType::S) | None => None,
                Some(other) => Some(format!("attribute {name} is of type {}, want S", other.as_str())),
            }
        })
        .collect()
}

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder().attribute_name(name).key_type(kind).build().expect("name and key type are both set")
}

fn string_attribute(name: &str) -> Result<AttributeDefinition, StoreError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(StoreError::from)
}

fn throughput(capacity: TableCapacity) -> Result<Option<ProvisionedThroughput>, StoreError> {
    match capacity {
        TableCapacity::OnDemand => Ok(None),
        TableCapacity::Provisioned { read, write } => ProvisionedThroughput::builder()
            .read_capacity_units(read)
            .write_capacity_units(write)
            .build()
            .map(Some)
            .map_err(StoreError::from),
    }
}

/// A CreateTable that found the table there already is not created, and
/// not an error: the caller checks the table that is there.
fn created<R>(result: Result<CreateTableOutput, SdkError<CreateTableError, R>>) -> Result<bool, StoreError>
where
    R: std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(true),
        Err(err) if err.as_service_error().is_some_and(CreateTableError::is_resource_in_use_exception) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

//! DynamoDB's own capacity figures, from CloudWatch (`--capacity-source
//! cloudwatch`, and `auto` on AWS): the `AWS/DynamoDB` metrics of the two
//! tables and of each GSI at a 60 s period, through `GetMetricData`, up to
//! 500 queries a call and every page of each, and each answer kept a minute
//! (the metrics move once a minute).
//!
//! Per table and per GSI: `ConsumedReadCapacityUnits`,
//! `ConsumedWriteCapacityUnits`, `ReadThrottleEvents`,
//! `WriteThrottleEvents` (Sum) and `ProvisionedReadCapacityUnits`,
//! `ProvisionedWriteCapacityUnits` (Maximum, where provisioned); per table
//! and operation, `ThrottledRequests` (Sum).

use super::Store;
use crate::server::store::error::StoreError;
use crate::server::store::keys;
use crate::server::store::usage::{Resource, epoch_minute};
use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// GetMetricData takes at most 500 queries.
pub const QUERIES_PER_CALL: usize = 500;
const NAMESPACE: &str = "AWS/DynamoDB";
const PERIOD_SECONDS: i32 = 60;

/// Operations whose `ThrottledRequests` are read.
const OPERATIONS: [&str; 10] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "GetItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "TransactGetItems",
];

/// One metric of one table or index (and operation, for `ThrottledRequests`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetricKey {
    pub resource: Resource,
    pub name: &'static str,
    pub operation: Option<&'static str>,
}

impl MetricKey {
    fn stat(&self) -> &'static str {
        if self.name.starts_with("Provisioned") { "Maximum" } else { "Sum" }
    }

    fn dimensions(&self) -> Vec<Dimension> {
        let dimension = |name: &str, value: &str| Dimension::builder().name(name).value(value).build();
        let mut dimensions = vec![dimension("TableName", &self.resource.table)];
        if let Some(index) = &self.resource.index {
            dimensions.push(dimension("GlobalSecondaryIndexName", index));
        }
        if let Some(operation) = self.operation {
            dimensions.push(dimension("Operation", operation));
        }
        dimensions
    }
}

/// Every metric read for these tables: the orders table with its indexes,
/// and the metrics table.
pub fn metric_keys(orders: &str, metrics: &str) -> Vec<MetricKey> {
    let resources = [
        Resource::table(orders),
        Resource::index(orders, keys::GSI1),
        Resource::index(orders, keys::GSI2),
        Resource::table(metrics),
    ];
    let mut wanted = Vec::new();
    for resource in resources {
        for name in [
            "ConsumedReadCapacityUnits",
            "ConsumedWriteCapacityUnits",
            "ReadThrottleEvents",
            "WriteThrottleEvents",
            "ProvisionedReadCapacityUnits",
            "ProvisionedWriteCapacityUnits",
        ] {
            wanted.push(MetricKey { resource: resource.clone(), name, operation: None });
        }
        if resource.index.is_none() {
            for operation in OPERATIONS {
                wanted.push(MetricKey {
                    resource: resource.clone(),
                    name: "ThrottledRequests",
                    operation: Some(operation),
                });
            }
        }
    }
    wanted
}

/// The queries of one GetMetricData call: `q<i>` names `keys[offset + i]`.
pub fn queries(keys: &[MetricKey], offset: usize) -> Vec<MetricDataQuery> {
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let metric = Metric::builder()
                .namespace(NAMESPACE)
                .metric_name(key.name)
                .set_dimensions(Some(key.dimensions()))
                .build();
            let stat = MetricStat::builder().metric(metric).period(PERIOD_SECONDS).stat(key.stat()).build();
            MetricDataQuery::builder().id(format!("q{}", offset + i)).metric_stat(stat).return_data(true).build()
        })
        .collect()
}

/// Minutes `[start, start + minutes)` of every metric read: a value per
/// minute CloudWatch had one for, `None` elsewhere.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloudWatchMinutes {
    pub start: DateTime<Utc>,
    pub minutes: usize,
    pub series: BTreeMap<MetricKey, Vec<Option<f64>>>,
    /// When the orders table was created: CloudWatch has observed it since.
    pub created: Option<DateTime<Utc>>,
}

impl CloudWatchMinutes {
    /// One datapoint of query `id` into its series.
    pub fn add(&mut self, keys: &[MetricKey], id: &str, at: DateTime<Utc>, value: f64) {
        let Some(key) = id.strip_prefix('q').and_then(|n| n.parse::<usize>().ok()).and_then(|n| keys.get(n)) else {
            return;
        };
        let minute = epoch_minute(at) - epoch_minute(self.start);
        if minute < 0 || minute as usize >= self.minutes {
            return;
        }
        let series = self.series.entry(key.clone()).or_insert_with(|| vec![None; self.minutes]);
        let slot = &mut series[minute as usize];
        *slot = Some(slot.unwrap_or(0.0) + value);
    }
}

impl Store {
    /// The metrics of minutes `[start, end)`, from CloudWatch, or from the
    /// copy of the same window read less than a minute ago (which may end a
    /// minute earlier: a window ending now moves on with the clock, and
    /// CloudWatch publishes a minute later than that anyway).
    pub async fn cloudwatch_minutes(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Arc<CloudWatchMinutes>, StoreError> {
        let Some(cloudwatch) = &self.cloudwatch else {
            return Err(StoreError::Rejected("no CloudWatch client: the capacity source is the stream".into()));
        };
        let span = (epoch_minute(start), epoch_minute(end));
        if let Some(cached) = cloudwatch.cache.get(&span.0).await
            && cached.minutes as i64 + 1 >= span.1 - span.0
        {
            return Ok(cached);
        }
        let start = crate::server::store::usage::minute_start(span.0);
        let minutes = (span.1 - span.0).max(0) as usize;
        let keys = metric_keys(&self.orders_table, &self.metrics_table);
        let created = self
            .describe(&self.orders_table)
            .await?
            .and_then(|t| t.creation_date_time().copied())
            .and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()));
        let mut read = CloudWatchMinutes { start, minutes, series: BTreeMap::new(), created };
        let to_smithy = |t: DateTime<Utc>| aws_sdk_cloudwatch::primitives::DateTime::from_secs(t.timestamp());
        for (call, chunk) in keys.chunks(QUERIES_PER_CALL).enumerate() {
            let mut next: Option<String> = None;
            loop {
                let out = cloudwatch
                    .client
                    .get_metric_data()
                    .set_metric_data_queries(Some(queries(chunk, call * QUERIES_PER_CALL)))
                    .start_time(to_smithy(start))
                    .end_time(to_smithy(crate::server::store::usage::minute_start(span.1)))
                    .set_next_token(next.take())
                    .send()
                    .await?;
                for result in out.metric_data_results() {
                    let id = result.id().unwrap_or_default();
                    for (at, value) in result.timestamps().iter().zip(result.values()) {
                        let Some(at) = DateTime::<Utc>::from_timestamp(at.secs(), 0) else { continue };
                        read.add(&keys, id, at, *value);
                    }
                }
                match out.next_token() {
                    Some(token) if !token.is_empty() => next = Some(token.to_string()),
                    _ => break,
                }
            }
        }
        let read = Arc::new(read);
        cloudwatch.cache.insert(span.0, read.clone()).await;
        Ok(read)
    }
}

impl Store {
    /// The CloudWatch alarms on the orders or the metrics table (a metric
    /// alarm with a `TableName` dimension naming one), or `None` when this
    /// store has no CloudWatch client (the capacity source is the stream).
    /// At most 10 pages of 100 alarms are read.
    pub async fn table_alarms(&self) -> Result<Option<Vec<super::Alarm>>, StoreError> {
        let Some(cloudwatch) = &self.cloudwatch else { return Ok(None) };
        let tables = [self.orders_table.as_str(), self.metrics_table.as_str()];
        let mut found = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..10 {
            let out = cloudwatch.client.describe_alarms().max_records(100).set_next_token(next.take()).send().await?;
            for alarm in out.metric_alarms() {
                let on_ours = alarm
                    .dimensions()
                    .iter()
                    .any(|d| d.name() == Some("TableName") && d.value().is_some_and(|v| tables.contains(&v)));
                if on_ours {
                    found.push(super::Alarm {
                        name: alarm.alarm_name().unwrap_or_default().to_string(),
                        state: alarm.state_value().map(|s| s.as_str().to_string()).unwrap_or_default(),
                    });
                }
            }
            match out.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_string()),
                _ => break,
            }
        }
        Ok(Some(found))
    }
}

/// The CloudWatch client and its minute-long memory.
pub struct CloudWatchClient {
    client: aws_sdk_cloudwatch::Client,
    /// Reads by the epoch minute their window starts at.
    cache: moka::future::Cache<i64, Arc<CloudWatchMinutes>>,
}

impl CloudWatchClient {
    pub fn new(client: aws_sdk_cloudwatch::Client) -> Self {
        Self {
            client,
            cache: moka::future::Cache::builder()
                .max_capacity(64)
                .time_to_live(std::time::Duration::from_secs(60))
                .build(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_has_its_metrics_and_the_tables_their_operations() {
        let keys = metric_keys("orders", "metrics");
        // 4 resources × 6 metrics, and 2 tables × 10 operations.
        assert_eq!(keys.len(), 4 * 6 + 2 * 10);
        let gsi2 = keys.iter().find(|k| k.resource.index.as_deref() == Some("GSI2")).unwrap();
        let names: Vec<String> =
            gsi2.dimensions().iter().map(|d| format!("{}={}", d.name().unwrap(), d.value().unwrap())).collect();
        assert_eq!(names, ["TableName=orders", "GlobalSecondaryIndexName=GSI2"]);
        let queries = queries(&keys[..3], 500);
        assert_eq!(queries.iter().map(|q| q.id().unwrap_or_default()).collect::<Vec<_>>(), ["q500", "q501", "q502"]);
        assert_eq!(queries[0].metric_stat().unwrap().period(), Some(60));
    }

    #[test]
    fn datapoints_land_in_their_minute_and_outside_ones_are_dropped() {
        let keys = metric_keys("orders", "metrics");
        let start: DateTime<Utc> = "2026-11-29T10:00:00Z".parse().unwrap();
        let mut read = CloudWatchMinutes { start, minutes: 60, ..Default::default() };
        read.add(&keys, "q1", "2026-11-29T10:15:00Z".parse().unwrap(), 120.0);
        read.add(&keys, "q1", "2026-11-29T11:00:00Z".parse().unwrap(), 9.0);
        read.add(&keys, "nonsense", start, 1.0);
        let series = &read.series[&keys[1]];
        assert_eq!((series[15], series[14]), (Some(120.0), None));
        assert_eq!(read.series.len(), 1);
    }
}

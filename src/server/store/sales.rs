//! Sale plans (`SALES` / `PLAN#<name>` in the metrics table) and their
//! rehearsals (`SALES` / `REHEARSAL#<name>`), a day's shard count written
//! ahead of a sale, and what DescribeTable says each table and index can
//! take at once.

use super::items::keyed;
use super::{Item, Store};
use crate::model::{ConsumerMeasurement, Rehearsal, Rehearsals, SalePlan};
use crate::server::store::error::{StoreError, Unavailable, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::NaiveDate;

/// The most plans one listing reads: a handful is the use; the bound keeps
/// a partition filled by a script from costing a page more than a query.
const MAX_PLANS: usize = 200;

/// What writing a day's shard count ahead found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Written now: the day's writers will adopt it.
    Written,
    /// The same count was recorded already.
    Already,
    /// Another count is recorded: it never changes (every writer and reader
    /// keeps a day's count once read).
    Other(u32),
}

/// What one table or index is set to take, as DescribeTable reports it
/// (`None`: not reported, or not set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThroughputSettings {
    /// The table's name, or `<table>/<index>`.
    pub resource: String,
    /// `PAY_PER_REQUEST` or `PROVISIONED` (the table's, for an index too).
    pub billing_mode: Option<String>,
    pub warm_write_units: Option<i64>,
    /// On demand: the most write request units a second (`None`: no cap).
    pub on_demand_max_write_units: Option<i64>,
    /// Provisioned: the write capacity units now.
    pub provisioned_write_units: Option<i64>,
}

/// A CloudWatch alarm on one of the tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alarm {
    pub name: String,
    /// `OK`, `ALARM` or `INSUFFICIENT_DATA`.
    pub state: String,
}

impl Store {
    /// Saves a plan: a new one (`create`; an existing name is a conflict)
    /// or over an existing one (a missing name is not found).
    pub async fn save_sale_plan(&self, plan: &SalePlan, create: bool) -> Result<(), StoreError> {
        let item = keyed(keys::sale_plan_key(&plan.name), serde_dynamo::to_item(plan)?);
        let condition = if create { "attribute_not_exists(PK)" } else { "attribute_exists(PK)" };
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .set_item(Some(item))
            .condition_expression(condition)
            .send()
            .await;
        match unless_condition_failed(put)? {
            Some(_) => Ok(()),
            None if create => Err(StoreError::Conflict(format!("a sale plan named {:?} exists already", plan.name))),
            None => Err(StoreError::NotFound(format!("no sale plan named {:?}", plan.name))),
        }
    }

    /// Records what a rehearsal measured of the consumer on the plan's
    /// item, beside the figures its form saved (`false`: no such plan,
    /// nothing written).
    pub async fn record_consumer_measurement(
        &self,
        name: &str,
        measured: &ConsumerMeasurement,
    ) -> Result<bool, StoreError> {
        let value = serde_dynamo::to_attribute_value(measured)?;
        self.set_on_existing_metric(keys::sale_plan_key(name), attr::CONSUMER_MEASURED, value).await
    }

    pub async fn get_sale_plan(&self, name: &str) -> Result<Option<SalePlan>, StoreError> {
        let item = self.metric_item(keys::sale_plan_key(name), true).await?;
        // A damaged plan is a conflict to resolve (delete it, make it
        // again), not a server error.
        item.map(|item| {
            read_plan(item).ok_or_else(|| {
                StoreError::Conflict(format!(
                    "sale plan {name:?} is stored in a form this console cannot read (or with figures out of \
                     bounds): delete it and create it again"
                ))
            })
        })
        .transpose()
    }

    /// Every plan, by name. An item that does not read as a plan (another
    /// writer's, a damaged one) is left out and logged, not an error.
    pub async fn list_sale_plans(&self) -> Result<Vec<SalePlan>, StoreError> {
        let mut plans = Vec::new();
        self.for_each_in_metrics_partition(keys::sales_pk().to_string(), true, |item| {
            let sk = item.get(keys::SK).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            if !keys::is_sale_plan_sk(&sk) {
                // A plan's rehearsals, filed beside it.
                return std::ops::ControlFlow::Continue(());
            }
            match read_plan(item) {
                Some(plan) => plans.push(plan),
                None => tracing::warn!(sk, "a sale plan item that does not read as a plan is left out"),
            }
            if plans.len() >= MAX_PLANS {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
        .await?;
        Ok(plans)
    }

    /// Deletes a plan, and its rehearsals: `false` when there was no plan.
    pub async fn delete_sale_plan(&self, name: &str) -> Result<bool, StoreError> {
        // First, so that a plan made again under the name starts afresh.
        self.delete_metric(keys::sale_rehearsal_key(name)).await?;
        let (pk, sk) = keys::sale_plan_key(name);
        let delete = self
            .client
            .delete_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .condition_expression("attribute_exists(PK)")
            .send()
            .await;
        Ok(unless_condition_failed(delete)?.is_some())
    }

    /// The recorded shard count of `day`, read past the cache (a readiness
    /// check must see a count written a moment ago by another instance).
    pub async fn recorded_shards_fresh(&self, day: NaiveDate) -> Result<Option<u32>, StoreError> {
        Ok(self.recorded_shards_now(&[day]).await?.get(&day).copied().flatten())
    }

    /// Records `shards` as `day`'s count ahead of its first order, as the
    /// first writer of the day would: only where no count is recorded.
    pub async fn record_shards_ahead(&self, day: NaiveDate, shards: u32) -> Result<Recorded, StoreError> {
        let count = Item::from([(attr::SHARDS.to_string(), AttributeValue::N(shards.to_string()))]);
        if self.put_metric_if_absent(keys::shard_count_key(day), count).await? {
            self.shard_counts.insert(day, Some(shards));
            return Ok(Recorded::Written);
        }
        match self.recorded_shards_fresh(day).await? {
            Some(n) if n == shards => Ok(Recorded::Already),
            Some(n) => Ok(Recorded::Other(n)),
            None => Err(StoreError::Data(format!("the shard count of {day} vanished after it was recorded"))),
        }
    }

    /// What the orders table, its indexes and the metrics table are set to
    /// take, as DescribeTable reports it.
    pub async fn throughput_settings(&self) -> Result<Vec<ThroughputSettings>, StoreError> {
        let mut found = Vec::new();
        for table in [&self.orders_table, &self.metrics_table] {
            let Some(description) = self.describe(table).await? else {
                return Err(StoreError::unavailable(Unavailable::NoTable, format!("table {table} does not exist")));
            };
            let billing_mode = description
                .billing_mode_summary()
                .and_then(|b| b.billing_mode())
                .map(|m| m.as_str().to_string())
                // A table made provisioned before the summary existed has none.
                .or_else(|| description.provisioned_throughput().map(|_| "PROVISIONED".to_string()));
            found.push(ThroughputSettings {
                resource: table.clone(),
                billing_mode: billing_mode.clone(),
                warm_write_units: description.warm_throughput().and_then(|w| w.write_units_per_second()),
                on_demand_max_write_units: description
                    .on_demand_throughput()
                    .and_then(|o| o.max_write_request_units())
                    .filter(|n| *n > 0),
                provisioned_write_units: description
                    .provisioned_throughput()
                    .and_then(|p| p.write_capacity_units())
                    .filter(|n| *n > 0),
            });
            for index in description.global_secondary_indexes() {
                found.push(ThroughputSettings {
                    resource: format!("{table}/{}", index.index_name().unwrap_or("?")),
                    billing_mode: billing_mode.clone(),
                    warm_write_units: index.warm_throughput().and_then(|w| w.write_units_per_second()),
                    on_demand_max_write_units: index
                        .on_demand_throughput()
                        .and_then(|o| o.max_write_request_units())
                        .filter(|n| *n > 0),
                    provisioned_write_units: index
                        .provisioned_throughput()
                        .and_then(|p| p.write_capacity_units())
                        .filter(|n| *n > 0),
                });
            }
        }
        Ok(found)
    }
}

impl Store {
    /// Records `running` as the plan's rehearsal under way, unless another
    /// one is (`false` then, nothing written). A claim older than
    /// `stale_before_ms` (milliseconds since the epoch), or not a number,
    /// is one whose server died: it is taken over.
    pub async fn start_rehearsal(&self, running: &Rehearsal, stale_before_ms: i64) -> Result<bool, StoreError> {
        let (pk, sk) = keys::sale_rehearsal_key(&running.plan);
        let update = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression("SET #running = :running, #since = :since")
            .condition_expression(
                "attribute_not_exists(#since) OR NOT attribute_type(#since, :number) OR #since < :stale",
            )
            .expression_attribute_names("#running", attr::REHEARSAL_RUNNING)
            .expression_attribute_names("#since", attr::REHEARSAL_SINCE)
            .expression_attribute_values(":running", serde_dynamo::to_attribute_value(running)?)
            .expression_attribute_values(":since", AttributeValue::N(running.started_at.timestamp_millis().to_string()))
            .expression_attribute_values(":number", AttributeValue::S("N".into()))
            .expression_attribute_values(":stale", AttributeValue::N(stale_before_ms.to_string()))
            .send()
            .await;
        Ok(unless_condition_failed(update)?.is_some())
    }

    /// Files a finished rehearsal as the plan's latest, the latest before it
    /// as the previous (the one before that is dropped), and frees the
    /// claim: only while this run still holds it (`false` when the plan was
    /// deleted meanwhile, or a later run took a stale claim over).
    pub async fn finish_rehearsal(&self, done: &Rehearsal) -> Result<bool, StoreError> {
        let key = keys::sale_rehearsal_key(&done.plan);
        let latest = self
            .metric_item(key.clone(), true)
            .await?
            .and_then(|mut item| item.remove(attr::REHEARSAL_LATEST))
            // One that does not read is not kept beside the new one.
            .filter(|value| read_rehearsal(value).is_some());
        let mut attributes =
            Item::from([(attr::REHEARSAL_LATEST.to_string(), serde_dynamo::to_attribute_value(done)?)]);
        if let Some(latest) = latest {
            attributes.insert(attr::REHEARSAL_PREVIOUS.to_string(), latest);
        }
        let put = self
            .client
            .put_item()
            .table_name(&self.metrics_table)
            .set_item(Some(keyed(key, attributes)))
            .condition_expression("#since = :since")
            .expression_attribute_names("#since", attr::REHEARSAL_SINCE)
            .expression_attribute_values(":since", AttributeValue::N(done.started_at.timestamp_millis().to_string()))
            .send()
            .await;
        Ok(unless_condition_failed(put)?.is_some())
    }

    /// The plan's rehearsals: the one running (unless its claim is older
    /// than `stale_before_ms`), the latest and the previous. A part that
    /// does not read as a rehearsal is left out and logged.
    pub async fn rehearsals(&self, name: &str, stale_before_ms: i64) -> Result<Rehearsals, StoreError> {
        let Some(mut item) = self.metric_item(keys::sale_rehearsal_key(name), true).await? else {
            return Ok(Rehearsals::default());
        };
        let mut part = |attribute: &str| {
            let value = item.remove(attribute)?;
            let read = read_rehearsal(&value);
            if read.is_none() {
                tracing::warn!(plan = name, attribute, "a stored rehearsal that does not read is left out");
            }
            read
        };
        let (latest, previous, running) =
            (part(attr::REHEARSAL_LATEST), part(attr::REHEARSAL_PREVIOUS), part(attr::REHEARSAL_RUNNING));
        let since = item.get(attr::REHEARSAL_SINCE).and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok());
        let running = running.filter(|_| since.is_some_and(|since| since >= stale_before_ms));
        Ok(Rehearsals { running, latest, previous })
    }
}

/// A rehearsal as `finish_rehearsal` files it; `None` for anything else.
fn read_rehearsal(value: &AttributeValue) -> Option<Rehearsal> {
    serde_dynamo::from_attribute_value::<_, Rehearsal>(value.clone()).ok()
}

/// A plan item as written by `save_sale_plan`; `None` for anything else.
fn read_plan(mut item: Item) -> Option<SalePlan> {
    item.remove(keys::PK);
    item.remove(keys::SK);
    serde_dynamo::from_item::<_, SalePlan>(item).ok().filter(SalePlan::within_limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConsumerMeasurement;

    #[test]
    fn the_measured_consumer_is_written_under_the_name_a_plan_reads_it_by() {
        let measured = ConsumerMeasurement {
            records_per_second: 900.0,
            records: 3_000,
            backlog_records: 1_500,
            caught_up: true,
            lag_p50_ms: Some(200.0),
            lag_p95_ms: None,
            stream_shards: 1,
            scale: 0.02,
            measured_at: "2026-12-07T20:00:00Z".parse().unwrap(),
        };
        let plan: SalePlan = serde_json::from_value(serde_json::json!({
            "name": "gala", "peakOrdersPerSecond": 2000.0, "start": "2026-12-08T09:00:00Z",
            "rampMinutes": 10, "holdMinutes": 30, "decayMinutes": 20, "itemBytes": 700,
            "updatedAt": "2026-12-07T09:00:00Z", "updatedBy": "alice"
        }))
        .unwrap();
        let mut item: Item = serde_dynamo::to_item(&plan).unwrap();
        item.insert(attr::CONSUMER_MEASURED.into(), serde_dynamo::to_attribute_value(&measured).unwrap());
        let read = read_plan(item).expect("a plan with its measure reads");
        assert_eq!(read.consumer_measured, Some(measured));
    }
}

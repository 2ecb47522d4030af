//! The one place that sees every DynamoDB call of this process, retries
//! included: an interceptor on the store's clients. It
//!
//! - asks every operation that takes it for `ReturnConsumedCapacity::Indexes`
//!   (before serialization, so no call site can forget it);
//! - records the units each answer reports, per table and index, read and
//!   write, into the store's `Usage` and the Prometheus counters;
//! - records every throttled attempt with its reasons, the ones the SDK
//!   retries away included (after each attempt, not only the final error);
//! - times every call (retries included) by operation and outcome.
//!
//! A throttle without reasons (a local engine, an older API) is filed as
//! `not named` on the request's table; a cancelled transaction's throttles
//! name only each action's table (see `error::cancelled_throttles`).

use crate::server::store::error::{NOT_NAMED, Throttle, cancelled_throttles, throttling};
use crate::server::store::keys;
use crate::server::store::usage::ReadWrite;
use crate::server::store::usage::{Access, Resource, Usage};
use crate::server::telemetry;
use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextMut, BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    scan::{ScanInput, ScanOutput},
    transact_get_items::{TransactGetItemsInput, TransactGetItemsOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::error::{
    ConditionalCheckFailedException, ResourceNotFoundException, TransactionCanceledException,
};
use aws_sdk_dynamodb::types::{Capacity, ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{Error, Output};
use aws_smithy_runtime_api::client::orchestrator::{Metadata, OrchestratorError};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use chrono::Utc;
use std::sync::Arc;
use std::time::Instant;

/// Records what the store's calls consume and how often they are throttled.
#[derive(Clone, Debug)]
pub struct Recorder {
    usage: Arc<Usage>,
}

impl Recorder {
    pub fn new(usage: Arc<Usage>) -> Self {
        Self { usage }
    }
}

/// What one call is about, kept in its config bag from before it is sent
/// to after its last attempt.
#[derive(Clone, Debug, Default)]
struct Call {
    started: Option<Instant>,
    /// The tables it names, in order (a transaction's: one per action).
    tables: Vec<String>,
}

impl Storable for Call {
    type Storer = StoreReplace<Self>;
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "NorthwindCapacityRecorder"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(Call { started: Some(Instant::now()), tables: Vec::new() });
        Ok(())
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let tables = ask_for_capacity(context.input_mut());
        self.usage.accessed(item_accesses(context.input()));
        let started = cfg.load::<Call>().and_then(|c| c.started);
        cfg.interceptor_state().store_put(Call { started, tables });
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let tables = cfg.load::<Call>().map(|c| c.tables.as_slice()).unwrap_or_default();
        match context.output_or_error() {
            Some(Ok(output)) => self.record_capacity(output),
            Some(Err(err)) => {
                for throttle in err.as_operation_error().map(|e| throttles_in(e, tables)).unwrap_or_default() {
                    self.record_throttle(&throttle);
                }
            }
            None => {}
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg.load::<Metadata>().map_or("unknown", Metadata::name);
        let seconds = cfg.load::<Call>().and_then(|c| c.started).map_or(0.0, |s| s.elapsed().as_secs_f64());
        telemetry::store_call(operation, outcome(context.output_or_error()), seconds);
        Ok(())
    }
}

impl Recorder {
    fn record_capacity(&self, output: &Output) {
        let (capacities, access) = consumed_capacity(output);
        let transaction = output.downcast_ref::<TransactWriteItemsOutput>().is_some();
        let at = Utc::now();
        for capacity in capacities {
            for (resource, access, units) in units_of(capacity, access) {
                if transaction && access == ReadWrite::Write {
                    self.usage.transactional(at, &resource, units);
                }
                if let Some(total) = self.usage.consumed(at, &resource, access, units) {
                    let index = resource.index.as_deref().unwrap_or_default();
                    telemetry::consumed(&resource.table, index, &access.to_string(), total);
                }
            }
        }
    }

    fn record_throttle(&self, throttle: &Throttle) {
        self.usage.throttled(Utc::now(), throttle);
        let table = throttle.resource.split("table/").nth(1).and_then(|t| t.split('/').next()).unwrap_or("unknown");
        telemetry::throttled(&throttle.reason, table, throttle.index().unwrap_or_default());
    }
}

/// Sets `ReturnConsumedCapacity::Indexes` on every input that takes it (a
/// call asking for `Total` gets the same total, and the breakdown besides);
/// returns the tables the call names.
fn ask_for_capacity(input: &mut aws_smithy_runtime_api::client::interceptors::context::Input) -> Vec<String> {
    let indexes = Some(ReturnConsumedCapacity::Indexes);
    macro_rules! single {
        ($($ty:ty),*) => {$(
            if let Some(input) = input.downcast_mut::<$ty>() {
                input.return_consumed_capacity = indexes;
                return input.table_name.iter().map(|t| table_name(t)).collect();
            }
        )*};
    }
    single!(PutItemInput, UpdateItemInput, DeleteItemInput, GetItemInput, QueryInput, ScanInput);
    if let Some(input) = input.downcast_mut::<BatchGetItemInput>() {
        input.return_consumed_capacity = indexes;
        return input.request_items.iter().flat_map(|r| r.keys()).map(|t| table_name(t)).collect();
    }
    if let Some(input) = input.downcast_mut::<BatchWriteItemInput>() {
        input.return_consumed_capacity = indexes;
        return input.request_items.iter().flat_map(|r| r.keys()).map(|t| table_name(t)).collect();
    }
    if let Some(input) = input.downcast_mut::<TransactWriteItemsInput>() {
        input.return_consumed_capacity = indexes;
        let actions = input.transact_items.iter().flatten();
        return actions.map(|action| table_name(super::orders::action_table(action))).collect();
    }
    if let Some(input) = input.downcast_mut::<TransactGetItemsInput>() {
        input.return_consumed_capacity = indexes;
        let actions = input.transact_items.iter().flatten();
        return actions.map(|a| table_name(a.get().map_or("unknown", |g| g.table_name()))).collect();
    }
    Vec::new()
}

/// What a call does to which partitions, as IAM authorizes it: the action
/// of each item it names (a transaction's actions one by one) with the
/// partition family of its key.
fn item_accesses(input: &aws_smithy_runtime_api::client::interceptors::context::Input) -> Vec<Access> {
    type Item = std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>;
    let family = |item: Option<&Item>| {
        item.and_then(|item| item.get(keys::PK)).and_then(|pk| pk.as_s().ok()).and_then(|pk| keys::partition_of(pk))
    };
    let access = |action: &'static str, table: &str, family: Option<&'static str>| Access {
        action,
        table: table_name(table),
        family,
    };
    let table = |name: Option<&str>| name.unwrap_or("unknown").to_string();
    if let Some(i) = input.downcast_ref::<PutItemInput>() {
        return vec![access("dynamodb:PutItem", &table(i.table_name()), family(i.item()))];
    }
    if let Some(i) = input.downcast_ref::<UpdateItemInput>() {
        return vec![access("dynamodb:UpdateItem", &table(i.table_name()), family(i.key()))];
    }
    if let Some(i) = input.downcast_ref::<DeleteItemInput>() {
        return vec![access("dynamodb:DeleteItem", &table(i.table_name()), family(i.key()))];
    }
    if let Some(i) = input.downcast_ref::<GetItemInput>() {
        return vec![access("dynamodb:GetItem", &table(i.table_name()), family(i.key()))];
    }
    if let Some(i) = input.downcast_ref::<QueryInput>() {
        // Its partition key is a value of its key condition.
        let values = i.expression_attribute_values().into_iter().flat_map(|v| v.values());
        let family = values.filter_map(|v| v.as_s().ok()).find_map(|pk| keys::partition_of(pk));
        return vec![access("dynamodb:Query", &table(i.table_name()), family)];
    }
    if let Some(i) = input.downcast_ref::<ScanInput>() {
        return vec![access("dynamodb:Scan", &table(i.table_name()), None)];
    }
    if let Some(i) = input.downcast_ref::<BatchGetItemInput>() {
        let requests = i.request_items().into_iter().flatten();
        return requests
            .flat_map(|(t, r)| r.keys().iter().map(move |key| access("dynamodb:BatchGetItem", t, family(Some(key)))))
            .collect();
    }
    if let Some(i) = input.downcast_ref::<BatchWriteItemInput>() {
        let requests = i.request_items().into_iter().flatten();
        return requests
            .flat_map(|(t, writes)| {
                writes.iter().map(move |w| {
                    let key = w.put_request().map(|p| p.item()).or(w.delete_request().map(|d| d.key()));
                    access("dynamodb:BatchWriteItem", t, family(key))
                })
            })
            .collect();
    }
    if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
        let actions = i.transact_items().iter();
        return actions
            .filter_map(|a| {
                if let Some(put) = a.put() {
                    Some(access("dynamodb:PutItem", put.table_name(), family(Some(put.item()))))
                } else if let Some(update) = a.update() {
                    Some(access("dynamodb:UpdateItem", update.table_name(), family(Some(update.key()))))
                } else if let Some(delete) = a.delete() {
                    Some(access("dynamodb:DeleteItem", delete.table_name(), family(Some(delete.key()))))
                } else {
                    let check = a.condition_check()?;
                    Some(access("dynamodb:ConditionCheckItem", check.table_name(), family(Some(check.key()))))
                }
            })
            .collect();
    }
    if let Some(i) = input.downcast_ref::<TransactGetItemsInput>() {
        return i
            .transact_items()
            .iter()
            .filter_map(|a| a.get())
            .map(|get| access("dynamodb:GetItem", get.table_name(), family(Some(get.key()))))
            .collect();
    }
    Vec::new()
}

/// A table's name, from its name or its ARN (both are accepted as `TableName`).
fn table_name(table: &str) -> String {
    match table.split_once(":table/") {
        Some((_, rest)) => rest.split('/').next().unwrap_or(rest).to_string(),
        None => table.to_string(),
    }
}

/// The consumed capacity an output reports, and whether its operation reads
/// or writes (for engines that give units without saying which).
fn consumed_capacity(output: &Output) -> (Vec<&ConsumedCapacity>, ReadWrite) {
    macro_rules! one {
        ($($ty:ty => $access:expr),*) => {$(
            if let Some(output) = output.downcast_ref::<$ty>() {
                return (output.consumed_capacity().into_iter().collect(), $access);
            }
        )*};
    }
    macro_rules! many {
        ($($ty:ty => $access:expr),*) => {$(
            if let Some(output) = output.downcast_ref::<$ty>() {
                return (output.consumed_capacity().iter().collect(), $access);
            }
        )*};
    }
    one!(PutItemOutput => ReadWrite::Write, UpdateItemOutput => ReadWrite::Write, DeleteItemOutput => ReadWrite::Write,
         GetItemOutput => ReadWrite::Read, QueryOutput => ReadWrite::Read, ScanOutput => ReadWrite::Read);
    many!(BatchWriteItemOutput => ReadWrite::Write, TransactWriteItemsOutput => ReadWrite::Write,
          BatchGetItemOutput => ReadWrite::Read, TransactGetItemsOutput => ReadWrite::Read);
    (Vec::new(), ReadWrite::Read)
}

/// The units of one `ConsumedCapacity`, per resource and access: the table's
/// own (from its `Table` breakdown, else the total less the indexes'), and
/// each index's. Read and write units are taken as given when the answer
/// splits them, else all counted as the operation's `access`.
pub fn units_of(capacity: &ConsumedCapacity, access: ReadWrite) -> Vec<(Resource, ReadWrite, f64)> {
    let table = table_name(capacity.table_name().unwrap_or("unknown"));
    let indexes = capacity.global_secondary_indexes().into_iter().flatten();
    let mut units = Vec::new();
    let mut indexed = 0.0;
    for (index, capacity) in indexes.chain(capacity.local_secondary_indexes().into_iter().flatten()) {
        indexed += capacity.capacity_units().unwrap_or(0.0);
        for (access, n) in split(capacity, access) {
            units.push((Resource::index(table.clone(), index.clone()), access, n));
        }
    }
    let own = match capacity.table() {
        Some(own) => split(own, access),
        None if indexed == 0.0 => {
            let total = Capacity::builder()
                .set_capacity_units(capacity.capacity_units())
                .set_read_capacity_units(capacity.read_capacity_units())
                .set_write_capacity_units(capacity.write_capacity_units())
                .build();
            split(&total, access)
        }
        // The total includes the indexes' units: only it can have them taken off.
        None => vec![(access, (capacity.capacity_units().unwrap_or(0.0) - indexed).max(0.0))],
    };
    units.extend(own.into_iter().map(|(access, n)| (Resource::table(table.clone()), access, n)));
    units.retain(|(_, _, n)| *n > 0.0);
    units
}

fn split(capacity: &Capacity, access: ReadWrite) -> Vec<(ReadWrite, f64)> {
    match (capacity.read_capacity_units(), capacity.write_capacity_units()) {
        (None, None) => vec![(access, capacity.capacity_units().unwrap_or(0.0))],
        (read, write) => vec![(ReadWrite::Read, read.unwrap_or(0.0)), (ReadWrite::Write, write.unwrap_or(0.0))],
    }
}

/// The throttles of one failed attempt: the reasons DynamoDB named, a
/// `not named` throttle on the call's table when it named none, or a
/// cancelled transaction's throttled actions.
fn throttles_in(err: &Error, tables: &[String]) -> Vec<Throttle> {
    let err: &(dyn std::error::Error + 'static) = err;
    if let Some(named) = throttling(err) {
        if named.is_empty() {
            let table = tables.first().map_or("unknown", String::as_str);
            return vec![Throttle { reason: NOT_NAMED.into(), resource: format!("table/{table}") }];
        }
        return named;
    }
    let cancelled =
        [Some(err), err.source()].into_iter().flatten().find_map(|e| e.downcast_ref::<TransactionCanceledException>());
    match cancelled {
        Some(cancelled) => {
            let codes: Vec<&str> =
                cancelled.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None")).collect();
            cancelled_throttles(&codes, tables)
        }
        None => Vec::new(),
    }
}

/// How a call ended, as a metric label.
fn outcome(result: Option<Result<&Output, &OrchestratorError<Error>>>) -> &'static str {
    let err = match result {
        None => return "unknown",
        Some(Ok(_)) => return "ok",
        Some(Err(err)) => err,
    };
    if err.is_timeout_error() {
        return "timeout";
    }
    if super::breaker::not_sent(err) {
        return "not_sent";
    }
    if err.is_connector_error() {
        return "unreachable";
    }
    let Some(err) = err.as_operation_error() else {
        return "error";
    };
    if !throttles_in(err, &[]).is_empty() {
        return "throttled";
    }
    let err: &(dyn std::error::Error + 'static) = err;
    let source = [Some(err), err.source()];
    let is = |check: fn(&(dyn std::error::Error + 'static)) -> bool| source.into_iter().flatten().any(check);
    if is(|e| e.is::<ConditionalCheckFailedException>()) {
        "condition_failed"
    } else if is(|e| e.is::<TransactionCanceledException>()) {
        "transaction_cancelled"
    } else if is(|e| e.is::<ResourceNotFoundException>()) {
        "no_table"
    } else {
        "error"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(units: f64) -> Capacity {
        Capacity::builder().capacity_units(units).build()
    }

    #[test]
    fn units_are_split_per_table_and_index() {
        let put = ConsumedCapacity::builder()
            .table_name("orders")
            .capacity_units(3.0)
            .table(capacity(1.0))
            .global_secondary_indexes("GSI1", capacity(1.0))
            .global_secondary_indexes("GSI2", capacity(1.0))
            .build();
        let mut units = units_of(&put, ReadWrite::Write);
        units.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            units,
            vec![
                (Resource::table("orders"), ReadWrite::Write, 1.0),
                (Resource::index("orders", "GSI1"), ReadWrite::Write, 1.0),
                (Resource::index("orders", "GSI2"), ReadWrite::Write, 1.0),
            ]
        );
    }

    #[test]
    fn a_total_without_a_breakdown_is_the_tables_less_the_indexes() {
        let query = ConsumedCapacity::builder().table_name("orders").capacity_units(0.5).build();
        assert_eq!(units_of(&query, ReadWrite::Read), vec![(Resource::table("orders"), ReadWrite::Read, 0.5)]);
        let put = ConsumedCapacity::builder()
            .table_name("arn:aws:dynamodb:us-east-1:1:table/orders")
            .capacity_units(2.0)
            .global_secondary_indexes("GSI2", capacity(1.0))
            .build();
        let units = units_of(&put, ReadWrite::Write);
        assert!(units.contains(&(Resource::table("orders"), ReadWrite::Write, 1.0)), "{units:?}");
        assert!(units.contains(&(Resource::index("orders", "GSI2"), ReadWrite::Write, 1.0)), "{units:?}");
    }

    #[test]
    fn split_read_and_write_units_are_kept_apart() {
        let transaction = ConsumedCapacity::builder()
            .table_name("metrics")
            .capacity_units(6.0)
            .table(Capacity::builder().capacity_units(6.0).read_capacity_units(2.0).write_capacity_units(4.0).build())
            .build();
        let units = units_of(&transaction, ReadWrite::Write);
        assert_eq!(
            units,
            vec![
                (Resource::table("metrics"), ReadWrite::Read, 2.0),
                (Resource::table("metrics"), ReadWrite::Write, 4.0)
            ]
        );
    }

    #[test]
    fn table_names_come_from_names_or_arns() {
        assert_eq!(table_name("orders"), "orders");
        assert_eq!(table_name("arn:aws:dynamodb:us-east-1:1:table/orders"), "orders");
        assert_eq!(table_name("arn:aws:dynamodb:us-east-1:1:table/orders/index/GSI2"), "orders");
    }
}

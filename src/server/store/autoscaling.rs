//! What Application Auto Scaling is set to do with the tables' and indexes'
//! provisioned write capacity: each one's scalable target (its minimum and
//! maximum) and its scheduled actions (a schedule and the minimum or
//! maximum it sets), for the readiness check. Read on AWS (`--store aws`),
//! or from an emulator named by `--autoscaling-endpoint-url`; a local
//! engine has no auto scaling, and nothing is read there.

use super::Store;
use crate::server::store::error::StoreError;
use crate::server::store::keys;
use aws_sdk_applicationautoscaling::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_applicationautoscaling::types::{ScalableDimension, ServiceNamespace};
use chrono::{DateTime, Utc};

/// DescribeScalableTargets and DescribeScheduledActions return at most 50 a page.
const PAGE: i32 = 50;

/// One table's or index's write capacity under auto scaling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalableTarget {
    /// The table's name, or `<table>/<index>` (as `ThroughputSettings`).
    pub resource: String,
    /// Application Auto Scaling's resource id: `table/<name>` or
    /// `table/<name>/index/<index>`.
    pub resource_id: String,
    /// `dynamodb:table:WriteCapacityUnits` or `dynamodb:index:WriteCapacityUnits`.
    pub dimension: String,
    pub min: i32,
    pub max: i32,
    pub actions: Vec<ScheduledAction>,
}

/// One scheduled action of a scalable target: when (`at(...)`,
/// `cron(...)` or `rate(...)`, in `timezone`, between `start` and `end`
/// when given) it sets the minimum, the maximum or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledAction {
    pub name: String,
    pub schedule: String,
    pub timezone: Option<String>,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    pub min: Option<i32>,
    pub max: Option<i32>,
}

/// The resource id and write dimension of a table (`index: None`) or index.
pub fn write_target(table: &str, index: Option<&str>) -> (String, String) {
    match index {
        Some(index) => (format!("table/{table}/index/{index}"), "dynamodb:index:WriteCapacityUnits".into()),
        None => (format!("table/{table}"), "dynamodb:table:WriteCapacityUnits".into()),
    }
}

impl Store {
    /// The write scalable targets of the orders table, its two indexes and
    /// the metrics table, each with its scheduled actions; a table or index
    /// with none is absent. `None` when this store reads no auto scaling (a
    /// local engine without `--autoscaling-endpoint-url`).
    pub async fn write_scaling(&self) -> Result<Option<Vec<ScalableTarget>>, StoreError> {
        let Some(client) = &self.autoscaling else { return Ok(None) };
        let wanted = [
            (self.orders_table.clone(), None),
            (self.orders_table.clone(), Some(keys::GSI1)),
            (self.orders_table.clone(), Some(keys::GSI2)),
            (self.metrics_table.clone(), None),
        ]
        .map(|(table, index)| {
            let resource = index.map_or(table.clone(), |i| format!("{table}/{i}"));
            let (resource_id, dimension) = write_target(&table, index);
            (resource, resource_id, dimension)
        });
        let mut pages = client
            .describe_scalable_targets()
            .service_namespace(ServiceNamespace::Dynamodb)
            .set_resource_ids(Some(wanted.iter().map(|(_, id, _)| id.clone()).collect()))
            .max_results(PAGE)
            .into_paginator()
            .items()
            .send();
        let mut found = Vec::new();
        while let Some(target) = pages.next().await {
            let target = target.map_err(|e| denied(e, "DescribeScalableTargets"))?;
            let Some((resource, resource_id, dimension)) = wanted.iter().find(|(_, id, dimension)| {
                target.resource_id() == id && target.scalable_dimension().as_str() == dimension
            }) else {
                continue;
            };
            found.push(ScalableTarget {
                resource: resource.clone(),
                resource_id: resource_id.clone(),
                dimension: dimension.clone(),
                min: target.min_capacity(),
                max: target.max_capacity(),
                actions: Vec::new(),
            });
        }
        for target in &mut found {
            target.actions = self.scheduled_actions(client, &target.resource_id, &target.dimension).await?;
        }
        Ok(Some(found))
    }

    async fn scheduled_actions(
        &self,
        client: &aws_sdk_applicationautoscaling::Client,
        resource_id: &str,
        dimension: &str,
    ) -> Result<Vec<ScheduledAction>, StoreError> {
        let mut pages = client
            .describe_scheduled_actions()
            .service_namespace(ServiceNamespace::Dynamodb)
            .resource_id(resource_id)
            .scalable_dimension(ScalableDimension::from(dimension))
            .max_results(PAGE)
            .into_paginator()
            .items()
            .send();
        let mut actions = Vec::new();
        while let Some(action) = pages.next().await {
            let action = action.map_err(|e| denied(e, "DescribeScheduledActions"))?;
            let time = |t: Option<&aws_sdk_applicationautoscaling::primitives::DateTime>| {
                t.and_then(|t| DateTime::<Utc>::from_timestamp(t.secs(), t.subsec_nanos()))
            };
            actions.push(ScheduledAction {
                name: action.scheduled_action_name().to_string(),
                schedule: action.schedule().to_string(),
                timezone: action.timezone().map(str::to_string),
                start: time(action.start_time()),
                end: time(action.end_time()),
                min: action.scalable_target_action().and_then(|a| a.min_capacity()),
                max: action.scalable_target_action().and_then(|a| a.max_capacity()),
            });
        }
        Ok(actions)
    }
}

/// The store's error for a failed call; a refusal names the permission the
/// caller's role lacks (IAM's own message names only the action).
fn denied<E, R>(err: SdkError<E, R>, action: &str) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    let code = err.as_service_error().and_then(|e| e.code()).unwrap_or_default();
    if matches!(code, "AccessDeniedException" | "AccessDenied" | "UnauthorizedOperation") {
        let message = err.as_service_error().and_then(|e| e.message()).unwrap_or_default().to_string();
        return StoreError::Rejected(format!(
            "{code}: {message} (the role needs application-autoscaling:{action}; see docs/iam/serve.json)"
        ));
    }
    err.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_and_an_index_have_their_own_resource_id_and_dimension() {
        assert_eq!(
            write_target("orders", None),
            ("table/orders".to_string(), "dynamodb:table:WriteCapacityUnits".to_string())
        );
        assert_eq!(
            write_target("orders", Some("GSI2")),
            ("table/orders/index/GSI2".to_string(), "dynamodb:index:WriteCapacityUnits".to_string())
        );
    }

    fn refused(code: &str) -> StoreError {
        use aws_sdk_applicationautoscaling::operation::describe_scalable_targets::DescribeScalableTargetsError;
        use aws_smithy_runtime_api::http::{Response, StatusCode};
        let metadata = aws_smithy_types::error::ErrorMetadata::builder().code(code).message("not allowed").build();
        let raw = Response::new(StatusCode::try_from(400).unwrap(), aws_smithy_types::body::SdkBody::empty());
        denied(SdkError::service_error(DescribeScalableTargetsError::generic(metadata), raw), "DescribeScalableTargets")
    }

    #[test]
    fn a_refusal_names_the_missing_permission_and_other_errors_stay_the_stores() {
        let err = refused("AccessDeniedException").to_string();
        assert!(err.contains("application-autoscaling:DescribeScalableTargets"), "{err}");
        assert!(err.contains("not allowed") && err.contains("docs/iam/serve.json"), "{err}");
        let err = refused("ValidationException").to_string();
        assert!(!err.contains("application-autoscaling:"), "{err}");
    }
}

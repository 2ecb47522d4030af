//! Bulk operations' progress, kept in the metrics table so that any instance
//! can report on (or cancel) a run that another instance carries out.

use super::Store;
use super::items::keyed;
use crate::model::BulkReport;
use crate::server::store::error::{StoreError, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;

/// How long a finished run's report is kept (the metrics table's TTL).
const KEEP_SECS: i64 = 7 * 24 * 3600;

impl Store {
    /// Writes a run's report as it stands now. While it runs (`last` false)
    /// the write fails with `Conflict` once someone asked the run to stop:
    /// that is how the run learns of it, at no extra read.
    pub async fn save_bulk(&self, report: &BulkReport, last: bool) -> Result<(), StoreError> {
        let mut item = keyed(keys::bulk_key(&report.id), serde_dynamo::to_item(report)?);
        let expires = chrono::Utc::now().timestamp() + KEEP_SECS;
        item.insert(attr::EXPIRES_AT.into(), AttributeValue::N(expires.to_string()));
        let mut put = self.client.put_item().table_name(&self.metrics_table).set_item(Some(item));
        if !last {
            put = put
                .condition_expression("attribute_not_exists(#cancel) OR #cancel = :false")
                .expression_attribute_names("#cancel", attr::CANCEL_REQUESTED)
                .expression_attribute_values(":false", AttributeValue::Bool(false));
        }
        let put = put.send().await;
        match unless_condition_failed(put)? {
            Some(_) => Ok(()),
            None => Err(StoreError::Conflict(format!("bulk operation {} was asked to stop", report.id))),
        }
    }

    pub async fn get_bulk(&self, id: &str) -> Result<Option<(BulkReport, bool)>, StoreError> {
        let item = self.metric_item(keys::bulk_key(id), true).await?;
        let Some(item) = item else { return Ok(None) };
        let cancel = item.get(attr::CANCEL_REQUESTED).and_then(|v| v.as_bool().ok()).copied().unwrap_or(false);
        Ok(Some((serde_dynamo::from_item(item)?, cancel)))
    }

    /// Asks a run to stop; `false` when there is no such run.
    pub async fn request_bulk_cancel(&self, id: &str) -> Result<bool, StoreError> {
        self.set_on_existing_metric(keys::bulk_key(id), attr::CANCEL_REQUESTED, AttributeValue::Bool(true)).await
    }
}

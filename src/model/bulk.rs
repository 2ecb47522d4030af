//! Bulk status changes: the request and its report.

use super::*;

/// Where a bulk operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum BulkState {
    Running,
    Done,
    /// Stopped on request: what had not run yet was left as it was.
    Cancelled,
    /// The server running it stopped before it finished.
    Interrupted,
}

/// A bulk status change: what it was asked to do, and how far it got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct BulkReport {
    pub id: String,
    pub state: BulkState,
    pub from: Status,
    pub to: Status,
    #[serde(default)]
    pub reason: Option<String>,
    pub actor: String,
    /// Orders the run covers.
    pub total: u32,
    pub changed: u32,
    /// Orders someone else changed first (each a 409): left as they were.
    pub conflicts: Vec<String>,
    /// Orders whose change failed otherwise (store unavailable, gone): worth a retry.
    pub failed: Vec<String>,
    #[serde(with = "iso_millis")]
    pub started_at: DateTime<Utc>,
    #[serde(with = "iso_millis")]
    pub updated_at: DateTime<Utc>,
}

/// `POST /api/bulk/status`: these orders, or every PENDING order a list
/// filter matches, from one status to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BulkRequest {
    #[serde(default)]
    pub order_ids: Option<Vec<String>>,
    /// The PENDING list's query (its date, days and filters; no cursor).
    #[serde(default)]
    pub filter: Option<PendingParams>,
    pub from: Status,
    pub to: Status,
    #[serde(default)]
    pub reason: Option<String>,
}

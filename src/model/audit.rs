//! The audit trail as the API and `/audit` show it.

use super::*;

/// One change to an order, as the audit trail keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    pub order_id: String,
    /// The user or token name.
    pub actor: String,
    pub method: SignIn,
    /// `None` for the order's creation.
    pub from: Option<Status>,
    pub to: Status,
    #[serde(default)]
    pub reason: Option<String>,
    /// The bulk operation this change was part of.
    #[serde(default)]
    pub bulk_id: Option<String>,
}

/// A page of the audit trail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditListing {
    pub entries: Vec<AuditEntry>,
    pub next: Option<String>,
}

/// `GET /api/audit`'s query: one actor's changes, else one day's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditParams {
    pub date: Option<String>,
    pub actor: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

//! The audit trail as the API and `/audit` show it.

use super::*;

/// One change to an order, as the audit trail keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditListing {
    pub entries: Vec<AuditEntry>,
    pub next: Option<String>,
}

/// `GET /api/audit`'s query: one actor's changes, else one day's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct AuditParams {
    /// The day whose changes to list, `YYYY-MM-DD` (UTC); today when absent.
    pub date: Option<String>,
    /// A user or token name: that actor's changes instead of a day's.
    pub actor: Option<String>,
    /// Entries on a page, 1 to 100 (25 when absent).
    #[cfg_attr(feature = "ssr", param(value_type = Option<u32>, minimum = 1, maximum = 100))]
    pub limit: Option<String>,
    /// Where the page starts: the `next` of the page before.
    pub cursor: Option<String>,
}

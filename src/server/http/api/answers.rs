//! The JSON API's own answers: the few shapes that are no model type, each
//! a type so that the OpenAPI document describes what is sent.

use crate::model::{AccountView, AuditEntry, Role, SalePlan, TokenView};
use serde::Serialize;
use utoipa::ToSchema;

/// Every sale plan, by name.
#[derive(Serialize, ToSchema)]
pub struct SalePlans {
    pub plans: Vec<SalePlan>,
}

/// An order's changes, oldest first.
#[derive(Serialize, ToSchema)]
pub struct OrderHistory {
    pub history: Vec<AuditEntry>,
}

/// A bulk run started: its id.
#[derive(Serialize, ToSchema)]
pub struct BulkStarted {
    pub id: String,
}

/// Every account.
#[derive(Serialize, ToSchema)]
pub struct Accounts {
    pub users: Vec<AccountView>,
}

/// Every API token.
#[derive(Serialize, ToSchema)]
pub struct Tokens {
    pub tokens: Vec<TokenView>,
}

/// A token just created, with its text: shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedToken {
    pub name: String,
    pub role: Role,
    /// What a script sends as `Authorization: Bearer <token>`.
    pub token: String,
}

/// The sale plan deleted: its name.
#[derive(Serialize, ToSchema)]
pub struct Deleted {
    pub deleted: String,
}

/// The account disabled: its name.
#[derive(Serialize, ToSchema)]
pub struct Disabled {
    pub disabled: String,
}

/// The account and its role now.
#[derive(Serialize, ToSchema)]
pub struct RoleSet {
    pub name: String,
    pub role: Role,
}

/// The token revoked: its name.
#[derive(Serialize, ToSchema)]
pub struct Revoked {
    pub revoked: String,
}

/// A probe's answer.
#[derive(Serialize, ToSchema)]
pub struct ProbeAnswer {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    pub status: &'static str,
}

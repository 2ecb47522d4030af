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
    pub entries: Vec<AuditRecord>,
    pub next: Option<String>,
}

/// `GET /api/audit`'s query: one actor's records, else one day's, of one
/// kind (or every security kind) when asked. A filtered page may hold fewer
/// entries than the limit, or none, and still have a `next`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct AuditParams {
    /// The day whose changes to list, `YYYY-MM-DD` (UTC); today when absent.
    pub date: Option<String>,
    /// A user or token name: that actor's changes instead of a day's.
    pub actor: Option<String>,
    /// One kind (`sign-in`, `token-created`, ...), or `security`: every kind
    /// but `order-change`.
    pub kind: Option<String>,
    /// Entries on a page, 1 to 100 (25 when absent).
    #[cfg_attr(feature = "ssr", param(value_type = Option<u32>, minimum = 1, maximum = 100))]
    pub limit: Option<String>,
    /// Where the page starts: the `next` of the page before.
    pub cursor: Option<String>,
}

/// What an audit record records: an order's change, or one of the security
/// events recorded beside them in the same trail. Records written before
/// kinds existed are order changes; a kind this build does not know (a
/// newer build's, or a damaged item) reads as `Unknown` and still shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AuditKind {
    /// An order created or its status changed.
    OrderChange,
    /// A person signed in (password or the identity provider).
    SignIn,
    /// A sign-in or an API token refused, and why (`refused`).
    SignInRefused,
    SignOut,
    AccountAdded,
    AccountDisabled,
    AccountEnabled,
    AccountRoleChanged,
    PasswordChanged,
    TokenCreated,
    TokenRevoked,
    SalePlanCreated,
    SalePlanChanged,
    SalePlanDeleted,
    /// A day's shard count written by a person (a sale plan's, or `shards
    /// --write-ahead`).
    ShardsWritten,
    RehearsalStarted,
    /// A reconciliation changed counters: `detail` lists each change.
    ReconciliationRepair,
    /// The recorded consumer mode switched by a person (`consumer use`,
    /// `PUT /api/consumer/mode`).
    ConsumerModeChanged,
    #[serde(other)]
    Unknown,
}

impl AuditKind {
    /// Every kind a record can be written with (not `Unknown`).
    pub const ALL: [AuditKind; 18] = [
        AuditKind::OrderChange,
        AuditKind::SignIn,
        AuditKind::SignInRefused,
        AuditKind::SignOut,
        AuditKind::AccountAdded,
        AuditKind::AccountDisabled,
        AuditKind::AccountEnabled,
        AuditKind::AccountRoleChanged,
        AuditKind::PasswordChanged,
        AuditKind::TokenCreated,
        AuditKind::TokenRevoked,
        AuditKind::SalePlanCreated,
        AuditKind::SalePlanChanged,
        AuditKind::SalePlanDeleted,
        AuditKind::ShardsWritten,
        AuditKind::RehearsalStarted,
        AuditKind::ReconciliationRepair,
        AuditKind::ConsumerModeChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::OrderChange => "order-change",
            AuditKind::SignIn => "sign-in",
            AuditKind::SignInRefused => "sign-in-refused",
            AuditKind::SignOut => "sign-out",
            AuditKind::AccountAdded => "account-added",
            AuditKind::AccountDisabled => "account-disabled",
            AuditKind::AccountEnabled => "account-enabled",
            AuditKind::AccountRoleChanged => "account-role-changed",
            AuditKind::PasswordChanged => "password-changed",
            AuditKind::TokenCreated => "token-created",
            AuditKind::TokenRevoked => "token-revoked",
            AuditKind::SalePlanCreated => "sale-plan-created",
            AuditKind::SalePlanChanged => "sale-plan-changed",
            AuditKind::SalePlanDeleted => "sale-plan-deleted",
            AuditKind::ShardsWritten => "shards-written",
            AuditKind::RehearsalStarted => "rehearsal-started",
            AuditKind::ReconciliationRepair => "reconciliation-repair",
            AuditKind::ConsumerModeChanged => "consumer-mode-changed",
            AuditKind::Unknown => "unknown",
        }
    }

    /// A kind as written, or `Unknown`.
    pub fn parse(text: &str) -> AuditKind {
        AuditKind::ALL.into_iter().find(|k| k.as_str() == text).unwrap_or(AuditKind::Unknown)
    }
}

impl fmt::Display for AuditKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a sign-in (or an API token) was refused. The person refused is told
/// only "wrong name or password"; the trail, which only admins read, says
/// which.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// No account of that name (or a name no account can have).
    UnknownAccount,
    WrongPassword,
    /// The account is disabled.
    Disabled,
    /// An account that signs in through the identity provider, not with a password.
    NoPassword,
    /// A bearer token that is not one of ours, or whose secret is wrong.
    BadToken,
    RevokedToken,
    /// The identity provider refused, or could not be reached or checked.
    Provider,
    /// The provider's groups map to no role here.
    NoRole,
    #[serde(other)]
    Other,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::UnknownAccount => "unknown-account",
            Refusal::WrongPassword => "wrong-password",
            Refusal::Disabled => "disabled",
            Refusal::NoPassword => "no-password",
            Refusal::BadToken => "bad-token",
            Refusal::RevokedToken => "revoked-token",
            Refusal::Provider => "provider",
            Refusal::NoRole => "no-role",
            Refusal::Other => "other",
        }
    }
}

/// A security event, as it is written: who, how signed in, from where, to
/// what (`subject`: an account, token or sale plan name), and what changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityEvent {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    pub kind: AuditKind,
    /// The user or token name (for a refused sign-in, the name given).
    pub actor: String,
    pub method: SignIn,
    /// The client's address, where there is one (not for the command line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

// Made by the server only (the browser build's chrono has no clock).
#[cfg(feature = "ssr")]
impl SecurityEvent {
    /// An event of `kind` by `actor` now, from `client`.
    pub fn new(kind: AuditKind, actor: &Actor, client: Option<std::net::IpAddr>) -> SecurityEvent {
        use chrono::SubsecRound;
        SecurityEvent {
            // As it is stored: milliseconds.
            at: Utc::now().trunc_subsecs(3),
            kind,
            actor: actor.name.clone(),
            method: actor.method,
            client: client.map(|ip| ip.to_string()),
            subject: None,
            refused: None,
            detail: None,
        }
    }

    pub fn subject(mut self, subject: &str) -> SecurityEvent {
        self.subject = Some(subject.to_string());
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> SecurityEvent {
        self.detail = Some(detail.into());
        self
    }

    pub fn refused(mut self, why: Refusal) -> SecurityEvent {
        self.refused = Some(why);
        self
    }
}

/// One record of the trail as `GET /api/audit` lists it: an order change or
/// a security event. Every field but the time and kind is optional: records
/// are read as input (an old build's, another tool's, a damaged one) and a
/// field that could not be read is left out and named in `problems`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    pub kind: AuditKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<SignIn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Order changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bulk_id: Option<String>,
    /// Attributes that were there but could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_written_and_read_by_one_name() {
        for kind in AuditKind::ALL {
            let written = serde_json::to_value(kind).unwrap();
            assert_eq!(written, kind.as_str(), "serde and as_str agree");
            assert_eq!(AuditKind::parse(kind.as_str()), kind);
            assert_eq!(serde_json::from_value::<AuditKind>(written).unwrap(), kind);
        }
        assert_eq!(AuditKind::parse("from-a-newer-build"), AuditKind::Unknown);
        assert_eq!(serde_json::from_str::<AuditKind>("\"from-a-newer-build\"").unwrap(), AuditKind::Unknown);
        for why in [Refusal::UnknownAccount, Refusal::RevokedToken, Refusal::NoRole] {
            assert_eq!(serde_json::to_value(why).unwrap(), why.as_str());
        }
    }
}

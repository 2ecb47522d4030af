//! Who may do what: roles, permissions, each route's access, who is signed
//! in, and the admin API's accounts and tokens.

use super::*;

/// What a signed-in person or script may do, from least to most: each role
/// may do everything the ones before it may, so the derived order is the
/// privilege order and "at least ops" is a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The PENDING dashboard, its counters, the live stream, capacity figures,
    /// sale plans and their readiness.
    Viewer,
    /// And orders and customer histories (personal data); cancelling an order.
    Support,
    /// And every status change, creating orders, sale plans.
    Ops,
    /// And users, tokens and everyone's audit trail.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Support, Role::Ops, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Support => "support",
            Role::Ops => "ops",
            Role::Admin => "admin",
        }
    }

    /// The one definition of who may do what: each route's declared access,
    /// the service's checks and the pages' buttons all ask this.
    pub fn can(self, permission: Permission) -> bool {
        self >= permission.least_role()
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| format!("unknown role {s:?}: expected viewer, support, ops or admin"))
    }
}

/// Something a role may be allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Permission {
    /// The dashboard, counters, live stream and capacity figures.
    ViewOperations,
    /// Orders, customer histories and an order's timeline: personal data.
    ViewOrders,
    CancelOrder,
    /// Any status change, and creating orders.
    ChangeOrders,
    /// Sale plans: creating, changing and deleting them, and writing a sale
    /// day's shard count ahead.
    PlanSales,
    /// Users, tokens, and the audit trail of everyone.
    Administer,
}

impl Permission {
    pub fn least_role(self) -> Role {
        match self {
            Permission::ViewOperations => Role::Viewer,
            Permission::ViewOrders | Permission::CancelOrder => Role::Support,
            Permission::ChangeOrders | Permission::PlanSales => Role::Ops,
            Permission::Administer => Role::Admin,
        }
    }

    /// What moving an order to `to` needs: support may cancel, ops do the rest.
    pub fn to_change_status(to: Status) -> Permission {
        if to == Status::Cancelled { Permission::CancelOrder } else { Permission::ChangeOrders }
    }
}

/// Who may reach a route: declared, as one of these, where the route is
/// declared (the JSON API's router, the `<Route>`s' table, beside each server
/// function). A route declared with none is refused to everyone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// Anyone, and no credential is even read: probes and static files
    /// (they cost no store call and answer while the store is down).
    Open,
    /// Anyone; a credential that is sent must be good (the sign-in flow,
    /// "who am I").
    Public,
    /// Any signed-in user, whatever the role.
    SignedIn,
    /// A role that has this permission.
    Needs(Permission),
}

impl Access {
    /// Whether `role` (`None`: nobody signed in) passes.
    pub fn admits(self, role: Option<Role>) -> bool {
        match self {
            Access::Open | Access::Public => true,
            Access::SignedIn => role.is_some(),
            Access::Needs(permission) => role.is_some_and(|r| r.can(permission)),
        }
    }
}

/// How a person or script proved who they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum SignIn {
    /// A local account's password.
    Password,
    /// The company's identity provider.
    Oidc,
    /// An API token.
    Token,
    /// The command line, on a machine that holds the store's credentials.
    Cli,
}

impl SignIn {
    pub fn as_str(self) -> &'static str {
        match self {
            SignIn::Password => "password",
            SignIn::Oidc => "oidc",
            SignIn::Token => "token",
            SignIn::Cli => "cli",
        }
    }
}

/// Who made a change: what the audit trail records beside it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// A user or token name.
    pub name: String,
    pub method: SignIn,
}

impl Actor {
    pub fn cli(name: &str) -> Actor {
        Actor { name: name.to_string(), method: SignIn::Cli }
    }
}

/// Who is signed in, as the pages show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Me {
    pub name: String,
    pub role: Role,
    pub method: SignIn,
}
/// Where an account comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum AccountSource {
    /// Made with `northwind-ops user add`; signs in with a password.
    Local,
    /// Recorded at its first sign-in through the identity provider.
    Oidc,
}

/// An account as the admin API shows it: no password hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub name: String,
    pub role: Role,
    pub source: AccountSource,
    pub disabled: bool,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
}

/// A token as the admin API shows it: no secret, no hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub name: String,
    pub role: Role,
    pub created_by: String,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    pub revoked: bool,
}

/// `POST /api/admin/users`: a local account, signing in with this password.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewAccount {
    pub name: String,
    pub role: Role,
    /// At least 12 characters, no control characters.
    pub password: String,
}

/// `POST /api/admin/users/{name}/role`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RoleChange {
    pub role: Role,
}

/// `POST /api/admin/tokens`.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
}

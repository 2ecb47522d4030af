//! The order model shared by the server, the JSON API and the pages.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Page size when a request names none, and the most any request gets.
pub const DEFAULT_PAGE_SIZE: u32 = 25;
pub const MAX_PAGE_SIZE: u32 = 100;
/// The widest range of days one PENDING query may cover.
pub const MAX_DAYS: u32 = 31;
/// Longest order or customer id accepted.
pub const MAX_ID_LEN: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Pending,
    Confirmed,
    Shipped,
    Delivered,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 5] =
        [Status::Pending, Status::Confirmed, Status::Shipped, Status::Delivered, Status::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Confirmed => "CONFIRMED",
            Status::Shipped => "SHIPPED",
            Status::Delivered => "DELIVERED",
            Status::Cancelled => "CANCELLED",
        }
    }

    /// The statuses an order in this status may move to:
    /// PENDING→CONFIRMED→SHIPPED→DELIVERED, and PENDING or CONFIRMED→CANCELLED.
    pub fn next(self) -> &'static [Status] {
        match self {
            Status::Pending => &[Status::Confirmed, Status::Cancelled],
            Status::Confirmed => &[Status::Shipped, Status::Cancelled],
            Status::Shipped => &[Status::Delivered],
            Status::Delivered | Status::Cancelled => &[],
        }
    }

    pub fn can_become(self, to: Status) -> bool {
        self.next().contains(&to)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL.into_iter().find(|status| status.as_str() == s).ok_or_else(|| {
            format!("unknown status {s:?}: expected PENDING, CONFIRMED, SHIPPED, DELIVERED or CANCELLED")
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineItem {
    pub sku: String,
    pub name: String,
    pub quantity: u32,
    /// Minor units of the order's currency (cents for USD).
    pub unit_price: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    pub order_id: String,
    pub customer_id: String,
    pub status: Status,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "iso_millis")]
    pub updated_at: DateTime<Utc>,
    /// Minor units of `currency`.
    pub total: i64,
    pub currency: String,
    pub items: Vec<LineItem>,
    pub shipping_city: String,
    pub shipping_country: String,
}

impl Order {
    pub fn item_count(&self) -> u32 {
        self.items.iter().map(|item| item.quantity).sum()
    }
}

/// What the dashboard shows of a PENDING order: exactly what the operations
/// index projects, so the list never needs the full item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingOrder {
    pub order_id: String,
    pub customer_id: String,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    pub total: i64,
    pub currency: String,
    pub item_count: u32,
    pub shipping_city: String,
    pub shipping_country: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPage {
    pub orders: Vec<PendingOrder>,
    pub next: Option<String>,
    /// Index items the store read to answer this page.
    pub items_read: u64,
    /// The newest day of the query, and how many days back it reaches.
    pub date: NaiveDate,
    pub days: u32,
    /// Server time the page was read at: ages are computed from it, never
    /// from a clock read while rendering.
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderPage {
    pub orders: Vec<Order>,
    pub next: Option<String>,
}

/// A day's counts, as the stream's counters hold them: the one type the
/// service, the API, the live events and the pages share. The counters are
/// signed in the store (a repair may pass through negative values); they are
/// clamped to zero once, where they are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DayCounts {
    pub date: NaiveDate,
    /// Whether the stream consumer has counted anything for this day; when
    /// not, every figure is unknown rather than zero.
    pub counted: bool,
    /// PENDING orders of the day now.
    pub pending: u64,
    /// The same, per write shard (shard 0 first).
    pub per_shard: Vec<u64>,
    /// Orders created that day.
    pub created: u64,
    /// Orders created that day, by the status they are in now.
    pub per_status: BTreeMap<Status, u64>,
}

/// The headline figures of one day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub counts: DayCounts,
    #[serde(default, with = "iso_millis::option")]
    pub oldest_pending: Option<DateTime<Utc>>,
}

/// Everything the dashboard shows, read in one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    pub page: PendingPage,
    pub summary: Summary,
    /// The chart's data, when the stream's counters are kept.
    pub activity: Option<Activity>,
    /// Milliseconds the stream consumer was behind at its last batch.
    pub behind_ms: Option<i64>,
    pub stuck_after_minutes: u32,
}

/// Where a search for an id leads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "camelCase")]
pub enum SearchHit {
    Order(String),
    Customer(String),
}

/// A day's counts as pushed to the live dashboards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveCounters {
    #[serde(flatten)]
    pub counts: DayCounts,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// How far the consumer was behind the stream at its last batch.
    pub behind_ms: Option<i64>,
}

/// What `GET /api/live` pushes, one JSON object per server-sent event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum LiveEvent {
    Counters(LiveCounters),
    #[serde(rename_all = "camelCase")]
    Entered {
        date: NaiveDate,
        order: PendingOrder,
    },
    #[serde(rename_all = "camelCase")]
    Left {
        date: NaiveDate,
        order_id: String,
    },
    /// The day's orders changed in ways this server saw only as a number
    /// (another instance applied them): page one is to be read again.
    #[serde(rename_all = "camelCase")]
    Changed {
        date: NaiveDate,
    },
    /// Events were missed: read the page again.
    Resync,
}

impl LiveEvent {
    pub fn date(&self) -> Option<NaiveDate> {
        match self {
            LiveEvent::Counters(c) => Some(c.counts.date),
            LiveEvent::Entered { date, .. } | LiveEvent::Left { date, .. } | LiveEvent::Changed { date } => Some(*date),
            LiveEvent::Resync => None,
        }
    }
}

/// A day's activity in ten-minute buckets, for the chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Orders created in each bucket.
    pub created: Vec<i64>,
    /// PENDING orders of the day at the end of each bucket.
    pub backlog: Vec<i64>,
}

/// `GET /api/capacity` and the capacity page: one day's consumed capacity,
/// throttles and GSI2 shard heat, with the shard planner's and the
/// capacity-mode advisor's tables over them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    pub date: NaiveDate,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// The capacity source: `stream` (write units priced from the orders
    /// table's stream, every writer) or `cloudwatch` (DynamoDB's own).
    pub source: String,
    /// Per table and index, the table first.
    pub resources: Vec<ResourceUnits>,
    /// Throttled attempts by reason and where, most first.
    pub throttles: Vec<ThrottleCount>,
    pub heat: ShardHeat,
    /// The planner's table for the day's peak order rate, when there was one.
    pub plan: Option<ShardPlan>,
    /// The advisor's verdict per table and index over its window.
    pub advice: Vec<ModeAdvice>,
    /// The window the advice weighs, and how much of it was observed.
    pub advice_window: AdviceWindow,
    /// The partition keys written most during the day, per table and index
    /// (from the stream), most first.
    pub hot_keys: Vec<HotKeyMinute>,
    /// This instance's calls, per second, over the last five minutes (today
    /// only; other instances are counted in the minutes once they flush).
    pub recent: Vec<RecentUnits>,
}

/// Units one table or index consumed during the day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUnits {
    /// `orders`, or `orders/GSI2` for an index.
    pub resource: String,
    pub table: String,
    pub index: Option<String>,
    /// The minutes with any units, in order.
    pub minutes: Vec<UnitsMinute>,
    pub read_total: f64,
    pub write_total: f64,
    /// Where the read and the write figures come from: `stream`,
    /// `CloudWatch` or `this app's calls`.
    pub read_source: String,
    pub write_source: String,
}

/// A partition key's write units in one minute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HotKeyMinute {
    pub resource: String,
    pub key: String,
    pub minute: u16,
    pub units: u64,
    /// Of one partition's 1,000 write units a second, averaged over the minute.
    pub share: f64,
}

/// The advisor's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdviceWindow {
    pub source: String,
    pub days: u32,
    #[serde(with = "iso_millis")]
    pub start: DateTime<Utc>,
    pub minutes: usize,
    pub observed_minutes: usize,
    /// Observed minutes over the window's, 0 to 1.
    pub coverage: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitsMinute {
    /// Minutes since midnight UTC, 0 to 1439.
    pub minute: u16,
    pub read: f64,
    pub write: f64,
}

/// Throttled attempts (retried ones included) for one reason at one place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThrottleCount {
    /// As DynamoDB names it, e.g. `IndexWriteKeyRangeThroughputExceeded`.
    pub reason: String,
    /// The index, `table`, `<table> or its indexes` (a transaction), or
    /// `not named`.
    pub place: String,
    /// The resource as DynamoDB named it, without its ARN's account and region.
    pub resource: String,
    pub total: u64,
    /// (minute of the day, attempts), the minutes with any.
    pub minutes: Vec<(u16, u64)>,
}

/// Writes to each GSI2 shard per minute of the day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardHeat {
    pub shards: u32,
    /// The minutes with any writes, each with one count per shard.
    pub minutes: Vec<HeatMinute>,
    /// Write units one index write costs (the planner's entry size).
    pub units_per_write: u32,
    /// Write units a second one partition serves.
    pub partition_limit: f64,
    /// The share of the limit above which the page warns.
    pub warn_above: f64,
    pub hottest: Option<HotShard>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeatMinute {
    pub minute: u16,
    pub writes: Vec<u64>,
}

/// The shard-minute with the most writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HotShard {
    pub minute: u16,
    pub shard: u32,
    pub writes: u64,
    /// Averaged over the minute: a second within it may have been hotter.
    pub units_per_second: f64,
    /// `units_per_second` over the partition limit.
    pub utilisation: f64,
    pub warning: bool,
}

/// The shard planner's arithmetic for an observed peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardPlan {
    /// Orders entering PENDING in the busiest minute, per second.
    pub peak_orders_per_second: f64,
    pub peak_minute: u16,
    pub index_item_bytes: u32,
    pub shards: u32,
    /// More shards than the app allows would be needed.
    pub capped: bool,
    /// The day's shard count as recorded.
    pub current_shards: u32,
    pub steps: Vec<String>,
}

/// The capacity-mode advisor's verdict on one table or index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeAdvice {
    pub resource: String,
    /// `on-demand`, `provisioned`, or `none` (not enough history).
    pub mode: String,
    /// `aws application-autoscaling put-scheduled-action --cli-input-json`
    /// documents provisioned needs (a floor raise before a burst and its
    /// setting back), pretty-printed.
    pub scheduled_actions: Vec<String>,
    pub minutes: usize,
    pub on_demand_monthly: f64,
    pub provisioned_monthly: f64,
    pub read: AccessUse,
    pub write: AccessUse,
    pub reason: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessUse {
    pub average_per_second: f64,
    pub peak_per_second: f64,
    /// Of the capacity auto scaling would have provisioned, 0 to 1.
    pub average_utilisation: f64,
}

/// Per-second units of one table or index over the last five minutes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentUnits {
    pub resource: String,
    /// Oldest second first.
    pub read: Vec<f64>,
    pub write: Vec<f64>,
}

/// Query parameters of the PENDING list, as they arrive: parsed and checked
/// on the server, so every bad value gets a message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingParams {
    /// Newest day, `YYYY-MM-DD` (UTC); today when absent.
    pub date: Option<String>,
    /// How many days back from `date` to include, 1 to 31.
    pub days: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
    /// `1`: only orders PENDING longer than the stuck threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<String>,
    /// A two-letter shipping country, e.g. `NO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The smallest order total, in the currency's units (e.g. `150` or `150.50`).
    #[serde(default, rename = "minTotal", skip_serializing_if = "Option::is_none")]
    pub min_total: Option<String>,
    /// One customer's orders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageParams {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// A new order, as `POST /api/orders` takes it. The total is computed from
/// the line items, never taken from the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewOrder {
    /// Chosen by the server when absent.
    pub order_id: Option<String>,
    pub customer_id: String,
    /// PENDING when absent.
    pub status: Option<Status>,
    /// Now when absent; imports may give an earlier time.
    pub created_at: Option<String>,
    pub currency: String,
    pub items: Vec<LineItem>,
    pub shipping_city: String,
    pub shipping_country: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusChange {
    pub from: Status,
    pub to: Status,
    /// Why, in the words of whoever made the change (kept in the audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a signed-in person or script may do, from least to most: each role
/// may do everything the ones before it may, so the derived order is the
/// privilege order and "at least ops" is a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The PENDING dashboard, its counters, the live stream, capacity figures.
    Viewer,
    /// And orders and customer histories (personal data); cancelling an order.
    Support,
    /// And every status change, creating orders.
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
    /// Users, tokens, and the audit trail of everyone.
    Administer,
}

impl Permission {
    pub fn least_role(self) -> Role {
        match self {
            Permission::ViewOperations => Role::Viewer,
            Permission::ViewOrders | Permission::CancelOrder => Role::Support,
            Permission::ChangeOrders => Role::Ops,
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
pub struct Me {
    pub name: String,
    pub role: Role,
    pub method: SignIn,
}

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

/// Where a bulk operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Where an account comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountSource {
    /// Made with `northwind-ops user add`; signs in with a password.
    Local,
    /// Recorded at its first sign-in through the identity provider.
    Oidc,
}

/// An account as the admin API shows it: no password hash.
#[derive(Clone, Debug, Serialize)]
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
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenView {
    pub name: String,
    pub role: Role,
    pub created_by: String,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    pub revoked: bool,
}

/// `POST /api/admin/tokens`.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
}

/// Which figures reconciliation has verified, and when: read from the
/// counter items, so every instance says the same.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// `pending` and `perShard`.
    pub pending: Option<Checked>,
    /// `created`, `perStatus` and `perMinute.created` (`reconcile --full`).
    pub daily: Option<Checked>,
    /// `perMinute.entered` and `perMinute.left`.
    pub per_minute: &'static str,
}

/// A reconciliation's verdict.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checked {
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
    /// Counter minus what it should have been (`pending`, or `created`).
    pub drift: i64,
    /// Whether anything was off, and so repaired.
    pub repaired: bool,
}

/// `GET /api/metrics/pending`: a day's counters and how fresh they are.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingMetrics {
    #[serde(flatten)]
    pub counts: DayCounts,
    pub per_minute: PerMinute,
    pub freshness: Freshness,
    pub verification: Verification,
    pub live: LiveFigures,
}

/// This instance's live connections and what following other instances'
/// changes has cost it (see `follower`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveFigures {
    pub connections: usize,
    pub watched_days: usize,
    /// Strongly consistent reads of a day's `version` since start.
    pub version_reads: u64,
    /// The read units they consumed, as the store reported them.
    pub read_units: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PerMinute {
    pub created: Vec<i64>,
    pub entered: Vec<i64>,
    pub left: Vec<i64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Freshness {
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    pub consumer_running: bool,
    #[serde(with = "iso_millis::option")]
    pub last_applied_at: Option<DateTime<Utc>>,
    pub behind_ms: Option<i64>,
    pub records_applied: u64,
    pub bad_records: u64,
    /// When the consumer last failed a pass; why is in the server's log.
    #[serde(with = "iso_millis::option")]
    pub last_error_at: Option<DateTime<Utc>>,
}

/// What a failed request was, as the API's `kind` and the pages' views
/// need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    BadRequest,
    BadCursor,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    TooManyRequests,
    Unavailable,
    Internal,
}

impl ErrorKind {
    /// The kind an HTTP error status stands for: the one place a status is
    /// read as a kind (the API's plain answers, the pages' server-function
    /// failures, and every `ApiError` but a bad cursor, which is a 400 of
    /// its own kind).
    pub fn of_status(status: u16) -> ErrorKind {
        match status {
            401 => ErrorKind::Unauthorized,
            403 | 421 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            429 => ErrorKind::TooManyRequests,
            408 | 503 => ErrorKind::Unavailable,
            400..=499 => ErrorKind::BadRequest,
            _ => ErrorKind::Internal,
        }
    }
}

/// Why a value a client sent is refused: one variant per rule, so a
/// caller can tell them apart and each message is written once. Every
/// variant names the field it is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("{field} is empty")]
    Empty { field: &'static str },
    #[error("{field} is longer than {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} {value:?} has the character {bad:?}: only letters, digits, '-' and '_' are allowed")]
    IdCharacter { field: &'static str, value: String, bad: char },
    #[error("{field} must be 1 to {max} characters")]
    TextLength { field: &'static str, max: usize },
    /// Control and direction-override characters can make a page lie about
    /// what it shows (reverse an order id, say).
    #[error("{field} has the character U+{code:04X}: control and text-direction characters are not allowed")]
    Character { field: &'static str, code: u32 },
    #[error(
        "{field} {value:?} must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    Name { field: &'static str, value: String },
    #[error("token name {0:?} may not contain '.'")]
    TokenName(String),
    #[error("a password needs at least {0} characters")]
    ShortPassword(usize),
    /// No sign-in form can type one: a line break or tab from a pasted or
    /// piped text would make an account nobody can use.
    #[error("a password cannot hold control characters: character {at} is {what}; give the password alone on one line")]
    PasswordControl { at: usize, what: String },
    #[error("a new order starts PENDING, not {0}")]
    NotPending(Status),
    #[error("{0}")]
    Timestamp(String),
    #[error("createdAt {0} is in the future")]
    Future(String),
    #[error("createdAt {at} is more than {days} day in the past")]
    TooOld { at: String, days: i64 },
    #[error("currency {0:?} is not a three-letter code such as USD")]
    Currency(String),
    #[error("an order has 1 to {0} line items")]
    ItemCount(usize),
    #[error("quantity of {sku} must be 1 to {max}")]
    Quantity { sku: String, max: u32 },
    #[error("unitPrice of {0} is negative")]
    NegativePrice(String),
    #[error("the order total is too large")]
    TotalTooLarge,
}

/// Checks an order or customer id: 1 to 64 letters, digits, `-` or `_`.
/// Anything else (in particular `#`, the key separator) never reaches a query.
pub fn validate_id(field: &'static str, id: &str) -> Result<(), Invalid> {
    if id.is_empty() {
        return Err(Invalid::Empty { field });
    }
    if id.len() > MAX_ID_LEN {
        return Err(Invalid::TooLong { field, max: MAX_ID_LEN });
    }
    if let Some(bad) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(Invalid::IdCharacter { field, value: id.to_string(), bad });
    }
    Ok(())
}

/// Percent-encodes everything but unreserved characters and `/`, for a path
/// carried in a query value (`/login?next=...`).
pub fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Formats an amount in minor units, e.g. 12345 USD as "USD 123.45".
pub fn format_money(minor: i64, currency: &str) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!("{currency} {sign}{}.{:02}", abs / 100, abs % 100)
}

/// Formats the time between two instants as "42s", "17m", "3h 05m" or "2d 4h".
pub fn format_age(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let secs = (to - from).num_seconds().max(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Timestamps are UTC ISO-8601 with exactly three fractional digits, so that
/// their strings sort as their instants do: the sort keys depend on it.
pub mod iso_millis {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn format(at: &DateTime<Utc>) -> String {
        at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    pub fn parse(s: &str) -> Result<DateTime<Utc>, String> {
        DateTime::parse_from_rfc3339(s)
            .map(|at| at.with_timezone(&Utc))
            .map_err(|e| format!("{s:?} is not an ISO-8601 timestamp: {e}"))
    }

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(at))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => s.serialize_some(&format(at)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
            Option::<String>::deserialize(d)?.map(|s| parse(&s).map_err(serde::de::Error::custom)).transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_read_as_one_kind() {
        let cases = [
            (400, ErrorKind::BadRequest),
            (401, ErrorKind::Unauthorized),
            (403, ErrorKind::Forbidden),
            (404, ErrorKind::NotFound),
            (405, ErrorKind::BadRequest),
            (408, ErrorKind::Unavailable),
            (409, ErrorKind::Conflict),
            (413, ErrorKind::BadRequest),
            (415, ErrorKind::BadRequest),
            (421, ErrorKind::Forbidden),
            (429, ErrorKind::TooManyRequests),
            (500, ErrorKind::Internal),
            (503, ErrorKind::Unavailable),
        ];
        for (status, kind) in cases {
            assert_eq!(ErrorKind::of_status(status), kind, "{status}");
        }
    }

    #[test]
    fn a_changed_event_names_its_day() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).unwrap();
        let event = LiveEvent::Changed { date: day };
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(json, r#"{"type":"changed","date":"2026-11-29"}"#);
        assert_eq!(serde_json::from_str::<LiveEvent>(&json).unwrap(), event);
        assert_eq!(event.date(), Some(day));
    }

    #[test]
    fn status_round_trips_and_rejects_unknown() {
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
        }
        assert!("pending".parse::<Status>().is_err());
    }

    #[test]
    fn roles_are_ordered_by_privilege_and_round_trip() {
        assert!(Role::Viewer < Role::Support && Role::Support < Role::Ops && Role::Ops < Role::Admin);
        assert_eq!(Role::ALL.iter().max(), Some(&Role::Admin));
        for role in Role::ALL {
            assert_eq!(role.to_string().parse::<Role>(), Ok(role));
            assert_eq!(serde_json::to_string(&role).unwrap(), format!("\"{role}\""));
            assert_eq!(serde_json::from_str::<Role>(&format!("\"{role}\"")).unwrap(), role);
        }
        let err = "Ops".parse::<Role>().unwrap_err();
        assert!(err.contains("\"Ops\"") && err.contains("viewer, support, ops or admin"), "{err}");
        assert!("".parse::<Role>().is_err());
    }

    #[test]
    fn transitions_follow_the_order_lifecycle() {
        assert!(Status::Pending.can_become(Status::Confirmed));
        assert!(Status::Pending.can_become(Status::Cancelled));
        assert!(Status::Confirmed.can_become(Status::Shipped));
        assert!(Status::Confirmed.can_become(Status::Cancelled));
        assert!(Status::Shipped.can_become(Status::Delivered));
        assert!(!Status::Shipped.can_become(Status::Cancelled));
        assert!(!Status::Delivered.can_become(Status::Pending));
        assert!(!Status::Pending.can_become(Status::Pending));
    }

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("order id", "o-123_ABC").is_ok());
        assert!(validate_id("order id", "").is_err());
        assert!(validate_id("order id", "a#b").unwrap_err().to_string().contains("'#'"));
        assert!(validate_id("order id", "ä").is_err());
        assert!(validate_id("order id", &"x".repeat(65)).is_err());
        assert!(validate_id("order id", &"x".repeat(64)).is_ok());
    }

    #[test]
    fn timestamps_have_millisecond_precision_and_sort_as_strings() {
        let a = iso_millis::parse("2026-11-29T08:00:00Z").unwrap();
        let b = iso_millis::parse("2026-11-29T08:00:00.5+00:00").unwrap();
        assert_eq!(iso_millis::format(&a), "2026-11-29T08:00:00.000Z");
        assert_eq!(iso_millis::format(&b), "2026-11-29T08:00:00.500Z");
        assert!(iso_millis::format(&a) < iso_millis::format(&b));
        assert!(iso_millis::parse("yesterday").is_err());
    }

    #[test]
    fn money_and_ages_format_for_people() {
        assert_eq!(format_money(12345, "USD"), "USD 123.45");
        assert_eq!(format_money(-5, "EUR"), "EUR -0.05");
        let t0 = iso_millis::parse("2026-11-29T08:00:00Z").unwrap();
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        assert_eq!(format_age(t0, at(42)), "42s");
        assert_eq!(format_age(t0, at(17 * 60 + 5)), "17m");
        assert_eq!(format_age(t0, at(3 * 3600 + 5 * 60)), "3h 05m");
        assert_eq!(format_age(t0, at(2 * 86_400 + 4 * 3600)), "2d 4h");
        assert_eq!(format_age(at(10), t0), "0s");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn ids_are_exactly_the_allowed_alphabet(id in ".{0,80}") {
                let allowed = !id.is_empty()
                    && id.len() <= MAX_ID_LEN
                    && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                prop_assert_eq!(validate_id("id", &id).is_ok(), allowed);
            }

            #[test]
            fn no_text_makes_timestamp_parsing_panic(text in ".{0,60}") {
                let _ = iso_millis::parse(&text);
            }

            #[test]
            fn timestamps_round_trip_at_millisecond_precision(millis in 946_684_800_000i64..4_102_444_800_000i64) {
                let at = DateTime::<Utc>::from_timestamp_millis(millis).unwrap();
                prop_assert_eq!(iso_millis::parse(&iso_millis::format(&at)), Ok(at));
            }
        }
    }
}

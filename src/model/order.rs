//! Orders as the API and the pages show them, and the changes made to them.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LineItem {
    pub sku: String,
    pub name: String,
    pub quantity: u32,
    /// Minor units of the order's currency (cents for USD).
    pub unit_price: i64,
}

/// An order's status as stored: one of the five this console knows, or
/// the text another writer put there, kept as it is. An order in a status
/// this console does not know is shown with it, and offered no change.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    Known(Status),
    Other(String),
}

impl OrderStatus {
    pub fn known(&self) -> Option<Status> {
        match self {
            OrderStatus::Known(status) => Some(*status),
            OrderStatus::Other(_) => None,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            OrderStatus::Known(status) => status.as_str(),
            OrderStatus::Other(text) => text,
        }
    }

    /// The statuses it may move to: none from a status this console does
    /// not know (what another writer's status allows is not ours to say).
    pub fn next(&self) -> &'static [Status] {
        self.known().map_or(&[], Status::next)
    }
}

impl From<Status> for OrderStatus {
    fn from(status: Status) -> Self {
        OrderStatus::Known(status)
    }
}

impl From<&str> for OrderStatus {
    fn from(text: &str) -> Self {
        text.parse().map_or_else(|_| OrderStatus::Other(text.to_string()), OrderStatus::Known)
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for OrderStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// In the API a status is its text: one of the five, or another writer's as it is.
#[cfg(feature = "ssr")]
impl utoipa::PartialSchema for OrderStatus {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "PENDING, CONFIRMED, SHIPPED, DELIVERED or CANCELLED; a status another writer stored that \
                 this console does not know is given as it is (and the order is offered no change)",
            ))
            .examples(["PENDING"])
            .into()
    }
}

#[cfg(feature = "ssr")]
impl utoipa::ToSchema for OrderStatus {}

impl<'de> Deserialize<'de> for OrderStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(OrderStatus::from(String::deserialize(d)?.as_str()))
    }
}

/// What is wrong with a field of an item as read: the app writes every
/// field of an order, but other writers (the order service, batch jobs,
/// migrations, a hand edit) may not. Drift kinds (`stream::quality`) are
/// these kinds, per field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum ProblemKind {
    /// The attribute is absent.
    Missing,
    /// It holds another DynamoDB type than the app writes (a string where a
    /// number is, a list where a map is).
    Mistyped,
    /// A status this console does not know.
    UnknownStatus,
    /// A timestamp that reads, but not in the sort keys' form (UTC,
    /// exactly three fractional digits): it sorts apart from the others.
    NotKeyForm,
    /// A GSI1 or GSI2 sort key that is not `<createdAt>#<orderId>`.
    SortKey,
    /// A GSI2 key naming a shard beyond the day's recorded shard count:
    /// readers never look there, so the order is on no PENDING list.
    ShardBeyondCount,
    /// A GSI2 key whose day is not the day the order was created.
    KeyDay,
    /// A value of the right type that is not usable as it is (a total that
    /// is not whole minor units, an empty line item list, a key that names
    /// another order or customer than the item).
    Invalid,
}

impl ProblemKind {
    pub const ALL: [ProblemKind; 8] = [
        ProblemKind::Missing,
        ProblemKind::Mistyped,
        ProblemKind::UnknownStatus,
        ProblemKind::NotKeyForm,
        ProblemKind::SortKey,
        ProblemKind::ShardBeyondCount,
        ProblemKind::KeyDay,
        ProblemKind::Invalid,
    ];

    /// The name the API, the metrics and the metrics table use.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Missing => "missing",
            ProblemKind::Mistyped => "mistyped",
            ProblemKind::UnknownStatus => "unknownStatus",
            ProblemKind::NotKeyForm => "notKeyForm",
            ProblemKind::SortKey => "sortKey",
            ProblemKind::ShardBeyondCount => "shardBeyondCount",
            ProblemKind::KeyDay => "keyDay",
            ProblemKind::Invalid => "invalid",
        }
    }

    /// What the kind means, for a heading.
    pub fn describe(self) -> &'static str {
        match self {
            ProblemKind::Missing => "missing field",
            ProblemKind::Mistyped => "mistyped field",
            ProblemKind::UnknownStatus => "status this console does not know",
            ProblemKind::NotKeyForm => "timestamp not in the sort keys' form",
            ProblemKind::SortKey => "index sort key not <createdAt>#<orderId>",
            ProblemKind::ShardBeyondCount => "GSI2 key on a shard beyond the day's shard count",
            ProblemKind::KeyDay => "GSI2 key on another day than createdAt's",
            ProblemKind::Invalid => "value not usable as it is",
        }
    }
}

impl FromStr for ProblemKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProblemKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| format!("unknown problem kind {s:?}"))
    }
}

/// One thing an item did not hold as this console writes it: the field,
/// the kind, and why, in our words ("total is missing", "total is a string
/// (\"12.50\"), not a number").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub field: String,
    pub kind: ProblemKind,
    pub why: String,
}

/// Problems as one line: what an export's `problems` column holds.
pub fn problems_text(problems: &[Problem]) -> String {
    problems.iter().map(|p| p.why.as_str()).collect::<Vec<_>>().join("; ")
}

/// An order as read from the table. Every field but the id may be absent
/// (`None`): another writer left it out, or wrote something that cannot be
/// read as it; `problems` says which and why. Nothing absent is ever shown
/// as a made-up value (a 0 total). The app itself writes every field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Order {
    pub order_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<OrderStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "iso_millis::option")]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "iso_millis::option")]
    pub updated_at: Option<DateTime<Utc>>,
    /// Minor units of `currency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// The line items that could be read (a line that could not is a problem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<LineItem>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_country: Option<String>,
    /// What could not be read, field by field. Never written to the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

impl Order {
    /// Units ordered, when every line item could be read.
    pub fn item_count(&self) -> Option<u32> {
        if self.problems.iter().any(|p| p.field == "items") {
            return None;
        }
        self.items.as_ref().map(|items| items.iter().map(|item| item.quantity).sum())
    }

    /// Its status when this console knows it.
    pub fn known_status(&self) -> Option<Status> {
        self.status.as_ref().and_then(OrderStatus::known)
    }

    /// The problems of one field.
    pub fn problems_of<'a>(&'a self, field: &'a str) -> impl Iterator<Item = &'a Problem> + 'a {
        self.problems.iter().filter(move |p| p.field == field)
    }
}

/// What the dashboard shows of a PENDING order: exactly what the operations
/// index projects, so the list never needs the full item. As for `Order`,
/// what could not be read is absent and named in `problems`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingOrder {
    pub order_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_id: Option<String>,
    /// From `createdAt`, or from the index's sort key when that is all there is.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "iso_millis::option")]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_country: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingPage {
    pub orders: Vec<PendingOrder>,
    pub next: Option<String>,
    /// Index items the store read to answer this page.
    pub items_read: u64,
    /// The newest day of the query, and how many days back it reaches.
    #[serde(with = "day")]
    pub date: NaiveDate,
    pub days: u32,
    /// Server time the page was read at: ages are computed from it, never
    /// from a clock read while rendering.
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrderPage {
    pub orders: Vec<Order>,
    pub next: Option<String>,
}
/// Where a search for an id leads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "camelCase")]
pub enum SearchHit {
    Order(String),
    Customer(String),
}
/// A new order, as `POST /api/orders` takes it. The total is computed from
/// the line items, never taken from the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusChange {
    pub from: Status,
    pub to: Status,
    /// Why, in the words of whoever made the change (kept in the audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

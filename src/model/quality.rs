//! The data quality of a day, from the orders table's stream: items that do
//! not hold what the access patterns need (schema drift), and how large the
//! items written are (item-size creep).

use super::*;

/// `GET /api/quality?date=` and the capacity page's "Data quality" panel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct QualityReport {
    #[serde(with = "day")]
    pub date: NaiveDate,
    #[serde(with = "iso_millis")]
    pub as_of: DateTime<Utc>,
    /// Items written that day, by any writer (each put or update's new
    /// image), and how many of them drifted in at least one way.
    pub items_written: u64,
    pub items_drifted: u64,
    /// Per kind and field, most items first.
    pub drift: Vec<DriftCount>,
    pub size: SizeFigures,
    /// The day before's p95, to compare with.
    pub previous_p95: Option<u64>,
    /// Said when the p95 grew over the day before's: creep shows here
    /// before it is an incident.
    pub growth: Option<String>,
}

/// Items of one drift kind and field, and the first keys seen of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DriftCount {
    pub kind: ProblemKind,
    pub field: String,
    pub items: u64,
    pub samples: Vec<DriftSample>,
}

/// One item seen drifting: its table key, the order it is when the key is
/// an order's (a page links to it), and when it was written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DriftSample {
    pub key: String,
    pub order_id: Option<String>,
    #[serde(with = "iso_millis")]
    pub at: DateTime<Utc>,
}

/// The sizes of the items written that day (bytes, as DynamoDB sizes them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SizeFigures {
    /// Items written (new images).
    pub items: u64,
    /// Percentiles from a histogram of 8 buckets per doubling: each is the
    /// upper bound of its bucket (at most 9% above the true figure), never
    /// above the largest item seen.
    pub p50: Option<u64>,
    pub p95: Option<u64>,
    pub max: Option<u64>,
    pub mean: Option<u64>,
    /// Items over one write unit (1 KB: each write costs 2 or more) and
    /// over one read unit (4 KB: each strongly consistent read 2 or more).
    pub over_write_unit: u64,
    pub over_read_unit: u64,
    /// The largest items written, largest first.
    pub largest: Vec<LargeItem>,
    /// Writes of the table (puts, updates and deletes of any writer).
    pub writes: u64,
    /// Per table and index: the write units it took, and per write of the
    /// table on average (GSI1 projects ALL: a large item costs it as much).
    pub per_write: Vec<WriteCost>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LargeItem {
    pub key: String,
    pub order_id: Option<String>,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteCost {
    /// `<table>` or `<table>/<index>`.
    pub resource: String,
    pub units: u64,
    pub per_write: f64,
}

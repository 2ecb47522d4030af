//! The GSI2 shard planner: how many write shards the PENDING index needs for
//! a peak order rate, with the arithmetic shown line by line, and what that
//! many shards cost a reader of the list's first page.
//!
//! DynamoDB rules used (Amazon DynamoDB Developer Guide):
//!
//! - "DynamoDB item sizes and formats": an item's size is the sum of its
//!   attribute names and values; a string is its UTF-8 bytes, a number about
//!   1 byte per two significant digits plus 1. The 100 bytes per item that
//!   page (and "Storage considerations for Global Secondary Indexes") add are
//!   storage overhead, for storage billing only: capacity units are computed
//!   without them.
//! - "Global Secondary Indexes", section "Provisioned throughput
//!   considerations": an index entry consists of the table's key, the index
//!   key and the projected attributes. Defining the index key (an order
//!   entering PENDING) costs one index write, deleting it (leaving PENDING)
//!   another, each one write unit per 1 KB of the entry, rounded up. A query
//!   reads the summed size of the entries it returns, rounded up to 4 KB, at
//!   half a read unit per 4 KB (index reads are eventually consistent).
//! - "DynamoDB burst and adaptive capacity": one partition serves at most
//!   3,000 read units and 1,000 write units a second.

use super::costs::{self, CounterLoad, OrderWrites};
use crate::model::{Order, Writer};
use crate::server::rules::{PARTITION_READ_UNITS, PARTITION_WRITE_UNITS};
use crate::server::store::keys::GSI2;
use crate::server::stream::pricing::Layout;
use serde::Serialize;

/// The most shards the app accepts (`--shards`, 1 to 100).
pub const MAX_SHARDS: u32 = 100;
/// Spare capacity kept on each partition at peak, as a fraction of the load.
pub const DEFAULT_HEADROOM: f64 = 0.5;
/// Index writes per order: its entry is put on entering PENDING and deleted
/// on leaving.
pub const WRITES_PER_ORDER: f64 = 2.0;
/// The PENDING list's default page size (`model::DEFAULT_PAGE_SIZE`).
pub const DEFAULT_PAGE_SIZE: u32 = 25;
/// The PENDING merge (`store::pending`), once it knows a day's pace, reads
/// every shard over one key range sized to hold the page plus this many
/// standard deviations of it: page + 2·sqrt(page) items in all, in one
/// round (BENCHMARKS.md, table 2). The plan models readers in that steady
/// state.
pub const READ_SPREAD: f64 = 2.0;
/// Storage overhead of each index entry: storage billing only, not capacity.
pub const INDEX_ENTRY_STORAGE_OVERHEAD: u32 = 100;

const WRITE_UNIT_BYTES: u32 = 1024;
const READ_UNIT_BYTES: u64 = 4096;
/// Half a read unit per 4 KB: index queries are eventually consistent.
const EVENTUALLY_CONSISTENT_UNITS: f64 = 0.5;
/// DynamoDB's largest item, so the largest possible index entry.
const MAX_ITEM_BYTES: u32 = 400 * 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct PlanInput {
    pub peak_orders_per_second: f64,
    /// Size of one GSI2 entry, in bytes (see `gsi2_entry_bytes`).
    pub index_item_bytes: u32,
    /// Spare capacity kept on each partition at peak, as a fraction of the
    /// peak load: 0.5 means a partition may take the peak plus half again.
    pub headroom: f64,
    pub writes_per_order: f64,
    /// Whether the index writes come from transactions, which DynamoDB
    /// charges twice (the app's do: each change is written with its audit
    /// record). The throttle proxy charges them the same way.
    pub transactional: bool,
    pub page_size: u32,
    pub partition_write_limit: f64,
    pub partition_read_limit: f64,
}

impl PlanInput {
    /// A peak and an entry size, everything else at the app's defaults.
    pub fn new(peak_orders_per_second: f64, index_item_bytes: u32) -> Self {
        Self {
            peak_orders_per_second,
            index_item_bytes,
            headroom: DEFAULT_HEADROOM,
            writes_per_order: WRITES_PER_ORDER,
            transactional: false,
            page_size: DEFAULT_PAGE_SIZE,
            partition_write_limit: PARTITION_WRITE_UNITS,
            partition_read_limit: PARTITION_READ_UNITS,
        }
    }

    /// As `writer` writes: in transactions through this console, plain
    /// writes from another service.
    pub fn for_writer(peak_orders_per_second: f64, index_item_bytes: u32, writer: Writer) -> Self {
        Self { transactional: writer == Writer::Console, ..Self::new(peak_orders_per_second, index_item_bytes) }
    }

    fn validate(&self) -> Result<(), PlanError> {
        positive("peak orders per second", self.peak_orders_per_second)?;
        positive("writes per order", self.writes_per_order)?;
        positive("partition write limit", self.partition_write_limit)?;
        positive("partition read limit", self.partition_read_limit)?;
        finite("headroom", self.headroom)?;
        if self.headroom < 0.0 {
            return Err(PlanError::Negative { field: "headroom", value: self.headroom });
        }
        positive("index item bytes", f64::from(self.index_item_bytes))?;
        if self.index_item_bytes > MAX_ITEM_BYTES {
            return Err(PlanError::TooLarge {
                field: "index item bytes",
                value: f64::from(self.index_item_bytes),
                max: f64::from(MAX_ITEM_BYTES),
            });
        }
        positive("page size", f64::from(self.page_size))
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The order given to size an index entry by cannot be sized.
    #[error("cannot size a GSI2 entry from {0}")]
    Sample(String),
    #[error("{field} must be a finite number, not {value}")]
    NotFinite { field: &'static str, value: f64 },
    #[error("{field} must be greater than zero, not {value}")]
    NotPositive { field: &'static str, value: f64 },
    #[error("{field} must be zero or more, not {value}")]
    Negative { field: &'static str, value: f64 },
    #[error("{field} must be at most {max}, not {value}")]
    TooLarge { field: &'static str, value: f64, max: f64 },
}

fn finite(field: &'static str, value: f64) -> Result<(), PlanError> {
    if value.is_finite() { Ok(()) } else { Err(PlanError::NotFinite { field, value }) }
}

fn positive(field: &'static str, value: f64) -> Result<(), PlanError> {
    finite(field, value)?;
    if value > 0.0 { Ok(()) } else { Err(PlanError::NotPositive { field, value }) }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub units_per_write: u32,
    pub wcu_per_second_at_peak: f64,
    /// Write units a second one partition may take at peak, headroom kept.
    pub per_partition_budget: f64,
    pub shards: u32,
    /// True when the peak needs more than `MAX_SHARDS`: `shards` is the cap
    /// and each shard runs over its budget.
    pub capped: bool,
    /// Queries of a first page: one per shard, in one parallel round.
    pub queries_per_page: u32,
    /// Items each of those queries reads, about: the round's share.
    pub items_per_query: u32,
    /// Index items read per order shown on a first page, estimated from the
    /// read plan's first round with every shard holding enough orders.
    pub items_read_per_item_shown_estimate: f64,
    pub read_units_per_query: f64,
    /// First pages a second at which each shard partition reaches its read
    /// limit (every page queries every shard once).
    pub pages_per_second_limit: f64,
    /// The arithmetic, one line each, for printing.
    pub steps: Vec<String>,
}

/// The shard count for `input`'s peak, and what it costs readers.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    input.validate()?;
    let mut steps = Vec::new();

    let bytes = input.index_item_bytes;
    let units_per_write = bytes.div_ceil(WRITE_UNIT_BYTES).max(1);
    steps.push(format!(
        "units per write = ceil({bytes} B / {WRITE_UNIT_BYTES} B) = {units_per_write} WCU \
         (one write unit per KB of index entry)"
    ));

    let factor = if input.transactional { 2.0 } else { 1.0 };
    let wcu = input.peak_orders_per_second * input.writes_per_order * f64::from(units_per_write) * factor;
    finite("peak orders per second × writes per order", wcu)?;
    steps.push(format!(
        "WCU at peak = {} orders/s × {} index writes/order × {units_per_write} WCU{} = {} WCU/s",
        num(input.peak_orders_per_second),
        num(input.writes_per_order),
        if input.transactional { " × 2 (written in transactions, charged twice)" } else { "" },
        num(wcu),
    ));

    let budget = input.partition_write_limit / (1.0 + input.headroom);
    steps.push(format!(
        "per-partition budget = {} WCU/s / (1 + {} headroom) = {} WCU/s",
        num(input.partition_write_limit),
        num(input.headroom),
        num(budget),
    ));

    // wcu × (1 + headroom) / limit is wcu / budget without dividing twice:
    // 2000 WCU/s over a 666.67 budget is exactly 3 shards, not 3.0000000000000004.
    let needed = (wcu * (1.0 + input.headroom) / input.partition_write_limit).ceil().max(1.0);
    let capped = needed > f64::from(MAX_SHARDS);
    let shards = if capped { MAX_SHARDS } else { needed as u32 };
    steps.push(format!("shards = ceil({} / {}) = {}", num(wcu), num(budget), num(needed)));
    let per_shard = wcu / f64::from(shards);
    if capped {
        let limit = num(input.partition_write_limit);
        let against_limit = if per_shard > input.partition_write_limit {
            format!("and over the {limit} WCU/s partition limit itself: writes will be throttled")
        } else {
            format!("though within the {limit} WCU/s partition limit")
        };
        steps.push(format!(
            "WARNING: {} shards exceed the app's maximum of {MAX_SHARDS}; at {MAX_SHARDS} each \
             shard takes {} WCU/s, over its budget of {}, {against_limit}",
            num(needed),
            num(per_shard),
            num(budget),
        ));
    } else {
        steps.push(format!("each shard takes {} / {shards} = {} WCU/s at peak", num(wcu), num(per_shard)));
    }

    let page = input.page_size;
    let first_round = (f64::from(page) + READ_SPREAD * f64::from(page).sqrt()).ceil() as u32;
    let items_per_query = first_round.div_ceil(shards).max(1);
    let queries = if shards == 1 { "1 query".to_string() } else { format!("{shards} queries") };
    steps.push(format!(
        "a first page of {page} takes {queries} (one per shard, in one round) over a key range sized to hold \
         ceil({page} + {} × sqrt({page})) = {first_round} orders at the day's pace: about {items_per_query} items each",
        num(READ_SPREAD)
    ));
    let items_read_per_item_shown_estimate = f64::from(first_round) / f64::from(page);
    steps.push(format!(
        "items read per item shown ≈ {first_round} / {page} = {} (the list's steady state; a page read before \
         the day's pace is known reads more, BENCHMARKS.md table 2)",
        num(items_read_per_item_shown_estimate)
    ));

    let query_bytes = u64::from(items_per_query) * u64::from(bytes);
    let read_units_per_query = EVENTUALLY_CONSISTENT_UNITS * query_bytes.div_ceil(READ_UNIT_BYTES) as f64;
    let pages_per_second_limit = input.partition_read_limit / read_units_per_query;
    steps.push(format!(
        "each query reads {items_per_query} × {bytes} B = {query_bytes} B: \
         ceil({query_bytes} / {READ_UNIT_BYTES}) × {EVENTUALLY_CONSISTENT_UNITS} = {} RCU; \
         a shard partition's {} RCU/s allows {} first pages/s",
        num(read_units_per_query),
        num(input.partition_read_limit),
        num(pages_per_second_limit),
    ));

    Ok(Plan {
        units_per_write,
        wcu_per_second_at_peak: wcu,
        per_partition_budget: budget,
        shards,
        capped,
        queries_per_page: shards,
        items_per_query,
        items_read_per_item_shown_estimate,
        read_units_per_query,
        pages_per_second_limit,
        steps,
    })
}

/// Whole numbers without decimals, others to two places at most.
fn num(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The on-demand write maximum `plan` recommends, as a multiple of the
/// sale's peak: a runaway writer is capped, a sale bigger than planned
/// still has room.
pub const ON_DEMAND_MAX_HEADROOM: u32 = 2;

/// Write units a second one table or index must take at a sale's peak:
/// what to pre-warm it to (DynamoDB's warm throughput) beforehand.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prewarm {
    /// `table` or the index name.
    pub resource: String,
    pub write_units_per_second: f64,
    /// The arithmetic.
    pub why: String,
    /// Where the per-order figure came from: computed from the key design,
    /// or measured from the stream (on which days).
    pub source: String,
}

/// The write units a second each table and index takes at `peak` orders a
/// second: what one order's writes cost each (`costs::order_writes`: the
/// order's item as written, priced by the stream's rules over the indexes as
/// provisioned, as its writer writes it), and on the metrics table the
/// consumer's counter writes (`costs::counter_load`) when given.
pub fn prewarm(peak: f64, writes: &OrderWrites, counters: Option<&CounterLoad>) -> Vec<Prewarm> {
    writes
        .resources
        .iter()
        .map(|r| {
            let mut units = peak * r.units_per_order;
            let mut why = format!("{} orders/s × {} WCU an order: {}", num(peak), num(r.units_per_order), r.why);
            if r.resource == "metrics table"
                && let Some(counters) = counters
            {
                units += counters.metrics_units_per_second;
                why.push_str(&format!(
                    "; plus the consumer's counters, {} WCU/s",
                    num(counters.metrics_units_per_second.ceil())
                ));
            }
            Prewarm { resource: r.resource.clone(), write_units_per_second: units, why, source: r.source.clone() }
        })
        .collect()
}

/// Size of the GSI2 entry of a PENDING `order` for capacity: the table key,
/// the index key and the projected attributes of the item the app writes
/// (`order_item`), as the index is provisioned, priced as the stream prices
/// items ("DynamoDB item sizes and formats"). No 100-byte overhead: that is
/// storage only (`INDEX_ENTRY_STORAGE_OVERHEAD`).
pub fn gsi2_entry_bytes(order: &Order, shards: u32) -> Result<u32, PlanError> {
    let sample = |why: String| PlanError::Sample(format!("order {}: {why}", order.order_id));
    let bytes = costs::index_entry_bytes(&Layout::orders(), GSI2, order, shards).map_err(|e| sample(e.to_string()))?;
    u32::try_from(bytes).map_err(|_| sample(format!("{bytes} bytes")))
}

/// An order as the app writes one, for sizing when no size is given.
pub use super::costs::typical_order;

/// Bytes of the typical order's table item (what the table and GSI1 write).
pub fn typical_item_bytes() -> Result<u32, PlanError> {
    let sample = |why: String| PlanError::Sample(format!("the typical order: {why}"));
    let item = crate::server::store::order_item(&typical_order(), 10).map_err(|e| sample(e.to_string()))?;
    let bytes = costs::item_bytes(&item).map_err(sample)?;
    u32::try_from(bytes).map_err(|_| sample(format!("{bytes} bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn assert_close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
    }

    #[test]
    fn three_hundred_orders_a_second_fit_one_shard() {
        let plan = plan(&PlanInput::new(300.0, 400)).unwrap();
        // ceil(400 / 1024) = 1 WCU per write.
        assert_eq!(plan.units_per_write, 1);
        // 300 orders/s × 2 writes × 1 WCU = 600 WCU/s.
        assert_close(plan.wcu_per_second_at_peak, 600.0);
        // 1000 / (1 + 0.5) = 666.67 WCU/s per partition.
        assert_close(plan.per_partition_budget, 1000.0 / 1.5);
        // ceil(600 / 666.67) = ceil(0.9) = 1.
        assert_eq!((plan.shards, plan.capped), (1, false));
        // One query over a range holding ceil(25 + 2 × 5) = 35 items:
        // 35 / 25 = 1.4 read per shown.
        assert_eq!((plan.queries_per_page, plan.items_per_query), (1, 35));
        assert_close(plan.items_read_per_item_shown_estimate, 1.4);
        // 35 × 400 B = 14,000 B: ceil(14,000 / 4096) = 4 × 0.5 = 2 RCU;
        // 3000 / 2 = 1500 pages/s.
        assert_close(plan.read_units_per_query, 2.0);
        assert_close(plan.pages_per_second_limit, 1500.0);
        assert_eq!(
            plan.steps[..4],
            [
                "units per write = ceil(400 B / 1024 B) = 1 WCU (one write unit per KB of index entry)",
                "WCU at peak = 300 orders/s × 2 index writes/order × 1 WCU = 600 WCU/s",
                "per-partition budget = 1000 WCU/s / (1 + 0.5 headroom) = 666.67 WCU/s",
                "shards = ceil(600 / 666.67) = 1",
            ]
        );
        assert!(plan.steps.iter().any(|s| s.contains("≈ 35 / 25 = 1.4")), "{:?}", plan.steps);
    }

    #[test]
    fn shards_grow_with_the_peak() {
        let shards = |peak| plan(&PlanInput::new(peak, 400)).unwrap().shards;
        // 400/s: 800 WCU/s × 1.5 / 1000 = 1.2 → 2.
        assert_eq!(shards(400.0), 2);
        // 1000/s: 2000 × 1.5 / 1000 = 3 exactly → 3, not 4 by rounding.
        assert_eq!(shards(1000.0), 3);
        // 1001/s: 2002 × 1.5 / 1000 = 3.003 → 4.
        assert_eq!(shards(1001.0), 4);
        // 3300/s: 6600 × 1.5 / 1000 = 9.9 → 10.
        assert_eq!(shards(3300.0), 10);
    }

    #[test]
    fn the_apps_transactions_double_the_index_writes() {
        // 1000/s × 2 writes × 1 WCU × 2 = 4000 WCU/s × 1.5 / 1000 = 6 shards.
        let plan = plan(&PlanInput::for_writer(1000.0, 400, Writer::Console)).unwrap();
        assert_close(plan.wcu_per_second_at_peak, 4000.0);
        assert_eq!(plan.shards, 6);
        assert!(
            plan.steps[1].contains("× 2 (written in transactions, charged twice) = 4000 WCU/s"),
            "{:?}",
            plan.steps
        );
    }

    #[test]
    fn shards_grow_with_the_entry_size() {
        let plan_for = |bytes| plan(&PlanInput::new(300.0, bytes)).unwrap();
        // 1024 B is still one unit; 1025 B is two.
        assert_eq!(plan_for(1024).units_per_write, 1);
        assert_eq!(plan_for(1025).units_per_write, 2);
        // 1500 B: 2 WCU × 2 × 300 = 1200 WCU/s × 1.5 / 1000 = 1.8 → 2 shards.
        let big = plan_for(1500);
        assert_close(big.wcu_per_second_at_peak, 1200.0);
        assert_eq!(big.shards, 2);
    }

    #[test]
    fn headroom_divides_the_partition_limit() {
        let mut input = PlanInput::new(300.0, 400);
        input.headroom = 0.0;
        // No headroom: budget 1000, ceil(600 / 1000) = 1.
        assert_close(plan(&input).unwrap().per_partition_budget, 1000.0);
        input.headroom = 1.0;
        // 100% headroom: budget 500, ceil(600 / 500) = 2.
        let doubled = plan(&input).unwrap();
        assert_close(doubled.per_partition_budget, 500.0);
        assert_eq!(doubled.shards, 2);
    }

    #[test]
    fn ten_shards_cost_a_first_page_two_reads_per_order_shown() {
        let plan = plan(&PlanInput::new(3300.0, 400)).unwrap();
        assert_eq!(plan.shards, 10);
        // 10 queries of ceil(25 / 10) + 2 = 5 items: 50 read for 25 shown = 2.
        assert_eq!((plan.queries_per_page, plan.items_per_query), (10, 4));
        assert_close(plan.items_read_per_item_shown_estimate, 1.4);
        // 5 × 400 B = 2000 B: one 4 KB unit × 0.5 = 0.5 RCU; 3000 / 0.5 = 6000 pages/s.
        assert_close(plan.read_units_per_query, 0.5);
        assert_close(plan.pages_per_second_limit, 6000.0);
    }

    #[test]
    fn shard_count_is_capped_at_100_with_a_warning() {
        // 40,000/s: 80,000 WCU/s × 1.5 / 1000 = 120 shards wanted.
        let capped = plan(&PlanInput::new(40_000.0, 400)).unwrap();
        assert_eq!((capped.shards, capped.capped), (100, true));
        assert!(capped.steps.iter().any(|s| s.starts_with("shards = ceil(80000 / 666.67) = 120")));
        let warning = capped.steps.iter().find(|s| s.starts_with("WARNING")).unwrap();
        // 80,000 / 100 = 800 WCU/s a shard: over the 666.67 budget, under 1000.
        assert!(warning.contains("takes 800 WCU/s, over its budget of 666.67, though within the 1000"), "{warning}");
        // 60,000/s: 1200 WCU/s a shard, over the partition limit too.
        let over = plan(&PlanInput::new(60_000.0, 400)).unwrap();
        assert!(over.steps.iter().any(|s| s.contains("writes will be throttled")));
        // One round of 100 queries over a range holding 35 orders: most
        // shards give none; 35 / 25 read per item shown.
        assert_eq!(capped.items_per_query, 1);
        assert_close(capped.items_read_per_item_shown_estimate, 1.4);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let with = |change: fn(&mut PlanInput)| {
            let mut input = PlanInput::new(300.0, 400);
            change(&mut input);
            plan(&input).unwrap_err()
        };
        assert_eq!(
            with(|i| i.peak_orders_per_second = 0.0),
            PlanError::NotPositive { field: "peak orders per second", value: 0.0 }
        );
        assert!(matches!(with(|i| i.peak_orders_per_second = -5.0), PlanError::NotPositive { .. }));
        assert!(matches!(with(|i| i.peak_orders_per_second = f64::NAN), PlanError::NotFinite { .. }));
        assert!(matches!(with(|i| i.peak_orders_per_second = f64::INFINITY), PlanError::NotFinite { .. }));
        assert!(matches!(with(|i| i.peak_orders_per_second = f64::MAX), PlanError::NotFinite { .. }));
        assert!(matches!(with(|i| i.headroom = -0.1), PlanError::Negative { field: "headroom", .. }));
        assert!(matches!(with(|i| i.headroom = f64::NAN), PlanError::NotFinite { field: "headroom", .. }));
        assert!(matches!(with(|i| i.index_item_bytes = 0), PlanError::NotPositive { .. }));
        assert!(matches!(with(|i| i.index_item_bytes = 400 * 1024 + 1), PlanError::TooLarge { .. }));
        assert!(matches!(with(|i| i.page_size = 0), PlanError::NotPositive { field: "page size", .. }));
        assert!(matches!(with(|i| i.writes_per_order = 0.0), PlanError::NotPositive { .. }));
        assert!(matches!(with(|i| i.partition_write_limit = 0.0), PlanError::NotPositive { .. }));
        assert!(matches!(with(|i| i.partition_read_limit = -1.0), PlanError::NotPositive { .. }));
        assert_eq!(with(|i| i.headroom = -1.0).to_string(), "headroom must be zero or more, not -1");
    }

    #[test]
    fn a_typical_gsi2_entry_is_296_bytes() {
        // name + value bytes, as `order_item` writes the typical order:
        //   PK            2 + "ORDER#" 6 + id 32                              = 40
        //   GSI2PK        6 + "STATUS#PENDING#" 15 + "2026-11-29" 10 + "#n" 2 = 33
        //   GSI2SK        6 + createdAt 24 + "#" 1 + id 32                   = 63
        //   orderId       7 + 32                                              = 39
        //   customerId   10 + "cust-00042" 10                                 = 20
        //   createdAt     9 + 24                                              = 33
        //   total         5 + 18700 (3 significant digits: 2) + 1             =  8
        //   currency      8 + "USD" 3                                         = 11
        //   itemCount     9 + 4 (1 digit: 1) + 1                              = 11
        //   shippingCity 12 + "Vancouver" 9                                   = 21
        //   shippingCountry 15 + "CA" 2                                       = 17
        // = 296 B: one write unit. The shard is one digit for 10 shards.
        let bytes = gsi2_entry_bytes(&typical_order(), 10).unwrap();
        assert_eq!(bytes, 296);
        assert_eq!(bytes + INDEX_ENTRY_STORAGE_OVERHEAD, 396, "storage per entry");
        assert_eq!(plan(&PlanInput::new(300.0, bytes)).unwrap().units_per_write, 1);
        let mut closed = typical_order();
        closed.status = Some(Status::Shipped.into());
        assert!(matches!(gsi2_entry_bytes(&closed, 10), Err(PlanError::Sample(_))));
    }
}

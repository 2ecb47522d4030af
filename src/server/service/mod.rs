//! What the JSON API and the pages both do: check the input, ask the store,
//! sign the cursors. Each operation is written once, here, in the file of
//! what it serves: `orders` (one order, a customer's history, search,
//! writes), `pending` (the PENDING list and the dashboard), `figures` (the
//! counters, live and capacity figures), `bulk`, `admin` (accounts, tokens,
//! the audit trail), `sales` (sale plans and their readiness), `rehearsal`
//! (a plan's scaled rehearsal), `outcome` (a sale beside what happened), and
//! `checks` (the input checks they share).
//!
//! Every accepted request costs a bounded number of store calls: dates are
//! kept to a window, a `days` range reads each day's counter (at most once a
//! second) and only the partitions a page needs, page sizes are capped, and
//! dashboard reads are shared.

mod admin;
pub mod bulk;
pub mod checks;
mod consumer;
pub mod figures;
pub mod follower;
mod orders;
pub mod outcome;
mod pending;
pub mod rehearsal;
pub mod sales;
pub mod shards;

pub use pending::{Filters, PendingQuery};

use crate::server::capacity::advisor::Prices;
use crate::server::cursor::{CursorCodec, CursorError};
use crate::server::error::ApiError;
use crate::server::store::{Store, keys};
use crate::server::stream::consumer::ConsumerStatus;
use crate::server::stream::live::LiveHub;
use chrono::{NaiveDate, Utc};
use pending::{DashboardKey, SharedRead};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// How long one read of a dashboard view serves everyone who opens it: a
/// room full of screens costs the store one read a second, not one each.
/// Live pushes carry what happens in between; this server's own writes clear it.
const DASHBOARD_FRESH: Duration = Duration::from_secs(1);
/// An older read still answers while the next one is made, up to this age:
/// viewers do not queue behind the read that replaces it (under 200 viewers
/// that read took as long as the lifetime itself, and everyone arriving
/// meanwhile waited for it). Past this age, a viewer waits for a fresh read.
const DASHBOARD_STALE_LIMIT: Duration = Duration::from_secs(10);
/// Distinct dashboard views kept at once.
const DASHBOARD_VIEWS: u64 = 1_000;
/// How long one readiness check answers every probe: `/readyz` needs no
/// sign-in and sits behind a balancer, so however many ask, the store
/// sees at most one DescribeTable a second from this instance.
pub const READINESS_FRESH: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct Service {
    pub store: Arc<Store>,
    pub cursors: Arc<CursorCodec>,
    /// Where the stream consumer publishes, and `/api/live` listens.
    pub live: LiveHub,
    /// The running consumer's status, once one is started.
    /// The in-process consumer's status, which it sends here
    /// (`Consumer::reporting_to`); the default while none runs.
    pub consumer: Arc<tokio::sync::watch::Sender<ConsumerStatus>>,
    /// Recent dashboard reads, shared by every viewer of the same view.
    dashboards: moka::future::Cache<DashboardKey, Arc<SharedRead>>,
    /// Bumped whenever the shared reads are cleared: a read begun before
    /// then may predate the change, and is not kept.
    dashboards_cleared: Arc<AtomicU64>,
    /// How long an order may stay PENDING before it counts as stuck.
    stuck_after: chrono::Duration,
    /// What the capacity-mode advisor prices with.
    prices: Prices,
    /// The concurrency the Lambda consumer may use, when configured
    /// (`--consumer-concurrency`), for the Sales readiness.
    consumer_concurrency: Option<u32>,
    /// Where the capacity figures come from, and the advisor's window.
    capacity: figures::CapacitySettings,
    /// The advisor's verdicts, worked out at most once a minute.
    advice: moka::future::Cache<NaiveDate, Arc<crate::server::capacity::report::Advice>>,
    /// Runs sale plans' rehearsals, when this process does.
    rehearser: Option<Arc<dyn rehearsal::Rehearser>>,
    /// The last readiness check, failure included, for `READINESS_FRESH`.
    readiness: moka::future::Cache<(), Result<(), crate::server::store::error::StoreError>>,
}

impl Service {
    pub fn new(store: Arc<Store>, cursors: Arc<CursorCodec>, live: LiveHub) -> Self {
        Self {
            store,
            cursors,
            live,
            consumer: Arc::new(tokio::sync::watch::Sender::new(ConsumerStatus::default())),
            dashboards: moka::future::Cache::builder()
                .max_capacity(DASHBOARD_VIEWS)
                .time_to_live(DASHBOARD_STALE_LIMIT)
                .build(),
            dashboards_cleared: Arc::new(AtomicU64::new(0)),
            stuck_after: chrono::Duration::minutes(30),
            prices: Prices::default(),
            consumer_concurrency: None,
            capacity: figures::CapacitySettings::default(),
            advice: moka::future::Cache::builder().max_capacity(4).time_to_live(Duration::from_secs(60)).build(),
            rehearser: None,
            readiness: moka::future::Cache::builder().max_capacity(1).time_to_live(READINESS_FRESH).build(),
        }
    }

    /// Whether the store answers and the orders table exists: one check at
    /// most every `READINESS_FRESH`, its answer (a failure too) shared by
    /// every probe meanwhile; probes that arrive while it runs wait for it
    /// rather than start their own.
    pub async fn ready(&self) -> Result<(), crate::server::store::error::StoreError> {
        let store = self.store.clone();
        self.readiness.get_with((), async move { store.ping().await }).await
    }

    /// Where capacity figures come from (`--capacity-source`).
    pub fn with_capacity(mut self, capacity: figures::CapacitySettings) -> Self {
        self.capacity = capacity;
        self
    }

    /// The concurrency the Lambda consumer may use (`--consumer-concurrency`).
    pub fn with_consumer_concurrency(mut self, concurrency: Option<u32>) -> Self {
        self.consumer_concurrency = concurrency;
        self
    }

    /// The advisor's prices (checked by whoever read them).
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = prices;
        self
    }

    /// Orders PENDING longer than `minutes` count as stuck.
    pub fn with_stuck_after(mut self, minutes: u32) -> Self {
        self.stuck_after = chrono::Duration::minutes(i64::from(minutes));
        self
    }

    /// How far this instance's consumer was behind at its last batch.
    pub(crate) fn consumer_behind_ms(&self) -> Option<i64> {
        self.consumer_status().behind_ms
    }

    fn consumer_status(&self) -> ConsumerStatus {
        self.consumer.borrow().clone()
    }

    pub fn parse_day(&self, date: Option<&str>) -> Result<NaiveDate, ApiError> {
        checks::parse_date(date, Utc::now())
    }

    fn decode_cursor(&self, cursor: Option<&str>, scope: &str) -> Result<Option<String>, ApiError> {
        let Some(cursor) = cursor.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let after = self.cursors.decode(cursor, scope)?;
        // Signed by us, so it is a sort key we read; checked anyway before it
        // reaches a query. Not necessarily one the app wrote: a page may end
        // on another writer's order whose key is not in the keys' form, and
        // the next page continues after it all the same.
        if !keys::is_position(&after) {
            return Err(CursorError::NoPosition.into());
        }
        Ok(Some(after))
    }
}

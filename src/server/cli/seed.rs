//! Demo data: a week of orders from a few hundred customers, most of today's
//! still PENDING. The same seed and `now` give the same orders, and a second
//! run writes nothing twice (order ids are fixed, writes are conditional).

use crate::model::{Actor, Order, Status};
use crate::server::sim::orders::random_order;
use crate::server::store::Store;
use crate::server::store::error::StoreError;
use chrono::{DateTime, Duration, TimeZone, Utc};
use futures::StreamExt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Writes in flight at once.
const CONCURRENCY: usize = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeedReport {
    pub written: u32,
    pub already_there: u32,
    pub pending_today: u32,
}

pub struct SeedPlan {
    pub orders: u32,
    pub customers: u32,
    pub days: u32,
    pub seed: u64,
    pub now: DateTime<Utc>,
    pub writer: Writer,
}

/// Who writes the demo's orders: this console (a conditional transaction
/// with its audit record, the day's shard count recorded first), the order
/// service (a plain PutItem on the day's count by the rule, recording
/// nothing: `Store::create_order_as_service`), or each in turn, order by
/// order, as in production.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Writer {
    Console,
    Service,
    #[default]
    Both,
}

impl Writer {
    /// Whether the `n`th order is the order service's.
    fn is_service(self, n: usize) -> bool {
        match self {
            Writer::Console => false,
            Writer::Service => true,
            Writer::Both => n % 2 == 1,
        }
    }
}

/// The orders a plan describes, oldest first. A quarter of them fall on
/// today (up to `now`), the rest evenly over the days before.
pub fn demo_orders(plan: &SeedPlan) -> Vec<Order> {
    let today = plan.now.date_naive();
    let mut rng = ChaCha8Rng::seed_from_u64(
        plan.seed ^ u64::from(today.format("%Y%m%d").to_string().parse::<u32>().unwrap_or(0)),
    );
    let midnight = Utc.from_utc_datetime(&today.and_hms_opt(0, 0, 0).expect("midnight exists"));
    let today_count = if plan.days == 1 { plan.orders } else { plan.orders / 4 };
    let mut orders = Vec::with_capacity(plan.orders as usize);
    for index in 0..plan.orders {
        let (created_at, is_today) = if index < plan.orders - today_count {
            let days_back = 1 + rng.random_range(0..plan.days.saturating_sub(1).max(1));
            let at = midnight - Duration::days(i64::from(days_back))
                + Duration::milliseconds(rng.random_range(0..86_400_000));
            (at, false)
        } else {
            let span = (plan.now - midnight).num_milliseconds().max(1);
            (midnight + Duration::milliseconds(rng.random_range(0..span)), true)
        };
        let status = pick_status(&mut rng, is_today);
        // Skewed: a few customers order often, most rarely.
        let customer = (f64::from(plan.customers) * rng.random::<f64>().powi(2)) as u32;
        let updated_at = if status == Status::Pending {
            created_at
        } else {
            (created_at + Duration::minutes(rng.random_range(1..600))).min(plan.now)
        };
        let mut order = random_order(
            &mut rng,
            format!("o{}-{index:05}", today.format("%y%m%d")),
            format!("cust-{customer:04}"),
            created_at,
        );
        order.status = Some(status.into());
        order.updated_at = Some(updated_at);
        orders.push(order);
    }
    orders.sort_by_key(|o| o.created_at);
    orders
}

fn pick_status(rng: &mut ChaCha8Rng, today: bool) -> Status {
    let roll = rng.random_range(0..100);
    if today {
        match roll {
            0..70 => Status::Pending,
            70..85 => Status::Confirmed,
            85..95 => Status::Shipped,
            _ => Status::Cancelled,
        }
    } else {
        // A few older orders stay PENDING: the stuck ones operations hunts.
        match roll {
            0..3 => Status::Pending,
            3..10 => Status::Confirmed,
            10..30 => Status::Shipped,
            30..90 => Status::Delivered,
            _ => Status::Cancelled,
        }
    }
}

pub async fn seed(store: &Store, plan: &SeedPlan) -> Result<SeedReport, StoreError> {
    let orders = demo_orders(plan);
    let today = plan.now.date_naive();
    let writer = plan.writer;
    let results: Vec<(Result<(), StoreError>, bool)> = futures::stream::iter(orders.into_iter().enumerate())
        .map(|(n, order)| async move {
            let pending_today = order.known_status() == Some(Status::Pending)
                && order.created_at.is_some_and(|at| at.date_naive() == today);
            let written = match writer.is_service(n) {
                true => store.create_order_as_service(&order).await.map(drop),
                false => store.create_order(&order, &Actor::cli("seed")).await.map(drop),
            };
            (written, pending_today)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut report = SeedReport::default();
    for (result, pending_today) in results {
        match result {
            Ok(()) => report.written += 1,
            Err(StoreError::Conflict(_)) => report.already_there += 1,
            Err(err) => return Err(err),
        }
        report.pending_today += u32::from(pending_today);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::iso_millis;

    fn plan(seed: u64) -> SeedPlan {
        SeedPlan {
            orders: 2000,
            customers: 300,
            days: 7,
            seed,
            now: iso_millis::parse("2026-11-29T15:00:00Z").unwrap(),
            writer: Writer::Both,
        }
    }

    #[test]
    fn both_writers_write_every_other_order() {
        assert!(!Writer::Both.is_service(0) && Writer::Both.is_service(1) && !Writer::Both.is_service(2));
        assert!((0..4).all(|n| Writer::Service.is_service(n) && !Writer::Console.is_service(n)));
    }

    #[test]
    fn demo_data_is_deterministic_and_shaped_like_a_week() {
        let a = demo_orders(&plan(42));
        assert_eq!(a, demo_orders(&plan(42)));
        assert_ne!(a, demo_orders(&plan(43)));
        assert_eq!(a.len(), 2000);
        let now = plan(42).now;
        let today = now.date_naive();
        let pending_today = a
            .iter()
            .filter(|o| o.known_status() == Some(Status::Pending) && o.created_at.unwrap().date_naive() == today)
            .count();
        assert!((200..500).contains(&pending_today), "{pending_today} PENDING today");
        assert!(a.iter().all(|o| o.created_at.unwrap() <= now && o.created_at.unwrap() > now - Duration::days(7)));
        let customers: std::collections::HashSet<_> = a.iter().map(|o| &o.customer_id).collect();
        assert!((100..=300).contains(&customers.len()), "{} customers", customers.len());
        let ids: std::collections::HashSet<_> = a.iter().map(|o| &o.order_id).collect();
        assert_eq!(ids.len(), 2000, "order ids are unique");
    }
}

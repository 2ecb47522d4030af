//! One order, a customer's history, search, and the writes: creating an
//! order and changing its status.

use super::Service;
use super::checks::{build_order, check_reason, parse_limit};
use crate::model::{
    AuditEntry, MAX_PAGE_SIZE, NewOrder, Order, OrderPage, PageParams, Permission, SearchHit, Status, StatusChange,
    validate_id,
};
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::store::Transition;
use chrono::Utc;

impl Service {
    pub async fn order(&self, order_id: &str) -> Result<Order, ApiError> {
        validate_id("order id", order_id)?;
        self.store.get_order(order_id).await?.ok_or_else(|| ApiError::NotFound(format!("order {order_id} not found")))
    }

    pub async fn customer_orders(&self, customer_id: &str, params: &PageParams) -> Result<OrderPage, ApiError> {
        validate_id("customer id", customer_id)?;
        let limit = parse_limit(params.limit.as_deref())?;
        let scope = format!("customer:{customer_id}");
        let after = self.decode_cursor(params.cursor.as_deref(), &scope)?;
        let page = self.store.customer_orders(customer_id, limit, after.as_deref()).await?;
        Ok(OrderPage { orders: page.orders, next: page.next_after.map(|after| self.cursors.encode(&scope, &after)) })
    }

    /// Every page of a customer's history, newest first, likewise.
    pub fn customer_pages(
        &self,
        customer_id: String,
    ) -> impl futures::Stream<Item = Result<Vec<Order>, ApiError>> + use<> {
        let store = self.store.clone();
        futures::stream::try_unfold((Some(None::<String>), customer_id), move |(after, customer_id)| {
            let store = store.clone();
            async move {
                let Some(after) = after else { return Ok(None) };
                let page = store.customer_orders(&customer_id, MAX_PAGE_SIZE, after.as_deref()).await?;
                let next = page.next_after.map(Some);
                Ok(Some((page.orders, (next, customer_id))))
            }
        })
    }

    /// An order with this id, else a customer with orders, else not found.
    pub async fn search(&self, query: &str) -> Result<SearchHit, ApiError> {
        let id = query.trim();
        let not_found = || ApiError::NotFound(format!("nothing found for {id:?}"));
        if validate_id("id", id).is_err() {
            return Err(not_found());
        }
        if self.store.get_order(id).await?.is_some() {
            return Ok(SearchHit::Order(id.to_string()));
        }
        let history = self.store.customer_orders(id, 1, None).await?;
        if !history.orders.is_empty() {
            return Ok(SearchHit::Customer(id.to_string()));
        }
        Err(not_found())
    }

    pub async fn create_order(&self, new: NewOrder, by: &Principal) -> Result<Order, ApiError> {
        by.require(Permission::ChangeOrders)?;
        let order = build_order(new, Utc::now())?;
        self.store.create_order(&order, &by.actor).await?;
        self.forget_dashboards();
        Ok(order)
    }

    /// Moves an order on, if `by`'s role may make this change (support may
    /// cancel; ops make every change), with its reason in the audit trail.
    pub async fn change_status(&self, order_id: &str, change: StatusChange, by: &Principal) -> Result<Order, ApiError> {
        validate_id("order id", order_id)?;
        by.require(Permission::to_change_status(change.to))?;
        if !change.from.can_become(change.to) {
            return Err(ApiError::BadRequest(format!("an order cannot go from {} to {}", change.from, change.to)));
        }
        let reason = check_reason(change.reason.as_deref())?;
        if change.to == Status::Cancelled && reason.is_none() {
            return Err(ApiError::BadRequest("a cancellation needs a reason".into()));
        }
        let transition = Transition {
            order_id,
            from: change.from,
            to: change.to,
            at: Utc::now(),
            actor: &by.actor,
            reason,
            bulk_id: None,
        };
        let order = self.store.change_status(&transition).await?;
        self.forget_dashboards();
        Ok(order)
    }

    /// An order's changes, oldest first.
    pub async fn order_history(&self, order_id: &str) -> Result<Vec<AuditEntry>, ApiError> {
        validate_id("order id", order_id)?;
        Ok(self.store.order_timeline(order_id).await?)
    }
}

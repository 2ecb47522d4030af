//! The server functions the pages call. Each is a thin wrapper over the same
//! `Service` the JSON API uses: one data path.

use crate::model::{Dashboard, Order, OrderPage, PageParams, PendingParams, SearchHit, Status};
use leptos::prelude::*;
use leptos::server_fn::codec::{Json, JsonEncoding};
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// What went wrong, as the pages need to know it: the kind picks the view
/// (404 page, cursor message, "store unreachable" banner, conflict notice).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    BadRequest,
    BadCursor,
    NotFound,
    Conflict,
    Unavailable,
    Internal,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct PageError {
    pub kind: ErrorKind,
    pub message: String,
}

impl FromServerFnError for PageError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        let kind = match value {
            // The browser could not reach the server at all.
            ServerFnErrorErr::Request(_) => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        };
        PageError { kind, message: value.to_string() }
    }
}

#[cfg(feature = "ssr")]
impl From<crate::server::error::ApiError> for PageError {
    fn from(err: crate::server::error::ApiError) -> Self {
        use crate::server::error::{ApiError, StoreError};
        let kind = match &err {
            ApiError::BadRequest(message) if message.starts_with("bad cursor") => ErrorKind::BadCursor,
            ApiError::BadRequest(_) => ErrorKind::BadRequest,
            ApiError::Store(StoreError::NotFound(_)) => ErrorKind::NotFound,
            ApiError::Store(StoreError::Conflict(_)) => ErrorKind::Conflict,
            ApiError::Store(StoreError::Unavailable(_)) => ErrorKind::Unavailable,
            ApiError::Store(_) => ErrorKind::Internal,
        };
        // Pages answer with the same status the API would.
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(err.status());
        }
        PageError { kind, message: err.to_string() }
    }
}

#[cfg(feature = "ssr")]
fn service() -> crate::server::service::Service {
    expect_context::<crate::server::service::Service>()
}

// JSON, not URL encoding: a struct whose fields are all absent would encode
// to nothing and fail to decode.
#[server(input = Json)]
pub async fn get_dashboard(params: PendingParams) -> Result<Dashboard, PageError> {
    let settings = expect_context::<crate::server::serve::PageSettings>();
    Ok(service().dashboard(&params, settings.stuck_after_minutes).await?)
}

#[server]
pub async fn get_order(order_id: String) -> Result<Order, PageError> {
    Ok(service().order(&order_id).await?)
}

#[server]
pub async fn change_status(order_id: String, from: Status, to: Status) -> Result<Order, PageError> {
    let change = crate::model::StatusChange { from, to };
    Ok(service().change_status(&order_id, change).await?)
}

#[server(input = Json)]
pub async fn get_customer_orders(customer_id: String, params: PageParams) -> Result<OrderPage, PageError> {
    let page = service().customer_orders(&customer_id, &params).await?;
    if page.orders.is_empty() && params.cursor.as_deref().is_none_or(str::is_empty) {
        let err = crate::server::error::StoreError::NotFound(format!("customer {customer_id} has no orders"));
        return Err(crate::server::error::ApiError::from(err).into());
    }
    Ok(page)
}

#[server]
pub async fn search(query: String) -> Result<SearchHit, PageError> {
    Ok(service().search(&query).await?)
}

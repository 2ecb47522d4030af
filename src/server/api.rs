//! The JSON API that the pages, scripts and tests share. Errors are
//! `{"error": "..."}` with the status `ApiError` maps them to.

use super::error::ApiError;
use super::serve::AppState;
use crate::model::{NewOrder, Order, OrderPage, PageParams, PendingPage, PendingParams, StatusChange};
use super::service::PendingMetrics;
use crate::model::LiveEvent;
use axum::body::Bytes;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/orders", post(create_order))
        .route("/api/orders/{order_id}", get(order))
        .route("/api/orders/{order_id}/status", post(change_status))
        .route("/api/customers/{customer_id}/orders", get(customer_orders))
        .route("/api/pending", get(pending))
        .route("/api/metrics/pending", get(pending_metrics))
        .route("/api/live", get(live))
        .route("/healthz", get(health))
}

async fn order(State(state): State<AppState>, Path(order_id): Path<String>) -> Result<Json<Order>, ApiError> {
    Ok(Json(state.service.order(&order_id).await?))
}

async fn customer_orders(
    State(state): State<AppState>,
    Path(customer_id): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> Result<Json<OrderPage>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.customer_orders(&customer_id, &params).await?))
}

async fn pending(
    State(state): State<AppState>,
    params: Result<Query<PendingParams>, QueryRejection>,
) -> Result<Json<PendingPage>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.pending(&params).await?))
}

#[derive(Debug, Default, serde::Deserialize)]
struct DateParam {
    date: Option<String>,
}

async fn pending_metrics(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<PendingMetrics>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.pending_metrics(params.date.as_deref()).await?))
}

/// Server-sent events for one day: the counters first, then every change the
/// stream consumer applies. Each event's data is one `LiveEvent` as JSON.
async fn live(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    let day = state.service.parse_day(params.date.as_deref())?;
    // Subscribe before reading the snapshot, so nothing falls in between.
    let receiver = state.service.live.subscribe();
    let first = LiveEvent::Counters(state.service.live_counters(params.date.as_deref()).await?);
    let updates = futures::stream::unfold(receiver, move |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(event) if event.date().is_none_or(|d| d == day) => return Some((event, receiver)),
                Ok(_) => continue,
                // This subscriber fell behind and missed events: say so.
                Err(RecvError::Lagged(_)) => return Some((LiveEvent::Resync, receiver)),
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let events = futures::stream::once(async move { first })
        .chain(updates)
        .take_until(state.service.live.closed())
        .map(|event| Ok(Event::default().data(serde_json::to_string(&event).unwrap_or_default())));
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

async fn create_order(State(state): State<AppState>, body: Bytes) -> Result<(StatusCode, Json<Order>), ApiError> {
    let new: NewOrder = parse_json(&body)?;
    Ok((StatusCode::CREATED, Json(state.service.create_order(new).await?)))
}

async fn change_status(
    State(state): State<AppState>,
    Path(order_id): Path<String>,
    body: Bytes,
) -> Result<Json<Order>, ApiError> {
    let change: StatusChange = parse_json(&body)?;
    Ok(Json(state.service.change_status(&order_id, change).await?))
}

async fn health(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    state.service.store.ping().await?;
    Ok(Json(serde_json::json!({ "status": "ok" })))
}

fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

fn bad_query(rejection: QueryRejection) -> ApiError {
    ApiError::BadRequest(format!("invalid query string: {}", rejection.body_text()))
}

//! The JSON API that the pages, scripts and tests share. Errors are
//! `{"error": "..."}` with the status `ApiError` maps them to.

use super::error::ApiError;
use super::serve::AppState;
use crate::model::{NewOrder, Order, OrderPage, PageParams, PendingPage, PendingParams, StatusChange};
use axum::body::Bytes;
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

//! The JSON API that the pages, scripts and tests share. Errors are
//! `{"error": "...", "requestId": "..."}` with the status `ApiError` maps
//! them to.

use crate::model::{Access, Permission};
use crate::model::{
    AuditListing, AuditParams, BulkReport, BulkRequest, CapacityReport, LiveEvent, Me, NewOrder, Order, OrderPage,
    PageParams, PendingPage, PendingParams, QualityReport, Readiness, Rehearsal, Rehearsals, SaleOutcome, SalePlan,
    SalePlanInput, ShardsWritten, StatusChange,
};
use crate::model::{NewToken, PendingMetrics};
use crate::server::auth::Principal;
use crate::server::auth::access::Routes;
use crate::server::error::ApiError;
use crate::server::http::export;
use crate::server::http::state::AppState;
use crate::server::stream::live::{Pushed, Refused};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::HeaderValue;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_stream::wrappers::{BroadcastStream, errors::BroadcastStreamRecvError};

/// Every route of the JSON API (and the probes and `/metrics`), each with
/// who may reach it. The service checks again what it serves
/// (`Principal::require`): these are the first of two checks.
pub fn routes() -> Routes<AppState> {
    let view_operations = Access::Needs(Permission::ViewOperations);
    let view_orders = Access::Needs(Permission::ViewOrders);
    // Cancelling is the least a status change needs; the service checks
    // the change asked for (`Permission::to_change_status`).
    let status_change = Access::Needs(Permission::CancelOrder);
    let administer = Access::Needs(Permission::Administer);
    let plan_sales = Access::Needs(Permission::PlanSales);
    Routes::new()
        .post("/api/orders", Access::Needs(Permission::ChangeOrders), create_order)
        .get("/api/orders/{order_id}", view_orders, order)
        .post("/api/orders/{order_id}/status", status_change, change_status)
        .get("/api/customers/{customer_id}/orders", view_orders, customer_orders)
        .get("/api/orders/{order_id}/history", view_orders, order_history)
        .get("/api/pending", view_operations, pending)
        .get("/api/pending.csv", view_operations, pending_csv)
        .get("/api/pending.jsonl", view_operations, pending_jsonl)
        .get("/api/customers/{customer_id}/orders.csv", view_orders, customer_csv)
        .post("/api/bulk/status", status_change, start_bulk)
        .get("/api/bulk/{id}", status_change, bulk_report)
        .delete("/api/bulk/{id}", status_change, cancel_bulk)
        .get("/api/metrics/pending", view_operations, pending_metrics)
        .get("/api/capacity", view_operations, capacity)
        .get("/api/quality", view_operations, quality)
        .get("/api/sales", view_operations, sale_plans)
        .post("/api/sales", plan_sales, create_sale_plan)
        .get("/api/sales/{name}", view_operations, sale_plan)
        .put("/api/sales/{name}", plan_sales, update_sale_plan)
        .delete("/api/sales/{name}", plan_sales, delete_sale_plan)
        .post("/api/sales/{name}/shards", plan_sales, write_sale_shards)
        .post("/api/sales/{name}/rehearsal", plan_sales, start_rehearsal)
        .get("/api/sales/{name}/rehearsal", view_operations, rehearsals)
        .get("/api/sales/{name}/outcome", view_operations, sale_outcome)
        .get("/api/ready", view_operations, readiness)
        .get("/api/audit", administer, audit)
        .get("/api/me", Access::SignedIn, me)
        .get("/api/admin/users", administer, accounts)
        .post("/api/admin/users/{name}/disable", administer, disable_account)
        .get("/api/admin/tokens", administer, tokens)
        .post("/api/admin/tokens", administer, create_token)
        .delete("/api/admin/tokens/{name}", administer, revoke_token)
        // Any other API path: a 404 in JSON, to signed-in callers.
        .any("/api/{*rest}", Access::SignedIn, no_such_route)
        // Prometheus scrapes it with an API token (viewer is enough).
        .get("/metrics", view_operations, metrics)
        .get("/healthz", Access::Open, health)
        .get("/readyz", Access::Open, ready)
}

/// The live stream: held open for minutes, so kept out of the request timeout.
pub fn live_routes() -> Routes<AppState> {
    Routes::new().get("/api/live", Access::Needs(Permission::ViewOperations), live)
}

async fn no_such_route() -> ApiError {
    ApiError::NotFound("no such API route".into())
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

/// A day's consumed capacity, throttles and shard heat, with the planner's
/// and the advisor's tables.
async fn capacity(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<CapacityReport>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.capacity(params.date.as_deref()).await?))
}

/// A day's data quality: schema drift and item sizes, from the stream.
async fn quality(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<QualityReport>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.quality(params.date.as_deref()).await?))
}

/// Every sale plan, by name.
async fn sale_plans(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "plans": state.service.sale_plans().await? })))
}

async fn sale_plan(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<SalePlan>, ApiError> {
    Ok(Json(state.service.sale_plan(&name).await?))
}

async fn create_sale_plan(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<SalePlan>), ApiError> {
    let input: SalePlanInput = parse_json(&headers, &body)?;
    Ok((StatusCode::CREATED, Json(state.service.create_sale_plan(&input, &by).await?)))
}

async fn update_sale_plan(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<SalePlan>, ApiError> {
    let input: SalePlanInput = parse_json(&headers, &body)?;
    Ok(Json(state.service.update_sale_plan(&name, &input, &by).await?))
}

async fn delete_sale_plan(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.service.delete_sale_plan(&name, &by).await?;
    Ok(Json(json!({ "deleted": name })))
}

/// Writes the shard count the plan's peak needs for each sale day not
/// written yet; 409 when a day is written with another count.
async fn write_sale_shards(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<ShardsWritten>, ApiError> {
    Ok(Json(state.service.write_sale_shards(&name, &by).await?))
}

/// Starts a rehearsal of the plan in the background: 202 with the running
/// record; 409 while one runs.
async fn start_rehearsal(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Rehearsal>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.service.start_rehearsal(&name, &by).await?)))
}

/// The plan's rehearsal running, if any, and the last two finished.
async fn rehearsals(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<Rehearsals>, ApiError> {
    Ok(Json(state.service.rehearsals(&name).await?))
}

/// The plan beside what happened in its window so far.
async fn sale_outcome(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<SaleOutcome>, ApiError> {
    Ok(Json(state.service.sale_outcome(&name).await?))
}

#[derive(Debug, Default, serde::Deserialize)]
struct PlanParam {
    plan: Option<String>,
}

/// A sale plan's go/no-go, each check with its verdict, figures and fix.
async fn readiness(
    State(state): State<AppState>,
    params: Result<Query<PlanParam>, QueryRejection>,
) -> Result<Json<Readiness>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.readiness(params.plan.as_deref()).await?))
}

/// Prometheus text exposition of this instance's metrics.
async fn metrics(State(state): State<AppState>) -> Response {
    let body = crate::server::telemetry::render(&state.service.telemetry());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

/// Server-sent events for one day: the counters first, then every change this
/// instance's stream consumer applies, and `changed` for those another
/// instance applied (see `follower`). Each event's data is one `LiveEvent` as JSON.
/// A stream ends after `--live-max-minutes`; the browser reconnects.
async fn live(
    State(state): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    let day = state.service.parse_day(params.date.as_deref())?;
    let admission = state.service.live.admit(client.ip()).map_err(|refused| match refused {
        Refused::Full => ApiError::Busy(refused.to_string()),
        Refused::TooManyFromClient => ApiError::TooManyRequests { retry_after_secs: 30, why: refused.to_string() },
    })?;
    // Subscribe and count the day as watched before reading the snapshot, so
    // nothing falls in between; the follower starts from the snapshot's version.
    let receiver = state.service.live.subscribe();
    let watching = state.service.live.watch(day);
    let (counters, version) = state.service.live_counters(day).await?;
    state.service.live.versions().await.follow_from(day, version);
    let first = Pushed::of(&LiveEvent::Counters(counters));
    let resync = Pushed::of(&LiveEvent::Resync);
    let updates = BroadcastStream::new(receiver).filter_map(move |received| {
        std::future::ready(match received {
            Ok(pushed) => pushed.date.is_none_or(|d| d == day).then_some(pushed),
            // This subscriber fell behind and missed events: say so.
            Err(BroadcastStreamRecvError::Lagged(_)) => Some(resync.clone()),
        })
    });
    let lifetime = Duration::from_secs(state.limits.live_max_minutes * 60);
    let events = futures::stream::once(async move { first })
        .chain(updates)
        .take_until(state.service.live.closed())
        .take_until(tokio::time::sleep(lifetime))
        .map(move |pushed| {
            // The slot, and the day's watch, are held for as long as the stream is.
            let _held = (&admission, &watching);
            Ok(Event::default().data(&pushed.json))
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

async fn create_order(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Order>), ApiError> {
    let new: NewOrder = parse_json(&headers, &body)?;
    Ok((StatusCode::CREATED, Json(state.service.create_order(new, &by).await?)))
}

async fn change_status(
    State(state): State<AppState>,
    by: Principal,
    Path(order_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Order>, ApiError> {
    let change: StatusChange = parse_json(&headers, &body)?;
    Ok(Json(state.service.change_status(&order_id, change, &by).await?))
}

/// The PENDING list of a query (its days and filters), as CSV: the first row
/// names the columns, then every order, newest first, streamed a page at a
/// time from the same merge the list uses.
async fn pending_csv(
    State(state): State<AppState>,
    params: Result<Query<PendingParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    let query = export_query(&state, &params)?;
    let header = csv_line(&export::PENDING_COLUMNS);
    let rows = state
        .service
        .pending_pages(query)
        .map_ok(|orders| orders.iter().map(export::pending_row).map(|r| csv_line(&r)).collect::<String>());
    Ok(streamed("text/csv; charset=utf-8", "pending.csv", header, first_page(rows).await?))
}

/// The same, one JSON object per line.
async fn pending_jsonl(
    State(state): State<AppState>,
    params: Result<Query<PendingParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    let query = export_query(&state, &params)?;
    let rows = state.service.pending_pages(query).map_ok(|orders| {
        orders.iter().map(|o| format!("{}\n", serde_json::to_string(o).unwrap_or_default())).collect::<String>()
    });
    Ok(streamed("application/x-ndjson", "pending.jsonl", String::new(), first_page(rows).await?))
}

/// A customer's history as CSV, newest first.
async fn customer_csv(State(state): State<AppState>, Path(customer_id): Path<String>) -> Result<Response, ApiError> {
    crate::model::validate_id("customer id", &customer_id)?;
    let header = csv_line(&export::HISTORY_COLUMNS);
    let rows = state
        .service
        .customer_pages(customer_id.clone())
        .map_ok(|orders| orders.iter().map(export::history_row).map(|r| csv_line(&r)).collect::<String>());
    Ok(streamed("text/csv; charset=utf-8", &format!("{customer_id}.csv"), header, first_page(rows).await?))
}

/// An export's query: the list's, pages of the largest size, from the top.
fn export_query(state: &AppState, params: &PendingParams) -> Result<crate::server::service::PendingQuery, ApiError> {
    let params = PendingParams { limit: Some(crate::model::MAX_PAGE_SIZE.to_string()), cursor: None, ..params.clone() };
    state.service.parse_pending(&params)
}

fn csv_line(fields: &[impl AsRef<str>]) -> String {
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    // Writing to memory cannot fail.
    let _ = writer.write_record(fields.iter().map(AsRef::as_ref));
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// An export's rows with their first page read before anything is sent: a
/// store that fails at once is an error answer (503 and why), not a 200
/// whose body ends at the header line.
async fn first_page(
    rows: impl Stream<Item = Result<String, ApiError>> + Send + 'static,
) -> Result<impl Stream<Item = Result<String, ApiError>> + Send + 'static, ApiError> {
    let mut rows = Box::pin(rows);
    let first = rows.next().await.transpose()?;
    Ok(futures::stream::iter(first.map(Ok)).chain(rows))
}

/// A streamed download: `first` (the header line), then each chunk as the
/// store gives it. Rows that could not be read whole are written with what
/// they have and say so (`export`); a store failure after the first page
/// ends the body without its last chunk, so a client sees a broken
/// transfer, never a file that looks complete. The log has why.
fn streamed(
    content_type: &'static str,
    filename: &str,
    first: String,
    rows: impl Stream<Item = Result<String, ApiError>> + Send + 'static,
) -> Response {
    let body = futures::stream::once(async move { Ok::<_, ApiError>(first) }).chain(rows).map(|chunk| {
        chunk.map(Bytes::from).map_err(|err| {
            err.log();
            std::io::Error::other(err.public_message())
        })
    });
    let disposition = format!("attachment; filename=\"{filename}\"");
    let mut response = axum::body::Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

async fn start_bulk(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: BulkRequest = parse_json(&headers, &body)?;
    let id = state.service.start_bulk(request, &by).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "id": id }))))
}

async fn bulk_report(
    State(state): State<AppState>,
    by: Principal,
    Path(id): Path<String>,
) -> Result<Json<BulkReport>, ApiError> {
    Ok(Json(state.service.bulk_report(&id, &by).await?))
}

async fn cancel_bulk(
    State(state): State<AppState>,
    by: Principal,
    Path(id): Path<String>,
) -> Result<Json<BulkReport>, ApiError> {
    Ok(Json(state.service.cancel_bulk(&id, &by).await?))
}

async fn order_history(State(state): State<AppState>, Path(order_id): Path<String>) -> Result<Json<Value>, ApiError> {
    let history = state.service.order_history(&order_id).await?;
    Ok(Json(json!({ "history": history })))
}

async fn audit(
    State(state): State<AppState>,
    params: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Json<AuditListing>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.audit(&params).await?))
}

async fn me(by: Principal) -> Json<Me> {
    Json(by.me())
}

async fn accounts(State(state): State<AppState>, by: Principal) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "users": state.service.accounts(&by).await? })))
}

async fn disable_account(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.service.disable_account(&name, &by).await?;
    Ok(Json(json!({ "disabled": name })))
}

async fn tokens(State(state): State<AppState>, by: Principal) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "tokens": state.service.tokens(&by).await? })))
}

async fn create_token(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let new: NewToken = parse_json(&headers, &body)?;
    let token = state.service.create_token(&new, &by).await?;
    Ok((StatusCode::CREATED, Json(json!({ "name": new.name, "role": new.role, "token": token }))))
}

async fn revoke_token(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    state.service.revoke_token(&name, &by).await?;
    Ok(Json(json!({ "revoked": name })))
}

/// Liveness: the process answers. No store call, so a store outage does not
/// make an orchestrator restart healthy servers.
async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Readiness: the store answers and the tables exist.
async fn ready(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    state.service.store.ping().await?;
    Ok(Json(serde_json::json!({ "status": "ready" })))
}

/// A JSON body, sent as JSON: anything else is a 415, so that a plain HTML
/// form from another site cannot reach a write.
fn parse_json<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(ApiError::UnsupportedMediaType);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid request body: {e}")))
}

fn bad_query(rejection: QueryRejection) -> ApiError {
    ApiError::BadRequest(format!("invalid query string: {}", rejection.body_text()))
}

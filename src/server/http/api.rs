//! The JSON API that the pages, scripts and tests share. Errors are
//! `{"error": "...", "kind": "...", "requestId": "..."}` with the status
//! `ApiError` maps them to. Each handler's `#[utoipa::path]` describes it
//! for the OpenAPI document (`openapi`); a test holds the document's routes
//! to the router's.

mod answers;
pub mod openapi;

use answers::*;

use crate::model::{Access, Permission};
use crate::model::{AccountView, NewAccount, NewToken, PendingMetrics, PendingOrder, RoleChange};
use crate::model::{
    AuditListing, AuditParams, BulkReport, BulkRequest, CapacityReport, LiveEvent, Me, NewOrder, Order, OrderPage,
    PageParams, PendingPage, PendingParams, QualityReport, Readiness, Rehearsal, RehearsalEvent, Rehearsals,
    SaleOutcome, SalePlan, SalePlanInput, ShardsWritten, StatusChange,
};
use crate::model::{ConsumerModeState, ConsumerModeSwitch};
use crate::server::auth::Principal;
use crate::server::auth::access::Routes;
use crate::server::auth::client::ClientAddr;
use crate::server::error::{ApiError, ErrorBody};
use crate::server::http::export;
use crate::server::http::state::AppState;
use crate::server::stream::live::{Admission, PlanPushed, Pushed, Refused};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use std::convert::Infallible;
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
        .get("/api/consumer/mode", view_operations, consumer_mode)
        .put("/api/consumer/mode", administer, switch_consumer_mode)
        .get("/api/audit", administer, audit)
        .get("/api/me", Access::SignedIn, me)
        .get("/api/admin/users", administer, accounts)
        .post("/api/admin/users", administer, add_account)
        .post("/api/admin/users/{name}/role", administer, set_role)
        .post("/api/admin/users/{name}/disable", administer, disable_account)
        .get("/api/admin/tokens", administer, tokens)
        .post("/api/admin/tokens", administer, create_token)
        .delete("/api/admin/tokens/{name}", administer, revoke_token)
        .get("/api/openapi.json", Access::SignedIn, openapi_json)
        // Any other API path: a 404 in JSON, to signed-in callers.
        .any("/api/{*rest}", Access::SignedIn, no_such_route)
        // Prometheus scrapes it with an API token (viewer is enough).
        .get("/metrics", view_operations, metrics)
        .get("/healthz", Access::Open, health)
        .get("/readyz", Access::Open, ready)
}

/// The live streams: held open for minutes, so kept out of the request timeout.
pub fn live_routes() -> Routes<AppState> {
    let view_operations = Access::Needs(Permission::ViewOperations);
    Routes::new().get("/api/live", view_operations, live).get(
        "/api/sales/{name}/rehearsal/live",
        view_operations,
        rehearsal_live,
    )
}

async fn no_such_route() -> ApiError {
    ApiError::NotFound("no such API route".into())
}

/// The order
#[utoipa::path(
    get, path = "/api/orders/{order_id}", tag = "orders",
    params(("order_id" = String, Path, description = "The order's id")),
    responses(
        (status = 200, description = "The order; a field that could not be read is left out and named in `problems`", body = Order),
        (status = 404, description = "No such order", body = ErrorBody),
    )
)]
async fn order(State(state): State<AppState>, Path(order_id): Path<String>) -> Result<Json<Order>, ApiError> {
    Ok(Json(state.service.order(&order_id).await?))
}

/// A customer's orders, newest first, a page at a time
#[utoipa::path(
    get, path = "/api/customers/{customer_id}/orders", tag = "orders",
    params(("customer_id" = String, Path, description = "The customer's id"), PageParams),
    responses((status = 200, description = "A page of the customer's orders; `next` continues it", body = OrderPage))
)]
async fn customer_orders(
    State(state): State<AppState>,
    Path(customer_id): Path<String>,
    params: Result<Query<PageParams>, QueryRejection>,
) -> Result<Json<OrderPage>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.customer_orders(&customer_id, &params).await?))
}

/// The PENDING list: a page of the orders PENDING on a day and the days before, newest first
///
/// `stuck=1` keeps orders PENDING longer than `--stuck-after-minutes` (a key range, served by the
/// index). `country`, `minTotal` and `customer` are applied to the index items read, so what they
/// pass over is counted in `itemsRead`; a page whose filter matches little stops early (shorter,
/// and `next` continues). A cursor belongs to its filters.
#[utoipa::path(
    get, path = "/api/pending", tag = "pending",
    params(PendingParams),
    responses((status = 200, description = "A page of the list", body = PendingPage))
)]
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

/// A day's counters and how fresh they are
///
/// The day's counts, each minute's, the consumer's freshness, what reconciliation verified and when,
/// and this instance's live connections.
#[utoipa::path(
    get, path = "/api/metrics/pending", tag = "figures",
    params(("date" = Option<NaiveDate>, Query, description = "The day (UTC); today when absent")),
    responses((status = 200, description = "The day's counters", body = PendingMetrics))
)]
async fn pending_metrics(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<PendingMetrics>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.pending_metrics(params.date.as_deref()).await?))
}

/// A day's consumed capacity, throttles and shard heat, with the planner's and the advisor's tables
#[utoipa::path(
    get, path = "/api/capacity", tag = "figures",
    params(("date" = Option<NaiveDate>, Query, description = "The day (UTC); today when absent")),
    responses((status = 200, description = "The day's capacity figures, as the capacity page shows them", body = CapacityReport))
)]
async fn capacity(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<CapacityReport>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.capacity(params.date.as_deref()).await?))
}

/// A day's data quality: schema drift and item sizes, from the stream
#[utoipa::path(
    get, path = "/api/quality", tag = "figures",
    params(("date" = Option<NaiveDate>, Query, description = "The day (UTC); today when absent")),
    responses((status = 200, description = "The day's data quality, as the capacity page's panel shows it", body = QualityReport))
)]
async fn quality(
    State(state): State<AppState>,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Json<QualityReport>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.quality(params.date.as_deref()).await?))
}

/// Every sale plan, by name
#[utoipa::path(
    get, path = "/api/sales", tag = "sales",
    responses((status = 200, description = "The plans", body = SalePlans))
)]
async fn sale_plans(State(state): State<AppState>) -> Result<Json<SalePlans>, ApiError> {
    Ok(Json(SalePlans { plans: state.service.sale_plans().await? }))
}

/// One sale plan
#[utoipa::path(
    get, path = "/api/sales/{name}", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses((status = 200, description = "The plan", body = SalePlan), (status = 404, description = "No such plan", body = ErrorBody))
)]
async fn sale_plan(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<SalePlan>, ApiError> {
    Ok(Json(state.service.sale_plan(&name).await?))
}

/// Creates a sale plan
///
/// Numbers may be sent as numbers or numeric text; `start` is ISO-8601 UTC, not in the past; ramp and
/// decay 0 to 1,440 minutes, hold 1 to 1,440; `itemBytes` 1 to 409,600 (a typical order's when
/// absent). A bad field is a 400 naming it, and nothing is saved.
#[utoipa::path(
    post, path = "/api/sales", tag = "sales",
    request_body = SalePlanInput,
    responses((status = 201, description = "The plan as saved", body = SalePlan), (status = 409, description = "A plan of that name exists", body = ErrorBody))
)]
async fn create_sale_plan(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<SalePlan>), ApiError> {
    let input: SalePlanInput = parse_json(&headers, &body)?;
    Ok((StatusCode::CREATED, Json(state.service.create_sale_plan(&input, &by).await?)))
}

/// Changes a sale plan (its name stays)
///
/// The body is as for `POST /api/sales`.
#[utoipa::path(
    put, path = "/api/sales/{name}", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    request_body = SalePlanInput,
    responses((status = 200, description = "The plan as saved", body = SalePlan), (status = 404, description = "No such plan", body = ErrorBody))
)]
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

/// Deletes a sale plan
#[utoipa::path(
    delete, path = "/api/sales/{name}", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses((status = 200, description = "The plan is deleted", body = Deleted), (status = 404, description = "No such plan", body = ErrorBody))
)]
async fn delete_sale_plan(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    state.service.delete_sale_plan(&name, &by).await?;
    Ok(Json(Deleted { deleted: name }))
}

/// Writes the shard count the plan's peak needs for each sale day not written yet
///
/// At least `--shards`. Nothing is written when a day is written with another count (409).
#[utoipa::path(
    post, path = "/api/sales/{name}/shards", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses(
        (status = 200, description = "The count, and for each day whether it was written or already was", body = ShardsWritten),
        (status = 404, description = "No such plan", body = ErrorBody),
        (status = 409, description = "A sale day is written with another count: nothing was written", body = ErrorBody),
    )
)]
async fn write_sale_shards(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<ShardsWritten>, ApiError> {
    Ok(Json(state.service.write_sale_shards(&name, &by).await?))
}

/// Starts the plan's rehearsal in the background
///
/// Its shape scaled down (about 25 seconds), through the throttle proxy on a scratch embedded store
/// at the sale day's shard count. A server that runs no rehearsals answers 503.
#[utoipa::path(
    post, path = "/api/sales/{name}/rehearsal", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses(
        (status = 202, description = "The running record", body = Rehearsal),
        (status = 404, description = "No such plan", body = ErrorBody),
        (status = 409, description = "A rehearsal of the plan is running", body = ErrorBody),
    )
)]
async fn start_rehearsal(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Rehearsal>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.service.start_rehearsal(&name, &by).await?)))
}

/// The plan's rehearsal running, if any, and the last two finished
#[utoipa::path(
    get, path = "/api/sales/{name}/rehearsal", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses((status = 200, description = "Each record, or null; a stored part that does not read is null", body = Rehearsals), (status = 404, description = "No such plan", body = ErrorBody))
)]
async fn rehearsals(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<Rehearsals>, ApiError> {
    Ok(Json(state.service.rehearsals(&name).await?))
}

/// The plan beside what happened in its window so far
#[utoipa::path(
    get, path = "/api/sales/{name}/outcome", tag = "sales",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses(
        (status = 200, description = "Each figure null when nothing recorded it, with a note saying why or from what", body = SaleOutcome),
        (status = 404, description = "No such plan", body = ErrorBody),
    )
)]
async fn sale_outcome(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<SaleOutcome>, ApiError> {
    Ok(Json(state.service.sale_outcome(&name).await?))
}

#[derive(Debug, Default, serde::Deserialize)]
struct PlanParam {
    plan: Option<String>,
}

/// A sale plan's go/no-go, each check with its verdict, figures and fix
#[utoipa::path(
    get, path = "/api/ready", tag = "sales",
    params(("plan" = String, Query, description = "The sale plan's name")),
    responses((status = 200, description = "The verdict and each check", body = Readiness), (status = 404, description = "No such plan", body = ErrorBody))
)]
async fn readiness(
    State(state): State<AppState>,
    params: Result<Query<PlanParam>, QueryRejection>,
) -> Result<Json<Readiness>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.readiness(params.plan.as_deref()).await?))
}

/// This instance's metrics, in Prometheus' text exposition format
///
/// For a scraper, with an API token (viewer is enough).
#[utoipa::path(
    get, path = "/metrics", tag = "probes",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain; version=0.0.4"))
)]
async fn metrics(State(state): State<AppState>) -> Response {
    let body = crate::server::telemetry::render(&state.service.telemetry());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

/// Live updates of one day, as server-sent events
///
/// Each event's data is one JSON object with its `type`: the day's `counters` first, then `entered`
/// (the order's list row) and `left` as this instance's stream consumer applies changes, `changed`
/// when another instance changed the day's orders (read page one again), and `resync` when events
/// were missed. A stream ends after `--live-max-minutes`; reconnect and read page one again. Over
/// `--max-live` streams, 503; over `--max-live-per-client` from one address, 429.
#[utoipa::path(
    get, path = "/api/live", tag = "live",
    params(("date" = Option<NaiveDate>, Query, description = "The day (UTC); today when absent")),
    responses((status = 200, description = "An event stream; each event's data is one of these", body = LiveEvent, content_type = "text/event-stream"))
)]
async fn live(
    State(state): State<AppState>,
    client: ClientAddr,
    params: Result<Query<DateParam>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    let day = state.service.parse_day(params.date.as_deref())?;
    let admission = admit_live(&state, &client)?;
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

/// A slot for one more live stream from `client`, or why not (503, 429).
fn admit_live(state: &AppState, client: &ClientAddr) -> Result<Admission, ApiError> {
    state.service.live.admit(client.ip()).map_err(|refused| match refused {
        Refused::Full => ApiError::Busy(refused.to_string()),
        Refused::TooManyFromClient => ApiError::TooManyRequests { retry_after_secs: 30, why: refused.to_string() },
    })
}

/// How often a stream re-reads a plan's rehearsals that another server runs.
const ELSEWHERE_EVERY: Duration = Duration::from_secs(2);

/// A plan's rehearsals, live, as server-sent events
///
/// Each event's data is one JSON object with its `type`: the plan's `rehearsals` as stored first
/// (as `GET /api/sales/{name}/rehearsal` answers), then `progress` each second while this server
/// runs the plan's rehearsal, and `finished` with the filed record when it ends. A rehearsal another
/// server runs is re-read every 2 s and sent as `rehearsals` when it changes. On reconnecting, read
/// the rehearsals again (the first event does). Limits as for `GET /api/live`: over `--max-live`
/// streams, 503; over `--max-live-per-client` from one address, 429; a stream ends after
/// `--live-max-minutes`.
#[utoipa::path(
    get, path = "/api/sales/{name}/rehearsal/live", tag = "live",
    params(("name" = String, Path, description = "The sale plan's name")),
    responses(
        (status = 200, description = "An event stream; each event's data is one of these", body = RehearsalEvent, content_type = "text/event-stream"),
        (status = 404, description = "No such plan", body = ErrorBody),
    )
)]
async fn rehearsal_live(
    State(state): State<AppState>,
    client: ClientAddr,
    Path(name): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let admission = admit_live(&state, &client)?;
    // Subscribe before reading, so that an end in between is pushed.
    let receiver = state.service.live.subscribe_rehearsals();
    let first = state.service.rehearsals(&name).await?;
    let elsewhere = first.running.is_some() && !state.service.live.rehearses(&name);
    let snapshot = |r: &Rehearsals| PlanPushed::of("", &RehearsalEvent::Rehearsals(Box::new(r.clone())));
    let opening = snapshot(&first);
    let (service, plan) = (state.service.clone(), name.clone());
    let updates = BroadcastStream::new(receiver).filter_map(move |received| {
        let (service, plan) = (service.clone(), plan.clone());
        async move {
            match received {
                Ok(pushed) => (pushed.plan == plan).then_some(pushed),
                // Fell behind: what is stored now, in place of what was missed.
                Err(BroadcastStreamRecvError::Lagged(_)) => service.rehearsals(&plan).await.ok().map(|r| snapshot(&r)),
            }
        }
    });
    // Another server runs it: its progress is pushed there, not here; the
    // record is re-read until the run ends there (or moves here).
    let (service, plan) = (state.service.clone(), name.clone());
    let polled = futures::stream::unfold(elsewhere.then_some(first), move |last| {
        let (service, plan) = (service.clone(), plan.clone());
        async move {
            let mut last = last?;
            loop {
                tokio::time::sleep(ELSEWHERE_EVERY).await;
                let now = service.rehearsals(&plan).await.ok()?;
                if now != last {
                    let more = now.running.is_some() && !service.live.rehearses(&plan);
                    let pushed = snapshot(&now);
                    return Some((pushed, more.then_some(now)));
                }
                last = now;
            }
        }
    });
    let lifetime = Duration::from_secs(state.limits.live_max_minutes * 60);
    let events = futures::stream::once(async move { opening })
        .chain(futures::stream::select(updates, polled))
        .take_until(state.service.live.closed())
        .take_until(tokio::time::sleep(lifetime))
        .map(move |pushed| {
            // The slot is held for as long as the stream is.
            let _held = &admission;
            Ok(Event::default().data(&pushed.json))
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Creates an order
///
/// Amounts are in minor units; the total is computed. A new order starts PENDING (any other `status`
/// is a 400); `createdAt` must fall within the last day and at most 60 s ahead; text fields may not
/// hold control or text-direction characters.
#[utoipa::path(
    post, path = "/api/orders", tag = "orders",
    request_body = NewOrder,
    responses((status = 201, description = "The order as stored", body = Order), (status = 409, description = "An order with this id exists", body = ErrorBody))
)]
async fn create_order(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Order>), ApiError> {
    let new: NewOrder = parse_json(&headers, &body)?;
    Ok((StatusCode::CREATED, Json(state.service.create_order(new, &by).await?)))
}

/// Moves an order to another status
///
/// Allowed: PENDING to CONFIRMED to SHIPPED to DELIVERED, and PENDING or CONFIRMED to CANCELLED (with a
/// reason). Support may only cancel; ops and admin make any change.
#[utoipa::path(
    post, path = "/api/orders/{order_id}/status", tag = "orders",
    params(("order_id" = String, Path, description = "The order's id")),
    request_body = StatusChange,
    responses(
        (status = 200, description = "The order as it now is", body = Order),
        (status = 404, description = "No such order", body = ErrorBody),
        (status = 409, description = "The order is no longer in `from`: someone changed it first", body = ErrorBody),
    )
)]
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

/// The PENDING list as CSV: every page, newest first, streamed
///
/// The list's query (its days and filters; `limit` and `cursor` are not used). The first row names
/// the columns; totals are in currency units; a row that could not be read whole has empty cells
/// where it could not, and says why in `problems`. The first page is read before the answer starts
/// (a store failing at once is a 503); a failure later breaks the transfer off.
#[utoipa::path(
    get, path = "/api/pending.csv", tag = "pending",
    params(PendingParams),
    responses((status = 200, description = "CSV, a header row then one row per order", body = String, content_type = "text/csv"))
)]
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

/// The PENDING list as JSON lines: every page, newest first, streamed
///
/// As the CSV export, one JSON object per line.
#[utoipa::path(
    get, path = "/api/pending.jsonl", tag = "pending",
    params(PendingParams),
    responses((status = 200, description = "One order per line, each as this schema", body = PendingOrder, content_type = "application/x-ndjson"))
)]
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

/// A customer's history as CSV, newest first
#[utoipa::path(
    get, path = "/api/customers/{customer_id}/orders.csv", tag = "orders",
    params(("customer_id" = String, Path, description = "The customer's id")),
    responses((status = 200, description = "CSV, a header row then one row per order", body = String, content_type = "text/csv"))
)]
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

/// Starts a bulk status change
///
/// These orders, or every PENDING order a list filter matches (at most 10,000), each its own
/// conditional change from `from` (16 at a time) with its audit record naming the run. Support may
/// only cancel.
#[utoipa::path(
    post, path = "/api/bulk/status", tag = "bulk",
    request_body = BulkRequest,
    responses((status = 202, description = "The run's id, to follow it by", body = BulkStarted))
)]
async fn start_bulk(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<BulkStarted>), ApiError> {
    let request: BulkRequest = parse_json(&headers, &body)?;
    let id = state.service.start_bulk(request, &by).await?;
    Ok((StatusCode::ACCEPTED, Json(BulkStarted { id })))
}

/// How far a bulk run got
#[utoipa::path(
    get, path = "/api/bulk/{id}", tag = "bulk",
    params(("id" = String, Path, description = "The run's id, as `POST /api/bulk/status` answered it")),
    responses((status = 200, description = "The run's report; `interrupted` when the server running it stopped", body = BulkReport), (status = 404, description = "No such run", body = ErrorBody))
)]
async fn bulk_report(
    State(state): State<AppState>,
    by: Principal,
    Path(id): Path<String>,
) -> Result<Json<BulkReport>, ApiError> {
    Ok(Json(state.service.bulk_report(&id, &by).await?))
}

/// Stops a bulk run: the changes not yet started are not made
#[utoipa::path(
    delete, path = "/api/bulk/{id}", tag = "bulk",
    params(("id" = String, Path, description = "The run's id, as `POST /api/bulk/status` answered it")),
    responses((status = 200, description = "The run's report", body = BulkReport), (status = 404, description = "No such run", body = ErrorBody))
)]
async fn cancel_bulk(
    State(state): State<AppState>,
    by: Principal,
    Path(id): Path<String>,
) -> Result<Json<BulkReport>, ApiError> {
    Ok(Json(state.service.cancel_bulk(&id, &by).await?))
}

/// An order's history, oldest first: every change, who made it and how
#[utoipa::path(
    get, path = "/api/orders/{order_id}/history", tag = "orders",
    params(("order_id" = String, Path, description = "The order's id")),
    responses((status = 200, description = "The changes", body = OrderHistory))
)]
async fn order_history(
    State(state): State<AppState>,
    Path(order_id): Path<String>,
) -> Result<Json<OrderHistory>, ApiError> {
    Ok(Json(OrderHistory { history: state.service.order_history(&order_id).await? }))
}

/// The audit trail: one actor's changes, else one day's, newest first
#[utoipa::path(
    get, path = "/api/audit", tag = "accounts",
    params(AuditParams),
    responses((status = 200, description = "A page of the trail; `next` continues it", body = AuditListing))
)]
async fn audit(
    State(state): State<AppState>,
    params: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Json<AuditListing>, ApiError> {
    let Query(params) = params.map_err(bad_query)?;
    Ok(Json(state.service.audit(&params).await?))
}

/// Who is asking: name, role and how they signed in
#[utoipa::path(
    get, path = "/api/me", tag = "accounts",
    responses((status = 200, description = "Whoever is asking", body = Me))
)]
async fn me(by: Principal) -> Json<Me> {
    Json(by.me())
}

/// Every account, without password hashes
#[utoipa::path(
    get, path = "/api/admin/users", tag = "accounts",
    responses((status = 200, description = "The accounts", body = Accounts))
)]
async fn accounts(State(state): State<AppState>, by: Principal) -> Result<Json<Accounts>, ApiError> {
    Ok(Json(Accounts { users: state.service.accounts(&by).await? }))
}

/// Adds a local account, signing in with the password given
#[utoipa::path(
    post, path = "/api/admin/users", tag = "accounts",
    request_body = NewAccount,
    responses((status = 201, description = "The account", body = AccountView), (status = 409, description = "An account of that name exists", body = ErrorBody))
)]
async fn add_account(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<AccountView>), ApiError> {
    let new: NewAccount = parse_json(&headers, &body)?;
    Ok((StatusCode::CREATED, Json(state.service.add_account(&new, &by).await?)))
}

/// Gives an account another role; it applies within a second on every instance
#[utoipa::path(
    post, path = "/api/admin/users/{name}/role", tag = "accounts",
    params(("name" = String, Path, description = "The account's name")),
    request_body = RoleChange,
    responses((status = 200, description = "The role is set", body = RoleSet), (status = 404, description = "No such account", body = ErrorBody))
)]
async fn set_role(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<RoleSet>, ApiError> {
    let change: RoleChange = parse_json(&headers, &body)?;
    state.service.set_role(&name, change.role, &by).await?;
    Ok(Json(RoleSet { name, role: change.role }))
}

/// Stops an account signing in; its sessions end within a second on every instance
#[utoipa::path(
    post, path = "/api/admin/users/{name}/disable", tag = "accounts",
    params(("name" = String, Path, description = "The account's name")),
    responses((status = 200, description = "The account is disabled", body = Disabled), (status = 404, description = "No such account", body = ErrorBody))
)]
async fn disable_account(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Disabled>, ApiError> {
    state.service.disable_account(&name, &by).await?;
    Ok(Json(Disabled { disabled: name }))
}

/// The recorded consumer mode: which form of the stream consumer counts
///
/// `serve` (the in-process consumer) or `lambda` (the Lambda function);
/// `recorded` false: none recorded, which counts as `serve`.
#[utoipa::path(
    get, path = "/api/consumer/mode", tag = "figures",
    responses((status = 200, description = "The mode", body = ConsumerModeState))
)]
async fn consumer_mode(State(state): State<AppState>, by: Principal) -> Result<Json<ConsumerModeState>, ApiError> {
    Ok(Json(state.service.consumer_mode(&by).await?))
}

/// Switches the consumer mode (admin)
///
/// A compare-and-set on the mode's version: with `expectedVersion`, refused
/// (409) when the mode moved since it was read. Each form follows within
/// seconds; they hand over at the shared shard checkpoints.
#[utoipa::path(
    put, path = "/api/consumer/mode", tag = "figures",
    request_body = ConsumerModeSwitch,
    responses(
        (status = 200, description = "The mode now", body = ConsumerModeState),
        (status = 409, description = "The mode moved since expectedVersion", body = ErrorBody)
    )
)]
async fn switch_consumer_mode(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ConsumerModeState>, ApiError> {
    let switch: ConsumerModeSwitch = parse_json(&headers, &body)?;
    Ok(Json(state.service.switch_consumer_mode(&switch, &by).await?))
}

/// Every API token, without its secret
#[utoipa::path(
    get, path = "/api/admin/tokens", tag = "accounts",
    responses((status = 200, description = "The tokens", body = Tokens))
)]
async fn tokens(State(state): State<AppState>, by: Principal) -> Result<Json<Tokens>, ApiError> {
    Ok(Json(Tokens { tokens: state.service.tokens(&by).await? }))
}

/// Creates an API token
///
/// The token's text is in this answer only: it is not shown again.
#[utoipa::path(
    post, path = "/api/admin/tokens", tag = "accounts",
    request_body = NewToken,
    responses((status = 201, description = "The token, with its text", body = CreatedToken), (status = 409, description = "A token of that name exists", body = ErrorBody))
)]
async fn create_token(
    State(state): State<AppState>,
    by: Principal,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    let new: NewToken = parse_json(&headers, &body)?;
    let token = state.service.create_token(&new, &by).await?;
    Ok((StatusCode::CREATED, Json(CreatedToken { name: new.name, role: new.role, token })))
}

/// Revokes an API token: every instance refuses it within a second
#[utoipa::path(
    delete, path = "/api/admin/tokens/{name}", tag = "accounts",
    params(("name" = String, Path, description = "The token's name")),
    responses((status = 200, description = "The token is revoked", body = Revoked), (status = 404, description = "No such token", body = ErrorBody))
)]
async fn revoke_token(
    State(state): State<AppState>,
    by: Principal,
    Path(name): Path<String>,
) -> Result<Json<Revoked>, ApiError> {
    state.service.revoke_token(&name, &by).await?;
    Ok(Json(Revoked { revoked: name }))
}

/// This document: the JSON API in OpenAPI 3.1
///
/// Generated from the handlers' and the model's types, as `docs/openapi.json` holds it.
#[utoipa::path(get, path = "/api/openapi.json", tag = "probes",
    responses((status = 200, description = "The OpenAPI document", body = Object))
)]
async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi::json()).into_response()
}

/// Liveness: the process answers
///
/// No store call, so a store outage does not make an orchestrator restart healthy servers.
#[utoipa::path(
    get, path = "/healthz", tag = "probes",
    responses((status = 200, description = "Up", body = ProbeAnswer, example = json!({"status": "ok"})))
)]
async fn health() -> Json<ProbeAnswer> {
    Json(ProbeAnswer { status: "ok" })
}

/// Readiness: the store answers and the tables exist (checked at most once a second, shared by every probe)
#[utoipa::path(
    get, path = "/readyz", tag = "probes",
    responses((status = 200, description = "Ready", body = ProbeAnswer, example = json!({"status": "ready"})), (status = 503, description = "The store does not answer, or a table is missing", body = ErrorBody))
)]
async fn ready(State(state): State<AppState>) -> Result<Json<ProbeAnswer>, ApiError> {
    state.service.ready().await?;
    Ok(Json(ProbeAnswer { status: "ready" }))
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

//! The middleware that times every HTTP request by its route, into the
//! process's recorder (`server::telemetry`).

use crate::server::telemetry::{HTTP_DURATION, HTTP_REQUESTS, UNROUTED};
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;

/// The route pattern a request matched, carried out on its response to the
/// outer `track_http` (which runs before routing, so it sees every request).
#[derive(Clone, Debug)]
struct RouteLabel(String);

/// Added as a route layer: runs only for matched routes, and names them by
/// their pattern.
pub async fn mark_route(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_string());
    let mut response = next.run(request).await;
    if let Some(route) = route {
        response.extensions_mut().insert(RouteLabel(route));
    }
    response
}

/// Counts and times every request, by the route pattern `mark_route` found
/// (or `UNROUTED`), its method and its status.
pub async fn track_http(request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let route = response.extensions().get::<RouteLabel>().map_or(UNROUTED.to_string(), |r| r.0.clone());
    let labels = [("route", route), ("method", method), ("status", response.status().as_u16().to_string())];
    metrics::counter!(HTTP_REQUESTS, &labels).increment(1);
    metrics::histogram!(HTTP_DURATION, &labels).record(started.elapsed().as_secs_f64());
    response
}

//! What every request passes through: a request id and its log span, JSON
//! errors on the API whatever produced them, canonical page paths, and a rate
//! limit per client address.

use crate::model::ErrorKind;
use crate::server::error::ApiError;
use axum::body::{Body, to_bytes};
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{HttpMakeClassifier, TraceLayer};

pub const REQUEST_ID: &str = "x-request-id";
/// Largest error body read back to add the request id to it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Paths whose answers are JSON, errors included (a scraper of `/metrics`
/// gets a 401 with a JSON body, not the sign-in page).
pub fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

type RequestIdLayers = Stack<
    PropagateRequestIdLayer,
    Stack<
        TraceLayer<HttpMakeClassifier, fn(&Request) -> tracing::Span>,
        Stack<SetRequestIdLayer<MakeRequestUuid>, Identity>,
    >,
>;

/// Gives every request an id (the client's, or a new UUID), logs the request
/// in a span that carries it, and returns it in the answer's
/// `x-request-id`: what an error tells the client and what the log says of
/// it meet on this id.
pub fn request_ids() -> ServiceBuilder<RequestIdLayers> {
    ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(TraceLayer::new_for_http().make_span_with(span as fn(&Request) -> tracing::Span))
        .layer(PropagateRequestIdLayer::x_request_id())
}

fn span(request: &Request) -> tracing::Span {
    let id = request.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
}

/// Every error answer of the API is `{"error": "...", "requestId": "..."}`,
/// whether a handler, an extractor, the router (404, 405), a limit (413,
/// 503 on timeout) or a server function produced it.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let api = is_api(request.uri().path());
    let id = request.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).map(str::to_string);
    let mut response = next.run(request).await;
    let status = response.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        // The body was refused unread: this connection cannot carry another
        // request, and the client must not try.
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if !api || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let text = to_bytes(body, MAX_ERROR_BODY).await.unwrap_or_default();
    let mut object = match serde_json::from_slice::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(object)) if is_json && object.contains_key("error") => object,
        _ => serde_json::Map::from_iter([
            ("error".to_string(), plain_message(status, &text).into()),
            ("kind".to_string(), serde_json::to_value(ErrorKind::of_status(status.as_u16())).unwrap_or_default()),
        ]),
    };
    if let Some(id) = id {
        object.insert("requestId".into(), id.into());
    }
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(serde_json::Value::Object(object).to_string()))
}

/// Headers every answer carries, and the Content-Security-Policy: a page's
/// names the nonce its own scripts carry; anything else gets a strict one.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if is_html(&response) {
        response = with_page_csp(response).await;
    }
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(STATIC_CSP));
    }
    response
}

fn is_html(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

/// A page's policy, from the nonce its hydration script was rendered with.
/// The header is made here, from the page itself, rather than during the
/// render: the render's own header was seen missing from an order page (in
/// CI, and once in 35 browser tests here) while the page's scripts carried
/// a nonce, so the browser refused them and the page never came alive. Pages
/// are rendered whole (`SsrMode::Async`), so reading one back costs a copy.
async fn with_page_csp(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(err) => {
            tracing::warn!(error = %err, "a page's body could not be read");
            return ApiError::Busy("the page could not be sent; try again".into()).into_response();
        }
    };
    match page_nonce(&bytes).and_then(|nonce| HeaderValue::from_str(&page_csp(nonce)).ok()) {
        Some(policy) => {
            parts.headers.insert(header::CONTENT_SECURITY_POLICY, policy);
        }
        None => {
            parts.headers.remove(header::CONTENT_SECURITY_POLICY);
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The nonce of the first script in a page's `<head>` (Leptos's hydration
/// script), before anything the page shows: a value in the body, where user
/// data is, is never read.
fn page_nonce(page: &[u8]) -> Option<&str> {
    let page = std::str::from_utf8(page).ok()?;
    let head = &page[..page.find("</head>")?];
    let start = head.find(" nonce=\"")? + " nonce=\"".len();
    let nonce = &head[start..start + head[start..].find('"')?];
    let valid = nonce.len() >= 16
        && nonce.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/' | b'='));
    valid.then_some(nonce)
}

/// How long browsers keep what they fetched. A hashed asset (`/pkg/`, named by
/// its content when the build hashes file names) never changes under its
/// name: kept a year without asking again. Pages are per user and change
/// all the time: kept, but revalidated on every use, and never by a shared
/// cache. Anything else keeps the default (revalidated by `Last-Modified`).
pub async fn cache_control(hashed_assets: bool, request: Request, next: Next) -> Response {
    let immutable = hashed_assets && is_hashed_asset(request.uri().path());
    let mut response = next.run(request).await;
    if response.headers().contains_key(header::CACHE_CONTROL) {
        return response;
    }
    let value = if immutable && response.status().is_success() {
        "public, max-age=31536000, immutable"
    } else if is_html(&response) {
        "no-cache, private"
    } else {
        return response;
    };
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    response
}

/// The files cargo-leptos names by their content hash: everything under
/// `/pkg/` but wasm-bindgen's `snippets/`, which keep their names.
fn is_hashed_asset(path: &str) -> bool {
    path.strip_prefix("/pkg/").is_some_and(|rest| !rest.is_empty() && !rest.starts_with("snippets/"))
}

/// For everything but the app's pages: styles from this site, no script.
const STATIC_CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                          frame-ancestors 'none'; base-uri 'none'";

/// The app's pages: scripts only with this response's nonce (and the wasm
/// they start), everything else from this site; never framed.
fn page_csp(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// Our words for an error that arrived without any: the router's and the
/// limits' plain-text answers.
fn plain_message(status: StatusCode, text: &[u8]) -> String {
    match status {
        StatusCode::NOT_FOUND => "no such API route".into(),
        StatusCode::METHOD_NOT_ALLOWED => "method not allowed here: see the Allow header".into(),
        StatusCode::PAYLOAD_TOO_LARGE => "the request body is too large".into(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "send the body as application/json".into(),
        StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE => {
            "the request took too long; try again shortly".into()
        }
        s if s.is_client_error() => {
            // An extractor's rejection (a path that is not UTF-8, say): its
            // own words are about the request, never about the store.
            let text = String::from_utf8_lossy(text);
            let text = text.trim();
            if text.is_empty() || text.len() > 300 { "bad request".into() } else { format!("bad request: {text}") }
        }
        _ => "internal error: the request id identifies it in the server's log".into(),
    }
}

/// A page asked for with a trailing slash (`/orders/o-1/`) is sent to its
/// canonical address, so that every page is rendered by its own route with
/// its own context, however it is reached.
pub async fn canonical_paths(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let is_page = !(is_api(path) || path.starts_with("/pkg/") || path.starts_with("/auth/"));
    if is_page && path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let target = match request.uri().query() {
            Some(query) => format!("{}?{query}", if trimmed.is_empty() { "/" } else { trimmed }),
            None => if trimmed.is_empty() { "/" } else { trimmed }.to_string(),
        };
        return Redirect::permanent(&target).into_response();
    }
    next.run(request).await
}

/// Requests per second and burst allowed to one client address on the API.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Option<Arc<DefaultKeyedRateLimiter<IpAddr>>>,
    checks: Arc<AtomicU64>,
}

/// Every so many checks, addresses not seen lately are forgotten, so the
/// limiter's memory stays bounded by the clients of the last moments.
const FORGET_EVERY: u64 = 4096;

impl RateLimit {
    /// `per_second` 0 turns the limit off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let quota =
            NonZeroU32::new(per_second).map(|rate| Quota::per_second(rate).allow_burst(nonzero_or(burst, rate)));
        Self::with_quota(quota)
    }

    /// `per_minute` 0 turns the limit off.
    pub fn per_minute(per_minute: u32, burst: u32) -> Self {
        let quota =
            NonZeroU32::new(per_minute).map(|rate| Quota::per_minute(rate).allow_burst(nonzero_or(burst, rate)));
        Self::with_quota(quota)
    }

    fn with_quota(quota: Option<Quota>) -> Self {
        Self { limiter: quota.map(|q| Arc::new(DefaultKeyedRateLimiter::keyed(q))), checks: Arc::default() }
    }

    /// Seconds to wait when `client` is over its rate, else `None`.
    pub fn check(&self, client: IpAddr) -> Option<u64> {
        let limiter = self.limiter.as_ref()?;
        if self.checks.fetch_add(1, Ordering::Relaxed) % FORGET_EVERY == FORGET_EVERY - 1 {
            limiter.retain_recent();
        }
        let refused = limiter.check_key(&client).err()?;
        Some(refused.wait_time_from(DefaultClock::default().now()).as_secs().max(1))
    }
}

/// Limits `/api/` only: probes, pages and static files are not API calls.
fn nonzero_or(n: u32, fallback: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(fallback)
}

pub async fn rate_limit(limit: RateLimit, request: Request, next: Next) -> Response {
    if request.uri().path().starts_with("/api/") {
        let client = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        if let Some(retry_after_secs) = client.and_then(|ip| limit.check(ip)) {
            let why = "this address is over its API rate; slow down".to_string();
            return ApiError::TooManyRequests { retry_after_secs, why }.into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pages_nonce_is_read_from_its_head_only() {
        let page = r#"<!DOCTYPE html><html><head><link rel="modulepreload" href="/pkg/a.js" nonce="AbCdEfGhIjKlMnOp_q-1"><script nonce="AbCdEfGhIjKlMnOp_q-1">x</script></head><body>nonce="EVILEVILEVILEVILEVIL"</body></html>"#;
        assert_eq!(page_nonce(page.as_bytes()), Some("AbCdEfGhIjKlMnOp_q-1"));
        let no_head_nonce =
            r#"<html><head><title>t</title></head><body><p nonce="EVILEVILEVILEVILEVIL"></p></body></html>"#;
        assert_eq!(page_nonce(no_head_nonce.as_bytes()), None);
        // A value that could break out of the header is not taken.
        let odd = r#"<html><head><script nonce="abc; script-src *; x=yyyyyyyy"></script></head></html>"#;
        assert_eq!(page_nonce(odd.as_bytes()), None);
        assert_eq!(page_nonce(b"<html><head><script nonce=\"short\"></script></head></html>"), None);
    }

    #[test]
    fn the_rate_limit_refuses_a_burst_and_names_a_wait() {
        let limit = RateLimit::new(1, 3);
        let client: IpAddr = "10.1.2.3".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(limit.check(client), None);
        }
        assert_eq!(limit.check(client), Some(1));
        assert_eq!(limit.check("10.1.2.4".parse().unwrap()), None, "another client has its own budget");
        assert_eq!(RateLimit::new(0, 1).check(client), None, "0 turns it off");
    }

    #[test]
    fn plain_errors_get_our_words() {
        assert_eq!(plain_message(StatusCode::NOT_FOUND, b""), "no such API route");
        assert_eq!(plain_message(StatusCode::BAD_REQUEST, b"Invalid URL"), "bad request: Invalid URL");
        assert!(
            plain_message(StatusCode::INTERNAL_SERVER_ERROR, b"panic at store.rs:12").starts_with("internal error")
        );
    }
}

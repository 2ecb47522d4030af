//! What every request passes through: a request id and its log span, JSON
//! errors on the API whatever produced them, canonical page paths, and a rate
//! limit per client (token, else address).

use crate::model::ErrorKind;
use crate::server::auth::access::is_api;
use crate::server::auth::client::ClientAddr;
use crate::server::error::ApiError;
use crate::server::rate_limit::ApiRate;
use crate::server::telemetry::REQUEST_ID;
use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use leptos::nonce::Nonce;
use std::net::{IpAddr, Ipv4Addr};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{HttpMakeClassifier, TraceLayer};

/// Largest error body read back to add the request id to it.
const MAX_ERROR_BODY: usize = 64 * 1024;

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
    let client = ClientAddr::of(request.extensions()).map_or_else(|| "-".to_string(), |c| c.to_string());
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id, %client)
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

/// Headers every answer carries, and the Content-Security-Policy. Each
/// request gets a fresh script nonce, in its extensions: the page render
/// takes it from there (`page_nonce`, in the Leptos context), so the page's
/// scripts and its policy name the same nonce by construction, and the page
/// is never read back. Anything but a page gets a strict policy.
pub async fn security_headers(mut request: Request, next: Next) -> Response {
    let nonce = Nonce::new();
    request.extensions_mut().insert(nonce.clone());
    let mut response = next.run(request).await;
    let policy = match is_html(&response) {
        true => HeaderValue::from_str(&page_csp(&nonce)).ok(),
        false => None,
    };
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CONTENT_SECURITY_POLICY, policy.unwrap_or(HeaderValue::from_static(STATIC_CSP)));
    response
}

/// The nonce `security_headers` gave the request being rendered, for the
/// Leptos context (`use_nonce`, which the hydration scripts read). `None`
/// outside such a request.
pub fn page_nonce(request: &axum::http::request::Parts) -> Option<Nonce> {
    request.extensions.get::<Nonce>().cloned()
}

fn is_html(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

/// How long browsers keep what they fetched. A hashed asset (`/pkg/`, named by
/// its content when the build hashes file names) never changes under its
/// name: kept a year without asking again. Pages are per user and change
/// all the time: kept, but revalidated on every use, and never by a shared
/// cache. Anything else keeps the default (revalidated by `Last-Modified`).
///
/// A hashed asset also goes without the headers that only a document or a
/// revalidation reads (the policy, framing and referrer rules, the date it
/// changed, the request id): a first visit fetches the stylesheet, the
/// script, the wasm and the split loader, and those headers were some 330
/// bytes of each answer's 530 (issue 34's first load). The file's type,
/// `nosniff`, its coding and `Vary` stay.
pub async fn cache_control(hashed_assets: bool, request: Request, next: Next) -> Response {
    let immutable = hashed_assets && is_hashed_asset(request.uri().path());
    let mut response = next.run(request).await;
    if immutable && response.status().is_success() {
        let headers = response.headers_mut();
        for name in DOCUMENT_ONLY {
            headers.remove(name);
        }
    }
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

/// Headers a hashed asset is sent without (see `cache_control`). Its name is
/// its validator, so `Last-Modified` serves nothing: it is never revalidated.
const DOCUMENT_ONLY: [header::HeaderName; 5] = [
    header::CONTENT_SECURITY_POLICY,
    header::REFERRER_POLICY,
    header::X_FRAME_OPTIONS,
    header::LAST_MODIFIED,
    header::HeaderName::from_static(REQUEST_ID),
];

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

/// Limits `/api/` only: probes, pages and static files are not API calls.
/// Counted per token when the request carries one, else per client address
/// (`ApiRate`); a token the guard refuses is charged to the address too.
pub async fn rate_limit(limit: ApiRate, request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with("/api/") {
        return next.run(request).await;
    }
    let client = ClientAddr::of(request.extensions()).map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), ClientAddr::ip);
    let token = crate::server::auth::token_name(request.headers());
    if let Some(retry_after_secs) = limit.check(client, token.as_deref()) {
        let why = match token {
            Some(_) => "this API token is over its rate; slow down",
            None => "this address is over its API rate; slow down",
        };
        return ApiError::TooManyRequests { retry_after_secs, why: why.to_string() }.into_response();
    }
    let response = next.run(request).await;
    if token.is_some() && response.status() == StatusCode::UNAUTHORIZED {
        limit.invalid_token(client);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_errors_get_our_words() {
        assert_eq!(plain_message(StatusCode::NOT_FOUND, b""), "no such API route");
        assert_eq!(plain_message(StatusCode::BAD_REQUEST, b"Invalid URL"), "bad request: Invalid URL");
        assert!(
            plain_message(StatusCode::INTERNAL_SERVER_ERROR, b"panic at store.rs:12").starts_with("internal error")
        );
    }
}

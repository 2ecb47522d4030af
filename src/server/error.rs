//! The HTTP layer's error, `ApiError`: it becomes a status and a body in
//! exactly one place, and what it tells the client never carries the store's
//! internals (codes, messages, cause chains): those go to the log, inside
//! the request's span, which carries the request id the client is given.

use crate::model::{ErrorKind, Invalid};
use crate::server::store::error::{StoreError, Unavailable};
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error of the HTTP layer. Every variant is a client's mistake (4xx)
/// except `Store`, which maps by its kind.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    /// A value that breaks one of the input rules.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("bad cursor: {0}")]
    BadCursor(#[from] crate::server::cursor::CursorError),
    #[error("{0}")]
    NotFound(String),
    /// No session and no token, or a token that is not (or no longer) valid.
    #[error("sign in first: a session cookie from /login, or an `Authorization: Bearer` API token")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("send the body as application/json")]
    UnsupportedMediaType,
    #[error("too many requests: {why}")]
    TooManyRequests { retry_after_secs: u64, why: String },
    /// This server is at a limit of its own (not the store's).
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What every failed API request answers, on every route and server
/// function: our own words, never the store's.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// What went wrong, for a person to read.
    pub error: String,
    /// What went wrong, for a program to tell apart.
    pub kind: ErrorKind,
    /// The request's id, also sent as `x-request-id`: the server's log has
    /// the details under it. Set on every answer the server sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Seconds a client is asked to wait before retrying when the store is down.
const RETRY_AFTER_SECS: u64 = 2;

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::Invalid(_) | ApiError::BadCursor(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) | ApiError::Store(StoreError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Store(StoreError::Conflict(_)) => StatusCode::CONFLICT,
            ApiError::Store(StoreError::Unavailable { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine-readable kind, sent beside the message: the status's
    /// kind, but for a bad cursor.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ApiError::BadCursor(_) => ErrorKind::BadCursor,
            other => ErrorKind::of_status(other.status().as_u16()),
        }
    }

    /// What the client is told: our own words, never the store's.
    pub fn public_message(&self) -> String {
        match self {
            ApiError::Store(StoreError::Unavailable { kind: Unavailable::NoTable, .. }) => {
                "the order store has no tables yet: run `northwind-ops provision`".into()
            }
            ApiError::Store(StoreError::Unavailable { kind: Unavailable::Throttled, .. }) => {
                "the order store is busy (throttled); try again shortly".into()
            }
            ApiError::Store(StoreError::Unavailable { .. }) => {
                "the order store is unavailable; try again shortly".into()
            }
            ApiError::Store(
                StoreError::SchemaMismatch { .. }
                | StoreError::Data(_)
                | StoreError::Rejected(_)
                | StoreError::Trimmed(_),
            ) => "internal error: the request id identifies it in the server's log".into(),
            other => other.to_string(),
        }
    }

    /// Seconds to wait before retrying, for the answers that have one.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::TooManyRequests { retry_after_secs, .. } => Some(*retry_after_secs),
            ApiError::Busy(_) => Some(RETRY_AFTER_SECS * 15),
            ApiError::Store(StoreError::Unavailable { .. }) => Some(RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// Logs what the client is not told, in the request's span.
    pub fn log(&self) {
        match self.status() {
            s if s.is_server_error() => tracing::error!(error = %self, "request failed"),
            StatusCode::TOO_MANY_REQUESTS => tracing::debug!(error = %self, "request refused"),
            _ => tracing::info!(error = %self, "request refused"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let body = ErrorBody { error: self.public_message(), kind: self.kind(), request_id: None };
        let mut response = (self.status(), Json(body)).into_response();
        if matches!(self, ApiError::Unauthorized) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after() {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_the_kind_of_its_status_but_a_bad_cursor() {
        use crate::server::cursor::CursorError;
        let cases = [
            (ApiError::BadRequest("x".into()), ErrorKind::BadRequest),
            (ApiError::BadCursor(CursorError::NoPosition), ErrorKind::BadCursor),
            (ApiError::NotFound("x".into()), ErrorKind::NotFound),
            (ApiError::Unauthorized, ErrorKind::Unauthorized),
            (ApiError::Forbidden("x".into()), ErrorKind::Forbidden),
            (ApiError::UnsupportedMediaType, ErrorKind::BadRequest),
            (ApiError::TooManyRequests { retry_after_secs: 1, why: "x".into() }, ErrorKind::TooManyRequests),
            (ApiError::Busy("x".into()), ErrorKind::Unavailable),
            (ApiError::Store(StoreError::NotFound("x".into())), ErrorKind::NotFound),
            (ApiError::Store(StoreError::Conflict("x".into())), ErrorKind::Conflict),
            (ApiError::Store(StoreError::unavailable(Unavailable::TimedOut, "x")), ErrorKind::Unavailable),
            (ApiError::Store(StoreError::Rejected("x".into())), ErrorKind::Internal),
        ];
        for (err, kind) in cases {
            assert_eq!(err.kind(), kind, "{err:?}");
        }
    }

    #[test]
    fn the_client_never_sees_the_stores_words() {
        let internal = ApiError::Store(StoreError::Rejected("ValidationException: secret table layout".into()));
        assert_eq!(internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!internal.public_message().contains("ValidationException"));
        let down =
            ApiError::Store(StoreError::unavailable(Unavailable::Unreachable, "dispatch failure: 10.0.0.7:8000"));
        assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!down.public_message().contains("10.0.0.7"));
        assert_eq!(down.retry_after(), Some(RETRY_AFTER_SECS));
        let ours = ApiError::Store(StoreError::Conflict("order o-1 is CONFIRMED, not PENDING".into()));
        assert_eq!(
            (ours.status(), ours.public_message().as_str()),
            (StatusCode::CONFLICT, "order o-1 is CONFIRMED, not PENDING")
        );
    }
}

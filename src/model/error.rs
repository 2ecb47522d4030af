//! What a failed request was, as the API and the pages name it.

use super::*;

/// What a failed request was, as the API's `kind` and the pages' views
/// need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub enum ErrorKind {
    BadRequest,
    BadCursor,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    TooManyRequests,
    Unavailable,
    Internal,
}

impl ErrorKind {
    /// The kind an HTTP error status stands for: the one place a status is
    /// read as a kind (the API's plain answers, the pages' server-function
    /// failures, and every `ApiError` but a bad cursor, which is a 400 of
    /// its own kind).
    pub fn of_status(status: u16) -> ErrorKind {
        match status {
            401 => ErrorKind::Unauthorized,
            403 | 421 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::Conflict,
            429 => ErrorKind::TooManyRequests,
            408 | 503 => ErrorKind::Unavailable,
            400..=499 => ErrorKind::BadRequest,
            _ => ErrorKind::Internal,
        }
    }
}

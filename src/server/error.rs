//! One error type per layer: `StoreError` for the data layer, `ApiError` for
//! HTTP. `ApiError` is turned into a status code in exactly one place.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// The store did not answer, or asked us to slow down: worth retrying.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// Tables that exist but do not match the key design.
    #[error("table {table} does not match the Northwind Ops key design:\n  - {}", .differences.join("\n  - "))]
    SchemaMismatch { table: String, differences: Vec<String> },
    /// An item in the table that this program cannot read.
    #[error("unreadable item: {0}")]
    Data(String),
    #[error("the store refused the request: {0}")]
    Dynamo(String),
}

impl<E, R> From<SdkError<E, R>> for StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    fn from(err: SdkError<E, R>) -> Self {
        match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
                StoreError::Unavailable(describe(&err))
            }
            SdkError::ServiceError(service) => {
                let code = service.err().code().unwrap_or("Unknown");
                let message = service.err().message().unwrap_or_default().to_string();
                match code {
                    "ProvisionedThroughputExceededException"
                    | "ThrottlingException"
                    | "RequestLimitExceeded"
                    | "InternalServerError"
                    | "ServiceUnavailable" => StoreError::Unavailable(format!("{code}: {message}")),
                    "ResourceNotFoundException" => StoreError::Unavailable(format!(
                        "{message} (run `northwind-ops provision` to create the tables)"
                    )),
                    _ => StoreError::Dynamo(format!("{code}: {message}")),
                }
            }
            _ => StoreError::Dynamo(describe(&err)),
        }
    }
}

/// The whole cause chain: the SDK's top-level messages alone ("dispatch
/// failure") do not say what went wrong.
fn describe(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A request the SDK refused to build: a bug here, not the store's answer.
impl From<aws_sdk_dynamodb::error::BuildError> for StoreError {
    fn from(err: aws_sdk_dynamodb::error::BuildError) -> Self {
        StoreError::Dynamo(format!("invalid request: {err}"))
    }
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(err: serde_dynamo::Error) -> Self {
        StoreError::Data(err.to_string())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Store(StoreError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::Store(StoreError::Conflict(_)) => StatusCode::CONFLICT,
            ApiError::Store(StoreError::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<super::cursor::CursorError> for ApiError {
    fn from(err: super::cursor::CursorError) -> Self {
        ApiError::BadRequest(format!("bad cursor: {err}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        (status, Json(serde_json::json!({ "error": self.to_string() }))).into_response()
    }
}

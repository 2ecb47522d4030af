//! The data layer's error: what the store's callers may tell apart (not
//! found, conflict, unavailable and why, throttled and by which limit), read
//! once from the SDK's errors here. The HTTP layer maps it to a status in
//! `server::error`.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::ThrottlingReason;
use aws_sdk_dynamodb::types::error::{
    ProvisionedThroughputExceededException, RequestLimitExceeded, ThrottlingException,
};
use std::fmt;

#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// What a write expected to find is not there.
    #[error("{0}")]
    NotFound(String),
    /// A conditional write lost to another writer.
    #[error("{0}")]
    Conflict(String),
    /// The store did not answer in time, could not be reached, or asked us
    /// to slow down: worth retrying later. A throttle carries the reasons
    /// DynamoDB gave for it (none from engines or answers that give none).
    #[error("the store is unavailable ({kind}): {detail}")]
    Unavailable { kind: Unavailable, detail: String, throttles: Vec<Throttle> },
    /// Tables that exist but do not match the key design.
    #[error("table {table} does not match the Northwind Ops key design:\n  - {}", .differences.join("\n  - "))]
    SchemaMismatch { table: String, differences: Vec<String> },
    /// An item in the table that this program cannot read.
    #[error("unreadable item: {0}")]
    Data(String),
    /// The stream no longer holds the records asked for (kept 24 hours).
    #[error("the stream's records were trimmed: {0}")]
    Trimmed(String),
    /// The store refused the request: a bug or a misconfiguration here.
    #[error("the store refused the request: {0}")]
    Rejected(String),
}

/// Why the store is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    Unreachable,
    TimedOut,
    Throttled,
    /// The tables are missing: `provision` has not run.
    NoTable,
    ServerError,
    /// The store kept changing under an operation that needs it still.
    Busy,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unavailable::Unreachable => "unreachable",
            Unavailable::TimedOut => "timed out",
            Unavailable::Throttled => "throttled",
            Unavailable::NoTable => "tables missing",
            Unavailable::ServerError => "server error",
            Unavailable::Busy => "busy",
        })
    }
}

/// The reason filed for a throttle that came without one (local engines;
/// DynamoDB before 2025).
pub const NOT_NAMED: &str = "not named";

/// One reason DynamoDB gave for throttling a request: the limit that was
/// reached (`IndexWriteKeyRangeThroughputExceeded`, `TableReadProvisionedThroughputExceeded`, ...)
/// and the ARN of the table or index it was reached on. Its messages name
/// neither: only these do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throttle {
    pub reason: String,
    pub resource: String,
}

impl Throttle {
    /// The index the resource is (`arn:...:table/orders/index/GSI2` is
    /// `GSI2`), or `None` for the table itself.
    pub fn index(&self) -> Option<&str> {
        self.resource.split_once("/index/").map(|(_, index)| index)
    }

    /// Where it was throttled, as a tally names it: the index, `table`, for
    /// a cancelled transaction (whose reasons name only the action's table)
    /// `<table> or its indexes`, or `not named` when DynamoDB named nothing.
    pub fn place(&self) -> String {
        match self.index() {
            Some(index) => index.to_string(),
            None if self.reason == NOT_NAMED => NOT_NAMED.to_string(),
            None if self.reason.starts_with("Transaction") => {
                let table = self.resource.rsplit('/').next().unwrap_or("unknown");
                format!("{table} or its indexes")
            }
            None => "table".to_string(),
        }
    }
}

impl From<&ThrottlingReason> for Throttle {
    fn from(reason: &ThrottlingReason) -> Self {
        Throttle {
            reason: reason.reason().unwrap_or("unknown").to_string(),
            resource: reason.resource().unwrap_or("unknown").to_string(),
        }
    }
}

impl fmt::Display for Throttle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.reason, self.resource)
    }
}

impl StoreError {
    pub fn unavailable(kind: Unavailable, detail: impl Into<String>) -> Self {
        StoreError::Unavailable { kind, detail: detail.into(), throttles: Vec::new() }
    }

    /// Whether DynamoDB refused it for throughput (it wrote nothing).
    pub fn is_throttled(&self) -> bool {
        matches!(self, StoreError::Unavailable { kind: Unavailable::Throttled, .. })
    }

    /// The throttling reasons of an `Unavailable`, none for any other error.
    pub fn throttles(&self) -> &[Throttle] {
        match self {
            StoreError::Unavailable { throttles, .. } => throttles,
            _ => &[],
        }
    }
}

impl<E, R> From<SdkError<E, R>> for StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    fn from(err: SdkError<E, R>) -> Self {
        match &err {
            SdkError::TimeoutError(_) => StoreError::unavailable(Unavailable::TimedOut, describe(&err)),
            SdkError::DispatchFailure(failure) if failure.is_timeout() => {
                StoreError::unavailable(Unavailable::TimedOut, describe(&err))
            }
            SdkError::DispatchFailure(_) => StoreError::unavailable(Unavailable::Unreachable, describe(&err)),
            SdkError::ResponseError(_) => StoreError::unavailable(Unavailable::ServerError, describe(&err)),
            SdkError::ServiceError(service) => {
                let code = service.err().code().unwrap_or("Unknown");
                let detail = format!("{code}: {}", service.err().message().unwrap_or_default());
                match code {
                    "ProvisionedThroughputExceededException"
                    | "ThrottlingException"
                    | "RequestLimitExceeded"
                    // The stream's own word for it.
                    | "LimitExceededException" => {
                        let throttles = throttles_of(service.err());
                        let detail = match throttles.as_slice() {
                            [] => detail,
                            named => format!(
                                "{detail} [{}]",
                                named.iter().map(Throttle::to_string).collect::<Vec<_>>().join("; ")
                            ),
                        };
                        StoreError::Unavailable { kind: Unavailable::Throttled, detail, throttles }
                    }
                    "InternalServerError" | "ServiceUnavailable" => {
                        StoreError::unavailable(Unavailable::ServerError, detail)
                    }
                    "ResourceNotFoundException" => StoreError::unavailable(
                        Unavailable::NoTable,
                        format!("{detail} (run `northwind-ops provision` to create the tables)"),
                    ),
                    _ => StoreError::Rejected(detail),
                }
            }
            _ => StoreError::Rejected(describe(&err)),
        }
    }
}

/// The reasons of a throttling error. The generic code and message cannot
/// carry them: they are fields of the modeled exception, which an
/// operation's error enum (`PutItemError`, `QueryError`, ...) gives as its
/// `source()`; any operation's error is read the same way.
fn throttles_of(err: &(dyn std::error::Error + 'static)) -> Vec<Throttle> {
    throttling(err).unwrap_or_default()
}

/// `Some` (the reasons, perhaps none) when `err` or its source is one of the
/// three throttling exceptions, `None` for any other error.
pub(crate) fn throttling(err: &(dyn std::error::Error + 'static)) -> Option<Vec<Throttle>> {
    [Some(err), err.source()]
        .into_iter()
        .flatten()
        .find_map(throttling_reasons)
        .map(|reasons| reasons.iter().map(Throttle::from).collect())
}

/// The reasons of the three exceptions that have them.
fn throttling_reasons<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a [ThrottlingReason]> {
    if let Some(e) = err.downcast_ref::<ThrottlingException>() {
        Some(e.throttling_reasons())
    } else if let Some(e) = err.downcast_ref::<ProvisionedThroughputExceededException>() {
        Some(e.throttling_reasons())
    } else {
        err.downcast_ref::<RequestLimitExceeded>().map(RequestLimitExceeded::throttling_reasons)
    }
}

/// The whole cause chain: the SDK's top-level messages alone ("dispatch
/// failure") do not say what went wrong.
pub(crate) fn describe(err: &dyn std::error::Error) -> String {
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
        StoreError::Rejected(format!("invalid request: {err}"))
    }
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(err: serde_dynamo::Error) -> Self {
        StoreError::Data(err.to_string())
    }
}

/// Splits a conditional write whose condition did not hold (`Ok(None)`)
/// from one that was done (`Ok(Some(_))`) and from every other failure.
pub fn unless_condition_failed<T, E, R>(result: Result<T, SdkError<E, R>>) -> Result<Option<T>, StoreError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    match result {
        Ok(out) => Ok(Some(out)),
        Err(err) if err.as_service_error().and_then(|e| e.code()) == Some("ConditionalCheckFailedException") => {
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// How a TransactWriteItems failed: which of its actions' conditions did not
/// hold, or a failure worth retrying (throttled, or in conflict with another
/// transaction), or anything else.
#[derive(Debug)]
pub enum TransactionFailure {
    /// The indexes of the actions whose condition failed.
    Conditions(Vec<usize>),
    Failed(StoreError),
}

pub fn transaction_failure<R>(
    err: SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError, R>,
    tables: &[String],
) -> TransactionFailure
where
    R: std::fmt::Debug,
{
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError as E;
    let Some(E::TransactionCanceledException(cancelled)) = err.as_service_error() else {
        return TransactionFailure::Failed(err.into());
    };
    let codes: Vec<&str> = cancelled.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None")).collect();
    let failed: Vec<usize> =
        codes.iter().enumerate().filter(|(_, code)| **code == "ConditionalCheckFailed").map(|(i, _)| i).collect();
    if !failed.is_empty() {
        return TransactionFailure::Conditions(failed);
    }
    let detail = format!("transaction cancelled: {}", codes.join(", "));
    let throttles = cancelled_throttles(&codes, tables);
    if throttles.is_empty() {
        return TransactionFailure::Failed(StoreError::unavailable(Unavailable::Busy, detail));
    }
    TransactionFailure::Failed(StoreError::Unavailable { kind: Unavailable::Throttled, detail, throttles })
}

/// The throttles of a cancelled transaction, from its reasons' codes (one
/// per action) and the actions' tables. A cancellation reason names neither
/// the index nor the throttle's cause: only the action, so the throttle is
/// told by its code and table.
pub(crate) fn cancelled_throttles(codes: &[&str], tables: &[String]) -> Vec<Throttle> {
    codes
        .iter()
        .zip(tables.iter().map(String::as_str).chain(std::iter::repeat("unknown")))
        .filter(|(code, _)| matches!(**code, "ThrottlingError" | "ProvisionedThroughputExceeded"))
        .map(|(code, table)| Throttle { reason: format!("Transaction{code}"), resource: format!("table/{table}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_sdk_dynamodb::operation::put_item::PutItemError;
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

    fn reason(reason: &str, resource: &str) -> ThrottlingReason {
        ThrottlingReason::builder().reason(reason).resource(resource).build()
    }

    fn meta(code: &str, message: &str) -> ErrorMetadata {
        ErrorMetadata::builder().code(code).message(message).build()
    }

    const TABLE: &str = "arn:aws:dynamodb:us-east-1:123456789012:table/northwind-orders";

    #[test]
    fn a_throttle_names_its_reasons_and_index_from_the_typed_exception() {
        // DynamoDB's message names no index; the reasons do.
        let message = "Throughput exceeds the current capacity for one or more global secondary indexes.";
        let exception = ThrottlingException::builder()
            .message(message)
            .throttling_reasons(reason("IndexWriteKeyRangeThroughputExceeded", &format!("{TABLE}/index/GSI2")))
            .meta(meta("ThrottlingException", message))
            .build();
        let err = StoreError::from(SdkError::service_error(PutItemError::ThrottlingException(exception), ()));
        let StoreError::Unavailable { kind: Unavailable::Throttled, detail, throttles } = &err else {
            panic!("not a throttle: {err:?}")
        };
        assert_eq!(
            throttles,
            &[Throttle {
                reason: "IndexWriteKeyRangeThroughputExceeded".into(),
                resource: format!("{TABLE}/index/GSI2")
            }]
        );
        assert_eq!(throttles[0].index(), Some("GSI2"));
        assert!(detail.contains("IndexWriteKeyRangeThroughputExceeded on arn:"), "{detail}");
        assert_eq!(err.throttles(), throttles.as_slice());
    }

    #[test]
    fn provisioned_and_request_limit_throttles_carry_their_reasons_too() {
        let exception = ProvisionedThroughputExceededException::builder()
            .message("The level of configured provisioned throughput for the table was exceeded.")
            .throttling_reasons(reason("TableWriteProvisionedThroughputExceeded", TABLE))
            .throttling_reasons(reason("IndexWriteProvisionedThroughputExceeded", &format!("{TABLE}/index/GSI1")))
            .meta(meta("ProvisionedThroughputExceededException", "exceeded"))
            .build();
        let err = StoreError::from(SdkError::service_error(
            UpdateItemError::ProvisionedThroughputExceededException(exception),
            (),
        ));
        let indexes: Vec<Option<&str>> = err.throttles().iter().map(Throttle::index).collect();
        assert_eq!(indexes, [None, Some("GSI1")]);

        let exception = RequestLimitExceeded::builder()
            .message("Throughput exceeds the current throughput limit for your account.")
            .throttling_reasons(reason("TableReadAccountLimitExceeded", TABLE))
            .meta(meta("RequestLimitExceeded", "limit"))
            .build();
        let err = StoreError::from(SdkError::service_error(GetItemError::RequestLimitExceeded(exception), ()));
        assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }), "{err:?}");
        assert_eq!(err.throttles()[0].reason, "TableReadAccountLimitExceeded");
    }

    #[test]
    fn a_throttle_without_reasons_is_still_a_throttle() {
        let exception = ThrottlingException::builder().meta(meta("ThrottlingException", "slow down")).build();
        let err = StoreError::from(SdkError::service_error(PutItemError::ThrottlingException(exception), ()));
        assert!(matches!(err, StoreError::Unavailable { kind: Unavailable::Throttled, .. }), "{err:?}");
        assert!(err.throttles().is_empty());
        assert!(StoreError::unavailable(Unavailable::TimedOut, "late").throttles().is_empty());
    }
}

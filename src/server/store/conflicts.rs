//! Sending a counter transaction again when DynamoDB cancelled it only
//! because another transaction was writing one of its items at the same
//! moment (`TransactionConflict`).
//!
//! Every consumer transaction adds to the same few counter items of the day
//! (the in-process consumer's instances, one per shard lease; the Lambda
//! function's concurrent invocations, one per stream shard), so on DynamoDB
//! they collide whenever two commit at once. A cancelled transaction wrote
//! nothing, and the SDK does not retry a cancellation, so without this each
//! collision became a failed batch: retried later by the in-process
//! consumer, reported as batch item failures by the Lambda function (and,
//! retried away, given up to the dead-letter queue). Sending the same
//! transaction again is safe: it either applies in full or not at all, and
//! its own conditions (the checkpoint at the position it moves from, the
//! markers not existing) still decide whether it applies, so a retry never
//! counts a record twice.

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::types::CancellationReason;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;

/// Sends after the first, at most: with the pauses below, 2.6 to 5.3
/// seconds in all before the conflict is reported (well inside a Lambda
/// invocation's timeout and a shard lease).
pub const CONFLICT_RETRIES: usize = 10;

/// Exponential from 10 ms, doubling, capped at 500 ms, each pause with
/// random jitter added, so that transactions that collided do not collide
/// again in step.
fn conflict_backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(10))
        .with_factor(2.0)
        .with_max_delay(Duration::from_millis(500))
        .with_max_times(CONFLICT_RETRIES)
        .with_jitter()
}

/// Sends `transaction`, again while it is cancelled by conflicts alone.
pub(super) async fn send_retrying_conflicts(
    transaction: TransactWriteItemsFluentBuilder,
    what: &str,
) -> Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError, HttpResponse>> {
    (|| transaction.clone().send())
        .retry(conflict_backoff())
        .sleep(tokio::time::sleep)
        .when(in_conflict_only)
        .notify(|_, pause| tracing::debug!(what, ?pause, "transaction in conflict with another; sending it again"))
        .await
}

fn in_conflict_only(err: &SdkError<TransactWriteItemsError, HttpResponse>) -> bool {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
            conflicts_only(cancelled.cancellation_reasons())
        }
        _ => false,
    }
}

/// Whether the reasons of a cancellation are conflicts and nothing else: a
/// condition that failed, a throttled action or a refused one is an answer
/// the caller acts on, not something a second send changes.
pub fn conflicts_only(reasons: &[CancellationReason]) -> bool {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
    codes.contains(&"TransactionConflict") && codes.iter().all(|c| matches!(*c, "None" | "TransactionConflict"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    fn reasons(codes: &[&str]) -> Vec<CancellationReason> {
        codes.iter().map(|code| CancellationReason::builder().code(*code).build()).collect()
    }

    #[test]
    fn only_a_cancellation_by_conflicts_alone_is_sent_again() {
        assert!(conflicts_only(&reasons(&["None", "TransactionConflict"])));
        assert!(conflicts_only(&reasons(&["TransactionConflict", "TransactionConflict", "None"])));
        assert!(!conflicts_only(&reasons(&["None", "None"])));
        assert!(!conflicts_only(&reasons(&[])), "an engine that gives no reasons: nothing known");
        // The checkpoint moved, or a marker exists: the caller's answer.
        assert!(!conflicts_only(&reasons(&["ConditionalCheckFailed", "TransactionConflict"])));
        assert!(!conflicts_only(&reasons(&["TransactionConflict", "ThrottlingError"])));
        assert!(!conflicts_only(&reasons(&["TransactionConflict", "ValidationError"])));
    }

    #[test]
    fn the_pauses_grow_are_jittered_and_end() {
        let pauses: Vec<Duration> = conflict_backoff().build().collect();
        assert_eq!(pauses.len(), CONFLICT_RETRIES);
        // Jitter adds up to one more pause: 10 ms then at most 20 ms, ...
        assert!((Duration::from_millis(10)..=Duration::from_millis(20)).contains(&pauses[0]), "{pauses:?}");
        assert!(pauses.iter().all(|p| *p <= Duration::from_millis(1000)), "{pauses:?}");
        let total: Duration = pauses.iter().sum();
        assert!(total >= Duration::from_millis(2630) && total <= Duration::from_millis(5260), "{total:?}");
        let again: Vec<Duration> = conflict_backoff().build().collect();
        assert_ne!(pauses, again, "jittered: two runs do not pause in step");
    }
}

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
//! counts a record twice. Each send puts the live counters on another
//! sub-item (`CounterSends`), so two that collided seldom collide again.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
use aws_sdk_dynamodb::types::{CancellationReason, TransactWriteItem};
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

/// One counter transaction, as each of its sends writes it: the same
/// `fixed` actions (checkpoints moved, markers put) every time, and the live
/// counters' increments on another sub-item (`keys::COUNTER_SUBS`) each
/// time. Two transactions that collided on one sub-item would collide there
/// again on the next send; each moved to the next sub-item seldom does, and
/// every send refused in conflict is charged (docs/architecture.md, "How
/// are the counters kept from the stream?"). Where the increments go does not change what is counted:
/// readers sum an item and all its sub-items.
pub(super) struct CounterSends<F> {
    fixed: Vec<TransactWriteItem>,
    first_sub: u32,
    /// The counters' actions of the first send, built up front: nearly
    /// every transaction is sent once.
    first: Vec<TransactWriteItem>,
    /// The counters' actions on a given sub-item, for the sends after it.
    counters: F,
}

impl<F, E> CounterSends<F>
where
    F: Fn(u32) -> Result<Vec<TransactWriteItem>, E>,
{
    /// `counters(sub)` gives the counters' actions on sub-item `sub` (any
    /// number: it is taken modulo `COUNTER_SUBS`); the first send writes
    /// `first_sub`, each send after it the next one.
    pub(super) fn new(fixed: Vec<TransactWriteItem>, first_sub: u32, counters: F) -> Result<Self, E> {
        let first = counters(first_sub)?;
        Ok(CounterSends { fixed, first_sub, first, counters })
    }

    /// The actions of send `k` (the last send's again past the last). The
    /// counters of a later send differ from the first's only in their
    /// keys; should they not build, the first's are sent again.
    fn actions(&self, k: usize) -> Vec<TransactWriteItem> {
        let k = k.min(CONFLICT_RETRIES) as u32;
        let later = (k > 0).then(|| (self.counters)(self.first_sub.wrapping_add(k)).ok()).flatten();
        self.fixed.iter().chain(later.as_ref().unwrap_or(&self.first)).cloned().collect()
    }
}

/// Sends the transaction, again while it is cancelled by conflicts alone,
/// each time with the counters on the next sub-item.
pub(super) async fn send_retrying_conflicts<F, E>(
    client: &Client,
    sends: &CounterSends<F>,
    what: &str,
) -> Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError, HttpResponse>>
where
    F: Fn(u32) -> Result<Vec<TransactWriteItem>, E>,
{
    let mut sent = 0;
    (|| {
        let actions = sends.actions(sent);
        sent += 1;
        client.transact_write_items().set_transact_items(Some(actions)).send()
    })
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
    fn each_send_puts_the_counters_on_the_next_sub_item_and_keeps_the_rest() {
        let action = |table: String| {
            let put = aws_sdk_dynamodb::types::Put::builder().table_name(table).set_item(Some(Default::default()));
            TransactWriteItem::builder().put(put.build().unwrap()).build()
        };
        let sends = CounterSends::new(vec![action("checkpoint".into())], 14, |sub| {
            Ok::<_, ()>(vec![action(format!("sub {}", sub % 16))])
        })
        .unwrap();
        let tables = |k: usize| -> Vec<String> {
            sends.actions(k).iter().map(|a| a.put().unwrap().table_name().to_string()).collect()
        };
        assert_eq!(tables(0), ["checkpoint", "sub 14"]);
        assert_eq!(tables(1), ["checkpoint", "sub 15"]);
        assert_eq!(tables(2), ["checkpoint", "sub 0"], "round the sub-items");
        assert_eq!(tables(CONFLICT_RETRIES), ["checkpoint", "sub 8"]);
        assert_eq!(tables(CONFLICT_RETRIES + 5), tables(CONFLICT_RETRIES), "past the last: the last again");
        // The first send's counters that cannot be built are the caller's
        // error; a later send's that cannot are the first's again.
        assert!(CounterSends::new(vec![], 3, |sub| if sub == 3 { Err(sub) } else { Ok(vec![]) }).is_err());
        let fallback = CounterSends::new(vec![], 14, |sub| {
            if sub == 15 { Err(()) } else { Ok(vec![action(format!("sub {}", sub % 16))]) }
        })
        .unwrap();
        let table = |k: usize| fallback.actions(k)[0].put().unwrap().table_name().to_string();
        assert_eq!((table(1), table(2)), ("sub 14".to_string(), "sub 0".to_string()));
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

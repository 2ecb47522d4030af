//! An invocation's time, and the retries of throttled commits within it.

use crate::server::store::error::StoreError;
use std::time::{Duration, Instant};

/// How long an invocation may go on retrying throttled commits: until
/// shortly before Lambda's deadline for it.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    until: Instant,
}

/// What an invocation keeps for answering after its last retry.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);
/// The budget of a batch applied without a Lambda deadline (`replay`, tests).
const BUDGET_WITHOUT_DEADLINE: Duration = Duration::from_secs(20);

impl Budget {
    /// From the invocation's deadline (milliseconds since the epoch, as
    /// the Lambda runtime gives it), less `ANSWER_MARGIN`.
    pub fn from_deadline_ms(deadline_ms: i64) -> Budget {
        let left = deadline_ms.saturating_sub(chrono::Utc::now().timestamp_millis()).max(0) as u64;
        let left = Duration::from_millis(left).saturating_sub(ANSWER_MARGIN);
        Budget { until: Instant::now() + left }
    }

    pub(super) fn default_from_now() -> Budget {
        Budget { until: Instant::now() + BUDGET_WITHOUT_DEADLINE }
    }
}

/// The pauses between throttled attempts at a batch's commits: the store's
/// backoff (from 12 ms, doubling to 1.6 s, jittered), for as long as the
/// budget allows.
pub(super) struct Throttled {
    budget: Budget,
    pauses: backon::ExponentialBackoff,
}

impl Throttled {
    pub(super) fn new(budget: Budget) -> Self {
        Self { budget, pauses: backon::BackoffBuilder::build(crate::server::store::backoff(u32::MAX)) }
    }

    /// Waits before the next attempt; `false` (at once) when the pause
    /// would pass the budget: the batch then fails as before.
    pub(super) async fn wait(&mut self, err: &StoreError) -> bool {
        let Some(pause) = self.pauses.next().filter(|p| Instant::now() + *p < self.budget.until) else {
            tracing::warn!(error = %err, "a throttled commit: out of time to retry; the batch fails");
            return false;
        };
        tracing::info!(error = %err, pause_ms = pause.as_millis() as u64, "a throttled commit: sent again");
        tokio::time::sleep(pause).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::store::error::Unavailable;

    #[tokio::test]
    async fn a_throttled_commit_waits_within_the_budget_and_never_past_it() {
        let err = StoreError::unavailable(Unavailable::Throttled, "ProvisionedThroughputExceeded");
        let now = chrono::Utc::now().timestamp_millis();
        let mut spent = Throttled::new(Budget::from_deadline_ms(now + 1_000));
        assert!(!spent.wait(&err).await, "a second left is the answer's margin: no retry");
        let mut ample = Throttled::new(Budget::from_deadline_ms(now + 60_000));
        let started = Instant::now();
        assert!(ample.wait(&err).await && ample.wait(&err).await);
        assert!(started.elapsed() < Duration::from_secs(1), "the first pauses are short");
        assert!(err.is_throttled() && !StoreError::Conflict("moved".into()).is_throttled());
    }
}

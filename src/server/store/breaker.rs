//! A circuit breaker on each of the store's clients. Once a call has found
//! the store unreachable (its last attempt refused or timed out), the calls
//! after it fail at once, unsent, as `Unavailable::Unreachable`; the next
//! call and then one every `PROBE_EVERY` go through as probes, tried once,
//! and the first answer of any kind (a throttle and a failed condition are
//! answers) closes the breaker.
//!
//! Why: with the store down, every request would otherwise wait out the
//! SDK's retries before its 503: up to 3 s of backoff when connections are
//! refused, the operation timeout (4 s) when the store hangs. Pages then
//! answer slowly exactly when they can only say "unreachable", requests pile
//! up, and a store coming back meets all of them at once. The first call to
//! fail still gets every retry, so a blip one retry rides out opens nothing.

use aws_sdk_dynamodb::config::interceptors::{BeforeTransmitInterceptorContextMut, FinalizerInterceptorContextRef};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{Error, InterceptorContext};
use aws_smithy_runtime_api::client::orchestrator::OrchestratorError;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction, RetryClassifierPriority};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often a call goes through to the store while it is down: how soon
/// after it is back the app knows, at most one request's wait in this time.
pub const PROBE_EVERY: Duration = Duration::from_millis(500);

/// The error a call refused by an open breaker fails with (the SDK wraps it
/// as a dispatch failure, read as `Unavailable::Unreachable`).
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: the store has answered no call for {:.1} s (a call goes through every {} ms to see whether it is back)",
    .down_for.as_secs_f64(),
    PROBE_EVERY.as_millis()
)]
pub struct NotSent {
    pub down_for: Duration,
}

/// What the breaker lets a call do.
#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// The store answers: the call goes, with its retries.
    Go,
    /// The store is down and this call is the one to try it.
    Probe,
    Refuse(NotSent),
}

impl PartialEq for NotSent {
    fn eq(&self, other: &Self) -> bool {
        self.down_for == other.down_for
    }
}

impl Eq for NotSent {}

/// The breaker's state, on explicit instants so it is tested without waiting.
#[derive(Debug, Default)]
struct State {
    down_since: Option<Instant>,
    last_probe: Option<Instant>,
}

impl State {
    fn admit(&mut self, now: Instant) -> Admit {
        let Some(since) = self.down_since else { return Admit::Go };
        if self.last_probe.is_some_and(|probed| now.saturating_duration_since(probed) < PROBE_EVERY) {
            return Admit::Refuse(NotSent { down_for: now.saturating_duration_since(since) });
        }
        self.last_probe = Some(now);
        Admit::Probe
    }

    /// An attempt got an answer. How long the store had been down, if it was.
    fn answered(&mut self, now: Instant) -> Option<Duration> {
        self.last_probe = None;
        self.down_since.take().map(|since| now.saturating_duration_since(since))
    }

    /// A call ended with no attempt answered. Whether this opened the breaker.
    fn unanswered(&mut self, now: Instant) -> bool {
        if self.down_since.is_some() {
            return false;
        }
        // No probe yet: the next call is one, so a lone client asking again
        // after a slow call (a store that was only late) is not refused.
        self.down_since = Some(now);
        true
    }

    fn is_open(&self) -> bool {
        self.down_since.is_some()
    }
}

/// One client's breaker: its interceptor, and (`no_retry_while_down`) the
/// retry classifier that keeps a probe to one attempt.
#[derive(Clone, Debug)]
pub struct Breaker {
    /// The client it guards, for the log (`dynamodb`, `dynamodb streams`).
    client: &'static str,
    state: Arc<Mutex<State>>,
}

impl Breaker {
    pub fn new(client: &'static str) -> Self {
        Self { client, state: Arc::default() }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn no_retry_while_down(&self) -> NoRetryWhileDown {
        NoRetryWhileDown(self.clone())
    }
}

/// Kept in a call's config bag once one of its attempts got an answer.
#[derive(Clone, Debug)]
struct Answered;

impl Storable for Answered {
    type Storer = StoreReplace<Self>;
}

/// Whether an attempt's or a call's failure means no answer came: refused,
/// reset, or timed out (a throttle, a 5xx, a failed condition are answers).
fn unanswered(err: &OrchestratorError<Error>) -> bool {
    err.is_connector_error() || err.is_timeout_error()
}

impl Intercept for Breaker {
    fn name(&self) -> &'static str {
        "NorthwindStoreBreaker"
    }

    /// Once per call, before its first attempt: an error here ends the call
    /// unsent, with no retry.
    fn modify_before_retry_loop(
        &self,
        _context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        match self.with_state(|state| state.admit(Instant::now())) {
            Admit::Go => Ok(()),
            Admit::Probe => {
                tracing::debug!(client = self.client, "the store is down: this call goes through to try it");
                Ok(())
            }
            Admit::Refuse(not_sent) => Err(not_sent.into()),
        }
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let answered = match context.output_or_error() {
            Some(Ok(_)) => true,
            Some(Err(err)) => !unanswered(err),
            None => false,
        };
        if answered {
            cfg.interceptor_state().store_put(Answered);
            if let Some(down_for) = self.with_state(|state| state.answered(Instant::now())) {
                tracing::info!(client = self.client, "the store answers again, after {:.1} s", down_for.as_secs_f64());
            }
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let failed_unanswered = matches!(context.output_or_error(), Some(Err(err)) if unanswered(err));
        if failed_unanswered
            && cfg.load::<Answered>().is_none()
            && self.with_state(|state| state.unanswered(Instant::now()))
        {
            tracing::warn!(
                client = self.client,
                "the store did not answer a call or its retries: calls now fail at once, and one every {} ms \
                 goes through to see whether it is back",
                PROBE_EVERY.as_millis()
            );
        }
        Ok(())
    }
}

/// Forbids retrying an unanswered attempt while the breaker is open: a probe
/// is one attempt, so a request that happens to be the probe waits for one
/// refused connection or one attempt timeout, not every retry's backoff.
#[derive(Clone, Debug)]
pub struct NoRetryWhileDown(Breaker);

impl ClassifyRetry for NoRetryWhileDown {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let unanswered = matches!(ctx.output_or_error(), Some(Err(err)) if unanswered(err));
        if unanswered && self.0.with_state(|state| state.is_open()) {
            RetryAction::RetryForbidden
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "NorthwindNoRetryWhileStoreDown"
    }

    /// After the SDK's transient-error classifier, whose "retry" it overrides.
    fn priority(&self) -> RetryClassifierPriority {
        RetryClassifierPriority::run_after(RetryClassifierPriority::transient_error_classifier())
    }
}

/// Whether a call's error is a breaker's refusal (for the call's outcome label).
pub fn not_sent(err: &OrchestratorError<Error>) -> bool {
    err.is_interceptor_error() && {
        let err: &(dyn std::error::Error + 'static) = err;
        let mut source = err.source();
        std::iter::from_fn(|| {
            let current = source?;
            source = current.source();
            Some(current)
        })
        .any(|e| e.is::<NotSent>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn an_answering_store_lets_every_call_go() {
        let mut state = State::default();
        let t0 = Instant::now();
        assert_eq!(state.admit(t0), Admit::Go);
        assert_eq!(state.answered(at(t0, 10)), None);
        assert_eq!(state.admit(at(t0, 20)), Admit::Go);
    }

    #[test]
    fn once_a_call_goes_unanswered_others_fail_at_once_and_one_per_interval_probes() {
        let mut state = State::default();
        let t0 = Instant::now();
        assert!(state.unanswered(t0), "the first unanswered call opens it");
        assert!(!state.unanswered(at(t0, 5)), "later ones find it open");
        assert_eq!(state.admit(at(t0, 10)), Admit::Probe, "the next call tries the store");
        assert_eq!(state.admit(at(t0, 100)), Admit::Refuse(NotSent { down_for: Duration::from_millis(100) }));
        assert_eq!(state.admit(at(t0, 509)), Admit::Refuse(NotSent { down_for: Duration::from_millis(509) }));
        assert_eq!(state.admit(at(t0, 510)), Admit::Probe, "a probe once the interval has passed");
        assert!(matches!(state.admit(at(t0, 511)), Admit::Refuse(_)), "one probe per interval");
        assert!(matches!(state.admit(at(t0, 1009)), Admit::Refuse(_)));
        assert_eq!(state.admit(at(t0, 1010)), Admit::Probe);
    }

    #[test]
    fn any_answer_closes_it_and_says_how_long_it_was_down() {
        let mut state = State::default();
        let t0 = Instant::now();
        state.unanswered(t0);
        assert_eq!(state.admit(at(t0, 600)), Admit::Probe);
        assert_eq!(state.answered(at(t0, 650)), Some(Duration::from_millis(650)));
        assert!(!state.is_open());
        assert_eq!(state.admit(at(t0, 651)), Admit::Go);
        assert!(state.unanswered(at(t0, 700)), "it opens again on the next unanswered call");
    }
}

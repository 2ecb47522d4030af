//! Bulk status changes: many orders moved at once, each by its own
//! conditional update (from the status the run expects), in parallel with a
//! bounded concurrency, each with its audit record naming the run. The run's
//! report lives in the store, so any instance can show its progress or stop
//! it; a stop leaves what had not run yet as it was.

use crate::model::{BulkReport, BulkRequest, BulkState, PendingParams, Permission, Status, validate_id};
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::service::Service;
use crate::server::store::Transition;
use crate::server::store::error::StoreError;
use chrono::Utc;
use futures::StreamExt;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The most orders one run takes.
pub const MAX_ORDERS: usize = 10_000;
/// Changes in flight at once: enough to finish thousands in seconds, few
/// enough to leave the store's capacity to everyone else.
const CONCURRENCY: usize = 16;
/// How often a running report is written (and a stop request noticed).
const SAVE_EVERY: Duration = Duration::from_millis(500);
/// Conflicts and failures listed by id in a report, at most (the counts
/// are always whole).
const LISTED: usize = 2_000;
/// A running report not written for this long was left by a stopped server.
const STALE: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

impl Service {
    /// Checks a bulk request, writes its report and starts the run in the
    /// background; returns the run's id.
    pub async fn start_bulk(&self, request: BulkRequest, by: &Principal) -> Result<String, ApiError> {
        by.require(Permission::to_change_status(request.to))?;
        if !request.from.can_become(request.to) {
            return Err(ApiError::BadRequest(format!("an order cannot go from {} to {}", request.from, request.to)));
        }
        let reason = request.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()).map(str::to_string);
        if let Some(reason) = &reason {
            crate::server::service::checks::check_text("reason", reason)?;
        } else if request.to == Status::Cancelled {
            return Err(ApiError::BadRequest("a cancellation needs a reason".into()));
        }
        let ids = self.bulk_targets(&request).await?;
        let now = Utc::now();
        let report = BulkReport {
            id: uuid::Uuid::new_v4().simple().to_string(),
            state: BulkState::Running,
            from: request.from,
            to: request.to,
            reason,
            actor: by.actor.name.clone(),
            total: ids.len() as u32,
            changed: 0,
            conflicts: Vec::new(),
            failed: Vec::new(),
            started_at: now,
            updated_at: now,
        };
        self.store.save_bulk(&report, false).await?;
        let id = report.id.clone();
        let service = self.clone();
        let actor = by.actor.clone();
        tokio::spawn(async move { service.run_bulk(report, ids, actor).await });
        Ok(id)
    }

    /// The orders a request names, or the PENDING orders its filter matches
    /// (read page by page through the list's merge: never a Scan).
    async fn bulk_targets(&self, request: &BulkRequest) -> Result<Vec<String>, ApiError> {
        let ids = match (&request.order_ids, &request.filter) {
            (Some(ids), None) => {
                for id in ids {
                    validate_id("order id", id)?;
                }
                let mut seen = HashSet::new();
                ids.iter().filter(|id| seen.insert(id.as_str())).cloned().collect()
            }
            (None, Some(filter)) if request.from == Status::Pending => self.matching_pending(filter).await?,
            (None, Some(_)) => {
                return Err(ApiError::BadRequest("a filter selects PENDING orders: from must be PENDING".into()));
            }
            _ => return Err(ApiError::BadRequest("name the orders (orderIds) or a filter, one of the two".into())),
        };
        match ids.len() {
            0 => Err(ApiError::BadRequest("no orders to change".into())),
            n if n > MAX_ORDERS => {
                Err(ApiError::BadRequest(format!("a bulk change takes at most {MAX_ORDERS} orders, not {n}")))
            }
            _ => Ok(ids),
        }
    }

    async fn matching_pending(&self, filter: &PendingParams) -> Result<Vec<String>, ApiError> {
        let mut params =
            PendingParams { limit: Some(crate::model::MAX_PAGE_SIZE.to_string()), cursor: None, ..filter.clone() };
        let mut ids = Vec::new();
        loop {
            let page = self.pending(&params).await?;
            ids.extend(page.orders.into_iter().map(|o| o.order_id));
            if ids.len() > MAX_ORDERS {
                return Err(ApiError::BadRequest(format!(
                    "the filter matches more than {MAX_ORDERS} orders: narrow it"
                )));
            }
            match page.next {
                Some(next) => params.cursor = Some(next),
                None => return Ok(ids),
            }
        }
    }

    /// Changes each order, `CONCURRENCY` at a time, writing the report as
    /// it goes; stops starting new changes once asked to (or at shutdown).
    async fn run_bulk(&self, mut report: BulkReport, ids: Vec<String>, actor: crate::model::Actor) {
        // Stopped when the server shuts down, or when someone cancels the run.
        let stop = self.live.closing().child_token();
        let mut outcomes = futures::stream::iter(ids)
            .map(|id| {
                let (stop, report, actor) = (stop.clone(), &report, &actor);
                async move {
                    if stop.is_cancelled() {
                        return None;
                    }
                    let change = Transition {
                        order_id: &id,
                        from: report.from,
                        to: report.to,
                        at: Utc::now(),
                        actor,
                        reason: report.reason.as_deref(),
                        bulk_id: Some(&report.id),
                    };
                    Some((id.clone(), self.store.change_status(&change).await.map(drop)))
                }
            })
            .buffer_unordered(CONCURRENCY);
        let mut results = Vec::new();
        let mut saved = Instant::now();
        while let Some(outcome) = outcomes.next().await {
            results.extend(outcome);
            if saved.elapsed() >= SAVE_EVERY {
                saved = Instant::now();
                let mut progress = report.clone();
                tally(&mut progress, &results);
                if let Err(StoreError::Conflict(_)) = self.store.save_bulk(&progress, false).await {
                    stop.cancel();
                }
            }
        }
        drop(outcomes);
        tally(&mut report, &results);
        report.state = if stop.is_cancelled() { BulkState::Cancelled } else { BulkState::Done };
        report.updated_at = Utc::now();
        if let Err(err) = self.store.save_bulk(&report, true).await {
            tracing::warn!(error = %err, bulk = %report.id, "could not write a bulk operation's last report");
        }
        self.forget_dashboards();
        tracing::info!(bulk = %report.id, changed = report.changed, conflicts = report.conflicts.len(), failed = report.failed.len(), state = ?report.state, "bulk operation ended");
    }

    /// A run's report; a running one whose server stopped is `interrupted`.
    pub async fn bulk_report(&self, id: &str, by: &Principal) -> Result<BulkReport, ApiError> {
        validate_id("bulk operation id", id)?;
        let (mut report, _) =
            self.store.get_bulk(id).await?.ok_or_else(|| ApiError::NotFound(format!("no bulk operation {id}")))?;
        by.require(Permission::to_change_status(report.to))?;
        if report.state == BulkState::Running && Utc::now() - report.updated_at > STALE {
            report.state = BulkState::Interrupted;
        }
        Ok(report)
    }

    /// Asks a run to stop: the changes not yet started are not made.
    pub async fn cancel_bulk(&self, id: &str, by: &Principal) -> Result<BulkReport, ApiError> {
        let report = self.bulk_report(id, by).await?;
        if report.state == BulkState::Running {
            self.store.request_bulk_cancel(id).await?;
        }
        self.bulk_report(id, by).await
    }
}

/// Puts per-order outcomes into a report's counts and lists.
fn tally(report: &mut BulkReport, results: &[(String, Result<(), StoreError>)]) {
    report.changed = results.iter().filter(|(_, r)| r.is_ok()).count() as u32;
    let listed = |keep: fn(&StoreError) -> bool| {
        results
            .iter()
            .filter(|(_, r)| r.as_ref().err().is_some_and(keep))
            .map(|(id, _)| id.clone())
            .take(LISTED)
            .collect()
    };
    report.conflicts = listed(|e| matches!(e, StoreError::Conflict(_)));
    report.failed = listed(|e| !matches!(e, StoreError::Conflict(_)));
    report.updated_at = Utc::now();
}

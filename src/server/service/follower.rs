//! Live on every instance. Several `serve` instances share one stream
//! through the consumer's leases, so a change is applied, and pushed row by
//! row, by whichever instance holds the stream shard; the others learn of
//! it here, without a message bus and without a third reader on the stream
//! (DynamoDB Streams serves two per shard: the consumer and reconciliation).
//!
//! Every consumer transaction raises the `version` of each day it changes,
//! on the day's PENDING counter item. Once a second, for each day an open
//! `/api/live` connection watches (and only then), the follower reads that
//! version: one strongly consistent GetItem of a small item, one read unit.
//! When it moved by more than this instance's own consumer committed, it
//! pushes the day's counters and `changed`, on which the browser reads page
//! one again (rows it can get no other way; the dashboard read is shared by
//! every viewer of a view for a second).

use crate::model::LiveEvent;
use crate::server::service::Service;
use chrono::NaiveDate;
use std::time::Duration;

/// How often each watched day's version is read: twice a second, so that a
/// change another instance applied reaches this one's dashboards within a
/// second at p95 (its consumer reads each shard four times a second).
pub const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Follows the watched days every `every` until `shutdown` resolves.
pub async fn run(service: Service, every: Duration, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = ticks.tick() => {}
        }
        let round = std::time::Instant::now();
        let changed = follow(&service).await;
        let read_ms = round.elapsed().as_millis() as u64;
        for day in &changed {
            publish(&service, *day).await;
        }
        if !changed.is_empty() {
            let total_ms = round.elapsed().as_millis() as u64;
            tracing::debug!(
                days = changed.len(),
                read_ms,
                total_ms,
                "live follower: pushed another instance's changes"
            );
        }
    }
}

/// One round: reads the version of every watched day, and returns the days
/// someone else changed since this instance last published them.
pub async fn follow(service: &Service) -> Vec<NaiveDate> {
    let hub = &service.live;
    let watched = hub.watched_days();
    // Held across the reads: the consumer commits under the same lock, so a
    // version read here includes exactly the own commits already counted.
    let mut versions = hub.versions().await;
    versions.keep(&watched);
    let mut changed = Vec::new();
    for day in watched {
        // A day is followed from the version its first connection read.
        if !versions.follows(day) {
            continue;
        }
        match service.store.counters_version(day).await {
            Ok(read) => {
                hub.count_read(read.units);
                if versions.moved(day, read.version) {
                    changed.push(day);
                }
            }
            Err(err) => tracing::warn!(%day, error = %err, "live follower: could not read the day's version"),
        }
    }
    changed
}

/// Pushes a day someone else changed: its counters, then `changed`.
async fn publish(service: &Service, day: NaiveDate) {
    // A dashboard read cached before the change must not answer the re-reads
    // `changed` causes.
    service.forget_dashboards();
    match service.store.read_day_counts(day).await {
        Ok((counts, _)) => service.live.send_counts(counts, service.consumer_behind_ms()),
        Err(err) => tracing::warn!(%day, error = %err, "live follower: could not read the counters to push them"),
    }
    service.live.send(LiveEvent::Changed { date: day });
}

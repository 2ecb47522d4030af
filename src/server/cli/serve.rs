//! `serve`: the web app, with the live follower, the stream consumer and the
//! periodic reconciliation beside it.

use super::{CliError, shutdown_signal};
use crate::server::capacity::advisor::Prices;
use crate::server::cli::config::{ServeArgs, StoreConfig};
use crate::server::cursor::CursorCodec;
use crate::server::http::serve;
use crate::server::service::Service;
use crate::server::service::follower;
use crate::server::sim::plan_rehearsal::{ProxyRehearser, RehearsalBudget};
use crate::server::store::Store;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::stream::consumer::{Consumer, ConsumerOptions};
use crate::server::stream::live::{LiveHub, LiveLimits};
use crate::server::stream::reconcile::{ReconcileError, ReconcileOptions, Reconciler};
use crate::server::stream::{lag, registry};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(super) async fn run_serve(config: &StoreConfig, store: Store, args: &ServeArgs) -> Result<(), CliError> {
    // A store that is down, or tables not made yet, is reported on the
    // pages, not a reason to refuse to start; tables that contradict the key
    // design are. Tables are created only when asked (--provision).
    let capacity = args.provision.then(|| args.billing.capacity());
    match store.provision(capacity).await {
        Ok(report) => tracing::info!("{report}"),
        Err(StoreError::Unavailable { kind: Unavailable::NoTable, detail, .. }) => tracing::warn!("{detail}"),
        Err(StoreError::Unavailable { detail, .. }) => tracing::warn!("store unavailable at start-up: {detail}"),
        Err(err) => return Err(err.into()),
    }
    let cursors = CursorCodec::from_secret_or_file(config.cursor_secret.as_deref(), &config.data_dir)?;
    let live = LiveHub::new(LiveLimits {
        total: args.limits.max_live as usize,
        per_client: args.limits.max_live_per_client as usize,
    });
    let prices = match &args.prices {
        Some(path) => Prices::from_json_file(path)?,
        None => Prices::default(),
    };
    let service = Service::new(Arc::new(store), Arc::new(cursors), live.clone())
        .with_stuck_after(args.stuck_after_minutes)
        .with_prices(prices)
        .with_consumer_concurrency(args.consumer_concurrency)
        .with_capacity(crate::server::service::figures::CapacitySettings {
            source: config.capacity_source(),
            ..Default::default()
        })
        .with_rehearser(Arc::new(ProxyRehearser::new(config.clone(), RehearsalBudget::default())));
    // Background work stops after the last request has been answered.
    let (stop, background) = (CancellationToken::new(), TaskTracker::new());
    start_background(&service, args, &stop, &background);
    let shutdown = async move {
        shutdown_signal().await;
        live.close();
    };
    let (addr, task) = serve::start(service, args, shutdown)
        .await
        .map_err(|source| CliError::Io { what: "cannot listen for the web app".into(), source })?;
    // Scripts and tests read this line to find the port when --addr has port 0.
    println!("listening on http://{addr}");
    tracing::info!(%addr, "Northwind Ops is serving");
    let served = task.await;
    stop.cancel();
    background.close();
    background.wait().await;
    served
        .map_err(|e| CliError::Usage(format!("server task failed: {e}")))?
        .map_err(|source| CliError::Io { what: "server".into(), source })
}

/// A lease owner name unique to this process.
pub(super) fn owner_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
    format!("{host}-{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The live follower, the stream consumer, the shard counts written ahead
/// and the periodic reconciliation, on `tasks`, until `stop` is cancelled.
pub(super) fn start_background(service: &Service, args: &ServeArgs, stop: &CancellationToken, tasks: &TaskTracker) {
    // Whichever instance applies a change, this one's live connections hear of it.
    let every = std::time::Duration::from_millis(args.follow_every_ms);
    tasks.spawn(follower::run(service.clone(), every, stop.clone().cancelled_owned()));
    if !args.no_consumer {
        // Runs while no Lambda consumer is live: both would count every change.
        let owner = owner_id();
        let consumer =
            Consumer::new(service.store.clone(), ConsumerOptions::new(owner.clone()), Some(service.live.clone()))
                .reporting_to(service.consumer.clone());
        let (store, stop) = (service.store.clone(), stop.clone());
        tasks.spawn(registry::run_in_process(
            Arc::new(consumer),
            store.clone(),
            owner,
            registry::IN_PROCESS_BEAT,
            stop.clone(),
        ));
        // How far behind it was, minute by minute, for after the sale.
        tasks.spawn(lag::record(store, service.consumer.subscribe(), lag::RECORD_EVERY, stop));
    }
    // Today's GSI2 shard count (and tomorrow's before midnight), for every writer.
    tasks.spawn(crate::server::service::shards::run(
        service.clone(),
        crate::server::service::shards::EVERY,
        stop.clone(),
    ));
    if args.reconcile_minutes > 0 {
        let every = std::time::Duration::from_secs(u64::from(args.reconcile_minutes) * 60);
        let mut options = ReconcileOptions::new(owner_id());
        // A finding waits two periods (and a margin) for a run to agree.
        options.confirm_within = 2 * every + std::time::Duration::from_secs(5 * 60);
        // The web tier's role writes no checkpoint (docs/security.md).
        options.mark_finished = !args.no_consumer;
        let reconciler = Reconciler::new(service.store.clone(), options);
        let stop = stop.clone();
        tasks.spawn(async move {
            reconciler
                .every(every, stop, |outcome, _| match outcome {
                    // The verdict is recorded on the counter item, for every instance to show.
                    // A repair needs two runs that agree: this one records what
                    // it finds, the next repairs it if it finds the same.
                    Ok(r) if r.awaiting => tracing::info!(
                        date = %r.day,
                        drift = r.drift,
                        off = ?r.off,
                        "PENDING counters differ; recorded, repaired if the next run finds the same"
                    ),
                    Ok(r) if !r.off.is_empty() => {
                        crate::server::telemetry::reconciled(r.drift);
                        tracing::warn!(date = %r.day, drift = r.drift, off = ?r.off, "PENDING counters drifted; repaired")
                    }
                    Ok(r) => crate::server::telemetry::reconciled(r.drift),
                    // Expected while it lasts (marker mode, a consumer far
                    // behind): said at info each run, recorded on the counter.
                    Err(ReconcileError::Refused(why)) => {
                        tracing::info!(reason = %why, "reconciliation refused: nothing judged or repaired")
                    }
                    Err(err) => tracing::warn!(error = %err, "reconciliation failed"),
                })
                .await
        });
    }
}

//! The `northwind-ops` command line: parse, connect, run one subcommand
//! (the throttle proxy connects to nothing of its own).

use super::config::{Cli, Command, ProvisionArgs, ReconcileArgs, SeedArgs, ServeArgs, StoreConfig, ThrottleProxyArgs};
use super::consumer::{Consumer, ConsumerOptions};
use super::cursor::{CursorCodec, KeyFileError};
use super::error::{StoreError, Unavailable};
use super::live::{LiveHub, LiveLimits};
use super::seed::{SeedPlan, seed};
use super::serve;
use super::service::Service;
use super::store::{self, Store};
use crate::model::iso_millis;
use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;

/// An error that ends the command, printed as one line that names the problem.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Connect(#[from] store::ConnectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error("{0}")]
    Usage(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Throttle(#[from] super::throttle::ThrottleError),
}

pub async fn main() -> ExitCode {
    let cli = parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NORTHWIND_LOG")
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn,dynoxide=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The command line; no subcommand means `serve`, with `serve`'s flags and
/// their environment variables read as if it had been named.
fn parse() -> Cli {
    let cli = Cli::parse();
    if cli.command.is_some() {
        return cli;
    }
    Cli::parse_from(std::env::args_os().chain(std::iter::once("serve".into())))
}

async fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command.expect("parse() always names a command") {
        // The proxy stands in front of another store: it opens none of its
        // own and signs no cursors, so it needs neither the store nor secrets.
        Command::ThrottleProxy(args) => run_throttle_proxy(&args).await,
        command => run_with_store(cli.store, command).await,
    }
}

/// Every other command: secrets resolved, the store connected (and, for the
/// embedded one, shut down after the command).
async fn run_with_store(mut config: StoreConfig, command: Command) -> Result<(), CliError> {
    config.resolve_secrets().map_err(CliError::Usage)?;
    let (store, embedded) = store::connect(&config).await?;
    let result = match command {
        Command::Serve(args) => run_serve(&config, store, &args).await,
        Command::Provision(args) => run_provision(&store, &args).await,
        Command::Seed(args) => run_seed(&store, &args).await,
        Command::Consume => run_consume(store).await,
        Command::Reconcile(args) => run_reconcile(store, &args).await,
        Command::Loadgen(args) => run_loadgen(store, &args).await,
        Command::ThrottleProxy(_) => unreachable!("run() runs the proxy without a store"),
    };
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
    result
}

async fn run_provision(store: &Store, args: &ProvisionArgs) -> Result<(), CliError> {
    let report = store.provision(Some(args.capacity())).await?;
    println!("{report}");
    Ok(())
}

async fn run_seed(store: &Store, args: &SeedArgs) -> Result<(), CliError> {
    let now = match args.now.as_deref() {
        Some(text) => iso_millis::parse(text).map_err(|e| CliError::Usage(format!("--now: {e}")))?,
        None => chrono::Utc::now(),
    };
    store.provision(Some(args.provision.capacity())).await?;
    let plan = SeedPlan { orders: args.orders, customers: args.customers, days: args.days, seed: args.seed, now };
    let report = seed(store, &plan).await?;
    println!(
        "seeded {} orders ({} written, {} already there); {} of today's are PENDING",
        args.orders, report.written, report.already_there, report.pending_today
    );
    Ok(())
}

async fn run_serve(config: &StoreConfig, store: Store, args: &ServeArgs) -> Result<(), CliError> {
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
    let service = Service::new(Arc::new(store), Arc::new(cursors), live.clone());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let background = start_background(&service, args, stopped);
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
    let _ = stop.send(true);
    for task in background {
        let _ = task.await;
    }
    served
        .map_err(|e| CliError::Usage(format!("server task failed: {e}")))?
        .map_err(|source| CliError::Io { what: "server".into(), source })
}

/// A lease owner name unique to this process.
fn owner_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
    format!("{host}-{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The stream consumer and the periodic reconciliation, stopped through `stop`.
fn start_background(
    service: &Service,
    args: &ServeArgs,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if !args.no_consumer {
        let consumer =
            Consumer::new(service.store.clone(), ConsumerOptions::new(owner_id()), Some(service.live.clone()));
        *service.consumer.lock().expect("consumer slot poisoned") = Some(consumer.status());
        let mut stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            consumer
                .run(async move {
                    let _ = stop.changed().await;
                })
                .await;
        }));
    }
    if args.reconcile_minutes > 0 {
        let service = service.clone();
        let every = std::time::Duration::from_secs(u64::from(args.reconcile_minutes) * 60);
        let mut stop = stop;
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                match service.reconcile(chrono::Utc::now().date_naive()).await {
                    Ok(r) if r.drift != 0 => {
                        tracing::warn!(date = %r.date, drift = r.drift, repaired = r.repaired, "PENDING counter drifted")
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(error = %err, "reconciliation failed"),
                }
            }
        }));
    }
    tasks
}

async fn run_consume(store: Store) -> Result<(), CliError> {
    let owner = owner_id();
    println!("consuming the stream of {} as {owner} (Ctrl-C to stop)", store.orders_table());
    let consumer = Consumer::new(Arc::new(store), ConsumerOptions::new(owner), None);
    consumer.run(shutdown_signal()).await;
    let status = consumer.status().lock().expect("status poisoned").clone();
    println!("applied {} records ({} unreadable)", status.records_applied, status.bad_records);
    Ok(())
}

async fn run_loadgen(store: Store, args: &super::loadgen::LoadgenArgs) -> Result<(), CliError> {
    store.verify().await?;
    let report = super::loadgen::run(Arc::new(store), args).await?;
    println!("{report}");
    if report.verified != report.created {
        return Err(CliError::Usage(format!(
            "{} of {} created orders are missing from the table",
            report.created - report.verified,
            report.created
        )));
    }
    Ok(())
}

async fn run_throttle_proxy(args: &ThrottleProxyArgs) -> Result<(), CliError> {
    let options =
        super::throttle::ProxyOptions { upstream: args.upstream.clone(), listen: args.listen, scale: args.scale };
    super::throttle::run(options, shutdown_signal()).await?;
    Ok(())
}

async fn run_reconcile(store: Store, args: &ReconcileArgs) -> Result<(), CliError> {
    let day = super::service::parse_date(args.date.as_deref(), chrono::Utc::now())
        .map_err(|e| CliError::Usage(format!("--date: {e}")))?;
    let outcome = store.reconcile(day, !args.dry_run).await?;
    println!(
        "{day}: counter {}, recount {} (over {} shards, {} index items read), drift {:+}{}",
        outcome.counter,
        outcome.recount.total(),
        outcome.recount.per_shard.len(),
        outcome.recount.items_read,
        outcome.drift,
        if outcome.repaired {
            "; repaired"
        } else if args.dry_run {
            "; dry run, nothing changed"
        } else {
            ""
        }
    );
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler can be installed");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}

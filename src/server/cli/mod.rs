//! The `northwind-ops` command line: parse, connect, run one subcommand
//! (the throttle proxy connects to nothing of its own).

mod capacity;
pub mod config;
pub mod healthcheck;
pub mod ready;
pub mod reference;
pub mod seed;
mod serve;
mod shards;
mod sim;
mod stream;
mod tables;
mod users;

use capacity::{run_advise, run_plan};
use serve::run_serve;
use sim::{run_loadgen, run_rehearse, run_stream_proxy, run_throttle_proxy};
use stream::{run_consume, run_lambda, run_lambda_local, run_reconcile, run_replay};
use tables::{run_provision, run_seed, run_template};
use users::{run_token, run_user};

use crate::server::capacity::advisor;
use crate::server::capacity::planner;
use crate::server::cli::config::{Cli, Command, StoreConfig};
use crate::server::cursor::KeyFileError;
use crate::server::sim::rehearse;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::{self, UsageFlusher};
use crate::server::stream::reconcile::ReconcileError;
use clap::Parser;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a process adds the capacity its calls consumed to the metrics
/// table (and once more when its command ends).
const FLUSH_EVERY: Duration = Duration::from_secs(60);

/// An error that ends the command, printed as one line that names the problem.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Connect(#[from] store::ConnectError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
    #[error(transparent)]
    Replay(#[from] crate::server::stream::replay::ReplayError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Invalid(#[from] crate::model::Invalid),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Throttle(#[from] crate::server::sim::throttle::ThrottleError),
    #[error(transparent)]
    Mapping(#[from] crate::server::sim::lambda::MappingError),
    #[error(transparent)]
    StreamProxy(#[from] crate::server::sim::streams::StreamSimError),
    #[error(transparent)]
    Rehearse(#[from] rehearse::RehearseError),
    #[error(transparent)]
    Plan(#[from] planner::PlanError),
    #[error(transparent)]
    Advice(#[from] advisor::AdviceError),
    #[error(transparent)]
    Prices(#[from] advisor::PricesError),
    #[error(transparent)]
    Healthcheck(#[from] healthcheck::HealthcheckError),
    #[error("the Lambda runtime stopped: {0}")]
    Lambda(String),
    /// `ready`'s answer when the plan is not ready (its report is printed).
    #[error("sale plan {plan:?} is {verdict}")]
    NotReady { plan: String, verdict: crate::model::Verdict },
}

pub async fn main() -> ExitCode {
    let cli = parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NORTHWIND_LOG")
                .unwrap_or_else(|_| "info,aws_config=warn,aws_smithy_runtime=warn,dynoxide=error".into()),
        )
        .with_writer(std::io::stderr)
        // Lambda sends the log to CloudWatch Logs, where colour codes are noise.
        .with_ansi(!matches!(cli.command, Some(Command::Lambda)))
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::NotReady { plan, verdict }) => {
            eprintln!("sale plan {plan:?}: {verdict}");
            ExitCode::from(if verdict == crate::model::Verdict::NoGo { ready::EXIT_NO_GO } else { ready::EXIT_ACT })
        }
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
        // So does the stream proxy: it reads the engine's stream over HTTP.
        Command::StreamProxy(args) => run_stream_proxy(&cli.store, &args).await,
        // The rehearsal starts stores of its own, one per design.
        Command::Rehearse(args) => run_rehearse(&cli.store, &args).await,
        // The template is generated from the definitions: no store needed.
        Command::Template(args) => run_template(&cli.store, &args),
        Command::Healthcheck(args) => healthcheck::run(&args).await,
        Command::Docs(args) => reference::write(&args.write),
        // Outside Lambda, say so before connecting to anything.
        Command::Lambda => {
            crate::server::stream::lambda::check_environment(|name| std::env::var(name).ok())
                .map_err(CliError::Usage)?;
            run_with_store(cli.store, Command::Lambda).await
        }
        command => run_with_store(cli.store, command).await,
    }
}

/// Every other command: secrets resolved, the store connected (and, for the
/// embedded one, shut down after the command).
async fn run_with_store(mut config: StoreConfig, command: Command) -> Result<(), CliError> {
    config.resolve_secrets().map_err(CliError::Usage)?;
    let (store, embedded) = store::connect(&config).await?;
    // `advise` reads the recorded capacity; recording its own reads would
    // stretch the span it advises on up to every time it is run.
    let records = !matches!(command, Command::Advise(_));
    let flushing = records.then(|| flush_periodically(store.usage_flusher()));
    let result = match command {
        Command::Serve(args) => run_serve(&config, store, &args).await,
        Command::Provision(args) => run_provision(&store, &args).await,
        Command::Seed(args) => run_seed(&store, &args, &config.data_dir).await,
        Command::Consume => run_consume(store).await,
        Command::Consumer(command) => stream::run_consumer_mode(&store, command).await,
        Command::Lambda => run_lambda(store).await,
        Command::LambdaLocal(args) => run_lambda_local(&config, store, &args).await,
        Command::Reconcile(args) => run_reconcile(store, &args).await,
        Command::Replay(args) => run_replay(store, &args).await,
        Command::Loadgen(args) => run_loadgen(store, &args).await,
        Command::Plan(args) => run_plan(&store, &args).await,
        Command::Shards(args) => shards::run_shards(&store, &args).await,
        Command::Ready(args) => ready::run_ready(&config, store, &args).await,
        Command::User(command) => run_user(&store, command).await,
        Command::Token(command) => run_token(&store, command).await,
        Command::Advise(args) => run_advise(&store, &args, &config).await,
        Command::ThrottleProxy(_)
        | Command::StreamProxy(_)
        | Command::Rehearse(_)
        | Command::Template(_)
        | Command::Healthcheck(_)
        | Command::Docs(_) => {
            unreachable!("run() runs these without the store")
        }
    };
    if let Some((stop, flushing)) = flushing {
        // The last flush, after the command's last call.
        stop.cancel();
        let _ = flushing.await;
    }
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
    result
}

/// Flushes the recorded capacity every `FLUSH_EVERY`, and once more when
/// told to stop (never in the middle of a flush: a flush cut short would
/// lose the minutes it had taken).
fn flush_periodically(flusher: UsageFlusher) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(FLUSH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            let last = tokio::select! {
                _ = ticks.tick() => false,
                _ = stopped.cancelled() => true,
            };
            match flusher.flush().await {
                Ok(_) => {}
                Err(StoreError::Unavailable { kind: Unavailable::NoTable, .. }) => {
                    tracing::debug!("no metrics table: the consumed capacity is not recorded")
                }
                Err(err) => {
                    tracing::warn!(error = %err, "could not record the consumed capacity; kept for the next flush")
                }
            }
            if last {
                return;
            }
        }
    });
    (stop, task)
}

fn cli_date(flag: &str, text: Option<&str>) -> Result<chrono::NaiveDate, CliError> {
    crate::server::service::checks::parse_date(text, chrono::Utc::now())
        .map_err(|e| CliError::Usage(format!("{flag}: {e}")))
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

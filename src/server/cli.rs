//! The `northwind-ops` command line: parse, connect, run one subcommand.

use super::config::{Cli, Command, ProvisionArgs, SeedArgs, ServeArgs, StoreConfig};
use super::cursor::CursorCodec;
use super::error::StoreError;
use super::seed::{SeedPlan, seed};
use super::service::Service;
use super::store::{self, Store};
use super::serve;
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
    #[error("{0}")]
    Usage(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

pub async fn main() -> ExitCode {
    let cli = Cli::parse();
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

async fn run(cli: Cli) -> Result<(), CliError> {
    let command = cli.command.unwrap_or_else(|| Command::Serve(ServeArgs::default()));
    let (store, embedded) = store::connect(&cli.store).await?;
    let result = match command {
        Command::Serve(args) => run_serve(&cli.store, store, &args).await,
        Command::Provision(args) => run_provision(&store, &args).await,
        Command::Seed(args) => run_seed(&store, &args).await,
    };
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
    result
}

async fn run_provision(store: &Store, args: &ProvisionArgs) -> Result<(), CliError> {
    let report = store.provision(args).await?;
    println!("{report}");
    Ok(())
}

async fn run_seed(store: &Store, args: &SeedArgs) -> Result<(), CliError> {
    let now = match args.now.as_deref() {
        Some(text) => iso_millis::parse(text).map_err(|e| CliError::Usage(format!("--now: {e}")))?,
        None => chrono::Utc::now(),
    };
    store.provision(&args.provision).await?;
    let plan = SeedPlan { orders: args.orders, customers: args.customers, days: args.days, seed: args.seed, now };
    let report = seed(store, &plan).await?;
    println!(
        "seeded {} orders ({} written, {} already there); {} of today's are PENDING",
        args.orders, report.written, report.already_there, report.pending_today
    );
    Ok(())
}

async fn run_serve(config: &StoreConfig, store: Store, args: &ServeArgs) -> Result<(), CliError> {
    // A store that is down is reported on the pages, not a reason to refuse to start;
    // tables that contradict the key design are.
    match store.provision(&args.provision).await {
        Ok(report) => tracing::info!("{report}"),
        Err(StoreError::Unavailable(why)) => tracing::warn!("store unavailable at start-up: {why}"),
        Err(err) => return Err(err.into()),
    }
    let cursors = CursorCodec::from_secret_or_file(config.cursor_secret.as_deref(), &config.data_dir)
        .map_err(|source| CliError::Io { what: format!("cursor key in {}", config.data_dir.display()), source })?;
    let service = Service::new(Arc::new(store), Arc::new(cursors));
    let (addr, task) = serve::start(service, args, shutdown_signal())
        .await
        .map_err(|source| CliError::Io { what: format!("cannot listen on {}", args.addr), source })?;
    // Scripts and tests read this line to find the port when --addr has port 0.
    println!("listening on http://{addr}");
    tracing::info!(%addr, "Northwind Ops is serving");
    task.await
        .map_err(|e| CliError::Usage(format!("server task failed: {e}")))?
        .map_err(|source| CliError::Io { what: "server".into(), source })
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


//! The `northwind-ops` command line: parse, connect, run one subcommand
//! (the throttle proxy connects to nothing of its own).

pub mod config;
pub mod files;
pub mod seed;

use crate::model::AccountSource;
use crate::model::{Role, iso_millis};
use crate::server::auth::accounts;
use crate::server::capacity::advisor::{self, Advice, Prices};
use crate::server::capacity::{history, planner};
use crate::server::cli::config::{
    AdviseArgs, Cli, Command, PlanArgs, ProvisionArgs, ReconcileArgs, RehearseArgs, SeedArgs, ServeArgs, StoreConfig,
    ThrottleProxyArgs, TokenCommand, UserCommand,
};
use crate::server::cli::seed::{SeedPlan, seed};
use crate::server::error::ApiError;
use crate::server::http::serve;
use crate::server::service::Service;
use crate::server::service::cursor::{CursorCodec, KeyFileError};
use crate::server::sim::rehearse;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::{self, AccountChange, Store, UsageFlusher};
use crate::server::stream::consumer::{Consumer, ConsumerOptions};
use crate::server::stream::follower;
use crate::server::stream::live::{LiveHub, LiveLimits};
use crate::server::stream::reconcile::{
    FullOptions, FullOutcome, PendingOutcome, ReconcileError, ReconcileOptions, Reconciler,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Invalid(#[from] crate::model::Invalid),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Throttle(#[from] crate::server::sim::throttle::ThrottleError),
    #[error(transparent)]
    Rehearse(#[from] rehearse::RehearseError),
    #[error(transparent)]
    Plan(#[from] planner::PlanError),
    #[error(transparent)]
    Advice(#[from] advisor::AdviceError),
    #[error(transparent)]
    Prices(#[from] advisor::PricesError),
    #[error("the Lambda runtime stopped: {0}")]
    Lambda(String),
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
        // The rehearsal starts stores of its own, one per design.
        Command::Rehearse(args) => run_rehearse(&cli.store, &args).await,
        // The template is generated from the definitions: no store needed.
        Command::Template(args) => run_template(&cli.store, &args),
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
        Command::Lambda => run_lambda(store).await,
        Command::Reconcile(args) => run_reconcile(store, &args).await,
        Command::Loadgen(args) => run_loadgen(store, &args).await,
        Command::Plan(args) => run_plan(&store, &args).await,
        Command::User(command) => run_user(&store, command).await,
        Command::Token(command) => run_token(&store, command).await,
        Command::Advise(args) => run_advise(&store, &args, &config).await,
        Command::ThrottleProxy(_) | Command::Rehearse(_) | Command::Template(_) => {
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

fn run_template(config: &StoreConfig, args: &ProvisionArgs) -> Result<(), CliError> {
    use crate::server::deploy::template::{Deployment, template};
    use crate::server::store::TableDef;
    // The same checks as a store's: the names must be DynamoDB's.
    config.validate().map_err(CliError::Usage)?;
    let capacity = args.capacity();
    let deployment = Deployment {
        orders: TableDef::orders(&config.orders_table, capacity),
        metrics: TableDef::metrics(&config.metrics_table, capacity),
    };
    println!("{:#}", template(&deployment));
    Ok(())
}

async fn run_provision(store: &Store, args: &ProvisionArgs) -> Result<(), CliError> {
    let report = store.provision(Some(args.capacity())).await?;
    println!("{report}");
    Ok(())
}

async fn run_seed(store: &Store, args: &SeedArgs, data_dir: &std::path::Path) -> Result<(), CliError> {
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
    if args.demo_accounts {
        demo_accounts(store, data_dir).await?;
    }
    Ok(())
}

/// One account per role, made only when there is none yet, with generated
/// passwords: printed, and kept in a file only this user can read.
async fn demo_accounts(store: &Store, data_dir: &std::path::Path) -> Result<(), CliError> {
    let path = data_dir.join("demo-credentials.txt");
    if !store.list_accounts().await?.is_empty() {
        println!("accounts exist already; demo credentials, if these are the demo's, are in {}", path.display());
        return Ok(());
    }
    let mut lines = Vec::new();
    for role in Role::ALL {
        let password = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 12]>());
        accounts::add_user(store, role.as_str(), role, password.clone()).await.map_err(api_error)?;
        lines.push(format!("{role:<8} {:<8} {password}", role.as_str()));
    }
    let text =
        format!("# role    name     password (demo accounts made by `seed --demo-accounts`)\n{}\n", lines.join("\n"));
    crate::server::cli::files::create_private_dir(data_dir)
        .and_then(|()| crate::server::cli::files::write_private(&path, &text))
        .map_err(|source| CliError::Io { what: format!("writing {}", path.display()), source })?;
    println!("demo accounts (also in {}, readable by you only):\n{text}", path.display());
    Ok(())
}

/// A password from standard input: its first line, less the line end (so
/// `printf 'pw\npw\n' |`, the habit of tools that ask twice, gives `pw`).
/// What else the line holds is checked with the password (`check_password`):
/// a control character is refused, never stored.
fn read_password() -> Result<String, CliError> {
    use std::io::{BufRead, IsTerminal};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("password (at least {} characters): ", accounts::MIN_PASSWORD);
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|source| CliError::Io { what: "reading the password from standard input".into(), source })?;
    let line = line.strip_suffix('\n').unwrap_or(&line);
    Ok(line.strip_suffix('\r').unwrap_or(line).to_string())
}

fn api_error(err: ApiError) -> CliError {
    match err {
        ApiError::Store(err) => CliError::Store(err),
        other => CliError::Usage(other.to_string()),
    }
}

async fn run_user(store: &Store, command: UserCommand) -> Result<(), CliError> {
    match command {
        UserCommand::Add { name, role } => {
            let password = read_password()?;
            accounts::add_user(store, &name, role, password).await.map_err(api_error)?;
            println!("added {name} ({role})");
        }
        UserCommand::List => {
            println!("{:<24} {:<8} {:<6} {:<9} created", "name", "role", "source", "state");
            for a in store.list_accounts().await? {
                let state = if a.disabled { "disabled" } else { "active" };
                let source = match a.source {
                    AccountSource::Local => "local",
                    AccountSource::Oidc => "oidc",
                };
                println!(
                    "{:<24} {:<8} {source:<6} {state:<9} {}",
                    a.name,
                    a.role.as_str(),
                    iso_millis::format(&a.created_at)
                );
            }
        }
        UserCommand::Disable { name } => change(store, &name, AccountChange::Disable, "disabled").await?,
        UserCommand::Enable { name } => change(store, &name, AccountChange::Enable, "enabled").await?,
        UserCommand::SetRole { name, role } => {
            change(store, &name, AccountChange::Role(role), &format!("now {role}")).await?
        }
        UserCommand::SetPassword { name } => {
            let password = read_password()?;
            accounts::set_password(store, &name, password).await.map_err(api_error)?;
            println!("{name}: password changed");
        }
    }
    Ok(())
}

async fn change(store: &Store, name: &str, change: AccountChange, done: &str) -> Result<(), CliError> {
    accounts::validate_name("user name", name)?;
    store.change_account(name, &change).await?;
    println!("{name}: {done}");
    Ok(())
}

async fn run_token(store: &Store, command: TokenCommand) -> Result<(), CliError> {
    match command {
        TokenCommand::Create { name, role } => {
            // The token alone on standard output, so scripts can capture it.
            let token = accounts::create_token(store, &name, role, "cli").await.map_err(api_error)?;
            println!("{token}");
        }
        TokenCommand::List => {
            println!("{:<24} {:<8} {:<8} {:<16} created", "name", "role", "state", "by");
            for t in store.list_tokens().await? {
                let state = if t.revoked { "revoked" } else { "active" };
                println!(
                    "{:<24} {:<8} {state:<8} {:<16} {}",
                    t.name,
                    t.role.as_str(),
                    t.created_by,
                    iso_millis::format(&t.created_at)
                );
            }
        }
        TokenCommand::Revoke { name } => {
            accounts::validate_token_name(&name)?;
            store.revoke_token(&name).await?;
            println!("{name}: revoked");
        }
    }
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
    let prices = match &args.prices {
        Some(path) => Prices::from_json_file(path)?,
        None => Prices::default(),
    };
    let service = Service::new(Arc::new(store), Arc::new(cursors), live.clone())
        .with_stuck_after(args.stuck_after_minutes)
        .with_prices(prices)
        .with_capacity(crate::server::service::figures::CapacitySettings {
            source: config.capacity_source(),
            ..Default::default()
        });
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
fn owner_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
    format!("{host}-{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The live follower, the stream consumer and the periodic reconciliation,
/// on `tasks`, until `stop` is cancelled.
fn start_background(service: &Service, args: &ServeArgs, stop: &CancellationToken, tasks: &TaskTracker) {
    // Whichever instance applies a change, this one's live connections hear of it.
    tasks.spawn(follower::run(service.clone(), follower::FOLLOW_EVERY, stop.clone().cancelled_owned()));
    if !args.no_consumer {
        let consumer =
            Consumer::new(service.store.clone(), ConsumerOptions::new(owner_id()), Some(service.live.clone()));
        *service.consumer.lock() = Some(consumer.status());
        let stop = stop.clone();
        tasks.spawn(async move { consumer.run(stop.cancelled()).await });
    }
    if args.reconcile_minutes > 0 {
        let reconciler = Reconciler::new(service.store.clone(), ReconcileOptions::new(owner_id()));
        let every = std::time::Duration::from_secs(u64::from(args.reconcile_minutes) * 60);
        let stop = stop.clone();
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                // The verdict is recorded on the counter item, for every instance to show.
                match reconciler.pending(chrono::Utc::now().date_naive(), true).await {
                    Ok(r) if !r.off.is_empty() => {
                        crate::server::http::telemetry::reconciled(r.drift);
                        tracing::warn!(date = %r.day, drift = r.drift, off = ?r.off, "PENDING counters drifted; repaired")
                    }
                    Ok(r) => crate::server::http::telemetry::reconciled(r.drift),
                    Err(err) => tracing::warn!(error = %err, "reconciliation failed"),
                }
            }
        });
    }
}

async fn run_consume(store: Store) -> Result<(), CliError> {
    let owner = owner_id();
    println!("consuming the stream of {} as {owner} (Ctrl-C to stop)", store.orders_table());
    let consumer = Consumer::new(Arc::new(store), ConsumerOptions::new(owner), None);
    consumer.run(shutdown_signal()).await;
    let status = consumer.status().lock().clone();
    println!("applied {} records ({} unreadable)", status.records_applied, status.bad_records);
    Ok(())
}

/// The stream consumer as a Lambda function, until the Runtime API stops
/// answering (Lambda ends the process itself).
async fn run_lambda(store: Store) -> Result<(), CliError> {
    tracing::info!(table = store.orders_table(), "consuming the stream's events as a Lambda function");
    crate::server::stream::lambda::run(Arc::new(store)).await.map_err(|err| CliError::Lambda(err.to_string()))
}

async fn run_loadgen(store: Store, args: &crate::server::sim::loadgen::LoadgenArgs) -> Result<(), CliError> {
    store.verify().await?;
    let report = crate::server::sim::loadgen::run(Arc::new(store), args).await?;
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
    let options = crate::server::sim::throttle::ProxyOptions {
        upstream: args.upstream.clone(),
        listen: args.listen,
        scale: args.scale,
    };
    crate::server::sim::throttle::run(options, shutdown_signal()).await?;
    Ok(())
}

async fn run_plan(store: &Store, args: &PlanArgs) -> Result<(), CliError> {
    let peak = args.peak_orders_per_second;
    let item_bytes = match args.item_bytes {
        Some(bytes) => bytes,
        None => planner::gsi2_entry_bytes(&planner::typical_order(), store.shards())?,
    };
    let mut input = planner::PlanInput::for_app(peak, item_bytes);
    input.headroom = args.headroom;
    let plan = planner::plan(&input)?;
    println!("GSI2 write shards for a peak of {peak} orders a second:");
    for step in &plan.steps {
        println!("  {step}");
    }
    println!("=> --shards {} (this store is set to {})", plan.shards, store.shards());
    print_warm_throughput(store).await?;
    let (order_bytes, audit_bytes) = planner::typical_item_bytes()?;
    println!("Before a sale of {peak} orders a second, pre-warm at least (write units a second):");
    for prewarm in planner::prewarm(peak, &plan, order_bytes, audit_bytes) {
        println!("  {:<14} {:>10.0}  {}", prewarm.resource, prewarm.write_units_per_second.ceil(), prewarm.why);
    }
    println!(
        "  e.g. aws dynamodb update-table --table-name {} --warm-throughput WriteUnitsPerSecond=N,ReadUnitsPerSecond=M",
        store.orders_table()
    );
    Ok(())
}

/// What DescribeTable reports of each table's and index's warm throughput.
async fn print_warm_throughput(store: &Store) -> Result<(), CliError> {
    let warm = match store.warm_throughput().await {
        Ok(warm) => warm,
        Err(StoreError::Unavailable { kind: Unavailable::NoTable, detail, .. }) => {
            println!("Warm throughput: unknown ({detail}; run `northwind-ops provision`)");
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    };
    println!("Warm throughput now (DescribeTable):");
    for w in warm {
        match (w.read_units_per_second, w.write_units_per_second) {
            (Some(read), Some(write)) => println!("  {:<40} {read} reads/s, {write} writes/s", w.resource),
            _ => println!("  {:<40} not reported by this engine", w.resource),
        }
    }
    Ok(())
}

async fn run_rehearse(base: &StoreConfig, args: &RehearseArgs) -> Result<(), CliError> {
    let options = rehearse::RehearseOptions {
        designs: args.designs.clone(),
        scale: args.scale,
        load: rehearse::flash_sale(args),
        read_every: std::time::Duration::from_millis(args.read_every_ms),
    };
    let reports = rehearse::rehearse(base, &options).await?;
    let table = rehearse::table(&options, &reports);
    println!("{table}");
    if let Some(path) = &args.write {
        rehearse::write_section(path, &table)?;
        println!("wrote the rehearsal into {}", path.display());
    }
    Ok(())
}

async fn run_reconcile(store: Store, args: &ReconcileArgs) -> Result<(), CliError> {
    let day = cli_date("--date", args.date.as_deref())?;
    let mut options = ReconcileOptions::new(owner_id());
    options.grace = std::time::Duration::from_millis(args.grace_ms);
    let store = Arc::new(store);
    let reconciler = Reconciler::new(store.clone(), options);
    if !args.full {
        println!("{}", pending_line(&reconciler.pending(day, !args.dry_run).await?, args.dry_run));
        return Ok(());
    }
    let full = FullOptions {
        since: args.since.as_deref().map(|d| cli_date("--since", Some(d))).transpose()?.unwrap_or(day),
        until: args.until.as_deref().map(|d| cli_date("--until", Some(d))).transpose()?.unwrap_or(day),
        rcu_per_second: crate::server::stream::reconcile::scan_rate(
            store.read_capacity().await?,
            args.read_share,
            args.max_rcu_per_second,
        )?,
        segments: args.segments,
        page: 200,
        progress: true,
    };
    for day in full.since.iter_days().take_while(|d| *d <= full.until) {
        println!("{}", pending_line(&reconciler.pending(day, !args.dry_run).await?, args.dry_run));
    }
    let outcome = reconciler.full(&full, !args.dry_run).await?;
    print_full(&outcome, args.dry_run);
    let raced: Vec<String> = outcome.days.iter().filter(|d| d.raced).map(|d| d.day.to_string()).collect();
    if !raced.is_empty() {
        return Err(CliError::Usage(format!("another reconciliation repaired {} first: run again", raced.join(", "))));
    }
    Ok(())
}

/// The capacity mode per table and index over the last `--days` days, from
/// the capacity source's figures: the window, its coverage, and, on at least
/// a day observed, the mode to choose, what each costs a month, and why.
async fn run_advise(store: &Store, args: &AdviseArgs, config: &StoreConfig) -> Result<(), CliError> {
    let (prices, priced_by) = match &args.prices {
        Some(path) => (Prices::from_json_file(path)?, path.display().to_string()),
        None => (Prices::default(), "us-east-1 defaults (November 2024)".to_string()),
    };
    let now = chrono::Utc::now();
    let source = config.capacity_source();
    let days = crate::server::service::figures::window_days(now.date_naive(), args.days);
    let figures = capacity_figures(store, config, &days, now).await?;
    let window: Vec<history::Day<'_>> =
        days.iter().zip(&figures).map(|(date, figures)| history::Day { date: *date, figures }).collect();
    let (series, window) = history::series(&window, now);
    if series.is_empty() {
        return Err(CliError::Usage(format!(
            "no capacity figures for {} to {} in the metrics table {} (source: {source}): run the app (serve) or \
             consume against these tables first; {}",
            days.first().unwrap_or(&now.date_naive()),
            now.date_naive(),
            config.metrics_table,
            advisor::Verdict::not_enough_history(0),
        )));
    }
    println!(
        "Capacity mode advice over {} days, {} to {} UTC; source: {}; {} of {} minutes observed ({:.1}% coverage); \
         prices: {priced_by}.",
        args.days,
        window.start.format("%Y-%m-%d %H:%M"),
        now.format("%Y-%m-%d %H:%M"),
        source_words(source),
        window.observed,
        window.minutes,
        window.coverage() * 100.0,
    );
    println!("Monthly figures scale the observed minutes to 30 days.");
    for series in &series {
        match advisor::recommend(series, &prices)? {
            advisor::Verdict::Advice(advice) => print_advice(&advice),
            advisor::Verdict::NotEnoughHistory { resource, observed } => {
                println!();
                println!("{resource}: no recommendation");
                println!("  why           {}", advisor::Verdict::not_enough_history(observed));
            }
        }
    }
    Ok(())
}

/// What a capacity source's figures are, in words.
fn source_words(source: crate::server::capacity::sources::Source) -> &'static str {
    match source {
        crate::server::capacity::sources::Source::Stream => {
            "stream (writes of every writer, priced from the orders table's stream; reads of this app's calls)"
        }
        crate::server::capacity::sources::Source::CloudWatch => "CloudWatch (DynamoDB's own AWS/DynamoDB metrics)",
    }
}

/// Each day's figures as the capacity source gives them.
async fn capacity_figures(
    store: &Store,
    config: &StoreConfig,
    days: &[chrono::NaiveDate],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::server::capacity::sources::Figures>, CliError> {
    use crate::server::capacity::sources::{self, Source};
    match config.capacity_source() {
        Source::Stream => {
            let recorded: Vec<store::CapacityDay> =
                futures::future::try_join_all(days.iter().map(|d| store.persisted_capacity_day(*d))).await?;
            Ok(recorded.iter().map(|day| sources::from_stream(day, store.orders_table())).collect())
        }
        Source::CloudWatch => {
            let start = days.first().map_or(now, |d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
            let read = store.cloudwatch_minutes(start, now).await?;
            Ok(days.iter().map(|day| sources::from_cloudwatch(&read, *day, now).0).collect())
        }
    }
}

fn print_advice(advice: &Advice) {
    let side = |u: &advisor::Utilisation| {
        format!(
            "average {:.2}/s, peak {:.2}/s; {:.1}% of provisioned capacity on average",
            u.average_per_second,
            u.peak_per_second,
            u.average_utilisation * 100.0
        )
    };
    println!();
    println!("{}: {}", advice.resource, advice.mode);
    println!(
        "  monthly cost  on-demand ${:.4}; provisioned with auto scaling ${:.4}",
        advice.on_demand_monthly, advice.provisioned_monthly
    );
    println!("  writes        {}", side(&advice.write));
    println!("  reads         {}", side(&advice.read));
    println!("  why           {}", advice.reason);
    let resource = crate::server::capacity::usage::Resource::parse(&advice.resource);
    for floor in &advice.schedule {
        let (table, index) =
            resource.as_ref().map_or((advice.resource.as_str(), None), |r| (r.table.as_str(), r.index.as_deref()));
        for action in floor.put_scheduled_actions(table, index) {
            println!("  scheduled action (aws application-autoscaling put-scheduled-action --cli-input-json):");
            println!("{}", serde_json::to_string_pretty(&action).unwrap_or_default());
        }
    }
}

fn cli_date(flag: &str, text: Option<&str>) -> Result<chrono::NaiveDate, CliError> {
    crate::server::service::checks::parse_date(text, chrono::Utc::now())
        .map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

fn pending_line(outcome: &PendingOutcome, dry_run: bool) -> String {
    let shards: Vec<String> =
        outcome.off.iter().filter(|(a, _)| a.as_str() != "pending").map(|(a, d)| format!("{a} {d:+}")).collect();
    format!(
        "{}: PENDING counter {}, should be {} ({} orders in the index, {} changed after the snapshot, {} stream \
         records read), drift {:+}{}{}",
        outcome.day,
        outcome.counter,
        outcome.expected,
        outcome.index_items,
        outcome.touched,
        outcome.records,
        outcome.drift,
        if shards.is_empty() { String::new() } else { format!(" (off: {})", shards.join(", ")) },
        verdict_word(!outcome.off.is_empty(), outcome.repaired, dry_run)
    )
}

fn print_full(outcome: &FullOutcome, dry_run: bool) {
    for day in &outcome.days {
        let statuses: Vec<String> =
            day.off.iter().filter(|(a, _)| a.as_str() != "created").map(|(a, d)| format!("{a} {d:+}")).collect();
        let minutes = day.minutes_off.values().map(|d| d.abs()).sum::<i64>();
        println!(
            "{}: created {}, should be {}, drift {:+}; statuses off: {}; minutes off: {} (by {} in all){}",
            day.day,
            day.created,
            day.expected_created,
            day.created - day.expected_created,
            if statuses.is_empty() { "none".into() } else { statuses.join(", ") },
            day.minutes_off.len(),
            minutes,
            if day.raced {
                "; raced, not repaired".into()
            } else {
                verdict_word(!day.off.is_empty() || !day.minutes_off.is_empty(), day.repaired, dry_run)
            }
        );
    }
    println!(
        "scanned {} items ({} orders in range, {} unreadable), {:.1} read capacity units in {:.1} s; {} stream records read",
        outcome.scanned,
        outcome.in_range,
        outcome.unreadable,
        outcome.consumed,
        outcome.elapsed.as_secs_f64(),
        outcome.records
    );
}

fn verdict_word(damaged: bool, repaired: bool, dry_run: bool) -> String {
    match (damaged, repaired, dry_run) {
        (_, true, _) => "; repaired".into(),
        (true, false, true) => "; dry run, nothing changed".into(),
        _ => String::new(),
    }
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

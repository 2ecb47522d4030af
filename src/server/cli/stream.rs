//! `consume`, `consumer`, `lambda`, `lambda-local`, `replay` and `reconcile`: the stream
//! consumer, in this process or as a Lambda function (and a local event
//! source mapping to drive it, and a replay of what it gave up), and the
//! counters checked against the tables.

use super::serve::owner_id;
use super::{CliError, cli_date, shutdown_signal};
use crate::server::cli::config::{ConsumerCommand, LambdaLocalArgs, ReconcileArgs, ReplayArgs, StoreConfig};
use crate::server::sim::lambda::dead_letters::DeadLetters;
use crate::server::sim::lambda::runtime::FunctionConfig;
use crate::server::sim::lambda::{Mapping, function_env};
use crate::server::store::Store;
use crate::server::stream::consumer::{Consumer, ConsumerOptions};
use crate::server::stream::lambda::LambdaConsumer;
use crate::server::stream::reconcile::{FullOptions, FullOutcome, PendingOutcome, ReconcileOptions, Reconciler};
use crate::server::stream::replay::{self, Replayed};
use crate::server::stream::{lag, registry};
use std::sync::Arc;

pub(super) async fn run_consume(store: Store) -> Result<(), CliError> {
    let owner = owner_id();
    println!("consuming the stream of {} as {owner} (Ctrl-C to stop)", store.orders_table());
    let store = Arc::new(store);
    let consumer = Arc::new(Consumer::new(store.clone(), ConsumerOptions::new(owner.clone()), None));
    // Not beside a live Lambda consumer: both would count every change.
    let stop = tokio_util::sync::CancellationToken::new();
    let recorded = lag::record(store.clone(), consumer.subscribe(), lag::RECORD_EVERY, stop.clone());
    let guarded = registry::run_in_process(consumer.clone(), store, owner, registry::IN_PROCESS_BEAT, stop.clone());
    let signal = async {
        shutdown_signal().await;
        stop.cancel();
    };
    tokio::join!(guarded, recorded, signal);
    let status = consumer.status();
    if let Some(why) = &status.refused {
        println!("{why}");
    }
    println!("applied {} records ({} unreadable)", status.records_applied, status.bad_records);
    Ok(())
}

/// The stream consumer as a Lambda function, until the Runtime API stops
/// answering (Lambda ends the process itself).
pub(super) async fn run_lambda(store: Store) -> Result<(), CliError> {
    tracing::info!(table = store.orders_table(), "consuming the stream's events as a Lambda function");
    crate::server::stream::lambda::run(Arc::new(store)).await.map_err(|err| CliError::Lambda(err.to_string()))
}

/// The local event source mapping, until Ctrl-C: the function's
/// environments are processes of this binary.
pub(super) async fn run_lambda_local(
    config: &StoreConfig,
    store: Store,
    args: &LambdaLocalArgs,
) -> Result<(), CliError> {
    let settings = args.settings()?;
    let env = function_env(config)?;
    let work_dir = config.data_dir.join("lambda-local");
    let io = |what: String| move |source| CliError::Io { what, source };
    std::fs::create_dir_all(&work_dir).map_err(io(format!("create {}", work_dir.display())))?;
    let dead_letters = args.dead_letters.clone().unwrap_or_else(|| work_dir.join("dead-letters.jsonl"));
    let function = FunctionConfig {
        binary: std::env::current_exe().map_err(io("find this program's binary".into()))?,
        args: vec!["lambda".into()],
        env,
        name: args.function_name.clone(),
        memory_mb: settings.memory_mb,
        timeout: settings.function_timeout,
        work_dir: work_dir.clone(),
    };
    println!(
        "local Lambda event source mapping on the stream of {}: batches of {} (window {} s), {} at once a shard, \
         tumbling window {}, \
         bisect {}, {} retries, records given up after {}; environments' logs in {}, the on-failure destination \
         {} (Ctrl-C to stop)",
        store.orders_table(),
        settings.batch_size,
        settings.batching_window.as_secs(),
        settings.parallelization_factor,
        settings.tumbling_window.map_or("none".into(), |w| format!("{} s", w.as_secs())),
        settings.bisect_on_error,
        settings.max_retries.map_or("unlimited".into(), |n| n.to_string()),
        settings.max_record_age.map_or("no age".into(), |age| format!("{} s", age.as_secs())),
        work_dir.display(),
        dead_letters.display()
    );
    let grace = settings.function_timeout;
    let mapping = Mapping::start(Arc::new(store), settings, function, Arc::new(DeadLetters::new(Some(dead_letters))));
    shutdown_signal().await;
    println!("{}", mapping.stop(grace).await);
    Ok(())
}

pub(super) async fn run_reconcile(store: Store, args: &ReconcileArgs) -> Result<(), CliError> {
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

pub(super) fn pending_line(outcome: &PendingOutcome, dry_run: bool) -> String {
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

pub(super) fn print_full(outcome: &FullOutcome, dry_run: bool) {
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

pub(super) fn verdict_word(damaged: bool, repaired: bool, dry_run: bool) -> String {
    match (damaged, repaired, dry_run) {
        (_, true, _) => "; repaired".into(),
        (true, false, true) => "; dry run, nothing changed".into(),
        _ => String::new(),
    }
}

/// Every range the messages name, in order; stops at the first that fails
/// (what was replayed before it stays applied: each record counts once).
pub(super) async fn run_replay(store: Store, args: &ReplayArgs) -> Result<(), CliError> {
    let what = format!("read {}", args.messages.display());
    let text = if args.messages.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(&args.messages)
    }
    .map_err(|source| CliError::Io { what, source })?;
    let ranges = replay::parse_messages(&text)?;
    let store = Arc::new(store);
    // Not the function's consumer: a replay neither records a heartbeat nor
    // reads or records the consumer mode.
    let consumer = LambdaConsumer::for_replay(store.clone());
    let mut total = Replayed::default();
    for range in &ranges {
        let done = replay::replay(&store, &consumer, range).await?;
        println!(
            "shard {} {}..{}: {} records read{}, {} applied, {} applied before, {} unreadable{}",
            range.shard_id,
            range.first,
            range.last,
            done.read,
            range.batch_size.map_or(String::new(), |n| format!(" (the message says {n})")),
            done.applied,
            done.already,
            done.skipped,
            left_words(done.left)
        );
        total = total.plus(&done);
    }
    println!(
        "replayed {} range(s): {} records, {} applied, {} applied before, {} unreadable{}",
        ranges.len(),
        total.read,
        total.applied,
        total.already,
        total.skipped,
        left_words(total.left)
    );
    Ok(())
}

/// Records a replay left to the in-process consumer, when there are any.
fn left_words(left: usize) -> String {
    match left {
        0 => String::new(),
        n => format!(", {n} left to the in-process consumer (after the shard's checkpoint; mode serve)"),
    }
}

/// `consumer show` and `consumer use`.
pub(super) async fn run_consumer_mode(store: &Store, command: ConsumerCommand) -> Result<(), CliError> {
    let state = match command {
        ConsumerCommand::Show => store.consumer_mode().await?,
        ConsumerCommand::Use { mode, expect_version } => {
            registry::switch_mode(store, mode, expect_version, &crate::model::Actor::cli("cli"), None).await?
        }
    };
    let by = match (&state.changed_by, state.changed_at) {
        (Some(by), Some(at)) => format!(", recorded by {by} at {}", at.format("%Y-%m-%d %H:%M:%S UTC")),
        _ if !state.recorded => " (none recorded: the default)".to_string(),
        _ => String::new(),
    };
    println!("consumer mode: {} (version {}){by}", state.mode, state.version);
    Ok(())
}

//! The binary as users run it: settings from the environment, least
//! privilege (tables only when asked), private files, clear errors. Every
//! process started here is stopped by its own pid.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

/// A running `northwind-ops`, killed (by its pid) when dropped.
struct Running {
    child: Child,
    base: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with `env` and `args` and waits for its "listening on"
/// line.
fn start(env: &[(&str, &str)], args: &[&str]) -> Running {
    let mut command = Command::new(BIN);
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::null()).env("NORTHWIND_LOG", "error");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("the binary starts");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match lines.next() {
            Some(Ok(line)) if line.starts_with("listening on ") => {
                let base = line.trim_start_matches("listening on ").to_string();
                return Running { child, base };
            }
            Some(_) => continue,
            None => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no 'listening on' line from {args:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_command_serves_with_the_environments_settings_and_private_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_text = data.display().to_string();
    let running = start(
        &[
            ("NORTHWIND_ADDR", "127.0.0.1:0"),
            ("NORTHWIND_DATA_DIR", &data_text),
            ("NORTHWIND_PROVISION", "true"),
            ("NORTHWIND_RECONCILE_MINUTES", "0"),
        ],
        &[],
    );
    // Port 0 from the environment, not the default 3000.
    assert!(!running.base.ends_with(":3000"), "{}", running.base);
    assert_eq!(reqwest::get(format!("{}/healthz", running.base)).await.unwrap().status().as_u16(), 200);
    assert_eq!(reqwest::get(format!("{}/readyz", running.base)).await.unwrap().status().as_u16(), 200);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700, "data directory");
        assert_eq!(mode(&data.join("northwind.db")), 0o600, "the embedded store's file");
        assert_eq!(mode(&data.join("cursor.key")), 0o600, "the cursor key");
    }
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_creates_no_tables_unless_asked() {
    let local = common::dynamodb_local();
    let dir = tempfile::tempdir().unwrap();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let (orders, metrics) = (format!("lp-orders-{suffix}"), format!("lp-metrics-{suffix}"));
    let dir_text = dir.path().display().to_string();
    let args = |provision: bool| {
        let mut args = vec![
            "--endpoint-url",
            &local,
            "--data-dir",
            &dir_text,
            "--orders-table",
            &orders,
            "--metrics-table",
            &metrics,
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-consumer",
            "--reconcile-minutes",
            "0",
        ];
        if provision {
            args.push("--provision");
        }
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let plain = args(false);
    let running = start(&[], &plain.iter().map(String::as_str).collect::<Vec<_>>());
    let response = reqwest::get(format!("{}/readyz", running.base)).await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("provision"), "{body}");
    drop(running);
    let config =
        common::store_config(&common::Engine::DynamoDbLocal(local.clone()), dir.path(), &["--orders-table", &orders]);
    let (store, _) = northwind_ops::server::store::connect(&config).await.unwrap();
    let missing = store.client().describe_table().table_name(&orders).send().await;
    assert!(missing.is_err(), "serve without --provision created {orders}");

    let provisioning = args(true);
    let running = start(&[], &provisioning.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(reqwest::get(format!("{}/readyz", running.base)).await.unwrap().status().as_u16(), 200);
    assert!(store.client().describe_table().table_name(&orders).send().await.is_ok());
    drop(running);
}

#[test]
fn reconcile_checks_a_store_and_says_what_it_needs() {
    let local = common::dynamodb_local();
    let dir = tempfile::tempdir().unwrap();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let (orders, metrics) = (format!("rc-orders-{suffix}"), format!("rc-metrics-{suffix}"));
    let run = |args: &[&str]| {
        let tables = ["--endpoint-url", &local, "--orders-table", &orders, "--metrics-table", &metrics];
        let output = Command::new(BIN)
            .args(tables)
            .args(args)
            .env("NORTHWIND_DATA_DIR", dir.path())
            .env("NORTHWIND_LOG", "error")
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (output.status.code(), text(&output.stdout), text(&output.stderr))
    };
    assert_eq!(run(&["provision"]).0, Some(0));
    let (code, stdout, stderr) = run(&["reconcile", "--grace-ms", "100"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("PENDING counter 0, should be 0") && stdout.contains("drift +0"), "{stdout}");
    let (code, _, stderr) = run(&["reconcile", "--full", "--dry-run"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("on-demand") && stderr.contains("--max-rcu-per-second"), "{stderr}");
    let (code, stdout, stderr) = run(&["reconcile", "--full", "--max-rcu-per-second", "50", "--grace-ms", "100"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("created 0, should be 0") && stdout.contains("scanned 0 items"), "{stdout}");
    let (code, _, stderr) = run(&["reconcile", "--full", "--read-share", "2"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--read-share"), "{stderr}");
    // A Lambda function that applied records with markers: refused, and why,
    // a dry run too.
    let tables = ["--orders-table", orders.as_str(), "--metrics-table", metrics.as_str()];
    let config = common::store_config(&common::Engine::DynamoDbLocal(local.clone()), dir.path(), &tables);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (store, _) = northwind_ops::server::store::connect(&config).await.unwrap();
        store.record_consumer_with_markers("lambda", "orders-consumer", chrono::Utc::now()).await.unwrap();
    });
    for dry in [&["--dry-run"][..], &[]] {
        let (code, stdout, stderr) = run(&[&["reconcile", "--grace-ms", "100"][..], dry].concat());
        assert_eq!(code, Some(1), "{stdout}{stderr}");
        assert!(
            stderr.contains("reconciliation refused: marker mode: the Lambda function orders-consumer"),
            "{stderr}"
        );
    }
}

#[test]
fn bad_settings_are_refused_with_a_message_that_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut command = Command::new(BIN);
        command.args(args).env("NORTHWIND_DATA_DIR", dir.path()).env("NORTHWIND_LOG", "error");
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).to_string())
    };
    let (code, stderr) = run(&[("NORTHWIND_CURSOR_SECRET", "short")], &["provision"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cursor secret must be at least 32 characters"), "{stderr}");

    let (code, stderr) = run(&[], &["--cursor-secret-file", "/nonexistent/secret", "provision"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--cursor-secret-file /nonexistent/secret"), "{stderr}");

    let (code, stderr) = run(&[], &["serve", "--max-body-bytes", "10"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--max-body-bytes"), "{stderr}");

    let (code, stderr) = run(&[], &["--orders-table", "a b", "provision"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--orders-table"), "{stderr}");
}

/// Sets `units` write units, as the stream consumer writes them, on the orders
/// table in each of `minutes` (of the day) of `day`: one update per hour item.
async fn set_stream_units(
    store: &northwind_ops::server::store::Store,
    config: &northwind_ops::server::cli::config::StoreConfig,
    day: chrono::NaiveDate,
    minutes: &[u32],
    units: f64,
) {
    use aws_sdk_dynamodb::types::AttributeValue;
    use northwind_ops::server::store::keys;
    for hour in 0..24u32 {
        let chunk: Vec<u32> = minutes.iter().copied().filter(|m| m / 60 == hour).collect();
        if chunk.is_empty() {
            continue;
        }
        let mut update = store
            .client()
            .update_item()
            .table_name(&config.metrics_table)
            .key(keys::PK, AttributeValue::S(keys::capacity_pk(day)))
            .key(keys::SK, AttributeValue::S(keys::capacity_stream_sk(&config.orders_table, hour)))
            .expression_attribute_values(":u", AttributeValue::N(units.to_string()));
        let mut sets = Vec::new();
        for (i, minute) in chunk.iter().enumerate() {
            sets.push(format!("#w{i} = :u"));
            update = update.expression_attribute_names(format!("#w{i}"), keys::capacity_minute_attribute('w', *minute));
        }
        update.update_expression(format!("SET {}", sets.join(", "))).send().await.unwrap();
    }
}

/// A known trace, written as the stream consumer writes it: `units` write
/// units a minute on the orders table over each of `days`, every minute of
/// them observed; and today's last `minutes` finished minutes observed (the
/// window ends at the current minute, unfinished), with one
/// write unit each (a console just started has written something).
async fn write_trace(config: &northwind_ops::server::cli::config::StoreConfig, days: u32, units: f64, minutes: i64) {
    use chrono::Timelike;
    use northwind_ops::server::store::usage::{epoch_minute, minute_start};
    let (store, embedded) = northwind_ops::server::store::connect(config).await.unwrap();
    store.provision(Some(northwind_ops::server::store::TableCapacity::OnDemand)).await.unwrap();
    let today = chrono::Utc::now().date_naive();
    for back in 1..=days {
        let day = today - chrono::Days::new(u64::from(back));
        set_stream_units(&store, config, day, &(0..1440).collect::<Vec<u32>>(), units).await;
        let start = epoch_minute(day.and_hms_opt(0, 0, 0).unwrap().and_utc());
        store.mark_observed(start, start + 1439).await.unwrap();
    }
    if minutes > 0 {
        let now = epoch_minute(chrono::Utc::now());
        for minute in now - minutes..now {
            let at = minute_start(minute);
            set_stream_units(&store, config, at.date_naive(), &[at.hour() * 60 + at.minute()], 1.0).await;
        }
        store.mark_observed(now - minutes, now - 1).await.unwrap();
    }
    drop(store);
    if let Some(embedded) = embedded {
        embedded.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advise_prices_a_known_trace_as_worked_by_hand() {
    for engine in common::engines() {
        let dir = tempfile::tempdir().unwrap();
        let config = common::store_config(&engine, dir.path(), &[]);
        let mut store_args: Vec<String> = vec![
            "--data-dir".into(),
            dir.path().display().to_string(),
            "--orders-table".into(),
            config.orders_table.clone(),
            "--metrics-table".into(),
            config.metrics_table.clone(),
        ];
        match &engine {
            common::Engine::Dynoxide => store_args.extend(["--store".into(), "embedded".into()]),
            common::Engine::DynamoDbLocal(url) => store_args.extend(["--endpoint-url".into(), url.clone()]),
        }
        let advise = |extra: &[&str]| {
            let output = Command::new(BIN)
                .args(&store_args)
                .arg("advise")
                .args(extra)
                .env("NORTHWIND_LOG", "error")
                .env("NORTHWIND_CURSOR_SECRET", common::CURSOR_SECRET)
                .output()
                .unwrap();
            let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
            (output.status.code(), text(&output.stdout), text(&output.stderr))
        };
        // Nothing recorded yet: an error that names the table and the days.
        let (store, embedded) = northwind_ops::server::store::connect(&config).await.unwrap();
        store.provision(Some(northwind_ops::server::store::TableCapacity::OnDemand)).await.unwrap();
        drop(store);
        if let Some(embedded) = embedded {
            embedded.shutdown().await;
        }
        let (code, _, stderr) = advise(&["--days", "3"]);
        assert_eq!(code, Some(1), "{engine:?}: {stderr}");
        assert!(stderr.contains("no capacity figures") && stderr.contains(&config.metrics_table), "{stderr}");

        // Two minutes observed today: no mode, and why.
        write_trace(&config, 0, 0.0, 2).await;
        let (code, stdout, stderr) = advise(&["--days", "1"]);
        assert_eq!(code, Some(0), "{engine:?}: {stderr}");
        println!("{engine:?}:\n{stdout}");
        assert!(stdout.contains("source: stream"), "{stdout}");
        let orders = section(&stdout, &config.orders_table);
        assert!(orders.contains(": no recommendation\n"), "{orders}");
        assert!(
            orders.contains(
                "not enough history: 2 minutes observed; choose after at least a day, better two to four weeks"
            ),
            "{orders}"
        );

        // Fourteen whole days of 600 write units a minute (10/s), observed,
        // and today's two minutes of one unit each: 15 WCU in every one of
        // the 20,162 minutes, $7.02 a month, + the 1 RCU reads keep, $0.0936:
        // $7.1136; on demand (600 × 20,160 + 2) units over 20,162 minutes
        // scaled to 43,200, × $0.625/M = $16.1984. Today's other minutes are unobserved: left out.
        write_trace(&config, 14, 600.0, 0).await;
        let (code, stdout, stderr) = advise(&["--days", "15"]);
        assert_eq!(code, Some(0), "{engine:?}: {stderr}");
        println!("{engine:?}:\n{stdout}");
        assert!(stdout.contains(&format!("{} of ", 14 * 1440 + 2)), "{stdout}");
        let orders = section(&stdout, &config.orders_table);
        assert!(orders.contains(": provisioned\n"), "{orders}");
        assert!(orders.contains("on-demand $16.1984; provisioned with auto scaling $7.1136"), "{orders}");
        assert!(orders.contains("Auto scaling alone follows every ramp"), "{orders}");
        // The template's parameters: none for a table whose indexes have no advice yet.
        let nothing_yet = format!("  Orders: nothing yet, {}/GSI1 has no recommendation", config.orders_table);
        assert!(stdout.contains("\nTemplate parameters (") && stdout.contains(&nothing_yet), "{stdout}");

        // A prices file overrides what it names: on-demand writes at twice the price.
        let prices = dir.path().join("prices.json");
        std::fs::write(&prices, r#"{"onDemandWritePerMillion": 1.25}"#).unwrap();
        let (code, stdout, stderr) = advise(&["--days", "15", "--prices", &prices.display().to_string()]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(section(&stdout, &config.orders_table).contains("on-demand $32.3968;"), "{stdout}");
        std::fs::write(&prices, r#"{"provisionedWcuHour": -1}"#).unwrap();
        let (code, _, stderr) = advise(&["--prices", &prices.display().to_string()]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("provisionedWcuHour") && stderr.contains("positive"), "{stderr}");
    }
}

/// The lines `advise` prints for one resource: its heading to the blank line.
fn section(stdout: &str, resource: &str) -> String {
    let start = stdout.find(&format!("\n{resource}: ")).unwrap_or_else(|| panic!("no {resource} in\n{stdout}"));
    let rest = &stdout[start + 1..];
    rest[..rest.find("\n\n").unwrap_or(rest.len())].to_string() + "\n"
}

/// Runs `northwind-ops` with `args` on the tables of `tables` in DynamoDB
/// Local, `stdin` piped in; its exit code and standard error.
fn run_with_stdin(local: &str, tables: &(String, String), args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(["--endpoint-url", local, "--orders-table", &tables.0, "--metrics-table", &tables.1])
        .args(args)
        .env("NORTHWIND_LOG", "error")
        .env("NORTHWIND_CURSOR_SECRET", common::CURSOR_SECRET)
        .env("NORTHWIND_DATA_DIR", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that stops reading early closes the pipe: that is not a failure here.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_is_one_line_of_standard_input_without_control_characters() {
    use northwind_ops::server::auth::accounts::verify_password;
    let local = common::dynamodb_local();
    let dir = tempfile::tempdir().unwrap();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let tables = (format!("pw-orders-{suffix}"), format!("pw-metrics-{suffix}"));
    assert_eq!(run_with_stdin(&local, &tables, &["provision"], b"").0, Some(0));
    let config = common::store_config(
        &common::Engine::DynamoDbLocal(local.clone()),
        dir.path(),
        &["--orders-table", &tables.0, "--metrics-table", &tables.1],
    );
    let (store, _) = northwind_ops::server::store::connect(&config).await.unwrap();
    let stored = |name: &'static str| {
        let store = &store;
        // As the table has it now: the commands run in processes of their own.
        async move { store.read_account(name).await.unwrap().and_then(|a| a.password_hash) }
    };

    // Asked twice, as tools do: the first line is the password.
    let (code, stderr) = run_with_stdin(
        &local,
        &tables,
        &["user", "add", "twice", "--role", "ops"],
        b"first long password\nfirst long password\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(verify_password("first long password".into(), stored("twice").await).await);
    // A Windows line end, and none at all.
    let (code, stderr) =
        run_with_stdin(&local, &tables, &["user", "add", "crlf", "--role", "viewer"], b"a long password\r\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(verify_password("a long password".into(), stored("crlf").await).await);
    let (code, stderr) =
        run_with_stdin(&local, &tables, &["user", "add", "bare", "--role", "viewer"], b"no line end at all");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(verify_password("no line end at all".into(), stored("bare").await).await);

    // Control characters are refused, named, and nothing is stored.
    for (input, named) in [
        (&b"a long\tpassword\n"[..], "a tab"),
        (b"a long password\r\rx\n", "a carriage return"),
        (b"a long \x1b[31mpassword\n", "U+001B"),
    ] {
        let (code, stderr) = run_with_stdin(&local, &tables, &["user", "add", "ctrl", "--role", "ops"], input);
        assert_eq!(code, Some(1), "{input:?}: {stderr}");
        assert!(stderr.contains("control characters") && stderr.contains(named), "{input:?}: {stderr}");
        assert!(store.read_account("ctrl").await.unwrap().is_none(), "{input:?}: nothing stored");
    }
    let (code, stderr) = run_with_stdin(&local, &tables, &["user", "add", "empty", "--role", "ops"], b"");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("at least 12 characters"), "{stderr}");

    // set-password reads the same way.
    let (code, stderr) = run_with_stdin(
        &local,
        &tables,
        &["user", "set-password", "twice"],
        b"second long password\nsecond long password\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(verify_password("second long password".into(), stored("twice").await).await);
    let (code, stderr) = run_with_stdin(&local, &tables, &["user", "set-password", "twice"], b"with a\ttab inside\n");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("control characters"), "{stderr}");
    assert!(verify_password("second long password".into(), stored("twice").await).await, "unchanged");
}

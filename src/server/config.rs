//! All settings, from flags with environment-variable twins. The defaults
//! run the app on the embedded store with nothing else installed.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "northwind-ops",
    version,
    about = "Operations console for Northwind Outfitters' orders on DynamoDB",
    long_about = "Operations console for Northwind Outfitters' orders on DynamoDB.\n\n\
        With no subcommand it serves the web app. The store is, by default, an embedded \
        DynamoDB-compatible engine (Dynoxide) with its file under --data-dir; set \
        --endpoint-url (or AWS_ENDPOINT_URL_DYNAMODB) for DynamoDB Local or another endpoint, \
        or --store aws for AWS DynamoDB through the standard AWS configuration."
)]
pub struct Cli {
    #[command(flatten)]
    pub store: StoreConfig,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the web app and JSON API (the default).
    Serve(ServeArgs),
    /// Create the tables, or check that existing ones match the key design.
    Provision(ProvisionArgs),
    /// Write demo orders: deterministic for a given --seed and --now.
    Seed(SeedArgs),
    /// Run the stream consumer alone (serve runs one too), until Ctrl-C.
    Consume,
    /// Recount a day's PENDING orders from the index and repair the counter.
    Reconcile(ReconcileArgs),
    /// Simulate traffic: a steady rate, a flash sale or a month-end batch.
    Loadgen(super::loadgen::LoadgenArgs),
    /// Rehearse hot partitions: a proxy in front of any DynamoDB endpoint
    /// that throttles each partition key value at DynamoDB's per-partition
    /// limits (times --scale), answering as DynamoDB does.
    ThrottleProxy(ThrottleProxyArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ThrottleProxyArgs {
    /// The DynamoDB endpoint to stand in front of, e.g. http://127.0.0.1:8000
    #[arg(long, env = "NORTHWIND_THROTTLE_UPSTREAM")]
    pub upstream: String,

    /// Address the proxy listens on; point the app's --endpoint-url at it
    #[arg(long, env = "NORTHWIND_THROTTLE_LISTEN", default_value = "127.0.0.1:8010")]
    pub listen: SocketAddr,

    /// Multiplies the partition limits (3,000 read and 1,000 write units a
    /// second): 0.05 reaches them at 50 writes a second
    #[arg(long, env = "NORTHWIND_THROTTLE_SCALE", default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,
}

fn parse_scale(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(scale) if scale.is_finite() && scale > 0.0 => Ok(scale),
        _ => Err(format!("{text:?} is not a number above 0")),
    }
}

#[derive(Args, Debug, Clone)]
pub struct ReconcileArgs {
    /// Day to recount (YYYY-MM-DD, UTC) [default: today]
    #[arg(long)]
    pub date: Option<String>,
    /// Only report the drift; change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// Dynoxide, in this process, on a SQLite file under --data-dir.
    Embedded,
    /// Any DynamoDB-compatible endpoint, e.g. DynamoDB Local.
    Endpoint,
    /// AWS DynamoDB, through the standard AWS configuration chain.
    Aws,
}

#[derive(Args, Debug, Clone)]
pub struct StoreConfig {
    /// Where the data lives [default: endpoint when an endpoint URL is set, else embedded]
    #[arg(long, env = "NORTHWIND_STORE", value_enum, global = true)]
    pub store: Option<StoreKind>,

    /// DynamoDB endpoint, e.g. http://127.0.0.1:8000 for DynamoDB Local
    /// [also read from AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL]
    #[arg(long, env = "NORTHWIND_ENDPOINT_URL", global = true)]
    pub endpoint_url: Option<String>,

    /// Directory for the embedded store's file and the cursor key
    #[arg(long, env = "NORTHWIND_DATA_DIR", default_value = "data", global = true)]
    pub data_dir: PathBuf,

    /// Address the embedded store listens on; pin it to inspect the data with
    /// other DynamoDB clients while the app runs (port 0: any free port)
    #[arg(long, env = "NORTHWIND_EMBEDDED_ADDR", default_value = "127.0.0.1:0", global = true)]
    pub embedded_addr: SocketAddr,

    /// Name of the orders table
    #[arg(long, env = "NORTHWIND_ORDERS_TABLE", default_value = "northwind-orders", global = true)]
    pub orders_table: String,

    /// Name of the metrics table (counters, shard counts, consumer checkpoints)
    #[arg(long, env = "NORTHWIND_METRICS_TABLE", default_value = "northwind-metrics", global = true)]
    pub metrics_table: String,

    /// Write shards of the PENDING index for days not yet written to
    #[arg(long, env = "NORTHWIND_SHARDS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=100), global = true)]
    pub shards: u32,

    /// File holding the secret that signs page cursors (at least 32
    /// characters; give every instance behind one load balancer the same).
    /// The secret may instead come from NORTHWIND_CURSOR_SECRET; never from
    /// the command line, where other users can read it
    /// [default: a random key kept in <data-dir>/cursor.key]
    #[arg(long, env = "NORTHWIND_CURSOR_SECRET_FILE", global = true)]
    pub cursor_secret_file: Option<PathBuf>,

    /// The cursor secret itself, read from NORTHWIND_CURSOR_SECRET (see
    /// `resolve_secrets`).
    #[arg(skip)]
    pub cursor_secret: Option<String>,

    /// Longest a store call may take, retries included, before the request
    /// is answered 503 (milliseconds)
    #[arg(long, env = "NORTHWIND_STORE_TIMEOUT_MS", default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(100..=120_000), global = true)]
    pub store_timeout_ms: u64,

    /// DynamoDB Streams endpoint, when it differs from --endpoint-url
    #[arg(long, env = "NORTHWIND_STREAMS_ENDPOINT_URL", global = true)]
    pub streams_endpoint_url: Option<String>,
}

/// The shortest cursor secret accepted: 32 characters, as the key files are
/// (256 bits of hex would be 64; 32 printable characters is the floor).
pub const MIN_SECRET_LEN: usize = 32;

impl StoreConfig {
    /// The endpoint to use, from the flag or the SDK's own variables.
    pub fn endpoint(&self) -> Option<String> {
        self.endpoint_url
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_DYNAMODB").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .filter(|url| !url.is_empty())
    }

    /// Fills `cursor_secret` from the environment or `--cursor-secret-file`;
    /// a secret shorter than `MIN_SECRET_LEN` is refused.
    pub fn resolve_secrets(&mut self) -> Result<(), String> {
        let from_env = std::env::var("NORTHWIND_CURSOR_SECRET").ok().filter(|s| !s.is_empty());
        let secret = match (&self.cursor_secret_file, from_env) {
            (Some(_), Some(_)) => {
                return Err(
                    "set the cursor secret once: NORTHWIND_CURSOR_SECRET or --cursor-secret-file, not both".into()
                );
            }
            (Some(path), None) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("--cursor-secret-file {}: {e}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            (None, env) => env,
        };
        if let Some(secret) = &secret
            && secret.chars().count() < MIN_SECRET_LEN
        {
            return Err(format!("the cursor secret must be at least {MIN_SECRET_LEN} characters long"));
        }
        self.cursor_secret = secret;
        Ok(())
    }

    pub fn kind(&self) -> StoreKind {
        match self.store {
            Some(kind) => kind,
            None if self.endpoint().is_some() => StoreKind::Endpoint,
            None => StoreKind::Embedded,
        }
    }

    /// Checks what clap cannot: table names as DynamoDB accepts them, and
    /// that the endpoint store has an endpoint.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, name) in [("--orders-table", &self.orders_table), ("--metrics-table", &self.metrics_table)] {
            validate_table_name(name).map_err(|e| format!("{flag}: {e}"))?;
        }
        if self.orders_table == self.metrics_table {
            return Err("--orders-table and --metrics-table must differ".into());
        }
        if self.kind() == StoreKind::Endpoint && self.endpoint().is_none() {
            return Err("--store endpoint needs --endpoint-url (or AWS_ENDPOINT_URL_DYNAMODB)".into());
        }
        Ok(())
    }
}

fn validate_table_name(name: &str) -> Result<(), String> {
    if !(3..=255).contains(&name.len()) {
        return Err(format!("table name {name:?} must be 3 to 255 characters long"));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c))) {
        return Err(format!("table name {name:?} has {bad:?}: only letters, digits, '_', '.' and '-'"));
    }
    Ok(())
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address the web app listens on [default: LEPTOS_SITE_ADDR as
    /// cargo-leptos sets it, else 127.0.0.1:3000]. The built site (wasm, JS,
    /// CSS) is read from LEPTOS_SITE_ROOT [default: target/site].
    #[arg(long, env = "NORTHWIND_ADDR")]
    pub addr: Option<SocketAddr>,

    /// PENDING orders older than this many minutes are flagged as stuck
    #[arg(long, env = "NORTHWIND_STUCK_AFTER_MINUTES", default_value_t = 30)]
    pub stuck_after_minutes: u32,

    /// Minutes between reconciliations of today's PENDING counter (0: never)
    #[arg(long, env = "NORTHWIND_RECONCILE_MINUTES", default_value_t = 10)]
    pub reconcile_minutes: u32,

    /// Do not run the stream consumer in this process (run `consume` elsewhere)
    #[arg(long, env = "NORTHWIND_NO_CONSUMER")]
    pub no_consumer: bool,

    /// Create the tables when they are missing (needs dynamodb:CreateTable);
    /// without it, serve only checks them
    #[arg(long, env = "NORTHWIND_PROVISION")]
    pub provision: bool,

    #[command(flatten)]
    pub billing: ProvisionArgs,

    #[command(flatten)]
    pub limits: Limits,
}

impl Default for ServeArgs {
    /// The defaults as clap states them (the environment's twins included).
    fn default() -> Self {
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            args: ServeArgs,
        }
        Defaults::parse_from(["serve"]).args
    }
}

/// What one client, and all of them, may take of a server.
#[derive(Args, Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Longest a request may take before it is answered 503 (the live
    /// stream excepted), in seconds
    #[arg(long, env = "NORTHWIND_REQUEST_TIMEOUT_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub request_timeout_secs: u64,

    /// Longest a client may take to send a request's headers, in seconds
    #[arg(long, env = "NORTHWIND_HEADER_TIMEOUT_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub header_timeout_secs: u64,

    /// Largest request body accepted, in bytes
    #[arg(long, env = "NORTHWIND_MAX_BODY_BYTES", default_value_t = 65_536,
          value_parser = clap::value_parser!(u64).range(1024..=16_777_216))]
    pub max_body_bytes: u64,

    /// Connections open at once; more are closed as they arrive
    #[arg(long, env = "NORTHWIND_MAX_CONNECTIONS", default_value_t = 8_192,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,

    /// Live streams open at once, in total
    #[arg(long, env = "NORTHWIND_MAX_LIVE", default_value_t = 4_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_live: u64,

    /// Live streams open at once from one client address
    #[arg(long, env = "NORTHWIND_MAX_LIVE_PER_CLIENT", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_live_per_client: u64,

    /// Minutes a live stream lasts before the browser is asked to reconnect
    #[arg(long, env = "NORTHWIND_LIVE_MAX_MINUTES", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub live_max_minutes: u64,

    /// API requests per second one client address may make, on average
    /// (0: no limit)
    #[arg(long, env = "NORTHWIND_API_RATE", default_value_t = 50)]
    pub api_rate: u32,

    /// API requests one client address may make in a burst
    #[arg(long, env = "NORTHWIND_API_BURST", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub api_burst: u32,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BillingMode {
    /// Pay per request: no capacity to plan (the default).
    #[default]
    OnDemand,
    /// Fixed read and write capacity units for each table and index.
    Provisioned,
}

#[derive(Args, Debug, Clone, Default)]
pub struct ProvisionArgs {
    /// Billing mode of the tables this run creates
    #[arg(long, env = "NORTHWIND_BILLING", value_enum, default_value_t)]
    pub billing: BillingMode,

    /// Read capacity units for each table and index (with --billing provisioned)
    #[arg(long, env = "NORTHWIND_READ_CAPACITY", default_value_t = 5,
          value_parser = clap::value_parser!(i64).range(1..))]
    pub read_capacity: i64,

    /// Write capacity units for each table and index (with --billing provisioned)
    #[arg(long, env = "NORTHWIND_WRITE_CAPACITY", default_value_t = 5,
          value_parser = clap::value_parser!(i64).range(1..))]
    pub write_capacity: i64,
}

impl ProvisionArgs {
    /// What the store is asked to create.
    pub fn capacity(&self) -> super::store::TableCapacity {
        match self.billing {
            BillingMode::OnDemand => super::store::TableCapacity::OnDemand,
            BillingMode::Provisioned => {
                super::store::TableCapacity::Provisioned { read: self.read_capacity, write: self.write_capacity }
            }
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct SeedArgs {
    /// Orders to write, spread over the last --days days
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub orders: u32,

    /// Customers the orders belong to
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub customers: u32,

    /// Days of history, today included
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=365))]
    pub days: u32,

    /// Random seed: the same seed and --now write the same orders
    #[arg(long, env = "NORTHWIND_SEED", default_value_t = 42)]
    pub seed: u64,

    /// The moment the demo data ends at (ISO-8601) [default: now]
    #[arg(long, env = "NORTHWIND_SEED_NOW")]
    pub now: Option<String>,

    #[command(flatten)]
    pub provision: ProvisionArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("northwind-ops").chain(args.iter().copied()))
    }

    #[test]
    fn the_throttle_proxy_needs_an_upstream_and_a_scale_above_zero() {
        let cli = parse(&["throttle-proxy", "--upstream", "http://127.0.0.1:8000", "--scale", "0.05"]).unwrap();
        let Some(Command::ThrottleProxy(args)) = cli.command else { panic!("not the proxy: {:?}", cli.command) };
        assert_eq!(args.upstream, "http://127.0.0.1:8000");
        assert_eq!(args.listen, "127.0.0.1:8010".parse().unwrap());
        assert_eq!(args.scale, 0.05);
        assert!(parse(&["throttle-proxy"]).is_err());
        for bad in ["0", "-1", "NaN", "inf", "x"] {
            assert!(parse(&["throttle-proxy", "--upstream", "http://h", "--scale", bad]).is_err(), "{bad}");
        }
    }
}

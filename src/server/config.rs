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

    /// Secret that signs page cursors [default: a random key kept in <data-dir>/cursor.key]
    #[arg(long, env = "NORTHWIND_CURSOR_SECRET", hide_env_values = true, global = true)]
    pub cursor_secret: Option<String>,
}

impl StoreConfig {
    /// The endpoint to use, from the flag or the SDK's own variables.
    pub fn endpoint(&self) -> Option<String> {
        self.endpoint_url
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL_DYNAMODB").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .filter(|url| !url.is_empty())
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
    /// Address the web app listens on
    #[arg(long, env = "NORTHWIND_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// Directory with the built site (wasm, JS, CSS), as cargo-leptos writes it
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: String,

    /// PENDING orders older than this many minutes are flagged as stuck
    #[arg(long, env = "NORTHWIND_STUCK_AFTER_MINUTES", default_value_t = 30)]
    pub stuck_after_minutes: u32,

    /// Minutes between reconciliations of today's PENDING counter (0: never)
    #[arg(long, env = "NORTHWIND_RECONCILE_MINUTES", default_value_t = 10)]
    pub reconcile_minutes: u32,

    /// Do not run the stream consumer in this process (run `consume` elsewhere)
    #[arg(long, env = "NORTHWIND_NO_CONSUMER")]
    pub no_consumer: bool,

    #[command(flatten)]
    pub provision: ProvisionArgs,
}

impl Default for ServeArgs {
    fn default() -> Self {
        Self {
            addr: ([127, 0, 0, 1], 3000).into(),
            site_root: "target/site".into(),
            stuck_after_minutes: 30,
            reconcile_minutes: 10,
            no_consumer: false,
            provision: ProvisionArgs::default(),
        }
    }
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
    /// Billing mode for tables this run creates
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

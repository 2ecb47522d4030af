//! Where the data lives and how to reach it: the store's settings, from
//! flags with environment-variable twins (flattened into the command line
//! by `cli::config`).

use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// Dynoxide, in this process, on a SQLite file under --data-dir.
    Embedded,
    /// Any DynamoDB-compatible endpoint, e.g. DynamoDB Local.
    Endpoint,
    /// AWS DynamoDB, through the standard AWS configuration chain.
    Aws,
}

/// Where capacity figures come from.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CapacitySourceArg {
    /// CloudWatch on AWS (`--store aws`), the stream elsewhere.
    #[default]
    Auto,
    /// Write units priced from the orders table's stream (every writer), reads
    /// from this app's calls.
    Stream,
    /// DynamoDB's own figures: the AWS/DynamoDB metrics in CloudWatch.
    Cloudwatch,
}

#[derive(Args, Debug, Clone)]
pub struct StoreConfig {
    /// Where capacity figures come from: the orders table's stream (every
    /// engine), CloudWatch (AWS), or auto: CloudWatch on AWS, else the stream
    #[arg(long, env = "NORTHWIND_CAPACITY_SOURCE", value_enum, default_value_t, global = true)]
    pub capacity_source: CapacitySourceArg,

    /// CloudWatch endpoint, for an emulator [also read from
    /// AWS_ENDPOINT_URL_CLOUDWATCH]; a loopback one needs no AWS credentials
    #[arg(long, env = "NORTHWIND_CLOUDWATCH_ENDPOINT_URL", global = true)]
    pub cloudwatch_endpoint_url: Option<String>,

    /// Application Auto Scaling endpoint, for an emulator: the readiness
    /// check's auto scaling maximum and scheduled floor raises. Read on
    /// `--store aws` or with this flag; on a local engine without it they
    /// are unknown
    #[arg(long, env = "NORTHWIND_AUTOSCALING_ENDPOINT_URL", global = true)]
    pub autoscaling_endpoint_url: Option<String>,

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

    /// The embedded store keeps its data in memory, not in `data_dir`: a
    /// scratch store (a rehearsal's), with nothing to keep and no disk in
    /// what it measures. Not a flag: only the simulation sets it.
    #[arg(skip)]
    pub embedded_in_memory: bool,

    /// Longest a store call may take, retries included, before the request
    /// is answered 503 (milliseconds)
    #[arg(long, env = "NORTHWIND_STORE_TIMEOUT_MS", default_value_t = 4000,
          value_parser = clap::value_parser!(u64).range(100..=120_000), global = true)]
    pub store_timeout_ms: u64,

    /// How long the audit trail keeps a record, in days: each record is
    /// written with the metrics table's TTL attribute (`expiresAt`) that far
    /// ahead, and DynamoDB deletes it some time after. 0 (the default):
    /// records are kept for ever. Applies to records written from then on
    #[arg(long, env = "NORTHWIND_AUDIT_RETENTION_DAYS", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=36_500), global = true)]
    pub audit_retention_days: u32,

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

    /// The capacity source `--capacity-source` names, `auto` resolved.
    pub fn capacity_source(&self) -> crate::server::store::config::CapacitySource {
        use crate::server::store::config::CapacitySource;
        match (self.capacity_source, self.kind()) {
            (CapacitySourceArg::Cloudwatch, _) | (CapacitySourceArg::Auto, StoreKind::Aws) => {
                CapacitySource::CloudWatch
            }
            _ => CapacitySource::Stream,
        }
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
    pub fn capacity(&self) -> super::TableCapacity {
        match self.billing {
            BillingMode::OnDemand => super::TableCapacity::OnDemand,
            BillingMode::Provisioned => {
                super::TableCapacity::Provisioned { read: self.read_capacity, write: self.write_capacity }
            }
        }
    }
}

/// The capacity source a deployment uses (`--capacity-source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CapacitySource {
    Stream,
    CloudWatch,
}

impl std::fmt::Display for CapacitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CapacitySource::Stream => "stream",
            CapacitySource::CloudWatch => "cloudwatch",
        })
    }
}

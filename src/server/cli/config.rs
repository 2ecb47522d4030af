//! All settings, from flags with environment-variable twins. The defaults
//! run the app on the embedded store with nothing else installed.

use crate::model::Role;
use crate::server::auth::oidc::{
    CALLBACK_PATH, DEFAULT_ROLE_MAP, DEFAULT_ROLES_CLAIM, DEFAULT_SCOPES, OidcSettings, RoleMap, parse_scopes,
};
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
    Serve(Box<ServeArgs>),
    /// Create the tables, or check that existing ones match the key design.
    Provision(ProvisionArgs),
    /// Write demo orders: deterministic for a given --seed and --now.
    Seed(SeedArgs),
    /// Run the stream consumer alone (serve runs one too), until Ctrl-C.
    Consume,
    /// Run the stream consumer as an AWS Lambda function: apply the DynamoDB
    /// stream events the Lambda Runtime API hands over (AWS_LAMBDA_RUNTIME_API),
    /// reporting a record that cannot be applied as a batch item failure.
    Lambda,
    /// Check the counters against the tables and repair any drift with a delta.
    Reconcile(ReconcileArgs),
    /// Simulate traffic: a steady rate, a flash sale or a month-end batch.
    Loadgen(crate::server::sim::loadgen::LoadgenArgs),
    /// Local accounts (passwords are read from standard input).
    #[command(subcommand)]
    User(UserCommand),
    /// API tokens for scripts and load generators.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Advise a capacity mode per table and index from the consumed capacity
    /// recorded in the metrics table: on-demand or provisioned, at what cost.
    Advise(AdviseArgs),
    /// Rehearse hot partitions: a proxy in front of any DynamoDB endpoint
    /// that throttles each partition key value at DynamoDB's per-partition
    /// limits (times --scale), answering as DynamoDB does.
    ThrottleProxy(ThrottleProxyArgs),
    /// Replay a flash sale through the throttle proxy against the old
    /// single-partition design and the sharded one, side by side.
    Rehearse(RehearseArgs),
    /// How many GSI2 write shards a peak needs, the arithmetic shown, and
    /// what to pre-warm before the sale.
    Plan(PlanArgs),
    /// Print the CloudFormation template of a deployment on AWS: both
    /// tables as `provision` creates them (the same definitions), the
    /// stream consumer as a Lambda function, and alarms per table and GSI.
    Template(ProvisionArgs),
}

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// The sale's peak, in new orders a second
    #[arg(long)]
    pub peak_orders_per_second: f64,
    /// Bytes of one GSI2 entry [default: a typical order's, as the app writes it]
    #[arg(long)]
    pub item_bytes: Option<u32>,
    /// Spare capacity kept on each partition at peak, as a fraction of the load
    #[arg(long, default_value_t = 0.5)]
    pub headroom: f64,
}

#[derive(Args, Debug, Clone)]
pub struct RehearseArgs {
    /// The GSI2 write shard counts to compare (1 is the old design)
    #[arg(long, value_delimiter = ',', default_value = "1,10")]
    pub designs: Vec<u32>,
    /// Multiplies the partition limits, so a laptop reaches them
    #[arg(long, default_value_t = 0.05, value_parser = parse_scale)]
    pub scale: f64,
    /// Orders per second before and after the sale
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Orders per second at the sale's peak
    #[arg(long, default_value_t = 100.0)]
    pub peak: f64,
    /// Seconds from the base rate to the peak, at the peak, and back
    #[arg(long, default_value_t = 5)]
    pub ramp: u64,
    #[arg(long, default_value_t = 20)]
    pub hold: u64,
    #[arg(long, default_value_t = 5)]
    pub decay: u64,
    /// Concurrent writers
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub writers: u32,
    /// Milliseconds between two reads of the dashboard's first page
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..))]
    pub read_every_ms: u64,
    /// Also put the table in this markdown file (e.g. BENCHMARKS.md)
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// No progress bars
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum UserCommand {
    /// Add a local account; its password is read from standard input.
    Add {
        name: String,
        #[arg(long)]
        role: Role,
    },
    /// Every account: name, role, where it signs in, whether disabled.
    List,
    /// Stop an account signing in; its sessions end at their next request.
    Disable {
        name: String,
    },
    Enable {
        name: String,
    },
    SetRole {
        name: String,
        role: Role,
    },
    /// A new password, read from standard input; sessions signed in with
    /// the old one end.
    SetPassword {
        name: String,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum TokenCommand {
    /// Create a token and print it (only it, on one line): it is not shown again.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: Role,
    },
    List,
    /// Revoke a token: it is refused from the next request on.
    Revoke {
        name: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct AdviseArgs {
    /// The window to advise on, in days, today included: coverage is the
    /// minutes the capacity source observed over it, and below a day of them
    /// no mode is recommended
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(1..=366))]
    pub days: u32,
    /// A JSON file of prices overriding the us-east-1 defaults, e.g.
    /// {"provisionedWcuHour": 0.00074}
    #[arg(long, env = "NORTHWIND_PRICES_FILE")]
    pub prices: Option<PathBuf>,
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
    /// Day whose PENDING counters to check (YYYY-MM-DD, UTC) [default: today]
    #[arg(long)]
    pub date: Option<String>,
    /// Only report the drift; change no counter
    #[arg(long)]
    pub dry_run: bool,
    /// Also check what no index can recount (orders per day, per status and
    /// per minute created) with a paced Scan of the orders table
    #[arg(long)]
    pub full: bool,
    /// First day of a --full check [default: --date]
    #[arg(long, requires = "full")]
    pub since: Option<String>,
    /// Last day of a --full check [default: --date]
    #[arg(long, requires = "full")]
    pub until: Option<String>,
    /// Share of a provisioned table's read capacity a --full Scan may use
    #[arg(long, default_value_t = 0.25, value_parser = share)]
    pub read_share: f64,
    /// Read capacity units per second a --full Scan may use (needed for an
    /// on-demand table; caps the share of a provisioned one)
    #[arg(long, value_parser = positive)]
    pub max_rcu_per_second: Option<f64>,
    /// Parallel segments of a --full Scan
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub segments: u32,
    /// How long after a write its stream record and index entry are assumed
    /// readable (DynamoDB promises near-real-time, with no bound)
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub grace_ms: u64,
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!("{text:?} is not a share above 0 and at most 1")),
    }
}

fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f.is_finite() => Ok(f),
        _ => Err(format!("{text:?} is not a positive number")),
    }
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

    /// The capacity source `--capacity-source` names, `auto` resolved.
    pub fn capacity_source(&self) -> crate::server::capacity::sources::Source {
        use crate::server::capacity::sources::Source;
        match (self.capacity_source, self.kind()) {
            (CapacitySourceArg::Cloudwatch, _) | (CapacitySourceArg::Auto, StoreKind::Aws) => Source::CloudWatch,
            _ => Source::Stream,
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

    /// Minutes between reconciliations of today's PENDING counters (0: never)
    #[arg(long, env = "NORTHWIND_RECONCILE_MINUTES", default_value_t = 10)]
    pub reconcile_minutes: u32,

    /// Do not run the stream consumer in this process (run `consume` elsewhere)
    #[arg(long, env = "NORTHWIND_NO_CONSUMER")]
    pub no_consumer: bool,

    /// A JSON file of prices for the capacity page's advisor, overriding the
    /// us-east-1 defaults (as `advise --prices`)
    #[arg(long, env = "NORTHWIND_PRICES_FILE")]
    pub prices: Option<PathBuf>,

    /// Create the tables when they are missing (needs dynamodb:CreateTable);
    /// without it, serve only checks them
    #[arg(long, env = "NORTHWIND_PROVISION")]
    pub provision: bool,

    #[command(flatten)]
    pub billing: ProvisionArgs,

    #[command(flatten)]
    pub limits: Limits,

    #[command(flatten)]
    pub auth: AuthArgs,

    #[command(flatten)]
    pub oidc: OidcArgs,
}

/// Sign-in and what a browser may send.
#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// The address users reach the app at (behind a proxy, its https URL);
    /// the OpenID redirect and the cookies' Secure flag follow from it
    /// [default: http://<--addr>]
    #[arg(long, env = "NORTHWIND_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Host names the app answers to, comma-separated; any other `Host` is
    /// refused (DNS rebinding) [default: localhost, 127.0.0.1, ::1, the
    /// bound address and the public URL's host]
    #[arg(long, env = "NORTHWIND_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Minutes a session lasts without a request
    #[arg(long, env = "NORTHWIND_SESSION_IDLE_MINUTES", default_value_t = 480,
          value_parser = clap::value_parser!(u64).range(1..=10_080))]
    pub session_idle_minutes: u64,

    /// Hours a session lasts at most, however busy
    #[arg(long, env = "NORTHWIND_SESSION_MAX_HOURS", default_value_t = 24,
          value_parser = clap::value_parser!(u64).range(1..=720))]
    pub session_max_hours: u64,

    /// Password sign-in attempts per minute from one client address
    #[arg(long, env = "NORTHWIND_SIGN_IN_ATTEMPTS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sign_in_attempts: u32,
}

impl AuthArgs {
    /// The public URL, given or derived from the bound address.
    pub fn public_url(&self, bound: SocketAddr) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{bound}")).trim_end_matches('/').to_string()
    }

    /// Cookies go over HTTPS only, unless the app is served over plain HTTP
    /// on loopback (where a browser would not send a Secure cookie back).
    pub fn secure_cookies(&self, bound: SocketAddr) -> bool {
        let url = self.public_url(bound);
        let plain_loopback = url.starts_with("http://")
            && ["http://127.", "http://localhost", "http://[::1]"].iter().any(|p| url.starts_with(p));
        !plain_loopback
    }

    pub fn allowed_hosts(&self, bound: SocketAddr) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect();
        }
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
        if !bound.ip().is_unspecified() {
            hosts.push(bound.ip().to_string());
        }
        let public = self.public_url(bound);
        if let Some(host) = public.split_once("://").and_then(|(_, rest)| rest.split(['/', ':']).next()) {
            hosts.push(host.to_ascii_lowercase());
        }
        hosts.dedup();
        hosts
    }
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

/// Sign-in with OpenID Connect: off unless an issuer is given.
#[derive(Args, Debug, Clone)]
pub struct OidcArgs {
    /// Issuer URL of the OpenID Connect provider, exactly as its discovery
    /// document states it (https; plain http only on loopback). Without it
    /// there is no sign-in
    #[arg(long, env = "NORTHWIND_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// This app's client id at the provider
    #[arg(long, env = "NORTHWIND_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// File holding the client secret. The secret may instead come from
    /// NORTHWIND_OIDC_CLIENT_SECRET; never from the command line, where other
    /// users can read it
    #[arg(long, env = "NORTHWIND_OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// ID token claim holding the user's groups (an array of strings, or one
    /// string)
    #[arg(long, env = "NORTHWIND_OIDC_ROLES_CLAIM", default_value = DEFAULT_ROLES_CLAIM)]
    pub oidc_roles_claim: String,

    /// Which groups grant which role: comma-separated role=group pairs
    /// (roles: viewer, support, ops, admin; several groups may grant one
    /// role; a user gets the highest role of their groups)
    #[arg(long, env = "NORTHWIND_OIDC_ROLE_MAP", default_value = DEFAULT_ROLE_MAP)]
    pub oidc_role_map: RoleMap,

    /// Scopes to ask the provider for, space-separated (openid is always
    /// asked for)
    #[arg(long, env = "NORTHWIND_OIDC_SCOPES", default_value = DEFAULT_SCOPES)]
    pub oidc_scopes: String,
}

impl OidcArgs {
    /// The settings for `Oidc::discover`, or `None` when no issuer is set
    /// (no sign-in). `public_url` is where browsers reach this app; the
    /// redirect URL is `<public_url>/auth/callback`. The client secret comes
    /// from NORTHWIND_OIDC_CLIENT_SECRET or `--oidc-client-secret-file`.
    pub fn settings(&self, public_url: &str) -> Result<Option<OidcSettings>, String> {
        let secret_from_env = std::env::var("NORTHWIND_OIDC_CLIENT_SECRET").ok().filter(|s| !s.is_empty());
        self.settings_with(public_url, secret_from_env)
    }

    /// `settings`, with the environment's secret passed in (tests cannot set
    /// variables safely while other tests run).
    fn settings_with(&self, public_url: &str, secret_from_env: Option<String>) -> Result<Option<OidcSettings>, String> {
        let given = |value: &Option<String>| value.clone().filter(|v| !v.trim().is_empty());
        let Some(issuer) = given(&self.oidc_issuer) else {
            if given(&self.oidc_client_id).is_some()
                || self.oidc_client_secret_file.is_some()
                || secret_from_env.is_some()
            {
                return Err("the OpenID Connect client id and secret need --oidc-issuer".into());
            }
            return Ok(None);
        };
        let client_id = given(&self.oidc_client_id).ok_or("--oidc-issuer needs --oidc-client-id")?;
        let client_secret = match (&self.oidc_client_secret_file, secret_from_env) {
            (Some(_), Some(_)) => {
                return Err("set the OpenID Connect client secret once: NORTHWIND_OIDC_CLIENT_SECRET or \
                     --oidc-client-secret-file, not both"
                    .into());
            }
            (Some(path), None) => std::fs::read_to_string(path)
                .map_err(|e| format!("--oidc-client-secret-file {}: {e}", path.display()))?
                .trim()
                .to_string(),
            (None, Some(secret)) => secret,
            (None, None) => {
                return Err("--oidc-issuer needs the client secret: set NORTHWIND_OIDC_CLIENT_SECRET or \
                     --oidc-client-secret-file"
                    .into());
            }
        };
        if client_secret.is_empty() {
            return Err("the OpenID Connect client secret is empty".into());
        }
        if self.oidc_roles_claim.trim().is_empty() {
            return Err("--oidc-roles-claim is empty".into());
        }
        Ok(Some(OidcSettings {
            issuer,
            client_id,
            client_secret,
            redirect_url: format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/')),
            roles_claim: self.oidc_roles_claim.trim().to_string(),
            role_map: self.oidc_role_map.clone(),
            scopes: parse_scopes(&self.oidc_scopes),
        }))
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

    /// Longest a keep-alive connection may sit idle between requests, in
    /// seconds. Behind a load balancer, keep it above the balancer's own
    /// idle timeout (an ALB's is 60 s), so the balancer closes first
    #[arg(long, env = "NORTHWIND_IDLE_TIMEOUT_SECS", default_value_t = 75,
          value_parser = clap::value_parser!(u64).range(1..=4_000))]
    pub idle_timeout_secs: u64,

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

impl Limits {
    pub fn header_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.header_timeout_secs)
    }

    pub fn idle_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.idle_timeout_secs)
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
    pub fn capacity(&self) -> crate::server::store::TableCapacity {
        match self.billing {
            BillingMode::OnDemand => crate::server::store::TableCapacity::OnDemand,
            BillingMode::Provisioned => crate::server::store::TableCapacity::Provisioned {
                read: self.read_capacity,
                write: self.write_capacity,
            },
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

    /// When no account exists yet: one demo account per role, with
    /// generated passwords, printed and written to <data-dir>/demo-credentials.txt
    #[arg(long)]
    pub demo_accounts: bool,

    #[command(flatten)]
    pub provision: ProvisionArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn oidc_args(extra: &[&str]) -> OidcArgs {
        let mut argv = vec!["northwind-ops", "serve"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).expect("flags parse").command {
            Some(Command::Serve(args)) => args.oidc,
            _ => unreachable!("the serve subcommand was named"),
        }
    }

    const ISSUER: [&str; 4] = ["--oidc-issuer", "https://id.example.test", "--oidc-client-id", "northwind-ops"];

    #[test]
    fn sign_in_is_off_without_an_issuer() {
        assert!(oidc_args(&[]).settings_with("http://127.0.0.1:3000", None).unwrap().is_none());
        let err = oidc_args(&["--oidc-client-id", "x"]).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("--oidc-issuer"), "{err}");
        let err = oidc_args(&[]).settings_with("http://h", Some("secret".into())).unwrap_err();
        assert!(err.contains("--oidc-issuer"), "{err}");
    }

    #[test]
    fn oidc_settings_come_with_their_defaults() {
        let settings = oidc_args(&ISSUER).settings_with("https://ops.example.test/", Some("s3cret".into())).unwrap();
        let settings = settings.expect("sign-in is on");
        assert_eq!(settings.issuer, "https://id.example.test");
        assert_eq!(settings.client_id, "northwind-ops");
        assert_eq!(settings.client_secret, "s3cret");
        assert_eq!(settings.redirect_url, "https://ops.example.test/auth/callback");
        assert_eq!(settings.roles_claim, "groups");
        assert_eq!(settings.role_map, RoleMap::default());
        assert_eq!(settings.scopes, ["openid", "profile", "email", "groups"]);
    }

    #[test]
    fn the_oidc_client_secret_comes_from_a_file_or_the_environment_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oidc-secret");
        std::fs::write(&path, "from-file\n").unwrap();
        let mut argv = ISSUER.to_vec();
        argv.extend(["--oidc-client-secret-file", path.to_str().unwrap()]);
        let settings = oidc_args(&argv).settings_with("http://h", None).unwrap().unwrap();
        assert_eq!(settings.client_secret, "from-file");
        let err = oidc_args(&argv).settings_with("http://h", Some("env".into())).unwrap_err();
        assert!(err.contains("not both"), "{err}");
        let err = oidc_args(&ISSUER).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("NORTHWIND_OIDC_CLIENT_SECRET"), "{err}");
        let err = oidc_args(&["--oidc-issuer", "https://id.example.test"]).settings_with("http://h", None).unwrap_err();
        assert!(err.contains("--oidc-client-id"), "{err}");
    }

    #[test]
    fn the_role_map_flag_is_parsed_and_a_bad_one_named() {
        let args = oidc_args(&["--oidc-role-map", "admin=root,ops=oncall,ops=sre", "--oidc-roles-claim", "roles"]);
        assert_eq!(args.oidc_role_map.role_for(["sre"]), Some(Role::Ops));
        assert_eq!(args.oidc_roles_claim, "roles");
        let err = Cli::try_parse_from(["northwind-ops", "serve", "--oidc-role-map", "ops=a,boss=b"]).unwrap_err();
        assert!(err.to_string().contains("\"boss=b\""), "{err}");
    }

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

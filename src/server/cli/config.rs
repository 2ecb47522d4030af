//! All settings, from flags with environment-variable twins. The defaults
//! run the app on the embedded store with nothing else installed.

use crate::model::Role;
pub use crate::server::http::config::{AuthArgs, Limits, OidcArgs, ServeArgs};
pub use crate::server::sim::lambda::LambdaLocalArgs;
pub use crate::server::sim::rehearse::RehearseArgs;
pub use crate::server::sim::streams::StreamProxyArgs;
pub use crate::server::sim::throttle::ThrottleProxyArgs;
pub use crate::server::store::config::{
    BillingMode, CapacitySourceArg, MIN_SECRET_LEN, ProvisionArgs, StoreConfig, StoreKind,
};
use clap::{Args, Parser, Subcommand};
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
    /// Which form of the stream consumer counts: the mode recorded in the
    /// metrics table (serve: the in-process consumer; lambda: the Lambda
    /// function). Each form follows a switch within seconds.
    #[command(subcommand)]
    Consumer(ConsumerCommand),
    /// Run the stream consumer as an AWS Lambda function: apply the DynamoDB
    /// stream events the Lambda Runtime API hands over (AWS_LAMBDA_RUNTIME_API),
    /// reporting a record that cannot be applied as a batch item failure.
    Lambda,
    /// Run a local Lambda event source mapping on the orders table's stream:
    /// `lambda` driven as Lambda drives it (a poller per shard, batches,
    /// retries, bisection, the on-failure destination), each invocation in
    /// an execution environment of its own. Settings default to the template's.
    LambdaLocal(LambdaLocalArgs),
    /// Check the counters against the tables and repair any drift with a delta.
    Reconcile(ReconcileArgs),
    /// Deliver again the records the Lambda consumer gave up on: the ranges
    /// its on-failure destination's messages name, read from the stream
    /// while it still keeps them (24 hours), applied once each (a record in
    /// an applied range of its shard, or marked, changes nothing; in mode
    /// serve, what follows the shard's checkpoint is left to the in-process
    /// consumer).
    Replay(ReplayArgs),
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
    /// Rehearse many stream shards: serve the orders table's stream, read
    /// from a local engine (which keeps one shard), as a DynamoDB stream of
    /// --stream-shards shards that split, trim and throttle as DynamoDB Streams does.
    StreamProxy(StreamProxyArgs),
    /// Replay a flash sale through the throttle proxy against the old
    /// single-partition design and the sharded one, side by side.
    Rehearse(RehearseArgs),
    /// How many GSI2 write shards a peak needs, the arithmetic shown, and
    /// what to pre-warm before the sale.
    Plan(PlanArgs),
    /// A day's GSI2 shard count, as every writer of the orders table must
    /// use it: the recorded count (metrics item SHARDS#<day> / CONFIG), else
    /// the configured --shards. With --write-ahead, record it where none is.
    Shards(ShardsArgs),
    /// Ready for the sale? A sale plan's go/no-go (made on the Sales page or
    /// with POST /api/sales), each check with its verdict, figures and fix.
    /// Exits 0 when ready, 3 when something must be done first, 2 on a no-go.
    Ready(ReadyArgs),
    /// Print the CloudFormation template of a deployment on AWS: both
    /// tables as `provision` creates them (the same definitions), the
    /// stream consumer as a Lambda function, and alarms per table and GSI.
    Template(ProvisionArgs),
    /// Ask a serve whether it is up (its /healthz): exit 0 on a 200, else
    /// non-zero naming the problem. For container health checks: the image
    /// has no shell.
    Healthcheck(crate::server::cli::healthcheck::HealthcheckArgs),
    /// Write the generated reference pages (configuration.md, openapi.json)
    /// into a directory: what `make docs` runs, for whoever changes a flag
    /// or the JSON API.
    #[command(hide = true)]
    Docs(DocsArgs),
}

#[derive(Args, Debug, Clone)]
pub struct DocsArgs {
    /// The directory to write them into (the repository's docs/)
    #[arg(long, value_name = "DIR")]
    pub write: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct ReadyArgs {
    /// The sale plan's name
    #[arg(long)]
    pub plan: String,
    /// The report as JSON (as GET /api/ready answers)
    #[arg(long)]
    pub json: bool,
    /// First write the shard count the plan's peak needs for each sale day
    /// not written yet (refused for a day written with another count)
    #[arg(long)]
    pub write_shards: bool,
    /// First rehearse the plan: its shape scaled down (about 25 seconds),
    /// run through the throttle proxy on a scratch embedded store at the
    /// sale day's shard count; the result is filed with the plan
    #[arg(long)]
    pub rehearse: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ShardsArgs {
    /// The first day (YYYY-MM-DD, UTC) [default: today]
    #[arg(long)]
    pub day: Option<String>,
    /// How many days from --day
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=400))]
    pub days: u32,
    /// Record each day's count where none is, the configured one or what
    /// its partitions hold (serve records today's every hour, and
    /// tomorrow's in the last two hours before it)
    #[arg(long)]
    pub write_ahead: bool,
    /// One JSON object a day instead of a line
    #[arg(long)]
    pub json: bool,
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
    /// Who writes the sale's orders: service (another service, plain writes) or console (this console's
    /// transactions with audit records)
    #[arg(long, default_value = "service", value_parser = parse_writer)]
    pub writer: crate::model::Writer,
}

fn parse_writer(text: &str) -> Result<crate::model::Writer, String> {
    crate::model::Writer::parse(text).ok_or_else(|| format!("{text:?} is not service or console"))
}

#[derive(Subcommand, Debug, Clone)]
pub enum UserCommand {
    /// Add a local account; its password is read from standard input (at
    /// least 12 characters, no control characters).
    Add {
        /// The account's name: what its owner signs in with
        name: String,
        /// The account's role: viewer, support, ops or admin
        #[arg(long)]
        role: Role,
    },
    /// Every account: name, role, where it signs in, whether disabled.
    List,
    /// Stop an account signing in; its sessions end within a second on
    /// every instance.
    Disable {
        /// The account to disable
        name: String,
    },
    /// Let a disabled account sign in again.
    Enable {
        /// The account to enable
        name: String,
    },
    /// Give an account another role.
    SetRole {
        /// The account whose role changes
        name: String,
        /// Its new role: viewer, support, ops or admin
        role: Role,
    },
    /// A new password, read from standard input; sessions signed in with
    /// the old one end.
    SetPassword {
        /// The account whose password changes
        name: String,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum ConsumerCommand {
    /// Print the recorded mode, its version, and who recorded it when.
    Show,
    /// Record the mode: `serve` or `lambda`. A compare-and-set on the
    /// mode's version: refused, naming what is recorded, when it moved
    /// since --expect-version (or, without it, since it was read just before).
    Use {
        /// serve or lambda
        mode: crate::model::ConsumerMode,
        /// The version `consumer show` printed: refuse the switch when the
        /// mode moved since
        #[arg(long)]
        expect_version: Option<u64>,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum TokenCommand {
    /// Create a token and print it (only it, on one line): it is not shown again.
    Create {
        /// The token's name, to list and revoke it by (no '.')
        #[arg(long)]
        name: String,
        /// The role its holder acts with: viewer, support, ops or admin
        /// (the least the script needs)
        #[arg(long)]
        role: Role,
    },
    /// Every token: name, role, whether revoked.
    List,
    /// Revoke a token: every instance refuses it within a second.
    Revoke {
        /// The token to revoke
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
pub struct ReplayArgs {
    /// The dead-letter messages, one JSON message a line (`lambda-local`'s
    /// dead-letters file, or SQS messages whose `Body` is one); `-` reads
    /// standard input
    #[arg(long, value_name = "FILE")]
    pub messages: std::path::PathBuf,
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

    /// Who writes the orders: this console (with its audit records), the
    /// order service (plain PutItem, no shard-count record), or both, order
    /// by order
    #[arg(long, value_enum, default_value_t = crate::server::cli::seed::Writer::Both)]
    pub writer: crate::server::cli::seed::Writer,

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

    #[test]
    fn the_stream_proxy_takes_its_shards_and_limits() {
        let cli = parse(&["stream-proxy", "--upstream", "http://127.0.0.1:8000", "--stream-shards", "32"]).unwrap();
        let Some(Command::StreamProxy(args)) = cli.command else { panic!("not the stream proxy: {:?}", cli.command) };
        assert_eq!((args.stream_shards, args.reads_per_shard_second, args.describes_per_second), (32, 5, 10));
        assert_eq!((args.iterator_ttl_secs, args.retention_secs), (900, 86_400), "AWS's");
        assert_eq!(cli.store.shards, 10, "--shards stays the index's write shards");
        for bad in ["0", "65", "x"] {
            assert!(parse(&["stream-proxy", "--upstream", "http://h", "--stream-shards", bad]).is_err(), "{bad}");
        }
        assert!(parse(&["stream-proxy"]).is_err(), "an upstream is needed");
    }

    #[test]
    fn lambda_local_changes_only_what_it_is_given() {
        let args = |flags: &[&str]| {
            let cli = parse(&[&["lambda-local"][..], flags].concat()).unwrap();
            let Some(Command::LambdaLocal(args)) = cli.command else { panic!("not lambda-local: {:?}", cli.command) };
            args
        };
        let windowed = args(&["--parallelization-factor", "4"]).settings();
        assert!(windowed.is_err(), "the template's tumbling window needs one batch of a shard at a time");
        let settings = args(&["--parallelization-factor", "4", "--tumbling-window-secs", "0", "--max-retries", "-1"])
            .settings()
            .unwrap();
        let deployed = crate::server::sim::lambda::MappingSettings::deployed().unwrap();
        assert_eq!(settings.parallelization_factor, 4);
        assert_eq!(settings.max_retries, None, "-1: until the records expire");
        assert_eq!(settings.batch_size, deployed.batch_size);
        assert_eq!(settings.max_record_age, deployed.max_record_age);
        assert_eq!((settings.tumbling_window, deployed.tumbling_window.is_some()), (None, true));
        for bad in [&["lambda-local", "--parallelization-factor", "11"][..], &["lambda-local", "--max-retries", "-2"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_counters_rehearsal_runs_at_the_real_limits_unless_told() {
        use crate::server::sim::rehearse::{DayTime, Form};
        let cli =
            parse(&["rehearse", "--counters", "--stream-shards", "1,8", "--forms", "lambda", "--days", "end"]).unwrap();
        let Some(Command::Rehearse(args)) = cli.command else { panic!("not rehearse: {:?}", cli.command) };
        assert_eq!(args.scale(), 1.0);
        assert_eq!((args.stream_shards, args.forms, args.days), (vec![1, 8], vec![Form::Lambda], vec![DayTime::End]));
        let Some(Command::Rehearse(args)) = parse(&["rehearse"]).unwrap().command else { unreachable!() };
        assert_eq!(args.scale(), 0.05, "the index designs' rehearsal keeps its scale");
        assert!(parse(&["rehearse", "--stream-shards", "8"]).is_err(), "--stream-shards is --counters'");
    }
}

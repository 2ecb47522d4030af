//! A local Lambda event source mapping for the orders table's stream
//! (`northwind-ops lambda-local`): it drives `northwind-ops lambda` as Lambda
//! does, so the Lambda form of the consumer can be tested and rehearsed on a
//! laptop, on the engine's own stream or on a simulated one of many shards
//! (`sim::streams`).
//!
//! As Lambda's mapping for a DynamoDB stream:
//! - one poller per shard, at most 4 GetRecords a second; a child shard is
//!   read once its parent has been read and delivered to its end;
//! - batches in order per shard, up to `BatchSize` records, waiting up to
//!   `MaximumBatchingWindowInSeconds` for a batch to fill;
//! - `ParallelizationFactor` batches of a shard at once, its records split by
//!   a hash of the partition key, so each key's records stay in order;
//! - each invocation in an execution environment of its own: a process of
//!   the function's binary with a Runtime API on loopback (`runtime`), one
//!   invocation at a time, stopped by its pid;
//! - `ReportBatchItemFailures`: the batch resumes from the first reported
//!   record; `BisectBatchOnFunctionError`: a batch whose invocation failed
//!   is split in two, which costs no retry; `MaximumRetryAttempts` and
//!   `MaximumRecordAgeInSeconds`: then the records are given up, and the
//!   on-failure destination gets Lambda's invocation record
//!   (`dead_letters`).
//!
//! - `TumblingWindowInSeconds`: windows aligned to the clock; each event of
//!   a window names its shard and stream and carries the state the window's
//!   last answer gave (`{}` at first); an answer without `state` fails the
//!   batch; once a window ends, the function gets one more call for it with
//!   no records (`isFinalInvokeForWindow`). A batch does not span windows.
//!
//! The settings default to what the CloudFormation template deploys (read
//! from the template itself). Not simulated: the mapping's own checkpoint
//! surviving a restart (it starts again from `StartingPosition`; the
//! function's checkpoints and markers make a second delivery change
//! nothing), concurrency limits and throttling of the function, the 6 MB
//! payload limit, and event filtering (a template that sets a filter is
//! refused). A tumbling window with a `ParallelizationFactor` above 1 is
//! refused: the function then guards a shard by its checkpoint, which
//! needs one batch of the shard at a time.

pub mod dead_letters;
mod mapping;
pub mod runtime;

pub use mapping::{Mapping, MappingStats};

use crate::server::deploy::template::{Deployment, template};
use crate::server::store::config::{StoreConfig, StoreKind};
use crate::server::store::{TableCapacity, TableDef};
use clap::{Args, ValueEnum};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Where the mapping starts reading a shard it finds when it starts.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartingPosition {
    TrimHorizon,
    Latest,
}

/// The event source mapping's settings, and the function's timeout.
#[derive(Clone, Debug, PartialEq)]
pub struct MappingSettings {
    pub batch_size: usize,
    pub batching_window: Duration,
    pub parallelization_factor: usize,
    pub bisect_on_error: bool,
    pub report_batch_item_failures: bool,
    /// `None`: retried until the records expire (`-1`).
    pub max_retries: Option<u32>,
    /// `None`: no age limit (`-1`).
    pub max_record_age: Option<Duration>,
    pub starting_position: StartingPosition,
    /// `TumblingWindowInSeconds`; `None`: no window (0).
    pub tumbling_window: Option<Duration>,
    pub function_timeout: Duration,
    pub memory_mb: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("the template's event source mapping sets {0}, which the local mapping does not simulate")]
    Unsupported(String),
    #[error("{setting}: {why}")]
    Setting { setting: &'static str, why: String },
    #[error(
        "lambda-local runs the function as separate processes, which reach the store over HTTP: give --endpoint-url \
         (for the embedded store, pin `serve --embedded-addr 127.0.0.1:8001` and pass --endpoint-url \
         http://127.0.0.1:8001)"
    )]
    NoEndpoint,
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl MappingSettings {
    /// What the CloudFormation template deploys: its `ConsumerEvents`
    /// mapping and its `Consumer` function, read from the generated template
    /// so the two cannot drift. Lambda's own defaults fill what it leaves out.
    pub fn deployed() -> Result<MappingSettings, MappingError> {
        let deployment = Deployment {
            orders: TableDef::orders("northwind-orders", TableCapacity::OnDemand),
            metrics: TableDef::metrics("northwind-metrics", TableCapacity::OnDemand),
        };
        let template = template(&deployment);
        let resources = template["Resources"].as_object().cloned().unwrap_or_default();
        let of_type = |kind: &str| {
            resources.values().find(|r| r["Type"] == kind).map(|r| r["Properties"].clone()).unwrap_or(Value::Null)
        };
        Self::from_properties(&of_type("AWS::Lambda::EventSourceMapping"), &of_type("AWS::Lambda::Function"))
    }

    /// The settings of a mapping's and a function's CloudFormation properties.
    pub fn from_properties(mapping: &Value, function: &Value) -> Result<MappingSettings, MappingError> {
        if mapping.get("FilterCriteria").is_some() {
            return Err(MappingError::Unsupported("FilterCriteria".into()));
        }
        let number = |value: &Value, default: i64| value.as_i64().unwrap_or(default);
        let unlimited = |n: i64| (n >= 0).then_some(n);
        let starting_position = match mapping["StartingPosition"].as_str() {
            Some("LATEST") => StartingPosition::Latest,
            _ => StartingPosition::TrimHorizon,
        };
        let settings = MappingSettings {
            batch_size: number(&mapping["BatchSize"], 100).clamp(1, 10_000) as usize,
            batching_window: Duration::from_secs(number(&mapping["MaximumBatchingWindowInSeconds"], 0).max(0) as u64),
            parallelization_factor: number(&mapping["ParallelizationFactor"], 1).clamp(1, 10) as usize,
            bisect_on_error: mapping["BisectBatchOnFunctionError"].as_bool().unwrap_or(false),
            report_batch_item_failures: mapping["FunctionResponseTypes"]
                .as_array()
                .is_some_and(|types| types.iter().any(|t| t == "ReportBatchItemFailures")),
            max_retries: unlimited(number(&mapping["MaximumRetryAttempts"], -1)).map(|n| n as u32),
            max_record_age: unlimited(number(&mapping["MaximumRecordAgeInSeconds"], -1))
                .map(|secs| Duration::from_secs(secs as u64)),
            starting_position,
            tumbling_window: Some(Duration::from_secs(
                number(&mapping["TumblingWindowInSeconds"], 0).clamp(0, 900) as u64
            ))
            .filter(|w| !w.is_zero()),
            function_timeout: Duration::from_secs(number(&function["Timeout"], 3).max(1) as u64),
            memory_mb: number(&function["MemorySize"], 128).max(128) as u32,
        };
        settings.checked()
    }

    /// Settings the function can be driven by: a tumbling window makes it
    /// guard each shard by its checkpoint, so one batch of a shard at a time.
    fn checked(self) -> Result<MappingSettings, MappingError> {
        if self.tumbling_window.is_some() && self.parallelization_factor > 1 {
            return Err(MappingError::Setting {
                setting: "ParallelizationFactor",
                why: format!(
                    "{} with a tumbling window: the function moves each shard's checkpoint, which needs one batch \
                     of a shard at a time (1)",
                    self.parallelization_factor
                ),
            });
        }
        Ok(self)
    }
}

/// The function's environment variables for a store: the settings the
/// template gives it (`NORTHWIND_STORE`, the table names), pointed at the
/// same store as this process. The functions are processes of their own, so
/// the store must be reachable over HTTP (an endpoint) or be AWS.
pub fn function_env(config: &StoreConfig) -> Result<Vec<(String, String)>, MappingError> {
    let mut env = match (config.kind(), config.endpoint()) {
        (StoreKind::Endpoint, Some(url)) => {
            vec![("NORTHWIND_STORE".to_string(), "endpoint".to_string()), ("NORTHWIND_ENDPOINT_URL".to_string(), url)]
        }
        (StoreKind::Aws, _) => vec![("NORTHWIND_STORE".to_string(), "aws".to_string())],
        _ => return Err(MappingError::NoEndpoint),
    };
    env.extend([
        ("NORTHWIND_ORDERS_TABLE".to_string(), config.orders_table.clone()),
        ("NORTHWIND_METRICS_TABLE".to_string(), config.metrics_table.clone()),
        ("NORTHWIND_SHARDS".to_string(), config.shards.to_string()),
        ("NORTHWIND_STORE_TIMEOUT_MS".to_string(), config.store_timeout_ms.to_string()),
    ]);
    if std::env::var_os("NORTHWIND_LOG").is_none() {
        env.push(("NORTHWIND_LOG".into(), "info,aws_config=warn,aws_smithy_runtime=warn".into()));
    }
    Ok(env)
}

#[derive(Args, Debug, Clone)]
pub struct LambdaLocalArgs {
    /// Records per invocation at most [default: the template's]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch_size: Option<u32>,
    /// Seconds to wait for a batch to fill [default: the template's]
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=300))]
    pub batching_window_secs: Option<u32>,
    /// Batches of one shard at once, split by partition key [default: the template's, else 1]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub parallelization_factor: Option<u32>,
    /// Split a batch whose invocation failed in two [default: the template's]
    #[arg(long)]
    pub bisect_on_error: Option<bool>,
    /// Retries of a failing batch before it is given up; -1: until the
    /// records expire [default: the template's]
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i64).range(-1..=10_000))]
    pub max_retries: Option<i64>,
    /// Seconds after which a record is given up; -1: never [default: the template's]
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i64).range(-1..=604_800))]
    pub max_record_age_secs: Option<i64>,
    /// Seconds of a tumbling window; 0: none [default: the template's]
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=900))]
    pub tumbling_window_secs: Option<u32>,
    /// Where shards found at start are read from
    #[arg(long, value_enum, default_value_t = StartingPosition::TrimHorizon)]
    pub starting_position: StartingPosition,
    /// The function's timeout in seconds [default: the template's]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=900))]
    pub timeout_secs: Option<u32>,
    /// The on-failure destination: a file of Lambda's invocation records,
    /// one a line [default: <data-dir>/lambda-local/dead-letters.jsonl]
    #[arg(long)]
    pub dead_letters: Option<PathBuf>,
    /// The function's name in its ARN and log group
    #[arg(long, default_value = "northwind-ops-consumer")]
    pub function_name: String,
}

impl LambdaLocalArgs {
    /// The template's settings, with what the flags change.
    pub fn settings(&self) -> Result<MappingSettings, MappingError> {
        let mut settings = MappingSettings::deployed()?;
        if let Some(n) = self.batch_size {
            settings.batch_size = n as usize;
        }
        if let Some(secs) = self.batching_window_secs {
            settings.batching_window = Duration::from_secs(u64::from(secs));
        }
        if let Some(n) = self.parallelization_factor {
            settings.parallelization_factor = n as usize;
        }
        if let Some(bisect) = self.bisect_on_error {
            settings.bisect_on_error = bisect;
        }
        if let Some(n) = self.max_retries {
            settings.max_retries = (n >= 0).then_some(n as u32);
        }
        if let Some(secs) = self.max_record_age_secs {
            settings.max_record_age = (secs >= 0).then(|| Duration::from_secs(secs as u64));
        }
        if let Some(secs) = self.timeout_secs {
            settings.function_timeout = Duration::from_secs(u64::from(secs));
        }
        if let Some(secs) = self.tumbling_window_secs {
            settings.tumbling_window = Some(Duration::from_secs(u64::from(secs))).filter(|w| !w.is_zero());
        }
        settings.starting_position = self.starting_position;
        settings.checked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_defaults_are_what_the_template_deploys() {
        let settings = MappingSettings::deployed().unwrap();
        let deployment = Deployment {
            orders: TableDef::orders("o", TableCapacity::OnDemand),
            metrics: TableDef::metrics("m", TableCapacity::OnDemand),
        };
        let template = template(&deployment);
        let mapping = &template["Resources"]["ConsumerEvents"]["Properties"];
        assert_eq!(settings.batch_size as u64, mapping["BatchSize"].as_u64().unwrap());
        assert_eq!(settings.bisect_on_error, mapping["BisectBatchOnFunctionError"].as_bool().unwrap());
        assert!(settings.report_batch_item_failures);
        assert_eq!(settings.function_timeout.as_secs(), template["Resources"]["Consumer"]["Properties"]["Timeout"]);
        assert_eq!(settings.tumbling_window.map(|w| w.as_secs()), mapping["TumblingWindowInSeconds"].as_u64());
        assert_eq!(
            settings.parallelization_factor, 1,
            "the function's checkpoints need one batch of a shard at a time"
        );
    }

    #[test]
    fn lambda_defaults_fill_what_a_mapping_leaves_out() {
        let bare = MappingSettings::from_properties(&json!({"StartingPosition": "LATEST"}), &json!({})).unwrap();
        assert_eq!(bare.batch_size, 100);
        assert_eq!(bare.parallelization_factor, 1);
        assert_eq!((bare.max_retries, bare.max_record_age), (None, None), "-1: until the records expire");
        assert!(!bare.bisect_on_error && !bare.report_batch_item_failures);
        assert_eq!(bare.starting_position, StartingPosition::Latest);
        assert_eq!(bare.function_timeout, Duration::from_secs(3));
        assert_eq!(bare.tumbling_window, None);
    }

    #[test]
    fn a_tumbling_window_is_read_and_needs_one_batch_of_a_shard_at_a_time() {
        let windowed = MappingSettings::from_properties(&json!({"TumblingWindowInSeconds": 60}), &json!({})).unwrap();
        assert_eq!(windowed.tumbling_window, Some(Duration::from_secs(60)));
        let none = MappingSettings::from_properties(&json!({"TumblingWindowInSeconds": 0}), &json!({})).unwrap();
        assert_eq!(none.tumbling_window, None);
        let parallel = json!({"TumblingWindowInSeconds": 60, "ParallelizationFactor": 2});
        let err = MappingSettings::from_properties(&parallel, &json!({})).unwrap_err();
        assert!(matches!(&err, MappingError::Setting { setting: "ParallelizationFactor", .. }), "{err}");
        assert!(MappingSettings::from_properties(&json!({"FilterCriteria": {}}), &json!({})).is_err());
    }
}

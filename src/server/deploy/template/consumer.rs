//! The stream consumer: the image's `lambda` command as a Lambda function,
//! the event source mapping that feeds it the orders stream, the queue of
//! what it gives up on, its log group and its role.

use super::{Deployment, if_, kept, no_value, policy, reference};
use crate::server::deploy::iam;
use serde_json::{Map, Value, json};

/// The event source mapping's settings: a batch of up to 1,000 records
/// (what one GetRecords of a busy shard holds, so a shard's poller keeps up
/// with a flash sale), gathered for up to a second, split in half on a
/// failure to find the bad record. A transaction's cost is its counter
/// items and the shard's checkpoint, some 20 units whether it carries one
/// record or 99: a fuller batch spreads it over more orders. At 1,000 orders
/// a second over 32 shards, a second's window gives each invocation ~31
/// records where no window gives ~8. The window adds up to a second to a
/// change's way to the dashboards.
pub const BATCH_SIZE: u32 = 1000;
pub const BATCH_WINDOW_SECONDS: u32 = 1;
/// A tumbling window: not for its state (the function keeps none there),
/// but because an event of a windowed mapping names its stream shard, so the
/// function guards a batch by the shard's checkpoint (one item a
/// transaction) instead of a marker per record (two units each), and
/// reconciliation can anchor at those checkpoints. Its length matters
/// little: each window ends with one call without records.
pub const TUMBLING_WINDOW_SECONDS: u32 = 60;
/// One batch of a shard at a time: the checkpoint is moved only from where
/// the batch found it, which concurrent batches of one shard would race for.
pub const PARALLELIZATION_FACTOR: u32 = 1;
/// A record given up after 10 tries goes to the dead-letter queue instead
/// of stopping its shard.
const MAX_RETRIES: u32 = 10;
/// ... or after 6 hours, well inside the stream's 24: what was given up can
/// still be read from the stream and delivered again (`replay`) for
/// another 18 hours.
pub(super) const MAX_RECORD_AGE_SECONDS: u32 = 6 * 3600;
/// Fourteen days: the longest SQS keeps a message, time to look.
const DEAD_LETTER_RETENTION_SECONDS: u32 = 14 * 86_400;
const MEMORY_MB: u32 = 256;
const TIMEOUT_SECONDS: u32 = 60;
/// No concurrency reserved unless told: the mapping runs one batch per open
/// stream shard at a time (`PARALLELIZATION_FACTOR` 1), so the shards bound
/// the function's concurrency already, and a reservation under the shard
/// count (the old default of 10, at 32 shards) makes a third of the shards
/// wait behind the rest. The stream's shard count follows the table's
/// partitions (splits, and rollovers every few hours) and no stack
/// parameter can follow it; a reservation is for an account whose other
/// functions could take the whole pool: `ConsumerConcurrency` at least the
/// open shards (the Sales readiness page says how many).
const DEFAULT_RESERVED_CONCURRENCY: u32 = 0;

pub(super) fn add(
    deployment: &Deployment,
    parameters: &mut Map<String, Value>,
    conditions: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
) {
    parameters.insert(
        "ConsumerConcurrency".into(),
        json!({
            "Type": "Number",
            "Default": DEFAULT_RESERVED_CONCURRENCY,
            "MinValue": 0,
            "Description": "Concurrency reserved for the consumer (0: none, its shards bound it); when reserved, at least \
                            the stream's open shards (a new account whose quota is under 110 cannot reserve)"
        }),
    );
    conditions.insert(
        "ConsumerReserved".into(),
        json!({ "Fn::Not": [{ "Fn::Equals": [reference("ConsumerConcurrency"), "0"] }] }),
    );
    resources.insert(
        "ConsumerLogs".into(),
        kept(json!({
            "Type": "AWS::Logs::LogGroup",
            "Properties": { "RetentionInDays": reference("LogRetentionDays") }
        })),
    );
    resources.insert(
        "ConsumerDeadLetters".into(),
        kept(json!({
            "Type": "AWS::SQS::Queue",
            "Properties": { "MessageRetentionPeriod": DEAD_LETTER_RETENTION_SECONDS, "SqsManagedSseEnabled": true }
        })),
    );
    resources.insert("ConsumerRole".into(), role(deployment));
    resources.insert("Consumer".into(), function(deployment));
    resources.insert("ConsumerEvents".into(), event_source_mapping());
}

/// The function's role: docs/iam/lambda.json (its logs narrowed to its own
/// log group), and sending what it gives up on to its queue.
fn role(deployment: &Deployment) -> Value {
    let logs = ("log-group:/aws/lambda/*", "log-group:${ConsumerLogs}:*");
    json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Principal": { "Service": "lambda.amazonaws.com" },
                    "Action": "sts:AssumeRole"
                }]
            },
            "Policies": [
                { "PolicyName": "northwind-consumer", "PolicyDocument": policy(iam::LAMBDA, deployment, &[logs]) },
                {
                    "PolicyName": "northwind-consumer-dead-letters",
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [{
                            "Effect": "Allow",
                            "Action": "sqs:SendMessage",
                            "Resource": { "Fn::GetAtt": ["ConsumerDeadLetters", "Arn"] }
                        }]
                    }
                }
            ]
        }
    })
}

fn function(deployment: &Deployment) -> Value {
    json!({
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Description": "Northwind Ops: the orders stream into the counters (northwind-ops lambda)",
            "PackageType": "Image",
            // By digest (ImageUri's pattern), as the console's tasks.
            "Code": { "ImageUri": reference("ImageUri") },
            "ImageConfig": { "Command": ["lambda"] },
            "Architectures": [reference("Architecture")],
            "Role": { "Fn::GetAtt": ["ConsumerRole", "Arn"] },
            "MemorySize": MEMORY_MB,
            "Timeout": TIMEOUT_SECONDS,
            "ReservedConcurrentExecutions": if_("ConsumerReserved", reference("ConsumerConcurrency"), no_value()),
            "LoggingConfig": { "LogGroup": reference("ConsumerLogs"), "LogFormat": "Text" },
            "Environment": {
                "Variables": {
                    "NORTHWIND_STORE": "aws",
                    "NORTHWIND_ORDERS_TABLE": deployment.orders.name,
                    "NORTHWIND_METRICS_TABLE": deployment.metrics.name,
                    // The only writable directory in a Lambda.
                    "NORTHWIND_DATA_DIR": "/tmp"
                }
            }
        }
    })
}

fn event_source_mapping() -> Value {
    json!({
        "Type": "AWS::Lambda::EventSourceMapping",
        "Properties": {
            "EventSourceArn": { "Fn::GetAtt": ["OrdersTable", "StreamArn"] },
            "FunctionName": reference("Consumer"),
            // Off while the console's tasks consume: one consumer at a time.
            "Enabled": if_(super::IN_PROCESS, json!(false), json!(true)),
            "StartingPosition": "TRIM_HORIZON",
            "BatchSize": BATCH_SIZE,
            "MaximumBatchingWindowInSeconds": BATCH_WINDOW_SECONDS,
            "TumblingWindowInSeconds": TUMBLING_WINDOW_SECONDS,
            "ParallelizationFactor": PARALLELIZATION_FACTOR,
            "BisectBatchOnFunctionError": true,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "MaximumRetryAttempts": MAX_RETRIES,
            "MaximumRecordAgeInSeconds": MAX_RECORD_AGE_SECONDS,
            "DestinationConfig": {
                "OnFailure": { "Destination": { "Fn::GetAtt": ["ConsumerDeadLetters", "Arn"] } }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_up_record_can_still_be_read_from_the_stream() {
        const STREAM_RETENTION_SECONDS: u32 = 24 * 3600;
        const { assert!(MAX_RECORD_AGE_SECONDS * 2 <= STREAM_RETENTION_SECONDS, "at least half the stream's day left") };
    }
}

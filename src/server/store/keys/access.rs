//! Which partitions of the metrics table each command reads and writes,
//! by action: the source the IAM policies' statements on the table's items
//! are generated from (`deploy::iam`), beside the key schema they name.

use super::{
    APPLIED, AUDIT_ACTOR, AUDIT_DAY, AUDIT_ORDER, BULK, CAPACITY, CHECKPOINT, CONSUMERS, HEAT, METRIC_DAY,
    METRIC_MINUTES, METRIC_PENDING, QUALITY, RANGES, RECONCILE, SALES, SESSION, SHARDS, TOKENS, USERS,
};

/// What one command reads and writes in the metrics table, by partition
/// and by action: each entry is a partition key prefix (ending in `#`,
/// standing for every key it starts) or a whole partition key (`USERS`,
/// `TOKENS`). The metrics table holds counters beside accounts, sessions,
/// tokens and the audit trail, so each command's IAM policy in `docs/iam/`
/// lets it reach only these partitions, each with only the actions listed
/// here (`dynamodb:LeadingKeys`, see `leading_keys_pattern`): the policies'
/// statements on the metrics table's items are generated from this list
/// (`deploy::iam::metrics_statements`, written by `make docs`). A new
/// partition family is added here, to the commands that use it.
#[derive(Clone, Copy, Debug)]
pub struct MetricsAccess {
    /// The command (or role of a process), as `docs/iam/<command>.json`
    /// names it.
    pub command: &'static str,
    /// Partitions it reads (GetItem, BatchGetItem, Query, TransactGetItems).
    pub reads: &'static [&'static str],
    /// Partitions it puts items into (PutItem, a transaction's Put).
    pub puts: &'static [&'static str],
    /// Partitions whose items it updates (UpdateItem, a transaction's Update).
    pub updates: &'static [&'static str],
    /// Partitions whose items it deletes (DeleteItem). None of the audit
    /// trail's or the checkpoints', for any role of the console.
    pub deletes: &'static [&'static str],
}

impl MetricsAccess {
    /// Every partition it writes, by any action.
    pub fn writes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.puts.iter().chain(self.updates).chain(self.deletes).copied()
    }
}

/// Every partition family of the metrics table.
pub const METRICS_PARTITIONS: [&str; 20] = [
    SHARDS,
    METRIC_PENDING,
    METRIC_DAY,
    METRIC_MINUTES,
    CHECKPOINT,
    APPLIED,
    RANGES,
    RECONCILE,
    CAPACITY,
    HEAT,
    QUALITY,
    USERS,
    TOKENS,
    SESSION,
    BULK,
    AUDIT_ORDER,
    AUDIT_DAY,
    AUDIT_ACTOR,
    SALES,
    CONSUMERS,
];

/// The audit trail: appended to (a put conditioned on `attribute_not_exists`,
/// which IAM cannot see), never updated or deleted by any command.
pub const AUDIT_PARTITIONS: [&str; 3] = [AUDIT_ORDER, AUDIT_DAY, AUDIT_ACTOR];

/// `serve`'s reads, with or without its consumer: the pages and the API
/// (accounts, sessions, tokens, bulk reports, the audit trail, the capacity
/// page with the shard heat, data quality and the consumer registry, sale
/// plans), the shard counts, and reconciliation (counters and the
/// checkpoints it anchors at). Not the Lambda consumer's markers.
const SERVE_READS: [&str; 18] = [
    SHARDS,
    METRIC_PENDING,
    METRIC_DAY,
    METRIC_MINUTES,
    CHECKPOINT,
    RECONCILE,
    CAPACITY,
    HEAT,
    QUALITY,
    USERS,
    TOKENS,
    SESSION,
    BULK,
    AUDIT_ORDER,
    AUDIT_DAY,
    AUDIT_ACTOR,
    SALES,
    CONSUMERS,
];

/// The web tier alone (`serve --no-consumer`, as the stack runs it):
/// accounts, sessions, tokens, bulk reports, sale plans, the shard counts
/// (written ahead for a sale too), reconciliation's repairs and lease, the
/// capacity it consumed. No checkpoint, heat, quality or registry write:
/// those are the consumer's (its reconciliation remembers a closed shard's
/// checkpoint at its end as finished in memory, `mark_finished`).
const WEB_UPDATES: [&str; 11] =
    [SHARDS, METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, RECONCILE, CAPACITY, USERS, TOKENS, SESSION, BULK, SALES];
/// ... and the audit trail, appended to.
const WEB_PUTS: [&str; 14] = [
    SHARDS,
    METRIC_PENDING,
    METRIC_DAY,
    METRIC_MINUTES,
    RECONCILE,
    CAPACITY,
    USERS,
    TOKENS,
    SESSION,
    BULK,
    SALES,
    AUDIT_ORDER,
    AUDIT_DAY,
    AUDIT_ACTOR,
];
/// What the web tier deletes: a session signed out, a sale plan and its
/// rehearsal, reconciliation's lease given back.
const WEB_DELETES: [&str; 3] = [SESSION, SALES, RECONCILE];

/// The in-process consumer's writes besides the web tier's: its leases and
/// checkpoints, the counters, the stream's capacity figures and hot keys,
/// the GSI2 shard heat, the data quality figures, the consumer registry.
const SERVE_UPDATES: [&str; 15] = [
    SHARDS,
    METRIC_PENDING,
    METRIC_DAY,
    METRIC_MINUTES,
    CHECKPOINT,
    RECONCILE,
    CAPACITY,
    HEAT,
    QUALITY,
    USERS,
    TOKENS,
    SESSION,
    BULK,
    SALES,
    CONSUMERS,
];
/// ... and its puts: the same partitions, and each commit's applied
/// ranges (read only by `replay`).
const SERVE_PUTS: [&str; 19] = [
    SHARDS,
    METRIC_PENDING,
    METRIC_DAY,
    METRIC_MINUTES,
    CHECKPOINT,
    RANGES,
    RECONCILE,
    CAPACITY,
    HEAT,
    QUALITY,
    USERS,
    TOKENS,
    SESSION,
    BULK,
    AUDIT_ORDER,
    AUDIT_DAY,
    AUDIT_ACTOR,
    SALES,
    CONSUMERS,
];
/// ... and it leaves the registry when it stops.
const SERVE_DELETES: [&str; 4] = [SESSION, SALES, RECONCILE, CONSUMERS];

/// What writes orders (`seed`, `loadgen`): the day's shard count, the
/// capacity it consumed, and each change's audit records (appended).
const ORDER_WRITER_PUTS: [&str; 5] = [SHARDS, AUDIT_ORDER, AUDIT_DAY, AUDIT_ACTOR, CAPACITY];
const ORDER_WRITER_UPDATES: [&str; 2] = [SHARDS, CAPACITY];

const LAMBDA_WRITES: [&str; 10] =
    [APPLIED, CHECKPOINT, RANGES, METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, CAPACITY, HEAT, QUALITY, CONSUMERS];
/// `replay` never touches the registry or the recorded mode; it moves a
/// shard's checkpoint past what it applied (in `lambda` mode).
const REPLAY_WRITES: [&str; 9] =
    [APPLIED, CHECKPOINT, RANGES, METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, CAPACITY, HEAT, QUALITY];
const CONSUME_UPDATES: [&str; 8] =
    [METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, CHECKPOINT, CAPACITY, HEAT, QUALITY, CONSUMERS];
/// Reconciliation's updates: repairs, its lease and verdicts, and a closed
/// shard's checkpoint at its end marked finished (the Lambda form's).
const RECONCILE_WRITES: [&str; 6] = [METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, CHECKPOINT, RECONCILE, CAPACITY];
/// ... and a repair's record in the audit trail (appended).
const RECONCILE_PUTS: [&str; 7] =
    [METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, RECONCILE, CAPACITY, AUDIT_DAY, AUDIT_ACTOR];
/// The admin commands' updates: accounts, tokens, the capacity they used
/// and the recorded consumer mode (`consumer use`, a conditional update).
const ADMIN_UPDATES: [&str; 4] = [USERS, TOKENS, CAPACITY, CONSUMERS];
/// Their puts: accounts, tokens, capacity, and each change's security
/// event in the audit trail (appended).
const ADMIN_PUTS: [&str; 5] = [USERS, TOKENS, CAPACITY, AUDIT_DAY, AUDIT_ACTOR];

/// Each command's partitions of the metrics table (every command but
/// `advise` adds the capacity it consumed, under `CAPACITY#`).
pub const METRICS_ACCESS: [MetricsAccess; 10] = [
    // The web tier alone: `serve --no-consumer`, the stack's console.
    MetricsAccess {
        command: "web",
        reads: &SERVE_READS,
        puts: &WEB_PUTS,
        updates: &WEB_UPDATES,
        deletes: &WEB_DELETES,
    },
    // The web tier with its in-process consumer.
    MetricsAccess {
        command: "serve",
        reads: &SERVE_READS,
        puts: &SERVE_PUTS,
        updates: &SERVE_UPDATES,
        deletes: &SERVE_DELETES,
    },
    // The in-process consumer alone: leases and checkpoints (and each
    // commit's applied ranges, put), counters,
    // the stream's capacity figures and hot keys, the GSI2 shard heat, the
    // data quality figures (read before it first adds to an hour's largest
    // items); the days' shard counts say how an order counts;
    // the consumer registry (itself) and the recorded consumer mode.
    MetricsAccess {
        command: "consume",
        reads: &[CHECKPOINT, SHARDS, QUALITY, CONSUMERS],
        puts: &[RANGES],
        updates: &CONSUME_UPDATES,
        deletes: &[CONSUMERS],
    },
    // The Lambda consumer: shard checkpoints in a tumbling window, markers
    // without one; it records itself in the consumer registry, reads the
    // recorded consumer mode, and records `lambda` where none is.
    MetricsAccess {
        command: "lambda",
        reads: &[APPLIED, CHECKPOINT, SHARDS, QUALITY, CONSUMERS],
        puts: &LAMBDA_WRITES,
        updates: &LAMBDA_WRITES,
        deletes: &[],
    },
    // The Lambda consumer's records given up, applied again as it applies
    // them, but for those in the shard's applied ranges; the recorded mode
    // and the shard's checkpoint read first (what a consumer will still
    // apply is left to it). It writes nothing in the registry: no
    // heartbeat, and never the consumer mode.
    MetricsAccess {
        command: "replay",
        reads: &[APPLIED, CHECKPOINT, RANGES, SHARDS, QUALITY, CONSUMERS],
        puts: &REPLAY_WRITES,
        updates: &REPLAY_WRITES,
        deletes: &[],
    },
    // Counters against the index and the checkpoints, its own lease (given
    // back with a delete); the registry and the consumer mode read, to
    // refuse where a Lambda function applied records with markers.
    MetricsAccess {
        command: "reconcile",
        reads: &[SHARDS, METRIC_PENDING, METRIC_DAY, METRIC_MINUTES, CHECKPOINT, RECONCILE, CONSUMERS],
        puts: &RECONCILE_PUTS,
        updates: &RECONCILE_WRITES,
        deletes: &[RECONCILE],
    },
    MetricsAccess {
        command: "seed",
        reads: &[SHARDS],
        puts: &ORDER_WRITER_PUTS,
        updates: &ORDER_WRITER_UPDATES,
        deletes: &[],
    },
    MetricsAccess {
        command: "loadgen",
        reads: &[SHARDS],
        puts: &ORDER_WRITER_PUTS,
        updates: &ORDER_WRITER_UPDATES,
        deletes: &[],
    },
    // The CLI's administrative commands, `user`, `token` and `consumer`
    // (the recorded consumer mode, beside the registry's entries).
    MetricsAccess {
        command: "admin",
        reads: &[USERS, TOKENS, CONSUMERS],
        puts: &ADMIN_PUTS,
        updates: &ADMIN_UPDATES,
        deletes: &[],
    },
    MetricsAccess { command: "advise", reads: &[CAPACITY], puts: &[], updates: &[], deletes: &[] },
];

/// The accounts, tokens and sessions: what only `serve` and `admin` may
/// reach.
pub const CREDENTIAL_PARTITIONS: [&str; 3] = [USERS, TOKENS, SESSION];

/// The access of `command`, if it has any in the metrics table.
pub fn metrics_access(command: &str) -> Option<&'static MetricsAccess> {
    METRICS_ACCESS.iter().find(|access| access.command == command)
}

/// The partition family of a metrics table partition key (an entry of
/// `METRICS_PARTITIONS`), if it is one of this schema's.
pub fn partition_of(pk: &str) -> Option<&'static str> {
    METRICS_PARTITIONS
        .into_iter()
        .filter(|family| if family.ends_with('#') { pk.starts_with(family) } else { pk == *family })
        .max_by_key(|family| family.len())
}

/// The `dynamodb:LeadingKeys` pattern (`ForAllValues:StringLike`) of a
/// partition: a prefix ending in `#` matches every key it starts, anything
/// else the one key.
pub fn leading_keys_pattern(partition: &str) -> String {
    if partition.ends_with('#') { format!("{partition}*") } else { partition.to_string() }
}

//! DynamoDB's own rules, written once: how big an item and a number are,
//! what each index of a table holds and what a write costs it (`layout`),
//! what a read or a write costs in units. Pure; below every layer that
//! prices, plans or throttles (the stream's pricing, the shard planner, the
//! throttle proxy and its rehearsal).

pub mod layout;
pub mod units;

/// What one partition of a table or index serves a second, whatever the
/// table's mode or size: past it, a hot key range throttles while the rest
/// of the table sits idle (the seed's flash sale).
pub const PARTITION_WRITE_UNITS: f64 = 1000.0;
pub const PARTITION_READ_UNITS: f64 = 3000.0;

/// What a new on-demand table, and each new index, takes at once before
/// DynamoDB has to split partitions: its initial warm throughput. Setting a
/// warm throughput at or below it changes nothing.
pub const ON_DEMAND_WARM_WRITE_UNITS: f64 = 4000.0;
pub const ON_DEMAND_WARM_READ_UNITS: f64 = 12000.0;

/// The default quota on what one table or index takes a second, read or
/// write units alike: an on-demand maximum above it is refused until the
/// account's quota is raised.
pub const TABLE_QUOTA_UNITS: f64 = 40_000.0;

/// The target utilisation DynamoDB auto scaling is set to here, in percent:
/// AWS's default for a table's target tracking, the seed's ~70%, which the
/// template sets and the advisor replays.
pub const AUTO_SCALING_TARGET_PERCENT: f64 = 70.0;

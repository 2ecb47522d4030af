//! How many GSI2 write shards a day's PENDING orders are spread over: one
//! rule, for every writer of the orders table (the order service, batch
//! jobs, this console) and every reader of it (the PENDING list, the stream
//! consumer, reconciliation, the planner and readiness). `docs/writers.md`
//! says it for the teams that write the table.
//!
//! 1. A day's count is the `shards` number of the metrics table's item
//!    `PK = SHARDS#<yyyy-mm-dd>`, `SK = CONFIG`, when it exists (a sale day
//!    written ahead with more shards, say); else the configured count
//!    (`--shards`, `NORTHWIND_SHARDS`). So a writer that never reads the
//!    metrics table, and a day nobody recorded, agree with the readers as
//!    long as the configured count is the same everywhere.
//! 2. An order's shard is `xxh3_64(orderId) mod count` (`keys::shard_of`);
//!    its GSI2 keys are `STATUS#PENDING#<yyyy-mm-dd>#<shard>` /
//!    `<createdAt>#<orderId>` while it is PENDING, and absent otherwise.
//! 3. Nothing a writer does with the count is dropped: the consumer counts
//!    an order in any readable partition of a day (`keys::parse_pending_pk`,
//!    below `MAX_SHARDS`) whatever the count says, so the day's counter
//!    names every shard that holds one, and readers read every shard below
//!    the count and every shard beyond it the counter names (`partitions`).
//!    One beyond the count is flagged as drift, with its key.
//! 4. A count is recorded only where none is (a conditional put), so it
//!    never changes once a writer may have used it; the console records each
//!    coming day's ahead (`Store::record_days_ahead`), and a day recorded
//!    anew after the metrics table was lost is given at least the shards its
//!    partitions already hold (`to_record`).

use super::keys::MAX_SHARDS;

/// A day's shard count: the recorded one, else the configured one.
pub fn day_count(recorded: Option<u32>, configured: u32) -> u32 {
    recorded.unwrap_or(configured).clamp(1, MAX_SHARDS)
}

/// The count to record for a day that has none: the configured one, or
/// more when the day's partitions already hold orders beyond it (its
/// record was lost with the metrics table, or a writer used another count):
/// one past the highest partition that holds an order.
pub fn to_record(configured: u32, highest_occupied: Option<u32>) -> u32 {
    let held = highest_occupied.map_or(0, |shard| shard.saturating_add(1));
    configured.max(held).clamp(1, MAX_SHARDS)
}

/// The partitions readers read for a day of `count` shards whose PENDING
/// counter holds `counted[shard]` orders on each shard: every shard below
/// the count, and each beyond it that holds an order, in shard order.
pub fn partitions(count: u32, counted: &[u64]) -> Vec<u32> {
    let count = count.min(MAX_SHARDS);
    let beyond = (count..MAX_SHARDS).filter(|shard| counted.get(*shard as usize).is_some_and(|n| *n > 0));
    (0..count).chain(beyond).collect()
}

/// Whether a readable partition lies beyond the day's count: a writer used
/// another count (listed and counted, flagged as drift).
pub fn is_beyond(shard: u32, count: u32) -> bool {
    shard >= count && shard < MAX_SHARDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_with_no_record_has_the_configured_count() {
        assert_eq!(day_count(None, 10), 10);
        assert_eq!(day_count(Some(32), 10), 32, "the record wins");
        assert_eq!(day_count(Some(4), 10), 4, "even when lower");
        assert_eq!(day_count(Some(0), 0), 1, "never a day of no partition");
        assert_eq!(day_count(None, 1_000), MAX_SHARDS, "never more than readers fan out over");
    }

    #[test]
    fn a_count_recorded_anew_covers_what_the_partitions_hold() {
        assert_eq!(to_record(10, None), 10, "an empty day");
        assert_eq!(to_record(10, Some(4)), 10, "orders within the count");
        assert_eq!(to_record(10, Some(31)), 32, "a sale day recorded with 32, its record lost");
        assert_eq!(to_record(10, Some(500)), MAX_SHARDS);
    }

    #[test]
    fn readers_read_the_count_and_every_counted_shard_beyond_it() {
        assert_eq!(partitions(3, &[]), vec![0, 1, 2]);
        // Shard 1 empty or not, it is below the count; 57 holds two, 12
        // none (a counter once raised, now back at 0), 200 is no partition.
        let mut counted = vec![0; 201];
        (counted[5], counted[57], counted[200]) = (1, 2, 3);
        assert_eq!(partitions(3, &counted), vec![0, 1, 2, 5, 57]);
        assert!(is_beyond(57, 10) && !is_beyond(9, 10) && !is_beyond(MAX_SHARDS, 10));
    }
}

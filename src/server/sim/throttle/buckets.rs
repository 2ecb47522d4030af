//! Token buckets, one per (table or index, partition key value, read or
//! write). Pure: every call takes the time, so tests drive a clock by hand.
//!
//! A bucket refills at the partition's rate and holds one second of it: a
//! partition that was idle can absorb a one-second burst, and no more. (The
//! real service also banks up to five minutes of unused provisioned capacity
//! as burst capacity, table-wide and best-effort; a per-partition limit does
//! not, which is what this simulates.)

use crate::server::rules::{PARTITION_READ_UNITS, PARTITION_WRITE_UNITS};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often idle buckets are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Write,
}

/// Whose capacity a request draws on: a table or one of its indexes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    pub table: String,
    pub index: Option<String>,
}

impl Resource {
    pub fn table(table: &str) -> Self {
        Self { table: table.to_string(), index: None }
    }

    pub fn index(table: &str, index: &str) -> Self {
        Self { table: table.to_string(), index: Some(index.to_string()) }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.index {
            Some(index) => write!(f, "{}/index/{index}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey {
    pub resource: Resource,
    /// The partition key value, in a form unique per value (its JSON).
    pub partition: String,
    pub kind: Kind,
}

/// Units a request takes from one bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    pub key: BucketKey,
    pub units: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug)]
pub struct Buckets {
    read_rate: f64,
    write_rate: f64,
    buckets: HashMap<BucketKey, Bucket>,
    last_sweep: Option<Instant>,
}

impl Buckets {
    /// Partition rates times `scale` (0.05: 150 read and 50 write units a
    /// second per partition).
    pub fn new(scale: f64) -> Self {
        Self {
            read_rate: PARTITION_READ_UNITS * scale,
            write_rate: PARTITION_WRITE_UNITS * scale,
            buckets: HashMap::new(),
            last_sweep: None,
        }
    }

    /// Units a second, which is also a bucket's capacity (one second of it).
    pub fn rate(&self, kind: Kind) -> f64 {
        match kind {
            Kind::Read => self.read_rate,
            Kind::Write => self.write_rate,
        }
    }

    /// Takes every draw, or none: the keys of the buckets that lack units are
    /// returned and nothing is charged. Draws on the same bucket add up.
    ///
    /// A draw larger than a whole bucket (a big item on a small `--scale`)
    /// passes when the bucket is full, leaving it in debt, so it is slowed
    /// down rather than refused for ever.
    pub fn try_take(&mut self, now: Instant, draws: &[Draw]) -> Result<(), Vec<BucketKey>> {
        self.sweep(now);
        let wanted = merge(draws);
        let short: Vec<BucketKey> = wanted
            .iter()
            .filter(|(key, units)| {
                let capacity = self.rate(key.kind);
                self.level(key, now) + 1e-9 < units.min(capacity)
            })
            .map(|(key, _)| key.clone())
            .collect();
        if !short.is_empty() {
            return Err(short);
        }
        for (key, units) in wanted {
            self.charge(now, &key, units);
        }
        Ok(())
    }

    /// Whether the bucket holds at least `units` (or is full).
    pub fn has(&mut self, now: Instant, key: &BucketKey, units: f64) -> bool {
        self.level(key, now) + 1e-9 >= units.min(self.rate(key.kind))
    }

    /// Charges units already spent (a read whose size is known only from
    /// its answer); the bucket may go into debt, which later requests wait out.
    pub fn charge(&mut self, now: Instant, key: &BucketKey, units: f64) {
        let level = self.level(key, now);
        self.buckets.insert(key.clone(), Bucket { tokens: level - units, at: now });
    }

    /// Units in the bucket at `now`; a bucket never seen is full.
    pub fn level(&self, key: &BucketKey, now: Instant) -> f64 {
        let capacity = self.rate(key.kind);
        match self.buckets.get(key) {
            Some(bucket) => {
                let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
                (bucket.tokens + elapsed * capacity).min(capacity)
            }
            None => capacity,
        }
    }

    /// Buckets held now.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Drops the buckets that have refilled: a full bucket is the same as
    /// none, so memory stays bounded by the partitions busy in the last second.
    fn sweep(&mut self, now: Instant) {
        if self.last_sweep.is_some_and(|at| now.saturating_duration_since(at) < SWEEP_EVERY) {
            return;
        }
        self.last_sweep = Some(now);
        let (read_rate, write_rate) = (self.read_rate, self.write_rate);
        self.buckets.retain(|key, bucket| {
            let capacity = if key.kind == Kind::Read { read_rate } else { write_rate };
            let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
            bucket.tokens + elapsed * capacity < capacity
        });
    }
}

/// Sums the draws per bucket, in a stable order.
fn merge(draws: &[Draw]) -> Vec<(BucketKey, f64)> {
    let mut sums: Vec<(BucketKey, f64)> = Vec::new();
    for draw in draws {
        match sums.iter_mut().find(|(key, _)| *key == draw.key) {
            Some((_, units)) => *units += draw.units,
            None => sums.push((draw.key.clone(), draw.units)),
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(partition: &str, kind: Kind) -> BucketKey {
        BucketKey { resource: Resource::table("orders"), partition: partition.into(), kind }
    }

    fn draw(partition: &str, kind: Kind, units: f64) -> Draw {
        Draw { key: key(partition, kind), units }
    }

    #[test]
    fn a_bucket_holds_one_second_of_the_scaled_rate() {
        let buckets = Buckets::new(0.01);
        assert_eq!(buckets.rate(Kind::Write), 10.0);
        assert_eq!(buckets.rate(Kind::Read), 30.0);
        assert_eq!(buckets.level(&key("a", Kind::Write), Instant::now()), 10.0);
    }

    #[test]
    fn takes_until_empty_then_refuses() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(buckets.try_take(t0, &[draw("a", Kind::Write, 1.0)]).is_ok());
        }
        assert_eq!(buckets.try_take(t0, &[draw("a", Kind::Write, 1.0)]), Err(vec![key("a", Kind::Write)]));
        // Other partitions, and reads of the same one, are separate.
        assert!(buckets.try_take(t0, &[draw("b", Kind::Write, 1.0)]).is_ok());
        assert!(buckets.try_take(t0, &[draw("a", Kind::Read, 1.0)]).is_ok());
    }

    #[test]
    fn refills_at_the_rate_up_to_capacity() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        buckets.try_take(t0, &[draw("a", Kind::Write, 10.0)]).unwrap();
        let k = key("a", Kind::Write);
        assert_eq!(buckets.level(&k, t0), 0.0);
        assert!((buckets.level(&k, t0 + Duration::from_millis(300)) - 3.0).abs() < 1e-9);
        assert!(buckets.try_take(t0 + Duration::from_millis(300), &[draw("a", Kind::Write, 3.0)]).is_ok());
        assert!(buckets.try_take(t0 + Duration::from_millis(300), &[draw("a", Kind::Write, 1.0)]).is_err());
        // Never above one second's worth, however long the wait.
        assert_eq!(buckets.level(&k, t0 + Duration::from_secs(60)), 10.0);
    }

    #[test]
    fn a_refusal_charges_nothing_anywhere() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        buckets.try_take(t0, &[draw("hot", Kind::Write, 9.5)]).unwrap();
        let request = [draw("cold", Kind::Write, 2.0), draw("hot", Kind::Write, 1.0)];
        assert_eq!(buckets.try_take(t0, &request), Err(vec![key("hot", Kind::Write)]));
        assert_eq!(buckets.level(&key("cold", Kind::Write), t0), 10.0);
        assert_eq!(buckets.level(&key("hot", Kind::Write), t0), 0.5);
    }

    #[test]
    fn draws_on_one_bucket_add_up() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        buckets.try_take(t0, &[draw("a", Kind::Write, 5.0)]).unwrap();
        // Two writes of 3 on the partition: 6 > the 5 left.
        let request = [draw("a", Kind::Write, 3.0), draw("a", Kind::Write, 3.0)];
        assert!(buckets.try_take(t0, &request).is_err());
        assert_eq!(buckets.level(&key("a", Kind::Write), t0), 5.0);
        assert!(buckets.try_take(t0, &request[..1]).is_ok());
    }

    #[test]
    fn a_draw_bigger_than_the_bucket_passes_only_when_full_and_leaves_debt() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        assert!(buckets.try_take(t0, &[draw("a", Kind::Write, 25.0)]).is_ok());
        let k = key("a", Kind::Write);
        assert_eq!(buckets.level(&k, t0), -15.0);
        assert!(buckets.try_take(t0 + Duration::from_millis(1500), &[draw("a", Kind::Write, 1.0)]).is_err());
        assert!(buckets.try_take(t0 + Duration::from_millis(1700), &[draw("a", Kind::Write, 1.0)]).is_ok());
    }

    #[test]
    fn post_charged_reads_can_overdraw() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        let k = key("a", Kind::Read);
        assert!(buckets.has(t0, &k, 0.5));
        buckets.charge(t0, &k, 40.0);
        assert!(!buckets.has(t0, &k, 0.5));
        assert!(buckets.has(t0 + Duration::from_secs(1), &k, 0.5));
    }

    #[test]
    fn refilled_buckets_are_dropped() {
        let mut buckets = Buckets::new(0.01);
        let t0 = Instant::now();
        for i in 0..100 {
            buckets.try_take(t0, &[draw(&format!("p{i}"), Kind::Write, 1.0)]).unwrap();
        }
        assert_eq!(buckets.len(), 100);
        // A second later they have all refilled: dropped at the next sweep.
        buckets.try_take(t0 + Duration::from_millis(1001), &[draw("x", Kind::Write, 10.0)]).unwrap();
        assert_eq!(buckets.len(), 1, "the 100 refilled in 0.1 s and were dropped; x is empty");
        buckets.try_take(t0 + Duration::from_millis(1500), &[]).unwrap();
        assert_eq!(buckets.len(), 1, "sweeps run at most once a second");
        buckets.try_take(t0 + Duration::from_millis(3000), &[]).unwrap();
        assert!(buckets.is_empty());
    }
}

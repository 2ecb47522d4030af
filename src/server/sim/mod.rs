//! Traffic, throttling and the stream's shards, simulated on loopback: the
//! load generator, the throttle proxy that enforces DynamoDB's per-partition
//! limits in front of a local engine, a stream of many shards in front of one
//! (`streams`), a local Lambda event source mapping (`lambda`), and the
//! rehearsals that run them.

pub mod consumer_rate;
pub mod counters_rehearsal;
pub mod day_rehearsal;
pub mod lambda;
pub mod loadgen;
pub mod orders;
pub mod plan_rehearsal;
pub mod rehearse;
pub mod report;
pub mod streams;
pub mod throttle;
pub mod wire;

//! Traffic and throttling, simulated on loopback: the load generator, the
//! throttle proxy that enforces DynamoDB's per-partition limits in front of a
//! local engine, and the hot-partition rehearsal that runs both.

pub mod loadgen;
pub mod rehearse;
pub mod throttle;

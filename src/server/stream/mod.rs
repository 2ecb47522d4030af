//! The orders table's stream and what follows from it: the consumer and what
//! a record means for the counters, live push to dashboards on this instance
//! and on others, and reconciliation of the counters against the table.

pub mod consumer;
pub mod counters;
pub mod hotkeys;
pub mod lag;
pub mod lambda;
pub mod live;
pub mod pricing;
pub mod quality;
pub mod reconcile;
pub mod registry;
pub mod replay;

//! Everything that runs only on the server: the store, the HTTP API and the
//! command line. Compiled only with the `ssr` feature, so none of it (nor
//! the AWS SDK) reaches the wasm bundle.

pub mod api;
pub mod auth;
pub mod bulk;
pub mod capacity;
pub mod cli;
pub mod config;
pub mod consumer;
pub mod counters;
pub mod cursor;
pub mod embedded;
pub mod error;
pub mod export;
pub mod files;
pub mod follower;
pub mod keys;
pub mod live;
pub mod loadgen;
pub mod middleware;
pub mod reconcile;
pub mod rehearse;
pub mod seed;
pub mod serve;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod throttle;

//! Everything that runs only on the server, compiled only with the `ssr`
//! feature, so none of it (nor the AWS SDK) reaches the wasm bundle. One
//! folder per concern:
//!
//! - `http`: the router, the JSON API, middleware, telemetry, exports;
//! - `auth`: who is asking and what they may do;
//! - `service`: what the API and the pages ask for, input checked;
//! - `stream`: the stream consumer, its counters, live push, reconciliation;
//! - `store`: the only code that talks to DynamoDB, with the key schema;
//! - `capacity`: consumed units, the planner and the advisor (arithmetic);
//! - `cli`: the command line, its settings, demo data;
//! - `deploy`: production on AWS as code (the CloudFormation template);
//! - `telemetry`, `fs`: below every layer: the Prometheus names and recorder,
//!   and files only this user may read;
//! - `sim`: traffic and throttling simulated (loadgen, the throttle proxy,
//!   the rehearsal).

pub mod auth;
pub mod capacity;
pub mod cli;
pub mod cursor;
pub mod deploy;
pub mod error;
pub mod fs;
pub mod http;
pub mod rate_limit;
pub mod rules;
pub mod service;
pub mod sim;
pub mod store;
pub mod stream;
pub mod telemetry;

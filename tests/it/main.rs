//! The integration tests, one binary: linking the AWS SDK, Leptos and the
//! app once instead of once per file, and running every file's tests side by
//! side (most of a test's time is waiting on an engine, a lease or a stream).
//! Each file is a module, by subject; `common` is what they share: the two
//! engines, the app on port 0, consumers and counter checks.

mod common;

mod access;
mod auth;
mod autoscaling;
mod capacity;
mod chaos;
mod cli;
mod day;
mod delivery;
mod deploy;
mod docs;
mod foreign;
mod hardening;
mod iam;
mod image;
mod integration;
mod lambda;
mod minutes;
mod oidc;
mod openapi;
mod proxies;
mod ready;
mod reconcile;
mod registry;
mod replay;
mod security;
mod shards;
mod throttle;
mod workflows;
mod writers;

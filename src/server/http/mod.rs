//! HTTP: the router and the connection loop (`serve`), the JSON API, the
//! middleware every request passes, telemetry, and the exports' formats.

pub mod api;
pub mod config;
pub mod export;
pub mod middleware;
pub mod serve;
pub mod telemetry;

//! HTTP: the router and the connection loop (`serve`), the state every
//! route is handed (`state`), the JSON API, the middleware every request
//! passes, telemetry, and the exports' formats.

pub mod api;
pub mod config;
pub mod export;
pub mod middleware;
pub mod serve;
pub mod state;
pub mod telemetry;

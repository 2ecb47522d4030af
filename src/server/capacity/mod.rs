//! Capacity planning for the orders table and its indexes, as pure
//! arithmetic over figures the caller supplies (no store access here; what
//! the store recorded is `store::usage`):
//!
//! - `advisor`: from a resource's consumed capacity, minute by minute, what
//!   on-demand and provisioned (with auto scaling) would cost, and which mode
//!   to choose;
//! - `costs`: what the program's writes cost (an order's, the counters'),
//!   from the definitions it writes with;
//! - `planner`: how many write shards GSI2 needs for a peak order rate, and
//!   what that many shards cost a reader of the PENDING list;
//! - `history`: the persisted minutes as the advisor's series;
//! - `sources`: where each figure comes from (the stream, CloudWatch, this
//!   app's calls), and a day's figures as the chosen source gives them;
//! - `readiness`: a sale plan's go/no-go, check by check, over figures the
//!   service gathers;
//! - `schedule`: when Application Auto Scaling's scheduled actions run;
//! - `report`: the capacity page's figures, the planner and the advisor run
//!   over them.

pub mod advisor;
pub mod costs;
pub mod history;
pub mod planner;
pub mod readiness;
pub mod report;
pub mod schedule;
pub mod sources;

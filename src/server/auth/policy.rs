//! Who may reach which route: the one table every request is checked
//! against (the JSON API, the server functions and the pages alike).
//! Deny by default: a server function missing from the table needs an
//! admin; any other unknown path needs a sign-in (the router then answers
//! 404).

use crate::model::Permission;
use axum::http::Method;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No sign-in: probes, static files, the sign-in flow itself.
    Public,
    /// Any signed-in user (the answer is 404 or 405).
    SignedIn,
    Needs(Permission),
}

/// The access `method` on `path` needs.
pub fn access(method: &Method, path: &str) -> Access {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["healthz"] | ["readyz"] | ["login"] | ["favicon.ico"] => Access::Public,
        ["pkg", ..] | ["auth", ..] => Access::Public,
        ["api", "fn", name] => server_function(name),
        ["api", rest @ ..] => api(method, rest),
        // Prometheus scrapes it with an API token (viewer is enough).
        [""] | ["capacity"] | ["metrics"] => Access::Needs(Permission::ViewOperations),
        ["orders", _] | ["customers", _] | ["search"] => Access::Needs(Permission::ViewOrders),
        ["audit"] | ["admin"] => Access::Needs(Permission::Administer),
        _ => Access::SignedIn,
    }
}

fn server_function(name: &str) -> Access {
    match name {
        "me" | "sign-in-options" => Access::Public,
        "dashboard" | "capacity" | "day" => Access::Needs(Permission::ViewOperations),
        "order" | "order-history" | "customer-orders" | "search" => Access::Needs(Permission::ViewOrders),
        // Cancelling is the least a status change needs; the service checks
        // the change asked for (see `Permission::to_change_status`).
        "change-status" | "start-bulk" | "bulk-report" | "cancel-bulk" => Access::Needs(Permission::CancelOrder),
        _ => Access::Needs(Permission::Administer),
    }
}

fn api(method: &Method, rest: &[&str]) -> Access {
    let post = method == Method::POST;
    match rest {
        ["pending" | "pending.csv" | "pending.jsonl"] | ["metrics", ..] | ["live"] | ["capacity", ..] => {
            Access::Needs(Permission::ViewOperations)
        }
        // Cancelling is the least a bulk change needs; the service checks
        // the change asked for.
        ["bulk", ..] => Access::Needs(Permission::CancelOrder),
        ["me"] => Access::SignedIn,
        ["orders"] if post => Access::Needs(Permission::ChangeOrders),
        ["orders", _, "status"] if post => Access::Needs(Permission::CancelOrder),
        ["orders", _] | ["orders", _, "history"] | ["customers", _, "orders" | "orders.csv"] => {
            Access::Needs(Permission::ViewOrders)
        }
        ["audit"] | ["admin", ..] => Access::Needs(Permission::Administer),
        _ => Access::SignedIn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_what_their_data_is_worth() {
        let get = Method::GET;
        let post = Method::POST;
        let cases = [
            (&get, "/healthz", Access::Public),
            (&get, "/pkg/northwind-ops.wasm", Access::Public),
            (&post, "/auth/login", Access::Public),
            (&get, "/", Access::Needs(Permission::ViewOperations)),
            (&get, "/orders/o-1", Access::Needs(Permission::ViewOrders)),
            (&get, "/audit", Access::Needs(Permission::Administer)),
            (&get, "/api/pending", Access::Needs(Permission::ViewOperations)),
            (&get, "/api/live", Access::Needs(Permission::ViewOperations)),
            (&get, "/api/capacity", Access::Needs(Permission::ViewOperations)),
            (&get, "/capacity", Access::Needs(Permission::ViewOperations)),
            (&get, "/metrics", Access::Needs(Permission::ViewOperations)),
            (&post, "/api/fn/capacity", Access::Needs(Permission::ViewOperations)),
            (&get, "/api/orders/o-1", Access::Needs(Permission::ViewOrders)),
            (&post, "/api/orders", Access::Needs(Permission::ChangeOrders)),
            (&post, "/api/orders/o-1/status", Access::Needs(Permission::CancelOrder)),
            (&get, "/api/admin/users", Access::Needs(Permission::Administer)),
            (&post, "/api/fn/dashboard", Access::Needs(Permission::ViewOperations)),
            (&post, "/api/fn/change-status", Access::Needs(Permission::CancelOrder)),
            (&post, "/api/fn/me", Access::Public),
            (&post, "/api/fn/something-new", Access::Needs(Permission::Administer)),
            (&get, "/api/nothing", Access::SignedIn),
            (&get, "/nothing", Access::SignedIn),
        ];
        for (method, path, want) in cases {
            assert_eq!(access(method, path), want, "{method} {path}");
        }
    }
}

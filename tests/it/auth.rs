//! Who may see and change what, against the real engines: every route the
//! router has (the JSON API, the pages, the server functions, the sign-in
//! flow, read from the router's own table) × {no credentials, viewer,
//! support, ops, admin, a revoked token}; static files public by where they
//! are; redirects after signing in and out that stay on this site; password
//! sign-in, sign-out and sessions shared by two instances;
//! the audit trail written in the same transaction as each change; cross-site
//! and wrong-host requests refused.

use crate::common;

use common::{TestApp, engines, new_order_json};
use northwind_ops::model::{Access, Actor, Rehearsal, RehearsalShape, RehearsalState, Role};
use northwind_ops::server::auth::access::Declared;
use northwind_ops::server::auth::access::is_api;
use northwind_ops::server::auth::accounts;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use std::net::SocketAddr;

/// Who asks.
#[derive(Clone, Copy, Debug)]
enum Caller {
    Nobody,
    As(Role),
    Revoked,
}

const CALLERS: [Caller; 6] = [
    Caller::Nobody,
    Caller::As(Role::Viewer),
    Caller::As(Role::Support),
    Caller::As(Role::Ops),
    Caller::As(Role::Admin),
    Caller::Revoked,
];

/// A server function declared with no access. Leptos registers it and the
/// app routes it like any other; the guard refuses it to everyone, admins
/// included: a route added without its access cannot be reached.
#[leptos::server(prefix = "/api/fn", endpoint = "declared-with-nothing", input = leptos::server_fn::codec::Json)]
async fn declared_with_nothing() -> Result<String, leptos::prelude::ServerFnError> {
    Ok("reached".into())
}

/// One request, made fresh for each caller (writes need their own order).
struct Request {
    method: reqwest::Method,
    path: String,
    body: Option<Body>,
    /// What an allowed caller gets.
    ok: StatusCode,
    /// A stream that does not end: only its status is read.
    stream: bool,
}

enum Body {
    Json(Value),
    Form(Vec<(&'static str, String)>),
}

fn get(path: impl Into<String>, ok: StatusCode) -> Request {
    Request { method: reqwest::Method::GET, path: path.into(), body: None, ok, stream: false }
}

fn post(path: impl Into<String>, body: Value, ok: StatusCode) -> Request {
    Request { method: reqwest::Method::POST, path: path.into(), body: Some(Body::Json(body)), ok, stream: false }
}

fn form(path: impl Into<String>, fields: &[(&'static str, &str)], ok: StatusCode) -> Request {
    let fields = fields.iter().map(|(k, v)| (*k, v.to_string())).collect();
    Request { method: reqwest::Method::POST, path: path.into(), body: Some(Body::Form(fields)), ok, stream: false }
}

/// A PENDING order of its own, made as an ops script would.
async fn fresh_order(app: &TestApp, n: &mut u32) -> String {
    *n += 1;
    let id = format!("m-{n:05}");
    let (status, body) = app.post("/api/orders", new_order_json(&id, "cust-matrix")).await;
    assert_eq!(status, 201, "{body}");
    id
}

/// A bulk cancellation of a fresh order, started by an admin: its id.
async fn bulk_run(app: &TestApp, n: &mut u32) -> String {
    let body = bulk_request(&fresh_order(app, n).await);
    let (status, started) = app.post("/api/bulk/status", body).await;
    assert_eq!(status, 202, "{started}");
    started["id"].as_str().unwrap().to_string()
}

/// A sale plan of its own, made by an admin: its name.
async fn fresh_plan(app: &TestApp, n: &mut u32) -> String {
    *n += 1;
    let name = format!("plan-{n}");
    let (status, body) = app.post("/api/sales", sale_plan(&name)).await;
    assert_eq!(status, 201, "{body}");
    name
}

/// A sale plan whose rehearsal is claimed as running (by the store, as a
/// start would): its name, the same each time.
async fn rehearsing_plan(app: &TestApp) -> String {
    let name = "rehearsing";
    let (status, body) = app.post("/api/sales", sale_plan(name)).await;
    assert!(status == 201 || status == 409, "{body}");
    let plan = app.service.sale_plan(name).await.unwrap();
    let running = Rehearsal {
        plan: name.into(),
        plan_updated_at: plan.updated_at,
        plan_peak_orders_per_second: plan.peak_orders_per_second,
        started_at: chrono::Utc::now(),
        finished_at: None,
        by: "matrix".into(),
        state: RehearsalState::Running,
        verdict: None,
        reason: "running".into(),
        shape: RehearsalShape {
            scale: 1.0,
            shards: 1,
            peak_orders_per_second: 1.0,
            base_orders_per_second: 0.1,
            ramp_seconds: 1,
            hold_seconds: 1,
            decay_seconds: 1,
            tail_seconds: 1,
            writers: 1,
            written_by: Default::default(),
        },
        figures: None,
    };
    // Claimed once; later calls find it claimed.
    app.store.start_rehearsal(&running, 0).await.unwrap();
    name.into()
}

fn sale_plan(name: &str) -> Value {
    let start = format!("{}T09:00:00Z", chrono::Utc::now().date_naive() + chrono::Duration::days(1));
    json!({"name": name, "peakOrdersPerSecond": 50, "start": start, "rampMinutes": 5, "holdMinutes": 10, "decayMinutes": 5})
}

fn bulk_request(order_id: &str) -> Value {
    json!({"orderIds": [order_id], "from": "PENDING", "to": "CANCELLED", "reason": "matrix"})
}

/// A request that reaches `route` and what it answers when let through.
/// Every route the router has needs one here: a route added without a
/// sample fails the matrix until it gets one.
async fn sample(app: &TestApp, route: &Declared, n: &mut u32) -> Request {
    let ok = StatusCode::OK;
    let order = "m-base";
    let method = route.method.as_ref().map_or("ANY", |m| m.as_str());
    match (method, route.path.as_str()) {
        ("GET", "/healthz") => get("/healthz", ok),
        ("GET", "/readyz") => get("/readyz", ok),
        // Pages.
        ("GET", "/") => get("/", ok),
        ("GET", "/orders/{id}") => get(format!("/orders/{order}"), ok),
        ("GET", "/customers/{id}") => get("/customers/cust-matrix", ok),
        // The page sends the browser on to the order (in the browser).
        ("GET", "/search") => get(format!("/search?q={order}"), ok),
        ("GET", "/login") => get("/login", ok),
        ("GET", "/audit") => get("/audit", ok),
        ("GET", "/admin") => get("/admin?account=test-admin", ok),
        ("GET", "/capacity") => get("/capacity", ok),
        ("GET", "/sales") => get("/sales", ok),
        // Signing in and out: the forms, posted from this site.
        ("POST", "/auth/login") => form(
            "/auth/login",
            &[("name", "nobody"), ("password", "not a password"), ("next", "/")],
            StatusCode::SEE_OTHER,
        ),
        ("POST", "/auth/logout") => form("/auth/logout", &[], StatusCode::SEE_OTHER),
        // No identity provider in this app: the page says so.
        ("GET", "/auth/oidc") => get("/auth/oidc", StatusCode::NOT_FOUND),
        ("GET", "/auth/callback") => get("/auth/callback?code=c&state=s", StatusCode::SEE_OTHER),
        // The JSON API.
        ("GET", "/api/pending") => get("/api/pending", ok),
        ("GET", "/api/pending.csv") => get("/api/pending.csv", ok),
        ("GET", "/api/pending.jsonl") => get("/api/pending.jsonl", ok),
        ("GET", "/api/metrics/pending") => get("/api/metrics/pending", ok),
        ("GET", "/api/capacity") => get("/api/capacity", ok),
        ("GET", "/api/quality") => get("/api/quality", ok),
        ("GET", "/api/live") => Request { stream: true, ..get("/api/live", ok) },
        // Prometheus scrapes with an API token: a viewer's is enough.
        ("GET", "/metrics") => get("/metrics", ok),
        ("GET", "/api/orders/{order_id}") => get(format!("/api/orders/{order}"), ok),
        ("GET", "/api/orders/{order_id}/history") => get(format!("/api/orders/{order}/history"), ok),
        ("GET", "/api/customers/{customer_id}/orders") => get("/api/customers/cust-matrix/orders", ok),
        ("GET", "/api/customers/{customer_id}/orders.csv") => get("/api/customers/cust-matrix/orders.csv", ok),
        ("GET", "/api/me") => get("/api/me", ok),
        ("GET", "/api/openapi.json") => get("/api/openapi.json", ok),
        ("ANY", "/api/{*rest}") => get("/api/nothing-here", StatusCode::NOT_FOUND),
        ("POST", "/api/orders") => {
            *n += 1;
            post("/api/orders", new_order_json(&format!("c-{n:05}"), "cust-matrix"), StatusCode::CREATED)
        }
        ("POST", "/api/orders/{order_id}/status") => {
            let id = fresh_order(app, n).await;
            let body = json!({"from": "PENDING", "to": "CANCELLED", "reason": "matrix"});
            post(format!("/api/orders/{id}/status"), body, ok)
        }
        ("POST", "/api/bulk/status") => {
            post("/api/bulk/status", bulk_request(&fresh_order(app, n).await), StatusCode::ACCEPTED)
        }
        ("GET", "/api/bulk/{id}") => get(format!("/api/bulk/{}", bulk_run(app, n).await), ok),
        ("DELETE", "/api/bulk/{id}") => {
            let id = bulk_run(app, n).await;
            Request { method: reqwest::Method::DELETE, ..get(format!("/api/bulk/{id}"), ok) }
        }
        ("GET", "/api/audit") => get("/api/audit", ok),
        ("GET", "/api/consumer/mode") => get("/api/consumer/mode", ok),
        // Switching to the mode it counts in already: no new version.
        ("PUT", "/api/consumer/mode") => {
            Request { method: reqwest::Method::PUT, ..post("/api/consumer/mode", json!({"mode": "serve"}), ok) }
        }
        ("GET", "/api/sales") => get("/api/sales", ok),
        ("POST", "/api/sales") => {
            *n += 1;
            post("/api/sales", sale_plan(&format!("new-{n}")), StatusCode::CREATED)
        }
        ("GET", "/api/sales/{name}") => get(format!("/api/sales/{}", fresh_plan(app, n).await), ok),
        ("PUT", "/api/sales/{name}") => {
            let name = fresh_plan(app, n).await;
            Request { method: reqwest::Method::PUT, ..post(format!("/api/sales/{name}"), sale_plan(&name), ok) }
        }
        ("DELETE", "/api/sales/{name}") => {
            let name = fresh_plan(app, n).await;
            Request { method: reqwest::Method::DELETE, ..get(format!("/api/sales/{name}"), ok) }
        }
        ("POST", "/api/sales/{name}/shards") => {
            post(format!("/api/sales/{}/shards", fresh_plan(app, n).await), json!({}), ok)
        }
        ("GET", "/api/ready") => get(format!("/api/ready?plan={}", fresh_plan(app, n).await), ok),
        // A start reaches the service, which finds one running: a conflict
        // (no rehearsal is run by the matrix).
        ("POST", "/api/sales/{name}/rehearsal") => {
            post(format!("/api/sales/{}/rehearsal", rehearsing_plan(app).await), json!({}), StatusCode::CONFLICT)
        }
        ("GET", "/api/sales/{name}/rehearsal") => get(format!("/api/sales/{}/rehearsal", fresh_plan(app, n).await), ok),
        ("GET", "/api/sales/{name}/rehearsal/live") => {
            Request { stream: true, ..get(format!("/api/sales/{}/rehearsal/live", fresh_plan(app, n).await), ok) }
        }
        ("GET", "/api/sales/{name}/outcome") => get(format!("/api/sales/{}/outcome", fresh_plan(app, n).await), ok),
        ("GET", "/api/admin/users") => get("/api/admin/users", ok),
        ("GET", "/api/admin/tokens") => get("/api/admin/tokens", ok),
        ("POST", "/api/admin/tokens") => {
            *n += 1;
            post("/api/admin/tokens", json!({"name": format!("t-{n}"), "role": "viewer"}), StatusCode::CREATED)
        }
        ("DELETE", "/api/admin/tokens/{name}") => {
            *n += 1;
            let name = format!("r-{n}");
            accounts::create_token(&app.store, &name, Role::Viewer, "tests").await.unwrap();
            Request { method: reqwest::Method::DELETE, ..get(format!("/api/admin/tokens/{name}"), ok) }
        }
        ("POST", "/api/admin/users/{name}/disable") => {
            *n += 1;
            let name = format!("u-{n}");
            accounts::add_user(&app.store, &name, Role::Viewer, "a long enough password".into()).await.unwrap();
            post(format!("/api/admin/users/{name}/disable"), json!({}), ok)
        }
        ("POST", "/api/admin/users") => {
            *n += 1;
            let body = json!({"name": format!("a-{n}"), "role": "viewer", "password": "a long enough password"});
            post("/api/admin/users", body, StatusCode::CREATED)
        }
        ("POST", "/api/admin/users/{name}/role") => {
            *n += 1;
            let name = format!("s-{n}");
            accounts::add_user(&app.store, &name, Role::Viewer, "a long enough password".into()).await.unwrap();
            post(format!("/api/admin/users/{name}/role"), json!({"role": "support"}), ok)
        }
        // Server functions.
        ("POST", "/api/fn/admin") => post("/api/fn/admin", json!({}), ok),
        ("POST", "/api/fn/add-account") => {
            *n += 1;
            let new = json!({"name": format!("fa-{n}"), "role": "viewer", "password": "a long enough password"});
            post("/api/fn/add-account", json!({"new": new}), ok)
        }
        ("POST", "/api/fn/disable-account") => {
            *n += 1;
            let name = format!("fd-{n}");
            accounts::add_user(&app.store, &name, Role::Viewer, "a long enough password".into()).await.unwrap();
            post("/api/fn/disable-account", json!({"name": name}), ok)
        }
        ("POST", "/api/fn/set-role") => {
            *n += 1;
            let name = format!("fs-{n}");
            accounts::add_user(&app.store, &name, Role::Viewer, "a long enough password".into()).await.unwrap();
            post("/api/fn/set-role", json!({"name": name, "role": "ops"}), ok)
        }
        ("POST", "/api/fn/create-token") => {
            *n += 1;
            post("/api/fn/create-token", json!({"new": {"name": format!("ft-{n}"), "role": "viewer"}}), ok)
        }
        ("POST", "/api/fn/revoke-token") => {
            *n += 1;
            let name = format!("fr-{n}");
            accounts::create_token(&app.store, &name, Role::Viewer, "tests").await.unwrap();
            post("/api/fn/revoke-token", json!({"name": name}), ok)
        }
        ("POST", "/api/fn/dashboard") => post("/api/fn/dashboard", json!({"params": {}}), ok),
        ("POST", "/api/fn/capacity") => post("/api/fn/capacity", json!({"date": null}), ok),
        ("POST", "/api/fn/quality") => post("/api/fn/quality", json!({"date": null}), ok),
        ("POST", "/api/fn/day") => post("/api/fn/day", json!({"date": null}), ok),
        ("POST", "/api/fn/order") => post("/api/fn/order", json!({"order_id": order}), ok),
        ("POST", "/api/fn/order-history") => post("/api/fn/order-history", json!({"order_id": order}), ok),
        ("POST", "/api/fn/customer-orders") => {
            post("/api/fn/customer-orders", json!({"customer_id": "cust-matrix", "params": {}}), ok)
        }
        ("POST", "/api/fn/search") => post("/api/fn/search", json!({"query": order}), ok),
        ("POST", "/api/fn/change-status") => {
            let id = fresh_order(app, n).await;
            let body = json!({"order_id": id, "from": "PENDING", "to": "CANCELLED", "reason": "matrix"});
            post("/api/fn/change-status", body, ok)
        }
        ("POST", "/api/fn/start-bulk") => {
            post("/api/fn/start-bulk", json!({"request": bulk_request(&fresh_order(app, n).await)}), ok)
        }
        ("POST", "/api/fn/bulk-report") => post("/api/fn/bulk-report", json!({"id": bulk_run(app, n).await}), ok),
        ("POST", "/api/fn/cancel-bulk") => post("/api/fn/cancel-bulk", json!({"id": bulk_run(app, n).await}), ok),
        ("POST", "/api/fn/audit") => post("/api/fn/audit", json!({"params": {}}), ok),
        ("POST", "/api/fn/me") => post("/api/fn/me", json!({}), ok),
        ("POST", "/api/fn/sale-plans") => post("/api/fn/sale-plans", json!({}), ok),
        ("POST", "/api/fn/readiness") => post("/api/fn/readiness", json!({"plan": fresh_plan(app, n).await}), ok),
        ("POST", "/api/fn/save-sale-plan") => {
            *n += 1;
            post("/api/fn/save-sale-plan", json!({"original": null, "input": sale_plan(&format!("fn-{n}"))}), ok)
        }
        ("POST", "/api/fn/delete-sale-plan") => {
            post("/api/fn/delete-sale-plan", json!({"name": fresh_plan(app, n).await}), ok)
        }
        ("POST", "/api/fn/write-sale-shards") => {
            post("/api/fn/write-sale-shards", json!({"name": fresh_plan(app, n).await}), ok)
        }
        ("POST", "/api/fn/rehearsals") => post("/api/fn/rehearsals", json!({"name": fresh_plan(app, n).await}), ok),
        ("POST", "/api/fn/start-rehearsal") => {
            post("/api/fn/start-rehearsal", json!({"name": rehearsing_plan(app).await}), StatusCode::CONFLICT)
        }
        ("POST", "/api/fn/sale-outcome") => post("/api/fn/sale-outcome", json!({"name": fresh_plan(app, n).await}), ok),
        ("POST", "/api/fn/sign-in-options") => post("/api/fn/sign-in-options", json!({}), ok),
        ("POST", "/api/fn/declared-with-nothing") => post("/api/fn/declared-with-nothing", json!({}), ok),
        (method, path) => panic!("the router has {method} {path}, and the matrix has no request for it: add one"),
    }
}

/// What `caller` must get from a route that declares `access` (`None`:
/// nothing) and answers `ok`.
fn expected(access: Option<Access>, caller: Caller, page: bool, ok: StatusCode) -> StatusCode {
    let anonymous = if page { StatusCode::SEE_OTHER } else { StatusCode::UNAUTHORIZED };
    let Some(access) = access else { return StatusCode::FORBIDDEN };
    match (access, caller) {
        (Access::Open, _) => ok,
        (_, Caller::Revoked) => StatusCode::UNAUTHORIZED,
        (Access::Public, _) => ok,
        (_, Caller::Nobody) => anonymous,
        (Access::SignedIn, Caller::As(_)) => ok,
        (Access::Needs(permission), Caller::As(role)) if role.can(permission) => ok,
        (Access::Needs(_), Caller::As(_)) => StatusCode::FORBIDDEN,
    }
}

/// The table the app's router was built with, the way it builds it.
fn route_table(app: &TestApp) -> Vec<Declared> {
    let addr: SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let args = common::serve_args(&[]);
    northwind_ops::server::http::serve::route_table(app.service.clone(), &args, addr).unwrap().routes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_server_function_leptos_knows_is_in_the_router_with_its_access() {
    let app = TestApp::spawn(common::Engine::Dynoxide).await;
    let routes = route_table(&app);
    app.stop().await;
    let find = |method: &str, path: &str| {
        routes.iter().find(|r| r.path == path && r.method.as_ref().is_some_and(|m| m.as_str() == method))
    };
    let pages = northwind_ops::server::http::serve::page_routes();
    assert!(pages.len() >= 7, "{} pages", pages.len());
    // Each page once in app::PAGES, and nothing else there.
    assert_eq!(northwind_ops::app::PAGES.len(), pages.len(), "app::PAGES names a page the router does not have");
    for page in &pages {
        let declared = find("GET", page.path()).unwrap_or_else(|| panic!("page {} is not routed", page.path()));
        assert!(declared.access.is_some(), "page {} declares no access in app::PAGES", page.path());
    }
    let functions: Vec<_> = leptos::server_fn::axum::server_fn_paths().collect();
    assert!(functions.len() >= 15, "{functions:?}");
    for (path, method) in functions {
        let declared = find(method.as_str(), path).unwrap_or_else(|| panic!("server function {path} is not routed"));
        // The one declared with nothing is this test's own.
        let want_declared = path != "/api/fn/declared-with-nothing";
        assert_eq!(declared.access.is_some(), want_declared, "server function {path}: access!(...) beside it");
    }
    let undeclared: Vec<_> = routes.iter().filter(|r| r.access.is_none()).map(|r| r.path.as_str()).collect();
    assert_eq!(undeclared, ["/api/fn/declared-with-nothing"], "every other route declares its access");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_role_as_it_declares() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let (status, _) = app.post("/api/orders", new_order_json("m-base", "cust-matrix")).await;
        assert_eq!(status, 201);
        let revoked = accounts::create_token(&app.store, "revoked-admin", Role::Admin, "tests").await.unwrap();
        app.store.revoke_token("revoked-admin").await.unwrap();
        let no_redirects = |token: Option<&str>| {
            let mut headers = reqwest::header::HeaderMap::new();
            if let Some(token) = token {
                headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
            }
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .default_headers(headers)
                .build()
                .unwrap()
        };
        let routes = route_table(&app);
        assert!(routes.len() >= 50, "{} routes", routes.len());
        let mut n = 0;
        let mut cells = 0;
        for route in &routes {
            for caller in CALLERS {
                let token = match caller {
                    Caller::Nobody => None,
                    Caller::As(role) => Some(app.tokens[&role].clone()),
                    Caller::Revoked => Some(revoked.clone()),
                };
                let request = sample(&app, route, &mut n).await;
                let page = !is_api(&request.path);
                let mut call = no_redirects(token.as_deref())
                    .request(request.method.clone(), format!("{}{}", app.base, request.path))
                    .header("origin", app.base.clone());
                call = match &request.body {
                    Some(Body::Json(body)) => call.json(body),
                    Some(Body::Form(fields)) => call.form(fields),
                    None => call,
                };
                let started = std::time::Instant::now();
                let response = call.send().await.unwrap();
                let status = response.status();
                let text = if request.stream && status.is_success() {
                    String::new()
                } else {
                    response.text().await.unwrap_or_default()
                };
                let want = expected(route.access, caller, page, request.ok);
                // A 503 with an empty body is the request timeout (seen in
                // full runs, on /capacity, when another test's server listed
                // its routes mid-render: see `serve::page_routes`): how long
                // it took says so.
                let what =
                    format!("{engine:?} {:?} {} as {caller:?} after {:?}", route.method, route.path, started.elapsed());
                assert_eq!(status, want, "{what}: {}", text.chars().take(300).collect::<String>());
                if !page && !status.is_success() {
                    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {text}");
                }
                if page && status == StatusCode::FORBIDDEN && route.access.is_some() {
                    assert!(text.contains("This page needs the"), "{what}: the page names the role");
                }
                cells += 1;
            }
        }
        assert_eq!(cells, routes.len() * CALLERS.len());

        // The service checks again what a route lets through: support may
        // cancel but not confirm, through the API and the server function.
        let support = no_redirects(Some(&app.tokens[&Role::Support]));
        let id = fresh_order(&app, &mut n).await;
        let confirm = json!({"from": "PENDING", "to": "CONFIRMED"});
        let api = support.post(format!("{}/api/orders/{id}/status", app.base)).json(&confirm).send().await.unwrap();
        assert_eq!(api.status(), StatusCode::FORBIDDEN, "{engine:?}");
        let body = json!({"order_id": id, "from": "PENDING", "to": "CONFIRMED", "reason": null});
        let function = support.post(format!("{}/api/fn/change-status", app.base)).json(&body).send().await.unwrap();
        assert_eq!(function.status(), StatusCode::FORBIDDEN, "{engine:?}");
        let bulk = json!({"orderIds": [id], "from": "PENDING", "to": "CONFIRMED"});
        let started = support.post(format!("{}/api/bulk/status", app.base)).json(&bulk).send().await.unwrap();
        assert_eq!(started.status(), StatusCode::FORBIDDEN, "{engine:?}");
        assert_eq!(app.get(&format!("/api/orders/{id}")).await.1["status"], "PENDING");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_are_public_by_where_they_are_served_from() {
    let app = TestApp::spawn(common::Engine::Dynoxide).await;
    let revoked = accounts::create_token(&app.store, "revoked-static", Role::Admin, "tests").await.unwrap();
    app.store.revoke_token("revoked-static").await.unwrap();
    let plain = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    // The assets dir (`public/`, copied into the site root) and the pkg dir,
    // signed out, and with a credential that is no good: not even read.
    // The stylesheet's name carries a hash of its content (hash-files).
    let css = std::fs::read_dir("target/site/pkg")
        .unwrap()
        .filter_map(|entry| entry.unwrap().file_name().into_string().ok())
        .find(|name| name.starts_with("northwind-ops.") && name.ends_with(".css"))
        .expect("the build's stylesheet in target/site/pkg");
    let css = format!("/pkg/{css}");
    for (path, content_type) in
        [("/favicon.svg", "image/svg+xml"), ("/favicon.ico", "image/x-icon"), (css.as_str(), "text/css")]
    {
        for token in [None, Some(revoked.as_str())] {
            let mut request = plain.get(format!("{}{path}", app.base));
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path} with {token:?}");
            let got = response.headers()["content-type"].to_str().unwrap().to_string();
            assert!(got.starts_with(content_type), "{path}: {got}");
        }
    }
    // What is not a file there is a page, and pages need a sign-in.
    for path in ["/no-such-page", "/favicon.png", "/pkg/nothing.js", "/pkg/../Cargo.toml", "/public/favicon.svg"] {
        let response = plain.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{path}");
        assert!(response.headers()["location"].to_str().unwrap().starts_with("/login?next="), "{path}");
    }
    let signed_in = app.http.get(format!("{}/no-such-page", app.base)).send().await.unwrap();
    assert_eq!(signed_in.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

/// `next` values an attacker sends: as a browser reads each (tabs and line
/// breaks dropped, a backslash a slash), most name another site.
const FOREIGN: &[&str] = &[
    "/\t/evil.example",
    "\t//evil.example",
    "/\\/evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https:evil.example",
    "https://evil.example/",
    "/\n/evil.example",
    "/\r\n/evil.example",
    "//evil.example",
    " //evil.example",
    "/.//evil.example",
    "javascript:alert(document.domain)",
    // Encoded: a path of this site, whatever it holds.
    "/%09/evil.example",
    "/%0a/evil.example",
    "/%0d%0a/evil.example",
    "/%2F%2Fevil.example",
];

/// Honest targets, kept as they are, query and all.
const KEPT: &[&str] = &["/orders/o-1?x=1&y=2", "/?limit=50&days=3", "/customers/c-1"];

/// Where a browser showing `base` goes for `location`: the WHATWG URL parser
/// (the `url` crate, as browsers run it) resolving it.
fn lands(base: &Url, location: &str, what: &str) -> Url {
    let landed = base.join(location).unwrap_or_else(|e| panic!("{what}: Location {location:?}: {e}"));
    assert_eq!(landed.origin(), base.origin(), "{what}: Location {location:?} takes the browser to {landed}");
    landed
}

/// The `next` a sign-in page at `location` offers, which must stay here too.
fn offered_next(base: &Url, location: &str, what: &str) -> Option<String> {
    let page = lands(base, location, what);
    let next = page.query_pairs().find(|(k, _)| k == "next").map(|(_, v)| v.into_owned())?;
    lands(base, &next, &format!("{what}, the next it offers"));
    Some(next)
}

fn location(response: &reqwest::Response) -> String {
    response.headers().get("location").map(|l| l.to_str().unwrap().to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_signing_in_or_out_the_browser_stays_on_this_site() {
    let app = TestApp::spawn_with(common::Engine::Dynoxide, &[], &["--sign-in-attempts", "10000"]).await;
    let base = Url::parse(&app.base).unwrap();
    accounts::add_user(&app.store, "rita", Role::Support, "rita's long password".into()).await.unwrap();
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let sign_in = |password: &'static str, next: &'static str| {
        browser
            .post(format!("{}/auth/login", app.base))
            .header("origin", app.base.clone())
            .form(&[("name", "rita"), ("password", password), ("next", next)])
            .send()
    };
    for next in FOREIGN.iter().chain(KEPT) {
        let what = format!("sign-in with next={next:?}");
        let response = sign_in("rita's long password", next).await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{what}");
        lands(&base, &location(&response), &what);
        if KEPT.contains(next) {
            assert_eq!(location(&response), *next, "{what}: an honest target is kept");
        }
        let cookie = response
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_string())
            .find(|c| c.starts_with("nwo_session="))
            .expect("signed in");

        // A wrong password: back to the form, which offers the same next.
        let what = format!("a wrong password with next={next:?}");
        let again = sign_in("not the password", next).await.unwrap();
        assert_eq!(again.status(), StatusCode::SEE_OTHER, "{what}");
        let offered = offered_next(&base, &location(&again), &what);
        if KEPT.contains(next) {
            assert_eq!(offered.as_deref(), Some(*next), "{what}");
        }

        // Signing out, asked to come back to `next`.
        let what = format!("sign-out with next={next:?}");
        let out = browser
            .post(format!("{}/auth/logout", app.base))
            .header("origin", app.base.clone())
            .header("cookie", &cookie)
            .form(&[("next", next)])
            .send()
            .await
            .unwrap();
        assert_eq!(out.status(), StatusCode::SEE_OTHER, "{what}");
        assert!(location(&out).starts_with("/login?signed-out=1"), "{what}: {}", location(&out));
        let offered = offered_next(&base, &location(&out), &what);
        if KEPT.contains(next) {
            assert_eq!(offered.as_deref(), Some(*next), "{what}");
        }
    }

    // A page asked for signed out: to the sign-in page, which offers to come
    // back to it, and only to this site.
    for (path, back) in [("/?limit=50", Some("/?limit=50")), ("//evil.example", None), ("//evil.example/x?y=1", None)] {
        let response = browser.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{path}");
        let offered = offered_next(&base, &location(&response), &format!("signed out at {path}"));
        if let Some(back) = back {
            assert_eq!(offered.as_deref(), Some(back));
        }
    }
    app.stop().await;
}

/// Signs in through the login form; returns the session cookie.
async fn sign_in(app: &TestApp, name: &str, password: &str) -> (StatusCode, String, Option<String>) {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = client
        .post(format!("{}/auth/login", app.base))
        .header("origin", app.base.clone())
        .form(&[("name", name), ("password", password), ("next", "/orders/o-1")])
        .send()
        .await
        .unwrap();
    let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_string()).unwrap_or_default();
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .find(|c| c.starts_with("nwo_session="));
    (response.status(), location, cookie)
}

/// The `name=value` part of a Set-Cookie header.
fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_string()
}

async fn me_with_cookie(base: &str, cookie: &str) -> StatusCode {
    reqwest::Client::new().get(format!("{base}/api/me")).header("cookie", cookie).send().await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_sessions_are_shared_by_instances_and_end_at_sign_out() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
        accounts::add_user(&app.store, "ben", Role::Viewer, "ben's long password".into()).await.unwrap();

        let (status, location, cookie) = sign_in(&app, "anna", "anna's long password").await;
        assert_eq!((status, location.as_str()), (StatusCode::SEE_OTHER, "/orders/o-1"), "{engine:?}");
        let set_cookie = cookie.expect("a session cookie");
        assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"), "{set_cookie}");
        assert!(!set_cookie.contains("Secure"), "plain-HTTP loopback: {set_cookie}");
        let cookie = cookie_pair(&set_cookie);
        assert_eq!(me_with_cookie(&app.base, &cookie).await, StatusCode::OK);

        // Another instance on the same tables knows the session.
        let other = app.another_instance().await;
        let me: Value = reqwest::Client::new()
            .get(format!("{}/api/me", other.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (me["name"].as_str(), me["role"].as_str(), me["method"].as_str()),
            (Some("anna"), Some("support"), Some("password"))
        );

        // Wrong password, unknown user, disabled user: one answer, no hint.
        let wrong = sign_in(&app, "anna", "not anna's password").await;
        let unknown = sign_in(&app, "nobody", "anna's long password").await;
        app.store.change_account("ben", &northwind_ops::server::store::AccountChange::Disable).await.unwrap();
        let disabled = sign_in(&app, "ben", "ben's long password").await;
        for (status, location, cookie) in [&wrong, &unknown, &disabled] {
            assert_eq!(*status, StatusCode::SEE_OTHER);
            assert_eq!(location, "/login?error=wrong&next=/orders/o-1");
            assert!(cookie.is_none(), "no session for a failed sign-in");
        }

        // Signing out on one instance ends the session everywhere.
        let out = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .post(format!("{}/auth/logout", other.base))
            .header("cookie", &cookie)
            .header("origin", other.base.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(out.status(), StatusCode::SEE_OTHER);
        assert_eq!(me_with_cookie(&other.base, &cookie).await, StatusCode::UNAUTHORIZED, "at once where it ended");
        // The other instance may answer from what it read within the last
        // second (`ACCESS_TTL`), no longer.
        let ended = std::time::Instant::now();
        let reach = northwind_ops::server::store::ACCESS_TTL + std::time::Duration::from_millis(300);
        while me_with_cookie(&app.base, &cookie).await != StatusCode::UNAUTHORIZED {
            assert!(ended.elapsed() < reach, "{engine:?}: the session outlived its sign-out on the other instance");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }

        // A disabled account's live session ends at its next request.
        let (_, _, again) = sign_in(&app, "anna", "anna's long password").await;
        let again = cookie_pair(&again.unwrap());
        assert_eq!(me_with_cookie(&app.base, &again).await, StatusCode::OK);
        app.store.change_account("anna", &northwind_ops::server::store::AccountChange::Disable).await.unwrap();
        assert_eq!(me_with_cookie(&app.base, &again).await, StatusCode::UNAUTHORIZED);
        other.stop().await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_requests_from_another_origin_or_host_are_refused() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        accounts::add_user(&app.store, "olga", Role::Ops, "olga's long password".into()).await.unwrap();
        let (_, _, cookie) = sign_in(&app, "olga", "olga's long password").await;
        let cookie = cookie_pair(&cookie.unwrap());
        app.post("/api/orders", new_order_json("x-1", "c-1")).await;
        let change = json!({"from": "PENDING", "to": "CONFIRMED"});
        let plain = reqwest::Client::new();
        let url = format!("{}/api/orders/x-1/status", app.base);
        let evil = plain
            .post(&url)
            .header("cookie", &cookie)
            .header("origin", "http://evil.example")
            .json(&change)
            .send()
            .await
            .unwrap();
        assert_eq!(evil.status(), StatusCode::FORBIDDEN, "{engine:?}");
        assert_eq!(app.get("/api/orders/x-1").await.1["status"], "PENDING", "nothing changed");
        let no_origin = plain.post(&url).header("cookie", &cookie).json(&change).send().await.unwrap();
        assert_eq!(no_origin.status(), StatusCode::FORBIDDEN, "a cookie alone proves nothing");
        let ours = plain
            .post(&url)
            .header("cookie", &cookie)
            .header("origin", app.base.clone())
            .json(&change)
            .send()
            .await
            .unwrap();
        assert_eq!(ours.status(), StatusCode::OK);
        // A bearer token needs no Origin: no ambient credential rides along.
        let (status, _) = app.post("/api/orders", new_order_json("x-2", "c-1")).await;
        assert_eq!(status, 201);
        // DNS rebinding: another host name pointing here is not answered.
        let rebound = plain
            .get(format!("{}/api/pending", app.base))
            .header("host", "evil.example")
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(rebound.status(), StatusCode::MISDIRECTED_REQUEST);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_recorded_with_it_and_only_with_it() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        assert_eq!(app.post("/api/orders", new_order_json("a-1", "c-1")).await.0, 201);
        // Two agents change the same order at once: one wins, one record.
        let ops = app.client_as(Some(Role::Ops));
        let support = app.client_as(Some(Role::Support));
        let url = format!("{}/api/orders/a-1/status", app.base);
        let (confirm, cancel) = tokio::join!(
            ops.post(&url).json(&json!({"from": "PENDING", "to": "CONFIRMED", "reason": "paid"})).send(),
            support.post(&url).json(&json!({"from": "PENDING", "to": "CANCELLED", "reason": "customer asked"})).send(),
        );
        let statuses = [confirm.unwrap().status(), cancel.unwrap().status()];
        assert!(
            statuses.contains(&StatusCode::OK) && statuses.contains(&StatusCode::CONFLICT),
            "{engine:?}: {statuses:?}"
        );
        // A stale `from` is refused and leaves no record.
        let stale = ops.post(&url).json(&json!({"from": "PENDING", "to": "CONFIRMED"})).send().await.unwrap();
        assert_eq!(stale.status(), StatusCode::CONFLICT);
        let (status, body) = app.get("/api/orders/a-1/history").await;
        assert_eq!(status, 200, "{body}");
        let history = body["history"].as_array().unwrap();
        assert_eq!(history.len(), 2, "{engine:?}: the creation and the one change that won: {body}");
        assert_eq!(history[0]["from"], Value::Null);
        assert_eq!(history[0]["to"], "PENDING");
        assert_eq!(history[0]["actor"], "test-admin");
        assert_eq!(history[0]["method"], "token");
        let winner = app.get("/api/orders/a-1").await.1["status"].as_str().unwrap().to_string();
        assert_eq!(history[1]["to"], winner);
        let (actor, reason) =
            if winner == "CONFIRMED" { ("test-ops", "paid") } else { ("test-support", "customer asked") };
        assert_eq!((history[1]["actor"].as_str(), history[1]["reason"].as_str()), (Some(actor), Some(reason)));

        // The day's view and the actor's view, newest first, with cursors.
        for i in 0..5 {
            app.post("/api/orders", new_order_json(&format!("a-{}", i + 2), "c-1")).await;
        }
        let mut seen = Vec::new();
        let mut path = "/api/audit?limit=2".to_string();
        loop {
            let (status, page) = app.get(&path).await;
            assert_eq!(status, 200, "{page}");
            seen.extend(page["entries"].as_array().unwrap().iter().map(|e| e["at"].as_str().unwrap().to_string()));
            match page["next"].as_str() {
                Some(next) => path = format!("/api/audit?limit=2&cursor={next}"),
                None => break,
            }
        }
        assert_eq!(seen.len(), 7, "{engine:?}: every change of the day once");
        assert!(seen.windows(2).all(|w| w[0] >= w[1]), "newest first: {seen:?}");
        let (_, mine) = app.get(&format!("/api/audit?actor={actor}")).await;
        assert_eq!(mine["entries"].as_array().unwrap().len(), 1, "{mine}");
        let (status, _) = app.get("/api/audit?actor=Not%20A%20Name").await;
        assert_eq!(status, 400);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_line_writes_are_recorded_as_the_command_line() {
    let app = TestApp::spawn(common::Engine::Dynoxide).await;
    let order = common::order("cli-1", "c-1", northwind_ops::model::Status::Pending, chrono::Utc::now());
    app.store.create_order(&order, &Actor::cli("seed")).await.unwrap();
    let history = app.store.order_timeline("cli-1").await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!((history[0].actor.as_str(), history[0].method), ("seed", northwind_ops::model::SignIn::Cli));
    app.stop().await;
}

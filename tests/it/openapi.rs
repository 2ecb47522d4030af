//! The OpenAPI document of the JSON API (`server::http::api::openapi`):
//! it lists exactly the routes and methods the router has under the JSON
//! API's paths (read from the router's own table, as the role matrix reads
//! it), it validates as OpenAPI 3.1 with a validator from PyPI
//! (`openapi-spec-validator`, installed by `scripts/setup.sh`), and it is
//! served to signed-in users only. That `docs/openapi.json` is what the
//! program generates is the docs test's (`docs.rs`), with the other
//! generated page.

use crate::common;

use common::TestApp;
use northwind_ops::model::Role;
use northwind_ops::server::auth::access::is_api;
use northwind_ops::server::http::api::openapi;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

/// `METHOD path` of every operation the document describes.
fn documented(document: &serde_json::Value) -> BTreeSet<String> {
    let paths = document["paths"].as_object().expect("the document has paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            let methods = item.as_object().expect("a path item is an object");
            methods
                .keys()
                .filter(|key| {
                    ["get", "put", "post", "delete", "patch", "head", "options", "trace"].contains(&key.as_str())
                })
                .map(move |method| format!("{} {path}", method.to_uppercase()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_lists_exactly_the_routes_and_methods_of_the_routers_json_api() {
    let app = TestApp::spawn(common::Engine::Dynoxide).await;
    let addr: SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let table = northwind_ops::server::http::serve::route_table(app.service.clone(), &common::serve_args(&[]), addr)
        .unwrap()
        .routes();
    app.stop().await;
    // The JSON API's paths, less Leptos' server functions (the pages' own
    // calls, routed under /api/fn/) and the catch-all that answers 404.
    let server_functions: BTreeSet<&str> = leptos::server_fn::axum::server_fn_paths().map(|(path, _)| path).collect();
    assert!(!server_functions.is_empty(), "the server functions are registered");
    let mut routed = BTreeSet::new();
    for route in table.iter().filter(|r| is_api(&r.path)) {
        if server_functions.contains(route.path.as_str()) || route.path == "/api/{*rest}" {
            continue;
        }
        let method = route.method.as_ref().unwrap_or_else(|| panic!("{} takes any method", route.path));
        routed.insert(format!("{method} {}", route.path));
    }
    assert!(routed.len() >= 37, "{routed:#?}");
    for needed in ["GET /api/live", "GET /api/openapi.json", "POST /api/orders", "DELETE /api/admin/tokens/{name}"] {
        assert!(routed.contains(needed), "the router has no {needed}: is the table read as it should be?");
    }
    let document: serde_json::Value = serde_json::from_str(openapi::json()).unwrap();
    let described = documented(&document);
    let undocumented: Vec<_> = routed.difference(&described).collect();
    let unrouted: Vec<_> = described.difference(&routed).collect();
    assert!(
        undocumented.is_empty() && unrouted.is_empty(),
        "routed but not in the OpenAPI document (give the handler a #[utoipa::path] and name it in \
         api/openapi.rs's paths): {undocumented:#?}\nin the document but not routed (its path or method \
         differs from the router's): {unrouted:#?}"
    );
    // The library's own list of what it describes is the same table.
    let listed: BTreeSet<String> = openapi::described_routes()
        .iter()
        .map(|r| format!("{} {}", r.method.as_ref().expect("a method"), r.path))
        .collect();
    assert_eq!(listed, routed);
}

/// The validator's verdict on a document: `Ok` with what it printed, or
/// `Err` with why. A validator that cannot be run is a failure, never a skip.
fn validate(document: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, document).unwrap();
    let output = Command::new("python3")
        .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("python3 cannot be run ({e}): scripts/setup.sh installs the validator"));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(
        !text.contains("No module named openapi_spec_validator"),
        "the validator is not installed: run scripts/setup.sh (python3 -m pip install openapi-spec-validator)"
    );
    if output.status.success() { Ok(text) } else { Err(text) }
}

#[test]
fn the_openapi_document_validates_as_openapi_3_1() {
    let verdict = validate(openapi::json());
    assert!(verdict.as_ref().is_ok_and(|text| text.contains(": OK")), "openapi-spec-validator: {verdict:?}");
    // The validator is really read: a document it must refuse is refused.
    let mut broken: serde_json::Value = serde_json::from_str(openapi::json()).unwrap();
    broken["paths"]["/api/orders/{order_id}"]["get"]["parameters"] = serde_json::json!([]);
    let refused = validate(&broken.to_string());
    assert!(
        refused.as_ref().is_err_and(|why| why.contains("order_id")),
        "a path parameter left undeclared is refused: {refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_to_signed_in_users_as_docs_holds_it() {
    let app = TestApp::spawn(common::Engine::Dynoxide).await;
    let url = format!("{}/api/openapi.json", app.base);
    let anonymous = app.client_as(None).get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let viewer = app.client_as(Some(Role::Viewer)).get(&url).send().await.unwrap();
    assert_eq!(viewer.status(), 200);
    assert!(viewer.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let served = viewer.text().await.unwrap();
    app.stop().await;
    let committed = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json")).unwrap();
    assert!(served == committed, "GET /api/openapi.json is not docs/openapi.json: run `make docs`");
}

//! The JSON API as an OpenAPI 3.1 document, generated: each route's
//! method, path, parameters, body and answers from its handler's
//! `#[utoipa::path]` and the model's types (`ToSchema`), and who may call
//! it, the credentials and the answers every route shares from the router's
//! own table of routes (`routes()`, with each route's `Access`). Served at
//! `GET /api/openapi.json`, written to `docs/openapi.json` by
//! `northwind-ops docs --write docs`; `tests/it/openapi.rs` holds the
//! document to the router and to a validator.

use crate::model::{Access, Role};
use crate::server::auth::access::{Declared, is_api};
use crate::server::error::ErrorBody;
use crate::server::http::serve::SESSION_COOKIE;
use axum::http::Method;
use std::sync::OnceLock;
use utoipa::OpenApi;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Northwind Ops JSON API",
        description = "The operations console's JSON API, for scripts and other teams' tools: orders and \
            customers, the PENDING list and its exports, bulk changes, counters, capacity and data \
            quality, live updates, sale plans and their readiness, accounts, tokens and the audit trail.\n\n\
            Send an API token as `Authorization: Bearer <token>` (`northwind-ops token create --name NAME \
            --role ROLE`), or a session cookie from signing in. A write sends its body as \
            `application/json`. Every error is `{\"error\", \"kind\", \"requestId\"}`. The guide, with each \
            route's limits and cost: docs/api.md."
    ),
    paths(
        super::create_order,
        super::order,
        super::change_status,
        super::customer_orders,
        super::order_history,
        super::pending,
        super::pending_csv,
        super::pending_jsonl,
        super::customer_csv,
        super::start_bulk,
        super::bulk_report,
        super::cancel_bulk,
        super::pending_metrics,
        super::capacity,
        super::quality,
        super::live,
        super::sale_plans,
        super::create_sale_plan,
        super::sale_plan,
        super::update_sale_plan,
        super::delete_sale_plan,
        super::write_sale_shards,
        super::start_rehearsal,
        super::rehearsals,
        super::rehearsal_live,
        super::sale_outcome,
        super::readiness,
        super::audit,
        super::me,
        super::accounts,
        super::add_account,
        super::set_role,
        super::disable_account,
        super::consumer_mode,
        super::switch_consumer_mode,
        super::tokens,
        super::create_token,
        super::revoke_token,
        super::openapi_json,
        super::metrics,
        super::health,
        super::ready,
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "orders", description = "Orders and customers: `support` and up read; `ops` and up create and change (`support` may only cancel)"),
        (name = "pending", description = "The PENDING list and its exports"),
        (name = "bulk", description = "Bulk status changes"),
        (name = "figures", description = "Counters, capacity, data quality and the consumer mode (switched by `admin`)"),
        (name = "live", description = "Live updates"),
        (name = "sales", description = "Sale plans and readiness: everyone signed in reads; `ops` and `admin` write"),
        (name = "accounts", description = "Who is asking; accounts, tokens and the audit trail (admin)"),
        (name = "probes", description = "Probes, metrics and this document"),
    ),
)]
struct Api;

/// The document, as `GET /api/openapi.json` serves it and `docs/openapi.json`
/// holds it (pretty-printed, with a final line break), made once.
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut text = serde_json::to_string_pretty(&document()).expect("an OpenAPI document serializes");
        text.push('\n');
        text
    })
}

/// The routes the document describes: every route of the JSON API's
/// router (`is_api`) but the catch-all, which answers 404 to any path it
/// has no route for. (Leptos' server functions are routed apart.)
pub fn described_routes() -> Vec<Declared> {
    let (_, table) = super::routes().merge(super::live_routes()).into_parts();
    table.routes().into_iter().filter(|route| is_api(&route.path) && !route.path.contains("{*")).collect()
}

/// The document: the handlers' descriptions, with who may call each route,
/// the credentials, and the error answers every route shares.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Api::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").into();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearerToken",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API token: `northwind-ops token create --name NAME --role ROLE`, or `POST /api/admin/tokens`",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        "sessionCookie",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            SESSION_COOKIE,
            "A browser's session, from signing in at /login (a write with it must come from this site: its `Origin`)",
        ))),
    );
    for (name, description, header) in SHARED {
        let mut response = ResponseBuilder::new().description(*description).content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
        );
        if let Some((header, about)) = header {
            let kind = if *header == "Retry-After" { Type::Integer } else { Type::String };
            let schema = ObjectBuilder::new().schema_type(kind).build();
            response = response.header(*header, HeaderBuilder::new().schema(schema).description(Some(*about)).build());
        }
        components.responses.insert(name.to_string(), RefOr::T(response.build()));
    }
    doc.security = Some(vec![
        SecurityRequirement::new("bearerToken", Vec::<String>::new()),
        SecurityRequirement::new("sessionCookie", Vec::<String>::new()),
    ]);
    for route in described_routes() {
        let Some(method) = route.method.as_ref() else { continue };
        let Some(access) = route.access else { continue };
        let Some(operation) = doc.paths.paths.get_mut(&route.path).and_then(|item| operation(item, method)) else {
            // Not described: the test comparing the document with the router says which.
            continue;
        };
        declare_access(operation, access, method);
    }
    doc
}

/// A header an answer carries: its name and what it says.
type Header = (&'static str, &'static str);

/// The error answers many routes share, each a response component:
/// its name, when it is given, and the header it carries.
const SHARED: &[(&str, &str, Option<Header>)] = &[
    ("BadRequest", "Bad input: a parameter or a field that breaks a rule (the message names it)", None),
    (
        "Unauthorized",
        "No credential, or none that is valid (an unknown, revoked or expired token or session)",
        Some(("WWW-Authenticate", "`Bearer`")),
    ),
    ("Forbidden", "The caller's role may not do this, or a cross-site request", None),
    ("PayloadTooLarge", "The body is over `--max-body-bytes`", None),
    ("UnsupportedMediaType", "The body is not sent as `application/json`", None),
    (
        "TooManyRequests",
        "Over the client address's rate (`--api-rate`, `--api-burst`)",
        Some(("Retry-After", "Seconds to wait before trying again")),
    ),
    ("Internal", "Something the server did not expect; the request id finds it in the log", None),
    (
        "Unavailable",
        "The store is unavailable, slow or throttled, or the request took over `--request-timeout-secs`",
        Some(("Retry-After", "Seconds to wait before trying again")),
    ),
];

fn operation<'a>(item: &'a mut PathItem, method: &Method) -> Option<&'a mut Operation> {
    match *method {
        Method::GET => item.get.as_mut(),
        Method::POST => item.post.as_mut(),
        Method::PUT => item.put.as_mut(),
        Method::DELETE => item.delete.as_mut(),
        _ => None,
    }
}

/// Who may call the operation (in its description and as `x-roles`), the
/// credentials it takes, and the shared error answers its access and its
/// shape can give.
fn declare_access(operation: &mut Operation, access: Access, method: &Method) {
    let roles: Vec<Role> = Role::ALL.into_iter().filter(|role| access.admits(Some(*role))).collect();
    let who = match access {
        Access::Open | Access::Public => "anyone; no credential is needed".to_string(),
        Access::SignedIn => "anyone signed in, whatever the role".to_string(),
        Access::Needs(_) => format!("{} (an API token or a session of that role)", role_list(&roles)),
    };
    let description = operation.description.take().unwrap_or_default();
    let line = format!("Who may call it: {who}.");
    operation.description = Some(if description.is_empty() { line } else { format!("{description}\n\n{line}") });
    if matches!(access, Access::Open | Access::Public) {
        // No credential is read: the document's default does not apply.
        operation.security = Some(Vec::new());
        return;
    }
    let names: Vec<serde_json::Value> = roles.iter().map(|role| role.as_str().into()).collect();
    operation.extensions = Some([("x-roles", serde_json::Value::Array(names))].into_iter().collect());
    let takes_input = operation.parameters.as_ref().is_some_and(|p| !p.is_empty()) || operation.request_body.is_some();
    let write = *method != Method::GET;
    let shared = [
        ("400", "BadRequest", takes_input),
        ("401", "Unauthorized", true),
        ("403", "Forbidden", matches!(access, Access::Needs(_)) || write),
        ("413", "PayloadTooLarge", operation.request_body.is_some()),
        ("415", "UnsupportedMediaType", operation.request_body.is_some()),
        ("429", "TooManyRequests", true),
        ("500", "Internal", true),
        ("503", "Unavailable", true),
    ];
    for (status, name, applies) in shared {
        if applies {
            operation
                .responses
                .responses
                .entry(status.to_string())
                .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
        }
    }
}

/// `viewer, support, ops and admin`.
fn role_list(roles: &[Role]) -> String {
    let names: Vec<&str> = roles.iter().map(|role| role.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nobody".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_says_who_may_call_it_and_answers_errors_in_the_shared_shape() {
        let doc = document();
        let mut operations = 0;
        for (path, item) in &doc.paths.paths {
            for operation in [&item.get, &item.post, &item.put, &item.delete].into_iter().flatten() {
                operations += 1;
                let description = operation.description.as_deref().unwrap_or_default();
                assert!(description.contains("Who may call it: "), "{path}: {description}");
                if path.starts_with("/api/") {
                    assert!(operation.responses.responses.contains_key("401"), "{path}");
                    assert!(operation.extensions.is_some(), "{path}: x-roles");
                }
            }
        }
        assert!(operations >= 37, "{operations} operations");
        let json = json();
        assert!(json.starts_with("{\n  \"openapi\": \"3.1.0\""), "{}", &json[..40]);
        assert!(json.contains("\"x-roles\": [\n"), "who may call a route is machine-readable");
        assert_eq!(role_list(&[Role::Ops, Role::Admin]), "ops and admin");
        assert_eq!(role_list(&Role::ALL), "viewer, support, ops and admin");
    }
}

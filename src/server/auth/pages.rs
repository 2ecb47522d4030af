//! The few pages the guard answers itself, before any route runs: a role
//! too low for the page, a store that cannot tell who is signed in, a
//! refused request. Static HTML (no script to hydrate), in the app's style.

use super::Principal;
use crate::model::Permission;
use crate::server::error::ApiError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A whole page around `body` (already escaped), with a sign-out button
/// when someone is signed in.
fn page(title: &str, who: Option<&Principal>, body: &str, head: &str) -> String {
    let signed_in = who.map_or(String::new(), |who| {
        format!(
            r#"<span class="who">{} · {}</span><form method="post" action="/auth/logout" class="sign-out"><button type="submit">Sign out</button></form>"#,
            escape(&who.actor.name),
            who.role
        )
    });
    format!(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/>{head}<title>{title} · Northwind Ops</title><link rel="stylesheet" href="/pkg/northwind-ops.css"/></head><body><header class="top"><a href="/" class="brand">Northwind Ops</a><div class="account">{signed_in}</div></header><main>{body}</main></body></html>"#,
        title = escape(title)
    )
}

pub fn message_page(title: &str, message: &str) -> Html<String> {
    Html(page(title, None, &format!("<h1>{}</h1><p>{}</p>", escape(title), escape(message)), ""))
}

/// 403: the page exists, and says which role it needs.
pub fn forbidden(who: &Principal, permission: Permission) -> Response {
    let body = format!(
        r#"<section class="forbidden" data-testid="forbidden"><h1>Not for your role</h1><p>This page needs the <strong>{}</strong> role. You are signed in as {}, with the {} role.</p><p>Ask an administrator for the role, or <a href="/">go to the dashboard</a>.</p></section>"#,
        permission.least_role(),
        escape(&who.actor.name),
        who.role
    );
    (StatusCode::FORBIDDEN, Html(page("Not for your role", Some(who), &body, ""))).into_response()
}

/// 503 while the store cannot say who is signed in: the page says so and
/// tries again by itself.
pub fn store_down(err: &ApiError) -> Response {
    err.log();
    let body = r#"<div class="banner" role="alert" data-testid="store-down"><strong>The order store is unreachable.</strong> The page retries by itself.</div>"#;
    let head = r#"<meta http-equiv="refresh" content="5"/>"#;
    let mut response =
        (StatusCode::SERVICE_UNAVAILABLE, Html(page("Store unreachable", None, body, head))).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(5u32));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}

//! The few pages the guard answers itself, before any route runs: a role
//! too low for the page, a store that cannot tell who is signed in, a
//! refused request. Static HTML (no script to hydrate), in the app's style,
//! rendered by Leptos like every other page, so every text in them is
//! escaped by the renderer, not by hand.

use super::Principal;
use crate::model::Permission;
use crate::server::error::ApiError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use leptos::prelude::*;
use leptos::tachys::view::RenderHtml;

/// A whole page around `body`, with a sign-out button when someone is
/// signed in. `refresh`: seconds after which the browser loads it again.
fn page(title: &str, who: Option<&Principal>, body: AnyView, refresh: Option<u32>) -> Html<String> {
    let signed_in = who.map(|who| {
        view! {
            <span class="who">{format!("{} · {}", who.actor.name, who.role)}</span>
            <form method="post" action="/auth/logout" class="sign-out">
                <button type="submit">"Sign out"</button>
            </form>
        }
    });
    let title = format!("{title} · Northwind Ops");
    let html = view! {
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                {refresh.map(|seconds| view! { <meta http-equiv="refresh" content=seconds.to_string()/> })}
                <title>{title}</title>
                <link rel="stylesheet" href="/pkg/northwind-ops.css"/>
            </head>
            <body>
                <header class="top">
                    <a href="/" class="brand">"Northwind Ops"</a>
                    <div class="account">{signed_in}</div>
                </header>
                <main>{body}</main>
            </body>
        </html>
    }
    .to_html();
    Html(format!("<!DOCTYPE html>{html}"))
}

pub fn message_page(title: &str, message: &str) -> Html<String> {
    let body = view! {
        <h1>{title.to_string()}</h1>
        <p>{message.to_string()}</p>
    };
    page(title, None, body.into_any(), None)
}

/// 403: the page exists, and says which role it needs.
pub fn forbidden(who: &Principal, permission: Permission) -> Response {
    let body = view! {
        <section class="forbidden" data-testid="forbidden">
            <h1>"Not for your role"</h1>
            <p>
                "This page needs the " <strong>{permission.least_role().to_string()}</strong> " role. You are signed in as "
                {who.actor.name.clone()} ", with the " {who.role.to_string()} " role."
            </p>
            <p>"Ask an administrator for the role, or " <a href="/">"go to the dashboard"</a> "."</p>
        </section>
    };
    (StatusCode::FORBIDDEN, page("Not for your role", Some(who), body.into_any(), None)).into_response()
}

/// 503 while the store cannot say who is signed in: the page says so and
/// tries again by itself.
pub fn store_down(err: &ApiError) -> Response {
    err.log();
    let body = view! {
        <div class="banner" role="alert" data-testid="store-down">
            <strong>"The order store is unreachable."</strong>
            " The page retries by itself."
        </div>
    };
    let mut response =
        (StatusCode::SERVICE_UNAVAILABLE, page("Store unreachable", None, body.into_any(), Some(5))).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(5u32));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_by_the_renderer() {
        let Html(html) = message_page("<b>Refused</b>", r#"<a href="x">'&'</a>"#);
        assert!(html.starts_with("<!DOCTYPE html><html lang=\"en\">"), "{html}");
        assert!(html.contains("<h1>&lt;b&gt;Refused&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<a href=\"x\">"), "{html}");
        assert!(html.contains("&lt;a href="), "{html}");
    }

    #[test]
    fn the_store_down_page_refreshes_itself() {
        let response = store_down(&ApiError::Busy("down".into()));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers().get(header::RETRY_AFTER).unwrap(), "5");
    }
}

//! The sign-in page: a plain form (it works before the page is hydrated)
//! that posts to `/auth/login`, and the identity provider's button when one
//! is configured.

use super::data::sign_in_options;
use crate::model::url_escape;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// What an `error` in the URL means, in words that say nothing about which
/// part of a sign-in was wrong.
fn message(error: &str) -> &'static str {
    match error {
        "slow-down" => "Too many sign-in attempts. Wait a little and try again.",
        "no-role" => "Your company account has no Northwind Ops role. Ask an administrator for one.",
        "disabled" | "wrong" => "That name and password did not sign you in.",
        _ => "Signing in did not work. Try again.",
    }
}

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = query.with_untracked(|q| q.get("next")).unwrap_or_else(|| "/".into());
    let error = query.with_untracked(|q| q.get("error"));
    let signed_out = query.with_untracked(|q| q.get("signed-out")).is_some();
    let options = Resource::new(|| (), |_| sign_in_options());
    let sso_href = format!("/auth/oidc?next={}", url_escape(&next));
    view! {
        <section class="login">
            <h1>"Sign in"</h1>
            {signed_out.then(|| view! { <p class="notice" data-testid="signed-out">"You are signed out."</p> })}
            {error.map(|e| view! { <p class="error" role="alert" data-testid="sign-in-error">{message(&e)}</p> })}
            <Transition fallback=|| ()>
                {move || {
                    let sso_href = sso_href.clone();
                    Suspend::new(async move {
                        options.await.ok().filter(|o| o.single_sign_on).map(|_| view! {
                            <p>
                                // Not the app's own route: the router must leave it to the browser.
                                <a href=sso_href class="button" rel="external" data-testid="single-sign-on">
                                    "Sign in with your company account"
                                </a>
                            </p>
                            <p class="muted">"Or with a Northwind Ops account:"</p>
                        })
                    })
                }}
            </Transition>
            <form method="post" action="/auth/login" class="login-form" data-testid="login-form">
                <input type="hidden" name="next" value=next/>
                <label>"Name" <input name="name" autocomplete="username" required/></label>
                <label>"Password" <input type="password" name="password" autocomplete="current-password" required/></label>
                <button type="submit">"Sign in"</button>
            </form>
        </section>
    }
}

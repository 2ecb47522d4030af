//! The sign-in flow: the login form's post, sign-out, and (when configured)
//! OpenID Connect. Plain HTML forms and redirects, so they work before the
//! page is hydrated.

use super::Auth;
use crate::model::SignIn;
use crate::model::url_escape;
use crate::server::error::ApiError;
use crate::server::middleware::RateLimit;
use axum::Router;
use axum::extract::{ConnectInfo, Form, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use std::net::SocketAddr;
use tower_sessions::Session;

#[derive(Clone)]
pub struct SignInState {
    pub auth: Auth,
    /// Password attempts per client address: slows guessing to a crawl.
    pub attempts: RateLimit,
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    SignInState: axum::extract::FromRef<S>,
{
    Router::new().route("/auth/login", post(login)).route("/auth/logout", post(logout))
}

#[derive(serde::Deserialize)]
struct LoginForm {
    name: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a local path only, never another site
/// (`//evil.example` and `/\evil.example` are other sites to a browser).
pub fn local_path(next: &str) -> &str {
    let local = next.starts_with('/') && !next.starts_with("//") && !next.contains('\\') && !next.contains("://");
    if local { next } else { "/" }
}

async fn login(
    State(state): State<SignInState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = local_path(&form.next).to_string();
    let again = |error: &str| Redirect::to(&format!("/login?error={error}&next={}", url_escape(&next))).into_response();
    if state.attempts.check(client.ip()).is_some() {
        return again("slow-down");
    }
    let name = form.name.trim().to_ascii_lowercase();
    match state.auth.check_password(&name, form.password).await {
        Ok(Some(account)) => match state.auth.sign_in(&session, &account, SignIn::Password).await {
            Ok(()) => {
                tracing::info!(user = %account.name, "signed in with a password");
                Redirect::to(&next).into_response()
            }
            Err(err) => unavailable(err),
        },
        Ok(None) => {
            tracing::info!(user = %name, "password sign-in refused");
            again("wrong")
        }
        Err(err) => unavailable(err),
    }
}

async fn logout(State(state): State<SignInState>, session: Session) -> Response {
    match state.auth.sign_out(&session).await {
        Ok(()) => Redirect::to("/login?signed-out=1").into_response(),
        Err(err) => unavailable(err),
    }
}

fn unavailable(err: ApiError) -> Response {
    super::pages::store_down(&err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(local_path("/orders/o-1?x=1"), "/orders/o-1?x=1");
        for foreign in ["//evil.example", "https://evil.example", "/\\evil.example", "evil", "", "/x?u=http://a"] {
            assert_eq!(local_path(foreign), "/", "{foreign}");
        }
    }
}

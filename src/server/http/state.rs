//! What every route of the router is handed: the service, the Leptos
//! options, the limits and the sign-in flow's state. Its own file, below
//! both the router (`serve`) and the JSON API (`api`), which both name it.

use crate::server::auth::routes::SignInState;
use crate::server::http::config::Limits;
use crate::server::service::Service;
use axum::extract::FromRef;
use leptos::prelude::LeptosOptions;

#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    pub leptos_options: LeptosOptions,
    pub limits: Limits,
    pub sign_in: SignInState,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

impl FromRef<AppState> for SignInState {
    fn from_ref(state: &AppState) -> Self {
        state.sign_in.clone()
    }
}

//! The web server: the Leptos pages, the JSON API and static files.

use super::api;
use super::config::ServeArgs;
use super::service::Service;
use crate::app::{App, shell};
use axum::Router;
use axum::extract::FromRef;
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use std::net::SocketAddr;
use tower_http::trace::TraceLayer;

#[derive(Clone)]
pub struct AppState {
    pub service: Service,
    pub leptos_options: LeptosOptions,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// Settings the pages need, handed to them through the Leptos context.
#[derive(Clone, Copy, Debug)]
pub struct PageSettings {
    pub stuck_after_minutes: u32,
}

pub fn router(service: Service, args: &ServeArgs, addr: SocketAddr) -> Router {
    let leptos_options = LeptosOptions::builder()
        .output_name("northwind-ops")
        .site_root(args.site_root.as_str())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let settings = PageSettings { stuck_after_minutes: args.stuck_after_minutes };
    let state = AppState { service: service.clone(), leptos_options: leptos_options.clone() };
    let routes = generate_route_list(App);
    Router::new()
        .merge(api::routes())
        .leptos_routes_with_context(
            &state,
            routes,
            move || {
                provide_context(service.clone());
                provide_context(settings);
            },
            {
                let options = leptos_options.clone();
                move || shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Binds `args.addr` (port 0 picks a free one) and serves until `shutdown`
/// resolves. Returns the bound address and the server's task.
pub async fn start(
    service: Service,
    args: &ServeArgs,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    let app = router(service, args, addr);
    let task = tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await });
    Ok((addr, task))
}

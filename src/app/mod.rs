//! The pages: server-rendered with their data (complete with JavaScript
//! off), then hydrated in the browser.

mod admin;
mod audit;
mod capacity;
mod common;
mod customer;
mod dashboard;
pub mod data;
mod lazy;
mod live;
mod login;
mod order;
mod quality;
mod queue;
mod sales;
mod search;

use crate::model::{Access, Permission};
use leptos::prelude::*;
use leptos_meta::{HashedStylesheet, MetaTags, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::{Lazy, SsrMode, path};

/// `public/favicon.svg` as a data URL (the pages' policy allows `data:`
/// images).
const FAVICON: &str = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'%3E\
    %3Crect width='32' height='32' rx='6' fill='%230b5cad'/%3E\
    %3Cpath d='M9 24V8h3.2l7.6 10.6V8H23v16h-3.2l-7.6-10.6V24z' fill='%23fff'/%3E%3C/svg%3E";

/// The page around the app. Its Content-Security-Policy names the nonce of
/// the scripts below; the server's `security_headers` writes it.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                // The icon in the page: one request fewer on a first visit
                // (`public/favicon.svg` is the same drawing).
                <link rel="icon" href=FAVICON type="image/svg+xml"/>
                <link rel="icon" href="/favicon.ico" sizes="32x32"/>
                // The stylesheet, script and wasm under their hashed names
                // (cargo-leptos `hash-files`): cached for good by the browser.
                <HashedStylesheet id="leptos" options=options.clone()/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                // The dashboard's live stream, opened now rather than once
                // the wasm has arrived and hydrated the page (it takes it over).
                <script nonce=leptos::nonce::use_nonce() inner_html=live::EARLY_LIVE></script>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Who may open each page, beside the `<Route>`s of `App` below (in their
/// `path!` spelling). The server's guard reads it for every page request; a
/// `<Route>` missing here is refused to everyone.
pub const PAGES: &[(&str, Access)] = &[
    ("/", Access::Needs(Permission::ViewOperations)),
    ("/orders/:id", Access::Needs(Permission::ViewOrders)),
    ("/customers/:id", Access::Needs(Permission::ViewOrders)),
    ("/search", Access::Needs(Permission::ViewOrders)),
    ("/login", Access::Public),
    ("/audit", Access::Needs(Permission::Administer)),
    ("/admin", Access::Needs(Permission::Administer)),
    ("/capacity", Access::Needs(Permission::ViewOperations)),
    ("/sales", Access::Needs(Permission::ViewOperations)),
];

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Who is signed in: the header shows it, and pages offer only what the
    // role may do (the server checks every request again).
    let me: common::MeResource = Resource::new(|| (), |_| data::get_me());
    provide_context(me);
    // Tests wait on this marker: it is set only once the page is live.
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Title text="Northwind Ops"/>
        <Router>
            <header class="top">
                <A href="/" attr:class="brand">"Northwind Ops"</A>
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        let me = me.await.ok().flatten();
                        view! { <common::AccountBar me/> }
                    })}
                </Transition>
            </header>
            <main>
                // Async: each page is sent whole, its data included.
                <Routes fallback=|| view! { <common::NotFound message="No such page.".to_string()/> }>
                    // The dashboard, the page most opened, is in the main module: in
                    // one file it arrives sooner than split into the three dozen
                    // chunks wasm-split makes of it (BENCHMARKS.md, the first load).
                    // Every other page's code is a chunk of its own, loaded when the
                    // page is opened (see `lazy`).
                    <Route path=path!("/") view=dashboard::DashboardPage ssr=SsrMode::Async/>
                    <Route path=path!("/orders/:id") view={Lazy::<lazy::OrderRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/customers/:id") view={Lazy::<lazy::CustomerRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/search") view={Lazy::<lazy::SearchRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/login") view={Lazy::<lazy::LoginRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view={Lazy::<lazy::AuditRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/admin") view={Lazy::<lazy::AdminRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/capacity") view={Lazy::<lazy::CapacityRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/sales") view={Lazy::<lazy::SalesRoute>::new()} ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

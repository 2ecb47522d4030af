//! The pages: server-rendered with their data (complete with JavaScript
//! off), then hydrated in the browser.

mod common;
mod customer;
mod dashboard;
pub mod data;
mod live;
mod order;
mod search;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::{SsrMode, path};

pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Tests wait on this marker: it is set only once the page is live.
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/northwind-ops.css"/>
        <Title text="Northwind Ops"/>
        <Router>
            <header class="top">
                <A href="/" attr:class="brand">"Northwind Ops"</A>
                <form class="search" action="/search" method="get" role="search">
                    <input
                        type="search"
                        name="q"
                        placeholder="Order or customer id"
                        aria-label="Order or customer id"
                        required
                    />
                    <button type="submit">"Find"</button>
                </form>
            </header>
            <main>
                // Async: each page is sent whole, its data included.
                <Routes fallback=|| view! { <common::NotFound message="No such page.".to_string()/> }>
                    <Route path=path!("/") view=dashboard::DashboardPage ssr=SsrMode::Async/>
                    <Route path=path!("/orders/:id") view=order::OrderPage ssr=SsrMode::Async/>
                    <Route path=path!("/customers/:id") view=customer::CustomerPage ssr=SsrMode::Async/>
                    <Route path=path!("/search") view=search::SearchPage ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

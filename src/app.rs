//! The pages: server-rendered, then hydrated in the browser.

use crate::model::{PendingPage, PendingParams, format_age, format_money, iso_millis};
use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::use_query_map;
use leptos_router::{SsrMode, path};

pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
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
            </header>
            <main>
                <Routes fallback=|| view! { <NotFound what="page".to_string()/> }>
                    // Async: the first paint is the whole page, data included,
                    // even with JavaScript off.
                    <Route path=path!("/") view=Dashboard ssr=SsrMode::Async/>
                </Routes>
            </main>
        </Router>
    }
}

#[server]
pub async fn get_pending(params: PendingParams) -> Result<PendingPage, ServerFnError> {
    let service = expect_context::<crate::server::service::Service>();
    service.pending(&params).await.map_err(|e| ServerFnError::new(e.to_string()))
}

#[component]
fn Dashboard() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        query.with(|q| PendingParams {
            date: q.get("date"),
            days: q.get("days"),
            limit: q.get("limit"),
            cursor: q.get("cursor"),
        })
    };
    let page = Resource::new(params, get_pending);
    view! {
        <h1>"PENDING orders"</h1>
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => view! { <PendingTable page/> }.into_any(),
                    Err(err) => view! { <p class="error" role="alert">{server_message(&err)}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn PendingTable(page: PendingPage) -> impl IntoView {
    let as_of = page.as_of;
    let next = page.next.clone().map(|cursor| {
        let mut href = format!("/?date={}&days={}&cursor={cursor}", page.date, page.days);
        if let Some(limit) = use_query_map().with_untracked(|q| q.get("limit")) {
            href.push_str(&format!("&limit={limit}"));
        }
        href
    });
    let empty = page.orders.is_empty();
    view! {
        <p class="as-of">
            {format!("{} · as of {} UTC", page.date, iso_millis::format(&as_of))}
        </p>
        <Show when=move || !empty fallback=|| view! { <p class="empty">"No PENDING orders on this page."</p> }>
            <span></span>
        </Show>
        <table class="orders" data-testid="pending-table">
            <thead>
                <tr>
                    <th scope="col">"Created (UTC)"</th>
                    <th scope="col">"Age"</th>
                    <th scope="col">"Order"</th>
                    <th scope="col">"Customer"</th>
                    <th scope="col" class="num">"Items"</th>
                    <th scope="col" class="num">"Total"</th>
                    <th scope="col">"Ship to"</th>
                </tr>
            </thead>
            <tbody>
                {page
                    .orders
                    .into_iter()
                    .map(|order| {
                        view! {
                            <tr data-order-id=order.order_id.clone()>
                                <td>{order.created_at.format("%Y-%m-%d %H:%M:%S").to_string()}</td>
                                <td>{format_age(order.created_at, as_of)}</td>
                                <td class="mono">{order.order_id.clone()}</td>
                                <td class="mono">{order.customer_id.clone()}</td>
                                <td class="num">{order.item_count}</td>
                                <td class="num">{format_money(order.total, &order.currency)}</td>
                                <td>{order.shipping_city.clone()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <nav class="pager" aria-label="Pages">
            {next.map(|href| view! { <a href=href rel="next">"Next page →"</a> })}
        </nav>
    }
}

#[component]
fn NotFound(what: String) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <h1>"Not found"</h1>
        <p>{format!("No such {what}.")}</p>
        <p><A href="/">"Back to the dashboard"</A></p>
    }
}

/// A server function's error without the framework's prefix.
fn server_message(err: &ServerFnError) -> String {
    match err {
        ServerFnError::ServerError(message) => message.clone(),
        other => other.to_string(),
    }
}

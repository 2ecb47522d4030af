//! The header's search: an order id opens the order, a customer id the
//! customer's history; anything else is a 404 that says what was looked for.

use super::common::ErrorView;
use super::data::search;
use crate::model::SearchHit;
use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_query_map;

#[component]
pub fn SearchPage() -> impl IntoView {
    let query = use_query_map();
    let text = move || query.with(|q| q.get("q").unwrap_or_default());
    let hit = Resource::new(text, search);
    view! {
        <Transition fallback=|| view! { <p class="loading">"Searching…"</p> }>
            {move || Suspend::new(async move {
                match hit.await {
                    Ok(SearchHit::Order(id)) => view! { <Redirect path=format!("/orders/{id}")/> }.into_any(),
                    Ok(SearchHit::Customer(id)) => view! { <Redirect path=format!("/customers/{id}")/> }.into_any(),
                    Err(error) => view! { <ErrorView error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

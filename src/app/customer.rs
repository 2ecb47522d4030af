//! A customer's order history, newest first.

use super::common::{ErrorView, Pager, ProblemsFlag, StatusBadge, TableHead, date_time, href, or_dash, paging};
use super::data::get_customer_orders;
use crate::model::{OrderPage, PageParams, format_amount};
use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

#[component]
pub fn CustomerPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let customer_id = move || params.with(|p| p.get("id").unwrap_or_default());
    let page_params = move || query.with(|q| PageParams { limit: q.get("limit"), cursor: q.get("cursor") });
    let history = Resource::new(move || (customer_id(), page_params()), |(id, params)| get_customer_orders(id, params));
    view! {
        <h1>"Customer " <span class="mono">{customer_id}</span></h1>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let first_page = format!("/customers/{}", customer_id());
                match history.await {
                    Ok(page) => view! { <History page customer_id=customer_id()/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn History(page: OrderPage, customer_id: String) -> impl IntoView {
    let query = use_query_map();
    let raw = move |key: &str| query.with_untracked(|q| q.get(key));
    let links = paging(raw("cursor"), raw("trail"), page.next.clone());
    let base = format!("/customers/{customer_id}");
    let link = move |(cursor, trail): (Option<String>, Option<String>)| {
        href(&base, &[("limit", raw("limit")), ("cursor", cursor), ("trail", trail)])
    };
    view! {
        <table class="orders" data-testid="history-table">
            <caption class="visually-hidden">"Orders, newest first"</caption>
            <TableHead columns=&[
                ("Created (UTC)", false),
                ("Order", false),
                ("Status", false),
                ("Items", true),
                ("Total", true),
                ("Ship to", false),
            ]/>
            <tbody>
                {page
                    .orders
                    .into_iter()
                    .map(|order| {
                        // Another writer's order shows what it has, is flagged,
                        // and still links to its page (which says why).
                        let created = order.created_at.map(date_time);
                        let items = order.item_count().map_or_else(|| "—".into(), |n| n.to_string());
                        view! {
                            <tr data-order-id=order.order_id.clone() class:flagged=!order.problems.is_empty()>
                                <td>{or_dash(&created)}</td>
                                <td class="mono">
                                    <a href=format!("/orders/{}", order.order_id)>{order.order_id.clone()}</a>
                                    " "
                                    <ProblemsFlag problems=order.problems.clone()/>
                                </td>
                                <td><StatusBadge status=order.status.clone()/></td>
                                <td class="num">{items}</td>
                                <td class="num">{format_amount(order.total, order.currency.as_deref())}</td>
                                <td>{or_dash(&order.shipping_city)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <Pager prev=links.prev.map(link.clone()) next=links.next.map(link)/>
    }
}

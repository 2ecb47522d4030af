//! The PENDING dashboard: headline figures, the spread over shards, and the
//! newest-first list, refreshed every few seconds while it is on screen.

use super::common::{ErrorView, Pager, href, paging};
use super::data::get_dashboard;
use crate::model::{Dashboard, PendingParams, Summary, format_age, format_money};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// How often page one refreshes itself while visible.
#[cfg(feature = "hydrate")]
const REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
const PAGE_SIZES: [u32; 3] = [25, 50, 100];
/// Days the "include older days" option reaches back, today included.
const OLDER_DAYS: u32 = 7;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        query.with(|q| PendingParams {
            date: q.get("date"),
            days: q.get("days"),
            limit: q.get("limit"),
            cursor: q.get("cursor"),
        })
    };
    let dashboard = Resource::new(params, get_dashboard);

    // Page one follows the sale by itself; later pages stay still under the
    // reader's eyes. A failed read (store down) is retried the same way.
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        {
            let tick = move || {
                let on_page_one = query.with_untracked(|q| q.get("cursor").is_none());
                let failed = dashboard.get_untracked().is_some_and(|d| d.is_err());
                if !document().hidden() && (on_page_one || failed) {
                    dashboard.refetch();
                }
            };
            if let Ok(handle) = set_interval_with_handle(tick, REFRESH_EVERY) {
                on_cleanup(move || handle.clear());
            }
        }
    });

    view! {
        <div class="title-row">
            <h1>"PENDING orders"</h1>
            <button type="button" class="refresh" on:click=move |_| dashboard.refetch()>
                "Refresh"
            </button>
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match dashboard.await {
                    Ok(data) => view! { <DashboardView data/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/"/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn DashboardView(data: Dashboard) -> impl IntoView {
    let query = use_query_map();
    let raw = move |key: &str| query.with_untracked(|q| q.get(key));
    let Dashboard { page, summary, stuck_after_minutes } = data;
    let as_of = page.as_of;
    let links = paging(raw("cursor"), raw("trail"), page.next.clone());
    let link = |(cursor, trail): (Option<String>, Option<String>)| {
        href(
            "/",
            &[("date", raw("date")), ("days", raw("days")), ("limit", raw("limit")), ("cursor", cursor), ("trail", trail)],
        )
    };
    let limit = raw("limit").and_then(|l| l.parse().ok()).unwrap_or(crate::model::DEFAULT_PAGE_SIZE);
    let stuck_after = chrono::Duration::minutes(i64::from(stuck_after_minutes));
    let empty = page.orders.is_empty();
    let range = if page.days > 1 {
        format!("{} and the {} days before", page.date, page.days - 1)
    } else {
        page.date.to_string()
    };
    view! {
        <Headline summary=summary.clone() as_of/>
        <Filters date=page.date.to_string() days=page.days limit/>
        <ShardSpread per_shard=summary.per_shard.clone()/>
        <p class="as-of" data-testid="as-of">
            {format!("{range} · updated {} UTC · {} index items read", as_of.format("%H:%M:%S"), page.items_read)}
        </p>
        <table class="orders" data-testid="pending-table">
            <caption class="visually-hidden">"PENDING orders, newest first"</caption>
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
                        let stuck = as_of - order.created_at > stuck_after;
                        view! {
                            <tr data-order-id=order.order_id.clone() class:stuck=stuck>
                                <td>{order.created_at.format("%Y-%m-%d %H:%M:%S").to_string()}</td>
                                <td>
                                    {format_age(order.created_at, as_of)}
                                    {stuck.then(|| view! { <span class="badge stuck-badge">"stuck"</span> })}
                                </td>
                                <td class="mono">
                                    <a href=format!("/orders/{}", order.order_id)>{order.order_id.clone()}</a>
                                </td>
                                <td class="mono">
                                    <a href=format!("/customers/{}", order.customer_id)>{order.customer_id.clone()}</a>
                                </td>
                                <td class="num">{order.item_count}</td>
                                <td class="num">{format_money(order.total, &order.currency)}</td>
                                <td>{order.shipping_city.clone()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="empty" data-testid="empty">"No PENDING orders on this page."</p> })}
        <Pager prev=links.prev.map(link) next=links.next.map(link)/>
    }
}

#[component]
fn Headline(summary: Summary, as_of: DateTime<Utc>) -> impl IntoView {
    let oldest = summary.oldest_pending.map(|at| format_age(at, as_of)).unwrap_or_else(|| "—".into());
    let created = summary.created.map(|n| n.to_string()).unwrap_or_else(|| "—".into());
    view! {
        <section class="headline" aria-label="Headline figures">
            <div class="figure">
                <span class="value" data-testid="pending-count">{summary.pending}</span>
                <span class="label">{format!("PENDING now ({})", summary.date)}</span>
            </div>
            <div class="figure">
                <span class="value" data-testid="created-count">{created}</span>
                <span class="label">"created that day"</span>
            </div>
            <div class="figure">
                <span class="value" data-testid="oldest-age">{oldest}</span>
                <span class="label">"oldest PENDING"</span>
            </div>
        </section>
    }
}

/// Day, range and page size: a plain GET form, so every choice lands in the
/// URL and a page can be bookmarked or shared.
#[component]
fn Filters(date: String, days: u32, limit: u32) -> impl IntoView {
    view! {
        <form class="filters" method="get" action="/" data-testid="filters">
            <label>
                "Day (UTC) "
                <input type="date" name="date" value=date data-testid="date"/>
            </label>
            <label>
                <input type="checkbox" name="days" value=OLDER_DAYS.to_string() checked={days > 1} data-testid="older"/>
                {format!(" include the {} days before", OLDER_DAYS - 1)}
            </label>
            <label>
                "Per page "
                <select name="limit" data-testid="limit">
                    {PAGE_SIZES
                        .into_iter()
                        .map(|size| view! { <option value=size.to_string() selected=size == limit>{size}</option> })
                        .collect_view()}
                </select>
            </label>
            <button type="submit">"Show"</button>
        </form>
    }
}

/// PENDING orders per write shard: an even spread is the design working.
#[component]
fn ShardSpread(per_shard: Vec<u64>) -> impl IntoView {
    let max = per_shard.iter().copied().max().unwrap_or(0).max(1);
    view! {
        <section class="shards" aria-label="PENDING orders per shard">
            <h2>"Spread over shards"</h2>
            <ol class="shard-bars" data-testid="shard-bars">
                {per_shard
                    .into_iter()
                    .enumerate()
                    .map(|(shard, count)| {
                        let height = format!("height: {}%", count * 100 / max);
                        view! {
                            <li aria-label=format!("shard {shard}: {count} PENDING")>
                                <span class="count">{count}</span>
                                <span class="bar-box"><span class="bar" style=height></span></span>
                                <span class="shard">{shard}</span>
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        </section>
    }
}

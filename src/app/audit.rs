//! The audit trail (admins): every change of a day, or every change by one
//! actor, newest first, a page at a time.

use super::common::{DayInput, ErrorView, Pager, TableHead, href, paging};
use super::data::get_audit;
use crate::model::{AuditEntry, AuditListing, AuditParams, iso_millis};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        query.with(|q| AuditParams {
            date: q.get("date"),
            actor: q.get("actor"),
            limit: q.get("limit"),
            cursor: q.get("cursor"),
        })
    };
    let listing = Resource::new(params, get_audit);
    view! {
        <h1>"Audit trail"</h1>
        <form class="filters" method="get" action="/audit" data-testid="audit-filters">
            <label>
                "Day (UTC) "
                // One actor's changes span days: no day is shown then.
                {move || match query.with(|q| q.get("actor").filter(|a| !a.is_empty())) {
                    Some(_) => view! { <input type="date" name="date" value=query.with(|q| q.get("date"))/> }.into_any(),
                    None => view! { <DayInput asked=Signal::derive(move || query.with(|q| q.get("date")))/> }.into_any(),
                }}
            </label>
            <label>"or actor " <input name="actor" value=move || query.with(|q| q.get("actor")) placeholder="user or token name"/></label>
            <button type="submit">"Show"</button>
        </form>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match listing.await {
                    Ok(listing) => view! { <AuditTable listing/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/audit"/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn AuditTable(listing: AuditListing) -> impl IntoView {
    let query = use_query_map();
    let raw = move |key: &str| query.with_untracked(|q| q.get(key));
    let links = paging(raw("cursor"), raw("trail"), listing.next.clone());
    let link = move |(cursor, trail): (Option<String>, Option<String>)| {
        href(
            "/audit",
            &[
                ("date", raw("date")),
                ("actor", raw("actor")),
                ("limit", raw("limit")),
                ("cursor", cursor),
                ("trail", trail),
            ],
        )
    };
    let empty = listing.entries.is_empty();
    view! {
        <table class="orders" data-testid="audit-table">
            <caption class="visually-hidden">"Changes, newest first"</caption>
            <TableHead columns=&[
                ("When (UTC)", false),
                ("Order", false),
                ("By", false),
                ("Change", false),
                ("Reason", false),
            ]/>
            <tbody>
                {listing.entries.into_iter().map(|entry| view! { <AuditRow entry/> }).collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="empty" data-testid="empty">"No changes here."</p> })}
        <Pager prev=links.prev.map(link) next=links.next.map(link)/>
    }
}

/// "created as PENDING" or "PENDING → CANCELLED".
pub fn change_text(entry: &AuditEntry) -> String {
    match entry.from {
        None => format!("created as {}", entry.to),
        Some(from) => format!("{from} → {}", entry.to),
    }
}

#[component]
fn AuditRow(entry: AuditEntry) -> impl IntoView {
    let by = format!("{} ({})", entry.actor, entry.method.as_str());
    let reason = match (&entry.reason, &entry.bulk_id) {
        (Some(reason), Some(bulk)) => format!("{reason} (bulk {bulk})"),
        (Some(reason), None) => reason.clone(),
        (None, Some(bulk)) => format!("bulk {bulk}"),
        (None, None) => String::new(),
    };
    view! {
        <tr data-order-id=entry.order_id.clone()>
            <td>{iso_millis::format(&entry.at)}</td>
            <td class="mono"><a href=format!("/orders/{}", entry.order_id)>{entry.order_id.clone()}</a></td>
            <td>{by}</td>
            <td>{change_text(&entry)}</td>
            <td>{reason}</td>
        </tr>
    }
}

//! The audit trail (admins): every record of a day, or every record of one
//! actor, newest first, a page at a time, of one kind when asked: order
//! changes and security events (sign-ins, accounts, tokens, sale plans...).
//! A record is shown whatever it holds: what could not be read is named.

use super::common::{DayInput, ErrorView, Pager, TableHead, href, paging};
use super::data::get_audit;
use crate::model::{AuditEntry, AuditKind, AuditListing, AuditParams, AuditRecord, iso_millis};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let params = move || {
        query.with(|q| AuditParams {
            date: q.get("date"),
            actor: q.get("actor"),
            kind: q.get("kind"),
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
            <label>
                "Kind "
                <select name="kind" data-testid="audit-kind">
                    {move || {
                        let asked = query.with(|q| q.get("kind")).unwrap_or_default();
                        let option = |value: &'static str, text: &'static str| {
                            view! { <option value=value selected=asked == value>{text}</option> }
                        };
                        let kinds: Vec<_> = AuditKind::ALL.into_iter().map(|kind| option(kind.as_str(), kind.as_str())).collect();
                        view! { {option("", "every kind")} {option("security", "security events")} {kinds} }
                    }}
                </select>
            </label>
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
                ("kind", raw("kind")),
                ("limit", raw("limit")),
                ("cursor", cursor),
                ("trail", trail),
            ],
        )
    };
    let empty = listing.entries.is_empty();
    view! {
        <table class="orders" data-testid="audit-table">
            <caption class="visually-hidden">"Records, newest first"</caption>
            <TableHead columns=&[
                ("When (UTC)", false),
                ("Kind", false),
                ("Order or subject", false),
                ("By", false),
                ("From", false),
                ("Change", false),
                ("Reason", false),
            ]/>
            <tbody>
                {listing.entries.into_iter().map(|entry| view! { <AuditRow entry/> }).collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="empty" data-testid="empty">"No records here."</p> })}
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

/// What a record says changed: an order's move, else the event's detail
/// and refusal, else nothing.
fn record_change(record: &AuditRecord) -> String {
    if record.kind == AuditKind::OrderChange {
        return match (record.from, record.to) {
            (None, Some(to)) => format!("created as {to}"),
            (Some(from), Some(to)) => format!("{from} → {to}"),
            (Some(from), None) => format!("{from} → ?"),
            (None, None) => String::new(),
        };
    }
    let refused = record.refused.map(|why| format!("refused: {}", why.as_str()));
    [refused, record.detail.clone()].into_iter().flatten().collect::<Vec<_>>().join("; ")
}

#[component]
fn AuditRow(entry: AuditRecord) -> impl IntoView {
    let by = match (&entry.actor, entry.method) {
        (Some(actor), Some(method)) => format!("{actor} ({})", method.as_str()),
        (Some(actor), None) => actor.clone(),
        (None, _) => "?".to_string(),
    };
    let mut reason = match (&entry.reason, &entry.bulk_id) {
        (Some(reason), Some(bulk)) => format!("{reason} (bulk {bulk})"),
        (Some(reason), None) => reason.clone(),
        (None, Some(bulk)) => format!("bulk {bulk}"),
        (None, None) => String::new(),
    };
    if !entry.problems.is_empty() {
        let unread = format!("unread: {}", entry.problems.join(", "));
        reason = if reason.is_empty() { unread } else { format!("{reason}; {unread}") };
    }
    let change = record_change(&entry);
    let subject = match (&entry.order_id, &entry.subject) {
        (Some(order_id), _) => view! { <a href=format!("/orders/{order_id}")>{order_id.clone()}</a> }.into_any(),
        (None, Some(subject)) => subject.clone().into_any(),
        (None, None) => "".into_any(),
    };
    view! {
        <tr data-kind=entry.kind.as_str() data-order-id=entry.order_id.clone()>
            <td>{iso_millis::format(&entry.at)}</td>
            <td>{entry.kind.as_str()}</td>
            <td class="mono">{subject}</td>
            <td>{by}</td>
            <td class="mono">{entry.client.clone().unwrap_or_default()}</td>
            <td>{change}</td>
            <td>{reason}</td>
        </tr>
    }
}

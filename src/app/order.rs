//! One order: every field, its line items, its timeline of changes, and the
//! status changes allowed from where it stands (to those whose role may
//! make them).

use super::audit::change_text;
use super::common::{ErrorView, StatusBadge, TableHead, can, me, ship_to};
use super::data::{ChangeStatus, ErrorKind, get_order, get_order_history};
use crate::model::{
    AuditEntry, Me, Order, OrderStatus, Permission, Problem, Status, format_amount, format_money, iso_millis,
};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let order_id = move || params.with(|p| p.get("id").unwrap_or_default());
    let change = ServerAction::<ChangeStatus>::new();
    // Read again after every change, successful or not.
    let order = Resource::new(move || (order_id(), change.version().get()), |(id, _)| get_order(id));
    let history = Resource::new(move || (order_id(), change.version().get()), |(id, _)| get_order_history(id));
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let me = me().await;
                match order.await {
                    Ok(order) => view! { <OrderView order change me/> }.into_any(),
                    Err(error) => view! { <ErrorView error/> }.into_any(),
                }
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move { history.await.ok().map(|entries| view! { <Timeline entries/> }) })}
        </Transition>
    }
}

/// Copies an id to the clipboard, and says so.
#[component]
fn CopyButton(text: String) -> impl IntoView {
    let copied = RwSignal::new(false);
    let label = format!("Copy {text}");
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let promise = window().navigator().clipboard().write_text(&text);
            leptos::task::spawn_local(async move {
                copied.set(wasm_bindgen_futures::JsFuture::from(promise).await.is_ok());
            });
        }
    };
    view! {
        <button type="button" class="copy" aria-label=label on:click=copy data-testid="copy">
            {move || if copied.get() { "Copied" } else { "Copy" }}
        </button>
    }
}

/// Every change of the order, oldest first, from the audit trail.
#[component]
fn Timeline(entries: Vec<AuditEntry>) -> impl IntoView {
    view! {
        <h2>"Timeline"</h2>
        <ol class="timeline" data-testid="timeline">
            {entries
                .into_iter()
                .map(|entry| {
                    let reason = entry.reason.clone().map(|r| format!(": {r}")).unwrap_or_default();
                    view! {
                        <li>
                            <time>{iso_millis::format(&entry.at)}</time>
                            " " <strong>{change_text(&entry)}</strong>
                            {format!(" by {} ({}){reason}", entry.actor, entry.method.as_str())}
                        </li>
                    }
                })
                .collect_view()}
        </ol>
    }
}

#[component]
fn OrderView(order: Order, change: ServerAction<ChangeStatus>, me: Option<Me>) -> impl IntoView {
    let outcome = move || match change.value().get() {
        Some(Err(err)) if err.kind == ErrorKind::Conflict => Some(
            view! {
                <div class="notice" role="alert" data-testid="conflict">
                    <p><strong>"Changed by someone else: reload."</strong> " " {err.message}</p>
                    <p><a href="">"Reload"</a></p>
                </div>
            }
            .into_any(),
        ),
        Some(Err(err)) => Some(view! { <div class="error" role="alert">{err.message}</div> }.into_any()),
        _ => None,
    };
    // A field another writer left out or wrote unreadably is "—", and
    // flagged; the section below says why.
    let flagged = |field: &str| order.problems_of(field).next().is_some();
    let (status_flag, customer_flag, created_flag, updated_flag) =
        (flagged("status"), flagged("customerId"), flagged("createdAt"), flagged("updatedAt"));
    let total_flag = flagged("total") || flagged("currency");
    let ship_flag = flagged("shippingCity") || flagged("shippingCountry");
    let time = |at: &Option<chrono::DateTime<chrono::Utc>>| at.as_ref().map_or_else(|| "—".into(), iso_millis::format);
    let customer = order.customer_id.clone().map(|customer_id| {
        let customer_href = format!("/customers/{customer_id}");
        let their_pending = format!("/?days=7&customer={customer_id}");
        view! {
            <a href=customer_href class="mono">{customer_id.clone()}</a>
            <CopyButton text=customer_id/>
            " · "
            <a href=their_pending data-testid="customer-pending">"their other PENDING orders"</a>
        }
    });
    let currency = order.currency.clone();
    view! {
        <h1>"Order " <span class="mono">{order.order_id.clone()}</span> <CopyButton text=order.order_id.clone()/></h1>
        {outcome}
        <Problems problems=order.problems.clone()/>
        <dl class="fields" data-testid="order-fields">
            <dt>"Status"</dt>
            <dd data-testid="order-status" class:unread=status_flag><StatusBadge status=order.status.clone()/></dd>
            <dt>"Customer"</dt>
            <dd class:unread=customer_flag>{customer.map_or_else(|| view! { "—" }.into_any(), IntoAny::into_any)}</dd>
            <dt>"Created (UTC)"</dt>
            <dd class:unread=created_flag>{time(&order.created_at)}</dd>
            <dt>"Updated (UTC)"</dt>
            <dd class:unread=updated_flag>{time(&order.updated_at)}</dd>
            <dt>"Total"</dt>
            <dd class:unread=total_flag data-testid="order-total">
                {format_amount(order.total, order.currency.as_deref())}
            </dd>
            <dt>"Ship to"</dt>
            <dd class:unread=ship_flag>{ship_to(&order.shipping_city, &order.shipping_country)}</dd>
        </dl>
        <StatusButtons order_id=order.order_id.clone() status=order.status.clone() change me/>
        <h2>"Line items"</h2>
        {flagged("items").then(|| view! {
            <p class="muted">"Some line items could not be read: see what could not be read, above."</p>
        })}
        <table class="orders">
            <TableHead columns=&[
                ("SKU", false),
                ("Item", false),
                ("Quantity", true),
                ("Unit price", true),
                ("Line total", true),
            ]/>
            <tbody>
                {order
                    .items
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|item| {
                        let line = item.unit_price.checked_mul(i64::from(item.quantity));
                        let money = |amount: Option<i64>| match &currency {
                            Some(currency) => amount.map_or_else(|| "—".into(), |a| format_money(a, currency)),
                            None => format_amount(amount, None),
                        };
                        view! {
                            <tr>
                                <td class="mono">{item.sku.clone()}</td>
                                <td>{item.name.clone()}</td>
                                <td class="num">{item.quantity}</td>
                                <td class="num">{money(Some(item.unit_price))}</td>
                                <td class="num">{money(line)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// What could not be read of an order another writer wrote, field by field.
#[component]
fn Problems(problems: Vec<Problem>) -> impl IntoView {
    (!problems.is_empty()).then(|| {
        view! {
            <section class="notice problems" data-testid="problems" aria-labelledby="problems-heading">
                <h2 id="problems-heading">"What could not be read"</h2>
                <p>
                    "This order was written by another writer (or changed by hand) and does not hold everything "
                    "this console writes. What it has is shown; what it lacks is marked “—”."
                </p>
                <ul>
                    {problems
                        .into_iter()
                        .map(|p| view! { <li data-field=p.field.clone() data-kind=p.kind.as_str()>{p.why}</li> })
                        .collect_view()}
                </ul>
            </section>
        }
    })
}

/// One button per change the order allows and the user's role may make.
/// Each names the status it expects the order to be in, so a change made
/// meanwhile by someone else is refused. They post JSON (as every write
/// does), so they need the page hydrated. A cancellation needs a reason.
#[component]
fn StatusButtons(
    order_id: String,
    status: Option<OrderStatus>,
    change: ServerAction<ChangeStatus>,
    me: Option<Me>,
) -> impl IntoView {
    let status = match status {
        Some(OrderStatus::Known(status)) => status,
        Some(OrderStatus::Other(text)) => {
            return view! {
                <p class="muted" data-testid="no-actions">
                    {format!("Status {text} is not one this console knows: it offers no change from it.")}
                </p>
            }
            .into_any();
        }
        None => {
            return view! {
                <p class="muted" data-testid="no-actions">"The status cannot be read: no change is offered."</p>
            }
            .into_any();
        }
    };
    let next: Vec<Status> =
        status.next().iter().copied().filter(|to| can(&me, Permission::to_change_status(*to))).collect();
    if status.next().is_empty() {
        return view! { <p class="muted">"No further status changes: the order is closed."</p> }.into_any();
    }
    if next.is_empty() {
        return view! { <p class="muted" data-testid="no-actions">"Your role may not change this order."</p> }
            .into_any();
    }
    let reason = RwSignal::new(String::new());
    view! {
        <section class="actions" aria-label="Change status">
            <label class="reason">
                "Reason "
                <input
                    name="reason"
                    data-testid="reason"
                    placeholder="why (needed to cancel)"
                    maxlength="200"
                    prop:value=move || reason.get()
                    on:input=move |ev| reason.set(event_target_value(&ev))
                />
            </label>
            {next
                .into_iter()
                .map(|to| {
                    let label = match to {
                        Status::Cancelled => "Cancel order".to_string(),
                        other => format!("Mark {other}"),
                    };
                    let order_id = order_id.clone();
                    let request = move |_| {
                        let reason = Some(reason.get_untracked().trim().to_string()).filter(|r| !r.is_empty());
                        change.dispatch(ChangeStatus { order_id: order_id.clone(), from: status, to, reason });
                    };
                    view! {
                        <button
                            type="button"
                            class:danger=to == Status::Cancelled
                            data-to=to.as_str()
                            disabled=move || change.pending().get()
                            on:click=request
                        >
                            {label}
                        </button>
                    }
                })
                .collect_view()}
        </section>
    }
    .into_any()
}

//! One order: every field, its line items, and the status changes allowed
//! from where it stands.

use super::common::{ErrorView, StatusBadge, TableHead};
use super::data::{ChangeStatus, ErrorKind, get_order};
use crate::model::{Order, Status, format_money, iso_millis};
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let order_id = move || params.with(|p| p.get("id").unwrap_or_default());
    let change = ServerAction::<ChangeStatus>::new();
    // Read again after every change, successful or not.
    let order = Resource::new(move || (order_id(), change.version().get()), |(id, _)| get_order(id));
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match order.await {
                    Ok(order) => view! { <OrderView order change/> }.into_any(),
                    Err(error) => view! { <ErrorView error/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn OrderView(order: Order, change: ServerAction<ChangeStatus>) -> impl IntoView {
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
    let customer_href = format!("/customers/{}", order.customer_id);
    view! {
        <h1>"Order " <span class="mono">{order.order_id.clone()}</span></h1>
        {outcome}
        <dl class="fields" data-testid="order-fields">
            <dt>"Status"</dt>
            <dd data-testid="order-status"><StatusBadge status=order.status/></dd>
            <dt>"Customer"</dt>
            <dd><a href=customer_href class="mono">{order.customer_id.clone()}</a></dd>
            <dt>"Created (UTC)"</dt>
            <dd>{iso_millis::format(&order.created_at)}</dd>
            <dt>"Updated (UTC)"</dt>
            <dd>{iso_millis::format(&order.updated_at)}</dd>
            <dt>"Total"</dt>
            <dd>{format_money(order.total, &order.currency)}</dd>
            <dt>"Ship to"</dt>
            <dd>{format!("{}, {}", order.shipping_city, order.shipping_country)}</dd>
        </dl>
        <StatusButtons order_id=order.order_id.clone() status=order.status change/>
        <h2>"Line items"</h2>
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
                    .iter()
                    .map(|item| {
                        let line = item.unit_price * i64::from(item.quantity);
                        view! {
                            <tr>
                                <td class="mono">{item.sku.clone()}</td>
                                <td>{item.name.clone()}</td>
                                <td class="num">{item.quantity}</td>
                                <td class="num">{format_money(item.unit_price, &order.currency)}</td>
                                <td class="num">{format_money(line, &order.currency)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// One button per allowed change. Each names the status it expects the
/// order to be in, so a change made meanwhile by someone else is refused.
/// They post JSON (as every write does), so they need the page hydrated.
#[component]
fn StatusButtons(order_id: String, status: Status, change: ServerAction<ChangeStatus>) -> impl IntoView {
    let next = status.next();
    if next.is_empty() {
        return view! { <p class="muted">"No further status changes: the order is closed."</p> }.into_any();
    }
    view! {
        <section class="actions" aria-label="Change status">
            {next
                .iter()
                .map(|to| {
                    let label = match to {
                        Status::Cancelled => "Cancel order".to_string(),
                        other => format!("Mark {other}"),
                    };
                    let order_id = order_id.clone();
                    let to = *to;
                    let request = move |_| {
                        change.dispatch(ChangeStatus { order_id: order_id.clone(), from: status, to });
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

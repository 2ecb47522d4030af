//! The capacity page's "Data quality" panel: what the orders table's other
//! writers (and this app) wrote that day that does not hold what the access
//! patterns need, with the first keys of each kind (each a link to its
//! order), and how large the items written are, so a growing p95 is seen
//! before it costs a second write unit on every write.

use super::common::TableHead;
use crate::model::{DriftCount, QualityReport, SizeFigures};
use leptos::prelude::*;

/// Bytes for people: "812 B", "3.9 KB", "398.4 KB" (1 KB = 1,024 bytes, as
/// DynamoDB counts).
fn bytes(n: u64) -> String {
    if n < 1024 { format!("{n} B") } else { format!("{:.1} KB", n as f64 / 1024.0) }
}

fn maybe_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| "—".into(), bytes)
}

#[component]
pub fn QualitySection(report: QualityReport) -> impl IntoView {
    let as_of = report.as_of.format("%H:%M:%S UTC").to_string();
    let summary = format!(
        "{} items written on {} by every writer (from the stream); {} of them did not hold what the access patterns \
         need · as of {as_of}",
        report.items_written, report.date, report.items_drifted
    );
    view! {
        <section aria-labelledby="quality-heading" id="quality" data-testid="quality">
            <h2 id="quality-heading">"Data quality"</h2>
            <p class="muted" data-testid="quality-summary" data-written=report.items_written data-drifted=report.items_drifted>
                {summary}
            </p>
            <DriftTable drift=report.drift/>
            <SizeFiguresView size=report.size previous_p95=report.previous_p95 growth=report.growth/>
        </section>
    }
}

#[component]
fn DriftTable(drift: Vec<DriftCount>) -> impl IntoView {
    if drift.is_empty() {
        return view! { <p class="empty" data-testid="no-drift">"No drift seen this day: every item written held what the pages read."</p> }
            .into_any();
    }
    view! {
        <h3>"Schema drift"</h3>
        <p class="muted">
            "Items written that miss or mistype a field, carry a status this console does not know, or whose keys "
            "disagree with their fields (a GSI2 key on a shard no reader reads, or another day; a sort key not "
            "<createdAt>#<orderId>). The pages show such orders with what they have, flagged; the first keys seen "
            "of each kind link to them."
        </p>
        <table class="orders" data-testid="drift-table">
            <caption class="visually-hidden">"Drift per kind and field"</caption>
            <TableHead columns=&[("Kind", false), ("Field", false), ("Items", true), ("First keys seen", false)]/>
            <tbody>
                {drift
                    .into_iter()
                    .map(|d| {
                        view! {
                            <tr data-kind=d.kind.as_str() data-field=d.field.clone()>
                                <td>{d.kind.describe()}</td>
                                <td class="mono">{d.field.clone()}</td>
                                <td class="num">{d.items}</td>
                                <td class="samples">
                                    {d
                                        .samples
                                        .into_iter()
                                        .map(|s| {
                                            let title = format!("written {}", s.at.format("%H:%M:%S UTC"));
                                            match s.order_id {
                                                Some(id) => view! {
                                                    <a class="mono" href=format!("/orders/{id}") title=title data-testid="drift-sample">
                                                        {id.clone()}
                                                    </a>
                                                    " "
                                                }
                                                .into_any(),
                                                None => view! {
                                                    <span class="mono" title=title data-testid="drift-sample">{s.key}</span>
                                                    " "
                                                }
                                                .into_any(),
                                            }
                                        })
                                        .collect_view()}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn SizeFiguresView(size: SizeFigures, previous_p95: Option<u64>, growth: Option<String>) -> impl IntoView {
    let p95 = match previous_p95 {
        Some(before) => format!("{} (the day before: {})", maybe_bytes(size.p95), bytes(before)),
        None => maybe_bytes(size.p95),
    };
    view! {
        <h3>"Item sizes"</h3>
        <p class="muted">
            "Sizes of the items written (each put's or update's new item, as DynamoDB sizes it): a write costs one "
            "unit per started KB on the table and again on GSI1, which projects every attribute; a strongly "
            "consistent read one unit per started 4 KB. Percentiles are read from buckets 9% wide."
        </p>
        {growth.map(|g| view! { <p class="notice" data-testid="size-growth">{g}</p> })}
        <dl class="fields" data-testid="size-figures">
            <dt>"Items written"</dt>
            <dd data-testid="size-items">{size.items}</dd>
            <dt>"Median (p50)"</dt>
            <dd data-testid="size-p50">{maybe_bytes(size.p50)}</dd>
            <dt>"p95"</dt>
            <dd data-testid="size-p95">{p95}</dd>
            <dt>"Largest"</dt>
            <dd data-testid="size-max">{maybe_bytes(size.max)}</dd>
            <dt>"Mean"</dt>
            <dd>{maybe_bytes(size.mean)}</dd>
            <dt>"Over one write unit (1 KB)"</dt>
            <dd data-testid="over-write-unit">{size.over_write_unit}</dd>
            <dt>"Over one read unit (4 KB)"</dt>
            <dd data-testid="over-read-unit">{size.over_read_unit}</dd>
        </dl>
        {(!size.largest.is_empty()).then(|| view! {
            <table class="orders" data-testid="largest-table">
                <caption>"The largest items written"</caption>
                <TableHead columns=&[("Key", false), ("Size", true)]/>
                <tbody>
                    {size
                        .largest
                        .into_iter()
                        .map(|l| {
                            let key = match l.order_id {
                                Some(id) => view! { <a class="mono" href=format!("/orders/{id}")>{l.key.clone()}</a> }.into_any(),
                                None => view! { <span class="mono">{l.key.clone()}</span> }.into_any(),
                            };
                            view! {
                                <tr data-key=l.key.clone()>
                                    <td>{key}</td>
                                    <td class="num">{bytes(l.bytes)}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        })}
        {(!size.per_write.is_empty()).then(|| view! {
            <table class="orders" data-testid="per-write-table">
                <caption>{format!("Write units per write of the table ({} writes)", size.writes)}</caption>
                <TableHead columns=&[("Table or index", false), ("Write units", true), ("Per write of the table", true)]/>
                <tbody>
                    {size
                        .per_write
                        .into_iter()
                        .map(|c| view! {
                            <tr data-resource=c.resource.clone()>
                                <td class="mono">{c.resource.clone()}</td>
                                <td class="num">{c.units}</td>
                                <td class="num">{format!("{:.2}", c.per_write)}</td>
                            </tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
        })}
    }
}

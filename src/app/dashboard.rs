//! The PENDING dashboard: headline figures, the spread over shards, and the
//! newest-first list, refreshed every few seconds while it is on screen.

use super::common::{ErrorView, Pager, TableHead, href, paging};
use super::data::get_dashboard;
use super::live::{Live, LiveStatus};
use crate::model::{Activity, Dashboard, LiveEvent, PendingOrder, PendingParams, Summary, format_age, format_money};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// How often page one refreshes itself while visible.
#[cfg(feature = "hydrate")]
const REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Ticks between full reads of page one while live events flow.
#[cfg(feature = "hydrate")]
const RESYNC_TICKS: u32 = 6;
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
    let live = Live::new();

    // Pushed events change the page in place (see DashboardView). Besides,
    // every few seconds while the tab is visible: a failed read (store down)
    // is retried; page one is read again while live updates are down, and
    // now and then while they flow, to bring the chart and the oldest age
    // along.
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        {
            let ticks = StoredValue::new(0u32);
            let tick = move || {
                ticks.update_value(|t| *t += 1);
                let on_page_one = query.with_untracked(|q| q.get("cursor").is_none());
                let failed = dashboard.get_untracked().is_some_and(|d| d.is_err());
                let live_down = live.status.get_untracked() == LiveStatus::Down;
                let stale = live.dirty.get_untracked() && ticks.get_value() >= RESYNC_TICKS;
                if !document().hidden() && (failed || (on_page_one && (live_down || stale))) {
                    ticks.set_value(0);
                    live.dirty.set(false);
                    dashboard.refetch();
                }
            };
            if let Ok(handle) = set_interval_with_handle(tick, REFRESH_EVERY) {
                on_cleanup(move || handle.clear());
            }
        }
    });
    // One live connection per day shown; it follows the day picker.
    Effect::new(move |_| {
        let date = query.with(|q| q.get("date")).unwrap_or_default();
        #[cfg(feature = "hydrate")]
        {
            let close = super::live::connect(format!("/api/live?date={date}"), live, move || dashboard.refetch());
            // The connection lives in this browser thread; the wrapper only
            // satisfies on_cleanup's Send bound.
            let close = send_wrapper::SendWrapper::new(close);
            on_cleanup(move || (close.take())());
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = date;
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
                    Ok(data) => view! { <DashboardView data live/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/"/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn DashboardView(data: Dashboard, live: Live) -> impl IntoView {
    let query = use_query_map();
    let raw = move |key: &str| query.with_untracked(|q| q.get(key));
    let Dashboard { page, summary, activity, behind_ms, stuck_after_minutes } = data;
    let links = paging(raw("cursor"), raw("trail"), page.next.clone());
    let link = |(cursor, trail): (Option<String>, Option<String>)| {
        href(
            "/",
            &[
                ("date", raw("date")),
                ("days", raw("days")),
                ("limit", raw("limit")),
                ("cursor", cursor),
                ("trail", trail),
            ],
        )
    };
    let first_page = link((None, None));
    let limit = raw("limit").and_then(|l| l.parse().ok()).unwrap_or(crate::model::DEFAULT_PAGE_SIZE) as usize;
    let on_page_one = raw("cursor").is_none();
    let stuck_after = chrono::Duration::minutes(i64::from(stuck_after_minutes));
    let range = if page.days > 1 {
        format!("{} and the {} days before", page.date, page.days - 1)
    } else {
        page.date.to_string()
    };
    let items_read = page.items_read;

    // What pushes change in place: rows, headline figures, the clock ages are
    // measured against, and a count of newer orders for pages after the first.
    let rows = RwSignal::new(page.orders);
    let headline = RwSignal::new(summary);
    let as_of = RwSignal::new(page.as_of);
    let behind = RwSignal::new(behind_ms);
    let newer = RwSignal::new(0u32);
    let applied = StoredValue::new(live.next_seq());
    let day = page.date;
    Effect::new(move |_| {
        live.events.with(|events| {
            for (seq, event) in events.iter().filter(|(seq, _)| *seq >= applied.get_value()) {
                applied.set_value(seq + 1);
                apply(event, day, on_page_one, limit, rows, headline, as_of, behind, newer);
            }
        });
    });

    view! {
        <Headline headline as_of/>
        <LiveLine status=live.status as_of behind/>
        <Filters date=page.date.to_string() days=page.days limit=limit as u32/>
        <div class="panels">
            <ShardSpread headline/>
            {activity.map(|activity| view! { <ActivityChart activity/> })}
        </div>
        <p class="as-of" data-testid="as-of">
            {move || format!("{range} · read {} UTC · {items_read} index items read", as_of.get().format("%H:%M:%S"))}
        </p>
        {move || (newer.get() > 0).then(|| view! {
            <p class="notice" data-testid="newer">
                {format!("{} new orders since this page was read. ", newer.get())}
                <a href=first_page.clone()>"Go to page one"</a>
            </p>
        })}
        <table class="orders" data-testid="pending-table">
            <caption class="visually-hidden">"PENDING orders, newest first"</caption>
            <TableHead columns=&[
                ("Created (UTC)", false),
                ("Age", false),
                ("Order", false),
                ("Customer", false),
                ("Items", true),
                ("Total", true),
                ("Ship to", false),
            ]/>
            <tbody>
                <For each=move || rows.get() key=|order| order.order_id.clone() let:order>
                    <Row order as_of stuck_after/>
                </For>
            </tbody>
        </table>
        {move || rows.with(Vec::is_empty).then(|| view! {
            <p class="empty" data-testid="empty">"No PENDING orders on this page."</p>
        })}
        <Pager prev=links.prev.map(link) next=links.next.map(link)/>
    }
}

/// Applies one pushed event to what the view shows.
#[allow(clippy::too_many_arguments)]
fn apply(
    event: &LiveEvent,
    day: chrono::NaiveDate,
    on_page_one: bool,
    limit: usize,
    rows: RwSignal<Vec<PendingOrder>>,
    headline: RwSignal<Summary>,
    as_of: RwSignal<DateTime<Utc>>,
    behind: RwSignal<Option<i64>>,
    newer: RwSignal<u32>,
) {
    match event {
        LiveEvent::Counters(c) if c.counts.date == day => {
            headline.update(|h| h.counts = c.counts.clone());
            as_of.set(c.as_of);
            behind.set(c.behind_ms);
        }
        LiveEvent::Entered { date, order } if *date == day => {
            if on_page_one {
                rows.update(|rows| {
                    if rows.iter().all(|o| o.order_id != order.order_id) {
                        let at =
                            rows.partition_point(|o| (o.created_at, &o.order_id) > (order.created_at, &order.order_id));
                        rows.insert(at, order.clone());
                        rows.truncate(limit);
                    }
                });
            } else {
                newer.update(|n| *n += 1);
            }
        }
        LiveEvent::Left { order_id, .. } => rows.update(|rows| rows.retain(|o| &o.order_id != order_id)),
        _ => {}
    }
}

#[component]
fn Row(order: PendingOrder, as_of: RwSignal<DateTime<Utc>>, stuck_after: chrono::Duration) -> impl IntoView {
    let created = order.created_at;
    let stuck = move || as_of.get() - created > stuck_after;
    view! {
        <tr data-order-id=order.order_id.clone() class:stuck=stuck>
            <td>{created.format("%Y-%m-%d %H:%M:%S").to_string()}</td>
            <td>
                {move || format_age(created, as_of.get())}
                {move || stuck().then(|| view! { <span class="badge stuck-badge">"stuck"</span> })}
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
}

#[component]
fn LiveLine(
    status: RwSignal<LiveStatus>,
    as_of: RwSignal<DateTime<Utc>>,
    behind: RwSignal<Option<i64>>,
) -> impl IntoView {
    view! {
        <p class="live" data-testid="live-status" data-live=move || format!("{:?}", status.get()).to_lowercase()>
            {move || match status.get() {
                LiveStatus::Up => {
                    // Stream records carry their time rounded down to the second.
                    let lag = match behind.get() {
                        Some(ms) if ms >= 2000 => format!(" · stream {} s behind", ms / 1000),
                        Some(_) => " · stream caught up".to_string(),
                        None => String::new(),
                    };
                    format!("● Live · figures as of {} UTC{lag}", as_of.get().format("%H:%M:%S"))
                }
                LiveStatus::Connecting => "○ Connecting to live updates…".to_string(),
                LiveStatus::Down => format!(
                    "Live updates are down: figures as of {} UTC; reconnecting and re-reading page one every few seconds.",
                    as_of.get().format("%H:%M:%S")
                ),
            }}
        </p>
    }
}

#[component]
fn Headline(headline: RwSignal<Summary>, as_of: RwSignal<DateTime<Utc>>) -> impl IntoView {
    let oldest =
        move || headline.with(|h| h.oldest_pending).map(|at| format_age(at, as_of.get())).unwrap_or_else(|| "—".into());
    // A day the stream consumer has not counted shows no figures, not zeros.
    let figure = move |read: fn(&crate::model::DayCounts) -> u64| {
        headline.with(|h| if h.counts.counted { read(&h.counts).to_string() } else { "—".into() })
    };
    view! {
        <section class="headline" aria-label="Headline figures">
            <div class="figure">
                <span class="value" data-testid="pending-count">{move || figure(|c| c.pending)}</span>
                <span class="label">{move || format!("PENDING now ({})", headline.with(|h| h.counts.date))}</span>
            </div>
            <div class="figure">
                <span class="value" data-testid="created-count">{move || figure(|c| c.created)}</span>
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
fn ShardSpread(headline: RwSignal<Summary>) -> impl IntoView {
    view! {
        <section class="shards" aria-label="PENDING orders per shard">
            <h2>"Spread over shards"</h2>
            <ol class="shard-bars" data-testid="shard-bars">
                {move || {
                    let per_shard = headline.with(|h| h.counts.per_shard.clone());
                    let max = per_shard.iter().copied().max().unwrap_or(0).max(1);
                    per_shard
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
                        .collect_view()
                }}
            </ol>
        </section>
    }
}

/// The day in ten-minute buckets: orders created (bars) and the PENDING
/// backlog of the day's orders (line), so a sale's spike and drain show.
#[component]
fn ActivityChart(activity: Activity) -> impl IntoView {
    const W: f64 = 720.0;
    const H: f64 = 160.0;
    let buckets = activity.created.len().max(1) as f64;
    let step = W / buckets;
    // Two scales: the backlog fills the height, the bars its lower half.
    let top_backlog = activity.backlog.iter().copied().max().unwrap_or(0).max(1) as f64;
    let top_created = activity.created.iter().copied().max().unwrap_or(0).max(1) as f64;
    let y = move |v: i64| H - (v.max(0) as f64 / top_backlog) * (H - 8.0);
    let bar_y = move |v: i64| H - (v.max(0) as f64 / top_created) * (H / 2.0);
    let bars = activity
        .created
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| {
            view! { <rect class="created" x=format!("{:.1}", i as f64 * step) y=format!("{:.1}", bar_y(*n)) width=format!("{:.1}", step.max(1.0)) height=format!("{:.1}", H - bar_y(*n))/> }
        })
        .collect_view();
    let line: Vec<String> = activity
        .backlog
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", (i as f64 + 1.0) * step, y(*v)))
        .collect();
    let peak_created = activity.created.iter().copied().max().unwrap_or(0);
    let peak_backlog = activity.backlog.iter().copied().max().unwrap_or(0);
    let label = format!(
        "Orders created per ten minutes (peak {peak_created}) and PENDING backlog of the day (peak {peak_backlog})"
    );
    view! {
        <figure class="activity" data-testid="activity-chart">
            <svg viewBox=format!("0 0 {W} {}", H + 16.0) role="img" aria-label=label.clone()>
                <title>{label.clone()}</title>
                {bars}
                <polyline class="backlog" points=format!("0,{H} {}", line.join(" "))/>
                {(0..=4).map(|q| {
                    let x = q as f64 * W / 4.0;
                    view! { <text x=format!("{x:.0}") y=format!("{}", H + 13.0) text-anchor=if q == 0 { "start" } else if q == 4 { "end" } else { "middle" }>{format!("{:02}:00", q * 6)}</text> }
                }).collect_view()}
            </svg>
            <figcaption>
                <span class="key created">"created / 10 min"</span>
                <span class="key backlog">"PENDING backlog"</span>
            </figcaption>
        </figure>
    }
}

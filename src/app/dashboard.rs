//! The PENDING dashboard: headline figures, the spread over shards, and the
//! newest-first list, refreshed every few seconds while it is on screen.

use super::common::{
    ErrorView, MeResource, Pager, ProblemsFlag, TableHead, can, clock, date_time, day_axis, href, or_dash, paging,
    push_svg_num, ship_to, svg_num,
};
use super::data::get_dashboard;
use super::live::{Live, LiveStatus};
use super::queue::{Allowed, Selection};
use crate::model::{
    Activity, Dashboard, LiveEvent, PendingOrder, PendingParams, Permission, Summary, format_age, format_amount,
};
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
            stuck: q.get("stuck"),
            country: q.get("country"),
            min_total: q.get("minTotal"),
            customer: q.get("customer"),
        })
    };
    let dashboard: DashboardResource = Resource::new(params, get_dashboard);
    provide_context(dashboard);
    let live = Live::new();
    // Kept across pages and reads of the list: a selection can span pages,
    // and a bulk run's progress outlives the list being read again.
    let selection = Selection::new(Callback::new(move |()| dashboard.refetch()));

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
                    // Untracked: the view follows the data, not the URL (the
                    // resource already does).
                    Ok(data) => view! { <DashboardView data live selection params=untrack(params)/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/"/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn DashboardView(data: Dashboard, live: Live, selection: Selection, params: PendingParams) -> impl IntoView {
    let query = use_query_map();
    let raw = move |key: &str| query.with_untracked(|q| q.get(key));
    let Dashboard { page, summary, activity, behind_ms, stuck_after_minutes } = data;
    let links = paging(raw("cursor"), raw("trail"), page.next.clone());
    let view_params = |(cursor, trail): (Option<String>, Option<String>)| {
        let mut pairs: Vec<(&str, Option<String>)> = LIST_KEYS.iter().map(|key| (*key, raw(key))).collect();
        pairs.extend([("cursor", cursor), ("trail", trail)]);
        pairs
    };
    let link = move |position| href("/", &view_params(position));
    let first_page = link((None, None));
    let export = |format: &str| href(&format!("/api/pending.{format}"), &view_params((None, None)));
    let limit = raw("limit").and_then(|l| l.parse().ok()).unwrap_or(crate::model::DEFAULT_PAGE_SIZE) as usize;
    let stuck_after = chrono::Duration::minutes(i64::from(stuck_after_minutes));
    let range = if page.days > 1 {
        format!("{} and the {} days before", page.date, page.days - 1)
    } else {
        page.date.to_string()
    };
    let items_read = page.items_read;
    let more_beyond = page.next.is_some();
    let page_ids: Vec<String> = page.orders.iter().map(|o| o.order_id.clone()).collect();

    // What pushes change in place: rows, headline figures, the clock ages are
    // measured against, and a count of newer orders for pages after the first.
    let shown = Shown {
        rows: RwSignal::new(page.orders),
        headline: RwSignal::new(summary),
        as_of: RwSignal::new(page.as_of),
        behind: RwSignal::new(behind_ms),
        newer: RwSignal::new(0u32),
    };
    let pushes =
        Pushes { day: page.date, on_page_one: raw("cursor").is_none(), limit, keeps: ListFilter::from_params(&params) };
    let applied = StoredValue::new(live.next_seq());
    let dashboard = use_context::<DashboardResource>();
    Effect::new(move |_| {
        let reread = live.events.with(|events| {
            let mut reread = false;
            for (seq, event) in events.iter().filter(|(seq, _)| *seq >= applied.get_value()) {
                applied.set_value(seq + 1);
                reread |= pushes.apply(event, shown);
            }
            reread
        });
        if let (true, Some(dashboard)) = (reread, dashboard) {
            dashboard.refetch();
        }
    });
    let me = use_context::<MeResource>().and_then(|me| me.get_untracked()).and_then(Result::ok).flatten();
    let allowed = Allowed { cancel: can(&me, Permission::CancelOrder), confirm: can(&me, Permission::ChangeOrders) };
    let open = can(&me, Permission::ViewOrders);
    let row_ids = Signal::derive(move || shown.rows.with(|rows| rows.iter().map(|o| o.order_id.clone()).collect()));
    super::queue::keyboard(selection, allowed, row_ids, open);
    let Shown { rows, headline, as_of, behind, newer } = shown;

    view! {
        <Headline headline as_of/>
        <LiveLine status=live.status as_of behind/>
        <Filters date=page.date.to_string() days=page.days limit=limit as u32 raw/>
        <div class="panels">
            <ShardSpread headline/>
            {activity.map(|activity| view! { <ActivityChart activity/> })}
        </div>
        <p class="as-of" data-testid="as-of">
            {move || format!("{range} · read {} UTC · {items_read} index items read", clock(as_of.get()))}
            " · "
            <a href=export("csv") download rel="external" data-testid="export-csv">"Export CSV"</a>
            " · "
            <a href=export("jsonl") download rel="external" data-testid="export-jsonl">"JSON lines"</a>
            " · "
            <button type="button" class="link" on:click=move |_| selection.help.update(|h| *h = !*h)>"Keys (?)"</button>
        </p>
        <super::queue::KeyHelp selection/>
        {(allowed.cancel || allowed.confirm).then(|| view! {
            <super::queue::BulkBar selection allowed filter=params.clone() page_ids more_beyond/>
        })}
        {move || (newer.get() > 0).then(|| view! {
            <p class="notice" data-testid="newer">
                {format!("{} new orders since this page was read. ", newer.get())}
                <a href=first_page.clone()>"Go to page one"</a>
            </p>
        })}
        <table class="orders" data-testid="pending-table">
            <caption class="visually-hidden">"PENDING orders, newest first"</caption>
            <TableHead columns=if allowed.cancel { &COLUMNS_SELECTABLE } else { &COLUMNS }/>
            <tbody>
                <For each=move || rows.get() key=|order| order.order_id.clone() let:order>
                    <Row order as_of stuck_after selection selectable=allowed.cancel open/>
                </For>
            </tbody>
        </table>
        {move || rows.with(Vec::is_empty).then(|| view! {
            <p class="empty" data-testid="empty">"No PENDING orders on this page."</p>
        })}
        <Pager prev=links.prev.map(link) next=links.next.map(link)/>
    }
}

/// The list's query keys a link keeps (the cursor and trail are the page's own).
const LIST_KEYS: [&str; 7] = ["date", "days", "limit", "stuck", "country", "minTotal", "customer"];

const COLUMNS: [(&str, bool); 7] = [
    ("Created (UTC)", false),
    ("Age", false),
    ("Order", false),
    ("Customer", false),
    ("Items", true),
    ("Total", true),
    ("Ship to", false),
];

/// The same with a first column of checkboxes, for those who may select.
const COLUMNS_SELECTABLE: [(&str, bool); 8] = {
    let mut columns = [("Select", false); 8];
    let mut i = 0;
    while i < COLUMNS.len() {
        columns[i + 1] = COLUMNS[i];
        i += 1;
    }
    columns
};

/// The dashboard resource, for views that read it again.
pub type DashboardResource = Resource<Result<Dashboard, super::data::PageError>>;

/// What the view shows that pushes change.
#[derive(Clone, Copy)]
struct Shown {
    rows: RwSignal<Vec<PendingOrder>>,
    headline: RwSignal<Summary>,
    as_of: RwSignal<DateTime<Utc>>,
    behind: RwSignal<Option<i64>>,
    newer: RwSignal<u32>,
}

/// How pushed events reach a view of the list.
#[derive(Clone)]
struct Pushes {
    day: chrono::NaiveDate,
    on_page_one: bool,
    limit: usize,
    keeps: ListFilter,
}

impl Pushes {
    /// Changes the view in place; `true` when page one is to be read again
    /// (another instance changed its orders: only a read has the rows).
    fn apply(&self, event: &LiveEvent, shown: Shown) -> bool {
        match event {
            LiveEvent::Counters(c) if c.counts.date == self.day => {
                shown.headline.update(|h| h.counts = c.counts.clone());
                shown.as_of.set(c.as_of);
                shown.behind.set(c.behind_ms);
            }
            LiveEvent::Entered { date, order } if *date == self.day && self.keeps.keeps(order) => {
                if self.on_page_one {
                    shown.rows.update(|rows| insert_newest_first(rows, order, self.limit));
                } else {
                    shown.newer.update(|n| *n += 1);
                }
            }
            LiveEvent::Left { order_id, .. } => shown.rows.update(|rows| rows.retain(|o| &o.order_id != order_id)),
            LiveEvent::Changed { date } if *date == self.day => return self.on_page_one,
            _ => {}
        }
        false
    }
}

/// Rows are newest first; one whose time could not be read goes last.
fn insert_newest_first(rows: &mut Vec<PendingOrder>, order: &PendingOrder, limit: usize) {
    if rows.iter().all(|o| o.order_id != order.order_id) {
        let at = rows.partition_point(|o| (o.created_at, &o.order_id) > (order.created_at, &order.order_id));
        rows.insert(at, order.clone());
        rows.truncate(limit);
    }
}

/// The view's filter, as pushed orders are checked against it (the server
/// checks the list itself; a new order is never stuck).
#[derive(Clone, Default)]
struct ListFilter {
    stuck: bool,
    country: Option<String>,
    min_total: Option<i64>,
    customer: Option<String>,
}

impl ListFilter {
    fn from_params(params: &PendingParams) -> Self {
        let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_string);
        ListFilter {
            stuck: given(&params.stuck).is_some_and(|s| s == "1" || s == "true" || s == "on"),
            country: given(&params.country).map(|c| c.to_ascii_uppercase()),
            min_total: given(&params.min_total).and_then(|t| crate::model::parse_amount(&t)),
            customer: given(&params.customer),
        }
    }

    /// As the server's filter: what cannot be read does not match a filter on it.
    fn keeps(&self, order: &PendingOrder) -> bool {
        !self.stuck
            && self.country.as_ref().is_none_or(|c| order.shipping_country.as_ref() == Some(c))
            && self.min_total.is_none_or(|m| order.total.is_some_and(|total| total >= m))
            && self.customer.as_ref().is_none_or(|c| order.customer_id.as_ref() == Some(c))
    }
}

#[component]
fn Row(
    order: PendingOrder,
    as_of: RwSignal<DateTime<Utc>>,
    stuck_after: chrono::Duration,
    selection: Selection,
    selectable: bool,
    /// Whether the user may open orders and customers (personal data).
    open: bool,
) -> impl IntoView {
    let created = order.created_at;
    // An order whose creation time cannot be read has no age, and is not
    // called stuck on a guess.
    let stuck = move || created.is_some_and(|created| as_of.get() - created > stuck_after);
    let id = order.order_id.clone();
    let focused = {
        let id = id.clone();
        move || selection.focus.with(|f| f.as_deref() == Some(id.as_str()))
    };
    let checked = {
        let id = id.clone();
        move || selection.all_matching.get() || selection.ids.with(|s| s.contains(&id))
    };
    let toggle = {
        let id = id.clone();
        move |_| selection.toggle(&id)
    };
    let label = format!("select order {id}");
    let order_cell = if open {
        view! { <a href=format!("/orders/{}", order.order_id)>{order.order_id.clone()}</a> }.into_any()
    } else {
        view! { <span>{order.order_id.clone()}</span> }.into_any()
    };
    let customer_cell = match &order.customer_id {
        Some(customer_id) if open => {
            view! { <a href=format!("/customers/{customer_id}")>{customer_id.clone()}</a> }.into_any()
        }
        customer_id => view! { <span>{or_dash(customer_id)}</span> }.into_any(),
    };
    let created_text = created.map(date_time);
    let items = order.item_count.map_or_else(|| "—".into(), |n| n.to_string());
    view! {
        <tr
            data-order-id=id.clone()
            class:stuck=stuck
            class:focused=focused
            class:flagged=!order.problems.is_empty()
            tabindex="-1"
        >
            {selectable.then(|| view! {
                <td><input type="checkbox" aria-label=label prop:checked=checked on:change=toggle data-testid="select"/></td>
            })}
            <td>{or_dash(&created_text)}</td>
            <td>
                {move || created.map_or_else(|| "—".into(), |created| format_age(created, as_of.get()))}
                {move || stuck().then(|| view! { <span class="badge stuck-badge">"stuck"</span> })}
            </td>
            <td class="mono">{order_cell} " " <ProblemsFlag problems=order.problems.clone()/></td>
            <td class="mono">{customer_cell}</td>
            <td class="num">{items}</td>
            <td class="num">{format_amount(order.total, order.currency.as_deref())}</td>
            <td>{ship_to(&order.shipping_city, &order.shipping_country)}</td>
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
        <p class="live" data-testid="live-status" data-live=move || format!("{:?}", status.get()).to_ascii_lowercase()>
            {move || match status.get() {
                LiveStatus::Up => {
                    // Stream records carry their time rounded down to the second.
                    let lag = match behind.get() {
                        Some(ms) if ms >= 2000 => format!(" · stream {} s behind", ms / 1000),
                        Some(_) => " · stream caught up".to_string(),
                        None => String::new(),
                    };
                    format!("● Live · figures as of {} UTC{lag}", clock(as_of.get()))
                }
                LiveStatus::Connecting => "○ Connecting to live updates…".to_string(),
                LiveStatus::Down => format!(
                    "Live updates are down: figures as of {} UTC; reconnecting and re-reading page one every few seconds.",
                    clock(as_of.get())
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
fn Filters(date: String, days: u32, limit: u32, raw: impl Fn(&str) -> Option<String>) -> impl IntoView {
    let stuck = raw("stuck").is_some_and(|s| s == "1");
    let (country, min_total, customer) = (raw("country"), raw("minTotal"), raw("customer"));
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
            <label>
                <input type="checkbox" name="stuck" value="1" checked=stuck data-testid="stuck-only"/>
                " stuck only"
            </label>
            <label>
                "Country "
                <input name="country" size="3" maxlength="2" placeholder="NO" value=country data-testid="country"/>
            </label>
            <label>
                "Total at least "
                <input name="minTotal" size="7" inputmode="decimal" placeholder="150" value=min_total data-testid="min-total"/>
            </label>
            <label>
                "Customer "
                <input name="customer" size="12" placeholder="cust-0001" value=customer data-testid="customer"/>
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
    use std::fmt::Write as _;
    const W: f64 = 720.0;
    const H: f64 = 160.0;
    let buckets = activity.created.len().max(1) as f64;
    let step = W / buckets;
    // Two scales: the backlog fills the height, the bars its lower half.
    let top_backlog = activity.backlog.iter().copied().max().unwrap_or(0).max(1) as f64;
    let top_created = activity.created.iter().copied().max().unwrap_or(0).max(1) as f64;
    let y = move |v: i64| H - (v.max(0) as f64 / top_backlog) * (H - 8.0);
    let bar_y = move |v: i64| H - (v.max(0) as f64 / top_created) * (H / 2.0);
    // Every bar is a rectangle of one path: one element for the day's 144
    // bars, not a view each (those were 9% of the release server's CPU under
    // 50 viewers, `perf record` 2026-12-04).
    // Both written into one string each: a string per number and per bar
    // was some 900 allocations a page.
    let width = svg_num(step.max(1.0));
    let mut bars = String::with_capacity(activity.created.len() * 32);
    for (i, n) in activity.created.iter().enumerate().filter(|(_, n)| **n > 0) {
        bars.push('M');
        push_svg_num(&mut bars, i as f64 * step);
        bars.push(',');
        push_svg_num(&mut bars, bar_y(*n));
        let _ = write!(bars, "h{width}V{}h-{width}Z", H as i64);
    }
    let mut points = String::with_capacity(activity.backlog.len() * 12);
    let _ = write!(points, "0,{}", H as i64);
    for (i, v) in activity.backlog.iter().enumerate() {
        points.push(' ');
        push_svg_num(&mut points, (i as f64 + 1.0) * step);
        points.push(',');
        push_svg_num(&mut points, y(*v));
    }
    let peak_created = activity.created.iter().copied().max().unwrap_or(0);
    let peak_backlog = activity.backlog.iter().copied().max().unwrap_or(0);
    let label = format!(
        "Orders created per ten minutes (peak {peak_created}) and PENDING backlog of the day (peak {peak_backlog})"
    );
    view! {
        <figure class="activity" data-testid="activity-chart">
            <svg viewBox=format!("0 0 {} {}", W as i64, (H + 16.0) as i64) role="img" aria-label=label.clone()>
                <title>{label.clone()}</title>
                <path class="created" d=bars/>
                <polyline class="backlog" points=points/>
                {day_axis(W, H + 13.0)}
            </svg>
            <figcaption>
                <span class="key created">"created / 10 min"</span>
                <span class="key backlog">"PENDING backlog"</span>
            </figcaption>
        </figure>
    }
}

//! The capacity page: what the tables and indexes consumed per minute, the
//! attempts DynamoDB throttled and why, how hot each GSI2 shard ran against
//! its partition's limit, and the shard planner's and the capacity-mode
//! advisor's tables over its window, the partition keys written most, and
//! the data quality of the day (`quality`: schema drift and item sizes).
//! Every figure says where it comes from: the orders table's stream (every
//! writer), CloudWatch (DynamoDB's own), or this app's calls. Read again
//! every few seconds while open.

use super::common::{DayInput, ErrorView, TableHead, day_axis, svg_num};
use super::data::{get_capacity, get_quality};
use super::quality::QualitySection;
use crate::model::{
    AdviceWindow, CapacityReport, HeatMinute, HotKeyMinute, ModeAdvice, RecentUnits, ResourceUnits, ShardHeat,
    ShardPlan, ThrottleCount,
};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// How often the page reads its figures again while visible.
#[cfg(feature = "hydrate")]
const REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Minutes per column of the shard heatmap.
const HEAT_BUCKET: usize = 10;

#[component]
pub fn CapacityPage() -> impl IntoView {
    let query = use_query_map();
    let date = move || query.with(|q| q.get("date"));
    let report = Resource::new(date, get_capacity);
    let quality = Resource::new(date, get_quality);
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        {
            let tick = move || {
                if !document().hidden() {
                    report.refetch();
                    quality.refetch();
                }
            };
            if let Ok(handle) = set_interval_with_handle(tick, REFRESH_EVERY) {
                on_cleanup(move || handle.clear());
            }
        }
    });
    view! {
        <div class="title-row">
            <h1>"Capacity"</h1>
            <form class="filters" method="get" action="/capacity">
                <label>"Day (UTC) " <DayInput asked=Signal::derive(date)/></label>
                <button type="submit">"Show"</button>
            </form>
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match report.await {
                    Ok(report) => view! { <CapacityView report/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/capacity"/> }.into_any(),
                }
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match quality.await {
                    Ok(report) => view! { <QualitySection report/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/capacity"/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn CapacityView(report: CapacityReport) -> impl IntoView {
    let as_of = report.as_of.format("%H:%M:%S UTC").to_string();
    let source = report.source.clone();
    let throttle_source = report.source.clone();
    let mode = report.consumer_mode.as_ref().map(|m| m.described());
    view! {
        <p class="as-of" data-testid="as-of">
            {format!("{} · as of {as_of} · read again every few seconds", report.date)}
        </p>
        {mode.map(|mode| view! { <p class="as-of" data-testid="consumer-mode">{format!("Stream consumer mode: {mode}")}</p> })}
        <UnitsSection resources=report.resources source/>
        <HotKeysSection hot=report.hot_keys/>
        <RecentSection recent=report.recent/>
        <ThrottleSection throttles=report.throttles source=throttle_source/>
        <HeatSection heat=report.heat/>
        <PlanSection plan=report.plan/>
        <AdviceSection advice=report.advice window=report.advice_window/>
    }
}

/// Units as read: whole numbers plain, halves with their decimal.
fn units(value: f64) -> String {
    if value.fract() == 0.0 { format!("{value:.0}") } else { format!("{value:.1}") }
}

fn per_second(value: f64) -> String {
    if value >= 10.0 { format!("{value:.0}") } else { format!("{value:.2}") }
}

fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

fn dollars(amount: f64) -> String {
    if amount >= 1.0 { format!("${amount:.2}") } else { format!("${amount:.4}") }
}

fn clock(minute: u16) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// Where the figures of a capacity source come from, in words.
fn source_note(source: &str) -> &'static str {
    if source == "cloudwatch" {
        "Source: CloudWatch. Every figure is DynamoDB's own, from the AWS/DynamoDB metrics of each table and \
         index (60-second sums), whoever made the calls."
    } else {
        "Source: the stream. Write units of the orders table and its indexes are every writer's (the order \
         service, batch jobs, this app), priced from the table's stream as DynamoDB bills each write, plus the \
         second half of this app's own transactions. Reads appear in no stream: they are this app's calls only, \
         as DynamoDB answered them, and so is the metrics table."
    }
}

#[component]
fn UnitsSection(resources: Vec<ResourceUnits>, source: String) -> impl IntoView {
    let empty = resources.is_empty();
    let charts = resources.clone();
    view! {
        <section aria-labelledby="units-heading">
            <h2 id="units-heading">"Consumed capacity per minute"</h2>
            <p class="muted" data-testid="units-source" data-source=source.clone()>{source_note(&source)}</p>
            <table class="orders" data-testid="units-table">
                <caption class="visually-hidden">"Units per table and index over the day"</caption>
                <TableHead columns=&[
                    ("Table or index", false),
                    ("Read units", true),
                    ("Reads from", false),
                    ("Write units", true),
                    ("Writes from", false),
                    ("Busiest minute, reads/s", true),
                    ("Busiest minute, writes/s", true),
                ]/>
                <tbody>
                    {resources
                        .into_iter()
                        .map(|r| {
                            let peak = |f: fn(&crate::model::UnitsMinute) -> f64| {
                                r.minutes.iter().map(f).fold(0.0, f64::max) / 60.0
                            };
                            view! {
                                <tr data-resource=r.resource.clone()>
                                    <td class="mono">{r.resource.clone()}</td>
                                    <td class="num" data-testid="read-units">{units(r.read_total)}</td>
                                    <td data-testid="read-source">{r.read_source.clone()}</td>
                                    <td class="num" data-testid="write-units">{units(r.write_total)}</td>
                                    <td data-testid="write-source">{r.write_source.clone()}</td>
                                    <td class="num">{per_second(peak(|m| m.read))}</td>
                                    <td class="num">{per_second(peak(|m| m.write))}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
            {empty.then(|| view! { <p class="empty" data-testid="no-units">"No consumed capacity recorded for this day."</p> })}
            <div class="unit-charts">
                {charts.into_iter().map(|resource| view! { <UnitsChart resource/> }).collect_view()}
            </div>
        </section>
    }
}

/// One table's or index's day: write units (filled) and read units (line)
/// per second, averaged over each minute.
#[component]
fn UnitsChart(resource: ResourceUnits) -> impl IntoView {
    const W: f64 = 720.0;
    const H: f64 = 90.0;
    let top = resource.minutes.iter().map(|m| m.read.max(m.write)).fold(0.0, f64::max).max(1e-9) / 60.0;
    let points = |value: fn(&crate::model::UnitsMinute) -> f64| {
        let x = |minute: f64| minute * W / 1440.0;
        let y = |units: f64| H - (units / 60.0 / top) * (H - 4.0);
        let mut points = Vec::new();
        let mut previous: Option<u16> = None;
        for m in &resource.minutes {
            // Down to zero across minutes without data, so gaps read as gaps.
            if previous.is_none_or(|p| p + 1 < m.minute) {
                points.push(format!("{},{H}", svg_num(x(f64::from(m.minute)))));
            }
            points.push(format!("{},{}", svg_num(x(f64::from(m.minute))), svg_num(y(value(m)))));
            previous = Some(m.minute);
            points.push(format!("{},{}", svg_num(x(f64::from(m.minute) + 1.0)), svg_num(y(value(m)))));
        }
        if let Some(last) = previous {
            points.push(format!("{},{H}", svg_num(x(f64::from(last) + 1.0))));
        }
        points.join(" ")
    };
    let writes = points(|m| m.write);
    let reads = points(|m| m.read);
    let label = format!(
        "{}: units per second by minute, at most {} a second; {} read and {} write units in the day",
        resource.resource,
        per_second(top),
        units(resource.read_total),
        units(resource.write_total)
    );
    view! {
        <figure class="units-chart" data-testid="units-chart" data-resource=resource.resource.clone()>
            <figcaption class="mono">{resource.resource.clone()} <span class="muted">{format!(" · top {} units/s", per_second(top))}</span></figcaption>
            <svg viewBox=format!("0 0 {W} {}", H + 14.0) role="img" aria-label=label.clone()>
                <title>{label.clone()}</title>
                <polyline class="writes" points=format!("0,{H} {writes} {W},{H}")/>
                <polyline class="reads" points=reads/>
                {day_axis(W, H + 12.0)}
            </svg>
        </figure>
    }
}

#[component]
fn HotKeysSection(hot: Vec<HotKeyMinute>) -> impl IntoView {
    let empty = hot.is_empty();
    view! {
        <section aria-labelledby="hot-keys-heading">
            <h2 id="hot-keys-heading">"Hot keys"</h2>
            <p class="muted">
                "The partition keys written most in a minute, per table and index, from the stream (every writer), "
                "against the 1,000 write units a second one partition key can take. A key is kept for a minute once "
                "it took 10 units in it: one order's own key never is, a customer ordering in a loop or a day's "
                "single GSI2 partition is."
            </p>
            {empty.then(|| view! { <p class="empty" data-testid="no-hot-keys">"No key took 10 write units in a minute this day."</p> })}
            {(!empty).then(|| view! {
                <table class="orders" data-testid="hot-keys-table">
                    <caption class="visually-hidden">"Partition keys written most per minute"</caption>
                    <TableHead columns=&[("Table or index", false), ("Partition key", false), ("Minute (UTC)", false), ("Write units", true), ("Of a partition", true)]/>
                    <tbody>
                        {hot.into_iter().map(|h| view! {
                            <tr data-resource=h.resource.clone() data-key=h.key.clone()>
                                <td class="mono">{h.resource.clone()}</td>
                                <td class="mono">{h.key.clone()}</td>
                                <td>{clock(h.minute)}</td>
                                <td class="num">{h.units}</td>
                                <td class="num">{percent(h.share)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}

#[component]
fn RecentSection(recent: Vec<RecentUnits>) -> impl IntoView {
    (!recent.is_empty()).then(|| {
        view! {
            <section aria-labelledby="recent-heading">
                <h2 id="recent-heading">"This instance, the last five minutes"</h2>
                <p class="muted">"Source: this app's calls on this instance, as DynamoDB answered them."</p>
                <table class="orders" data-testid="recent-table">
                    <caption class="visually-hidden">"Units per second of this instance's calls"</caption>
                    <TableHead columns=&[
                        ("Table or index", false),
                        ("Read units", true),
                        ("Busiest second, reads", true),
                        ("Write units", true),
                        ("Busiest second, writes", true),
                    ]/>
                    <tbody>
                        {recent
                            .into_iter()
                            .map(|r| {
                                let sum = |v: &[f64]| v.iter().sum::<f64>();
                                let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
                                view! {
                                    <tr>
                                        <td class="mono">{r.resource.clone()}</td>
                                        <td class="num">{units(sum(&r.read))}</td>
                                        <td class="num">{units(max(&r.read))}</td>
                                        <td class="num">{units(sum(&r.write))}</td>
                                        <td class="num">{units(max(&r.write))}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </section>
        }
    })
}

#[component]
fn ThrottleSection(throttles: Vec<ThrottleCount>, source: String) -> impl IntoView {
    let total: u64 = throttles.iter().map(|t| t.total).sum();
    let from = if source == "cloudwatch" {
        "Source: CloudWatch (DynamoDB's ReadThrottleEvents, WriteThrottleEvents and ThrottledRequests per operation)."
    } else {
        "Source: this app's calls (other writers' throttles are in no stream; CloudWatch has them on AWS)."
    };
    view! {
        <section aria-labelledby="throttles-heading">
            <h2 id="throttles-heading">"Throttled attempts"</h2>
            <p class="muted" data-testid="throttle-total">
                {format!(
                    "{total} attempts throttled this day, the ones the SDK retried away included, by the reason \
                     DynamoDB gave and where. {from}"
                )}
            </p>
            {(!throttles.is_empty()).then(|| view! {
                <table class="orders" data-testid="throttle-table">
                    <caption class="visually-hidden">"Throttled attempts by reason and index"</caption>
                    <TableHead columns=&[("Reason", false), ("Where", false), ("Resource", false), ("Attempts", true), ("Busiest minute", false)]/>
                    <tbody>
                        {throttles.into_iter().map(|t| {
                            let busiest = t.minutes.iter().max_by_key(|(m, n)| (*n, std::cmp::Reverse(*m))).map(|(m, n)| format!("{} ({n})", clock(*m))).unwrap_or_default();
                            view! {
                                <tr>
                                    <td>{t.reason.clone()}</td>
                                    <td>{t.place.clone()}</td>
                                    <td class="mono">{t.resource.clone()}</td>
                                    <td class="num">{t.total}</td>
                                    <td>{busiest}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}

#[component]
fn HeatSection(heat: ShardHeat) -> impl IntoView {
    let hottest = heat.hottest.clone().map(|hot| {
        let text = format!(
            "Hottest: shard {} at {} UTC, {} writes in the minute: {} WCU/s of the partition's {} ({}).",
            hot.shard,
            clock(hot.minute),
            hot.writes,
            per_second(hot.units_per_second),
            units(heat.partition_limit),
            percent(hot.utilisation)
        );
        if hot.warning {
            view! {
                <p class="banner" role="alert" data-testid="hottest" data-warning="true">
                    <strong>{format!("Above {} of the partition limit. ", percent(heat.warn_above))}</strong>
                    {text}
                    " Add write shards before the next sale (see the planner below)."
                </p>
            }
            .into_any()
        } else {
            view! { <p data-testid="hottest" data-warning="false">{text}</p> }.into_any()
        }
    });
    let per_shard: Vec<(u32, u64, u64)> = (0..heat.shards)
        .map(|shard| {
            let counts = heat.minutes.iter().map(|m| m.writes.get(shard as usize).copied().unwrap_or(0));
            let (total, busiest) = counts.fold((0, 0), |(t, b), n| (t + n, b.max(n)));
            (shard, total, busiest)
        })
        .collect();
    let limit_per_minute = heat.partition_limit * 60.0 / f64::from(heat.units_per_write.max(1));
    view! {
        <section aria-labelledby="heat-heading">
            <h2 id="heat-heading">"Shard heat"</h2>
            <p class="muted">
                {format!(
                    "Writes to each GSI2 shard of the day per minute, as the stream consumer counted them (an order \
                     entering PENDING is one index write, leaving it another; {} write unit each). A partition takes \
                     {} WCU/s: {} writes a minute. Minute averages: a second inside one can run hotter.",
                    heat.units_per_write,
                    units(heat.partition_limit),
                    units(limit_per_minute)
                )}
            </p>
            {match hottest {
                Some(hottest) => hottest,
                None => view! { <p class="empty" data-testid="hottest">"No writes to the PENDING index this day."</p> }.into_any(),
            }}
            {(!heat.minutes.is_empty()).then(|| view! { <Heatmap heat=heat.clone()/> })}
            <table class="orders" data-testid="heat-table">
                <caption class="visually-hidden">"Writes per shard over the day"</caption>
                <TableHead columns=&[("Shard", true), ("Writes", true), ("Busiest minute", true), ("Of the limit", true)]/>
                <tbody>
                    {per_shard.into_iter().map(|(shard, total, busiest)| view! {
                        <tr data-shard=shard.to_string()>
                            <td class="num">{shard}</td>
                            <td class="num">{total}</td>
                            <td class="num">{busiest}</td>
                            <td class="num">{percent(busiest as f64 / limit_per_minute)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// Shards (rows) by ten-minute columns, each cell the busiest minute in it,
/// shaded against the day's busiest.
#[component]
fn Heatmap(heat: ShardHeat) -> impl IntoView {
    const W: f64 = 720.0;
    const ROW: f64 = 10.0;
    let columns = 1440 / HEAT_BUCKET;
    let shards = heat.shards.max(1) as usize;
    let mut grid = vec![vec![0u64; shards]; columns];
    for HeatMinute { minute, writes } in &heat.minutes {
        for (shard, n) in writes.iter().enumerate().take(shards) {
            let cell = &mut grid[*minute as usize / HEAT_BUCKET][shard];
            *cell = (*cell).max(*n);
        }
    }
    let top = grid.iter().flatten().copied().max().unwrap_or(0).max(1) as f64;
    let width = W / columns as f64;
    let cells = grid
        .iter()
        .enumerate()
        .flat_map(|(column, shards)| shards.iter().enumerate().map(move |(shard, n)| (column, shard, *n)))
        .filter(|(_, _, n)| *n > 0)
        .map(|(column, shard, n)| {
            let shade = 0.15 + 0.85 * n as f64 / top;
            view! {
                <rect x=svg_num(column as f64 * width) y=svg_num(shard as f64 * ROW)
                    width=svg_num(width) height=format!("{ROW}") fill-opacity=format!("{shade:.2}")/>
            }
        })
        .collect_view();
    let height = shards as f64 * ROW;
    let label = format!(
        "Busiest minute per shard and ten minutes, {} shards, shaded against the day's busiest ({} writes a minute)",
        heat.shards, top
    );
    view! {
        <figure class="heatmap" data-testid="heatmap">
            <svg viewBox=format!("0 0 {W} {}", height + 14.0) role="img" aria-label=label.clone()>
                <title>{label.clone()}</title>
                <rect class="ground" x="0" y="0" width=format!("{W}") height=format!("{height}")/>
                {cells}
                {day_axis(W, height + 12.0)}
            </svg>
        </figure>
    }
}

#[component]
fn PlanSection(plan: Option<ShardPlan>) -> impl IntoView {
    view! {
        <section aria-labelledby="plan-heading" data-testid="plan">
            <h2 id="plan-heading">"Shard planner"</h2>
            {match plan {
                None => view! { <p class="empty">"No orders entered PENDING this day: no peak to plan for."</p> }.into_any(),
                Some(plan) => {
                    let verdict = if plan.shards > plan.current_shards {
                        format!("{} shards for this peak; the day has {}: raise --shards before a sale like it.", plan.shards, plan.current_shards)
                    } else {
                        format!("{} shards for this peak; the day has {}: enough.", plan.shards, plan.current_shards)
                    };
                    view! {
                        <p data-testid="plan-peak">
                            {format!(
                                "Busiest minute {} UTC: {} orders/s entered PENDING (the minute's average); GSI2 entries of {} bytes.",
                                clock(plan.peak_minute), per_second(plan.peak_orders_per_second), plan.index_item_bytes
                            )}
                        </p>
                        <p data-testid="plan-shards"><strong>{verdict}</strong></p>
                        <ol class="steps">{plan.steps.into_iter().map(|s| view! { <li>{s}</li> }).collect_view()}</ol>
                    }
                    .into_any()
                }
            }}
        </section>
    }
}

#[component]
fn AdviceSection(advice: Vec<ModeAdvice>, window: AdviceWindow) -> impl IntoView {
    let empty = advice.is_empty();
    let coverage = format!(
        "Source: {}. Window: the last {} days, from {} UTC; {} of its {} minutes observed ({} coverage). A minute the \
         source observed without traffic counts as idle; one nobody observed is left out. Below a day observed, \
         no mode is recommended.",
        window.source,
        window.days,
        window.start.format("%Y-%m-%d %H:%M"),
        window.observed_minutes,
        window.minutes,
        percent(window.coverage)
    );
    view! {
        <section aria-labelledby="advice-heading">
            <h2 id="advice-heading">"Capacity mode advisor"</h2>
            <p class="muted">
                "On demand against provisioned with auto scaling (70% target), over the observed minutes scaled to a "
                "30-day month, at the server's prices (`northwind-ops advise` prints the same)."
            </p>
            <p data-testid="advice-window">{coverage}</p>
            {empty.then(|| view! { <p class="empty">"Nothing recorded to advise on."</p> })}
            {(!empty).then(|| view! {
                <table class="orders advice" data-testid="advice-table">
                    <caption class="visually-hidden">"Recommended capacity mode per table and index"</caption>
                    <TableHead columns=&[
                        ("Table or index", false),
                        ("Mode", false),
                        ("On demand / month", true),
                        ("Provisioned / month", true),
                        ("Writes: average, peak per second, use", true),
                        ("Reads: average, peak per second, use", true),
                        ("Why", false),
                    ]/>
                    <tbody>
                        {advice.into_iter().map(|a| {
                            let side = |u: crate::model::AccessUse| format!("{} / {} / {}", per_second(u.average_per_second), per_second(u.peak_per_second), percent(u.average_utilisation));
                            view! {
                                <tr data-resource=a.resource.clone()>
                                    <td class="mono">{a.resource.clone()}</td>
                                    <td data-testid="mode">{a.mode.clone()}</td>
                                    <td class="num">{dollars(a.on_demand_monthly)}</td>
                                    <td class="num">{dollars(a.provisioned_monthly)}</td>
                                    <td class="num">{side(a.write)}</td>
                                    <td class="num">{side(a.read)}</td>
                                    <td class="reason">
                                        {a.reason.clone()}
                                        {a.scheduled_actions.iter().map(|json| view! { <pre class="mono" data-testid="scheduled-action">{json.clone()}</pre> }).collect_view()}
                                    </td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}

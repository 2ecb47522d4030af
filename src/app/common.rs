//! Pieces every page uses: error views, the pager, status badges, links.

use super::data::{ErrorKind, PageError, get_day};
use crate::model::{Me, OrderStatus, Permission, Problem, problems_text};
use chrono::{DateTime, Timelike, Utc};
use leptos::prelude::*;
use leptos_router::components::A;

/// Who is signed in, read once per page load (see `App`).
pub type MeResource = Resource<Result<Option<Me>, PageError>>;

/// Whether the signed-in user may do `permission`: what the pages offer.
pub fn can(me: &Option<Me>, permission: Permission) -> bool {
    me.as_ref().is_some_and(|me| me.role.can(permission))
}

/// The signed-in user, once known (for views inside a `Suspend`).
pub async fn me() -> Option<Me> {
    match use_context::<MeResource>() {
        Some(me) => me.await.ok().flatten(),
        None => None,
    }
}

/// A page's day field (`name="date"`), showing the day the page shows: the
/// one asked for, else the server's today (UTC). Read once per day asked,
/// apart from the page's own data, so a page that reads its figures again
/// every few seconds does not redraw the field under the user's hands.
#[component]
pub fn DayInput(#[prop(into)] asked: Signal<Option<String>>) -> impl IntoView {
    let shown = Resource::new(move || asked.get(), get_day);
    let field = |value: Option<String>| view! { <input type="date" name="date" value=value data-testid="day"/> };
    view! {
        <Suspense fallback=move || field(asked.get())>
            {move || Suspend::new(async move { field(shown.await.ok().map(|day| day.to_string()).or(asked.get())) })}
        </Suspense>
    }
}

/// The header's right side: search (for those who may open orders), who
/// is signed in with which role, and sign-out; or a sign-in link.
#[component]
pub fn AccountBar(me: Option<Me>) -> impl IntoView {
    let Some(me) = me else {
        return view! { <a href="/login" class="sign-in" data-testid="sign-in-link">"Sign in"</a> }.into_any();
    };
    let search = me.role.can(Permission::ViewOrders).then(|| {
        view! {
            <form class="search" action="/search" method="get" role="search">
                <input type="search" name="q" placeholder="Order or customer id" aria-label="Order or customer id" required/>
                <button type="submit">"Find"</button>
            </form>
        }
    });
    let audit = me.role.can(Permission::Administer).then(|| {
        view! {
            <a href="/audit" class="nav">"Audit"</a>
            <a href="/admin" class="nav" data-testid="nav-admin">"Admin"</a>
        }
    });
    let capacity = me
        .role
        .can(Permission::ViewOperations)
        .then(|| view! { <a href="/capacity" class="nav" data-testid="nav-capacity">"Capacity"</a> });
    let sales = me
        .role
        .can(Permission::ViewOperations)
        .then(|| view! { <a href="/sales" class="nav" data-testid="nav-sales">"Sales"</a> });
    view! {
        {search}
        <div class="account">
            {capacity}
            {sales}
            {audit}
            <span class="who" data-testid="who">{me.name.clone()} " · " <span data-testid="role">{me.role.as_str()}</span></span>
            <form method="post" action="/auth/logout" class="sign-out">
                <button type="submit" data-testid="sign-out">"Sign out"</button>
            </form>
        </div>
    }
    .into_any()
}

/// Stands for "the first page" in a trail of visited pages' cursors.
const FIRST: &str = "1";
const TRAIL_SEPARATOR: char = '~';

/// Builds `path?k=v&…` from the pairs that have a value. Every value the
/// pages put in a URL (dates, numbers, ids, cursors) is URL-safe already.
/// An SVG coordinate to one decimal. Written as an integer of tenths:
/// `format!("{:.1}")` of a float took a tenth of the server's time drawing
/// the dashboard (the profile in BENCHMARKS.md's reading).
pub fn svg_num(value: f64) -> String {
    let mut out = String::new();
    push_svg_num(&mut out, value);
    out
}

/// Appends `value` as [`svg_num`] writes it, without a string of its own:
/// the day chart writes some 430 of them a page, and their allocations
/// showed in the server's profile.
pub fn push_svg_num(out: &mut String, value: f64) {
    use std::fmt::Write;
    let tenths = (value * 10.0).round() as i64;
    let sign = if tenths < 0 { "-" } else { "" };
    let tenths = tenths.unsigned_abs();
    // Writing to a String cannot fail.
    let _ = write!(out, "{sign}{}.{}", tenths / 10, tenths % 10);
}

/// A time of day as `HH:MM:SS` (UTC). Written by hand rather than with
/// chrono's `format`: its format-string machinery is parsed on every call
/// (a per-row cost of the server's render) and is kept out of the
/// dashboard's wasm.
pub fn clock(at: DateTime<Utc>) -> String {
    format!("{:02}:{:02}:{:02}", at.hour(), at.minute(), at.second())
}

/// A moment as `YYYY-MM-DD HH:MM:SS` (UTC), as [`clock`] writes the time.
pub fn date_time(at: DateTime<Utc>) -> String {
    format!("{} {}", at.date_naive(), clock(at))
}

/// The hour marks under a chart of one day, `width` wide, on the line at
/// `y`: 00:00 to 24:00 every six hours. Coordinates are written from
/// integers (as `svg_num` does), so the dashboard's wasm needs no float
/// formatting.
pub fn day_axis(width: f64, y: f64) -> impl IntoView {
    (0..=4)
        .map(|q| {
            let x = f64::from(q) * width / 4.0;
            let anchor = match q {
                0 => "start",
                4 => "end",
                _ => "middle",
            };
            view! { <text x=(x.round() as i64).to_string() y=svg_num(y) text-anchor=anchor>{format!("{:02}:00", q * 6)}</text> }
        })
        .collect_view()
}

pub fn href(path: &str, pairs: &[(&str, Option<String>)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| value.as_ref().filter(|v| !v.is_empty()).map(|v| format!("{key}={v}")))
        .collect();
    if query.is_empty() { path.to_string() } else { format!("{path}?{}", query.join("&")) }
}

/// Where "previous" and "next" lead: the URL keeps the cursors of the pages
/// visited before this one, so going back needs no server state.
pub struct Paging {
    pub prev: Option<(Option<String>, Option<String>)>,
    pub next: Option<(Option<String>, Option<String>)>,
}

/// (cursor, trail) pairs for the previous and next pages.
pub fn paging(cursor: Option<String>, trail: Option<String>, next: Option<String>) -> Paging {
    let mut visited: Vec<String> =
        trail.unwrap_or_default().split(TRAIL_SEPARATOR).filter(|c| !c.is_empty()).map(str::to_string).collect();
    let join = |v: &[String]| Some(v.join(&TRAIL_SEPARATOR.to_string())).filter(|s| !s.is_empty());
    let next = next.map(|next| {
        let mut forward = visited.clone();
        forward.push(cursor.clone().unwrap_or_else(|| FIRST.to_string()));
        (Some(next), join(&forward))
    });
    let prev = visited.pop().map(|last| {
        let cursor = (last != FIRST).then_some(last);
        (cursor, join(&visited))
    });
    Paging { prev, next }
}

#[component]
pub fn Pager(prev: Option<String>, next: Option<String>) -> impl IntoView {
    view! {
        <nav class="pager" aria-label="Pages">
            {match prev {
                Some(href) => view! { <a href=href rel="prev" data-testid="prev">"← Previous"</a> }.into_any(),
                None => view! { <span class="disabled">"← Previous"</span> }.into_any(),
            }}
            {match next {
                Some(href) => view! { <a href=href rel="next" data-testid="next">"Next →"</a> }.into_any(),
                None => view! { <span class="disabled">"Next →"</span> }.into_any(),
            }}
        </nav>
    }
}

/// A table's head: each column's label, and whether it holds numbers.
#[component]
pub fn TableHead(columns: &'static [(&'static str, bool)]) -> impl IntoView {
    view! {
        <thead>
            <tr>
                {columns
                    .iter()
                    .map(|(label, numeric)| view! { <th scope="col" class:num=*numeric>{*label}</th> })
                    .collect_view()}
            </tr>
        </thead>
    }
}

#[component]
pub fn StatusBadge(status: Option<OrderStatus>) -> impl IntoView {
    match status {
        Some(OrderStatus::Known(status)) => {
            let class = format!("badge status-{}", status.as_str().to_ascii_lowercase());
            view! { <span class=class>{status.as_str()}</span> }.into_any()
        }
        // Another writer's status, shown as it is.
        Some(OrderStatus::Other(text)) => view! {
            <span class="badge status-other" title="a status this console does not know">{text}</span>
        }
        .into_any(),
        None => view! { <span class="badge status-other">"unreadable"</span> }.into_any(),
    }
}

/// Text another writer may have left out: "—" then.
pub fn or_dash(text: &Option<String>) -> String {
    text.clone().unwrap_or_else(|| "—".into())
}

/// Where an order ships, with what could be read of it.
pub fn ship_to(city: &Option<String>, country: &Option<String>) -> String {
    format!("{}, {}", or_dash(city), or_dash(country))
}

/// A row's mark for fields that could not be read: how many, and each
/// problem in its title (the order's page lists them).
#[component]
pub fn ProblemsFlag(problems: Vec<Problem>) -> impl IntoView {
    (!problems.is_empty()).then(|| {
        let count = problems.len();
        let label = if count == 1 { "1 problem".to_string() } else { format!("{count} problems") };
        view! {
            <span class="flag" title=problems_text(&problems) data-testid="problems-flag">{format!("⚠ {label}")}</span>
        }
    })
}

#[component]
pub fn NotFound(message: String) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <section class="not-found" data-testid="not-found">
            <h1>"Not found"</h1>
            <p>{message}</p>
            <p><A href="/">"Back to the dashboard"</A></p>
        </section>
    }
}

/// The view of a failed read: what the reader can do about it, by kind.
/// `first_page` is where a bad cursor sends the reader.
#[component]
pub fn ErrorView(error: PageError, #[prop(optional, into)] first_page: Option<String>) -> impl IntoView {
    match error.kind {
        ErrorKind::NotFound => view! { <NotFound message=error.message/> }.into_any(),
        ErrorKind::BadCursor => view! {
            <div class="notice" role="alert" data-testid="cursor-error">
                <p>"This page link has a bad or expired position in it: " {error.message}</p>
                <p><a href=first_page.unwrap_or_else(|| "/".into())>"Go to the first page"</a></p>
            </div>
        }
        .into_any(),
        ErrorKind::Unavailable => view! { <StoreDown message=error.message/> }.into_any(),
        ErrorKind::Forbidden | ErrorKind::Unauthorized => view! {
            <section class="forbidden" role="alert" data-testid="forbidden">
                <h1>"Not for your role"</h1>
                <p>{error.message}</p>
            </section>
        }
        .into_any(),
        _ => view! {
            <div class="error" role="alert" data-testid="error">
                <p>{error.message}</p>
                {error.request_id.map(|id| view! { <p class="muted">"Request id: " <code>{id}</code></p> })}
            </div>
        }
        .into_any(),
    }
}

#[component]
pub fn StoreDown(message: String) -> impl IntoView {
    view! {
        <div class="banner" role="alert" data-testid="store-down">
            <strong>"The order store is unreachable."</strong>
            " The page retries by itself. "
            <span class="detail">{message}</span>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_numbers_have_one_decimal_as_format_would_give() {
        for value in [0.0, 0.04, 0.05, 1.25, 7.5, 159.96, 720.0, 12_345.678, -3.26] {
            assert_eq!(svg_num(value), format!("{:.1}", (value * 10.0_f64).round() / 10.0), "{value}");
        }
        assert_eq!(svg_num(-0.04), "0.0");
    }

    #[test]
    fn clock_and_date_time_read_as_chrono_would_write_them() {
        for text in ["2026-12-04T00:00:00Z", "2026-01-09T07:05:09.999Z", "1999-12-31T23:59:59Z"] {
            let at: DateTime<Utc> = text.parse().unwrap();
            assert_eq!(clock(at), at.format("%H:%M:%S").to_string(), "{text}");
            assert_eq!(date_time(at), at.format("%Y-%m-%d %H:%M:%S").to_string(), "{text}");
        }
    }

    #[test]
    fn paging_keeps_the_trail_of_visited_pages() {
        let first = paging(None, None, Some("c2".into()));
        assert!(first.prev.is_none());
        assert_eq!(first.next, Some((Some("c2".into()), Some("1".into()))));

        let second = paging(Some("c2".into()), Some("1".into()), Some("c3".into()));
        assert_eq!(second.prev, Some((None, None)));
        assert_eq!(second.next, Some((Some("c3".into()), Some("1~c2".into()))));

        let third = paging(Some("c3".into()), Some("1~c2".into()), None);
        assert_eq!(third.prev, Some((Some("c2".into()), Some("1".into()))));
        assert!(third.next.is_none());
    }

    #[test]
    fn links_leave_out_empty_values() {
        assert_eq!(href("/", &[("a", None), ("b", Some("".into()))]), "/");
        assert_eq!(href("/x", &[("a", Some("1".into())), ("b", Some("2".into()))]), "/x?a=1&b=2");
    }
}

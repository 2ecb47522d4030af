//! Working the PENDING queue: a selection that survives paging and reads,
//! bulk confirm and cancel with a reason and live progress, and the
//! keyboard (`/` search, `j`/`k` move, `Enter` open, `x` select, `c` /
//! `Shift+C` confirm / cancel the selection, `?` the keys).

use super::data::{CancelBulk, GetBulkReport, StartBulk};
use crate::model::{BulkReport, BulkRequest, BulkState, PendingParams, Status};
use leptos::prelude::*;
use std::collections::BTreeSet;

/// What the queue's user has picked, where the keyboard is, and the bulk
/// run under way. Made once per dashboard (not per read of the list), so
/// that a selection spans pages and a run's progress outlives the list being
/// read again.
#[derive(Clone, Copy)]
pub struct Selection {
    pub ids: RwSignal<BTreeSet<String>>,
    /// Every PENDING order the view's filter matches, not just the ids.
    pub all_matching: RwSignal<bool>,
    /// The row the keyboard is on (its order id).
    pub focus: RwSignal<Option<String>>,
    /// An action asked for and waiting to be confirmed.
    pub asking: RwSignal<Option<Status>>,
    pub help: RwSignal<bool>,
    pub reason: RwSignal<String>,
    pub error: RwSignal<Option<String>>,
    start: ServerAction<StartBulk>,
    run_id: RwSignal<Option<String>>,
    report: RwSignal<Option<BulkReport>>,
}

impl Selection {
    /// `on_done` runs when a bulk run ends (to read the list again).
    pub fn new(on_done: Callback<()>) -> Self {
        let selection = Self {
            ids: RwSignal::new(BTreeSet::new()),
            all_matching: RwSignal::new(false),
            focus: RwSignal::new(None),
            asking: RwSignal::new(None),
            help: RwSignal::new(false),
            reason: RwSignal::new(String::new()),
            error: RwSignal::new(None),
            start: ServerAction::<StartBulk>::new(),
            run_id: RwSignal::new(None),
            report: RwSignal::new(None),
        };
        Effect::new(move |_| match selection.start.value().get() {
            Some(Ok(id)) => {
                selection.clear();
                selection.reason.set(String::new());
                selection.error.set(None);
                selection.run_id.set(Some(id));
            }
            Some(Err(err)) => selection.error.set(Some(err.message)),
            None => {}
        });
        follow_run(selection.run_id, selection.report, on_done);
        selection
    }

    pub fn toggle(&self, id: &str) {
        self.all_matching.set(false);
        self.ids.update(|ids| {
            if !ids.remove(id) {
                ids.insert(id.to_string());
            }
        });
    }

    pub fn clear(&self) {
        self.ids.update(BTreeSet::clear);
        self.all_matching.set(false);
        self.asking.set(None);
    }
}

/// What the bulk bar and the keyboard may offer the signed-in role.
#[derive(Clone, Copy)]
pub struct Allowed {
    pub cancel: bool,
    pub confirm: bool,
}

/// The bar above the list: how many are selected, the actions, the
/// confirmation step with its reason, and a run's progress.
#[component]
pub fn BulkBar(
    selection: Selection,
    allowed: Allowed,
    /// The list's query: what "all matching" means.
    filter: PendingParams,
    /// Orders shown on this page, and whether more match beyond it.
    page_ids: Vec<String>,
    more_beyond: bool,
) -> impl IntoView {
    let Selection { start, report, reason, error, run_id, .. } = selection;
    let page_ids = StoredValue::new(page_ids);
    let request = move |to: Status, order_ids: Option<Vec<String>>| {
        let reason = Some(reason.get_untracked().trim().to_string()).filter(|r| !r.is_empty());
        let (order_ids, filter) = match order_ids {
            Some(ids) => (Some(ids), None),
            None if selection.all_matching.get_untracked() => (None, Some(filter.clone())),
            None => (Some(selection.ids.get_untracked().into_iter().collect()), None),
        };
        BulkRequest { order_ids, filter, from: Status::Pending, to, reason }
    };
    let proceed = Callback::new({
        let request = request.clone();
        move |()| {
            if let Some(to) = selection.asking.get_untracked() {
                if to == Status::Cancelled && reason.get_untracked().trim().is_empty() {
                    error.set(Some("A cancellation needs a reason.".into()));
                    return;
                }
                selection.asking.set(None);
                start.dispatch(StartBulk { request: request(to, None) });
            }
        }
    });
    let retry = Callback::new(move |()| {
        if let Some(r) = report.get_untracked() {
            let again = request(r.to, Some(r.failed.clone()));
            start.dispatch(StartBulk { request: BulkRequest { reason: r.reason.clone(), ..again } });
        }
    });
    let count = move || selection.ids.with(BTreeSet::len);
    let chosen = move || {
        if selection.all_matching.get() { "every matching order".to_string() } else { format!("{} selected", count()) }
    };
    let whole_page = move || {
        page_ids.with_value(|ids| !ids.is_empty() && ids.iter().all(|id| selection.ids.with(|s| s.contains(id))))
    };
    view! {
        <section class="bulk" aria-label="Act on the selection" data-testid="bulk-bar">
            <span data-testid="selected-count">{chosen}</span>
            <button type="button" data-testid="select-page" on:click=move |_| {
                selection.all_matching.set(false);
                page_ids.with_value(|ids| selection.ids.update(|s| s.extend(ids.iter().cloned())));
            }>"Select this page"</button>
            {move || (whole_page() && more_beyond && !selection.all_matching.get()).then(|| view! {
                <button type="button" data-testid="select-matching" on:click=move |_| selection.all_matching.set(true)>
                    "Select every matching order"
                </button>
            })}
            <button type="button" data-testid="clear-selection" on:click=move |_| selection.clear()>"Clear"</button>
            {allowed.confirm.then(|| view! {
                <button type="button" data-testid="bulk-confirm" disabled=move || count() == 0 && !selection.all_matching.get()
                    on:click=move |_| selection.asking.set(Some(Status::Confirmed))>"Confirm…"</button>
            })}
            {allowed.cancel.then(|| view! {
                <button type="button" class="danger" data-testid="bulk-cancel" disabled=move || count() == 0 && !selection.all_matching.get()
                    on:click=move |_| selection.asking.set(Some(Status::Cancelled))>"Cancel…"</button>
            })}
            {move || selection.asking.get().map(|to| {
                view! {
                    <div class="confirm" role="group" aria-label="Confirm the bulk change" data-testid="bulk-ask">
                        <span>{format!("Move {} from PENDING to {to}?", chosen())}</span>
                        <label>
                            "Reason "
                            <input id="bulk-reason" data-testid="bulk-reason" maxlength="200"
                                placeholder=if to == Status::Cancelled { "needed to cancel" } else { "optional" }
                                prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev))/>
                        </label>
                        <button type="button" id="bulk-proceed" data-testid="bulk-proceed" on:click=move |_| proceed.run(())>
                            "Proceed"
                        </button>
                        <button type="button" on:click=move |_| selection.asking.set(None)>"Back"</button>
                    </div>
                }
            })}
            {move || error.get().map(|e| view! { <p class="error" role="alert" data-testid="bulk-error">{e}</p> })}
            {move || report.get().map(|r| view! { <Progress report=r run_id retry/> })}
        </section>
    }
}

/// A run's report: a bar while it runs, the outcome after.
#[component]
fn Progress(report: BulkReport, run_id: RwSignal<Option<String>>, retry: Callback<()>) -> impl IntoView {
    let cancel = ServerAction::<CancelBulk>::new();
    let id = report.id.clone();
    let done = report.changed as usize + report.conflicts.len() + report.failed.len();
    let state = match report.state {
        BulkState::Running => "running",
        BulkState::Done => "done",
        BulkState::Cancelled => "cancelled",
        BulkState::Interrupted => "interrupted",
    };
    let failed = report.failed.clone();
    view! {
        <div class="progress" role="status" data-testid="bulk-progress" data-state=state>
            <progress max=report.total.to_string() value=done.to_string()></progress>
            <span data-testid="bulk-summary">
                {format!("{state}: {} of {} changed · {} already changed by someone else · {} failed",
                    report.changed, report.total, report.conflicts.len(), report.failed.len())}
            </span>
            {(report.state == BulkState::Running).then(|| view! {
                <button type="button" data-testid="bulk-stop" on:click=move |_| { cancel.dispatch(CancelBulk { id: id.clone() }); }>
                    "Stop"
                </button>
            })}
            {(!report.conflicts.is_empty()).then(|| view! {
                <p class="muted" data-testid="bulk-conflicts">"Changed by someone else: " {report.conflicts.join(", ")}</p>
            })}
            {(report.state != BulkState::Running && !failed.is_empty()).then(|| view! {
                <p class="error" data-testid="bulk-failed">"Failed: " {failed.join(", ")}</p>
                <button type="button" data-testid="bulk-retry" on:click=move |_| retry.run(())>"Retry the failures"</button>
            })}
            {(report.state != BulkState::Running).then(|| view! {
                <button type="button" on:click=move |_| run_id.set(None)>"Dismiss"</button>
            })}
        </div>
    }
}

/// Reads a run's report every half second until it ends.
fn follow_run(run_id: RwSignal<Option<String>>, report: RwSignal<Option<BulkReport>>, on_done: Callback<()>) {
    let poll = ServerAction::<GetBulkReport>::new();
    Effect::new(move |_| {
        if let Some(Ok(r)) = poll.value().get() {
            let ended = r.state != BulkState::Running;
            report.set(Some(r));
            if ended {
                on_done.run(());
            }
        }
    });
    Effect::new(move |_| {
        let id = run_id.get();
        if id.is_none() {
            report.set(None);
        }
        #[cfg(feature = "hydrate")]
        if let Some(id) = id {
            poll.dispatch(GetBulkReport { id: id.clone() });
            let tick = move || {
                if report.get_untracked().is_none_or(|r| r.state == BulkState::Running) {
                    poll.dispatch(GetBulkReport { id: id.clone() });
                }
            };
            if let Ok(handle) = set_interval_with_handle(tick, std::time::Duration::from_millis(500)) {
                on_cleanup(move || handle.clear());
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (id, poll);
    });
}

/// The keys, as `?` shows them.
#[component]
pub fn KeyHelp(selection: Selection) -> impl IntoView {
    move || {
        selection.help.get().then(|| {
            view! {
                <div class="key-help" role="dialog" aria-modal="false" aria-labelledby="keys-title" data-testid="key-help">
                    <h2 id="keys-title">"Keys"</h2>
                    <dl>
                        <dt><kbd>"/"</kbd></dt><dd>"search"</dd>
                        <dt><kbd>"j"</kbd>" / "<kbd>"k"</kbd></dt><dd>"next / previous order"</dd>
                        <dt><kbd>"Enter"</kbd></dt><dd>"open the order"</dd>
                        <dt><kbd>"x"</kbd></dt><dd>"select or unselect it"</dd>
                        <dt><kbd>"c"</kbd></dt><dd>"confirm the selection"</dd>
                        <dt><kbd>"Shift"</kbd>" + "<kbd>"C"</kbd></dt><dd>"cancel the selection (with a reason)"</dd>
                        <dt><kbd>"?"</kbd></dt><dd>"these keys"</dd>
                        <dt><kbd>"Esc"</kbd></dt><dd>"close, or step back"</dd>
                    </dl>
                    <button type="button" on:click=move |_| selection.help.set(false)>"Close"</button>
                </div>
            }
        })
    }
}

/// Installs the keyboard: `rows` is the list as shown (order ids, top to
/// bottom); `open` says whether Enter may open an order.
pub fn keyboard(selection: Selection, allowed: Allowed, rows: Signal<Vec<String>>, open: bool) {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let handle = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
            let typing = ev
                .target()
                .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
                .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
            if ev.key() == "Escape" {
                selection.help.set(false);
                selection.asking.set(None);
                return;
            }
            if typing || ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
                return;
            }
            let handled = on_key(&ev.key(), selection, allowed, &rows.get_untracked(), open);
            if handled {
                ev.prevent_default();
            }
        });
        on_cleanup(move || handle.remove());
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (selection, allowed, rows, open);
}

/// What a key does; whether it did anything.
#[cfg(feature = "hydrate")]
fn on_key(key: &str, selection: Selection, allowed: Allowed, rows: &[String], open: bool) -> bool {
    let focused = selection.focus.get_untracked();
    let position = focused.as_ref().and_then(|id| rows.iter().position(|r| r == id));
    match key {
        "/" => focus_element("header .search input"),
        "j" | "k" => {
            let next = match (key, position) {
                ("j", Some(i)) => (i + 1).min(rows.len().saturating_sub(1)),
                ("k", Some(i)) => i.saturating_sub(1),
                _ => 0,
            };
            if let Some(id) = rows.get(next) {
                selection.focus.set(Some(id.clone()));
                focus_element(&format!("tr[data-order-id=\"{id}\"]"));
            }
        }
        "Enter" if open => {
            if let Some(id) = focused {
                let _ = window().location().set_href(&format!("/orders/{id}"));
            }
        }
        "x" if allowed.cancel => {
            if let Some(id) = focused {
                selection.toggle(&id);
            }
        }
        "c" if allowed.confirm => ask(selection, Status::Confirmed, "#bulk-proceed"),
        "C" if allowed.cancel => ask(selection, Status::Cancelled, "#bulk-reason"),
        "?" => selection.help.update(|h| *h = !*h),
        _ => return false,
    }
    true
}

#[cfg(feature = "hydrate")]
fn ask(selection: Selection, to: Status, then_focus: &'static str) {
    if selection.ids.with_untracked(BTreeSet::is_empty) && !selection.all_matching.get_untracked() {
        return;
    }
    selection.asking.set(Some(to));
    // The confirmation appears on the next frame; focus it then.
    request_animation_frame(move || {
        focus_element(then_focus);
    });
}

#[cfg(feature = "hydrate")]
fn focus_element(selector: &str) {
    use wasm_bindgen::JsCast;
    if let Some(el) =
        document().query_selector(selector).ok().flatten().and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
    {
        let _ = el.focus();
    }
}

//! The Sales page: the sale plans, a form to create or change one (ops and
//! admin), and a plan's go/no-go (`?plan=NAME`) with each check's verdict,
//! figures and fix, and a button that writes the sale days' shard count
//! ahead; the plan's rehearsal (the latest beside the previous, and a
//! button that runs one, followed by the live push until it ends); and
//! after the sale, the plan beside what happened. Viewers see everything
//! and change nothing: the buttons are not offered, and the server refuses
//! the calls anyway. On a phone each plan is a card (style/main.css).

use super::common::{ErrorView, TableHead, can, me};
use super::data::{
    DeleteSalePlan, PageError, SaveSalePlan, StartRehearsal, WriteSaleShards, get_readiness, get_rehearsals,
    get_sale_outcome, get_sale_plans,
};
use super::live::LiveStatus;
use crate::model::{
    Me, Permission, Readiness, ReadinessCheck, Rehearsal, RehearsalProgress, Rehearsals, SaleOutcome, SalePhase,
    SalePlan, SalePlanInput, Verdict, Writer,
};
use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use serde_json::Value;

#[component]
pub fn SalesPage() -> impl IntoView {
    let query = use_query_map();
    let chosen = move || query.with(|q| q.get("plan")).filter(|p| !p.is_empty());
    let save = ServerAction::<SaveSalePlan>::new();
    let delete = ServerAction::<DeleteSalePlan>::new();
    let write = ServerAction::<WriteSaleShards>::new();
    let plans = Resource::new(move || (save.version().get(), delete.version().get()), |_| get_sale_plans());
    let rehearse = ServerAction::<StartRehearsal>::new();
    let following = Following::new();
    let rehearsed = following.rehearsed;
    let readiness = Resource::new(
        move || (chosen(), save.version().get(), write.version().get(), rehearsed.get()),
        |(plan, _, _, _)| async move {
            match plan {
                Some(plan) => Some(get_readiness(plan).await),
                None => None,
            }
        },
    );
    let rehearsals = Resource::new(
        move || (chosen(), rehearse.version().get()),
        |(plan, _)| async move {
            match plan {
                Some(plan) => Some(get_rehearsals(plan).await),
                None => None,
            }
        },
    );
    let outcome = Resource::new(chosen, |plan| async move {
        match plan {
            Some(plan) => Some(get_sale_outcome(plan).await),
            None => None,
        }
    });
    follow_rehearsal(chosen, rehearsals, following);
    let form = PlanForm::default();
    view! {
        <div class="title-row">
            <h1>"Sale readiness"</h1>
        </div>
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let me = me().await;
                match plans.await {
                    Ok(plans) => view! { <PlanList plans me form delete rehearse/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/sales"/> }.into_any(),
                }
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let me = me().await;
                can(&me, Permission::PlanSales).then(|| view! { <PlanEditor form save/> })
            })}
        </Transition>
        <Transition fallback=|| view! { <p class="loading">"Checking…"</p> }>
            {move || Suspend::new(async move {
                let me = me().await;
                match readiness.await {
                    None => view! {
                        <p class="muted" data-testid="no-plan-chosen">"Choose a plan's Check for its go/no-go."</p>
                    }
                    .into_any(),
                    Some(Ok(readiness)) => view! { <ReadinessView readiness me write/> }.into_any(),
                    Some(Err(error)) => view! { <ErrorView error first_page="/sales"/> }.into_any(),
                }
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                let me = me().await;
                let plan = chosen()?;
                Some(match rehearsals.await? {
                    Ok(rehearsals) => view! { <RehearsalPanel rehearsals plan me rehearse following/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/sales"/> }.into_any(),
                })
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                Some(match outcome.await? {
                    Ok(outcome) => view! { <OutcomePanel outcome/> }.into_any(),
                    Err(error) => view! { <ErrorView error first_page="/sales"/> }.into_any(),
                })
            })}
        </Transition>
    }
}

type RehearsalsResource = Resource<Option<Result<Rehearsals, PageError>>>;

/// Seconds between re-reads of a running rehearsal while its push is down,
/// or silent (a server that pushes nothing: one too old, or a run another
/// server started after the stream opened).
#[cfg(feature = "hydrate")]
const FALLBACK_SECONDS: u64 = 5;

/// How the page follows the chosen plan's rehearsal.
#[derive(Clone, Copy)]
struct Following {
    /// A run is under way, as last read.
    rehearsing: RwSignal<bool>,
    /// Bumped when a run followed on this page ends: the go/no-go is
    /// checked again.
    rehearsed: RwSignal<u32>,
    /// The run's progress, as last pushed.
    progress: RwSignal<Option<RehearsalProgress>>,
    /// The push's connection.
    status: RwSignal<LiveStatus>,
    /// When the last event arrived (milliseconds since the epoch).
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    heard: StoredValue<f64>,
}

impl Following {
    fn new() -> Self {
        Following {
            rehearsing: RwSignal::new(false),
            rehearsed: RwSignal::new(0),
            progress: RwSignal::new(None),
            status: RwSignal::new(LiveStatus::Connecting),
            heard: StoredValue::new(0.0),
        }
    }
}

/// Follows the chosen plan's rehearsals by the live push
/// (`/api/sales/{name}/rehearsal/live`): its progress each second, a re-read
/// when a run ends or the stream is open again after a drop (reopened as
/// the dashboard's is), and a re-read every few seconds only while a run
/// is under way and the push is down or silent. When a run ends, bumps
/// `rehearsed` so the go/no-go is checked again.
fn follow_rehearsal(
    chosen: impl Fn() -> Option<String> + Send + Sync + 'static,
    rehearsals: RehearsalsResource,
    following: Following,
) {
    let Following { rehearsing, rehearsed, progress, .. } = following;
    Effect::new(move |_| {
        let running = matches!(rehearsals.get(), Some(Some(Ok(r))) if r.running.is_some());
        if rehearsing.get_untracked() && !running {
            rehearsed.update(|n| *n += 1);
        }
        if !running {
            progress.set(None);
        }
        rehearsing.set(running);
    });
    // One stream per plan shown; it follows the plan chosen.
    Effect::new(move |_| {
        let plan = chosen();
        #[cfg(feature = "hydrate")]
        if let Some(plan) = plan {
            let close = super::live::follow(
                format!("/api/sales/{}/rehearsal/live", url_encode(&plan)),
                following.status,
                move |data| on_rehearsal_event(data, rehearsals, following),
                move || rehearsals.refetch(),
            );
            // The connection lives in this browser thread; the wrapper only
            // satisfies on_cleanup's Send bound.
            let close = send_wrapper::SendWrapper::new(close);
            on_cleanup(move || (close.take())());
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = plan;
    });
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let tick = move || {
            let silent = js_sys::Date::now() - following.heard.get_value() > (FALLBACK_SECONDS * 1000) as f64;
            let down = following.status.get_untracked() != LiveStatus::Up;
            if rehearsing.get_untracked() && (down || silent) {
                rehearsals.refetch();
            }
        };
        if let Ok(handle) = set_interval_with_handle(tick, std::time::Duration::from_secs(FALLBACK_SECONDS)) {
            on_cleanup(move || handle.clear());
        }
    });
}

/// Applies one pushed event: progress is shown; an end, or rehearsals
/// stored otherwise than shown, are read again.
#[cfg(feature = "hydrate")]
fn on_rehearsal_event(data: &str, rehearsals: RehearsalsResource, following: Following) {
    use crate::model::RehearsalEvent;
    following.heard.set_value(js_sys::Date::now());
    match serde_json::from_str::<RehearsalEvent>(data) {
        Ok(RehearsalEvent::Progress(p)) => following.progress.set(Some(p)),
        Ok(RehearsalEvent::Finished(_)) => {
            following.progress.set(None);
            rehearsals.refetch();
        }
        Ok(RehearsalEvent::Rehearsals(stored)) => {
            let shown = rehearsals.get_untracked().flatten().and_then(Result::ok);
            if shown.as_ref() != Some(&*stored) {
                rehearsals.refetch();
            }
        }
        Err(_) => {}
    }
}

/// The form's fields, shared by the list (whose Edit fills them) and the
/// editor; `editing` names the plan being changed, `None` for a new one.
#[derive(Clone, Copy)]
struct PlanForm {
    editing: RwSignal<Option<String>>,
    name: RwSignal<String>,
    peak: RwSignal<String>,
    start: RwSignal<String>,
    ramp: RwSignal<String>,
    hold: RwSignal<String>,
    decay: RwSignal<String>,
    item_bytes: RwSignal<String>,
    consumer: RwSignal<String>,
    writer: RwSignal<String>,
}

impl Default for PlanForm {
    fn default() -> Self {
        PlanForm {
            editing: RwSignal::new(None),
            name: RwSignal::new(String::new()),
            peak: RwSignal::new(String::new()),
            start: RwSignal::new(String::new()),
            ramp: RwSignal::new("10".into()),
            hold: RwSignal::new("30".into()),
            decay: RwSignal::new("20".into()),
            item_bytes: RwSignal::new(String::new()),
            consumer: RwSignal::new(String::new()),
            writer: RwSignal::new(Writer::default().as_str().to_string()),
        }
    }
}

impl PlanForm {
    fn fill(&self, plan: &SalePlan) {
        self.editing.set(Some(plan.name.clone()));
        self.name.set(plan.name.clone());
        self.peak.set(plan.peak_orders_per_second.to_string());
        self.start.set(plan.start.format("%Y-%m-%dT%H:%M").to_string());
        self.ramp.set(plan.ramp_minutes.to_string());
        self.hold.set(plan.hold_minutes.to_string());
        self.decay.set(plan.decay_minutes.to_string());
        self.item_bytes.set(plan.item_bytes.to_string());
        self.consumer.set(plan.consumer_records_per_second.map(|r| r.to_string()).unwrap_or_default());
        self.writer.set(plan.writer.as_str().to_string());
    }

    fn clear(&self) {
        let fresh = PlanForm::default();
        self.editing.set(None);
        for (field, value) in [
            (self.name, fresh.name),
            (self.peak, fresh.peak),
            (self.start, fresh.start),
            (self.ramp, fresh.ramp),
            (self.hold, fresh.hold),
            (self.decay, fresh.decay),
            (self.item_bytes, fresh.item_bytes),
            (self.consumer, fresh.consumer),
            (self.writer, fresh.writer),
        ] {
            field.set(value.get_untracked());
        }
    }

    /// The input as typed: the server checks every field and names a bad one.
    fn input(&self) -> SalePlanInput {
        let text = |signal: RwSignal<String>| Some(Value::String(signal.get_untracked().trim().to_string()));
        SalePlanInput {
            name: Some(Value::String(self.name.get_untracked())),
            peak_orders_per_second: text(self.peak),
            start: text(self.start),
            ramp_minutes: text(self.ramp),
            hold_minutes: text(self.hold),
            decay_minutes: text(self.decay),
            item_bytes: text(self.item_bytes),
            consumer_records_per_second: text(self.consumer),
            writer: text(self.writer),
        }
    }
}

#[component]
fn PlanList(
    plans: Vec<SalePlan>,
    me: Option<Me>,
    form: PlanForm,
    delete: ServerAction<DeleteSalePlan>,
    rehearse: ServerAction<StartRehearsal>,
) -> impl IntoView {
    if plans.is_empty() {
        return view! { <p class="muted" data-testid="no-plans">"No sale plan yet."</p> }.into_any();
    }
    let writer = can(&me, Permission::PlanSales);
    // The plan whose Delete waits for its confirmation, if any.
    let confirming = RwSignal::new(None::<String>);
    view! {
        // Its box scrolls sideways where the table is wider than the page
        // (a tablet, a plan's Delete being confirmed); a phone shows cards.
        <div class="table-box">
        <table class="orders plans" data-testid="plans">
            <caption class="visually-hidden">"Sale plans"</caption>
            <TableHead columns=&[
                ("Plan", false),
                ("Peak orders/s", true),
                ("Start (UTC)", false),
                ("Ramp / hold / decay (min)", false),
                ("Item bytes", true),
                ("Orders written by", false),
                ("Consumer (measured)", false),
                ("Actions", false),
            ]/>
            <tbody>
                {plans
                    .into_iter()
                    .map(|plan| {
                        let cells = plan.clone();
                        view! {
                            <tr data-testid="plan-row" data-plan=cells.name.clone()>
                                <th scope="row" data-label="Plan">{cells.name.clone()}</th>
                                <td class="num" data-label="Peak orders/s">{cells.peak_orders_per_second.to_string()}</td>
                                <td data-label="Start (UTC)">{cells.start.format("%Y-%m-%d %H:%M").to_string()}</td>
                                <td data-label="Ramp / hold / decay (min)">
                                    {format!("{} / {} / {}", cells.ramp_minutes, cells.hold_minutes, cells.decay_minutes)}
                                </td>
                                <td class="num" data-label="Item bytes">{cells.item_bytes}</td>
                                <td data-testid="plan-row-writer" data-label="Orders written by">{writer_text(cells.writer)}</td>
                                <td data-testid="plan-row-consumer" data-label="Consumer (measured)">
                                    {crate::model::consumer_summary(&cells)}
                                </td>
                                <td class="row-actions-cell">
                                    <PlanActions plan writer form delete rehearse confirming/>
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        </div>
    }
    .into_any()
}

/// A plan row's actions, each a labelled button, the plan's name in its
/// accessible name: Check, and for ops Rehearse and Edit, then apart from
/// them Delete, which asks to be confirmed (Escape or Keep backs out).
#[component]
fn PlanActions(
    plan: SalePlan,
    writer: bool,
    form: PlanForm,
    delete: ServerAction<DeleteSalePlan>,
    rehearse: ServerAction<StartRehearsal>,
    confirming: RwSignal<Option<String>>,
) -> impl IntoView {
    let name = plan.name.clone();
    let check = format!("/sales?plan={}", url_encode(&name));
    let (group_label, check_label) = (format!("Actions on {name}"), format!("Check {name}"));
    let changes = writer.then(|| {
        let navigate = use_navigate();
        let (to_rehearse, to_delete, asked) = (name.clone(), name.clone(), name.clone());
        let go_to = check.clone();
        let confirm_button = NodeRef::<leptos::html::Button>::new();
        let delete_button = NodeRef::<leptos::html::Button>::new();
        let is_asked = move || confirming.with(|c| c.as_deref() == Some(asked.as_str()));
        let cancel = move || {
            confirming.set(None);
            request_animation_frame(move || {
                if let Some(button) = delete_button.get() {
                    let _ = button.focus();
                }
            });
        };
        view! {
            <button type="button" class="secondary" data-testid="plan-rehearse"
                aria-label=format!("Rehearse {name}")
                disabled=move || rehearse.pending().get()
                on:click=move |_| {
                    rehearse.dispatch(StartRehearsal { name: to_rehearse.clone() });
                    navigate(&go_to, Default::default());
                }>
                "Rehearse"
            </button>
            <button type="button" class="secondary" data-testid="plan-edit" aria-label=format!("Edit {name}")
                on:click=move |_| form.fill(&plan)>
                "Edit"
            </button>
            <span class="destructive">
                {move || {
                    let name = to_delete.clone();
                    if is_asked() {
                        let yes = name.clone();
                        view! {
                            <span class="confirm" data-testid="plan-delete-confirm" role="group"
                                aria-label=format!("Delete {name}?")
                                on:keydown=move |ev| if ev.key() == "Escape" { cancel() }>
                                <span>"Delete this plan?"</span>
                                <button type="button" class="danger" data-testid="plan-delete-yes" node_ref=confirm_button
                                    on:click=move |_| {
                                        confirming.set(None);
                                        delete.dispatch(DeleteSalePlan { name: yes.clone() });
                                    }>
                                    "Delete"
                                </button>
                                <button type="button" class="secondary" data-testid="plan-delete-no" on:click=move |_| cancel()>
                                    "Keep"
                                </button>
                            </span>
                        }
                        .into_any()
                    } else {
                        view! {
                            <button type="button" class="danger-outline" data-testid="plan-delete" node_ref=delete_button
                                aria-label=format!("Delete {name}…")
                                on:click=move |_| {
                                    confirming.set(Some(name.clone()));
                                    request_animation_frame(move || {
                                        if let Some(button) = confirm_button.get() {
                                            let _ = button.focus();
                                        }
                                    });
                                }>
                                "Delete…"
                            </button>
                        }
                        .into_any()
                    }
                }}
            </span>
        }
    });
    view! {
        <div class="row-actions" role="group" aria-label=group_label>
            <a href=check class="button secondary" data-testid="plan-check" aria-label=check_label>
                "Check"
            </a>
            {changes}
        </div>
    }
}

/// Who writes a plan's orders, in a word or two.
fn writer_text(writer: Writer) -> &'static str {
    match writer {
        Writer::Service => "another service",
        Writer::Console => "this console",
    }
}

/// A plan name as a URL's query value.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[component]
fn PlanEditor(form: PlanForm, save: ServerAction<SaveSalePlan>) -> impl IntoView {
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        save.dispatch(SaveSalePlan { original: form.editing.get_untracked(), input: form.input() });
    };
    // A saved plan clears the form; a refused one keeps it, with the reason.
    Effect::new(move |_| {
        if let Some(Ok(_)) = save.value().get() {
            form.clear();
        }
    });
    let field = |label: &'static str, name: &'static str, kind: &'static str, signal: RwSignal<String>| {
        view! {
            <label>
                {label} " "
                <input type=kind name=name data-testid=format!("plan-{name}") step="any"
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))/>
            </label>
        }
    };
    view! {
        <section aria-labelledby="plan-form-heading" class="plan-form">
            <h2 id="plan-form-heading">
                {move || match form.editing.get() {
                    Some(name) => format!("Change {name}"),
                    None => "New sale plan".to_string(),
                }}
            </h2>
            <form on:submit=submit data-testid="plan-form">
                <label>
                    "Name "
                    <input type="text" name="name" data-testid="plan-name" maxlength="64"
                        prop:disabled=move || form.editing.get().is_some()
                        prop:value=move || form.name.get()
                        on:input=move |ev| form.name.set(event_target_value(&ev))/>
                </label>
                {field("Peak orders a second", "peak", "number", form.peak)}
                {field("Start (UTC)", "start", "datetime-local", form.start)}
                {field("Ramp (min)", "ramp", "number", form.ramp)}
                {field("Hold (min)", "hold", "number", form.hold)}
                {field("Decay (min)", "decay", "number", form.decay)}
                {field("Item bytes (empty: a typical order's)", "item-bytes", "number", form.item_bytes)}
                {field("Consumer records/s measured (optional)", "consumer", "number", form.consumer)}
                <label>
                    "Orders written by "
                    <select name="writer" data-testid="plan-writer"
                        prop:value=move || form.writer.get()
                        on:change=move |ev| form.writer.set(event_target_value(&ev))>
                        {Writer::ALL
                            .into_iter()
                            .map(|w| view! {
                                <option value=w.as_str() selected=move || form.writer.get() == w.as_str()>
                                    {writer_text(w)}
                                </option>
                            })
                            .collect_view()}
                    </select>
                </label>
                <div class="form-buttons">
                    <button type="submit" data-testid="plan-save" disabled=move || save.pending().get()>
                        {move || if form.editing.get().is_some() { "Save the changes" } else { "Save the plan" }}
                    </button>
                    <button type="button" class="secondary" data-testid="plan-new" on:click=move |_| form.clear()>
                        {move || if form.editing.get().is_some() { "Cancel: a new plan instead" } else { "Clear" }}
                    </button>
                </div>
            </form>
            {move || match save.value().get() {
                Some(Err(error)) => Some(view! {
                    <p class="error" role="alert" data-testid="plan-error">{error.message}</p>
                }),
                _ => None,
            }}
        </section>
    }
}

fn verdict_class(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Ready => "badge verdict-ready",
        Verdict::Act => "badge verdict-act",
        Verdict::NoGo => "badge verdict-no-go",
    }
}

#[component]
fn ReadinessView(readiness: Readiness, me: Option<Me>, write: ServerAction<WriteSaleShards>) -> impl IntoView {
    let plan = readiness.plan.clone();
    let writer = can(&me, Permission::PlanSales);
    view! {
        <section aria-labelledby="readiness-heading" data-testid="readiness" data-verdict=readiness.verdict.as_str()>
            <h2 id="readiness-heading">
                {format!("{}: ", plan.name)}
                <span class=verdict_class(readiness.verdict) data-testid="verdict">
                    {readiness.verdict.as_str().to_uppercase()}
                </span>
            </h2>
            <p class="as-of">
                {format!(
                    "{} orders a second at the peak, from {} UTC, {} · checked at {} UTC",
                    plan.peak_orders_per_second,
                    plan.start.format("%Y-%m-%d %H:%M"),
                    plan.writer.describe(),
                    readiness.as_of.format("%H:%M:%S")
                )}
            </p>
            {move || match write.value().get() {
                Some(Err(error)) => Some(view! { <p class="error" role="alert" data-testid="write-error">{error.message}</p> }.into_any()),
                Some(Ok(written)) => Some(view! {
                    <p class="notice" data-testid="write-done">
                        {format!("Shard count {} written for {} day(s).", written.shards, written.days.len())}
                    </p>
                }.into_any()),
                None => None,
            }}
            {readiness
                .checks
                .into_iter()
                .map(|check| view! { <CheckView check plan=plan.name.clone() writer write/> })
                .collect_view()}
        </section>
    }
}

#[component]
fn CheckView(check: ReadinessCheck, plan: String, writer: bool, write: ServerAction<WriteSaleShards>) -> impl IntoView {
    let fix = check.fix.clone().map(|fix| {
        let button = (writer && fix.action.as_deref() == Some("write-shards")).then(|| {
            let plan = plan.clone();
            view! {
                <button type="button" data-testid="write-shards" disabled=move || write.pending().get()
                    on:click=move |_| { write.dispatch(WriteSaleShards { name: plan.clone() }); }>
                    "Write the shard count now"
                </button>
            }
        });
        view! {
            <div class="fix" data-testid="fix">
                <p><strong>"Fix: "</strong>{fix.text}</p>
                {fix.command.map(|c| view! { <p>"Command: " <code data-testid="fix-command">{c}</code></p> })}
                {fix.parameter.map(|p| view! { <p>"Template parameters: " <code data-testid="fix-parameter">{p}</code></p> })}
                {button}
            </div>
        }
    });
    view! {
        <article class="check" data-testid="check" data-check=check.id.clone() data-verdict=check.verdict.as_str()>
            <h3>
                <span class=verdict_class(check.verdict)>{check.verdict.as_str()}</span>
                " " {check.title}
            </h3>
            <p>{check.reason}</p>
            <table class="orders figures">
                <tbody>
                    {check
                        .figures
                        .into_iter()
                        .map(|f| view! {
                            <tr>
                                <th scope="row">{f.label}</th>
                                <td>
                                    {f.value}
                                    {f.source.map(|s| view! { <br/><small class="muted" data-testid="figure-source">{s}</small> })}
                                </td>
                            </tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
            {fix}
        </article>
    }
}

fn verdict_text(rehearsal: &Rehearsal) -> &'static str {
    rehearsal.verdict.map_or("running", Verdict::as_str)
}

fn ms_text(ms: Option<f64>, none: &str) -> String {
    ms.map_or(none.to_string(), |ms| format!("{ms:.0} ms"))
}

/// One figure of a rehearsal, as its row shows it.
type Row = (&'static str, fn(&Rehearsal) -> String);

const REHEARSAL_ROWS: [Row; 9] = [
    ("Run", |r| format!("{} UTC by {}", r.started_at.format("%Y-%m-%d %H:%M:%S"), r.by)),
    ("Shape rehearsed", |r| {
        format!(
            "{:.1} orders/s at the peak (the plan's {} × {}), {} shard(s), {} s ramp, {} s hold, {} s decay",
            r.shape.peak_orders_per_second,
            r.plan_peak_orders_per_second,
            r.shape.scale,
            r.shape.shards,
            r.shape.ramp_seconds,
            r.shape.hold_seconds,
            r.shape.decay_seconds
        )
    }),
    ("Orders/s: target (mean) → achieved", |r| match &r.figures {
        Some(f) => format!("{:.1} → {:.1}", f.target_orders_per_second.unwrap_or(0.0), f.achieved_orders_per_second),
        None => "none".into(),
    }),
    ("Orders created / failed", |r| {
        r.figures.as_ref().map_or("none".into(), |f| format!("{} / {}", f.created, f.failed))
    }),
    ("Attempts throttled", |r| r.figures.as_ref().map_or("none".into(), |f| f.throttled.to_string())),
    ("Throttles by reason", |r| match &r.figures {
        Some(f) if !f.throttles.is_empty() => f
            .throttles
            .iter()
            .map(|t| format!("{} on {}: {}", t.reason, t.place, t.total))
            .collect::<Vec<_>>()
            .join("; "),
        Some(_) => "none".into(),
        None => "none".into(),
    }),
    ("Write p50 / p99", |r| match &r.figures {
        Some(f) => format!("{} / {}", ms_text(f.write_p50_ms, "none"), ms_text(f.write_p99_ms, "none")),
        None => "none".into(),
    }),
    ("Dashboard stayed readable", |r| match &r.figures {
        Some(f) => format!(
            "{} ({} reads answered, {} failed, p99 {})",
            if f.dashboard_readable { "yes" } else { "no" },
            f.dashboard_answered,
            f.dashboard_failed,
            ms_text(f.dashboard_p99_ms, "none")
        ),
        None => "none".into(),
    }),
    ("Why", |r| r.reason.clone()),
];

#[component]
fn RehearsalPanel(
    rehearsals: Rehearsals,
    plan: String,
    me: Option<Me>,
    rehearse: ServerAction<StartRehearsal>,
    following: Following,
) -> impl IntoView {
    let writer = can(&me, Permission::PlanSales);
    let running = rehearsals.running.clone();
    let button = writer.then(|| {
        let busy = running.is_some();
        let plan = plan.clone();
        view! {
            <button type="button" data-testid="rehearse-button" disabled=move || busy || rehearse.pending().get()
                on:click=move |_| { rehearse.dispatch(StartRehearsal { name: plan.clone() }); }>
                "Run the scaled rehearsal"
            </button>
        }
    });
    let columns: Vec<(&'static str, Rehearsal)> = [("Latest", rehearsals.latest), ("Previous", rehearsals.previous)]
        .into_iter()
        .filter_map(|(label, r)| Some((label, r?)))
        .collect();
    let table = if columns.is_empty() {
        view! { <p class="muted" data-testid="rehearsal-none">"Never rehearsed."</p> }.into_any()
    } else {
        view! {
            <table class="orders figures" data-testid="rehearsals">
                <thead>
                    <tr>
                        <th scope="col"></th>
                        {columns
                            .iter()
                            .map(|(label, r)| view! {
                                <th scope="col" data-testid=format!("rehearsal-{}", label.to_lowercase())
                                    data-verdict=verdict_text(r)>
                                    {format!("{label}: ")}
                                    <span class=r.verdict.map_or("badge", verdict_class)>{verdict_text(r)}</span>
                                </th>
                            })
                            .collect_view()}
                    </tr>
                </thead>
                <tbody>
                    {REHEARSAL_ROWS
                        .iter()
                        .map(|(label, show)| view! {
                            <tr>
                                <th scope="row">{*label}</th>
                                {columns.iter().map(|(_, r)| view! { <td>{show(r)}</td> }).collect_view()}
                            </tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <section aria-labelledby="rehearsal-heading" class="rehearsal" data-testid="rehearsal">
            <h2 id="rehearsal-heading">"Rehearsal"</h2>
            <p class="muted">
                "The plan's shape, scaled down (about 25 seconds, the peak and the partition limits by the same \
                 factor), through the throttle proxy on a scratch store at the sale day's shard count."
            </p>
            {button}
            {running.map(|r| view! { <RunningRehearsal running=r following/> })}
            {move || match rehearse.value().get() {
                Some(Err(error)) => Some(view! { <p class="error" role="alert" data-testid="rehearsal-error">{error.message}</p> }),
                _ => None,
            }}
            {table}
        </section>
    }
}

/// The run under way: what runs, and how far it is, as pushed each second.
#[component]
fn RunningRehearsal(running: Rehearsal, following: Following) -> impl IntoView {
    let Following { progress, status, .. } = following;
    let seconds = running.shape.seconds();
    let elapsed = move || progress.with(|p| p.as_ref().map_or(0, |p| p.elapsed_seconds.min(p.seconds)));
    let where_now = move || match progress.get() {
        Some(p) if p.elapsed_seconds >= p.seconds => format!("{} s: {}", p.elapsed_seconds, p.phase.as_str()),
        Some(p) => format!("{} s of {} s: {}", p.elapsed_seconds, p.seconds, p.phase.as_str()),
        None => "waiting for its progress…".to_string(),
    };
    let push = move || match status.get() {
        LiveStatus::Up => "● Live",
        LiveStatus::Connecting => "○ Connecting to live updates…",
        LiveStatus::Down => "Live updates are down: reconnecting, and reading the rehearsal again every few seconds.",
    };
    view! {
        <div class="notice rehearsal-running" data-testid="rehearsal-running">
            <p role="status">
                {format!(
                    "Rehearsing since {} UTC ({} shard(s), {:.1} orders/s at the peak)…",
                    running.started_at.format("%H:%M:%S"),
                    running.shape.shards,
                    running.shape.peak_orders_per_second
                )}
            </p>
            <progress max=seconds value=elapsed aria-label="Rehearsal progress"></progress>
            <p class="progress-text" data-testid="rehearsal-progress"
                data-elapsed=move || progress.with(|p| p.as_ref().map(|p| p.elapsed_seconds.to_string()))>
                {where_now}
            </p>
            <p class="live" data-testid="rehearsal-live" data-live=move || format!("{:?}", status.get()).to_ascii_lowercase()>
                {push}
            </p>
        </div>
    }
}

#[component]
fn OutcomePanel(outcome: SaleOutcome) -> impl IntoView {
    let plan = &outcome.plan;
    let phase = match outcome.phase {
        SalePhase::NotStarted => "not started",
        SalePhase::UnderWay => "under way",
        SalePhase::Over => "over",
    };
    let unknown = |note: &str| format!("unknown ({note})");
    let peak = match (outcome.peak_orders_per_second, outcome.peak_minute) {
        (Some(rate), Some(at)) => {
            format!("{rate:.2} orders/s in {} UTC ({})", at.format("%Y-%m-%d %H:%M"), outcome.peak_note)
        }
        _ => unknown(&outcome.peak_note),
    };
    let created = outcome.orders_created.map_or_else(|| "unknown".to_string(), |n| n.to_string());
    let throttles = match &outcome.throttles {
        Some(t) if t.is_empty() => format!("none ({})", outcome.throttles_note),
        Some(t) => t.iter().map(|t| format!("{} on {}: {}", t.reason, t.place, t.total)).collect::<Vec<_>>().join("; "),
        None => unknown(&outcome.throttles_note),
    };
    let lag = match outcome.consumer_behind_ms {
        Some(ms) => format!("{ms} ms ({})", outcome.consumer_note),
        None => outcome.consumer_note.clone(),
    };
    let hot = match &outcome.hot_keys {
        Some(keys) if keys.is_empty() => format!("none recorded ({})", outcome.hot_keys_note),
        Some(keys) => keys
            .iter()
            .map(|k| format!("{} on {}: {} units in {} UTC", k.key, k.resource, k.units, k.at.format("%H:%M")))
            .collect::<Vec<_>>()
            .join("; "),
        None => unknown(&outcome.hot_keys_note),
    };
    let rows = [
        ("Peak orders/s", format!("{}", plan.peak_orders_per_second), peak),
        ("Orders created", "".to_string(), created),
        ("Throttles by reason", "none".to_string(), throttles),
        ("Consumer lag", "".to_string(), lag),
        ("Hot keys", "".to_string(), hot),
    ];
    let window = match (outcome.from, outcome.to) {
        (Some(from), Some(to)) => format!(
            "from {} to {} UTC: {} minute(s), {} observed by the stream consumer",
            from.format("%Y-%m-%d %H:%M"),
            to.format("%Y-%m-%d %H:%M"),
            outcome.minutes,
            outcome.minutes_observed
        ),
        _ => "nothing to show yet".to_string(),
    };
    view! {
        <section aria-labelledby="outcome-heading" data-testid="outcome" data-phase=phase>
            <h2 id="outcome-heading">"After the sale: the plan beside what happened"</h2>
            <p class="as-of">{format!("The sale is {phase}; {window}.")}</p>
            <table class="orders figures">
                <thead>
                    <tr><th scope="col"></th><th scope="col">"Planned"</th><th scope="col">"Happened"</th></tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|(label, planned, happened)| view! {
                            <tr><th scope="row">{label}</th><td>{planned}</td><td>{happened}</td></tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
        </section>
    }
}

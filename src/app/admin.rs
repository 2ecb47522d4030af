//! The Admin page (admins): every account and token; add a local account,
//! disable one, change its role; create a token (its text shown once, here)
//! and revoke one; and beside them, one account's security events
//! (`?account=NAME`: what it did and was refused, newest first). Every
//! button calls the same `Service` the `/api/admin/...` routes do.

use super::common::{ErrorView, TableHead, href};
use super::data::{AddAccount, CreateToken, DisableAccount, RevokeToken, SetRole, get_admin, get_audit};
use crate::model::{AccountView, AuditParams, NewAccount, NewToken, Role, TokenView, iso_millis};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

#[component]
pub fn AdminPage() -> impl IntoView {
    let query = use_query_map();
    let add = ServerAction::<AddAccount>::new();
    let disable = ServerAction::<DisableAccount>::new();
    let set_role = ServerAction::<SetRole>::new();
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let actions = Actions { disable, set_role, revoke };
    // Any change made here reads the accounts and tokens again.
    let changed = move || {
        add.version().get()
            + disable.version().get()
            + set_role.version().get()
            + create.version().get()
            + revoke.version().get()
    };
    let overview = Resource::new(changed, |_| get_admin());
    let account = move || query.with(|q| q.get("account")).filter(|a| !a.is_empty());
    let events = Resource::new(
        move || (account(), changed()),
        |(account, _)| async move {
            match account {
                None => Ok(None),
                Some(actor) => get_audit(AuditParams {
                    actor: Some(actor),
                    kind: Some("security".into()),
                    limit: Some("50".into()),
                    ..Default::default()
                })
                .await
                .map(Some),
            }
        },
    );
    view! {
        <h1>"Admin"</h1>
        <div class="admin">
            <section aria-labelledby="accounts-heading">
                <h2 id="accounts-heading">"Accounts"</h2>
                <AddAccountForm add/>
                <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match overview.await {
                            Ok(o) => view! { <AccountsTable accounts=o.accounts actions/> <TokensSection tokens=o.tokens create actions/> }.into_any(),
                            Err(error) => view! { <ErrorView error first_page="/admin"/> }.into_any(),
                        }
                    })}
                </Transition>
                <ActionError name="account" failed=Signal::derive(move || {
                    [add.value().get().and_then(Result::err), disable.value().get().and_then(Result::err),
                     set_role.value().get().and_then(Result::err), create.value().get().and_then(Result::err),
                     revoke.value().get().and_then(Result::err)]
                        .into_iter()
                        .flatten()
                        .next()
                        .map(|e| e.message)
                })/>
            </section>
            <section aria-labelledby="events-heading" data-testid="account-events">
                <h2 id="events-heading">
                    {move || match account() {
                        Some(name) => format!("Security events of {name}"),
                        None => "Security events".to_string(),
                    }}
                </h2>
                <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match events.await {
                            Ok(None) => view! { <p class="muted">"Choose an account's “Events” to see them here."</p> }.into_any(),
                            Ok(Some(listing)) if listing.entries.is_empty() => view! { <p class="empty">"None yet."</p> }.into_any(),
                            Ok(Some(listing)) => view! {
                                <ul class="events" data-testid="events">
                                    {listing.entries.into_iter().map(|e| {
                                        let what = [e.subject.clone(), e.refused.map(|r| format!("refused: {}", r.as_str())), e.detail.clone()]
                                            .into_iter().flatten().collect::<Vec<_>>().join(" · ");
                                        view! {
                                            <li data-kind=e.kind.as_str()>
                                                <time>{iso_millis::format(&e.at)}</time> " "
                                                <strong>{e.kind.as_str()}</strong> " "
                                                {e.client.map(|c| format!("from {c} "))}
                                                {what}
                                            </li>
                                        }
                                    }).collect_view()}
                                </ul>
                                <p><a href=href("/audit", &[("actor", account()), ("kind", Some("security".into()))])>"All of them in the audit trail"</a></p>
                            }.into_any(),
                            Err(error) => view! { <ErrorView error first_page="/admin"/> }.into_any(),
                        }
                    })}
                </Transition>
            </section>
        </div>
    }
}

/// What the tables' buttons dispatch.
#[derive(Clone, Copy)]
struct Actions {
    disable: ServerAction<DisableAccount>,
    set_role: ServerAction<SetRole>,
    revoke: ServerAction<RevokeToken>,
}

#[component]
fn ActionError(name: &'static str, failed: Signal<Option<String>>) -> impl IntoView {
    move || {
        failed.get().map(|message| {
            view! { <p class="error" role="alert" data-testid=format!("{name}-error")>{message}</p> }
        })
    }
}

fn role_options(selected: Role) -> impl IntoView {
    Role::ALL
        .into_iter()
        .map(|role| view! { <option value=role.as_str() selected=role == selected>{role.as_str()}</option> })
        .collect_view()
}

#[component]
fn AddAccountForm(add: ServerAction<AddAccount>) -> impl IntoView {
    let (name, role, password) =
        (RwSignal::new(String::new()), RwSignal::new(Role::Viewer), RwSignal::new(String::new()));
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let new =
            NewAccount { name: name.get_untracked(), role: role.get_untracked(), password: password.get_untracked() };
        add.dispatch(AddAccount { new });
    };
    // An account added clears the form (the password above all).
    Effect::new(move |_| {
        if let Some(Ok(_)) = add.value().get() {
            name.set(String::new());
            password.set(String::new());
        }
    });
    view! {
        <form on:submit=submit class="filters" data-testid="add-account">
            <label>"Name " <input type="text" name="name" maxlength="64" autocomplete="off"
                prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
            <label>"Role "
                <select name="role" on:change=move |ev| role.set(event_target_value(&ev).parse().unwrap_or(Role::Viewer))>
                    {role_options(Role::Viewer)}
                </select>
            </label>
            <label>"Password " <input type="password" name="password" autocomplete="new-password" minlength="12"
                prop:value=move || password.get() on:input=move |ev| password.set(event_target_value(&ev))/></label>
            <button type="submit" disabled=move || add.pending().get()>"Add account"</button>
        </form>
    }
}

#[component]
fn AccountsTable(accounts: Vec<AccountView>, actions: Actions) -> impl IntoView {
    view! {
        <table class="orders" data-testid="accounts">
            <caption class="visually-hidden">"Accounts"</caption>
            <TableHead columns=&[("Name", false), ("Role", false), ("Source", false), ("State", false), ("Created (UTC)", false), ("", false)]/>
            <tbody>
                {accounts.into_iter().map(|a| {
                    let role = RwSignal::new(a.role);
                    let (for_role, for_disable) = (a.name.clone(), a.name.clone());
                    let events = href("/admin", &[("account", Some(a.name.clone()))]);
                    let source = match a.source {
                        crate::model::AccountSource::Local => "local",
                        crate::model::AccountSource::Oidc => "oidc",
                    };
                    view! {
                        <tr data-account=a.name.clone()>
                            <td>{a.name.clone()}</td>
                            <td>
                                <select name="role" aria-label="Role"
                                    on:change=move |ev| role.set(event_target_value(&ev).parse().unwrap_or(role.get_untracked()))>
                                    {role_options(a.role)}
                                </select>
                                <button type="button" data-testid="set-role"
                                    on:click=move |_| { actions.set_role.dispatch(SetRole { name: for_role.clone(), role: role.get_untracked() }); }>
                                    "Set"
                                </button>
                            </td>
                            <td>{source}</td>
                            <td>{if a.disabled { "disabled" } else { "active" }}</td>
                            <td>{iso_millis::format(&a.created_at)}</td>
                            <td>
                                {(!a.disabled).then(|| view! {
                                    <button type="button" class="danger" data-testid="disable"
                                        on:click=move |_| { actions.disable.dispatch(DisableAccount { name: for_disable.clone() }); }>
                                        "Disable"
                                    </button>
                                })}
                                " " <a href=events>"Events"</a>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn TokensSection(tokens: Vec<TokenView>, create: ServerAction<CreateToken>, actions: Actions) -> impl IntoView {
    let (name, role) = (RwSignal::new(String::new()), RwSignal::new(Role::Viewer));
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        create.dispatch(CreateToken { new: NewToken { name: name.get_untracked(), role: role.get_untracked() } });
    };
    view! {
        <h2>"API tokens"</h2>
        <form on:submit=submit class="filters" data-testid="create-token">
            <label>"Name " <input type="text" name="token-name" maxlength="64" autocomplete="off"
                prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/></label>
            <label>"Role "
                <select name="token-role" on:change=move |ev| role.set(event_target_value(&ev).parse().unwrap_or(Role::Viewer))>
                    {role_options(Role::Viewer)}
                </select>
            </label>
            <button type="submit" disabled=move || create.pending().get()>"Create token"</button>
        </form>
        {move || create.value().get().and_then(Result::ok).map(|text| view! {
            <p class="notice" role="status" data-testid="new-token">
                "The token, shown this once: " <code>{text}</code>
            </p>
        })}
        <table class="orders" data-testid="tokens">
            <caption class="visually-hidden">"API tokens"</caption>
            <TableHead columns=&[("Name", false), ("Role", false), ("By", false), ("State", false), ("Created (UTC)", false), ("", false)]/>
            <tbody>
                {tokens.into_iter().map(|t| {
                    let name = t.name.clone();
                    view! {
                        <tr data-token=t.name.clone()>
                            <td>{t.name.clone()}</td>
                            <td>{t.role.as_str()}</td>
                            <td>{t.created_by.clone()}</td>
                            <td>{if t.revoked { "revoked" } else { "active" }}</td>
                            <td>{iso_millis::format(&t.created_at)}</td>
                            <td>
                                {(!t.revoked).then(|| view! {
                                    <button type="button" class="danger" data-testid="revoke"
                                        on:click=move |_| { actions.revoke.dispatch(RevokeToken { name: name.clone() }); }>
                                        "Revoke"
                                    </button>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

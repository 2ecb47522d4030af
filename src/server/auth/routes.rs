//! The sign-in flow: the login form's post, sign-out, and (when configured)
//! OpenID Connect. Plain HTML forms and redirects, so they work before the
//! page is hydrated.

use super::access::Routes;
use super::accounts::OIDC_PREFIX;
use super::client::ClientAddr;
use super::limits::{Refused, SignInLimits};
use super::oidc::{CALLBACK_PATH, Oidc, OidcError, OidcSettings, PendingSignIn};
use super::{Auth, Principal, pages};
use crate::model::url_escape;
use crate::model::{Access, AccountSource};
use crate::model::{Actor, AuditKind, Refusal, SecurityEvent, SignIn};
use crate::server::error::ApiError;
use crate::server::store::Account;
use axum::extract::Query;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use std::sync::Arc;
use tower_sessions::Session;

#[derive(Clone)]
pub struct SignInState {
    pub auth: Auth,
    /// Password attempts per client address and per account name: slows
    /// guessing to a crawl.
    pub attempts: SignInLimits,
    /// The identity provider, when one is configured.
    pub provider: Option<Provider>,
}

/// The identity provider: discovered at the first sign-in that needs it (and
/// again after a failure), so the app starts while the provider is away.
#[derive(Clone)]
pub struct Provider {
    settings: OidcSettings,
    client: Arc<tokio::sync::OnceCell<Oidc>>,
}

impl Provider {
    pub fn new(settings: OidcSettings) -> Self {
        Self { settings, client: Arc::default() }
    }

    async fn client(&self) -> Result<&Oidc, OidcError> {
        self.client.get_or_try_init(|| Oidc::discover(self.settings.clone())).await
    }
}

/// What the session keeps between the redirect to the provider and back.
#[derive(serde::Serialize, serde::Deserialize)]
struct Pending {
    sign_in: PendingSignIn,
    next: String,
}

const PENDING: &str = "oidcPending";

/// The sign-in flow: open to anyone (it is how one signs in); the forms
/// are checked for a cross-site origin like every cookie request.
pub fn routes<S>() -> Routes<S>
where
    S: Clone + Send + Sync + 'static,
    SignInState: axum::extract::FromRef<S>,
{
    Routes::new()
        .post("/auth/login", Access::Public, login)
        .post("/auth/logout", Access::Public, logout)
        .get("/auth/oidc", Access::Public, begin_oidc)
        .get(CALLBACK_PATH, Access::Public, oidc_callback)
}

#[derive(serde::Deserialize)]
struct Next {
    #[serde(default)]
    next: String,
}

/// To the identity provider, with a fresh state, nonce and PKCE verifier
/// kept in the session for the way back.
async fn begin_oidc(State(state): State<SignInState>, session: Session, Query(query): Query<Next>) -> Response {
    let Some(provider) = &state.provider else {
        return (StatusCode::NOT_FOUND, pages::message_page("Not here", "Single sign-on is not configured."))
            .into_response();
    };
    let client = match provider.client().await {
        Ok(client) => client,
        Err(err) => {
            tracing::warn!(error = %err, "the identity provider cannot be reached");
            return Redirect::to("/login?error=sso").into_response();
        }
    };
    let (url, sign_in) = client.begin();
    let pending = Pending { sign_in, next: state.auth.settings.home.target(&query.next) };
    match session.insert(PENDING, pending).await {
        Ok(()) => Redirect::to(url.as_str()).into_response(),
        Err(err) => unavailable(super::session_error(err)),
    }
}

#[derive(serde::Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// Back from the provider: the code for tokens, the ID token checked, the
/// groups mapped to a role, the account recorded, and a new session.
async fn oidc_callback(
    State(state): State<SignInState>,
    client: ClientAddr,
    session: Session,
    Query(back): Query<Callback>,
) -> Response {
    let client = Some(client.ip());
    let refused = |name: &str, why: Refusal| {
        let actor = Actor { name: name.to_string(), method: SignIn::Oidc };
        let event = SecurityEvent::new(AuditKind::SignInRefused, &actor, client).refused(why);
        let store = state.auth.store.clone();
        async move { store.record_event_or_log(&event).await }
    };
    let pending = match session.remove::<Pending>(PENDING).await {
        Ok(Some(pending)) => pending,
        Ok(None) => return Redirect::to("/login?error=sso").into_response(),
        Err(err) => return unavailable(super::session_error(err)),
    };
    let (Some(provider), Some(code), Some(returned)) = (&state.provider, &back.code, &back.state) else {
        tracing::info!(error = ?back.error, "single sign-on came back without a code");
        refused("unknown", Refusal::Provider).await;
        return Redirect::to("/login?error=sso").into_response();
    };
    let identity = match provider.client().await {
        Ok(client) => client.complete(pending.sign_in, code, returned).await,
        Err(err) => Err(err),
    };
    let identity = match identity {
        Ok(identity) => identity,
        Err(err) => {
            tracing::warn!(error = %err, "single sign-on refused");
            refused("unknown", Refusal::Provider).await;
            return Redirect::to("/login?error=sso").into_response();
        }
    };
    let Some(role) = identity.role else {
        tracing::info!(subject = %identity.subject, groups = ?identity.groups, "no Northwind Ops role in the provider's groups");
        refused(&oidc_account_name(&identity.subject), Refusal::NoRole).await;
        return Redirect::to("/login?error=no-role").into_response();
    };
    let account = Account {
        name: oidc_account_name(&identity.subject),
        role,
        source: AccountSource::Oidc,
        password_hash: None,
        disabled: false,
        display_name: Some(identity.display_name.clone()),
        created_at: chrono::Utc::now(),
    };
    let provider = Actor { name: account.name.clone(), method: SignIn::Oidc };
    let account = match state.auth.store.record_oidc_account(&account).await {
        Ok((account, before)) => {
            let changed = match &before {
                None => Some((AuditKind::AccountAdded, format!("role {} (the provider's groups)", account.role))),
                Some(before) if before.role != account.role => Some((
                    AuditKind::AccountRoleChanged,
                    format!("role {} → {} (the provider's groups)", before.role, account.role),
                )),
                Some(_) => None,
            };
            if let Some((kind, detail)) = changed {
                let event = SecurityEvent::new(kind, &provider, client).subject(&account.name).detail(detail);
                state.auth.store.record_event_or_log(&event).await;
            }
            account
        }
        Err(err) => return unavailable(err.into()),
    };
    if account.disabled {
        refused(&account.name, Refusal::Disabled).await;
        return Redirect::to("/login?error=disabled").into_response();
    }
    match state.auth.sign_in(&session, &account, SignIn::Oidc).await {
        Ok(()) => {
            tracing::info!(user = %account.name, role = %account.role, "signed in through the identity provider");
            let actor = Actor { name: account.name.clone(), method: SignIn::Oidc };
            state.auth.store.record_event_or_log(&SecurityEvent::new(AuditKind::SignIn, &actor, client)).await;
            // Checked when it was stored; checked again on the way out.
            Redirect::to(&state.auth.settings.home.target(&pending.next)).into_response()
        }
        Err(err) => unavailable(err),
    }
}

/// An identity-provider user's account name: `oidc.` and the provider's
/// stable subject when it reads as a name, else a digest of it.
pub fn oidc_account_name(subject: &str) -> String {
    let plain = format!("{OIDC_PREFIX}{}", subject.to_ascii_lowercase());
    if subject.len() <= 59 && super::accounts::validate_name("user name", &plain).is_ok() {
        return plain;
    }
    let digest = super::accounts::secret_hash(subject);
    format!("{OIDC_PREFIX}{}", &digest[..32])
}

#[derive(serde::Deserialize)]
struct LoginForm {
    name: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// A password sign-in: held to the client's rate and the account's delays
/// first (see `limits`), then checked. Every refusal of a name and password
/// reads the same, whether the account exists or not.
async fn login(
    State(state): State<SignInState>,
    client: ClientAddr,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = state.auth.settings.home.target(&form.next);
    let again = |error: &str| Redirect::to(&format!("/login?error={error}&next={}", url_escape(&next))).into_response();
    let name = form.name.trim().to_ascii_lowercase();
    if let Err(refused) = state.attempts.admit(client.ip(), &name) {
        let why = match refused {
            Refused::Client { .. } => "this client address is over its sign-in rate",
            Refused::Account { .. } => "this account's sign-ins are being delayed",
        };
        tracing::info!(user = %name, %client, why, "password sign-in slowed down");
        let mut response = again("slow-down");
        let secs = refused.retry_after().as_secs_f64().ceil().max(1.0) as u64;
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return response;
    }
    match state.auth.check_password(&name, form.password).await {
        Ok(Ok(account)) => match state.auth.sign_in(&session, &account, SignIn::Password).await {
            Ok(()) => {
                state.attempts.signed_in(client.ip(), &name);
                tracing::info!(user = %account.name, %client, "signed in with a password");
                let actor = Actor { name: account.name.clone(), method: SignIn::Password };
                state
                    .auth
                    .store
                    .record_event_or_log(&SecurityEvent::new(AuditKind::SignIn, &actor, Some(client.ip())))
                    .await;
                Redirect::to(&next).into_response()
            }
            Err(err) => unavailable(err),
        },
        Ok(Err(why)) => {
            tracing::info!(user = %name, %client, reason = why.as_str(), "password sign-in refused");
            state.auth.store.record_event_or_log(&refused_password(&name, why, Some(client.ip()))).await;
            again("wrong")
        }
        Err(err) => unavailable(err),
    }
}

/// A refused password sign-in: filed under the name given when it is one
/// an account could have, else under `unknown` with the text given, cut
/// short (it is whatever the form held).
fn refused_password(name: &str, why: Refusal, client: Option<std::net::IpAddr>) -> SecurityEvent {
    let valid = super::accounts::validate_name("user name", name).is_ok();
    let actor = Actor { name: if valid { name.to_string() } else { "unknown".into() }, method: SignIn::Password };
    let event = SecurityEvent::new(AuditKind::SignInRefused, &actor, client).refused(why);
    if valid { event } else { event.detail(format!("name given: {:?}", name.chars().take(64).collect::<String>())) }
}

#[derive(serde::Deserialize)]
struct LogoutForm {
    #[serde(default)]
    next: String,
}

/// Ends the session; the sign-in page then offers to come back to `next`
/// (checked like any other), when the form gives one. Signing out needs no
/// form at all: a body that is not one is no `next`.
async fn logout(
    State(state): State<SignInState>,
    principal: Option<axum::Extension<Principal>>,
    session: Session,
    form: Result<Form<LogoutForm>, FormRejection>,
) -> Response {
    let next = state.auth.settings.home.target(&form.map(|Form(form)| form.next).unwrap_or_default());
    let target = match next.as_str() {
        "/" => "/login?signed-out=1".to_string(),
        next => format!("/login?signed-out=1&next={}", url_escape(next)),
    };
    match state.auth.sign_out(&session).await {
        Ok(()) => {
            if let Some(axum::Extension(who)) = principal {
                let event = SecurityEvent::new(AuditKind::SignOut, &who.actor, who.client);
                state.auth.store.record_event_or_log(&event).await;
            }
            Redirect::to(&target).into_response()
        }
        Err(err) => unavailable(err),
    }
}

fn unavailable(err: ApiError) -> Response {
    super::pages::store_down(&err)
}

//! Who is asking, and may they: sign-in (local accounts, OpenID Connect, API
//! tokens), sessions shared through the store, each route's access declared
//! with it, and cross-site requests refused.
//!
//! Every request passes `guard`, after routing: it finds the access declared
//! for the route the request matched (`access`), learns the principal (a
//! bearer token, else the session) unless the route is open to all, refuses
//! a state-changing request that a session cookie authenticates unless it
//! comes from our own origin, and checks the principal's role against the
//! access. Handlers and server functions find the `Principal` in the
//! request's extensions.

pub mod access;
pub mod accounts;
pub mod client;
pub mod limits;
pub mod oidc;
pub mod pages;
pub mod redirect;
pub mod routes;
pub mod sessions;

use crate::model::{Access, Actor, AuditKind, Me, Permission, Refusal, Role, SecurityEvent, SignIn, url_escape};
use crate::server::auth::access::is_api;
use crate::server::error::ApiError;
use crate::server::store::error::{StoreError, Unavailable};
use crate::server::store::{Account, Store};
use access::{Lookup, RouteTable};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use redirect::Home;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tower_sessions::Session;

/// The session key holding who signed in.
const SIGNED_IN: &str = "signedIn";
/// A session's last-seen time is written back at most this often, so an
/// open dashboard keeps its session alive without a write per request.
const TOUCH_EVERY_SECS: i64 = 60;

/// Who is asking, and with what role (read from the account on every
/// request: a role change or a disabled account takes effect at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub actor: Actor,
    pub role: Role,
    /// Where the request came from (`client_address`), for the audit trail.
    pub client: Option<IpAddr>,
}

/// The client's address as every record of it is made: `ClientAddr`,
/// which believes a trusted proxy's `X-Forwarded-For` (see `client`).
pub fn client_address(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    client::ClientAddr::of(extensions).map(client::ClientAddr::ip)
}

impl Principal {
    pub fn me(&self) -> Me {
        Me { name: self.actor.name.clone(), role: self.role, method: self.actor.method }
    }

    /// Refuses what this role may not do, naming the role it needs.
    pub fn require(&self, permission: Permission) -> Result<(), ApiError> {
        if self.role.can(permission) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this needs the {} role; {} is {}",
                permission.least_role(),
                self.actor.name,
                self.role
            )))
        }
    }
}

/// Handlers take the principal the guard found; a route without one (which
/// its declared access does not let past the guard) answers 401.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or(ApiError::Unauthorized)
    }
}

/// What a session remembers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SignedIn {
    user: String,
    method: SignIn,
    /// `accounts::session_hash` when signing in: a new password ends it.
    hash: String,
    signed_in_at: i64,
    seen_at: i64,
}

#[derive(Clone, Debug)]
pub struct AuthSettings {
    pub idle: Duration,
    pub absolute: Duration,
    /// Host names this server answers to (DNS rebinding): lowercase, no port.
    pub allowed_hosts: Vec<String>,
    /// Cookies only over HTTPS: whenever the app is not plain-HTTP loopback.
    pub secure_cookies: bool,
    /// This site's origin: every redirect after signing in stays on it.
    pub home: Home,
}

#[derive(Clone)]
pub struct Auth {
    pub store: Arc<Store>,
    pub settings: Arc<AuthSettings>,
}

impl Auth {
    pub fn new(store: Arc<Store>, settings: AuthSettings) -> Self {
        Self { store, settings: Arc::new(settings) }
    }

    /// Starts a session for `account`: a new session id (no fixation), and
    /// what it needs to check the account on every request.
    pub async fn sign_in(&self, session: &Session, account: &Account, method: SignIn) -> Result<(), ApiError> {
        let now = chrono::Utc::now().timestamp();
        let signed_in = SignedIn {
            user: account.name.clone(),
            method,
            hash: accounts::session_hash(account),
            signed_in_at: now,
            seen_at: now,
        };
        session.cycle_id().await.map_err(session_error)?;
        session.insert(SIGNED_IN, signed_in).await.map_err(session_error)
    }

    /// Ends the session, in the store too: the old cookie is worth nothing.
    pub async fn sign_out(&self, session: &Session) -> Result<(), ApiError> {
        session.flush().await.map_err(session_error)
    }

    /// The principal a session cookie names, if it is still good: not past
    /// its absolute lifetime, the account there, enabled, and its password
    /// unchanged. (Reading the session costs a store call only when a
    /// cookie was sent.)
    pub async fn from_session(&self, session: &Session) -> Result<Option<Principal>, ApiError> {
        let Some(mut signed_in) = session.get::<SignedIn>(SIGNED_IN).await.map_err(session_error)? else {
            return Ok(None);
        };
        let now = chrono::Utc::now().timestamp();
        if now - signed_in.signed_in_at > self.settings.absolute.as_secs() as i64 {
            self.sign_out(session).await?;
            return Ok(None);
        }
        let account = self.store.get_account(&signed_in.user).await?;
        let Some(account) = account.filter(|a| !a.disabled && accounts::session_hash(a) == signed_in.hash) else {
            self.sign_out(session).await?;
            return Ok(None);
        };
        if now - signed_in.seen_at >= TOUCH_EVERY_SECS {
            signed_in.seen_at = now;
            session.insert(SIGNED_IN, signed_in.clone()).await.map_err(session_error)?;
        }
        let actor = Actor { name: account.name, method: signed_in.method };
        Ok(Some(Principal { actor, role: account.role, client: None }))
    }

    /// The principal an API token names if it is valid and not revoked,
    /// else the name it gave (when it has a token's shape) and why not.
    pub async fn from_token(&self, text: &str) -> Result<Result<Principal, (Option<String>, Refusal)>, ApiError> {
        let Some((name, secret)) = accounts::parse_token(text) else { return Ok(Err((None, Refusal::BadToken))) };
        let refused = |why| Ok(Err((Some(name.to_string()), why)));
        let Some(token) = self.store.get_token(name).await? else { return refused(Refusal::BadToken) };
        let presented = accounts::secret_hash(secret);
        if !constant_time_eq(presented.as_bytes(), token.secret_hash.as_bytes()) {
            return refused(Refusal::BadToken);
        }
        if token.revoked {
            return refused(Refusal::RevokedToken);
        }
        let actor = Actor { name: token.name, method: SignIn::Token };
        Ok(Ok(Principal { actor, role: token.role, client: None }))
    }

    /// The account a name and password sign in, else why not (the person
    /// is told only that the name or password is wrong; the trail says
    /// which).
    pub async fn check_password(&self, name: &str, password: String) -> Result<Result<Account, Refusal>, ApiError> {
        let account = match accounts::validate_name("user name", name) {
            // As the table has it now: a password changed a moment ago on
            // another instance is the one that signs in.
            Ok(()) => self.store.read_account(name).await?,
            Err(_) => None,
        };
        let hash = account.as_ref().and_then(|a| a.password_hash.clone());
        let matches = accounts::verify_password(password, hash).await;
        Ok(match account {
            None => Err(Refusal::UnknownAccount),
            Some(a) if a.password_hash.is_none() => Err(Refusal::NoPassword),
            Some(_) if !matches => Err(Refusal::WrongPassword),
            Some(a) if a.disabled => Err(Refusal::Disabled),
            Some(a) => Ok(a),
        })
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            // HTTP/1.0 without a Host, or HTTP/2 (whose :authority axum maps
            // to the URI): nothing a rebinding attack can name.
            return true;
        };
        let name = host_name(host);
        self.settings.allowed_hosts.iter().any(|allowed| allowed == &name)
    }
}

/// The host part of a `Host` header, lowercase, without the port.
fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    host.rsplit_once(':').map_or(host.clone(), |(name, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) { name.to_string() } else { host.clone() }
    })
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn session_error(err: tower_sessions::session::Error) -> ApiError {
    ApiError::Store(StoreError::unavailable(Unavailable::Unreachable, format!("session store: {err}")))
}

/// The name of the API token a request carries (read, not checked), for
/// the API's rate per token.
pub fn token_name(headers: &HeaderMap) -> Option<String> {
    accounts::parse_token(bearer(headers)?).map(|(name, _)| name.to_string())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A health probe: a load balancer's or orchestrator's, which names the
/// target by its address (an Application Load Balancer sends `Host:
/// <target IP>:<port>`, a container host 127.0.0.1). Their answers hold
/// nothing a rebinding page could use, so the host check spares them.
fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// A request that can change something: what a cross-site page must not
/// be able to send with our cookie.
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether a browser request comes from our own pages: its `Origin` names
/// the host it was sent to (and the scheme, when a trusted proxy said which
/// one the browser used: `http://` beside an `https://` console is another
/// origin), or (no `Origin`) `Sec-Fetch-Site` says so.
fn same_origin(headers: &HeaderMap, proto: Option<client::ForwardedProto>) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let Some((scheme, authority)) = origin.split_once("://") else { return false };
        if proto.is_some_and(|p| !scheme.eq_ignore_ascii_case(p.scheme())) {
            return false;
        }
        return host.is_some_and(|h| authority.eq_ignore_ascii_case(h));
    }
    matches!(headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()), Some("same-origin") | Some("none"))
}

/// What `guard` needs: who is asking, and who may reach each route.
#[derive(Clone)]
pub struct Gate {
    pub auth: Auth,
    pub routes: Arc<RouteTable>,
    /// Refused API tokens recorded in the audit trail per client address
    /// (`REFUSALS_RECORDED_PER_MINUTE`): a bearer token is read on every
    /// path, pages too, which the API rate limit does not cover, and a
    /// client must not choose how many records are written.
    pub refusals_recorded: crate::server::rate_limit::RateLimit,
}

/// Refused API tokens recorded per client address and minute; past it they
/// are logged only.
pub const REFUSALS_RECORDED_PER_MINUTE: u32 = 30;

/// Every request, once routed: host, the route's access, principal,
/// cross-site check, role.
pub async fn guard(State(gate): State<Gate>, session: Session, mut request: Request, next: Next) -> Response {
    let auth = &gate.auth;
    let path = request.uri().path().to_string();
    let api = is_api(&path);
    if !auth.host_allowed(request.headers()) && !is_probe(&path) {
        return refuse(api, StatusCode::MISDIRECTED_REQUEST, "this server does not answer to that host name");
    }
    let access = match request.extensions().get::<MatchedPath>().map(|m| m.as_str()) {
        Some(route) => match gate.routes.lookup(request.method(), route) {
            Lookup::Declared(access) => access,
            Lookup::WrongMethod(allowed) => return wrong_method(&allowed),
            Lookup::Undeclared => {
                tracing::error!(route, "a route with no declared access was asked for: refused to everyone");
                return refuse(api, StatusCode::FORBIDDEN, "this route declares no access: it is refused to everyone");
            }
        },
        // Static files are public by where they are; the rest is the 404 page.
        None if gate.routes.serves_file(request.method(), &path).await => Access::Open,
        None => Access::SignedIn,
    };
    // Probes and static files need no principal: they cost no store call,
    // and answer while the store is down.
    if access == Access::Open {
        return next.run(request).await;
    }
    let client = client_address(request.extensions());
    let token = bearer(request.headers()).map(str::to_string);
    let principal = match &token {
        Some(text) => match auth.from_token(text).await {
            Ok(Ok(principal)) => Some(principal),
            Ok(Err((name, why))) => {
                let actor = Actor { name: name.unwrap_or_else(|| "unknown".into()), method: SignIn::Token };
                if client.and_then(|ip| gate.refusals_recorded.check(ip)).is_none() {
                    let event = SecurityEvent::new(AuditKind::SignInRefused, &actor, client).refused(why);
                    auth.store.record_event_or_log(&event).await;
                } else {
                    tracing::info!(token = %actor.name, reason = why.as_str(), "API token refused (not recorded: over the client's rate)");
                }
                return ApiError::Unauthorized.into_response();
            }
            Err(err) => return unavailable(api, err),
        },
        None => match auth.from_session(&session).await {
            Ok(principal) => principal,
            Err(err) => return unavailable(api, err),
        },
    }
    .map(|principal| Principal { client, ..principal });
    // A token is sent on purpose by its holder; a cookie rides along with
    // any request the browser makes, another site's included. The sign-in
    // forms are checked too (no signing a victim into an attacker's account).
    let by_cookie = token.is_none() && (principal.is_some() || path.starts_with("/auth/"));
    let proto = request.extensions().get::<client::ForwardedProto>().copied();
    if by_cookie && changes_state(request.method()) && !same_origin(request.headers(), proto) {
        return refuse(api, StatusCode::FORBIDDEN, "cross-site request refused: send it from this site's own pages");
    }
    if !access.admits(principal.as_ref().map(|p| p.role)) {
        return match (&principal, access) {
            (None, _) if api => ApiError::Unauthorized.into_response(),
            (None, _) => sign_in_first(&auth.settings.home, &request),
            (Some(who), Access::Needs(permission)) => match who.require(permission) {
                Err(err) if api => err.into_response(),
                _ => pages::forbidden(who, permission),
            },
            (Some(_), _) => refuse(api, StatusCode::FORBIDDEN, "this route is not open to you"),
        };
    }
    if let Some(principal) = principal {
        request.extensions_mut().insert(principal);
    }
    next.run(request).await
}

/// A page asked for without a session: to the sign-in page, and back after
/// (to where the request was, read as the browser will read it).
fn sign_in_first(home: &Home, request: &Request) -> Response {
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let next: String = url_escape(&home.target(target));
    Redirect::to(&format!("/login?next={next}")).into_response()
}

/// A 405 naming the methods the route declares (a method declared for no
/// one reaches no handler).
fn wrong_method(allowed: &[Method]) -> Response {
    let allow = allowed.iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
    let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
    if let Ok(value) = HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

fn refuse(api: bool, status: StatusCode, message: &str) -> Response {
    if api {
        let body = serde_json::json!({ "error": message, "kind": crate::model::ErrorKind::Forbidden });
        (status, axum::Json(body)).into_response()
    } else {
        (status, pages::message_page("Refused", message)).into_response()
    }
}

fn unavailable(api: bool, err: ApiError) -> Response {
    if api { err.into_response() } else { pages::store_down(&err) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn same_origin_is_judged_by_origin_then_fetch_metadata() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:3000"), ("origin", "http://127.0.0.1:3000")]), None));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:3000"), ("origin", "http://evil.example")]), None));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:3000"), ("origin", "null")]), None));
        assert!(same_origin(&headers(&[("host", "x"), ("sec-fetch-site", "same-origin")]), None));
        assert!(!same_origin(&headers(&[("host", "x"), ("sec-fetch-site", "cross-site")]), None));
        assert!(!same_origin(&headers(&[("host", "x")]), None), "a cookie without either header is not trusted");
    }

    #[test]
    fn behind_a_trusted_proxy_the_origins_scheme_must_be_the_browsers() {
        use client::ForwardedProto::{Http, Https};
        let https = headers(&[("host", "ops.example.com"), ("origin", "https://ops.example.com")]);
        let http = headers(&[("host", "ops.example.com"), ("origin", "http://ops.example.com")]);
        assert!(same_origin(&https, Some(Https)));
        assert!(!same_origin(&http, Some(Https)), "a plain-HTTP page beside the HTTPS console");
        assert!(same_origin(&http, Some(Http)));
        assert!(same_origin(&http, None), "no proxy said: the host alone decides, as before");
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("127.0.0.1:3000"), "127.0.0.1");
        assert_eq!(host_name("LocalHost"), "localhost");
        assert_eq!(host_name("[::1]:3000"), "::1");
        assert_eq!(host_name("ops.example.com"), "ops.example.com");
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header() {
        assert_eq!(bearer(&headers(&[("authorization", "Bearer nwo.a.b")])), Some("nwo.a.b"));
        assert_eq!(bearer(&headers(&[("authorization", "bearer  nwo.a.b ")])), Some("nwo.a.b"));
        assert_eq!(bearer(&headers(&[("authorization", "Basic abc")])), None);
        assert_eq!(url_escape("/orders/o-1?x=1&y=2"), "/orders/o-1%3Fx%3D1%26y%3D2");
    }
}

//! The OpenID Connect client: the authorization-code flow with PKCE (S256)
//! and a nonce, against one provider found by discovery.
//!
//! `Oidc::begin` gives the provider URL to send the browser to and a
//! `PendingSignIn` to keep server-side (it holds the PKCE verifier: never
//! put it in a cookie or a URL) until the browser comes back to the redirect
//! URL; `Oidc::complete` checks that answer against it, redeems the code and
//! verifies the ID token, then maps the roles claim to a Northwind `Role`.
//! Sessions, cookies and routes are the caller's.

use crate::model::Role;
use crate::server::store::error::describe;
use chrono::Utc;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreClientAuthMethod, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJsonWebKeySet, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
    CoreResponseType, CoreRevocableToken, CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::url::{Host, Url};
use openidconnect::{
    AdditionalClaims, AuthType, AuthenticationFlow, AuthorizationCode, ClaimsVerificationError, Client, ClientId,
    ClientSecret, CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, IdToken,
    IdTokenClaims, IdTokenFields, IdTokenVerifier, IssuerUrl, JsonWebKeySetUrl, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, SignatureVerificationError, StandardErrorResponse, StandardTokenResponse,
    TokenResponse,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;
use subtle::ConstantTimeEq;

/// Where the provider sends the browser back to, under the public URL.
pub const CALLBACK_PATH: &str = "/auth/callback";
pub const DEFAULT_ROLES_CLAIM: &str = "groups";
pub const DEFAULT_ROLE_MAP: &str =
    "viewer=northwind-viewer,support=northwind-support,ops=northwind-ops,admin=northwind-admin";
pub const DEFAULT_SCOPES: &str = "openid profile email groups";

/// How long a sign-in may take from `begin` to `complete`: long enough to
/// type a password (and fetch a second factor), short enough that a leaked
/// pending sign-in soon stops being worth anything.
pub const PENDING_TTL_SECS: i64 = 600;
/// A pending sign-in "from the future" by more than this is refused too: the
/// clock went back, or the session store holds something we did not write.
const CLOCK_SKEW_SECS: i64 = 60;

/// Every call to the provider (discovery, keys, token) gives up after this:
/// a provider that hangs must not hold a sign-in request open forever.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What `Oidc::discover` needs; `config.rs` fills it from flags and the
/// environment.
#[derive(Clone)]
pub struct OidcSettings {
    /// The issuer exactly as the provider states it in its discovery
    /// document (a trailing slash matters).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    /// `<public URL>/auth/callback`, registered at the provider exactly.
    pub redirect_url: String,
    /// The ID token claim holding the user's groups.
    pub roles_claim: String,
    pub role_map: RoleMap,
    /// Scopes to ask for; `openid` is always asked for, listed or not.
    pub scopes: Vec<String>,
}

/// The secret stays out of logs.
impl fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("redirect_url", &self.redirect_url)
            .field("roles_claim", &self.roles_claim)
            .field("role_map", &self.role_map)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Splits a space-separated scope list (as OAuth writes it), dropping repeats.
pub fn parse_scopes(scopes: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for scope in scopes.split_whitespace() {
        if !out.iter().any(|s| s == scope) {
            out.push(scope.to_string());
        }
    }
    out
}

/// Which provider groups grant which role: `role=group` pairs, as in
/// `viewer=northwind-viewer,ops=northwind-ops,ops=oncall`. Several groups may
/// grant one role; a user in several mapped groups gets the highest role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMap(Vec<(Role, String)>);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoleMapError {
    #[error("the role map is empty: give at least one role=group pair")]
    Empty,
    #[error("role map entry {entry:?} is not role=group")]
    NotAPair { entry: String },
    #[error("role map entry {entry:?}: {reason}")]
    UnknownRole { entry: String, reason: String },
    #[error("role map entry {entry:?} names no group")]
    NoGroup { entry: String },
    /// One group granting two roles is a typo far more often than a wish.
    #[error("role map: group {group:?} is given both {first} and {second}")]
    Ambiguous { group: String, first: Role, second: Role },
}

impl RoleMap {
    pub fn entries(&self) -> &[(Role, String)] {
        &self.0
    }

    /// The highest role any of `groups` grants; `None` when none is mapped.
    /// Group names compare exactly (case included), as providers send them.
    pub fn role_for<'a>(&self, groups: impl IntoIterator<Item = &'a str>) -> Option<Role> {
        groups
            .into_iter()
            .filter_map(|group| self.0.iter().find(|(_, mapped)| mapped == group).map(|(role, _)| *role))
            .max()
    }
}

impl Default for RoleMap {
    fn default() -> Self {
        DEFAULT_ROLE_MAP.parse().expect("the default role map parses")
    }
}

impl FromStr for RoleMap {
    type Err = RoleMapError;

    /// Entries are separated by commas and trimmed; an empty entry (a
    /// trailing comma) is skipped. A group name may contain `=` (only the
    /// first one splits) but not `,`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut pairs: Vec<(Role, String)> = Vec::new();
        for entry in s.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
            let (role, group) = parse_entry(entry)?;
            match pairs.iter().find(|(_, mapped)| *mapped == group) {
                Some((first, _)) if *first != role => {
                    return Err(RoleMapError::Ambiguous { group, first: *first, second: role });
                }
                Some(_) => {} // the same pair twice: harmless
                None => pairs.push((role, group)),
            }
        }
        if pairs.is_empty() {
            return Err(RoleMapError::Empty);
        }
        Ok(RoleMap(pairs))
    }
}

fn parse_entry(entry: &str) -> Result<(Role, String), RoleMapError> {
    let (role, group) = entry.split_once('=').ok_or_else(|| RoleMapError::NotAPair { entry: entry.into() })?;
    let role = role.trim().parse().map_err(|reason| RoleMapError::UnknownRole { entry: entry.into(), reason })?;
    let group = group.trim();
    if group.is_empty() {
        return Err(RoleMapError::NoGroup { entry: entry.into() });
    }
    Ok((role, group.to_string()))
}

/// The form `FromStr` reads, so a map can be logged and read back.
impl fmt::Display for RoleMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (role, group)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{role}={group}")?;
        }
        Ok(())
    }
}

/// Why a sign-in (or setting up sign-in) failed. The messages are for the
/// log; `public_message` is what the user may be told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be discovered, or what it published is
    /// unusable (no token endpoint, no client authentication we speak).
    #[error("OpenID provider discovery failed: {0}")]
    Discovery(String),
    /// The `state` the browser came back with is not the one this session
    /// started: a forged or crossed callback (another tab, another session).
    #[error("the callback's state does not match the sign-in this session started")]
    StateMismatch,
    #[error("the sign-in was started more than {} minutes ago (or in the future)", PENDING_TTL_SECS / 60)]
    Expired,
    /// The token endpoint refused the code (used, expired, wrong verifier,
    /// wrong client secret) or could not be reached.
    #[error("the token endpoint did not redeem the code: {0}")]
    Exchange(String),
    /// The token response had no ID token, or it failed verification
    /// (signature, issuer, audience, expiry, nonce) or its claims are unusable.
    #[error("the ID token was refused: {0}")]
    IdToken(String),
    /// Our own settings are wrong.
    #[error("OpenID Connect is misconfigured: {0}")]
    Config(String),
}

impl OidcError {
    /// What the user can be told: what to do next, no internals.
    pub fn public_message(&self) -> &'static str {
        match self {
            OidcError::Discovery(_) => {
                "sign-in is unavailable: the identity provider cannot be reached; try again shortly"
            }
            OidcError::StateMismatch => "this sign-in does not belong to this browser session; please sign in again",
            OidcError::Expired => "the sign-in took too long; please sign in again",
            OidcError::Exchange(_) | OidcError::IdToken(_) => {
                "the identity provider's answer could not be verified; please sign in again"
            }
            OidcError::Config(_) => "sign-in is not set up correctly on this server; please tell an administrator",
        }
    }
}

/// What must be kept server-side between `begin` and `complete`. It is
/// serialisable for the session store; its fields stay private so that
/// nothing but `begin` makes one. It holds the PKCE verifier, a secret:
/// never send it to the browser, and take it out of the session before
/// calling `complete`, so that a callback can be answered only once.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSignIn {
    csrf: String,
    nonce: String,
    pkce_verifier: String,
    /// Unix seconds.
    created_at: i64,
}

impl PendingSignIn {
    /// When `begin` made it (Unix seconds): the session may drop it after
    /// `PENDING_TTL_SECS`.
    pub fn created_at(&self) -> i64 {
        self.created_at
    }
}

/// The secrets stay out of logs.
impl fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingSignIn").field("created_at", &self.created_at).finish_non_exhaustive()
    }
}

/// Who signed in, as the verified ID token says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OidcIdentity {
    /// `sub`: the provider's stable id for the user (unique per issuer).
    pub subject: String,
    /// `preferred_username`, else `name`, else `email`, else `sub`.
    pub display_name: String,
    /// As the provider states it, verified or not: for display, never for
    /// deciding anything.
    pub email: Option<String>,
    /// The highest role any of `groups` maps to; `None`: signed in, but no
    /// Northwind role.
    pub role: Option<Role>,
    /// Everything the roles claim held, mapped or not.
    pub groups: Vec<String>,
}

/// The claims beyond the standard ones (the roles claim among them), kept
/// whole: which claim holds the roles is a setting.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ExtraClaims {
    #[serde(flatten)]
    claims: HashMap<String, serde_json::Value>,
}

impl AdditionalClaims for ExtraClaims {}

type IdClaims = IdTokenClaims<ExtraClaims, CoreGenderClaim>;
type ProviderIdToken =
    IdToken<ExtraClaims, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;
type ProviderTokens = StandardTokenResponse<
    IdTokenFields<
        ExtraClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;
/// openidconnect's `CoreClient` with our claims, and with the endpoints the
/// flow needs known to be set (checked once, at discovery).
type ProviderClient = Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    ProviderTokens,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,      // authorization
    EndpointNotSet,   // device authorization
    EndpointNotSet,   // introspection
    EndpointNotSet,   // revocation
    EndpointSet,      // token
    EndpointMaybeSet, // userinfo
>;

/// A discovered provider and our client at it. Cheap to clone: share one.
#[derive(Clone)]
pub struct Oidc(Arc<Inner>);

struct Inner {
    client: ProviderClient,
    http: reqwest::Client,
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: ClientSecret,
    /// What the provider signs ID tokens with (its discovery document).
    signing_algs: Vec<CoreJwsSigningAlgorithm>,
    jwks_uri: JsonWebKeySetUrl,
    /// The provider's keys: read at discovery, read again when an ID token
    /// names a key we do not have (the provider rotated its keys).
    jwks: RwLock<CoreJsonWebKeySet>,
    scopes: Vec<Scope>,
    roles_claim: String,
    role_map: RoleMap,
}

impl fmt::Debug for Oidc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Oidc").field("issuer", &self.0.issuer.as_str()).field("client_id", &*self.0.client_id).finish()
    }
}

impl Oidc {
    /// Reads the provider's discovery document
    /// (`<issuer>/.well-known/openid-configuration`) and its keys, and sets
    /// up the client. The document's `issuer` must equal `settings.issuer`
    /// exactly.
    pub async fn discover(settings: OidcSettings) -> Result<Oidc, OidcError> {
        let issuer = IssuerUrl::new(settings.issuer.clone())
            .map_err(|e| OidcError::Config(format!("issuer {:?} is not a URL: {e}", settings.issuer)))?;
        require_secure("the issuer", issuer.url()).map_err(OidcError::Config)?;
        let redirect_url = RedirectUrl::new(settings.redirect_url.clone())
            .map_err(|e| OidcError::Config(format!("redirect URL {:?} is not a URL: {e}", settings.redirect_url)))?;
        if settings.client_id.trim().is_empty() {
            return Err(OidcError::Config("the client id is empty".into()));
        }
        if settings.client_secret.is_empty() {
            return Err(OidcError::Config("the client secret is empty".into()));
        }
        let http = http_client()?;

        let metadata = CoreProviderMetadata::discover_async(issuer.clone(), &http)
            .await
            .map_err(|e| OidcError::Discovery(format!("{}: {}", issuer.as_str(), describe(&e))))?;
        let token_url = metadata
            .token_endpoint()
            .cloned()
            .ok_or_else(|| OidcError::Discovery("the provider publishes no token endpoint".into()))?;
        require_secure("the token endpoint", token_url.url()).map_err(OidcError::Discovery)?;
        require_secure("the authorization endpoint", metadata.authorization_endpoint().url())
            .map_err(OidcError::Discovery)?;
        require_secure("the key set", metadata.jwks_uri().url()).map_err(OidcError::Discovery)?;
        let auth_type = auth_type(metadata.token_endpoint_auth_methods_supported())?;

        let client_id = ClientId::new(settings.client_id);
        let client_secret = ClientSecret::new(settings.client_secret);
        let inner = Inner {
            signing_algs: metadata.id_token_signing_alg_values_supported().clone(),
            jwks_uri: metadata.jwks_uri().clone(),
            jwks: RwLock::new(metadata.jwks().clone()),
            client: Client::from_provider_metadata(metadata, client_id.clone(), Some(client_secret.clone()))
                .set_token_uri(token_url)
                .set_redirect_uri(redirect_url)
                .set_auth_type(auth_type),
            http,
            issuer,
            client_id,
            client_secret,
            // openidconnect always asks for `openid`; listing it again would
            // send it twice.
            scopes: settings.scopes.into_iter().filter(|s| s != "openid").map(Scope::new).collect(),
            roles_claim: settings.roles_claim,
            role_map: settings.role_map,
        };
        Ok(Oidc(Arc::new(inner)))
    }

    /// The issuer, as discovered.
    pub fn issuer(&self) -> &str {
        self.0.issuer.as_str()
    }

    /// The provider URL to send the browser to, and what to keep in the
    /// server-side session until the callback. Each call is a new sign-in
    /// (fresh state, nonce and PKCE verifier).
    pub fn begin(&self) -> (Url, PendingSignIn) {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, csrf, nonce) = self
            .0
            .client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scopes(self.0.scopes.iter().cloned())
            .set_pkce_challenge(challenge)
            .url();
        let pending = PendingSignIn {
            csrf: csrf.into_secret(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.into_secret(),
            created_at: Utc::now().timestamp(),
        };
        (url, pending)
    }

    /// Completes the sign-in `pending` started, with the `code` and `state`
    /// the browser brought back: checks the state (constant time) and the
    /// age, redeems the code with the PKCE verifier, verifies the ID token
    /// (signature against the provider's keys, issuer, audience, expiry,
    /// nonce) and maps the roles claim.
    ///
    /// The callback's `error` parameter (e.g. `access_denied` when the user
    /// cancels) is the caller's to handle: there is no code to complete then.
    pub async fn complete(&self, pending: PendingSignIn, code: &str, state: &str) -> Result<OidcIdentity, OidcError> {
        check_state(&pending, state)?;
        check_age(pending.created_at, Utc::now().timestamp())?;
        let tokens = self.redeem(code, pending.pkce_verifier).await?;
        let id_token =
            tokens.id_token().ok_or_else(|| OidcError::IdToken("the token response has no ID token".into()))?;
        let claims = self.verify(id_token, &Nonce::new(pending.nonce)).await?;
        identity(&claims, &self.0.roles_claim, &self.0.role_map)
    }

    async fn redeem(&self, code: &str, pkce_verifier: String) -> Result<ProviderTokens, OidcError> {
        self.0
            .client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier))
            .request_async(&self.0.http)
            .await
            .map_err(|e| OidcError::Exchange(describe(&e)))
    }

    /// Verifies with the keys at hand; when the token names a key we do not
    /// have, the provider has rotated its keys since we read them, so they
    /// are read once more before giving up.
    async fn verify(&self, id_token: &ProviderIdToken, nonce: &Nonce) -> Result<IdClaims, OidcError> {
        let result = match self.verify_with_current_keys(id_token, nonce) {
            Err(ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey)) => {
                self.refresh_keys().await?;
                self.verify_with_current_keys(id_token, nonce)
            }
            other => other,
        };
        result.map_err(|e| OidcError::IdToken(describe(&e)))
    }

    fn verify_with_current_keys(
        &self,
        id_token: &ProviderIdToken,
        nonce: &Nonce,
    ) -> Result<IdClaims, ClaimsVerificationError> {
        let keys = self.0.jwks.read().unwrap_or_else(PoisonError::into_inner).clone();
        // As openidconnect's own `Client::id_token_verifier`, but with the
        // keys we keep fresh. The secret lets it check HS256 tokens, should
        // the provider sign with it; the algorithms are the provider's own.
        let verifier = IdTokenVerifier::new_confidential_client(
            self.0.client_id.clone(),
            self.0.client_secret.clone(),
            self.0.issuer.clone(),
            keys,
        )
        .set_allowed_algs(self.0.signing_algs.iter().cloned());
        id_token.claims(&verifier, nonce).cloned()
    }

    async fn refresh_keys(&self) -> Result<(), OidcError> {
        let keys = CoreJsonWebKeySet::fetch_async(&self.0.jwks_uri, &self.0.http)
            .await
            .map_err(|e| OidcError::IdToken(format!("reading the provider's keys again: {}", describe(&e))))?;
        *self.0.jwks.write().unwrap_or_else(PoisonError::into_inner) = keys;
        Ok(())
    }
}

/// The HTTP client for the provider. Redirects are not followed, as
/// openidconnect's documentation insists: a followed redirect would let
/// whoever controls a response send our requests (the client secret, the
/// code) anywhere.
fn http_client() -> Result<reqwest::Client, OidcError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(HTTP_CONNECT_TIMEOUT)
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|e| OidcError::Config(format!("cannot build the HTTP client: {}", describe(&e))))
}

/// Codes, tokens and keys travel over these URLs: plain http is accepted
/// only on this machine (the tests' provider, a provider in development),
/// where nobody can listen in or stand in between.
fn require_secure(what: &str, url: &Url) -> Result<(), String> {
    let loopback = match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!("{what} {url} must be https (plain http only on a loopback address)")),
    }
}

/// How we authenticate at the token endpoint: HTTP Basic unless the provider
/// says it does not take it. No list at all means Basic (OpenID Connect
/// Discovery 1.0, section 3).
fn auth_type(supported: Option<&Vec<CoreClientAuthMethod>>) -> Result<AuthType, OidcError> {
    let Some(methods) = supported else {
        return Ok(AuthType::BasicAuth);
    };
    if methods.contains(&CoreClientAuthMethod::ClientSecretBasic) {
        Ok(AuthType::BasicAuth)
    } else if methods.contains(&CoreClientAuthMethod::ClientSecretPost) {
        Ok(AuthType::RequestBody)
    } else {
        let offered: Vec<String> = methods.iter().map(|m| format!("{m:?}")).collect();
        Err(OidcError::Discovery(format!(
            "the token endpoint takes neither client_secret_basic nor client_secret_post (it offers {})",
            offered.join(", ")
        )))
    }
}

/// The callback must carry the state this session's sign-in was started
/// with. Compared in constant time: a comparison that stops at the first
/// differing byte tells whoever times it how much of a guess was right.
fn check_state(pending: &PendingSignIn, state: &str) -> Result<(), OidcError> {
    let matches = !pending.csrf.is_empty() && bool::from(pending.csrf.as_bytes().ct_eq(state.as_bytes()));
    if matches { Ok(()) } else { Err(OidcError::StateMismatch) }
}

fn check_age(created_at: i64, now: i64) -> Result<(), OidcError> {
    let age = now.saturating_sub(created_at);
    if (-CLOCK_SKEW_SECS..=PENDING_TTL_SECS).contains(&age) { Ok(()) } else { Err(OidcError::Expired) }
}

/// The identity in verified claims.
fn identity(claims: &IdClaims, roles_claim: &str, role_map: &RoleMap) -> Result<OidcIdentity, OidcError> {
    let groups = groups_in(&claims.additional_claims().claims, roles_claim)?;
    let subject = claims.subject().to_string();
    let email = claims.email().map(|email| email.to_string());
    let name = claims.name().and_then(|name| name.get(None).or_else(|| name.iter().next().map(|(_, n)| n)));
    let display_name = [claims.preferred_username().map(|u| u.as_str()), name.map(|n| n.as_str()), email.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|candidate| !candidate.is_empty())
        .unwrap_or(subject.as_str())
        .to_string();
    Ok(OidcIdentity {
        role: role_map.role_for(groups.iter().map(String::as_str)),
        subject,
        display_name,
        email,
        groups,
    })
}

/// The groups in the roles claim: an array of strings, or one string (some
/// providers send a lone group so). Absent or null: no groups. Anything
/// else is refused rather than read as "no groups", so that a provider
/// sending, say, objects is noticed in the log instead of locking everyone
/// out without a word.
fn groups_in(claims: &HashMap<String, serde_json::Value>, roles_claim: &str) -> Result<Vec<String>, OidcError> {
    use serde_json::Value;
    let unusable =
        || OidcError::IdToken(format!("the {roles_claim:?} claim is neither a string nor an array of strings"));
    match claims.get(roles_claim) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(group)) => Ok(vec![group.clone()]),
        Some(Value::Array(items)) => {
            items.iter().map(|item| item.as_str().map(str::to_string).ok_or_else(unusable)).collect()
        }
        Some(_) => Err(unusable()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(extra: serde_json::Value) -> IdClaims {
        let mut token = json!({
            "iss": "https://id.example.test",
            "aud": "northwind-ops",
            "exp": 4_102_444_800i64,
            "iat": 1_767_225_600i64,
            "sub": "u-123",
        });
        token.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(token).expect("valid ID token claims")
    }

    fn who(extra: serde_json::Value) -> Result<OidcIdentity, OidcError> {
        identity(&claims(extra), DEFAULT_ROLES_CLAIM, &RoleMap::default())
    }

    fn pending(csrf: &str, created_at: i64) -> PendingSignIn {
        PendingSignIn { csrf: csrf.into(), nonce: "n".into(), pkce_verifier: "v".into(), created_at }
    }

    #[test]
    fn the_default_role_map_maps_each_role_to_its_group() {
        let map = RoleMap::default();
        assert_eq!(
            map.entries(),
            &[
                (Role::Viewer, "northwind-viewer".to_string()),
                (Role::Support, "northwind-support".to_string()),
                (Role::Ops, "northwind-ops".to_string()),
                (Role::Admin, "northwind-admin".to_string()),
            ]
        );
        assert_eq!(map.to_string(), DEFAULT_ROLE_MAP);
        assert_eq!(map.to_string().parse::<RoleMap>(), Ok(map));
    }

    #[test]
    fn role_maps_take_several_groups_per_role_and_forgive_spaces_and_trailing_commas() {
        let map: RoleMap = " ops = oncall , ops=northwind-ops,viewer=a=b, ops=oncall,".parse().unwrap();
        assert_eq!(
            map.entries(),
            &[
                (Role::Ops, "oncall".to_string()),
                (Role::Ops, "northwind-ops".to_string()),
                (Role::Viewer, "a=b".to_string()),
            ]
        );
    }

    #[test]
    fn role_map_errors_name_the_bad_entry() {
        let err = |s: &str| s.parse::<RoleMap>().unwrap_err();
        assert_eq!(err(""), RoleMapError::Empty);
        assert_eq!(err(" , "), RoleMapError::Empty);
        assert_eq!(err("ops=a,northwind-ops"), RoleMapError::NotAPair { entry: "northwind-ops".into() });
        assert_eq!(err("ops="), RoleMapError::NoGroup { entry: "ops=".into() });
        assert!(matches!(err("Ops=a"), RoleMapError::UnknownRole { entry, .. } if entry == "Ops=a"));
        assert!(matches!(err("root=a"), RoleMapError::UnknownRole { entry, .. } if entry == "root=a"));
        assert_eq!(
            err("viewer=staff,admin=staff"),
            RoleMapError::Ambiguous { group: "staff".into(), first: Role::Viewer, second: Role::Admin }
        );
        let message = err("viewer=a,superuser=b").to_string();
        assert!(message.contains("\"superuser=b\"") && message.contains("viewer, support, ops or admin"), "{message}");
    }

    #[test]
    fn the_highest_mapped_role_wins_and_unknown_groups_grant_nothing() {
        let map = RoleMap::default();
        assert_eq!(map.role_for(["northwind-viewer", "northwind-admin", "northwind-ops"]), Some(Role::Admin));
        assert_eq!(map.role_for(["unrelated", "northwind-support"]), Some(Role::Support));
        assert_eq!(map.role_for(["unrelated", "Northwind-Ops"]), None);
        assert_eq!(map.role_for([]), None);
    }

    #[test]
    fn the_roles_claim_may_be_an_array_or_a_single_string() {
        let alice = who(json!({"groups": ["unrelated", "northwind-ops", "northwind-viewer"]})).unwrap();
        assert_eq!(alice.role, Some(Role::Ops));
        assert_eq!(alice.groups, ["unrelated", "northwind-ops", "northwind-viewer"]);
        let bob = who(json!({"groups": "northwind-viewer"})).unwrap();
        assert_eq!((bob.role, bob.groups), (Some(Role::Viewer), vec!["northwind-viewer".to_string()]));
    }

    #[test]
    fn a_missing_null_or_unmapped_roles_claim_means_no_role() {
        for extra in [json!({}), json!({"groups": null}), json!({"groups": []}), json!({"groups": ["unrelated"]})] {
            let user = who(extra.clone()).unwrap();
            assert_eq!(user.role, None, "{extra}");
        }
    }

    #[test]
    fn a_roles_claim_of_another_shape_is_refused() {
        for extra in [json!({"groups": 7}), json!({"groups": {"ops": true}}), json!({"groups": ["ops", 1]})] {
            assert!(matches!(who(extra.clone()), Err(OidcError::IdToken(m)) if m.contains("\"groups\"")), "{extra}");
        }
    }

    #[test]
    fn the_roles_claim_is_a_setting() {
        let token = claims(json!({"groups": ["northwind-admin"], "roles": ["northwind-support"]}));
        let user = identity(&token, "roles", &RoleMap::default()).unwrap();
        assert_eq!((user.role, user.groups), (Some(Role::Support), vec!["northwind-support".to_string()]));
    }

    #[test]
    fn the_display_name_falls_back_from_username_to_name_to_email_to_subject() {
        let full = json!({"preferred_username": "alice", "name": "Alice Ops", "email": "alice@example.test"});
        assert_eq!(who(full).unwrap().display_name, "alice");
        assert_eq!(who(json!({"name": "Alice Ops", "email": "a@example.test"})).unwrap().display_name, "Alice Ops");
        assert_eq!(
            who(json!({"preferred_username": " ", "email": "a@example.test"})).unwrap().display_name,
            "a@example.test"
        );
        let bare = who(json!({})).unwrap();
        assert_eq!((bare.display_name.as_str(), bare.email), ("u-123", None));
        assert_eq!(who(json!({"email": "a@example.test"})).unwrap().email.as_deref(), Some("a@example.test"));
    }

    #[test]
    fn the_state_must_match_exactly() {
        assert_eq!(check_state(&pending("abc", 0), "abc"), Ok(()));
        for wrong in ["abd", "ab", "abcd", ""] {
            assert_eq!(check_state(&pending("abc", 0), wrong), Err(OidcError::StateMismatch), "{wrong:?}");
        }
        assert_eq!(check_state(&pending("", 0), ""), Err(OidcError::StateMismatch));
    }

    #[test]
    fn a_pending_sign_in_lasts_ten_minutes() {
        let now = 1_767_225_600;
        assert_eq!(check_age(now, now), Ok(()));
        assert_eq!(check_age(now - PENDING_TTL_SECS, now), Ok(()));
        assert_eq!(check_age(now - PENDING_TTL_SECS - 1, now), Err(OidcError::Expired));
        assert_eq!(check_age(now + CLOCK_SKEW_SECS, now), Ok(()));
        assert_eq!(check_age(now + CLOCK_SKEW_SECS + 1, now), Err(OidcError::Expired));
        assert_eq!(check_age(i64::MIN, now), Err(OidcError::Expired));
        assert_eq!(check_age(i64::MAX, now), Err(OidcError::Expired));
    }

    #[test]
    fn a_pending_sign_in_round_trips_through_json_and_hides_its_secrets_from_debug() {
        let p = pending("state-1", 42);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<PendingSignIn>(&json).unwrap(), p);
        let debug = format!("{p:?}");
        assert!(!debug.contains("state-1") && debug.contains("42"), "{debug}");
    }

    #[test]
    fn settings_hide_the_client_secret_from_debug() {
        let settings = OidcSettings {
            issuer: "https://id.example.test".into(),
            client_id: "northwind-ops".into(),
            client_secret: "s3cret".into(),
            redirect_url: "https://ops.example.test/auth/callback".into(),
            roles_claim: DEFAULT_ROLES_CLAIM.into(),
            role_map: RoleMap::default(),
            scopes: parse_scopes(DEFAULT_SCOPES),
        };
        let debug = format!("{settings:?}");
        assert!(!debug.contains("s3cret") && debug.contains("northwind-ops"), "{debug}");
    }

    #[test]
    fn scopes_split_on_spaces_without_repeats() {
        assert_eq!(parse_scopes(" openid  profile\tgroups openid "), ["openid", "profile", "groups"]);
        assert!(parse_scopes("").is_empty());
    }

    #[test]
    fn plain_http_is_for_loopback_only() {
        let check = |u: &str| require_secure("the issuer", &Url::parse(u).unwrap());
        for ok in ["https://id.example.test", "http://127.0.0.1:9000", "http://[::1]:9000/x", "http://localhost:1"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in ["http://id.example.test", "http://10.0.0.1", "ftp://127.0.0.1"] {
            assert!(check(bad).unwrap_err().contains("must be https"), "{bad}");
        }
    }

    #[test]
    fn client_authentication_follows_what_the_provider_offers() {
        use CoreClientAuthMethod::{ClientSecretBasic, ClientSecretPost, PrivateKeyJwt};
        assert!(matches!(auth_type(None), Ok(AuthType::BasicAuth)));
        assert!(matches!(auth_type(Some(&vec![ClientSecretPost, ClientSecretBasic])), Ok(AuthType::BasicAuth)));
        assert!(matches!(auth_type(Some(&vec![ClientSecretPost])), Ok(AuthType::RequestBody)));
        assert!(matches!(auth_type(Some(&vec![PrivateKeyJwt])), Err(OidcError::Discovery(_))));
    }

    #[test]
    fn public_messages_say_nothing_of_internals() {
        let err = OidcError::Exchange("invalid_grant: grant request is invalid (http://127.0.0.1:9/token)".into());
        assert!(!err.public_message().contains("invalid_grant") && !err.public_message().contains("127.0.0.1"));
        assert!(err.to_string().contains("invalid_grant"));
    }
}

//! The OpenID Connect client against a real provider: panva's oidc-provider
//! (`end2end/oidc/provider.mjs`, see its README) on loopback, one per test,
//! stopped by its pid when the test ends, passed or failed. The test plays
//! the browser with reqwest: a cookie jar, redirects followed by hand, the
//! provider's login form posted, and the final redirect to the app caught
//! before it is sent (nothing listens at the redirect URL).
//!
//! The last test runs the app's own sign-in routes against the provider:
//! `/auth/oidc?next=...`, the provider's form, the app's callback, and where
//! the browser is sent at the end.
//!
//! Needs `node` and the end2end packages: `cd end2end && npm ci`.

use crate::common;
use common::procs::free_port;

use northwind_ops::model::Role;
use northwind_ops::server::auth::oidc::{
    DEFAULT_ROLES_CLAIM, DEFAULT_SCOPES, Oidc, OidcError, OidcIdentity, OidcSettings, PendingSignIn, RoleMap,
    parse_scopes,
};
use reqwest::StatusCode;
use reqwest::Url;
use reqwest::redirect::Policy;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const CLIENT_ID: &str = "northwind-ops";
const CLIENT_SECRET: &str = "northwind-test-secret";
/// Registered at the provider, never contacted: the browser's last redirect
/// is where the test takes over.
const REDIRECT_URL: &str = "http://127.0.0.1:9/auth/callback";

// ---------------------------------------------------------------------------
// The provider, as a child process.

/// The running provider; dropping it stops it.
struct Provider {
    child: Child,
    issuer: String,
    stderr: tempfile::NamedTempFile,
}

impl Provider {
    fn start() -> Provider {
        Provider::start_on(0)
    }

    fn start_on(port: u16) -> Provider {
        Provider::start_for(port, REDIRECT_URL)
    }

    /// On `port` (0: any free one), for a client that is sent back to
    /// `redirect_url`. Returns once the provider has printed the line saying
    /// where it listens.
    fn start_for(port: u16, redirect_url: &str) -> Provider {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert!(
            root.join("end2end/node_modules/oidc-provider").is_dir(),
            "the provider's packages are missing: run `cd end2end && npm ci`"
        );
        // stderr to a file: a pipe nobody reads could fill and stall the
        // provider; the file is shown when a test fails.
        let stderr = tempfile::NamedTempFile::new().expect("a temporary file");
        let child = Command::new("node")
            .arg(root.join("end2end/oidc/provider.mjs"))
            .env("OIDC_PORT", port.to_string())
            .env("OIDC_CLIENT_ID", CLIENT_ID)
            .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
            .env("OIDC_REDIRECT_URIS", redirect_url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().expect("the stderr file reopens"))
            .spawn()
            .expect("`node` runs");
        // From here on the guard owns the child: a failure below stops it.
        let mut provider = Provider { child, issuer: String::new(), stderr };
        let stdout = provider.child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        match line.trim_end().strip_prefix("oidc provider listening on ") {
            Some(issuer) => provider.issuer = issuer.to_string(),
            None => panic!("the provider did not start (stdout {line:?}); its stderr:\n{}", provider.stderr_text()),
        }
        provider
    }

    fn port(&self) -> u16 {
        Url::parse(&self.issuer).unwrap().port().expect("the issuer has a port")
    }

    fn stderr_text(&self) -> String {
        let mut text = String::new();
        let _ = self.stderr.reopen().and_then(|mut f| f.read_to_string(&mut text));
        text
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        // Child::kill signals the pid of the node process started above, and
        // only it; wait() reaps it.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- provider stderr ---\n{}", self.stderr_text());
        }
    }
}

fn settings(issuer: &str) -> OidcSettings {
    OidcSettings {
        issuer: issuer.to_string(),
        client_id: CLIENT_ID.into(),
        client_secret: CLIENT_SECRET.into(),
        redirect_url: REDIRECT_URL.into(),
        roles_claim: DEFAULT_ROLES_CLAIM.into(),
        role_map: RoleMap::default(),
        scopes: parse_scopes(DEFAULT_SCOPES),
    }
}

async fn discover(provider: &Provider) -> Oidc {
    Oidc::discover(settings(&provider.issuer)).await.expect("discovery succeeds")
}

// ---------------------------------------------------------------------------
// The browser.

/// Where the browser ended up: sent back to the app, or on a page of the
/// provider's.
#[derive(Debug)]
enum Landing {
    App(Url),
    Page { url: Url, status: StatusCode, html: String },
}

/// A browser of its own (cookie jar), following redirects by hand so that the
/// one to the app (to `.1`) is caught.
struct Browser(reqwest::Client, String);

impl Browser {
    fn new() -> Browser {
        Browser::back_to(REDIRECT_URL)
    }

    fn back_to(redirect_url: &str) -> Browser {
        let client = reqwest::Client::builder().cookie_store(true).redirect(Policy::none()).build().unwrap();
        Browser(client, redirect_url.to_string())
    }

    async fn go(&self, mut url: Url, mut form: Option<&[(&str, &str)]>) -> Landing {
        for _ in 0..15 {
            let request = match form.take() {
                Some(fields) => self.0.post(url.clone()).form(fields),
                None => self.0.get(url.clone()),
            };
            let response = request.header("accept", "text/html").send().await.expect("the provider answers");
            let status = response.status();
            if !status.is_redirection() {
                return Landing::Page { url, status, html: response.text().await.unwrap() };
            }
            let location = response.headers()["location"].to_str().unwrap().to_string();
            url = url.join(&location).expect("a valid Location");
            if url.as_str().starts_with(&self.1) {
                return Landing::App(url);
            }
        }
        panic!("more than 15 redirects");
    }

    /// Opens the authorization URL, fills in the login form and submits it.
    async fn sign_in(&self, authorization_url: Url, login: &str, password: &str) -> Landing {
        let (url, html) = match self.go(authorization_url, None).await {
            Landing::Page { url, status: StatusCode::OK, html } => (url, html),
            other => panic!("expected the login form, got {other:?}"),
        };
        assert!(html.contains(r#"name="login""#) && html.contains(r#"name="password""#), "{html}");
        let action = html
            .split_once(r#"<form method="post" action=""#)
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(action, _)| action)
            .expect("the login form has an action");
        self.go(url.join(action).unwrap(), Some(&[("login", login), ("password", password)])).await
    }
}

/// The `code` and `state` of the redirect to the app.
fn code_and_state(landing: &Landing) -> (String, String) {
    let Landing::App(url) = landing else { panic!("expected a redirect to the app, got {landing:?}") };
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    (param("code").expect("a code"), param("state").expect("a state"))
}

/// A whole sign-in in a fresh browser: begin, the provider's form, complete.
async fn sign_in(oidc: &Oidc, login: &str) -> Result<OidcIdentity, OidcError> {
    let (url, pending) = oidc.begin();
    let landing = Browser::new().sign_in(url, login, &format!("password-{login}")).await;
    let (code, state) = code_and_state(&landing);
    oidc.complete(pending, &code, &state).await
}

/// `pending` as the session store holds it, with one field replaced: what a
/// confused or tampered store would hand back.
fn with_field(pending: &PendingSignIn, field: &str, value: serde_json::Value) -> PendingSignIn {
    let mut json = serde_json::to_value(pending).unwrap();
    json[field] = value;
    serde_json::from_value(json).unwrap()
}

// ---------------------------------------------------------------------------
// The tests.

#[tokio::test]
async fn users_sign_in_with_the_role_their_groups_map_to() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    assert_eq!(oidc.issuer(), provider.issuer);

    let alice = sign_in(&oidc, "alice").await.expect("alice signs in");
    assert_eq!(
        alice,
        OidcIdentity {
            subject: "alice".into(),
            // preferred_username, which this provider sets to the login
            display_name: "alice".into(),
            email: Some("alice@example.test".into()),
            role: Some(Role::Ops),
            groups: vec!["northwind-ops".into()],
        }
    );

    let bob = sign_in(&oidc, "bob").await.expect("bob signs in");
    assert_eq!((bob.subject.as_str(), bob.role), ("bob", Some(Role::Viewer)));

    // Signed in, but in no mapped group: no role, and no email either.
    let carol = sign_in(&oidc, "carol").await.expect("carol signs in");
    assert_eq!((carol.subject.as_str(), carol.role, carol.email), ("carol", None, None));
    assert_eq!(carol.groups, ["unrelated"]);
}

#[tokio::test]
async fn the_authorization_url_asks_for_a_code_with_pkce_a_nonce_and_the_scopes() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    let (url, _) = oidc.begin();
    assert!(url.as_str().starts_with(&format!("{}/", provider.issuer)), "{url}");
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    assert_eq!(param("response_type").as_deref(), Some("code"));
    assert_eq!(param("client_id").as_deref(), Some(CLIENT_ID));
    assert_eq!(param("redirect_uri").as_deref(), Some(REDIRECT_URL));
    assert_eq!(param("code_challenge_method").as_deref(), Some("S256"));
    assert!(param("code_challenge").is_some() && param("nonce").is_some() && param("state").is_some());
    // openid once, though the settings list it too.
    assert_eq!(param("scope").as_deref(), Some("openid profile email groups"));

    // Every begin is a sign-in of its own.
    let (other, _) = oidc.begin();
    let state_of = |u: &Url| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned());
    assert_ne!(state_of(&url), state_of(&other));
}

#[tokio::test]
async fn a_wrong_password_never_yields_a_code() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    for (login, password) in [("alice", "password-bob"), ("alice", ""), ("mallory", "password-mallory")] {
        let (url, _) = oidc.begin();
        match Browser::new().sign_in(url, login, password).await {
            Landing::Page { status, html, .. } => {
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{login}/{password}");
                assert!(html.contains(r#"id="login-error""#), "{html}");
            }
            Landing::App(url) => panic!("{login}/{password:?} reached the app: {url}"),
        }
    }
}

#[tokio::test]
async fn a_tampered_state_is_refused_before_the_code_is_spent() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    let (url, pending) = oidc.begin();
    let (code, state) = code_and_state(&Browser::new().sign_in(url, "alice", "password-alice").await);

    for tampered in [format!("{state}x"), state[1..].to_string(), String::new()] {
        let err = oidc.complete(pending.clone(), &code, &tampered).await.unwrap_err();
        assert_eq!(err, OidcError::StateMismatch);
    }
    // The refusals never reached the token endpoint: the code still works.
    let alice = oidc.complete(pending, &code, &state).await.expect("the genuine callback completes");
    assert_eq!(alice.subject, "alice");
}

#[tokio::test]
async fn a_replayed_code_is_refused() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    let (url, pending) = oidc.begin();
    let (code, state) = code_and_state(&Browser::new().sign_in(url, "bob", "password-bob").await);
    oidc.complete(pending.clone(), &code, &state).await.expect("the first use completes");
    let err = oidc.complete(pending, &code, &state).await.unwrap_err();
    assert!(matches!(&err, OidcError::Exchange(m) if m.contains("invalid_grant")), "{err}");
}

#[tokio::test]
async fn another_sign_ins_pending_state_verifier_or_nonce_does_not_complete() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;

    // Another begin's pending sign-in: its state differs.
    let (url, _own) = oidc.begin();
    let (_, other) = oidc.begin();
    let (code, state) = code_and_state(&Browser::new().sign_in(url, "alice", "password-alice").await);
    assert_eq!(oidc.complete(other.clone(), &code, &state).await.unwrap_err(), OidcError::StateMismatch);

    // Its state forged to match: the PKCE verifier is still the other's, and
    // the provider will not redeem the code for it.
    let forged = with_field(&other, "csrf", serde_json::json!(state));
    let err = oidc.complete(forged, &code, &state).await.unwrap_err();
    assert!(matches!(&err, OidcError::Exchange(m) if m.contains("invalid_grant")), "{err}");

    // The right state and verifier with the other's nonce: the code is
    // redeemed, but the ID token is refused.
    let (url, pending2) = oidc.begin();
    let (code2, state2) = code_and_state(&Browser::new().sign_in(url, "alice", "password-alice").await);
    let wrong_nonce = with_field(&pending2, "nonce", serde_json::to_value(&other).unwrap()["nonce"].clone());
    let err = oidc.complete(wrong_nonce, &code2, &state2).await.unwrap_err();
    assert!(matches!(&err, OidcError::IdToken(m) if m.contains("nonce")), "{err}");
}

#[tokio::test]
async fn a_pending_sign_in_older_than_ten_minutes_is_refused() {
    let provider = Provider::start();
    let oidc = discover(&provider).await;
    let (url, pending) = oidc.begin();
    let (code, state) = code_and_state(&Browser::new().sign_in(url, "alice", "password-alice").await);
    let stale = with_field(&pending, "created_at", serde_json::json!(pending.created_at() - 601));
    assert_eq!(oidc.complete(stale, &code, &state).await.unwrap_err(), OidcError::Expired);
    let fresh = with_field(&pending, "created_at", serde_json::json!(pending.created_at() - 590));
    assert_eq!(oidc.complete(fresh, &code, &state).await.expect("within ten minutes").subject, "alice");
}

#[tokio::test]
async fn a_wrong_client_secret_is_refused_at_the_token_endpoint() {
    let provider = Provider::start();
    let oidc = Oidc::discover(OidcSettings { client_secret: "not-the-secret".into(), ..settings(&provider.issuer) })
        .await
        .expect("discovery needs no secret");
    let (url, pending) = oidc.begin();
    let (code, state) = code_and_state(&Browser::new().sign_in(url, "alice", "password-alice").await);
    let err = oidc.complete(pending, &code, &state).await.unwrap_err();
    assert!(matches!(&err, OidcError::Exchange(m) if m.contains("invalid_client")), "{err}");
}

#[tokio::test]
async fn keys_the_provider_rotated_since_discovery_are_read_again() {
    let first = Provider::start();
    let port = first.port();
    let oidc = discover(&first).await;
    // The same issuer, restarted: a new signing key under a new key id.
    drop(first);
    let second = Provider::start_on(port);
    assert_eq!(oidc.issuer(), second.issuer);
    let alice = sign_in(&oidc, "alice").await.expect("the new key is fetched and verifies");
    assert_eq!(alice.role, Some(Role::Ops));
}

#[tokio::test]
async fn discovery_needs_the_issuer_exactly_and_a_provider_that_answers() {
    let provider = Provider::start();
    // The provider's issuer has no trailing slash; one that has is another
    // issuer, and the discovery document says so.
    let err = Oidc::discover(settings(&format!("{}/", provider.issuer))).await.unwrap_err();
    assert!(matches!(&err, OidcError::Discovery(m) if m.contains("unexpected issuer")), "{err}");
    drop(provider);

    let err = Oidc::discover(settings("http://127.0.0.1:9")).await.unwrap_err();
    assert!(matches!(err, OidcError::Discovery(_)), "{err}");
    let err = Oidc::discover(settings("http://id.example.test")).await.unwrap_err();
    assert!(matches!(&err, OidcError::Config(m) if m.contains("must be https")), "{err}");
    let err = Oidc::discover(OidcSettings { client_secret: String::new(), ..settings("https://id.example.test") })
        .await
        .unwrap_err();
    assert!(matches!(err, OidcError::Config(_)), "{err}");
}

/// A port free now, for a process started a moment later.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_single_sign_on_the_browser_stays_on_this_site() {
    // The app names the provider, and the provider the app's callback: the
    // provider's port is chosen first.
    let port = free_port();
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), CLIENT_SECRET).unwrap();
    let issuer = format!("http://127.0.0.1:{port}");
    let secret_path = secret.path().display().to_string();
    let flags = ["--oidc-issuer", &issuer, "--oidc-client-id", CLIENT_ID, "--oidc-client-secret-file", &secret_path];
    let app = common::TestApp::spawn_with(common::Engine::Dynoxide, &[], &flags).await;
    let callback = format!("{}/auth/callback", app.base);
    let _provider = Provider::start_for(port, &callback);
    let base = Url::parse(&app.base).unwrap();

    // `next` as the browser's query carries it: encoded (the server reads a
    // tab, a line break), and as the issue was found, raw in the URL.
    let encoded = |next: &str| url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>();
    let mut cases: Vec<(String, Option<&str>)> = [
        "/\t/evil.example",
        "\t//evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "//evil.example",
        "/\\/evil.example",
        "https:evil.example",
        "https://evil.example/",
        "javascript:alert(document.domain)",
    ]
    .iter()
    .map(|next| (encoded(next), None))
    .collect();
    cases.push(("/%09/evil.example".into(), None));
    cases.push(("/%0d%0a/evil.example".into(), None));
    cases.push((encoded("/orders/o-1?x=1&y=2"), Some("/orders/o-1?x=1&y=2")));

    for (query, kept) in cases {
        let what = format!("/auth/oidc?next={query}");
        let browser = Browser::back_to(&callback);
        let begin = browser.0.get(format!("{}/auth/oidc?next={query}", app.base)).send().await.unwrap();
        assert_eq!(begin.status(), StatusCode::SEE_OTHER, "{what}");
        let to_provider = Url::parse(begin.headers()["location"].to_str().unwrap()).unwrap();
        assert!(to_provider.as_str().starts_with(&issuer), "{what}: {to_provider}");
        let Landing::App(back) = browser.sign_in(to_provider, "alice", "password-alice").await else {
            panic!("{what}: the provider did not send the browser back");
        };
        let done = browser.0.get(back).send().await.unwrap();
        assert_eq!(done.status(), StatusCode::SEE_OTHER, "{what}");
        let location = done.headers()["location"].to_str().unwrap().to_string();
        let landed = base.join(&location).unwrap();
        assert_eq!(landed.origin(), base.origin(), "{what}: Location {location:?} takes the browser to {landed}");
        if let Some(kept) = kept {
            assert_eq!(location, kept, "{what}: an honest target is kept");
        }
        // Signed in, as the provider said.
        let me = browser.0.get(format!("{}/api/me", app.base)).send().await.unwrap();
        assert_eq!(me.status(), StatusCode::OK, "{what}");
    }

    // Carol's groups map to no role: refused, and the trail says why.
    let browser = Browser::back_to(&callback);
    let begin = browser.0.get(format!("{}/auth/oidc", app.base)).send().await.unwrap();
    let to_provider = Url::parse(begin.headers()["location"].to_str().unwrap()).unwrap();
    let Landing::App(back) = browser.sign_in(to_provider, "carol", "password-carol").await else {
        panic!("the provider did not send carol back");
    };
    let refused = browser.0.get(back).send().await.unwrap();
    assert_eq!(refused.headers()["location"], "/login?error=no-role");

    // Each sign-in in the audit trail: through the provider, from the
    // browser's address; carol's refusal with its reason.
    let (status, page) = app.get("/api/audit?kind=sign-in&limit=100").await;
    assert_eq!(status, 200, "{page}");
    let sign_ins = page["entries"].as_array().unwrap();
    assert_eq!(sign_ins.len(), 12, "{page}");
    for record in sign_ins {
        assert_eq!(
            (&record["actor"], &record["method"]),
            (&serde_json::json!("oidc.alice"), &serde_json::json!("oidc")),
            "{record}"
        );
        assert_eq!(record["client"], "127.0.0.1", "{record}");
    }
    // Alice's account was added at her first sign-in, by the provider.
    let (_, page) = app.get("/api/audit?kind=account-added").await;
    let added = page["entries"].as_array().unwrap();
    assert_eq!(added.len(), 1, "{page}");
    assert_eq!(
        (&added[0]["subject"], &added[0]["method"]),
        (&serde_json::json!("oidc.alice"), &serde_json::json!("oidc"))
    );
    let (_, page) = app.get("/api/audit?kind=sign-in-refused").await;
    let refusals = page["entries"].as_array().unwrap();
    assert_eq!(refusals.len(), 1, "{page}");
    assert_eq!(
        (&refusals[0]["actor"], &refusals[0]["refused"]),
        (&serde_json::json!("oidc.carol"), &serde_json::json!("no-role"))
    );
    app.stop().await;
}

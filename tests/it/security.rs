//! The security audit: every security event kind in the trail after the
//! action that makes it, with its actor and client address; the trail
//! append-only (a put over a record fails) and kept for the retention set;
//! the kind filter and its pages; records read whatever they hold; and the
//! trail for admins only.

use crate::common;

use common::counters::{consumer, damage, drain};
use common::{Engine, TestApp, endpoint_of, engines, new_order_json};
use northwind_ops::model::{Actor, AuditKind, Refusal, Role, SecurityEvent, SignIn};
use northwind_ops::server::store::error::StoreError;
use northwind_ops::server::store::keys;
use northwind_ops::server::stream::reconcile::{ReconcileOptions, Reconciler};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_northwind-ops");

/// Runs the command line on the app's tables, `stdin` on its standard input.
fn cli(app: &TestApp, args: &[&str], stdin: &[u8]) {
    use std::io::Write;
    let endpoint = endpoint_of(&app.engine, app.embedded.as_ref());
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["--store", "endpoint", "--endpoint-url", &endpoint])
        .args(["--orders-table", &app.config.orders_table, "--metrics-table", &app.config.metrics_table])
        .args(args)
        .env("NORTHWIND_LOG", "error")
        .env("NORTHWIND_CURSOR_SECRET", common::CURSOR_SECRET)
        .env("NORTHWIND_DATA_DIR", dir.path())
        .env("USER", "operator")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(!stderr.contains("audit record could not be written"), "{args:?}: {stderr}");
}

/// Every record of `query` (a day's by default), following `next`.
async fn trail(app: &TestApp, query: &str) -> Vec<Value> {
    let (mut all, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/audit?{query}&cursor={c}"),
            None => format!("/api/audit?{query}"),
        };
        let (status, page) = app.get(&path).await;
        assert_eq!(status, 200, "{path}: {page}");
        all.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return all,
        }
    }
}

/// A client that keeps no cookies and follows no redirects.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Signs in through the form: the session cookie, if one was set.
async fn sign_in(app: &TestApp, name: &str, password: &str) -> Option<String> {
    let response = browser()
        .post(format!("{}/auth/login", app.base))
        .header("origin", app.base.clone())
        .form(&[("name", name), ("password", password)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_string())
        .find(|c| c.starts_with("nwo_session="))
}

fn sale_plan(name: &str, peak: u32) -> Value {
    let start = format!("{}T09:00:00Z", chrono::Utc::now().date_naive() + chrono::Duration::days(2));
    json!({"name": name, "peakOrdersPerSecond": peak, "start": start, "rampMinutes": 5, "holdMinutes": 10, "decayMinutes": 5})
}

/// Makes one event of every kind, each the way a person would: the command
/// line, the sign-in form, the API; and a reconciliation's repair.
async fn make_every_kind(app: &TestApp) {
    let admin = &app.http;
    // The consumer mode switched by an admin, over the API.
    let switched =
        admin.put(format!("{}/api/consumer/mode", app.base)).json(&json!({"mode": "lambda"})).send().await.unwrap();
    assert_eq!(switched.status(), 200, "{:?}", switched.text().await);
    // The command line: accounts, a role, a password, a token, shard counts.
    cli(app, &["user", "add", "alice", "--role", "ops"], b"alice's long password\n");
    cli(app, &["user", "add", "bob", "--role", "viewer"], b"bob's long password\n");
    cli(app, &["user", "set-role", "alice", "admin"], b"");
    cli(app, &["user", "set-password", "alice"], b"alice's new long password\n");
    cli(app, &["user", "disable", "bob"], b"");
    cli(app, &["user", "enable", "bob"], b"");
    cli(app, &["token", "create", "--name", "cli-made", "--role", "viewer"], b"");
    cli(app, &["token", "revoke", "cli-made"], b"");
    // A day nothing else writes the count of (serve writes today's and
    // tomorrow's).
    let yesterday = (chrono::Utc::now().date_naive() - chrono::Duration::days(1)).to_string();
    cli(app, &["shards", "--day", &yesterday, "--days", "1", "--write-ahead"], b"");

    // Sign-ins: good, a wrong password, a name nobody has; a sign-out.
    let cookie = sign_in(app, "alice", "alice's new long password").await.expect("alice signs in");
    assert!(sign_in(app, "alice", "not her password at all").await.is_none());
    assert!(sign_in(app, "nobody", "whatever password this is").await.is_none());
    let out = browser()
        .post(format!("{}/auth/logout", app.base))
        .header("origin", app.base.clone())
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);

    // The API, as the admin's token: a token made, used once revoked, and a
    // made-up one; an account disabled.
    let (status, made) = app.post("/api/admin/tokens", json!({"name": "api-made", "role": "viewer"})).await;
    assert_eq!(status, 201, "{made}");
    let revoked = admin.delete(format!("{}/api/admin/tokens/api-made", app.base)).send().await.unwrap();
    assert_eq!(revoked.status(), StatusCode::OK);
    let text = made["token"].as_str().unwrap();
    let with_revoked = common::client_with_token(Some(text)).get(format!("{}/api/me", app.base)).send().await;
    assert_eq!(with_revoked.unwrap().status(), StatusCode::UNAUTHORIZED);
    let made_up = format!("nwo.made-up.{}", "x".repeat(43));
    let with_made_up = common::client_with_token(Some(&made_up)).get(format!("{}/api/me", app.base)).send().await;
    assert_eq!(with_made_up.unwrap().status(), StatusCode::UNAUTHORIZED);
    let (status, body) = app.post("/api/admin/users/bob/disable", json!({})).await;
    assert_eq!(status, 200, "{body}");

    // Sale plans: made, changed, its shard counts written, rehearsed, deleted.
    let (status, body) = app.post("/api/sales", sale_plan("audited", 50)).await;
    assert_eq!(status, 201, "{body}");
    let changed = admin.put(format!("{}/api/sales/audited", app.base)).json(&sale_plan("audited", 60)).send().await;
    assert_eq!(changed.unwrap().status(), StatusCode::OK);
    let (status, body) = app.post("/api/sales/audited/shards", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app.post("/api/sales/audited/rehearsal", json!({})).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = app.post("/api/sales", sale_plan("short-lived", 10)).await;
    assert_eq!(status, 201, "{body}");
    let deleted = admin.delete(format!("{}/api/sales/short-lived", app.base)).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);

    // A reconciliation that repairs a damaged counter.
    let day = chrono::Utc::now().date_naive();
    let (status, _) = app.post("/api/orders", new_order_json("sec-1", "c-sec")).await;
    assert_eq!(status, 201);
    drain(&consumer(&app.store, "security-test", 15_000)).await;
    damage(app, keys::metric_pending_key(day), &[("pending", 3), ("shard0", 3)]).await;
    let mut options = ReconcileOptions::new("security-test");
    options.grace = Duration::from_millis(150);
    let fixed = Reconciler::new(app.store.clone(), options).pending(day, true).await.unwrap();
    assert!(fixed.repaired, "{fixed:?}");
}

/// The first record of `kind` that `matches`, else a failure listing the kinds seen.
fn find(records: &[Value], kind: AuditKind, matches: impl Fn(&Value) -> bool) -> &Value {
    records.iter().find(|r| r["kind"] == kind.as_str() && matches(r)).unwrap_or_else(|| {
        let seen: Vec<String> =
            records.iter().map(|r| format!("{} {} {}", r["kind"], r["actor"], r["subject"])).collect();
        panic!("no {kind} record as wanted among {seen:#?}")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_security_event_kind_is_in_the_trail_with_its_actor_and_client() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        make_every_kind(&app).await;
        let records = trail(&app, "kind=security&limit=7").await;
        println!("{engine:?}: {} security records", records.len());
        let by_cli = |subject: &'static str| move |r: &Value| r["actor"] == "cli" && r["subject"] == subject;
        let over_http = |actor: &'static str| move |r: &Value| r["actor"] == actor && r["client"] == "127.0.0.1";

        // The command line: by `cli`, from no address, the OS user named.
        for (kind, subject) in [
            (AuditKind::AccountAdded, "alice"),
            (AuditKind::AccountRoleChanged, "alice"),
            (AuditKind::PasswordChanged, "alice"),
            (AuditKind::AccountDisabled, "bob"),
            (AuditKind::AccountEnabled, "bob"),
            (AuditKind::TokenCreated, "cli-made"),
            (AuditKind::TokenRevoked, "cli-made"),
            (AuditKind::ShardsWritten, "shards --write-ahead"),
        ] {
            let record = find(&records, kind, by_cli(subject));
            assert_eq!(record["method"], "cli", "{engine:?}: {record}");
            assert!(record.get("client").is_none(), "{engine:?}: {record}");
            assert!(record["detail"].as_str().unwrap().contains("os user operator"), "{engine:?}: {record}");
        }
        assert!(
            find(&records, AuditKind::AccountRoleChanged, by_cli("alice"))["detail"]
                .as_str()
                .unwrap()
                .contains("role admin")
        );

        // Signing in and out, from the client's address.
        let signed_in = find(&records, AuditKind::SignIn, over_http("alice"));
        assert_eq!(signed_in["method"], "password", "{engine:?}: {signed_in}");
        let wrong = find(&records, AuditKind::SignInRefused, over_http("alice"));
        assert_eq!((&wrong["method"], &wrong["refused"]), (&json!("password"), &json!("wrong-password")));
        let nobody = find(&records, AuditKind::SignInRefused, over_http("nobody"));
        assert_eq!(nobody["refused"], "unknown-account", "{engine:?}: {nobody}");
        assert_eq!(find(&records, AuditKind::SignOut, over_http("alice"))["method"], "password");
        let revoked = find(&records, AuditKind::SignInRefused, over_http("api-made"));
        assert_eq!((&revoked["method"], &revoked["refused"]), (&json!("token"), &json!("revoked-token")));
        let made_up = find(&records, AuditKind::SignInRefused, over_http("made-up"));
        assert_eq!(made_up["refused"], "bad-token", "{engine:?}: {made_up}");

        // The API: by the admin's token, from the client's address.
        let by_admin = |subject: &'static str| {
            move |r: &Value| r["actor"] == "test-admin" && r["client"] == "127.0.0.1" && r["subject"] == subject
        };
        for (kind, subject) in [
            (AuditKind::TokenCreated, "api-made"),
            (AuditKind::TokenRevoked, "api-made"),
            (AuditKind::AccountDisabled, "bob"),
            (AuditKind::SalePlanCreated, "audited"),
            (AuditKind::SalePlanChanged, "audited"),
            (AuditKind::ShardsWritten, "audited"),
            (AuditKind::RehearsalStarted, "audited"),
            (AuditKind::SalePlanDeleted, "short-lived"),
        ] {
            assert_eq!(find(&records, kind, by_admin(subject))["method"], "token", "{engine:?}: {kind}");
        }
        assert!(
            find(&records, AuditKind::SalePlanChanged, by_admin("audited"))["detail"]
                .as_str()
                .unwrap()
                .contains("peak 60/s")
        );

        let switched = find(&records, AuditKind::ConsumerModeChanged, by_admin("lambda"));
        assert!(switched["detail"].as_str().unwrap().contains("to lambda"), "{engine:?}: {switched}");

        // The repair, with the changes it made.
        let repair = find(&records, AuditKind::ReconciliationRepair, |r| r["actor"] == "reconcile");
        let detail = repair["detail"].as_str().unwrap();
        let (pk, sk) = keys::metric_pending_key(chrono::Utc::now().date_naive());
        assert!(detail.contains(&format!("{pk} {sk} pending -3")), "{engine:?}: {detail}");
        assert!(detail.contains("by security-test"), "{engine:?}: {detail}");

        // Every kind but order changes is there; none is an order change.
        for kind in AuditKind::ALL.into_iter().filter(|k| *k != AuditKind::OrderChange) {
            find(&records, kind, |_| true);
        }
        assert!(records.iter().all(|r| r["kind"] != "order-change"));
        // Each actor's view has its own: alice's sign-in, out and refusal.
        let alices = trail(&app, "actor=alice&kind=security").await;
        let kinds: Vec<&str> = alices.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["sign-out", "sign-in-refused", "sign-in"], "{engine:?}: newest first");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_over_an_audit_record_fails_and_leaves_the_first() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let actor = Actor { name: "mallory".into(), method: SignIn::Password };
        let first = SecurityEvent::new(AuditKind::SignInRefused, &actor, None).refused(Refusal::WrongPassword);
        app.store.record_event_as(&first, "fixed-id").await.unwrap();
        // The same time and id: the same keys, another content.
        let over = SecurityEvent { kind: AuditKind::SignIn, refused: None, ..first.clone() };
        let err = app.store.record_event_as(&over, "fixed-id").await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{engine:?}: {err:?}");
        let mine = trail(&app, "actor=mallory").await;
        assert_eq!(mine.len(), 1, "{engine:?}: {mine:?}");
        assert_eq!((&mine[0]["kind"], &mine[0]["refused"]), (&json!("sign-in-refused"), &json!("wrong-password")));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kind_filter_pages_through_a_busy_day_and_records_expire_as_set() {
    for engine in engines() {
        let app = TestApp::spawn_with(engine.clone(), &["--audit-retention-days", "30"], &[]).await;
        for i in 0..40 {
            let (status, _) = app.post("/api/orders", new_order_json(&format!("busy-{i:03}"), "c-busy")).await;
            assert_eq!(status, 201);
            if i % 10 == 0 {
                sign_in(&app, "ghost", "no such account here").await;
            }
        }
        let refused = trail(&app, "kind=sign-in-refused&limit=3").await;
        assert_eq!(refused.len(), 4, "{engine:?}: {refused:?}");
        assert!(refused.windows(2).all(|w| w[0]["at"].as_str() >= w[1]["at"].as_str()), "newest first");
        let changes = trail(&app, "kind=order-change&limit=9").await;
        assert_eq!(changes.len(), 40, "{engine:?}");
        assert_eq!(trail(&app, "limit=100").await.len(), 44, "{engine:?}: unfiltered, both");
        let (status, body) = app.get("/api/audit?kind=nonsense").await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains("sign-in-refused"), "{body}");
        // A cursor of one filter does not continue another.
        let (_, page) = app.get("/api/audit?kind=order-change&limit=1").await;
        let next = page["next"].as_str().unwrap();
        let (status, _) = app.get(&format!("/api/audit?kind=sign-in&limit=1&cursor={next}")).await;
        assert_eq!(status, 400);

        // Each record carries the table's expiry, 30 days on.
        let pk = keys::audit_actor_pk("ghost", 0);
        let mut expiries = Vec::new();
        for shard in 0..keys::AUDIT_SHARDS {
            let pk = if shard == 0 { pk.clone() } else { keys::audit_actor_pk("ghost", shard) };
            let out = app
                .store
                .client()
                .query()
                .table_name(&app.config.metrics_table)
                .key_condition_expression("PK = :pk")
                .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(pk))
                .send()
                .await
                .unwrap();
            for item in out.items() {
                let expires: i64 = item[keys::attr::EXPIRES_AT].as_n().unwrap().parse().unwrap();
                let at = chrono::DateTime::parse_from_rfc3339(item["at"].as_s().unwrap()).unwrap();
                expiries.push(expires - at.timestamp());
            }
        }
        assert_eq!(expiries, vec![30 * 86_400; 4], "{engine:?}");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_an_unknown_kind_or_missing_fields_still_shows() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let now = chrono::Utc::now();
        let day = now.date_naive();
        let put = |pk: String, sk: String, extra: &[(&str, &str)]| {
            let mut item: BTreeMap<String, aws_sdk_dynamodb::types::AttributeValue> = BTreeMap::new();
            item.insert("PK".into(), aws_sdk_dynamodb::types::AttributeValue::S(pk));
            item.insert("SK".into(), aws_sdk_dynamodb::types::AttributeValue::S(sk));
            for (k, v) in extra {
                item.insert(k.to_string(), aws_sdk_dynamodb::types::AttributeValue::S(v.to_string()));
            }
            let client = app.store.client();
            let table = app.config.metrics_table.clone();
            async move {
                client.put_item().table_name(table).set_item(Some(item.into_iter().collect())).send().await.unwrap();
            }
        };
        let sk = |id: &str| keys::audit_sk(&now, id);
        put(keys::audit_day_pk(day, 0), sk("a"), &[("kind", "from-the-future"), ("actor", "time-traveller")]).await;
        put(keys::audit_day_pk(day, 1), sk("b"), &[]).await;
        put(keys::audit_day_pk(day, 2), sk("c"), &[("kind", "sign-in"), ("method", "carrier-pigeon")]).await;
        put(keys::audit_day_pk(day, 3), sk("d"), &[("orderId", "o-odd"), ("to", "LOST"), ("actor", "x")]).await;

        let records = trail(&app, "limit=10").await;
        assert_eq!(records.len(), 4, "{engine:?}: {records:?}");
        let future = records.iter().find(|r| r["actor"] == "time-traveller").unwrap();
        assert_eq!(future["kind"], "unknown");
        assert!(future["problems"][0].as_str().unwrap().contains("from-the-future"), "{future}");
        let pigeon = records.iter().find(|r| r["kind"] == "sign-in").unwrap();
        assert!(pigeon.get("method").is_none(), "{pigeon}");
        assert!(pigeon["problems"].to_string().contains("carrier-pigeon"), "{pigeon}");
        let odd = records.iter().find(|r| r["orderId"] == "o-odd").unwrap();
        assert_eq!(odd["kind"], "order-change", "no kind: written before kinds existed");
        assert!(odd["problems"].to_string().contains("LOST"), "{odd}");
        assert!(records.iter().all(|r| r["at"].as_str().is_some()), "the time comes from the key at worst");

        // The page shows them all.
        let page = app.http.get(format!("{}/audit", app.base)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        for shown in ["time-traveller", "from-the-future", "carrier-pigeon", "o-odd", "LOST"] {
            assert!(html.contains(shown), "{engine:?}: the page shows {shown}");
        }
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_read_the_trail() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    sign_in(&app, "ghost", "no such account here").await;
    for (role, wanted) in [(Role::Viewer, 403), (Role::Support, 403), (Role::Ops, 403), (Role::Admin, 200)] {
        for path in ["/api/audit?kind=security", "/api/audit"] {
            let response = app.client_as(Some(role)).get(format!("{}{path}", app.base)).send().await.unwrap();
            assert_eq!(response.status().as_u16(), wanted, "{role} {path}");
        }
    }
    let anonymous = app.client_as(None).get(format!("{}/api/audit", app.base)).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    // A refused sign-in is a security event all the same.
    let (_, page) = app.get("/api/audit?kind=sign-in-refused").await;
    assert_eq!(page["entries"].as_array().unwrap().len(), 1, "{page}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_choose_how_many_refused_tokens_are_recorded() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let made_up = common::client_with_token(Some(&format!("nwo.made-up.{}", "x".repeat(43))));
    // Pages too: a bearer token is read on every path, the API's or not.
    for path in ["/api/me", "/orders"].iter().cycle().take(40) {
        let response = made_up.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let recorded = trail(&app, "kind=sign-in-refused&limit=100").await;
    println!("40 refused tokens, {} recorded", recorded.len());
    assert_eq!(recorded.len(), 30, "{recorded:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_and_its_calls_manage_accounts_and_tokens_and_each_is_in_the_trail() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        let call = |name: &'static str, body: Value| {
            let (http, base) = (app.http.clone(), app.base.clone());
            async move {
                let response = http.post(format!("{base}/api/fn/{name}")).json(&body).send().await.unwrap();
                let status = response.status();
                (status, response.json::<Value>().await.unwrap_or(Value::Null))
            }
        };
        let new = json!({"name": "dora", "role": "support", "password": "dora's long password"});
        let (status, body) = call("add-account", json!({"new": new})).await;
        assert_eq!(status, StatusCode::OK, "{engine:?}: {body}");
        let (status, body) =
            call("add-account", json!({"new": {"name": "eve", "role": "ops", "password": "short"}})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{engine:?}: a short password: {body}");
        let (status, _) = call("set-role", json!({"name": "dora", "role": "ops"})).await;
        assert_eq!(status, StatusCode::OK);
        let (status, token) = call("create-token", json!({"new": {"name": "dora-script", "role": "viewer"}})).await;
        assert_eq!(status, StatusCode::OK);
        assert!(token.as_str().unwrap().starts_with("nwo.dora-script."), "{token}");
        let (status, _) = call("revoke-token", json!({"name": "dora-script"})).await;
        assert_eq!(status, StatusCode::OK);
        // Dora signs in once, then is disabled.
        assert!(sign_in(&app, "dora", "dora's long password").await.is_some());
        let (status, _) = call("disable-account", json!({"name": "dora"})).await;
        assert_eq!(status, StatusCode::OK);
        assert!(sign_in(&app, "dora", "dora's long password").await.is_none(), "disabled");

        let (status, overview) = call("admin", json!({})).await;
        assert_eq!(status, StatusCode::OK);
        let dora = overview["accounts"].as_array().unwrap().iter().find(|a| a["name"] == "dora").unwrap().clone();
        assert_eq!((&dora["role"], &dora["disabled"]), (&json!("ops"), &json!(true)), "{engine:?}: {dora}");
        let token = overview["tokens"].as_array().unwrap().iter().find(|t| t["name"] == "dora-script").unwrap();
        assert_eq!((&token["createdBy"], &token["revoked"]), (&json!("test-admin"), &json!(true)));

        // The admin's changes, by the admin, from the client's address.
        let records = trail(&app, "actor=test-admin&kind=security").await;
        let kinds: Vec<&str> = records.iter().map(|r| r["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["account-disabled", "token-revoked", "token-created", "account-role-changed", "account-added"],
            "{engine:?}: newest first; the refused add is not a change"
        );
        assert!(records.iter().all(|r| r["client"] == "127.0.0.1" && r["method"] == "token"), "{records:?}");

        // The page: the accounts, the tokens, and dora's own events beside them.
        let page = app.http.get(format!("{}/admin?account=dora", app.base)).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        for shown in [r#"data-account="dora""#, r#"data-token="dora-script""#, "Security events of dora"] {
            assert!(html.contains(shown), "{engine:?}: the page shows {shown}");
        }
        for kind in ["sign-in-refused", "sign-in"] {
            assert!(
                html.contains(&format!(r#"data-kind="{kind}""#)),
                "{engine:?}: dora's {kind} is beside her account"
            );
        }
        let viewer = app.client_as(Some(Role::Viewer)).get(format!("{}/admin", app.base)).send().await.unwrap();
        assert_eq!(viewer.status(), StatusCode::FORBIDDEN);
        app.stop().await;
    }
}

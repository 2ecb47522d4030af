//! Each role's IAM policy against the calls its code makes. The store's
//! interceptor records every kind of item access the process makes (the
//! action IAM authorizes it by, the table, the partition family of its
//! key); the web tier's work (orders written and changed, a bulk change,
//! every page's reads, sale plans, tokens, an account disabled, a password
//! sign-in and sign-out, readiness, the shard counts written ahead,
//! reconciliation, the consumed capacity flushed) must all be allowed by
//! `docs/iam/web.json`, and with the in-process consumer's work added, by
//! `docs/iam/serve.json`; the web tier alone never deleted an audit item
//! or wrote a checkpoint. The Lambda's invocations (windowed and not) and
//! the `user`/`token` commands' calls, each on a store of their own, are
//! held to `lambda.json` and `admin.json` likewise.

use crate::common::{self, Engine, TestApp, new_order_json};
use northwind_ops::model::Role;
use northwind_ops::server::auth::accounts;
use northwind_ops::server::deploy::iam;
use northwind_ops::server::store::usage::Access;
use northwind_ops::server::stream::reconcile::{ReconcileOptions, Reconciler};
use serde_json::json;
use std::collections::BTreeSet;

/// A partition key of `family` (a prefix stands for the keys it starts).
fn key_of(family: &str) -> String {
    if family.ends_with('#') { format!("{family}x") } else { family.to_string() }
}

/// The accesses `policy` refuses, named as the docs name the tables.
fn refused(app: &TestApp, policy: &str, accesses: &BTreeSet<Access>) -> Vec<String> {
    accesses
        .iter()
        .filter(|a| {
            let table = if a.table == app.config.orders_table {
                "northwind-orders"
            } else if a.table == app.config.metrics_table {
                "northwind-metrics"
            } else {
                return true;
            };
            // An order's keys belong to no metrics family: any key will do.
            let pk = match (table, a.family) {
                ("northwind-orders", _) => Some("ORDER#o-1".to_string()),
                (_, family) => family.map(key_of),
            };
            !iam::allows(policy, a.action, table, pk.as_deref())
        })
        .map(|a| format!("{} on {} {:?}", a.action, a.table, a.family))
        .collect()
}

fn print(role: &str, accesses: &BTreeSet<Access>) {
    println!("{role}: {} kinds of item access", accesses.len());
    for a in accesses {
        println!("  {:<30} {:<40} {}", a.action, a.table, a.family.unwrap_or("-"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_roles_policy_allows_every_call_its_code_makes() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &["--sign-in-attempts", "10000"]).await;
    // The web tier's work, through the API as its users do it.
    for i in 0..3 {
        let (status, body) = app.post("/api/orders", new_order_json(&format!("iam-{i}"), "c-iam")).await;
        assert_eq!(status, 201, "{body}");
    }
    let cancel = json!({"from": "PENDING", "to": "CANCELLED", "reason": "iam"});
    let (status, body) = app.post("/api/orders/iam-0/status", cancel).await;
    assert_eq!(status, 200, "{body}");
    let bulk = json!({"orderIds": ["iam-1"], "from": "PENDING", "to": "CANCELLED", "reason": "iam"});
    let (status, started) = app.post("/api/bulk/status", bulk).await;
    assert_eq!(status, 202, "{started}");
    let bulk_id = started["id"].as_str().unwrap().to_string();
    let start = format!("{}T09:00:00Z", chrono::Utc::now().date_naive() + chrono::Duration::days(1));
    let plan = json!({"name": "iam-sale", "peakOrdersPerSecond": 50, "start": start, "rampMinutes": 5, "holdMinutes": 10, "decayMinutes": 5});
    let (status, body) = app.post("/api/sales", plan).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = app.post("/api/sales/iam-sale/shards", json!({})).await;
    assert!(status < 500, "{status} {body}");
    let (status, body) = app.post("/api/admin/tokens", json!({"name": "iam-token", "role": "viewer"})).await;
    assert_eq!(status, 201, "{body}");
    accounts::add_user(&app.store, "iam-user", Role::Support, "iam-user's long password".into()).await.unwrap();
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let signed_in = browser
        .post(format!("{}/auth/login", app.base))
        .header("origin", app.base.clone())
        .form(&[("name", "iam-user"), ("password", "iam-user's long password"), ("next", "/")])
        .send()
        .await
        .unwrap();
    let cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_string())
        .find(|c| c.starts_with("nwo_session="))
        .expect("signed in");
    let signed_out = browser
        .post(format!("{}/auth/logout", app.base))
        .header("origin", app.base.clone())
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), 303);
    for path in [
        "/api/orders/iam-0",
        "/api/orders/iam-0/history",
        "/api/customers/c-iam/orders",
        "/api/pending",
        "/api/metrics/pending",
        "/api/capacity",
        "/api/quality",
        "/api/ready",
        "/api/audit",
        "/api/sales",
        "/api/sales/iam-sale",
        "/api/sales/iam-sale/outcome",
        "/api/admin/users",
        "/api/admin/tokens",
        &format!("/api/bulk/{bulk_id}"),
        "/readyz",
    ] {
        let (status, body) = app.get(path).await;
        assert!(status < 500, "{path}: {status} {body}");
    }
    let response = app.http.post(format!("{}/api/admin/users/iam-user/disable", app.base)).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let response = app.http.delete(format!("{}/api/admin/tokens/iam-token", app.base)).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let response = app.http.delete(format!("{}/api/sales/iam-sale", app.base)).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    // ... and its background work: the shard counts ahead, reconciliation
    // (its lease taken and given back), the consumed capacity flushed.
    app.service.write_shards_ahead(chrono::Utc::now()).await.unwrap();
    let reconciler = Reconciler::new(app.store.clone(), ReconcileOptions::new("iam-reconciler"));
    reconciler.pending(chrono::Utc::now().date_naive(), true).await.unwrap();
    app.store.usage_flusher().flush().await.unwrap();

    let web = app.store.usage().accesses();
    print("web", &web);
    assert!(web.iter().any(|a| a.action == "dynamodb:DeleteItem"), "a session and a plan were deleted");
    assert!(web.iter().any(|a| a.family.is_some_and(|f| f.starts_with("AUDIT#"))), "the trail was written");
    assert_eq!(refused(&app, iam::WEB, &web), Vec::<String>::new(), "docs/iam/web.json refuses the web tier");
    let reads = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"];
    for a in &web {
        let family = a.family.unwrap_or_default();
        if family.starts_with("AUDIT#") {
            assert!(a.action == "dynamodb:PutItem" || reads.contains(&a.action), "{a:?}: an audit item changed");
        }
        if family == "CHECKPOINT#" {
            assert!(reads.contains(&a.action), "{a:?}: the web tier wrote a checkpoint");
        }
    }

    // The in-process consumer's work besides: serve's policy allows it all.
    let consumer = common::counters::consumer(&app.store, "iam-consumer", 5_000);
    assert!(common::counters::drain(&consumer).await > 0);
    app.store.usage_flusher().flush().await.unwrap();
    let serve = app.store.usage().accesses();
    print("serve (with its consumer)", &serve);
    assert!(serve.iter().any(|a| a.family == Some("CHECKPOINT#") && a.action != "dynamodb:GetItem"));
    assert_eq!(refused(&app, iam::SERVE, &serve), Vec::<String>::new(), "docs/iam/serve.json refuses serve");
    let consumer_only: Vec<_> = serve.difference(&web).collect();
    let web_refuses = refused(&app, iam::WEB, &serve);
    println!("the consumer's own accesses: {}; web.json refuses {} of them", consumer_only.len(), web_refuses.len());
    assert!(!web_refuses.is_empty(), "the web tier's policy is narrower than serve's");
    app.stop().await;
}

/// The Lambda consumer, on a store of its own (its accesses alone), handed
/// the stream's records as Lambda hands them: in a tumbling window (the
/// shard's checkpoint moved, the window closed with its observations) and
/// without one (a marker per record). `docs/iam/lambda.json` allows all of
/// it, and it reaches no account, token, session or audit item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lambdas_policy_allows_every_call_it_makes() {
    use northwind_ops::server::sim::wire;
    use northwind_ops::server::stream::lambda::{Budget, LambdaConsumer, handle};
    // A minute, as an invocation's deadline would give it.
    let budget = || Budget::from_deadline_ms(chrono::Utc::now().timestamp_millis() + 60_000);
    let app = TestApp::spawn(Engine::Dynoxide).await;
    for i in 0..5 {
        let (status, body) = app.post("/api/orders", new_order_json(&format!("iam-l-{i}"), "c-iam")).await;
        assert_eq!(status, 201, "{body}");
    }
    let arn = app.store.stream_arn().await.unwrap().expect("a stream");
    let shard = app.store.stream_shards(&arn).await.unwrap().remove(0).id;
    let (records, _) = common::counters::read_batch(&app.store, &arn, &shard, None, 1000).await;
    assert!(records.len() >= 5, "{}", records.len());
    let records: Vec<_> = records.iter().map(|r| wire::lambda_record(r, &arn)).collect();

    let function = app.another_instance().await;
    let lambda = LambdaConsumer::new(function.store.clone());
    let window = json!({"start": "2026-12-07T17:00:00Z", "end": "2026-12-07T17:01:00Z"});
    let windowed = json!({
        "Records": records, "window": window, "state": {}, "shardId": shard, "eventSourceARN": arn,
        "isFinalInvokeForWindow": false, "isWindowTerminatedEarly": false
    });
    let answer = handle(&lambda, &windowed, budget()).await.unwrap();
    assert!(answer.failures.batch_item_failures.is_empty());
    let closing = json!({
        "window": window, "state": answer.state, "shardId": shard, "eventSourceARN": arn,
        "isFinalInvokeForWindow": true, "isWindowTerminatedEarly": false
    });
    handle(&lambda, &closing, budget()).await.unwrap();
    let unwindowed = json!({ "Records": records });
    assert!(handle(&lambda, &unwindowed, budget()).await.unwrap().failures.batch_item_failures.is_empty());
    function.store.usage_flusher().flush().await.unwrap();

    let accesses = function.store.usage().accesses();
    print("lambda", &accesses);
    let families: BTreeSet<&str> = accesses.iter().filter_map(|a| a.family).collect();
    assert!(families.contains("APPLIED#") && families.contains("CHECKPOINT#"), "both guards: {families:?}");
    assert_eq!(refused(&function, iam::LAMBDA, &accesses), Vec::<String>::new(), "docs/iam/lambda.json refuses it");
    for family in ["USERS", "TOKENS", "SESSION#", "AUDIT#ORDER#", "AUDIT#DAY#", "AUDIT#ACTOR#"] {
        assert!(!families.contains(family), "the Lambda reached {family}");
    }
    function.stop().await;
    app.stop().await;
}

/// `replay`, on a store of its own, replaying a range the Lambda form gave
/// up (the mode `lambda`: it moves the shard's checkpoint), then again
/// (every record in its applied ranges): `docs/iam/replay.json` allows all
/// of it, and it reaches no account, token, session or audit item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replays_policy_allows_every_call_it_makes() {
    use northwind_ops::model::{Actor, ConsumerMode};
    use northwind_ops::server::stream::lambda::LambdaConsumer;
    use northwind_ops::server::stream::registry;
    use northwind_ops::server::stream::replay::{self, GivenUp};
    let app = TestApp::spawn(Engine::Dynoxide).await;
    for i in 0..5 {
        let (status, body) = app.post("/api/orders", new_order_json(&format!("iam-r-{i}"), "c-iam")).await;
        assert_eq!(status, 201, "{body}");
    }
    registry::switch_mode(&app.store, ConsumerMode::Lambda, None, &Actor::cli("tests"), None).await.unwrap();
    let arn = app.store.stream_arn().await.unwrap().expect("a stream");
    let shard = app.store.stream_shards(&arn).await.unwrap().remove(0).id;
    let (records, _) = common::counters::read_batch(&app.store, &arn, &shard, None, 1000).await;
    let seq = |i: usize| records[i].dynamodb().unwrap().sequence_number().unwrap().to_string();
    let range = GivenUp {
        stream_arn: arn.clone(),
        shard_id: shard.clone(),
        first: seq(0),
        last: seq(records.len() - 1),
        batch_size: None,
    };

    let cli = app.another_instance().await;
    let consumer = LambdaConsumer::for_replay(cli.store.clone());
    let first = replay::replay(&cli.store, &consumer, &range).await.unwrap();
    assert_eq!(first.applied, records.len(), "{first:?}");
    let again = replay::replay(&cli.store, &consumer, &range).await.unwrap();
    assert_eq!((again.applied, again.already), (0, records.len()), "{again:?}");
    cli.store.usage_flusher().flush().await.unwrap();

    let accesses = cli.store.usage().accesses();
    print("replay", &accesses);
    let families: BTreeSet<&str> = accesses.iter().filter_map(|a| a.family).collect();
    for family in ["APPLIED#", "RANGES#", "CHECKPOINT#", "CONSUMERS"] {
        assert!(families.contains(family), "{family}: {families:?}");
    }
    let policy = iam::POLICIES.iter().find(|(name, _)| *name == "replay").unwrap().1;
    assert_eq!(refused(&cli, policy, &accesses), Vec::<String>::new(), "docs/iam/replay.json refuses it");
    for family in ["USERS", "TOKENS", "SESSION#", "AUDIT#ORDER#", "AUDIT#DAY#", "AUDIT#ACTOR#"] {
        assert!(!families.contains(family), "replay reached {family}");
    }
    cli.stop().await;
    app.stop().await;
}

/// The administrative commands (`user`, `token`), as the CLI makes their
/// calls, on a store of their own: `docs/iam/admin.json` allows all of them,
/// and they reach accounts and tokens only (and their consumed capacity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_commands_policy_allows_every_call_they_make() {
    use northwind_ops::server::store::AccountChange;
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let cli = app.another_instance().await;
    let store = &cli.store;
    accounts::add_user(store, "iam-admin", Role::Admin, "iam-admin's long password".into()).await.unwrap();
    assert!(!store.list_accounts().await.unwrap().is_empty());
    accounts::set_password(store, "iam-admin", "another long password".into()).await.unwrap();
    for change in [AccountChange::Role(Role::Ops), AccountChange::Disable, AccountChange::Enable] {
        store.change_account("iam-admin", &change).await.unwrap();
    }
    accounts::create_token(store, "iam-cli", Role::Viewer, "cli").await.unwrap();
    assert!(!store.list_tokens().await.unwrap().is_empty());
    store.revoke_token("iam-cli").await.unwrap();
    store.usage_flusher().flush().await.unwrap();

    let accesses = store.usage().accesses();
    print("admin", &accesses);
    assert_eq!(refused(&cli, admin_policy(), &accesses), Vec::<String>::new(), "docs/iam/admin.json refuses it");
    let families: BTreeSet<&str> = accesses.iter().filter_map(|a| a.family).collect();
    assert!(families.is_subset(&BTreeSet::from(["USERS", "TOKENS", "CAPACITY#"])), "{families:?}");
    cli.stop().await;
    app.stop().await;
}

fn admin_policy() -> &'static str {
    iam::POLICIES.iter().find(|(name, _)| *name == "admin").unwrap().1
}

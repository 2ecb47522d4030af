//! Behind a load balancer: the client is the address a trusted proxy names
//! in `X-Forwarded-For`, and every limit is per client. The loopback is the
//! trusted proxy here (`--trusted-proxies 127.0.0.1/32`), and each test
//! sends `X-Forwarded-For` as a balancer would: what the client sent, then
//! the address the balancer saw. The limits are in memory, not in the
//! store: one engine.

use crate::common;

use common::{Engine, TestApp, client_with_token};
use northwind_ops::model::Role;
use northwind_ops::server::auth::accounts;
use reqwest::StatusCode;
use std::time::{Duration, Instant};

const BEHIND_THE_LOOPBACK: [&str; 2] = ["--trusted-proxies", "127.0.0.1/32"];

/// What one password sign-in came to.
#[derive(Debug, PartialEq)]
enum Outcome {
    SignedIn(String),
    Wrong,
    SlowDown { retry_after: u64 },
}

/// A password sign-in through the form, from `forwarded_for` (the header as
/// the proxy sends it; none when `None`).
async fn sign_in(app: &TestApp, forwarded_for: Option<&str>, name: &str, password: &str) -> Outcome {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut request = client
        .post(format!("{}/auth/login", app.base))
        .header("origin", app.base.clone())
        .form(&[("name", name), ("password", password)]);
    if let Some(value) = forwarded_for {
        request = request.header("x-forwarded-for", value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = response.headers()["location"].to_str().unwrap().to_string();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_string())
        .find(|c| c.starts_with("nwo_session="));
    match (location.as_str(), cookie) {
        ("/", Some(cookie)) => Outcome::SignedIn(cookie),
        (l, None) if l.starts_with("/login?error=wrong") => Outcome::Wrong,
        (l, None) if l.starts_with("/login?error=slow-down") => {
            Outcome::SlowDown { retry_after: retry_after.expect("a slow-down says how long") }
        }
        (l, cookie) => panic!("unexpected answer: {l} {cookie:?}"),
    }
}

/// Each outcome's count, for the figures.
fn tally(outcomes: &[Outcome]) -> (usize, usize) {
    let wrong = outcomes.iter().filter(|o| **o == Outcome::Wrong).count();
    let slowed = outcomes.iter().filter(|o| matches!(o, Outcome::SlowDown { .. })).count();
    (wrong, slowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_failed_sign_ins_do_not_stop_another_and_spoofing_does_not_escape() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &BEHIND_THE_LOOPBACK).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();

    // 25 wrong passwords from one client, each at another made-up name (so
    // only the client's own limit, 10 a minute, can refuse them), each
    // with a different address prepended as the client would forge it.
    let mut attacker = Vec::new();
    for n in 0..25 {
        let forwarded = format!("198.18.{}.{n}, 203.0.113.66", n % 7);
        attacker.push(sign_in(&app, Some(&forwarded), &format!("nobody-{n}"), "guess").await);
    }
    let (wrong, slowed) = tally(&attacker);
    println!("one client, 25 failed sign-ins under spoofed prefixes: {wrong} checked, {slowed} slowed down");
    assert_eq!((wrong, slowed), (10, 15), "{attacker:?}");
    // Without a prefix, the same client is as refused.
    assert!(matches!(sign_in(&app, Some("203.0.113.66"), "nobody-x", "guess").await, Outcome::SlowDown { .. }));

    // Another client, meanwhile, signs in.
    let other = sign_in(&app, Some("198.51.100.7"), "anna", "anna's long password").await;
    assert!(matches!(other, Outcome::SignedIn(_)), "{other:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_failed_sign_ins_on_one_account_from_forty_addresses_are_slowed_down() {
    let flags =
        [&BEHIND_THE_LOOPBACK[..], &["--sign-in-account-attempts", "3", "--sign-in-delay-max-secs", "4"]].concat();
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &flags).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
    accounts::add_user(&app.store, "ben", Role::Viewer, "ben's long password".into()).await.unwrap();
    // Anna has signed in from her office before the attack.
    let office = "192.0.2.10";
    assert!(matches!(sign_in(&app, Some(office), "anna", "anna's long password").await, Outcome::SignedIn(_)));

    let address = |n: usize| format!("203.0.113.{}", n + 1);
    let started = Instant::now();
    let mut attack = Vec::new();
    for n in 0..40 {
        attack.push(sign_in(&app, Some(&address(n)), "anna", "guess").await);
    }
    let (wrong, slowed) = tally(&attack);
    println!(
        "40 wrong passwords for one account from 40 addresses in {:?}: {wrong} checked, {slowed} slowed down",
        started.elapsed()
    );
    // 3 free, then 1 s, 2 s, 4 s between checks: a few seconds at most
    // could let a handful more through, never most of the 40.
    assert!((3..=8).contains(&wrong), "{attack:?}");
    assert!(slowed >= 32, "{attack:?}");
    assert_eq!(&attack[..3], [Outcome::Wrong, Outcome::Wrong, Outcome::Wrong]);

    // The delay grows: wait what each refusal says, try (checked, wrong),
    // and the next try is told to wait longer, up to the cap.
    let mut waits = Vec::new();
    for n in 40..43 {
        let Outcome::SlowDown { retry_after } = sign_in(&app, Some(&address(n)), "anna", "guess").await else {
            panic!("not slowed down")
        };
        waits.push(retry_after);
        tokio::time::sleep(Duration::from_secs(retry_after) + Duration::from_millis(50)).await;
        assert_eq!(sign_in(&app, Some(&address(n)), "anna", "guess").await, Outcome::Wrong);
    }
    let Outcome::SlowDown { retry_after } = sign_in(&app, Some(&address(43)), "anna", "guess").await else {
        panic!("not slowed down")
    };
    waits.push(retry_after);
    println!("the waits each refusal named, attempt after attempt: {waits:?} s (capped at 4)");
    assert!(waits.windows(2).all(|w| w[0] <= w[1]), "{waits:?}");
    assert!(waits.last() > waits.first() || waits.first() == Some(&4), "{waits:?}");
    assert!(waits.iter().all(|w| *w <= 4), "never past the cap: {waits:?}");

    // No lockout: Anna from where she signed in before, and another
    // account from anywhere, sign in during the attack.
    assert!(matches!(sign_in(&app, Some(office), "anna", "anna's long password").await, Outcome::SignedIn(_)));
    assert!(matches!(sign_in(&app, Some("203.0.113.200"), "ben", "ben's long password").await, Outcome::SignedIn(_)));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_trusted_proxies_x_forwarded_for_changes_nothing() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
    let mut outcomes = Vec::new();
    for n in 0..12 {
        let forwarded = format!("203.0.113.{n}");
        outcomes.push(sign_in(&app, Some(&forwarded), &format!("nobody-{n}"), "guess").await);
    }
    let (wrong, slowed) = tally(&outcomes);
    println!("12 failed sign-ins from 12 claimed addresses, no proxy trusted: {wrong} checked, {slowed} slowed down");
    assert_eq!((wrong, slowed), (10, 2), "every request is the loopback's: {outcomes:?}");
    // So the loopback is out of attempts, whoever it claims to be.
    let claimed = sign_in(&app, Some("198.51.100.7"), "anna", "anna's long password").await;
    assert!(matches!(claimed, Outcome::SlowDown { .. }), "{claimed:?}");
    app.stop().await;
}

/// The statuses of `n` API calls, each with the given headers.
async fn api_calls(http: &reqwest::Client, base: &str, headers: &[(&str, &str)], n: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        let mut request = http.get(format!("{base}/api/pending"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        if status == 429 {
            let body: serde_json::Value = response.json().await.unwrap();
            assert!(body["error"].as_str().is_some_and(|e| e.contains("rate")), "{body}");
        }
        statuses.push(status);
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_over_the_api_rate_gets_429_while_another_gets_200() {
    let flags = [&BEHIND_THE_LOOPBACK[..], &["--api-rate", "1", "--api-burst", "5"]].concat();
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &flags).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
    let Outcome::SignedIn(cookie) = sign_in(&app, Some("198.51.100.7"), "anna", "anna's long password").await else {
        panic!("anna signs in")
    };
    let http = reqwest::Client::new();

    // By address: a busy script behind the balancer, and a person.
    let busy =
        api_calls(&http, &app.base, &[("cookie", &cookie), ("x-forwarded-for", "1.1.1.1, 203.0.113.9")], 8).await;
    let person = api_calls(&http, &app.base, &[("cookie", &cookie), ("x-forwarded-for", "198.51.100.7")], 3).await;
    println!("one address, 8 calls at once: {busy:?}; another address meanwhile: {person:?}");
    assert_eq!(&busy[..5], [200; 5]);
    assert_eq!(&busy[5..], [429; 3]);
    assert_eq!(person, [200; 3]);
    // A spoofed prefix is the same client.
    assert_eq!(
        api_calls(&http, &app.base, &[("cookie", &cookie), ("x-forwarded-for", "9.9.9.9, 203.0.113.9")], 1).await,
        [429]
    );

    // By token: two scripts from one address each have their own budget.
    let one = client_with_token(Some(&app.tokens[&Role::Viewer]));
    let two = client_with_token(Some(&app.tokens[&Role::Ops]));
    let from = [("x-forwarded-for", "192.0.2.50")];
    let first = api_calls(&one, &app.base, &from, 7).await;
    let second = api_calls(&two, &app.base, &from, 3).await;
    println!("token one from 192.0.2.50: {first:?}; token two from there too: {second:?}");
    assert_eq!(&first[5..], [429; 2]);
    assert_eq!(second, [200; 3]);

    // Made-up tokens are charged to the address, and do not escape it.
    let mut made_up = Vec::new();
    for n in 0..8 {
        let fake = client_with_token(Some(&format!("nwo.made-up-{n}.{}", "x".repeat(43))));
        made_up.extend(api_calls(&fake, &app.base, &[("x-forwarded-for", "192.0.2.99")], 1).await);
    }
    println!("8 made-up tokens from one address: {made_up:?}");
    // The sixth spends the address's last token-free call: refused from then on.
    assert_eq!(&made_up[..5], [401; 5]);
    assert_eq!(&made_up[6..], [429; 2]);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_forwarded_scheme_is_part_of_the_origin_check() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &BEHIND_THE_LOOPBACK).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
    let Outcome::SignedIn(cookie) = sign_in(&app, Some("198.51.100.7"), "anna", "anna's long password").await else {
        panic!("anna signs in")
    };
    let host = app.base.trim_start_matches("http://").to_string();
    let sign_out = |origin: String, proto: &'static str| {
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        client
            .post(format!("{}/auth/logout", app.base))
            .header("cookie", cookie.clone())
            .header("origin", origin)
            .header("x-forwarded-proto", proto)
            .header("x-forwarded-for", "198.51.100.7")
            .send()
    };
    // The browser was on https (the balancer says so): a plain-HTTP page of
    // the same host is another origin.
    assert_eq!(sign_out(format!("http://{host}"), "https").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(sign_out(format!("https://{host}"), "https").await.unwrap().status(), StatusCode::SEE_OTHER);
    app.stop().await;
}

/// The audit trail names the client a trusted proxy names, not the proxy,
/// and not an address the client prepended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_are_in_the_audit_trail_with_the_clients_address() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &BEHIND_THE_LOOPBACK).await;
    accounts::add_user(&app.store, "anna", Role::Support, "anna's long password".into()).await.unwrap();
    let signed_in = sign_in(&app, Some("10.9.9.9, 203.0.113.31"), "anna", "anna's long password").await;
    assert!(matches!(signed_in, Outcome::SignedIn(_)), "{signed_in:?}");
    let refused = sign_in(&app, Some("10.9.9.9, 198.51.100.32"), "anna", "a wrong password").await;
    assert_eq!(refused, Outcome::Wrong);
    for (kind, client) in [("sign-in", "203.0.113.31"), ("sign-in-refused", "198.51.100.32")] {
        let (status, page) = app.get(&format!("/api/audit?kind={kind}")).await;
        assert_eq!(status, 200, "{page}");
        let records = page["entries"].as_array().unwrap();
        let anna: Vec<_> = records.iter().filter(|r| r["actor"] == "anna").collect();
        assert_eq!(anna.len(), 1, "{kind}: {records:?}");
        assert_eq!(anna[0]["client"], client, "{kind}: {:?}", anna[0]);
    }
    app.stop().await;
}

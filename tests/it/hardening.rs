//! Bad input and abuse: every bad request over every route and server
//! function gets a 4xx JSON error (or, for pages, its own view), and the
//! limits hold: slow headers, too many live streams, a store that stops
//! answering, too many requests.

use crate::common;

use common::{Engine, TestApp, engines, new_order_json};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One bad request and the status it must get.
struct Case {
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Option<String>,
    status: u16,
}

fn case(method: &'static str, path: impl Into<String>, status: u16) -> Case {
    Case { method, path: path.into(), content_type: None, body: None, status }
}

fn json_case(method: &'static str, path: impl Into<String>, body: Value, status: u16) -> Case {
    Case { method, path: path.into(), content_type: Some("application/json"), body: Some(body.to_string()), status }
}

fn raw_case(path: impl Into<String>, content_type: Option<&'static str>, body: &str, status: u16) -> Case {
    Case { method: "POST", path: path.into(), content_type, body: Some(body.to_string()), status }
}

fn order_with(change: impl FnOnce(&mut Value)) -> Value {
    let mut order = new_order_json("bad-1", "cust-1");
    change(&mut order);
    order
}

/// The whole list: server functions, the JSON API, limits.
fn bad_requests(cursor: &str, foreign_cursor: &str) -> Vec<Case> {
    let tomorrow_plus_one = (chrono::Utc::now().date_naive() + chrono::Duration::days(2)).to_string();
    let two_days_ago = (chrono::Utc::now() - chrono::Duration::days(2)).to_rfc3339();
    let in_an_hour = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let huge = "x".repeat(70_000);
    let mut tampered = cursor.to_string().into_bytes();
    tampered[3] = if tampered[3] == b'x' { b'y' } else { b'x' };
    let tampered = String::from_utf8(tampered).unwrap();
    vec![
        // Server functions: arguments that do not parse are 400s, not 500s.
        json_case("POST", "/api/fn/dashboard", json!({}), 400),
        raw_case("/api/fn/dashboard", Some("application/json"), "not json", 400),
        json_case("POST", "/api/fn/dashboard", json!({"params": {"limit": "abc"}}), 400),
        json_case("POST", "/api/fn/dashboard", json!({"params": {"date": "2026-13-01"}}), 400),
        json_case("POST", "/api/fn/dashboard", json!({"params": {"cursor": "garbage"}}), 400),
        json_case("POST", "/api/fn/dashboard", json!({"params": {"days": "99"}}), 400),
        json_case("POST", "/api/fn/order", json!({}), 400),
        json_case("POST", "/api/fn/order", json!({"order_id": 5}), 400),
        json_case("POST", "/api/fn/order", json!({"order_id": "a#b"}), 400),
        json_case("POST", "/api/fn/order", json!({"order_id": "missing-order"}), 404),
        json_case("POST", "/api/fn/change-status", json!({"order_id": "x", "from": "PENDING", "to": "LOST"}), 400),
        json_case("POST", "/api/fn/change-status", json!({"order_id": "x", "from": "PENDING"}), 400),
        json_case("POST", "/api/fn/change-status", json!({"order_id": "x", "from": "SHIPPED", "to": "PENDING"}), 400),
        raw_case(
            "/api/fn/change-status",
            Some("application/x-www-form-urlencoded"),
            "order_id=x&from=PENDING&to=CONFIRMED",
            400,
        ),
        json_case("POST", "/api/fn/customer-orders", json!({"customer_id": "c d", "params": {}}), 400),
        json_case(
            "POST",
            "/api/fn/customer-orders",
            json!({"customer_id": "c1", "params": {"cursor": "garbage"}}),
            400,
        ),
        json_case("POST", "/api/fn/customer-orders", json!({"customer_id": "c1"}), 400),
        json_case("POST", "/api/fn/search", json!({}), 400),
        json_case("POST", "/api/fn/search", json!([]), 400),
        json_case("POST", "/api/fn/no-such-function", json!({}), 404),
        case("GET", "/api/fn/dashboard", 405),
        raw_case("/api/fn/search", Some("application/json"), &format!("{{\"query\": \"{huge}\"}}"), 413),
        // Reads.
        case("GET", "/api/orders/a%23b", 400),
        case("GET", format!("/api/orders/{}", "x".repeat(65)), 400),
        case("GET", "/api/orders/%FF", 400),
        case("GET", "/api/orders/missing-order", 404),
        case("GET", "/api/customers/c%20d/orders", 400),
        case("GET", "/api/customers/%FF%FE/orders", 400),
        case("GET", "/api/customers/cust-1/orders?limit=0", 400),
        case("GET", "/api/customers/cust-1/orders?limit=abc", 400),
        case("GET", "/api/customers/cust-1/orders?cursor=garbage", 400),
        case("GET", format!("/api/customers/cust-1/orders?cursor={cursor}"), 400),
        case("GET", "/api/pending?limit=101", 400),
        case("GET", "/api/pending?limit=-1", 400),
        case("GET", "/api/pending?limit=1&limit=2", 400),
        case("GET", "/api/pending?days=0", 400),
        case("GET", "/api/pending?days=32", 400),
        case("GET", "/api/pending?date=2026-02-30", 400),
        case("GET", "/api/pending?date=1999-12-31", 400),
        case("GET", "/api/pending?date=9999-01-01", 400),
        case("GET", format!("/api/pending?date={tomorrow_plus_one}"), 400),
        case("GET", format!("/api/pending?cursor={tampered}"), 400),
        case("GET", format!("/api/pending?cursor={foreign_cursor}"), 400),
        case("GET", format!("/api/pending?date=2020-01-01&cursor={cursor}"), 400),
        case("GET", "/api/metrics/pending?date=bad", 400),
        case("GET", "/api/metrics/pending?date=0001-01-01", 400),
        case("GET", "/api/quality?date=bad", 400),
        case("GET", "/api/quality?date=9999-01-01", 400),
        case("GET", "/api/live?date=bad", 400),
        // Writes.
        raw_case("/api/orders", Some("text/plain"), &new_order_json("t-1", "c").to_string(), 415),
        raw_case("/api/orders", None, &new_order_json("t-2", "c").to_string(), 415),
        raw_case("/api/orders", Some("application/json"), "{", 400),
        json_case("POST", "/api/orders", json!({}), 400),
        json_case("POST", "/api/orders", order_with(|o| o["extra"] = json!(1)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["status"] = json!("DELIVERED")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["status"] = json!("LOST")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["createdAt"] = json!("0001-01-01T00:00:00Z")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["createdAt"] = json!(two_days_ago)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["createdAt"] = json!(in_an_hour)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["createdAt"] = json!("yesterday")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["shippingCity"] = json!("Oslo\u{0007}")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["shippingCity"] = json!("Oslo\r\nX-Injected: 1")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"][0]["name"] = json!("Tent\u{202E}reversed")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["currency"] = json!("usd")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"][0]["quantity"] = json!(0)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"][0]["quantity"] = json!(-1)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"][0]["unitPrice"] = json!(-5)), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"] = json!([])), 400),
        json_case("POST", "/api/orders", order_with(|o| o["items"] = json!(vec![o["items"][0].clone(); 101])), 400),
        json_case("POST", "/api/orders", order_with(|o| o["orderId"] = json!("a#b")), 400),
        json_case("POST", "/api/orders", order_with(|o| o["customerId"] = json!("c".repeat(65))), 400),
        raw_case("/api/orders", Some("application/json"), &format!("{{\"customerId\": \"{huge}\"}}"), 413),
        raw_case("/api/orders/bad-1/status", Some("text/plain"), r#"{"from":"PENDING","to":"CONFIRMED"}"#, 415),
        json_case("POST", "/api/orders/bad-1/status", json!({"from": "PENDING", "to": "LOST"}), 400),
        json_case("POST", "/api/orders/bad-1/status", json!({"from": "PENDING"}), 400),
        json_case("POST", "/api/orders/bad-1/status", json!({"from": "DELIVERED", "to": "PENDING"}), 400),
        json_case("POST", "/api/orders/a%23b/status", json!({"from": "PENDING", "to": "CONFIRMED"}), 400),
        json_case("POST", "/api/orders/missing-order/status", json!({"from": "PENDING", "to": "CONFIRMED"}), 404),
        // Routes and methods.
        case("PUT", "/api/orders", 405),
        case("DELETE", "/api/orders/bad-1", 405),
        case("POST", "/api/pending", 405),
        case("GET", "/api/nothing-here", 404),
        case("GET", "/api/orders/bad-1/extra", 404),
        case("GET", "/api/", 404),
    ]
}

/// Sends a case. A server refusing an over-size body answers before reading
/// it and closes the connection; the client may see that close (a reset)
/// before it reads the answer, so such a request is sent again, a few times.
async fn send(app: &TestApp, case: &Case) -> reqwest::Response {
    let url = format!("{}{}", app.base, case.path);
    let mut last = None;
    for _ in 0..5 {
        let mut request = app.http.request(case.method.parse().unwrap(), &url);
        if let Some(content_type) = case.content_type {
            request = request.header("content-type", content_type);
        }
        if let Some(body) = case.body.clone() {
            request = request.body(body);
        }
        match request.send().await {
            Ok(response) => return response,
            Err(err) if case.status == 413 => last = Some(err),
            Err(err) => panic!("{} {}: {err}", case.method, case.path),
        }
    }
    panic!("{} {}: {last:?}", case.method, case.path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_is_a_4xx_json_error() {
    for engine in engines() {
        let app = TestApp::spawn(engine.clone()).await;
        for i in 0..3 {
            assert_eq!(app.post("/api/orders", new_order_json(&format!("bad-{i}"), "cust-1")).await.0, 201);
        }
        let cursor = app.get("/api/pending?limit=1").await.1["next"].as_str().unwrap().to_string();
        let foreign = app.get("/api/customers/cust-1/orders?limit=1").await.1["next"].as_str().unwrap().to_string();
        let cases = bad_requests(&cursor, &foreign);
        assert!(cases.len() >= 60, "{} cases", cases.len());
        for case in cases {
            let response = send(&app, &case).await;
            let status = response.status().as_u16();
            let allow = response.headers().get("allow").is_some();
            let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string());
            let text = response.text().await.unwrap();
            let what = format!("{engine:?} {} {}", case.method, case.path.chars().take(120).collect::<String>());
            assert_eq!(status, case.status, "{what}: {text}");
            assert_eq!(content_type.as_deref(), Some("application/json"), "{what}: {text}");
            let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {body}");
            assert!(body["requestId"].as_str().is_some_and(|e| !e.is_empty()), "{what}: {body}");
            if status == 405 {
                assert!(allow, "{what}: a 405 names what is allowed");
            }
        }
        // Nothing a bad request did hurt the server.
        assert_eq!(app.get("/healthz").await.0, 200);
        assert_eq!(app.get("/api/orders/bad-1").await.0, 200);
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_reached_with_a_trailing_slash_are_sent_to_their_address() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for (path, target) in [
        ("/orders/o-1/", "/orders/o-1"),
        ("/customers/c-1/", "/customers/c-1"),
        ("/search/?q=o-1", "/search?q=o-1"),
        ("/orders/o-1//", "/orders/o-1"),
    ] {
        let response = no_redirects.get(format!("{}{path}", app.base)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 308, "{path}");
        assert_eq!(response.headers()["location"], target, "{path}");
    }
    // Followed, each lands on a page rendered by its own route.
    let response = app.http.get(format!("{}/orders/nope-1/", app.base)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    assert!(response.text().await.unwrap().contains("order nope-1 not found"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_trickles_its_headers_is_cut_off() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &["--header-timeout-secs", "1"]).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let started = Instant::now();
    // A byte every 200 ms: the connection is never quiet, the headers never
    // end. The deadline runs from the first byte.
    let request: Vec<u8> = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ".as_slice(), &b"a".repeat(100)].concat();
    let mut cut = None;
    for byte in request.iter().copied() {
        if stream.write_all(&[byte]).await.is_err() {
            cut = Some(started.elapsed());
            break;
        }
        let mut buffer = [0u8; 256];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await {
            cut = Some(started.elapsed());
            break;
        }
    }
    let cut = cut.expect("the server kept reading a 20-second header");
    assert!(cut >= Duration::from_millis(900) && cut < Duration::from_secs(4), "{cut:?}");
    app.stop().await;
}

/// One request on a raw connection, its answer read whole (headers and a
/// Content-Length body): `None` when the server has closed it.
async fn one_request(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let host = stream.peer_addr().ok()?;
    stream.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await.ok()?.ok()?;
        if read == 0 {
            return None;
        }
        answer.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&answer).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0usize);
            if answer.len() >= end + 4 + length {
                return Some(text);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_idle_for_30_seconds_is_still_served() {
    // The defaults: headers within 5 s, idle up to 75 s (a load balancer
    // keeps its connections 60 s and reuses them).
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let first = one_request(&mut stream).await.expect("first answer");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let again = one_request(&mut stream).await.expect("the idle connection was closed");
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_past_the_idle_timeout_is_closed() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &["--idle-timeout-secs", "2"]).await;
    let address = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    assert!(one_request(&mut stream).await.is_some_and(|a| a.starts_with("HTTP/1.1 200")));
    let started = Instant::now();
    let mut buffer = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the idle connection stayed open: {read:?}");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(1_900) && elapsed < Duration::from_secs(5), "{elapsed:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifty_first_live_stream_from_one_address_is_refused() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let mut open = Vec::new();
    for i in 0..50 {
        let response = app.http.get(format!("{}/api/live", app.base)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "stream {i}");
        open.push(response);
    }
    let refused = app.http.get(format!("{}/api/live", app.base)).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("live connections"), "{body}");
    // Closing one frees its slot.
    drop(open.pop());
    let mut admitted = false;
    for _ in 0..50 {
        let response = app.http.get(format!("{}/api/live", app.base)).send().await.unwrap();
        if response.status().as_u16() == 200 {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted, "a freed slot is given again");
    drop(open);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_stops_answering_gives_a_prompt_503() {
    // A "store" that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            connections.push(stream);
        }
    });
    let app = TestApp::spawn_unprovisioned(Engine::DynamoDbLocal(endpoint), &["--store-timeout-ms", "1000"]).await;
    for path in ["/api/orders/o-1", "/api/pending", "/readyz"] {
        let started = Instant::now();
        let response = app.http.get(format!("{}{path}", app.base)).send().await.unwrap();
        let elapsed = started.elapsed();
        assert_eq!(response.status().as_u16(), 503, "{path}");
        assert!(response.headers().contains_key("retry-after"), "{path}");
        // One store call's budget, with room for a slow machine; the merge's
        // rounds must not multiply it.
        assert!(elapsed < Duration::from_secs(4), "{path} took {elapsed:?}");
    }
    held.abort();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_rate_gets_429_with_retry_after() {
    let app = TestApp::spawn_with(Engine::Dynoxide, &[], &["--api-rate", "2", "--api-burst", "5"]).await;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let response = app.http.get(format!("{}/api/pending", app.base)).send().await.unwrap();
        statuses.push((response.status().as_u16(), response.headers().contains_key("retry-after")));
    }
    assert!(statuses[..5].iter().all(|(s, _)| *s == 200), "{statuses:?}");
    assert!(statuses[5..].iter().all(|(s, retry)| *s == 429 && *retry), "{statuses:?}");
    // Probes are not API calls, and are not limited.
    assert_eq!(app.http.get(format!("{}/healthz", app.base)).send().await.unwrap().status().as_u16(), 200);
    app.stop().await;
}

//! How answers travel: compressed when the client accepts it (pages, JSON,
//! CSV, JSON lines, static files; precompressed copies served as written),
//! never the live event stream, which must deliver each event as it
//! happens; hashed assets cached for good, pages revalidated.
//!
//! These are the HTTP layer's, whatever the store: they run on the
//! embedded one. Static files are the ones `make build` left in
//! `target/site` (the tests link them through its hash file, as the server
//! does).

use crate::common;

use common::{Engine, LiveStream, TestApp, new_order_json};
use northwind_ops::model::LiveEvent;
use northwind_ops::server::stream::consumer::{Consumer, ConsumerOptions};
use reqwest::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, VARY};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// What a page needs and a hashed asset does not (the server's `cache_control`).
const DOCUMENT_ONLY: [&str; 5] =
    ["content-security-policy", "referrer-policy", "x-frame-options", "last-modified", "x-request-id"];

/// One answer, read raw (this client decompresses nothing by itself).
struct Raw {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: reqwest::header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as sent before any content coding.
    fn decoded(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self.header(CONTENT_ENCODING) {
            None => out.clone_from(&self.body),
            Some("br") => {
                brotli::Decompressor::new(&self.body[..], 4096).read_to_end(&mut out).expect("valid brotli");
            }
            Some("gzip") => {
                flate2::read::GzDecoder::new(&self.body[..]).read_to_end(&mut out).expect("valid gzip");
            }
            Some(other) => panic!("unexpected content coding {other}"),
        }
        out
    }
}

async fn get(app: &TestApp, path: &str, accept: &str) -> Raw {
    let response = app.http.get(format!("{}{path}", app.base)).header(ACCEPT_ENCODING, accept).send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let body = response.bytes().await.unwrap().to_vec();
    Raw { status, headers, body }
}

/// A page with its per-response script nonce blanked (Leptos writes it in
/// `crossorigin` too): two answers of the same page differ in nothing else.
fn without_nonces(html: &[u8]) -> String {
    let mut html = String::from_utf8(html.to_vec()).expect("a page is UTF-8");
    for attribute in ["nonce=\"", "crossorigin=\""] {
        let mut out = String::with_capacity(html.len());
        let mut rest = html.as_str();
        while let Some(at) = rest.find(attribute) {
            let (before, after) = rest.split_at(at + attribute.len());
            out.push_str(before);
            out.push('…');
            rest = &after[after.find('"').expect("a closed attribute")..];
        }
        out.push_str(rest);
        html = out;
    }
    html
}

/// A JSON answer less the time it was read at (`asOf`), which moves on
/// between two requests.
fn without_as_of(json: &[u8]) -> serde_json::Value {
    let mut value: serde_json::Value = serde_json::from_slice(json).expect("JSON");
    if let Some(object) = value.as_object_mut() {
        object.remove("asOf");
    }
    value
}

/// The `/pkg/` paths a page links (stylesheet, script, wasm and the chunks
/// it preloads).
fn pkg_links(html: &str) -> Vec<String> {
    html.split("href=\"/pkg/").skip(1).filter_map(|rest| rest.split('"').next()).map(|p| format!("/pkg/{p}")).collect()
}

fn site_file(path: &str) -> PathBuf {
    Path::new("target/site").join(path.trim_start_matches('/'))
}

/// Orders in the app's list, so the exports have rows; the id of one.
async fn some_orders(app: &TestApp) -> String {
    for i in 0..3 {
        let (status, body) = app.post("/api/orders", new_order_json(&format!("zip-{i}"), "c-zip")).await;
        assert_eq!(status, 201, "{body}");
    }
    "zip-0".into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_answer_is_compressed_when_asked_and_the_same_decompressed() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let order = some_orders(&app).await;
    let page = get(&app, "/", "identity").await;
    assert_eq!(page.status, 200);
    let links = pkg_links(&String::from_utf8_lossy(&page.body));
    let asset = |suffix: &str| {
        links.iter().find(|l| l.starts_with("/pkg/northwind-ops.") && l.ends_with(suffix)).cloned().unwrap_or_else(
            || {
                panic!("the page links no {suffix} of its own: {links:?}");
            },
        )
    };
    let kinds = [
        ("a page", format!("/orders/{order}")),
        ("the sign-in page", "/login".to_string()),
        ("JSON", format!("/api/orders/{order}")),
        ("JSON", "/api/pending?limit=5".to_string()),
        ("CSV", "/api/pending.csv".to_string()),
        ("JSON lines", "/api/pending.jsonl".to_string()),
        ("the stylesheet", asset(".css")),
        ("the script", asset(".js")),
        ("the wasm bundle", asset(".wasm")),
    ];
    for (kind, path) in &kinds {
        let plain = get(&app, path, "identity").await;
        assert_eq!(plain.status, 200, "{kind} {path}");
        assert_eq!(plain.header(CONTENT_ENCODING), None, "{kind} {path}: identity asked for");
        for coding in ["br", "gzip"] {
            let packed = get(&app, path, coding).await;
            assert_eq!(packed.status, 200, "{kind} {path} ({coding})");
            assert_eq!(packed.header(CONTENT_ENCODING), Some(coding), "{kind} {path}");
            assert!(packed.header(VARY).is_some_and(|v| v.contains("accept-encoding")), "{kind} {path}: Vary");
            assert!(packed.body.len() < plain.body.len(), "{kind} {path} ({coding}) is smaller on the wire");
            let (was, is) = (plain.body.clone(), packed.decoded());
            let content_type = plain.header(CONTENT_TYPE).unwrap_or_default();
            if content_type.starts_with("text/html") {
                assert_eq!(without_nonces(&is), without_nonces(&was), "{kind} {path} ({coding})");
            } else if content_type.starts_with("application/json") {
                assert_eq!(without_as_of(&is), without_as_of(&was), "{kind} {path} ({coding})");
            } else {
                assert!(is == was, "{kind} {path} ({coding}): {} bytes decompressed, {} plain", is.len(), was.len());
            }
        }
        if path.starts_with("/pkg/") {
            let on_disk = std::fs::read(site_file(path)).unwrap();
            assert!(plain.body == on_disk, "{path} is the built file");
        }
    }
    // A client that accepts both gets brotli, the smaller.
    assert_eq!(get(&app, "/api/pending.csv", "gzip, br").await.header(CONTENT_ENCODING), Some("br"));
    app.stop().await;
}

/// Precompressed copies beside a static file, removed when dropped.
struct Precompressed(Vec<PathBuf>);

impl Drop for Precompressed {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precompressed_copies_of_static_files_are_sent_as_written() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let page = get(&app, "/login", "identity").await;
    let links = pkg_links(&String::from_utf8_lossy(&page.body));
    let css = links.iter().find(|l| l.ends_with(".css")).expect("a stylesheet").clone();
    let original = std::fs::read(site_file(&css)).unwrap();
    // As a release build writes them (`cargo leptos build --release --precompress`).
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, ..Default::default() };
    brotli::BrotliCompress(&mut &original[..], &mut br, &params).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &original).unwrap();
    let gz = gz.finish().unwrap();
    let (br_path, gz_path) = (site_file(&format!("{css}.br")), site_file(&format!("{css}.gz")));
    let _cleanup = Precompressed(vec![br_path.clone(), gz_path.clone()]);
    std::fs::write(&br_path, &br).unwrap();
    std::fs::write(&gz_path, &gz).unwrap();

    for (coding, written) in [("br", &br), ("gzip", &gz)] {
        let answer = get(&app, &css, coding).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header(CONTENT_ENCODING), Some(coding));
        // The file as written, its length known up front: not compressed on the fly.
        assert_eq!(answer.header(CONTENT_LENGTH), Some(written.len().to_string().as_str()), "{coding}");
        assert!(&answer.body == written, "{css} ({coding}) is the precompressed file");
        assert!(answer.decoded() == original);
        assert_eq!(answer.header(CACHE_CONTROL), Some(IMMUTABLE));
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashed_assets_are_cached_for_good_and_pages_revalidated() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    for page in ["/", "/login", "/capacity"] {
        let started = std::time::Instant::now();
        let answer = get(&app, page, "br").await;
        // Seen once in a full run: a 503 here. Its page says whether the
        // store was unreachable or the request ran out of time.
        let body = answer.decoded();
        let said = String::from_utf8_lossy(&body).chars().take(400).collect::<String>();
        assert_eq!(answer.status, 200, "{page} after {:?}: {said}", started.elapsed());
        assert_eq!(answer.header(CACHE_CONTROL), Some("no-cache, private"), "{page}");
        let html = String::from_utf8(body).unwrap();
        let links = pkg_links(&html);
        // The stylesheet, the script and the wasm, each under a name that carries its hash.
        for suffix in [".css", ".js", ".wasm"] {
            let own = links.iter().find(|l| l.starts_with("/pkg/northwind-ops.") && l.ends_with(suffix));
            let own = own.unwrap_or_else(|| panic!("{page} links no {suffix} of its own: {links:?}"));
            let hash = own.trim_start_matches("/pkg/northwind-ops.").trim_end_matches(suffix);
            assert!(
                hash.len() >= 8 && hash.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{own}"
            );
        }
        for link in &links {
            let asset = get(&app, link, "br").await;
            assert_eq!(asset.status, 200, "{page} links {link}");
            assert_eq!(asset.header(CACHE_CONTROL), Some(IMMUTABLE), "{link}");
            // A file that is never revalidated nor shown as a document goes
            // without the headers only those read; its type is still enforced.
            for name in DOCUMENT_ONLY {
                assert_eq!(asset.headers.get(name), None, "{link} carries {name}");
            }
            assert_eq!(asset.headers.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]));
        }
        // The page itself keeps them all.
        let again = get(&app, page, "br").await;
        for name in DOCUMENT_ONLY.iter().filter(|name| **name != "last-modified") {
            assert!(again.headers.contains_key(*name), "{page} lacks {name}");
        }
    }
    // Neither the API nor a file without a hashed name is kept for good.
    let api = get(&app, "/api/pending", "br").await;
    assert_eq!(api.status, 200);
    assert_ne!(api.header(CACHE_CONTROL), Some(IMMUTABLE));
    let icon = get(&app, "/favicon.ico", "br").await;
    assert_eq!(icon.status, 200);
    assert_ne!(icon.header(CACHE_CONTROL), Some(IMMUTABLE));
    // A missing asset is not cached for good either.
    let missing = get(&app, "/pkg/northwind-ops.0000000000000000.wasm", "br").await;
    assert_eq!(missing.status, 404);
    assert_ne!(missing.header(CACHE_CONTROL), Some(IMMUTABLE));
    app.stop().await;
}

/// Every nonce a page's tags carry.
fn nonces(html: &str) -> Vec<&str> {
    html.split(" nonce=\"").skip(1).filter_map(|rest| rest.split('"').next()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pages_policy_names_the_nonce_its_scripts_carry_fresh_for_every_answer() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let order = some_orders(&app).await;
    let mut seen = Vec::new();
    for page in ["/", "/", "/login", "/capacity", &format!("/orders/{order}"), "/no-such-page"] {
        let answer = get(&app, page, "identity").await;
        let policy = answer.header(reqwest::header::CONTENT_SECURITY_POLICY).expect("a policy").to_string();
        let html = String::from_utf8(answer.decoded()).unwrap();
        let carried = nonces(&html);
        assert!(carried.len() >= 2, "{page}: the hydration and live scripts carry a nonce: {carried:?}");
        assert!(carried.iter().all(|n| *n == carried[0]), "{page}: one nonce per answer: {carried:?}");
        assert!(policy.contains(&format!("'nonce-{}'", carried[0])), "{page}: {policy} names {}", carried[0]);
        assert!(!seen.contains(&carried[0].to_string()), "{page}: a nonce is never reused");
        seen.push(carried[0].to_string());
    }
    // Not a page: the strict policy, no script at all.
    let api = get(&app, "/api/pending", "identity").await;
    let policy = api.header(reqwest::header::CONTENT_SECURITY_POLICY).expect("a policy");
    assert!(policy.starts_with("default-src 'none'") && !policy.contains("nonce"), "{policy}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_is_sent_uncompressed_and_each_event_as_it_happens() {
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(ACCEPT_ENCODING, "br, gzip".parse().unwrap());
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", app.tokens[&northwind_ops::model::Role::Ops]).parse().unwrap(),
    );
    let http = reqwest::Client::builder().default_headers(headers).build().unwrap();

    let opened = Instant::now();
    let mut response = http.get(format!("{}/api/live", app.base)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers().get(CONTENT_ENCODING), None, "a compressor would hold events back");
    assert!(response.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    let first = tokio::time::timeout(Duration::from_secs(5), response.chunk()).await.expect("a first event").unwrap();
    assert!(String::from_utf8_lossy(&first.unwrap()).contains("data:"), "the day's counters come first");
    println!("first event after {:?}", opened.elapsed());
    drop(response);

    // Every order, as the consumer applies it, on a stream a br-accepting client opened.
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let consumer =
        Arc::new(Consumer::new(app.store.clone(), ConsumerOptions::new("delivery"), Some(app.service.live.clone())));
    let task = tokio::spawn({
        let consumer = consumer.clone();
        async move {
            consumer
                .run(async move {
                    let _ = stopped.changed().await;
                })
                .await
        }
    });
    let live = LiveStream::open(&http, &app.base, "").await;
    for i in 0..5 {
        let id = format!("live-zip-{i}");
        let (status, body) = app.post("/api/orders", new_order_json(&id, "c-zip")).await;
        assert_eq!(status, 201, "{body}");
        let written = Instant::now();
        let entered = |e: &LiveEvent| matches!(e, LiveEvent::Entered { order, .. } if order.order_id == id);
        let seen = live.wait_for(Duration::from_secs(3), entered).await;
        let seen = seen.unwrap_or_else(|| panic!("order {id} not on the live stream within 3 s"));
        println!("{id}: on the stream {:?} after its write", seen.saturating_duration_since(written));
    }
    let _ = stop.send(true);
    task.await.unwrap();
    app.stop().await;
}

/// Starting another server in a process that is serving pages leaves those
/// pages alone. Leptos lists an app's routes by rendering it with a
/// process-wide flag set that parks any resource first polled meanwhile
/// (leptos-rs/leptos#4773): a page rendered then waited for the request
/// timeout. Here three clients ask for pages with resources while more
/// servers start beside this one, one every 20 ms or so, till they are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_answer_while_more_servers_start_in_the_same_process() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const ROUNDS: usize = 40;
    let app = TestApp::spawn(Engine::Dynoxide).await;
    let order = some_orders(&app).await;
    let order_page = format!("/orders/{order}");
    let asking = AtomicUsize::new(3);
    let ask = |pages: [&str; 2]| {
        let (app, asking) = (&app, &asking);
        let pages = pages.map(|p| if p == "order" { order_page.clone() } else { p.to_string() });
        async move {
            for _ in 0..ROUNDS {
                for page in &pages {
                    let started = Instant::now();
                    let answer = tokio::time::timeout(Duration::from_secs(10), get(app, page, "identity")).await;
                    let answer =
                        answer.unwrap_or_else(|_| panic!("{page} still rendering after {:?}", started.elapsed()));
                    assert_eq!(answer.status, 200, "{page} after {:?}", started.elapsed());
                }
            }
            asking.fetch_sub(1, Ordering::Relaxed);
        }
    };
    let start_more = async {
        let mut started = 0;
        while asking.load(Ordering::Relaxed) > 0 {
            app.another_instance().await.stop().await;
            started += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        started
    };
    let (started, (), (), ()) =
        tokio::join!(start_more, ask(["/", "/capacity"]), ask(["order", "/capacity"]), ask(["/", "order"]));
    assert!(started >= 3, "servers started while pages were asked for: {started}");
    app.stop().await;
}

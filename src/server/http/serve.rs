//! The web server: the Leptos pages, the JSON API, static files, and the
//! limits every connection and request is held to.

use super::api;
use super::middleware;
use super::state::AppState;
use crate::app::data::PageSettings;
use crate::app::{App, shell};
use crate::server::auth::access::{RouteTable, Routes};
use crate::server::auth::limits::{SignInLimits, SignInRules};
use crate::server::auth::redirect::Home;
use crate::server::auth::routes::{self, Provider, SignInState};
use crate::server::auth::sessions::DynamoSessions;
use crate::server::auth::{self, Auth, AuthSettings, Gate};
use crate::server::http::config::{Limits, ServeArgs};
use crate::server::rate_limit::{ApiRate, RateLimit};
use crate::server::service::Service;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use leptos::config::get_configuration;
use leptos::prelude::*;
use leptos_axum::{AxumRouteListing, generate_route_list};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tower_http::CompressionLevel;
use tower_http::compression::{CompressionLayer, DefaultPredicate};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_sessions::SessionManagerLayer;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "nwo_session";

/// The app's pages as Leptos lists them, worked out once per process.
///
/// Listing them renders the app with a process-wide flag set that parks
/// every resource first polled meanwhile, on any thread, for good
/// (leptos_server's `SuppressResourceLoad`; leptos-rs/leptos#4773). A
/// second server started in a process already serving pages (the tests,
/// each with its own app) would leave a page then being rendered waiting
/// until the request timeout. Listed once, before any server of this
/// process can serve a page, nothing renders while the flag is set.
pub fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The Leptos options as cargo-leptos passes them (LEPTOS_SITE_ROOT,
/// LEPTOS_SITE_ADDR, the reload port).
pub fn leptos_options() -> LeptosOptions {
    let mut options = get_configuration(None).map(|conf| conf.leptos_options).unwrap_or_else(|err| {
        tracing::warn!(error = %err, "Leptos settings unreadable; using the defaults");
        LeptosOptions::builder().output_name("northwind-ops").build()
    });
    if std::env::var_os("LEPTOS_HASH_FILES").is_none()
        && let Some(path) = hash_file(&options)
    {
        options.hash_files = true;
        // Leptos joins this to the binary's directory: a full path stands as it is.
        options.hash_file = path.display().to_string().into();
    }
    options
}

/// The hash file the build left (`hash-files` in Cargo.toml: the site's
/// assets then carry hashed names, and the shell must link those): beside
/// this binary, or one directory up for a test or benchmark binary, which
/// cargo puts in `deps/` under the server's directory.
fn hash_file(options: &LeptosOptions) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent().filter(|_| dir.ends_with("deps"))]
        .into_iter()
        .flatten()
        .map(|dir| dir.join(options.hash_file.as_ref()))
        .find(|path| path.is_file())
}

/// The app, its Leptos options set to the address it is served on; a
/// sign-in setting that does not hold is an error.
pub fn router(service: Service, args: &ServeArgs, addr: SocketAddr) -> std::io::Result<Router> {
    routed(service, args, addr).map(|(router, _)| router)
}

/// The app, and the table of its routes with who may reach each.
fn routed(service: Service, args: &ServeArgs, addr: SocketAddr) -> std::io::Result<(Router, Arc<RouteTable>)> {
    let mut leptos_options = leptos_options();
    leptos_options.site_addr = addr;
    let oidc = args.oidc.settings(&args.auth.public_url(addr)).map_err(std::io::Error::other)?;
    let settings = PageSettings { stuck_after_minutes: args.stuck_after_minutes, single_sign_on: oidc.is_some() };
    let limits = args.limits;
    let home = Home::new(&args.auth.public_url(addr)).map_err(std::io::Error::other)?;
    let auth = Auth::new(
        service.store.clone(),
        AuthSettings {
            idle: Duration::from_secs(args.auth.session_idle_minutes * 60),
            absolute: Duration::from_secs(args.auth.session_max_hours * 3600),
            allowed_hosts: args.auth.allowed_hosts(addr),
            secure_cookies: args.auth.secure_cookies(addr),
            home,
        },
    );
    let sign_in = SignInState {
        auth: auth.clone(),
        attempts: SignInLimits::new(SignInRules {
            per_client_per_minute: args.auth.sign_in_attempts,
            free: args.auth.sign_in_account_attempts,
            max_delay: Duration::from_secs(args.auth.sign_in_delay_max_secs),
        }),
        provider: oidc.map(Provider::new),
    };
    let hashed_assets = leptos_options.hash_files;
    let state = AppState { service: service.clone(), leptos_options: leptos_options.clone(), limits, sign_in };
    // Installed before the first request is counted.
    crate::server::telemetry::prometheus();
    let context = move || {
        provide_context(service.clone());
        provide_context(settings);
        // The script nonce the answer's policy names (see `security_headers`).
        if let Some(nonce) = use_context::<axum::http::request::Parts>().as_ref().and_then(middleware::page_nonce) {
            provide_context(nonce);
        }
    };
    let pages = {
        let options = leptos_options.clone();
        move || shell(options.clone())
    };
    // Every route is added with its access; the guard reads the table.
    // Everything but the live stream is held to the request timeout.
    let timed = Routes::new()
        .merge(api::routes())
        .merge(routes::routes())
        .leptos(&state, page_routes(), crate::app::PAGES, context.clone(), pages)
        .route_layer(axum::middleware::from_fn(crate::server::http::telemetry::mark_route))
        .static_files(
            &leptos_options.site_root,
            leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell),
        )
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_secs(limits.request_timeout_secs),
        ));
    let rate = ApiRate::new(limits.api_rate, limits.api_burst);
    let trusted = args.auth.trusted_proxies();
    let live = api::live_routes().route_layer(axum::middleware::from_fn(crate::server::http::telemetry::mark_route));
    let (app, table) = timed.merge(live).into_parts();
    let routes = Arc::new(table);
    let gate = Gate {
        auth: auth.clone(),
        routes: routes.clone(),
        refusals_recorded: RateLimit::per_minute(
            auth::REFUSALS_RECORDED_PER_MINUTE,
            auth::REFUSALS_RECORDED_PER_MINUTE,
        ),
    };
    let router = app
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes as usize))
        .layer(axum::middleware::from_fn_with_state(gate, auth::guard))
        .layer(sessions(&auth))
        .layer(axum::middleware::from_fn(move |req, next| middleware::rate_limit(rate.clone(), req, next)))
        .layer(axum::middleware::from_fn(middleware::canonical_paths))
        .layer(axum::middleware::from_fn(middleware::security_headers))
        .layer(axum::middleware::from_fn(middleware::json_errors))
        // Outside json_errors, which reads error bodies back as JSON.
        .layer(compression())
        .layer(middleware::request_ids())
        // Outside request_ids: the request's log span names the client.
        .layer(axum::middleware::from_fn(move |req, next| auth::client::client_addr(trusted.clone(), req, next)))
        // Outside request_ids: a hashed asset goes without the request id too.
        .layer(axum::middleware::from_fn(move |req, next| middleware::cache_control(hashed_assets, req, next)))
        // Outermost: every request is counted, those refused before routing too.
        .layer(axum::middleware::from_fn(crate::server::http::telemetry::track_http))
        .with_state(state);
    Ok((router, routes))
}

/// Every route the app serves and who may reach it: the table the guard
/// reads, as `router` builds it (the role matrix test walks it).
pub fn route_table(service: Service, args: &ServeArgs, addr: SocketAddr) -> std::io::Result<Arc<RouteTable>> {
    routed(service, args, addr).map(|(_, routes)| routes)
}

/// The compressors' quality: brotli 5 rather than tower-http's 4, since the
/// dashboard's page (25 rows) is 6.6 KB in brotli at 4 and 6.1 KB at 5 for
/// about a tenth more of the compressor's time (0.61 to 0.68 ms a page, as
/// measured with Node's brotli); 6 and above save a few dozen bytes more
/// at a growing cost. tower-http sets one level for every coding, so gzip
/// (for the rare client without brotli) is at 5 too, where flate2's
/// default is 6: not measured, a slightly larger answer for a little less
/// time.
const PAGE_QUALITY: i32 = 5;

/// Answers compressed (brotli, else gzip) for a client that accepts it:
/// pages, JSON, CSV and JSON lines as they are written, static files too
/// when the build left no precompressed copy beside them (the release
/// build does: `ServeDir` serves those as they are, and this layer leaves an
/// answer that has a `Content-Encoding` alone). Never the live event stream
/// (`text/event-stream` is excluded by the default predicate): a compressor
/// would hold events back until its buffer filled.
fn compression() -> CompressionLayer<DefaultPredicate> {
    CompressionLayer::new().quality(CompressionLevel::Precise(PAGE_QUALITY))
}

/// Sessions in the store, behind an HttpOnly, SameSite=Lax cookie that is
/// Secure unless the app is plain-HTTP loopback; they end after the idle
/// time without a request (and `guard` ends them at the absolute limit).
fn sessions(auth: &Auth) -> SessionManagerLayer<DynamoSessions> {
    let idle = tower_sessions::cookie::time::Duration::seconds(auth.settings.idle.as_secs() as i64);
    SessionManagerLayer::new(DynamoSessions::new(auth.store.clone()))
        .with_name(SESSION_COOKIE)
        .with_http_only(true)
        .with_same_site(tower_sessions::cookie::SameSite::Lax)
        .with_secure(auth.settings.secure_cookies)
        .with_expiry(tower_sessions::Expiry::OnInactivity(idle))
}

/// Binds `--addr` (port 0 picks a free one) and serves until `shutdown`
/// resolves. Returns the bound address and the server's task.
pub async fn start(
    service: Service,
    args: &ServeArgs,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(args.addr.unwrap_or_else(|| leptos_options().site_addr)).await?;
    let addr = listener.local_addr()?;
    let app = router(service, args, addr)?;
    let task = tokio::spawn(serve(listener, app, args.limits, shutdown));
    Ok((addr, task))
}

/// Accepts connections up to the cap and serves each until it closes, is
/// idle for `--idle-timeout-secs`, or takes longer than
/// `--header-timeout-secs` to send a request's headers; on shutdown lets
/// the requests under way finish.
async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Connections are told to finish through `closing`, and waited for on `connections`.
    let (closing, connections) = (CancellationToken::new(), TaskTracker::new());
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections as usize));
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, usually: wait rather than spin.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%remote, "connection refused: at --max-connections");
            continue;
        };
        let clock = Arc::new(HeadClock::default());
        let service = {
            let (parsed, answered) = (clock.clone(), clock.clone());
            app.clone()
                .map_request(move |mut req: Request<Incoming>| {
                    parsed.head_parsed();
                    req.extensions_mut().insert(ConnectInfo(remote));
                    req.map(axum::body::Body::new)
                })
                .map_response(move |response| {
                    answered.answered();
                    response
                })
        };
        let closing = closing.clone();
        connections.spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            // Hyper's header timer runs from the moment it waits for a
            // request, so between requests it is the idle timeout; the
            // header deadline proper runs from a request's first byte.
            builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.idle_timeout());
            let io = TokioIo::new(Watched { inner: stream, clock: clock.clone() });
            let connection = builder.serve_connection_with_upgrades(io, TowerToHyperService::new(service));
            tokio::pin!(connection);
            let overdue = clock.overdue(limits.header_timeout());
            tokio::pin!(overdue);
            let mut finishing = false;
            loop {
                tokio::select! {
                    _ = connection.as_mut() => break,
                    _ = closing.cancelled(), if !finishing => {
                        finishing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    // Dropping the connection closes it: a client trickling
                    // its headers holds nothing.
                    _ = &mut overdue => {
                        tracing::debug!(%remote, "closed: request headers too slow");
                        break;
                    }
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    // Tell every connection, then wait until the last one has finished.
    closing.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// When the request now arriving on a connection began: set by its first
/// byte, cleared once its headers are parsed. Between requests (after an
/// answer, before the next byte) the connection is idle, not slow.
struct HeadClock {
    awaiting: std::sync::atomic::AtomicBool,
    started: tokio::sync::watch::Sender<Option<tokio::time::Instant>>,
}

impl Default for HeadClock {
    fn default() -> Self {
        HeadClock { awaiting: std::sync::atomic::AtomicBool::new(true), started: tokio::sync::watch::Sender::new(None) }
    }
}

impl HeadClock {
    fn bytes_read(&self) {
        if self.awaiting.load(std::sync::atomic::Ordering::Relaxed) {
            self.started.send_if_modified(|started| {
                let first = started.is_none();
                if first {
                    *started = Some(tokio::time::Instant::now());
                }
                first
            });
        }
    }

    fn head_parsed(&self) {
        self.awaiting.store(false, std::sync::atomic::Ordering::Relaxed);
        self.started.send_replace(None);
    }

    fn answered(&self) {
        self.awaiting.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Resolves once a request's headers have taken longer than `limit`.
    async fn overdue(&self, limit: Duration) {
        let mut started = self.started.subscribe();
        loop {
            let since = *started.borrow_and_update();
            match since {
                None => {
                    if started.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                }
                Some(since) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(since + limit) => {
                            if *started.borrow() == Some(since) {
                                return;
                            }
                        }
                        _ = started.changed() => {}
                    }
                }
            }
        }
    }
}

/// A connection's socket, telling its clock when bytes arrive.
struct Watched {
    inner: tokio::net::TcpStream,
    clock: Arc<HeadClock>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.bytes_read();
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

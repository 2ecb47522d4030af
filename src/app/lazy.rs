//! Pages loaded on demand. `cargo leptos build --split` cuts each page's code
//! out of the main wasm module into a chunk of its own (wasm-split, at the
//! `wasm_split` points below), so the first load of any page fetches the
//! shell and that page, not every page. The dashboard is the exception: it
//! is in the main module (see `App`), since wasm-split cuts the code pages
//! share into many small chunks, and over HTTP/1.1's six connections each
//! costs a round trip. The server names the chunks a page needs in its
//! `<head>` (`rel=preload`), so they load beside the main module rather
//! than after it.
//!
//! A chunk that fails to load (a dropped connection, a deploy that replaced
//! it) is not a dead page: the route shows what happened and a button that
//! tries again. The loader forgets a failed attempt, so a retry starts over.

use leptos::prelude::*;
use leptos_router::LazyRoute;
use std::future::Future;
use std::pin::Pin;

/// A page's chunk did not load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkFailed;

impl From<leptos::wasm_split::SplitLoaderError> for ChunkFailed {
    fn from(_: leptos::wasm_split::SplitLoaderError) -> Self {
        ChunkFailed
    }
}

/// Loads a page's chunk (at once on the server, where nothing is split)
/// and builds the page.
pub type Loader = fn() -> Pin<Box<dyn Future<Output = Result<AnyView, ChunkFailed>> + Send>>;

/// One lazily loaded page: `$route` for the router, its code in the chunk
/// `$chunk` (the name the split manifest files it under), fetched by
/// `$preload`, built by `$page`.
macro_rules! lazy_page {
    ($route:ident, $chunk:ident, $preload:ident, $page:path) => {
        pub struct $route;

        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            /// The router loads the chunk before it builds the view, and
            /// hydration waits for it: the page is then built at once, as
            /// the server built it. A failure here is shown by `view`,
            /// which tries once more.
            async fn preload() {
                let _ = $preload().await;
            }

            async fn view(_: Self) -> AnyView {
                show(|| {
                    #[cfg(feature = "ssr")]
                    preload_links(stringify!($chunk));
                    Box::pin($chunk())
                })
                .await
            }
        }

        #[leptos::wasm_split::wasm_split($chunk, wasm_split_path = ::leptos::wasm_split, preload($preload), fallible)]
        fn $chunk() -> Result<AnyView, ChunkFailed> {
            Ok(view! { <$page/> }.into_any())
        }
    };
}

lazy_page!(OrderRoute, order_page, preload_order_page, super::order::OrderPage);
lazy_page!(CustomerRoute, customer_page, preload_customer_page, super::customer::CustomerPage);
lazy_page!(SearchRoute, search_page, preload_search_page, super::search::SearchPage);
lazy_page!(LoginRoute, login_page, preload_login_page, super::login::LoginPage);
lazy_page!(AuditRoute, audit_page, preload_audit_page, super::audit::AuditPage);
lazy_page!(AdminRoute, admin_page, preload_admin_page, super::admin::AdminPage);
lazy_page!(CapacityRoute, capacity_page, preload_capacity_page, super::capacity::CapacityPage);
lazy_page!(SalesRoute, sales_page, preload_sales_page, super::sales::SalesPage);

/// Names a page's chunk files in the page's head, for the browser to fetch
/// while it fetches the main module (else they would wait for it). Leptos
/// can add these itself, but reads its context from outside the page's
/// owner and so leaves them out of some answers; here they are added while
/// the page is being built, from the split manifest Leptos read.
#[cfg(feature = "ssr")]
fn preload_links(chunk: &str) {
    use leptos_meta::Link;
    let Some(manifest) = use_context::<leptos::WasmSplitManifest>() else { return };
    let Some((pkg, files, loader)) = manifest.0.try_read_value().map(|read| {
        let (pkg, all, loader) = &*read;
        (pkg.clone(), all.get(chunk).cloned().unwrap_or_default(), loader.clone())
    }) else {
        return;
    };
    for file in files {
        let href = format!("{pkg}/{file}.wasm");
        let _ =
            view! { <Link rel="preload" href as_="fetch" type_="application/wasm" crossorigin="anonymous"/> }.to_html();
    }
    let _ = view! { <Link rel="modulepreload" href=format!("{pkg}/{loader}")/> }.to_html();
}

/// The page, or what went wrong and a way to try again.
async fn show(load: Loader) -> AnyView {
    match load().await {
        Ok(page) => page,
        Err(ChunkFailed) => view! { <LoadFailed load/> }.into_any(),
    }
}

/// The page's code did not arrive: says so, and loads it again on request
/// (the page appears in place when it does).
#[component]
fn LoadFailed(load: Loader) -> impl IntoView {
    let attempt = RwSignal::new(0u32);
    let retry = move |_| attempt.update(|n| *n += 1);
    view! {
        {move || {
            let first = attempt.get() == 0;
            Suspend::new(async move {
                let page = if first { Err(ChunkFailed) } else { load().await };
                page.unwrap_or_else(|ChunkFailed| {
                    view! {
                        <div class="error" role="alert" data-testid="chunk-failed">
                            <p>"This page's code did not load: the connection may have dropped."</p>
                            <p><button type="button" on:click=retry data-testid="chunk-retry">"Try again"</button></p>
                        </div>
                    }
                    .into_any()
                })
            })
        }}
    }
}

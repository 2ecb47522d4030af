//! Northwind Ops: an operations console for order data kept in DynamoDB.
//!
//! `model` and `app` compile for both the server and the browser; everything
//! that talks to a store lives under `server`, which only the `ssr` build has.

// The dashboard's view is one deeply nested type; release builds (which do
// not erase component types) need more than the default 128 levels for it.
#![recursion_limit = "256"]

pub mod app;
pub mod model;
#[cfg(feature = "ssr")]
pub mod server;

#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // Lazy: a page's code may still be loading (its own wasm chunk, see
    // app::lazy) when hydration reaches it.
    leptos::mount::hydrate_lazy(app::App);
}

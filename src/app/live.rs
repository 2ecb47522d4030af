//! The dashboard's live connection: server-sent events from `/api/live`,
//! reconnected by leptos-use's `use_event_source`. Events are queued with a
//! sequence number so a view applies each exactly once, however quickly
//! they arrive.
//! (The server renders with the same types but never connects.)
#![cfg_attr(not(feature = "hydrate"), allow(dead_code))]

use crate::model::LiveEvent;
use leptos::prelude::*;

/// Events kept for views that have not applied them yet.
const KEEP: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveStatus {
    Connecting,
    Up,
    Down,
}

#[derive(Clone, Copy)]
pub struct Live {
    pub events: RwSignal<Vec<(u64, LiveEvent)>>,
    pub status: RwSignal<LiveStatus>,
    /// Set by each event; cleared when the page is read again.
    pub dirty: RwSignal<bool>,
    next_seq: StoredValue<u64>,
}

impl Live {
    pub fn new() -> Self {
        Self {
            events: RwSignal::new(Vec::new()),
            status: RwSignal::new(LiveStatus::Connecting),
            dirty: RwSignal::new(false),
            next_seq: StoredValue::new(1),
        }
    }

    /// The sequence number the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq.get_value()
    }

    pub fn push(&self, event: LiveEvent) {
        let seq = self.next_seq.get_value();
        self.next_seq.set_value(seq + 1);
        self.events.update(|events| {
            events.push((seq, event));
            if events.len() > KEEP {
                events.drain(..events.len() - KEEP);
            }
        });
        self.dirty.set(true);
    }
}

#[cfg(feature = "hydrate")]
pub use connection::connect;

#[cfg(feature = "hydrate")]
mod connection {
    use super::*;
    use codee::string::FromToStringCodec;
    use leptos_use_event_source::{
        ReconnectLimit, UseEventSourceOnEventReturn, UseEventSourceOptions, use_event_source_with_options,
    };
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use wasm_bindgen::JsCast;
    use web_sys::MessageEvent;

    /// Milliseconds between attempts to reopen a stream the browser gave up on
    /// (an error answer, the server restarting); it retries a dropped one itself.
    const RECONNECT_MS: u64 = 3_000;

    /// Opens the connection (leptos-use's `use_event_source`, reconnected
    /// without limit); the returned function closes it for good.
    pub fn connect(url: String, live: Live, on_resync: impl Fn() + Send + Sync + 'static) -> impl FnOnce() {
        // Once a connection has been open, a new one may have missed events.
        let opened_before = Arc::new(AtomicBool::new(false));
        let on_event = move |event: &web_sys::Event| match event.type_().as_str() {
            "open" => {
                live.status.set(LiveStatus::Up);
                // The server ends streams now and then (and restarts); what
                // happened while disconnected is read again.
                if opened_before.swap(true, Ordering::Relaxed) {
                    on_resync();
                }
                UseEventSourceOnEventReturn::ProcessMessage
            }
            "error" => {
                live.status.set(LiveStatus::Down);
                UseEventSourceOnEventReturn::ProcessMessage
            }
            _ => {
                // Every event is applied here, as it arrives: the library's
                // `message` signal keeps only the latest, and a sale's burst
                // must not lose one.
                let data = event.dyn_ref::<MessageEvent>().and_then(|m| m.data().as_string());
                match data.map(|data| serde_json::from_str::<LiveEvent>(&data)) {
                    Some(Ok(LiveEvent::Resync)) => on_resync(),
                    Some(Ok(event)) => live.push(event),
                    _ => {}
                }
                UseEventSourceOnEventReturn::IgnoreProcessingMessage
            }
        };
        live.status.set(LiveStatus::Connecting);
        let options = UseEventSourceOptions::default()
            .reconnect_limit(ReconnectLimit::Infinite)
            .reconnect_interval(RECONNECT_MS)
            .on_event(on_event);
        let source = use_event_source_with_options::<String, FromToStringCodec>(url, options);
        move || (source.close)()
    }
}

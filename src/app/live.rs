//! The dashboard's live connection: server-sent events from `/api/live`,
//! opened by the page's head before the wasm arrives, then taken over and
//! reopened whenever the browser gives up on it. Events are queued with a
//! sequence number so a view applies each exactly once, however quickly
//! they arrive. The Sales page follows a rehearsal the same way (`follow`:
//! its own stream and events, the same reopening).
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
pub use connection::{connect, follow};

/// The script the page's head runs (`shell` in `src/app/mod.rs`): on the
/// dashboard it opens the live stream before the wasm arrives, and `connect`
/// takes it over, so on a slow link the stream is up by the time the page is
/// hydrated instead of a round trip after (BENCHMARKS.md, the first load).
/// Its URL must be the one `connect` is given, and its window property
/// `connection::EARLY`: a stream that matches neither is closed, not used.
pub const EARLY_LIVE: &str = r#"if(location.pathname==="/"){var u="/api/live?date="+(new URLSearchParams(location.search).get("date")||""),s=new EventSource(u),q=[];s.onmessage=function(e){q.push(e.data)};window.__northwindLive={url:u,source:s,early:q}}"#;

#[cfg(feature = "hydrate")]
mod connection {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::rc::{Rc, Weak};
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;
    use web_sys::{Event, EventSource, MessageEvent};

    /// Milliseconds between attempts to reopen a stream the browser gave up on
    /// (an error answer, the server restarting); it retries a dropped one itself.
    const RECONNECT_MS: i32 = 3_000;
    /// A handler the stream calls, kept alive while it may.
    type Handler = Closure<dyn FnMut(Event)>;

    /// The window property the head's script leaves its stream in.
    const EARLY: &str = "__northwindLive";

    /// One live connection: its stream (reopened after the browser gives up on
    /// it) and the handlers the stream calls.
    ///
    /// Written against `EventSource` itself rather than leptos-use's
    /// `use_event_source`, which always opens its own: this one also takes
    /// over the stream the page opened before the wasm arrived.
    struct Connection {
        url: String,
        status: RwSignal<LiveStatus>,
        /// Each event's data, as it arrives.
        on_message: Box<dyn Fn(&str)>,
        on_resync: Box<dyn Fn()>,
        /// Once a connection has been open, a new one may have missed events.
        opened_before: Cell<bool>,
        closed: Cell<bool>,
        source: RefCell<Option<EventSource>>,
        handlers: RefCell<Vec<Handler>>,
    }

    /// Opens the connection (or takes over the one the page opened), reopened
    /// without limit; the returned function closes it for good.
    pub fn connect(url: String, live: Live, on_resync: impl Fn() + 'static) -> impl FnOnce() {
        let on_resync = Rc::new(on_resync);
        let resync = on_resync.clone();
        let on_message = move |data: &str| match serde_json::from_str::<LiveEvent>(data) {
            Ok(LiveEvent::Resync) => resync(),
            Ok(event) => live.push(event),
            Err(_) => {}
        };
        let connection = Connection::new(url, live.status, Box::new(on_message), Box::new(move || on_resync()));
        match take_early(&connection.url) {
            Some((source, early)) => {
                let open = source.ready_state() == EventSource::OPEN;
                Connection::attach(&connection, source);
                if open {
                    connection.opened();
                }
                // What arrived before the wasm, in order; nothing more can
                // arrive between these and the handler just set.
                for data in early {
                    connection.message(&data);
                }
            }
            None => Connection::open(&connection),
        }
        move || connection.close()
    }

    /// Opens a stream of other events than the dashboard's: each event's
    /// data goes to `on_message`; `on_resync` is called when a stream that
    /// had been open is open again (events may have been missed). Reopened
    /// as `connect`'s is; the returned function closes it for good.
    pub fn follow(
        url: String,
        status: RwSignal<LiveStatus>,
        on_message: impl Fn(&str) + 'static,
        on_resync: impl Fn() + 'static,
    ) -> impl FnOnce() {
        let connection = Connection::new(url, status, Box::new(on_message), Box::new(on_resync));
        Connection::open(&connection);
        move || connection.close()
    }

    /// The stream the page's head opened for `url`, with the events it
    /// received meanwhile, unless it has failed (then it is closed, and so
    /// is one opened for another day).
    fn take_early(url: &str) -> Option<(EventSource, Vec<String>)> {
        let window = web_sys::window()?;
        let early = js_sys::Reflect::get(&window, &EARLY.into()).ok().filter(|e| e.is_object())?;
        let _ = js_sys::Reflect::delete_property(&window, &EARLY.into());
        let field = |name: &str| js_sys::Reflect::get(&early, &name.into()).ok();
        let source = field("source")?.dyn_into::<EventSource>().ok()?;
        let same = field("url").and_then(|u| u.as_string()).is_some_and(|u| u == url);
        if !same || source.ready_state() == EventSource::CLOSED {
            source.close();
            return None;
        }
        let events = field("early").map(|e| js_sys::Array::from(&e)).unwrap_or_else(js_sys::Array::new);
        Some((source, events.iter().filter_map(|e| e.as_string()).collect()))
    }

    impl Connection {
        fn new(
            url: String,
            status: RwSignal<LiveStatus>,
            on_message: Box<dyn Fn(&str)>,
            on_resync: Box<dyn Fn()>,
        ) -> Rc<Self> {
            status.set(LiveStatus::Connecting);
            Rc::new(Connection {
                url,
                status,
                on_message,
                on_resync,
                opened_before: Cell::new(false),
                closed: Cell::new(false),
                source: RefCell::new(None),
                handlers: RefCell::new(Vec::new()),
            })
        }

        fn open(this: &Rc<Self>) {
            if this.closed.get() {
                return;
            }
            match EventSource::new(&this.url) {
                Ok(source) => Self::attach(this, source),
                Err(_) => {
                    this.status.set(LiveStatus::Down);
                    Self::retry(this);
                }
            }
        }

        /// Makes `source` this connection's stream, its handlers ours.
        fn attach(this: &Rc<Self>, source: EventSource) {
            this.detach();
            let handler = |on: fn(&Rc<Self>, Event)| {
                let weak: Weak<Self> = Rc::downgrade(this);
                Handler::new(move |event| {
                    if let Some(this) = weak.upgrade() {
                        on(&this, event)
                    }
                })
            };
            let on_open = handler(|this, _| this.opened());
            let on_error = handler(|this, _| this.failed());
            // Every event is applied as it arrives: a sale's burst must not lose one.
            let on_message = handler(|this, event| {
                if let Some(data) = event.dyn_ref::<MessageEvent>().and_then(|m| m.data().as_string()) {
                    this.message(&data);
                }
            });
            source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
            source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
            source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
            *this.handlers.borrow_mut() = vec![on_open, on_error, on_message];
            *this.source.borrow_mut() = Some(source);
        }

        fn opened(&self) {
            self.status.set(LiveStatus::Up);
            // The server ends streams now and then (and restarts); what
            // happened while disconnected is read again.
            if self.opened_before.replace(true) {
                (self.on_resync)();
            }
        }

        fn failed(self: &Rc<Self>) {
            self.status.set(LiveStatus::Down);
            // The browser reconnects a dropped stream itself; one it gave up
            // on (closed) is reopened here.
            let gave_up = self.source.borrow().as_ref().is_some_and(|s| s.ready_state() == EventSource::CLOSED);
            if gave_up {
                Self::retry(self);
            }
        }

        fn retry(this: &Rc<Self>) {
            let weak = Rc::downgrade(this);
            let again = Closure::once_into_js(move || {
                if let Some(this) = weak.upgrade() {
                    Self::open(&this);
                }
            });
            if let Some(window) = web_sys::window() {
                let _ =
                    window.set_timeout_with_callback_and_timeout_and_arguments_0(again.unchecked_ref(), RECONNECT_MS);
            }
        }

        fn message(&self, data: &str) {
            (self.on_message)(data)
        }

        fn close(&self) {
            self.closed.set(true);
            self.detach();
        }

        /// Closes the stream, and unhooks its handlers before they are dropped.
        fn detach(&self) {
            if let Some(source) = self.source.borrow_mut().take() {
                source.set_onopen(None);
                source.set_onerror(None);
                source.set_onmessage(None);
                source.close();
            }
            self.handlers.borrow_mut().clear();
        }
    }
}

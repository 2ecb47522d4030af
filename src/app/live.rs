//! The dashboard's live connection: server-sent events from `/api/live`,
//! reconnected with backoff. Events are queued with a sequence number so a
//! view applies each exactly once, however quickly they arrive.
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
    use std::cell::RefCell;
    use std::rc::Rc;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{EventSource, MessageEvent};

    const MAX_BACKOFF_MS: u32 = 30_000;

    struct Connection {
        source: EventSource,
        _handlers: Vec<Closure<dyn FnMut(web_sys::Event)>>,
    }

    #[derive(Default)]
    struct State {
        connection: Option<Connection>,
        attempt: u32,
        closed: bool,
        /// Once a connection has been open, a new one may have missed events.
        opened_before: bool,
    }

    /// Opens the connection; the returned function closes it for good.
    pub fn connect(url: String, live: Live, on_resync: impl Fn() + Clone + 'static) -> impl FnOnce() {
        let state = Rc::new(RefCell::new(State::default()));
        open(url, live, Rc::new(on_resync), state.clone());
        move || {
            let mut state = state.borrow_mut();
            state.closed = true;
            if let Some(connection) = state.connection.take() {
                connection.source.close();
            }
        }
    }

    fn open(url: String, live: Live, on_resync: Rc<dyn Fn()>, state: Rc<RefCell<State>>) {
        if state.borrow().closed {
            return;
        }
        live.status.set(LiveStatus::Connecting);
        let Ok(source) = EventSource::new(&url) else {
            live.status.set(LiveStatus::Down);
            return;
        };
        let on_open = {
            let state = state.clone();
            let on_resync = on_resync.clone();
            Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
                let reopened = {
                    let mut state = state.borrow_mut();
                    state.attempt = 0;
                    std::mem::replace(&mut state.opened_before, true)
                };
                live.status.set(LiveStatus::Up);
                // The server ends streams now and then (and restarts); what
                // happened while disconnected is read again.
                if reopened {
                    on_resync();
                }
            })
        };
        let on_message = {
            let on_resync = on_resync.clone();
            Closure::<dyn FnMut(web_sys::Event)>::new(move |event: web_sys::Event| {
                let Some(data) = event.dyn_ref::<MessageEvent>().and_then(|m| m.data().as_string()) else {
                    return;
                };
                match serde_json::from_str::<LiveEvent>(&data) {
                    Ok(LiveEvent::Resync) => on_resync(),
                    Ok(event) => live.push(event),
                    Err(_) => {}
                }
            })
        };
        let on_error = {
            let state = state.clone();
            let url = url.clone();
            Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
                live.status.set(LiveStatus::Down);
                let closed_for_good =
                    state.borrow().connection.as_ref().is_some_and(|c| c.source.ready_state() == EventSource::CLOSED);
                // The browser retries a dropped stream by itself; one it gave up
                // on (an error answer) is reopened here, later each time.
                if closed_for_good {
                    let attempt = state.borrow().attempt;
                    state.borrow_mut().attempt = attempt + 1;
                    let delay = (1000u32 << attempt.min(5)).min(MAX_BACKOFF_MS);
                    let (url, state, on_resync) = (url.clone(), state.clone(), on_resync.clone());
                    set_timeout(
                        move || open(url, live, on_resync, state),
                        std::time::Duration::from_millis(delay.into()),
                    );
                }
            })
        };
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let previous = state
            .borrow_mut()
            .connection
            .replace(Connection { source, _handlers: vec![on_open, on_message, on_error] });
        if let Some(previous) = previous {
            previous.source.close();
        }
    }
}

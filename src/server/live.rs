//! The live hub: the stream consumer publishes here, and every open
//! `GET /api/live` connection receives what concerns its day. The hub also
//! admits connections: a total cap and a cap per client address, so a
//! runaway script cannot hold every slot.

use crate::model::{DayCounts, LiveCounters, LiveEvent};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// Events buffered per slow subscriber before it is told to resync.
const BUFFER: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveLimits {
    pub total: usize,
    pub per_client: usize,
}

impl Default for LiveLimits {
    fn default() -> Self {
        Self { total: 2_000, per_client: 50 }
    }
}

#[derive(Clone)]
pub struct LiveHub {
    sender: broadcast::Sender<LiveEvent>,
    closing: tokio::sync::watch::Sender<bool>,
    limits: LiveLimits,
    open: Arc<Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// Why a live connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("this server holds as many live connections as it takes; try again later")]
    Full,
    #[error("too many live connections from your address; close some tabs")]
    TooManyFromClient,
}

/// One admitted connection; dropping it frees the slot.
pub struct Admission {
    open: Arc<Mutex<Open>>,
    client: IpAddr,
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut open = self.open.lock().expect("live slots poisoned");
        open.total -= 1;
        if let Some(n) = open.per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.per_client.remove(&self.client);
            }
        }
    }
}

impl Default for LiveHub {
    fn default() -> Self {
        Self::new(LiveLimits::default())
    }
}

impl LiveHub {
    pub fn new(limits: LiveLimits) -> Self {
        Self {
            sender: broadcast::channel(BUFFER).0,
            closing: tokio::sync::watch::channel(false).0,
            limits,
            open: Arc::default(),
        }
    }

    pub fn send(&self, event: LiveEvent) {
        // No subscriber is not an error: nobody is watching.
        let _ = self.sender.send(event);
    }

    pub fn send_counts(&self, counts: DayCounts, behind_ms: Option<i64>) {
        self.send(LiveEvent::Counters(LiveCounters { counts, as_of: chrono::Utc::now(), behind_ms }));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LiveEvent> {
        self.sender.subscribe()
    }

    /// A slot for one more connection from `client`, or why not.
    pub fn admit(&self, client: IpAddr) -> Result<Admission, Refused> {
        let mut open = self.open.lock().expect("live slots poisoned");
        if open.total >= self.limits.total {
            return Err(Refused::Full);
        }
        let mine = open.per_client.entry(client).or_default();
        if *mine >= self.limits.per_client {
            return Err(Refused::TooManyFromClient);
        }
        *mine += 1;
        open.total += 1;
        Ok(Admission { open: self.open.clone(), client })
    }

    /// Connections open now.
    pub fn connected(&self) -> usize {
        self.open.lock().expect("live slots poisoned").total
    }

    /// Ends every open event stream: the server is shutting down, and a
    /// graceful shutdown waits for open responses to finish.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once `close` has been called.
    pub fn closed(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let mut closing = self.closing.subscribe();
        async move {
            let _ = closing.wait_for(|closed| *closed).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_in_total_and_per_client_and_freed_on_drop() {
        let hub = LiveHub::new(LiveLimits { total: 3, per_client: 2 });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = hub.admit(a).unwrap();
        let _second = hub.admit(a).unwrap();
        assert_eq!(hub.admit(a).err(), Some(Refused::TooManyFromClient));
        let _third = hub.admit(b).unwrap();
        assert_eq!(hub.admit(b).err(), Some(Refused::Full));
        drop(first);
        assert_eq!(hub.connected(), 2);
        assert!(hub.admit(a).is_ok());
    }
}

//! The live hub: the stream consumer publishes here, and every open
//! `GET /api/live` connection receives what concerns its day.

use crate::model::LiveEvent;
use tokio::sync::broadcast;

/// Events buffered per slow subscriber before it is told to resync.
const BUFFER: usize = 1024;

#[derive(Clone)]
pub struct LiveHub {
    sender: broadcast::Sender<LiveEvent>,
    closing: tokio::sync::watch::Sender<bool>,
}

impl Default for LiveHub {
    fn default() -> Self {
        Self { sender: broadcast::channel(BUFFER).0, closing: tokio::sync::watch::channel(false).0 }
    }
}

impl LiveHub {
    pub fn send(&self, event: LiveEvent) {
        // No subscriber is not an error: nobody is watching.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LiveEvent> {
        self.sender.subscribe()
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

//! The embedded store: Dynoxide on a SQLite file, served on loopback inside
//! this process, so the app talks to it through the same SDK code path as to
//! DynamoDB Local or AWS.
//!
//! It runs on threads of its own. Dynoxide answers each request on the
//! thread that reads it, holding that thread while it waits for the
//! database's lock and while SQLite works. On the app's own runtime (two
//! worker threads on this machine) that held both workers whenever two
//! store calls met: every page, API answer and live event behind them
//! waited, which is where 200 viewers' p99 of over a second came from
//! (BENCHMARKS.md's reading). Here, a store call that waits holds only the
//! store's threads; the app's workers go on serving.

use std::net::SocketAddr;
use std::path::Path;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub const DB_FILE: &str = "northwind.db";
/// The store's own worker threads: one answers while another parses the
/// next request; SQLite serves one at a time anyway.
const STORE_THREADS: usize = 2;

pub struct Embedded {
    pub addr: SocketAddr,
    /// Cancelled to stop serving (on shutdown, or when dropped).
    stop: CancellationToken,
    /// Resolves when the store has stopped serving (its runtime's result).
    stopped: Option<oneshot::Receiver<Result<(), String>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot use data directory {dir}: {source}")]
    DataDir { dir: String, source: std::io::Error },
    #[error("cannot open the embedded store at {path}: {message}")]
    Open { path: String, message: String },
    #[error("cannot listen on {addr} for the embedded store: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("cannot start the embedded store's threads: {0}")]
    Threads(std::io::Error),
}

impl Embedded {
    /// Serves the SQLite file in `data_dir` (made if missing) on `addr`.
    pub async fn start(data_dir: &Path, addr: SocketAddr) -> Result<Self, EmbeddedError> {
        let dir_error = |source| EmbeddedError::DataDir { dir: data_dir.display().to_string(), source };
        crate::server::fs::create_private_dir(data_dir).map_err(dir_error)?;
        let path = data_dir.join(DB_FILE);
        let path_text = path.display().to_string();
        let db = dynoxide::Database::new(&path_text)
            .map_err(|e| EmbeddedError::Open { path: path_text.clone(), message: e.to_string() })?;
        // The orders are personal data: the file is this user's alone.
        crate::server::fs::restrict(&path, 0o600).map_err(dir_error)?;
        Self::serve(db, addr, &path_text)
    }

    /// Serves a store held in memory only, gone when it stops: a scratch
    /// store (a rehearsal's), where no disk should be part of what is measured.
    pub async fn in_memory(addr: SocketAddr) -> Result<Self, EmbeddedError> {
        let db = dynoxide::Database::memory()
            .map_err(|e| EmbeddedError::Open { path: "memory".into(), message: e.to_string() })?;
        Self::serve(db, addr, "memory")
    }

    fn serve(db: dynoxide::Database, addr: SocketAddr, path_text: &str) -> Result<Self, EmbeddedError> {
        let listen_error = |source| EmbeddedError::Listen { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(listen_error)?;
        listener.set_nonblocking(true).map_err(listen_error)?;
        let addr = listener.local_addr().map_err(listen_error)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(STORE_THREADS)
            .thread_name("embedded-store")
            .enable_all()
            .build()
            .map_err(EmbeddedError::Threads)?;
        let stop = CancellationToken::new();
        let stopping = stop.clone().cancelled_owned();
        let (done, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("embedded-store".into())
            .spawn(move || {
                let served = runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
                    dynoxide::server::serve_with_shutdown(listener, db, stopping).await
                });
                let _ = done.send(served);
            })
            .map_err(EmbeddedError::Threads)?;
        tracing::info!(%addr, path = %path_text, "embedded store (Dynoxide) listening");
        Ok(Self { addr, stop, stopped: Some(stopped) })
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and waits for requests under way, so the SQLite file is
    /// left consistent.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(stopped) = self.stopped.take() {
            let _ = stopped.await;
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

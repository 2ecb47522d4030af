//! The embedded store: Dynoxide on a SQLite file, served on loopback inside
//! this process, so the app talks to it through the same SDK code path as to
//! DynamoDB Local or AWS.

use std::net::SocketAddr;
use std::path::Path;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const DB_FILE: &str = "northwind.db";

pub struct Embedded {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), String>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot use data directory {dir}: {source}")]
    DataDir { dir: String, source: std::io::Error },
    #[error("cannot open the embedded store at {path}: {message}")]
    Open { path: String, message: String },
    #[error("cannot listen on {addr} for the embedded store: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
}

impl Embedded {
    pub async fn start(data_dir: &Path, addr: SocketAddr) -> Result<Self, EmbeddedError> {
        let dir_error = |source| EmbeddedError::DataDir { dir: data_dir.display().to_string(), source };
        crate::server::cli::files::create_private_dir(data_dir).map_err(dir_error)?;
        let path = data_dir.join(DB_FILE);
        let path_text = path.display().to_string();
        let db = dynoxide::Database::new(&path_text)
            .map_err(|e| EmbeddedError::Open { path: path_text.clone(), message: e.to_string() })?;
        // The orders are personal data: the file is this user's alone.
        crate::server::cli::files::restrict(&path, 0o600).map_err(dir_error)?;
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|source| EmbeddedError::Listen { addr, source })?;
        let addr = listener.local_addr().map_err(|source| EmbeddedError::Listen { addr, source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = stopped.await;
        }));
        tracing::info!(%addr, path = %path_text, "embedded store (Dynoxide) listening");
        Ok(Self { addr, stop: Some(stop), task: Some(task) })
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and waits for requests under way, so the SQLite file is
    /// left consistent.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

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
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub const DB_FILE: &str = "northwind.db";
/// The store's own worker threads: one answers while another parses the
/// next request; SQLite serves one at a time anyway.
const STORE_THREADS: usize = 2;
/// How long DynamoDB Streams keeps a record: the embedded store's stream
/// keeps its records as long (Dynoxide itself keeps them forever).
pub const STREAM_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// How often the stream's records older than that are deleted, and items
/// past their TTL attribute.
const MAINTAIN_EVERY: Duration = Duration::from_secs(10 * 60);
/// Records deleted per SQLite transaction: Dynoxide's own requests wait
/// for the write lock meanwhile (up to 5 s, then fail), so each is short.
const TRIM_BATCH: i64 = 1000;

pub struct Embedded {
    pub addr: SocketAddr,
    /// What DynamoDB does by itself and Dynoxide does not.
    upkeep: Upkeep,
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
    #[error("cannot sweep the embedded store's expired items: {0}")]
    Sweep(String),
    #[error("cannot trim the embedded store's stream in {path}: {source}")]
    Trim { path: String, source: rusqlite::Error },
}

impl Embedded {
    /// Serves the SQLite file in `data_dir` (made if missing) on `addr`.
    pub async fn start(data_dir: &Path, addr: SocketAddr) -> Result<Self, EmbeddedError> {
        let dir_error = |source| EmbeddedError::DataDir { dir: data_dir.display().to_string(), source };
        crate::server::fs::create_private_dir(data_dir).map_err(dir_error)?;
        let path = data_dir.join(DB_FILE);
        let path_text = path.display().to_string();
        let db = open_indexed(&path_text, &path_text)?;
        // The orders are personal data: the file is this user's alone.
        crate::server::fs::restrict(&path, 0o600).map_err(dir_error)?;
        let mut embedded = Self::serve(db, addr, &path_text)?;
        embedded.upkeep.file = Some(path_text);
        tokio::spawn(embedded.upkeep.clone().run(embedded.stop.clone()));
        Ok(embedded)
    }

    /// Deletes the stream's records written before `cutoff` (see
    /// `Upkeep::trim_stream`); the records deleted.
    pub async fn trim_stream(&self, cutoff: chrono::DateTime<chrono::Utc>) -> Result<u64, EmbeddedError> {
        self.upkeep.trim_stream(cutoff).await
    }

    /// Deletes the items past their TTL attribute; how many.
    pub async fn sweep_expired(&self) -> Result<usize, EmbeddedError> {
        self.upkeep.sweep_expired().await
    }

    /// Serves a store held in memory only, gone when it stops: a scratch
    /// store (a rehearsal's), where no disk should be part of what is measured.
    pub async fn in_memory(addr: SocketAddr) -> Result<Self, EmbeddedError> {
        let db = open_indexed(&memory_uri(), "memory")?;
        let embedded = Self::serve(db, addr, "memory")?;
        tokio::spawn(embedded.upkeep.clone().run(embedded.stop.clone()));
        Ok(embedded)
    }

    fn serve(db: dynoxide::Database, addr: SocketAddr, path_text: &str) -> Result<Self, EmbeddedError> {
        let handle = db.clone();
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
        Ok(Self { addr, upkeep: Upkeep { file: None, db: handle }, stop, stopped: Some(stopped) })
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

/// Dynoxide (3.2) keeps every stream record of every table in one SQLite
/// table with no index but its row id, and finds the next sequence number
/// with `MAX(CAST(sequence_number AS INTEGER))` over all of a table's
/// records: every write to a streamed table, and every GetRecords, reads
/// the whole stream so far. Profiled in a 32-shard rehearsal (4,300 orders),
/// that scan was half the engine's time, and it grows with the stream for
/// as long as the store is kept. These indexes match those expressions
/// (SQLite uses an index on an expression written the same way), so the
/// maximum is one index seek and a shard's records a range. Made on every
/// start, if missing; should a later Dynoxide lay its stream out otherwise,
/// the store still works, only slower, and says so.
const STREAM_INDEXES: &str = "
    CREATE INDEX IF NOT EXISTS northwind_stream_seq
        ON _stream_records (table_name, CAST(sequence_number AS INTEGER));
    CREATE INDEX IF NOT EXISTS northwind_stream_shard_seq
        ON _stream_records (table_name, shard_id, CAST(sequence_number AS INTEGER));";

/// A fresh, named in-memory database (a SQLite URI), so that a second
/// connection can reach it to index its stream; it lives while Dynoxide's
/// connection is open.
fn memory_uri() -> String {
    format!("file:northwind-{}?mode=memory&cache=shared", uuid::Uuid::new_v4().simple())
}

/// Dynoxide on `path` (a file, or a SQLite URI), its stream indexed;
/// `shown` names it in an error.
fn open_indexed(path: &str, shown: &str) -> Result<dynoxide::Database, EmbeddedError> {
    let db = dynoxide::Database::new(path)
        .map_err(|e| EmbeddedError::Open { path: shown.to_string(), message: e.to_string() })?;
    index_stream_records(path);
    Ok(db)
}

fn index_stream_records(path: &str) {
    let indexed = rusqlite::Connection::open(path).and_then(|conn| conn.execute_batch(STREAM_INDEXES));
    if let Err(error) = indexed {
        tracing::warn!(%error, path, "could not index the embedded store's stream records: its writes and stream reads \
                                      slow down as the stream grows");
    }
}

/// What DynamoDB does by itself and Dynoxide 3.2 does not: trim the stream
/// to 24 hours, and delete items past their TTL attribute (`expiresAt`:
/// sessions, the Lambda's markers, finished shards' checkpoints). Neither
/// has a switch in Dynoxide's server; the sweep is its `Database::sweep_ttl`,
/// the trim a delete through a connection of this store's own.
#[derive(Clone)]
struct Upkeep {
    /// The SQLite file, for trimming the stream (`None`: in memory, where a
    /// second connection shares Dynoxide's cache and its table locks, which
    /// do not wait: a trim there could fail a request; a scratch store is
    /// short-lived anyway).
    file: Option<String>,
    /// Dynoxide's handle (its clones share one database).
    db: dynoxide::Database,
}

impl Upkeep {
    /// Deletes the stream's records written before `cutoff` (the newest
    /// record stays, whatever its age); the records deleted. Done every
    /// `MAINTAIN_EVERY` for records older than `STREAM_RETENTION`; a test
    /// may name its own cutoff (a simulated clock). A store in memory is
    /// not trimmed: 0.
    async fn trim_stream(&self, cutoff: chrono::DateTime<chrono::Utc>) -> Result<u64, EmbeddedError> {
        let Some(path) = self.file.clone() else { return Ok(0) };
        let trimmed = tokio::task::spawn_blocking(move || {
            trim_stream_records(&path, cutoff.timestamp()).map_err(|source| EmbeddedError::Trim { path, source })
        });
        trimmed.await.unwrap_or_else(|e| Err(EmbeddedError::Threads(std::io::Error::other(e))))
    }

    /// Deletes the items past their TTL attribute, as DynamoDB's TTL does
    /// (Dynoxide's sweep lets waiting requests in between its pages).
    async fn sweep_expired(&self) -> Result<usize, EmbeddedError> {
        let db = self.db.clone();
        match tokio::task::spawn_blocking(move || db.sweep_ttl()).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(EmbeddedError::Sweep(e.to_string())),
            Err(e) => Err(EmbeddedError::Threads(std::io::Error::other(e))),
        }
    }

    /// Both, every `MAINTAIN_EVERY` (the first time at once: a store
    /// reopened after a while), until `stop`.
    async fn run(self, stop: CancellationToken) {
        loop {
            match self.trim_stream(chrono::Utc::now() - STREAM_RETENTION).await {
                Ok(0) => {}
                Ok(trimmed) => tracing::info!(trimmed, "embedded store: stream records older than 24 hours deleted"),
                Err(error) => tracing::warn!(%error, "embedded store: could not trim the stream; tried again later"),
            }
            match self.sweep_expired().await {
                Ok(0) => {}
                Ok(swept) => tracing::info!(swept, "embedded store: expired items deleted"),
                Err(error) => {
                    tracing::warn!(%error, "embedded store: could not sweep expired items; tried again later")
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(MAINTAIN_EVERY) => {}
            }
        }
    }
}

/// Deletes the records of Dynoxide's stream (`_stream_records`, every
/// table's) created before `cutoff_secs` (its `created_at`, seconds since
/// the epoch), oldest first, `TRIM_BATCH` a transaction, through a
/// connection of its own (as `index_stream_records`; the file is in WAL
/// mode, so readers go on). Rows are in the order written (`id`), so the
/// oldest row says whether anything is left to delete. The newest record
/// always stays: Dynoxide numbers a table's next record one past its
/// highest (or from the clock, whichever is higher), and its numbers must
/// never go back below a consumer's checkpoint. A reader whose position is
/// among the records deleted reads on from the next one kept: Dynoxide
/// never answers `TrimmedDataAccessException`, unlike DynamoDB.
fn trim_stream_records(path: &str, cutoff_secs: i64) -> Result<u64, rusqlite::Error> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut deleted = 0u64;
    loop {
        let oldest: Option<i64> = conn
            .query_row("SELECT created_at FROM _stream_records ORDER BY id LIMIT 1", [], |row| row.get(0))
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })?;
        if oldest.is_none_or(|at| at >= cutoff_secs) {
            return Ok(deleted);
        }
        let n = conn.execute(
            "DELETE FROM _stream_records WHERE id IN (SELECT id FROM _stream_records ORDER BY id LIMIT ?2)              AND created_at < ?1 AND id < (SELECT MAX(id) FROM _stream_records)",
            rusqlite::params![cutoff_secs, TRIM_BATCH],
        )?;
        if n == 0 {
            // Only the newest record is left, and it stays.
            return Ok(deleted);
        }
        deleted += n as u64;
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queries Dynoxide 3.2 runs on its stream (`Storage::
    /// next_stream_sequence_number`, `stream_records_with_event_ids`), as
    /// it writes them: an index is used only if it matches them.
    const NEXT_SEQUENCE: &str =
        "SELECT COALESCE(MAX(CAST(sequence_number AS INTEGER)), 0) + 1 FROM _stream_records WHERE table_name = ?1";
    const SHARD_RECORDS: &str = "SELECT event_name FROM _stream_records \
         WHERE table_name = ?1 AND shard_id = ?2 AND CAST(sequence_number AS INTEGER) > ?3 \
         ORDER BY CAST(sequence_number AS INTEGER) ASC LIMIT ?4";

    fn plan(conn: &rusqlite::Connection, query: &str) -> String {
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {query}")).expect("a query plan");
        let params = ["t", "s", "0", "10"];
        let count = statement.parameter_count();
        let rows = statement
            .query_map(rusqlite::params_from_iter(&params[..count]), |row| row.get::<_, String>(3))
            .expect("the plan's rows");
        rows.map(|row| row.expect("a plan row")).collect::<Vec<_>>().join("; ")
    }

    /// SQLite's plans for Dynoxide's stream queries on `conn`'s database
    /// use the indexes and scan nothing.
    fn assert_read_by_index(conn: &rusqlite::Connection) {
        let next = plan(conn, NEXT_SEQUENCE);
        assert!(
            next.contains("USING COVERING INDEX northwind_stream_seq")
                || next.contains("USING INDEX northwind_stream_seq"),
            "{next}"
        );
        let records = plan(conn, SHARD_RECORDS);
        assert!(records.contains("INDEX northwind_stream_shard_seq"), "{records}");
        assert!(!records.contains("SCAN") && !next.contains("SCAN"), "{next} / {records}");
    }

    #[tokio::test]
    async fn the_stream_is_read_by_index_not_by_scan() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Embedded::start(dir.path(), "127.0.0.1:0".parse().expect("an address")).await.expect("a store");
        let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).expect("the store's file");
        assert_read_by_index(&conn);
        drop(conn);
        store.shutdown().await;
    }

    /// The scratch stores' way: the index reaches the in-memory database
    /// Dynoxide holds open, through its name.
    #[test]
    fn a_store_in_memory_is_indexed_too() {
        let uri = memory_uri();
        let db = open_indexed(&uri, "memory").expect("a store in memory");
        let conn = rusqlite::Connection::open(&uri).expect("the same database");
        assert_read_by_index(&conn);
        drop((conn, db));
    }
}

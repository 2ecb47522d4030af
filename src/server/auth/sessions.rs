//! Sessions in DynamoDB (the metrics table, with a TTL attribute), so that
//! every `serve` instance behind a load balancer shares them.

use crate::server::store::Store;
use std::sync::Arc;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{Error, Result, SessionStore};

#[derive(Clone)]
pub struct DynamoSessions {
    store: Arc<Store>,
}

impl std::fmt::Debug for DynamoSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DynamoSessions")
    }
}

impl DynamoSessions {
    pub fn new(store: Arc<Store>) -> Self {
        Self { store }
    }

    async fn put(&self, record: &Record, new: bool) -> Result<bool> {
        let text = serde_json::to_string(record).map_err(|e| Error::Encode(e.to_string()))?;
        self.store
            .put_session(&record.id.to_string(), &text, record.expiry_date.unix_timestamp(), new)
            .await
            .map_err(backend)
    }
}

fn backend(err: impl std::fmt::Display) -> Error {
    Error::Backend(err.to_string())
}

#[async_trait::async_trait]
impl SessionStore for DynamoSessions {
    /// A new record under an id nobody holds: ids are random 128-bit
    /// values, and the conditional put makes a collision a retry, not a
    /// takeover.
    async fn create(&self, record: &mut Record) -> Result<()> {
        while !self.put(record, true).await? {
            record.id = Id::default();
        }
        Ok(())
    }

    async fn save(&self, record: &Record) -> Result<()> {
        self.put(record, false).await.map(drop)
    }

    async fn load(&self, id: &Id) -> Result<Option<Record>> {
        let now = chrono::Utc::now().timestamp();
        match self.store.get_session(&id.to_string(), now).await.map_err(backend)? {
            Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| Error::Decode(e.to_string())),
            None => Ok(None),
        }
    }

    async fn delete(&self, id: &Id) -> Result<()> {
        self.store.delete_session(&id.to_string()).await.map_err(backend)
    }
}

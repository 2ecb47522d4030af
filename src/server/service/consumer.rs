//! The recorded consumer mode: which form of the stream consumer counts
//! (`stream::registry`). Anyone who sees the operations pages may read it;
//! only an admin switches it.

use super::Service;
use crate::model::{ConsumerModeState, ConsumerModeSwitch, Permission};
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::stream::registry;

impl Service {
    pub async fn consumer_mode(&self, by: &Principal) -> Result<ConsumerModeState, ApiError> {
        by.require(Permission::ViewOperations)?;
        Ok(self.store.consumer_mode().await?)
    }

    /// Switches the mode (admin), with a compare-and-set on its version.
    pub async fn switch_consumer_mode(
        &self,
        switch: &ConsumerModeSwitch,
        by: &Principal,
    ) -> Result<ConsumerModeState, ApiError> {
        by.require(Permission::Administer)?;
        Ok(registry::switch_mode(&self.store, switch.mode, switch.expected_version, &by.actor, by.client).await?)
    }
}

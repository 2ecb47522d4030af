//! The data quality items of a day (`keys::quality_pk`), which the stream
//! consumer writes with its checkpoint (`stream::quality`), read back.

use super::{Item, Store};
use crate::server::store::error::StoreError;
use crate::server::store::keys;
use chrono::NaiveDate;

impl Store {
    /// Every quality item of `day`: one Query of its partition, every page
    /// (an item per hour, per hour of largest items, per drift kind).
    pub async fn quality_items(&self, day: NaiveDate) -> Result<Vec<Item>, StoreError> {
        self.metrics_partition(keys::quality_pk(day), false).await
    }
}

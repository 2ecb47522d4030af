//! Local accounts, API tokens and sessions, kept in the metrics table
//! (never in a file): each family under keys of its own (see `keys.rs`).

use super::items::keyed;
use super::{Item, Store};
use crate::model::{AccountSource, Role, iso_millis};
use crate::server::store::error::{StoreError, unless_condition_failed};
use crate::server::store::keys::{self, attr};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub name: String,
    pub role: Role,
    pub source: AccountSource,
    /// Argon2 PHC string; local accounts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    #[serde(default)]
    pub disabled: bool,
    /// What the identity provider calls the person, for OIDC accounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub name: String,
    pub role: Role,
    /// SHA-256 of the secret, hex: the secret itself is never stored.
    pub secret_hash: String,
    pub created_by: String,
    #[serde(with = "iso_millis")]
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub revoked: bool,
}

/// A change to an existing account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountChange {
    Disable,
    Enable,
    Role(Role),
    PasswordHash(String),
}

/// How long an account, a token or a session read from the table answers
/// for who is asking, at most: every request names its principal, and
/// reading it from the table each time was two reads before any work (issue
/// 53). A change made through this store (a revocation, a disable, a role
/// or password change, a sign-out) takes effect here at once; one made
/// through another instance's store, within this long and the read that
/// follows it: under a second (measured 0.8-0.9 s with a request every 20 ms).
pub const ACCESS_TTL: std::time::Duration = std::time::Duration::from_millis(800);
/// Accounts, tokens and sessions kept in memory at most, each.
const ACCESS_ENTRIES: u64 = 10_000;

/// Who is asking, as read lately (see `ACCESS_TTL`). A name with nothing
/// under it is kept too (`None`), so a made-up token costs no read a second.
pub(super) struct AccessCache {
    accounts: moka::sync::Cache<String, Option<Account>>,
    tokens: moka::sync::Cache<String, Option<Token>>,
    /// A session id's record as stored, while it has not expired.
    sessions: moka::sync::Cache<String, Option<(String, i64)>>,
}

impl Default for AccessCache {
    fn default() -> Self {
        fn cache<V: Clone + Send + Sync + 'static>() -> moka::sync::Cache<String, V> {
            moka::sync::Cache::builder().max_capacity(ACCESS_ENTRIES).time_to_live(ACCESS_TTL).build()
        }
        Self { accounts: cache(), tokens: cache(), sessions: cache() }
    }
}

impl Store {
    /// A new local account; an existing name is a conflict.
    pub async fn create_account(&self, account: &Account) -> Result<(), StoreError> {
        let created = self.put_metric_if_absent(keys::user_key(&account.name), serde_dynamo::to_item(account)?).await;
        self.access.accounts.invalidate(&account.name);
        if created? { Ok(()) } else { Err(StoreError::Conflict(format!("user {} already exists", account.name))) }
    }

    /// Records an identity-provider account at sign-in: its role and name as
    /// the provider says today. Leaves `disabled` as an admin set it. The
    /// account as recorded, and as it was before (`None`: new), so that an
    /// account added or a role changed by the provider is audited.
    pub async fn record_oidc_account(&self, account: &Account) -> Result<(Account, Option<Account>), StoreError> {
        let (pk, sk) = keys::user_key(&account.name);
        let out = self
            .client
            .update_item()
            .table_name(&self.metrics_table)
            .key(keys::PK, AttributeValue::S(pk))
            .key(keys::SK, AttributeValue::S(sk))
            .update_expression(
                "SET #name = :name, #role = :role, #source = :source, #display = :display, \
                 #created = if_not_exists(#created, :created)",
            )
            .condition_expression("attribute_not_exists(PK) OR #source = :source")
            .expression_attribute_names("#name", attr::NAME)
            .expression_attribute_names("#role", attr::ROLE)
            .expression_attribute_names("#source", attr::SOURCE)
            .expression_attribute_names("#display", attr::DISPLAY_NAME)
            .expression_attribute_names("#created", attr::CREATED_AT)
            .expression_attribute_values(":name", AttributeValue::S(account.name.clone()))
            .expression_attribute_values(":role", AttributeValue::S(account.role.as_str().into()))
            .expression_attribute_values(":source", AttributeValue::S("oidc".into()))
            .expression_attribute_values(
                ":display",
                AttributeValue::S(account.display_name.clone().unwrap_or_else(|| account.name.clone())),
            )
            .expression_attribute_values(":created", AttributeValue::S(iso_millis::format(&account.created_at)))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await;
        self.access.accounts.invalidate(&account.name);
        match unless_condition_failed(out)? {
            Some(out) => {
                // An engine may answer a new item's "old" attributes with its
                // keys alone (Dynoxide does): no name, no account before.
                let before: Option<Account> = match out.attributes.filter(|old| old.contains_key(attr::NAME)) {
                    Some(old) => Some(serde_dynamo::from_item(old)?),
                    None => None,
                };
                // What the update wrote: the provider's figures, the rest kept.
                let now = Account {
                    disabled: before.as_ref().is_some_and(|b| b.disabled),
                    created_at: before.as_ref().map_or(account.created_at, |b| b.created_at),
                    source: crate::model::AccountSource::Oidc,
                    password_hash: None,
                    ..account.clone()
                };
                Ok((now, before))
            }
            None => Err(StoreError::Conflict(format!("{} is a local account's name", account.name))),
        }
    }

    /// An account as read at most `ACCESS_TTL` ago (or changed through this
    /// store since): who is asking, on every request.
    pub async fn get_account(&self, name: &str) -> Result<Option<Account>, StoreError> {
        match self.access.accounts.get(name) {
            Some(account) => Ok(account),
            None => self.read_account(name).await,
        }
    }

    /// An account as it is in the table now (and kept for `get_account`):
    /// for a sign-in, which checks a password against it once, and for
    /// whatever must see another instance's change at once.
    pub async fn read_account(&self, name: &str) -> Result<Option<Account>, StoreError> {
        let account: Option<Account> = self.metric_record(keys::user_key(name)).await?;
        self.access.accounts.insert(name.to_string(), account.clone());
        Ok(account)
    }

    /// Every account, in name order: one partition, one Query.
    pub async fn list_accounts(&self) -> Result<Vec<Account>, StoreError> {
        self.list_partition(keys::users_pk()).await
    }

    /// Changes an existing account; a missing one is `NotFound`.
    pub async fn change_account(&self, name: &str, change: &AccountChange) -> Result<(), StoreError> {
        let (attribute, value) = match change {
            AccountChange::Disable => (attr::DISABLED, AttributeValue::Bool(true)),
            AccountChange::Enable => (attr::DISABLED, AttributeValue::Bool(false)),
            AccountChange::Role(role) => (attr::ROLE, AttributeValue::S(role.as_str().into())),
            AccountChange::PasswordHash(hash) => (attr::PASSWORD_HASH, AttributeValue::S(hash.clone())),
        };
        let changed = self.set_on_existing_metric(keys::user_key(name), attribute, value).await;
        self.access.accounts.invalidate(name);
        if changed? { Ok(()) } else { Err(StoreError::NotFound(format!("no user {name}"))) }
    }

    pub async fn create_token(&self, token: &Token) -> Result<(), StoreError> {
        let created = self.put_metric_if_absent(keys::token_key(&token.name), serde_dynamo::to_item(token)?).await;
        self.access.tokens.invalidate(&token.name);
        if created? {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!("a token named {} already exists", token.name)))
        }
    }

    /// A token as read at most `ACCESS_TTL` ago (or changed through this
    /// store since).
    pub async fn get_token(&self, name: &str) -> Result<Option<Token>, StoreError> {
        if let Some(token) = self.access.tokens.get(name) {
            return Ok(token);
        }
        let token: Option<Token> = self.metric_record(keys::token_key(name)).await?;
        self.access.tokens.insert(name.to_string(), token.clone());
        Ok(token)
    }

    pub async fn list_tokens(&self) -> Result<Vec<Token>, StoreError> {
        self.list_partition(keys::tokens_pk()).await
    }

    pub async fn revoke_token(&self, name: &str) -> Result<(), StoreError> {
        let revoked =
            self.set_on_existing_metric(keys::token_key(name), attr::REVOKED, AttributeValue::Bool(true)).await;
        self.access.tokens.invalidate(name);
        if revoked? { Ok(()) } else { Err(StoreError::NotFound(format!("no token {name}"))) }
    }

    /// Writes a session record; with `new`, only if the id is free.
    pub async fn put_session(&self, id: &str, record: &str, expires_at: i64, new: bool) -> Result<bool, StoreError> {
        let attributes = Item::from([
            (attr::RECORD.to_string(), AttributeValue::S(record.to_string())),
            (attr::EXPIRES_AT.to_string(), AttributeValue::N(expires_at.to_string())),
        ]);
        let written = if new {
            self.put_metric_if_absent(keys::session_key(id), attributes).await
        } else {
            let put = self.client.put_item().table_name(&self.metrics_table);
            put.set_item(Some(keyed(keys::session_key(id), attributes))).send().await.map(|_| true).map_err(Into::into)
        };
        // After the write: a read racing it cannot leave the old record here.
        self.access.sessions.invalidate(id);
        written
    }

    /// A session record not yet expired (TTL deletion is lazy: expiry is
    /// checked here too), as read at most `ACCESS_TTL` ago (or written
    /// through this store since).
    pub async fn get_session(&self, id: &str, now: i64) -> Result<Option<String>, StoreError> {
        let stored = match self.access.sessions.get(id) {
            Some(stored) => stored,
            None => {
                let stored = self.read_session(id).await?;
                self.access.sessions.insert(id.to_string(), stored.clone());
                stored
            }
        };
        Ok(stored.filter(|(_, expires_at)| *expires_at > now).map(|(record, _)| record))
    }

    /// A session's record and when it expires, as stored.
    async fn read_session(&self, id: &str) -> Result<Option<(String, i64)>, StoreError> {
        let item = self.metric_item(keys::session_key(id), true).await?;
        let Some(item) = item else { return Ok(None) };
        let expires_at = item.get(attr::EXPIRES_AT).and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok());
        let record = item.get(attr::RECORD).and_then(|v| v.as_s().ok()).cloned();
        Ok(record.zip(expires_at))
    }

    pub async fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        let deleted = self.delete_metric(keys::session_key(id)).await;
        self.access.sessions.invalidate(id);
        deleted
    }

    async fn list_partition<T: serde::de::DeserializeOwned>(&self, pk: &str) -> Result<Vec<T>, StoreError> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.metrics_table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut records = Vec::new();
        while let Some(item) = pages.next().await {
            records.push(serde_dynamo::from_item(item?)?);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The updates name attributes through `keys::attr`; the records are
    /// written by serde: the two must agree.
    #[test]
    fn the_attribute_names_updates_use_are_the_records_own() {
        let account = Account {
            name: "a".into(),
            role: Role::Ops,
            source: AccountSource::Local,
            password_hash: Some("h".into()),
            disabled: false,
            display_name: Some("A".into()),
            created_at: Utc::now(),
        };
        let item: Item = serde_dynamo::to_item(&account).unwrap();
        for name in [
            attr::NAME,
            attr::ROLE,
            attr::SOURCE,
            attr::PASSWORD_HASH,
            attr::DISABLED,
            attr::DISPLAY_NAME,
            attr::CREATED_AT,
        ] {
            assert!(item.contains_key(name), "{name} is not an Account attribute: {:?}", item.keys());
        }
        let token = Token {
            name: "t".into(),
            role: Role::Viewer,
            secret_hash: "h".into(),
            created_by: "a".into(),
            created_at: Utc::now(),
            revoked: false,
        };
        let item: Item = serde_dynamo::to_item(&token).unwrap();
        assert!(item.contains_key(attr::REVOKED) && item.contains_key(attr::ROLE));
    }
}

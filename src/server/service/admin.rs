//! Administration: accounts, API tokens and the audit trail (admin only,
//! checked here as well as by the route).

use super::Service;
use super::checks::{parse_date, parse_limit, validate_actor};
use crate::model::{
    AccountView, AuditKind, AuditListing, AuditParams, Checked, NewAccount, NewToken, Permission, Role, SecurityEvent,
    TokenView,
};
use crate::server::auth::Principal;
use crate::server::auth::accounts;
use crate::server::error::ApiError;
use crate::server::store::{Account, AccountChange, AuditScope, KindFilter, Token, Verdict};
use chrono::Utc;

impl From<Account> for AccountView {
    fn from(a: Account) -> Self {
        AccountView { name: a.name, role: a.role, source: a.source, disabled: a.disabled, created_at: a.created_at }
    }
}

impl From<Token> for TokenView {
    fn from(t: Token) -> Self {
        TokenView { name: t.name, role: t.role, created_by: t.created_by, created_at: t.created_at, revoked: t.revoked }
    }
}

impl From<&Verdict> for Checked {
    fn from(verdict: &Verdict) -> Self {
        Checked { at: verdict.at, drift: verdict.drift, repaired: verdict.repaired }
    }
}

impl Service {
    /// Every account (admin).
    pub async fn accounts(&self, by: &Principal) -> Result<Vec<AccountView>, ApiError> {
        by.require(Permission::Administer)?;
        Ok(self.store.list_accounts().await?.into_iter().map(AccountView::from).collect())
    }

    /// Adds a local account (admin).
    pub async fn add_account(&self, new: &NewAccount, by: &Principal) -> Result<AccountView, ApiError> {
        by.require(Permission::Administer)?;
        let account = accounts::add_user(&self.store, &new.name, new.role, new.password.clone()).await?;
        self.record(AuditKind::AccountAdded, by, &new.name, Some(format!("role {}", new.role))).await;
        Ok(AccountView::from(account))
    }

    /// Gives an account another role (admin): it applies at its next request.
    pub async fn set_role(&self, name: &str, role: Role, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::Administer)?;
        accounts::validate_name("user name", name)?;
        self.store.change_account(name, &AccountChange::Role(role)).await?;
        self.record(AuditKind::AccountRoleChanged, by, name, Some(format!("role {role}"))).await;
        Ok(())
    }

    /// Disables an account (admin): its sessions end at their next request.
    pub async fn disable_account(&self, name: &str, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::Administer)?;
        accounts::validate_name("user name", name)?;
        self.store.change_account(name, &AccountChange::Disable).await?;
        self.record(AuditKind::AccountDisabled, by, name, None).await;
        Ok(())
    }

    /// Every API token, without its secret (admin).
    pub async fn tokens(&self, by: &Principal) -> Result<Vec<TokenView>, ApiError> {
        by.require(Permission::Administer)?;
        Ok(self.store.list_tokens().await?.into_iter().map(TokenView::from).collect())
    }

    /// A new token (admin); its text is returned once and never again.
    pub async fn create_token(&self, new: &NewToken, by: &Principal) -> Result<String, ApiError> {
        by.require(Permission::Administer)?;
        let text = accounts::create_token(&self.store, &new.name, new.role, &by.actor.name).await?;
        self.record(AuditKind::TokenCreated, by, &new.name, Some(format!("role {}", new.role))).await;
        Ok(text)
    }

    pub async fn revoke_token(&self, name: &str, by: &Principal) -> Result<(), ApiError> {
        by.require(Permission::Administer)?;
        accounts::validate_token_name(name)?;
        self.store.revoke_token(name).await?;
        self.record(AuditKind::TokenRevoked, by, name, None).await;
        Ok(())
    }

    /// Files a security event `by` made about `subject`; a failure to file
    /// it is logged (what it records is done).
    pub(super) async fn record(&self, kind: AuditKind, by: &Principal, subject: &str, detail: Option<String>) {
        let mut event = SecurityEvent::new(kind, &by.actor, by.client).subject(subject);
        event.detail = detail;
        self.store.record_event_or_log(&event).await;
    }

    /// A page of the audit trail: one actor's records, else one day's, of
    /// one kind when asked, newest first.
    pub async fn audit(&self, params: &AuditParams) -> Result<AuditListing, ApiError> {
        let limit = parse_limit(params.limit.as_deref())?;
        let kinds = parse_kind(params.kind.as_deref())?;
        let (scope, label) = match params.actor.as_deref().filter(|a| !a.is_empty()) {
            Some(actor) => {
                validate_actor(actor)?;
                (AuditScope::Actor(actor.to_string()), format!("audit:actor:{actor}"))
            }
            None => {
                let day = parse_date(params.date.as_deref(), Utc::now())?;
                (AuditScope::Day(day), format!("audit:day:{day}"))
            }
        };
        // A cursor continues the listing it came from, filter included.
        let label = match kinds {
            KindFilter::Any => label,
            KindFilter::Security => format!("{label}:security"),
            KindFilter::One(kind) => format!("{label}:{kind}"),
        };
        let after = self.decode_cursor(params.cursor.as_deref(), &label)?;
        let page = self.store.audit_page(&scope, kinds, limit, after.as_deref()).await?;
        Ok(AuditListing {
            entries: page.entries,
            next: page.next_after.map(|after| self.cursors.encode(&label, &after)),
        })
    }
}

/// `kind`: absent or empty for every record, `security` for every kind but
/// order changes, else one kind by name.
fn parse_kind(kind: Option<&str>) -> Result<KindFilter, ApiError> {
    match kind.map(str::trim).filter(|k| !k.is_empty()) {
        None => Ok(KindFilter::Any),
        Some("security") => Ok(KindFilter::Security),
        Some(kind) => match AuditKind::parse(kind) {
            AuditKind::Unknown => Err(ApiError::BadRequest(format!(
                "kind {kind:?} is no kind of record: security, or one of {}",
                AuditKind::ALL.map(AuditKind::as_str).join(", ")
            ))),
            known => Ok(KindFilter::One(known)),
        },
    }
}

//! `user` and `token`: local accounts and API tokens.

use super::CliError;
use crate::model::iso_millis;
use crate::model::{AccountSource, Actor, AuditKind, SecurityEvent};
use crate::server::auth::accounts;
use crate::server::cli::config::{TokenCommand, UserCommand};
use crate::server::error::ApiError;
use crate::server::store::{AccountChange, Store};

/// A password from standard input: its first line, less the line end (so
/// `printf 'pw\npw\n' |`, the habit of tools that ask twice, gives `pw`).
/// What else the line holds is checked with the password (`check_password`):
/// a control character is refused, never stored.
pub(super) fn read_password() -> Result<String, CliError> {
    use std::io::{BufRead, IsTerminal};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("password (at least {} characters): ", accounts::MIN_PASSWORD);
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|source| CliError::Io { what: "reading the password from standard input".into(), source })?;
    let line = line.strip_suffix('\n').unwrap_or(&line);
    Ok(line.strip_suffix('\r').unwrap_or(line).to_string())
}

pub(super) fn api_error(err: ApiError) -> CliError {
    match err {
        ApiError::Store(err) => CliError::Store(err),
        other => CliError::Usage(other.to_string()),
    }
}

pub(super) async fn run_user(store: &Store, command: UserCommand) -> Result<(), CliError> {
    match command {
        UserCommand::Add { name, role } => {
            let password = read_password()?;
            accounts::add_user(store, &name, role, password).await.map_err(api_error)?;
            record(store, AuditKind::AccountAdded, &name, Some(format!("role {role}"))).await;
            println!("added {name} ({role})");
        }
        UserCommand::List => {
            println!("{:<24} {:<8} {:<6} {:<9} created", "name", "role", "source", "state");
            for a in store.list_accounts().await? {
                let state = if a.disabled { "disabled" } else { "active" };
                let source = match a.source {
                    AccountSource::Local => "local",
                    AccountSource::Oidc => "oidc",
                };
                println!(
                    "{:<24} {:<8} {source:<6} {state:<9} {}",
                    a.name,
                    a.role.as_str(),
                    iso_millis::format(&a.created_at)
                );
            }
        }
        UserCommand::Disable { name } => {
            change(store, &name, AccountChange::Disable, "disabled").await?;
            record(store, AuditKind::AccountDisabled, &name, None).await;
        }
        UserCommand::Enable { name } => {
            change(store, &name, AccountChange::Enable, "enabled").await?;
            record(store, AuditKind::AccountEnabled, &name, None).await;
        }
        UserCommand::SetRole { name, role } => {
            change(store, &name, AccountChange::Role(role), &format!("now {role}")).await?;
            record(store, AuditKind::AccountRoleChanged, &name, Some(format!("role {role}"))).await;
        }
        UserCommand::SetPassword { name } => {
            let password = read_password()?;
            accounts::set_password(store, &name, password).await.map_err(api_error)?;
            record(store, AuditKind::PasswordChanged, &name, None).await;
            println!("{name}: password changed");
        }
    }
    Ok(())
}

pub(super) async fn change(store: &Store, name: &str, change: AccountChange, done: &str) -> Result<(), CliError> {
    accounts::validate_name("user name", name)?;
    store.change_account(name, &change).await?;
    println!("{name}: {done}");
    Ok(())
}

pub(super) async fn run_token(store: &Store, command: TokenCommand) -> Result<(), CliError> {
    match command {
        TokenCommand::Create { name, role } => {
            // The token alone on standard output, so scripts can capture it.
            let token = accounts::create_token(store, &name, role, "cli").await.map_err(api_error)?;
            record(store, AuditKind::TokenCreated, &name, Some(format!("role {role}"))).await;
            println!("{token}");
        }
        TokenCommand::List => {
            println!("{:<24} {:<8} {:<8} {:<16} created", "name", "role", "state", "by");
            for t in store.list_tokens().await? {
                let state = if t.revoked { "revoked" } else { "active" };
                println!(
                    "{:<24} {:<8} {state:<8} {:<16} {}",
                    t.name,
                    t.role.as_str(),
                    t.created_by,
                    iso_millis::format(&t.created_at)
                );
            }
        }
        TokenCommand::Revoke { name } => {
            accounts::validate_token_name(&name)?;
            store.revoke_token(&name).await?;
            record(store, AuditKind::TokenRevoked, &name, None).await;
            println!("{name}: revoked");
        }
    }
    Ok(())
}

/// Files what a command did in the audit trail, by `cli` (whoever holds
/// the store's credentials; the operating system's user name, when there
/// is one, in the detail). A failure is printed: the change is made.
pub(super) async fn record(store: &Store, kind: AuditKind, subject: &str, detail: Option<String>) {
    let mut event = SecurityEvent::new(kind, &Actor::cli("cli"), None).subject(subject);
    let os_user = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).ok().filter(|u| !u.is_empty());
    event.detail = match (detail, os_user) {
        (Some(detail), Some(user)) => Some(format!("{detail}; os user {user}")),
        (None, Some(user)) => Some(format!("os user {user}")),
        (detail, None) => detail,
    };
    if let Err(err) = store.record_event(&event).await {
        eprintln!("warning: the change is made but its audit record could not be written: {err}");
    }
}

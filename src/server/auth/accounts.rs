//! Local accounts and API tokens: names, password hashing (argon2 via
//! `password-auth`) and token secrets (random, stored as SHA-256 only).

use crate::model::{AccountSource, Invalid, Role};
use crate::server::error::ApiError;
use crate::server::store::error::StoreError;
use crate::server::store::{Account, AccountChange, Store, Token};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// The shortest password accepted.
pub const MIN_PASSWORD: usize = 12;
/// API tokens read `nwo.<name>.<secret>`.
const TOKEN_PREFIX: &str = "nwo.";
/// Account names of identity-provider users start with this (local names may not).
pub const OIDC_PREFIX: &str = "oidc.";

/// A user or token name: 1 to 64 lowercase letters, digits, `.`, `_` or
/// `-`, starting with a letter or digit (names appear in keys and logs).
pub fn validate_name(field: &'static str, name: &str) -> Result<(), Invalid> {
    let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
    if (1..=64).contains(&name.len()) && first_ok && rest_ok {
        Ok(())
    } else {
        Err(Invalid::Name { field, value: name.to_string() })
    }
}

/// A token name, which also may not hold a `.` (the token's separator).
pub fn validate_token_name(name: &str) -> Result<(), Invalid> {
    validate_name("token name", name)?;
    if name.contains('.') { Err(Invalid::TokenName(name.to_string())) } else { Ok(()) }
}

/// Argon2id with a random salt; seconds of CPU are kept off the async threads.
pub async fn hash_password(password: String) -> Result<String, StoreError> {
    tokio::task::spawn_blocking(move || password_auth::generate_hash(password))
        .await
        .map_err(|e| StoreError::Rejected(format!("hashing a password failed: {e}")))
}

/// Whether `password` matches `hash`. Without a hash (no such user, or one
/// that signs in elsewhere), a fixed hash is checked instead, so that the
/// time taken says nothing about which part was wrong.
pub async fn verify_password(password: String, hash: Option<String>) -> bool {
    let known = hash.is_some();
    let matches = tokio::task::spawn_blocking(move || {
        let hash = hash.as_deref().unwrap_or(DECOY_HASH.as_str());
        password_auth::verify_password(password, hash).is_ok()
    })
    .await
    .unwrap_or(false);
    known && matches
}

/// A hash, made like every other, of a random password nobody knows.
static DECOY_HASH: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| password_auth::generate_hash(URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())));

/// A password one can type into the sign-in form: long enough, and no
/// control character (a line break or a tab from a pasted or piped text
/// would make an account nobody can sign in to).
pub fn check_password(password: &str) -> Result<(), Invalid> {
    if let Some((at, c)) = password.chars().enumerate().find(|(_, c)| c.is_control()) {
        let what = match c {
            '\n' => "a line break (\\n)".to_string(),
            '\r' => "a carriage return (\\r)".to_string(),
            '\t' => "a tab".to_string(),
            c => format!("U+{:04X}", c as u32),
        };
        return Err(Invalid::PasswordControl { at: at + 1, what });
    }
    if password.chars().count() < MIN_PASSWORD { Err(Invalid::ShortPassword(MIN_PASSWORD)) } else { Ok(()) }
}

/// What a session remembers of the account it signed in, so that changing
/// the password ends every session signed in with the old one.
pub fn session_hash(account: &Account) -> String {
    let basis = match &account.password_hash {
        Some(hash) => hash.clone(),
        None => format!("oidc:{}", account.name),
    };
    hex(&Sha256::digest(basis.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new token's text (shown once) and the hash kept in the store.
pub fn new_token(name: &str) -> (String, String) {
    let secret = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let hash = secret_hash(&secret);
    (format!("{TOKEN_PREFIX}{name}.{secret}"), hash)
}

pub fn secret_hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// A token's name and secret, if `text` has a token's shape.
pub fn parse_token(text: &str) -> Option<(&str, &str)> {
    let (name, secret) = text.strip_prefix(TOKEN_PREFIX)?.rsplit_once('.')?;
    (validate_token_name(name).is_ok() && secret.len() == 43).then_some((name, secret))
}

/// The operations the command line and the admin API share.
pub async fn add_user(store: &Store, name: &str, role: Role, password: String) -> Result<Account, ApiError> {
    validate_name("user name", name)?;
    if name.starts_with(OIDC_PREFIX) {
        return Err(ApiError::BadRequest(format!(
            "{name:?}: names starting {OIDC_PREFIX:?} are the identity provider's"
        )));
    }
    check_password(&password)?;
    let account = Account {
        name: name.to_string(),
        role,
        source: AccountSource::Local,
        password_hash: Some(hash_password(password).await?),
        disabled: false,
        display_name: None,
        created_at: chrono::Utc::now(),
    };
    store.create_account(&account).await?;
    Ok(account)
}

pub async fn set_password(store: &Store, name: &str, password: String) -> Result<(), ApiError> {
    check_password(&password)?;
    let hash = hash_password(password).await?;
    Ok(store.change_account(name, &AccountChange::PasswordHash(hash)).await?)
}

/// Creates a token and returns its text, which is never shown again.
pub async fn create_token(store: &Store, name: &str, role: Role, created_by: &str) -> Result<String, ApiError> {
    validate_token_name(name)?;
    let (text, secret_hash) = new_token(name);
    let token = Token {
        name: name.to_string(),
        role,
        secret_hash,
        created_by: created_by.to_string(),
        created_at: chrono::Utc::now(),
        revoked: false,
    };
    store.create_token(&token).await?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["alice", "ops.team", "a", "loadgen-2", "x_y"] {
            assert!(validate_name("user name", good).is_ok(), "{good}");
        }
        for bad in ["", "Alice", "-x", "a b", "a#b", &"x".repeat(65), "ä"] {
            assert!(validate_name("user name", bad).is_err(), "{bad}");
        }
        assert!(validate_token_name("a.b").is_err());
    }

    #[test]
    fn tokens_parse_back_and_only_their_hash_is_kept() {
        let (text, hash) = new_token("loadgen");
        let (name, secret) = parse_token(&text).unwrap();
        assert_eq!(name, "loadgen");
        assert_eq!(secret_hash(secret), hash);
        assert!(!hash.contains(secret));
        assert_eq!(parse_token("nwo.loadgen.short"), None);
        assert_eq!(parse_token("Bearer xyz"), None);
        assert_ne!(new_token("loadgen").0, text, "every token is new");
    }

    #[tokio::test]
    async fn passwords_verify_and_the_decoy_is_a_real_hash() {
        let hash = hash_password("correct horse battery".into()).await.unwrap();
        assert!(verify_password("correct horse battery".into(), Some(hash.clone())).await);
        assert!(!verify_password("wrong horse battery".into(), Some(hash)).await);
        assert!(!verify_password("anything at all".into(), None).await);
        assert!(password_auth::is_hash_obsolete(&DECOY_HASH).is_ok(), "the decoy parses as a PHC hash");
        assert!(check_password("short").is_err());
    }

    #[test]
    fn a_password_with_a_control_character_is_refused_and_says_which() {
        assert!(check_password("twelve chars ok").is_ok());
        assert!(check_password("ünïcödé pässwörd").is_ok());
        for (bad, named) in [
            ("first line long\nsecond", "character 16 is a line break"),
            ("a long\tpassword here", "character 7 is a tab"),
            ("a long password\r", "a carriage return"),
            ("a long \u{1b}[31m password", "U+001B"),
            ("a long \u{85} password", "U+0085"),
        ] {
            let err = check_password(bad).unwrap_err().to_string();
            assert!(err.contains("control characters") && err.contains(named), "{bad:?}: {err}");
        }
    }
}

//! Opaque page cursors: the position after the last order shown, bound to the
//! query it came from and signed, so a client can neither forge a position nor
//! carry a cursor over to another query.

use crate::server::fs::{create_private_dir, write_private};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::path::Path;

type HmacSha256 = Hmac<Sha256>;

const KEY_FILE: &str = "cursor.key";
/// A key file shorter than this was not written by us.
const MIN_KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cursor key {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "cursor key {path} holds fewer than {MIN_KEY_LEN} characters: remove it to make a new one (every page link in use breaks)"
    )]
    TooShort { path: String },
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum CursorError {
    #[error("the cursor is malformed")]
    Malformed,
    #[error("the cursor was not issued by this server, or was altered")]
    BadSignature,
    #[error("the cursor belongs to another query: start again from the first page")]
    OtherQuery,
    #[error("the cursor holds no valid position")]
    NoPosition,
}

#[derive(Serialize, Deserialize)]
struct Payload {
    /// The query the cursor continues, e.g. `pending:2026-11-29:1`.
    q: String,
    /// The sort key of the last item already returned.
    a: String,
}

pub struct CursorCodec {
    key: Vec<u8>,
}

impl CursorCodec {
    pub fn new(key: impl Into<Vec<u8>>) -> Self {
        Self { key: key.into() }
    }

    /// The configured secret, or else one kept in `<data_dir>/cursor.key`
    /// (made on first use, 0600) so cursors survive restarts. A key file
    /// that exists but cannot be read, or holds too short a key, is an
    /// error: silently making a new key would break every cursor in use.
    pub fn from_secret_or_file(secret: Option<&str>, data_dir: &Path) -> Result<Self, KeyFileError> {
        if let Some(secret) = secret.filter(|s| !s.is_empty()) {
            return Ok(Self::new(secret.as_bytes()));
        }
        let path = data_dir.join(KEY_FILE);
        let failed = |source| KeyFileError::Io { path: path.display().to_string(), source };
        match std::fs::read_to_string(&path) {
            Ok(hex) if hex.trim().len() >= MIN_KEY_LEN => Ok(Self::new(hex.trim().as_bytes())),
            Ok(_) => Err(KeyFileError::TooShort { path: path.display().to_string() }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                create_private_dir(data_dir).map_err(failed)?;
                let bytes: [u8; 32] = rand::random();
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                write_private(&path, &hex).map_err(failed)?;
                Ok(Self::new(hex.into_bytes()))
            }
            Err(err) => Err(failed(err)),
        }
    }

    pub fn encode(&self, query: &str, after: &str) -> String {
        let payload = serde_json::to_vec(&Payload { q: query.into(), a: after.into() })
            .expect("a struct of two strings always serialises");
        let body = URL_SAFE_NO_PAD.encode(payload);
        let tag = URL_SAFE_NO_PAD.encode(self.mac(body.as_bytes()).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The position a cursor holds, if it is genuine and belongs to `query`.
    pub fn decode(&self, cursor: &str, query: &str) -> Result<String, CursorError> {
        let (body, tag) = cursor.split_once('.').ok_or(CursorError::Malformed)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| CursorError::Malformed)?;
        self.mac(body.as_bytes()).verify_slice(&tag).map_err(|_| CursorError::BadSignature)?;
        let payload = URL_SAFE_NO_PAD.decode(body).map_err(|_| CursorError::Malformed)?;
        let payload: Payload = serde_json::from_slice(&payload).map_err(|_| CursorError::Malformed)?;
        if payload.q != query {
            return Err(CursorError::OtherQuery);
        }
        Ok(payload.a)
    }

    fn mac(&self, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(body);
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: &str = "pending:2026-11-29:1";
    const AFTER: &str = "2026-11-29T08:00:00.000Z#o-1";

    #[test]
    fn round_trip() {
        let codec = CursorCodec::new("secret");
        let cursor = codec.encode(Q, AFTER);
        assert_eq!(codec.decode(&cursor, Q).as_deref(), Ok(AFTER));
        assert!(!cursor.contains(AFTER), "the cursor is opaque");
    }

    #[test]
    fn every_tampering_is_rejected() {
        let codec = CursorCodec::new("secret");
        let cursor = codec.encode(Q, AFTER);
        // Flip each character in turn: none of the results may decode.
        for i in 0..cursor.len() {
            let mut bytes = cursor.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            if tampered != cursor {
                assert!(codec.decode(&tampered, Q).is_err(), "accepted {tampered}");
            }
        }
        // A payload rewritten by hand keeps its old tag and fails.
        let (_, tag) = cursor.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(br#"{"q":"pending:2026-11-29:1","a":"9999"}"#);
        assert_eq!(codec.decode(&format!("{forged}.{tag}"), Q), Err(CursorError::BadSignature));
        assert!(codec.decode(&cursor[..cursor.len() - 1], Q).is_err());
    }

    #[test]
    fn foreign_and_malformed_cursors_are_rejected() {
        let ours = CursorCodec::new("secret");
        let theirs = CursorCodec::new("another secret");
        assert_eq!(ours.decode(&theirs.encode(Q, AFTER), Q), Err(CursorError::BadSignature));
        let cursor = ours.encode(Q, AFTER);
        assert_eq!(ours.decode(&cursor, "pending:2026-11-28:1"), Err(CursorError::OtherQuery));
        assert_eq!(ours.decode("", Q), Err(CursorError::Malformed));
        assert_eq!(ours.decode("no-dot", Q), Err(CursorError::Malformed));
        assert_eq!(ours.decode("a.!!!", Q), Err(CursorError::Malformed));
    }

    #[test]
    fn the_key_file_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = CursorCodec::from_secret_or_file(None, dir.path()).unwrap();
        let second = CursorCodec::from_secret_or_file(None, dir.path()).unwrap();
        let cursor = first.encode(Q, AFTER);
        assert_eq!(second.decode(&cursor, Q).as_deref(), Ok(AFTER));
        let configured = CursorCodec::from_secret_or_file(Some("set"), dir.path()).unwrap();
        assert!(configured.decode(&cursor, Q).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_that_cannot_be_used_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), "short").unwrap();
        assert!(matches!(CursorCodec::from_secret_or_file(None, dir.path()), Err(KeyFileError::TooShort { .. })));
        // A directory where the file should be cannot be read.
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join(KEY_FILE)).unwrap();
        assert!(matches!(CursorCodec::from_secret_or_file(None, other.path()), Err(KeyFileError::Io { .. })));
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn no_text_makes_decoding_panic(text in ".{0,300}", scope in ".{0,40}") {
                let _ = CursorCodec::new("secret").decode(&text, &scope);
            }

            #[test]
            fn every_cursor_decodes_to_what_was_encoded(scope in ".{0,60}", after in ".{0,200}") {
                let codec = CursorCodec::new("secret");
                prop_assert_eq!(codec.decode(&codec.encode(&scope, &after), &scope), Ok(after));
            }

            #[test]
            fn a_cursor_never_decodes_for_another_scope(scope in "[a-z:0-9-]{1,30}", other in "[a-z:0-9-]{1,30}") {
                prop_assume!(scope != other);
                let codec = CursorCodec::new("secret");
                prop_assert_eq!(codec.decode(&codec.encode(&scope, "x"), &other), Err(CursorError::OtherQuery));
            }
        }
    }
}

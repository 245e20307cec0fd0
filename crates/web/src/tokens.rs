//! API and calendar feed tokens: new random tokens, their stored hash, the rows `token list` shows
//! (a short id, never the secret) and which tokens `token revoke` names.

use serde::Serialize;

use crate::reply::StoreError;
use crate::rows::ts;

/// A token row as both stores select it (the hash is never shown whole).
#[derive(Debug, Clone)]
pub(crate) struct TokenRow {
    pub(crate) hash: String,
    pub(crate) user: String,
    pub(crate) role: String,
    pub(crate) zone: Option<String>,
    pub(crate) created_at_us: i64,
    pub(crate) revoked_at_us: Option<i64>,
}

/// How many hex digits of a token's stored hash make its id.
pub const TOKEN_ID_LEN: usize = 8;

/// An API token as `token list` shows it: no secret, only a short id (the
/// first [`TOKEN_ID_LEN`] hex digits of its BLAKE3 hash, which reveal
/// nothing of the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// Short id, for `token revoke`.
    pub id: String,
    /// Account name.
    pub user: String,
    /// user, approver or admin.
    pub role: String,
    /// The account's display zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// When it was created, UTC RFC 3339.
    pub created_at: String,
    /// Whether it was revoked (the service refuses it with 401).
    pub revoked: bool,
    /// When it was revoked, UTC RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    /// The whole hash, to revoke exactly this token.
    #[serde(skip)]
    pub(crate) hash: String,
}

impl TokenRow {
    pub(crate) fn into_info(self) -> Result<TokenInfo, StoreError> {
        use longhaul_testbed::time::format_utc;
        Ok(TokenInfo {
            id: self.hash.chars().take(TOKEN_ID_LEN).collect(),
            user: self.user,
            role: self.role,
            zone: self.zone,
            created_at: format_utc(ts(self.created_at_us)?),
            revoked: self.revoked_at_us.is_some(),
            revoked_at: self.revoked_at_us.map(ts).transpose()?.map(format_utc),
            hash: self.hash,
        })
    }
}

/// Which tokens `token revoke` revokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSelector<'a> {
    /// The one token whose id (or a longer prefix of its hash) this is.
    Id(&'a str),
    /// Every token of this user.
    User(&'a str),
}

/// A refused revocation (the binary prints it as one line and exits 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevokeError {
    /// No token has this id.
    #[error("no token with id {0:?} (see `longhaul testbed token list`)")]
    UnknownId(String),
    /// More than one token starts with this id.
    #[error("token id {0:?} is ambiguous: give more hex digits of it")]
    Ambiguous(String),
    /// Not a token id.
    #[error(
        "token id {0:?} is not hex digits (at least {TOKEN_ID_LEN}; see `longhaul testbed token list`)"
    )]
    BadId(String),
    /// The user has no token.
    #[error("user {0:?} has no token")]
    UnknownUser(String),
}

/// The tokens `sel` names in `all`, or why it names none.
pub(crate) fn select_tokens<'t>(
    all: &'t [TokenInfo],
    sel: TokenSelector<'_>,
) -> Result<Vec<&'t TokenInfo>, RevokeError> {
    match sel {
        TokenSelector::Id(id) => {
            let id = id.trim().to_ascii_lowercase();
            if id.len() < TOKEN_ID_LEN || !id.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(RevokeError::BadId(id));
            }
            let found: Vec<_> = all.iter().filter(|t| t.hash.starts_with(&id)).collect();
            match found.len() {
                0 => Err(RevokeError::UnknownId(id)),
                1 => Ok(found),
                _ => Err(RevokeError::Ambiguous(id)),
            }
        }
        TokenSelector::User(user) => {
            let found: Vec<_> = all.iter().filter(|t| t.user == user).collect();
            if found.is_empty() {
                return Err(RevokeError::UnknownUser(user.to_owned()));
            }
            Ok(found)
        }
    }
}

/// The prefix of API tokens.
pub const API_TOKEN_PREFIX: &str = "lh_";

/// The prefix of calendar feed tokens: the service tells them apart from
/// API tokens by it, to refuse each where it does not belong with a message
/// that says why (each is also looked up only in its own table).
pub const FEED_TOKEN_PREFIX: &str = "lhf_";

/// A new random token: `prefix` + 32 hex digits from the OS (fails closed
/// when the OS has none to give).
pub(crate) fn new_token_with(prefix: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{prefix}{hex}"))
}

/// A new random API token (`lh_` + 32 hex digits from the OS).
pub(crate) fn new_token() -> std::io::Result<String> {
    new_token_with(API_TOKEN_PREFIX)
}

/// The stored form of a token: its BLAKE3 hash.
pub(crate) fn token_hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(hash: &str, user: &str) -> TokenInfo {
        TokenRow {
            hash: hash.into(),
            user: user.into(),
            role: "user".into(),
            zone: None,
            created_at_us: 0,
            revoked_at_us: None,
        }
        .into_info()
        .unwrap()
    }

    #[test]
    fn revoke_names_one_token_by_id_or_all_of_a_user() {
        let all = [
            token("0123456789abcdef", "alice"),
            token("0123456799abcdef", "alice"),
            token("fedcba9876543210", "bob"),
        ];
        assert_eq!(all[0].id, "01234567");
        let ids = |sel| {
            select_tokens(&all, sel).map(|v| v.iter().map(|t| t.hash.clone()).collect::<Vec<_>>())
        };
        assert_eq!(
            ids(TokenSelector::Id("FEDCBA98")).unwrap(),
            ["fedcba9876543210"]
        );
        assert_eq!(
            ids(TokenSelector::Id("01234567")),
            Err(RevokeError::Ambiguous("01234567".into()))
        );
        assert_eq!(
            ids(TokenSelector::Id("012345678")).unwrap(),
            ["0123456789abcdef"]
        );
        assert_eq!(
            ids(TokenSelector::Id("deadbeef")),
            Err(RevokeError::UnknownId("deadbeef".into()))
        );
        for bad in ["0123", "lh_01234567", "0123456z"] {
            assert!(
                matches!(ids(TokenSelector::Id(bad)), Err(RevokeError::BadId(_))),
                "{bad}"
            );
        }
        assert_eq!(ids(TokenSelector::User("alice")).unwrap().len(), 2);
        assert_eq!(
            ids(TokenSelector::User("carol")),
            Err(RevokeError::UnknownUser("carol".into()))
        );
    }
}

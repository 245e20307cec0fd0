//! Shared-key files and the mutual challenge–response that opens every transfer.
//!
//! Both ends hold the same 32-byte key, stored as one line of text:
//!
//! ```text
//! longhaul-key-v1 <64 hex digits>
//! ```
//!
//! (create one with `printf 'longhaul-key-v1 %s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"`
//! and keep it mode 0600). The key never crosses the wire. Each side sends a fresh 32-byte nonce (the
//! client in its hello, the server in its challenge) and each side proves it holds the key with
//!
//! ```text
//! proof = BLAKE3-keyed(key, "longhaul auth v1" ‖ role ‖ server_nonce ‖ client_nonce)
//! ```
//!
//! where `role` is one byte, `b'S'` for the server's proof and `b'C'` for the client's. Binding both
//! nonces makes every proof fresh for both parties (no replay of an old conversation), and the role byte
//! stops a man in the middle from reflecting the server's proof back to it as the client's.
//! The server proves first (it has both nonces when it answers the hello), the client checks that proof
//! before it sends or accepts any file data, and the server checks the client's before it touches any
//! file. Proofs are compared in constant time ([`Digest`]'s equality is `blake3::Hash`'s).
//!
//! This authenticates; it does not encrypt. Data crosses the network in clear (as with FDT or GridFTP
//! without DCAU); the chunk hashes stop corruption, not eavesdropping.
//!
//! Nonces come from the caller (the I/O layer reads the OS RNG): this crate has no randomness.

use std::fmt;

use crate::digest::{Digest, parse_hex, to_hex};

/// First word of a key file: the format version.
pub const KEY_FILE_TAG: &str = "longhaul-key-v1";
/// Domain-separation prefix of every proof.
const PROOF_CONTEXT: &[u8] = b"longhaul auth v1";

/// A shared transfer key. Its `Debug` output is redacted so keys never land in logs.
#[derive(Clone)]
pub struct Key([u8; 32]);

/// A 32-byte nonce, fresh per connection from the OS RNG.
pub type Nonce = [u8; 32];

/// Which side is proving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The side that accepted the connection (`longhaul server`).
    Server,
    /// The side that opened it (`longhaul send` / `longhaul get`).
    Client,
}

impl Role {
    fn byte(self) -> u8 {
        match self {
            Role::Server => b'S',
            Role::Client => b'C',
        }
    }
}

/// Why a key file or a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The key file does not start with [`KEY_FILE_TAG`].
    #[error("not a longhaul key file: expected a line 'longhaul-key-v1 <64 hex digits>'")]
    NotAKeyFile,
    /// The tag is there but the key is not 64 hex digits.
    #[error("key file: {0}")]
    BadKey(String),
    /// Something after the key line.
    #[error("key file: unexpected text after the key line")]
    TrailingText,
    /// The peer's proof did not match: it does not hold our key.
    #[error(
        "authentication failed: the {0:?} does not hold the same key (check --key on both ends)"
    )]
    WrongProof(Role),
}

impl Key {
    /// A key from 32 random bytes (the I/O layer reads them from the OS RNG).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Parses a key file's text: one line `longhaul-key-v1 <64 hex>`, optionally followed by a newline
    /// (CRLF tolerated). Anything else is refused with a reason.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let line = text
            .strip_suffix('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .unwrap_or(text);
        if line.contains('\n') {
            return Err(AuthError::TrailingText);
        }
        let hex = line
            .strip_prefix(KEY_FILE_TAG)
            .and_then(|rest| rest.strip_prefix(' '))
            .ok_or(AuthError::NotAKeyFile)?;
        parse_hex(hex.trim_end())
            .map(Self)
            .map_err(|e| AuthError::BadKey(e.to_string()))
    }

    /// The key file's text, newline-terminated.
    pub fn to_file_text(&self) -> String {
        format!("{KEY_FILE_TAG} {}\n", to_hex(&self.0))
    }

    /// A key for another purpose, derived from this one (BLAKE3's key derivation with `context`, a
    /// fixed string naming the purpose): e.g. the resume journal's line MACs. Knowing a derived key
    /// reveals nothing about this one.
    pub fn derive_for(&self, context: &str) -> [u8; 32] {
        blake3::derive_key(context, &self.0)
    }

    /// The proof that `role` holds this key, for this pair of nonces.
    pub fn proof(&self, role: Role, server_nonce: &Nonce, client_nonce: &Nonce) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(PROOF_CONTEXT);
        h.update(&[role.byte()]);
        h.update(server_nonce);
        h.update(client_nonce);
        h.finalize().into()
    }

    /// Checks the peer's proof (constant-time comparison).
    pub fn verify(
        &self,
        role: Role,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
        claimed: &Digest,
    ) -> Result<(), AuthError> {
        if self.proof(role, server_nonce, client_nonce) == *claimed {
            Ok(())
        } else {
            Err(AuthError::WrongProof(role))
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SN: Nonce = [1; 32];
    const CN: Nonce = [2; 32];

    #[test]
    fn key_file_round_trips() {
        let k = Key::from_bytes([0xab; 32]);
        let text = k.to_file_text();
        assert_eq!(text, format!("longhaul-key-v1 {}\n", "ab".repeat(32)));
        let back = Key::parse(&text).unwrap();
        assert_eq!(back.0, k.0);
        assert_eq!(Key::parse(&text.replace('\n', "\r\n")).unwrap().0, k.0);
        assert_eq!(Key::parse(text.trim_end()).unwrap().0, k.0);
        assert_eq!(format!("{k:?}"), "Key(<redacted>)");
    }

    #[test]
    fn malformed_key_files_are_refused_with_reasons() {
        let hex = "ab".repeat(32);
        assert_eq!(Key::parse("").unwrap_err(), AuthError::NotAKeyFile);
        assert_eq!(Key::parse(&hex).unwrap_err(), AuthError::NotAKeyFile);
        assert_eq!(
            Key::parse(&format!("longhaul-key-v2 {hex}")).unwrap_err(),
            AuthError::NotAKeyFile
        );
        assert!(matches!(
            Key::parse("longhaul-key-v1 abcd"),
            Err(AuthError::BadKey(_))
        ));
        assert!(matches!(
            Key::parse(&format!("longhaul-key-v1 {}", "zz".repeat(32))),
            Err(AuthError::BadKey(_))
        ));
        assert_eq!(
            Key::parse(&format!("longhaul-key-v1 {hex}\nmore\n")).unwrap_err(),
            AuthError::TrailingText
        );
    }

    #[test]
    fn mutual_proofs_verify_with_the_same_key_only() {
        let k = Key::from_bytes([7; 32]);
        let s = k.proof(Role::Server, &SN, &CN);
        let c = k.proof(Role::Client, &SN, &CN);
        assert_eq!(k.verify(Role::Server, &SN, &CN, &s), Ok(()));
        assert_eq!(k.verify(Role::Client, &SN, &CN, &c), Ok(()));
        // A reflected proof (server's presented as client's) is refused.
        assert_eq!(
            k.verify(Role::Client, &SN, &CN, &s),
            Err(AuthError::WrongProof(Role::Client))
        );
        // Another key, or other nonces, give other proofs.
        let other = Key::from_bytes([8; 32]);
        assert!(other.verify(Role::Client, &SN, &CN, &c).is_err());
        assert!(k.verify(Role::Client, &CN, &SN, &c).is_err());
        assert!(k.verify(Role::Client, &SN, &[3; 32], &c).is_err());
    }
}

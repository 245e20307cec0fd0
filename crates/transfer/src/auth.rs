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
//! The handshake also yields the **session keys** ([`Key::session`]) that authenticate everything after
//! it (`crate::session`):
//!
//! ```text
//! session          = BLAKE3-derive_key("longhaul transfer v2 session key",
//!                                      key ‖ server_nonce ‖ client_nonce ‖ direction)
//! client_to_server = BLAKE3-derive_key("longhaul transfer v2 client-to-server MAC key", session)
//! server_to_client = BLAKE3-derive_key("longhaul transfer v2 server-to-client MAC key", session)
//! ```
//!
//! where `direction` is one byte, `S` (send) or `G` (get), as asked in the hello (so a hello altered
//! on the path fails at the first sealed frame). Fresh nonces make the keys fresh per connection (a
//! frame or chunk of another session never verifies); one key per direction makes a frame reflected
//! back to its sender fail.
//!
//! **Tickets** (a third-party copy, `longhaul copy A:PATH B:PATH`): the receiving server B issues a
//! one-time transfer key to a controller it accepts, on their job connection, and the sending
//! server A proves that key to B as a transfer client would prove B's own key. The key is derived,
//! never sent in clear: B and the controller both compute
//!
//! ```text
//! ticket key = BLAKE3-derive_key("longhaul 2026-11 third-party copy ticket key",
//!                                controller key ‖ server_nonce ‖ client_nonce ‖ ticket id)
//! ```
//!
//! from their job connection's handshake, and the controller hands it to A sealed under its own job
//! connection with A: `ticket key XOR BLAKE3-derive_key("longhaul 2026-11 third-party copy ticket
//! seal", controller key ‖ A's server_nonce ‖ client_nonce ‖ ticket id)`, a one-time pad (fresh
//! nonces per connection, one id per ticket) inside a sealed frame. Only B, the controller and A
//! learn the key, so A and B authenticate each other with it.
//!
//! This authenticates; it does not encrypt. Without `--encrypt`, data crosses the network in clear
//! (as with FDT or GridFTP without DCAU); the chunk hashes stop corruption, not eavesdropping. With
//! it, everything runs inside TLS 1.3 and both nonces are bound to the TLS session first
//! ([`bind_nonce`]), so the proofs also show that no one relays between the two ends.
//!
//! Nonces come from the caller (the I/O layer reads the OS RNG): this crate has no randomness.

use std::fmt;

use crate::digest::{Digest, parse_hex, to_hex};
use crate::msg::Direction;
pub use crate::msg::TicketId;

/// First word of a key file: the format version.
pub const KEY_FILE_TAG: &str = "longhaul-key-v1";
/// Domain-separation prefix of every proof.
const PROOF_CONTEXT: &[u8] = b"longhaul auth v1";

/// Domain-separation prefix of every job proof (`Key::job_proof`).
const JOB_PROOF_CONTEXT: &[u8] = b"longhaul job auth v1";
/// Domain-separation prefix of a test's key proof (`Key::test_proof`).
const TEST_PROOF_CONTEXT: &[u8] = b"longhaul test auth v1";
/// Context of the session key derivation (BLAKE3 `derive_key`: globally unique, never reused).
const SESSION_CONTEXT: &str = "longhaul transfer v2 session key";
/// Context of a job's session key derivation.
const JOB_SESSION_CONTEXT: &str = "longhaul job v1 session key";
/// Context of a ticket's key (`Key::ticket_key`).
const TICKET_CONTEXT: &str = "longhaul 2026-11 third-party copy ticket key";
/// Context of the pad that seals a ticket's key for its user (`Key::seal_ticket`).
const TICKET_SEAL_CONTEXT: &str = "longhaul 2026-11 third-party copy ticket seal";
/// Context of the client → server MAC key, derived from the session key.
const CLIENT_TO_SERVER_CONTEXT: &str = "longhaul transfer v2 client-to-server MAC key";
/// Context of the server → client MAC key, derived from the session key.
const SERVER_TO_CLIENT_CONTEXT: &str = "longhaul transfer v2 server-to-client MAC key";

/// A shared transfer key. Its `Debug` output is redacted so keys never land in logs.
#[derive(Clone)]
pub struct Key([u8; 32]);

/// A 32-byte nonce, fresh per connection from the OS RNG.
pub type Nonce = [u8; 32];

/// A handshake nonce bound to the TLS session the handshake runs in (`--encrypt`):
/// `BLAKE3-keyed(binding, nonce)`, where `binding` is the session's exporter value (RFC 9266
/// `tls-exporter`). Both sides prove over bound nonces, and both ends of one TLS session bind alike,
/// while a relay in the middle holds two TLS sessions with two different bindings: proofs it
/// forwards fail, and the session keys it could not derive anyway differ on its two sides. Without
/// TLS (`None`) the nonce is used as it is.
pub fn bind_nonce(nonce: &Nonce, binding: Option<&[u8; 32]>) -> Nonce {
    match binding {
        Some(b) => *blake3::keyed_hash(b, nonce).as_bytes(),
        None => *nonce,
    }
}

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
        self.proof_in(PROOF_CONTEXT, role, server_nonce, client_nonce)
    }

    /// The proof of a job's handshake (a controller and a server, `longhaul-fleet`): as
    /// [`Key::proof`] under its own context, so that a proof made for a job never verifies in a
    /// transfer, even where one key serves both.
    pub fn job_proof(&self, role: Role, server_nonce: &Nonce, client_nonce: &Nonce) -> Digest {
        self.proof_in(JOB_PROOF_CONTEXT, role, server_nonce, client_nonce)
    }

    /// Checks the peer's job proof (constant-time comparison).
    pub fn verify_job(
        &self,
        role: Role,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
        claimed: &Digest,
    ) -> Result<(), AuthError> {
        check(
            self.job_proof(role, server_nonce, client_nonce),
            claimed,
            role,
        )
    }

    /// The proof a test client gives a server that requires a key for tests (`longhaul server
    /// --require-key`): `BLAKE3-keyed(key, "longhaul test auth v1" ‖ 'C' ‖ cookie [‖ binding])`,
    /// where `cookie` is the 16 random bytes the server issued this session in its welcome (fresh per
    /// test, so a proof seen on the wire opens no other test) and `binding` the TLS session's
    /// channel binding when the control connection is encrypted ([`bind_nonce`]'s reasoning: a relay
    /// holds two sessions). It authorises the test; a plaintext test's data is not authenticated.
    pub fn test_proof(&self, cookie: &[u8; 16], binding: Option<&[u8; 32]>) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(TEST_PROOF_CONTEXT);
        h.update(&[Role::Client.byte()]);
        h.update(cookie);
        if let Some(b) = binding {
            h.update(b);
        }
        h.finalize().into()
    }

    /// Checks a test client's proof (constant-time comparison).
    pub fn verify_test(
        &self,
        cookie: &[u8; 16],
        binding: Option<&[u8; 32]>,
        claimed: &Digest,
    ) -> Result<(), AuthError> {
        check(self.test_proof(cookie, binding), claimed, Role::Client)
    }

    /// The session keys of a job's connection: as [`Key::session`], from their own context.
    pub fn job_session(&self, server_nonce: &Nonce, client_nonce: &Nonce) -> SessionKeys {
        let mut material = [0u8; 96];
        material[..32].copy_from_slice(&self.0);
        material[32..64].copy_from_slice(server_nonce);
        material[64..].copy_from_slice(client_nonce);
        SessionKeys::from_session(blake3::derive_key(JOB_SESSION_CONTEXT, &material))
    }

    /// The one-time transfer key of ticket `id`, issued on the job connection whose handshake used
    /// these nonces (this key being the controller's). The issuing server and the controller both
    /// compute it; it never crosses the wire in clear.
    pub fn ticket_key(&self, server_nonce: &Nonce, client_nonce: &Nonce, id: &TicketId) -> Key {
        Key(blake3::derive_key(
            TICKET_CONTEXT,
            &ticket_material(&self.0, server_nonce, client_nonce, id),
        ))
    }

    /// `ticket` sealed for the job connection whose handshake used these nonces (this key being
    /// the controller's): the controller sends this to the server that will use the ticket.
    pub fn seal_ticket(
        &self,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
        id: &TicketId,
        ticket: &Key,
    ) -> [u8; 32] {
        let pad = blake3::derive_key(
            TICKET_SEAL_CONTEXT,
            &ticket_material(&self.0, server_nonce, client_nonce, id),
        );
        std::array::from_fn(|i| ticket.0[i] ^ pad[i])
    }

    /// The ticket key sealed by [`Key::seal_ticket`] on the same connection.
    pub fn open_ticket(
        &self,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
        id: &TicketId,
        sealed: &[u8; 32],
    ) -> Key {
        Key(self.seal_ticket(server_nonce, client_nonce, id, &Key(*sealed)))
    }

    fn proof_in(
        &self,
        context: &[u8],
        role: Role,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
    ) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(context);
        h.update(&[role.byte()]);
        h.update(server_nonce);
        h.update(client_nonce);
        h.finalize().into()
    }

    /// The session keys of the connection whose handshake used these nonces and asked for this
    /// direction (binding the direction makes a hello whose direction was changed on the path fail at
    /// the first sealed frame).
    pub fn session(
        &self,
        direction: Direction,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
    ) -> SessionKeys {
        let mut material = [0u8; 97];
        material[..32].copy_from_slice(&self.0);
        material[32..64].copy_from_slice(server_nonce);
        material[64..96].copy_from_slice(client_nonce);
        material[96] = match direction {
            Direction::Send => b'S',
            Direction::Get => b'G',
        };
        SessionKeys::from_session(blake3::derive_key(SESSION_CONTEXT, &material))
    }

    /// Checks the peer's proof (constant-time comparison).
    pub fn verify(
        &self,
        role: Role,
        server_nonce: &Nonce,
        client_nonce: &Nonce,
        claimed: &Digest,
    ) -> Result<(), AuthError> {
        check(self.proof(role, server_nonce, client_nonce), claimed, role)
    }
}

/// What a ticket's key and seal are derived from: the controller's key, the job connection's nonces
/// and the ticket's id.
fn ticket_material(
    key: &[u8; 32],
    server_nonce: &Nonce,
    client_nonce: &Nonce,
    id: &TicketId,
) -> [u8; 112] {
    let mut m = [0u8; 112];
    m[..32].copy_from_slice(key);
    m[32..64].copy_from_slice(server_nonce);
    m[64..96].copy_from_slice(client_nonce);
    m[96..].copy_from_slice(&id.0);
    m
}

/// `Ok` when the proof `role` claims is the one expected ([`Digest`]'s equality is constant-time).
fn check(expected: Digest, claimed: &Digest, role: Role) -> Result<(), AuthError> {
    if expected == *claimed {
        Ok(())
    } else {
        Err(AuthError::WrongProof(role))
    }
}

/// The MAC keys of one transfer session, one per direction, derived from the shared key and both
/// handshake nonces ([`Key::session`]). Both ends compute the same pair.
#[derive(Clone)]
pub struct SessionKeys {
    client_to_server: MacKey,
    server_to_client: MacKey,
}

impl SessionKeys {
    /// One MAC key per direction, derived from a session key.
    fn from_session(session: [u8; 32]) -> Self {
        Self {
            client_to_server: MacKey(blake3::derive_key(CLIENT_TO_SERVER_CONTEXT, &session)),
            server_to_client: MacKey(blake3::derive_key(SERVER_TO_CLIENT_CONTEXT, &session)),
        }
    }

    /// The key that authenticates what `me` sends (control frames, data-connection proofs, and chunk
    /// headers when `me` sends the data).
    pub fn sending(&self, me: Role) -> &MacKey {
        match me {
            Role::Client => &self.client_to_server,
            Role::Server => &self.server_to_client,
        }
    }

    /// The key that authenticates what `me` receives from the other side.
    pub fn receiving(&self, me: Role) -> &MacKey {
        match me {
            Role::Client => &self.server_to_client,
            Role::Server => &self.client_to_server,
        }
    }
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKeys(<redacted>)")
    }
}

/// The MAC key of one direction of one session. Each use is domain-separated by a one-byte label
/// first in the MAC input, and every field before the variable-length part has a fixed size, so no
/// input of one use can be read as another's:
///
/// ```text
/// control frame     'F' ‖ seq u64 BE ‖ frame (4-byte length ‖ JSON)
/// data connection   'D' ‖ cookie (16) ‖ stream u32 BE
/// chunk header      'H' ‖ stream u32 BE ‖ seq u64 BE ‖ header fields (64)
/// ```
#[derive(Clone)]
pub struct MacKey([u8; 32]);

impl MacKey {
    /// The tag of control frame number `seq` (counted per direction from 0) whose bytes are `frame`.
    pub fn frame_tag(&self, seq: u64, frame: &[u8]) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"F");
        h.update(&seq.to_be_bytes());
        h.update(frame);
        h.finalize().into()
    }

    /// The proof a data connection presents after its preamble: this session's key, this cookie, this
    /// stream index.
    pub fn data_proof(&self, cookie: &[u8; 16], stream: u32) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"D");
        h.update(cookie);
        h.update(&stream.to_be_bytes());
        h.finalize().into()
    }

    /// The tag of chunk header number `seq` (counted per stream from 0) on data stream `stream`, over
    /// the header's 64 bytes of fields (which carry the payload's BLAKE3).
    pub fn chunk_tag(&self, stream: u32, seq: u64, fields: &[u8; 64]) -> Digest {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"H");
        h.update(&stream.to_be_bytes());
        h.update(&seq.to_be_bytes());
        h.update(fields);
        h.finalize().into()
    }
}

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey(<redacted>)")
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
    fn job_proofs_and_sessions_are_apart_from_transfer_ones() {
        let k = Key::from_bytes([9; 32]);
        let job = k.job_proof(Role::Server, &SN, &CN);
        assert_ne!(job, k.proof(Role::Server, &SN, &CN));
        assert_ne!(job, k.job_proof(Role::Client, &SN, &CN));
        assert!(k.verify_job(Role::Server, &SN, &CN, &job).is_ok());
        assert!(k.verify(Role::Server, &SN, &CN, &job).is_err());
        assert!(
            Key::from_bytes([8; 32])
                .verify_job(Role::Server, &SN, &CN, &job)
                .is_err()
        );
        let (j, t) = (
            k.job_session(&SN, &CN),
            k.session(Direction::Send, &SN, &CN),
        );
        let tag = |keys: &SessionKeys| keys.sending(Role::Client).frame_tag(0, b"x");
        assert_ne!(tag(&j), tag(&t));
        assert_ne!(tag(&j), j.sending(Role::Server).frame_tag(0, b"x"));
    }

    #[test]
    fn a_test_proof_opens_only_its_own_session() {
        let k = Key::from_bytes([9; 32]);
        let cookie = [3u8; 16];
        let proof = k.test_proof(&cookie, None);
        assert!(k.verify_test(&cookie, None, &proof).is_ok());
        // Another session's cookie, another key, or a TLS binding the proof was not made in.
        assert!(k.verify_test(&[4u8; 16], None, &proof).is_err());
        assert!(
            Key::from_bytes([8; 32])
                .verify_test(&cookie, None, &proof)
                .is_err()
        );
        assert!(k.verify_test(&cookie, Some(&[5; 32]), &proof).is_err());
        let bound = k.test_proof(&cookie, Some(&[5; 32]));
        assert!(k.verify_test(&cookie, Some(&[5; 32]), &bound).is_ok());
        assert!(k.verify_test(&cookie, Some(&[6; 32]), &bound).is_err());
        // Apart from every other proof made with the same key.
        let mut as_nonce = [0u8; 32];
        as_nonce[..16].copy_from_slice(&cookie);
        assert_ne!(proof, k.proof(Role::Client, &as_nonce, &[0; 32]));
    }

    #[test]
    fn a_ticket_sealed_for_one_connection_opens_only_there() {
        let controller = Key::from_bytes([7; 32]);
        let id = TicketId([3; 16]);
        let ticket = controller.ticket_key(&SN, &CN, &id);
        // Apart from the controller's key and from another ticket or connection's.
        assert_ne!(ticket.0, controller.0);
        assert_ne!(
            ticket.0,
            controller.ticket_key(&SN, &CN, &TicketId([4; 16])).0
        );
        assert_ne!(ticket.0, controller.ticket_key(&CN, &SN, &id).0);
        // Sealed for A's connection (nonces [5], [6]): opens there, and not as the key itself.
        let (asn, acn) = ([5; 32], [6; 32]);
        let sealed = controller.seal_ticket(&asn, &acn, &id, &ticket);
        assert_ne!(sealed, ticket.0);
        assert_eq!(controller.open_ticket(&asn, &acn, &id, &sealed).0, ticket.0);
        assert_ne!(controller.open_ticket(&SN, &CN, &id, &sealed).0, ticket.0);
        assert_ne!(
            Key::from_bytes([8; 32])
                .open_ticket(&asn, &acn, &id, &sealed)
                .0,
            ticket.0
        );
        // The id goes on the wire as 32 hex digits.
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(text, format!("\"{}\"", "03".repeat(16)));
        assert_eq!(serde_json::from_str::<TicketId>(&text).unwrap(), id);
        assert!(serde_json::from_str::<TicketId>("\"03\"").is_err());
    }

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
    fn session_keys_are_per_session_and_per_direction() {
        let k = Key::from_bytes([7; 32]);
        let s = k.session(Direction::Send, &SN, &CN);
        let again = k.session(Direction::Send, &SN, &CN);
        let tag = |m: &MacKey| m.frame_tag(0, b"frame");
        // Both ends derive the same pair; what one sends is what the other receives.
        assert_eq!(
            tag(s.sending(Role::Client)),
            tag(again.receiving(Role::Server))
        );
        assert_eq!(
            tag(s.sending(Role::Server)),
            tag(again.receiving(Role::Client))
        );
        // The two directions differ (no reflection), and so do other nonces, swapped nonces and other
        // keys (no replay from another session).
        assert_ne!(tag(s.sending(Role::Client)), tag(s.sending(Role::Server)));
        for other in [
            k.session(Direction::Send, &SN, &[3; 32]),
            k.session(Direction::Send, &[3; 32], &CN),
            k.session(Direction::Send, &CN, &SN),
            Key::from_bytes([8; 32]).session(Direction::Send, &SN, &CN),
            k.session(Direction::Get, &SN, &CN),
        ] {
            assert_ne!(
                tag(other.sending(Role::Client)),
                tag(s.sending(Role::Client))
            );
            assert_ne!(
                tag(other.sending(Role::Server)),
                tag(s.sending(Role::Server))
            );
        }
        // The derivation is BLAKE3 derive_key with the documented contexts.
        let mut material = Vec::new();
        material.extend_from_slice(&[7; 32]);
        material.extend_from_slice(&SN);
        material.extend_from_slice(&CN);
        material.push(b'S');
        let session = blake3::derive_key("longhaul transfer v2 session key", &material);
        let c2s = blake3::derive_key("longhaul transfer v2 client-to-server MAC key", &session);
        let mut h = blake3::Hasher::new_keyed(&c2s);
        h.update(b"F");
        h.update(&5u64.to_be_bytes());
        h.update(b"x");
        assert_eq!(
            s.sending(Role::Client).frame_tag(5, b"x"),
            Digest::from(h.finalize())
        );
        assert_eq!(format!("{s:?}"), "SessionKeys(<redacted>)");
        assert_eq!(
            format!("{:?}", s.sending(Role::Client)),
            "MacKey(<redacted>)"
        );
    }

    #[test]
    fn mac_uses_are_separated() {
        let m = Key::from_bytes([7; 32])
            .session(Direction::Send, &SN, &CN)
            .sending(Role::Client)
            .clone();
        let fields = [5u8; 64];
        // Sequence, stream, cookie and fields each change the tag.
        assert_ne!(m.frame_tag(0, b"ab"), m.frame_tag(1, b"ab"));
        assert_ne!(m.chunk_tag(0, 0, &fields), m.chunk_tag(1, 0, &fields));
        assert_ne!(m.chunk_tag(0, 0, &fields), m.chunk_tag(0, 1, &fields));
        let mut other = fields;
        other[40] ^= 1;
        assert_ne!(m.chunk_tag(0, 0, &fields), m.chunk_tag(0, 0, &other));
        assert_ne!(m.data_proof(&[1; 16], 0), m.data_proof(&[1; 16], 1));
        assert_ne!(m.data_proof(&[1; 16], 0), m.data_proof(&[2; 16], 0));
        // The same bytes under two labels give two tags: a data proof is no frame tag.
        let mut d = [1u8; 16].to_vec();
        d.extend_from_slice(&0u32.to_be_bytes());
        let as_frame = m.frame_tag(u64::from_be_bytes(d[..8].try_into().unwrap()), &d[8..]);
        assert_ne!(m.data_proof(&[1; 16], 0), as_frame);
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

    #[test]
    fn proofs_over_nonces_bound_to_one_tls_session_fail_on_another() {
        let k = Key::from_bytes([7; 32]);
        let (one, two) = ([1u8; 32], [2u8; 32]);
        let bound = |b: &[u8; 32]| (bind_nonce(&SN, Some(b)), bind_nonce(&CN, Some(b)));
        // Without TLS the nonces are used as they are.
        assert_eq!(bind_nonce(&SN, None), SN);
        // Both ends of one session bind alike: the proof verifies.
        let (s1, c1) = bound(&one);
        assert_ne!((s1, c1), (SN, CN));
        let proof = k.proof(Role::Server, &s1, &c1);
        assert_eq!(k.verify(Role::Server, &s1, &c1, &proof), Ok(()));
        // A relay's other session binds otherwise: the forwarded proof fails, and so would the
        // session keys.
        let (s2, c2) = bound(&two);
        assert!(k.verify(Role::Server, &s2, &c2, &proof).is_err());
        assert!(k.verify(Role::Server, &SN, &CN, &proof).is_err());
    }
}

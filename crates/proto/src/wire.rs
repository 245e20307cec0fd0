//! Wire framing: the fixed preamble every connection opens with, and length-prefixed control frames.
//!
//! A longhaul server listens on one port for both kinds of connection (like iperf3, so one firewall hole
//! suffices). Every connection starts with a 32-byte [`Preamble`] that says what it is:
//!
//! ```text
//! offset  size  field
//!      0     8  magic   b"LONGHAUL"
//!      8     2  version protocol version, big-endian (this crate: PROTOCOL_VERSION)
//!     10     1  kind    1 = control (test), 2 = data, 3 = transfer control, 4 = job (a controller)
//!     11     1  flags   reserved, must be 0
//!     12    16  cookie  test cookie (zero on control connections)
//!     28     4  stream  stream index within the test, big-endian (zero on control connections)
//! ```
//!
//! After a control preamble the connection carries frames ([`crate::frame`]): a 4-byte big-endian length
//! followed by that many bytes of UTF-8 JSON (one [`crate::Message`]). Lengths above [`MAX_FRAME_LEN`]
//! are rejected before any allocation, so a hostile peer cannot make the server reserve memory it did
//! not send. The codec's items are re-exported here, where the test protocol's users look for them.
//! After a data preamble the connection carries raw test payload.

use crate::frame::Framed;
use crate::{Message, ProtoError};

pub use crate::frame::{FrameDecoder, MAX_FRAME_LEN, encode_frame};

/// The magic bytes that open every longhaul connection.
pub const MAGIC: [u8; 8] = *b"LONGHAUL";
/// Protocol version spoken by this build. Peers with another version are refused with a clear error.
pub const PROTOCOL_VERSION: u16 = 1;
/// Size of the fixed preamble in bytes.
pub const PREAMBLE_LEN: usize = 32;

/// A test cookie: 16 random bytes chosen by the server, which data connections present to join a test.
pub type Cookie = [u8; 16];

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    /// The control connection of a test: JSON frames.
    Control,
    /// A data connection of a test or a transfer: raw payload (a test's) or chunks (a transfer's).
    Data,
    /// The control connection of a file transfer (`longhaul send`/`get`): its own messages, in the
    /// same frames (crate `longhaul-transfer`).
    Transfer,
    /// A controller asking this server to act (`longhaul test A --to B`): its own messages, in the
    /// same frames (crate `longhaul-fleet`).
    Job,
    /// `--encrypt`: a TLS 1.3 handshake follows this preamble, and the connection's own preamble (of
    /// any other kind) comes inside TLS, first thing.
    Tls,
    /// The control connection of a probe stream (`crate::probe`): its own messages, in the same
    /// frames; the probes go over UDP.
    Probe,
}

/// The fixed header that opens every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    /// Protocol version of the sender.
    pub version: u16,
    /// Control or data.
    pub kind: ConnKind,
    /// Test cookie (data connections only; zero for control).
    pub cookie: Cookie,
    /// Stream index within the test (data connections only).
    pub stream: u32,
}

impl Preamble {
    /// The preamble of a control connection.
    pub fn control() -> Self {
        Self {
            version: PROTOCOL_VERSION,
            kind: ConnKind::Control,
            cookie: [0; 16],
            stream: 0,
        }
    }

    /// The preamble of a transfer's control connection.
    pub fn transfer() -> Self {
        Self {
            kind: ConnKind::Transfer,
            ..Self::control()
        }
    }

    /// The preamble of a controller's job connection.
    pub fn job() -> Self {
        Self {
            kind: ConnKind::Job,
            ..Self::control()
        }
    }

    /// The plaintext preamble of an encrypted connection: TLS follows.
    pub fn tls() -> Self {
        Self {
            kind: ConnKind::Tls,
            ..Self::control()
        }
    }

    /// The preamble of a probe stream's control connection.
    pub fn probe() -> Self {
        Self {
            kind: ConnKind::Probe,
            ..Self::control()
        }
    }

    /// The preamble of data connection `stream` of the test with `cookie`.
    pub fn data(cookie: Cookie, stream: u32) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            kind: ConnKind::Data,
            cookie,
            stream,
        }
    }

    /// Serialises the preamble.
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.version.to_be_bytes());
        b[10] = match self.kind {
            ConnKind::Control => 1,
            ConnKind::Data => 2,
            ConnKind::Transfer => 3,
            ConnKind::Job => 4,
            ConnKind::Tls => 5,
            ConnKind::Probe => 6,
        };
        b[12..28].copy_from_slice(&self.cookie);
        b[28..32].copy_from_slice(&self.stream.to_be_bytes());
        b
    }

    /// Parses a preamble. The version is returned as sent, so the caller can answer a peer of another
    /// version with a readable error instead of a dropped connection.
    pub fn decode(b: &[u8; PREAMBLE_LEN]) -> Result<Self, ProtoError> {
        if b[0..8] != MAGIC {
            return Err(ProtoError::BadMagic);
        }
        let version = u16::from_be_bytes([b[8], b[9]]);
        let kind = match b[10] {
            1 => ConnKind::Control,
            2 => ConnKind::Data,
            3 => ConnKind::Transfer,
            4 => ConnKind::Job,
            5 => ConnKind::Tls,
            6 => ConnKind::Probe,
            k => return Err(ProtoError::BadKind(k)),
        };
        if b[11] != 0 {
            return Err(ProtoError::BadFlags(b[11]));
        }
        let mut cookie = [0u8; 16];
        cookie.copy_from_slice(&b[12..28]);
        let stream = u32::from_be_bytes([b[28], b[29], b[30], b[31]]);
        Ok(Self {
            version,
            kind,
            cookie,
            stream,
        })
    }
}

impl Framed for Message {
    type Error = ProtoError;

    fn from_json(bytes: &[u8]) -> Result<Self, ProtoError> {
        Message::from_json(bytes)
    }

    fn kind(&self) -> &'static str {
        Message::kind(self)
    }

    fn peer_error(&self) -> Option<&str> {
        match self {
            Message::Error { message } => Some(message),
            _ => None,
        }
    }
}

/// Whether a datagram is a preamble (a UDP test's stream hello) rather than test data: a hello the
/// client repeated until the server echoed it may arrive late, among the data.
pub fn is_preamble(datagram: &[u8]) -> bool {
    datagram.len() == PREAMBLE_LEN && datagram[..8] == MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trips() {
        let p = Preamble::data([7; 16], 3);
        assert_eq!(Preamble::decode(&p.encode()).unwrap(), p);
        for c in [
            Preamble::control(),
            Preamble::transfer(),
            Preamble::job(),
            Preamble::tls(),
            Preamble::probe(),
        ] {
            assert_eq!(Preamble::decode(&c.encode()).unwrap(), c);
        }
    }

    #[test]
    fn a_preamble_datagram_is_told_from_test_data() {
        assert!(is_preamble(&Preamble::data([7; 16], 3).encode()));
        // A UDP test datagram of the same length: a header of this century's clock.
        let mut d = [0u8; PREAMBLE_LEN];
        d[..4].copy_from_slice(&1_795_772_042u32.to_be_bytes());
        assert!(!is_preamble(&d));
        assert!(!is_preamble(&Preamble::data([7; 16], 3).encode()[..31]));
    }

    #[test]
    fn preamble_rejects_garbage() {
        let mut b = Preamble::control().encode();
        b[0] = b'X';
        assert!(matches!(Preamble::decode(&b), Err(ProtoError::BadMagic)));
        let mut b = Preamble::control().encode();
        b[10] = 9;
        assert!(matches!(Preamble::decode(&b), Err(ProtoError::BadKind(9))));
        let mut b = Preamble::control().encode();
        b[11] = 1;
        assert!(matches!(Preamble::decode(&b), Err(ProtoError::BadFlags(1))));
    }
}

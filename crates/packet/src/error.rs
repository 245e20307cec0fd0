//! The crate's one error type: every way a record can be malformed or unsuitable for an operation.

use thiserror::Error;

/// Why a record could not be parsed or processed. Malformed input always ends here, never in a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PacketError {
    /// The buffer ends before a header or a field the record claims to have.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The IP version nibble is neither 4 nor 6.
    #[error("unknown IP version {0}")]
    BadVersion(u8),
    /// IPv4 IHL below 5 (20 bytes).
    #[error("bad IPv4 header length (IHL {0})")]
    BadIhl(u8),
    /// IPv4 total length / IPv6 payload length inconsistent with the header or the buffer.
    #[error("bad IP length: header says {claimed} bytes, {available} available (header {header})")]
    BadIpLength {
        /// Packet length the IP header claims.
        claimed: usize,
        /// Bytes present after the vnet header.
        available: usize,
        /// Length of the IP header(s).
        header: usize,
    },
    /// TCP data offset below 5 (20 bytes).
    #[error("bad TCP data offset {0}")]
    BadDataOffset(u8),
    /// The vnet `gso_type` is not one this crate knows (NONE, TCPV4, TCPV6, UDP_L4).
    #[error("unsupported virtio-net gso_type {0:#04x}")]
    UnsupportedGso(u8),
    /// The vnet `gso_type` does not match the packet (e.g. TCPV4 on an IPv6 or UDP packet, or a fragment).
    #[error("gso_type {gso:?} does not match the packet: {why}")]
    GsoMismatch {
        /// The declared type.
        gso: crate::gso::GsoType,
        /// What does not match.
        why: &'static str,
    },
    /// A GSO record with `gso_size` 0.
    #[error("gso_size is 0 on a GSO record")]
    ZeroGsoSize,
    /// A GSO record without payload.
    #[error("GSO record without payload")]
    EmptyGso,
    /// `csum_start`/`csum_offset` point outside the packet.
    #[error("checksum offsets out of range: start {start}, offset {offset}, packet {len} bytes")]
    BadChecksumOffsets {
        /// `csum_start`.
        start: u16,
        /// `csum_offset`.
        offset: u16,
        /// IP packet length.
        len: usize,
    },
    /// The record cannot be split/truncated/finished by this operation.
    #[error("not splittable: {0}")]
    NotSplittable(&'static str),
    /// A segment range outside the record.
    #[error("segment range [{first}, {first}+{count}) outside the record's {segments} segments")]
    BadRange {
        /// First segment index.
        first: usize,
        /// Number of segments.
        count: usize,
        /// Segments in the record.
        segments: usize,
    },
    /// The operation needs a single-packet record (gso_type NONE).
    #[error("record is a GSO super-packet, expected a single packet")]
    NotSingleSegment,
    /// A checksum or length field is wrong (from the `build::verify_*` functions).
    #[error("bad {0}")]
    BadField(&'static str),
}

impl PacketError {
    /// The first `need` bytes of `buf`, which holds the `what` being read;
    /// [`PacketError::Truncated`] when `buf` is shorter.
    pub(crate) fn prefix<'a>(
        buf: &'a [u8],
        need: usize,
        what: &'static str,
    ) -> Result<&'a [u8], PacketError> {
        buf.get(..need).ok_or(PacketError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    }
}

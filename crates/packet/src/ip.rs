//! Zero-copy views of IPv4 (RFC 791) and IPv6 (RFC 8200) headers, and the few in-place edits the
//! emulator makes (lengths, IPv4 identification, TTL / hop limit, header checksum).
//!
//! Contract: the `new` constructors check only that the fixed header (IPv4: `IHL × 4` bytes including
//! options) is present and the version/IHL are sane; length consistency against the buffer is checked
//! by [`mod@crate::parse`]. The `set_*` functions take the IP packet (not the record) and assume a
//! header that a view accepted; they never index past the fixed header.

use crate::PacketError;
use std::net::{Ipv4Addr, Ipv6Addr};

/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IPv6 next header: ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// IPv6 next header: hop-by-hop options.
pub const NH_HOP_BY_HOP: u8 = 0;
/// IPv6 next header: routing header.
pub const NH_ROUTING: u8 = 43;
/// IPv6 next header: fragment header.
pub const NH_FRAGMENT: u8 = 44;
/// IPv6 next header: authentication header (RFC 4302).
pub const NH_AUTH: u8 = 51;
/// IPv6 next header: destination options.
pub const NH_DEST_OPTS: u8 = 60;
/// Length of the fixed IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// Length of an IPv4 header without options.
pub const IPV4_MIN_HDR_LEN: usize = 20;

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// A view of an IPv4 header (with options).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Header<'a> {
    bytes: &'a [u8],
}

impl<'a> Ipv4Header<'a> {
    /// Views the header at the start of `pkt`: version 4, IHL ≥ 5, `IHL × 4` bytes present.
    pub fn new(pkt: &'a [u8]) -> Result<Self, PacketError> {
        let first = *pkt.first().ok_or(PacketError::Truncated {
            what: "IPv4 header",
            need: IPV4_MIN_HDR_LEN,
            have: 0,
        })?;
        if first >> 4 != 4 {
            return Err(PacketError::BadVersion(first >> 4));
        }
        let ihl = first & 0x0f;
        if ihl < 5 {
            return Err(PacketError::BadIhl(ihl));
        }
        let hl = usize::from(ihl) * 4;
        let bytes = PacketError::prefix(pkt, hl, "IPv4 header")?;
        Ok(Ipv4Header { bytes })
    }

    /// Header length in bytes (`IHL × 4`).
    pub fn header_len(&self) -> usize {
        self.bytes.len()
    }
    /// Total length field.
    pub fn total_len(&self) -> u16 {
        be16(self.bytes, 2)
    }
    /// Identification field.
    pub fn id(&self) -> u16 {
        be16(self.bytes, 4)
    }
    /// More-fragments flag.
    pub fn more_fragments(&self) -> bool {
        self.bytes[6] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn fragment_offset(&self) -> u16 {
        be16(self.bytes, 6) & 0x1fff
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.bytes[8]
    }
    /// Protocol field.
    pub fn protocol(&self) -> u8 {
        self.bytes[9]
    }
    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.bytes, 10)
    }
    /// Whether the header checksum is correct (for the tests).
    #[cfg(test)]
    pub(crate) fn checksum_ok(&self) -> bool {
        crate::checksum::checksum(self.bytes) == 0
    }
    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(
            self.bytes[12],
            self.bytes[13],
            self.bytes[14],
            self.bytes[15],
        )
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(
            self.bytes[16],
            self.bytes[17],
            self.bytes[18],
            self.bytes[19],
        )
    }
    /// The raw header bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// A view of the fixed 40-byte IPv6 header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Header<'a> {
    bytes: &'a [u8],
}

impl<'a> Ipv6Header<'a> {
    /// Views the fixed header at the start of `pkt`: version 6, 40 bytes present.
    pub fn new(pkt: &'a [u8]) -> Result<Self, PacketError> {
        let bytes = PacketError::prefix(pkt, IPV6_HDR_LEN, "IPv6 header")?;
        if bytes[0] >> 4 != 6 {
            return Err(PacketError::BadVersion(bytes[0] >> 4));
        }
        Ok(Ipv6Header { bytes })
    }

    /// Payload length field (everything after the fixed header).
    pub fn payload_len(&self) -> u16 {
        be16(self.bytes, 4)
    }
    /// Next header field of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.bytes[6]
    }
    /// Source address.
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_bytes())
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_bytes())
    }
    /// Source address bytes.
    pub fn src_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.bytes[8..24]);
        a
    }
    /// Destination address bytes.
    pub fn dst_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.bytes[24..40]);
        a
    }
}

/// Writes the IPv4 total length and recomputes the header checksum over `header_len` bytes.
pub(crate) fn set_ipv4_len_id_checksum(pkt: &mut [u8], header_len: usize, total: u16, id: u16) {
    pkt[2..4].copy_from_slice(&total.to_be_bytes());
    pkt[4..6].copy_from_slice(&id.to_be_bytes());
    pkt[10..12].copy_from_slice(&[0, 0]);
    let c = crate::checksum::checksum(&pkt[..header_len]);
    pkt[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Writes the IPv6 payload length.
pub(crate) fn set_ipv6_payload_len(pkt: &mut [u8], len: u16) {
    pkt[4..6].copy_from_slice(&len.to_be_bytes());
}

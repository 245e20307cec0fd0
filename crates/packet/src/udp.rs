//! A zero-copy view of the UDP header (RFC 768): ports, length, checksum.
//!
//! Contract: [`UdpHeader::new`] checks only that 8 bytes are present; the length field is reported,
//! not enforced here (a UDP GSO record's field holds the whole super-datagram's length, which the
//! datagrams it is split into do not share).

use crate::PacketError;

/// Length of the UDP header.
pub const HDR_LEN: usize = 8;
/// Offset of the checksum field (the vnet `csum_offset` for UDP).
pub const CHECKSUM_OFFSET: usize = 6;

/// A view of a UDP header.
#[derive(Debug, Clone, Copy)]
pub struct UdpHeader<'a> {
    bytes: &'a [u8],
}

impl<'a> UdpHeader<'a> {
    /// Views the header at the start of `dgram`.
    pub fn new(dgram: &'a [u8]) -> Result<Self, PacketError> {
        let bytes = PacketError::prefix(dgram, HDR_LEN, "UDP header")?;
        Ok(UdpHeader { bytes })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[0], self.bytes[1]])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }
    /// Length field (header + data).
    pub fn length(&self) -> u16 {
        u16::from_be_bytes([self.bytes[4], self.bytes[5]])
    }
    /// Checksum field (0 = none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.bytes[6], self.bytes[7]])
    }
}

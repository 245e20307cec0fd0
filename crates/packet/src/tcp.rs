//! A zero-copy view of the TCP header (RFC 9293 §3.1): ports, sequence and acknowledgment numbers,
//! data offset (options allowed), flags, window, checksum, urgent pointer.
//!
//! Contract: [`TcpHeader::new`] takes the bytes from the start of the TCP header to the end of the
//! IP packet and checks that the data offset is ≥ 5 and the whole header (with options) is present.

use crate::PacketError;

/// FIN flag bit.
pub const FIN: u8 = 0x01;
/// SYN flag bit.
pub const SYN: u8 = 0x02;
/// RST flag bit.
pub const RST: u8 = 0x04;
/// PSH flag bit.
pub const PSH: u8 = 0x08;
/// ACK flag bit.
pub const ACK: u8 = 0x10;
/// URG flag bit.
pub const URG: u8 = 0x20;
/// ECE flag bit (RFC 3168).
pub const ECE: u8 = 0x40;
/// CWR flag bit (RFC 3168).
pub const CWR: u8 = 0x80;
/// Offset of the checksum field in the TCP header (the vnet `csum_offset` for TCP).
pub const CHECKSUM_OFFSET: usize = 16;
/// Length of a TCP header without options.
pub const MIN_HDR_LEN: usize = 20;

/// A view of a TCP header with options.
#[derive(Debug, Clone, Copy)]
pub struct TcpHeader<'a> {
    bytes: &'a [u8],
}

impl<'a> TcpHeader<'a> {
    /// Views the header at the start of `seg` (TCP header + payload).
    pub fn new(seg: &'a [u8]) -> Result<Self, PacketError> {
        let fixed = PacketError::prefix(seg, MIN_HDR_LEN, "TCP header")?;
        let doff = fixed[12] >> 4;
        if doff < 5 {
            return Err(PacketError::BadDataOffset(doff));
        }
        let hl = usize::from(doff) * 4;
        let bytes = PacketError::prefix(seg, hl, "TCP options")?;
        Ok(TcpHeader { bytes })
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        self.bytes.len()
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[0], self.bytes[1]])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        u32::from_be_bytes([self.bytes[4], self.bytes[5], self.bytes[6], self.bytes[7]])
    }
    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        u32::from_be_bytes([self.bytes[8], self.bytes[9], self.bytes[10], self.bytes[11]])
    }
    /// Flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub fn flags(&self) -> u8 {
        self.bytes[13]
    }
    /// Window field.
    pub fn window(&self) -> u16 {
        u16::from_be_bytes([self.bytes[14], self.bytes[15]])
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.bytes[16], self.bytes[17]])
    }
    /// Options bytes (possibly empty).
    pub fn options(&self) -> &'a [u8] {
        &self.bytes[MIN_HDR_LEN..]
    }
}

//! The `virtio_net_hdr` that precedes every packet on a TUN opened with `IFF_VNET_HDR` (virtio spec
//! v1.2 §5.1.6 "Device Operation", struct `virtio_net_hdr` without `num_buffers`: 10 bytes).
//!
//! Layout: `flags: u8, gso_type: u8, hdr_len: u16, gso_size: u16, csum_start: u16, csum_offset: u16`.
//! Byte order: the 16-bit fields are **little-endian**. Legacy virtio uses guest-native order; TUN
//! follows `TUNSETVNETLE`/native order, which is little-endian on every host longhaul targets (x86-64,
//! aarch64). A big-endian host would need `TUNSETVNETLE` (or `TUNSETVNETBE` and a different parser).
//!
//! Contract: [`VnetHeader::parse`] accepts any flags byte but only the GSO types NONE, TCPV4, TCPV6 and
//! UDP_L4 (optionally with the ECN bit); `hdr_len` is carried but never trusted (see
//! [`mod@crate::parse`]). [`VnetHeader::emit`] is the exact inverse.

use crate::PacketError;
use crate::gso::GsoType;

/// Length of the virtio-net header on the TUN (no `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;
/// `flags`: the checksum is partial; complete it from `csum_start`, store at `csum_start + csum_offset`.
pub const FLAG_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksum has been validated (receive side).
pub const FLAG_DATA_VALID: u8 = 2;
/// `gso_type` bit: the TCP stream uses ECN; the first segment carries CWR.
pub const GSO_ECN: u8 = 0x80;

/// A decoded `virtio_net_hdr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VnetHeader {
    /// `flags` byte ([`FLAG_NEEDS_CSUM`], [`FLAG_DATA_VALID`]).
    pub flags: u8,
    /// Segmentation type.
    pub gso_type: GsoType,
    /// The [`GSO_ECN`] bit of `gso_type`.
    pub ecn: bool,
    /// Length of the headers before the payload, as the kernel wrote it (untrusted).
    pub hdr_len: u16,
    /// Segment payload size (the MSS) for GSO records.
    pub gso_size: u16,
    /// Offset from the start of the IP packet where checksumming starts.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHeader {
    /// A header for one plain packet with a complete checksum (all fields zero).
    pub const PLAIN: VnetHeader = VnetHeader {
        flags: 0,
        gso_type: GsoType::None,
        ecn: false,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// Decodes the first [`VNET_HDR_LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<VnetHeader, PacketError> {
        let b = PacketError::prefix(buf, VNET_HDR_LEN, "virtio_net_hdr")?;
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let gso_type =
            GsoType::from_u8(b[1] & !GSO_ECN).ok_or(PacketError::UnsupportedGso(b[1]))?;
        Ok(VnetHeader {
            flags: b[0],
            gso_type,
            ecn: b[1] & GSO_ECN != 0,
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    /// Encodes the header (little-endian fields).
    pub fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type.to_u8() | if self.ecn { GSO_ECN } else { 0 };
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// Whether [`FLAG_NEEDS_CSUM`] is set (CHECKSUM_PARTIAL).
    pub fn needs_csum(&self) -> bool {
        self.flags & FLAG_NEEDS_CSUM != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_little_endian() {
        let h = VnetHeader {
            flags: FLAG_NEEDS_CSUM,
            gso_type: GsoType::TcpV6,
            ecn: true,
            hdr_len: 0x0102,
            gso_size: 1440,
            csum_start: 40,
            csum_offset: 16,
        };
        let b = h.emit();
        assert_eq!(b[1], 0x84);
        assert_eq!(&b[2..4], &[0x02, 0x01]);
        assert_eq!(VnetHeader::parse(&b), Ok(h));
    }

    #[test]
    fn rejects_short_and_unknown_gso() {
        assert!(matches!(
            VnetHeader::parse(&[0; 9]),
            Err(PacketError::Truncated { .. })
        ));
        let mut b = VnetHeader::PLAIN.emit();
        b[1] = 3;
        assert_eq!(VnetHeader::parse(&b), Err(PacketError::UnsupportedGso(3)));
    }
}

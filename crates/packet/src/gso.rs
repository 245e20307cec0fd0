//! The segmentation type of a virtio-net record (`gso_type`), a leaf shared by the header codec
//! ([`crate::vnet`]) and the errors that name it.

/// The segmentation type of a record (`gso_type` without the ECN bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsoType {
    /// One plain packet (`VIRTIO_NET_HDR_GSO_NONE` = 0).
    None,
    /// IPv4 TCP super-packet (`VIRTIO_NET_HDR_GSO_TCPV4` = 1).
    TcpV4,
    /// IPv6 TCP super-packet (`VIRTIO_NET_HDR_GSO_TCPV6` = 4).
    TcpV6,
    /// UDP super-datagram, segmented at L4 (`VIRTIO_NET_HDR_GSO_UDP_L4` = 5).
    UdpL4,
}

impl GsoType {
    /// The wire value (without the ECN bit).
    pub fn to_u8(self) -> u8 {
        match self {
            GsoType::None => 0,
            GsoType::TcpV4 => 1,
            GsoType::TcpV6 => 4,
            GsoType::UdpL4 => 5,
        }
    }

    /// Decodes a wire value without the ECN bit; `None` for unsupported types (e.g. 3, UFO).
    pub fn from_u8(v: u8) -> Option<GsoType> {
        match v {
            0 => Some(GsoType::None),
            1 => Some(GsoType::TcpV4),
            4 => Some(GsoType::TcpV6),
            5 => Some(GsoType::UdpL4),
            _ => None,
        }
    }
}

//! Parsing a TUN record (vnet header + one IP packet) into a [`Parsed`] summary: IP version and
//! header lengths, L4 protocol, flow key and a stable flow hash, payload length, segment count and
//! MSS, TCP sequence number and flags.
//!
//! Contract:
//! - The vnet `hdr_len` is **never trusted** (the kernel may set it to the whole first packet on the
//!   forward path, as wireguard-go's `tun/tun_linux.go` warns); header lengths are recomputed from the packet: IP header (IPv4 IHL,
//!   IPv6 fixed header plus hop-by-hop, routing, destination-options, fragment and AH extension
//!   headers) + TCP data offset or 8 for UDP.
//! - The IP packet is `total length` (IPv4) / `40 + payload length` (IPv6) bytes; it must fit in the
//!   buffer. Trailing bytes after it are ignored (and dropped by every operation that rewrites).
//! - A GSO record must match its packet (TCPV4 = IPv4 TCP, TCPV6 = IPv6 TCP, UDP_L4 = UDP, never a
//!   fragment), have `gso_size > 0` and a non-empty payload; it has `ceil(payload / gso_size)`
//!   segments. A GSO NONE record is one segment and its `mss` is its payload length.
//! - With `NEEDS_CSUM`, `csum_start + csum_offset + 2` must lie inside the IP packet.
//! - Anything else malformed is a [`PacketError`]; no input panics. IPv6 packets whose extension
//!   chain ends in an unknown header parse with that header as [`L4Proto::Other`] (not splittable:
//!   the emulator passes them through whole).

use crate::GsoType;
use crate::PacketError;
use crate::ip::{self, Ipv4Header, Ipv6Header};
use crate::tcp::TcpHeader;
use crate::udp::UdpHeader;
use crate::vnet::{VNET_HDR_LEN, VnetHeader};
use std::net::IpAddr;

/// IP version of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// The transport protocol (the last next-header of the chain for IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Proto {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// ICMP (1).
    Icmp,
    /// ICMPv6 (58).
    Icmpv6,
    /// Anything else, with its protocol number.
    Other(u8),
}

impl L4Proto {
    /// Classifies a protocol / next-header number.
    pub fn from_number(n: u8) -> L4Proto {
        match n {
            ip::PROTO_TCP => L4Proto::Tcp,
            ip::PROTO_UDP => L4Proto::Udp,
            ip::PROTO_ICMP => L4Proto::Icmp,
            ip::PROTO_ICMPV6 => L4Proto::Icmpv6,
            n => L4Proto::Other(n),
        }
    }

    /// The protocol number.
    pub fn number(self) -> u8 {
        match self {
            L4Proto::Tcp => ip::PROTO_TCP,
            L4Proto::Udp => ip::PROTO_UDP,
            L4Proto::Icmp => ip::PROTO_ICMP,
            L4Proto::Icmpv6 => ip::PROTO_ICMPV6,
            L4Proto::Other(n) => n,
        }
    }
}

/// The 5-tuple of a flow (ports are 0 for protocols without ports and for non-first fragments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Transport protocol.
    pub proto: L4Proto,
}

impl FlowKey {
    /// A stable 64-bit hash of the key: FNV-1a 64 over protocol number, source and destination
    /// address bytes (4 or 16 each) and the two ports big-endian. Identical on every run, platform
    /// and build (unlike `std`'s randomly keyed hasher), so it can name flows in recorded results.
    pub fn hash64(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut h = OFFSET;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(PRIME);
            }
        };
        eat(&[self.proto.number()]);
        for a in [self.src, self.dst] {
            match a {
                IpAddr::V4(a) => eat(&a.octets()),
                IpAddr::V6(a) => eat(&a.octets()),
            }
        }
        eat(&self.src_port.to_be_bytes());
        eat(&self.dst_port.to_be_bytes());
        h
    }
}

/// TCP fields the emulator needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpInfo {
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags byte (see [`crate::tcp`] constants).
    pub flags: u8,
}

/// Summary of one parsed record. Offsets are relative to the start of the IP packet (i.e. after the
/// vnet header); the record bytes are not borrowed, so pass them alongside to the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// The vnet header as read.
    pub vnet: VnetHeader,
    /// IP version.
    pub version: IpVersion,
    /// IP header length including IPv4 options or IPv6 extension headers (= L4 offset).
    pub ip_header_len: usize,
    /// Transport protocol.
    pub l4: L4Proto,
    /// TCP header length (with options), 8 for UDP, 0 otherwise (and for non-first fragments).
    pub l4_header_len: usize,
    /// Length of the IP packet from its header (trailing buffer bytes excluded).
    pub ip_len: usize,
    /// Flow key.
    pub flow: FlowKey,
    /// [`FlowKey::hash64`] of `flow`.
    pub flow_hash: u64,
    /// Bytes after the IP + L4 headers.
    pub payload_len: usize,
    /// Number of segments (1 for GSO NONE).
    pub segments: usize,
    /// Segment size: `gso_size` for GSO records, the payload length for GSO NONE.
    pub mss: usize,
    /// TCP fields, for TCP packets with a header.
    pub tcp: Option<TcpInfo>,
    /// The packet is an IP fragment (IPv4 MF/offset, or an IPv6 fragment header).
    pub fragment: bool,
    /// The packet is a fragment other than the first (no L4 header).
    pub later_fragment: bool,
}

impl Parsed {
    /// IP + L4 header length: where the payload starts in the IP packet (the correct `hdr_len`).
    pub fn headers_len(&self) -> usize {
        self.ip_header_len + self.l4_header_len
    }

    /// Whether the record is a TCP record that [`crate::split`] accepts (TCP header present, not a
    /// fragment).
    pub fn is_tcp(&self) -> bool {
        self.tcp.is_some() && !self.fragment
    }

    /// Whether the record is an unfragmented UDP datagram (or a UDP super-datagram).
    pub fn is_udp(&self) -> bool {
        self.l4 == L4Proto::Udp && !self.fragment
    }

    /// Whether the record is a TCP super-packet with more than one segment (for the tests).
    #[cfg(test)]
    fn is_tcp_gso(&self) -> bool {
        self.is_tcp() && self.vnet.gso_type != GsoType::None && self.segments > 1
    }
}

fn truncated(what: &'static str, need: usize, have: usize) -> PacketError {
    PacketError::Truncated { what, need, have }
}

/// Parses one TUN record: [`VNET_HDR_LEN`] bytes of vnet header, then one IP packet.
pub fn parse(buf: &[u8]) -> Result<Parsed, PacketError> {
    let vnet = VnetHeader::parse(buf)?;
    let pkt = &buf[VNET_HDR_LEN..];
    let first = *pkt.first().ok_or(truncated("IP header", 1, 0))?;
    let (version, ip_header_len, ip_len, proto, src, dst, fragment, later_fragment) = match first
        >> 4
    {
        4 => {
            let h = Ipv4Header::new(pkt)?;
            let total = usize::from(h.total_len());
            if total < h.header_len() || total > pkt.len() {
                return Err(PacketError::BadIpLength {
                    claimed: total,
                    available: pkt.len(),
                    header: h.header_len(),
                });
            }
            let frag = h.more_fragments() || h.fragment_offset() != 0;
            let later = h.fragment_offset() != 0;
            (
                IpVersion::V4,
                h.header_len(),
                total,
                h.protocol(),
                IpAddr::V4(h.src()),
                IpAddr::V4(h.dst()),
                frag,
                later,
            )
        }
        6 => {
            let h = Ipv6Header::new(pkt)?;
            let total = ip::IPV6_HDR_LEN + usize::from(h.payload_len());
            if total > pkt.len() {
                return Err(PacketError::BadIpLength {
                    claimed: total,
                    available: pkt.len(),
                    header: ip::IPV6_HDR_LEN,
                });
            }
            let body = &pkt[..total];
            let mut nh = h.next_header();
            let mut off = ip::IPV6_HDR_LEN;
            let mut frag = false;
            let mut later = false;
            loop {
                let ext_len = match nh {
                    ip::NH_HOP_BY_HOP | ip::NH_ROUTING | ip::NH_DEST_OPTS => {
                        let b = body.get(off..off + 2).ok_or(truncated(
                            "IPv6 extension header",
                            off + 2,
                            total,
                        ))?;
                        (usize::from(b[1]) + 1) * 8
                    }
                    ip::NH_AUTH => {
                        let b =
                            body.get(off..off + 2)
                                .ok_or(truncated("IPv6 AH", off + 2, total))?;
                        (usize::from(b[1]) + 2) * 4
                    }
                    ip::NH_FRAGMENT => {
                        let b = body.get(off..off + 8).ok_or(truncated(
                            "IPv6 fragment header",
                            off + 8,
                            total,
                        ))?;
                        let fo = u16::from_be_bytes([b[2], b[3]]);
                        frag = true;
                        later |= fo >> 3 != 0;
                        8
                    }
                    _ => break,
                };
                if off + ext_len > total {
                    return Err(truncated("IPv6 extension header", off + ext_len, total));
                }
                nh = body[off];
                off += ext_len;
                if later {
                    break;
                }
            }
            (
                IpVersion::V6,
                off,
                total,
                nh,
                IpAddr::V6(h.src()),
                IpAddr::V6(h.dst()),
                frag,
                later,
            )
        }
        v => return Err(PacketError::BadVersion(v)),
    };

    let l4 = L4Proto::from_number(proto);
    let seg = &pkt[ip_header_len..ip_len];
    let (l4_header_len, src_port, dst_port, tcp) = if later_fragment {
        (0, 0, 0, None)
    } else {
        match l4 {
            L4Proto::Tcp => {
                let t = TcpHeader::new(seg)?;
                let info = TcpInfo {
                    seq: t.seq(),
                    ack: t.ack(),
                    flags: t.flags(),
                };
                (t.header_len(), t.src_port(), t.dst_port(), Some(info))
            }
            L4Proto::Udp => {
                let u = UdpHeader::new(seg)?;
                (crate::udp::HDR_LEN, u.src_port(), u.dst_port(), None)
            }
            _ => (0, 0, 0, None),
        }
    };
    let payload_len = seg.len() - l4_header_len;

    if vnet.needs_csum() {
        let end = usize::from(vnet.csum_start) + usize::from(vnet.csum_offset) + 2;
        if end > ip_len {
            return Err(PacketError::BadChecksumOffsets {
                start: vnet.csum_start,
                offset: vnet.csum_offset,
                len: ip_len,
            });
        }
    }

    let (segments, mss) = match vnet.gso_type {
        GsoType::None => (1, payload_len),
        gso => {
            let why = match (gso, version, l4) {
                _ if fragment => Some("fragment"),
                (GsoType::TcpV4, IpVersion::V4, L4Proto::Tcp) => None,
                (GsoType::TcpV6, IpVersion::V6, L4Proto::Tcp) => None,
                (GsoType::UdpL4, _, L4Proto::Udp) => None,
                (GsoType::TcpV4 | GsoType::TcpV6, _, L4Proto::Tcp) => Some("IP version"),
                _ => Some("transport protocol"),
            };
            if let Some(why) = why {
                return Err(PacketError::GsoMismatch { gso, why });
            }
            let mss = usize::from(vnet.gso_size);
            if mss == 0 {
                return Err(PacketError::ZeroGsoSize);
            }
            if payload_len == 0 {
                return Err(PacketError::EmptyGso);
            }
            (payload_len.div_ceil(mss), mss)
        }
    };

    let flow = FlowKey {
        src,
        dst,
        src_port,
        dst_port,
        proto: l4,
    };
    Ok(Parsed {
        vnet,
        version,
        ip_header_len,
        l4,
        l4_header_len,
        ip_len,
        flow,
        flow_hash: flow.hash64(),
        payload_len,
        segments,
        mss,
        tcp,
        fragment,
        later_fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, Addrs, TcpSpec};
    use crate::vnet::FLAG_NEEDS_CSUM;

    fn v4_spec() -> TcpSpec {
        TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]))
    }

    #[test]
    fn parses_tcp_v4_super_packet() {
        let mut s = v4_spec();
        s.mss = 1448;
        s.payload_len = 1448 * 44 + 100;
        s.tcp_options = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let r = build::tcp_record(&s);
        let p = parse(&r).unwrap();
        assert_eq!(p.version, IpVersion::V4);
        assert_eq!(p.ip_header_len, 20);
        assert_eq!(p.l4_header_len, 32);
        assert_eq!(p.segments, 45);
        assert_eq!(p.mss, 1448);
        assert_eq!(p.payload_len, s.payload_len);
        assert_eq!(p.flow.src_port, s.src_port);
        assert_eq!(p.tcp.unwrap().seq, s.seq);
        assert!(p.is_tcp_gso());
        assert_eq!(p.flow_hash, p.flow.hash64());
    }

    #[test]
    fn hdr_len_is_not_trusted() {
        let mut s = v4_spec();
        s.payload_len = 5000;
        let mut r = build::tcp_record(&s);
        let bogus = (r.len() - VNET_HDR_LEN) as u16;
        r[2..4].copy_from_slice(&bogus.to_le_bytes());
        let p = parse(&r).unwrap();
        assert_eq!(p.headers_len(), 40);
        assert_eq!(p.payload_len, 5000);
    }

    #[test]
    fn parses_ipv6_with_extension_headers() {
        let mut s = TcpSpec::new(Addrs::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
        ));
        s.ipv6_dest_options = true;
        s.payload_len = 3000;
        let r = build::tcp_record(&s);
        let p = parse(&r).unwrap();
        assert_eq!(p.version, IpVersion::V6);
        assert_eq!(p.ip_header_len, 48);
        assert_eq!(p.l4, L4Proto::Tcp);
        assert_eq!(p.segments, 3);
    }

    #[test]
    fn flow_hash_is_stable() {
        let k = FlowKey {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            proto: L4Proto::Tcp,
        };
        // Pinned value: the hash is part of recorded results and must never change.
        assert_eq!(k.hash64(), 0x2ecb_7490_8c38_0805);
        let mut k2 = k;
        k2.dst_port = 3;
        assert_ne!(k.hash64(), k2.hash64());
    }

    #[test]
    fn every_prefix_of_a_valid_record_is_an_error() {
        for (mut s, v6) in [
            (v4_spec(), false),
            (
                TcpSpec::new(Addrs::v6("::1".parse().unwrap(), "::2".parse().unwrap())),
                true,
            ),
        ] {
            s.payload_len = 3000;
            s.ipv6_dest_options = v6;
            let r = build::tcp_record(&s);
            assert!(parse(&r).is_ok());
            for n in 0..r.len() {
                assert!(parse(&r[..n]).is_err(), "prefix {n} parsed");
            }
        }
    }

    #[test]
    fn rejects_malformed_headers() {
        let mut s = v4_spec();
        s.payload_len = 3000;
        let good = build::tcp_record(&s);
        let v = VNET_HDR_LEN;

        let mut r = good.clone();
        r[v] = 0x44;
        assert_eq!(parse(&r), Err(PacketError::BadIhl(4)));

        let mut r = good.clone();
        r[v] = 0x5f; // IHL 15: the 60-byte "header" swallows the TCP header; data offset garbage
        assert!(parse(&r).is_err());

        let mut r = good.clone();
        r[v + 2..v + 4].copy_from_slice(&(3041u16).to_be_bytes());
        assert!(matches!(parse(&r), Err(PacketError::BadIpLength { .. })));

        let mut r = good.clone();
        r[v] = 0x75;
        assert_eq!(parse(&r), Err(PacketError::BadVersion(7)));

        let mut r = good.clone();
        r[4..6].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(parse(&r), Err(PacketError::ZeroGsoSize));

        let mut r = good.clone();
        r[1] = 4; // TCPV6 on an IPv4 packet
        assert!(matches!(parse(&r), Err(PacketError::GsoMismatch { .. })));

        let mut r = good.clone();
        r[1] = 5; // UDP_L4 on TCP
        assert!(matches!(parse(&r), Err(PacketError::GsoMismatch { .. })));

        let mut r = good.clone();
        r[v + 20 + 12] = 0x40; // data offset 4
        assert_eq!(parse(&r), Err(PacketError::BadDataOffset(4)));

        let mut r = good.clone();
        r[0] = FLAG_NEEDS_CSUM;
        r[6..8].copy_from_slice(&3039u16.to_le_bytes());
        assert!(matches!(
            parse(&r),
            Err(PacketError::BadChecksumOffsets { .. })
        ));

        let mut r = good;
        r[v + 6] = 0x20; // MF on a GSO record
        assert!(matches!(parse(&r), Err(PacketError::GsoMismatch { .. })));
    }

    #[test]
    fn empty_gso_is_an_error() {
        let mut s = v4_spec();
        s.payload_len = 0;
        let mut r = build::tcp_record(&s);
        r[1] = 1;
        r[4..6].copy_from_slice(&1000u16.to_le_bytes());
        assert_eq!(parse(&r), Err(PacketError::EmptyGso));
    }
}

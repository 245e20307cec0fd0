//! Router-hop processing (issue 3 item 3): each emulated hop decrements the IPv4 TTL (RFC 791,
//! RFC 1812 §5.3.1) or the IPv6 hop limit (RFC 8200 §3), and when the packet would expire answers
//! with an ICMP Time Exceeded, so stock `traceroute` (UDP to high ports, ICMP echo, or TCP probes)
//! lists every hop. The final host answers probes itself.
//!
//! Contract of [`process_hop`]:
//! - TTL / hop limit > 1: decrement in place (IPv4 header checksum updated incrementally, RFC 1624)
//!   → [`HopAction::Forward`]. Applies to GSO super-packets as a whole (all their segments share the
//!   header).
//! - TTL / hop limit ≤ 1: the packet is not forwarded. If an error may be sent, the reply record
//!   (plain vnet header, complete checksums) is written to `reply` → [`HopAction::TimeExceeded`];
//!   otherwise → [`HopAction::Drop`]. No error is sent about an ICMP error message, a non-first
//!   fragment, a packet from an unspecified, multicast, broadcast or loopback source, or to a
//!   multicast destination (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)).
//! - ICMPv4: type 11 code 0 from the router's IPv4 address to the original source, TTL 64, DF set,
//!   id 0 (an atomic datagram, RFC 6864), precedence 6 (TOS 0xc0, RFC 1812 §4.3.2.5); it quotes as
//!   much of the invoking packet as fits in 576 bytes (RFC 1812 §4.3.2.3 — more than RFC 792's IP
//!   header + 8 bytes; traceroute needs only those).
//! - ICMPv6: type 3 code 0 from the router's IPv6 address, hop limit 64, quoting as much of the
//!   invoking packet as fits in the minimum MTU of 1280 bytes (RFC 4443 §3.3), checksum over the
//!   pseudo-header (RFC 4443 §2.3).
//! - The quote is of the packet as the router received it, with its checksum completed if it was
//!   CHECKSUM_PARTIAL; for a TCP super-packet, of its first segment alone (the packet a real router
//!   would have seen first).

use crate::GsoType;
use crate::checksum::{checksum, fold, pseudo_header_v6, sum, update16};
use crate::parse::{IpVersion, L4Proto, Parsed, parse};
use crate::segment::{ChecksumMode, finish_checksum, split};
use crate::vnet::{VNET_HDR_LEN, VnetHeader};
use crate::{PacketError, ip};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest ICMPv4 error datagram (RFC 1812 §4.3.2.3).
pub const ICMPV4_ERROR_MAX: usize = 576;
/// Largest ICMPv6 error packet: the IPv6 minimum MTU (RFC 4443 §2.4(c)).
pub const ICMPV6_ERROR_MAX: usize = 1280;
/// TTL / hop limit of the replies the hop originates.
pub const REPLY_TTL: u8 = 64;

/// The addresses a hop answers from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterAddrs {
    /// Source of ICMPv4 replies.
    pub v4: Ipv4Addr,
    /// Source of ICMPv6 replies.
    pub v6: Ipv6Addr,
}

/// What the hop did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopAction {
    /// TTL / hop limit decremented in place; forward the record.
    Forward,
    /// The packet expired; `reply` holds the ICMP Time Exceeded record to send back to its source.
    TimeExceeded,
    /// The packet expired and no error may be sent about it; drop it.
    Drop,
}

/// Processes one record at a router hop; see the module docs. `reply` is cleared, and filled only
/// for [`HopAction::TimeExceeded`].
pub fn process_hop(
    record: &mut [u8],
    router: &RouterAddrs,
    reply: &mut Vec<u8>,
) -> Result<HopAction, PacketError> {
    reply.clear();
    let p = parse(record)?;
    let v = VNET_HDR_LEN;
    match p.version {
        IpVersion::V4 => {
            let ttl = record[v + 8];
            if ttl > 1 {
                let proto = record[v + 9];
                let old = u16::from_be_bytes([ttl, proto]);
                let new = u16::from_be_bytes([ttl - 1, proto]);
                let c = u16::from_be_bytes([record[v + 10], record[v + 11]]);
                record[v + 8] = ttl - 1;
                record[v + 10..v + 12].copy_from_slice(&update16(c, old, new).to_be_bytes());
                return Ok(HopAction::Forward);
            }
        }
        IpVersion::V6 => {
            if record[v + 7] > 1 {
                record[v + 7] -= 1;
                return Ok(HopAction::Forward);
            }
        }
    }
    if !may_send_error(record, &p) {
        return Ok(HopAction::Drop);
    }
    let quoted = quotable(record, &p)?;
    let pkt = &quoted[v..v + parse(&quoted)?.ip_len];
    reply.extend_from_slice(&VnetHeader::PLAIN.emit());
    match p.flow.src {
        IpAddr::V4(src) => icmpv4_time_exceeded(router.v4, src, pkt, reply),
        IpAddr::V6(src) => icmpv6_time_exceeded(router.v6, src, pkt, reply),
    }
    Ok(HopAction::TimeExceeded)
}

fn may_send_error(record: &[u8], p: &Parsed) -> bool {
    if p.later_fragment {
        return false;
    }
    let icmp_type = record.get(VNET_HDR_LEN + p.ip_header_len).copied();
    match (p.flow.src, p.flow.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let is_error = p.l4 == L4Proto::Icmp && matches!(icmp_type, Some(3 | 4 | 5 | 11 | 12));
            !(is_error
                || s.is_unspecified()
                || s.is_multicast()
                || s.is_broadcast()
                || s.is_loopback()
                || d.is_multicast()
                || d.is_broadcast())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let is_error = p.l4 == L4Proto::Icmpv6 && icmp_type.is_some_and(|t| t < 128);
            !(is_error
                || s.is_unspecified()
                || s.is_multicast()
                || s.is_loopback()
                || d.is_multicast())
        }
        _ => false,
    }
}

/// The record as it should be quoted: first segment of a TCP super-packet, checksum completed.
fn quotable(record: &[u8], p: &Parsed) -> Result<Vec<u8>, PacketError> {
    let mut q = Vec::new();
    if p.is_tcp() && p.vnet.gso_type != GsoType::None {
        split(record, p, 0, 1, ChecksumMode::FullWhenSingle, &mut q)?;
    } else {
        q.extend_from_slice(&record[..VNET_HDR_LEN + p.ip_len]);
        if p.vnet.gso_type == GsoType::None {
            finish_checksum(&mut q)?;
        }
    }
    Ok(q)
}

fn icmpv4_time_exceeded(from: Ipv4Addr, to: Ipv4Addr, invoking: &[u8], out: &mut Vec<u8>) {
    let quote = &invoking[..invoking.len().min(ICMPV4_ERROR_MAX - 28)];
    let total = 28 + quote.len();
    let start = out.len();
    out.extend_from_slice(&[0x45, 0xc0]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, REPLY_TTL, ip::PROTO_ICMP, 0, 0]);
    out.extend_from_slice(&from.octets());
    out.extend_from_slice(&to.octets());
    let c = checksum(&out[start..start + 20]);
    out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
    let icmp = out.len();
    out.extend_from_slice(&[11, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(quote);
    let c = checksum(&out[icmp..]);
    out[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
}

fn icmpv6_time_exceeded(from: Ipv6Addr, to: Ipv6Addr, invoking: &[u8], out: &mut Vec<u8>) {
    let quote = &invoking[..invoking.len().min(ICMPV6_ERROR_MAX - 48)];
    let plen = 8 + quote.len();
    out.extend_from_slice(&[0x60, 0, 0, 0]);
    out.extend_from_slice(&(plen as u16).to_be_bytes());
    out.extend_from_slice(&[ip::PROTO_ICMPV6, REPLY_TTL]);
    out.extend_from_slice(&from.octets());
    out.extend_from_slice(&to.octets());
    let icmp = out.len();
    out.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(quote);
    let pseudo = pseudo_header_v6(from.octets(), to.octets(), ip::PROTO_ICMPV6, plen as u32);
    let c = !fold(sum(&out[icmp..], pseudo));
    out[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, Addrs, TcpSpec, verify_record, verify_segment};
    use crate::ip::Ipv4Header;

    fn router() -> RouterAddrs {
        RouterAddrs {
            v4: Ipv4Addr::new(10, 9, 9, 1),
            v6: "fd00:9::1".parse().unwrap(),
        }
    }

    /// `rec` through [`router`]'s hop: what it did and the reply it wrote.
    fn hop(rec: &mut [u8]) -> (HopAction, Vec<u8>) {
        let mut reply = Vec::new();
        let action = process_hop(rec, &router(), &mut reply).unwrap();
        (action, reply)
    }

    #[test]
    fn ttl_64_becomes_63_with_valid_checksum() {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.payload_len = 9000;
        s.ttl = 64;
        let mut rec = build::tcp_record(&s);
        let (action, reply) = hop(&mut rec);
        assert_eq!(action, HopAction::Forward);
        assert!(reply.is_empty());
        let h = Ipv4Header::new(&rec[VNET_HDR_LEN..]).unwrap();
        assert_eq!(h.ttl(), 63);
        assert!(h.checksum_ok());
        verify_record(&rec).unwrap();
    }

    #[test]
    fn hop_limit_decrements() {
        let mut s = TcpSpec::new(Addrs::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
        ));
        s.ttl = 2;
        let mut rec = build::tcp_record(&s);
        assert_eq!(hop(&mut rec).0, HopAction::Forward);
        assert_eq!(rec[VNET_HDR_LEN + 7], 1);
        verify_record(&rec).unwrap();
    }

    #[test]
    fn ttl_1_udp_probe_gets_icmpv4_time_exceeded() {
        let payload = [0x40u8; 32];
        let mut rec = build::udp_record(
            &Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]),
            40000,
            33434,
            1,
            &payload,
        );
        let orig = rec.clone();
        let (action, reply) = hop(&mut rec);
        assert_eq!(action, HopAction::TimeExceeded);
        assert_eq!(rec, orig, "expired packet is not modified");
        assert_eq!(&reply[..VNET_HDR_LEN], &[0; VNET_HDR_LEN]);
        let p = parse(&reply).unwrap();
        assert_eq!(p.l4, L4Proto::Icmp);
        assert_eq!(p.flow.src, IpAddr::V4(router().v4));
        assert_eq!(p.flow.dst, "10.0.0.1".parse::<IpAddr>().unwrap());
        let ipk = &reply[VNET_HDR_LEN..];
        assert!(Ipv4Header::new(ipk).unwrap().checksum_ok());
        let icmp = &ipk[20..];
        assert_eq!((icmp[0], icmp[1]), (11, 0));
        assert_eq!(checksum(icmp), 0);
        assert_eq!(&icmp[8..], &orig[VNET_HDR_LEN..], "whole probe quoted");
        assert_eq!(ipk[8], REPLY_TTL);
    }

    #[test]
    fn ttl_1_super_packet_quotes_first_segment_up_to_576() {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.ttl = 1;
        s.mss = 1448;
        s.payload_len = 20_000;
        let mut rec = build::tcp_record(&s);
        let (action, reply) = hop(&mut rec);
        assert_eq!(action, HopAction::TimeExceeded);
        let ipk = &reply[VNET_HDR_LEN..];
        assert_eq!(ipk.len(), ICMPV4_ERROR_MAX);
        let quoted = &ipk[28..];
        let mut first = Vec::new();
        let p = parse(&rec).unwrap();
        split(&rec, &p, 0, 1, ChecksumMode::FullWhenSingle, &mut first).unwrap();
        verify_segment(&first).unwrap();
        assert_eq!(quoted, &first[VNET_HDR_LEN..VNET_HDR_LEN + 548]);
        assert_eq!(checksum(&ipk[20..]), 0);
    }

    #[test]
    fn hop_limit_1_gets_icmpv6_time_exceeded() {
        let src: Ipv6Addr = "fd00::1".parse().unwrap();
        let payload = vec![7u8; 1500];
        let mut rec = build::udp_record(
            &Addrs::v6(src, "fd00::2".parse().unwrap()),
            1,
            33434,
            1,
            &payload,
        );
        let orig = rec.clone();
        let (action, reply) = hop(&mut rec);
        assert_eq!(action, HopAction::TimeExceeded);
        let p = parse(&reply).unwrap();
        assert_eq!(p.l4, L4Proto::Icmpv6);
        assert_eq!(p.flow.src, IpAddr::V6(router().v6));
        assert_eq!(p.flow.dst, IpAddr::V6(src));
        let ipk = &reply[VNET_HDR_LEN..];
        assert_eq!(ipk.len(), ICMPV6_ERROR_MAX);
        let icmp = &ipk[40..];
        assert_eq!((icmp[0], icmp[1]), (3, 0));
        let pseudo = pseudo_header_v6(router().v6.octets(), src.octets(), 58, icmp.len() as u32);
        assert_eq!(fold(sum(icmp, pseudo)), 0xffff);
        assert_eq!(&icmp[8..], &orig[VNET_HDR_LEN..VNET_HDR_LEN + 1232]);
    }

    #[test]
    fn no_error_about_icmp_errors_or_multicast() {
        let mut rec = build::udp_record(&Addrs::v4([10, 0, 0, 1], [224, 0, 0, 9]), 1, 2, 1, b"x");
        assert_eq!(hop(&mut rec).0, HopAction::Drop);
        // An ICMP time exceeded itself expiring.
        let mut rec = build::udp_record(&Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]), 1, 2, 1, b"x");
        let (action, mut te) = hop(&mut rec);
        assert_eq!(action, HopAction::TimeExceeded);
        te[VNET_HDR_LEN + 8] = 1;
        te[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&[0, 0]);
        let c = checksum(&te[VNET_HDR_LEN..VNET_HDR_LEN + 20]);
        te[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(hop(&mut te).0, HopAction::Drop);
    }
}

//! A router answering ping (issue 17 item 3): an emulated router replies to an ICMP echo request
//! (RFC 792 type 8, RFC 4443 type 128) addressed to itself, so `longhaul isolate` and `ping` can
//! measure loss and rate up to each router of a path, as operators do with real routers.
//!
//! Contract of [`echo_reply`]:
//! - Only an echo request (code 0, not a fragment) to one of the router's own addresses is
//!   answered; anything else addressed to the router is [`Echo::Ignored`] (dropped, as a router
//!   drops traffic for itself it has no service for).
//! - The ICMP checksum is verified first (RFC 1812 §4.3.2.1, RFC 4443 §2.3: a message with a bad
//!   checksum is discarded) → [`Echo::BadChecksum`]; this is how a damaged probe is lost at the
//!   router. A CHECKSUM_PARTIAL request (a NIC would complete it) is taken as valid.
//! - The reply (plain vnet header, complete checksums) goes from the router's address to the
//!   request's source with TTL / hop limit [`REPLY_TTL`], identifier, sequence number and data
//!   echoed unchanged (IPv4 options and IPv6 extension headers are not); ICMPv4 replies have DF set
//!   and id 0 (RFC 6864).

use std::net::IpAddr;

use crate::checksum::{checksum, fold, pseudo_header_v6, sum};
use crate::hop::{REPLY_TTL, RouterAddrs};
use crate::parse::{L4Proto, parse};
use crate::vnet::{VNET_HDR_LEN, VnetHeader};
use crate::{PacketError, ip};

/// ICMPv4 echo request / reply types (RFC 792).
pub const ICMP_ECHO_REQUEST: u8 = 8;
/// ICMPv4 echo reply.
pub const ICMP_ECHO_REPLY: u8 = 0;
/// ICMPv6 echo request / reply types (RFC 4443 §4).
pub const ICMPV6_ECHO_REQUEST: u8 = 128;
/// ICMPv6 echo reply.
pub const ICMPV6_ECHO_REPLY: u8 = 129;

/// What the router did with a record addressed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// An echo request: `reply` holds the echo reply to send back to its source.
    Reply,
    /// An echo request whose ICMP checksum is wrong: discarded.
    BadChecksum,
    /// Not an echo request to this router: discarded.
    Ignored,
}

/// Answers `record` at the router `me`; see the module docs. `reply` is cleared, and filled only for
/// [`Echo::Reply`].
pub fn echo_reply(
    record: &[u8],
    me: &RouterAddrs,
    reply: &mut Vec<u8>,
) -> Result<Echo, PacketError> {
    reply.clear();
    let p = parse(record)?;
    let pkt = &record[VNET_HDR_LEN..VNET_HDR_LEN + p.ip_len];
    let icmp = &pkt[p.ip_header_len.min(pkt.len())..];
    if p.fragment || icmp.len() < 8 || icmp[1] != 0 {
        return Ok(Echo::Ignored);
    }
    let partial = p.vnet.needs_csum();
    match (p.l4, p.flow.src, p.flow.dst) {
        (L4Proto::Icmp, IpAddr::V4(src), IpAddr::V4(dst))
            if dst == me.v4 && icmp[0] == ICMP_ECHO_REQUEST =>
        {
            if !partial && checksum(icmp) != 0 {
                return Ok(Echo::BadChecksum);
            }
            reply.extend_from_slice(&VnetHeader::PLAIN.emit());
            let start = reply.len();
            reply.extend_from_slice(&[0x45, 0]);
            reply.extend_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
            reply.extend_from_slice(&[0, 0, 0x40, 0, REPLY_TTL, ip::PROTO_ICMP, 0, 0]);
            reply.extend_from_slice(&me.v4.octets());
            reply.extend_from_slice(&src.octets());
            let c = checksum(&reply[start..start + 20]);
            reply[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
            let at = reply.len();
            reply.extend_from_slice(&[ICMP_ECHO_REPLY, 0, 0, 0]);
            reply.extend_from_slice(&icmp[4..]);
            let c = checksum(&reply[at..]);
            reply[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
            Ok(Echo::Reply)
        }
        (L4Proto::Icmpv6, IpAddr::V6(src), IpAddr::V6(dst))
            if dst == me.v6 && icmp[0] == ICMPV6_ECHO_REQUEST =>
        {
            let len = icmp.len() as u32;
            if !partial
                && fold(sum(
                    icmp,
                    pseudo_header_v6(src.octets(), dst.octets(), ip::PROTO_ICMPV6, len),
                )) != 0xffff
            {
                return Ok(Echo::BadChecksum);
            }
            reply.extend_from_slice(&VnetHeader::PLAIN.emit());
            reply.extend_from_slice(&[0x60, 0, 0, 0]);
            reply.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
            reply.extend_from_slice(&[ip::PROTO_ICMPV6, REPLY_TTL]);
            reply.extend_from_slice(&me.v6.octets());
            reply.extend_from_slice(&src.octets());
            let at = reply.len();
            reply.extend_from_slice(&[ICMPV6_ECHO_REPLY, 0, 0, 0]);
            reply.extend_from_slice(&icmp[4..]);
            let pseudo = pseudo_header_v6(me.v6.octets(), src.octets(), ip::PROTO_ICMPV6, len);
            let c = !fold(sum(&reply[at..], pseudo));
            reply[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
            Ok(Echo::Reply)
        }
        _ => Ok(Echo::Ignored),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::Ipv4Header;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn router() -> RouterAddrs {
        RouterAddrs {
            v4: Ipv4Addr::new(10, 201, 1, 3),
            v6: "fd00:4c48:1::3".parse().unwrap(),
        }
    }

    /// An ICMPv4 echo request record from 10.201.0.1 to `to`, id 0x1234, sequence `seq`.
    fn ping4(to: Ipv4Addr, seq: u16, data: &[u8]) -> Vec<u8> {
        let mut r = VnetHeader::PLAIN.emit().to_vec();
        let total = 28 + data.len();
        r.extend_from_slice(&[0x45, 0]);
        r.extend_from_slice(&(total as u16).to_be_bytes());
        r.extend_from_slice(&[0, 7, 0, 0, 3, ip::PROTO_ICMP, 0, 0, 10, 201, 0, 1]);
        r.extend_from_slice(&to.octets());
        let c = checksum(&r[VNET_HDR_LEN..VNET_HDR_LEN + 20]);
        r[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&c.to_be_bytes());
        let at = r.len();
        r.extend_from_slice(&[ICMP_ECHO_REQUEST, 0, 0, 0, 0x12, 0x34]);
        r.extend_from_slice(&seq.to_be_bytes());
        r.extend_from_slice(data);
        let c = checksum(&r[at..]);
        r[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
        r
    }

    fn ping6(to: Ipv6Addr, data: &[u8]) -> Vec<u8> {
        let src: Ipv6Addr = "fd00:4c48::1".parse().unwrap();
        let mut r = VnetHeader::PLAIN.emit().to_vec();
        r.extend_from_slice(&[0x60, 0, 0, 0]);
        r.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        r.extend_from_slice(&[ip::PROTO_ICMPV6, 5]);
        r.extend_from_slice(&src.octets());
        r.extend_from_slice(&to.octets());
        let at = r.len();
        r.extend_from_slice(&[ICMPV6_ECHO_REQUEST, 0, 0, 0, 0, 9, 0, 1]);
        r.extend_from_slice(data);
        let pseudo = pseudo_header_v6(
            src.octets(),
            to.octets(),
            ip::PROTO_ICMPV6,
            (8 + data.len()) as u32,
        );
        let c = !fold(sum(&r[at..], pseudo));
        r[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
        r
    }

    #[test]
    fn an_echo_request_to_the_router_gets_its_reply() {
        let data: Vec<u8> = (0..1400u32).map(|i| i as u8).collect();
        let req = ping4(router().v4, 77, &data);
        let mut reply = Vec::new();
        assert_eq!(echo_reply(&req, &router(), &mut reply), Ok(Echo::Reply));
        let p = parse(&reply).unwrap();
        assert_eq!(p.flow.src, IpAddr::V4(router().v4));
        assert_eq!(p.flow.dst, "10.201.0.1".parse::<IpAddr>().unwrap());
        let ipk = &reply[VNET_HDR_LEN..];
        let h = Ipv4Header::new(ipk).unwrap();
        assert!(h.checksum_ok());
        assert_eq!(h.ttl(), REPLY_TTL);
        let icmp = &ipk[20..];
        assert_eq!(checksum(icmp), 0);
        assert_eq!(icmp[0], ICMP_ECHO_REPLY);
        assert_eq!(
            &icmp[4..],
            &req[VNET_HDR_LEN + 24..],
            "id, sequence and data echoed"
        );

        let req = ping6(router().v6, &data[..100]);
        assert_eq!(echo_reply(&req, &router(), &mut reply), Ok(Echo::Reply));
        let p = parse(&reply).unwrap();
        assert_eq!(p.flow.src, IpAddr::V6(router().v6));
        let icmp = &reply[VNET_HDR_LEN + 40..];
        assert_eq!(icmp[0], ICMPV6_ECHO_REPLY);
        let dst: Ipv6Addr = "fd00:4c48::1".parse().unwrap();
        let pseudo = pseudo_header_v6(
            router().v6.octets(),
            dst.octets(),
            ip::PROTO_ICMPV6,
            icmp.len() as u32,
        );
        assert_eq!(fold(sum(icmp, pseudo)), 0xffff);
        assert_eq!(&icmp[4..], &req[VNET_HDR_LEN + 44..]);
    }

    #[test]
    fn a_damaged_request_is_discarded() {
        let mut req = ping4(router().v4, 1, &[0x55; 64]);
        let last = req.len() - 1;
        req[last] ^= 0x10;
        let mut reply = Vec::new();
        assert_eq!(
            echo_reply(&req, &router(), &mut reply),
            Ok(Echo::BadChecksum)
        );
        assert!(reply.is_empty());
        let mut req = ping6(router().v6, &[0x55; 64]);
        req[VNET_HDR_LEN + 50] ^= 1;
        assert_eq!(
            echo_reply(&req, &router(), &mut reply),
            Ok(Echo::BadChecksum)
        );
    }

    #[test]
    fn other_traffic_is_ignored() {
        let mut reply = Vec::new();
        // For another address.
        let req = ping4(Ipv4Addr::new(10, 201, 1, 4), 1, b"x");
        assert_eq!(echo_reply(&req, &router(), &mut reply), Ok(Echo::Ignored));
        // Not a request: an echo reply.
        let mut req = ping4(router().v4, 1, b"x");
        req[VNET_HDR_LEN + 20] = ICMP_ECHO_REPLY;
        assert_eq!(echo_reply(&req, &router(), &mut reply), Ok(Echo::Ignored));
        // Truncated ICMP.
        let mut req = ping4(router().v4, 1, b"");
        req.truncate(VNET_HDR_LEN + 24);
        req[VNET_HDR_LEN + 3] = 24;
        assert!(matches!(
            echo_reply(&req, &router(), &mut reply),
            Ok(Echo::Ignored) | Err(_)
        ));
        // A UDP datagram.
        let udp = crate::build::udp_record(
            &crate::build::Addrs::v4([10, 201, 0, 1], router().v4.octets()),
            1,
            2,
            9,
            b"hello",
        );
        assert_eq!(echo_reply(&udp, &router(), &mut reply), Ok(Echo::Ignored));
        assert!(reply.is_empty());
    }
}

//! The probes of `longhaul isolate` on the wire: ICMP echo requests (RFC 792, RFC 4443 §4) as a
//! raw ICMP socket sends them, and what comes back to that socket, parsed.
//!
//! Contract:
//! - [`echo_request`] writes the ICMP message (the kernel adds the IP header): type 8 or 128, the
//!   caller's identifier and sequence number, then [`PAYLOAD_TAG`] and the measurement's round
//!   number, then filler up to the asked size. The ICMPv4 checksum is computed here; the ICMPv6 one
//!   is left zero, because Linux computes it for every raw ICMPv6 socket (RFC 3542 §3.1).
//! - [`parse_v4`] takes what a raw IPv4 ICMP socket receives (the IP header, then the ICMP
//!   message); [`parse_v6`] what a raw ICMPv6 socket receives (the message only: the kernel has
//!   verified its checksum). Both never panic on any bytes and return [`Received::Other`] for ICMP
//!   that is not about a probe.
//! - An echo reply whose ICMPv4 checksum fails is [`Received::Damaged`]: its source address (in the
//!   IP header, which has its own checksum) is kept and nothing else of it is trusted. A Time
//!   Exceeded or Destination Unreachable quoting one of our echo requests names the router that
//!   sent it and the probe's identifier and sequence number.

use std::net::{IpAddr, Ipv4Addr};

use longhaul_packet::checksum::checksum;

/// ICMPv4 types.
const V4_ECHO_REPLY: u8 = 0;
const V4_UNREACHABLE: u8 = 3;
const V4_ECHO_REQUEST: u8 = 8;
const V4_TIME_EXCEEDED: u8 = 11;
/// ICMPv6 types.
const V6_UNREACHABLE: u8 = 1;
const V6_TIME_EXCEEDED: u8 = 3;
const V6_ECHO_REQUEST: u8 = 128;
const V6_ECHO_REPLY: u8 = 129;

/// The ICMP echo header: type, code, checksum, identifier, sequence number.
pub const ECHO_HEADER: usize = 8;
/// The first bytes of every probe's data, so a reply to someone else's ping is never counted.
pub const PAYLOAD_TAG: [u8; 4] = *b"lhIS";
/// Smallest ICMP message [`echo_request`] writes: header, tag and round number.
pub const MIN_MESSAGE: usize = ECHO_HEADER + PAYLOAD_TAG.len() + 4;
/// Largest ICMP message (an IPv4 packet of 64 KiB − 1 with a 20-byte header).
pub const MAX_MESSAGE: usize = 65_515;

/// A probe's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeId {
    /// The ICMP identifier: one per run of `isolate`.
    pub ident: u16,
    /// The ICMP sequence number.
    pub seq: u16,
}

/// What a raw ICMP socket received, as far as the probes are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// An echo reply carrying a probe's tag: from `from`, to probe `id`, of measurement `round`.
    Echo {
        /// The reflector that answered.
        from: IpAddr,
        /// The probe answered.
        id: ProbeId,
        /// The round number the probe carried.
        round: u32,
        /// ICMP message bytes.
        len: usize,
    },
    /// An ICMPv4 echo reply whose checksum fails (damaged on the way): only its source is known.
    Damaged {
        /// The source address of its IP header.
        from: IpAddr,
    },
    /// A router's Time Exceeded about probe `id` (its TTL / hop limit ran out there).
    TimeExceeded {
        /// The router.
        from: IpAddr,
        /// The probe that expired.
        id: ProbeId,
    },
    /// A Destination Unreachable about probe `id`.
    Unreachable {
        /// Who said so.
        from: IpAddr,
        /// The probe.
        id: ProbeId,
    },
    /// Anything else (other programs' ICMP, other types, truncated messages).
    Other,
}

/// Writes the ICMP echo request for probe `id` of measurement `round`, `size` bytes long (clamped
/// to [`MIN_MESSAGE`]..=[`MAX_MESSAGE`]), into `out` (cleared first).
pub fn echo_request(v6: bool, id: ProbeId, round: u32, size: usize, out: &mut Vec<u8>) {
    let size = size.clamp(MIN_MESSAGE, MAX_MESSAGE);
    out.clear();
    out.push(if v6 { V6_ECHO_REQUEST } else { V4_ECHO_REQUEST });
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&id.ident.to_be_bytes());
    out.extend_from_slice(&id.seq.to_be_bytes());
    out.extend_from_slice(&PAYLOAD_TAG);
    out.extend_from_slice(&round.to_be_bytes());
    out.extend((out.len()..size).map(|i| (i as u8) ^ 0x5a));
    if !v6 {
        let c = checksum(out);
        out[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// Parses what a raw IPv4 ICMP socket received: an IPv4 header, then an ICMP message.
pub fn parse_v4(datagram: &[u8]) -> Received {
    let Some(&first) = datagram.first() else {
        return Received::Other;
    };
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 || datagram.len() < ihl + ECHO_HEADER {
        return Received::Other;
    }
    let from = IpAddr::V4(Ipv4Addr::new(
        datagram[12],
        datagram[13],
        datagram[14],
        datagram[15],
    ));
    let icmp = &datagram[ihl..];
    match icmp[0] {
        V4_ECHO_REPLY => {
            if checksum(icmp) != 0 {
                return Received::Damaged { from };
            }
            echo(from, icmp)
        }
        t @ (V4_TIME_EXCEEDED | V4_UNREACHABLE) => {
            // The quote: the invoking IPv4 header, then at least 8 bytes of our request.
            let quote = &icmp[ECHO_HEADER..];
            let Some(&q0) = quote.first() else {
                return Received::Other;
            };
            let qihl = usize::from(q0 & 0x0f) * 4;
            if q0 >> 4 != 4 || qihl < 20 || quote.len() < qihl + ECHO_HEADER || quote[9] != 1 {
                return Received::Other;
            }
            quoted(t == V4_TIME_EXCEEDED, from, &quote[qihl..], V4_ECHO_REQUEST)
        }
        _ => Received::Other,
    }
}

/// Parses what a raw ICMPv6 socket received from `from`: the ICMPv6 message alone.
pub fn parse_v6(from: IpAddr, message: &[u8]) -> Received {
    if message.len() < ECHO_HEADER {
        return Received::Other;
    }
    match message[0] {
        V6_ECHO_REPLY => echo(from, message),
        t @ (V6_TIME_EXCEEDED | V6_UNREACHABLE) => {
            // The quote: the invoking IPv6 header (extension headers are not walked: our requests
            // carry none), then our request.
            let quote = &message[ECHO_HEADER..];
            if quote.len() < 40 + ECHO_HEADER || quote[0] >> 4 != 6 || quote[6] != 58 {
                return Received::Other;
            }
            quoted(t == V6_TIME_EXCEEDED, from, &quote[40..], V6_ECHO_REQUEST)
        }
        _ => Received::Other,
    }
}

fn id_of(icmp: &[u8]) -> ProbeId {
    ProbeId {
        ident: u16::from_be_bytes([icmp[4], icmp[5]]),
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
    }
}

/// An echo reply (checksum already good) carrying a probe's tag and round.
fn echo(from: IpAddr, icmp: &[u8]) -> Received {
    match icmp.get(ECHO_HEADER..MIN_MESSAGE) {
        Some(data) if data[..PAYLOAD_TAG.len()] == PAYLOAD_TAG => Received::Echo {
            from,
            id: id_of(icmp),
            round: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
            len: icmp.len(),
        },
        _ => Received::Other,
    }
}

/// An ICMP error quoting `request` (the quoted ICMP message, at least its 8-byte header).
fn quoted(expired: bool, from: IpAddr, request: &[u8], request_type: u8) -> Received {
    if request[0] != request_type {
        return Received::Other;
    }
    let id = id_of(request);
    if expired {
        Received::TimeExceeded { from, id }
    } else {
        Received::Unreachable { from, id }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: ProbeId = ProbeId {
        ident: 0xbeef,
        seq: 513,
    };

    /// `icmp` inside an IPv4 header from `src`.
    fn in_ipv4(src: [u8; 4], icmp: &[u8]) -> Vec<u8> {
        let mut d = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
        d.extend_from_slice(&src);
        d.extend_from_slice(&[10, 201, 0, 1]);
        d.extend_from_slice(icmp);
        d
    }

    /// The reply a reflector makes of `request`.
    fn reply_to(request: &[u8], v6: bool) -> Vec<u8> {
        let mut r = request.to_vec();
        r[0] = if v6 { V6_ECHO_REPLY } else { V4_ECHO_REPLY };
        r[2..4].copy_from_slice(&[0, 0]);
        if !v6 {
            let c = checksum(&r);
            r[2..4].copy_from_slice(&c.to_be_bytes());
        }
        r
    }

    #[test]
    fn a_request_is_sized_tagged_and_checksummed() {
        let mut m = Vec::new();
        echo_request(false, ID, 7, 1480, &mut m);
        assert_eq!(m.len(), 1480);
        assert_eq!(checksum(&m), 0);
        assert_eq!((m[0], m[1]), (V4_ECHO_REQUEST, 0));
        assert_eq!(id_of(&m), ID);
        assert_eq!(&m[8..12], &PAYLOAD_TAG);
        echo_request(true, ID, 7, 3, &mut m);
        assert_eq!(m.len(), MIN_MESSAGE);
        assert_eq!(m[0], V6_ECHO_REQUEST);
        assert_eq!(&m[2..4], &[0, 0], "the kernel fills the ICMPv6 checksum");
    }

    #[test]
    fn replies_parse_with_their_round() {
        let mut m = Vec::new();
        echo_request(false, ID, 42, 100, &mut m);
        let got = parse_v4(&in_ipv4([10, 201, 1, 3], &reply_to(&m, false)));
        assert_eq!(
            got,
            Received::Echo {
                from: "10.201.1.3".parse().unwrap(),
                id: ID,
                round: 42,
                len: 100
            }
        );
        echo_request(true, ID, 43, 64, &mut m);
        let from: IpAddr = "fd00:4c48:1::3".parse().unwrap();
        assert_eq!(
            parse_v6(from, &reply_to(&m, true)),
            Received::Echo {
                from,
                id: ID,
                round: 43,
                len: 64
            }
        );
    }

    #[test]
    fn a_damaged_reply_keeps_only_its_source() {
        let mut m = Vec::new();
        echo_request(false, ID, 1, 200, &mut m);
        let mut r = reply_to(&m, false);
        r[150] ^= 4;
        assert_eq!(
            parse_v4(&in_ipv4([10, 201, 1, 5], &r)),
            Received::Damaged {
                from: "10.201.1.5".parse().unwrap()
            }
        );
    }

    #[test]
    fn errors_quoting_a_probe_name_the_router_and_the_probe() {
        let mut m = Vec::new();
        echo_request(false, ID, 1, 64, &mut m);
        let invoking = in_ipv4([10, 201, 0, 1], &m);
        for (t, want) in [
            (
                V4_TIME_EXCEEDED,
                Received::TimeExceeded {
                    from: "10.201.1.2".parse().unwrap(),
                    id: ID,
                },
            ),
            (
                V4_UNREACHABLE,
                Received::Unreachable {
                    from: "10.201.1.2".parse().unwrap(),
                    id: ID,
                },
            ),
        ] {
            let mut e = vec![t, 0, 0, 0, 0, 0, 0, 0];
            e.extend_from_slice(&invoking[..28]);
            assert_eq!(parse_v4(&in_ipv4([10, 201, 1, 2], &e)), want);
        }
        echo_request(true, ID, 1, 64, &mut m);
        let mut e = vec![V6_TIME_EXCEEDED, 0, 0, 0, 0, 0, 0, 0];
        let mut ip6 = vec![0x60, 0, 0, 0, 0, 64, 58, 1];
        ip6.extend_from_slice(&[0; 32]);
        e.extend_from_slice(&ip6);
        e.extend_from_slice(&m);
        let from: IpAddr = "fd00:4c48:1::2".parse().unwrap();
        assert_eq!(parse_v6(from, &e), Received::TimeExceeded { from, id: ID });
    }

    #[test]
    fn other_icmp_and_short_bytes_are_other() {
        let mut m = Vec::new();
        echo_request(false, ID, 1, 64, &mut m);
        // Someone else's ping reply (no tag).
        let mut r = reply_to(&m, false);
        r[8..12].copy_from_slice(b"ping");
        let c = {
            r[2..4].copy_from_slice(&[0, 0]);
            checksum(&r)
        };
        r[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse_v4(&in_ipv4([1, 2, 3, 4], &r)), Received::Other);
        // Our own request looped back, truncated headers, garbage.
        assert_eq!(parse_v4(&in_ipv4([1, 2, 3, 4], &m)), Received::Other);
        for n in 0..40 {
            let junk = in_ipv4([1, 2, 3, 4], &[V4_TIME_EXCEEDED; 40]);
            let _ = parse_v4(&junk[..n]);
            let _ = parse_v6("::1".parse().unwrap(), &junk[..n]);
        }
        assert_eq!(parse_v4(&[0x46, 0, 0]), Received::Other);
    }
}

//! Splitting TCP super-packets per segment (as wireguard-go's `gsoSplit` does) and UDP
//! super-datagrams per datagram, and finishing a partial checksum.
//!
//! [`split`] produces the record carrying exactly segments `[first, first + count)` of a parsed TCP
//! or UDP record (RFC 9293 segmentation as a TSO device does it, virtio spec §5.1.6.2; UDP as the
//! kernel's `__udp_gso_segment` does it, every datagram `gso_size` bytes but the last):
//! - headers (IP with options/extension headers, TCP with options, UDP) copied; payload bytes
//!   `first × mss ..` up to `count × mss` bytes (the last segment of the original may be short);
//! - UDP: the length field is the piece's whole UDP length, as the kernel gives a super-datagram
//!   (`udp_send_skb`, `udp_gro_complete`); `gso_type` stays `UDP_L4` on a multi-datagram piece;
//! - TCP sequence number `+= first × mss` (mod 2³²);
//! - IPv4 identification `+= first` (mod 2¹⁶), as Linux's TSO numbers segments (non-FIXEDID); the
//!   IPv4 total length / IPv6 payload length rewritten and the IPv4 header checksum recomputed;
//! - flags: CWR kept only on the piece holding the original first segment, FIN and PSH only on the
//!   piece holding the original last segment; other flags copied;
//! - vnet: `gso_size` kept, `hdr_len` set to the recomputed header length, `gso_type` NONE when
//!   `count == 1` (else the original type, ECN bit iff the piece carries CWR); checksum (TCP, or
//!   UDP) per [`ChecksumMode`].
//!
//! Trailing buffer bytes after the IP packet are dropped. Outputs go to a caller-provided `Vec`.

use crate::GsoType;
use crate::checksum::{fold, pseudo_header_v4, pseudo_header_v6, sum};
use crate::parse::{IpVersion, L4Proto, Parsed, parse};
use crate::tcp::{CWR, FIN, PSH};
use crate::vnet::{FLAG_NEEDS_CSUM, VNET_HDR_LEN, VnetHeader};
use crate::{PacketError, ip};

/// How the TCP checksum of a produced record is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumMode {
    /// CHECKSUM_PARTIAL: vnet `NEEDS_CSUM` with `csum_start` = TCP header, `csum_offset` = 16, and
    /// the TCP checksum field holding the folded (uncomplemented) pseudo-header sum for the new length.
    Partial,
    /// When the result is a single segment, compute the full TCP checksum and set vnet flags to 0, so
    /// the packet is valid on any path (pcap, a non-offloading device); multi-segment results stay
    /// [`ChecksumMode::Partial`].
    FullWhenSingle,
}

/// The pseudo-header sum of the IP packet `pkt` for an upper layer of `len` bytes of protocol `proto`.
/// IPv6 uses the fixed header's destination (a routing header's final destination is not looked up).
pub(crate) fn pseudo_sum(pkt: &[u8], version: IpVersion, proto: u8, len: usize) -> u64 {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    match version {
        IpVersion::V4 => {
            let a = |i: usize| [pkt[i], pkt[i + 1], pkt[i + 2], pkt[i + 3]];
            pseudo_header_v4(a(12), a(16), proto, len)
        }
        IpVersion::V6 => {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&pkt[8..24]);
            d.copy_from_slice(&pkt[24..40]);
            pseudo_header_v6(s, d, proto, len)
        }
    }
}

/// Rewrites the IP length fields (and IPv4 id + header checksum) of the IP packet `pkt` whose total
/// length is now `new_len`.
pub(crate) fn fix_ip(pkt: &mut [u8], p: &Parsed, new_len: usize, id_delta: u16) {
    match p.version {
        IpVersion::V4 => {
            let id = u16::from_be_bytes([pkt[4], pkt[5]]).wrapping_add(id_delta);
            // new_len ≤ original total length, which fit in 16 bits (callers ensure it for merges).
            ip::set_ipv4_len_id_checksum(pkt, p.ip_header_len, new_len as u16, id);
        }
        IpVersion::V6 => ip::set_ipv6_payload_len(pkt, (new_len - ip::IPV6_HDR_LEN) as u16),
    }
}

/// Fills in the TCP checksum of the IP packet `pkt` and returns the vnet checksum fields
/// `(flags, csum_start, csum_offset)` to use.
pub(crate) fn set_tcp_checksum(pkt: &mut [u8], p: &Parsed, full: bool) -> (u8, u16, u16) {
    set_l4_checksum(pkt, p, L4Proto::Tcp, full)
}

/// [`set_tcp_checksum`] for a TCP or UDP packet: the pseudo-header sum over the whole L4 part (for
/// a UDP super-datagram, over its whole length, as `udp4_hwcsum` leaves it and `__udp_gso_segment`
/// adjusts per datagram). A full UDP checksum of 0 is sent as 0xffff (RFC 768).
fn set_l4_checksum(pkt: &mut [u8], p: &Parsed, proto: L4Proto, full: bool) -> (u8, u16, u16) {
    let l4 = p.ip_header_len;
    let (number, offset) = match proto {
        L4Proto::Udp => (ip::PROTO_UDP, crate::udp::CHECKSUM_OFFSET),
        _ => (ip::PROTO_TCP, crate::tcp::CHECKSUM_OFFSET),
    };
    let l4_len = pkt.len() - l4;
    let pseudo = pseudo_sum(pkt, p.version, number, l4_len);
    let field = l4 + offset;
    if full {
        pkt[field..field + 2].copy_from_slice(&[0, 0]);
        let mut c = !fold(sum(&pkt[l4..], pseudo));
        if c == 0 && proto == L4Proto::Udp {
            c = 0xffff;
        }
        pkt[field..field + 2].copy_from_slice(&c.to_be_bytes());
        (0, 0, 0)
    } else {
        pkt[field..field + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
        (FLAG_NEEDS_CSUM, l4 as u16, offset as u16)
    }
}

/// Writes into `out` the record carrying segments `[first, first + count)` of the TCP record `buf`
/// (which `p` was parsed from). See the module docs for every field rewritten.
///
/// Errors: not a TCP record with header ([`PacketError::NotSplittable`]), empty or out-of-range
/// segment range ([`PacketError::BadRange`]), or `buf` shorter than `p` says.
pub fn split(
    buf: &[u8],
    p: &Parsed,
    first: usize,
    count: usize,
    mode: ChecksumMode,
    out: &mut Vec<u8>,
) -> Result<(), PacketError> {
    let tcp = p.tcp.filter(|_| p.l4 == L4Proto::Tcp);
    if p.fragment || (tcp.is_none() && p.l4 != L4Proto::Udp) {
        return Err(PacketError::NotSplittable(
            "not an unfragmented TCP or UDP packet",
        ));
    }
    if count == 0 || first.checked_add(count).is_none_or(|end| end > p.segments) {
        return Err(PacketError::BadRange {
            first,
            count,
            segments: p.segments,
        });
    }
    let hl = p.headers_len();
    if buf.len() < VNET_HDR_LEN + p.ip_len || hl + p.payload_len != p.ip_len {
        return Err(PacketError::NotSplittable(
            "buffer does not match its parse",
        ));
    }
    // first < segments ≤ 65535 and mss ≤ 65535: no overflow on 64-bit; checked for 32-bit targets.
    let start = first
        .checked_mul(p.mss)
        .ok_or(PacketError::NotSplittable("offset overflow"))?;
    let end = (start + count.saturating_mul(p.mss).min(p.payload_len)).min(p.payload_len);
    let new_len = hl + (end - start);

    out.clear();
    out.extend_from_slice(&buf[..VNET_HDR_LEN + hl]);
    out.extend_from_slice(&buf[VNET_HDR_LEN + hl + start..VNET_HDR_LEN + hl + end]);
    let pkt = &mut out[VNET_HDR_LEN..];

    fix_ip(pkt, p, new_len, first as u16);
    let t = p.ip_header_len;
    let single = count == 1;
    let full = single && mode == ChecksumMode::FullWhenSingle;
    let (flags, (csum_flags, csum_start, csum_offset)) = match tcp {
        Some(tcp) => {
            let seq = tcp.seq.wrapping_add(start as u32);
            pkt[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
            let mut flags = tcp.flags;
            if first != 0 {
                flags &= !CWR;
            }
            if first + count != p.segments {
                flags &= !(FIN | PSH);
            }
            pkt[t + 13] = flags;
            (flags, set_tcp_checksum(pkt, p, full))
        }
        None => {
            // The length of the whole piece: the kernel's UDP GSO (`udp_send_skb`) and GRO
            // (`udp_gro_complete`) give a super-datagram its whole length, and its receive path
            // trims a datagram to this field.
            let udp_len = (new_len - t) as u16;
            pkt[t + 4..t + 6].copy_from_slice(&udp_len.to_be_bytes());
            (0, set_l4_checksum(pkt, p, L4Proto::Udp, full))
        }
    };
    let gso_type = if single {
        GsoType::None
    } else {
        p.vnet.gso_type
    };
    let vnet = VnetHeader {
        flags: csum_flags,
        gso_type,
        ecn: !single && flags & CWR != 0 && gso_type != GsoType::None,
        hdr_len: hl as u16,
        gso_size: p.vnet.gso_size,
        csum_start,
        csum_offset,
    };
    out[..VNET_HDR_LEN].copy_from_slice(&vnet.emit());
    Ok(())
}

/// Writes into `out` the record carrying only the first `k` segments of `buf` (queue overflow: admit
/// the segments that fit): [`split`] with `first = 0`. For the tests: the link model drops a queue's
/// overflow per segment, and the forwarder cuts the runs it delivers out with [`split`].
#[cfg(test)]
pub(crate) fn truncate(
    buf: &[u8],
    p: &Parsed,
    k: usize,
    mode: ChecksumMode,
    out: &mut Vec<u8>,
) -> Result<(), PacketError> {
    split(buf, p, 0, k, mode, out)
}

/// Completes a CHECKSUM_PARTIAL single-packet record in place: sums from `csum_start` to the end of
/// the IP packet (the field already holds the pseudo-header sum), stores the complement at
/// `csum_start + csum_offset` (a UDP result of 0 is sent as 0xffff, RFC 768), and clears the vnet
/// flags and checksum offsets. A record without `NEEDS_CSUM` is left unchanged.
///
/// Errors: parse errors, or a GSO record ([`PacketError::NotSingleSegment`]) whose checksums only the
/// segmenting device can finish.
pub fn finish_checksum(record: &mut [u8]) -> Result<(), PacketError> {
    let p = parse(record)?;
    if !p.vnet.needs_csum() {
        return Ok(());
    }
    if p.vnet.gso_type != GsoType::None {
        return Err(PacketError::NotSingleSegment);
    }
    let pkt = &mut record[VNET_HDR_LEN..VNET_HDR_LEN + p.ip_len];
    let start = usize::from(p.vnet.csum_start);
    let field = start + usize::from(p.vnet.csum_offset);
    let mut c = !fold(sum(&pkt[start..], 0));
    if c == 0 && p.l4 == L4Proto::Udp && field == p.ip_header_len + crate::udp::CHECKSUM_OFFSET {
        c = 0xffff;
    }
    pkt[field..field + 2].copy_from_slice(&c.to_be_bytes());
    let vnet = VnetHeader {
        flags: p.vnet.flags & !FLAG_NEEDS_CSUM,
        csum_start: 0,
        csum_offset: 0,
        ..p.vnet
    };
    record[..VNET_HDR_LEN].copy_from_slice(&vnet.emit());
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::build::{self, Addrs, TcpSpec, verify_record, verify_segment};
    use crate::tcp::ACK;

    /// splitmix64: a seeded generator for the randomized loops (seed printed on failure).
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    pub(crate) fn random_spec(rng: &mut Rng) -> TcpSpec {
        let mut s = if rng.below(2) == 0 {
            TcpSpec::new(Addrs::v4([192, 0, 2, 1], [198, 51, 100, 7]))
        } else {
            TcpSpec::new(Addrs::v6(
                "2001:db8::1".parse().unwrap(),
                "2001:db8:1::2".parse().unwrap(),
            ))
        };
        s.mss = [1, 7, 536, 1220, 1448, 8948][rng.below(6)];
        s.seq = rng.next() as u32;
        s.ipv4_id = rng.next() as u16;
        s.flags = ACK | [0, PSH, FIN | PSH, CWR, CWR | PSH | FIN][rng.below(5)];
        s.tcp_options = if rng.below(2) == 0 {
            vec![]
        } else {
            vec![1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8]
        };
        s.ipv4_options = if rng.below(3) == 0 {
            vec![1, 1, 1, 0]
        } else {
            vec![]
        };
        s.ipv6_dest_options = rng.below(3) == 0;
        let max_payload = 65_535 - 120;
        let segs = 1 + rng.below((max_payload / usize::from(s.mss)).clamp(1, 60));
        s.payload_len = (segs - 1) * usize::from(s.mss) + 1 + rng.below(usize::from(s.mss));
        s.payload_seed = rng.next() as u8;
        s
    }

    /// The next piece of a random partition with `left` segments left: its length and how its
    /// checksum is left.
    fn random_piece(rng: &mut Rng, left: usize) -> (usize, ChecksumMode) {
        let count = 1 + rng.below(left);
        let mode = if rng.below(2) == 0 {
            ChecksumMode::Partial
        } else {
            ChecksumMode::FullWhenSingle
        };
        (count, mode)
    }

    fn payload(rec: &[u8]) -> Vec<u8> {
        let p = parse(rec).unwrap();
        rec[VNET_HDR_LEN + p.headers_len()..VNET_HDR_LEN + p.ip_len].to_vec()
    }

    #[test]
    fn split_then_verify_random() {
        let mut rng = Rng(0x5eed_0001);
        let mut piece = Vec::new();
        for iter in 0..400 {
            let s = random_spec(&mut rng);
            let rec = build::tcp_record(&s);
            verify_record(&rec).unwrap();
            let p = parse(&rec).unwrap();
            let orig_payload = payload(&rec);
            let orig_flags = p.tcp.unwrap().flags;
            // Random partition of [0, segments) into ranges.
            let mut first = 0;
            let mut joined = Vec::new();
            while first < p.segments {
                let (count, mode) = random_piece(&mut rng, p.segments - first);
                split(&rec, &p, first, count, mode, &mut piece).unwrap();
                verify_record(&piece).unwrap_or_else(|e| panic!("iter {iter}: {e}"));
                let q = parse(&piece).unwrap();
                assert_eq!(q.segments, count, "iter {iter}");
                let t = q.tcp.unwrap();
                assert_eq!(t.seq, s.seq.wrapping_add((first * p.mss) as u32));
                assert_eq!(t.flags & CWR, if first == 0 { orig_flags & CWR } else { 0 });
                let last = first + count == p.segments;
                let keep = FIN | PSH;
                assert_eq!(t.flags & keep, if last { orig_flags & keep } else { 0 });
                if count == 1 {
                    assert_eq!(q.vnet.gso_type, GsoType::None);
                    verify_segment(&piece).unwrap_or_else(|e| panic!("iter {iter}: {e}"));
                    if mode == ChecksumMode::FullWhenSingle {
                        assert_eq!(q.vnet.flags, 0);
                    }
                }
                if let IpVersion::V4 = q.version {
                    let id = u16::from_be_bytes([piece[VNET_HDR_LEN + 4], piece[VNET_HDR_LEN + 5]]);
                    assert_eq!(id, s.ipv4_id.wrapping_add(first as u16));
                }
                joined.extend_from_slice(&payload(&piece));
                first += count;
            }
            assert_eq!(joined, orig_payload, "iter {iter}");
        }
    }

    #[test]
    fn every_single_segment_is_valid_v4_and_v6() {
        for addrs in [
            Addrs::v4([10, 1, 0, 1], [10, 1, 0, 2]),
            Addrs::v6("fd00::a".parse().unwrap(), "fd00::b".parse().unwrap()),
        ] {
            let mut s = TcpSpec::new(addrs);
            s.mss = 1000;
            s.payload_len = 4500;
            s.flags = ACK | PSH | FIN;
            let rec = build::tcp_record(&s);
            let p = parse(&rec).unwrap();
            let mut out = Vec::new();
            for i in 0..p.segments {
                split(&rec, &p, i, 1, ChecksumMode::FullWhenSingle, &mut out).unwrap();
                let q = verify_segment(&out).unwrap();
                assert_eq!(q.payload_len, if i == 4 { 500 } else { 1000 });
                assert_eq!(q.ip_len, q.headers_len() + q.payload_len);
            }
        }
    }

    #[test]
    fn truncate_clears_fin_psh_when_last_segment_is_cut() {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.mss = 1448;
        s.payload_len = 1448 * 10;
        s.flags = ACK | PSH | FIN | CWR;
        let rec = build::tcp_record(&s);
        let p = parse(&rec).unwrap();
        let mut out = Vec::new();
        for k in 1..=10 {
            truncate(&rec, &p, k, ChecksumMode::Partial, &mut out).unwrap();
            verify_record(&out).unwrap();
            let q = parse(&out).unwrap();
            assert_eq!(q.segments, k);
            assert_eq!(q.payload_len, 1448 * k);
            let f = q.tcp.unwrap().flags;
            assert_eq!(f & (FIN | PSH) != 0, k == 10);
            assert_ne!(f & CWR, 0);
            assert_eq!(
                q.vnet.gso_type,
                if k == 1 {
                    GsoType::None
                } else {
                    GsoType::TcpV4
                }
            );
            assert_eq!(q.vnet.ecn, k > 1);
            assert_eq!(&payload(&out)[..], &payload(&rec)[..1448 * k]);
        }
        assert!(matches!(
            truncate(&rec, &p, 0, ChecksumMode::Partial, &mut out),
            Err(PacketError::BadRange { .. })
        ));
        assert!(matches!(
            truncate(&rec, &p, 11, ChecksumMode::Partial, &mut out),
            Err(PacketError::BadRange { .. })
        ));
    }

    #[test]
    fn udp_super_datagrams_split_into_datagrams_the_kernel_would_send() {
        let mut rng = Rng(0x5eed_0002);
        let mut piece = Vec::new();
        for iter in 0..300 {
            let addrs = if rng.below(2) == 0 {
                Addrs::v4([10, 201, 0, 1], [10, 201, 0, 2])
            } else {
                Addrs::v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
            };
            let gso = [1, 7, 1200, 1452, 8952][rng.below(5)];
            let datagrams = 1 + rng.below(40.min(60_000 / gso));
            let len = (datagrams - 1) * gso + 1 + rng.below(gso);
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let rec = build::udp_gso_record(&addrs, 4433, 50_000, gso as u16, &data);
            verify_record(&rec).unwrap_or_else(|e| panic!("iter {iter}: {e}"));
            let p = parse(&rec).unwrap();
            assert_eq!(p.segments, datagrams, "iter {iter}");
            let mut first = 0;
            let mut joined = Vec::new();
            while first < p.segments {
                let (count, mode) = random_piece(&mut rng, p.segments - first);
                split(&rec, &p, first, count, mode, &mut piece).unwrap();
                let q = verify_record(&piece).unwrap_or_else(|e| panic!("iter {iter}: {e}"));
                assert_eq!(q.segments, count, "iter {iter}");
                assert_eq!((q.flow.src_port, q.flow.dst_port), (4433, 50_000));
                if count == 1 {
                    assert_eq!(q.vnet.gso_type, GsoType::None);
                    verify_segment(&piece).unwrap_or_else(|e| panic!("iter {iter}: {e}"));
                    assert_eq!(q.vnet.flags == 0, mode == ChecksumMode::FullWhenSingle);
                } else {
                    assert_eq!(q.vnet.gso_type, GsoType::UdpL4);
                    assert_eq!(usize::from(q.vnet.gso_size), gso);
                }
                if let IpVersion::V4 = q.version {
                    let id = u16::from_be_bytes([piece[VNET_HDR_LEN + 4], piece[VNET_HDR_LEN + 5]]);
                    assert_eq!(id, 0x1234u16.wrapping_add(first as u16));
                }
                joined.extend_from_slice(&payload(&piece));
                first += count;
            }
            assert_eq!(joined, data, "iter {iter}");
        }
    }

    #[test]
    fn split_refuses_what_is_neither_tcp_nor_udp() {
        let rec = build::udp_record(&Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]), 1, 2, 64, b"hi");
        let mut icmp = rec.clone();
        icmp[VNET_HDR_LEN + 9] = crate::ip::PROTO_ICMP;
        icmp[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&[0, 0]);
        let h = crate::checksum::checksum(&icmp[VNET_HDR_LEN..VNET_HDR_LEN + 20]);
        icmp[VNET_HDR_LEN + 10..VNET_HDR_LEN + 12].copy_from_slice(&h.to_be_bytes());
        let p = parse(&icmp).unwrap();
        assert!(matches!(
            split(&icmp, &p, 0, 1, ChecksumMode::Partial, &mut Vec::new()),
            Err(PacketError::NotSplittable(_))
        ));
        let p = parse(&rec).unwrap();
        let mut out = Vec::new();
        split(&rec, &p, 0, 1, ChecksumMode::FullWhenSingle, &mut out).unwrap();
        assert_eq!(
            out[VNET_HDR_LEN..],
            rec[VNET_HDR_LEN..],
            "a plain datagram split whole is the same packet"
        );
    }

    #[test]
    fn finish_checksum_completes_partial_single_packet() {
        let mut s = TcpSpec::new(Addrs::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
        ));
        s.payload_len = 333;
        let mut rec = build::tcp_record(&s);
        assert!(parse(&rec).unwrap().vnet.needs_csum());
        finish_checksum(&mut rec).unwrap();
        assert_eq!(rec[0], 0);
        verify_segment(&rec).unwrap();
    }
}

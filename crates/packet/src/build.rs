//! Test support, public for the emulator's tests and the fuzz target: builders of valid TUN records
//! (IPv4/IPv6 TCP super-packets with vnet headers, UDP datagrams) and verifiers of produced records.
//!
//! Contract: builders produce exactly what a Linux sender hands a TUN with TSO on: a TCP record with
//! more payload than one MSS is a GSO record (TCPV4/TCPV6, `gso_size` = MSS, ECN bit iff CWR), every
//! TCP record is CHECKSUM_PARTIAL with a correct `hdr_len`; plain UDP records carry complete checksums,
//! UDP super-datagrams (`UDP_L4`, a `UDP_SEGMENT` send) partial ones.
//! Builders panic on impossible specs (packet over 64 KiB, options not a multiple of 4 bytes);
//! verifiers return [`PacketError::BadField`] naming the wrong field.

use crate::GsoType;
use crate::checksum::{checksum, fold, sum};
use crate::parse::{IpVersion, L4Proto, Parsed, parse};
use crate::segment::{finish_checksum, pseudo_sum};
use crate::tcp::{ACK, CHECKSUM_OFFSET, CWR};
use crate::udp::UdpHeader;
use crate::vnet::{FLAG_NEEDS_CSUM, VNET_HDR_LEN, VnetHeader};
use crate::{MAX_IP_LEN, PacketError, ip};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Source and destination addresses of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addrs {
    /// IPv4 source, destination.
    V4(Ipv4Addr, Ipv4Addr),
    /// IPv6 source, destination.
    V6(Ipv6Addr, Ipv6Addr),
}

impl Addrs {
    /// IPv4 addresses from octets or `Ipv4Addr`s.
    pub fn v4(src: impl Into<Ipv4Addr>, dst: impl Into<Ipv4Addr>) -> Addrs {
        Addrs::V4(src.into(), dst.into())
    }
    /// IPv6 addresses.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr) -> Addrs {
        Addrs::V6(src, dst)
    }
}

/// Everything that defines a built TCP record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSpec {
    /// Addresses.
    pub addrs: Addrs,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Window field.
    pub window: u16,
    /// MSS (`gso_size`).
    pub mss: u16,
    /// Total payload bytes (0 allowed: a pure ACK).
    pub payload_len: usize,
    /// Seed of the payload pattern ([`payload_byte`]).
    pub payload_seed: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 identification.
    pub ipv4_id: u16,
    /// IPv4 options (multiple of 4 bytes, ≤ 40).
    pub ipv4_options: Vec<u8>,
    /// TCP options (multiple of 4 bytes, ≤ 40).
    pub tcp_options: Vec<u8>,
    /// IPv6 only: insert an 8-byte destination-options header (PadN) before TCP.
    pub ipv6_dest_options: bool,
}

impl TcpSpec {
    /// Defaults: ports 40000 → 5201, seq 1000, ack 1, ACK, window 512, MSS 1448, 1000 payload bytes,
    /// TTL 64, id 1, no options.
    pub fn new(addrs: Addrs) -> TcpSpec {
        TcpSpec {
            addrs,
            src_port: 40000,
            dst_port: 5201,
            seq: 1000,
            ack: 1,
            flags: ACK,
            window: 512,
            mss: 1448,
            payload_len: 1000,
            payload_seed: 0,
            ttl: 64,
            ipv4_id: 1,
            ipv4_options: Vec::new(),
            tcp_options: Vec::new(),
            ipv6_dest_options: false,
        }
    }
}

/// Byte `i` of the payload pattern with `seed`: position-dependent, so misplaced bytes are caught.
pub fn payload_byte(seed: u8, i: usize) -> u8 {
    ((i as u32).wrapping_mul(0x9e37_79b1) >> 24) as u8 ^ seed ^ (i as u8)
}

/// The IP header fields a builder chooses.
struct IpFields<'a> {
    ttl: u8,
    id: u16,
    v4_opts: &'a [u8],
    v6_dest: bool,
}

/// Writes an IP header for `l4_len` bytes of `proto` into `out`; returns the IP header length.
fn ip_header(out: &mut Vec<u8>, addrs: &Addrs, f: IpFields<'_>, proto: u8, l4_len: usize) -> usize {
    let IpFields {
        ttl,
        id,
        v4_opts,
        v6_dest,
    } = f;
    assert!(
        v4_opts.len().is_multiple_of(4) && v4_opts.len() <= 40,
        "bad IPv4 options"
    );
    let start = out.len();
    match addrs {
        Addrs::V4(s, d) => {
            let hl = 20 + v4_opts.len();
            let total = hl + l4_len;
            assert!(total <= MAX_IP_LEN, "packet over 64 KiB");
            out.push(0x40 | (hl / 4) as u8);
            out.push(0);
            out.extend_from_slice(&(total as u16).to_be_bytes());
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&[0x40, 0, ttl, proto, 0, 0]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            out.extend_from_slice(v4_opts);
            let c = checksum(&out[start..start + hl]);
            out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
            hl
        }
        Addrs::V6(s, d) => {
            let ext = if v6_dest { 8 } else { 0 };
            let plen = ext + l4_len;
            assert!(plen <= MAX_IP_LEN - 40, "packet over 64 KiB");
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&(plen as u16).to_be_bytes());
            out.push(if v6_dest { ip::NH_DEST_OPTS } else { proto });
            out.push(ttl);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            if v6_dest {
                out.extend_from_slice(&[proto, 0, 1, 4, 0, 0, 0, 0]);
            }
            40 + ext
        }
    }
}

fn version_of(addrs: &Addrs) -> IpVersion {
    match addrs {
        Addrs::V4(..) => IpVersion::V4,
        Addrs::V6(..) => IpVersion::V6,
    }
}

/// Builds a TCP record per `spec`: GSO if the payload exceeds one MSS, CHECKSUM_PARTIAL always.
///
/// # Panics
/// If the packet would exceed 64 KiB, options are not a multiple of 4 bytes or over 40, or MSS is 0
/// with a payload.
pub fn tcp_record(spec: &TcpSpec) -> Vec<u8> {
    assert!(
        spec.tcp_options.len().is_multiple_of(4) && spec.tcp_options.len() <= 40,
        "bad TCP options"
    );
    let tcp_hl = 20 + spec.tcp_options.len();
    let mut out = vec![0u8; VNET_HDR_LEN];
    let iphl = ip_header(
        &mut out,
        &spec.addrs,
        IpFields {
            ttl: spec.ttl,
            id: spec.ipv4_id,
            v4_opts: &spec.ipv4_options,
            v6_dest: spec.ipv6_dest_options,
        },
        ip::PROTO_TCP,
        tcp_hl + spec.payload_len,
    );
    out.extend_from_slice(&spec.src_port.to_be_bytes());
    out.extend_from_slice(&spec.dst_port.to_be_bytes());
    out.extend_from_slice(&spec.seq.to_be_bytes());
    out.extend_from_slice(&spec.ack.to_be_bytes());
    out.push(((tcp_hl / 4) as u8) << 4);
    out.push(spec.flags);
    out.extend_from_slice(&spec.window.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&spec.tcp_options);
    out.extend((0..spec.payload_len).map(|i| payload_byte(spec.payload_seed, i)));
    let pkt = &mut out[VNET_HDR_LEN..];
    let pseudo = pseudo_sum(
        pkt,
        version_of(&spec.addrs),
        ip::PROTO_TCP,
        tcp_hl + spec.payload_len,
    );
    pkt[iphl + CHECKSUM_OFFSET..iphl + CHECKSUM_OFFSET + 2]
        .copy_from_slice(&fold(pseudo).to_be_bytes());
    let gso = spec.payload_len > usize::from(spec.mss);
    assert!(spec.mss > 0 || spec.payload_len == 0, "MSS 0");
    let vnet = VnetHeader {
        flags: FLAG_NEEDS_CSUM,
        gso_type: match (gso, &spec.addrs) {
            (false, _) => GsoType::None,
            (true, Addrs::V4(..)) => GsoType::TcpV4,
            (true, Addrs::V6(..)) => GsoType::TcpV6,
        },
        ecn: gso && spec.flags & CWR != 0,
        hdr_len: (iphl + tcp_hl) as u16,
        gso_size: spec.mss,
        csum_start: iphl as u16,
        csum_offset: CHECKSUM_OFFSET as u16,
    };
    out[..VNET_HDR_LEN].copy_from_slice(&vnet.emit());
    out
}

/// Builds a plain UDP record (complete checksum, vnet flags 0), e.g. a traceroute probe.
///
/// # Panics
/// If the packet would exceed 64 KiB.
pub fn udp_record(addrs: &Addrs, src_port: u16, dst_port: u16, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = VnetHeader::PLAIN.emit().to_vec();
    let (iphl, pseudo) = udp_packet(&mut out, addrs, (src_port, dst_port), ttl, 0, payload);
    let pkt = &mut out[VNET_HDR_LEN..];
    let mut c = !fold(sum(&pkt[iphl..], pseudo));
    if c == 0 {
        c = 0xffff;
    }
    pkt[iphl + 6..iphl + 8].copy_from_slice(&c.to_be_bytes());
    out
}

/// Appends to `out` (which holds the vnet header) an IP packet with a UDP header whose length
/// field is the whole L4 length and whose checksum is 0, then `payload`; returns the IP header's
/// length and the pseudo-header sum.
fn udp_packet(
    out: &mut Vec<u8>,
    addrs: &Addrs,
    (src_port, dst_port): (u16, u16),
    ttl: u8,
    id: u16,
    payload: &[u8],
) -> (usize, u64) {
    let ulen = 8 + payload.len();
    let iphl = ip_header(
        out,
        addrs,
        IpFields {
            ttl,
            id,
            v4_opts: &[],
            v6_dest: false,
        },
        ip::PROTO_UDP,
        ulen,
    );
    out.extend_from_slice(&src_port.to_be_bytes());
    out.extend_from_slice(&dst_port.to_be_bytes());
    out.extend_from_slice(&(ulen as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    let pseudo = pseudo_sum(&out[VNET_HDR_LEN..], version_of(addrs), ip::PROTO_UDP, ulen);
    (iphl, pseudo)
}

/// Builds a UDP super-datagram as the kernel hands it to a TUN with `TUN_F_USO4`/`TUN_F_USO6`
/// (a socket's `UDP_SEGMENT` send): `UDP_L4` with `gso_size` when `payload` exceeds it, the UDP
/// length field the whole L4 length, CHECKSUM_PARTIAL (the pseudo-header sum over that length).
///
/// # Panics
/// If the packet would exceed 64 KiB or `gso_size` is 0.
pub fn udp_gso_record(
    addrs: &Addrs,
    src_port: u16,
    dst_port: u16,
    gso_size: u16,
    payload: &[u8],
) -> Vec<u8> {
    assert!(gso_size > 0, "gso_size 0");
    let mut out = vec![0u8; VNET_HDR_LEN];
    let (iphl, pseudo) = udp_packet(&mut out, addrs, (src_port, dst_port), 64, 0x1234, payload);
    out[VNET_HDR_LEN + iphl + 6..VNET_HDR_LEN + iphl + 8]
        .copy_from_slice(&fold(pseudo).to_be_bytes());
    let gso = payload.len() > usize::from(gso_size);
    let vnet = VnetHeader {
        flags: FLAG_NEEDS_CSUM,
        gso_type: if gso { GsoType::UdpL4 } else { GsoType::None },
        ecn: false,
        hdr_len: (iphl + 8) as u16,
        gso_size,
        csum_start: iphl as u16,
        csum_offset: crate::udp::CHECKSUM_OFFSET as u16,
    };
    out[..VNET_HDR_LEN].copy_from_slice(&vnet.emit());
    out
}

/// Verifies any record: exact IP length (no trailing bytes), IPv4 header checksum, a correct vnet
/// `hdr_len` on GSO records, and the L4 checksum: for CHECKSUM_PARTIAL, offsets at the L4 checksum
/// field and the field equal to the folded pseudo-header sum; otherwise the full TCP/UDP checksum.
pub fn verify_record(record: &[u8]) -> Result<Parsed, PacketError> {
    let p = parse(record)?;
    let pkt = &record[VNET_HDR_LEN..];
    if pkt.len() != p.ip_len {
        return Err(PacketError::BadField("IP length (trailing bytes)"));
    }
    if p.version == IpVersion::V4 && checksum(&pkt[..p.ip_header_len]) != 0 {
        return Err(PacketError::BadField("IPv4 header checksum"));
    }
    if p.vnet.gso_type != GsoType::None && usize::from(p.vnet.hdr_len) != p.headers_len() {
        return Err(PacketError::BadField("vnet hdr_len"));
    }
    let (proto, field) = match p.l4 {
        L4Proto::Tcp if p.tcp.is_some() => (ip::PROTO_TCP, CHECKSUM_OFFSET),
        L4Proto::Udp if p.l4_header_len > 0 => (ip::PROTO_UDP, crate::udp::CHECKSUM_OFFSET),
        _ => return Ok(p),
    };
    let l4 = &pkt[p.ip_header_len..];
    if proto == ip::PROTO_UDP
        && !p.fragment
        && usize::from(UdpHeader::new(l4)?.length()) != l4.len()
    {
        return Err(PacketError::BadField("UDP length"));
    }
    let pseudo = pseudo_sum(pkt, p.version, proto, l4.len());
    let got = u16::from_be_bytes([l4[field], l4[field + 1]]);
    if p.vnet.needs_csum() {
        if usize::from(p.vnet.csum_start) != p.ip_header_len
            || usize::from(p.vnet.csum_offset) != field
        {
            return Err(PacketError::BadField("vnet csum_start/csum_offset"));
        }
        if got != fold(pseudo) {
            return Err(PacketError::BadField("partial (pseudo-header) L4 checksum"));
        }
    } else if p.vnet.gso_type != GsoType::None {
        return Err(PacketError::BadField("GSO record without NEEDS_CSUM"));
    } else if fold(sum(l4, pseudo)) != 0xffff
        && !(proto == ip::PROTO_UDP && got == 0 && p.version == IpVersion::V4)
    {
        return Err(PacketError::BadField("L4 checksum"));
    }
    Ok(p)
}

/// Verifies a single-segment record (gso_type NONE): everything [`verify_record`] checks, then,
/// after completing a partial checksum on a copy, the full TCP/UDP checksum.
pub fn verify_segment(record: &[u8]) -> Result<Parsed, PacketError> {
    let p = verify_record(record)?;
    if p.vnet.gso_type != GsoType::None {
        return Err(PacketError::NotSingleSegment);
    }
    if p.vnet.needs_csum() {
        let mut copy = record.to_vec();
        finish_checksum(&mut copy)?;
        verify_record(&copy)?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_records_verify() {
        let r = udp_record(&Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]), 1, 2, 64, b"hello");
        verify_segment(&r).unwrap();
        let mut bad = r.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(
            verify_segment(&bad).unwrap_err(),
            PacketError::BadField("L4 checksum")
        );
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.payload_len = 10_000;
        let t = tcp_record(&s);
        verify_record(&t).unwrap();
        assert_eq!(
            verify_segment(&t).unwrap_err(),
            PacketError::NotSingleSegment
        );
        let mut bad = t.clone();
        bad[VNET_HDR_LEN + 8] ^= 1;
        assert_eq!(
            verify_record(&bad).unwrap_err(),
            PacketError::BadField("IPv4 header checksum")
        );
    }
}

//! Coalescing: merging a record into the preceding record of the same TCP flow when it continues it
//! exactly — the inverse of [`crate::split`], and what the kernel's GRO does (wireguard-go's
//! `handleGRO` in `tun/offload_linux.go`: hand super-packets back so the receiver pays per
//! super-packet, not per MTU packet).
//!
//! Rules (a record `next` is appended to `acc` only if all hold; otherwise nothing changes):
//! - both parse as unfragmented TCP of the same IP version and flow key, with payload;
//! - `acc`'s segments are all full-size (`mss` = its `gso_size`, or its payload length if it is a
//!   single packet) and `next`'s `gso_size` equals that `mss` (or, single, its payload ≤ `mss`);
//! - `next.seq == acc.seq + acc.payload` (mod 2³²);
//! - `acc` carries none of FIN, PSH, RST, SYN, URG; `next` carries none of RST, SYN, URG, CWR;
//! - the IP headers are byte-equal except IPv4 total length, identification and header checksum
//!   (IPv6: payload length); the TCP headers are byte-equal except sequence number, FIN/PSH and
//!   checksum, and CWR (so ack, window and options, e.g. timestamps, must match — stricter than GRO on window);
//! - the merged IP packet is at most 65 535 bytes.
//!
//! The merged record keeps `acc`'s IPv4 identification (the segmenting device renumbers from it,
//! matching [`crate::split`]'s `id + first`), takes `next`'s FIN/PSH, and is CHECKSUM_PARTIAL GSO
//! (TCPV4/TCPV6, `gso_size = mss`, ECN bit iff CWR). Hence `coalesce` over the pieces of a split
//! record rebuilds that record byte for byte when the original had correct checksums, a correct
//! `hdr_len`, ECN bit iff CWR, and IPv4 ids numbered as split numbers them.

use crate::GsoType;
use crate::parse::{IpVersion, Parsed, parse};
use crate::segment::{fix_ip, set_tcp_checksum};
use crate::tcp::{CWR, FIN, PSH, RST, SYN, URG};
use crate::vnet::{VNET_HDR_LEN, VnetHeader};
use crate::{MAX_IP_LEN, PacketError};

fn same_headers(a: &[u8], b: &[u8], pa: &Parsed) -> bool {
    let hl = pa.headers_len();
    let (a, b) = (
        &a[VNET_HDR_LEN..VNET_HDR_LEN + hl],
        &b[VNET_HDR_LEN..VNET_HDR_LEN + hl],
    );
    // Half-open byte ranges [start, end) that may differ.
    let ip_skip: &[(usize, usize)] = match pa.version {
        IpVersion::V4 => &[(2, 6), (10, 12)],
        IpVersion::V6 => &[(4, 6)],
    };
    let t = pa.ip_header_len;
    let tcp_skip = [(t + 4, t + 8), (t + 13, t + 14), (t + 16, t + 18)];
    let skipped = |i: usize| {
        ip_skip
            .iter()
            .chain(tcp_skip.iter())
            .any(|&(s, e)| (s..e).contains(&i))
    };
    (0..hl).all(|i| skipped(i) || a[i] == b[i]) && (a[t + 13] ^ b[t + 13]) & !(FIN | PSH | CWR) == 0
}

/// Appends `next` to `acc` if it continues it exactly (see the module docs for the rules), turning
/// `acc` into one GSO record. Returns `Ok(true)` if merged, `Ok(false)` if the rules refuse (then
/// `acc` is unchanged), and an error only if either record does not parse.
pub fn coalesce(acc: &mut Vec<u8>, next: &[u8]) -> Result<bool, PacketError> {
    let pa = parse(acc)?;
    let pn = parse(next)?;
    let (Some(ta), Some(tn)) = (pa.tcp, pn.tcp) else {
        return Ok(false);
    };
    if pa.fragment
        || pn.fragment
        || pa.version != pn.version
        || pa.flow != pn.flow
        || pa.headers_len() != pn.headers_len()
        || pa.ip_header_len != pn.ip_header_len
        || pa.payload_len == 0
        || pn.payload_len == 0
    {
        return Ok(false);
    }
    let mss = pa.mss;
    let acc_full = pa.payload_len == pa.segments * mss;
    let next_fits = match pn.vnet.gso_type {
        GsoType::None => pn.payload_len <= mss,
        _ => pn.mss == mss,
    };
    if !acc_full
        || !next_fits
        || mss > usize::from(u16::MAX)
        || tn.seq != ta.seq.wrapping_add(pa.payload_len as u32)
        || ta.flags & (FIN | PSH | RST | SYN | URG) != 0
        || tn.flags & (RST | SYN | URG | CWR) != 0
        || pa.ip_len + pn.payload_len > MAX_IP_LEN
        || !same_headers(acc, next, &pa)
    {
        return Ok(false);
    }

    let new_len = pa.ip_len + pn.payload_len;
    acc.truncate(VNET_HDR_LEN + pa.ip_len);
    acc.extend_from_slice(&next[VNET_HDR_LEN + pn.headers_len()..VNET_HDR_LEN + pn.ip_len]);
    let pkt = &mut acc[VNET_HDR_LEN..];
    fix_ip(pkt, &pa, new_len, 0);
    let flags_at = pa.ip_header_len + 13;
    pkt[flags_at] |= tn.flags & (FIN | PSH);
    let cwr = pkt[flags_at] & CWR != 0;
    let (flags, csum_start, csum_offset) = set_tcp_checksum(pkt, &pa, false);
    let vnet = VnetHeader {
        flags,
        gso_type: match pa.version {
            IpVersion::V4 => GsoType::TcpV4,
            IpVersion::V6 => GsoType::TcpV6,
        },
        ecn: cwr,
        hdr_len: pa.headers_len() as u16,
        gso_size: mss as u16,
        csum_start,
        csum_offset,
    };
    acc[..VNET_HDR_LEN].copy_from_slice(&vnet.emit());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, Addrs, TcpSpec, verify_record};
    use crate::segment::{ChecksumMode, split};
    use crate::tcp::ACK;

    fn spec() -> TcpSpec {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.mss = 1000;
        s.payload_len = 5500;
        s.flags = ACK | PSH;
        s
    }

    /// A 1000-byte record of [`spec`]'s flow whose sequence number follows `first`'s payload.
    fn continuation(first: &TcpSpec) -> Vec<u8> {
        let mut cont = spec();
        cont.seq = first.seq.wrapping_add(first.payload_len as u32);
        cont.payload_len = 1000;
        build::tcp_record(&cont)
    }

    fn pieces(rec: &[u8], cuts: &[usize], mode: ChecksumMode) -> Vec<Vec<u8>> {
        let p = parse(rec).unwrap();
        let mut out = Vec::new();
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(p.segments);
        for w in bounds.windows(2) {
            let mut v = Vec::new();
            split(rec, &p, w[0], w[1] - w[0], mode, &mut v).unwrap();
            out.push(v);
        }
        out
    }

    #[test]
    fn coalesce_of_split_is_identity_random() {
        let mut rng = crate::segment::tests::Rng(0xc0a1_e5ce);
        for iter in 0..300 {
            let mut s = crate::segment::tests::random_spec(&mut rng);
            s.flags &= !FIN; // FIN is allowed on the last piece only; keep both cases below
            if rng.below(2) == 0 {
                s.flags |= FIN;
            }
            let rec = build::tcp_record(&s);
            let p = parse(&rec).unwrap();
            if p.segments < 2 {
                continue;
            }
            let mut cuts: Vec<usize> = (1..p.segments).filter(|_| rng.below(3) == 0).collect();
            cuts.dedup();
            let mode = if rng.below(2) == 0 {
                ChecksumMode::Partial
            } else {
                ChecksumMode::FullWhenSingle
            };
            let ps = pieces(&rec, &cuts, mode);
            let mut acc = ps[0].clone();
            for q in &ps[1..] {
                assert!(coalesce(&mut acc, q).unwrap(), "iter {iter}");
                verify_record(&acc).unwrap();
            }
            if ps.len() > 1 {
                assert_eq!(acc, rec, "iter {iter}");
            }
        }
    }

    #[test]
    fn coalesce_refuses_gap_flow_fin_and_size() {
        let rec = build::tcp_record(&spec());
        let ps = pieces(&rec, &[1, 2, 3], ChecksumMode::Partial);

        // Gap in sequence: piece 0 then piece 2.
        let mut acc = ps[0].clone();
        assert!(!coalesce(&mut acc, &ps[2]).unwrap());
        assert_eq!(acc, ps[0]);

        // Different flow.
        let mut other = spec();
        other.src_port += 1;
        let orec = build::tcp_record(&other);
        let ops = pieces(&orec, &[1, 2, 3], ChecksumMode::Partial);
        let mut acc = ps[0].clone();
        assert!(!coalesce(&mut acc, &ops[1]).unwrap());

        // FIN (or PSH) on the first.
        let mut fin = spec();
        fin.payload_len = 1000;
        fin.flags = ACK | FIN;
        let mut acc = build::tcp_record(&fin);
        assert!(!coalesce(&mut acc, &ps[1]).unwrap());

        // First record's last segment is short (1500 bytes at MSS 1000).
        let mut short = spec();
        short.payload_len = 1500;
        short.flags = ACK;
        let mut acc = build::tcp_record(&short);
        assert!(!coalesce(&mut acc, &continuation(&short)).unwrap());

        // Different ack number.
        let mut acc = ps[0].clone();
        let mut q = ps[1].clone();
        q[VNET_HDR_LEN + 20 + 8] ^= 1;
        assert!(!coalesce(&mut acc, &q).unwrap());

        // Beyond 64 KiB.
        let mut big = spec();
        big.mss = 1000;
        big.payload_len = 65_000;
        big.flags = ACK;
        let mut acc = build::tcp_record(&big);
        assert!(!coalesce(&mut acc, &continuation(&big)).unwrap());

        // Malformed input is an error, not a merge.
        let mut acc = ps[0].clone();
        assert!(coalesce(&mut acc, &[0u8; 12]).is_err());
    }
}

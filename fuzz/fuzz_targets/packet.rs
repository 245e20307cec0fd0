//! Fuzzes the TUN record parser and the operations the emulator applies to what the kernel hands it
//! (bytes that ultimately come from untrusted test programs).
//!
//! Invariants checked beyond "does not panic":
//! - a TCP or UDP record that parses splits at fuzzer-chosen ranges into pieces that parse, carry
//!   the expected segment counts, and whose payloads concatenate back to the original payload;
//! - coalescing a TCP record's pieces back in order never fails to parse;
//! - hop processing either forwards, drops, or produces a reply that parses;
//! - a router's answer to a ping to itself parses and is an ICMP packet back to the source;
//! - damaging a single-segment record changes one byte after its IP header.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_packet::{
    ChecksumMode, Echo, RouterAddrs, VNET_HDR_LEN, coalesce, damage, echo_reply, finish_checksum,
    parse, process_hop, split,
};

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose split sizes; the rest is the record.
    let Some((&[a, b], rec)) = data.split_first_chunk::<2>().map(|(h, r)| (h, r)) else {
        return;
    };
    let Ok(p) = parse(rec) else { return };
    if p.is_tcp() || p.is_udp() {
        let payload = &rec[VNET_HDR_LEN + p.headers_len()..VNET_HDR_LEN + p.ip_len];
        let mut joined = Vec::with_capacity(payload.len());
        let mut acc: Option<Vec<u8>> = None;
        let mut first = 0;
        let mut i = 0usize;
        while first < p.segments {
            let pick = if i % 2 == 0 { a } else { b };
            i += 1;
            let count = (usize::from(pick) % (p.segments - first)) + 1;
            let mode = if pick & 0x80 != 0 {
                ChecksumMode::FullWhenSingle
            } else {
                ChecksumMode::Partial
            };
            let mut piece = Vec::new();
            split(rec, &p, first, count, mode, &mut piece).expect("valid range splits");
            let q = parse(&piece).expect("piece parses");
            assert_eq!(q.segments, count);
            joined
                .extend_from_slice(&piece[VNET_HDR_LEN + q.headers_len()..VNET_HDR_LEN + q.ip_len]);
            match acc.as_mut() {
                _ if !p.is_tcp() => {}
                None => acc = Some(piece),
                Some(acc) => {
                    coalesce(acc, &piece).expect("pieces parse");
                }
            }
            first += count;
        }
        assert_eq!(joined, payload);
    }
    let mut rec = rec.to_vec();
    let router = RouterAddrs {
        v4: std::net::Ipv4Addr::new(10, 9, 9, 1),
        v6: "fd00:9::1".parse().unwrap(),
    };
    let mut reply = Vec::new();
    if let Ok(Echo::Reply) = echo_reply(&rec, &router, &mut reply) {
        let q = parse(&reply).expect("an echo reply parses");
        assert_eq!(q.flow.dst, p.flow.src);
        assert_eq!(q.flow.src, p.flow.dst);
    }
    let mut damaged = rec.clone();
    if damage(&mut damaged, u64::from(a) << 32 | u64::from(b)).is_ok() {
        let mut complete = rec.clone();
        finish_checksum(&mut complete).expect("damage completed it first");
        let differ: Vec<usize> = (0..rec.len()).filter(|&i| damaged[i] != complete[i]).collect();
        assert!(differ.len() <= 1);
        assert!(differ.iter().all(|&i| i >= VNET_HDR_LEN + p.ip_header_len));
    }
    if let Ok(longhaul_packet::HopAction::TimeExceeded) = process_hop(&mut rec, &router, &mut reply)
    {
        parse(&reply).expect("reply parses");
    }
});

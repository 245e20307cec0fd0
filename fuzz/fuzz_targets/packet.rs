//! Fuzzes the TUN record parser and the operations the emulator applies to what the kernel hands it
//! (bytes that ultimately come from untrusted test programs).
//!
//! Invariants checked beyond "does not panic":
//! - a TCP record that parses splits at fuzzer-chosen ranges into pieces that parse, carry the
//!   expected segment counts, and whose payloads concatenate back to the original payload;
//! - coalescing the pieces back in order never fails to parse;
//! - hop processing either forwards, drops, or produces a reply that parses.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_packet::{
    ChecksumMode, RouterAddrs, VNET_HDR_LEN, coalesce, parse, process_hop, split,
};

fuzz_target!(|data: &[u8]| {
    // The first two bytes choose split sizes; the rest is the record.
    let Some((&[a, b], rec)) = data.split_first_chunk::<2>().map(|(h, r)| (h, r)) else {
        return;
    };
    let Ok(p) = parse(rec) else { return };
    if p.is_tcp() {
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
    if let Ok(longhaul_packet::HopAction::TimeExceeded) = process_hop(&mut rec, &router, &mut reply)
    {
        parse(&reply).expect("reply parses");
    }
});

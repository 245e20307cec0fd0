//! Arbitrary bytes as the datagrams of a UDP test (`longhaul_proto::udp`), with 32- and 64-bit
//! counters: the receiver never panics, counts every datagram once (taken, duplicate or malformed),
//! never counts more lost than the highest number seen, and its loss stays within 0..=1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_proto::udp::UdpReceiver;

fuzz_target!(|data: &[u8]| {
    for c64 in [false, true] {
        let mut r = UdpReceiver::new(c64);
        let mut n = 0u64;
        // Datagrams of varying lengths: the first byte of each chunk picks its length.
        let mut rest = data;
        while let Some((&len, tail)) = rest.split_first() {
            let len = usize::from(len % 40).min(tail.len());
            r.datagram(&tail[..len], n * 1000);
            rest = &tail[len..];
            n += 1;
        }
        assert_eq!(r.packets + r.duplicates + r.malformed, n);
        assert!(r.lost <= r.highest);
        assert!((0.0..=1.0).contains(&r.loss()));
        assert!(r.jitter_ns.is_finite() && r.jitter_ns >= 0.0);
    }
});

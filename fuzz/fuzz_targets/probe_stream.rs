//! Arbitrary bytes as what a probe stream's peers send: as a datagram to the reflector (an answer
//! is never longer than what came, and only for the session's requests) and to the sender's
//! account (figures stay consistent: nothing received that was not sent, loss within 0..=1); as
//! the frames of the control connection (decode or refuse, never panic); and as `traceroute`
//! output (hops numbered 1, 2, ..., at most 64).
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_fleet::msg::MAX_HOPS;
use longhaul_fleet::trace::parse_traceroute;
use longhaul_proto::frame::decode_all;
use longhaul_proto::probe::{Probe, ProbeMessage, ProbeStats, Reflector};

const SESSION: [u8; 16] = [5; 16];

fuzz_target!(|data: &[u8]| {
    let mut reflector = Reflector::new(SESSION, 512, 8, false);
    let mut stats = ProbeStats::new(SESSION, 8, false);
    let mut sent = [0u8; 64];
    for i in 0..4 {
        stats.next(&mut sent, i * 1000);
    }
    for (i, datagram) in data.chunks(97).enumerate() {
        let mut buf = datagram.to_vec();
        buf.resize(datagram.len().max(1), 0);
        let len = datagram.len();
        if let Some(n) = reflector.reflect(&mut buf, len, i % 3 != 0, 10) {
            assert!(n <= len, "a reply longer than its request");
            let request = Probe::read(datagram).expect("only probes are answered");
            assert!(!request.reply && request.session == SESSION);
        }
        stats.reply(datagram, 5000);
    }
    let s = stats.summary(None);
    assert!(s.received <= s.sent && s.lost == s.sent - s.received);
    assert!((0.0..=1.0).contains(&s.loss));
    let _ = decode_all::<ProbeMessage>(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let hops = parse_traceroute(text);
        assert!(hops.len() <= usize::from(MAX_HOPS));
        for (i, h) in hops.iter().enumerate() {
            assert_eq!(usize::from(h.ttl), i + 1);
        }
    }
});

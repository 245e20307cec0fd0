//! Arbitrary bytes as what `longhaul isolate`'s raw ICMP sockets receive (`longhaul_isolate::icmp`):
//! the parsers never panic, and accounting any sequence of parsed replies against a measurement
//! never marks a probe back twice, before it was sent, or one that was never sent.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use longhaul_isolate::icmp::{self, Received};
use longhaul_isolate::{Observations, Probe};

fuzz_target!(|data: &[u8]| {
    let from: IpAddr = "10.201.1.4".parse().unwrap();
    let mut heard = Vec::new();
    // Datagrams of varying lengths: the first byte of each chunk picks its length.
    let mut rest = data;
    let mut t = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let len = (usize::from(len) * 4).min(tail.len());
        for got in [icmp::parse_v4(&tail[..len]), icmp::parse_v6(from, &tail[..len])] {
            if let Received::Echo { len: n, .. } = got {
                assert!(n <= len);
            }
            heard.push((t, got));
        }
        t += 1_000;
        rest = &tail[len..];
    }
    let mut obs = Observations {
        probes: (0..64)
            .map(|i| Probe {
                train: i / 16,
                sent_ns: u64::from(i) * 100,
                back_ns: None,
            })
            .collect(),
        bytes: 1500,
        ..Observations::default()
    };
    let ident = data.first().map_or(0, |&b| u16::from(b));
    obs.account(&heard, from, ident, 2);
    obs.account(&heard, from, ident, 2);
    assert_eq!(obs.probes.len(), 64);
    assert!(obs.probes.iter().all(|p| p.back_ns.is_none_or(|b| b >= p.sent_ns)));
    let f = longhaul_isolate::Figures::of(&obs, &Default::default());
    assert!(f.received <= f.sent && (0.0..=1.0).contains(&f.loss));
});

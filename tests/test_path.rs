//! `longhaul test` on an emulated path that crawls: Reno on a 120 ms, 500 Mbit/s path losing 1 % of
//! its packets moves about a megabit a second (Mathis), so a sender's write blocks for seconds and
//! its queue takes minutes to drain. The test must still end at its time, both ways and encrypted,
//! reporting what the receiver got. (Before the stop looked past a blocked write, the client said
//! Stop only once the write returned and the server, 5 s past the duration, gave up: "the client
//! never said stop".)

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::emulate::emulate;
use crate::util::{bin, netns_alone};

const CRAWLING: [&str; 6] = ["--rtt", "120ms", "--rate", "500M", "--loss", "1%"];

/// The test's own duration, seconds.
const SECONDS: u64 = 3;

/// Runs `longhaul test -C reno -t 3` with `extra` flags on the crawling path; checks that it
/// succeeded within the duration plus the set-up and the tail grace, and that the receiver's count
/// is in the report (something arrived, no more than was sent). Returns the seconds it took.
fn ends_on_time(extra: &[&str]) -> f64 {
    let secs = SECONDS.to_string();
    let mut args: Vec<&str> = CRAWLING.to_vec();
    args.extend(["--", bin(), "test", "10.201.0.2", "-C", "reno", "-t", &secs]);
    args.extend(["--json"]);
    args.extend_from_slice(extra);
    let started = Instant::now();
    let out = emulate(&args);
    let took = started.elapsed();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{extra:?}: no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(
        out.status.success(),
        "{extra:?}: the test failed: {}",
        j["error"]
    );
    let sent = j["end"]["sum_sent"]["bytes"].as_u64().expect("sum_sent");
    let received = j["end"]["sum_received"]["bytes"]
        .as_u64()
        .expect("sum_received");
    assert!(
        received > 0 && received <= sent,
        "{extra:?}: received {received} of {sent} bytes sent"
    );
    // The namespaces, the server and the connection take about 2 s here; the tail grace is
    // 1 s + 4 RTT; the emulator's teardown a little more. A stop that waited for the sender's write
    // or the receiver's end of stream would take 15 s more (the drain deadline) or fail.
    assert!(
        took < Duration::from_secs(SECONDS + 9),
        "{extra:?}: a {SECONDS}-s test took {took:?}"
    );
    took.as_secs_f64()
}

#[test]
fn a_test_on_a_crawling_path_ends_at_its_time_both_ways_and_encrypted() {
    let Some(_alone) = netns_alone() else {
        return;
    };
    let mut took = Vec::new();
    for extra in [&[][..], &["-R"], &["--encrypt"], &["-R", "--encrypt"]] {
        took.push(format!("{extra:?} {:.1} s", ends_on_time(extra)));
    }
    println!("3-s tests on the crawling path: {}", took.join(", "));
}

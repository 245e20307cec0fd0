//! `longhaul emulate` with a network (issue 13): many hosts, routers and links, each link direction
//! with its own model, packets crossing them one after another (tandem queues). As root, end to end:
//! two CUBIC flows sharing one 1 Gbit/s link split it fairly; flows on disjoint links each fill
//! their own; loss set on the third link of a path is seen only by the flows whose route crosses
//! it; stock traceroute and traceroute6 from two hosts each list their own routers at their RTTs.
//! Like the two-host tests, each holds the machine alone and runs a timing check again only when
//! the emulator flagged the run NOT TRUSTWORTHY.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::emulate::{emulate_checked, hops};
use crate::util::{Machine, bin, machine_alone, netns_privileges, program};

fn serial() -> Machine {
    machine_alone()
}

/// A network file `NAME.toml` in a fresh directory of this test process.
fn network_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lh-net-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("make the test directory");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write the network file");
    path
}

/// The payload rate a `longhaul test --json` document in `file` received, bit/s.
fn received_bps(file: &std::path::Path) -> Result<f64, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let j: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}: {text}", file.display()))?;
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| format!("{}: no end.sum_received.bits_per_second", file.display()))
}

/// The emulator's JSON report (`--json`, on stderr after its one-line summary).
fn report(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let start = stderr.find("\n{").expect("a JSON report on stderr") + 1;
    let end = stderr.rfind('}').expect("the report's end") + 1;
    serde_json::from_str(&stderr[start..end]).expect("the report parses")
}

/// One link direction of the report: `links[name][dir]`.
fn link<'a>(report: &'a Value, name: &str, dir: &str) -> &'a Value {
    report["network"]["links"]
        .as_array()
        .expect("links")
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no link {name} in the report"))
        .get(dir)
        .expect("a direction")
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has everything.
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    sum * sum / (x.len() as f64 * squares)
}

/// Two senders and two receivers on either side of one 1 Gbit/s link (RTT 4 ms); the access links
/// have no rate limit. At this RTT CUBIC grows like Reno (its TCP-friendly region: about 0.2 s
/// between losses), so two flows converge within a few seconds; at 20 ms the same pair was still
/// 10–25 % apart after 12 s (cubic's epoch K = ∛(W·0.3/0.4) is seconds long at a 1 Gbit/s BDP,
/// RFC 9438 §4.2), which says nothing about the emulator.
const SHARED: &str = r#"
name = "shared-link"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[host]]
name = "s1"
[[host]]
name = "s2"
[[host]]
name = "d1"
[[host]]
name = "d2"
[[link]]
a = "s1"
b = "r1"
delay = "0.5ms"
[[link]]
a = "s2"
b = "r1"
delay = "0.5ms"
[[link]]
name = "core"
a = "r1"
b = "r2"
rate = "1G"
delay = "1ms"
[[link]]
a = "r2"
b = "d1"
delay = "0.5ms"
[[link]]
a = "r2"
b = "d2"
delay = "0.5ms"
"#;

#[test]
fn two_cubic_flows_sharing_a_1gbit_link_split_it_fairly() {
    if !netns_privileges() {
        return;
    }
    let _serial = serial();
    let file = network_file("shared", SHARED);
    let dir = file.parent().unwrap().to_path_buf();
    let (f1, f2) = (dir.join("flow1.json"), dir.join("flow2.json"));
    // Both flows start together from their own hosts; the first 4 s (slow start, convergence) are
    // left out of the figures.
    let cmd = format!(
        "ip netns exec $LH_NETNS_S2 {lh} test $LH_HOST_D2 -C cubic --rate 1G -t 12 -O 4 --json > {} & \
         {lh} test $LH_HOST_D1 -C cubic --rate 1G -t 12 -O 4 --json > {}; wait",
        f2.display(),
        f1.display(),
        lh = bin()
    );
    let out = emulate_checked(
        &[file.to_str().unwrap(), "--on", "s1", "--", "sh", "-c", &cmd],
        |out| {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let x = [received_bps(&f1)?, received_bps(&f2)?];
            let j = jain(&x);
            println!(
                "flow 1 {:.1} Mbit/s, flow 2 {:.1} Mbit/s, sum {:.1}, Jain {j:.4}",
                x[0] / 1e6,
                x[1] / 1e6,
                (x[0] + x[1]) / 1e6
            );
            assert!(x[0] + x[1] <= 1.0e9, "{x:?} beat the 1 Gbit/s link");
            let gap = (x[0] - x[1]).abs() / x[0].max(x[1]);
            if j >= 0.95 && gap <= 0.10 {
                Ok(())
            } else {
                Err(format!(
                    "unfair: {x:?} (Jain {j:.4}, {:.1} % apart)",
                    gap * 100.0
                ))
            }
        },
    );
    let _ = out;
    let _ = std::fs::remove_dir_all(dir);
}

/// Two pairs, each over its own 500 Mbit/s link (RTT 20 ms): nothing shared. (r1 and r2 are
/// joined only so that every host reaches every other, as a network must.)
const DISJOINT: &str = r#"
name = "disjoint"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[host]]
name = "s1"
[[host]]
name = "s2"
[[host]]
name = "d1"
[[host]]
name = "d2"
[[link]]
a = "s1"
b = "r1"
delay = "5ms"
[[link]]
name = "wave1"
a = "r1"
b = "d1"
rate = "500M"
delay = "5ms"
[[link]]
a = "s2"
b = "r2"
delay = "5ms"
[[link]]
name = "wave2"
a = "r2"
b = "d2"
rate = "500M"
delay = "5ms"
[[link]]
a = "r1"
b = "r2"
delay = "1ms"
"#;

#[test]
fn flows_on_disjoint_links_each_fill_their_own() {
    if !netns_privileges() {
        return;
    }
    let _serial = serial();
    let file = network_file("disjoint", DISJOINT);
    let dir = file.parent().unwrap().to_path_buf();
    let (f1, f2) = (dir.join("flow1.json"), dir.join("flow2.json"));
    let cmd = format!(
        "ip netns exec $LH_NETNS_S2 {lh} test $LH_HOST_D2 --rate 500M -t 8 -O 3 --json > {} & \
         {lh} test $LH_HOST_D1 --rate 500M -t 8 -O 3 --json > {}; wait",
        f2.display(),
        f1.display(),
        lh = bin()
    );
    emulate_checked(
        &[file.to_str().unwrap(), "--on", "s1", "--", "sh", "-c", &cmd],
        |out| {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let x = [received_bps(&f1)?, received_bps(&f2)?];
            println!(
                "flow 1 {:.1} Mbit/s, flow 2 {:.1} Mbit/s",
                x[0] / 1e6,
                x[1] / 1e6
            );
            for (i, r) in x.iter().enumerate() {
                assert!(*r <= 500e6, "flow {} beat its 500 Mbit/s link: {r}", i + 1);
            }
            if x.iter().all(|r| *r >= 0.90 * 500e6) {
                Ok(())
            } else {
                Err(format!("a flow below 90 % of its own link: {x:?}"))
            }
        },
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// h1 → h2 crosses four links; the third (r2 → r3) loses 2 % of what crosses it from r2. h1 → h3
/// shares the first two and leaves at r2.
const CHAIN: &str = r#"
name = "lossy-third-link"
[[router]]
name = "r1"
[[router]]
name = "r2"
[[router]]
name = "r3"
[[host]]
name = "h1"
[[host]]
name = "h2"
[[host]]
name = "h3"
[[link]]
a = "h1"
b = "r1"
delay = "1ms"
[[link]]
a = "r1"
b = "r2"
delay = "1ms"
rate = "1G"
[[link]]
name = "third"
a = "r2"
b = "r3"
delay = "1ms"
rate = "1G"
[link.a_to_b]
loss = 0.02
[[link]]
a = "r3"
b = "h2"
delay = "1ms"
[[link]]
a = "r2"
b = "h3"
delay = "1ms"
"#;

/// `N packets transmitted, M received` of a ping run.
fn ping_counts(text: &str, to: &str) -> (u64, u64) {
    let block = text
        .split("--- ")
        .find(|b| b.starts_with(to))
        .unwrap_or_else(|| panic!("no ping statistics for {to} in\n{text}"));
    let line = block.lines().nth(1).expect("the statistics line");
    let n = |word: &str| -> u64 {
        let before = line.split(word).next().expect("the count");
        before
            .split_whitespace()
            .last()
            .and_then(|w| w.trim_start_matches(',').parse().ok())
            .unwrap_or_else(|| panic!("no count before {word:?} in {line}"))
    };
    (n(" packets transmitted"), n(" received"))
}

#[test]
fn loss_on_the_third_link_is_seen_only_by_flows_crossing_it() {
    if !netns_privileges() || !program("ping", "iputils-ping") {
        return;
    }
    let _serial = serial();
    let file = network_file("chain", CHAIN);
    const N: u64 = 2000;
    const P: f64 = 0.02;
    let cmd = format!(
        "ping -q -n -c {N} -i 0.002 -W 1 $LH_HOST_H2; ping -q -n -c {N} -i 0.002 -W 1 $LH_HOST_H3; true"
    );
    let out = emulate_checked(
        &[
            file.to_str().unwrap(),
            "--on",
            "h1",
            "--no-server",
            "--json",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        |out| {
            let text = String::from_utf8_lossy(&out.stdout);
            println!("{text}");
            let (sent2, got2) = ping_counts(&text, "10.201.0.2");
            let (sent3, got3) = ping_counts(&text, "10.201.0.3");
            assert_eq!((sent2, sent3), (N, N), "{text}");
            // Only the echo requests cross r2 → r3; the replies come back over its b→a side.
            let lost = (N - got2) as f64;
            let mean = N as f64 * P;
            let sigma = (N as f64 * P * (1.0 - P)).sqrt();
            println!(
                "to h2: {lost} of {N} lost (expected {mean} ± {sigma:.1}); to h3: {} lost",
                N - got3
            );
            assert_eq!(
                got3, N,
                "h1 → h3 does not cross the lossy link, yet lost packets"
            );
            if (lost - mean).abs() <= 3.0 * sigma {
                Ok(())
            } else {
                Err(format!(
                    "{lost} lost of {N}: outside {mean} ± 3 × {sigma:.2}"
                ))
            }
        },
    );
    let r = report(&out);
    let third = link(&r, "third", "a_to_b");
    assert!(
        third["link"]["drop_random"].as_u64().unwrap() > 0,
        "{third}"
    );
    assert_eq!(link(&r, "third", "b_to_a")["link"]["drop_random"], 0);
    for l in r["network"]["links"].as_array().unwrap() {
        if l["name"] != "third" {
            for dir in ["a_to_b", "b_to_a"] {
                assert_eq!(l[dir]["link"]["drop_random"], 0, "{}", l["name"]);
            }
        }
    }
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

/// a1 and a2 reach b1 by different routers: a1 → x → w → b1, a2 → y → z → w → b1.
const TWO_WAYS: &str = r#"
name = "two-ways"
[[router]]
name = "x"
[[router]]
name = "y"
[[router]]
name = "z"
[[router]]
name = "w"
[[host]]
name = "a1"
[[host]]
name = "a2"
[[host]]
name = "b1"
[[link]]
a = "a1"
b = "x"
delay = "1ms"
[[link]]
a = "a2"
b = "y"
delay = "1ms"
[[link]]
a = "x"
b = "w"
delay = "10ms"
[[link]]
a = "y"
b = "z"
delay = "3ms"
[[link]]
a = "z"
b = "w"
delay = "4ms"
[[link]]
a = "w"
b = "b1"
delay = "1ms"
"#;

#[test]
fn traceroute_from_two_hosts_lists_each_ones_routers() {
    if !netns_privileges() || !program("traceroute", "traceroute") {
        return;
    }
    let _serial = serial();
    let file = network_file("two-ways", TWO_WAYS);
    // Routers in file order: x 10.201.1.1, y .2, z .3, w .4; hosts a1 10.201.0.1, a2 .2, b1 .3.
    let cmd = "traceroute -n -q 1 -w 2 $LH_HOST_B1; traceroute -6 -n -q 1 -w 2 $LH_HOST6_B1; \
               ip netns exec $LH_NETNS_A2 traceroute -n -q 1 -w 2 $LH_HOST_B1; \
               ip netns exec $LH_NETNS_A2 traceroute -6 -n -q 1 -w 2 $LH_HOST6_B1";
    emulate_checked(
        &[
            file.to_str().unwrap(),
            "--on",
            "a1",
            "--no-server",
            "--",
            "sh",
            "-c",
            cmd,
        ],
        |out| {
            let text = String::from_utf8_lossy(&out.stdout);
            println!("{text}");
            assert!(out.status.success(), "{text}");
            let runs: Vec<&str> = text.split("traceroute to ").skip(1).collect();
            assert_eq!(runs.len(), 4, "{text}");
            // Each hop: its address and the round trip to it (twice the one-way delays up to it).
            let want: [&[(&str, f64)]; 4] = [
                &[
                    ("10.201.1.1", 2.0),
                    ("10.201.1.4", 22.0),
                    ("10.201.0.3", 24.0),
                ],
                &[
                    ("fd00:4c48:1::1", 2.0),
                    ("fd00:4c48:1::4", 22.0),
                    ("fd00:4c48::3", 24.0),
                ],
                &[
                    ("10.201.1.2", 2.0),
                    ("10.201.1.3", 8.0),
                    ("10.201.1.4", 16.0),
                    ("10.201.0.3", 18.0),
                ],
                &[
                    ("fd00:4c48:1::2", 2.0),
                    ("fd00:4c48:1::3", 8.0),
                    ("fd00:4c48:1::4", 16.0),
                    ("fd00:4c48::3", 18.0),
                ],
            ];
            let mut problems = Vec::new();
            for (run, want) in runs.iter().zip(want) {
                let got = hops(&format!("traceroute to {run}"));
                let addrs: Vec<&str> = got.iter().map(|(a, _)| a.as_str()).collect();
                let want_addrs: Vec<&str> = want.iter().map(|(a, _)| *a).collect();
                assert_eq!(addrs, want_addrs, "{run}");
                for ((addr, ms), (_, rtt)) in got.iter().zip(want) {
                    // Never early; late by at most 2 ms (a probe and its answer cross up to four
                    // links, each handled when the clock reaches it).
                    if *ms < rtt - 0.05 || *ms > rtt + 2.0 {
                        problems.push(format!("{addr}: {ms} ms for a {rtt} ms round trip"));
                    }
                }
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("; "))
            }
        },
    );
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

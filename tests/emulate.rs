//! `longhaul emulate` end to end (needs root: namespaces and TUN devices; skipped otherwise): stock
//! `ping` sees the configured RTT, `longhaul test` is held to the bottleneck rate with every byte
//! delivered, CMD's exit code comes back, and no namespace is left behind.

use std::process::{Command, Output};

use serde_json::Value;

use crate::util::{bin, longhaul};

/// Whether this process may create namespaces and TUN devices; prints why not.
fn skip_unprivileged() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    if !longhaul_sys::has_net_admin() || !longhaul_sys::has_capability(CAP_SYS_ADMIN) {
        println!("skipped: needs CAP_NET_ADMIN");
        return true;
    }
    false
}

/// Runs `longhaul emulate ARGS` and checks that its namespaces are gone afterwards.
fn emulate(args: &[&str]) -> Output {
    let out = Command::new(bin())
        .arg("emulate")
        .args(args)
        .output()
        .expect("run longhaul emulate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    let host_a = stderr
        .lines()
        .find_map(|l| l.strip_prefix("emulate: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `emulate:` line in stderr:\n{stderr}"));
    let tag = host_a.strip_suffix("-a").expect("host a is lh-<tag>-a");
    assert!(tag.starts_with("lh-"), "{tag}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        !list.lines().any(|l| l.starts_with(&format!("{tag}-"))),
        "namespaces of {tag} left behind:\n{list}"
    );
    out
}

#[test]
fn ping_sees_the_configured_rtt() {
    if skip_unprivileged() {
        return;
    }
    let out = emulate(&[
        "--rtt",
        "40ms",
        "--rate",
        "500M",
        "--no-server",
        "--",
        "sh",
        "-c",
        "ping -n -c 10 -i 0.2 -W 2 $LH_PEER && ping -6 -n -c 3 -i 0.2 -W 2 $LH_PEER6",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success(), "{text}");
    let avgs: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .map(|v| v.split('/').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(avgs.len(), 2, "IPv4 and IPv6 summaries:\n{text}");
    assert_eq!(text.matches(" 0% packet loss").count(), 2, "{text}");
    for avg in avgs {
        let tolerance = (40.0 * 0.01f64).max(0.5);
        assert!(
            (avg - 40.0).abs() <= tolerance,
            "average RTT {avg} ms, configured 40 ms ± {tolerance}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("fidelity: "), "{stderr}");
}

#[test]
fn longhaul_test_is_held_to_the_bottleneck() {
    if skip_unprivileged() {
        return;
    }
    let out = emulate(&[
        "--rtt",
        "20ms",
        "--rate",
        "200M",
        "--json",
        "--",
        bin(),
        "test",
        "10.201.0.2",
        "-t",
        "3",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let j: Value = serde_json::from_slice(&out.stdout).expect("longhaul test --json on stdout");
    let streams = j["end"]["streams"].as_array().expect("end.streams");
    assert!(!streams.is_empty());
    for s in streams {
        let sent = s["sender"]["bytes"].as_u64().unwrap();
        assert!(sent > 0, "{s}");
        assert_eq!(sent, s["receiver"]["bytes"].as_u64().unwrap(), "{s}");
    }
    let rate = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    println!(
        "received {:.1} Mbit/s through a 200 Mbit/s bottleneck",
        rate / 1e6
    );
    assert!(rate <= 1.05 * 200e6, "{rate} bit/s beats the bottleneck");
    assert!(rate >= 0.5 * 200e6, "{rate} bit/s");

    // The emulator's report: the JSON document at the end of stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let start = stderr.find("\n{").expect("JSON report on stderr") + 1;
    let report: Value = serde_json::from_str(&stderr[start..]).expect("report parses");
    let ab = &report["emulator"]["a_to_b"];
    assert!(ab["link"]["delivered"].as_u64().unwrap() > 1000, "{ab}");
    assert!(ab["lateness"]["samples"].as_u64().unwrap() > 0, "{ab}");
    assert!(report["fidelity"]["ok"].is_boolean());
}

#[test]
fn exit_code_of_the_command_is_returned() {
    if skip_unprivileged() {
        return;
    }
    let out = emulate(&["--rtt", "2ms", "--no-server", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn impossible_values_are_refused() {
    let out = longhaul(&["emulate", "--queue", "100", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("smaller than one MTU"), "{err}");
    let out = longhaul(&["emulate", "--rate", "0", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let out = longhaul(&["emulate", "--loss", "150%", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
}

//! `longhaul isolate` (issue 17 item 3) on the seed-001 IPv6 Land Speed Record path with its eight
//! routers (`ipv6-lsr-2004-routers`, Geneva → Phoenix, 193 ms): with a fault of each kind — random
//! loss, burst loss (Gilbert–Elliott), a rate below the probes', damaged packets — placed on each
//! of its nine links in turn (both directions, live, with `emulate link LINK set`), the bisection
//! names that link and that kind with a confidence of at least 90 %; the clean path shows no
//! fault (exit 0); IPv6 and the text report work the same; bad input is refused in one line.
//! As root; each run holds the machine alone. A wrong answer is tried again once only when the
//! emulator says it fell behind (NOT TRUSTWORTHY), as the other emulator tests do.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::emulate_network::Named;
use crate::util::{bin, netns_alone, program};

/// The probes' rate: far below the path's 1 Gbit/s, far above the slow link's.
const RATE: &str = "50M";
/// The rate fault: a link at 40 % of the probes' rate.
const SLOW: &str = "20M";

/// The nodes of the path in order: this host (`None`), the routers, the far end.
fn node(i: usize, v6: bool) -> Option<String> {
    match (i, v6) {
        (0, _) => None,
        (9, false) => Some("10.201.0.2".into()),
        (9, true) => Some("fd00:4c48::2".into()),
        (k, false) => Some(format!("10.201.1.{k}")),
        (k, true) => Some(format!("fd00:4c48:1::{k}")),
    }
}

/// A fault kind: the `link set` flags that place it and the kind the report should name.
struct Kind {
    flags: &'static [&'static str],
    want: &'static str,
}

const KINDS: [Kind; 4] = [
    Kind {
        flags: &["--loss", "2%"],
        want: "random_loss",
    },
    Kind {
        flags: &["--loss-burst", "1%,20%"],
        want: "burst_loss",
    },
    Kind {
        flags: &["--rate", SLOW],
        want: "rate",
    },
    Kind {
        flags: &["--corrupt", "2%"],
        want: "corruption",
    },
];

/// `link LINK set FLAGS...`, asserted to succeed.
fn set(bed: &Named, link: &str, flags: &[&str]) {
    let out = bed.run("link", &[&[link, "set"], flags].concat());
    assert!(
        out.status.success(),
        "link {link} set {flags:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `isolate TARGET` from cern1 with the test's settings and `extra` flags.
fn isolate(bed: &Named, target: &str, extra: &[&str]) -> Output {
    let args = [
        &[bin(), "isolate", target, "--rate", RATE, "--wait", "600ms"],
        extra,
    ]
    .concat();
    bed.exec_out("cern1", &args)
}

/// `isolate TARGET --json`: its exit code and report.
fn isolate_json(bed: &Named, target: &str) -> (Option<i32>, Value) {
    let out = isolate(bed, target, &["--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "isolate --json: {e}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// What is wrong with `report` for a fault of kind `want` on link `i` (empty: nothing).
fn misreport(report: &Value, code: Option<i32>, i: usize, want: &str, v6: bool) -> String {
    let f = &report["fault"];
    let after = f["after"].as_str().map(str::to_string);
    let mut wrong = Vec::new();
    if code != Some(3) {
        wrong.push(format!("exit {code:?}, not 3"));
    }
    if after != node(i, v6) || f["at"].as_str().map(str::to_string) != node(i + 1, v6) {
        wrong.push(format!(
            "segment {:?} → {:?}, not {:?} → {:?}",
            after,
            f["at"],
            node(i, v6),
            node(i + 1, v6)
        ));
    }
    if f["kind"] != want {
        wrong.push(format!("kind {}, not {want}", f["kind"]));
    }
    let c = f["confidence"].as_f64().unwrap_or(0.0);
    if c < 0.9 {
        wrong.push(format!("confidence {c}"));
    }
    wrong.join("; ")
}

#[test]
fn isolate_names_every_faulty_link_of_the_lsr_path_for_every_fault_kind() {
    let Some(_machine) = netns_alone() else {
        return;
    };
    if !program("ip", "iproute2") {
        return;
    }
    let bed = Named::up(
        "lh-isolate",
        Path::new("ipv6-lsr-2004-routers"),
        &["--no-server"],
    );
    let links: Vec<String> = bed.status()["network"]["links"]
        .as_array()
        .expect("links")
        .iter()
        .map(|l| l["name"].as_str().expect("a link name").to_string())
        .collect();
    assert_eq!(links.len(), 9, "{links:?}");

    // The clean path: every router a reflector at its hop, no fault, exit 0.
    let (code, clean) = isolate_json(&bed, "10.201.0.2");
    assert_eq!(code, Some(0), "{clean:#}");
    assert!(clean["fault"].is_null(), "{clean:#}");
    let hops: Vec<(u64, String)> = clean["reflectors"]
        .as_array()
        .expect("reflectors")
        .iter()
        .map(|r| {
            (
                r["hop"].as_u64().unwrap_or(0),
                r["addr"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(u64, String)> = (1..=9)
        .map(|i| (i as u64, node(i, false).unwrap()))
        .collect();
    assert_eq!(hops, want);
    assert!(
        clean["measured"].as_array().expect("measured").len() == 1,
        "a clean far end ends the search: {clean:#}"
    );

    let mut failures = Vec::new();
    for kind in &KINDS {
        for (i, link) in links.iter().enumerate() {
            set(&bed, link, kind.flags);
            let mut verdicts = Vec::new();
            for attempt in 1..=2 {
                let (code, report) = isolate_json(&bed, "10.201.0.2");
                let wrong = misreport(&report, code, i, kind.want, false);
                if wrong.is_empty() {
                    break;
                }
                let untrusted = bed.untrusted();
                verdicts.push(format!(
                    "attempt {attempt}: {wrong} [{untrusted}]\n{report:#}"
                ));
                if untrusted.is_empty() || attempt == 2 {
                    failures.push(format!("{} on {link}: {}", kind.want, verdicts.join("\n")));
                    break;
                }
            }
            // Back to the preset: gva-chi is the 1 Gbit/s transatlantic link, the rest unlimited.
            let rate = if link == "gva-chi" { "1G" } else { "0" };
            set(
                &bed,
                link,
                &["--loss", "0", "--corrupt", "0", "--rate", rate],
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // IPv6 and the text report: random loss on the Kansas City – Sunnyvale link.
    set(&bed, &links[5], &["--loss", "2%"]);
    let (code, v6) = isolate_json(&bed, "fd00:4c48::2");
    assert_eq!(misreport(&v6, code, 5, "random_loss", true), "", "{v6:#}");
    let out = isolate(&bed, "10.201.0.2", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("fault: between hop 5 (10.201.1.5) and hop 6 (10.201.1.6): random loss"),
        "{text}"
    );
    set(&bed, &links[5], &["--loss", "0"]);

    // Bad input: one line, non-zero exit, nothing run.
    for (args, says) in [
        (&["10.201.0.2", "--rate", "0"][..], "must be above 0"),
        (
            &["10.201.0.2", "--reflector", "fd00::1"][..],
            "not of the far end's family",
        ),
        (&["no-such-host.invalid"][..], "cannot resolve"),
        (
            &["10.201.0.2", "--probes", "5"][..],
            "5 is not in 16..=65535",
        ),
    ] {
        let out = bed.exec_out("cern1", &[&[bin(), "isolate"], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(1 | 2)) && err.contains(says),
            "{args:?}: {:?} {err}",
            out.status
        );
    }
}

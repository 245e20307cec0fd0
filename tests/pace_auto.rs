//! `longhaul test --pace auto` on emulated long paths: it finds the bottleneck by packet trains, holds
//! the pacing rate under it so that a small queue never overflows, and follows cross traffic that
//! comes and goes (issue 17's acceptance).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::emulate::emulate_checked;
use crate::util::{bin, machine_alone, netns_privileges};

/// A directory of this test process for its reports (removed at the end of the test).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lh-pace-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("make the test directory");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn report(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let j: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}: {text}", path.display()))?;
    match j["error"].as_str() {
        Some(e) => Err(format!("{}: the test failed: {e}", path.display())),
        None => Ok(j),
    }
}

/// Received bit/s, retransmitted segments and segments sent (by the sender's MSS) of a report.
fn figures(j: &Value) -> (f64, u64, u64) {
    let rate = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    let retr = j["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    let bytes = j["end"]["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let mss = j["start"]["longhaul"]["local_sockets"][0]["mss"]
        .as_u64()
        .unwrap_or(1448)
        .max(1);
    (rate, retr, bytes / mss)
}

/// The command's failure, with the last lines of what it and the emulator said.
fn succeeded(out: &Output) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
    Err(format!(
        "the command failed ({}): {}",
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

/// A 120 ms, 1 Gbit/s path whose bottleneck queue is 0.1 × BDP (1.5 MB, 12 ms): unpaced CUBIC
/// overflows it in slow start; `--pace auto` runs at ≥ 90 % of the bottleneck (after the first 3 s
/// of slow start, `-O 3`) with retransmits under 0.1 % of the segments sent.
#[test]
fn pace_auto_fills_a_small_queue_120ms_path_without_retransmits() {
    if !netns_privileges() {
        return;
    }
    let _serial = machine_alone();
    let dir = Scratch::new("small-queue");
    let (unpaced, auto) = (dir.path().join("cubic.json"), dir.path().join("auto.json"));
    let cmd = format!(
        "{lh} test 10.201.0.2 -C cubic -t 8 -O 3 --json > {u}; \
         {lh} test 10.201.0.2 -C cubic -t 8 -O 3 --pace auto --json > {a}",
        lh = bin(),
        u = unpaced.display(),
        a = auto.display()
    );
    emulate_checked(
        &[
            "--rtt", "120ms", "--rate", "1G", "--queue", "1500K", "--", "sh", "-c", &cmd,
        ],
        |out| {
            succeeded(out)?;
            let (u, a) = (report(&unpaced)?, report(&auto)?);
            let (u_rate, u_retr, u_segs) = figures(&u);
            let (a_rate, a_retr, a_segs) = figures(&a);
            println!(
                "unpaced CUBIC: {:.1} Mbit/s, {u_retr} of {u_segs} segments retransmitted; \
                 --pace auto: {:.1} Mbit/s, {a_retr} of {a_segs}",
                u_rate / 1e6,
                a_rate / 1e6
            );
            let estimate = &a["start"]["longhaul"]["pace_auto"];
            let found = estimate["rate_bps"].as_f64().unwrap_or(0.0);
            assert!(
                (0.5e9..=1.5e9).contains(&found),
                "the trains found {found} bit/s on a 1 Gbit/s path: {estimate}"
            );
            let governor = &a["end"]["longhaul"]["pace_auto"]["client"];
            assert!(governor["rounds"].as_u64().unwrap_or(0) > 20, "{governor}");
            assert!(governor["to_90_ms"].is_f64(), "{governor}");
            assert!(a_rate <= 1.0e9, "{a_rate} beat the 1 Gbit/s link");
            if a_rate < 0.90e9 {
                return Err(format!("--pace auto ran at {a_rate} bit/s"));
            }
            if a_retr as f64 >= 0.001 * a_segs as f64 {
                return Err(format!(
                    "--pace auto retransmitted {a_retr} of {a_segs} segments"
                ));
            }
            Ok(())
        },
    );
}

/// On/off cross traffic of 400 Mbit/s (3 s on, 5 s off) on a 1 Gbit/s, 120 ms path: the governor
/// comes down to the room left while it is on and goes back up when it is off.
#[test]
fn pace_auto_follows_cross_traffic_that_comes_and_goes() {
    if !netns_privileges() {
        return;
    }
    let _serial = machine_alone();
    let dir = Scratch::new("cross");
    let auto = dir.path().join("auto.json");
    let cmd = format!(
        "{lh} test 10.201.0.2 -t 16 --pace auto --json > {a}",
        lh = bin(),
        a = auto.display()
    );
    emulate_checked(
        &[
            "--rtt",
            "120ms",
            "--rate",
            "1G",
            "--queue",
            "1500K",
            "--cross-on-off",
            "400M,3s,5s",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        |out| {
            succeeded(out)?;
            let a = report(&auto)?;
            let timeline = a["end"]["longhaul"]["pace_auto"]["client"]["timeline"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let rounds: Vec<(f64, f64, bool)> = timeline
                .iter()
                .map(|r| {
                    (
                        r["at_ms"].as_f64().unwrap_or(0.0),
                        r["rate_bps"].as_f64().unwrap_or(0.0),
                        r["step"] == "lower",
                    )
                })
                .collect();
            // Past the start: a rate lowered for the cross traffic (a start below it, as a busy
            // machine's probe trains can give, is no answer to it), and a rate set after it
            // that takes the room back.
            let late: Vec<&(f64, f64, bool)> = rounds.iter().filter(|r| r.0 > 2_000.0).collect();
            let low = late.iter().find(|r| r.2 && r.1 <= 0.75e9);
            let Some(&&(low_at, low_bps, _)) = low else {
                let lowest = late.iter().map(|r| r.1).fold(f64::MAX, f64::min);
                return Err(format!(
                    "never came down for the cross traffic (lowest {lowest})"
                ));
            };
            let high_after = late
                .iter()
                .filter(|r| r.0 > low_at)
                .map(|r| r.1)
                .fold(0.0, f64::max);
            println!(
                "down to {:.0} Mbit/s at {:.1} s, back up to {:.0} Mbit/s after it",
                low_bps / 1e6,
                low_at / 1e3,
                high_after / 1e6
            );
            if high_after < 0.85e9 {
                // Every round after the low, as rate/delivered Mbit/s, queue ms and the step,
                // so that a failure says why the governor held.
                let after: Vec<String> = timeline
                    .iter()
                    .filter(|r| r["at_ms"].as_f64().unwrap_or(0.0) >= low_at)
                    .map(|r| {
                        format!(
                            "{:.1}s {:.0}/{:.0} q{:.1} {}",
                            r["at_ms"].as_f64().unwrap_or(0.0) / 1e3,
                            r["rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
                            r["delivered_bps"].as_f64().unwrap_or(0.0) / 1e6,
                            r["queue_us"].as_f64().unwrap_or(0.0) / 1e3,
                            r["step"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                // The kernel's TCP memory against its limits: under pressure, TCP shrinks the
                // send buffers and every sender is held below its pacing.
                let sockstat = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
                let tcp = sockstat
                    .lines()
                    .find(|l| l.starts_with("TCP:"))
                    .unwrap_or("");
                let tcp_mem =
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").unwrap_or_default();
                // And the sender's socket each second: what held it (window, buffer, peer).
                let seconds: Vec<String> = a["intervals"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|i| i["streams"].get(0).cloned())
                    .map(|s| {
                        format!(
                            "{:.0}s {:.0}Mb cwnd {:.1}MB wnd {:.1}MB rtt {:.0}ms pace {:.0}Mb \
                             retr {} rwnd-lim {:.0}ms buf-lim {:.0}ms busy {:.0}ms",
                            s["end"].as_f64().unwrap_or(0.0),
                            s["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
                            s["snd_cwnd"].as_f64().unwrap_or(0.0) / 1e6,
                            s["snd_wnd"].as_f64().unwrap_or(0.0) / 1e6,
                            s["rtt"].as_f64().unwrap_or(0.0) / 1e3,
                            s["pacing_rate"].as_f64().unwrap_or(0.0) / 1e6,
                            s["retransmits"],
                            s["rwnd_limited"].as_f64().unwrap_or(0.0) / 1e3,
                            s["sndbuf_limited"].as_f64().unwrap_or(0.0) / 1e3,
                            s["busy_time"].as_f64().unwrap_or(0.0) / 1e3,
                        )
                    })
                    .collect();
                let sndbuf = a["start"]["sndbuf_actual"].as_u64().unwrap_or(0);
                let cc = &a["end"]["sender_tcp_congestion"];
                // The socket's seconds first: a log cut to its first few thousand characters
                // (scripts/test.sh's digest) still says what held the sender.
                return Err(format!(
                    "never went back up when it left (highest after the low {high_after}); the \
                     sender's socket each second ({cc}, sndbuf {sndbuf} at the start): {}; \
                     kernel: {tcp} (pages; tcp_mem {}); rounds from the low (rate/delivered \
                     Mbit/s, queue ms): {}",
                    seconds.join("; "),
                    tcp_mem.trim(),
                    after.join(", ")
                ));
            }
            Ok(())
        },
    );
}

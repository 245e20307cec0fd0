//! Socket-buffer caps: `net.core.rmem_max`/`wmem_max`, the autotuning maxima `tcp_rmem[2]`/`tcp_wmem[2]`,
//! and whether longhaul may force its buffers past them (`SO_*BUFFORCE`).
//!
//! Rules (socket(7), tcp(7); ESnet fasterdata's Linux host-tuning pages and `fasterdata_tuning.py`):
//! - `setsockopt(SO_RCVBUF, x)` is clamped at `net.core.rmem_max` and then doubled, about half of which
//!   is usable window, so `rmem_max` ≈ the largest window a socket that sets its buffer can get. longhaul
//!   asks for 2 × BDP per stream (proto::window), so `rmem_max` ≥ 2 × BDP; below 1 × BDP the path cannot
//!   be filled at all (Fail), in between it fills without headroom (Warn). Same for `wmem_max` and
//!   `SO_SNDBUF`.
//! - Autotuning grows a buffer up to `tcp_rmem[2]`, again about half of it window, so `tcp_rmem[2]` ≥
//!   2 × BDP gives at least one BDP of window. Applications that set their buffers (longhaul, iperf -w)
//!   are not bound by it, so a shortfall is a Warn when `rmem_max` still lets such a socket fill the
//!   path, else a Fail.
//! - The fixes round up to a power of two as fasterdata's values are (64, 256, 512 MiB; 2 GiB at the int
//!   limit): [`buffer_sysctl_value`], through [`Target::core_sysctl_value`] and
//!   [`Target::autotune_sysctl_value`], the values `calc bdp` prints too.

use longhaul_units::{fmt_duration, fmt_rate, fmt_size, fmt_size_si};

use super::finding::bytes;
use super::{Finding, HostSnapshot, Status, Target};

/// The largest value the buffer sysctls accept: `net.core.rmem_max`,
/// `tcp_rmem` and their send twins are C `int`s (fasterdata's 100G page calls
/// this "the maximum (2 GB)").
pub const MAX_BUFFER_SYSCTL: u64 = i32::MAX as u64;

/// The value to give a buffer sysctl so that sockets can hold `bytes`:
/// `bytes` rounded up to a power of two, as fasterdata's tables are, and at
/// most [`MAX_BUFFER_SYSCTL`]. 300,000,000 → 536,870,912 (512 MiB).
pub fn buffer_sysctl_value(bytes: u64) -> u64 {
    bytes
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX)
        .min(MAX_BUFFER_SYSCTL)
}

/// The buffer-cap findings: the two core caps, the two autotuning maxima, then `SO_*BUFFORCE`.
pub(crate) fn buffers(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let bdp = t.bdp_per_stream();
    let want = t.wanted_window();
    let rtt = fmt_duration(t.rtt);
    let mut short = false;
    for (name, value, role) in [
        ("net.core.rmem_max", snap.rmem_max, "receive"),
        ("net.core.wmem_max", snap.wmem_max, "send"),
    ] {
        let Some(v) = value else {
            out.push(
                Finding::new(name, Status::Info)
                    .observed("unknown (not readable here)")
                    .wanted(format!("≥ {}", bytes(want))),
            );
            continue;
        };
        let ceiling = t.ceiling(v);
        let status = if v >= want {
            Status::Ok
        } else if ceiling >= t.rate_bps {
            Status::Warn
        } else {
            Status::Fail
        };
        short |= status != Status::Ok;
        let mut f = Finding::new(name, status)
            .observed(format!("{} → {}", bytes(v), fmt_rate(ceiling)))
            .wanted(if want < bdp.saturating_mul(2) {
                format!("≥ {want} (the 1 GiB window; 2 × BDP is more)")
            } else {
                format!("≥ {want} (2 × BDP)")
            })
            .why(format!(
                "caps the {role} buffer a socket may request (SO_{}BUF); the kernel doubles the \
                 request and about half is usable window, so the window tops out near this value \
                 (→ the rate that window allows at {rtt}); 2 × BDP per stream is {}",
                if role == "send" { "SND" } else { "RCV" },
                fmt_size_si(want)
            ));
        if status != Status::Ok {
            f = f.fix(format!("sysctl -w {name}={}", t.core_sysctl_value()));
        }
        out.push(f);
    }

    // Sockets that set their buffer get about `core` of window.
    let core_covers = |core: Option<u64>| core.is_some_and(|c| t.ceiling(c) >= t.rate_bps);
    for (name, value, core, app_default) in [
        ("net.ipv4.tcp_rmem", snap.tcp_rmem, snap.rmem_max, 131_072),
        ("net.ipv4.tcp_wmem", snap.tcp_wmem, snap.wmem_max, 16_384),
    ] {
        let want_max = t.autotune_max();
        let Some([min, default, max]) = value else {
            out.push(
                Finding::new(name, Status::Info)
                    .observed("unknown (not readable here)")
                    .wanted(format!("max ≥ {}", bytes(want_max))),
            );
            continue;
        };
        let ceiling = t.ceiling(max / 2);
        let status = if max >= want_max {
            Status::Ok
        } else if core_covers(core) {
            Status::Warn
        } else {
            Status::Fail
        };
        short |= status != Status::Ok;
        let mut f = Finding::new(name, status)
            .observed(format!(
                "{min} {default} {max} ({}) → {}",
                fmt_size(max),
                fmt_rate(ceiling)
            ))
            .wanted(if want_max < bdp.saturating_mul(2) {
                format!("max ≥ {want_max} (the int limit; 2 × BDP is more)")
            } else {
                format!("max ≥ {want_max} (2 × BDP)")
            })
            .why(if status == Status::Warn {
                "caps kernel autotuning (about half of it is window): tools that leave buffers \
                 alone (scp, rsync, most applications) stop there; longhaul and iperf -w set \
                 their buffers and are bound by the core cap instead, which is high enough"
                    .to_owned()
            } else {
                "caps kernel autotuning; about half of the buffer is usable window, so the max \
                 must be twice the BDP for autotuned sockets to fill the path"
                    .to_owned()
            });
        if status != Status::Ok {
            // Keep the host's min and default; change only the max. A host
            // whose values are unknown gets the kernel defaults.
            let (min, default) = if min > 0 {
                (min, default)
            } else {
                (4096, app_default)
            };
            f = f.fix(format!(
                "sysctl -w {name}=\"{min} {default} {}\"",
                t.autotune_sysctl_value()
            ));
        }
        out.push(f);
    }

    // SO_SNDBUFFORCE/SO_RCVBUFFORCE (CAP_NET_ADMIN) bypass the core caps
    // (socket(7)); longhaul uses them when privileged (proto::window::plan).
    let (status, observed, why) = match (snap.net_admin, short) {
        (true, true) => (
            Status::Info,
            "yes (root or CAP_NET_ADMIN)",
            "longhaul forces its buffers past the caps above (SO_*BUFFORCE), so its own tests \
             are not blocked by them; other tools still are",
        ),
        (false, true) => (
            Status::Info,
            "no",
            "run longhaul as root (or with CAP_NET_ADMIN) and it forces its buffers past the \
             caps above with SO_*BUFFORCE; other tools still need the sysctls raised",
        ),
        (true, false) => (
            Status::Ok,
            "yes (root or CAP_NET_ADMIN)",
            "longhaul may force its buffers past the caps (SO_*BUFFORCE); not needed here",
        ),
        (false, false) => (
            Status::Ok,
            "no",
            "not needed: the caps already allow the window",
        ),
    };
    out.push(
        Finding::new("SO_*BUFFORCE", status)
            .observed(observed)
            .wanted("root, when the buffer caps are short")
            .why(why),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::fixtures::{find, target, vm_defaults, well_tuned};
    use crate::tuning::{any_fail, evaluate};

    #[test]
    fn buffer_sysctl_values_round_up_to_powers_of_two() {
        assert_eq!(buffer_sysctl_value(300_000_000), 536_870_912);
        assert_eq!(buffer_sysctl_value(67_108_864), 67_108_864);
        assert_eq!(buffer_sysctl_value(0), 1);
        assert_eq!(buffer_sysctl_value(3_000_000_000), MAX_BUFFER_SYSCTL);
        assert_eq!(buffer_sysctl_value(u64::MAX), MAX_BUFFER_SYSCTL);
    }

    #[test]
    fn root_is_told_longhaul_is_not_blocked() {
        let snap = HostSnapshot {
            net_admin: true,
            ..vm_defaults()
        };
        let f = evaluate(&snap, &target());
        let force = find(&f, "SO_*BUFFORCE");
        assert_eq!(force.status, Status::Info);
        assert!(force.why.contains("not blocked"), "{}", force.why);
        // Root may pick any loaded algorithm.
        assert!(
            !f.iter()
                .any(|f| f.check == "net.ipv4.tcp_allowed_congestion_control")
        );
    }

    #[test]
    fn core_cap_between_one_and_two_bdp_warns() {
        // BDP 150 MB: 256 MiB covers one BDP but not two.
        let snap = HostSnapshot {
            rmem_max: Some(268_435_456),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(rmem.status, Status::Warn);
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=536870912")
        );
    }

    #[test]
    fn short_autotuning_warns_when_the_core_cap_covers_it() {
        let snap = HostSnapshot {
            tcp_rmem: Some([4096, 87_380, 33_554_432]),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let r = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(r.status, Status::Warn);
        assert_eq!(
            r.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 87380 536870912\"")
        );
        assert!(!any_fail(&f));
    }
}

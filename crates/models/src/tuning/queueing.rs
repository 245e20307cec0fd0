//! Host-wide queueing: the default qdisc, the receive backlog queue, and `tcp_notsent_lowat`.
//!
//! fq is fasterdata's recommendation for pacing (its Linux host-tuning page). Since Linux 4.20 TCP paces internally
//! (SO_MAX_PACING_RATE, BBR) without fq, and iperf3 3.21's `--fq-rate 5G` gave 4.98–4.99 Gbit/s on
//! loopback's `noqueue` device (Linux 6.18), so a missing fq is a Warn; only BBR on a kernel before 4.20
//! needs fq to pace at all (Fail, per interface: see `links`).

use super::finding::bytes;
use super::target::TEN_GBIT;
use super::{Finding, HostSnapshot, Status, Target};

/// The usual `tcp_notsent_lowat` default, "no limit" (`UINT_MAX`).
const NOTSENT_LOWAT_UNLIMITED: u64 = u32::MAX as u64;

/// fasterdata's `netdev_max_backlog` for 10G-and-up hosts
/// (`fasterdata_tuning.py`, bltierney/fasterdata-tuning).
pub const NETDEV_BACKLOG_10G: u64 = 250_000;

/// The queueing findings: `default_qdisc`, `netdev_max_backlog` (at 10G and up), `tcp_notsent_lowat`.
pub(crate) fn queueing(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let f = match snap.default_qdisc.as_deref() {
        Some("fq") => Finding::new("net.core.default_qdisc", Status::Ok).observed("fq"),
        Some(q) => Finding::new("net.core.default_qdisc", Status::Warn)
            .observed(q)
            .fix("sysctl -w net.core.default_qdisc=fq"),
        None => Finding::new("net.core.default_qdisc", Status::Info).observed("unknown"),
    };
    out.push(f.wanted("fq").why(
        "the qdisc new interfaces get; fq paces each flow (fasterdata). Applies to qdiscs \
         created afterwards: see the per-interface qdisc rows",
    ));

    // fasterdata_tuning.py sets 250000 on 10G-and-up hosts: the
    // per-CPU queue of received packets waiting for the stack.
    if t.rate_bps >= TEN_GBIT {
        let name = "net.core.netdev_max_backlog";
        let f = match snap.netdev_max_backlog {
            Some(v) if v >= NETDEV_BACKLOG_10G => {
                Finding::new(name, Status::Ok).observed(v.to_string())
            }
            Some(v) => Finding::new(name, Status::Warn)
                .observed(v.to_string())
                .fix(format!("sysctl -w {name}={NETDEV_BACKLOG_10G}")),
            None => Finding::new(name, Status::Info).observed("unknown"),
        };
        out.push(f.wanted(format!("≥ {NETDEV_BACKLOG_10G} at 10G and up")).why(
            "packets received faster than the stack takes them queue here per CPU; when it is \
             full they are dropped before TCP sees them",
        ));
    }

    let name = "net.ipv4.tcp_notsent_lowat";
    let f = match snap.notsent_lowat {
        Some(NOTSENT_LOWAT_UNLIMITED) | None => Finding::new(name, Status::Ok).observed(
            snap.notsent_lowat
                .map_or("unknown".to_owned(), |v| format!("{v} (unlimited)")),
        ),
        Some(v) => Finding::new(name, Status::Info).observed(bytes(v)),
    };
    out.push(f.wanted("unlimited for bulk senders").why(
        "limits unsent data queued per socket; a small global value (set for latency-sensitive \
         servers) makes a bulk sender wake far more often, but does not cap the window",
    ));
}

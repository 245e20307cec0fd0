//! Socket-buffer sizing: how big each stream's send and receive buffers must be, what the kernel allows,
//! and what the result implies.
//!
//! A TCP stream can have at most one window of data in flight per round trip, so its rate is capped at
//! window ÷ RTT. To fill a path of rate C and round-trip time RTT, each of N streams needs a window of at
//! least its share of the bandwidth-delay product, C·RTT/N; we aim for **2 × BDP**, which leaves room for
//! the sender's retransmit queue and for the receiver to absorb reordering and recovery (the rule the
//! DataTAG and LSR teams applied by hand with `iperf -w 250m`).
//!
//! Linux semantics that shape the plan (see `socket(7)`, `tcp(7)`):
//! - `setsockopt(SO_RCVBUF/SO_SNDBUF, x)` clamps x to `net.core.rmem_max`/`wmem_max`, then **doubles** it
//!   for bookkeeping overhead; `getsockopt` returns the doubled value. About half of the buffer becomes
//!   usable window, so we request the window we want and expect the kernel to report twice that.
//! - `SO_RCVBUFFORCE/SO_SNDBUFFORCE` (CAP_NET_ADMIN) bypass the caps.
//! - Setting a buffer disables autotuning for that socket; left alone, the kernel grows it up to
//!   `tcp_rmem[2]`/`tcp_wmem[2]`. When autotuning can reach the window we want, we leave it on: it spends
//!   memory only when the path needs it.
//! - One window cannot exceed 2^30 B (RFC 7323 window scale 14): beyond that, only more streams help.
//!
//! The plan never fails and never clamps silently: [`assess`] compares what was requested, what the kernel
//! granted and the system cap, computes the ceiling the granted window implies, and names the exact sysctl
//! that would lift a binding cap.

use serde::{Deserialize, Serialize};

use longhaul_units::models::{MAX_TCP_WINDOW, bdp_bytes, window_ceiling_bps};
use longhaul_units::{Nanos, fmt_rate, fmt_size};

/// The kernel's buffer limits on one host (read from /proc/sys by the I/O layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelLimits {
    /// `net.core.rmem_max`: cap on SO_RCVBUF.
    pub rmem_max: u64,
    /// `net.core.wmem_max`: cap on SO_SNDBUF.
    pub wmem_max: u64,
    /// `net.ipv4.tcp_rmem[2]`: receive autotuning ceiling.
    pub tcp_rmem_max: u64,
    /// `net.ipv4.tcp_wmem[2]`: send autotuning ceiling.
    pub tcp_wmem_max: u64,
    /// Whether the process may use SO_*BUFFORCE (CAP_NET_ADMIN).
    pub privileged: bool,
}

/// Which buffer of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferKind {
    /// SO_SNDBUF.
    Send,
    /// SO_RCVBUF.
    Recv,
}

impl BufferKind {
    fn sysctls(self) -> (&'static str, &'static str) {
        match self {
            BufferKind::Send => ("net.core.wmem_max", "net.ipv4.tcp_wmem"),
            BufferKind::Recv => ("net.core.rmem_max", "net.ipv4.tcp_rmem"),
        }
    }
}

/// What to do with one buffer of each data socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum BufferAction {
    /// Leave kernel autotuning on; it can grow the buffer to `max` bytes.
    Autotune {
        /// The autotuning ceiling (`tcp_rmem[2]` or `tcp_wmem[2]`).
        max: u64,
    },
    /// Set the buffer explicitly.
    Set {
        /// Bytes passed to setsockopt (the kernel doubles this).
        request: u64,
        /// Use SO_*BUFFORCE to bypass the cap.
        force: bool,
    },
}

/// The plan for one buffer kind on one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferPlan {
    /// Send or receive buffer.
    pub kind: BufferKind,
    /// What to do.
    pub action: BufferAction,
    /// The system cap that applies to this action, bytes (for reports).
    pub cap: u64,
    /// Name of the sysctl that sets that cap.
    pub cap_sysctl: String,
}

/// The whole window plan of one host for one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowPlan {
    /// RTT the plan is for, ns.
    pub rtt_ns: u64,
    /// Target rate of all streams together, bit/s.
    pub target_rate_bps: u64,
    /// Streams sharing the target.
    pub streams: u32,
    /// Each stream's share of the bandwidth-delay product, bytes.
    pub bdp_per_stream: u64,
    /// The window wanted per stream, bytes: 2 × BDP, or the user's `-w`.
    pub wanted: u64,
    /// Whether `wanted` came from the user (`-w`) rather than from the RTT and rate.
    pub fixed: bool,
    /// Send-buffer plan.
    pub send: BufferPlan,
    /// Receive-buffer plan.
    pub recv: BufferPlan,
    /// Warnings known before any socket exists (e.g. the 1 GiB window limit).
    pub notes: Vec<String>,
}

/// How long the written-but-unsent data of a sending socket may last at the stream's target rate.
pub const NOTSENT_LOWAT_TIME: Nanos = Nanos(4_000_000);
/// Smallest `TCP_NOTSENT_LOWAT` set for a fast stream: below this a sender wakes too often to keep
/// it fed.
pub const MIN_NOTSENT_LOWAT: u64 = 1 << 20;
/// Most data a slow stream's floor may hold, in time at its rate.
pub const NOTSENT_FLOOR_TIME: Nanos = Nanos(100_000_000);
/// Smallest `TCP_NOTSENT_LOWAT` set at all.
pub const MIN_SLOW_NOTSENT_LOWAT: u64 = 16 << 10;
/// Largest `TCP_NOTSENT_LOWAT` set.
pub const MAX_NOTSENT_LOWAT: u64 = 16 << 20;

/// `TCP_NOTSENT_LOWAT` for each of `streams` sending sockets sharing `target_rate_bps`: about
/// [`NOTSENT_LOWAT_TIME`] of data at the stream's share, within
/// [`MIN_NOTSENT_LOWAT`]..=[`MAX_NOTSENT_LOWAT`].
///
/// Why: a send buffer sized for 2 × BDP at the *target* rate can hold seconds of data when the path
/// is slower than the target (10 Gbit/s planned, 200 Mbit/s found). Without a limit, `write()`
/// fills that buffer at memory speed, so the sender's byte count runs ahead of the network and the
/// test overruns `-t` while the buffer drains. With the limit the kernel accepts new data only when
/// less than this much is waiting to be sent: the in-flight window is untouched (it is not "unsent"),
/// and what was written tracks what was sent to within a few milliseconds of data.
///
/// The floor is lower for a slow stream (one for which it would hold more than a second of data,
/// below about 8.4 Mbit/s): [`NOTSENT_FLOOR_TIME`] of its data (at least
/// [`MIN_SLOW_NOTSENT_LOWAT`]), so that a stream paced at a few Mbit/s does not queue seconds of
/// data that outlive the test (`-t 2 --pace 2M` used to run for 17 s and fail waiting for the
/// server's results).
pub fn notsent_lowat(target_rate_bps: u64, streams: u32) -> u32 {
    let per_stream = target_rate_bps / 8 / u64::from(streams.max(1));
    let of = |t: Nanos| (u128::from(per_stream) * u128::from(t.0) / 1_000_000_000) as u64;
    // Only a stream for which the usual floor holds more than a second of data gets the lower one
    // (a faster stream with a lower floor starved among 256 streams on loopback).
    let floor = if of(Nanos(1_000_000_000)) < MIN_NOTSENT_LOWAT {
        of(NOTSENT_FLOOR_TIME).max(MIN_SLOW_NOTSENT_LOWAT)
    } else {
        MIN_NOTSENT_LOWAT
    };
    of(NOTSENT_LOWAT_TIME).clamp(floor, MAX_NOTSENT_LOWAT) as u32
}

/// Plans both buffers for `streams` streams sharing `target_rate_bps` over `rtt`, or for a fixed
/// per-stream window when the user gave `-w`.
pub fn plan(
    rtt: Nanos,
    target_rate_bps: u64,
    streams: u32,
    fixed: Option<u64>,
    limits: &KernelLimits,
) -> WindowPlan {
    let streams = streams.max(1);
    let bdp_per_stream = bdp_bytes(target_rate_bps / u64::from(streams), rtt);
    let mut notes = Vec::new();
    // Saturating: the plan is total over every input (a peer's rtt and rate are validated on receipt,
    // but the arithmetic must not be what guards against overflow).
    let mut wanted = fixed.unwrap_or(bdp_per_stream.saturating_mul(2)).max(1);
    if wanted > MAX_TCP_WINDOW {
        let needed = bdp_per_stream
            .saturating_mul(2)
            .saturating_mul(u64::from(streams))
            .div_ceil(MAX_TCP_WINDOW);
        notes.push(format!(
            "one TCP window is capped at 1 GiB (RFC 7323): {} per stream is more than that; \
             use -P {} or more streams",
            fmt_size(wanted),
            needed.max(u64::from(streams).saturating_add(1))
        ));
        wanted = MAX_TCP_WINDOW;
    }
    let send = plan_buffer(BufferKind::Send, wanted, fixed.is_some(), limits);
    let recv = plan_buffer(BufferKind::Recv, wanted, fixed.is_some(), limits);
    WindowPlan {
        rtt_ns: rtt.0,
        target_rate_bps,
        streams,
        bdp_per_stream,
        wanted,
        fixed: fixed.is_some(),
        send,
        recv,
        notes,
    }
}

/// Time of data a UDP stream's socket buffers hold at its rate: enough to ride out the receiver (or
/// the sender) being off the CPU for a scheduling slice or two without a drop.
pub const UDP_BUFFER_TIME: Nanos = Nanos(50_000_000);
/// Smallest UDP socket buffer planned: 4 MiB, the socket default on many hosts being far less.
pub const MIN_UDP_BUFFER: u64 = 4 << 20;
/// Largest UDP socket buffer planned per stream: 512 MiB.
pub const MAX_UDP_BUFFER: u64 = 512 << 20;
/// The rate a UDP stream asked to go "as fast as it can" (`-b 0`) is planned for.
pub const UNLIMITED_UDP_PLAN_BPS: u64 = 10_000_000_000;

/// The socket buffers of a UDP test (`-u`): no window, and no autotuning (UDP has none), so each
/// buffer is set to hold [`UDP_BUFFER_TIME`] of its stream's rate (`rate_per_stream_bps`, 0 for
/// unlimited), within [`MIN_UDP_BUFFER`]..=[`MAX_UDP_BUFFER`], or to `fixed` (`-w`). Past the core
/// caps only a privileged process gets what it asks; [`assess`] then names the sysctl.
pub fn udp_plan(
    rate_per_stream_bps: u64,
    streams: u32,
    fixed: Option<u64>,
    limits: &KernelLimits,
) -> WindowPlan {
    let rate = if rate_per_stream_bps == 0 {
        UNLIMITED_UDP_PLAN_BPS
    } else {
        rate_per_stream_bps
    };
    let wanted = fixed
        .unwrap_or_else(|| bdp_bytes(rate, UDP_BUFFER_TIME).clamp(MIN_UDP_BUFFER, MAX_UDP_BUFFER));
    WindowPlan {
        rtt_ns: UDP_BUFFER_TIME.0,
        target_rate_bps: rate.saturating_mul(u64::from(streams.max(1))),
        streams: streams.max(1),
        bdp_per_stream: bdp_bytes(rate, UDP_BUFFER_TIME),
        wanted,
        fixed: fixed.is_some(),
        send: plan_buffer(BufferKind::Send, wanted, true, limits),
        recv: plan_buffer(BufferKind::Recv, wanted, true, limits),
        notes: Vec::new(),
    }
}

fn plan_buffer(kind: BufferKind, wanted: u64, fixed: bool, l: &KernelLimits) -> BufferPlan {
    let (core_max, autotune_max) = match kind {
        BufferKind::Send => (l.wmem_max, l.tcp_wmem_max),
        BufferKind::Recv => (l.rmem_max, l.tcp_rmem_max),
    };
    let (core_sysctl, tcp_sysctl) = kind.sysctls();
    // Autotuning reaches about half its ceiling as usable window (the other half is overhead).
    let autotune_window = autotune_max / 2;
    let (action, cap, cap_sysctl) = if !fixed && wanted <= autotune_window {
        (
            BufferAction::Autotune { max: autotune_max },
            autotune_max,
            tcp_sysctl,
        )
    } else if l.privileged {
        // SO_*BUFFORCE: no sysctl cap; the kernel's int range is the only limit.
        (
            BufferAction::Set {
                request: wanted,
                force: true,
            },
            u64::from(u32::MAX >> 1),
            "",
        )
    } else if wanted <= core_max || fixed || core_max >= autotune_window {
        // Unprivileged: setsockopt is clamped at the core cap; request anyway and report the clamp.
        (
            BufferAction::Set {
                request: wanted,
                force: false,
            },
            core_max,
            core_sysctl,
        )
    } else {
        // Autotuning gets further than the core cap allows: keep it, and report its limit.
        (
            BufferAction::Autotune { max: autotune_max },
            autotune_max,
            tcp_sysctl,
        )
    };
    BufferPlan {
        kind,
        action,
        cap,
        cap_sysctl: cap_sysctl.to_string(),
    }
}

/// What one buffer of the data sockets ended up as, checked against the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferOutcome {
    /// Send or receive buffer.
    pub kind: BufferKind,
    /// Bytes requested from setsockopt (0 when autotuning was left on).
    pub requested: u64,
    /// Bytes the kernel reports now (SO_SNDBUF/SO_RCVBUF; for autotune, the autotuning ceiling).
    pub granted: u64,
    /// The cap that applied, bytes.
    pub cap: u64,
    /// The usable window this implies per stream, bytes (about half of the granted buffer).
    pub window: u64,
    /// The rate ceiling that window implies for all streams together, bit/s.
    pub ceiling_bps: u64,
    /// Whether the ceiling is below the target rate: the run will be window-limited.
    pub limited: bool,
    /// One line for the user, stating the outcome.
    pub summary: String,
    /// The exact command that lifts the cap, when the cap binds.
    pub fix: Option<String>,
}

/// Compares the plan with what the kernel granted (`granted` = getsockopt value of the first data
/// socket; for autotuned buffers pass the autotuning ceiling).
pub fn assess(plan: &WindowPlan, buf: &BufferPlan, granted: u64) -> BufferOutcome {
    let rtt = Nanos(plan.rtt_ns);
    let (requested, autotune) = match buf.action {
        BufferAction::Autotune { max } => (0, Some(max)),
        BufferAction::Set { request, .. } => (request, None),
    };
    let window = granted / 2;
    let ceiling_bps = window_ceiling_bps(window, rtt).saturating_mul(u64::from(plan.streams));
    let wanted_ceiling = plan.target_rate_bps;
    let limited = ceiling_bps < wanted_ceiling && !plan.fixed;
    let name = match buf.kind {
        BufferKind::Send => "send buffer",
        BufferKind::Recv => "receive buffer",
    };
    let times_bdp = if plan.bdp_per_stream > 0 {
        window as f64 / plan.bdp_per_stream as f64
    } else {
        f64::INFINITY
    };
    let how = match (buf.action, autotune) {
        (BufferAction::Autotune { .. }, Some(max)) => {
            format!(
                "kernel autotuning up to {} ({})",
                fmt_size(max),
                buf.cap_sysctl
            )
        }
        (BufferAction::Set { force: true, .. }, _) => format!(
            "requested {}, granted {} with {}FORCE (cap bypassed)",
            fmt_size(requested),
            fmt_size(granted),
            match buf.kind {
                BufferKind::Send => "SO_SNDBUF",
                BufferKind::Recv => "SO_RCVBUF",
            }
        ),
        _ => format!(
            "requested {}, granted {}, cap {} = {}",
            fmt_size(requested),
            fmt_size(granted),
            buf.cap_sysctl,
            fmt_size(buf.cap)
        ),
    };
    let mut summary = format!(
        "{name}: {how}; window ≈ {} per stream = {} BDP → ceiling {} at {} RTT",
        fmt_size(window),
        if times_bdp.is_finite() {
            format!("{times_bdp:.1}×")
        } else {
            "∞×".into()
        },
        fmt_rate(ceiling_bps),
        longhaul_units::fmt_duration(rtt),
    );
    let fix = if limited {
        summary.push_str(&format!(
            " — LIMITS this run below the {} target",
            fmt_rate(wanted_ceiling)
        ));
        Some(fix_command(buf, plan.wanted))
    } else {
        None
    };
    BufferOutcome {
        kind: buf.kind,
        requested,
        granted,
        cap: buf.cap,
        window,
        ceiling_bps,
        limited,
        summary,
        fix,
    }
}

/// The sysctl that lifts a binding cap for a `window`-byte window (2 × BDP), rounded up to a power of two.
///
/// `setsockopt` clamps the request at the core cap *before* doubling it, so the core cap must hold the
/// window itself. Autotuning turns about half of `tcp_*mem[2]` into window, so the same value there
/// gives autotuned sockets at least one BDP, which fills the path. `longhaul doctor` gives the same
/// values (`longhaul_models::tuning::Target`).
fn fix_command(buf: &BufferPlan, window: u64) -> String {
    let (core, tcp) = buf.kind.sysctls();
    let need = window.next_power_of_two();
    match buf.action {
        BufferAction::Autotune { .. } => {
            let default = match buf.kind {
                BufferKind::Send => 16384,
                BufferKind::Recv => 131072,
            };
            format!(
                "sysctl -w {tcp}=\"4096 {default} {need}\" (or run as root to use SO_*BUFFORCE)"
            )
        }
        BufferAction::Set { .. } => {
            format!("sysctl -w {core}={need} (or run as root to use SO_*BUFFORCE)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's defaults: rmem_max = wmem_max = 4 MiB, tcp_rmem[2] 32 MiB, tcp_wmem[2] 4 MiB.
    fn defaults(privileged: bool) -> KernelLimits {
        KernelLimits {
            rmem_max: 4 << 20,
            wmem_max: 4 << 20,
            tcp_rmem_max: 32 << 20,
            tcp_wmem_max: 4 << 20,
            privileged,
        }
    }

    const MS_120: Nanos = Nanos(120_000_000);

    #[test]
    fn udp_buffers_hold_50ms_of_the_stream_within_bounds() {
        // 1 Gbit/s: 6.25 MB; set (never autotuned), forced as root.
        let p = udp_plan(1_000_000_000, 2, None, &defaults(true));
        assert_eq!(p.wanted, 6_250_000);
        assert_eq!(
            p.recv.action,
            BufferAction::Set {
                request: 6_250_000,
                force: true
            }
        );
        assert_eq!(p.target_rate_bps, 2_000_000_000);
        // Slow streams still get the floor; unlimited ones the plan for 10 Gbit/s.
        assert_eq!(
            udp_plan(1_000_000, 1, None, &defaults(false)).wanted,
            MIN_UDP_BUFFER
        );
        assert_eq!(udp_plan(0, 1, None, &defaults(true)).wanted, 62_500_000);
        assert_eq!(
            udp_plan(u64::MAX, 1, None, &defaults(true)).wanted,
            MAX_UDP_BUFFER
        );
        // -w wins; unprivileged, the request is made unforced (the kernel clamps it at rmem_max).
        let p = udp_plan(1_000_000_000, 1, Some(8 << 20), &defaults(false));
        assert_eq!(p.wanted, 8 << 20);
        assert_eq!(
            (p.recv.action, p.recv.cap_sysctl.as_str()),
            (
                BufferAction::Set {
                    request: 8 << 20,
                    force: false
                },
                "net.core.rmem_max"
            )
        );
    }

    /// A hostile peer's extremes (finding 9 of issue 11): the plan saturates instead of overflowing
    /// (a panic in debug builds before), and asks for no more than one TCP window.
    #[test]
    fn extreme_rtt_and_rate_saturate_instead_of_overflowing() {
        for (rtt, rate, streams) in [
            (u64::MAX, u64::MAX, 1),
            (u64::MAX, u64::MAX, u32::MAX),
            (u64::MAX, 1, 1),
            (1, u64::MAX, 1),
            (0, u64::MAX, 0),
        ] {
            for privileged in [false, true] {
                let p = plan(Nanos(rtt), rate, streams, None, &defaults(privileged));
                assert!(p.wanted <= MAX_TCP_WINDOW, "{p:?}");
                assert!(!p.notes.is_empty() || p.wanted < MAX_TCP_WINDOW, "{p:?}");
                let out = assess(&p, &p.recv, u64::MAX);
                assert!(!out.summary.is_empty());
            }
        }
    }

    #[test]
    fn root_on_a_120ms_path_requests_and_is_granted_two_bdp() {
        // The acceptance case: default sysctls, root, 120 ms, default 10 Gbit/s target, 1 stream.
        let p = plan(MS_120, 10_000_000_000, 1, None, &defaults(true));
        assert_eq!(p.bdp_per_stream, 150_000_000);
        assert_eq!(p.wanted, 300_000_000);
        assert_eq!(
            p.recv.action,
            BufferAction::Set {
                request: 300_000_000,
                force: true
            }
        );
        assert_eq!(
            p.send.action,
            BufferAction::Set {
                request: 300_000_000,
                force: true
            }
        );
        // Linux reports twice the request.
        let out = assess(&p, &p.recv, 600_000_000);
        assert!(out.window >= 2 * p.bdp_per_stream);
        assert!(!out.limited);
        assert!(out.summary.contains("2.0× BDP"), "{}", out.summary);
        assert!(out.summary.contains("SO_RCVBUFFORCE"), "{}", out.summary);
    }

    #[test]
    fn unprivileged_clamp_is_reported_with_the_exact_fix() {
        let p = plan(MS_120, 10_000_000_000, 1, None, &defaults(false));
        // Send side: autotuning stops at 4 MiB, so ask for the window; the kernel clamps at wmem_max
        // and doubles: 8 MiB granted, 4 MiB of window.
        assert_eq!(
            p.send.action,
            BufferAction::Set {
                request: 300_000_000,
                force: false
            }
        );
        let out = assess(&p, &p.send, 8 << 20);
        assert!(out.limited);
        assert_eq!(out.window, 4 << 20);
        // 4 MiB / 120 ms = 279.6 Mbit/s.
        assert_eq!(out.ceiling_bps, 279_620_266);
        assert_eq!(
            out.fix.as_deref(),
            Some("sysctl -w net.core.wmem_max=536870912 (or run as root to use SO_*BUFFORCE)")
        );
        assert!(out.summary.contains("LIMITS"));
        // Receive side: autotuning (32 MiB) reaches further than rmem_max (4 MiB), so it stays on.
        assert_eq!(p.recv.action, BufferAction::Autotune { max: 32 << 20 });
        let out = assess(&p, &p.recv, 32 << 20);
        assert!(out.limited);
        assert_eq!(
            out.fix.as_deref(),
            Some(
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 536870912\" (or run as root to use SO_*BUFFORCE)"
            )
        );
    }

    #[test]
    fn short_paths_keep_autotuning() {
        // Loopback: 50 µs × 10 Gbit/s = 62.5 kB; autotuning covers it.
        let p = plan(Nanos(50_000), 10_000_000_000, 1, None, &defaults(false));
        assert_eq!(p.recv.action, BufferAction::Autotune { max: 32 << 20 });
        assert_eq!(p.send.action, BufferAction::Autotune { max: 4 << 20 });
        let out = assess(&p, &p.recv, 32 << 20);
        assert!(!out.limited);
        assert!(out.summary.contains("autotuning"));
    }

    #[test]
    fn streams_share_the_target() {
        let p = plan(MS_120, 10_000_000_000, 4, None, &defaults(true));
        assert_eq!(p.bdp_per_stream, 37_500_000);
        assert_eq!(p.wanted, 75_000_000);
    }

    #[test]
    fn fixed_window_is_requested_as_given_and_never_an_error() {
        let p = plan(MS_120, 10_000_000_000, 1, Some(64 << 20), &defaults(false));
        assert!(p.fixed);
        assert_eq!(
            p.recv.action,
            BufferAction::Set {
                request: 64 << 20,
                force: false
            }
        );
        let out = assess(&p, &p.recv, 8 << 20);
        assert_eq!(out.requested, 64 << 20);
        assert_eq!(out.granted, 8 << 20);
        assert!(
            out.summary.contains("cap net.core.rmem_max"),
            "{}",
            out.summary
        );
    }

    #[test]
    fn window_beyond_rfc7323_limit_is_capped_with_a_note() {
        // 100 Gbit/s × 300 ms = 3.75 GB BDP: 7.5 GB wanted for one stream.
        let p = plan(
            Nanos(300_000_000),
            100_000_000_000,
            1,
            None,
            &defaults(true),
        );
        assert_eq!(p.wanted, MAX_TCP_WINDOW);
        assert!(p.notes[0].contains("-P 7"), "{:?}", p.notes);
    }

    #[test]
    fn notsent_lowat_is_a_few_ms_of_the_stream_share() {
        // 10 Gbit/s over one stream: 1.25 GB/s × 4 ms = 5 MB.
        assert_eq!(notsent_lowat(10_000_000_000, 1), 5_000_000);
        // Split over 8 streams: 625 kB each, raised to the 1 MiB floor.
        assert_eq!(notsent_lowat(10_000_000_000, 8), 1 << 20);
        // 100 Gbit/s on one stream: capped at 16 MiB.
        assert_eq!(notsent_lowat(100_000_000_000, 1), 16 << 20);
        // A slow stream: at most 100 ms of its data, at least 16 KiB.
        assert_eq!(notsent_lowat(2_000_000, 1), 25_000);
        assert_eq!(notsent_lowat(100_000_000, 1), 1 << 20);
        assert_eq!(notsent_lowat(0, 0), 16 << 10);
    }
}

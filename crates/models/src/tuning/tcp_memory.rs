//! The machine-wide TCP memory limit, `net.ipv4.tcp_mem` (pages: below the first value TCP is not
//! regulated, above the second it is under memory pressure — buffers stop growing, receive queues are
//! pruned — and above the third memory is refused and packets dropped).
//!
//! Rule (tcp(7); issue 22's measurement: a 10 Gbit/s × 323 ms stream whose two ends shared a
//! 1.46 GiB pressure threshold collapsed again and again, and held 9.9 Gbit/s once it was raised):
//! this host's end of the path holds up to 2 × BDP of buffers (what longhaul asks for; autotuning
//! grows to about the same), so the pressure threshold should be above that plus an eighth for the
//! rest of the host's sockets (Ok); under it the run may enter pressure (Warn); when even the hard
//! limit is below the buffers, the window cannot be held (Fail). The fix keeps `min`, sets the
//! pressure threshold to the need and the hard limit a third above it, as the kernel's own ratio is.

use longhaul_units::{fmt_size, fmt_size_si};

use super::{Finding, HostSnapshot, Status, Target};

/// The `tcp_mem` (pages of `page` bytes) that lets TCP hold `need` bytes of buffers without memory
/// pressure: the pressure value at the need plus an eighth, the hard limit a third above it, `min`
/// kept, nothing lowered; `None` when `tcp_mem` already does.
pub fn tcp_mem_for(tcp_mem: [u64; 3], page: u64, need: u64) -> Option<[u64; 3]> {
    let [min, pressure, max] = tcp_mem;
    let want = (need + need / 8).div_ceil(page.max(1));
    (pressure < want).then(|| [min, want, (want + want / 3).max(max)])
}

/// `sysctl -w net.ipv4.tcp_mem="MIN P M"`.
pub fn tcp_mem_fix(v: [u64; 3]) -> String {
    format!("sysctl -w net.ipv4.tcp_mem=\"{} {} {}\"", v[0], v[1], v[2])
}

/// The `tcp_mem` finding.
pub(crate) fn tcp_memory(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    const NAME: &str = "net.ipv4.tcp_mem";
    let need = t.wanted_window().saturating_mul(t.streams());
    let (Some([min, pressure, max]), Some(page)) = (snap.tcp_mem, snap.page_size) else {
        out.push(
            Finding::new(NAME, Status::Info)
                .observed("unknown (not readable here)")
                .wanted(format!("pressure above {}", fmt_size(need))),
        );
        return;
    };
    let want_pages = (need + need / 8).div_ceil(page.max(1));
    let fix = tcp_mem_for([min, pressure, max], page, need);
    let status = if fix.is_none() {
        Status::Ok
    } else if max.saturating_mul(page) >= need {
        Status::Warn
    } else {
        Status::Fail
    };
    let mut f = Finding::new(NAME, status)
        .observed(format!(
            "{min} {pressure} {max} pages: pressure above {}, refused above {}",
            fmt_size(pressure.saturating_mul(page)),
            fmt_size(max.saturating_mul(page))
        ))
        .wanted(format!(
            "pressure ≥ {want_pages} pages ({} of buffers + an eighth)",
            fmt_size_si(need)
        ))
        .why(
            "machine-wide memory for all TCP sockets; a stream whose buffers push TCP past the \
             pressure value stops growing its window and has its queues pruned, past the last it \
             loses packets: a long fat path collapses (every namespace on the host shares it, both \
             ends of an emulated path too)",
        );
    if let Some(v) = fix {
        f = f.fix(tcp_mem_fix(v));
    }
    out.push(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{find, target, vm_defaults};
    use longhaul_units::Nanos;

    #[test]
    fn a_record_path_at_10g_needs_more_than_a_small_hosts_tcp_mem() {
        // The VM's default (24 GiB of RAM) holds 10 Gbit/s × 120 ms: 300 MB of buffers.
        let f = evaluate(&vm_defaults(), &target());
        assert_eq!(find(&f, "net.ipv4.tcp_mem").status, Status::Ok);
        // A 4 GiB host: pressure 48 MiB, hard limit 72 MiB.
        let small = HostSnapshot {
            tcp_mem: Some([8_000, 12_288, 18_432]),
            ..vm_defaults()
        };
        let f = evaluate(&small, &target());
        let m = find(&f, "net.ipv4.tcp_mem");
        assert_eq!(m.status, Status::Fail);
        // 2 × 150 MB = 300 MB, + an eighth = 337.5 MB = 82,398 pages of 4 KiB.
        assert_eq!(
            m.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_mem=\"8000 82398 109864\"")
        );
        // Between pressure and the hard limit: a warning.
        let t = Target {
            rtt: Nanos::from_millis(25),
            ..target()
        };
        assert_eq!(
            find(&evaluate(&small, &t), "net.ipv4.tcp_mem").status,
            Status::Warn
        );
        // Not readable: said so.
        let unknown = HostSnapshot {
            tcp_mem: None,
            ..vm_defaults()
        };
        assert_eq!(
            find(&evaluate(&unknown, &target()), "net.ipv4.tcp_mem").status,
            Status::Info
        );
    }
}

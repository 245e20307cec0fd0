//! Precise timing for the emulator's release schedule: nanosecond
//! `CLOCK_MONOTONIC` readings, absolute-deadline sleeps, the thread's timer
//! slack and real-time scheduling.
//!
//! Every scheduling decision works in `CLOCK_MONOTONIC` nanoseconds
//! ([`monotonic_now_ns`]). Sleeping to an *absolute* deadline
//! ([`sleep_until_ns`], `clock_nanosleep(TIMER_ABSTIME)`) never drifts: an
//! interrupted or late sleep does not push later deadlines back. The kernel
//! may wake a sleeper up to the thread's *timer slack* late (50 µs by default
//! for normal threads); [`set_timer_slack_ns`]`(1)` removes that allowance.
//! Wake-ups are never early.

use std::io;
use std::mem::MaybeUninit;
#[cfg(test)]
use std::time::Instant;

use crate::error::{Result, SysError};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Unused `prctl` arguments, passed as full-width zeros (the call is variadic
/// and the kernel reads each argument as an `unsigned long`).
const UNUSED: libc::c_ulong = 0;

/// Sets the calling thread's timer slack to `ns` nanoseconds
/// (`prctl(PR_SET_TIMERSLACK, ns)`): how late the kernel may fire this
/// thread's timers so it can batch wake-ups. `1` asks for the most precise
/// wake-ups; `0` restores the thread's default (the value it inherited).
/// Threads the caller spawns later inherit the setting. Real-time
/// (`SCHED_FIFO`/`SCHED_RR`) threads have no slack regardless.
pub fn set_timer_slack_ns(ns: u64) -> Result<()> {
    let describe = || format!("prctl(PR_SET_TIMERSLACK={ns})");
    let arg = libc::c_ulong::try_from(ns)
        .map_err(|_| SysError::new(describe(), io::Error::from_raw_os_error(libc::EINVAL)))?;
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and touches no
    // memory of ours; the unused arguments are passed as zero.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, arg, UNUSED, UNUSED, UNUSED) };
    if rc != 0 {
        return Err(SysError::last_os_error(describe));
    }
    Ok(())
}

/// The calling thread's current timer slack in nanoseconds
/// (`prctl(PR_GET_TIMERSLACK)`). For the tests (that [`set_timer_slack_ns`] took effect).
#[cfg(test)]
pub(crate) fn timer_slack_ns() -> Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the value.
    let rc = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, UNUSED, UNUSED, UNUSED, UNUSED) };
    if rc < 0 {
        return Err(SysError::last_os_error(|| "prctl(PR_GET_TIMERSLACK)"));
    }
    // `prctl` returns an int, so slacks above i32::MAX come back truncated;
    // the settings this crate makes are far below that.
    Ok(u64::try_from(rc).unwrap_or(0))
}

/// Switches the calling thread to the real-time `SCHED_FIFO` policy at
/// priority `prio` (1 = lowest … 99 = highest) with
/// `sched_setscheduler(0, SCHED_FIFO, {prio})`; on Linux pid 0 means the
/// calling *thread*, so other threads keep their policy. Threads it spawns
/// afterwards inherit it.
///
/// Fails with `EPERM` without `CAP_SYS_NICE` (or a sufficient
/// `RLIMIT_RTPRIO`), and also as root when the cgroup grants no real-time
/// runtime; with `EINVAL` for a priority outside 1..=99. A `SCHED_FIFO`
/// thread that never sleeps can starve its CPU (the kernel's RT throttling
/// leaves other tasks 5 % by default).
pub fn set_realtime_priority(prio: i32) -> Result<()> {
    set_scheduler(libc::SCHED_FIFO, prio, "SCHED_FIFO")
}

/// Returns the calling thread to the normal time-sharing policy
/// (`sched_setscheduler(0, SCHED_OTHER, {0})`), undoing
/// [`set_realtime_priority`]. For the tests (a thread the emulator makes real-time keeps that
/// policy until it exits).
#[cfg(test)]
pub(crate) fn set_normal_priority() -> Result<()> {
    set_scheduler(libc::SCHED_OTHER, 0, "SCHED_OTHER")
}

fn set_scheduler(policy: libc::c_int, prio: i32, label: &str) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0
    // selects the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc != 0 {
        return Err(SysError::last_os_error(|| {
            format!("sched_setscheduler({label}, priority {prio}) on the calling thread")
        }));
    }
    Ok(())
}

/// `CLOCK_MONOTONIC` now, in nanoseconds since an unspecified start (boot,
/// on Linux; it does not advance while the machine is suspended).
pub fn monotonic_now_ns() -> u64 {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is writable memory for one timespec, which clock_gettime
    // fills on success.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, ts.as_mut_ptr()) };
    // CLOCK_MONOTONIC is always supported and the pointer is valid, so the
    // call cannot fail (std's Instant makes the same assumption).
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    // SAFETY: clock_gettime returned 0, so `ts` is initialised.
    let ts = unsafe { ts.assume_init() };
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs * NANOS_PER_SEC + nanos
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (as returned by
/// [`monotonic_now_ns`]) with `clock_nanosleep(CLOCK_MONOTONIC,
/// TIMER_ABSTIME)`, resuming after signals (`EINTR`). Returns at once if the
/// deadline has passed. Never returns early; how late depends on the timer
/// slack ([`set_timer_slack_ns`]) and the scheduler.
pub fn sleep_until_ns(deadline_ns: u64) {
    let secs = deadline_ns / NANOS_PER_SEC;
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX),
        // Below 10^9, so it fits every platform's c_long.
        tv_nsec: (deadline_ns % NANOS_PER_SEC) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid, normalised timespec; with TIMER_ABSTIME
        // the remainder pointer is unused and may be null.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // clock_nanosleep returns the error number instead of setting errno.
        match rc {
            0 => return,
            libc::EINTR => continue,
            // Only EINVAL/EFAULT remain, impossible for a valid timespec.
            other => panic!(
                "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, {deadline_ns} ns): {}",
                io::Error::from_raw_os_error(other)
            ),
        }
    }
}

/// Sleeps until `deadline` with an absolute `CLOCK_MONOTONIC` sleep
/// ([`sleep_until_ns`]). Returns at once if it has passed.
///
/// An [`Instant`] is opaque, so it is converted by reading both clocks:
/// `Instant::now()` first, then [`monotonic_now_ns`], and adding the
/// remaining duration to the second reading. Because the second reading is
/// taken later, the computed deadline can only be late (by the few tens of
/// nanoseconds between the readings), never early. This relies only on
/// `Instant` advancing at the rate of `CLOCK_MONOTONIC`, which holds on Linux,
/// where std implements `Instant` with `CLOCK_MONOTONIC` itself.
///
/// For the tests (the emulator's forwarders sleep with [`sleep_until_ns`]).
#[cfg(test)]
pub(crate) fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    let now_ns = monotonic_now_ns();
    let Some(remaining) = deadline.checked_duration_since(now) else {
        return;
    };
    let remaining_ns = u64::try_from(remaining.as_nanos()).unwrap_or(u64::MAX);
    sleep_until_ns(now_ns.saturating_add(remaining_ns));
}

/// Whether the kernel says the system clock is synchronised: `adjtimex` (read only, `modes = 0`)
/// neither returns `TIME_ERROR` nor has `STA_UNSYNC` set. An NTP or PTP daemon (chrony, ntpd,
/// systemd-timesyncd) clears `STA_UNSYNC` once it disciplines the clock; without one the kernel
/// leaves it set. One-way delays are believed only between two such clocks.
pub fn clock_synchronized() -> bool {
    // SAFETY: `timex` is plain old data, for which all zeros is a valid value (modes = 0: read).
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, exclusively borrowed `timex`; with modes 0 the call only writes it.
    let rc = unsafe { libc::adjtimex(&mut tx) };
    rc >= 0 && rc != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_now_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_now_ns();
        assert!(b >= a + 2_000_000, "{a} → {b}");
    }

    #[test]
    fn timer_slack_round_trips() {
        // Run on a fresh thread: the setting is per thread.
        std::thread::spawn(|| {
            let default = timer_slack_ns().unwrap();
            set_timer_slack_ns(1).unwrap();
            assert_eq!(timer_slack_ns().unwrap(), 1);
            set_timer_slack_ns(0).unwrap();
            assert_eq!(timer_slack_ns().unwrap(), default);
            println!("default timer slack {default} ns");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn sleep_until_ns_never_wakes_early() {
        std::thread::spawn(|| {
            for slack in [None, Some(1)] {
                if let Some(ns) = slack {
                    set_timer_slack_ns(ns).unwrap();
                }
                let mut late = Vec::new();
                for i in 0..40u64 {
                    let deadline = monotonic_now_ns() + 200_000 + i * 10_000;
                    sleep_until_ns(deadline);
                    let woke = monotonic_now_ns();
                    assert!(woke >= deadline, "woke {} ns early", deadline - woke);
                    late.push(woke - deadline);
                }
                late.sort_unstable();
                println!(
                    "timer slack {}: lateness over {} sleeps: min {} µs, median {} µs, max {} µs",
                    timer_slack_ns().unwrap(),
                    late.len(),
                    late[0] / 1000,
                    late[late.len() / 2] / 1000,
                    late[late.len() - 1] / 1000,
                );
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn past_deadline_returns_at_once() {
        let start = Instant::now();
        sleep_until_ns(0);
        sleep_until_ns(monotonic_now_ns() - 1);
        sleep_until(start);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn sleep_until_instant_never_wakes_early() {
        let mut worst = Duration::ZERO;
        for i in 0..20u32 {
            let deadline = Instant::now() + Duration::from_micros(300) * (i + 1);
            sleep_until(deadline);
            let now = Instant::now();
            assert!(now >= deadline, "woke {:?} early", deadline - now);
            worst = worst.max(now - deadline);
        }
        println!("sleep_until(Instant): worst lateness {worst:?} over 20 sleeps");
    }

    #[test]
    fn realtime_priority_needs_privilege_or_works() {
        std::thread::spawn(|| {
            let bad = set_realtime_priority(0).unwrap_err();
            assert_eq!(bad.raw_os_error(), Some(libc::EINVAL), "{bad}");
            match set_realtime_priority(10) {
                Ok(()) => {
                    set_normal_priority().unwrap();
                    println!("SCHED_FIFO 10 granted and reverted");
                }
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
                    assert!(
                        e.to_string().starts_with(
                            "sched_setscheduler(SCHED_FIFO, priority 10) on the calling thread: "
                        ),
                        "{e}"
                    );
                    println!("SCHED_FIFO refused: {e}");
                }
            }
        })
        .join()
        .unwrap();
    }
}

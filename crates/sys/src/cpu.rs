//! CPU accounting: user and system time of the calling thread or the whole
//! process (`getrusage(2)`), and the number of online CPUs.
//!
//! Take a [`CpuTime`] before and after a transfer and subtract them to learn
//! how much CPU it cost. Note that on loopback much of the receiver's network
//! processing runs in softirq context on the *sender's* thread and is charged
//! to it as system time.

use std::mem::{MaybeUninit, size_of};
use std::ops::{Add, Sub};
use std::time::Duration;

use crate::error::{Result, SysError};

/// CPU time consumed, split into user and system (kernel) time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuTime {
    /// Time spent executing in user mode.
    pub user: Duration,
    /// Time spent executing in the kernel on the caller's behalf.
    pub system: Duration,
}

impl CpuTime {
    /// User plus system time.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }
}

impl Sub for CpuTime {
    type Output = CpuTime;

    /// The time consumed between two samples (`later - earlier`); saturates at
    /// zero instead of panicking if the operands are swapped.
    fn sub(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

impl Add for CpuTime {
    type Output = CpuTime;

    /// Sums two measurements (for example of several threads).
    fn add(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user + other.user,
            system: self.system + other.system,
        }
    }
}

fn timeval_to_duration(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
}

fn getrusage(who: libc::c_int, label: &str) -> Result<libc::rusage> {
    let mut ru = MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `ru` points to writable memory large enough for a `rusage`,
    // which the kernel fills completely on success.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    if rc != 0 {
        return Err(SysError::last_os_error(|| format!("getrusage({label})")));
    }
    // SAFETY: getrusage returned 0, so it initialised the whole struct.
    Ok(unsafe { ru.assume_init() })
}

fn rusage(who: libc::c_int, label: &str) -> Result<CpuTime> {
    let ru = getrusage(who, label)?;
    Ok(CpuTime {
        user: timeval_to_duration(ru.ru_utime),
        system: timeval_to_duration(ru.ru_stime),
    })
}

/// CPU time used so far by the calling thread (`RUSAGE_THREAD`).
pub fn thread_cpu_time() -> Result<CpuTime> {
    rusage(libc::RUSAGE_THREAD, "RUSAGE_THREAD")
}

/// CPU time used so far by all threads of the process, including those that
/// have exited (`RUSAGE_SELF`); excludes child processes.
pub fn process_cpu_time() -> Result<CpuTime> {
    rusage(libc::RUSAGE_SELF, "RUSAGE_SELF")
}

/// The calling thread's kernel thread id (`gettid`), to read its CPU time from another thread
/// with [`task_cpu_time`].
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// CPU time used so far by thread `tid` of this process, from `/proc/self/task/TID/stat` (in
/// clock ticks: 10 ms on most kernels).
pub fn task_cpu_time(tid: i32) -> Result<CpuTime> {
    let path = format!("/proc/self/task/{tid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| SysError::new(path.clone(), e))?;
    parse_task_stat(&stat).ok_or_else(|| {
        SysError::new(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "no utime and stime in it"),
        )
    })
}

/// utime and stime (fields 14 and 15) of a `stat` line; the name (field 2) may hold spaces and
/// parentheses, so fields are counted from its last `)`.
fn parse_task_stat(stat: &str) -> Option<CpuTime> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    let hz = clock_ticks_per_second();
    let ticks = |t: u64| Duration::from_nanos(t.saturating_mul(1_000_000_000 / hz));
    Some(CpuTime {
        user: ticks(user),
        system: ticks(system),
    })
}

/// The unit of `/proc`'s CPU times (`sysconf(_SC_CLK_TCK)`, 100 on most kernels).
fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)
        .unwrap_or(100)
}

/// What the scheduler did with the calling thread so far, to learn after a stall whether the
/// thread ran, waited for a CPU, faulted or was not scheduled at all: subtract two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedSample {
    /// Time on a CPU (`/proc/thread-self/schedstat`, field 1).
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU (field 2).
    pub runqueue_ns: u64,
    /// Page faults served without I/O (`getrusage(RUSAGE_THREAD)`).
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// Times the thread was switched out while it could still run.
    pub involuntary_switches: u64,
    /// Time the hypervisor ran something else on this machine's CPUs, all CPUs together
    /// (`/proc/stat`'s `steal`, in nanoseconds); a guest's own counters count it as run time.
    pub steal_ns: u64,
}

impl Sub for SchedSample {
    type Output = SchedSample;

    /// What happened between two samples (`later - earlier`), saturating at zero.
    fn sub(self, e: SchedSample) -> SchedSample {
        SchedSample {
            run_ns: self.run_ns.saturating_sub(e.run_ns),
            runqueue_ns: self.runqueue_ns.saturating_sub(e.runqueue_ns),
            minor_faults: self.minor_faults.saturating_sub(e.minor_faults),
            major_faults: self.major_faults.saturating_sub(e.major_faults),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(e.involuntary_switches),
            steal_ns: self.steal_ns.saturating_sub(e.steal_ns),
        }
    }
}

/// The calling thread's [`SchedSample`] now: one `getrusage` and two small `/proc` reads (about
/// 20 µs here).
pub fn sched_sample() -> Result<SchedSample> {
    const SCHEDSTAT: &str = "/proc/thread-self/schedstat";
    let text =
        std::fs::read_to_string(SCHEDSTAT).map_err(|e| SysError::new(SCHEDSTAT.to_string(), e))?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (Some(Some(run_ns)), Some(Some(runqueue_ns))) = (fields.next(), fields.next()) else {
        return Err(SysError::new(
            SCHEDSTAT.to_string(),
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not two numbers"),
        ));
    };
    let ru = getrusage(libc::RUSAGE_THREAD, "RUSAGE_THREAD")?;
    let count = |n: libc::c_long| u64::try_from(n).unwrap_or(0);
    let steal_ns = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| parse_steal_ticks(&s))
        .map_or(0, |t| {
            t.saturating_mul(1_000_000_000 / clock_ticks_per_second())
        });
    Ok(SchedSample {
        run_ns,
        runqueue_ns,
        minor_faults: count(ru.ru_minflt),
        major_faults: count(ru.ru_majflt),
        involuntary_switches: count(ru.ru_nivcsw),
        steal_ns,
    })
}

/// The `steal` ticks (the 8th number) of `/proc/stat`'s first line, `cpu  user nice system idle
/// iowait irq softirq steal ...`.
fn parse_steal_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    fields.nth(7)?.parse().ok()
}

/// Number of CPUs currently online (`sysconf(_SC_NPROCESSORS_ONLN)`), at
/// least 1.
///
/// This counts the machine's CPUs, not the ones this process may run on; for
/// sizing thread pools prefer [`std::thread::available_parallelism`], which
/// honours affinity masks and cgroup quotas.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf only reads system configuration and has no memory-safety
    // preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Restricts the calling thread to CPU number `cpu`
/// (`sched_setaffinity(0, {cpu})`), e.g. to keep a benchmark's sender and
/// receiver on separate cores. Fails with `EINVAL` for CPUs that are offline
/// or outside the process's cpuset.
pub fn pin_thread_to_cpu(cpu: usize) -> Result<()> {
    let describe = || format!("sched_setaffinity(cpu {cpu})");
    // SAFETY: an all-zero cpu_set_t is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { MaybeUninit::zeroed().assume_init() };
    if cpu >= 8 * size_of::<libc::cpu_set_t>() {
        return Err(SysError::new(
            describe(),
            std::io::Error::from_raw_os_error(libc::EINVAL),
        ));
    }
    // SAFETY: `cpu` was checked to be within the set's capacity above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 means the
    // calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(SysError::last_os_error(describe));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_task_stat_line_gives_its_times_even_with_a_name_of_spaces_and_parentheses() {
        let line = "4242 (lh quic (2)) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 3 0 100";
        let t = parse_task_stat(line).unwrap();
        let hz = clock_ticks_per_second();
        assert_eq!(t.user, Duration::from_nanos(250 * (1_000_000_000 / hz)));
        assert_eq!(t.system, Duration::from_nanos(75 * (1_000_000_000 / hz)));
        assert_eq!(parse_task_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_task_stat("no parenthesis"), None);
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  1623 0 1230 27357 349 0 20 10 0 0\ncpu0 800 0 600 13000 100 0 10 5 0 0\n";
        assert_eq!(parse_steal_ticks(stat), Some(10));
        assert_eq!(parse_steal_ticks("cpu  1 2 3"), None);
        assert_eq!(parse_steal_ticks("intr 1 2 3 4 5 6 7 8 9"), None);
    }

    #[test]
    fn a_sched_sample_counts_the_threads_own_run_time_and_faults() {
        let before = sched_sample().unwrap();
        spin_cpu(Duration::from_millis(100));
        // Fresh pages: each first touch is a minor fault.
        let mut pages = vec![0u8; 64 << 20];
        for i in (0..pages.len()).step_by(4096) {
            pages[i] = 1;
        }
        std::hint::black_box(&pages);
        let d = sched_sample().unwrap() - before;
        assert!(d.run_ns >= 90_000_000, "{d:?}");
        assert!(d.minor_faults >= 1_000, "{d:?}");
        assert_eq!(d.major_faults, 0, "{d:?}");
    }

    #[test]
    fn another_threads_cpu_time_is_read_from_proc() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let spun = spin_cpu(Duration::from_millis(200));
            tx.send((thread_id(), spun)).unwrap();
            // Alive (its task entry readable) until the reading is taken.
            let _ = done_rx.recv();
        });
        let (tid, spun) = rx.recv().unwrap();
        let read = task_cpu_time(tid).unwrap();
        done_tx.send(()).unwrap();
        worker.join().unwrap();
        // Ticks of 10 ms against getrusage's microseconds.
        let slack = Duration::from_millis(30);
        assert!(read.total() + slack >= spun.total(), "{read:?} {spun:?}");
        assert!(
            read.total() <= spun.total() + slack + Duration::from_millis(50),
            "{read:?} {spun:?}"
        );
        let me = task_cpu_time(thread_id()).unwrap();
        assert!(me.total() <= thread_cpu_time().unwrap().total() + Duration::from_millis(20));
    }

    /// Burns CPU on this thread until its own CPU clock has advanced by `want` (not wall time, so a
    /// loaded machine only makes it slower, never wrong); panics if that takes over 60 s of wall time.
    fn spin_cpu(want: Duration) -> CpuTime {
        let start = thread_cpu_time().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut x = 0u64;
        loop {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            let used = thread_cpu_time().unwrap() - start;
            if used.total() >= want {
                return used;
            }
            assert!(
                Instant::now() < deadline,
                "thread CPU clock stuck at {used:?}"
            );
        }
    }

    #[test]
    fn thread_time_grows_with_work() {
        let used = spin_cpu(Duration::from_millis(30));
        assert!(used.total() >= Duration::from_millis(30), "{used:?}");
        assert!(used.total() < Duration::from_secs(5), "{used:?}");
    }

    #[test]
    fn process_time_covers_other_threads() {
        let before = process_cpu_time().unwrap();
        let worker = std::thread::spawn(|| spin_cpu(Duration::from_millis(30)))
            .join()
            .unwrap();
        let used = process_cpu_time().unwrap() - before;
        assert!(worker.total() >= Duration::from_millis(30), "{worker:?}");
        assert!(used.total() >= worker.total(), "{used:?} < {worker:?}");
    }

    #[test]
    fn arithmetic() {
        let a = CpuTime {
            user: Duration::from_millis(5),
            system: Duration::from_millis(3),
        };
        let b = CpuTime {
            user: Duration::from_millis(2),
            system: Duration::from_millis(1),
        };
        assert_eq!((a - b).total(), Duration::from_millis(5));
        assert_eq!(b - a, CpuTime::default());
        assert_eq!((a + b).user, Duration::from_millis(7));
    }

    #[test]
    fn pinning() {
        std::thread::spawn(|| {
            pin_thread_to_cpu(0).unwrap();
            assert_eq!(std::thread::available_parallelism().unwrap().get(), 1);
            let e = pin_thread_to_cpu(100_000).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpus_online() {
        let n = online_cpus();
        assert!(n >= 1);
        // The CPUs this process may use are a subset of the online ones.
        assert!(n >= std::thread::available_parallelism().unwrap().get());
    }
}

//! When each scheduled test of each pair runs.
//!
//! Time is cut into **windows** of each test's period, aligned to the Unix epoch (a 4 h test has
//! windows 00:00–04:00, 04:00–08:00, … UTC), so a monitor that restarts finds the same windows. In
//! each window a pair's test runs once, planned at a random point within the test's `slip` after
//! the window begins (the point is derived from the seed, the test, the pair and the window, so a
//! restarted monitor plans the same instant). Throughput tests are **exclusive**: a host runs at most
//! one at a time, as sender or receiver; a test whose hosts are busy waits, and among waiting tests
//! the one planned earliest goes first, so none starves. A run that ends (however it ends) frees its
//! hosts and plans the pair's next window; windows missed while the monitor was down or behind are
//! skipped, not made up. Traceroutes are planned the same way but never wait for a host. A latency
//! stream is planned as one probe session per window, each starting as its window begins (no slip)
//! and lasting until the window ends, so the stream runs continuously and each period's figures are
//! one run, archived and resumed like any other.
//!
//! The caller passes the time (ns since the Unix epoch) and a seed; nothing here reads a clock.

use crate::mesh::Mesh;

/// One run of a test on a pair, handed out by [`Scheduler::due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Run {
    /// The test (index into the mesh's tests).
    pub test: usize,
    /// The sending host.
    pub from: usize,
    /// The receiving host.
    pub to: usize,
    /// The start of the window this run belongs to, ns since the epoch.
    pub window: u64,
    /// When it was planned to start.
    pub planned: u64,
    /// Whether it holds both hosts while it runs.
    pub exclusive: bool,
}

#[derive(Debug, Clone)]
struct Task {
    test: usize,
    from: usize,
    to: usize,
    every: u64,
    slip: u64,
    exclusive: bool,
    /// The window of the next run.
    window: u64,
    /// When that run is planned.
    planned: u64,
    running: bool,
}

/// The schedule of a mesh's tests.
#[derive(Debug, Clone)]
pub struct Scheduler {
    tasks: Vec<Task>,
    /// Hosts running an exclusive test.
    busy: Vec<bool>,
    /// Hosts that may be running an exclusive test a stopped monitor started, until this instant.
    held_until: Vec<u64>,
    seed: u64,
}

/// SplitMix64's output function: a well-mixed 64-bit value from any input.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Scheduler {
    /// The schedule of `mesh` at `now`: every pair of every test, each first in the window that
    /// contains `now`.
    pub fn new(mesh: &Mesh, now: u64, seed: u64) -> Self {
        let mut tasks = Vec::new();
        for (i, t) in mesh.tests.iter().enumerate() {
            for &(from, to) in &t.pairs {
                tasks.push(Task {
                    test: i,
                    from,
                    to,
                    every: t.every.0.max(1),
                    slip: t.slip.0,
                    exclusive: t.kind.exclusive(),
                    window: 0,
                    planned: 0,
                    running: false,
                });
            }
        }
        let mut s = Self {
            tasks,
            busy: vec![false; mesh.hosts.len()],
            held_until: vec![0; mesh.hosts.len()],
            seed,
        };
        for k in 0..s.tasks.len() {
            let w = now - now % s.tasks[k].every;
            s.plan(k, w, now);
        }
        s
    }

    /// Plans task `k` in window `w`, or in the window that contains `now` if `w` is already over.
    fn plan(&mut self, k: usize, w: u64, now: u64) {
        let seed = self.seed;
        let t = &mut self.tasks[k];
        let w = if w.saturating_add(t.every) <= now {
            now - now % t.every
        } else {
            w
        };
        let offset = if t.slip == 0 {
            0
        } else {
            mix(seed ^ mix(t.test as u64) ^ mix((t.from as u64) << 32 | t.to as u64) ^ w) % t.slip
        };
        t.window = w;
        t.planned = w + offset;
    }

    /// The archive says the run of `test` from `from` to `to` in the window starting at `window`
    /// took place (before a restart): the pair's next run is in a later window.
    pub fn ran(&mut self, test: usize, from: usize, to: usize, window: u64, now: u64) {
        if let Some(k) = self
            .tasks
            .iter()
            .position(|t| t.test == test && t.from == from && t.to == to)
            && self.tasks[k].window <= window
        {
            let next = window.saturating_add(self.tasks[k].every);
            self.plan(k, next, now);
        }
    }

    /// `host` may still be running an exclusive test until `until` (a monitor was stopped while
    /// the test ran; the archive said so): no exclusive run starts on it before then.
    pub fn hold(&mut self, host: usize, until: u64) {
        if let Some(h) = self.held_until.get_mut(host) {
            *h = (*h).max(until);
        }
    }

    /// The runs to start at `now`: those planned at or before it whose hosts are free (an exclusive
    /// run's hosts are then busy until [`Scheduler::finish`]), the earliest planned first.
    pub fn due(&mut self, now: u64) -> Vec<Run> {
        let mut ready: Vec<usize> = (0..self.tasks.len())
            .filter(|&k| !self.tasks[k].running && self.tasks[k].planned <= now)
            .collect();
        ready.sort_by_key(|&k| (self.tasks[k].planned, k));
        let mut out = Vec::new();
        for k in ready {
            let t = &self.tasks[k];
            if t.exclusive {
                if self.busy[t.from]
                    || self.busy[t.to]
                    || self.held_until[t.from] > now
                    || self.held_until[t.to] > now
                {
                    continue;
                }
                self.busy[t.from] = true;
                self.busy[t.to] = true;
            }
            let t = &mut self.tasks[k];
            t.running = true;
            out.push(Run {
                test: t.test,
                from: t.from,
                to: t.to,
                window: t.window,
                planned: t.planned,
                exclusive: t.exclusive,
            });
        }
        out
    }

    /// `run` ended at `now`, however it ended: its hosts are free, and its pair's next run is
    /// planned in the following window (or the current one, if windows were missed).
    pub fn finish(&mut self, run: &Run, now: u64) {
        let Some(k) = self
            .tasks
            .iter()
            .position(|t| t.running && t.test == run.test && t.from == run.from && t.to == run.to)
        else {
            return;
        };
        if run.exclusive {
            self.busy[run.from] = false;
            self.busy[run.to] = false;
        }
        self.tasks[k].running = false;
        let next = self.tasks[k].window.saturating_add(self.tasks[k].every);
        self.plan(k, next, now);
    }

    /// The earliest instant a run not yet handed out may start: its planned start, or the end of
    /// a hold on its hosts (the caller also wakes when a run ends, which may free a waiting one).
    pub fn next_planned(&self) -> Option<u64> {
        self.tasks
            .iter()
            .filter(|t| !t.running)
            .map(|t| {
                if t.exclusive {
                    t.planned
                        .max(self.held_until[t.from])
                        .max(self.held_until[t.to])
                } else {
                    t.planned
                }
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use super::*;
    use crate::mesh::Mesh;

    const MIN: u64 = 60_000_000_000;
    const HOUR: u64 = 60 * MIN;
    /// 2026-11-27 00:00 UTC.
    const T0: u64 = 1_795_737_600 * 1_000_000_000;

    /// A mesh of `hosts` hosts, all-to-all throughput every hour (slip 15 min) and traceroutes every
    /// 10 min.
    fn mesh(hosts: usize, every: &str, slip: &str) -> Mesh {
        let mut text = String::new();
        for i in 0..hosts {
            text += &format!(
                "[[host]]\nname = \"h{i}\"\naddress = \"10.0.0.{i}\"\ngroups = [\"all\"]\n"
            );
        }
        text += &format!(
            "[[test]]\nname = \"bw\"\nkind = \"throughput\"\nfrom = [\"all\"]\nevery = \"{every}\"\nslip = \"{slip}\"\n"
        );
        text += "[[test]]\nname = \"trace\"\nkind = \"traceroute\"\nfrom = [\"all\"]\nevery = \"10min\"\n";
        Mesh::from_toml(&text, "m.toml").unwrap()
    }

    /// Runs the schedule for `hours` of virtual time in 1 s steps; each throughput run takes
    /// `dur`, a traceroute 5 s. Returns every run with its end.
    fn simulate(s: &mut Scheduler, from: u64, hours: u64, dur: u64) -> Vec<(Run, u64, u64)> {
        let mut running: Vec<(Run, u64, u64)> = Vec::new();
        let mut done = Vec::new();
        let mut now = from;
        while now < from + hours * HOUR {
            running.retain(|&(r, start, end)| {
                if end <= now {
                    s.finish(&r, now);
                    done.push((r, start, end));
                    false
                } else {
                    true
                }
            });
            for r in s.due(now) {
                let d = if r.exclusive { dur } else { 5_000_000_000 };
                running.push((r, now, now + d));
            }
            now += 1_000_000_000;
        }
        done
    }

    #[test]
    fn exclusive_tests_never_overlap_on_a_host_and_every_pair_runs_once_per_window() {
        let m = mesh(4, "1h", "15min");
        let mut s = Scheduler::new(&m, T0, 42);
        // 12 ordered pairs × 6 min, at most 2 at once on 4 hosts: 36 min of each hour.
        let done = simulate(&mut s, T0, 48, 6 * MIN);
        let bw: Vec<_> = done.iter().filter(|(r, ..)| r.exclusive).collect();
        for (i, (a, sa, ea)) in bw.iter().enumerate() {
            for (b, sb, eb) in &bw[i + 1..] {
                let share = [a.from, a.to].iter().any(|h| [b.from, b.to].contains(h));
                assert!(
                    !(share && sa < eb && sb < ea),
                    "{a:?} and {b:?} overlap on a host"
                );
            }
        }
        let mut per: BTreeMap<(usize, usize, u64), usize> = BTreeMap::new();
        for (r, start, _) in &bw {
            assert!(
                *start >= r.window && *start < r.window + HOUR,
                "{r:?} ran at {start}"
            );
            *per.entry((r.from, r.to, r.window)).or_default() += 1;
        }
        // Every pair in every complete window (the last one may be cut by the end of the run).
        for w in 0..47 {
            for a in 0..4 {
                for b in (0..4).filter(|&b| b != a) {
                    assert_eq!(
                        per.get(&(a, b, T0 + w * HOUR)),
                        Some(&1),
                        "{a}->{b} window {w}"
                    );
                }
            }
        }
        // Traceroutes do not wait for busy hosts: one per pair per 10 min window.
        let traces = done.iter().filter(|(r, ..)| !r.exclusive).count();
        assert!(traces >= 12 * 6 * 47, "{traces}");
    }

    #[test]
    fn runs_start_within_their_slip_when_hosts_are_free_and_the_plan_is_repeatable() {
        let m = mesh(2, "1h", "20min");
        let mut a = Scheduler::new(&m, T0, 7);
        let mut b = Scheduler::new(&m, T0, 7);
        let done = simulate(&mut a, T0, 24, MIN);
        let again = simulate(&mut b, T0, 24, MIN);
        assert_eq!(done, again, "the same seed plans the same starts");
        let starts: HashSet<u64> = done
            .iter()
            .filter(|(r, ..)| r.exclusive)
            .map(|(r, start, _)| {
                // Two pairs (h0->h1, h1->h0) share both hosts: the second may wait for the first.
                assert!(
                    *start >= r.planned && *start <= r.planned + 2 * MIN,
                    "{r:?} at {start}"
                );
                assert!(
                    r.planned >= r.window && r.planned < r.window + 20 * MIN,
                    "{r:?}"
                );
                (r.planned - r.window) / MIN
            })
            .collect();
        assert!(
            starts.len() > 10,
            "planned offsets spread over the slip: {starts:?}"
        );
        let other = simulate(&mut Scheduler::new(&m, T0, 8), T0, 24, MIN);
        assert_ne!(done, other, "another seed plans other starts");
    }

    #[test]
    fn when_tests_outgrow_the_hours_none_starves_and_windows_are_skipped_not_made_up() {
        // 6 hosts all-to-all: 30 pairs of 10 min, at most 3 at once: 100 min of tests per hour.
        let m = mesh(6, "1h", "10min");
        let mut s = Scheduler::new(&m, T0, 1);
        let done = simulate(&mut s, T0, 24, 10 * MIN);
        let mut count: BTreeMap<(usize, usize), Vec<(u64, u64)>> = BTreeMap::new();
        for (r, start, _) in done.iter().filter(|(r, ..)| r.exclusive) {
            assert!(*start >= r.window, "{r:?} started before its window");
            count
                .entry((r.from, r.to))
                .or_default()
                .push((*start, r.window));
        }
        assert_eq!(count.len(), 30, "every pair ran");
        for (pair, runs) in &count {
            // Capacity is 18 runs an hour for 30 pairs: each pair every ~1.7 h, never much longer.
            assert!(
                runs.len() >= 10,
                "{pair:?} ran {} times in 24 h",
                runs.len()
            );
            for w in runs.windows(2) {
                let gap = w[1].0 - w[0].0;
                assert!(gap <= 4 * HOUR, "{pair:?} waited {} min", gap / MIN);
                // Never twice for one window; a late run's pair goes on with the window after it,
                // or with the current one if that is already over.
                assert!(w[1].1 > w[0].1, "{pair:?}: {runs:?}");
            }
        }
    }

    #[test]
    fn a_restarted_schedule_skips_the_windows_that_already_ran() {
        let m = mesh(3, "1h", "30min");
        let mut first = Scheduler::new(&m, T0, 3);
        // Killed at 10:40: the archive holds every run that ended.
        let done = simulate(&mut first, T0, 10, 6 * MIN);
        let restart = T0 + 10 * HOUR + 40 * MIN;
        let mut last: BTreeMap<(usize, usize, usize), u64> = BTreeMap::new();
        for (r, ..) in &done {
            let e = last.entry((r.test, r.from, r.to)).or_default();
            *e = (*e).max(r.window);
        }
        let mut second = Scheduler::new(&m, restart, 3);
        for (&(test, from, to), &window) in &last {
            second.ran(test, from, to, window, restart);
        }
        let after = simulate(&mut second, restart, 3, 6 * MIN);
        let before: HashSet<(usize, usize, usize, u64)> = done
            .iter()
            .map(|(r, ..)| (r.test, r.from, r.to, r.window))
            .collect();
        for (r, start, _) in &after {
            assert!(
                !before.contains(&(r.test, r.from, r.to, r.window)),
                "{r:?} ran again after the restart"
            );
            assert!(*start >= restart);
        }
        // The 10:00 window: pairs that had not run by 10:40 still run in it, once.
        let ten = T0 + 10 * HOUR;
        for a in 0..3 {
            for b in (0..3).filter(|&b| b != a) {
                let n = done
                    .iter()
                    .chain(&after)
                    .filter(|(r, ..)| r.exclusive && r.from == a && r.to == b && r.window == ten);
                assert_eq!(n.count(), 1, "{a}->{b} in the 10:00 window");
            }
        }
    }

    #[test]
    fn a_host_held_by_a_run_a_stopped_monitor_left_takes_no_exclusive_run_until_the_hold_ends() {
        let m = mesh(3, "1h", "0s");
        let mut s = Scheduler::new(&m, T0, 1);
        // A test h0 -> h1 may run until T0 + 30 s (the monitor was killed during it).
        s.hold(0, T0 + 30_000_000_000);
        s.hold(1, T0 + 30_000_000_000);
        let first = s.due(T0);
        assert!(
            first
                .iter()
                .filter(|r| r.exclusive)
                .all(|r| ![r.from, r.to].contains(&0) && ![r.from, r.to].contains(&1)),
            "{first:?}"
        );
        assert!(s.next_planned() <= Some(T0 + 30_000_000_000));
        for r in &first {
            s.finish(r, T0 + 1);
        }
        let later = s.due(T0 + 30_000_000_000);
        assert!(
            later
                .iter()
                .any(|r| r.exclusive && [r.from, r.to].contains(&0))
        );
    }
}

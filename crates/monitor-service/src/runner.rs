//! The monitor's loop: ask the schedule what is due, mark it in flight, run it on a thread of its
//! own ([`Plan::execute`]), archive its outcome in one transaction, and only then tell the schedule
//! it ended. A monitor killed at any point has archived every outcome it reported, and on restart
//! reads back the windows that ran (not run again) and the runs it was killed during (their hosts
//! kept free of throughput tests until those must have ended).
//!
//! Every archived outcome is also published on a broadcast channel ([`Runner::subscribe`]) for
//! whoever shows it live (the command's output, the dashboard).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use longhaul_engine::job::unix_ns;
use longhaul_monitor::{AlertEvent, Alerts, Mesh, Outcome, Scheduler, TestKind};
use tokio::sync::{broadcast, mpsc};
use tracing::{info, warn};

use crate::alerting;
use crate::archive::{Archive, ArchiveError, NewEvent, PathChange};
use crate::execute::Plan;

/// How the loop runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The schedule's seed (the start of each run within its slip).
    pub seed: u64,
    /// Keep results this long (`None`: for ever); older ones are pruned hourly.
    pub retention: Option<Duration>,
    /// On shutdown, how long to wait for running runs to end and be archived.
    pub drain: Duration,
}

/// One archived outcome, as published.
#[derive(Debug, Clone)]
pub struct Record {
    /// The outcome.
    pub outcome: Outcome,
    /// The path change it revealed, if any.
    pub change: Option<PathChange>,
    /// The alerts it fired or cleared.
    pub alerts: Vec<AlertEvent>,
}

impl Record {
    /// The record as JSON: the archive's result row (`GET /api/v1/results`) with the path change
    /// and the alerts it brought. What `monitor run --json` prints and the dashboard receives live.
    pub fn to_json(&self, mesh: &Mesh) -> serde_json::Value {
        let o = &self.outcome;
        let m = &o.measures;
        let path = |p: &[longhaul_monitor::Hop]| crate::archive::path_text(p);
        serde_json::json!({
            "test": mesh.tests[o.run.test].name,
            "kind": mesh.tests[o.run.test].kind.as_str(),
            "src": mesh.hosts[o.run.from].name,
            "dst": mesh.hosts[o.run.to].name,
            "window_ns": o.run.window,
            "started_ns": o.started_ns,
            "ended_ns": o.ended_ns,
            "status": o.status.as_str(),
            "down_host": o.down_host.map(|h| mesh.hosts[h].name.clone()),
            "error": o.error,
            "bits_per_second": m.bits_per_second,
            "retransmits": m.retransmits,
            "rtt_ns": m.rtt_ns,
            "loss": m.loss,
            "jitter_ns": m.jitter_ns,
            "path": m.path.as_deref().map(path),
            "path_change": self.change.as_ref().map(|c| serde_json::json!({
                "before": path(&c.before),
                "after": path(&c.after),
            })),
            "alerts": self.alerts.iter().map(|e| crate::alerting::json(mesh, e))
                .collect::<Vec<_>>(),
        })
    }
}

/// The monitor's loop over one mesh.
pub struct Runner {
    plan: Arc<Plan>,
    archive: Archive,
    settings: Settings,
    published: broadcast::Sender<Record>,
    firing: Firing,
}

/// The alerts firing now, as the JSON the API serves.
pub type Firing = Arc<std::sync::Mutex<Vec<serde_json::Value>>>;

/// Longest sleep between looks at the schedule.
const TICK: Duration = Duration::from_secs(1);
/// How often old results are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

fn now_ns() -> u64 {
    unix_ns(SystemTime::now())
}

impl Runner {
    /// A loop for `plan`, archiving into `archive`.
    pub fn new(plan: Plan, archive: Archive, settings: Settings) -> Self {
        let (published, _) = broadcast::channel(4096);
        Self {
            plan: Arc::new(plan),
            archive,
            settings,
            published,
            firing: Firing::default(),
        }
    }

    /// The alerts firing now (kept up to date while the loop runs).
    pub fn firing(&self) -> Firing {
        Arc::clone(&self.firing)
    }

    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.plan.mesh
    }

    /// Every outcome archived from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Record> {
        self.published.subscribe()
    }

    /// Runs the schedule until `shutdown` completes; then waits up to [`Settings::drain`] for the
    /// runs under way and archives them (those still running stay marked in flight).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ArchiveError> {
        let mesh = &self.plan.mesh;
        let start = now_ns();
        let mut sched = Scheduler::new(mesh, start, self.settings.seed);
        let last = self.archive.last_windows(mesh).await?;
        for &(test, from, to, window) in &last {
            sched.ran(test, from, to, window, start);
        }
        for f in self.archive.take_in_flight(mesh).await? {
            let test = mesh.tests.iter().find(|t| t.name == f.test);
            let host = |name: &str| mesh.hosts.iter().position(|h| h.name == name);
            if test.is_some_and(|t| t.kind == TestKind::Throughput)
                && f.until_ns > start
                && let (Some(a), Some(b)) = (host(&f.src), host(&f.dst))
            {
                info!(
                    test = %f.test, from = %f.src, to = %f.dst,
                    "a throughput run was under way when the monitor stopped: its hosts run no \
                     other until it must have ended"
                );
                sched.hold(a, f.until_ns);
                sched.hold(b, f.until_ns);
            }
        }
        let mut alerts = Alerts::new(mesh.alerts.clone());
        alerting::replay(&mut alerts, mesh, &self.archive, start).await?;
        *self.firing.lock().expect("firing lock") = alerting::firing(mesh, &alerts);
        info!(
            mesh = %mesh.name,
            archive = self.archive.kind(),
            resumed_pairs = last.len(),
            alerts_firing = alerts.firing().len(),
            "monitor running"
        );
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut running = 0usize;
        let mut next_prune = tokio::time::Instant::now();
        tokio::pin!(shutdown);
        loop {
            let now = now_ns();
            for run in sched.due(now) {
                // Only an exclusive run's hosts are held after a restart: only it is marked.
                if run.exclusive {
                    let until = now + self.plan.longest(&run).as_nanos() as u64;
                    self.archive.begin(mesh, &run, now, until).await?;
                }
                let plan = Arc::clone(&self.plan);
                let tx = done_tx.clone();
                running += 1;
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(plan.execute(run));
                });
            }
            if let Some(keep) = self.settings.retention
                && tokio::time::Instant::now() >= next_prune
            {
                next_prune = tokio::time::Instant::now() + PRUNE_EVERY;
                let cut = now.saturating_sub(keep.as_nanos() as u64);
                let n = self.archive.prune(&mesh.name, cut).await?;
                if n > 0 {
                    info!(rows = n, "pruned results older than the retention");
                }
            }
            let wake = sched
                .next_planned()
                .map_or(TICK, |t| Duration::from_nanos(t.saturating_sub(now_ns())))
                .min(TICK);
            tokio::select! {
                Some((outcome, detail)) = done_rx.recv() => {
                    running -= 1;
                    self.archived(&mut sched, &mut alerts, outcome, &detail).await?;
                }
                () = tokio::time::sleep(wake) => {}
                () = &mut shutdown => break,
            }
        }
        // Draining: no new runs; archive what ends in time.
        if running > 0 {
            info!(running, "stopping: waiting for the runs under way");
        }
        let drain_end = tokio::time::Instant::now() + self.settings.drain;
        while running > 0 {
            tokio::select! {
                Some((outcome, detail)) = done_rx.recv() => {
                    running -= 1;
                    self.archived(&mut sched, &mut alerts, outcome, &detail).await?;
                }
                () = tokio::time::sleep_until(drain_end) => {
                    warn!(running, "stopped with runs under way: they stay marked in flight and \
                                    their windows run again after a restart");
                    break;
                }
            }
        }
        self.archive.close().await;
        Ok(())
    }

    async fn archived(
        &self,
        sched: &mut Scheduler,
        alerts: &mut Alerts,
        outcome: Outcome,
        detail: &serde_json::Value,
    ) -> Result<(), ArchiveError> {
        let mesh = &self.plan.mesh;
        let mut judged = Vec::new();
        let recorded = self
            .archive
            .record(mesh, &outcome, detail, |changed| {
                judged = alerts.judge(&outcome, changed);
                judged
                    .iter()
                    .map(|e| NewEvent {
                        at_ns: e.at_ns,
                        kind: if e.firing {
                            "alert_fire"
                        } else {
                            "alert_clear"
                        },
                        detail: alerting::json(mesh, e),
                    })
                    .collect()
            })
            .await?;
        sched.finish(&outcome.run, now_ns());
        match recorded {
            Some(change) => {
                if !judged.is_empty() {
                    *self.firing.lock().expect("firing lock") = alerting::firing(mesh, alerts);
                    alerting::announce(mesh, &judged);
                }
                let _ = self.published.send(Record {
                    outcome,
                    change,
                    alerts: judged,
                });
            }
            None => warn!(
                test = %mesh.tests[outcome.run.test].name,
                "a window already archived ran again; the first result stays"
            ),
        }
        Ok(())
    }
}

//! The archive: every run's outcome and every event, in SQLite (a file, no set-up; the default) or
//! PostgreSQL (a central archive for many monitors). One set of SQL serves both (sqlx's Any driver;
//! `$N` placeholders, types both databases know).
//!
//! Each result is written once, in one transaction with what it implies (the path-change event of a
//! traceroute, the end of its in-flight mark), before the schedule moves on: a monitor killed at any
//! instant loses nothing it had archived, and a result is keyed by its mesh, test, pair and window,
//! so a restarted monitor cannot archive a window twice. Exclusive (throughput) runs are marked in
//! flight when they start; a monitor that restarts finds the marks of the runs it was killed
//! during, whose tests may still be running on their hosts, and keeps those hosts free until they
//! must have ended.
//!
//! Hosts and tests are stored by name, not by their place in the mesh file, so editing the mesh
//! keeps the history of every pair that stays.

use std::time::Duration;

use longhaul_monitor::{Hop, Mesh, Outcome, Run, Status, known_path, path_changed};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};

/// Why the archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The database refused or failed.
    #[error("archive {what}: {source}")]
    Db {
        /// What was being done.
        what: &'static str,
        /// The database's error.
        source: sqlx::Error,
    },
    /// A row the archive holds does not read back (written by another program?).
    #[error("archive holds a bad row: {0}")]
    BadRow(String),
}

fn db(what: &'static str) -> impl FnOnce(sqlx::Error) -> ArchiveError {
    move |source| ArchiveError::Db { what, source }
}

/// The schema; each statement is idempotent, run at every open.
const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS monitor_results (
        mesh TEXT NOT NULL,
        test TEXT NOT NULL,
        kind TEXT NOT NULL,
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        window_ns BIGINT NOT NULL,
        planned_ns BIGINT NOT NULL,
        started_ns BIGINT NOT NULL,
        ended_ns BIGINT NOT NULL,
        status TEXT NOT NULL,
        down_host TEXT,
        error TEXT,
        bits_per_second DOUBLE PRECISION,
        retransmits BIGINT,
        rtt_ns BIGINT,
        loss DOUBLE PRECISION,
        jitter_ns BIGINT,
        path TEXT,
        detail TEXT NOT NULL,
        PRIMARY KEY (mesh, test, src, dst, window_ns)
    )",
    "CREATE INDEX IF NOT EXISTS monitor_results_by_time ON monitor_results (mesh, started_ns)",
    "CREATE TABLE IF NOT EXISTS monitor_events (
        mesh TEXT NOT NULL,
        at_ns BIGINT NOT NULL,
        kind TEXT NOT NULL,
        test TEXT NOT NULL,
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        detail TEXT NOT NULL,
        PRIMARY KEY (mesh, at_ns, kind, test, src, dst)
    )",
    "CREATE TABLE IF NOT EXISTS monitor_in_flight (
        mesh TEXT NOT NULL,
        test TEXT NOT NULL,
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        window_ns BIGINT NOT NULL,
        started_ns BIGINT NOT NULL,
        until_ns BIGINT NOT NULL,
        PRIMARY KEY (mesh, test, src, dst, window_ns)
    )",
];

/// How many of a pair's latest traces make its known path ([`known_path`]).
const KNOWN_PATH_TRACES: i64 = 8;

/// Whether `url` names PostgreSQL.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

fn ns(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A path as the archive keeps it: the hops separated by spaces, `*` where none answered.
pub fn path_text(path: &[Hop]) -> String {
    path.iter()
        .map(|h| h.as_deref().unwrap_or("*"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The hops of a path kept as [`path_text`].
pub fn path_hops(text: &str) -> Vec<Hop> {
    text.split_whitespace()
        .map(|h| (h != "*").then(|| h.to_string()))
        .collect()
}

/// A run the archive found in flight when its monitor stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// The test's name.
    pub test: String,
    /// The sending host's name.
    pub src: String,
    /// The receiving host's name.
    pub dst: String,
    /// When its test must have ended on its hosts, ns since the epoch.
    pub until_ns: u64,
}

/// An event of a run's pair, archived with its result.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// When, ns since the epoch.
    pub at_ns: u64,
    /// What (`alert_fire`, `alert_clear`).
    pub kind: &'static str,
    /// Its details.
    pub detail: serde_json::Value,
}

/// A path change, archived with the traceroute that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// The path before.
    pub before: Vec<Hop>,
    /// The path found.
    pub after: Vec<Hop>,
}

/// One archived result, as read back.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResultRow {
    /// The test's name.
    pub test: String,
    /// Its kind (`throughput`, `traceroute`, `latency`).
    pub kind: String,
    /// The sending host.
    pub src: String,
    /// The receiving host.
    pub dst: String,
    /// The window it belongs to, ns since the epoch.
    pub window_ns: u64,
    /// When it started.
    pub started_ns: u64,
    /// When it ended.
    pub ended_ns: u64,
    /// `ok`, `down` or `failed`.
    pub status: String,
    /// The host that did not answer, when down.
    pub down_host: Option<String>,
    /// Why it did not measure.
    pub error: Option<String>,
    /// Throughput, bit/s.
    pub bits_per_second: Option<f64>,
    /// Retransmitted segments.
    pub retransmits: Option<u64>,
    /// RTT, ns.
    pub rtt_ns: Option<u64>,
    /// Loss, 0–1.
    pub loss: Option<f64>,
    /// Jitter, ns.
    pub jitter_ns: Option<u64>,
    /// The path, as [`path_text`].
    pub path: Option<String>,
}

/// One archived event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EventRow {
    /// When, ns since the epoch.
    pub at_ns: u64,
    /// What (`path_change`, ...).
    pub kind: String,
    /// The test.
    pub test: String,
    /// The pair's sender.
    pub src: String,
    /// The pair's receiver.
    pub dst: String,
    /// Its details, JSON.
    pub detail: serde_json::Value,
}

/// An open archive.
#[derive(Debug, Clone)]
pub struct Archive {
    pool: AnyPool,
    kind: &'static str,
}

impl Archive {
    /// Opens `url` (`postgres://…`, `sqlite://PATH` or a plain path, created if missing) and
    /// creates the tables it lacks.
    pub async fn open(url: &str) -> Result<Self, ArchiveError> {
        sqlx::any::install_default_drivers();
        let (url, kind) = if is_postgres(url) {
            (url.to_string(), "postgres")
        } else {
            let path = url.strip_prefix("sqlite://").unwrap_or(url);
            (format!("sqlite://{path}?mode=rwc"), "sqlite")
        };
        let opts: AnyConnectOptions = url.parse().map_err(db("open"))?;
        let pool = AnyPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .map_err(db("open"))?;
        if kind == "sqlite" {
            // Write-ahead logging: the dashboard's readers never wait for the writer; each commit
            // is durable before `record` returns.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await
                .map_err(db("set WAL mode"))?;
        }
        for s in SCHEMA {
            sqlx::query(s)
                .execute(&pool)
                .await
                .map_err(db("create tables"))?;
        }
        Ok(Self { pool, kind })
    }

    /// "sqlite" or "postgres".
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Marks `run` in flight from `started_ns`; its test ends on its hosts by `until_ns` at the
    /// latest.
    pub async fn begin(
        &self,
        mesh: &Mesh,
        run: &Run,
        started_ns: u64,
        until_ns: u64,
    ) -> Result<(), ArchiveError> {
        let (test, src, dst) = names(mesh, run);
        sqlx::query(
            "INSERT INTO monitor_in_flight (mesh, test, src, dst, window_ns, started_ns, until_ns)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(&mesh.name)
        .bind(test)
        .bind(src)
        .bind(dst)
        .bind(ns(run.window))
        .bind(ns(started_ns))
        .bind(ns(until_ns))
        .execute(&self.pool)
        .await
        .map_err(db("mark a run in flight"))?;
        Ok(())
    }

    /// Archives `o` in one transaction: the result (unless its window is already archived: then
    /// nothing is written and this returns `Ok(None)`), the end of its in-flight mark, for a trace
    /// whose path differs from the pair's known one a `path_change` event (returned), and the
    /// pair's events that `then` makes of it (told whether the path changed; alerts).
    pub async fn record(
        &self,
        mesh: &Mesh,
        o: &Outcome,
        detail: &serde_json::Value,
        then: impl FnOnce(bool) -> Vec<NewEvent>,
    ) -> Result<Option<Option<PathChange>>, ArchiveError> {
        let (test, src, dst) = names(mesh, &o.run);
        let kind = kind_name(mesh, &o.run);
        let m = &o.measures;
        let path = m.path.as_deref().map(path_text);
        let mut tx = self.pool.begin().await.map_err(db("begin"))?;
        let previous: Vec<Vec<Hop>> = if path.is_some() && o.status == Status::Ok {
            let rows = sqlx::query(
                "SELECT path FROM monitor_results
                 WHERE mesh = $1 AND test = $2 AND src = $3 AND dst = $4 AND status = 'ok'
                   AND path IS NOT NULL AND window_ns < $5
                 ORDER BY window_ns DESC LIMIT $6",
            )
            .bind(&mesh.name)
            .bind(test)
            .bind(src)
            .bind(dst)
            .bind(ns(o.run.window))
            .bind(KNOWN_PATH_TRACES)
            .fetch_all(&mut *tx)
            .await
            .map_err(db("read the previous paths"))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map(|p| path_hops(&p)))
                .collect::<Result<_, _>>()
                .map_err(db("read the previous paths"))?
        } else {
            Vec::new()
        };
        let inserted = sqlx::query(
            "INSERT INTO monitor_results (mesh, test, kind, src, dst, window_ns, planned_ns,
                started_ns, ended_ns, status, down_host, error, bits_per_second, retransmits,
                rtt_ns, loss, jitter_ns, path, detail)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                $18, $19)
             ON CONFLICT DO NOTHING",
        )
        .bind(&mesh.name)
        .bind(test)
        .bind(kind)
        .bind(src)
        .bind(dst)
        .bind(ns(o.run.window))
        .bind(ns(o.run.planned))
        .bind(ns(o.started_ns))
        .bind(ns(o.ended_ns))
        .bind(o.status.as_str())
        .bind(o.down_host.map(|h| mesh.hosts[h].name.clone()))
        .bind(o.error.clone())
        .bind(m.bits_per_second)
        .bind(m.retransmits.map(ns))
        .bind(m.rtt_ns.map(ns))
        .bind(m.loss)
        .bind(m.jitter_ns.map(ns))
        .bind(path.clone())
        .bind(detail.to_string())
        .execute(&mut *tx)
        .await
        .map_err(db("write a result"))?
        .rows_affected()
            == 1;
        sqlx::query(
            "DELETE FROM monitor_in_flight
             WHERE mesh = $1 AND test = $2 AND src = $3 AND dst = $4 AND window_ns = $5",
        )
        .bind(&mesh.name)
        .bind(test)
        .bind(src)
        .bind(dst)
        .bind(ns(o.run.window))
        .execute(&mut *tx)
        .await
        .map_err(db("end a run's in-flight mark"))?;
        let before = known_path(&previous);
        let mut change = None;
        if inserted
            && !previous.is_empty()
            && let Some(after) = m.path.as_ref()
            && path_changed(&before, after)
        {
            let detail = serde_json::json!({
                "before": path_text(&before),
                "after": path,
                "window_ns": o.run.window,
            });
            self.event(&mut tx, mesh, o.ended_ns, "path_change", &o.run, &detail)
                .await?;
            change = Some(PathChange {
                before,
                after: after.clone(),
            });
        }
        if inserted {
            for e in then(change.is_some()) {
                self.event(&mut tx, mesh, e.at_ns, e.kind, &o.run, &e.detail)
                    .await?;
            }
        }
        tx.commit().await.map_err(db("commit a result"))?;
        Ok(inserted.then_some(change))
    }

    async fn event(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        mesh: &Mesh,
        at_ns: u64,
        kind: &str,
        run: &Run,
        detail: &serde_json::Value,
    ) -> Result<(), ArchiveError> {
        let (test, src, dst) = names(mesh, run);
        sqlx::query(
            "INSERT INTO monitor_events (mesh, at_ns, kind, test, src, dst, detail)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(&mesh.name)
        .bind(ns(at_ns))
        .bind(kind)
        .bind(test)
        .bind(src)
        .bind(dst)
        .bind(detail.to_string())
        .execute(&mut **tx)
        .await
        .map_err(db("write an event"))?;
        Ok(())
    }

    /// The latest archived window of every (test, from, to) of `mesh` still in the mesh, as
    /// (test, from, to, window) indices, for [`longhaul_monitor::Scheduler::ran`].
    pub async fn last_windows(
        &self,
        mesh: &Mesh,
    ) -> Result<Vec<(usize, usize, usize, u64)>, ArchiveError> {
        let rows = sqlx::query(
            "SELECT test, src, dst, MAX(window_ns) FROM monitor_results WHERE mesh = $1
             GROUP BY test, src, dst",
        )
        .bind(&mesh.name)
        .fetch_all(&self.pool)
        .await
        .map_err(db("read the last runs"))?;
        let mut out = Vec::new();
        for r in rows {
            let get = |i| r.try_get::<String, _>(i).map_err(db("read the last runs"));
            let (test, src, dst) = (get(0)?, get(1)?, get(2)?);
            let window: i64 = r.try_get(3).map_err(db("read the last runs"))?;
            if let Some(t) = mesh.tests.iter().position(|t| t.name == test)
                && let Some(f) = host(mesh, &src)
                && let Some(d) = host(mesh, &dst)
            {
                out.push((t, f, d, unsigned(window)));
            }
        }
        Ok(out)
    }

    /// The runs that were in flight when the monitor of `mesh` last stopped; their marks are
    /// removed (the runs are not archived: their windows run again if still open).
    pub async fn take_in_flight(&self, mesh: &Mesh) -> Result<Vec<InFlight>, ArchiveError> {
        let mut tx = self.pool.begin().await.map_err(db("begin"))?;
        let rows =
            sqlx::query("SELECT test, src, dst, until_ns FROM monitor_in_flight WHERE mesh = $1")
                .bind(&mesh.name)
                .fetch_all(&mut *tx)
                .await
                .map_err(db("read the runs in flight"))?;
        sqlx::query("DELETE FROM monitor_in_flight WHERE mesh = $1")
            .bind(&mesh.name)
            .execute(&mut *tx)
            .await
            .map_err(db("clear the runs in flight"))?;
        tx.commit().await.map_err(db("commit"))?;
        rows.iter()
            .map(|r| {
                let get = |i| {
                    r.try_get::<String, _>(i)
                        .map_err(db("read the runs in flight"))
                };
                Ok(InFlight {
                    test: get(0)?,
                    src: get(1)?,
                    dst: get(2)?,
                    until_ns: unsigned(r.try_get(3).map_err(db("read the runs in flight"))?),
                })
            })
            .collect()
    }

    /// The results of `mesh` that started at or after `since_ns`, oldest first.
    pub async fn results(&self, mesh: &str, since_ns: u64) -> Result<Vec<ResultRow>, ArchiveError> {
        let rows = sqlx::query(
            "SELECT test, kind, src, dst, window_ns, started_ns, ended_ns, status, down_host, error,
                bits_per_second, retransmits, rtt_ns, loss, jitter_ns, path
             FROM monitor_results WHERE mesh = $1 AND started_ns >= $2
             ORDER BY started_ns, test, src, dst",
        )
        .bind(mesh)
        .bind(ns(since_ns))
        .fetch_all(&self.pool)
        .await
        .map_err(db("read results"))?;
        rows.iter()
            .map(|r| result_row(r).map_err(db("read results")))
            .collect()
    }

    /// The events of `mesh` at or after `since_ns`, oldest first.
    pub async fn events(&self, mesh: &str, since_ns: u64) -> Result<Vec<EventRow>, ArchiveError> {
        let rows = sqlx::query(
            "SELECT at_ns, kind, test, src, dst, detail FROM monitor_events
             WHERE mesh = $1 AND at_ns >= $2 ORDER BY at_ns",
        )
        .bind(mesh)
        .bind(ns(since_ns))
        .fetch_all(&self.pool)
        .await
        .map_err(db("read events"))?;
        rows.iter()
            .map(|r| {
                let get = |i| r.try_get::<String, _>(i).map_err(db("read events"));
                let detail = get(5)?;
                Ok(EventRow {
                    at_ns: unsigned(r.try_get(0).map_err(db("read events"))?),
                    kind: get(1)?,
                    test: get(2)?,
                    src: get(3)?,
                    dst: get(4)?,
                    detail: serde_json::from_str(&detail)
                        .map_err(|e| ArchiveError::BadRow(format!("event detail: {e}")))?,
                })
            })
            .collect()
    }

    /// Removes the results and events of `mesh` older than `before_ns` (retention); how many rows.
    pub async fn prune(&self, mesh: &str, before_ns: u64) -> Result<u64, ArchiveError> {
        let mut tx = self.pool.begin().await.map_err(db("begin"))?;
        let mut n = 0;
        for q in [
            "DELETE FROM monitor_results WHERE mesh = $1 AND ended_ns < $2",
            "DELETE FROM monitor_events WHERE mesh = $1 AND at_ns < $2",
        ] {
            n += sqlx::query(q)
                .bind(mesh)
                .bind(ns(before_ns))
                .execute(&mut *tx)
                .await
                .map_err(db("prune"))?
                .rows_affected();
        }
        tx.commit().await.map_err(db("commit a prune"))?;
        Ok(n)
    }

    /// Closes the pool (every commit is already durable).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn names<'m>(mesh: &'m Mesh, run: &Run) -> (&'m str, &'m str, &'m str) {
    (
        &mesh.tests[run.test].name,
        &mesh.hosts[run.from].name,
        &mesh.hosts[run.to].name,
    )
}

fn kind_name(mesh: &Mesh, run: &Run) -> &'static str {
    mesh.tests[run.test].kind.as_str()
}

fn host(mesh: &Mesh, name: &str) -> Option<usize> {
    mesh.hosts.iter().position(|h| h.name == name)
}

fn result_row(r: &sqlx::any::AnyRow) -> Result<ResultRow, sqlx::Error> {
    let opt_u = |i| -> Result<Option<u64>, sqlx::Error> {
        Ok(r.try_get::<Option<i64>, _>(i)?.map(unsigned))
    };
    Ok(ResultRow {
        test: r.try_get(0)?,
        kind: r.try_get(1)?,
        src: r.try_get(2)?,
        dst: r.try_get(3)?,
        window_ns: unsigned(r.try_get(4)?),
        started_ns: unsigned(r.try_get(5)?),
        ended_ns: unsigned(r.try_get(6)?),
        status: r.try_get(7)?,
        down_host: r.try_get(8)?,
        error: r.try_get(9)?,
        bits_per_second: r.try_get(10)?,
        retransmits: opt_u(11)?,
        rtt_ns: opt_u(12)?,
        loss: r.try_get(13)?,
        jitter_ns: opt_u(14)?,
        path: r.try_get(15)?,
    })
}

#[cfg(test)]
mod tests {
    use longhaul_monitor::{Measures, TestKind};
    use longhaul_testkit::fixtures::{Postgres, TempDir};

    use super::*;

    const MESH: &str = r#"
[[host]]
name = "cern"
address = "127.0.0.1"
[[host]]
name = "star"
address = "127.0.0.2"
[[test]]
name = "bw"
kind = "throughput"
from = ["cern", "star"]
[[test]]
name = "trace"
kind = "traceroute"
from = ["cern", "star"]
"#;

    fn mesh() -> Mesh {
        Mesh::from_toml(MESH, "lab.toml").expect("mesh")
    }

    fn outcome(mesh: &Mesh, kind: TestKind, window: u64, measures: Measures) -> Outcome {
        let test = mesh.tests.iter().position(|t| t.kind == kind).unwrap();
        Outcome {
            run: Run {
                test,
                from: 0,
                to: 1,
                window,
                planned: window + 5,
                exclusive: kind.exclusive(),
            },
            started_ns: window + 5,
            ended_ns: window + 25,
            status: Status::Ok,
            down_host: None,
            error: None,
            measures,
            detail: String::new(),
        }
    }

    fn trace(hops: &[&str]) -> Measures {
        Measures {
            path: Some(path_hops(&hops.join(" "))),
            ..Measures::default()
        }
    }

    /// What every database must do: keep a window once, resume from it, link path changes, hand
    /// back the runs a killed monitor left in flight, prune.
    async fn keeps_each_window_once_and_resumes(url: &str) {
        let m = mesh();
        let a = Archive::open(url).await.expect("open");
        let bw = Measures {
            bits_per_second: Some(9.5e8),
            retransmits: Some(12),
            rtt_ns: Some(120_000_000),
            ..Measures::default()
        };
        let o = outcome(&m, TestKind::Throughput, 3_600_000_000_000, bw.clone());
        a.begin(&m, &o.run, o.started_ns, o.started_ns + 30)
            .await
            .unwrap();
        assert_eq!(
            a.record(&m, &o, &serde_json::json!({"k": 1}), |_| Vec::new())
                .await
                .unwrap(),
            Some(None)
        );
        // The same window again (a restarted monitor that ran it twice) is not archived twice.
        let mut again = o.clone();
        again.measures.bits_per_second = Some(1.0);
        assert_eq!(
            a.record(&m, &again, &serde_json::json!({}), |_| Vec::new())
                .await
                .unwrap(),
            None
        );
        // A host down: no figures.
        let mut down = outcome(
            &m,
            TestKind::Throughput,
            7_200_000_000_000,
            Measures::default(),
        );
        down.status = Status::Down;
        down.down_host = Some(1);
        down.error = Some("cannot connect to 127.0.0.2:7067".into());
        a.record(&m, &down, &serde_json::json!({}), |_| Vec::new())
            .await
            .unwrap();

        // Traceroutes: a change is an event in the same transaction.
        let t1 = outcome(
            &m,
            TestKind::Traceroute,
            600,
            trace(&["10.0.0.1", "10.0.1.1"]),
        );
        let t2 = outcome(&m, TestKind::Traceroute, 1200, trace(&["10.0.0.1", "*"]));
        let t3 = outcome(
            &m,
            TestKind::Traceroute,
            1800,
            trace(&["10.0.0.1", "10.0.9.1"]),
        );
        assert_eq!(
            a.record(&m, &t1, &serde_json::json!({}), |_| Vec::new())
                .await
                .unwrap(),
            Some(None)
        );
        assert_eq!(
            a.record(&m, &t2, &serde_json::json!({}), |_| Vec::new())
                .await
                .unwrap(),
            Some(None)
        );
        let change = a
            .record(&m, &t3, &serde_json::json!({}), |changed| {
                // What the runner's alerts make of it, in the same transaction.
                assert!(changed);
                vec![NewEvent {
                    at_ns: t3.ended_ns,
                    kind: "alert_fire",
                    detail: serde_json::json!({"alert": "moved"}),
                }]
            })
            .await
            .unwrap();
        assert_eq!(
            change,
            Some(Some(PathChange {
                before: path_hops("10.0.0.1 10.0.1.1"),
                after: path_hops("10.0.0.1 10.0.9.1"),
            })),
            "a hop that did not answer in the latest trace is known from the one before"
        );
        let events = a.events(&m.name, 0).await.unwrap();
        assert_eq!(events.len(), 2);
        let path = events.iter().find(|e| e.kind == "path_change").unwrap();
        assert_eq!(path.detail["after"], "10.0.0.1 10.0.9.1");
        let alert = events.iter().find(|e| e.kind == "alert_fire").unwrap();
        assert_eq!(
            (alert.src.as_str(), alert.detail["alert"].as_str()),
            ("cern", Some("moved"))
        );

        let rows = a.results(&m.name, 0).await.unwrap();
        assert_eq!(rows.len(), 5);
        let first = rows.iter().find(|r| r.kind == "throughput").unwrap();
        assert_eq!(first.bits_per_second, Some(9.5e8), "the first record stays");
        assert_eq!(first.retransmits, Some(12));
        let d = rows.iter().find(|r| r.status == "down").unwrap();
        assert_eq!(
            (d.down_host.as_deref(), d.bits_per_second),
            (Some("star"), None)
        );

        let mut last = a.last_windows(&m).await.unwrap();
        last.sort();
        assert_eq!(last, vec![(0, 0, 1, 7_200_000_000_000), (1, 0, 1, 1800)]);

        // A run marked in flight and never recorded is handed back once.
        let mut open_run = o.run;
        open_run.window = 10_800_000_000_000;
        a.begin(&m, &open_run, 10, 99).await.unwrap();
        a.close().await;
        let a = Archive::open(url).await.expect("reopen");
        let f = a.take_in_flight(&m).await.unwrap();
        assert_eq!(
            f,
            vec![InFlight {
                test: "bw".into(),
                src: "cern".into(),
                dst: "star".into(),
                until_ns: 99,
            }]
        );
        assert!(a.take_in_flight(&m).await.unwrap().is_empty());

        // Retention: everything that ended before the cut goes, results and events.
        assert_eq!(a.prune(&m.name, 3_000_000_000_000).await.unwrap(), 5);
        assert_eq!(a.results(&m.name, 0).await.unwrap().len(), 2);
        assert!(a.events(&m.name, 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn sqlite_keeps_each_window_once_and_resumes() {
        let dir = TempDir::new("monitor-archive");
        let path = dir.0.join("a.sqlite");
        keeps_each_window_once_and_resumes(path.to_str().unwrap()).await;
    }

    #[tokio::test]
    async fn postgres_keeps_each_window_once_and_resumes() {
        let Some(pg) = Postgres::start() else {
            return;
        };
        keeps_each_window_once_and_resumes(&pg.database()).await;
    }
}

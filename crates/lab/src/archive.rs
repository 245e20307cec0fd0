//! The result archive: a directory with one result file per run (`<run-id>.json`) and an SQLite
//! index of the runs (`archive.sqlite`, table `runs`: id, experiment, started, finished,
//! complete, trustworthy, reduced, points, file). The runner saves after every point, so a run
//! that was interrupted (or killed) is in the index as incomplete. The JSON files are the truth;
//! the index is rebuilt from them with [`Archive::reindex`].

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use longhaul_experiments::result::ResultFile;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

/// The index file's name inside the archive.
pub const INDEX: &str = "archive.sqlite";

/// One run in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Run id.
    pub id: String,
    /// Experiment name.
    pub experiment: String,
    /// RFC 3339.
    pub started: String,
    /// RFC 3339, `None` while running or when interrupted.
    pub finished: Option<String>,
    /// Every point and repetition ran.
    pub complete: bool,
    /// No repetition was flagged by the emulator.
    pub trustworthy: bool,
    /// The reduced (CI) variant.
    pub reduced: bool,
    /// Points in the file.
    pub points: usize,
    /// The result file.
    pub file: String,
}

impl RunRow {
    /// "complete", "INCOMPLETE", with ", UNTRUSTWORTHY" when flagged.
    pub fn status(&self) -> String {
        let mut s = if self.complete {
            "complete".to_owned()
        } else {
            "INCOMPLETE".to_owned()
        };
        if !self.trustworthy {
            s += ", UNTRUSTWORTHY";
        }
        s
    }
}

/// An open archive.
pub struct Archive {
    dir: PathBuf,
    db: Connection,
}

impl Archive {
    /// `$XDG_DATA_HOME/longhaul/lab`, else `~/.local/share/longhaul/lab`
    /// ([`longhaul_sys::data_dir`]), else `./longhaul/lab`.
    pub fn default_dir() -> PathBuf {
        longhaul_sys::data_dir()
            .unwrap_or_else(|| PathBuf::from(".").join("longhaul"))
            .join("lab")
    }

    /// Opens (creating if needed) the archive in `dir`.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the archive {}", dir.display()))?;
        let path = dir.join(INDEX);
        let db = Connection::open(&path)
            .with_context(|| format!("cannot open the index {}", path.display()))?;
        db.busy_timeout(std::time::Duration::from_secs(10))?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS runs (
                id TEXT PRIMARY KEY,
                experiment TEXT NOT NULL,
                started TEXT NOT NULL,
                finished TEXT,
                complete INTEGER NOT NULL,
                trustworthy INTEGER NOT NULL,
                reduced INTEGER NOT NULL,
                points INTEGER NOT NULL,
                file TEXT NOT NULL
            );",
        )
        .with_context(|| format!("cannot set up the index {}", path.display()))?;
        Ok(Self {
            dir: dir.to_owned(),
            db,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where run `id`'s result file goes.
    pub fn result_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes the result file (atomically: a temporary file renamed over it) and indexes it.
    pub fn save(&self, rf: &ResultFile) -> anyhow::Result<PathBuf> {
        let path = self.result_path(&rf.run_id);
        let tmp = self.dir.join(format!(".{}.json.tmp", rf.run_id));
        std::fs::write(&tmp, rf.to_json())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        self.index(rf, &path)?;
        Ok(path)
    }

    /// Adds or updates run `rf` in the index.
    pub fn index(&self, rf: &ResultFile, path: &Path) -> anyhow::Result<()> {
        self.db
            .execute(
                "INSERT OR REPLACE INTO runs
                 (id, experiment, started, finished, complete, trustworthy, reduced, points, file)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    rf.run_id,
                    rf.experiment.name,
                    rf.started,
                    rf.finished,
                    rf.complete,
                    !rf.untrustworthy,
                    rf.experiment.reduced,
                    rf.points.len() as i64,
                    path.display().to_string(),
                ],
            )
            .context("cannot update the archive index")?;
        Ok(())
    }

    /// Rebuilds the index from the result files in the directory; returns how many were indexed
    /// and the files that are not valid result files.
    pub fn reindex(&self) -> anyhow::Result<(usize, Vec<String>)> {
        let mut n = 0;
        let mut bad = Vec::new();
        for e in std::fs::read_dir(&self.dir)?.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            match std::fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|t| ResultFile::from_json(&t).map_err(|e| e.to_string()))
            {
                Ok(rf) => {
                    self.index(&rf, &p)?;
                    n += 1;
                }
                Err(e) => bad.push(format!("{}: {e}", p.display())),
            }
        }
        Ok((n, bad))
    }

    /// Every run, oldest first.
    pub fn list(&self) -> anyhow::Result<Vec<RunRow>> {
        let mut st = self.db.prepare(
            "SELECT id, experiment, started, finished, complete, trustworthy, reduced, points, file
             FROM runs ORDER BY started, id",
        )?;
        let rows = st.query_map([], |r| {
            Ok(RunRow {
                id: r.get(0)?,
                experiment: r.get(1)?,
                started: r.get(2)?,
                finished: r.get(3)?,
                complete: r.get(4)?,
                trustworthy: r.get(5)?,
                reduced: r.get(6)?,
                points: r.get::<_, i64>(7)? as usize,
                file: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The run called `key`: its exact id, or a unique prefix of one, or the latest run of
    /// experiment `key`.
    pub fn find(&self, key: &str) -> anyhow::Result<RunRow> {
        let all = self.list()?;
        if let Some(r) = all.iter().find(|r| r.id == key) {
            return Ok(r.clone());
        }
        let prefixed: Vec<&RunRow> = all.iter().filter(|r| r.id.starts_with(key)).collect();
        match prefixed.len() {
            1 => return Ok(prefixed[0].clone()),
            0 => {}
            _ => bail!(
                "{key:?} matches {} runs: {}",
                prefixed.len(),
                prefixed
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
        if let Some(r) = all.iter().rev().find(|r| r.experiment == key) {
            return Ok(r.clone());
        }
        bail!(
            "no run {key:?} in the archive {} (see `longhaul lab list`)",
            self.dir.display()
        )
    }

    /// Loads a run: `key` as for [`Archive::find`], or the path of a result file.
    pub fn load(&self, key: &str) -> anyhow::Result<ResultFile> {
        let path = if key.ends_with(".json") && Path::new(key).is_file() {
            PathBuf::from(key)
        } else {
            PathBuf::from(self.find(key)?.file)
        };
        read(&path)
    }
}

/// Reads and validates a result file.
pub fn read(path: &Path) -> anyhow::Result<ResultFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    ResultFile::from_json(&text)
        .with_context(|| format!("{} is not a valid result file", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_experiments::result::Experiment;

    fn rf(id: &str) -> ResultFile {
        let b = longhaul_experiments::builtin::builtin("sustained").expect("builtin");
        let spec = b.spec().expect("spec");
        ResultFile::new(
            id,
            Experiment {
                name: spec.name.clone(),
                file: "builtin/sustained.toml".into(),
                text: b.toml.into(),
                reduced: false,
                spec,
            },
            "2026-01-01T00:00:00Z",
            Default::default(),
            "0.1.0",
            Default::default(),
        )
    }

    #[test]
    fn saved_runs_are_listed_found_and_loaded_incomplete_until_finished() {
        let dir = std::env::temp_dir().join(format!("lh-lab-archive-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = Archive::open(&dir).expect("open");
        let mut r = rf("20260101-000000-sustained");
        a.save(&r).expect("save");
        let rows = a.list().expect("list");
        assert_eq!(rows.len(), 1);
        assert!(!rows[0].complete);
        assert_eq!(rows[0].status(), "INCOMPLETE");
        r.finish("2026-01-01T00:10:00Z");
        a.save(&r).expect("save");
        assert_eq!(a.find("20260101").expect("prefix").id, r.run_id);
        assert_eq!(a.find("sustained").expect("by experiment").id, r.run_id);
        assert!(a.find("nope").is_err());
        let back = a.load(&r.run_id).expect("load");
        assert_eq!(back.run_id, r.run_id);
        drop(a);
        std::fs::remove_file(dir.join(INDEX)).expect("rm index");
        let a = Archive::open(&dir).expect("reopen");
        assert_eq!(a.reindex().expect("reindex").0, 1);
        assert_eq!(a.list().expect("list").len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Upgrades keep data (issue 21): what an earlier release wrote is opened by this build, migrated
//! forward and read back the same. Each release leaves its fixtures in tests/data/upgrade/VERSION
//! (made once by tests/data/upgrade/make.sh with that release's binary, which records itself in
//! `release`): a testbed database with bookings, and a lab archive with a run, each beside what
//! that release printed of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use longhaul_testkit::fixtures::{TempDir, run};
use serde_json::Value;

use crate::testbed::Service;
use crate::util::{bin, machine_shared};

/// Every release's fixture directory.
fn releases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/upgrade");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no release fixtures in {}",
        root.display()
    );
    dirs
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs `longhaul ARGS`, which must succeed; its standard output.
fn longhaul(args: &[&str]) -> String {
    run(Command::new(bin()).args(args))
}

/// `longhaul ARGS --json`, parsed.
fn longhaul_json(args: &[&str]) -> Value {
    serde_json::from_str(&longhaul(&[args, &["--json"]].concat())).unwrap()
}

/// `longhaul testbed ARGS --json` against the service at `url` with `token`, parsed.
fn testbed(url: &str, token: &str, args: &[&str]) -> Value {
    longhaul_json(&[&["testbed"], args, &["--server", url, "--token", token]].concat())
}

/// A booking's fields that time does not change: its status does (upcoming becomes finished, a
/// hold expires), and with it its version (the sweep that expires a hold is an audited change);
/// a cancelled booking stays cancelled, at its version.
fn lasting(b: &Value) -> Value {
    let mut kept = serde_json::Map::new();
    for key in ["id", "resource", "owner", "start", "end", "note"] {
        kept.insert(key.into(), b[key].clone());
    }
    if b["status"] == "cancelled" {
        kept.insert("status".into(), b["status"].clone());
        kept.insert("version".into(), b["version"].clone());
    }
    Value::Object(kept)
}

#[test]
fn an_earlier_releases_testbed_database_migrates_and_reads_back_its_bookings() {
    for release in releases() {
        let dir = TempDir::new("upgrade-testbed");
        let db = dir.0.join("testbed.sqlite");
        std::fs::copy(release.join("testbed.sqlite"), &db).unwrap();
        let tokens = std::fs::read_to_string(release.join("tokens")).unwrap();
        let token = |role: &str| {
            tokens
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{role} ")))
                .unwrap()
                .to_owned()
        };
        let inventory = include_str!("../crates/testbed/testdata/datatag.toml");
        let (svc, _) = Service::start_with(db.to_str().unwrap(), &[], &[], inventory);
        let url = svc.url("");
        // The old release's tokens still authenticate, each with its role.
        let me = testbed(&url, &token("admin"), &["me"]);
        assert_eq!(me["role"], "admin", "{}: {me}", release.display());
        let span = [
            "--from",
            "2000-01-01T00:00:00Z",
            "--to",
            "2100-01-01T00:00:00Z",
        ];
        let listed = testbed(&url, &token("user"), &[&["list"], &span[..]].concat());
        let then = json(&release.join("testbed-list.json"));
        let now: Vec<Value> = listed["bookings"]
            .as_array()
            .unwrap()
            .iter()
            .map(lasting)
            .collect();
        let was: Vec<Value> = then["bookings"]
            .as_array()
            .unwrap()
            .iter()
            .map(lasting)
            .collect();
        assert!(was.len() >= 4, "{then}");
        assert_eq!(now, was, "{}", release.display());
        // And the migrated database takes new bookings.
        let day = run(Command::new("date").args(["-u", "-d", "+30 days", "+%Y-%m-%d"]));
        let (from, to) = (
            format!("{}T08:00:00Z", day.trim()),
            format!("{}T09:00:00Z", day.trim()),
        );
        let booked = testbed(
            &url,
            &token("user"),
            &[
                "reserve",
                "cern/starlight-lambda/1g-a",
                "--from",
                &from,
                "--to",
                &to,
            ],
        );
        assert!(booked["id"].as_u64().unwrap() > 4, "{booked}");
    }
}

#[test]
fn an_earlier_releases_lab_archive_lists_shows_and_reports_the_same_results() {
    // `lab report` renders plots on a core for a while: not beside a test that holds the machine
    // alone (CI's run of 87fd71c: `util::the_busiest_processes_are_named` saw it as busy as itself).
    let _machine = machine_shared();
    for release in releases() {
        let dir = TempDir::new("upgrade-lab");
        let archive = dir.0.join("lab");
        std::fs::create_dir(&archive).unwrap();
        for entry in std::fs::read_dir(release.join("lab")).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, archive.join(path.file_name().unwrap())).unwrap();
        }
        let a = archive.to_str().unwrap();
        let listed = longhaul_json(&["lab", "list", "--archive", a]);
        let then = json(&release.join("lab-list.json"));
        let (now, was) = (&listed["runs"], &then["runs"]);
        assert_eq!(now.as_array().unwrap().len(), was.as_array().unwrap().len());
        for (n, w) in now.as_array().unwrap().iter().zip(was.as_array().unwrap()) {
            for key in [
                "id",
                "experiment",
                "started",
                "finished",
                "complete",
                "reduced",
                "points",
                "trustworthy",
            ] {
                assert_eq!(n[key], w[key], "{}: run {key}", release.display());
            }
        }
        let run = was[0]["id"].as_str().unwrap();
        let shown = longhaul_json(&["lab", "show", run, "--archive", a]);
        let then = json(&release.join("lab-show.json"));
        for key in ["run_id", "complete", "points", "seeds", "longhaul_version"] {
            assert_eq!(shown[key], then[key], "{}: {key}", release.display());
        }
        assert!(!then["points"].as_array().unwrap().is_empty());
        // The report renders from it, plots and all.
        let report = dir.0.join("report.html");
        longhaul(&[
            "lab",
            "report",
            run,
            "--archive",
            a,
            "-o",
            report.to_str().unwrap(),
        ]);
        let html = std::fs::read_to_string(&report).unwrap();
        assert!(
            html.contains(run) && html.contains("<svg"),
            "{}",
            &html[..html.len().min(500)]
        );
    }
}

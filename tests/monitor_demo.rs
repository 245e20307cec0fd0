//! The monitor's demo, "a day in a minute" (issue 15): `scripts/monitor-demo.sh` on the emulated
//! DataTAG 2003 triangle, run as a user would, with this build. The script checks each step against
//! the monitor's API and fails on the first that does not hold: the grid red for exactly the two
//! pairs crossing the faulty link, the loss alert firing and clearing, the path change found both
//! ways with the RTT alert, and all green again. Here its exit status and its report are checked.

use std::process::Command;

use crate::util::{bin, netns_alone, program};

#[test]
fn the_monitor_demo_finds_the_fault_the_reroute_and_the_recovery() {
    let Some(_machine) = netns_alone() else {
        return;
    };
    if !program("python3", "python3") {
        return;
    }
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/monitor-demo.sh"
    ))
    .env("LONGHAUL", bin())
    .output()
    .expect("run scripts/monitor-demo.sh");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    assert!(
        out.status.success(),
        "the demo failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "baseline: all six pairs green",
        "grid: red for exactly cern1->starlight1 starlight1->cern1; alert 'lossy' firing",
        "alert 'lossy' cleared",
        "path change found both ways",
        "all six pairs green again, no alert firing",
        "demo passed",
    ] {
        assert!(report.contains(step), "{step:?} missing from:\n{report}");
    }
}

//! Arbitrary bytes as an agent's report (`POST /api/v1/agent/report`, JSON): reading it never
//! panics; facts that pass the check have every text field within bounds and free of control
//! characters; comparing them with themselves finds no change, and with empty facts never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_testbed::agents::{AgentReport, HostFacts, MAX_ITEMS, MAX_TEXT, changes};

fuzz_target!(|data: &[u8]| {
    let Ok(report) = serde_json::from_slice::<AgentReport>(data) else {
        return;
    };
    let facts = &report.facts;
    if facts.check().is_err() {
        return;
    }
    assert!(facts.nics.len() <= MAX_ITEMS);
    for n in &facts.nics {
        assert!(n.name.len() <= MAX_TEXT && !n.name.chars().any(char::is_control));
    }
    assert!(changes(facts, facts).is_empty());
    let _ = changes(&HostFacts::default(), facts);
    let _ = changes(facts, &HostFacts::default());
});

//! An alert rule as the mesh file states it: what it watches, its threshold, the tests it applies
//! to, how many consecutive results fire and clear it. [`crate::alert`] applies the rules.

use serde::Deserialize;

/// What a rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Throughput below `value` % of the baseline.
    ThroughputBelow,
    /// RTT more than `value` % above the baseline.
    RttAbove,
    /// Probe loss above `value` %.
    LossAbove,
    /// A path change.
    PathChanged,
    /// A host of the pair down.
    Down,
}

impl When {
    /// Its name in the mesh file.
    pub fn as_str(self) -> &'static str {
        match self {
            When::ThroughputBelow => "throughput_below",
            When::RttAbove => "rtt_above",
            When::LossAbove => "loss_above",
            When::PathChanged => "path_changed",
            When::Down => "down",
        }
    }

    /// Whether the rule takes a `value`.
    pub fn takes_value(self) -> bool {
        matches!(
            self,
            When::ThroughputBelow | When::RttAbove | When::LossAbove
        )
    }
}

/// An alert rule of the mesh.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRule {
    /// Its name.
    pub name: String,
    /// What it watches.
    pub when: When,
    /// Its threshold, % (rules that take one).
    pub value: f64,
    /// The tests it applies to (indices into the mesh's tests).
    pub tests: Vec<usize>,
    /// Consecutive bad results that fire it.
    pub after: u32,
    /// Consecutive good results that clear it.
    pub clear_after: u32,
}

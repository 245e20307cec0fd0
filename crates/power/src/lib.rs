//! Power control of testbed hosts through their BMCs (issue 20): **Redfish** (DMTF's REST API:
//! the `PowerState` of a `ComputerSystem` and its `ComputerSystem.Reset` action), **IPMI 2.0 over
//! LAN** (through ipmitool's `lanplus` interface, the maintained implementation Debian ships) and a
//! **local command** (for VMs and emulated hosts). Every outcome is read back from the BMC, never
//! assumed: an action returns once the BMC reports the state it should lead to, or fails with what
//! the BMC last said. Blocking I/O (the service calls it from a blocking thread); no clock other than
//! the waits. The service's BMC file ([`config`]) names the endpoint of each host; its credentials
//! are [`secret::Secret`]s, which never print.
//!
//! Start at [`Endpoint::run`]; the protocols are in [`redfish`], [`ipmi`] and [`command`].

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub mod command;
pub mod config;
pub mod ipmi;
pub mod redfish;
pub mod secret;

pub use config::BmcFile;
pub use secret::Secret;

/// What a user asks of a host's power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerAction {
    /// Read the power state.
    Status,
    /// Power on (nothing to do when on).
    On,
    /// Power off at once (Redfish `ForceOff`, IPMI `power off`).
    Off,
    /// Off, then on: the host boots afresh. When it is off, only on. Done as two steps, each read
    /// back, rather than the BMC's own cycle, whose brief off a poll can miss (and which some BMCs
    /// refuse on a host that is off): what OpenStack Ironic does for IPMI reboots too.
    Cycle,
    /// Hard reset of a host that is on (Redfish `ForceRestart`, IPMI `power reset`); refused when
    /// it is off.
    Reset,
}

impl PowerAction {
    /// Every action, in the order of the docs.
    pub const ALL: [PowerAction; 5] = [
        PowerAction::Status,
        PowerAction::On,
        PowerAction::Off,
        PowerAction::Cycle,
        PowerAction::Reset,
    ];

    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::On => "on",
            Self::Off => "off",
            Self::Cycle => "cycle",
            Self::Reset => "reset",
        }
    }

    /// The action named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether it changes anything (everything but [`PowerAction::Status`]).
    pub fn changes(self) -> bool {
        self != Self::Status
    }
}

impl fmt::Display for PowerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A power state as the BMC reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// On.
    On,
    /// Off.
    Off,
    /// On its way on (Redfish `PoweringOn`).
    PoweringOn,
    /// On its way off (Redfish `PoweringOff`).
    PoweringOff,
}

impl PowerState {
    /// The name in JSON and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::PoweringOn => "poweringon",
            Self::PoweringOff => "poweringoff",
        }
    }
}

impl fmt::Display for PowerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request the BMC could not carry out, or an answer that cannot be trusted. The message says
/// what was asked and what came back; [`Endpoint::describe`] names the endpoint (the caller adds
/// the host).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{endpoint}: {message}")]
pub struct PowerError {
    /// The endpoint, without credentials (`redfish http://10.0.0.5/redfish/v1/Systems/1`).
    pub endpoint: String,
    /// What went wrong.
    pub message: String,
}

/// What an action did, as the BMC reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The state read back at the end.
    pub state: PowerState,
    /// The BMC's answers, in order (the requests it accepted and the states it reported), for the
    /// audit log: `ForceOff accepted (204)`, `PowerState Off`.
    pub answers: Vec<String>,
    /// How long it took, in milliseconds.
    pub millis: u64,
}

/// How long an action may take before it counts as failed, and how often the state is read
/// meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// Longest wait for the state an action leads to (each of a cycle's two steps gets this).
    pub limit: Duration,
    /// Pause between two reads of the state.
    pub poll: Duration,
}

impl Default for Wait {
    fn default() -> Self {
        Self {
            limit: Duration::from_secs(120),
            poll: Duration::from_millis(500),
        }
    }
}

/// One host's power endpoint.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A Redfish service.
    Redfish(redfish::Redfish),
    /// An IPMI 2.0 BMC over LAN.
    Ipmi(ipmi::Ipmi),
    /// Local commands.
    Command(command::Commands),
}

/// The request an action sends the BMC (a cycle sends two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Power on.
    On,
    /// Power off at once.
    Off,
    /// Hard reset.
    Reset,
}

impl Endpoint {
    /// The endpoint for messages and the audit log, without credentials.
    pub fn describe(&self) -> String {
        match self {
            Self::Redfish(r) => r.describe(),
            Self::Ipmi(i) => i.describe(),
            Self::Command(c) => c.describe(),
        }
    }

    /// The protocol: `redfish`, `ipmi` or `command`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Redfish(_) => "redfish",
            Self::Ipmi(_) => "ipmi",
            Self::Command(_) => "command",
        }
    }

    /// Reads the power state.
    pub fn state(&self) -> Result<PowerState, PowerError> {
        match self {
            Self::Redfish(r) => r.state(),
            Self::Ipmi(i) => i.state(),
            Self::Command(c) => c.state(),
        }
    }

    /// Sends one request; returns the BMC's acknowledgement.
    pub fn send(&self, request: Request) -> Result<String, PowerError> {
        match self {
            Self::Redfish(r) => r.send(request),
            Self::Ipmi(i) => i.send(request),
            Self::Command(c) => c.send(request),
        }
    }

    fn error(&self, message: impl Into<String>) -> PowerError {
        PowerError {
            endpoint: self.describe(),
            message: message.into(),
        }
    }

    /// Carries out `action` and reads the outcome back: `Ok` only once the BMC reports the state
    /// the action leads to (on after on, cycle and reset; off after off).
    pub fn run(&self, action: PowerAction, wait: Wait) -> Result<Outcome, PowerError> {
        let started = Instant::now();
        let mut answers = Vec::new();
        let before = self.state()?;
        answers.push(format!("state {before}"));
        let state = match action {
            PowerAction::Status => before,
            PowerAction::On => {
                self.step(Request::On, PowerState::On, before, wait, &mut answers)?
            }
            PowerAction::Off => {
                self.step(Request::Off, PowerState::Off, before, wait, &mut answers)?
            }
            PowerAction::Cycle => {
                let off = self.step(Request::Off, PowerState::Off, before, wait, &mut answers)?;
                self.step(Request::On, PowerState::On, off, wait, &mut answers)?
            }
            PowerAction::Reset => {
                if before != PowerState::On {
                    return Err(self.error(format!(
                        "reset needs the host on, and it is {before}: use on or cycle"
                    )));
                }
                answers.push(self.send(Request::Reset)?);
                self.wait_for(PowerState::On, wait, &mut answers)?
            }
        };
        Ok(Outcome {
            state,
            answers,
            millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// Sends `request` unless the host is already in `target`, then waits for `target`.
    fn step(
        &self,
        request: Request,
        target: PowerState,
        now: PowerState,
        wait: Wait,
        answers: &mut Vec<String>,
    ) -> Result<PowerState, PowerError> {
        if now == target {
            return Ok(now);
        }
        answers.push(self.send(request)?);
        self.wait_for(target, wait, answers)
    }

    /// Reads the state until it is `target`; an error after `wait.limit` says what it was last.
    fn wait_for(
        &self,
        target: PowerState,
        wait: Wait,
        answers: &mut Vec<String>,
    ) -> Result<PowerState, PowerError> {
        let deadline = Instant::now() + wait.limit;
        loop {
            let s = self.state()?;
            if answers.last().is_none_or(|a| *a != format!("state {s}")) {
                answers.push(format!("state {s}"));
            }
            if s == target {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                return Err(self.error(format!(
                    "asked for {target}, but the BMC still reports {s} after {} s",
                    wait.limit.as_secs()
                )));
            }
            std::thread::sleep(wait.poll);
        }
    }
}

/// `text` cut to `max` characters with control characters escaped, to quote a peer's answer in a
/// message without letting it forge lines.
pub fn quote(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    format!("\"{out}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_by_name() {
        for a in PowerAction::ALL {
            assert_eq!(PowerAction::parse(a.as_str()), Some(a));
        }
        assert_eq!(PowerAction::parse("explode"), None);
        assert!(!PowerAction::Status.changes());
        assert!(PowerAction::Cycle.changes());
    }

    #[test]
    fn quotes_are_bounded_and_escaped() {
        assert_eq!(quote("ok", 10), "\"ok\"");
        assert_eq!(quote("a\nb", 10), "\"a\\nb\"");
        assert_eq!(quote("abcdef", 3), "\"abc…\"");
    }
}

//! The controllers a server accepts (`--controllers FILE`): their keys, limits and running jobs,
//! the copy tickets issued to them, and what a served job knows of who asked.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use longhaul_fleet::ControllerSpec;
use longhaul_fleet::controllers::Reach;
use longhaul_fleet::msg::{KEY_ID_LEN, key_id};
use longhaul_transfer::auth::{Key, Nonce};

use crate::EngineError;
use crate::address::{self, Family};
use crate::transfer::ServeFiles;
use crate::transfer::ticket::Tickets;

/// One controller this server accepts.
#[derive(Debug)]
pub(crate) struct Controller {
    pub(crate) spec: ControllerSpec,
    pub(crate) key: Key,
    id: [u8; KEY_ID_LEN],
    running: AtomicU32,
}

impl Controller {
    /// A refusal under this controller's limits, naming where they are set.
    pub(crate) fn refuse(&self, why: String) -> EngineError {
        EngineError::controller_limit(&self.spec.name, why)
    }

    /// Takes one of this controller's job slots, or refuses when `max_jobs` run already.
    pub(crate) fn slot(&self) -> Result<JobSlot<'_>, EngineError> {
        let running = self.running.fetch_add(1, Ordering::AcqRel);
        let slot = JobSlot(&self.running);
        if running >= self.spec.limits.max_jobs {
            return Err(self.refuse(format!(
                "{running} of its jobs already run here, at most {} at once (max_jobs)",
                self.spec.limits.max_jobs
            )));
        }
        Ok(slot)
    }

    /// The host this server connects to for a job's target `to`: with a target list, the address
    /// checked (never resolved again: a name that resolves elsewhere a moment later cannot slip
    /// past) or a name listed as it is; without one, `to` itself.
    pub(crate) fn reach(&self, to: &str, port: u16, family: Family) -> Result<String, EngineError> {
        if self.spec.limits.targets.is_none() {
            return Ok(to.to_string());
        }
        let addrs: Vec<std::net::IpAddr> = address::resolve(to, port, family, None)?
            .iter()
            .map(|a| a.ip())
            .collect();
        match self
            .spec
            .limits
            .check_target(to, &addrs)
            .map_err(|why| self.refuse(why))?
        {
            Reach::Name => Ok(to.to_string()),
            Reach::Address(a) => Ok(a.to_string()),
        }
    }
}

/// The controllers a server accepts, with their keys, their running jobs and the copy tickets
/// issued to them.
#[derive(Debug, Default)]
pub struct Controllers {
    list: Vec<Controller>,
    tickets: Tickets,
}

impl Controllers {
    /// The controllers of a `--controllers` file, each with its key (read by the caller). Two
    /// controllers with the same key are refused: a job would not know whose limits apply.
    pub fn new(list: Vec<(ControllerSpec, Key)>) -> Result<Self, EngineError> {
        let mut out: Vec<Controller> = Vec::with_capacity(list.len());
        for (spec, key) in list {
            let id = key_id(&key);
            if let Some(other) = out.iter().find(|c| c.id == id) {
                return Err(EngineError::Transfer(format!(
                    "controllers {} and {} have the same key; give each its own (longhaul keygen)",
                    other.spec.name, spec.name
                )));
            }
            out.push(Controller {
                spec,
                key,
                id,
                running: AtomicU32::new(0),
            });
        }
        Ok(Self {
            list: out,
            tickets: Tickets::default(),
        })
    }

    /// Whether any controller is accepted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn by_id(&self, id: &[u8; KEY_ID_LEN]) -> Option<&Controller> {
        self.list.iter().find(|c| c.id == *id)
    }

    /// The copy tickets issued by this server's jobs, for the transfers that present them.
    pub(crate) fn tickets(&self) -> &Tickets {
        &self.tickets
    }
}

/// A controller's job slot, released on drop.
pub(crate) struct JobSlot<'a>(&'a AtomicU32);

impl Drop for JobSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a served job did, for the server's log.
#[derive(Debug)]
pub(crate) struct JobDone {
    pub(crate) controller: String,
    pub(crate) what: String,
}

/// An authenticated job connection, server side: who asks, and the handshake's nonces (a copy
/// ticket's key is derived from them).
pub(crate) struct Asked<'a> {
    pub(crate) controller: &'a Controller,
    pub(crate) server_nonce: Nonce,
    pub(crate) client_nonce: Nonce,
}

/// What a server offers its jobs besides its controllers.
pub(crate) struct JobContext<'a> {
    pub(crate) controllers: &'a Controllers,
    /// The files it serves (`--root`, `--key`), for copies.
    pub(crate) files: Option<&'a ServeFiles>,
    /// Deadline of the handshake.
    pub(crate) deadline: Instant,
    /// Connect timeout for the job's own connections (to B).
    pub(crate) connect_timeout: Duration,
}

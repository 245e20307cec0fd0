//! The controller's side of a job connection: connect, prove the controller's key, measure the
//! server's clock. What it asks is in the test and copy modules.

use std::time::{Duration, SystemTime};

use longhaul_fleet::msg::{MAX_CLOCK_PROBES, key_id};
use longhaul_fleet::{JOB_VERSION, JobMessage};
use longhaul_proto::wire::Preamble;
use longhaul_transfer::auth::{Key, Nonce, Role};

use super::conn::{AUTHENTICATED_FRAME_LIMIT, JobConn, nonce, unexpected, unix_ns};
use crate::EngineError;
use crate::address::{self, Family};
use crate::channel::Channel;
use crate::tls::{ClientTlsConfig, Connector};
use crate::transfer::conn::{bound, relay_hint, seal};

/// A controller's authenticated job connection to one server.
pub struct JobClient {
    pub(super) ctl: JobConn,
    /// The server, as the controller named it (for errors).
    pub(super) server: String,
    pub(super) timeout: Duration,
    /// The controller's key and the handshake's nonces (copy tickets are derived from them).
    pub(super) key: Key,
    pub(super) server_nonce: Nonce,
    pub(super) client_nonce: Nonce,
}

/// A server's clock against the controller's, from clock probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// Server clock − controller clock, ns.
    pub offset_ns: i64,
    /// Round trip of the probe it was taken from (the shortest), ns: the offset is good to half.
    pub rtt_ns: u64,
}

impl JobClient {
    /// Connects to `server` (in TLS with `encrypt`) and proves this controller's `key` (after the
    /// server proved it first).
    pub fn connect(
        server: &str,
        port: u16,
        family: Family,
        key: &Key,
        timeout: Duration,
        encrypt: Option<&ClientTlsConfig>,
    ) -> Result<Self, EngineError> {
        let sock = address::connect_any(
            server,
            port,
            family,
            timeout,
            " (is `longhaul server --controllers FILE` running there, on that port?)",
        )?;
        let channel = match encrypt {
            Some(tls) => Connector::new(tls)?.connect(sock, server, timeout)?.0,
            None => Channel::plain(sock),
        };
        channel
            .write_all(&Preamble::job().encode())
            .map_err(|e| EngineError::io("send the job preamble", e))?;
        let mut ctl = JobConn::new(channel);
        let client_nonce = nonce()?;
        ctl.send(&JobMessage::JobHello {
            version: JOB_VERSION,
            key_id: key_id(key),
            client_nonce,
        })?;
        let (server_nonce, server_proof) = match ctl.recv(timeout, "the server's challenge")? {
            JobMessage::AuthChallenge {
                server_nonce,
                server_proof,
            } => (server_nonce, server_proof),
            m => return Err(unexpected(&m, "the server's challenge")),
        };
        let (server_nonce, client_nonce) = bound(&ctl, &server_nonce, &client_nonce);
        key.verify_job(Role::Server, &server_nonce, &client_nonce, &server_proof)
            .map_err(|_| {
                EngineError::Transfer(format!(
                    "server {server} does not hold this controller's key{}; nothing was asked",
                    relay_hint(&ctl)
                ))
            })?;
        ctl.send(&JobMessage::AuthResponse {
            client_proof: key.job_proof(Role::Client, &server_nonce, &client_nonce),
        })?;
        let keys = key.job_session(&server_nonce, &client_nonce);
        seal(&mut ctl, &keys, Role::Client);
        match ctl.recv(timeout, "the server's authentication result")? {
            JobMessage::AuthOk { .. } => {}
            m => return Err(unexpected(&m, "the authentication result")),
        }
        ctl.set_frame_limit(AUTHENTICATED_FRAME_LIMIT);
        Ok(Self {
            ctl,
            server: server.to_string(),
            timeout,
            key: key.clone(),
            server_nonce,
            client_nonce,
        })
    }

    /// The server's clock offset, from `probes` probes (the one with the shortest round trip).
    pub fn clock_offset(&mut self, probes: u32) -> Result<ClockOffset, EngineError> {
        let mut best: Option<ClockOffset> = None;
        for _ in 0..probes.clamp(1, MAX_CLOCK_PROBES) {
            let sent = unix_ns(SystemTime::now());
            self.ctl.send(&JobMessage::ClockProbe {
                controller_ns: sent,
            })?;
            let server_ns = match self.ctl.recv(self.timeout, "a clock reply")? {
                JobMessage::ClockReply {
                    controller_ns,
                    server_ns,
                } if controller_ns == sent => server_ns,
                m => return Err(unexpected(&m, "a clock reply")),
            };
            let back = unix_ns(SystemTime::now());
            let rtt_ns = back.saturating_sub(sent);
            let midpoint = sent + rtt_ns / 2;
            let sample = ClockOffset {
                offset_ns: (i128::from(server_ns) - i128::from(midpoint))
                    .clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                    as i64,
                rtt_ns,
            };
            if best.is_none_or(|b| sample.rtt_ns < b.rtt_ns) {
                best = Some(sample);
            }
        }
        Ok(best.expect("at least one probe"))
    }
}

//! Jobs: a controller asks this server to act for it (issue 14). Two kinds:
//!
//! - [`test`]: a test from this server ("A") to another ("B"), `longhaul test A --to B`, whose
//!   report streams back to the controller as it goes; A runs an ordinary test client
//!   ([`crate::run_test`]) against B;
//! - `measure`: `longhaul monitor`'s probe streams and traceroutes from this server to another;
//! - [`copy`]: a third-party copy, `longhaul copy A:PATH B:DEST`: B issues the controller a
//!   one-time ticket, and A sends files under its root to B's root as a `longhaul send` client
//!   proving the ticket's key; both report to the controller. [`stripe`] runs one copy over
//!   several pairs at once (`--stripe`).
//!
//! The controller carries no data: only requests, reports and progress cross job connections.
//! The conversation is `longhaul_fleet::msg`'s; its handshake is the transfer's mutual
//! challenge–response with a job's own proof and session contexts
//! (`longhaul_transfer::auth::Key::job_proof`, `job_session`), and every frame after it is sealed.
//! A server accepts only the controllers of its `--controllers` file ([`Controllers`]), each known
//! by its key, and checks every request against that controller's limits (`longhaul_fleet::Limits`)
//! and its count of running jobs before it connects anywhere; a refusal names the limit.
//! [`client`] is the controller's side.

use std::time::{Duration, Instant, SystemTime};

use longhaul_fleet::msg::MAX_CLOCK_PROBES;
use longhaul_fleet::{JOB_VERSION, JobMessage};
use longhaul_transfer::auth::Role;

use crate::EngineError;
use crate::channel::Channel;
use crate::control;
use crate::transfer::conn::{bound, seal};

mod client;
mod conn;
mod controllers;
mod copy;
mod measure;
mod stripe;
mod test;

pub use client::{ClockOffset, JobClient};
use conn::{AUTHENTICATED_FRAME_LIMIT, JobConn, nonce, unexpected};
pub use conn::{target_family, unix_ns};
pub use controllers::Controllers;
pub(crate) use controllers::{Asked, JobContext, JobDone};
pub use copy::{CopyResult, RemoteCopy, run_remote_copy};
pub use stripe::{STRIPE_CHUNK, StripePair, StripedResult, run_striped_copy};
pub use test::{RemoteTest, TestTo, run_remote_test};

/// How long an authenticated controller has to send its request (after its clock probes, if any).
const REQUEST_WAIT: Duration = Duration::from_secs(60);

/// Serves one job connection (after its preamble): the handshake by `deadline`, the request within
/// [`REQUEST_WAIT`] after it, the checks, the job, its report. Errors are sent to the controller
/// before they are returned.
pub(crate) fn serve(conn: Channel, cx: &JobContext<'_>) -> Result<JobDone, EngineError> {
    let mut ctl = JobConn::new(conn);
    let result = serve_on(&mut ctl, cx);
    if let Err(e) = &result
        && !matches!(e, EngineError::Peer(_) | EngineError::Closed(_))
    {
        let _ = ctl.send(&JobMessage::Error {
            message: e.for_peer(),
        });
        control::linger_close(ctl.channel());
    }
    result
}

fn serve_on(ctl: &mut JobConn, cx: &JobContext<'_>) -> Result<JobDone, EngineError> {
    let asked = handshake(ctl, cx.controllers, cx.deadline)?;
    // An authenticated controller may take longer to ask: a campaign reaches all its servers
    // first, and one that is slow to answer (up to the controller's connect timeout) must not make
    // the others give up on it.
    let asked_by = Instant::now() + REQUEST_WAIT;
    let mut probes = 0;
    loop {
        match ctl.recv_by(asked_by, "the job")? {
            JobMessage::ClockProbe { controller_ns } if probes < MAX_CLOCK_PROBES => {
                probes += 1;
                ctl.send(&JobMessage::ClockReply {
                    controller_ns,
                    server_ns: unix_ns(SystemTime::now()),
                })?;
            }
            m @ JobMessage::RunTest { .. } => return test::serve(ctl, &asked, m, cx),
            m @ JobMessage::IssueTicket { .. } => return copy::issue(ctl, &asked, m, cx),
            m @ JobMessage::Copy { .. } => return copy::send(ctl, &asked, m, cx),
            m @ JobMessage::RunProbe { .. } => return measure::serve_probe(ctl, &asked, m, cx),
            m @ JobMessage::Trace { .. } => return measure::serve_trace(ctl, &asked, m),
            m => return Err(unexpected(&m, "the job")),
        }
    }
}

/// The server's half of the job handshake: knows the controller by its key id, proves the key
/// first, checks the controller's proof; every frame after the controller's proof is sealed.
fn handshake<'a>(
    ctl: &mut JobConn,
    controllers: &'a Controllers,
    deadline: Instant,
) -> Result<Asked<'a>, EngineError> {
    let (version, id, client_nonce) = match ctl.recv_by(deadline, "job hello")? {
        JobMessage::JobHello {
            version,
            key_id,
            client_nonce,
        } => (version, key_id, client_nonce),
        m => return Err(unexpected(&m, "job hello")),
    };
    if version != JOB_VERSION {
        return Err(EngineError::Version {
            ours: JOB_VERSION,
            theirs: version,
        });
    }
    if controllers.is_empty() {
        return Err(EngineError::Transfer(
            "this server takes no jobs (start it with --controllers FILE)".into(),
        ));
    }
    let Some(c) = controllers.by_id(&id) else {
        return Err(EngineError::Transfer(format!(
            "unknown controller: key id {} is not in this server's --controllers file",
            longhaul_transfer::digest::to_hex(&id)
        )));
    };
    let sent_nonce = nonce()?;
    let (server_nonce, client_nonce) = bound(ctl, &sent_nonce, &client_nonce);
    ctl.send(&JobMessage::AuthChallenge {
        server_nonce: sent_nonce,
        server_proof: c.key.job_proof(Role::Server, &server_nonce, &client_nonce),
    })?;
    let proof = match ctl.recv_by(deadline, "the controller's proof")? {
        JobMessage::AuthResponse { client_proof } => client_proof,
        m => return Err(unexpected(&m, "the controller's proof")),
    };
    let keys = c.key.job_session(&server_nonce, &client_nonce);
    seal(ctl, &keys, Role::Server);
    if c.key
        .verify_job(Role::Client, &server_nonce, &client_nonce, &proof)
        .is_err()
    {
        return Err(EngineError::Transfer(format!(
            "authentication failed: the controller does not hold the key of controller {}",
            c.spec.name
        )));
    }
    ctl.set_frame_limit(AUTHENTICATED_FRAME_LIMIT);
    ctl.send(&JobMessage::AuthOk {
        controller: c.spec.name.clone(),
    })?;
    Ok(Asked {
        controller: c,
        server_nonce,
        client_nonce,
    })
}

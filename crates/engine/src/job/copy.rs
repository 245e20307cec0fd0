//! The copy job: `longhaul copy A:PATH B:DEST`, a third-party copy.
//!
//! 1. The controller asks B for a ticket ([`issue`]): B checks that it serves files and that the
//!    controller has a free job slot, and answers with a ticket id. B and the controller both
//!    derive the ticket's key from their connection's handshake (`Key::ticket_key`).
//! 2. The controller asks A to copy ([`send`]), handing it the ticket's key sealed for A's
//!    connection. A checks its own limits for the controller and sends the files under its root
//!    to B exactly as `longhaul send` would, proving the ticket's key instead of B's own: A and B
//!    authenticate each other with a key only they and the controller know. A relays its events
//!    and its summary to the controller.
//! 3. B admits one transfer with the ticket ([`Tickets::take`]): a send, into the ticket's `dest`,
//!    within the controller's limits on B, and reports what it received and verified to the
//!    controller when it ends. A ticket not presented within [`TICKET_WAIT`], or whose controller
//!    hangs up first, is revoked.
//!
//! B's resume journal is keyed by B's own key, not the ticket's, so the same command run again
//! after any failure resumes: only what is missing moves. [`run_remote_copy`] is the controller.

use std::io::Read;
use std::net::Shutdown;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use longhaul_fleet::JobMessage;
use longhaul_fleet::msg::TargetFamily;
use longhaul_transfer::RelPath;
use longhaul_transfer::auth::{Key, TicketId};
use longhaul_transfer::manifest::ModePolicy;
use longhaul_transfer::report::{Event, Summary};
use longhaul_transfer::stripe::Stripe;
use tracing::{info, warn};

use super::client::JobClient;
use super::conn::{JobConn, family, unexpected};
use super::controllers::{Asked, Controller, JobContext, JobDone};
use crate::address::Family;
use crate::channel::Channel;
use crate::tls::ClientTlsConfig;
use crate::transfer::ticket::{Grant, TICKET_WAIT, Tickets};
use crate::transfer::{Endpoint, TransferConfig};
use crate::{EngineError, random};

/// Revokes a ticket when its job ends, however it ends.
struct Revoke<'a>(&'a Tickets, TicketId);

impl Drop for Revoke<'_> {
    fn drop(&mut self) {
        self.0.revoke(&self.1);
    }
}

/// B's side: issues a ticket for the copy the controller asked for (`m`, an `issue_ticket`), waits
/// for the transfer that presents it, and reports that transfer's end.
pub(super) fn issue(
    ctl: &mut JobConn,
    asked: &Asked<'_>,
    m: JobMessage,
    cx: &JobContext<'_>,
) -> Result<JobDone, EngineError> {
    let JobMessage::IssueTicket {
        dest,
        overwrite,
        fsync,
        encrypt,
        stripe,
    } = m
    else {
        return Err(unexpected(&m, "issue_ticket"));
    };
    let c = asked.controller;
    if cx.files.is_none() {
        return Err(no_files());
    }
    let _slot = c.slot()?;
    let mut id = TicketId([0; 16]);
    random::fill(&mut id.0, "a ticket id")?;
    let key = c
        .key
        .ticket_key(&asked.server_nonce, &asked.client_nonce, &id);
    let (tx, rx) = mpsc::channel();
    let tickets = cx.controllers.tickets();
    let where_to = dest
        .as_ref()
        .map_or_else(|| "the root".to_string(), |d| format!("{:?}", d.as_str()));
    let grant = Grant {
        controller: c.spec.name.clone(),
        limits: c.spec.limits.clone(),
        dest,
        overwrite,
        fsync,
        encrypted: encrypt,
        stripe,
        report: tx,
    };
    let expires = tickets.issue(id, key, grant);
    let _revoke = Revoke(tickets, id);
    info!(controller = %c.spec.name, dest = %where_to, "job: copy ticket issued");
    ctl.send(&JobMessage::Ticket { id })?;
    let result = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(r) => break r,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err("the transfer ended without a report".to_string());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if !tickets.is_waiting(&id) {
            // Taken: the transfer runs (within its own idle timeout and this controller's
            // limits); its report comes when it ends.
            continue;
        }
        if Instant::now() >= expires {
            return Err(EngineError::Timeout(format!(
                "the transfer of this copy ticket (none presented it within {} s)",
                TICKET_WAIT.as_secs()
            )));
        }
        // A controller that hangs up before the transfer starts revokes its ticket.
        if let Some(m) = ctl.recv_until(Instant::now() + Duration::from_millis(1))? {
            return Err(unexpected(&m, "the copy's transfer"));
        }
    };
    match result {
        Ok(summary) => {
            let what = format!(
                "copy into {where_to}: {} files verified, {} bytes moved",
                summary.files, summary.bytes_moved
            );
            report_done(ctl, c, what, summary)
        }
        Err(why) => Err(EngineError::Transfer(format!(
            "the copy into {where_to} failed here: {why}"
        ))),
    }
}

/// A's side: sends the files of the copy the controller asked for (`m`, a `copy`) to B with B's
/// ticket, relaying events and the summary.
pub(super) fn send(
    ctl: &mut JobConn,
    asked: &Asked<'_>,
    m: JobMessage,
    cx: &JobContext<'_>,
) -> Result<JobDone, EngineError> {
    let JobMessage::Copy {
        to,
        port,
        family: fam,
        paths,
        dest,
        overwrite,
        fsync,
        ticket,
        sealed_key,
        streams,
        rate_bps,
        chunk_size,
        congestion,
        idle_timeout_s,
        encrypt,
        stripe,
    } = m
    else {
        return Err(unexpected(&m, "copy"));
    };
    let c = asked.controller;
    let Some(files) = cx.files else {
        return Err(no_files());
    };
    let family = family(fam);
    let host = c.reach(&to, port, family)?;
    let _slot = c.slot()?;
    let target = format!("{to} port {port}");
    info!(controller = %c.spec.name, %target, paths = paths.len(), "job: copy");
    let cfg = TransferConfig {
        // A copy's parameters come from its controller, which asks for no packet trains.
        pace_auto: false,
        fast_start: false,
        // A copy's data goes over TCP (a job spec names no transport yet).
        transport: longhaul_proto::msg::Transport::Tcp,
        endpoint: Endpoint {
            host,
            port,
            family,
            bind: None,
            timeout: cx.connect_timeout,
            // The ticket's key proofs, bound to the TLS session, authenticate B.
            encrypt: encrypt.then(ClientTlsConfig::default),
        },
        key: c.key.open_ticket(
            &asked.server_nonce,
            &asked.client_nonce,
            &ticket,
            &sealed_key,
        ),
        ticket: Some(ticket),
        streams,
        rate_bps,
        // A controller's job carries a rate as a limit, not as the path's.
        rate_is_path: false,
        chunk_size,
        overwrite,
        fsync,
        congestion,
        idle_timeout: Duration::from_secs(idle_timeout_s),
        time_limit: Some(Duration::from_nanos(c.spec.limits.max_duration.0)),
        stripe,
        // The receiver applies its own operator's rules.
        modes: ModePolicy {
            umask: 0o022,
            keep_special_bits: false,
        },
        chmod_existing_dirs: false,
    };
    let limits = &c.spec.limits;
    let admit = |streams: u32, rate_bps: u64, bytes: u64| {
        limits
            .check_copy(streams, rate_bps, bytes)
            .map_err(|why| c.refuse(why))
    };
    let writer = ctl.writer();
    let mut gone = false;
    let mut relay = |e: &Event| {
        if !gone && let Err(err) = writer.send(&JobMessage::CopyEvent { event: e.clone() }) {
            warn!("job: the controller is gone ({err}); the copy runs to its end");
            gone = true;
        }
    };
    let summary =
        crate::transfer::send_from_root(&cfg, &files.root, &paths, dest, &admit, &mut relay)
            .map_err(|e| match e {
                // B's own words: it refused or failed (its limits, its disk, ...).
                EngineError::Peer(why) => EngineError::Transfer(format!("{target} says: {why}")),
                e => {
                    EngineError::Transfer(format!("the copy to {target} failed: {}", e.for_peer()))
                }
            })?;
    let what = format!(
        "copy to {target}: {} files, {} bytes moved",
        summary.files, summary.bytes_moved
    );
    report_done(ctl, c, what, summary)
}

/// Sends a side's summary to the controller; `what` is the server's log line.
fn report_done(
    ctl: &JobConn,
    c: &Controller,
    what: String,
    summary: Summary,
) -> Result<JobDone, EngineError> {
    ctl.send(&JobMessage::CopyDone {
        summary: Box::new(summary),
    })?;
    Ok(JobDone {
        controller: c.spec.name.clone(),
        what,
    })
}

fn no_files() -> EngineError {
    EngineError::Transfer(
        "this server does not serve files (start it with --root DIR --key FILE)".into(),
    )
}

/// A copy from one server to another, asked by this controller.
#[derive(Debug, Clone)]
pub struct RemoteCopy {
    /// The sending server ("A") and its port.
    pub from: String,
    /// A's port.
    pub from_port: u16,
    /// The receiving server ("B"), as A and the controller name it.
    pub to: String,
    /// B's port.
    pub to_port: u16,
    /// Address family for reaching A and B from the controller.
    pub family: Family,
    /// Address family A uses for B.
    pub target_family: TargetFamily,
    /// The controller's key, as both servers' `--controllers` files list it.
    pub key: Key,
    /// What to send, relative to A's root.
    pub paths: Vec<RelPath>,
    /// Where it lands, relative to B's root (`None`: the root).
    pub dest: Option<RelPath>,
    /// Replace existing files that differ.
    pub overwrite: bool,
    /// fsync each file before it is renamed into place.
    pub fsync: bool,
    /// Data streams (`None`: from A's window plan).
    pub streams: Option<u32>,
    /// Target rate of all streams together, bit/s.
    pub rate_bps: u64,
    /// Chunk size (`None`: A chooses).
    pub chunk_size: Option<u64>,
    /// Congestion control for the data connections.
    pub congestion: Option<String>,
    /// A gives up after this long without progress.
    pub idle_timeout: Duration,
    /// Connect timeout, and the deadline of each handshake step.
    pub timeout: Duration,
    /// `--encrypt`: the job connections to A and B, and A's transfer to B, in TLS (the job
    /// connections with these settings).
    pub encrypt: Option<ClientTlsConfig>,
    /// One stripe of a striped copy (`super::stripe`): B's ticket admits only it, A sends only it.
    pub stripe: Option<Stripe>,
}

impl JobClient {
    /// Asks the server for a ticket admitting one copy into `dest` under its root: the ticket's
    /// id and key. The ticket stays valid while this connection is open (at most 60 s
    /// until a transfer presents it); the server reports that transfer's end on it. With
    /// `encrypt`, the ticket admits only a transfer in TLS; with `stripe`, only that stripe of a
    /// striped copy.
    pub fn issue_ticket(
        &mut self,
        dest: Option<RelPath>,
        overwrite: bool,
        fsync: bool,
        encrypt: bool,
        stripe: Option<Stripe>,
    ) -> Result<(TicketId, Key), EngineError> {
        self.ctl.send(&JobMessage::IssueTicket {
            dest,
            overwrite,
            fsync,
            encrypt,
            stripe,
        })?;
        match self.ctl.recv(self.timeout, "a copy ticket")? {
            JobMessage::Ticket { id } => Ok((
                id,
                self.key
                    .ticket_key(&self.server_nonce, &self.client_nonce, &id),
            )),
            m => Err(unexpected(&m, "a copy ticket")),
        }
    }
}

/// How a copy ended, as each server saw it: A's sending summary and B's receiving one (files
/// verified there), or why each failed.
#[derive(Debug)]
pub struct CopyResult {
    /// A's summary, or its error naming A.
    pub sender: Result<Summary, String>,
    /// B's summary, or its error naming B.
    pub receiver: Result<Summary, String>,
}

/// Asks `cfg.to` for a ticket and `cfg.from` to copy with it; `on_event` sees A's events as they
/// come. An error here means nothing was asked of A (B refused, or A could not be reached); once
/// A is asked, the result says how each side ended.
pub fn run_remote_copy(
    cfg: &RemoteCopy,
    on_event: &mut dyn FnMut(&Event),
) -> Result<CopyResult, EngineError> {
    let (a_name, b_name) = (
        format!("{} port {}", cfg.from, cfg.from_port),
        format!("{} port {}", cfg.to, cfg.to_port),
    );
    let receiving = |e: EngineError| {
        EngineError::Transfer(format!("the receiving server {b_name}: {}", said(e)))
    };
    let sending =
        |e: EngineError| EngineError::Transfer(format!("the sending server {a_name}: {}", said(e)));
    let mut b = JobClient::connect(
        &cfg.to,
        cfg.to_port,
        cfg.family,
        &cfg.key,
        cfg.timeout,
        cfg.encrypt.as_ref(),
    )
    .map_err(receiving)?;
    let (id, ticket_key) = b
        .issue_ticket(
            cfg.dest.clone(),
            cfg.overwrite,
            cfg.fsync,
            cfg.encrypt.is_some(),
            cfg.stripe,
        )
        .map_err(receiving)?;
    let mut a = match ask_sender(cfg, id, &ticket_key) {
        Ok(a) => a,
        Err(e) => {
            // B's ticket would wait for a transfer that never comes: hanging up revokes it (and
            // frees the job slot it holds before this command returns).
            hang_up(b.ctl.channel(), cfg.timeout);
            return Err(sending(e));
        }
    };
    // B reports once its transfer ends; a thread waits for it while A's events come here.
    let b_sock = b.ctl.socket().try_clone().ok();
    let b_closer = b.ctl.writer();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = match b
            .ctl
            .recv(Duration::from_secs(86_400 * 7), "the copy's end")
        {
            Ok(JobMessage::CopyDone { summary }) => Ok(*summary),
            Ok(m) => Err(unexpected(&m, "the copy's end")),
            Err(e) => Err(e),
        };
        let _ = tx.send(r);
    });
    // A sends progress every second while data flows; its set-up steps each have the timeout.
    let patience = cfg.idle_timeout + 4 * cfg.timeout;
    let sender = loop {
        match a.ctl.recv(patience, "the copy's progress") {
            Ok(JobMessage::CopyEvent { event }) => on_event(&event),
            Ok(JobMessage::CopyDone { summary }) => break Ok(*summary),
            Ok(m) => {
                break Err(format!(
                    "{a_name}: {}",
                    unexpected(&m, "the copy's progress")
                ));
            }
            Err(e) => break Err(format!("{a_name}: {}", said(e))),
        }
    };
    drop(a);
    // After A's end, B's comes within a few round trips. If A failed, B's ticket may still wait
    // for a transfer that will never come: hanging up revokes it (B still reports the end of a
    // transfer it admitted).
    if sender.is_err() {
        b_closer.close();
    }
    let wait = if sender.is_ok() {
        cfg.idle_timeout + cfg.timeout
    } else {
        cfg.timeout
    };
    let receiver = match rx.recv_timeout(wait) {
        Ok(Ok(summary)) => Ok(summary),
        Ok(Err(EngineError::Closed(_))) if sender.is_err() => {
            Err(format!("{b_name}: received nothing; its ticket is revoked"))
        }
        Ok(Err(e)) => Err(format!("{b_name}: {}", said(e))),
        Err(_) => {
            if let Some(s) = &b_sock {
                let _ = s.shutdown(Shutdown::Both);
            }
            Err(format!(
                "{b_name}: no report of the copy's end within {} s",
                wait.as_secs()
            ))
        }
    };
    let _ = waiter.join();
    Ok(CopyResult { sender, receiver })
}

/// A server's error as the controller shows it: what the server said in its own words, or what
/// went wrong with the connection to it.
fn said(e: EngineError) -> String {
    match e {
        EngineError::Peer(why) => why,
        e => e.to_string(),
    }
}

/// Connects to the sending server and asks it to copy with ticket `id`, its key sealed for
/// this connection.
fn ask_sender(cfg: &RemoteCopy, id: TicketId, ticket_key: &Key) -> Result<JobClient, EngineError> {
    let a = JobClient::connect(
        &cfg.from,
        cfg.from_port,
        cfg.family,
        &cfg.key,
        cfg.timeout,
        cfg.encrypt.as_ref(),
    )?;
    let sealed_key = cfg
        .key
        .seal_ticket(&a.server_nonce, &a.client_nonce, &id, ticket_key);
    a.ctl.send(&JobMessage::Copy {
        to: cfg.to.clone(),
        port: cfg.to_port,
        family: cfg.target_family,
        paths: cfg.paths.clone(),
        dest: cfg.dest.clone(),
        overwrite: cfg.overwrite,
        fsync: cfg.fsync,
        ticket: id,
        sealed_key,
        streams: cfg.streams,
        rate_bps: cfg.rate_bps,
        chunk_size: cfg.chunk_size,
        congestion: cfg.congestion.clone(),
        idle_timeout_s: cfg.idle_timeout.as_secs().clamp(1, 86_400),
        encrypt: cfg.encrypt.is_some(),
        stripe: cfg.stripe,
    })?;
    Ok(a)
}

/// Closes our side of a job connection and waits (up to `timeout`) for the server to close its
/// own, so that whatever the job held is released when this returns.
fn hang_up(channel: &Channel, timeout: Duration) {
    let _ = channel.shutdown_write();
    let sock = channel.socket();
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match (&*sock).read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

//! A relay that counts round trips: a TCP path in virtual time, one tick per one-way delay.
//!
//! [`FlightRelay`] sits between a client and a server on loopback and moves their bytes in lock
//! step. Whatever either side sends during tick `t` (a new connection, bytes, a close) reaches the
//! other side at tick `t + 1`; a tick ends once both sides have been quiet for a while (they have
//! reacted to everything delivered), and the relay then jumps to the next tick that has something
//! to deliver. A connection follows TCP's handshake: opened at tick `c`, it reaches the server at
//! `c + 1` (the SYN), and the client's bytes on it leave no earlier than `c + 2` (when the
//! SYN-ACK is back), arriving a tick later. So two ticks are one round trip, whatever the
//! machine's speed: a test counts the round trips of a conversation, not seconds.
//!
//! What it records: the tick at which each side first sent a given byte string (say a file's
//! first bytes: when the first data left) and the tick of the client's last close (the client
//! ended there: a process closes its sockets when it exits).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How long both sides stay quiet before a tick is over (they have answered what reached them).
pub const QUIET: Duration = Duration::from_millis(250);

/// A relay between a client (who connects to [`FlightRelay::addr`]) and a server at `to`.
pub struct FlightRelay {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
}

/// What the relay saw, in ticks (two ticks are one round trip).
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// The tick the relay is at.
    pub tick: u64,
    /// Connections the client opened, with the tick of each.
    pub opened: Vec<u64>,
    /// The tick the client's side of the last connection closed.
    pub client_closed: Option<u64>,
    /// The tick at which the client first sent the watched bytes (when they left, after the
    /// connection's handshake).
    pub marker_sent: Option<u64>,
}

impl Log {
    /// The round trips from the first connection to the client's end.
    pub fn client_round_trips(&self) -> Option<f64> {
        Some(self.client_closed?.saturating_sub(*self.opened.first()?) as f64 / 2.0)
    }

    /// The round trips from the first connection to the watched bytes leaving.
    pub fn marker_round_trips(&self) -> Option<f64> {
        Some(self.marker_sent?.saturating_sub(*self.opened.first()?) as f64 / 2.0)
    }
}

enum Side {
    Client,
    Server,
}

enum Event {
    Accepted(TcpStream),
    Bytes(usize, Side, Vec<u8>),
    Closed(usize, Side),
}

enum Action {
    Connect(usize),
    ToServer(usize, Vec<u8>),
    ToClient(usize, Vec<u8>),
    CloseServer(usize),
    CloseClient(usize),
}

struct Conn {
    client: TcpStream,
    server: Option<TcpStream>,
    opened: u64,
    /// The last bytes the client sent on it, to find the marker across reads.
    tail: Vec<u8>,
}

impl FlightRelay {
    /// Starts a relay to `to`, watching the client's bytes for `marker` (empty: none).
    pub fn start(to: SocketAddr, marker: &[u8]) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Log::default()));
        let (tx, rx) = mpsc::channel();
        let accept_tx = tx.clone();
        thread::spawn(move || {
            for c in listener.incoming() {
                let Ok(c) = c else { return };
                if accept_tx.send(Event::Accepted(c)).is_err() {
                    return;
                }
            }
        });
        let (marker, mine) = (marker.to_vec(), Arc::clone(&log));
        thread::spawn(move || run(to, &rx, &tx, &marker, &mine));
        Ok(Self { addr, log })
    }

    /// Where the client connects.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the relay has seen so far.
    pub fn log(&self) -> Log {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The log once the client has closed every connection it opened and the relay has been
    /// quiet since (`None` if that does not happen within `within`).
    pub fn log_when_client_gone(&self, within: Duration) -> Option<Log> {
        let end = std::time::Instant::now() + within;
        while std::time::Instant::now() < end {
            let l = self.log();
            if l.client_closed.is_some() {
                return Some(l);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

/// Reads `s` into events until it closes.
fn reader(mut s: TcpStream, id: usize, client: bool, tx: Sender<Event>) {
    let mut buf = vec![0u8; 1 << 16];
    let side = || if client { Side::Client } else { Side::Server };
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Event::Closed(id, side()));
                return;
            }
            Ok(n) => {
                if tx
                    .send(Event::Bytes(id, side(), buf[..n].to_vec()))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

fn run(to: SocketAddr, rx: &Receiver<Event>, tx: &Sender<Event>, marker: &[u8], log: &Mutex<Log>) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut due: BTreeMap<u64, Vec<Action>> = BTreeMap::new();
    let mut open_client_sides = 0usize;
    let mut tick = 0u64;
    loop {
        // The tick: take what the sides send until they are quiet; with nothing left to
        // deliver, wait as long as it takes for something to happen.
        let ev = if due.is_empty() {
            match rx.recv() {
                Ok(ev) => Some(ev),
                Err(_) => return,
            }
        } else {
            match rx.recv_timeout(QUIET) {
                Ok(ev) => Some(ev),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let Some(ev) = ev else {
            // Quiet: on to the next tick with deliveries, and make them.
            let (&next, _) = due.iter().next().expect("not empty");
            tick = next;
            log.lock().unwrap_or_else(|e| e.into_inner()).tick = tick;
            for a in due.remove(&next).expect("present") {
                deliver(a, &mut conns, to, tx);
            }
            continue;
        };
        let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
        match ev {
            Event::Accepted(c) => {
                let id = conns.len();
                let _ = c.set_nodelay(true);
                if let Ok(r) = c.try_clone() {
                    let tx = tx.clone();
                    thread::spawn(move || reader(r, id, true, tx));
                }
                conns.push(Conn {
                    client: c,
                    server: None,
                    opened: tick,
                    tail: Vec::new(),
                });
                open_client_sides += 1;
                l.opened.push(tick);
                l.client_closed = None;
                due.entry(tick + 1).or_default().push(Action::Connect(id));
            }
            Event::Bytes(id, Side::Client, b) => {
                let c = &mut conns[id];
                // Bytes leave once the handshake is done (the SYN-ACK back at opened + 2).
                let leave = tick.max(c.opened + 2);
                if l.marker_sent.is_none() && !marker.is_empty() {
                    let mut hay = std::mem::take(&mut c.tail);
                    hay.extend_from_slice(&b);
                    if hay.windows(marker.len()).any(|w| w == marker) {
                        l.marker_sent = Some(leave);
                    }
                    let keep = hay.len().saturating_sub(marker.len() - 1);
                    c.tail = hay.split_off(keep);
                }
                due.entry(leave + 1)
                    .or_default()
                    .push(Action::ToServer(id, b));
            }
            Event::Bytes(id, Side::Server, b) => {
                due.entry(tick + 1)
                    .or_default()
                    .push(Action::ToClient(id, b));
            }
            Event::Closed(id, Side::Client) => {
                let leave = tick.max(conns[id].opened + 2);
                open_client_sides = open_client_sides.saturating_sub(1);
                if open_client_sides == 0 {
                    l.client_closed = Some(tick);
                }
                due.entry(leave + 1)
                    .or_default()
                    .push(Action::CloseServer(id));
            }
            Event::Closed(id, Side::Server) => {
                due.entry(tick + 1)
                    .or_default()
                    .push(Action::CloseClient(id));
            }
        }
    }
}

/// Makes one delivery: connects to the server, writes to a side, or passes a close on.
fn deliver(a: Action, conns: &mut [Conn], to: SocketAddr, tx: &Sender<Event>) {
    match a {
        Action::Connect(id) => {
            let Ok(s) = TcpStream::connect(to) else {
                let _ = conns[id].client.shutdown(Shutdown::Both);
                return;
            };
            let _ = s.set_nodelay(true);
            if let Ok(r) = s.try_clone() {
                let tx = tx.clone();
                thread::spawn(move || reader(r, id, false, tx));
            }
            conns[id].server = Some(s);
        }
        Action::ToServer(id, b) => {
            if let Some(s) = conns[id].server.as_mut() {
                let _ = s.write_all(&b);
            }
        }
        Action::ToClient(id, b) => {
            let _ = conns[id].client.write_all(&b);
        }
        Action::CloseServer(id) => {
            if let Some(s) = &conns[id].server {
                let _ = s.shutdown(Shutdown::Write);
            }
        }
        Action::CloseClient(id) => {
            let _ = conns[id].client.shutdown(Shutdown::Write);
        }
    }
}

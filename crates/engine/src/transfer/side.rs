//! One side of a transfer as it runs: its counters, the events it reports ([`Event`]), the summary it
//! ends with ([`Summary`]), and the timeouts both sides keep. The sending and the receiving side
//! (`source`, `sink`) and the conversation around them (the parent module) all use these; keeping them
//! here lets the children depend on this module rather than on their parent.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::EngineError;

/// How long a side waits for each set-up step of the conversation (manifest, resume state, done).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often progress is reported.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// What a transfer reports as it goes.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Data is about to flow.
    Started {
        /// Data streams.
        streams: u32,
        /// Chunk size, bytes.
        chunk_size: u64,
        /// Files in the transfer.
        files: u64,
        /// Their total size.
        bytes_total: u64,
        /// What this run has to move (less when resuming or when files are already there).
        bytes_to_send: u64,
    },
    /// Every second.
    Progress {
        /// Payload bytes moved so far in this run.
        bytes: u64,
        /// Of `bytes_to_send`.
        bytes_to_send: u64,
        /// Files verified and in place.
        files: u64,
        /// Seconds since the start.
        seconds: f64,
        /// Rate over the last interval, bit/s.
        bits_per_second: f64,
    },
    /// A file is verified and in place, or failed.
    File {
        /// Its path in the transfer.
        path: String,
        /// Why it failed, if it did.
        error: Option<String>,
    },
}

/// The end of a transfer.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `send` or `get`.
    pub direction: String,
    /// Files verified and in place (including those that already were).
    pub files: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Entries left out by the sender (special files, links leaving the tree).
    pub skipped: Vec<String>,
    /// Payload bytes moved in this run.
    pub bytes_moved: u64,
    /// What this run had to move.
    pub bytes_to_send: u64,
    /// Seconds from the first byte to the end.
    pub seconds: f64,
    /// bytes_moved × 8 / seconds.
    pub bits_per_second: f64,
    /// Data streams.
    pub streams: u32,
    /// Chunk size, bytes.
    pub chunk_size: u64,
    /// Chunk-buffer memory bound of each side, bytes (streams × chunk × 2).
    pub memory_bound: u64,
    /// RTT measured on the control connection, ns.
    pub rtt_ns: u64,
    /// Chunks sent again after failing verification.
    pub chunks_resent: u64,
    /// TCP retransmits on the data connections (known when this side sends).
    pub retransmits: Option<u64>,
    /// Whether every file was verified end to end (file digests equal).
    pub verified: bool,
}

/// One side's running counters and its event sink.
pub(crate) struct Side<'a> {
    on_event: &'a mut dyn FnMut(&Event),
    start: Instant,
    pub(crate) to_send: u64,
    pub(crate) bytes_moved: u64,
    pub(crate) files_ok: u64,
    pub(crate) failed: Vec<String>,
    pub(crate) resent: u64,
    last_activity: Instant,
    last_bytes: u64,
    last_tick: (Instant, u64),
    idle_timeout: Duration,
}

impl<'a> Side<'a> {
    pub(crate) fn new(on_event: &'a mut dyn FnMut(&Event), idle_timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            on_event,
            start: now,
            to_send: 0,
            bytes_moved: 0,
            files_ok: 0,
            failed: Vec::new(),
            resent: 0,
            last_activity: now,
            last_bytes: 0,
            last_tick: (now, 0),
            idle_timeout,
        }
    }

    pub(crate) fn event(&mut self, e: Event) {
        if matches!(e, Event::Started { .. }) {
            self.start = Instant::now();
            self.last_tick = (self.start, 0);
        }
        (self.on_event)(&e);
    }

    pub(crate) fn progress(&mut self, bytes: u64, files: u64) {
        let now = Instant::now();
        let (t0, b0) = self.last_tick;
        let dt = now.duration_since(t0).as_secs_f64().max(1e-9);
        self.last_tick = (now, bytes);
        let e = Event::Progress {
            bytes,
            bytes_to_send: self.to_send,
            files,
            seconds: now.duration_since(self.start).as_secs_f64(),
            bits_per_second: bytes.saturating_sub(b0) as f64 * 8.0 / dt,
        };
        (self.on_event)(&e);
    }

    pub(crate) fn file_done(&mut self, path: String, error: Option<String>) {
        match &error {
            None => self.files_ok += 1,
            Some(r) => self.failed.push(r.clone()),
        }
        (self.on_event)(&Event::File { path, error });
    }

    /// A control message arrived.
    pub(crate) fn touch(&mut self) {
        self.last_activity = Instant::now();
    }

    /// Fails when nothing at all happened for the idle timeout.
    pub(crate) fn check_idle(&mut self, bytes: u64) -> Result<(), EngineError> {
        let now = Instant::now();
        if bytes != self.last_bytes {
            self.last_bytes = bytes;
            self.last_activity = now;
        }
        if now.duration_since(self.last_activity) > self.idle_timeout {
            return Err(EngineError::Transfer(format!(
                "no progress for {} s: the peer or the path is gone; run the same command again \
to resume",
                self.idle_timeout.as_secs()
            )));
        }
        Ok(())
    }

    /// Seconds since data started to flow (since the side was made, before that).
    pub(crate) fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

//! One side of a transfer as it runs: its counters, the events it reports
//! (`longhaul_transfer::report`), and the timeouts both sides keep. The sending and the receiving side
//! (`source`, `sink`) and the conversation around them (the parent module) all use these; keeping them
//! here lets the children depend on this module rather than on their parent.

use std::time::{Duration, Instant};

use longhaul_transfer::report::{Event, StripeSummary};

use crate::EngineError;

/// How long a side waits for each set-up step of the conversation (manifest, resume state, done).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often progress is reported.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// One side's running counters and its event sink.
pub(crate) struct Side<'a> {
    on_event: &'a mut dyn FnMut(&Event),
    start: Instant,
    pub(crate) to_send: u64,
    pub(crate) bytes_moved: u64,
    pub(crate) files_ok: u64,
    pub(crate) failed: Vec<String>,
    pub(crate) resent: u64,
    /// Chunks the receiver verified in this run.
    pub(crate) chunks_verified: u64,
    /// A stripe of a striped transfer: which, and how its finish went.
    pub(crate) stripe: Option<StripeSummary>,
    last_activity: Instant,
    last_bytes: u64,
    last_tick: (Instant, u64),
    idle_timeout: Duration,
    /// The end of the time this side may take at all (a controller's `max_duration`).
    time_limit: Option<(Instant, Duration)>,
    /// Set when the server stops (SIGTERM): the side ends, its peer told why.
    stopping: Option<(&'a std::sync::atomic::AtomicBool, &'static str)>,
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
            chunks_verified: 0,
            stripe: None,
            last_activity: now,
            last_bytes: 0,
            last_tick: (now, 0),
            idle_timeout,
            time_limit: None,
            stopping: None,
        }
    }

    /// Ends the side with an error once it has run for `limit` (a third-party copy under a
    /// controller's `max_duration`); its journal stays for a resume.
    pub(crate) fn limit_time(&mut self, limit: Option<Duration>) {
        self.time_limit = limit.map(|l| (Instant::now() + l, l));
    }

    /// Ends the side with `why` once `flag` is set (the server stopping); its journal stays for a
    /// resume.
    pub(crate) fn stop_when(&mut self, flag: &'a std::sync::atomic::AtomicBool, why: &'static str) {
        self.stopping = Some((flag, why));
    }

    /// Whether the server stops: the error that ends the side, with how to resume.
    pub(crate) fn check_stopping(&self) -> Result<(), EngineError> {
        match self.stopping {
            Some((flag, why)) if flag.load(std::sync::atomic::Ordering::Acquire) => Err(
                EngineError::Transfer(format!("{why}; run the same command again to resume")),
            ),
            _ => Ok(()),
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
        if let Some((end, limit)) = self.time_limit
            && now >= end
        {
            return Err(EngineError::Limit(format!(
                "the transfer ran for its limit of {} s (the controller's max_duration here); run \
the same command again to resume",
                limit.as_secs()
            )));
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

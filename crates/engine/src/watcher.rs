//! A thread that watches the data sockets beside a run (the `--pace auto` governor, the fast
//! start's ramp timer) until it is told to stop, and then hands back what it found.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crate::EngineError;

/// The thread and its stop flag; dropping it stops the thread (which ends within its next
/// reading) without waiting for it.
pub(crate) struct Watcher<T> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Watcher<T> {
    /// Starts `name` running `work`, which returns once the flag it is given is set (or sooner).
    /// `what` names it in the error if the thread cannot start.
    pub(crate) fn spawn(
        name: &str,
        what: &str,
        work: impl FnOnce(&AtomicBool) -> T + Send + 'static,
    ) -> Result<Self, EngineError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&flag))
            .map_err(|e| EngineError::io(format!("start {what}"), e))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Asks the thread to stop.
    pub(crate) fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the thread and returns what it found (`None` if it panicked).
    pub(crate) fn finish(mut self) -> Option<T> {
        self.halt();
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl<T> Drop for Watcher<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

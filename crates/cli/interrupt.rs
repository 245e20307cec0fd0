//! SIGINT and SIGTERM for a command whose results are worth keeping. `longhaul test`
//! ([`Interrupts`]): until its work runs, a signal ends the process at once, as it would with no
//! handler; once it runs, the first one asks the work to end and report what ran, and a second
//! ends the process at once. `send` and `get` ([`end_with`]), whose journal already holds every
//! verified chunk: a signal ends the process with a line saying how to resume. Either way the exit
//! status is 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a
//! command a signal ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The handlers' flags.
pub(crate) struct Interrupts {
    /// Set by the first signal once the work runs: end it and report.
    asked: Arc<AtomicBool>,
    /// The work has not started: a signal ends the process.
    idle: Arc<AtomicBool>,
    /// The signal was SIGTERM (else SIGINT).
    term: Arc<AtomicBool>,
}

impl Interrupts {
    /// Handles SIGINT and SIGTERM for the rest of the process's life.
    pub(crate) fn install() -> anyhow::Result<Self> {
        let (asked, idle, term) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(true)),
            Arc::new(AtomicBool::new(false)),
        );
        signal_hook::flag::register(SIGTERM, Arc::clone(&term)).context("cannot handle SIGTERM")?;
        for (signal, status) in [(SIGINT, 130), (SIGTERM, 143)] {
            // signal-hook runs a signal's actions in the order they were registered: the two
            // exits look at the flags before the last action sets one.
            for exit_if in [&idle, &asked] {
                signal_hook::flag::register_conditional_shutdown(
                    signal,
                    status,
                    Arc::clone(exit_if),
                )
                .context("cannot handle SIGINT/SIGTERM")?;
            }
            signal_hook::flag::register(signal, Arc::clone(&asked))
                .context("cannot handle SIGINT/SIGTERM")?;
        }
        Ok(Self { asked, idle, term })
    }

    /// The exit status of work a signal ended: 128 + its number, as a shell reports it (130 for
    /// SIGINT, 143 for SIGTERM).
    pub(crate) fn status(&self) -> std::process::ExitCode {
        let signal = if self.term.load(Ordering::SeqCst) {
            SIGTERM
        } else {
            SIGINT
        };
        std::process::ExitCode::from(128 + signal as u8)
    }

    /// The flag the work watches.
    pub(crate) fn asked(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.asked)
    }

    /// The work runs: from now on the first signal asks it to end.
    pub(crate) fn running(&self) {
        self.idle.store(false, Ordering::SeqCst);
    }
}

/// On the first SIGINT or SIGTERM, prints `message` on stderr and ends the process (a thread of its
/// own waits for the signal). For work whose state a rerun picks up: a transfer's journal records
/// each chunk as it is verified, so ending between two records loses nothing.
pub(crate) fn end_with(message: &'static str) -> anyhow::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot handle SIGINT/SIGTERM")?;
    std::thread::Builder::new()
        .name("lh-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                // A progress bar may hold the line.
                eprintln!("\n{message}");
                std::process::exit(128 + signal);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

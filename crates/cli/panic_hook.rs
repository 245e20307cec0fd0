//! What the process does when it panics. Rust's `print!` panics when its output is gone ("failed
//! printing to stdout: Broken pipe"): a reader such as `head` that has read enough and exited. That
//! is not a bug, so the process ends as coreutils do there, by SIGPIPE, quietly (a shell reports
//! status 141). Any other panic is a bug: one line with the version, where it happened and what to
//! do, and the full report with a backtrace only when `RUST_BACKTRACE` asks for one. A panic on
//! the main thread then exits with status 101; one on another thread is handled by whoever joins
//! it (a server goes on serving).

use std::io::Write;
use std::panic::PanicHookInfo;

/// Installs the hook for the whole process; call first thing in `main`.
pub(crate) fn install() {
    let full_report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = message(info);
        if output_closed(&message) {
            // Resets SIGPIPE (ignored by Rust's runtime) to its default and raises it.
            let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGPIPE);
            std::process::exit(141);
        }
        if backtrace_asked() {
            full_report(info);
            return;
        }
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        // stderr may be gone too: then there is nobody to tell.
        let _ = writeln!(
            std::io::stderr(),
            "longhaul {} panicked{at}: {message}. This is a bug: please report it with the \
             command you ran and this line (README, \"Reporting a bug\"); RUST_BACKTRACE=1 adds a \
             backtrace.",
            env!("CARGO_PKG_VERSION")
        );
    }));
}

/// The panic's message, whatever its payload.
fn message(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Whether `message` is std's panic for a standard output or error whose reader has gone (EPIPE).
fn output_closed(message: &str) -> bool {
    (message.starts_with("failed printing to stdout")
        || message.starts_with("failed printing to stderr"))
        && message.contains(&format!("(os error {})", libc::EPIPE))
}

/// `RUST_BACKTRACE` set to anything but 0, as std reads it.
fn backtrace_asked() -> bool {
    std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0")
}

#[cfg(test)]
mod tests {
    use super::output_closed;

    /// Only std's own message for a vanished reader counts: other output errors (a full disk
    /// behind a redirect) and other panics are bugs or failures worth the report.
    #[test]
    fn only_a_vanished_reader_is_a_closed_output() {
        assert!(output_closed(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(output_closed(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        assert!(!output_closed(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!output_closed(
            "index out of bounds: Broken pipe (os error 32)"
        ));
    }
}

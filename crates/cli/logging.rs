//! Where the binary's logs go, set up once per process: stderr by default, or a file
//! (`server --logfile`). `RUST_LOG` overrides the level a subcommand picks.
//!
//! Colour escapes are written only to a terminal: a log file, or stderr redirected to a file or a
//! pipe (a service manager, `2>log`), gets plain text that grep and log collectors read as is.

use std::io::IsTerminal;

fn filter(level: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level))
}

/// Sends logs to stderr at `level` unless `RUST_LOG` says otherwise; coloured only if stderr is a
/// terminal.
pub(crate) fn to_stderr(level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Appends logs to `file` at `level` unless `RUST_LOG` says otherwise; never coloured.
pub(crate) fn to_file(level: &str, file: std::fs::File) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

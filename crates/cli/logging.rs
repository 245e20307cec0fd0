//! Where the binary's logs go, set up once per process: stderr by default, or a file
//! (`server --logfile`). `RUST_LOG` overrides the level a subcommand picks.
//!
//! Colour escapes are written only to a terminal: a log file, or stderr redirected to a file or a
//! pipe (a service manager, `2>log`), gets plain text that grep and log collectors read as is.
//!
//! An error that ends a command is one line too ([`error_line`]).

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

/// The one line an error that ends a command prints after `longhaul: error: `: its message and each
/// cause in turn, leaving out a cause whose text the line already holds. Error types that wrap
/// another and print it in their own message (`protocol error: {0}`, `cannot read X: {io error}`)
/// would otherwise print it twice.
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_line;

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let e = anyhow::Error::from(longhaul_engine::EngineError::Protocol(
            longhaul_proto::ProtoError::FrameTooLarge {
                len: 77568,
                limit: 65536,
            },
        ));
        assert_eq!(
            error_line(&e),
            "protocol error: control frame of 77568 bytes exceeds the 64 KiB limit"
        );
        // A context on top keeps every part that says something new.
        let e = e.context("longhaul test 127.0.0.1");
        assert_eq!(
            error_line(&e),
            "longhaul test 127.0.0.1: protocol error: control frame of 77568 bytes exceeds the 64 KiB \
             limit"
        );
        let io = anyhow::Error::from(std::io::Error::other("disk full")).context("cannot write f");
        assert_eq!(error_line(&io), "cannot write f: disk full");
    }
}

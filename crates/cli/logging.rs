//! Where the binary's logs go, set up once per process: stderr by default, or a file
//! (`server --logfile`). `RUST_LOG` overrides the level a subcommand picks.
//!
//! Colour escapes are written only to a terminal: a log file, or stderr redirected to a file or a
//! pipe (a service manager, `2>log`), gets plain text that grep and log collectors read as is.
//! Under systemd, when stderr is the journal's stream (`$JOURNAL_STREAM` names it), each line
//! starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug) and
//! carries no time of its own, so `journalctl -p warning` finds the warnings.
//!
//! An error that ends a command is one line too ([`error_line`]).

use std::io::IsTerminal;

fn filter(level: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level))
}

/// Sends logs to stderr at `level` unless `RUST_LOG` says otherwise; coloured only if stderr is a
/// terminal; for the journal when stderr is its stream.
pub(crate) fn to_stderr(level: &str) {
    if stderr_is_the_journal() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter(level))
            .with_ansi(false)
            .event_format(Journal::new())
            .with_writer(std::io::stderr)
            .try_init();
        return;
    }
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

/// Whether stderr is the journal's stream: systemd sets `JOURNAL_STREAM=DEV:INODE` for a service
/// whose output goes to the journal; a child whose stderr was redirected keeps the variable but
/// not the stream, so the device and inode must match.
fn stderr_is_the_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    dev.parse() == Ok(stat.st_dev) && ino.parse() == Ok(stat.st_ino)
}

/// A log line for the journal: `<PRIORITY>target: message fields`, no colour, no time (the journal
/// keeps its own), no level word (the priority says it).
struct Journal {
    inner: tracing_subscriber::fmt::format::Format<tracing_subscriber::fmt::format::Full, ()>,
}

impl Journal {
    fn new() -> Journal {
        Journal {
            inner: tracing_subscriber::fmt::format()
                .without_time()
                .with_ansi(false)
                .with_level(false),
        }
    }
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Journal
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            tracing::Level::DEBUG | tracing::Level::TRACE => 7,
        };
        write!(writer, "<{priority}>")?;
        self.inner.format_event(ctx, writer, event)
    }
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

/// Opens `path` to append to, made with mode 0644 if missing; never through a symbolic link (a
/// link planted where root writes would make it write elsewhere), and only a regular file.
pub(crate) fn open_append(path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => anyhow::anyhow!(
                "{}: a symbolic link; give the file itself (longhaul never writes through a link)",
                path.display()
            ),
            _ => anyhow::anyhow!("cannot open log file {}: {e}", path.display()),
        })?;
    anyhow::ensure!(
        f.metadata()?.is_file(),
        "{}: not a regular file",
        path.display()
    );
    Ok(f)
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

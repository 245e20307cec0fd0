//! What a console line says about the host: a kernel starting (a boot), an oops, a panic. Read
//! from the kernel's own messages, with or without printk's `[    1.234567]` time prefix and
//! netconsole's `<level>` or extended `level,seq,time,flags;` prefix.

use serde::{Deserialize, Serialize};

/// An event a console line marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mark {
    /// A kernel starts: `Linux version ...`, the first line Linux prints.
    Boot,
    /// A kernel oops or BUG: the host may run on, damaged.
    Oops,
    /// `Kernel panic - not syncing`: the host has stopped.
    Panic,
}

impl Mark {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Boot => "boot",
            Self::Oops => "oops",
            Self::Panic => "panic",
        }
    }

    /// The mark named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Boot, Self::Oops, Self::Panic]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// The kernel's message without printk's time stamp or netconsole's level prefix.
pub fn message(line: &str) -> &str {
    let mut s = line.trim_start();
    // netconsole extended format: "6,123,4567890,-;message"
    if let Some((head, rest)) = s.split_once(';')
        && head.split(',').count() >= 3
        && head
            .split(',')
            .take(3)
            .all(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
    {
        s = rest;
    }
    // syslog level "<6>"
    if let Some(rest) = s.strip_prefix('<')
        && let Some((lvl, rest)) = rest.split_once('>')
        && !lvl.is_empty()
        && lvl.bytes().all(|b| b.is_ascii_digit())
    {
        s = rest;
    }
    // printk time "[    1.234567] "
    if let Some(rest) = s.strip_prefix('[')
        && let Some((t, rest)) = rest.split_once(']')
        && t.trim().bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && !t.trim().is_empty()
    {
        s = rest.trim_start();
    }
    s
}

/// The mark of `line`, if any.
pub fn mark(line: &str) -> Option<Mark> {
    let m = message(line);
    if m.starts_with("Linux version ") {
        Some(Mark::Boot)
    } else if m.starts_with("Kernel panic - not syncing") {
        Some(Mark::Panic)
    } else if m.starts_with("Oops: ")
        || m.starts_with("BUG: ")
        || m.starts_with("kernel BUG at ")
        || m.starts_with("general protection fault")
        || m.starts_with("Internal error: Oops")
    {
        Some(Mark::Oops)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_events_are_marked() {
        let cases = [
            (
                "[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)",
                Some(Mark::Boot),
            ),
            ("Linux version 6.1.0", Some(Mark::Boot)),
            (
                "[   12.345678] Kernel panic - not syncing: sysrq triggered crash",
                Some(Mark::Panic),
            ),
            (
                "<0>[   12.3] Kernel panic - not syncing: Fatal exception",
                Some(Mark::Panic),
            ),
            (
                "4,812,12345678,-;BUG: kernel NULL pointer dereference, address: 0000000000000000",
                Some(Mark::Oops),
            ),
            ("[ 1.0] Oops: 0002 [#1] PREEMPT SMP NOPTI", Some(Mark::Oops)),
            (
                "[ 1.0] general protection fault, probably for non-canonical address",
                Some(Mark::Oops),
            ),
            ("user says: Kernel panic - not syncing", None),
            ("[ 1.0] sysrq: Trigger a crash", None),
            ("[abc] Linux version", None),
        ];
        for (line, want) in cases {
            assert_eq!(mark(line), want, "{line}");
        }
        assert_eq!(Mark::parse("panic"), Some(Mark::Panic));
    }
}

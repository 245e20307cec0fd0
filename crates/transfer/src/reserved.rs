//! The names a receiver keeps for its own files in the destination tree: the resume journals
//! ([`JOURNAL_NAME`], and a striped transfer's `JOURNAL_NAME.<run>.<stripe>`) and the temporaries
//! that hold partial data (named by `journal::temp_path`).
//!
//! Both the journal (which derives temporaries and refuses records naming reserved paths) and the
//! manifest rules (which refuse entries carrying reserved names) depend on this one definition, and the
//! sender leaves such names out of what it offers.

use crate::relpath::RelPath;

/// File name of the journal in the destination directory.
pub const JOURNAL_NAME: &str = ".longhaul-journal";

/// Whether `name` (one path component) is reserved for the receiver's own files: journals
/// ([`JOURNAL_NAME`], or it followed by `.` and anything: a striped transfer's) and temporaries
/// (`.lh-` + 16 hex digits + `.part`, what `journal::temp_path` makes; 8 digits, what earlier
/// versions made).
/// Manifests may not carry such names (a file named like another file's temporary could be renamed over
/// it; a file named like the journal would plant one), and the sender leaves them out.
pub fn is_reserved_name(name: &str) -> bool {
    if name == JOURNAL_NAME
        || name
            .strip_prefix(JOURNAL_NAME)
            .is_some_and(|rest| rest.starts_with('.'))
    {
        return true;
    }
    name.strip_prefix(".lh-")
        .and_then(|rest| rest.strip_suffix(".part"))
        .is_some_and(|id| {
            (id.len() == 8 || id.len() == 16) && id.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// The first reserved component of `path`, if any ([`is_reserved_name`]).
pub fn reserved_component(path: &RelPath) -> Option<&str> {
    path.components().find(|c| is_reserved_name(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[test]
    fn reserved_names_are_the_journal_and_temporaries() {
        for name in [
            JOURNAL_NAME,
            ".longhaul-journal.0123456789abcdef0123456789abcdef.3",
            ".longhaul-journal.x",
            ".lh-00000000.part",
            ".lh-DEADbeef.part",
            ".lh-00112233deadbeef.part",
        ] {
            assert!(is_reserved_name(name), "{name}");
        }
        for name in [
            ".longhaul-journal2",
            ".lh-0000000.part",
            ".lh-000000000.part",
            ".lh-0011223344556677889.part",
            ".lh-0000000g.part",
            "lh-00000000.part",
            ".lh-00000000.partial",
        ] {
            assert!(!is_reserved_name(name), "{name}");
        }
        assert_eq!(
            reserved_component(&p("a/.lh-00000001.part/b")),
            Some(".lh-00000001.part")
        );
        assert_eq!(reserved_component(&p("a/b")), None);
    }
}

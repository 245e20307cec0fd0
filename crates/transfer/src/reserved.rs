//! The names a receiver keeps for its own files in the destination tree: the resume journal
//! ([`JOURNAL_NAME`]) and the temporaries that hold partial data ([`temp_path`]).
//!
//! Both the journal (which derives temporaries and refuses records naming reserved paths) and the
//! manifest rules (which refuse entries carrying reserved names) depend on this one definition, and the
//! sender leaves such names out of what it offers.

use crate::relpath::RelPath;

/// File name of the journal in the destination directory.
pub const JOURNAL_NAME: &str = ".longhaul-journal";

/// Whether `name` (one path component) is reserved for the receiver's own files: the journal
/// ([`JOURNAL_NAME`]) and temporaries (`.lh-` + 8 hex digits + `.part`, what [`temp_path`] makes).
/// Manifests may not carry such names (a file named like another file's temporary could be renamed over
/// it; a file named like the journal would plant one), and the sender leaves them out.
pub fn is_reserved_name(name: &str) -> bool {
    if name == JOURNAL_NAME {
        return true;
    }
    name.strip_prefix(".lh-")
        .and_then(|rest| rest.strip_suffix(".part"))
        .is_some_and(|id| id.len() == 8 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The first reserved component of `path`, if any ([`is_reserved_name`]).
pub fn reserved_component(path: &RelPath) -> Option<&str> {
    path.components().find(|c| is_reserved_name(c))
}

/// The temporary name for a file's partial data: a hidden name in the same directory (so the final
/// rename stays within one file system), unique per journal id.
pub fn temp_path(path: &RelPath, id: u32) -> RelPath {
    let name = format!(".lh-{id:08x}.part");
    let name = RelPath::parse(&name).expect("a fixed ASCII name is a valid path");
    match path.parent() {
        Some(dir) => dir.join(&name).unwrap_or(name),
        None => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[test]
    fn reserved_names_are_the_journal_and_temporaries() {
        for name in [JOURNAL_NAME, ".lh-00000000.part", ".lh-DEADbeef.part"] {
            assert!(is_reserved_name(name), "{name}");
        }
        for name in [
            ".longhaul-journal2",
            ".lh-0000000.part",
            ".lh-000000000.part",
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
        // Every name `temp_path` makes is reserved.
        assert!(is_reserved_name(temp_path(&p("x/y"), u32::MAX).file_name()));
    }
}

//! The names a receiver keeps for its own files in the destination tree: the resume journals
//! ([`JOURNAL_NAME`], and a striped transfer's `JOURNAL_NAME.<run>.<stripe>`) and the temporaries
//! that hold partial data ([`temp_path`]).
//!
//! Both the journal (which derives temporaries and refuses records naming reserved paths) and the
//! manifest rules (which refuse entries carrying reserved names) depend on this one definition, and the
//! sender leaves such names out of what it offers.

use crate::journal::FileIdentity;
use crate::relpath::RelPath;

/// File name of the journal in the destination directory.
pub const JOURNAL_NAME: &str = ".longhaul-journal";

/// Context of the derivation of temporary names ([`temp_path`]).
const TEMP_NAME_CONTEXT: &str = "longhaul 2026-11 temporary file name";

/// Whether `name` (one path component) is reserved for the receiver's own files: journals
/// ([`JOURNAL_NAME`], or it followed by `.` and anything: a striped transfer's) and temporaries
/// (`.lh-` + 16 hex digits + `.part`, what [`temp_path`] makes; 8 digits, what earlier versions
/// made).
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

/// The temporary name for a file's partial data: a hidden name in the same directory (so the final
/// rename stays within one file system), derived from the file's path and identity (64 bits of
/// BLAKE3), so that every receiver of a striped transfer writes the same one and a changed source
/// gets a new one.
pub fn temp_path(path: &RelPath, identity: &FileIdentity) -> RelPath {
    let mut h = blake3::Hasher::new_derive_key(TEMP_NAME_CONTEXT);
    h.update(&(path.as_str().len() as u64).to_le_bytes());
    h.update(path.as_str().as_bytes());
    h.update(&identity.size.to_le_bytes());
    h.update(&identity.mtime_ns.to_le_bytes());
    h.update(&identity.chunk_size.to_le_bytes());
    let name = format!(
        ".lh-{}.part",
        crate::digest::to_hex(&h.finalize().as_bytes()[..8])
    );
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
        // Every name `temp_path` makes is reserved, in the file's directory, and depends on the
        // path and every part of the identity.
        let id = FileIdentity {
            size: 5,
            mtime_ns: 7,
            chunk_size: 1 << 20,
        };
        let t = temp_path(&p("x/y"), &id);
        assert!(is_reserved_name(t.file_name()));
        assert_eq!(t.parent().map(|d| d.to_string()), Some("x".into()));
        assert_eq!(t, temp_path(&p("x/y"), &id));
        for other in [
            temp_path(&p("x/z"), &id),
            temp_path(&p("x/y"), &FileIdentity { size: 6, ..id }),
            temp_path(&p("x/y"), &FileIdentity { mtime_ns: 8, ..id }),
            temp_path(
                &p("x/y"),
                &FileIdentity {
                    chunk_size: 2 << 20,
                    ..id
                },
            ),
        ] {
            assert_ne!(other.file_name(), t.file_name());
        }
    }
}

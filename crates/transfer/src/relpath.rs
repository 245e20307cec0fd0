//! Paths inside the transfer root, validated so that no name from the network can leave it.
//!
//! Every path in a manifest, a request or the journal is a [`RelPath`]: UTF-8, relative, components
//! separated by `/`. Parsing is the only way to build one, so code that holds a `RelPath` may join it
//! under `--root` without further checks. The rules, and why:
//!
//! - not empty, no leading `/` (absolute paths would ignore the root when joined);
//! - no empty, `.` or `..` components (`a//b`, `./a`, `a/`): `..` escapes, and the others give one file
//!   two spellings, which would let a manifest name the same file twice under different ids;
//! - no NUL (the C APIs would cut the name there) and **no backslash at all**: on Linux `\` is an
//!   ordinary name byte, but a Windows peer, or any tool that "normalises" separators, would read
//!   `..\..\etc` as an escape. Refusing it costs Linux users only names that few portable tools handle;
//! - each component ≤ 255 bytes (NAME_MAX), the whole path ≤ 4096 bytes (PATH_MAX);
//! - otherwise any Unicode is allowed and kept byte for byte (no normalisation: `é` precomposed and
//!   decomposed are different files, as they are on Linux file systems). Newlines and other control
//!   characters are legal Linux names and allowed too; every format that carries paths (JSON messages,
//!   journal lines) escapes them. Names that are not UTF-8 cannot be sent (the sender reports them).
//!
//! Symlinks are copied as links, so their targets are checked too ([`check_symlink_target`]).
//! Lexical checks are only half of the confinement: the I/O layer must also never follow a symlink while
//! creating or opening entries under the root (`openat` with `O_NOFOLLOW` per component, or
//! `openat2(RESOLVE_BENEATH)`), or a link received earlier could redirect a later file.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest path in bytes (Linux PATH_MAX).
pub const MAX_PATH_LEN: usize = 4096;
/// Longest path component in bytes (Linux NAME_MAX).
pub const MAX_COMPONENT_LEN: usize = 255;

/// Why a path or symlink target was refused. Each message quotes the offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The empty string.
    #[error("empty path")]
    Empty,
    /// Starts with `/`.
    #[error("absolute path not allowed: {0}")]
    Absolute(String),
    /// Contains a `..` component, or (for a symlink target) leaves the root.
    #[error("path escapes the root: {0}")]
    Escapes(String),
    /// Contains `//`, ends with `/`, or has a `.` component.
    #[error("path has an empty or '.' component: {0}")]
    NotCanonical(String),
    /// Contains a NUL byte.
    #[error("path contains a NUL byte: {0:?}")]
    Nul(String),
    /// Contains a backslash.
    #[error("path contains a backslash (refused: other systems read it as a separator): {0}")]
    Backslash(String),
    /// One component is longer than [`MAX_COMPONENT_LEN`].
    #[error("path component longer than {MAX_COMPONENT_LEN} bytes in {0}")]
    ComponentTooLong(String),
    /// The whole path is longer than [`MAX_PATH_LEN`].
    #[error("path longer than {MAX_PATH_LEN} bytes ({0} bytes)")]
    TooLong(usize),
    /// A symlink target with `..` after a normal component (see [`check_symlink_target`]).
    #[error("symlink {link} -> {target}: '..' is only allowed at the start of a target")]
    DotDotInside {
        /// The link.
        link: String,
        /// Its target.
        target: String,
    },
}

/// A validated relative path inside the transfer root (see the module docs for the rules).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath(String);

impl RelPath {
    /// Validates `s` as a path inside the root.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        check_common(s)?;
        if s.starts_with('/') {
            return Err(PathError::Absolute(s.into()));
        }
        for c in s.split('/') {
            match c {
                ".." => return Err(PathError::Escapes(s.into())),
                "" | "." => return Err(PathError::NotCanonical(s.into())),
                _ if c.len() > MAX_COMPONENT_LEN => {
                    return Err(PathError::ComponentTooLong(s.into()));
                }
                _ => {}
            }
        }
        Ok(Self(s.to_owned()))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The components, first to last.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The containing directory, or `None` for a top-level entry.
    pub fn parent(&self) -> Option<RelPath> {
        self.0.rfind('/').map(|i| Self(self.0[..i].to_owned()))
    }

    /// `self/rest`: places an entry under a destination prefix (`get HOST:a DEST/sub` lands `a/x` at
    /// `sub/a/x`). Fails only if the result is longer than [`MAX_PATH_LEN`].
    pub fn join(&self, rest: &RelPath) -> Result<RelPath, PathError> {
        let len = self.0.len() + 1 + rest.0.len();
        if len > MAX_PATH_LEN {
            return Err(PathError::TooLong(len));
        }
        Ok(Self(format!("{}/{}", self.0, rest.0)))
    }

    /// Whether `self` is `other` or lies below it (`a/b` is under `a`, `ab` is not).
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RelPath {
    type Error = PathError;

    fn try_from(s: String) -> Result<Self, PathError> {
        Self::parse(&s)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> Self {
        p.0
    }
}

/// Checks shared by paths and symlink targets: emptiness, length, NUL, backslash.
fn check_common(s: &str) -> Result<(), PathError> {
    if s.is_empty() {
        return Err(PathError::Empty);
    }
    if s.len() > MAX_PATH_LEN {
        return Err(PathError::TooLong(s.len()));
    }
    if s.contains('\0') {
        return Err(PathError::Nul(s.into()));
    }
    if s.contains('\\') {
        return Err(PathError::Backslash(s.into()));
    }
    Ok(())
}

/// Checks that the symlink at `link` with `target` cannot point outside the root.
///
/// Rules: the target is relative; it is resolved lexically from the link's directory and must never
/// climb above the root (link `a/b` → `../x` is fine, `../../x` is not); and `..` may appear only as a
/// leading run (`../../x/y`), never after a normal component (`x/../y`). The last rule closes the trick
/// where `x` is itself a symlink: the kernel resolves `x/..` from `x`'s *target*, not lexically, so
/// `s → .` at the top plus `t → s/..` would reach the root's parent although each looks harmless.
/// Empty and `.` components are harmless and allowed (`./x`, `a//b`).
pub fn check_symlink_target(link: &RelPath, target: &str) -> Result<(), PathError> {
    check_common(target)?;
    if target.starts_with('/') {
        return Err(PathError::Absolute(target.into()));
    }
    // Depth of the link's directory below the root: `a/b` lives in `a`, depth 1.
    let mut depth = link.components().count() - 1;
    let mut seen_normal = false;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." if seen_normal => {
                return Err(PathError::DotDotInside {
                    link: link.to_string(),
                    target: target.into(),
                });
            }
            ".." => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| PathError::Escapes(format!("symlink {link} -> {target}")))?;
            }
            _ if c.len() > MAX_COMPONENT_LEN => {
                return Err(PathError::ComponentTooLong(target.into()));
            }
            _ => seen_normal = true,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[test]
    fn accepts_ordinary_and_unicode_paths() {
        for s in [
            "a",
            "a/b/c",
            "données/été.txt",
            "日本語/ファイル",
            "emoji 🚀/x y",
            ".hidden",
            "a..b",
            "...",
        ] {
            assert_eq!(p(s).as_str(), s);
        }
    }

    #[test]
    fn refuses_every_escape_and_trick() {
        let cases: &[(&str, PathError)] = &[
            ("", PathError::Empty),
            ("/etc/passwd", PathError::Absolute("/etc/passwd".into())),
            ("..", PathError::Escapes("..".into())),
            ("../etc/passwd", PathError::Escapes("../etc/passwd".into())),
            ("a/../../b", PathError::Escapes("a/../../b".into())),
            ("a/..", PathError::Escapes("a/..".into())),
            ("a//b", PathError::NotCanonical("a//b".into())),
            ("a/", PathError::NotCanonical("a/".into())),
            ("./a", PathError::NotCanonical("./a".into())),
            ("a/./b", PathError::NotCanonical("a/./b".into())),
            ("a\0b", PathError::Nul("a\0b".into())),
            ("..\\..\\etc", PathError::Backslash("..\\..\\etc".into())),
            ("a\\b", PathError::Backslash("a\\b".into())),
        ];
        for (s, e) in cases {
            assert_eq!(RelPath::parse(s).as_ref(), Err(e), "{s:?}");
        }
        assert_eq!(
            RelPath::parse("../etc/passwd").unwrap_err().to_string(),
            "path escapes the root: ../etc/passwd"
        );
    }

    #[test]
    fn enforces_name_and_path_limits() {
        let name = "é".repeat(127); // 254 bytes
        assert!(RelPath::parse(&name).is_ok());
        let long = "é".repeat(128); // 256 bytes
        assert!(matches!(
            RelPath::parse(&long),
            Err(PathError::ComponentTooLong(_))
        ));
        let ok = vec!["x".repeat(255); 16].join("/"); // 16 × 256 − 1 = 4095 bytes
        assert!(RelPath::parse(&ok).is_ok());
        let too_long = format!("{ok}/ab");
        assert_eq!(RelPath::parse(&too_long), Err(PathError::TooLong(4098)));
    }

    #[test]
    fn join_parent_and_prefix() {
        let dest = p("incoming/run 7");
        let got = dest.join(&p("a/b.dat")).unwrap();
        assert_eq!(got.as_str(), "incoming/run 7/a/b.dat");
        assert_eq!(got.parent(), Some(p("incoming/run 7/a")));
        assert_eq!(got.file_name(), "b.dat");
        assert_eq!(p("top").parent(), None);
        assert!(got.starts_with(&dest));
        assert!(!p("ab").starts_with(&p("a")));
        let big = p(&vec!["x".repeat(255); 16].join("/"));
        assert!(matches!(big.join(&p("y")), Err(PathError::TooLong(4097))));
    }

    #[test]
    fn serde_validates_paths() {
        assert_eq!(serde_json::to_string(&p("a/b")).unwrap(), r#""a/b""#);
        assert!(serde_json::from_str::<RelPath>(r#""../x""#).is_err());
        assert!(serde_json::from_str::<RelPath>(r#""/x""#).is_err());
        assert_eq!(
            serde_json::from_str::<RelPath>(r#""a/b""#).unwrap(),
            p("a/b")
        );
    }

    #[test]
    fn symlink_targets_inside_the_root_are_accepted() {
        for (link, target) in [
            ("a/b", "c"),
            ("a/b", "../c"),
            ("a/b/c", "../../d/e"),
            ("a/b", ".."),
            ("a/b", "./c"),
            ("a/b", "c//d"),
            ("top", "."),
            ("a/b", "ünïcödé"),
        ] {
            assert_eq!(
                check_symlink_target(&p(link), target),
                Ok(()),
                "{link} -> {target}"
            );
        }
    }

    #[test]
    fn symlink_targets_that_escape_are_refused() {
        let esc = |link: &str, target: &str| check_symlink_target(&p(link), target);
        assert!(matches!(esc("a/b", "../../x"), Err(PathError::Escapes(_))));
        assert!(matches!(esc("top", ".."), Err(PathError::Escapes(_))));
        assert!(matches!(
            esc("a/b/c", "../../../../etc"),
            Err(PathError::Escapes(_))
        ));
        assert!(matches!(
            esc("a", "/etc/passwd"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(esc("a", ""), Err(PathError::Empty)));
        assert!(matches!(esc("a", "x\0"), Err(PathError::Nul(_))));
        assert!(matches!(
            esc("a", "..\\..\\x"),
            Err(PathError::Backslash(_))
        ));
        // `s/..` climbs from wherever `s` points; refused even where it looks lexically harmless.
        assert!(matches!(
            esc("a/b", "s/.."),
            Err(PathError::DotDotInside { .. })
        ));
        assert!(matches!(
            esc("a/b", "./x/../../y"),
            Err(PathError::DotDotInside { .. })
        ));
        assert_eq!(
            esc("a/b", "../../x").unwrap_err().to_string(),
            "path escapes the root: symlink a/b -> ../../x"
        );
    }
}

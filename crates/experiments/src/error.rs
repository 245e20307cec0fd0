//! Errors and warnings about experiment files that name the file, the line
//! and the field, in the style of the topology crate
//! (`lab/x.toml:7: sweep.window[2]: "4Q" is not a size: …`).

use std::fmt;

use longhaul_topology::{FileError, write_place};
use serde::{Deserialize, Serialize};

pub(crate) use longhaul_topology::line_col;

/// An experiment file the lab refuses: the topology crate's [`FileError`],
/// displayed as `FILE:LINE:COL: FIELD: MESSAGE`; the file name is the one the
/// caller gave [`crate::Spec::parse`].
pub type SpecError = FileError;

/// Something accepted but worth saying (an unfamiliar congestion-control
/// name). Displays as `FILE:LINE: FIELD: warning: MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecWarning {
    /// The file name.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field as a path.
    pub field: String,
    /// What is unusual.
    pub message: String,
}

impl fmt::Display for SpecWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_place(f, &self.file, self.line, None)?;
        write!(f, "{}: warning: {}", self.field, self.message)
    }
}

/// The field path at a line for errors of the TOML reader, which know the
/// place but not the field: the `[table]` the line is in plus the line's key.
pub(crate) fn field_at_line(text: &str, line: usize) -> Option<String> {
    let mut table: Option<String> = None;
    for (i, l) in text.lines().enumerate().take(line) {
        let t = l.split('#').next().unwrap_or("").trim();
        let key = if t.starts_with('[') {
            table = Some(
                t.trim_start_matches('[')
                    .trim_end_matches(']')
                    .trim()
                    .to_owned(),
            );
            None
        } else {
            t.split_once('=')
                .map(|(k, _)| k.trim().trim_matches('"').to_owned())
        };
        if i + 1 == line {
            return match (table, key) {
                (Some(t), Some(k)) => Some(format!("{t}.{k}")),
                (None, Some(k)) => Some(k),
                (t, None) => t,
            };
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_file_line_field_message() {
        let e = SpecError {
            file: "lab/x.toml".into(),
            line: Some(7),
            column: None,
            field: Some("sweep.window[2]".into()),
            message: "\"4Q\" is not a size".into(),
        };
        assert_eq!(
            e.to_string(),
            "lab/x.toml:7: sweep.window[2]: \"4Q\" is not a size"
        );
        let e = SpecError {
            file: String::new(),
            line: Some(3),
            column: Some(5),
            field: None,
            message: "m".into(),
        };
        assert_eq!(e.to_string(), "line 3:5: m");
    }

    #[test]
    fn field_at_line_uses_table_and_key() {
        let text = "name = \"x\"\n[path]\nrtt = \"1\"\n[sweep]\n";
        assert_eq!(field_at_line(text, 1).as_deref(), Some("name"));
        assert_eq!(field_at_line(text, 3).as_deref(), Some("path.rtt"));
        assert_eq!(field_at_line(text, 4).as_deref(), Some("sweep"));
        assert_eq!(field_at_line(text, 9), None);
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}

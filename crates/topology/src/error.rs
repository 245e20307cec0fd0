//! Errors that name the file, the line (and column) and the field, and the
//! search that finds the line of a field in the file text. The experiment
//! files of `longhaul lab` use the same error ([`FileError`]) and place format.

use std::fmt;

/// A TOML file (or a command-line override) that is refused: a topology file
/// here, an experiment file in `longhaul-experiments`.
///
/// Displays as `FILE:LINE:COL: FIELD: MESSAGE`, leaving out the parts that are
/// unknown (an override given on the command line has no file or line). Syntax
/// and type errors from the TOML reader carry a column; errors found by the
/// checks that follow carry the line of the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file name the caller gave the parser ([`crate::Topology::from_toml`]);
    /// empty when the error comes from [`crate::Topology::compile`] alone.
    pub file: String,
    /// 1-based line of the offending value or table, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters), when known.
    pub column: Option<usize>,
    /// The field as a path (`hop[3].km`, `rate`, `--rtt`, `sweep.window[2]`),
    /// when known.
    pub field: Option<String>,
    /// Why it is refused, with the value.
    pub message: String,
}

/// A topology file or override the emulator refuses.
pub type TopologyError = FileError;

impl FileError {
    /// The TOML reader's error `e` about `text`, the file `file`: with the
    /// line and column of its span, and the field `field_at` finds at that
    /// line (the TOML reader knows the place but not the field).
    pub fn from_toml(
        e: &toml::de::Error,
        text: &str,
        file: &str,
        field_at: impl Fn(&str, usize) -> Option<String>,
    ) -> Self {
        let (line, column) = match e.span() {
            Some(span) => {
                let (l, c) = line_col(text, span.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Self {
            file: file.to_owned(),
            line,
            column,
            field: line.and_then(|l| field_at(text, l)),
            message: e.message().trim().to_owned(),
        }
    }

    /// An error about `field`, without a place yet.
    pub(crate) fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: String::new(),
            line: None,
            column: None,
            field: Some(field.into()),
            message: message.into(),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_place(f, &self.file, self.line, self.column)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Writes the place part of a message, `FILE:LINE:COL: ` (`line N: ` without a
/// file), leaving out what is unknown and writing nothing when all is.
pub fn write_place(
    f: &mut fmt::Formatter<'_>,
    file: &str,
    line: Option<usize>,
    column: Option<usize>,
) -> fmt::Result {
    let mut place = file.to_owned();
    if let Some(line) = line {
        if place.is_empty() {
            place.push_str("line ");
        } else {
            place.push(':');
        }
        place.push_str(&line.to_string());
        if let Some(col) = column {
            place.push(':');
            place.push_str(&col.to_string());
        }
    }
    if !place.is_empty() {
        write!(f, "{place}: ")?;
    }
    Ok(())
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// A table header line, `[name]` or `[[name]]`, as (name, is_array).
fn header(line: &str) -> Option<(String, bool)> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or("").trim_end();
    if let Some(inner) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
        return Some((unquote(inner.trim()), true));
    }
    t.strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map(|inner| (unquote(inner.trim()), false))
}

/// The key of a `key = value` line.
fn key(line: &str) -> Option<String> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (k, _) = t.split_once('=')?;
    Some(unquote(k.trim()))
}

fn unquote(s: &str) -> String {
    s.trim_matches('"').trim_matches('\'').to_owned()
}

/// The resolved table of every line of `text` (`None` before the first
/// header): array-of-tables headers get their index (`[[link]]` → `link[2]`)
/// and sub-tables of an array element inherit it (`[link.a_to_b]` after the
/// third `[[link]]` → `link[2].a_to_b`), for any table name. The second
/// element says whether the line is the header itself.
fn tables(text: &str) -> Vec<(Option<String>, bool)> {
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut table: Option<String> = None;
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some((name, array)) = header(l) {
            if array {
                *counts.entry(name.clone()).or_default() += 1;
            }
            // Resolve each dotted prefix that names an array of tables.
            let mut raw = String::new();
            let mut resolved = String::new();
            for part in name.split('.') {
                let part = unquote(part.trim());
                if !raw.is_empty() {
                    raw.push('.');
                    resolved.push('.');
                }
                raw.push_str(&part);
                resolved.push_str(&part);
                if let Some(n) = counts.get(&raw) {
                    resolved.push_str(&format!("[{}]", n.saturating_sub(1)));
                }
            }
            table = Some(resolved);
            out.push((table.clone(), true));
        } else {
            out.push((table.clone(), false));
        }
    }
    out
}

/// The field path at a line: the table the line is in, plus its key.
pub fn field_at_line(text: &str, line: usize) -> Option<String> {
    let (table, is_header) = tables(text).into_iter().nth(line.checked_sub(1)?)?;
    if is_header {
        return table;
    }
    let k = text.lines().nth(line - 1).and_then(key);
    match (table, k) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (None, Some(k)) => Some(k),
        (t, None) => t,
    }
}

/// The 1-based line where `path` (`hop[3].km`, `link[2].a_to_b.rate`,
/// `receiver.rtt`, `rate`, `loss.p`) is written, or of its table when the
/// key is not written there. Tries the longest table prefix first, so a key
/// inside an inline table (`loss = { p = 2 }`) finds the line of `loss`.
pub fn line_of_field(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let tables = tables(text);
    let parts: Vec<&str> = path.split('.').collect();
    for k in (0..parts.len()).rev() {
        let table = (k > 0).then(|| parts[..k].join("."));
        let want = parts[k];
        for (i, l) in lines.iter().enumerate() {
            let (t, is_header) = &tables[i];
            if !is_header && *t == table && key(l).as_deref() == Some(want) {
                return Some(i + 1);
            }
        }
    }
    // Not written as a key: the header of the longest table prefix present.
    for k in (1..=parts.len()).rev() {
        let table = Some(parts[..k].join("."));
        if let Some(i) = tables.iter().position(|(t, h)| *h && *t == table) {
            return Some(i + 1);
        }
    }
    None
}

/// Whether `text` has an array-of-tables header `[[name]]` (a cheap look at
/// the lines; the text need not parse).
pub(crate) fn has_array_table(text: &str, name: &str) -> bool {
    text.lines()
        .any(|l| matches!(header(l), Some((n, true)) if n == name))
}

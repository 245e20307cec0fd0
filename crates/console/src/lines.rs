//! Bytes from a console into lines that are safe to store and show: split at `\n` (a `\r` before
//! it, and lone `\r`s of progress bars, dropped), cut at [`MAX_LINE`] bytes (the rest continues on
//! the next line, marked), invalid UTF-8 replaced, and control characters other than tab escaped
//! (`\u{1b}`), so that a console cannot rewrite a reader's terminal or forge lines.

/// The longest line kept, in bytes of input; longer ones are cut.
pub const MAX_LINE: usize = 4096;

/// A line as read: its text, and whether it continues a line cut at [`MAX_LINE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text, escaped.
    pub text: String,
    /// True when it is the continuation of a cut line.
    pub continued: bool,
}

/// Splits a byte stream into [`Line`]s.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
    continued: bool,
}

impl Splitter {
    /// A splitter with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`; returns the lines they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Line> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                out.push(self.take());
                self.continued = false;
            } else {
                self.buf.push(b);
                if self.buf.len() >= MAX_LINE {
                    out.push(self.take());
                    self.continued = true;
                }
            }
        }
        out
    }

    /// What is buffered, as a last line (at the end of the stream); `None` when nothing is.
    pub fn finish(&mut self) -> Option<Line> {
        (!self.buf.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> Line {
        let raw = std::mem::take(&mut self.buf);
        Line {
            text: clean(&raw),
            continued: self.continued,
        }
    }
}

/// `raw` as printable text: lossy UTF-8, `\r` dropped, other control characters but tab escaped.
pub fn clean(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\r' => {}
            '\t' => out.push('\t'),
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_reads_and_cr_lf() {
        let mut s = Splitter::new();
        assert!(s.feed(b"Linux ver").is_empty());
        let l = s.feed(b"sion 6.1\r\nsecond\nthi");
        assert_eq!(
            l.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["Linux version 6.1", "second"]
        );
        assert_eq!(s.finish().unwrap().text, "thi");
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn hostile_bytes_are_stored_safely() {
        let mut s = Splitter::new();
        let l = s.feed(b"\x1b[2J\xff\xfe ok\x07\tend\n");
        assert_eq!(l[0].text, "\\u{1b}[2J\u{fffd}\u{fffd} ok\\u{7}\tend");
        let huge = vec![b'x'; MAX_LINE * 2 + 10];
        let l = s.feed(&huge);
        assert_eq!(l.len(), 2);
        assert!(l.iter().all(|x| x.text.len() == MAX_LINE));
        assert!(!l[0].continued && l[1].continued);
        let rest = s.feed(b"\n");
        assert_eq!((rest[0].text.len(), rest[0].continued), (10, true));
        assert!(!s.feed(b"next\n")[0].continued);
    }
}

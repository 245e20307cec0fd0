//! The crate's one error type, [`ParseError`], returned by every `parse_*`
//! function.
//!
//! A parse error prints as a single line that names the kind of quantity, the
//! input as the user typed it, what is wrong with it, and the forms that are
//! accepted, for example
//! `invalid size "12Q": unknown suffix "Q" (use K, M, G, T, P = ×1024 ...)`.
//! The binary can show it as is, after the flag name.

use std::fmt;

use crate::time_unit::TimeUnit;

/// Inputs longer than this many characters are shortened in messages, so that
/// an error stays one readable line even for a pasted blob.
const MAX_ECHOED_CHARS: usize = 64;

/// A string that could not be read as a size, rate, duration or distance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {quantity} {input:?}: {kind} ({hint})", hint = .quantity.hint())]
pub struct ParseError {
    quantity: Quantity,
    input: String,
    kind: ParseErrorKind,
}

impl ParseError {
    /// Builds the error for `input`, keeping at most 64 characters of it.
    pub(crate) fn new(quantity: Quantity, input: &str, kind: ParseErrorKind) -> Self {
        let input = match input.char_indices().nth(MAX_ECHOED_CHARS) {
            Some((cut, _)) => format!("{}…", &input[..cut]),
            None => input.to_owned(),
        };
        Self {
            quantity,
            input,
            kind,
        }
    }

    /// What was being parsed.
    pub fn quantity(&self) -> Quantity {
        self.quantity
    }

    /// The offending input (shortened to 64 characters plus "…" if longer).
    pub fn input(&self) -> &str {
        &self.input
    }

    /// What is wrong with the input.
    pub fn kind(&self) -> &ParseErrorKind {
        &self.kind
    }
}

/// The kind of value a parser was reading; it selects the hint in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A byte count ([`crate::parse_size`]).
    Size,
    /// A bit rate ([`crate::parse_rate`]).
    Rate,
    /// A duration ([`crate::parse_duration`]); carries the unit of a bare number.
    Duration(TimeUnit),
    /// A distance in km ([`crate::parse_distance`]).
    Distance,
}

impl Quantity {
    /// The accepted forms, shown in parentheses after the reason.
    fn hint(self) -> String {
        match self {
            Self::Size => "use K, M, G, T, P = ×1024, also KiB…PiB; KB…PB = ×1000; \
                           e.g. 9000, 128k, 64M, 1.5G"
                .to_owned(),
            Self::Rate => {
                "use bit/s with k, m, g, t = ×1000, e.g. 10G, 2.5g, 100Mbit/s, 9.29Gbps; \
                           no byte rates (B)"
                    .to_owned()
            }
            Self::Duration(unit) => format!(
                "use ns, us, µs, ms, s, min, h, e.g. 120ms or 0.12s; a bare number is in {unit}"
            ),
            Self::Distance => {
                "use km or m, e.g. 11539km or 11,539 km; a bare number is in km".to_owned()
            }
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Size => "size",
            Self::Rate => "rate",
            Self::Duration(_) => "duration",
            Self::Distance => "distance",
        })
    }
}

/// What is wrong with an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// Nothing but white space.
    #[error("empty input")]
    Empty,
    /// A leading minus sign; no quantity here can be negative.
    #[error("negative values are not allowed")]
    Negative,
    /// The input does not start with a number ("abc", "NaN", "G").
    #[error("not a number")]
    NotANumber,
    /// A number that is not well formed: a second decimal point ("1.5.5G"),
    /// thousands separators not in groups of three ("1,5"), a stray sign.
    #[error("malformed number")]
    Malformed,
    /// The text after the number is not a unit this parser knows.
    #[error("unknown suffix {0:?}")]
    UnknownSuffix(String),
    /// The value does not fit the result type ("99999999T", "1e999").
    #[error("too large")]
    OutOfRange,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_input_reason_and_forms_on_one_line() {
        let e = ParseError::new(
            Quantity::Size,
            "12Q",
            ParseErrorKind::UnknownSuffix("Q".into()),
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with(r#"invalid size "12Q": unknown suffix "Q" (use K, M, G, T"#),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn long_input_is_shortened_and_newlines_are_escaped() {
        let long = "9".repeat(200) + "\nQ";
        let e = ParseError::new(Quantity::Rate, &long, ParseErrorKind::OutOfRange);
        assert_eq!(e.input().chars().count(), MAX_ECHOED_CHARS + 1);
        let e = ParseError::new(Quantity::Rate, "1\nG", ParseErrorKind::Malformed);
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn duration_hint_names_the_bare_number_unit() {
        let e = ParseError::new(
            Quantity::Duration(TimeUnit::Millis),
            "x",
            ParseErrorKind::NotANumber,
        );
        assert!(e.to_string().ends_with("a bare number is in ms)"), "{e}");
    }
}

//! Shared number reading and printing for the unit parsers and formatters.
//!
//! Inputs are read as exact decimals (digits and a power of ten), not through
//! `f64`, so "64M", "1.5G" and "0.12s" convert to exact integers of bytes,
//! bit/s and nanoseconds, rounded half up only when the unit cannot represent
//! the fraction ("0.3" bytes). The grammar is
//! `digits [ "." digits ] [ ("e"|"E") [sign] digits ] [spaces] suffix`, where
//! the integer digits may be grouped in threes with commas ("11,539"); like
//! iperf3, which reads numbers with `atof`, an exponent is allowed ("1e10").

use crate::error::ParseErrorKind;

/// A non-negative decimal read from text: `digits × 10^(−scale)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decimal {
    digits: u128,
    scale: i32,
}

/// Exponents beyond this magnitude are clamped; any non-zero value scaled by
/// 10^400 is out of range and any scaled by 10^-400 rounds to zero anyway.
const MAX_EXPONENT: i64 = 400;

impl Decimal {
    /// `self × mult`, rounded half up to an integer; `None` if above
    /// `u64::MAX`.
    pub(crate) fn to_u64_times(self, mult: u64) -> Option<u64> {
        let (mut digits, mut scale) = (self.digits, self.scale);
        if digits == 0 {
            return Some(0);
        }
        // Drop excess fractional digits rather than fail: they cannot change
        // a result that fits in a u64 by more than the rounding.
        let num = loop {
            match digits.checked_mul(u128::from(mult)) {
                Some(n) => break n,
                None if scale > 0 => {
                    digits /= 10;
                    scale -= 1;
                }
                None => return None,
            }
        };
        let value = if scale <= 0 {
            let up = 10u128.checked_pow(scale.unsigned_abs())?;
            num.checked_mul(up)?
        } else {
            match 10u128.checked_pow(scale.unsigned_abs()) {
                // num < 2^128 < 0.5 × 10^39, so the quotient rounds to zero.
                None => 0,
                Some(den) => {
                    let (q, r) = (num / den, num % den);
                    // r < den ≤ 10^38, so 2r cannot overflow a u128.
                    if 2 * r >= den { q + 1 } else { q }
                }
            }
        };
        u64::try_from(value).ok()
    }

    /// The value as the nearest `f64` (infinite if beyond `f64::MAX`).
    pub(crate) fn to_f64(self) -> f64 {
        // Rust's float parser rounds correctly; going through text avoids
        // the double rounding of `digits as f64 * 10f64.powi(-scale)`.
        format!("{}e{}", self.digits, -i64::from(self.scale))
            .parse()
            .unwrap_or(f64::INFINITY)
    }
}

/// Splits `input` into its leading number and the suffix after it (trimmed).
pub(crate) fn split_number(input: &str) -> Result<(Decimal, &str), ParseErrorKind> {
    let s = input.trim();
    if s.is_empty() {
        return Err(ParseErrorKind::Empty);
    }
    if s.starts_with('-') {
        return Err(ParseErrorKind::Negative);
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut digits: u128 = 0;
    let mut scale: i64 = 0;
    let mut seen_digit = false;
    // Digits that no longer fit the mantissa: before the point they raise
    // the exponent, after it they are simply dropped.
    let mut push = |d: u8, fractional: bool, scale: &mut i64| match digits
        .checked_mul(10)
        .and_then(|x| x.checked_add(u128::from(d)))
    {
        Some(x) => {
            digits = x;
            if fractional {
                *scale += 1;
            }
        }
        None if !fractional => *scale -= 1,
        None => {}
    };

    // Integer part, with optional comma grouping checked as it goes:
    // the first group has 1–3 digits, every later one exactly 3.
    let mut group_len = 0usize;
    let mut grouped = false;
    while pos < bytes.len() {
        match bytes[pos] {
            b @ b'0'..=b'9' => {
                push(b - b'0', false, &mut scale);
                seen_digit = true;
                group_len += 1;
            }
            b',' => {
                let ok = if grouped {
                    group_len == 3
                } else {
                    (1..=3).contains(&group_len)
                };
                if !ok {
                    return Err(ParseErrorKind::Malformed);
                }
                grouped = true;
                group_len = 0;
            }
            _ => break,
        }
        pos += 1;
    }
    if grouped && group_len != 3 {
        return Err(ParseErrorKind::Malformed);
    }

    // Fractional part.
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        while let Some(&b @ b'0'..=b'9') = bytes.get(pos) {
            push(b - b'0', true, &mut scale);
            seen_digit = true;
            pos += 1;
        }
    }
    if !seen_digit {
        return Err(if pos == 0 {
            ParseErrorKind::NotANumber
        } else {
            ParseErrorKind::Malformed
        });
    }

    // Exponent, only if "e" is followed by digits; otherwise the "e" starts
    // the suffix and is judged (and rejected) by the caller.
    if let Some(b'e' | b'E') = bytes.get(pos) {
        let mut p = pos + 1;
        let negative = match bytes.get(p) {
            Some(b'-') => {
                p += 1;
                true
            }
            Some(b'+') => {
                p += 1;
                false
            }
            _ => false,
        };
        let start = p;
        let mut exp: i64 = 0;
        while let Some(&b @ b'0'..=b'9') = bytes.get(p) {
            exp = (exp * 10 + i64::from(b - b'0')).min(MAX_EXPONENT);
            p += 1;
        }
        if p > start {
            scale += if negative { exp } else { -exp };
            pos = p;
        }
    }

    let rest = s[pos..].trim_start();
    if let Some(c) = rest.chars().next()
        && (c.is_ascii_digit() || matches!(c, '.' | ',' | '+' | '-'))
    {
        return Err(ParseErrorKind::Malformed);
    }
    let scale = scale.clamp(-2 * MAX_EXPONENT, 2 * MAX_EXPONENT);
    let scale = i32::try_from(scale).map_err(|_| ParseErrorKind::OutOfRange)?;
    Ok((Decimal { digits, scale }, rest))
}

/// Prints `v` with three significant figures the way iperf3's
/// `unit_snprintf` does: two decimals below 9.995, one below 99.95, none
/// above (so 1000–1023 print as four digits).
pub(crate) fn three_figures(v: f64) -> String {
    if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// [`three_figures`] without trailing zeros after the point ("17.0" → "17").
pub(crate) fn three_figures_trimmed(v: f64) -> String {
    let s = three_figures(v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `n` with commas between groups of three digits: 46156 → "46,156".
pub fn group_thousands(n: u64) -> String {
    let plain = n.to_string();
    let mut out = String::with_capacity(plain.len() + plain.len() / 3);
    for (i, c) in plain.chars().enumerate() {
        if i > 0 && (plain.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> (Decimal, &str) {
        split_number(s).unwrap()
    }

    #[test]
    fn splits_number_and_suffix() {
        let (d, rest) = dec(" 1.5 GiB ");
        assert_eq!((d.digits, d.scale, rest), (15, 1, "GiB"));
        let (d, rest) = dec("11,539km");
        assert_eq!((d.digits, d.scale, rest), (11539, 0, "km"));
        let (d, rest) = dec(".5");
        assert_eq!((d.digits, d.scale, rest), (5, 1, ""));
        let (d, rest) = dec("2.");
        assert_eq!((d.digits, d.scale, rest), (2, 0, ""));
    }

    #[test]
    fn exponent_needs_digits_to_count() {
        let (d, rest) = dec("1e10");
        assert_eq!((d.to_u64_times(1), rest), (Some(10_000_000_000), ""));
        let (d, rest) = dec("2.5E-1");
        assert_eq!((d.to_f64(), rest), (0.25, ""));
        assert_eq!(dec("1e").1, "e");
        assert_eq!(dec("3 Ebytes").1, "Ebytes");
    }

    #[test]
    fn rejects_malformed_numbers() {
        use ParseErrorKind::*;
        for (input, kind) in [
            ("", Empty),
            ("   ", Empty),
            ("-1", Negative),
            ("abc", NotANumber),
            ("NaN", NotANumber),
            ("+1", NotANumber),
            (".", Malformed),
            ("1.5.5G", Malformed),
            ("1,5", Malformed),
            ("1,0000", Malformed),
            ("1234,567", Malformed),
            ("1 2", Malformed),
            ("1e5-", Malformed),
        ] {
            assert_eq!(split_number(input).err(), Some(kind), "{input:?}");
        }
    }

    #[test]
    fn converts_exactly_with_half_up_rounding() {
        assert_eq!(dec("1.5").0.to_u64_times(1 << 30), Some(1_610_612_736));
        assert_eq!(dec("0.4").0.to_u64_times(1), Some(0));
        assert_eq!(dec("0.5").0.to_u64_times(1), Some(1));
        assert_eq!(
            dec("18446744073709551615").0.to_u64_times(1),
            Some(u64::MAX)
        );
        assert_eq!(dec("18446744073709551616").0.to_u64_times(1), None);
        assert_eq!(dec("1e999").0.to_u64_times(1), None);
        assert_eq!(dec("1e-999").0.to_u64_times(1 << 40), Some(0));
        assert_eq!(dec("0e999").0.to_u64_times(1), Some(0));
        // 50 significant digits: the tail is dropped, the value still fits.
        let long = format!("1.{}", "0".repeat(49));
        assert_eq!(
            dec(&long).0.to_u64_times(1_000_000_000_000),
            Some(1_000_000_000_000)
        );
        // A very long integer is out of range, not silently shortened.
        assert_eq!(dec(&"9".repeat(60)).0.to_u64_times(1), None);
    }

    #[test]
    fn prints_three_figures_like_iperf3() {
        assert_eq!(three_figures(3.8), "3.80");
        assert_eq!(three_figures(9.994), "9.99");
        assert_eq!(three_figures(9.995), "10.0");
        assert_eq!(three_figures(32.64), "32.6");
        assert_eq!(three_figures(99.95), "100");
        assert_eq!(three_figures(1023.0), "1023");
        assert_eq!(three_figures_trimmed(17.0), "17");
        assert_eq!(three_figures_trimmed(2.50), "2.5");
        assert_eq!(three_figures_trimmed(120.0), "120");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(46_156), "46,156");
        assert_eq!(group_thousands(272_400), "272,400");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}

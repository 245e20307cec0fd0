//! Byte counts: parsing with iperf's conventions and printing in three styles.
//!
//! Parsing follows iperf3's `-w`, `-l` and `-n` flags, where a bare letter
//! multiplies by a power of 1024 ("64M" = 64 × 2^20 = 67,108,864), and adds
//! two explicit spellings: IEC "KiB…PiB" (also ×1024) and SI "KB…PB"
//! (×1000). Note that "64MB" is therefore 64,000,000 here, whereas iperf3
//! reads only the first letter and would take it as 64 MiB; the explicit SI
//! form exists so that figures quoted in decimal units (the seeds' "560 GB",
//! "19.74 MB") can be typed as they are written. iperf's own output spelling
//! "GBytes" keeps iperf's meaning, ×1024, so that its output parses back.
//!
//! Printing: [`fmt_size`] uses binary prefixes ("18.83 MiB", the project
//! convention, ARCHITECTURE.md), [`fmt_size_si`] decimal ones ("19.74 MB",
//! as the seeds quote a BDP) and [`fmt_size_iperf`] reproduces iperf3's
//! "3.80 GBytes" so columns line up with iperf3 output.

use crate::error::{ParseError, ParseErrorKind, Quantity};
use crate::num::{split_number, three_figures};

/// The prefix letters in order of power: K = 1, M = 2, ..., P = 5.
const PREFIX_LETTERS: [char; 5] = ['k', 'm', 'g', 't', 'p'];

/// Reads a byte count.
///
/// Accepted suffixes, case-insensitive, optionally after spaces:
/// - none, `B`, `byte`, `bytes`: bytes;
/// - `K`, `M`, `G`, `T`, `P`, their `Ki`/`KiB` forms and iperf's `KBytes`
///   forms: ×1024, ×1024², …;
/// - `KB`, `MB`, `GB`, `TB`, `PB`: ×1000, ×1000², … (SI).
///
/// Fractions are allowed ("1.5G" = 1,610,612,736) and the result is rounded
/// to the nearest byte. Errors: empty input, a sign, a malformed number, an
/// unknown suffix, or a value above `u64::MAX`.
pub fn parse_size(input: &str) -> Result<u64, ParseError> {
    let err = |kind| ParseError::new(Quantity::Size, input, kind);
    let (number, suffix) = split_number(input).map_err(err)?;
    let mult = size_multiplier(suffix)
        .ok_or_else(|| err(ParseErrorKind::UnknownSuffix(suffix.to_owned())))?;
    number
        .to_u64_times(mult)
        .ok_or_else(|| err(ParseErrorKind::OutOfRange))
}

/// The factor a size suffix stands for, or `None` if it is not one.
fn size_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    if matches!(lower.as_str(), "" | "b" | "byte" | "bytes") {
        return Some(1);
    }
    let mut chars = lower.chars();
    let letter = chars.next()?;
    let power = PREFIX_LETTERS.iter().position(|&p| p == letter)? + 1;
    let power = u32::try_from(power).ok()?;
    match chars.as_str() {
        "" | "i" | "ib" | "byte" | "bytes" => Some(1024u64.pow(power)),
        "b" => Some(1000u64.pow(power)),
        _ => None,
    }
}

/// Prints a byte count with binary prefixes (the project's convention).
///
/// Below 1 KiB the exact count is printed ("512 B"). Above, the largest prefix
/// up to PiB is used; exact multiples print without decimals ("64 MiB"), other
/// values with two ("18.83 MiB", "1.50 KiB"), which [`parse_size`] reads back
/// to within 0.5 %.
pub fn fmt_size(bytes: u64) -> String {
    scaled(bytes, 1024, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
}

/// Prints a byte count with decimal (SI) prefixes: 19,741,250 → "19.74 MB".
///
/// Same rules as [`fmt_size`] with powers of 1000: "999 B", "64 MB",
/// "1.50 kB".
pub fn fmt_size_si(bytes: u64) -> String {
    scaled(bytes, 1000, &["B", "kB", "MB", "GB", "TB", "PB"])
}

/// Shared body of [`fmt_size`] and [`fmt_size_si`].
fn scaled(n: u64, base: u64, labels: &[&str]) -> String {
    let mut power = 0;
    let mut unit = 1u64;
    while power + 1 < labels.len() {
        let next = unit.saturating_mul(base);
        // Climb when n reaches the next unit, and also when two decimals
        // would print a whole `base` of this one (1023.999 KiB → "1.00 MiB").
        let prints_as_base = power > 0 && n as f64 / unit as f64 >= base as f64 - 0.005;
        if n < next && !prints_as_base {
            break;
        }
        power += 1;
        unit = next;
    }
    if n.is_multiple_of(unit) {
        format!("{} {}", n / unit, labels[power])
    } else {
        format!("{:.2} {}", n as f64 / unit as f64, labels[power])
    }
}

/// Prints a byte count the way iperf3 does: "3.80 GBytes", "512 KBytes",
/// "1.00 MBytes".
///
/// iperf3's `unit_snprintf` in adaptive byte mode divides by 1024 while the
/// value is at least 1024 (up to TBytes) and prints three significant figures
/// (two decimals below 9.995, one below 99.95, none above), so values from 1000
/// to 1023 keep four digits ("1000 KBytes"). The unit word is the label plus
/// "s" ("Bytes", "KBytes", "MBytes", "GBytes", "TBytes"). iperf3 pads to four
/// characters; this function does not.
pub fn fmt_size_iperf(bytes: u64) -> String {
    const LABELS: [&str; 5] = ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"];
    let mut value = bytes as f64;
    let mut power = 0;
    while value >= 1024.0 && power + 1 < LABELS.len() {
        value /= 1024.0;
        power += 1;
    }
    format!("{} {}", three_figures(value), LABELS[power])
}

#[cfg(test)]
mod tests {
    use super::*;

    const KI: u64 = 1024;
    const MI: u64 = KI * KI;
    const GI: u64 = MI * KI;
    const TI: u64 = GI * KI;

    #[test]
    fn bare_letters_are_powers_of_1024_like_iperf() {
        assert_eq!(parse_size("64M"), Ok(67_108_864));
        assert_eq!(parse_size("64m"), Ok(67_108_864));
        assert_eq!(parse_size("128k"), Ok(131_072));
        assert_eq!(parse_size("1.5G"), Ok(1_610_612_736));
        assert_eq!(parse_size("2T"), Ok(2 * TI));
        assert_eq!(parse_size("1P"), Ok(TI * KI));
        assert_eq!(parse_size("9000"), Ok(9000));
    }

    #[test]
    fn iec_and_iperf_spellings_are_1024_si_spelling_is_1000() {
        assert_eq!(parse_size("64MiB"), Ok(64 * MI));
        assert_eq!(parse_size("64 mib"), Ok(64 * MI));
        assert_eq!(parse_size("64Mi"), Ok(64 * MI));
        assert_eq!(parse_size("560 GBytes"), Ok(560 * GI));
        assert_eq!(parse_size("64MB"), Ok(64_000_000));
        assert_eq!(parse_size("19.74 MB"), Ok(19_740_000));
        assert_eq!(parse_size("1.1 TB"), Ok(1_100_000_000_000));
        assert_eq!(parse_size("10kB"), Ok(10_000));
    }

    #[test]
    fn byte_words_and_spacing() {
        assert_eq!(parse_size("9000B"), Ok(9000));
        assert_eq!(parse_size(" 9000 bytes "), Ok(9000));
        assert_eq!(parse_size("1 byte"), Ok(1));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1,048,576"), Ok(MI));
        assert_eq!(parse_size("1e3"), Ok(1000));
    }

    #[test]
    fn fractions_round_to_the_nearest_byte() {
        assert_eq!(parse_size("0.4"), Ok(0));
        assert_eq!(parse_size("0.5"), Ok(1));
        assert_eq!(parse_size("0.001K"), Ok(1)); // 1.024 bytes
    }

    #[test]
    fn rejects_bad_sizes_with_a_reason() {
        use ParseErrorKind::*;
        for (input, kind) in [
            ("", Empty),
            ("-1", Negative),
            ("1e999", OutOfRange),
            ("abc", NotANumber),
            ("12Q", UnknownSuffix("Q".into())),
            ("1.5.5G", Malformed),
            ("99999999T", OutOfRange),
            ("16384P", OutOfRange),
            ("10 GB/s", UnknownSuffix("GB/s".into())),
            ("1E", UnknownSuffix("E".into())),
            ("NaN", NotANumber),
            ("inf", NotANumber),
        ] {
            let e = parse_size(input).unwrap_err();
            assert_eq!(e.kind(), &kind, "{input:?}");
            assert_eq!(e.input(), input);
        }
    }

    #[test]
    fn unknown_suffix_message_matches_the_documented_form() {
        let msg = parse_size("12Q").unwrap_err().to_string();
        assert!(
            msg.starts_with(r#"invalid size "12Q": unknown suffix "Q" (use K, M, G, T"#),
            "{msg}"
        );
    }

    #[test]
    fn largest_size_parses_and_one_more_does_not() {
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_size("18446744073709551616").unwrap_err().kind(),
            &ParseErrorKind::OutOfRange
        );
        assert_eq!(parse_size("16383P"), Ok(16_383 * TI * KI));
    }

    #[test]
    fn fmt_size_uses_binary_prefixes() {
        assert_eq!(fmt_size(0), "0 B");
        assert_eq!(fmt_size(1023), "1023 B");
        assert_eq!(fmt_size(1024), "1 KiB");
        assert_eq!(fmt_size(1536), "1.50 KiB");
        assert_eq!(fmt_size(64 * MI), "64 MiB");
        assert_eq!(fmt_size(19_741_250), "18.83 MiB");
        assert_eq!(fmt_size(MI - 1), "1.00 MiB");
        assert_eq!(fmt_size(u64::MAX), "16384.00 PiB");
    }

    #[test]
    fn fmt_size_si_prints_the_seed_bdp() {
        assert_eq!(fmt_size_si(19_741_250), "19.74 MB");
        assert_eq!(fmt_size_si(999), "999 B");
        assert_eq!(fmt_size_si(1_000), "1 kB");
        assert_eq!(fmt_size_si(125_000_000), "125 MB");
        assert_eq!(fmt_size_si(999_999), "1.00 MB");
    }

    #[test]
    fn fmt_size_iperf_matches_iperf3_output() {
        assert_eq!(fmt_size_iperf(512 * KI), "512 KBytes");
        assert_eq!(fmt_size_iperf(MI), "1.00 MBytes");
        assert_eq!(fmt_size_iperf(4_080_218_931), "3.80 GBytes");
        assert_eq!(fmt_size_iperf(0), "0.00 Bytes");
        assert_eq!(fmt_size_iperf(1000 * KI), "1000 KBytes");
        assert_eq!(fmt_size_iperf(560 * GI), "560 GBytes");
        assert_eq!(fmt_size_iperf(3 * TI), "3.00 TBytes");
        assert_eq!(fmt_size_iperf(2000 * TI), "2000 TBytes");
    }

    #[test]
    fn printed_sizes_parse_back_within_rounding() {
        let mut n: u64 = 1;
        while n < u64::MAX / 3 {
            for printed in [fmt_size(n), fmt_size_si(n), fmt_size_iperf(n)] {
                let back = parse_size(&printed).unwrap_or_else(|e| panic!("{e}"));
                let err = (back as f64 - n as f64).abs() / n as f64;
                // Two decimals on a value ≥ 1 are within 0.5 %; iperf's three
                // figures within 0.5 % too (5 in the fourth figure).
                assert!(err <= 0.005, "{n} → {printed:?} → {back}");
            }
            n = n * 3 + 7;
        }
    }

    #[test]
    fn exact_sizes_round_trip_exactly() {
        for n in [0, 1, 1023, 1024, 9000, 64 * MI, 3 * GI, 5 * TI, u64::MAX] {
            if n % 1024 == 0 || n < 1024 {
                assert_eq!(parse_size(&fmt_size(n)), Ok(n), "{n}");
            }
        }
    }
}

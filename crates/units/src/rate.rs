//! Bit rates in bit/s (`u64`): parsing with iperf's conventions and printing.
//!
//! Rates use decimal prefixes everywhere: iperf3's `-b` reads "10G" as
//! 10 × 10^9 bit/s (its `unit_atof_rate`), network capacities are quoted in
//! decimal Gbit/s, and the seeds' "9.29 Gbps" is decimal. Units are bits: an
//! upper-case "B" (bytes) is refused rather than silently read as bits, since
//! "10GB/s" would otherwise be taken for an eighth of what was meant.

use crate::error::{ParseError, ParseErrorKind, Quantity};
use crate::num::{split_number, three_figures};

/// The prefix letters in order of power: k = 1, m = 2, g = 3, t = 4.
const PREFIX_LETTERS: [char; 4] = ['k', 'm', 'g', 't'];

/// Unit words accepted after the (optional) prefix, compared in lower case.
const BIT_UNITS: [&str; 10] = [
    "", "b", "bit", "bits", "bps", "b/s", "bit/s", "bits/s", "bit/sec", "bits/sec",
];

/// Reads a bit rate in bit/s.
///
/// A prefix `k`, `m`, `g` or `t` (either case) multiplies by 1000, 1000², …;
/// it may be followed by a bit unit: `b`, `bit`, `bits`, `bps`, `b/s`,
/// `bit/s`, `bits/s`, `bits/sec` ("10G", "2.5g", "100m", "9.29Gbps",
/// "1 Gbit/s", iperf3's "32.6 Gbits/sec"). A bare number is bit/s. A capital
/// `B` (bytes: "GB/s", "MBps") is an error, except in "BIT". The result is rounded to the nearest bit/s.
pub fn parse_rate(input: &str) -> Result<u64, ParseError> {
    let err = |kind| ParseError::new(Quantity::Rate, input, kind);
    let (number, suffix) = split_number(input).map_err(err)?;
    let mult = rate_multiplier(suffix)
        .ok_or_else(|| err(ParseErrorKind::UnknownSuffix(suffix.to_owned())))?;
    number
        .to_u64_times(mult)
        .ok_or_else(|| err(ParseErrorKind::OutOfRange))
}

/// The factor a rate suffix stands for, or `None` if it is not one.
fn rate_multiplier(suffix: &str) -> Option<u64> {
    let mut chars = suffix.chars();
    let (mult, unit) = match chars.next().map(|c| c.to_ascii_lowercase()) {
        Some(c) if PREFIX_LETTERS.contains(&c) => {
            let power = PREFIX_LETTERS.iter().position(|&p| p == c)? + 1;
            (1000u64.pow(u32::try_from(power).ok()?), chars.as_str())
        }
        _ => (1, suffix),
    };
    let lower = unit.to_ascii_lowercase();
    // A capital B means bytes ("GB", "MBps"), except in the word "bit"
    // written in capitals ("GBIT").
    if unit.contains('B') && !lower.starts_with("bit") {
        return None;
    }
    BIT_UNITS.contains(&lower.as_str()).then_some(mult)
}

/// Prints a rate with decimal prefixes and three significant figures:
/// "32.6 Gbit/s", "9.29 Gbit/s", "100 Mbit/s".
///
/// Below 1 kbit/s the exact integer is printed ("512 bit/s"). The prefix is
/// chosen after rounding, so 999.7 Mbit/s prints "1.00 Gbit/s", never
/// "1000 Mbit/s". Units: bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s.
pub fn fmt_rate(bps: u64) -> String {
    const LABELS: [&str; 5] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"];
    if bps < 1000 {
        return format!("{bps} {}", LABELS[0]);
    }
    let mut value = bps as f64;
    let mut power = 0;
    // 999.5 and above would print as "1000" with three figures.
    while value >= 999.5 && power + 1 < LABELS.len() {
        value /= 1000.0;
        power += 1;
    }
    format!("{} {}", three_figures(value), LABELS[power])
}

/// Prints a rate the way iperf3 does: "32.6 Gbits/sec", "941 Mbits/sec".
///
/// iperf3's `unit_snprintf` in adaptive bit mode divides by 1000 while the
/// value is at least 1000 (up to Tbit) and prints three significant figures,
/// so 999.5–999.99 prints "1000". Unit words: bits/sec, Kbits/sec, Mbits/sec,
/// Gbits/sec, Tbits/sec (iperf3's capital K). No padding.
pub fn fmt_rate_iperf(bps: u64) -> String {
    const LABELS: [&str; 5] = ["bits", "Kbits", "Mbits", "Gbits", "Tbits"];
    let mut value = bps as f64;
    let mut power = 0;
    while value >= 1000.0 && power + 1 < LABELS.len() {
        value /= 1000.0;
        power += 1;
    }
    format!("{} {}/sec", three_figures(value), LABELS[power])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_powers_of_1000_like_iperf() {
        assert_eq!(parse_rate("10G"), Ok(10_000_000_000));
        assert_eq!(parse_rate("2.5g"), Ok(2_500_000_000));
        assert_eq!(parse_rate("100m"), Ok(100_000_000));
        assert_eq!(parse_rate("9.29G"), Ok(9_290_000_000));
        assert_eq!(parse_rate("64k"), Ok(64_000));
        assert_eq!(parse_rate("1T"), Ok(1_000_000_000_000));
        assert_eq!(parse_rate("1000000"), Ok(1_000_000));
    }

    #[test]
    fn bit_unit_words_are_accepted() {
        for s in [
            "10gbit",
            "10 Gbit/s",
            "10Gbps",
            "10 Gbits/sec",
            "10Gb",
            "10 GBIT",
            "10GBits/sec",
            "10gb/s",
            "10e9",
            "10e9 bps",
            "10,000,000,000 bit/s",
            "10000mbit",
            "10000000kbit",
        ] {
            assert_eq!(parse_rate(s), Ok(10_000_000_000), "{s:?}");
        }
        assert_eq!(parse_rate("300 bps"), Ok(300));
        assert_eq!(parse_rate("300b"), Ok(300));
    }

    #[test]
    fn byte_rates_and_unknown_units_are_refused() {
        for s in [
            "10GB/s",
            "10GBytes/sec",
            "10 MBps",
            "10 Bps",
            "10x",
            "10 gbyte",
        ] {
            let e = parse_rate(s).unwrap_err();
            assert!(
                matches!(e.kind(), ParseErrorKind::UnknownSuffix(_)),
                "{s:?}: {e}"
            );
        }
        assert!(
            parse_rate("10GB/s")
                .unwrap_err()
                .to_string()
                .contains("bit/s")
        );
    }

    #[test]
    fn rejects_bad_rates() {
        use ParseErrorKind::*;
        for (input, kind) in [
            ("", Empty),
            ("-1G", Negative),
            ("1e999", OutOfRange),
            ("abc", NotANumber),
            ("1.5.5G", Malformed),
            ("99999999T", OutOfRange),
            ("18446744073709551616", OutOfRange),
        ] {
            assert_eq!(parse_rate(input).unwrap_err().kind(), &kind, "{input:?}");
        }
        assert_eq!(parse_rate("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn fmt_rate_uses_decimal_prefixes_and_three_figures() {
        assert_eq!(fmt_rate(32_640_000_000), "32.6 Gbit/s");
        assert_eq!(fmt_rate(9_290_000_000), "9.29 Gbit/s");
        assert_eq!(fmt_rate(100_000_000), "100 Mbit/s");
        assert_eq!(fmt_rate(999_700_000), "1.00 Gbit/s");
        assert_eq!(fmt_rate(1_000), "1.00 kbit/s");
        assert_eq!(fmt_rate(512), "512 bit/s");
        assert_eq!(fmt_rate(0), "0 bit/s");
        assert_eq!(fmt_rate(u64::MAX), "18446744 Tbit/s");
    }

    #[test]
    fn fmt_rate_iperf_matches_iperf3_output() {
        assert_eq!(fmt_rate_iperf(32_640_000_000), "32.6 Gbits/sec");
        assert_eq!(fmt_rate_iperf(941_000_000), "941 Mbits/sec");
        assert_eq!(fmt_rate_iperf(4_000_000_000), "4.00 Gbits/sec");
        assert_eq!(fmt_rate_iperf(999_700_000), "1000 Mbits/sec");
        assert_eq!(fmt_rate_iperf(56_000), "56.0 Kbits/sec");
        assert_eq!(fmt_rate_iperf(0), "0.00 bits/sec");
        assert_eq!(fmt_rate_iperf(1_500_000_000_000), "1.50 Tbits/sec");
    }

    #[test]
    fn printed_rates_parse_back_within_rounding() {
        let mut bps: u64 = 1;
        while bps < u64::MAX / 3 {
            for printed in [fmt_rate(bps), fmt_rate_iperf(bps)] {
                let back = parse_rate(&printed).unwrap_or_else(|e| panic!("{e}"));
                let err = (back as f64 - bps as f64).abs() / bps as f64;
                assert!(err <= 0.005, "{bps} → {printed:?} → {back}");
            }
            bps = bps * 3 + 1;
        }
    }
}

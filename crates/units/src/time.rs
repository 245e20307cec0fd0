//! Time as whole nanoseconds: the [`Nanos`] newtype, duration parsing and
//! printing.
//!
//! The project keeps time in nanoseconds (ARCHITECTURE.md, Conventions); a
//! `u64` of them spans 584 years, far beyond any test. This module never reads
//! a clock (the crate is pure, clippy.toml bans `Instant::now`): a `Nanos` is
//! either a span or an instant on a clock the caller owns.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ParseError, ParseErrorKind, Quantity};
use crate::num::{split_number, three_figures_trimmed};
use crate::time_unit::TimeUnit;

/// A span (or an instant on a caller-supplied clock) in whole nanoseconds.
///
/// Arithmetic with `+` and `-` panics on overflow and underflow, as
/// [`Duration`]'s does; use the `checked_*` and `saturating_*` methods where
/// that can happen. Serialises as a bare integer of nanoseconds.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero.
    pub const ZERO: Self = Self(0);
    /// The largest value, about 584 years.
    pub const MAX: Self = Self(u64::MAX);
    /// One microsecond.
    pub const MICROSECOND: Self = Self(1_000);
    /// One millisecond.
    pub const MILLISECOND: Self = Self(1_000_000);
    /// One second.
    pub const SECOND: Self = Self(1_000_000_000);

    /// `us` microseconds, saturating at [`Nanos::MAX`].
    pub const fn from_micros(us: u64) -> Self {
        Self(us.saturating_mul(1_000))
    }

    /// `ms` milliseconds, saturating at [`Nanos::MAX`].
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms.saturating_mul(1_000_000))
    }

    /// `s` seconds, saturating at [`Nanos::MAX`].
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1_000_000_000))
    }

    /// `secs` seconds rounded to the nearest nanosecond. Saturating: NaN and
    /// negative values give zero, values beyond the range give [`Nanos::MAX`].
    pub fn from_secs_f64(secs: f64) -> Self {
        // `as` from f64 to u64 saturates and maps NaN to 0 (Rust reference,
        // "Numeric cast"), which is exactly the contract above.
        Self((secs * 1e9).round() as u64)
    }

    /// The value in nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole microseconds (truncated).
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// Whole milliseconds (truncated).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Seconds as a float (exact below 2^53 ns, about 104 days).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Self) -> Option<Self> {
        match self.0.checked_add(rhs.0) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }

    /// `self - rhs`, or `None` if `rhs` is larger.
    pub const fn checked_sub(self, rhs: Self) -> Option<Self> {
        match self.0.checked_sub(rhs.0) {
            Some(n) => Some(Self(n)),
            None => None,
        }
    }

    /// `self + rhs`, clamped at [`Nanos::MAX`].
    pub const fn saturating_add(self, rhs: Self) -> Self {
        Self(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, clamped at zero.
    pub const fn saturating_sub(self, rhs: Self) -> Self {
        Self(self.0.saturating_sub(rhs.0))
    }

    /// Converts to a [`Duration`] (always exact).
    pub const fn to_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Converts from a [`Duration`], saturating at [`Nanos::MAX`].
    pub fn from_duration(d: Duration) -> Self {
        Self(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl Add for Nanos {
    type Output = Self;
    fn add(self, rhs: Self) -> Self {
        self.checked_add(rhs).expect("overflow when adding Nanos")
    }
}

impl Sub for Nanos {
    type Output = Self;
    fn sub(self, rhs: Self) -> Self {
        self.checked_sub(rhs)
            .expect("underflow when subtracting Nanos")
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Self) {
        *self = *self + rhs;
    }
}

impl SubAssign for Nanos {
    fn sub_assign(&mut self, rhs: Self) {
        *self = *self - rhs;
    }
}

impl From<Duration> for Nanos {
    fn from(d: Duration) -> Self {
        Self::from_duration(d)
    }
}

impl From<Nanos> for Duration {
    fn from(n: Nanos) -> Self {
        n.to_duration()
    }
}

/// Prints with [`fmt_duration`].
impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_duration(*self))
    }
}

/// Reads a duration, rounding to the nearest nanosecond.
///
/// Suffixes (case-insensitive, optionally after spaces): `ns`; `us`, `µs`
/// (micro sign U+00B5) or `μs` (Greek mu U+03BC); `ms`; `s`, `sec`, `secs`;
/// `min`; `h`; `d` (days). A bare number is in `default_unit`. Examples: "120ms",
/// "0.12s", "17 ms", "500us", "500µs", "2ns", "1.5" (with `Secs`: 1.5 s).
/// A lone "m" is refused as ambiguous (minutes or milli-?).
pub fn parse_duration(input: &str, default_unit: TimeUnit) -> Result<Nanos, ParseError> {
    let err = |kind| ParseError::new(Quantity::Duration(default_unit), input, kind);
    let (number, suffix) = split_number(input).map_err(err)?;
    let mult = match suffix.to_lowercase().as_str() {
        "" => default_unit.nanos(),
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" | "secs" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return Err(err(ParseErrorKind::UnknownSuffix(suffix.to_owned()))),
    };
    number
        .to_u64_times(mult)
        .map(Nanos)
        .ok_or_else(|| err(ParseErrorKind::OutOfRange))
}

/// Prints a duration for people.
///
/// Under a minute: three significant figures in the largest fitting unit,
/// trailing zeros dropped: "2 ns", "500 µs", "17 ms", "120 ms", "1.5 s",
/// "39.7 s". These parse back with [`parse_duration`].
///
/// A minute or more: whole seconds, then a breakdown in parentheses, because
/// the models quote such figures both ways (Reno's responsiveness at 10 Gbit/s,
/// 120 ms: "6,164 s (1 h 43 min)"): "6164 s (1 h 43 min)", "616 s (10 min 16 s)",
/// "600 s (10 min)".
/// The breakdown has two units, the smaller rounded: min and s below an hour,
/// h and min below a day, d and h beyond.
pub fn fmt_duration(d: Nanos) -> String {
    let ns = d.0;
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    if ns < 60_000_000_000 {
        let (value, unit) = if ns < 999_500 {
            (ns as f64 / 1e3, "µs")
        } else if ns < 999_500_000 {
            (ns as f64 / 1e6, "ms")
        } else {
            (ns as f64 / 1e9, "s")
        };
        return format!("{} {unit}", three_figures_trimmed(value));
    }
    // Rounded to the nearest second without overflowing near Nanos::MAX.
    let secs = ns / 1_000_000_000 + u64::from(ns % 1_000_000_000 >= 500_000_000);
    let breakdown = if secs < 3_600 {
        two_units(secs, 60, "min", "s")
    } else if secs < 86_400 {
        two_units((secs + 30) / 60, 60, "h", "min")
    } else {
        two_units((secs + 1_800) / 3_600, 24, "d", "h")
    };
    format!("{secs} s ({breakdown})")
}

/// "`n / per` `big` `n % per` `small`", leaving out a zero remainder.
fn two_units(n: u64, per: u64, big: &str, small: &str) -> String {
    match (n / per, n % per) {
        (b, 0) => format!("{b} {big}"),
        (b, s) => format!("{b} {big} {s} {small}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_accessors_agree() {
        assert_eq!(Nanos::from_millis(120), Nanos(120_000_000));
        assert_eq!(Nanos::from_micros(500), Nanos(500_000));
        assert_eq!(Nanos::from_secs(10), Nanos::SECOND + Nanos(9_000_000_000));
        assert_eq!(Nanos::from_secs_f64(0.12), Nanos::from_millis(120));
        assert_eq!(Nanos(1_234_567).as_micros(), 1_234);
        assert_eq!(Nanos(1_234_567).as_millis(), 1);
        assert_eq!(Nanos::from_millis(17).as_secs_f64(), 0.017);
        assert_eq!(Nanos::from_millis(u64::MAX), Nanos::MAX);
    }

    #[test]
    fn from_secs_f64_saturates() {
        assert_eq!(Nanos::from_secs_f64(f64::NAN), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(-1.0), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(1e30), Nanos::MAX);
        assert_eq!(Nanos::from_secs_f64(f64::INFINITY), Nanos::MAX);
    }

    #[test]
    fn checked_and_saturating_arithmetic() {
        let a = Nanos(5);
        assert_eq!(a.checked_sub(Nanos(6)), None);
        assert_eq!(a.saturating_sub(Nanos(6)), Nanos::ZERO);
        assert_eq!(Nanos::MAX.checked_add(a), None);
        assert_eq!(Nanos::MAX.saturating_add(a), Nanos::MAX);
        let mut t = Nanos(10);
        t += Nanos(5);
        t -= Nanos(3);
        assert_eq!(t - a, Nanos(7));
    }

    #[test]
    #[should_panic(expected = "underflow")]
    fn subtraction_below_zero_panics() {
        let _ = Nanos(1) - Nanos(2);
    }

    #[test]
    fn converts_to_and_from_std_duration() {
        let d = Duration::from_micros(1_500);
        assert_eq!(Nanos::from(d), Nanos(1_500_000));
        assert_eq!(Duration::from(Nanos(1_500_000)), d);
        assert_eq!(Nanos::from(Duration::MAX), Nanos::MAX);
    }

    #[test]
    fn serialises_as_a_bare_integer() {
        // serde's `transparent` makes Nanos its inner u64; checked through
        // the serde data model without a format crate.
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error, U64Deserializer};
        let de: U64Deserializer<Error> = 42u64.into_deserializer();
        assert_eq!(Nanos::deserialize(de), Ok(Nanos(42)));
    }

    #[test]
    fn parses_the_documented_forms() {
        let ms = TimeUnit::Millis;
        let s = TimeUnit::Secs;
        assert_eq!(parse_duration("120ms", s), Ok(Nanos::from_millis(120)));
        assert_eq!(parse_duration("0.12s", ms), Ok(Nanos::from_millis(120)));
        assert_eq!(parse_duration("17 ms", s), Ok(Nanos::from_millis(17)));
        assert_eq!(parse_duration("500us", s), Ok(Nanos::from_micros(500)));
        assert_eq!(parse_duration("500µs", s), Ok(Nanos::from_micros(500)));
        assert_eq!(parse_duration("500μs", s), Ok(Nanos::from_micros(500)));
        assert_eq!(parse_duration("2ns", s), Ok(Nanos(2)));
        assert_eq!(parse_duration("1.5", s), Ok(Nanos(1_500_000_000)));
        assert_eq!(parse_duration("120", ms), Ok(Nanos::from_millis(120)));
        assert_eq!(parse_duration("10", s), Ok(Nanos::from_secs(10)));
        assert_eq!(parse_duration("2 min", s), Ok(Nanos::from_secs(120)));
        assert_eq!(parse_duration("1.5h", s), Ok(Nanos::from_secs(5_400)));
        assert_eq!(parse_duration("30d", s), Ok(Nanos::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("20 SEC", s), Ok(Nanos::from_secs(20)));
        assert_eq!(parse_duration("0.5ns", s), Ok(Nanos(1)));
    }

    #[test]
    fn rejects_bad_durations() {
        use ParseErrorKind::*;
        let s = TimeUnit::Secs;
        for (input, kind) in [
            ("", Empty),
            ("-1s", Negative),
            ("1e999", OutOfRange),
            ("abc", NotANumber),
            ("1.5.5s", Malformed),
            ("10m", UnknownSuffix("m".into())),
            ("10 days", UnknownSuffix("days".into())),
            ("600000000000h", OutOfRange),
        ] {
            assert_eq!(
                parse_duration(input, s).unwrap_err().kind(),
                &kind,
                "{input:?}"
            );
        }
    }

    #[test]
    fn short_durations_print_three_figures() {
        assert_eq!(fmt_duration(Nanos(2)), "2 ns");
        assert_eq!(fmt_duration(Nanos(999)), "999 ns");
        assert_eq!(fmt_duration(Nanos::from_micros(500)), "500 µs");
        assert_eq!(fmt_duration(Nanos(999_700)), "1 ms");
        assert_eq!(fmt_duration(Nanos::from_millis(17)), "17 ms");
        assert_eq!(fmt_duration(Nanos::from_millis(120)), "120 ms");
        assert_eq!(fmt_duration(Nanos::from_millis(1_500)), "1.5 s");
        assert_eq!(fmt_duration(Nanos::from_secs_f64(39.685)), "39.7 s");
        assert_eq!(fmt_duration(Nanos::from_millis(59_900)), "59.9 s");
        assert_eq!(Nanos::from_millis(17).to_string(), "17 ms");
    }

    #[test]
    fn long_durations_print_seconds_and_a_breakdown() {
        assert_eq!(fmt_duration(Nanos::from_secs(60)), "60 s (1 min)");
        assert_eq!(fmt_duration(Nanos::from_secs(600)), "600 s (10 min)");
        assert_eq!(fmt_duration(Nanos::from_secs(616)), "616 s (10 min 16 s)");
        assert_eq!(fmt_duration(Nanos::from_secs(6_164)), "6164 s (1 h 43 min)");
        assert_eq!(fmt_duration(Nanos::from_secs(3_600)), "3600 s (1 h)");
        assert_eq!(fmt_duration(Nanos::from_secs(90_000)), "90000 s (1 d 1 h)");
        assert_eq!(fmt_duration(Nanos::MAX), "18446744074 s (213504 d)");
    }

    #[test]
    fn short_printed_durations_parse_back() {
        let mut ns: u64 = 1;
        while ns < 60_000_000_000 {
            let printed = fmt_duration(Nanos(ns));
            let back = parse_duration(&printed, TimeUnit::Secs).unwrap().0;
            let err = (back as f64 - ns as f64).abs() / ns as f64;
            assert!(err <= 0.005, "{ns} → {printed:?} → {back}");
            ns = ns * 3 + 1;
        }
    }
}

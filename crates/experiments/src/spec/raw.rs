//! The experiment file's raw shape: what serde reads (unknown keys refused),
//! every value with its span, and [`Ctx`], which reads one raw value into a
//! checked one and names the file, line and field when it cannot.

use std::ops::Range;

use longhaul_proto::msg::MAX_WRITE_LEN;
use longhaul_units::{Nanos, TimeUnit, parse_duration, parse_rate, parse_size};
use serde::Deserialize;
use toml::Spanned;

use crate::error::{SpecError, SpecWarning, line_col};

use super::args::rate_flag;
use super::model::{
    KNOWN_CONGESTION, KNOWN_QUIC_CONGESTION, MAX_FRAME, MAX_RATE_BPS, MAX_STREAMS, MAX_WINDOW,
    MIN_FRAME, QUIC_PREFIX,
};

pub(super) type V = Spanned<toml::Value>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub(super) name: V,
    #[serde(default)]
    pub(super) title: Option<V>,
    #[serde(default)]
    pub(super) source: Option<V>,
    #[serde(default)]
    pub(super) notes: Option<V>,
    #[serde(default)]
    pub(super) original_scale: Option<V>,
    #[serde(default)]
    pub(super) scale: Option<V>,
    pub(super) path: Spanned<RawPath>,
    #[serde(default)]
    pub(super) test: Option<RawTest>,
    pub(super) sweep: Spanned<RawSweep>,
    pub(super) duration: V,
    #[serde(default)]
    pub(super) omit: Option<V>,
    #[serde(default)]
    pub(super) interval: Option<V>,
    #[serde(default)]
    pub(super) repetitions: Option<V>,
    #[serde(default)]
    pub(super) event: Option<Spanned<RawEvent>>,
    #[serde(default)]
    pub(super) record: Option<Spanned<Vec<V>>>,
    #[serde(default)]
    pub(super) find_rate: Option<Spanned<RawFindRate>>,
    #[serde(default)]
    pub(super) lsr: Option<V>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFindRate {
    #[serde(default)]
    pub(super) loss_threshold: Option<V>,
    #[serde(default)]
    pub(super) upper: Option<V>,
    #[serde(default)]
    pub(super) resolution: Option<V>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPath {
    #[serde(default)]
    pub(super) preset: Option<V>,
    #[serde(default)]
    pub(super) file: Option<V>,
    #[serde(default)]
    pub(super) rtt: Option<V>,
    #[serde(default)]
    pub(super) rate: Option<V>,
    #[serde(default)]
    pub(super) loss: Option<V>,
    #[serde(default)]
    pub(super) mtu: Option<V>,
    #[serde(default)]
    pub(super) queue: Option<V>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTest {
    #[serde(default)]
    pub(super) window: Option<V>,
    #[serde(default)]
    pub(super) streams: Option<V>,
    #[serde(default)]
    pub(super) congestion: Option<V>,
    #[serde(default)]
    pub(super) length: Option<V>,
    #[serde(default)]
    pub(super) pace: Option<V>,
    #[serde(default)]
    pub(super) ip: Option<V>,
}

pub(super) type Values = Option<Spanned<Vec<V>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSweep {
    #[serde(default)]
    pub(super) window: Values,
    #[serde(default)]
    pub(super) streams: Values,
    #[serde(default)]
    pub(super) congestion: Values,
    #[serde(default)]
    pub(super) length: Values,
    #[serde(default)]
    pub(super) mtu: Values,
    #[serde(default)]
    pub(super) rate: Values,
    #[serde(default)]
    pub(super) loss: Values,
    #[serde(default)]
    pub(super) ip: Values,
    #[serde(default)]
    pub(super) frame: Values,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEvent {
    #[serde(default)]
    pub(super) kind: Option<V>,
    pub(super) at: V,
    pub(super) length: V,
    pub(super) rate: V,
    #[serde(default)]
    pub(super) recover_to: Option<V>,
    #[serde(default)]
    pub(super) recovery_window: Option<V>,
}

/// The file being checked: turns spans into lines.
pub(super) struct Ctx<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
    pub(super) warnings: Vec<SpecWarning>,
}

impl Ctx<'_> {
    pub(super) fn line(&self, span: &Range<usize>) -> Option<usize> {
        Some(line_col(self.text, span.start).0)
    }

    pub(super) fn err(
        &self,
        span: &Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> SpecError {
        SpecError {
            file: self.file.to_owned(),
            line: self.line(span),
            column: None,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    pub(super) fn fail<T>(
        &self,
        v: &V,
        field: &str,
        message: impl Into<String>,
    ) -> Result<T, SpecError> {
        Err(self.err(&v.span(), field, message))
    }

    pub(super) fn string<'v>(&self, v: &'v V, field: &str) -> Result<&'v str, SpecError> {
        match v.get_ref() {
            toml::Value::String(s) => Ok(s),
            other => self.fail(v, field, format!("expected a string, got {other}")),
        }
    }

    pub(super) fn int(&self, v: &V, field: &str, what: &str) -> Result<i64, SpecError> {
        match v.get_ref() {
            toml::Value::Integer(i) => Ok(*i),
            other => self.fail(
                v,
                field,
                format!("expected {what} (an integer), got {other}"),
            ),
        }
    }

    /// A duration: a string with a unit ("10s", "127ms"; bare = seconds) or
    /// a number of seconds.
    pub(super) fn duration(&self, v: &V, field: &str) -> Result<Nanos, SpecError> {
        let d = match v.get_ref() {
            toml::Value::String(s) => parse_duration(s, TimeUnit::Secs)
                .map_err(|e| self.err(&v.span(), field, format!("{s:?} is not a duration: {e}")))?,
            toml::Value::Integer(i) if *i >= 0 => Nanos::from_secs(*i as u64),
            toml::Value::Float(f) if f.is_finite() && *f >= 0.0 && *f < 1e9 => {
                Nanos::from_secs_f64(*f)
            }
            other => {
                return self.fail(
                    v,
                    field,
                    format!("{other} is not a duration (give \"10s\", \"127ms\" or seconds)"),
                );
            }
        };
        Ok(d)
    }

    /// A size: "4M" (×1024, as iperf), "4MB" (×1000) or an integer of bytes.
    pub(super) fn size(&self, v: &V, field: &str) -> Result<u64, SpecError> {
        match v.get_ref() {
            toml::Value::String(s) => parse_size(s)
                .map_err(|e| self.err(&v.span(), field, format!("{s:?} is not a size: {e}"))),
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            other => self.fail(
                v,
                field,
                format!("{other} is not a size (give \"4M\" or bytes)"),
            ),
        }
    }

    /// A rate: "500M" (decimal) or an integer of bit/s; must be > 0.
    pub(super) fn rate(&self, v: &V, field: &str) -> Result<u64, SpecError> {
        let r = match v.get_ref() {
            toml::Value::String(s) => parse_rate(s)
                .map_err(|e| self.err(&v.span(), field, format!("{s:?} is not a rate: {e}")))?,
            toml::Value::Integer(i) if *i >= 0 => *i as u64,
            other => {
                return self.fail(
                    v,
                    field,
                    format!("{other} is not a rate (give \"500M\" or bit/s)"),
                );
            }
        };
        if r == 0 || r > MAX_RATE_BPS {
            return self.fail(
                v,
                field,
                format!(
                    "rate must be > 0 and at most {}, got {r} bit/s",
                    rate_flag(MAX_RATE_BPS)
                ),
            );
        }
        Ok(r)
    }

    pub(super) fn window(&self, v: &V, field: &str) -> Result<Option<u64>, SpecError> {
        if let toml::Value::String(s) = v.get_ref()
            && s.eq_ignore_ascii_case("auto")
        {
            return Ok(None);
        }
        let w = self.size(v, field)?;
        if w == 0 || w > MAX_WINDOW {
            return self.fail(
                v,
                field,
                format!("window must be 1 B to 1 GiB (or \"auto\"), got {w} B"),
            );
        }
        Ok(Some(w))
    }

    pub(super) fn streams(&self, v: &V, field: &str) -> Result<u32, SpecError> {
        let n = self.int(v, field, "a number of streams")?;
        if !(1..=i64::from(MAX_STREAMS)).contains(&n) {
            return self.fail(
                v,
                field,
                format!("streams must be 1 to {MAX_STREAMS}, got {n}"),
            );
        }
        Ok(n as u32)
    }

    pub(super) fn length(&self, v: &V, field: &str) -> Result<u64, SpecError> {
        let l = self.size(v, field)?;
        if l == 0 || l > u64::from(MAX_WRITE_LEN) {
            return self.fail(
                v,
                field,
                format!("write length must be 1 B to 64 MiB, got {l} B"),
            );
        }
        Ok(l)
    }

    pub(super) fn frame(&self, v: &V, field: &str) -> Result<u32, SpecError> {
        let f = self.int(v, field, "a frame size in bytes")?;
        if !(i64::from(MIN_FRAME)..=i64::from(MAX_FRAME)).contains(&f) {
            return self.fail(
                v,
                field,
                format!("an Ethernet frame is {MIN_FRAME} to {MAX_FRAME} bytes, got {f}"),
            );
        }
        Ok(f as u32)
    }

    /// A loss threshold: a probability, or a percentage ("0.1%").
    pub(super) fn probability(&self, v: &V, field: &str) -> Result<f64, SpecError> {
        let x = probability_value(v);
        if !(0.0..=1.0).contains(&x) {
            return self.fail(
                v,
                field,
                format!(
                    "must be a probability in [0, 1] or a percentage, got {}",
                    v.get_ref()
                ),
            );
        }
        Ok(x)
    }

    /// A path's random loss: a probability or a percentage ("0.1%"), at least 0 and below 1 (a
    /// path that loses every packet carries nothing).
    pub(super) fn loss(&self, v: &V, field: &str) -> Result<f64, SpecError> {
        let p = probability_value(v);
        if !(0.0..1.0).contains(&p) {
            return self.fail(
                v,
                field,
                format!(
                    "loss must be a probability from 0 to below 1 (0.001) or a percentage below \
                     100 % (\"0.1%\"), got {}",
                    v.get_ref()
                ),
            );
        }
        Ok(p)
    }

    /// An IP version: 4 or 6.
    pub(super) fn ip(&self, v: &V, field: &str) -> Result<u8, SpecError> {
        match self.int(v, field, "an IP version")? {
            4 => Ok(4),
            6 => Ok(6),
            n => self.fail(v, field, format!("the IP version is 4 or 6, got {n}")),
        }
    }

    pub(super) fn mtu(&self, v: &V, field: &str) -> Result<u32, SpecError> {
        let m = self.int(v, field, "an MTU")?;
        if m != 1500 && m != 9000 {
            return self.fail(v, field, format!("MTU must be 1500 or 9000, got {m}"));
        }
        Ok(m as u32)
    }

    /// A congestion control: a kernel TCP module's name, or `quic-<controller>` for the UDP
    /// transport's. Either name is `[a-z0-9_]{1,15}`; an unfamiliar one is a warning (the host or
    /// `longhaul test` has the last word), a malformed one an error.
    pub(super) fn congestion(&mut self, v: &V, field: &str) -> Result<String, SpecError> {
        let s = self.string(v, field)?;
        let (prefix, name, known, runs) = match s.strip_prefix(QUIC_PREFIX) {
            Some(c) => (
                QUIC_PREFIX,
                c,
                KNOWN_QUIC_CONGESTION,
                "it runs only if `longhaul test --transport udp -C` has it",
            ),
            None => (
                "",
                s,
                KNOWN_CONGESTION,
                "it runs only if the host's kernel has it",
            ),
        };
        let well_formed = !name.is_empty()
            && name.len() <= 15
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !well_formed {
            return self.fail(
                v,
                field,
                format!(
                    "{s:?} is not a congestion-control name ([a-z0-9_], 1 to 15 characters; \
                     {QUIC_PREFIX}NAME for the UDP transport)"
                ),
            );
        }
        if !known.contains(&name) {
            self.warnings.push(SpecWarning {
                file: self.file.to_owned(),
                line: self.line(&v.span()),
                field: field.to_owned(),
                message: format!(
                    "{s:?} is not a congestion control longhaul knows ({}); {runs}",
                    known
                        .iter()
                        .map(|k| format!("{prefix}{k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        Ok(s.to_owned())
    }

    pub(super) fn list<T>(
        &mut self,
        values: &Values,
        name: &str,
        mut each: impl FnMut(&mut Self, &V, &str) -> Result<T, SpecError>,
    ) -> Result<Option<Vec<T>>, SpecError>
    where
        T: PartialEq,
    {
        let Some(list) = values else {
            return Ok(None);
        };
        let field = format!("sweep.{name}");
        if list.get_ref().is_empty() {
            return Err(self.err(&list.span(), &field, "empty list: give at least one value"));
        }
        let mut out: Vec<T> = Vec::with_capacity(list.get_ref().len());
        for (i, v) in list.get_ref().iter().enumerate() {
            let f = format!("{field}[{i}]");
            let x = each(self, v, &f)?;
            if let Some(j) = out.iter().position(|y| *y == x) {
                return self.fail(v, &f, format!("repeats {field}[{j}]; each value once"));
            }
            out.push(x);
        }
        Ok(Some(out))
    }
}

/// A probability as written: a number, or a string with or without `%`; NaN when it is neither.
fn probability_value(v: &V) -> f64 {
    match v.get_ref() {
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        toml::Value::String(s) => match s.strip_suffix('%') {
            Some(n) => n.trim().parse::<f64>().map_or(f64::NAN, |x| x / 100.0),
            None => s.trim().parse::<f64>().unwrap_or(f64::NAN),
        },
        _ => f64::NAN,
    }
}

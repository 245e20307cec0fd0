//! The experiment file (TOML): which path to emulate, which `longhaul test`
//! parameters to sweep, for how long and how often, an optional event (a
//! cross-traffic burst) and which time series to keep. [`Spec::parse`] reads
//! and checks a file and refuses anything impossible with an error naming the
//! file, the line and the field; [`Spec::points`] expands the sweep into the
//! cartesian product of its axes, each [`Point`] carrying its full parameter
//! set, a stable id, and the `longhaul test` and `longhaul emulate` arguments
//! that run it. The format is documented with an annotated example in
//! docs/lab.md.
//!
//! Decisions worth knowing:
//! - Axes are expanded in a fixed order, outermost first: congestion, mtu,
//!   rate, streams, length, window (the order of the keys in the file does not
//!   matter). A point's id lists only the swept axes in that order
//!   (`mtu=9000,window=4M`).
//! - Congestion-control names: any `[a-z0-9_]{1,15}` (the kernel's
//!   `TCP_CA_NAME_MAX` is 16 with the NUL) is accepted, since what a kernel
//!   offers is only known on the host (the runner checks
//!   `tcp_available_congestion_control`, and `longhaul test -C` verifies);
//!   names outside [`KNOWN_CONGESTION`] give a [`SpecWarning`], anything else
//!   is an error.
//! - Times: `duration` is `longhaul test -t`, `omit` is `-O` (left out of the
//!   totals; the test runs omit + duration). An event's `at` counts from the
//!   start of the test, omit period included, and must fall after the omit
//!   period and end before the test does.

use std::fmt::Write as _;
use std::ops::Range;

use longhaul_proto::msg::{MAX_OMIT_NS, MAX_WRITE_LEN};
use longhaul_topology::{CompiledPath, Overrides, Topology, preset, presets};
use longhaul_units::{Nanos, TimeUnit, parse_duration, parse_rate, parse_size};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::{SpecError, SpecWarning, field_at_line, line_col};

/// Most repetitions of each point.
pub const MAX_REPETITIONS: u32 = 100;
/// Largest window a point may request: 1 GiB (TCP's own limit is just under,
/// 65,535 << 14 bytes).
pub const MAX_WINDOW: u64 = 1 << 30;
/// Most parallel streams (`longhaul test -P` accepts 1–1024).
pub const MAX_STREAMS: u32 = 1024;
/// Longest duration of one point: 24 h.
pub const MAX_DURATION: Nanos = Nanos(24 * 3600 * 1_000_000_000);
/// Most points a sweep may expand to.
pub const MAX_POINTS: usize = 1000;
/// Fastest bottleneck rate an experiment may ask for (emulated links on one
/// host; a sanity bound, not a promise).
pub const MAX_RATE_BPS: u64 = 400_000_000_000;
/// Congestion-control modules known to exist in Linux; other well-formed
/// names are accepted with a warning.
pub const KNOWN_CONGESTION: &[&str] = &[
    "reno",
    "cubic",
    "bbr",
    "bbr2",
    "bbr3",
    "htcp",
    "bic",
    "highspeed",
    "scalable",
    "westwood",
    "vegas",
    "veno",
    "hybla",
    "illinois",
    "yeah",
    "lp",
    "nv",
    "cdg",
    "dctcp",
    "prague",
];

/// Which path the experiment runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSource {
    /// A topology preset (`longhaul emulate presets`).
    Preset(String),
    /// A topology file, relative to the experiment file; the runner reads it
    /// and passes the text to [`Spec::topology`].
    File(String),
}

/// A bottleneck queue override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSize {
    /// One BDP of the path (the emulator's `auto`).
    Auto,
    /// This many bytes per direction.
    Bytes(u64),
}

/// The path and its overrides (`longhaul emulate` flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSpec {
    /// Preset or file.
    pub source: PathSource,
    /// Round-trip time of the whole path (every leg scaled).
    pub rtt: Option<Nanos>,
    /// Bottleneck rate, bit/s.
    pub rate_bps: Option<u64>,
    /// Forward random loss probability.
    pub loss: Option<f64>,
    /// IP MTU, 1500 or 9000.
    pub mtu: Option<u32>,
    /// Bottleneck queue.
    pub queue: Option<QueueSize>,
}

/// One sweep axis and its values, in the order written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// `longhaul test -w`: bytes, `None` for "auto".
    Window(Vec<Option<u64>>),
    /// `longhaul test -P`.
    Streams(Vec<u32>),
    /// `longhaul test -C`.
    Congestion(Vec<String>),
    /// `longhaul test -l`, bytes per write.
    Length(Vec<u64>),
    /// `longhaul emulate --mtu`.
    Mtu(Vec<u32>),
    /// `longhaul emulate --rate` (and `longhaul test --rate` for auto windows).
    Rate(Vec<u64>),
}

impl Axis {
    /// The axis's name in the file and in point ids.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Window(_) => "window",
            Self::Streams(_) => "streams",
            Self::Congestion(_) => "congestion",
            Self::Length(_) => "length",
            Self::Mtu(_) => "mtu",
            Self::Rate(_) => "rate",
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::Window(v) => v.len(),
            Self::Streams(v) => v.len(),
            Self::Congestion(v) => v.len(),
            Self::Length(v) => v.len(),
            Self::Mtu(v) => v.len(),
            Self::Rate(v) => v.len(),
        }
    }

    /// Whether the axis has no values (never true of a parsed spec).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The short label of an axis in point ids.
    fn label(&self) -> &'static str {
        match self {
            Self::Congestion(_) => "cc",
            other => other.name(),
        }
    }
}

/// How fast the cross traffic of an event runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventRate {
    /// A fraction of the bottleneck rate ("90%" → 0.9), in (0, 1).
    Fraction(f64),
    /// An absolute rate, bit/s, below the bottleneck rate.
    Bps(u64),
}

impl EventRate {
    /// The rate in bit/s on a bottleneck of `bottleneck_bps`.
    pub fn bps(self, bottleneck_bps: u64) -> u64 {
        match self {
            Self::Fraction(f) => (bottleneck_bps as f64 * f).round() as u64,
            Self::Bps(b) => b,
        }
    }
}

/// A cross-traffic burst on the bottleneck during the test (seed 002 Fig.
/// 10: a 2-s UDP burst that forces drops).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Start, from the start of the test (omit period included).
    pub at: Nanos,
    /// How long the burst lasts.
    pub length: Nanos,
    /// Its rate.
    pub rate: EventRate,
    /// Recovered when the rate is back at this fraction of the pre-burst
    /// mean (default 0.95).
    pub recover_to: f64,
    /// The sliding window over which the recovered rate is averaged
    /// (default 1 s).
    pub recovery_window: Nanos,
}

impl Event {
    /// When the burst ends, from the start of the test.
    pub fn end(&self) -> Nanos {
        self.at.saturating_add(self.length)
    }
}

/// A time series the runner keeps per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// Bits per second, per stream and summed.
    Throughput,
    /// Congestion window per stream.
    Cwnd,
    /// Smoothed RTT per stream.
    Rtt,
    /// Retransmitted segments per interval.
    Retransmits,
}

impl Series {
    const ALL: [(&'static str, Self); 4] = [
        ("throughput", Self::Throughput),
        ("cwnd", Self::Cwnd),
        ("rtt", Self::Rtt),
        ("retransmits", Self::Retransmits),
    ];
}

/// A checked experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Short name, `[a-z0-9][a-z0-9_-]*` (used in file names).
    pub name: String,
    /// One line for listings (default: the name).
    pub title: String,
    /// The figure or table it reproduces ("seed 002, Fig. 6").
    pub source: String,
    /// Free text: method, caveats.
    pub notes: String,
    /// The scale of the original experiment.
    pub original_scale: String,
    /// The scale chosen here, and why.
    pub scale: String,
    /// The path.
    pub path: PathSpec,
    /// Window for points the sweep does not set (`None` = auto).
    pub window: Option<u64>,
    /// Streams for points the sweep does not set.
    pub streams: u32,
    /// Congestion control for points the sweep does not set (`None` = the
    /// host's default).
    pub congestion: Option<String>,
    /// Write size for points the sweep does not set (`None` = longhaul's).
    pub length: Option<u64>,
    /// The sweep axes, in expansion order (outermost first).
    pub sweep: Vec<Axis>,
    /// `longhaul test -t` per point.
    pub duration: Nanos,
    /// `longhaul test -O` per point.
    pub omit: Nanos,
    /// `longhaul test -i`.
    pub interval: Nanos,
    /// Runs of each point.
    pub repetitions: u32,
    /// A cross-traffic burst during each test.
    pub event: Option<Event>,
    /// Series to keep.
    pub record: Vec<Series>,
    /// Whether this is the reduced (CI) variant ([`Spec::reduced`]).
    pub reduced: bool,
    /// Things accepted but worth saying.
    pub warnings: Vec<SpecWarning>,
}

/// One point of the sweep: every parameter of one `longhaul test` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// 0-based position in [`Spec::points`].
    pub index: usize,
    /// Stable label: the swept axes and their values (`mtu=9000,window=4M`).
    pub id: String,
    /// The path and its overrides for this point (mtu and rate axes
    /// applied).
    pub path: PathSpec,
    /// Window per stream, bytes; `None` = auto.
    pub window: Option<u64>,
    /// Parallel streams.
    pub streams: u32,
    /// Congestion control; `None` = the host's default.
    pub congestion: Option<String>,
    /// Bytes per write; `None` = longhaul's default.
    pub length: Option<u64>,
    /// Test duration (after the omit period).
    pub duration: Nanos,
    /// Omit period.
    pub omit: Nanos,
    /// Interval between reports.
    pub interval: Nanos,
    /// The event, if any.
    pub event: Option<Event>,
}

// ---------------------------------------------------------------------------
// Formatting of flag values (each parses back with the units crate).

/// A size as a flag value: "4M" when it is a whole number of MiB, and so on;
/// plain bytes otherwise.
pub fn size_flag(bytes: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A rate as a flag value: "500M" (decimal prefixes), plain bit/s otherwise.
pub fn rate_flag(bps: u64) -> String {
    for (div, suffix) in [(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "K")] {
        if bps != 0 && bps.is_multiple_of(div) {
            return format!("{}{suffix}", bps / div);
        }
    }
    bps.to_string()
}

/// A duration as a flag value with a unit: "127ms", "30s", "1500us", "7ns".
pub fn duration_flag(d: Nanos) -> String {
    let ns = d.as_nanos();
    for (div, suffix) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns != 0 && ns.is_multiple_of(div) {
            return format!("{}{suffix}", ns / div);
        }
    }
    format!("{ns}ns")
}

/// Seconds as `longhaul test` takes them: "30", "0.5", "0.000001".
pub fn secs_flag(d: Nanos) -> String {
    let ns = d.as_nanos();
    let whole = ns / 1_000_000_000;
    let frac = ns % 1_000_000_000;
    if frac == 0 {
        whole.to_string()
    } else {
        let f = format!("{frac:09}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    }
}

// ---------------------------------------------------------------------------
// Raw file shape: what serde reads, with spans for the checks that follow.

type V = Spanned<toml::Value>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: V,
    #[serde(default)]
    title: Option<V>,
    #[serde(default)]
    source: Option<V>,
    #[serde(default)]
    notes: Option<V>,
    #[serde(default)]
    original_scale: Option<V>,
    #[serde(default)]
    scale: Option<V>,
    path: Spanned<RawPath>,
    #[serde(default)]
    test: Option<RawTest>,
    sweep: Spanned<RawSweep>,
    duration: V,
    #[serde(default)]
    omit: Option<V>,
    #[serde(default)]
    interval: Option<V>,
    #[serde(default)]
    repetitions: Option<V>,
    #[serde(default)]
    event: Option<Spanned<RawEvent>>,
    #[serde(default)]
    record: Option<Spanned<Vec<V>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    #[serde(default)]
    preset: Option<V>,
    #[serde(default)]
    file: Option<V>,
    #[serde(default)]
    rtt: Option<V>,
    #[serde(default)]
    rate: Option<V>,
    #[serde(default)]
    loss: Option<V>,
    #[serde(default)]
    mtu: Option<V>,
    #[serde(default)]
    queue: Option<V>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    #[serde(default)]
    window: Option<V>,
    #[serde(default)]
    streams: Option<V>,
    #[serde(default)]
    congestion: Option<V>,
    #[serde(default)]
    length: Option<V>,
}

type Values = Option<Spanned<Vec<V>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    #[serde(default)]
    window: Values,
    #[serde(default)]
    streams: Values,
    #[serde(default)]
    congestion: Values,
    #[serde(default)]
    length: Values,
    #[serde(default)]
    mtu: Values,
    #[serde(default)]
    rate: Values,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    #[serde(default)]
    kind: Option<V>,
    at: V,
    length: V,
    rate: V,
    #[serde(default)]
    recover_to: Option<V>,
    #[serde(default)]
    recovery_window: Option<V>,
}

/// The file being checked: turns spans into lines.
struct Ctx<'a> {
    text: &'a str,
    file: &'a str,
    warnings: Vec<SpecWarning>,
}

impl Ctx<'_> {
    fn line(&self, span: &Range<usize>) -> Option<usize> {
        Some(line_col(self.text, span.start).0)
    }

    fn err(&self, span: &Range<usize>, field: &str, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.file.to_owned(),
            line: self.line(span),
            column: None,
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    fn fail<T>(&self, v: &V, field: &str, message: impl Into<String>) -> Result<T, SpecError> {
        Err(self.err(&v.span(), field, message))
    }

    fn string<'v>(&self, v: &'v V, field: &str) -> Result<&'v str, SpecError> {
        match v.get_ref() {
            toml::Value::String(s) => Ok(s),
            other => self.fail(v, field, format!("expected a string, got {other}")),
        }
    }

    fn int(&self, v: &V, field: &str, what: &str) -> Result<i64, SpecError> {
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
    fn duration(&self, v: &V, field: &str) -> Result<Nanos, SpecError> {
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
    fn size(&self, v: &V, field: &str) -> Result<u64, SpecError> {
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
    fn rate(&self, v: &V, field: &str) -> Result<u64, SpecError> {
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

    fn window(&self, v: &V, field: &str) -> Result<Option<u64>, SpecError> {
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

    fn streams(&self, v: &V, field: &str) -> Result<u32, SpecError> {
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

    fn length(&self, v: &V, field: &str) -> Result<u64, SpecError> {
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

    fn mtu(&self, v: &V, field: &str) -> Result<u32, SpecError> {
        let m = self.int(v, field, "an MTU")?;
        if m != 1500 && m != 9000 {
            return self.fail(v, field, format!("MTU must be 1500 or 9000, got {m}"));
        }
        Ok(m as u32)
    }

    fn congestion(&mut self, v: &V, field: &str) -> Result<String, SpecError> {
        let s = self.string(v, field)?;
        let well_formed = !s.is_empty()
            && s.len() <= 15
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !well_formed {
            return self.fail(
                v,
                field,
                format!("{s:?} is not a congestion-control name ([a-z0-9_], 1 to 15 characters)"),
            );
        }
        if !KNOWN_CONGESTION.contains(&s) {
            self.warnings.push(SpecWarning {
                file: self.file.to_owned(),
                line: self.line(&v.span()),
                field: field.to_owned(),
                message: format!(
                    "{s:?} is not a congestion control longhaul knows ({}); it runs only if the host's kernel has it",
                    KNOWN_CONGESTION.join(", ")
                ),
            });
        }
        Ok(s.to_owned())
    }

    fn list<T>(
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

impl Spec {
    /// Reads and checks the experiment in `text`; `file_name` names it in
    /// errors. Presets are resolved and compiled with every override (so an
    /// MTU or rate a preset cannot take is refused here); a topology file is
    /// only named, and checked when the runner passes its text to
    /// [`Spec::topology`].
    pub fn parse(text: &str, file_name: &str) -> Result<Self, SpecError> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| {
            let (line, column) = match e.span() {
                Some(span) => {
                    let (l, c) = line_col(text, span.start);
                    (Some(l), Some(c))
                }
                None => (None, None),
            };
            SpecError {
                file: file_name.to_owned(),
                line,
                column,
                field: line.and_then(|l| field_at_line(text, l)),
                message: e.message().trim().to_owned(),
            }
        })?;
        let mut cx = Ctx {
            text,
            file: file_name,
            warnings: Vec::new(),
        };
        let spec = Self::check(&mut cx, raw)?;
        Ok(Self {
            warnings: cx.warnings,
            ..spec
        })
    }

    fn check(cx: &mut Ctx<'_>, raw: RawSpec) -> Result<Self, SpecError> {
        let name = cx.string(&raw.name, "name")?.to_owned();
        let name_ok = name.len() <= 64
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return cx.fail(
                &raw.name,
                "name",
                format!("{name:?}: use [a-z0-9][a-z0-9_-]*, at most 64 characters"),
            );
        }
        let text_field = |cx: &Ctx<'_>, v: &Option<V>, field: &str| -> Result<String, SpecError> {
            v.as_ref().map_or(Ok(String::new()), |v| {
                cx.string(v, field).map(str::to_owned)
            })
        };
        let title = text_field(cx, &raw.title, "title")?;
        let title = if title.is_empty() {
            name.clone()
        } else {
            title
        };
        let source = text_field(cx, &raw.source, "source")?;
        let notes = text_field(cx, &raw.notes, "notes")?;
        let original_scale = text_field(cx, &raw.original_scale, "original_scale")?;
        let scale = text_field(cx, &raw.scale, "scale")?;

        let path = Self::check_path(cx, &raw.path)?;

        let (mut window, mut streams, mut congestion, mut length) = (None, 1, None, None);
        if let Some(t) = &raw.test {
            if let Some(v) = &t.window {
                window = cx.window(v, "test.window")?;
            }
            if let Some(v) = &t.streams {
                streams = cx.streams(v, "test.streams")?;
            }
            if let Some(v) = &t.congestion {
                congestion = Some(cx.congestion(v, "test.congestion")?);
            }
            if let Some(v) = &t.length {
                length = Some(cx.length(v, "test.length")?);
            }
        }

        let s = raw.sweep.get_ref();
        let mut sweep = Vec::new();
        if let Some(v) = cx.list(&s.congestion, "congestion", |cx, v, f| cx.congestion(v, f))? {
            sweep.push(Axis::Congestion(v));
        }
        if let Some(v) = cx.list(&s.mtu, "mtu", |cx, v, f| cx.mtu(v, f))? {
            sweep.push(Axis::Mtu(v));
        }
        if let Some(v) = cx.list(&s.rate, "rate", |cx, v, f| cx.rate(v, f))? {
            sweep.push(Axis::Rate(v));
        }
        if let Some(v) = cx.list(&s.streams, "streams", |cx, v, f| cx.streams(v, f))? {
            sweep.push(Axis::Streams(v));
        }
        if let Some(v) = cx.list(&s.length, "length", |cx, v, f| cx.length(v, f))? {
            sweep.push(Axis::Length(v));
        }
        if let Some(v) = cx.list(&s.window, "window", |cx, v, f| cx.window(v, f))? {
            sweep.push(Axis::Window(v));
        }
        if sweep.is_empty() {
            return Err(cx.err(
                &raw.sweep.span(),
                "sweep",
                "no axes: give at least one of window, streams, congestion, length, mtu, rate \
                 (a single point is an axis with one value, e.g. streams = [1])",
            ));
        }
        let points = sweep
            .iter()
            .try_fold(1usize, |acc, a| acc.checked_mul(a.len()))
            .unwrap_or(usize::MAX);
        if points > MAX_POINTS {
            return Err(cx.err(
                &raw.sweep.span(),
                "sweep",
                format!("{points} points; at most {MAX_POINTS}"),
            ));
        }
        if let PathSource::Preset(name) = &path.source {
            Self::check_preset_with_axes(cx, &raw, name, &path, &sweep)?;
        }

        let duration = cx.duration(&raw.duration, "duration")?;
        if duration == Nanos::ZERO || duration > MAX_DURATION {
            return cx.fail(
                &raw.duration,
                "duration",
                format!(
                    "must be > 0 and at most 24 h, got {}",
                    duration_flag(duration)
                ),
            );
        }
        let omit = match &raw.omit {
            Some(v) => {
                let o = cx.duration(v, "omit")?;
                if o.as_nanos() > MAX_OMIT_NS {
                    return cx.fail(v, "omit", "must be at most 600 s (longhaul test -O)");
                }
                o
            }
            None => Nanos::ZERO,
        };
        let interval = match &raw.interval {
            Some(v) => {
                let i = cx.duration(v, "interval")?;
                if i == Nanos::ZERO || i > duration {
                    return cx.fail(
                        v,
                        "interval",
                        format!(
                            "must be > 0 (the lab needs interval samples) and at most the duration ({}), got {}",
                            duration_flag(duration),
                            duration_flag(i)
                        ),
                    );
                }
                i
            }
            None => Nanos::SECOND.min(duration),
        };
        let repetitions = match &raw.repetitions {
            Some(v) => {
                let n = cx.int(v, "repetitions", "a count")?;
                if !(1..=i64::from(MAX_REPETITIONS)).contains(&n) {
                    return cx.fail(
                        v,
                        "repetitions",
                        format!("must be 1 to {MAX_REPETITIONS}, got {n}"),
                    );
                }
                n as u32
            }
            None => 1,
        };
        let event = match &raw.event {
            Some(e) => Some(Self::check_event(cx, e, &path, &sweep, omit, duration)?),
            None => None,
        };
        let record = match &raw.record {
            None => vec![Series::Throughput],
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(cx.err(
                        &list.span(),
                        "record",
                        "empty list: give at least one series",
                    ));
                }
                let mut out = Vec::new();
                for (i, v) in list.get_ref().iter().enumerate() {
                    let f = format!("record[{i}]");
                    let s = cx.string(v, &f)?;
                    let Some((_, series)) = Series::ALL.iter().find(|(n, _)| *n == s) else {
                        return cx.fail(
                            v,
                            &f,
                            format!("{s:?} is not a series: throughput, cwnd, rtt or retransmits"),
                        );
                    };
                    if out.contains(series) {
                        return cx.fail(v, &f, format!("{s:?} is listed twice"));
                    }
                    out.push(*series);
                }
                out
            }
        };
        Ok(Self {
            name,
            title,
            source,
            notes,
            original_scale,
            scale,
            path,
            window,
            streams,
            congestion,
            length,
            sweep,
            duration,
            omit,
            interval,
            repetitions,
            event,
            record,
            reduced: false,
            warnings: Vec::new(),
        })
    }

    fn check_path(cx: &mut Ctx<'_>, raw: &Spanned<RawPath>) -> Result<PathSpec, SpecError> {
        let p = raw.get_ref();
        let source = match (&p.preset, &p.file) {
            (Some(v), None) => {
                let name = cx.string(v, "path.preset")?;
                if preset(name).is_none() {
                    let known: Vec<&str> = presets().iter().map(|p| p.name).collect();
                    return cx.fail(
                        v,
                        "path.preset",
                        format!("unknown preset {name:?}; known: {}", known.join(", ")),
                    );
                }
                PathSource::Preset(name.to_owned())
            }
            (None, Some(v)) => {
                let f = cx.string(v, "path.file")?;
                if f.is_empty() {
                    return cx.fail(v, "path.file", "empty file name");
                }
                PathSource::File(f.to_owned())
            }
            _ => {
                return Err(cx.err(&raw.span(), "path", "give exactly one of preset or file"));
            }
        };
        let rtt = match &p.rtt {
            Some(v) => {
                let d = cx.duration(v, "path.rtt")?;
                if d == Nanos::ZERO || d > Nanos::from_secs(240) {
                    return cx.fail(v, "path.rtt", "must be > 0 and at most 240 s");
                }
                Some(d)
            }
            None => None,
        };
        let rate_bps = p
            .rate
            .as_ref()
            .map(|v| cx.rate(v, "path.rate"))
            .transpose()?;
        let loss = match &p.loss {
            Some(v) => {
                let x = match v.get_ref() {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(i) => *i as f64,
                    toml::Value::String(s) => match s.strip_suffix('%') {
                        Some(n) => n
                            .trim()
                            .parse::<f64>()
                            .map(|x| x / 100.0)
                            .unwrap_or(f64::NAN),
                        None => s.trim().parse::<f64>().unwrap_or(f64::NAN),
                    },
                    _ => f64::NAN,
                };
                if !(0.0..=1.0).contains(&x) {
                    return cx.fail(
                        v,
                        "path.loss",
                        format!(
                            "loss must be a probability in [0, 1] or a percentage, got {}",
                            v.get_ref()
                        ),
                    );
                }
                Some(x)
            }
            None => None,
        };
        let mtu = p.mtu.as_ref().map(|v| cx.mtu(v, "path.mtu")).transpose()?;
        let queue = match &p.queue {
            Some(v) => match v.get_ref() {
                toml::Value::String(s) if s.eq_ignore_ascii_case("auto") => Some(QueueSize::Auto),
                _ => {
                    let q = cx.size(v, "path.queue")?;
                    if q < 9000 {
                        return cx.fail(
                            v,
                            "path.queue",
                            format!("queue must hold at least one 9000-B frame, got {q} B"),
                        );
                    }
                    Some(QueueSize::Bytes(q))
                }
            },
            None => None,
        };
        Ok(PathSpec {
            source,
            rtt,
            rate_bps,
            loss,
            mtu,
            queue,
        })
    }

    /// Compiles the preset with the path overrides and with each mtu and
    /// rate value of the sweep, so that what the emulator would refuse is
    /// refused here, at the right line.
    fn check_preset_with_axes(
        cx: &Ctx<'_>,
        raw: &RawSpec,
        name: &str,
        path: &PathSpec,
        sweep: &[Axis],
    ) -> Result<(), SpecError> {
        let topo = preset(name)
            .and_then(|p| p.topology().ok())
            .ok_or_else(|| cx.err(&raw.path.span(), "path.preset", "the preset does not parse"))?;
        let base = overrides(path);
        topo.compile(&base)
            .map_err(|e| cx.err(&raw.path.span(), "path", e.message))?;
        let s = raw.sweep.get_ref();
        for axis in sweep {
            let (values, list): (Vec<Overrides>, &Values) = match axis {
                Axis::Mtu(v) => (
                    v.iter()
                        .map(|m| Overrides {
                            mtu: Some(*m),
                            ..base
                        })
                        .collect(),
                    &s.mtu,
                ),
                Axis::Rate(v) => (
                    v.iter()
                        .map(|r| Overrides {
                            rate: Some(*r),
                            ..base
                        })
                        .collect(),
                    &s.rate,
                ),
                _ => continue,
            };
            for (i, o) in values.iter().enumerate() {
                if let Err(e) = topo.compile(o) {
                    let span = list
                        .as_ref()
                        .and_then(|l| l.get_ref().get(i))
                        .map_or(0..0, |v| v.span());
                    return Err(cx.err(&span, &format!("sweep.{}[{i}]", axis.name()), e.message));
                }
            }
        }
        Ok(())
    }

    fn check_event(
        cx: &Ctx<'_>,
        raw: &Spanned<RawEvent>,
        path: &PathSpec,
        sweep: &[Axis],
        omit: Nanos,
        duration: Nanos,
    ) -> Result<Event, SpecError> {
        let e = raw.get_ref();
        if let Some(k) = &e.kind {
            let k = cx.string(k, "event.kind")?;
            if k != "cross-traffic" {
                return cx.fail(
                    e.kind.as_ref().unwrap_or(&e.at),
                    "event.kind",
                    format!("{k:?}: the only event is \"cross-traffic\""),
                );
            }
        }
        let at = cx.duration(&e.at, "event.at")?;
        let length = cx.duration(&e.length, "event.length")?;
        if length == Nanos::ZERO {
            return cx.fail(&e.length, "event.length", "must be > 0");
        }
        let total = omit.saturating_add(duration);
        if at <= omit {
            return cx.fail(
                &e.at,
                "event.at",
                format!(
                    "{} is not after the omit period ({}): the pre-burst rate could not be measured",
                    duration_flag(at),
                    duration_flag(omit)
                ),
            );
        }
        if at.saturating_add(length) >= total {
            return cx.fail(
                &e.length,
                "event.length",
                format!(
                    "the burst ends at {}, not before the test does ({} = omit + duration)",
                    duration_flag(at.saturating_add(length)),
                    duration_flag(total)
                ),
            );
        }
        let rate = match e.rate.get_ref() {
            toml::Value::String(s) if s.trim_end().ends_with('%') => {
                let n = s.trim_end().trim_end_matches('%').trim();
                match n.parse::<f64>() {
                    Ok(p) if p > 0.0 && p < 100.0 => EventRate::Fraction(p / 100.0),
                    _ => {
                        return cx.fail(
                            &e.rate,
                            "event.rate",
                            format!("{s:?}: a percentage of the bottleneck must be above 0 % and below 100 %"),
                        );
                    }
                }
            }
            _ => {
                let r = cx.rate(&e.rate, "event.rate")?;
                let mut bottlenecks: Vec<u64> = match sweep.iter().find_map(|a| match a {
                    Axis::Rate(v) => Some(v.clone()),
                    _ => None,
                }) {
                    Some(v) => v,
                    None => path.rate_bps.into_iter().collect(),
                };
                if bottlenecks.is_empty()
                    && let PathSource::Preset(p) = &path.source
                    && let Some(b) = preset_rate(p, path)
                {
                    bottlenecks.push(b);
                }
                if let Some(b) = bottlenecks.iter().find(|b| r >= **b) {
                    return cx.fail(
                        &e.rate,
                        "event.rate",
                        format!(
                            "{} is not below the bottleneck rate {}: the link would never drain",
                            rate_flag(r),
                            rate_flag(*b)
                        ),
                    );
                }
                EventRate::Bps(r)
            }
        };
        let recover_to = match &e.recover_to {
            Some(v) => {
                let x = match v.get_ref() {
                    toml::Value::Float(f) => *f,
                    _ => f64::NAN,
                };
                if !(x > 0.0 && x <= 1.0) {
                    return cx.fail(
                        v,
                        "event.recover_to",
                        format!("must be a fraction in (0, 1], got {}", v.get_ref()),
                    );
                }
                x
            }
            None => 0.95,
        };
        let recovery_window = match &e.recovery_window {
            Some(v) => {
                let w = cx.duration(v, "event.recovery_window")?;
                if w == Nanos::ZERO || w > duration {
                    return cx.fail(
                        v,
                        "event.recovery_window",
                        "must be > 0 and at most the duration",
                    );
                }
                w
            }
            None => Nanos::SECOND,
        };
        Ok(Event {
            at,
            length,
            rate,
            recover_to,
            recovery_window,
        })
    }

    /// The expanded sweep: the cartesian product of the axes, outermost axis
    /// first, each point with its full parameter set.
    pub fn points(&self) -> Vec<Point> {
        let mut points = vec![Point {
            index: 0,
            id: String::new(),
            path: self.path.clone(),
            window: self.window,
            streams: self.streams,
            congestion: self.congestion.clone(),
            length: self.length,
            duration: self.duration,
            omit: self.omit,
            interval: self.interval,
            event: self.event,
        }];
        for axis in &self.sweep {
            let mut next = Vec::with_capacity(points.len() * axis.len());
            for p in &points {
                for i in 0..axis.len() {
                    let mut q = p.clone();
                    let value = match axis {
                        Axis::Window(v) => {
                            q.window = v[i];
                            v[i].map_or_else(|| "auto".to_owned(), size_flag)
                        }
                        Axis::Streams(v) => {
                            q.streams = v[i];
                            v[i].to_string()
                        }
                        Axis::Congestion(v) => {
                            q.congestion = Some(v[i].clone());
                            v[i].clone()
                        }
                        Axis::Length(v) => {
                            q.length = Some(v[i]);
                            size_flag(v[i])
                        }
                        Axis::Mtu(v) => {
                            q.path.mtu = Some(v[i]);
                            v[i].to_string()
                        }
                        Axis::Rate(v) => {
                            q.path.rate_bps = Some(v[i]);
                            rate_flag(v[i])
                        }
                    };
                    if !q.id.is_empty() {
                        q.id.push(',');
                    }
                    let _ = write!(q.id, "{}={value}", axis.label());
                    next.push(q);
                }
            }
            points = next;
        }
        for (i, p) in points.iter_mut().enumerate() {
            p.index = i;
        }
        points
    }

    /// The topology: the preset's, or parsed from `file_text` (the text of
    /// [`PathSource::File`], which the runner reads). Errors name the file.
    pub fn topology(&self, file_text: Option<&str>) -> Result<Topology, SpecError> {
        let refuse = |file: &str, message: String| SpecError {
            file: file.to_owned(),
            line: None,
            column: None,
            field: Some("path".into()),
            message,
        };
        match (&self.path.source, file_text) {
            (PathSource::Preset(name), _) => preset(name)
                .ok_or_else(|| refuse("", format!("unknown preset {name:?}")))?
                .topology()
                .map_err(|e| refuse("", e.to_string())),
            (PathSource::File(f), Some(text)) => {
                Topology::from_toml(text, f).map_err(|e| SpecError {
                    file: e.file,
                    line: e.line,
                    column: e.column,
                    field: e.field,
                    message: e.message,
                })
            }
            (PathSource::File(f), None) => {
                Err(refuse(f, "the topology file's text is needed".into()))
            }
        }
    }

    /// The CI variant: one repetition, no omit period, at most 3 s per point
    /// and 1-s intervals; an event moves to 2 s, lasts at most 1 s and the
    /// test runs 5 s after it. Every point is kept, so every point runs in
    /// CI.
    pub fn reduced(&self) -> Self {
        let mut s = self.clone();
        s.reduced = true;
        s.repetitions = 1;
        s.omit = Nanos::ZERO;
        s.duration = s.duration.min(Nanos::from_secs(3));
        s.interval = s.interval.min(Nanos::SECOND).min(s.duration);
        if let Some(e) = &mut s.event {
            e.at = Nanos::from_secs(2);
            e.length = e.length.min(Nanos::SECOND);
            e.recovery_window = e.recovery_window.min(Nanos::SECOND);
            s.duration = e.end().saturating_add(Nanos::from_secs(5));
        }
        s
    }

    /// Total test time of one repetition of every point (omit included),
    /// without set-up and tear-down.
    pub fn test_time(&self) -> Nanos {
        let n = self.sweep.iter().map(Axis::len).product::<usize>() as u64;
        Nanos(
            self.omit
                .saturating_add(self.duration)
                .as_nanos()
                .saturating_mul(n)
                .saturating_mul(u64::from(self.repetitions)),
        )
    }
}

/// The bottleneck rate of a preset with the path's overrides.
fn preset_rate(name: &str, path: &PathSpec) -> Option<u64> {
    let topo = preset(name)?.topology().ok()?;
    let c = topo.compile(&overrides(path)).ok()?;
    c.forward.bottleneck.map(|b| b.rate_bps)
}

/// The topology overrides of a path ("auto" queue = the topology's own).
fn overrides(path: &PathSpec) -> Overrides {
    Overrides {
        rtt: path.rtt,
        rate: path.rate_bps,
        loss: path.loss,
        mtu: path.mtu,
        queue: match path.queue {
            Some(QueueSize::Bytes(b)) => Some(b),
            _ => None,
        },
    }
}

impl Point {
    /// The topology overrides for this point (path overrides with the mtu
    /// and rate axes applied). A queue of "auto" is left to the topology.
    pub fn overrides(&self) -> Overrides {
        overrides(&self.path)
    }

    /// The path compiled with this point's overrides.
    pub fn compile(
        &self,
        topology: &Topology,
    ) -> Result<CompiledPath, longhaul_topology::TopologyError> {
        topology.compile(&self.overrides())
    }

    /// `longhaul test` arguments for this point, without the host (the
    /// runner appends the receiver's address): `-t`, `-O`, `-i`, `-P`, `-w`,
    /// `-C`, `-l`, `--rate` (the bottleneck, for auto windows, when known)
    /// and `--json`.
    pub fn test_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["-t".into(), secs_flag(self.duration)];
        if self.omit > Nanos::ZERO {
            a.extend(["-O".into(), secs_flag(self.omit)]);
        }
        a.extend(["-i".into(), secs_flag(self.interval)]);
        a.extend(["-P".into(), self.streams.to_string()]);
        a.extend([
            "-w".into(),
            self.window.map_or_else(|| "auto".to_owned(), size_flag),
        ]);
        if let Some(cc) = &self.congestion {
            a.extend(["-C".into(), cc.clone()]);
        }
        if let Some(l) = self.length {
            a.extend(["-l".into(), size_flag(l)]);
        }
        if let Some(r) = self.path.rate_bps {
            a.extend(["--rate".into(), rate_flag(r)]);
        }
        a.push("--json".into());
        a
    }

    /// `longhaul emulate` path arguments for this point: the preset name or
    /// topology file, then `--rtt`, `--rate`, `--loss`, `--mtu`, `--queue`
    /// where set. The event is not among them (see [`Point::event_plan`]).
    pub fn emulate_args(&self) -> Vec<String> {
        let mut a = vec![match &self.path.source {
            PathSource::Preset(p) | PathSource::File(p) => p.clone(),
        }];
        if let Some(r) = self.path.rtt {
            a.extend(["--rtt".into(), duration_flag(r)]);
        }
        if let Some(r) = self.path.rate_bps {
            a.extend(["--rate".into(), rate_flag(r)]);
        }
        if let Some(l) = self.path.loss {
            a.extend(["--loss".into(), l.to_string()]);
        }
        if let Some(m) = self.path.mtu {
            a.extend(["--mtu".into(), m.to_string()]);
        }
        match self.path.queue {
            Some(QueueSize::Auto) => a.extend(["--queue".into(), "auto".into()]),
            Some(QueueSize::Bytes(b)) => a.extend(["--queue".into(), size_flag(b)]),
            None => {}
        }
        a
    }

    /// The event resolved on a bottleneck of `bottleneck_bps`: when the
    /// burst starts and ends (from the test start) and its rate in bit/s.
    pub fn event_plan(&self, bottleneck_bps: u64) -> Option<EventPlan> {
        self.event.map(|e| EventPlan {
            start: e.at,
            end: e.end(),
            rate_bps: e.rate.bps(bottleneck_bps),
        })
    }
}

/// An event as the runner applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventPlan {
    /// Start, from the start of the test.
    pub start: Nanos,
    /// End, from the start of the test.
    pub end: Nanos,
    /// Cross-traffic rate, bit/s.
    pub rate_bps: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"name = "t"
duration = "10s"

[path]
preset = "cern-starlight"
rate = "500M"

[sweep]
window = ["1M", "4M"]
"#;

    fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(text, "lab/x.toml")
    }

    #[track_caller]
    fn refused(text: &str) -> String {
        match parse(text) {
            Ok(s) => panic!("accepted: {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn base_parses_with_defaults() {
        let s = parse(BASE).unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.title, "t");
        assert_eq!(s.repetitions, 1);
        assert_eq!(s.interval, Nanos::SECOND);
        assert_eq!(s.omit, Nanos::ZERO);
        assert_eq!(s.streams, 1);
        assert_eq!(s.record, vec![Series::Throughput]);
        assert_eq!(
            s.sweep,
            vec![Axis::Window(vec![Some(1 << 20), Some(4 << 20)])]
        );
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn bad_size_names_file_line_and_element() {
        let text = BASE.replace(r#"["1M", "4M"]"#, r#"["1M", "2M", "4Q"]"#);
        let e = refused(&text);
        assert!(
            e.starts_with("lab/x.toml:9: sweep.window[2]: \"4Q\" is not a size"),
            "{e}"
        );
    }

    #[test]
    fn multi_line_arrays_point_at_the_element_line() {
        let text = BASE.replace(r#"["1M", "4M"]"#, "[\n  \"1M\",\n  \"0\",\n]");
        let e = refused(&text);
        assert!(
            e.starts_with("lab/x.toml:11: sweep.window[1]: window must be"),
            "{e}"
        );
    }

    #[test]
    fn unknown_fields_are_refused_with_line() {
        let e = refused(&BASE.replace("rate = \"500M\"", "rate = \"500M\"\nspeed = 3"));
        assert!(e.starts_with("lab/x.toml:7:"), "{e}");
        assert!(
            e.contains("path.speed") && e.contains("unknown field"),
            "{e}"
        );
        let e = refused(&format!("{BASE}color = 1\n"));
        assert!(
            e.contains("sweep.color") && e.contains("unknown field"),
            "{e}"
        );
    }

    #[test]
    fn empty_sweeps_and_empty_axes_are_refused() {
        let e = refused(&BASE.replace("window = [\"1M\", \"4M\"]\n", ""));
        assert!(e.contains("sweep: no axes"), "{e}");
        let e = refused(&BASE.replace(r#"["1M", "4M"]"#, "[]"));
        assert!(e.contains("lab/x.toml:9: sweep.window: empty list"), "{e}");
        let e = refused(&BASE.replace(r#"["1M", "4M"]"#, r#"["4M", "4M"]"#));
        assert!(
            e.contains("sweep.window[1]: repeats sweep.window[0]"),
            "{e}"
        );
    }

    #[test]
    fn impossible_values_are_refused() {
        let e = refused(&BASE.replace("\"10s\"", "\"0s\""));
        assert!(e.contains("lab/x.toml:2: duration: must be > 0"), "{e}");
        let e = refused(&format!("repetitions = 0\n{BASE}"));
        assert!(
            e.contains("lab/x.toml:1: repetitions: must be 1 to 100, got 0"),
            "{e}"
        );
        let e = refused(&format!("repetitions = 101\n{BASE}"));
        assert!(e.contains("got 101"), "{e}");
        let e = refused(&BASE.replace(r#"["1M", "4M"]"#, r#"["1M", "2G"]"#));
        assert!(
            e.contains("sweep.window[1]: window must be 1 B to 1 GiB"),
            "{e}"
        );
        assert!(parse(&BASE.replace(r#"["1M", "4M"]"#, r#"["1M", "1G", "auto"]"#)).is_ok());
        let e = refused(&format!("{BASE}mtu = [1500, 4000]\n"));
        assert!(
            e.contains("sweep.mtu[1]: MTU must be 1500 or 9000, got 4000"),
            "{e}"
        );
        let e = refused(&format!("{BASE}streams = [0]\n"));
        assert!(
            e.contains("sweep.streams[0]: streams must be 1 to 1024"),
            "{e}"
        );
        let e = refused(&format!("{BASE}length = [\"128M\"]\n"));
        assert!(
            e.contains("sweep.length[0]: write length must be 1 B to 64 MiB"),
            "{e}"
        );
        let e = refused(&BASE.replace("\"500M\"", "\"0\""));
        assert!(e.contains("path.rate: rate must be > 0"), "{e}");
        let e = refused(&format!("interval = \"20s\"\n{BASE}"));
        assert!(e.contains("interval: must be > 0"), "{e}");
        let e = refused(&format!("omit = \"601s\"\n{BASE}"));
        assert!(e.contains("omit: must be at most 600 s"), "{e}");
    }

    #[test]
    fn path_needs_exactly_one_source_and_a_known_preset() {
        let e = refused(&BASE.replace("preset = \"cern-starlight\"", "preset = \"mars\""));
        assert!(
            e.contains("lab/x.toml:5: path.preset: unknown preset \"mars\""),
            "{e}"
        );
        let e = refused(&BASE.replace("preset = \"cern-starlight\"", ""));
        assert!(
            e.contains("path: give exactly one of preset or file"),
            "{e}"
        );
        let s =
            parse(&BASE.replace("preset = \"cern-starlight\"", "file = \"paths/p.toml\"")).unwrap();
        assert_eq!(s.path.source, PathSource::File("paths/p.toml".into()));
        assert!(s.topology(None).is_err());
        let topo = s
            .topology(Some(
                longhaul_topology::preset("amsterdam-geneva").unwrap().toml,
            ))
            .unwrap();
        assert_eq!(topo.name, "amsterdam-geneva");
        let e = s.topology(Some("name = 3")).unwrap_err();
        assert!(e.to_string().starts_with("paths/p.toml:1"), "{e}");
    }

    #[test]
    fn congestion_names_unknown_warn_malformed_fail() {
        let s = parse(&format!("{BASE}congestion = [\"cubic\", \"fancy_cc\"]\n")).unwrap();
        assert_eq!(s.warnings.len(), 1);
        let w = s.warnings[0].to_string();
        assert!(
            w.starts_with("lab/x.toml:10: sweep.congestion[1]: warning:"),
            "{w}"
        );
        let e = refused(&format!("{BASE}congestion = [\"Cubic\"]\n"));
        assert!(
            e.contains("sweep.congestion[0]: \"Cubic\" is not a congestion-control name"),
            "{e}"
        );
        let e = refused(&format!("{BASE}congestion = [\"a_very_long_cc_name\"]\n"));
        assert!(e.contains("is not a congestion-control name"), "{e}");
    }

    #[test]
    fn type_errors_and_syntax_errors_have_a_place() {
        let e = refused(&BASE.replace("\"10s\"", "true"));
        assert!(
            e.contains("lab/x.toml:2: duration: true is not a duration"),
            "{e}"
        );
        let e = refused("name = \"t\"\nduration = [");
        assert!(e.starts_with("lab/x.toml:2:"), "{e}");
        let e = refused(&BASE.replace("[sweep]\nwindow = [\"1M\", \"4M\"]\n", "sweep = 3\n"));
        assert!(e.contains("lab/x.toml:"), "{e}");
        let e = refused(&BASE.replace("name = \"t\"", "name = \"Bad Name\""));
        assert!(e.contains("lab/x.toml:1: name:"), "{e}");
    }

    #[test]
    fn points_are_the_cartesian_product_in_fixed_order() {
        let s = parse(&format!(
            "{BASE}mtu = [1500, 9000]\ncongestion = [\"reno\", \"cubic\"]\n"
        ))
        .unwrap();
        let p = s.points();
        assert_eq!(p.len(), 8);
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids[0], "cc=reno,mtu=1500,window=1M");
        assert_eq!(ids[1], "cc=reno,mtu=1500,window=4M");
        assert_eq!(ids[2], "cc=reno,mtu=9000,window=1M");
        assert_eq!(ids[7], "cc=cubic,mtu=9000,window=4M");
        assert!(p.iter().enumerate().all(|(i, q)| q.index == i));
        assert_eq!(p[7].congestion.as_deref(), Some("cubic"));
        assert_eq!(p[7].path.mtu, Some(9000));
        assert_eq!(p[7].window, Some(4 << 20));
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 8);
    }

    #[test]
    fn too_many_points_are_refused() {
        let many: Vec<String> = (1..=40).map(|i| i.to_string()).collect();
        let text = format!(
            "{BASE}streams = [{}]\nlength = [{}]\n",
            many.join(","),
            many.join(",")
        );
        let e = refused(&text);
        assert!(e.contains("sweep: 3200 points; at most 1000"), "{e}");
    }

    #[test]
    fn test_and_emulate_args() {
        let text = format!(
            "omit = 2\ninterval = \"0.5s\"\n{}\n[test]\ncongestion = \"bbr\"\nlength = \"128K\"\nstreams = 2\n",
            BASE.replace(
                "rate = \"500M\"",
                "rate = \"500M\"\nrtt = \"264ms\"\nloss = \"0.01%\"\nqueue = \"16M\""
            )
        );
        let s = parse(&text).unwrap();
        let p = &s.points()[1];
        assert_eq!(
            p.test_args(),
            [
                "-t", "10", "-O", "2", "-i", "0.5", "-P", "2", "-w", "4M", "-C", "bbr", "-l",
                "128K", "--rate", "500M", "--json"
            ]
        );
        assert_eq!(
            p.emulate_args(),
            [
                "cern-starlight",
                "--rtt",
                "264ms",
                "--rate",
                "500M",
                "--loss",
                "0.0001",
                "--queue",
                "16M"
            ]
        );
        let topo = s.topology(None).unwrap();
        let c = p.compile(&topo).unwrap();
        assert_eq!(c.rtt, Nanos::from_millis(264));
        assert_eq!(c.forward.bottleneck.unwrap().rate_bps, 500_000_000);
    }

    #[test]
    fn flag_formatting_round_trips() {
        for b in [1u64, 1000, 1 << 10, 3 << 20, 1 << 30, 1_500_000] {
            assert_eq!(parse_size(&size_flag(b)).unwrap(), b);
        }
        for r in [1u64, 999, 500_000_000, 1_000_000_000, 2_500_000] {
            assert_eq!(parse_rate(&rate_flag(r)).unwrap(), r);
        }
        for d in [
            Nanos(7),
            Nanos::from_micros(1500),
            Nanos::from_millis(127),
            Nanos::from_secs(30),
        ] {
            assert_eq!(
                parse_duration(&duration_flag(d), TimeUnit::Secs).unwrap(),
                d
            );
            assert_eq!(parse_duration(&secs_flag(d), TimeUnit::Secs).unwrap(), d);
        }
        assert_eq!(size_flag(4 << 20), "4M");
        assert_eq!(rate_flag(500_000_000), "500M");
        assert_eq!(secs_flag(Nanos::from_millis(1500)), "1.5");
    }

    #[test]
    fn events_are_checked() {
        let ev = |e: &str| format!("omit = 2\n{BASE}\n[event]\n{e}\n");
        let s = parse(&ev("at = \"5s\"\nlength = \"2s\"\nrate = \"90%\"")).unwrap();
        let e = s.event.unwrap();
        assert_eq!(e.rate, EventRate::Fraction(0.9));
        assert_eq!(e.end(), Nanos::from_secs(7));
        assert_eq!(e.recover_to, 0.95);
        let plan = s.points()[0].event_plan(500_000_000).unwrap();
        assert_eq!(plan.rate_bps, 450_000_000);
        let e = refused(&ev("at = \"1s\"\nlength = \"2s\"\nrate = \"90%\""));
        assert!(
            e.contains("event.at: 1s is not after the omit period (2s)"),
            "{e}"
        );
        let e = refused(&ev("at = \"5s\"\nlength = \"7s\"\nrate = \"90%\""));
        assert!(
            e.contains("event.length: the burst ends at 12s, not before the test does (12s"),
            "{e}"
        );
        let e = refused(&ev("at = \"5s\"\nlength = \"2s\"\nrate = \"100%\""));
        assert!(e.contains("event.rate: \"100%\""), "{e}");
        let e = refused(&ev("at = \"5s\"\nlength = \"2s\"\nrate = \"600M\""));
        assert!(
            e.contains("event.rate: 600M is not below the bottleneck rate 500M"),
            "{e}"
        );
        assert!(parse(&ev("at = \"5s\"\nlength = \"2s\"\nrate = \"400M\"")).is_ok());
        let e = refused(&ev(
            "at = \"5s\"\nlength = \"2s\"\nrate = \"4M\"\nkind = \"flood\"",
        ));
        assert!(e.contains("event.kind"), "{e}");
        let e = refused(&ev("at = \"5s\"\nlength = \"0s\"\nrate = \"4M\""));
        assert!(e.contains("event.length: must be > 0"), "{e}");
    }

    #[test]
    fn record_series_are_checked() {
        let s = parse(&format!("record = [\"cwnd\", \"rtt\"]\n{BASE}")).unwrap();
        assert_eq!(s.record, vec![Series::Cwnd, Series::Rtt]);
        let e = refused(&format!("record = [\"cwnd\", \"jitter\"]\n{BASE}"));
        assert!(
            e.contains("lab/x.toml:1: record[1]: \"jitter\" is not a series"),
            "{e}"
        );
        let e = refused(&format!("record = [\"cwnd\", \"cwnd\"]\n{BASE}"));
        assert!(e.contains("listed twice"), "{e}");
        let e = refused(&format!("record = []\n{BASE}"));
        assert!(e.contains("record: empty list"), "{e}");
    }

    #[test]
    fn preset_refuses_what_the_emulator_would() {
        let e = refused(&BASE.replace("rate = \"500M\"", "rate = \"500M\"\nrtt = \"300s\""));
        assert!(e.contains("path.rtt: must be > 0 and at most 240 s"), "{e}");
    }

    /// The annotated example of docs/lab.md is a valid experiment.
    #[test]
    fn docs_example_parses() {
        let docs = include_str!("../../../docs/lab.md");
        let start = docs.find("```toml\n").unwrap() + "```toml\n".len();
        let end = start + docs[start..].find("```").unwrap();
        let s = Spec::parse(&docs[start..end], "docs/lab.md").unwrap_or_else(|e| panic!("{e}"));
        assert!(s.warnings.is_empty());
        assert_eq!(s.points().len(), 3 * 2 * 2 * 4 * 3 * 4);
        assert!(s.event.is_some());
    }

    #[test]
    fn reduced_keeps_points_and_shortens_time() {
        let text = format!(
            "omit = 3\nrepetitions = 5\n{BASE}\n[event]\nat = \"6s\"\nlength = \"2s\"\nrate = \"90%\"\n"
        );
        let s = parse(&text).unwrap();
        let r = s.reduced();
        assert!(r.reduced && !s.reduced);
        assert_eq!(r.points().len(), s.points().len());
        assert_eq!(r.repetitions, 1);
        assert_eq!(r.omit, Nanos::ZERO);
        let e = r.event.unwrap();
        assert_eq!(e.at, Nanos::from_secs(2));
        assert_eq!(e.length, Nanos::SECOND);
        assert_eq!(r.duration, Nanos::from_secs(8));
        assert!(r.test_time() < s.test_time());
        assert_eq!(s.test_time(), Nanos::from_secs(13 * 2 * 5));
    }
}

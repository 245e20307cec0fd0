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
//!   rate, loss, streams, length, window, frame (the order of the keys in the file does not
//!   matter). A point's id lists only the swept axes in that order
//!   (`mtu=9000,window=4M`, `cc=quic-bbr,loss=0.1%`). The path axes (mtu, rate,
//!   loss) override the path's own values point by point, so each point's
//!   testbed is brought up with its own `longhaul emulate` arguments.
//! - Congestion-control names: any `[a-z0-9_]{1,15}` (the kernel's
//!   `TCP_CA_NAME_MAX` is 16 with the NUL) is accepted, since what a kernel
//!   offers is only known on the host (`longhaul test -C` verifies it);
//!   names outside [`KNOWN_CONGESTION`] give a [`SpecWarning`], anything else
//!   is an error. `quic-NAME` runs the UDP transport instead
//!   (`longhaul test --transport udp -C NAME`), NAME checked the same way
//!   against [`KNOWN_QUIC_CONGESTION`].
//! - Loss (path.loss and the loss axis): a probability or a percentage, at
//!   least 0 and below 1.
//! - Times: `duration` is `longhaul test -t`, `omit` is `-O` (left out of the
//!   totals; the test runs omit + duration). An event's `at` counts from the
//!   start of the test, omit period included, and must fall after the omit
//!   period and end before the test does.
//!
//! One module per step: `raw` (the file's shape as serde reads it, and the
//! reading of each raw value with its place), `check` (the whole file checked
//! into a [`Spec`]) and `args` (the flag values and the `longhaul test` and
//! `longhaul emulate` arguments of a point).

use std::fmt::Write as _;

use longhaul_topology::{Topology, preset};
use longhaul_units::Nanos;

use crate::error::{SpecError, field_at_line};

mod args;
mod check;
mod model;
mod raw;

pub use args::{duration_flag, loss_flag, rate_flag, secs_flag, size_flag};
pub use model::*;
use raw::{Ctx, RawSpec};

/// What the tests of a reduced variant may take in all, at most (set-up and
/// tear-down of each point's testbed not counted).
const REDUCED_TEST_TIME: Nanos = Nanos::from_secs(60);

impl Spec {
    /// Reads and checks the experiment in `text`; `file_name` names it in
    /// errors. Presets are resolved and compiled with every override (so an
    /// MTU or rate a preset cannot take is refused here); a topology file is
    /// only named, and checked when the runner passes its text to
    /// [`Spec::topology`].
    pub fn parse(text: &str, file_name: &str) -> Result<Self, SpecError> {
        let raw: RawSpec = toml::from_str(text)
            .map_err(|e| SpecError::from_toml(&e, text, file_name, field_at_line))?;
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
            pace_bps: self.pace_bps,
            ip: self.ip,
            duration: self.duration,
            omit: self.omit,
            interval: self.interval,
            event: self.event,
            find_rate: self.find_rate,
            frame: None,
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
                        Axis::Loss(v) => {
                            q.path.loss = Some(v[i]);
                            loss_flag(v[i])
                        }
                        Axis::Ip(v) => {
                            q.ip = v[i];
                            v[i].to_string()
                        }
                        Axis::Frame(v) => {
                            q.frame = Some(v[i]);
                            v[i].to_string()
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
            (PathSource::File(f), Some(text)) => Topology::from_toml(text, f),
            (PathSource::File(f), None) => {
                Err(refuse(f, "the topology file's text is needed".into()))
            }
        }
    }

    /// The CI variant: one repetition, no omit period, at most 3 s per point
    /// and at most a minute of tests in all (so 60 s ÷ points per point, in
    /// whole 100 ms, when there are more than 20 points) and 1-s intervals; an event moves to 2 s, lasts at most 1 s and the
    /// test runs 5 s after it. A line characterisation's trials last at most
    /// 0.5 s and its search stops at 10 % of the upper rate. Every point is kept,
    /// so every point runs in CI.
    pub fn reduced(&self) -> Self {
        let mut s = self.clone();
        s.reduced = true;
        s.repetitions = 1;
        s.omit = Nanos::ZERO;
        let points = self.sweep.iter().map(Axis::len).product::<usize>().max(1) as u64;
        let share = Nanos::from_millis(REDUCED_TEST_TIME.as_millis() / points / 100 * 100);
        s.duration = s.duration.min(if s.find_rate.is_some() {
            Nanos::from_millis(500)
        } else {
            Nanos::from_secs(3).min(share.max(Nanos::SECOND))
        });
        if let Some(f) = &mut s.find_rate {
            f.resolution = f.resolution.max(0.1);
        }
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
    /// without set-up and tear-down. A line characterisation's point is its
    /// search's trials (the upper rate, then a halving per step down to the
    /// resolution) and three more at 50, 90 and 100 % of the rate found.
    pub fn test_time(&self) -> Nanos {
        let n = self.sweep.iter().map(Axis::len).product::<usize>() as u64;
        let tests = self.find_rate.map_or(1, |f| {
            let halvings = (1.0 / f.resolution).log2().ceil().max(0.0) as u64;
            1 + halvings + 3
        });
        Nanos(
            self.omit
                .saturating_add(self.duration)
                .as_nanos()
                .saturating_mul(tests)
                .saturating_mul(n)
                .saturating_mul(u64::from(self.repetitions)),
        )
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(super) const BASE: &str = r#"name = "t"
duration = "10s"

[path]
preset = "cern-starlight"
rate = "500M"

[sweep]
window = ["1M", "4M"]
"#;

    pub(super) fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(text, "lab/x.toml")
    }

    #[track_caller]
    pub(super) fn refused(text: &str) -> String {
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

    /// The annotated example of docs/lab.md is a valid experiment.
    #[test]
    fn docs_example_parses() {
        let docs = include_str!("../../../../docs/lab.md");
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

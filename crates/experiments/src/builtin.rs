//! The built-in experiments: the seeds' figures as experiment files, embedded
//! from `crates/experiments/builtin/*.toml` (so each is also an example of the
//! format), scaled to one 2-core machine (bottleneck at most 1 Gbit/s, paths
//! from the topology presets, a quarter of an hour at most), and the seeds'
//! Land Speed Record paths at the records' own scale (`lsr-*`: 10 Gbit/s,
//! 10-minute points, `lsr = true`). Each file says in `source`,
//! `original_scale` and `scale` which figure or record it reproduces, at what
//! scale it ran and what was chosen here; [`Spec::reduced`] gives each a CI
//! variant with tiny durations.

use crate::{Spec, SpecError};

/// A built-in experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// Name on the command line (`longhaul lab run window-sweep`).
    pub name: &'static str,
    /// The experiment file text.
    pub toml: &'static str,
}

impl Builtin {
    /// Parses the embedded file (file name `builtin/NAME.toml` in errors).
    pub fn spec(&self) -> Result<Spec, SpecError> {
        Spec::parse(self.toml, &format!("builtin/{}.toml", self.name))
    }
}

/// The built-in experiment `$name`, embedded from `builtin/$name.toml` (the name is written once).
macro_rules! builtin {
    ($name:literal) => {
        Builtin {
            name: $name,
            toml: include_str!(concat!("../builtin/", $name, ".toml")),
        }
    };
}

const BUILTINS: [Builtin; 11] = [
    builtin!("window-sweep"),
    builtin!("streams-sweep"),
    builtin!("loss-recovery"),
    builtin!("sustained"),
    builtin!("message-size"),
    builtin!("cc-compare"),
    builtin!("frame-size"),
    builtin!("transport-loss"),
    builtin!("lsr-tokyo-loop"),
    builtin!("lsr-sc2004-loop"),
    builtin!("lsr-ipv6-2004"),
];

/// All built-in experiments, in the order `longhaul lab list` shows them.
pub fn builtins() -> Vec<Builtin> {
    BUILTINS.to_vec()
}

/// The built-in experiment called `name`.
pub fn builtin(name: &str) -> Option<Builtin> {
    BUILTINS.iter().find(|b| b.name == name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::predict;
    use crate::spec::{Axis, EventRate};
    use longhaul_units::{Nanos, bdp_bytes};

    fn spec(name: &str) -> Spec {
        builtin(name).unwrap().spec().unwrap()
    }

    #[test]
    fn every_builtin_parses_documents_itself_and_is_named_as_its_file() {
        assert_eq!(builtins().len(), 11);
        for b in builtins() {
            let s = b.spec().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.name, b.name);
            assert!(s.warnings.is_empty(), "{}: {:?}", b.name, s.warnings);
            for (what, text) in [
                ("source", &s.source),
                ("original_scale", &s.original_scale),
                ("scale", &s.scale),
                ("notes", &s.notes),
            ] {
                assert!(text.len() > 40, "{}: {what} too short", b.name);
            }
            assert!(s.source.contains("seed 00"), "{}", b.name);
            let topo = s.topology(None).unwrap();
            // The record paths run at the records' rate; the figures at what one machine holds.
            let max_rate = if s.lsr { 10_000_000_000 } else { 1_000_000_000 };
            for p in s.points() {
                let path = p.compile(&topo).unwrap();
                let rate = path.forward.bottleneck.unwrap().rate_bps;
                assert!(rate <= max_rate, "{}: {rate}", b.name);
                assert!(!p.test_args().is_empty() && !p.emulate_args().is_empty());
            }
        }
        assert!(builtin("nope").is_none());
    }

    #[test]
    fn full_scale_runs_take_minutes_not_hours() {
        for b in builtins() {
            let s = spec(b.name);
            let t = s.test_time();
            let max = if s.lsr { 45 * 60 } else { 15 * 60 };
            assert!(t <= Nanos::from_secs(max), "{}: {t}", b.name);
        }
    }

    /// The record paths: each at 10 Gbit/s and MTU 9000 on its seed's preset, every point a run
    /// the Land Speed Record's rules would time (10 minutes at least), paced, set beside the
    /// records, and the class each record was set in among the points.
    #[test]
    fn the_record_paths_run_at_the_records_scale() {
        let lsr: Vec<Builtin> = builtins()
            .into_iter()
            .filter(|b| b.name.starts_with("lsr-"))
            .collect();
        assert_eq!(lsr.len(), 3);
        for (name, preset, class_point) in [
            ("lsr-tokyo-loop", "tokyo-loop-30000km", "ip=6"),
            ("lsr-sc2004-loop", "sc2004-loop", "streams=18"),
            ("lsr-ipv6-2004", "ipv6-lsr-2004", "ip=6"),
        ] {
            let s = spec(name);
            assert!(s.lsr, "{name}");
            assert_eq!(
                s.path.source,
                crate::spec::PathSource::Preset(preset.into())
            );
            assert_eq!(s.path.rate_bps, Some(10_000_000_000), "{name}");
            assert_eq!(s.path.mtu, Some(9000), "{name}");
            assert!(s.duration >= Nanos::from_secs(600), "{name}");
            assert!(s.pace_bps.is_some(), "{name}");
            let points = s.points();
            assert!(points.iter().any(|p| p.id.contains(class_point)), "{name}");
            for cc in ["cubic", "bbr"] {
                assert!(
                    points.iter().any(|p| p.congestion.as_deref() == Some(cc)),
                    "{name}: {cc}"
                );
            }
        }
    }

    #[test]
    fn reduced_variants_are_tiny_and_keep_every_point() {
        for b in builtins() {
            let s = spec(b.name);
            let r = s.reduced();
            assert!(r.reduced);
            assert_eq!(r.points().len(), s.points().len());
            let per_point = r.omit.saturating_add(r.duration);
            assert!(per_point <= Nanos::from_secs(8), "{}: {per_point}", b.name);
            assert!(r.test_time() <= Nanos::from_secs(60), "{}", b.name);
        }
    }

    /// Seed 002 Fig. 6 on this scale: windows from well below to above the
    /// BDP, for both MTUs; the largest stays within BDP + queue (one BDP).
    #[test]
    fn window_sweep_straddles_the_bdp() {
        let s = spec("window-sweep");
        assert!(s.sweep.contains(&Axis::Mtu(vec![1500, 9000])));
        let topo = s.topology(None).unwrap();
        let points = s.points();
        assert_eq!(points.len(), 14);
        let path = points[0].compile(&topo).unwrap();
        let bdp = bdp_bytes(500_000_000, path.rtt);
        let windows: Vec<u64> = points.iter().filter_map(|p| p.window).collect();
        assert!(windows.iter().any(|w| *w * 4 <= bdp));
        assert!(windows.iter().any(|w| *w > bdp));
        assert!(windows.iter().all(|w| *w < 2 * bdp));
        let limited = points
            .iter()
            .map(|p| predict(p, &p.compile(&topo).unwrap()))
            .filter(|x| x.window_limited)
            .count();
        assert!((4..14).contains(&limited), "{limited}");
    }

    /// Seed 002's line characterisation: RFC 2544's frame sizes up to jumbo frames, every one
    /// fitting the path's MTU, each point a loss-free search whose model is the line rate.
    #[test]
    fn frame_size_sweeps_rfc_2544_frames_up_to_jumbo() {
        let s = spec("frame-size");
        let f = s.find_rate.unwrap();
        assert_eq!(f.loss_threshold, 0.0);
        let topo = s.topology(None).unwrap();
        let points = s.points();
        let frames: Vec<u32> = points.iter().filter_map(|p| p.frame).collect();
        assert_eq!(frames.first(), Some(&64));
        assert_eq!(frames.last(), Some(&9000));
        assert!(frames.contains(&1518));
        for p in &points {
            let path = p.compile(&topo).unwrap();
            assert!(p.frame.unwrap() <= path.mtu + 18);
            let pred = predict(p, &path);
            let len = p.datagram_len().unwrap();
            // The line rate in payload: the bottleneck less 28 header bytes per datagram.
            assert_eq!(pred.expected_bps, 1_000_000_000 * len / (len + 28));
            assert!(!pred.window_limited);
            assert!(
                p.test_args()
                    .starts_with(&["-u".into(), "--find-rate".into()])
            );
        }
    }

    #[test]
    fn loss_recovery_has_the_burst_on_a_long_path() {
        let s = spec("loss-recovery");
        assert_eq!(
            s.sweep,
            vec![Axis::Congestion(vec![
                "reno".into(),
                "cubic".into(),
                "bbr".into()
            ])]
        );
        let e = s.event.unwrap();
        assert_eq!(e.length, Nanos::from_secs(2));
        assert_eq!(e.rate, EventRate::Fraction(0.9));
        assert_eq!(e.recover_to, 0.95);
        let topo = s.topology(None).unwrap();
        let p = &s.points()[0];
        let path = p.compile(&topo).unwrap();
        assert!(path.rtt >= Nanos::from_millis(100));
        // Reno's responsiveness fits in what is left of the test after the
        // burst, so "recovered" can be observed.
        let pr = predict(p, &path);
        let after = s.omit.saturating_add(s.duration).saturating_sub(e.end());
        assert!(
            pr.responsiveness < after,
            "{:?} vs {after}",
            pr.responsiveness
        );
    }

    #[test]
    fn cc_compare_runs_at_264_ms() {
        let s = spec("cc-compare");
        let topo = s.topology(None).unwrap();
        let path = s.points()[0].compile(&topo).unwrap();
        assert_eq!(path.rtt, Nanos::from_millis(264));
        assert_eq!(topo.name, "cern-caltech-2004", "the seed's own route");
        assert_eq!(s.points().len(), 3);
    }

    /// Seed 002's UDT against TCP, with the loss the seed could not test: each kernel TCP
    /// and each controller of the UDP transport at every loss, on a long path, with the Mathis
    /// ceiling predicted per lossy point; `quic-NAME` runs `--transport udp -C NAME`.
    #[test]
    fn transport_loss_runs_tcp_and_quic_at_every_loss_with_mathis() {
        let s = spec("transport-loss");
        let ccs = [
            "reno",
            "cubic",
            "bbr",
            "quic-cubic",
            "quic-newreno",
            "quic-bbr",
            "quic-udt",
        ];
        assert_eq!(
            s.sweep,
            vec![
                Axis::Congestion(ccs.iter().map(|c| (*c).to_owned()).collect()),
                Axis::Loss(vec![0.0, 1e-4, 1e-3, 1e-2]),
            ]
        );
        assert_eq!(s.streams, 1);
        let topo = s.topology(None).unwrap();
        let points = s.points();
        assert_eq!(points.len(), 28);
        assert_eq!(points[0].id, "cc=reno,loss=0%");
        assert_eq!(points[27].id, "cc=quic-udt,loss=1%");
        for p in &points {
            let path = p.compile(&topo).unwrap();
            assert!(path.rtt >= Nanos::from_millis(100), "{}", p.id);
            let pr = predict(p, &path);
            assert_eq!(pr.loss, p.path.loss.unwrap());
            assert_eq!(pr.mathis_bps.is_some(), pr.loss > 0.0, "{}", p.id);
            let args = p.test_args();
            let cc = p.congestion.as_deref().unwrap();
            let quic = args.windows(2).any(|w| w == ["--transport", "udp"]);
            assert_eq!(quic, cc.starts_with("quic-"), "{}: {args:?}", p.id);
            let c = args.iter().position(|a| a == "-C").unwrap();
            assert_eq!(args[c + 1], cc.trim_start_matches("quic-"), "{}", p.id);
            let e = p.emulate_args();
            let l = e.iter().position(|a| a == "--loss").unwrap();
            assert_eq!(e[l + 1].parse::<f64>().unwrap(), pr.loss);
        }
        // Mathis at 1 % is about 1.1 Mbit/s at 127 ms: far below the 500 Mbit/s bottleneck.
        let lossiest = predict(&points[3], &points[3].compile(&topo).unwrap());
        let m = lossiest.mathis_bps.unwrap();
        assert!((1.0e6..1.3e6).contains(&m), "{m}");
        assert!(s.test_time() <= Nanos::from_secs(15 * 60));
        // The reduced variant keeps all 28 points within a minute of tests.
        let r = s.reduced();
        assert_eq!(r.duration, Nanos::from_millis(2100));
        assert_eq!(r.points().len(), 28);
    }

    #[test]
    fn streams_message_and_sustained_shapes() {
        let s = spec("streams-sweep");
        assert_eq!(s.sweep, vec![Axis::Streams(vec![1, 2, 4, 8, 12, 16])]);
        let s = spec("message-size");
        assert!(matches!(&s.sweep[0], Axis::Length(v) if v.contains(&8000) && v.contains(&9000)));
        let s = spec("sustained");
        assert_eq!(s.interval, Nanos::from_secs(10));
        assert!(s.duration >= Nanos::from_secs(600));
    }
}

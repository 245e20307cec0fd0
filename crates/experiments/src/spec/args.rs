//! The flag values of a point (each parses back with the units crate) and
//! the `longhaul test` and `longhaul emulate` arguments that run it.

use longhaul_units::Nanos;

use super::model::{PathSource, Point, QueueSize};

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

impl Point {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{BASE, parse};
    use longhaul_units::{TimeUnit, parse_duration, parse_rate, parse_size};

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
}

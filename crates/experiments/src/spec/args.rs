//! The flag values of a point (each parses back with the units crate) and
//! the `longhaul test` and `longhaul emulate` arguments that run it.

use longhaul_units::Nanos;

use super::model::{FindRate, PathSource, Point, QueueSize};

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

/// A loss probability as a percentage for labels and point ids: "0%", "0.01%", "1%" (at most
/// six decimals of a percent, trailing zeros dropped); it parses back as a loss.
pub fn loss_flag(p: f64) -> String {
    let pct = format!("{:.6}", p * 100.0);
    format!("{}%", pct.trim_end_matches('0').trim_end_matches('.'))
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
    /// `-C` (`--transport udp -C NAME` for `quic-NAME`), `-l`, `--rate` (the
    /// bottleneck, for auto windows, when known) and `--json`.
    pub fn test_args(&self) -> Vec<String> {
        if let Some(f) = &self.find_rate {
            return self.find_rate_args(f);
        }
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
        match (self.quic_controller(), &self.congestion) {
            (Some(c), _) => a.extend(["--transport".into(), "udp".into(), "-C".into(), c.into()]),
            (None, Some(cc)) => a.extend(["-C".into(), cc.clone()]),
            (None, None) => {}
        }
        if let Some(l) = self.length {
            a.extend(["-l".into(), size_flag(l)]);
        }
        if let Some(r) = self.path.rate_bps {
            a.extend(["--rate".into(), rate_flag(r)]);
        }
        if let Some(p) = self.pace_bps {
            a.extend(["--pace".into(), rate_flag(p)]);
        }
        a.push("--json".into());
        a
    }

    /// A line characterisation's `longhaul test` arguments: `-u --find-rate --rate UPPER
    /// --loss-threshold PCT --resolution R -t -P [-w] [-l] --json`, each trial lasting the
    /// duration, the datagram length from the frame size.
    fn find_rate_args(&self, f: &FindRate) -> Vec<String> {
        let mut a: Vec<String> = vec!["-u".into(), "--find-rate".into()];
        if let Some(upper) = f.upper_bps.or(self.path.rate_bps) {
            let resolution = ((upper as f64 * f.resolution).round() as u64).max(1);
            a.extend(["--rate".into(), rate_flag(upper)]);
            a.extend(["--resolution".into(), rate_flag(resolution)]);
        }
        a.extend([
            "--loss-threshold".into(),
            format!("{}%", f.loss_threshold * 100.0),
        ]);
        a.extend(["-t".into(), secs_flag(self.duration)]);
        a.extend(["-P".into(), self.streams.to_string()]);
        if let Some(w) = self.window {
            a.extend(["-w".into(), size_flag(w)]);
        }
        if let Some(l) = self.datagram_len() {
            a.extend(["-l".into(), l.to_string()]);
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
    fn quic_congestion_runs_the_udp_transport_and_tcp_names_the_kernels() {
        let s = parse(&format!(
            "{}congestion = [\"cubic\", \"quic-newreno\"]\nloss = [0.01]\n",
            BASE.replace("window = [\"1M\", \"4M\"]", "window = [\"auto\"]")
        ))
        .unwrap();
        let p = s.points();
        assert_eq!(p[0].id, "cc=cubic,loss=1%,window=auto");
        assert_eq!(p[0].quic_controller(), None);
        assert_eq!(
            p[0].test_args(),
            [
                "-t", "10", "-i", "1", "-P", "1", "-w", "auto", "-C", "cubic", "--rate", "500M",
                "--json"
            ]
        );
        assert_eq!(p[1].id, "cc=quic-newreno,loss=1%,window=auto");
        assert_eq!(p[1].quic_controller(), Some("newreno"));
        assert_eq!(
            p[1].test_args(),
            [
                "-t",
                "10",
                "-i",
                "1",
                "-P",
                "1",
                "-w",
                "auto",
                "--transport",
                "udp",
                "-C",
                "newreno",
                "--rate",
                "500M",
                "--json"
            ]
        );
        // The path is the same for both: the loss goes to the emulator, not to the test.
        for q in &p {
            assert_eq!(
                q.emulate_args(),
                ["cern-starlight", "--rate", "500M", "--loss", "0.01"]
            );
        }
    }

    #[test]
    fn a_frame_sweep_runs_find_rate_with_the_frames_payload() {
        let text = "name = \"f\"\nduration = \"2s\"\n[path]\npreset = \"amsterdam-geneva\"\n\
                    rate = \"1G\"\nmtu = 9000\n[find_rate]\nloss_threshold = \"0.1%\"\n\
                    [sweep]\nframe = [64, 1518, 9018]\n";
        let s = parse(text).unwrap();
        let p = s.points();
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["frame=64", "frame=1518", "frame=9018"]);
        assert_eq!(
            p[0].test_args(),
            [
                "-u",
                "--find-rate",
                "--rate",
                "1G",
                "--resolution",
                "10M",
                "--loss-threshold",
                "0.1%",
                "-t",
                "2",
                "-P",
                "1",
                "-l",
                "18",
                "--json"
            ]
        );
        // 1518 − 18 (Ethernet) − 28 (IPv4, UDP) and a whole 9000-byte IP packet.
        assert_eq!(p[1].datagram_len(), Some(1472));
        assert_eq!(p[2].datagram_len(), Some(8972));
        let r = s.reduced();
        assert_eq!(r.duration, Nanos::from_millis(500));
        assert!(r.points()[0].test_args().contains(&"100M".to_owned()));
        // Per point: the upper rate, 7 halvings to 1 %, and 3 loads, 2 s each.
        assert_eq!(s.test_time(), Nanos::from_secs(3 * 11 * 2));
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
        for (p, text) in [
            (0.0, "0%"),
            (1e-6, "0.0001%"),
            (1e-4, "0.01%"),
            (1e-3, "0.1%"),
            (0.01, "1%"),
            (0.125, "12.5%"),
        ] {
            assert_eq!(loss_flag(p), text);
            let back: f64 = text.trim_end_matches('%').parse().unwrap();
            assert!((back / 100.0 - p).abs() < 1e-12, "{text}");
        }
    }
}

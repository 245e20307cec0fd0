//! The checks of an experiment file: every field of the raw file read into a
//! [`Spec`] and refused with its place when impossible (ranges, the sweep's
//! size, the path's source and preset overrides, the event's timing).

use longhaul_proto::msg::MAX_OMIT_NS;
use longhaul_topology::{Overrides, preset, presets};
use longhaul_units::Nanos;
use toml::Spanned;

use super::args::{duration_flag, rate_flag};
use super::model::{
    Axis, ETHERNET_OVERHEAD, Event, EventRate, FindRate, MAX_DURATION, MAX_POINTS, MAX_REPETITIONS,
    PathSource, PathSpec, QueueSize, Series, Spec, overrides,
};
use super::raw::{Ctx, RawEvent, RawFindRate, RawPath, RawSpec, V, Values};
use crate::error::SpecError;

impl Spec {
    pub(super) fn check(cx: &mut Ctx<'_>, raw: RawSpec) -> Result<Self, SpecError> {
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
        let (mut pace_bps, mut ip) = (None, 4);
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
            if let Some(v) = &t.pace {
                pace_bps = Some(cx.rate(v, "test.pace")?);
            }
            if let Some(v) = &t.ip {
                ip = cx.ip(v, "test.ip")?;
            }
        }

        let s = raw.sweep.get_ref();
        let mut sweep = Vec::new();
        if let Some(v) = cx.list(&s.congestion, "congestion", |cx, v, f| cx.congestion(v, f))? {
            sweep.push(Axis::Congestion(v));
        }
        if let Some(v) = cx.list(&s.ip, "ip", |cx, v, f| cx.ip(v, f))? {
            sweep.push(Axis::Ip(v));
        }
        if let Some(v) = cx.list(&s.mtu, "mtu", |cx, v, f| cx.mtu(v, f))? {
            sweep.push(Axis::Mtu(v));
        }
        if let Some(v) = cx.list(&s.rate, "rate", |cx, v, f| cx.rate(v, f))? {
            sweep.push(Axis::Rate(v));
        }
        if let Some(v) = cx.list(&s.loss, "loss", |cx, v, f| cx.loss(v, f))? {
            sweep.push(Axis::Loss(v));
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
        if let Some(v) = cx.list(&s.frame, "frame", |cx, v, f| cx.frame(v, f))? {
            sweep.push(Axis::Frame(v));
        }
        if sweep.is_empty() {
            return Err(cx.err(
                &raw.sweep.span(),
                "sweep",
                "no axes: give at least one of window, streams, congestion, length, mtu, rate, loss, ip, frame \
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

        let find_rate = match &raw.find_rate {
            Some(f) if pace_bps.is_some() => {
                return Err(cx.err(
                    &f.span(),
                    "find_rate",
                    "a line characterisation sets its own rates: drop test.pace",
                ));
            }
            Some(f) if ip != 4 || sweep.iter().any(|a| matches!(a, Axis::Ip(_))) => {
                return Err(cx.err(
                    &f.span(),
                    "find_rate",
                    "a line characterisation's datagrams are reckoned for IPv4: drop test.ip and \
                     sweep.ip",
                ));
            }
            Some(f) => Some(Self::check_find_rate(
                cx,
                &raw,
                f,
                &path,
                &sweep,
                congestion.is_some(),
            )?),
            None => {
                if let Some(list) = &s.frame {
                    return Err(cx.err(
                        &list.span(),
                        "sweep.frame",
                        "a frame-size sweep characterises the line with UDP trials: add a \
                         [find_rate] table",
                    ));
                }
                None
            }
        };

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
        let lsr = match &raw.lsr {
            None => false,
            Some(v) => match v.get_ref() {
                toml::Value::Boolean(b) => *b,
                other => return cx.fail(v, "lsr", format!("expected true or false, got {other}")),
            },
        };
        if lsr && find_rate.is_some() {
            let v = raw.lsr.as_ref().expect("read above");
            return cx.fail(
                v,
                "lsr",
                "a line characterisation moves no TCP data to set beside a record: drop lsr",
            );
        }
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
            pace_bps,
            ip,
            sweep,
            duration,
            omit,
            interval,
            repetitions,
            event,
            record,
            reduced: false,
            find_rate,
            lsr,
            warnings: Vec::new(),
        })
    }

    /// A line characterisation: its settings, and what it cannot be combined with (a congestion
    /// control, a length beside frame sizes, an event, frames larger than the path's MTU carries).
    fn check_find_rate(
        cx: &Ctx<'_>,
        raw: &RawSpec,
        f: &Spanned<RawFindRate>,
        path: &PathSpec,
        sweep: &[Axis],
        congestion: bool,
    ) -> Result<FindRate, SpecError> {
        let here = f.span();
        let axis = |name: &str| sweep.iter().find(|a| a.name() == name);
        if congestion || axis("congestion").is_some() {
            return Err(cx.err(
                &here,
                "find_rate",
                "a line characterisation sends UDP: drop the congestion control (test.congestion, \
                 sweep.congestion)",
            ));
        }
        if let Some(e) = &raw.event {
            return Err(cx.err(
                &e.span(),
                "event",
                "a line characterisation has no event: its trials measure the path alone",
            ));
        }
        if axis("frame").is_some()
            && (axis("length").is_some() || raw.test.as_ref().is_some_and(|t| t.length.is_some()))
        {
            return Err(cx.err(
                &here,
                "find_rate",
                "give frame sizes (sweep.frame) or datagram lengths (length), not both",
            ));
        }
        let r = f.get_ref();
        let loss_threshold = r
            .loss_threshold
            .as_ref()
            .map(|v| cx.probability(v, "find_rate.loss_threshold"))
            .transpose()?
            .unwrap_or(0.0);
        let mut upper_bps = r
            .upper
            .as_ref()
            .map(|v| cx.rate(v, "find_rate.upper"))
            .transpose()?;
        if upper_bps.is_none() && path.rate_bps.is_none() && axis("rate").is_none() {
            upper_bps = match &path.source {
                PathSource::Preset(p) => preset_rate(p, path),
                PathSource::File(_) => None,
            };
            if upper_bps.is_none() {
                return Err(cx.err(
                    &here,
                    "find_rate.upper",
                    "give the highest rate to try (upper), or the path's rate",
                ));
            }
        }
        let resolution = match &r.resolution {
            Some(v) => {
                let x = cx.probability(v, "find_rate.resolution")?;
                if !(x > 0.0 && x <= 0.5) {
                    return cx.fail(
                        v,
                        "find_rate.resolution",
                        "must be a share of the upper rate above 0 and at most 50 %",
                    );
                }
                x
            }
            None => 0.01,
        };
        if let Some(Axis::Frame(frames)) = axis("frame") {
            let mtus: Vec<u32> = match (axis("mtu"), path.mtu, &path.source) {
                (Some(Axis::Mtu(m)), _, _) => m.clone(),
                (_, Some(m), _) => vec![m],
                (_, None, PathSource::Preset(p)) => preset(p)
                    .and_then(|p| p.topology().ok())
                    .and_then(|t| t.compile(&overrides(path)).ok())
                    .map(|c| vec![c.mtu])
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            if let (Some(&mtu), Some(&frame)) = (mtus.iter().min(), frames.iter().max())
                && frame > mtu + ETHERNET_OVERHEAD
            {
                let list = raw.sweep.get_ref().frame.as_ref();
                let i = frames.iter().position(|&x| x == frame).unwrap_or(0);
                let span = list
                    .and_then(|l| l.get_ref().get(i))
                    .map_or(here.clone(), |v| v.span());
                return Err(cx.err(
                    &span,
                    &format!("sweep.frame[{i}]"),
                    format!(
                        "a {frame}-byte frame does not fit an MTU of {mtu} (at most {} bytes): \
                         set path.mtu = 9000",
                        mtu + ETHERNET_OVERHEAD
                    ),
                ));
            }
        }
        Ok(FindRate {
            loss_threshold,
            upper_bps,
            resolution,
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
        let loss = p
            .loss
            .as_ref()
            .map(|v| cx.loss(v, "path.loss"))
            .transpose()?;
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

    /// Compiles the preset with the path overrides and with each mtu, rate
    /// and loss value of the sweep, so that what the emulator would refuse is
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
                Axis::Loss(v) => (
                    v.iter()
                        .map(|p| Overrides {
                            loss: Some(*p),
                            ..base
                        })
                        .collect(),
                    &s.loss,
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
}

/// The bottleneck rate of a preset with the path's overrides.
fn preset_rate(name: &str, path: &PathSpec) -> Option<u64> {
    let topo = preset(name)?.topology().ok()?;
    let c = topo.compile(&overrides(path)).ok()?;
    c.forward.bottleneck.map(|b| b.rate_bps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::{BASE, parse, refused};

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
    fn quic_congestion_names_pass_through_and_are_checked_after_the_prefix() {
        let s = parse(&format!(
            "{BASE}congestion = [\"cubic\", \"quic-bbr\", \"quic-udt\", \"quic-fancy_cc\"]\n"
        ))
        .unwrap();
        assert_eq!(
            s.sweep[0],
            Axis::Congestion(vec![
                "cubic".into(),
                "quic-bbr".into(),
                "quic-udt".into(),
                "quic-fancy_cc".into()
            ])
        );
        // Only the controller the UDP transport does not know is worth a word.
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        let w = s.warnings[0].to_string();
        assert!(
            w.contains("sweep.congestion[3]") && w.contains("quic-newreno"),
            "{w}"
        );
        for bad in ["quic-", "quic-BBR", "quic-a_very_long_cc_name", "tcp-bbr"] {
            let e = refused(&format!("{BASE}congestion = [\"{bad}\"]\n"));
            assert!(
                e.contains("sweep.congestion[0]") && e.contains("is not a congestion-control name"),
                "{bad}: {e}"
            );
        }
        let s = parse(&format!("{BASE}\n[test]\ncongestion = \"quic-cubic\"\n")).unwrap();
        assert_eq!(s.points()[0].quic_controller(), Some("cubic"));
    }

    #[test]
    fn loss_axis_sets_each_points_path_loss() {
        let s = parse(&format!(
            "{}loss = [0, 1e-4, \"0.1%\", 0.01]\n",
            BASE.replace("window = [\"1M\", \"4M\"]", "window = [\"4M\"]")
        ))
        .unwrap();
        assert_eq!(
            s.sweep,
            vec![
                Axis::Loss(vec![0.0, 1e-4, 1e-3, 1e-2]),
                Axis::Window(vec![Some(4 << 20)])
            ]
        );
        let p = s.points();
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "loss=0%,window=4M",
                "loss=0.01%,window=4M",
                "loss=0.1%,window=4M",
                "loss=1%,window=4M"
            ]
        );
        let topo = s.topology(None).unwrap();
        for (q, want) in p.iter().zip([0.0, 1e-4, 1e-3, 1e-2]) {
            assert_eq!(q.path.loss, Some(want));
            assert_eq!(q.overrides().loss, Some(want));
            let pr = crate::predict::predict(q, &q.compile(&topo).unwrap());
            assert_eq!(pr.loss, want);
            assert_eq!(pr.mathis_bps.is_some(), want > 0.0);
        }
        // The axis wins over the path's own loss, point by point.
        let s = parse(&format!(
            "{}loss = [0.02]\n",
            BASE.replace("rate = \"500M\"", "rate = \"500M\"\nloss = 0.5")
        ))
        .unwrap();
        assert_eq!(s.path.loss, Some(0.5));
        assert!(s.points().iter().all(|q| q.path.loss == Some(0.02)));
    }

    #[test]
    fn loss_must_be_at_least_0_and_below_1() {
        for (bad, shown) in [
            ("1", "got 1"),
            ("1.5", "got 1.5"),
            ("-0.001", "got -0.001"),
            ("\"100%\"", "got \"100%\""),
            ("\"lots\"", "got \"lots\""),
            ("true", "got true"),
        ] {
            let e = refused(&format!("{BASE}loss = [0, {bad}]\n"));
            assert!(
                e.starts_with(
                    "lab/x.toml:10: sweep.loss[1]: loss must be a probability from 0 to below 1"
                ) && e.ends_with(shown)
                    && !e.contains('\n'),
                "{bad}: {e}"
            );
        }
        let e = refused(&format!("{BASE}loss = [0.01, \"1%\"]\n"));
        assert!(e.contains("sweep.loss[1]: repeats sweep.loss[0]"), "{e}");
        let e = refused(&format!("{BASE}loss = []\n"));
        assert!(e.contains("sweep.loss: empty list"), "{e}");
        let e = refused(&BASE.replace("rate = \"500M\"", "rate = \"500M\"\nloss = 1"));
        assert!(e.contains("lab/x.toml:7: path.loss: loss must be"), "{e}");
        assert!(parse(&format!("{BASE}loss = [0, 0.999999]\n")).is_ok());
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

    #[test]
    fn a_frame_sweep_is_checked_against_its_mode_and_the_mtu() {
        let frames = |extra: &str, frames: &str| {
            format!(
                "name = \"f\"\nduration = \"1s\"\n{extra}\n[path]\npreset = \"cern-starlight\"\n\
                 [sweep]\nframe = {frames}\n"
            )
        };
        let e = refused(&frames("", "[64]"));
        assert!(
            e.contains("sweep.frame") && e.contains("[find_rate]"),
            "{e}"
        );
        let fr = "[find_rate]\nloss_threshold = 0";
        let e = refused(&frames(fr, "[64, 1518, 9018]"));
        assert!(
            e.contains("lab/x.toml:8: sweep.frame[2]") && e.contains("path.mtu = 9000"),
            "{e}"
        );
        let e = refused(&frames(fr, "[63]"));
        assert!(e.contains("64 to 9018 bytes"), "{e}");
        let e = refused(&frames(
            "[test]\ncongestion = \"cubic\"\n[find_rate]",
            "[64]",
        ));
        assert!(e.contains("drop the congestion control"), "{e}");
        let e = refused(&frames("[find_rate]\nresolution = \"60%\"", "[64]"));
        assert!(e.contains("find_rate.resolution"), "{e}");
        let e = refused(&frames("[find_rate]\nloss_threshold = 2", "[64]"));
        assert!(e.contains("find_rate.loss_threshold"), "{e}");
        // The preset's own rate is the upper bound when none is given.
        let s = parse(&frames(fr, "[64, 1518]")).unwrap();
        let f = s.find_rate.unwrap();
        assert_eq!(f.loss_threshold, 0.0);
        assert!(f.upper_bps.is_some_and(|u| u > 0));
    }

    #[test]
    fn pace_and_ip_version_reach_each_point_and_are_checked() {
        let text = BASE.replace(
            "[sweep]\n",
            "[test]\npace = \"11G\"\n[sweep]\nip = [4, 6]\n",
        );
        let s = parse(&text).unwrap();
        assert_eq!(s.pace_bps, Some(11_000_000_000));
        let p = s.points();
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].id, "ip=4,window=1M");
        assert_eq!(p[3].id, "ip=6,window=4M");
        assert_eq!((p[0].ip, p[3].ip), (4, 6));
        assert!(p.iter().all(|q| q.pace_bps == Some(11_000_000_000)));
        let args = p[3].test_args();
        let at = args.iter().position(|a| a == "--pace").expect("--pace");
        assert_eq!(args[at + 1], "11G");
        // Without either, IPv4 and unpaced.
        let plain = parse(BASE).unwrap().points();
        assert!(plain.iter().all(|q| q.ip == 4 && q.pace_bps.is_none()));
        assert!(!plain[0].test_args().contains(&"--pace".to_owned()));

        let e = refused(&BASE.replace("[sweep]\n", "[sweep]\nip = [4, 5]\n"));
        assert!(
            e.starts_with("lab/x.toml:9: sweep.ip[1]: the IP version is 4 or 6, got 5"),
            "{e}"
        );
        let e = refused(&BASE.replace("[sweep]\n", "[test]\nip = \"v6\"\n[sweep]\n"));
        assert!(e.contains("test.ip") && e.contains("an IP version"), "{e}");
        let e = refused(&BASE.replace("[sweep]\n", "[test]\npace = \"0\"\n[sweep]\n"));
        assert!(
            e.contains("test.pace") && e.contains("rate must be > 0"),
            "{e}"
        );
        let line = "name = \"f\"\nduration = \"1s\"\n[path]\npreset = \"cern-starlight\"\n";
        let e = refused(&format!(
            "{line}[test]\npace = \"1G\"\n[find_rate]\n[sweep]\nframe = [64]\n"
        ));
        assert!(
            e.contains("find_rate") && e.contains("drop test.pace"),
            "{e}"
        );
        let e = refused(&format!("{line}[find_rate]\n[sweep]\nip = [6]\n"));
        assert!(e.contains("reckoned for IPv4"), "{e}");
    }
}

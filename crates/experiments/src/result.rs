//! The result file: one JSON document per run holding everything needed to
//! understand it later (the experiment as given, every point's parameters,
//! each repetition's `longhaul test --json` report, emulator fidelity, host
//! facts, seeds, versions, model predictions and derived metrics). It is
//! versioned (`format = "longhaul-lab-result"`, `version = 1`) and described
//! by a JSON Schema (draft 2020-12) embedded as [`SCHEMA`]; [`validate`]
//! checks a document against that schema (the CI test uses it), so the
//! schema and the checker cannot drift apart.
//!
//! The runner builds a [`ResultFile`] with [`ResultFile::new`] (incomplete),
//! pushes points as they finish, and calls [`ResultFile::finish`] at the end;
//! an interrupted run is written with `complete = false` and never mixed in
//! with complete ones. Times are passed in (RFC 3339 strings).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::{RecoveryParams, mean_bps, recovery, samples_from_report};
use crate::predict::Prediction;
use crate::records::{Candidate, Ip};
use crate::spec::{Point, Spec};

/// The `format` field.
pub const FORMAT: &str = "longhaul-lab-result";
/// The schema version this crate writes and reads.
pub const VERSION: u32 = 1;
/// The JSON Schema (draft 2020-12) of version 1.
pub const SCHEMA: &str = include_str!("result.schema.json");

/// A run's result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u32,
    /// Unique id of the run (chosen by the runner).
    pub run_id: String,
    /// The experiment as given.
    pub experiment: Experiment,
    /// When the run started (RFC 3339).
    pub started: String,
    /// When it finished; `None` while running or when interrupted.
    pub finished: Option<String>,
    /// Whether every point and repetition ran.
    pub complete: bool,
    /// Whether the emulator flagged any repetition as untrustworthy.
    pub untrustworthy: bool,
    /// Facts about the host.
    pub host: HostFacts,
    /// `longhaul --version`.
    pub longhaul_version: String,
    /// Random seeds used (the emulator's link-model seed and others), by
    /// name.
    pub seeds: BTreeMap<String, u64>,
    /// Per point, in [`Spec::points`] order.
    pub points: Vec<PointResult>,
}

/// The experiment of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// Its name.
    pub name: String,
    /// The file it came from (`builtin/NAME.toml` for built-ins).
    pub file: String,
    /// The file text as given.
    pub text: String,
    /// Whether the reduced (CI) variant ran.
    pub reduced: bool,
    /// The checked spec.
    pub spec: Spec,
}

/// Host facts, an open map around four required keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel: String,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub congestion_available: Vec<String>,
    /// Relevant sysctls by name.
    pub sysctls: BTreeMap<String, String>,
    /// NIC / TUN offloads by name ("tso": "on").
    pub offloads: BTreeMap<String, String>,
    /// Anything else the runner records (CPU model, cores, ...).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One point's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// The point's full parameter set.
    pub point: Point,
    /// What the models predict (`None` if the path could not be compiled).
    pub prediction: Option<Prediction>,
    /// Each repetition.
    pub repetitions: Vec<Repetition>,
    /// Means over the repetitions.
    pub summary: Derived,
}

/// One repetition of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repetition {
    /// 0-based.
    pub repetition: u32,
    /// When it started (RFC 3339).
    pub started: String,
    /// The `longhaul test --json` report as printed (`null` if the test
    /// failed before printing one).
    pub report: Value,
    /// Why the test failed, if it did.
    pub error: Option<String>,
    /// What the emulator says about its own timing.
    pub fidelity: Fidelity,
    /// Metrics derived from the report.
    pub derived: Derived,
}

/// Emulator fidelity of one repetition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// The emulator's overall verdict.
    pub ok: bool,
    /// 99th percentile of release lateness, ns.
    pub p99_lateness_ns: u64,
    /// Drops by cause ("queue", "random", "burst", "unplanned", ...).
    pub drops: BTreeMap<String, u64>,
    /// Flagged NOT TRUSTWORTHY by the emulator.
    pub untrustworthy: bool,
}

/// Metrics derived from interval samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// Mean throughput after the omit period, bit/s.
    pub mean_bps: Option<f64>,
    /// Mean rate before the event (experiments with an event).
    pub pre_event_bps: Option<f64>,
    /// Recovery time after the event, s (`None`: no event, or never
    /// recovered).
    pub recovery_s: Option<f64>,
}

impl Derived {
    /// Derives the metrics of one repetition of `point` from its report:
    /// the mean from the end of the omit period to the end of the test, and
    /// with an event the pre-burst mean and the recovery time
    /// ([`crate::analysis::recovery`]).
    pub fn from_report(point: &Point, report: &Value) -> Self {
        if point.find_rate.is_some() {
            // A line characterisation's figure: the highest rate it found (bit/s of payload).
            return Self {
                mean_bps: report["rate_bps"].as_f64(),
                pre_event_bps: None,
                recovery_s: None,
            };
        }
        let omit = point.omit.as_secs_f64();
        let samples = samples_from_report(report, omit);
        let mean = mean_bps(&samples, omit, f64::INFINITY);
        let rec = point.event.and_then(|e| {
            recovery(
                &samples,
                &RecoveryParams {
                    pre_from: omit,
                    burst_start: e.at.as_secs_f64(),
                    burst_end: e.end().as_secs_f64(),
                    fraction: e.recover_to,
                    window: e.recovery_window.as_secs_f64(),
                },
            )
        });
        Self {
            mean_bps: mean,
            pre_event_bps: rec.map(|r| r.pre_bps),
            recovery_s: rec.and_then(|r| r.recovery_s),
        }
    }

    /// The mean of each metric over the repetitions that have it.
    pub fn mean(all: &[Self]) -> Self {
        let avg = |f: fn(&Self) -> Option<f64>| {
            let v: Vec<f64> = all.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        Self {
            mean_bps: avg(|d| d.mean_bps),
            pre_event_bps: avg(|d| d.pre_event_bps),
            recovery_s: avg(|d| d.recovery_s),
        }
    }
}

impl ResultFile {
    /// A new, incomplete result with no points yet.
    pub fn new(
        run_id: impl Into<String>,
        experiment: Experiment,
        started: impl Into<String>,
        host: HostFacts,
        longhaul_version: impl Into<String>,
        seeds: BTreeMap<String, u64>,
    ) -> Self {
        Self {
            format: FORMAT.into(),
            version: VERSION,
            run_id: run_id.into(),
            experiment,
            started: started.into(),
            finished: None,
            complete: false,
            untrustworthy: false,
            host,
            longhaul_version: longhaul_version.into(),
            seeds,
            points: Vec::new(),
        }
    }

    /// Adds a finished point, updating its summary and the run's
    /// untrustworthy flag.
    pub fn push_point(&mut self, mut point: PointResult) {
        let derived: Vec<Derived> = point.repetitions.iter().map(|r| r.derived).collect();
        point.summary = Derived::mean(&derived);
        self.untrustworthy |= point.repetitions.iter().any(|r| r.fidelity.untrustworthy);
        self.points.push(point);
    }

    /// Marks the run complete if every point of the spec ran with every
    /// repetition; returns whether it is complete.
    pub fn finish(&mut self, finished: impl Into<String>) -> bool {
        self.finished = Some(finished.into());
        let spec = &self.experiment.spec;
        let expected = spec.points().len();
        self.complete = self.points.len() == expected
            && self
                .points
                .iter()
                .all(|p| p.repetitions.len() == spec.repetitions as usize);
        self.complete
    }

    /// The document as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a result file: validates it against the schema, then
    /// deserializes it.
    pub fn from_json(text: &str) -> Result<Self, SchemaError> {
        let v: Value = serde_json::from_str(text).map_err(|e| SchemaError {
            path: String::new(),
            message: format!("not JSON: {e}"),
        })?;
        validate(&v)?;
        serde_json::from_value(v).map_err(|e| SchemaError {
            path: String::new(),
            message: e.to_string(),
        })
    }
}

impl ResultFile {
    /// The run's best repetition (highest LSR metric) as a Land Speed Record candidate (see
    /// [`ResultFile::lsr_candidates`]).
    pub fn lsr_candidate(&self) -> Option<Candidate> {
        self.lsr_candidates()
            .into_iter()
            .map(|(_, c)| c)
            .max_by(|a, b| a.metric().total_cmp(&b.metric()))
    }

    /// Each point's best repetition (highest LSR metric) as a Land Speed Record candidate, with
    /// the point's index; points without a finished test are left out. Bytes and seconds as the
    /// receiver counted them, the path's L3 distance and router hops from its compiled topology,
    /// and the IP version and address pairs from the connections the report lists (a report
    /// without them counts as one IPv4 pair, what `longhaul emulate` testbeds use).
    pub fn lsr_candidates(&self) -> Vec<(usize, Candidate)> {
        let topology = self.experiment.spec.topology(None).ok();
        self.points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let compiled = topology.as_ref().and_then(|t| p.point.compile(t).ok());
                let hops = compiled
                    .as_ref()
                    .map_or(0, |c| u32::try_from(c.router_hops()).unwrap_or(u32::MAX));
                let km = compiled.as_ref().map_or(0.0, |c| c.lsr_distance_km());
                p.repetitions
                    .iter()
                    .filter_map(|r| {
                        let received = &r.report["end"]["sum_received"];
                        let bytes = received["bytes"].as_u64()?;
                        let seconds = received["seconds"].as_f64()?;
                        let (ip, address_pairs) = addresses(&r.report);
                        Some(Candidate {
                            label: format!(
                                "{} {} rep {}",
                                self.run_id,
                                p.point.id,
                                r.repetition + 1
                            ),
                            ip,
                            streams: p.point.streams,
                            claimed: None,
                            bytes,
                            seconds,
                            km,
                            hops_forward: hops,
                            hops_reverse: hops,
                            address_pairs,
                            emulated: true,
                        })
                    })
                    .max_by(|a, b| a.metric().total_cmp(&b.metric()))
                    .map(|c| (i, c))
            })
            .collect()
    }
}

/// The IP version and the number of distinct (local, remote) address pairs of a report's
/// `start.connected` list; IPv6 if any connection used it. No list: one IPv4 pair.
fn addresses(report: &Value) -> (Ip, u32) {
    let Some(connected) = report["start"]["connected"].as_array() else {
        return (Ip::V4, 1);
    };
    let pairs: std::collections::BTreeSet<(std::net::IpAddr, std::net::IpAddr)> = connected
        .iter()
        .filter_map(|c| {
            let local = c["local_host"].as_str()?.parse().ok()?;
            let remote = c["remote_host"].as_str()?.parse().ok()?;
            Some((local, remote))
        })
        .collect();
    let ip = if pairs.iter().any(|(l, r)| l.is_ipv6() || r.is_ipv6()) {
        Ip::V6
    } else {
        Ip::V4
    };
    (ip, u32::try_from(pairs.len().max(1)).unwrap_or(u32::MAX))
}

/// A result file that does not match the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct SchemaError {
    /// Where: `points[3].repetitions[0].fidelity.ok` (empty for the root).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Checks a result file's structure against [`SCHEMA`]: the format and
/// version first (a newer version is refused as such), then required keys,
/// types, constants, enumerations and bounds. Supports the subset of JSON
/// Schema the embedded schema uses: `type`, `properties`, `required`,
/// `additionalProperties`, `items`, `minItems`, `minLength`, `const`,
/// `enum`, `minimum`, `maximum`, `anyOf` and local `$ref`s.
pub fn validate(doc: &Value) -> Result<(), SchemaError> {
    let err = |path: &str, message: String| SchemaError {
        path: path.into(),
        message,
    };
    match doc.get("format").and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(other) => return Err(err("format", format!("{other:?} is not {FORMAT:?}"))),
        None => return Err(err("format", format!("missing: not a {FORMAT} file"))),
    }
    match doc.get("version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) if v > u64::from(VERSION) => {
            return Err(err(
                "version",
                format!("{v} is newer than this longhaul reads ({VERSION}); upgrade longhaul"),
            ));
        }
        _ => return Err(err("version", format!("must be {VERSION}"))),
    }
    let schema: Value =
        serde_json::from_str(SCHEMA).map_err(|e| err("", format!("bad embedded schema: {e}")))?;
    check(&schema, &schema, doc, "")
}

/// How deep into the document a path goes (keys and indices).
fn depth(path: &str) -> usize {
    path.matches(['.', '[']).count()
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    let actual = type_name(v);
    actual == t || (t == "number" && actual == "integer")
}

fn check(root: &Value, schema: &Value, v: &Value, path: &str) -> Result<(), SchemaError> {
    let fail = |message: String| {
        Err(SchemaError {
            path: path.to_owned(),
            message,
        })
    };
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix("#/")
            .and_then(|p| root.pointer(&format!("/{p}")))
            .ok_or_else(|| SchemaError {
                path: path.to_owned(),
                message: format!("schema reference {r} not found"),
            })?;
        return check(root, target, v, path);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        // None matches: the error of the branch that got furthest into the document (the first
        // of those), which is the branch the document meant to follow.
        let mut best: Option<SchemaError> = None;
        for s in any {
            match check(root, s, v, path) {
                Ok(()) => return Ok(()),
                Err(e)
                    if best
                        .as_ref()
                        .is_none_or(|b| depth(&e.path) > depth(&b.path)) =>
                {
                    best = Some(e);
                }
                Err(_) => {}
            }
        }
        if let Some(e) = best {
            return Err(e);
        }
    }
    if let Some(t) = schema.get("type") {
        let ok = match t {
            Value::String(t) => has_type(v, t),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| has_type(v, t)),
            _ => true,
        };
        if !ok {
            return fail(format!("expected {t}, got {} ({v})", type_name(v)));
        }
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        return fail(format!("must be {c}, got {v}"));
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return fail(format!("{v} is not one of {}", Value::Array(e.clone())));
    }
    if let Some(x) = v.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && x < min
        {
            return fail(format!("{v} is below the minimum {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && x > max
        {
            return fail(format!("{v} is above the maximum {max}"));
        }
    }
    if let (Some(s), Some(min)) = (v.as_str(), schema.get("minLength").and_then(Value::as_u64))
        && (s.chars().count() as u64) < min
    {
        return fail(format!("shorter than {min} characters"));
    }
    if let Some(items) = v.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            return fail(format!("{} items; at least {min} needed", items.len()));
        }
        if let Some(s) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(root, s, item, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for k in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(k) {
                    return Err(SchemaError {
                        path: join(path, k),
                        message: "missing required key".into(),
                    });
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            let p = join(path, k);
            match props.and_then(|ps| ps.get(k)) {
                Some(s) => check(root, s, val, &p)?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(SchemaError {
                            path: p,
                            message: "unknown key".into(),
                        });
                    }
                    Some(s @ Value::Object(_)) => check(root, s, val, &p)?,
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::builtin;
    use crate::predict::predict;

    /// A report as `longhaul test --json` prints it (only the keys the lab
    /// reads, plus iperf3's top level): 1-s intervals at `rate(t)`.
    fn report(omit: u64, secs: u64, rate: impl Fn(u64) -> f64) -> Value {
        let mut intervals = Vec::new();
        for t in 0..omit {
            intervals.push(serde_json::json!({"streams": [], "sum": {
                "start": t as f64, "end": (t + 1) as f64, "seconds": 1.0, "bytes": 0,
                "bits_per_second": rate(t), "omitted": true, "sender": true}}));
        }
        for t in 0..secs {
            intervals.push(serde_json::json!({"streams": [], "sum": {
                "start": t as f64, "end": (t + 1) as f64, "seconds": 1.0, "bytes": 0,
                "bits_per_second": rate(omit + t), "omitted": false, "sender": true}}));
        }
        serde_json::json!({"start": {}, "intervals": intervals, "end": {}})
    }

    /// A complete result of the loss-recovery experiment with synthetic
    /// reports: the generated example the schema is tested against.
    fn example() -> ResultFile {
        let b = builtin("loss-recovery").unwrap();
        let spec = b.spec().unwrap();
        let topo = spec.topology(None).unwrap();
        let mut host = HostFacts {
            kernel: "6.12.0".into(),
            congestion_available: vec!["reno".into(), "cubic".into(), "bbr".into()],
            ..HostFacts::default()
        };
        host.sysctls
            .insert("net.core.rmem_max".into(), "536870912".into());
        host.offloads.insert("tso".into(), "on".into());
        host.other.insert("cpus".into(), Value::from(2));
        let mut r = ResultFile::new(
            "20261121-081500-loss-recovery",
            Experiment {
                name: spec.name.clone(),
                file: format!("builtin/{}.toml", b.name),
                text: b.toml.into(),
                reduced: false,
                spec: spec.clone(),
            },
            "2026-11-21T08:15:00Z",
            host,
            "0.1.0",
            BTreeMap::from([("emulator".into(), 1)]),
        );
        for (i, p) in spec.points().into_iter().enumerate() {
            let prediction = Some(predict(&p, &p.compile(&topo).unwrap()));
            let slope = [8.0e6, 20.0e6, 100.0e6][i];
            let rep = |n: u32| {
                let rep = report(5, 45, |t| {
                    let t = t as f64;
                    if t < 20.0 {
                        190e6
                    } else if t < 22.0 {
                        20e6
                    } else {
                        (20e6 + slope * (t - 22.0)).min(190e6)
                    }
                });
                Repetition {
                    repetition: n,
                    started: "2026-11-21T08:16:00Z".into(),
                    derived: Derived::from_report(&p, &rep),
                    report: rep,
                    error: None,
                    fidelity: Fidelity {
                        ok: true,
                        p99_lateness_ns: 40_000,
                        drops: BTreeMap::from([("queue".into(), 120)]),
                        untrustworthy: false,
                    },
                }
            };
            let repetitions = (0..spec.repetitions).map(rep).collect();
            r.push_point(PointResult {
                point: p,
                prediction,
                repetitions,
                summary: Derived::default(),
            });
        }
        r.finish("2026-11-21T08:24:00Z");
        r
    }

    /// The LSR candidate of a run: its best repetition, with the receiver's bytes and seconds, the
    /// preset's distance and hops, and the IP version and pairs from the report's connections.
    #[test]
    fn lsr_candidate_reads_the_best_repetition_and_its_addresses() {
        let mut r = example();
        let received = |bytes: u64| serde_json::json!({"bytes": bytes, "seconds": 40.0});
        let connected = |local: &str, remote: &str| serde_json::json!([{"local_host": local, "remote_host": remote}]);
        r.points[0].repetitions[0].report["end"]["sum_received"] = received(1_000_000_000);
        r.points[1].repetitions[0].report["end"]["sum_received"] = received(2_000_000_000);
        r.points[1].repetitions[0].report["start"]["connected"] =
            connected("fd00:4c48::1", "fd00:4c48::2");
        let c = r.lsr_candidate().expect("a candidate");
        assert_eq!(c.bytes, 2_000_000_000);
        assert_eq!(c.ip, Ip::V6);
        assert_eq!(c.address_pairs, 1);
        assert!(c.emulated);
        assert!(c.km > 7000.0, "{}", c.km);
        assert!(c.hops_forward >= 2, "{}", c.hops_forward);
        // Two different address pairs in one run: counted, so the one-pair rule can refuse it.
        let mut pairs = connected("10.201.0.1", "10.201.0.2");
        pairs.as_array_mut().unwrap().push(serde_json::json!(
            {"local_host": "10.201.0.1", "remote_host": "10.201.0.3"}));
        r.points[1].repetitions[0].report["start"]["connected"] = pairs;
        let c = r.lsr_candidate().unwrap();
        assert_eq!((c.ip, c.address_pairs), (Ip::V4, 2));
        // No finished test anywhere: no candidate.
        for p in &mut r.points {
            for rep in &mut p.repetitions {
                rep.report = Value::Null;
            }
        }
        assert!(r.lsr_candidate().is_none());
    }

    #[test]
    fn schema_is_draft_2020_12_json() {
        let s: Value = serde_json::from_str(SCHEMA).unwrap();
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(s["properties"]["format"]["const"], FORMAT);
        assert_eq!(s["properties"]["version"]["const"], VERSION);
    }

    #[test]
    fn generated_example_validates_and_round_trips() {
        let r = example();
        assert!(r.complete);
        assert!(!r.untrustworthy);
        let v = serde_json::to_value(&r).unwrap();
        validate(&v).unwrap();
        let back = ResultFile::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }

    /// Every key of the generated example is declared in the schema and
    /// every declared required key appears in it: they agree both ways.
    #[test]
    fn schema_declares_exactly_the_keys_written() {
        let v = serde_json::to_value(example()).unwrap();
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        for (k, _) in v.as_object().unwrap() {
            assert!(schema["properties"].get(k).is_some(), "{k}");
        }
        let defs = [
            ("/points/0", "point_result"),
            ("/points/0/point", "point"),
            ("/points/0/prediction", "prediction"),
            ("/points/0/repetitions/0", "repetition"),
            ("/points/0/repetitions/0/fidelity", "fidelity"),
            ("/points/0/summary", "derived"),
            ("/experiment", "experiment"),
        ];
        for (ptr, def) in defs {
            let obj = v.pointer(ptr).unwrap().as_object().unwrap();
            let props = schema["$defs"][def]["properties"].as_object().unwrap();
            let req: Vec<&str> = schema["$defs"][def]["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap())
                .collect();
            for k in obj.keys() {
                assert!(props.contains_key(k), "{def}: {k} written but not declared");
                assert!(
                    req.contains(&k.as_str()),
                    "{def}: {k} written but not required"
                );
            }
            // Keys written only when they apply (a line characterisation's) are optional.
            for k in props.keys().filter(|k| req.contains(&k.as_str())) {
                assert!(obj.contains_key(k), "{def}: {k} declared but not written");
            }
        }
    }

    /// A repetition whose test failed before its end keeps what ran (its start and intervals) with
    /// the error, and the file still validates: a failed point must not make the whole result
    /// unreadable.
    #[test]
    fn a_repetition_that_failed_before_its_end_validates() {
        let mut v = serde_json::to_value(example()).unwrap();
        let rep = v.pointer_mut("/points/0/repetitions/0").unwrap();
        rep["report"]["end"] = Value::Null;
        rep["error"] = Value::from("timed out waiting for the server's results");
        validate(&v).unwrap();
    }

    #[track_caller]
    fn refused(mutate: impl FnOnce(&mut Value)) -> SchemaError {
        let mut v = serde_json::to_value(example()).unwrap();
        mutate(&mut v);
        validate(&v).unwrap_err()
    }

    #[test]
    fn validate_refuses_broken_documents_with_a_path() {
        let e = refused(|v| {
            v.as_object_mut().unwrap().remove("complete");
        });
        assert_eq!(e.to_string(), "complete: missing required key");
        let e = refused(|v| v["version"] = Value::from(2));
        assert!(e.to_string().starts_with("version: 2 is newer"), "{e}");
        let e = refused(|v| v["format"] = Value::from("iperf3"));
        assert!(e.to_string().starts_with("format:"), "{e}");
        let e =
            refused(|v| v["points"][1]["repetitions"][0]["fidelity"]["ok"] = Value::from("yes"));
        assert_eq!(e.path, "points[1].repetitions[0].fidelity.ok");
        let e = refused(|v| {
            v["points"][0]["repetitions"][0]["report"] = serde_json::json!({"start": {}})
        });
        assert_eq!(e.path, "points[0].repetitions[0].report.intervals");
        let e = refused(|v| v["surprise"] = Value::from(1));
        assert_eq!(e.to_string(), "surprise: unknown key");
        let e = refused(|v| v["experiment"]["spec"]["repetitions"] = Value::from(0));
        assert!(e.to_string().contains("below the minimum"), "{e}");
        let e = refused(|v| v["seeds"]["emulator"] = Value::from(-1));
        assert_eq!(e.path, "seeds.emulator");
        let e = refused(|v| v["experiment"]["spec"]["record"][0] = Value::from("jitter"));
        assert!(e.to_string().contains("is not one of"), "{e}");
        // A failed repetition: null report with an error is fine.
        let mut v = serde_json::to_value(example()).unwrap();
        v["points"][0]["repetitions"][0]["report"] = Value::Null;
        v["points"][0]["repetitions"][0]["error"] = Value::from("connection refused");
        validate(&v).unwrap();
        assert!(
            ResultFile::from_json("{")
                .unwrap_err()
                .message
                .starts_with("not JSON")
        );
    }

    #[test]
    fn interrupted_and_untrustworthy_runs_are_marked() {
        let mut r = example();
        r.points.pop();
        assert!(!r.finish("2026-11-21T08:20:00Z"));
        assert!(!r.complete);
        let mut r = example();
        let mut p = r.points.pop().unwrap();
        p.repetitions[0].fidelity.untrustworthy = true;
        r.push_point(p);
        assert!(r.untrustworthy);
        validate(&serde_json::to_value(&r).unwrap()).unwrap();
    }

    /// The loss-recovery example: cubic's and bbr's synthetic ramps recover
    /// faster than reno's, and the summaries carry it.
    #[test]
    fn derived_recovery_orders_the_algorithms() {
        let r = example();
        let rec: Vec<f64> = r
            .points
            .iter()
            .map(|p| p.summary.recovery_s.unwrap())
            .collect();
        assert!(rec[1] < rec[0] && rec[2] < rec[1], "{rec:?}");
        let pre = r.points[0].summary.pre_event_bps.unwrap();
        assert!((pre - 190e6).abs() < 1.0);
        assert!(r.points[0].summary.mean_bps.unwrap() < pre);
    }
}

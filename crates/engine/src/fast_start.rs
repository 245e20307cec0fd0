//! The sender's half of a fast start (`--dedicated`, [`longhaul_proto::fast_start`]): a host
//! route of its own to the receiver that carries the initial congestion window, installed before
//! the data connections open and removed when the run ends (also when it fails).
//!
//! The route copies what `ip route get` resolves for the receiver (device, gateway, source
//! address, table) and adds `initcwnd`; being a host route it is more specific than whatever
//! route carried the traffic before, which is left as it was. It is marked with its own routing
//! protocol number ([`ROUTE_PROTO`]), so a route left by a run that was killed is recognised and
//! replaced. Where a host route to the receiver already exists (a point-to-point address makes
//! one, as the emulator's hosts have), that route gets the `initcwnd` and is put back exactly as
//! it was afterwards; one with attributes this cannot restore exactly (multipath, an expiry, a
//! route type, a metric it does not know) is left alone and the run refused.

use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use longhaul_proto::fast_start::{RampTimer, initial_window_segments};
use longhaul_units::Nanos;

use serde::Deserialize;
use tracing::{info, warn};

use longhaul_sys as sys;

use crate::EngineError;
use crate::watcher::Watcher;

/// The routing protocol number of longhaul's routes (`proto 76` in `ip route`; 'L').
pub(crate) const ROUTE_PROTO: &str = "76";

/// The route `ip -j route get` resolves, or one `ip -j route show` lists.
#[derive(Debug, Deserialize)]
struct Route {
    dev: Option<String>,
    gateway: Option<String>,
    prefsrc: Option<String>,
    table: Option<String>,
    protocol: Option<String>,
    scope: Option<String>,
    metric: Option<u64>,
    pref: Option<String>,
    #[serde(default)]
    flags: Vec<String>,
    /// `[{"initcwnd": 10}, {"mtu": 9000}]`.
    #[serde(default)]
    metrics: Vec<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Anything else `ip` printed: a route with such attributes is not restored by hand.
    #[serde(flatten)]
    other: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The metrics a held route may carry and still be put back exactly (numbers, as `ip` takes them).
const RESTORABLE_METRICS: [&str; 7] = [
    "mtu",
    "advmss",
    "window",
    "initcwnd",
    "initrwnd",
    "hoplimit",
    "reordering",
];
/// What `ip -j route show` prints of a route that says nothing `ip route replace` needs.
const IGNORED_KEYS: [&str; 2] = ["dst", "uid"];

impl Route {
    /// The `ip route replace` arguments after the prefix that make this route again, with
    /// `initcwnd` set to `initcwnd` if given (else as it was); `None` if it has attributes these
    /// cannot express.
    fn spec(&self, initcwnd: Option<u32>) -> Option<Vec<String>> {
        if self
            .other
            .keys()
            .any(|k| !IGNORED_KEYS.contains(&k.as_str()))
            || self.flags.iter().any(|f| f != "onlink")
        {
            return None;
        }
        let mut args: Vec<String> = Vec::new();
        let mut pair = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                args.extend([k.to_string(), v.clone()]);
            }
        };
        pair("via", &self.gateway);
        pair("dev", &self.dev);
        pair("proto", &self.protocol);
        pair("scope", &self.scope);
        pair("src", &self.prefsrc);
        pair("pref", &self.pref);
        pair("metric", &self.metric.map(|m| m.to_string()));
        if self.flags.iter().any(|f| f == "onlink") {
            args.push("onlink".into());
        }
        let mut had_initcwnd = false;
        for m in &self.metrics {
            for (k, v) in m {
                if !RESTORABLE_METRICS.contains(&k.as_str()) {
                    return None;
                }
                let v = v.as_u64()?;
                let v = if k == "initcwnd" {
                    had_initcwnd = true;
                    initcwnd.map_or(v, u64::from)
                } else {
                    v
                };
                args.extend([k.clone(), v.to_string()]);
            }
        }
        if let (Some(w), false) = (initcwnd, had_initcwnd) {
            args.extend(["initcwnd".into(), w.to_string()]);
        }
        Some(args)
    }
}

/// The host route that gives new connections to one receiver their initial window; removed on
/// drop, or put back as it was when it was there before.
#[derive(Debug)]
pub(crate) struct InitialWindowRoute {
    family: &'static str,
    prefix: String,
    table: String,
    /// The `ip route replace` arguments of the host route that was there before, if one was.
    restore: Option<Vec<String>>,
}

impl InitialWindowRoute {
    /// The route for `streams` streams sharing `rate_bps` of payload over `rtt` to `server`, their
    /// segments as large as those of the connection `ctrl` to it; with the initial window it set.
    pub(crate) fn for_streams(
        server: IpAddr,
        ctrl: BorrowedFd<'_>,
        rate_bps: u64,
        rtt: Nanos,
        streams: u32,
    ) -> Result<(Self, u32), EngineError> {
        let mss = sys::mss(ctrl).unwrap_or(1448);
        let segments = initial_window_segments(rate_bps, rtt, streams, mss);
        Self::install(server, segments).map(|r| (r, segments))
    }

    /// Routes `dest` with an initial congestion window of `segments`. Needs `CAP_NET_ADMIN`.
    fn install(dest: IpAddr, segments: u32) -> Result<Self, EngineError> {
        if !sys::has_net_admin() {
            return Err(EngineError::Unsupported(
                "--dedicated sets the initial congestion window on the route to the receiver, \
                 which needs root (CAP_NET_ADMIN)"
                    .into(),
            ));
        }
        let (family, len) = match dest {
            IpAddr::V4(_) => ("-4", 32),
            IpAddr::V6(_) => ("-6", 128),
        };
        let dest_text = dest.to_string();
        let resolved: Vec<Route> = parse(&ip(&["-j", family, "route", "get", &dest_text])?)?;
        let Some(via) = resolved.into_iter().next() else {
            return Err(EngineError::Unsupported(format!("no route to {dest}")));
        };
        let Some(dev) = via.dev else {
            return Err(EngineError::Unsupported(format!(
                "the route to {dest} names no device; --dedicated needs one to copy"
            )));
        };
        let table = via.table.unwrap_or_else(|| "main".into());
        let prefix = format!("{dest}/{len}");
        let held: Vec<Route> = parse(&ip(&[
            "-j", family, "route", "show", "exact", &prefix, "table", &table,
        ])?)?;
        let window = segments.to_string();
        if let Some(theirs) = held
            .iter()
            .find(|r| r.protocol.as_deref() != Some(ROUTE_PROTO))
        {
            let (Some(now), Some(before), 1) =
                (theirs.spec(Some(segments)), theirs.spec(None), held.len())
            else {
                return Err(EngineError::Unsupported(format!(
                    "a host route to {dest} is set with attributes --dedicated cannot restore \
                     exactly ({}); it is left alone: run without --dedicated",
                    serde_json::to_string(&theirs.other).unwrap_or_default()
                )));
            };
            let route = Self {
                family,
                prefix,
                table,
                restore: Some(before),
            };
            route.replace(&now)?;
            info!(
                "fast start: {} opens at {segments} segments (the route was there; it is put \
                 back after)",
                route.prefix
            );
            return Ok(route);
        }
        let route = Self {
            family,
            prefix,
            table,
            restore: None,
        };
        if !held.is_empty() {
            warn!(
                "replacing a fast-start route to {dest} left by an earlier run ({})",
                route.prefix
            );
            route.remove()?;
        }
        let mut args = vec![family, "route", "add", &route.prefix];
        if let Some(gw) = &via.gateway {
            args.extend(["via", gw]);
        }
        args.extend(["dev", &dev]);
        if let Some(src) = &via.prefsrc {
            args.extend(["src", src]);
        }
        args.extend([
            "proto",
            ROUTE_PROTO,
            "initcwnd",
            &window,
            "table",
            &route.table,
        ]);
        ip(&args)?;
        info!(
            "fast start: {} via {dev} opens at {segments} segments",
            route.prefix
        );
        Ok(route)
    }

    /// `ip route replace PREFIX SPEC... table TABLE`.
    fn replace(&self, spec: &[String]) -> Result<(), EngineError> {
        let mut args = vec![self.family, "route", "replace", &self.prefix];
        args.extend(spec.iter().map(String::as_str));
        args.extend(["table", &self.table]);
        ip(&args).map(drop)
    }

    fn remove(&self) -> Result<(), EngineError> {
        if let Some(before) = &self.restore {
            return self.replace(before);
        }
        ip(&[
            self.family,
            "route",
            "del",
            &self.prefix,
            "proto",
            ROUTE_PROTO,
            "table",
            &self.table,
        ])
        .map(drop)
    }
}

impl Drop for InitialWindowRoute {
    fn drop(&mut self) {
        match self.remove() {
            Ok(()) => info!("fast start: {} restored", self.prefix),
            Err(e) => warn!("fast start: could not remove {}: {e}", self.prefix),
        }
    }
}

fn ip(args: &[&str]) -> Result<String, EngineError> {
    sys::ip(args).map_err(|e| EngineError::Unsupported(format!("--dedicated: {e}")))
}

fn parse(json: &str) -> Result<Vec<Route>, EngineError> {
    // `ip -j route show` prints nothing at all when no route matches.
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(json)
        .map_err(|e| EngineError::Unsupported(format!("reading `ip -j route`: {e}")))
}

/// How often [`RampWatch`] reads the sending sockets.
const RAMP_READING: std::time::Duration = std::time::Duration::from_millis(5);

/// Times the sending streams' ramp to the rate ([`RampTimer`]) on a thread of its own, reading
/// their `TCP_INFO` every [`RAMP_READING`] until the rate is reached or the run ends.
pub(crate) struct RampWatch(Watcher<Option<f64>>);

impl RampWatch {
    /// Starts timing `socks` towards `rate_bps` of payload over windows of `rtt_ns`.
    pub(crate) fn start(
        socks: Vec<Arc<TcpStream>>,
        rate_bps: u64,
        rtt_ns: u64,
    ) -> Result<Self, EngineError> {
        Watcher::spawn("ramp-watch", "the fast start's ramp timer", move |stop| {
            let mut timer = RampTimer::new(rate_bps, rtt_ns);
            let origin = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let (mut sent, mut acked) = (0, 0);
                for s in &socks {
                    if let Ok(t) = sys::tcp_info(s.as_fd()) {
                        sent += t.bytes_sent.unwrap_or(0);
                        acked += t.bytes_acked.unwrap_or(0);
                    }
                }
                let at = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
                if let Some(ms) = timer.observe(at, sent, acked) {
                    return Some(ms);
                }
                std::thread::sleep(RAMP_READING);
            }
            timer.to_rate_ms()
        })
        .map(Self)
    }

    /// Stops it; the time to the rate, ms, if reached.
    pub(crate) fn finish(self) -> Option<f64> {
        self.0.finish().flatten()
    }
}

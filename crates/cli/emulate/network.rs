//! `longhaul emulate NETWORK -- CMD`: a network of many hosts (a network preset or a network file,
//! docs/topology.md "Networks") brought up as a fabric (`longhaul_emu::Fabric`), CMD run on one of
//! its hosts with every host's address in its environment, a `longhaul server` on every other host,
//! then the fabric's report. Flags and output only; the work is in `longhaul-topology` and
//! `longhaul-emu`.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, ExitCode};

use anyhow::{Context, bail};
use longhaul_emu::fabric::{FabricReport, describe_route};
use longhaul_emu::signals::stop_child;
use longhaul_emu::{Fabric, FabricConfig, Termination};
use longhaul_topology::Network;
use longhaul_units::{Nanos, fmt_rate, fmt_size};

use super::flags::{PathArgs, Refusal, exit_code, refuse};
use super::path::SpecError;
use super::server::start_server;

/// The network named by `spec` (a network preset, or a TOML file with `[[host]]` tables), or
/// `None` when `spec` is a two-host path (a path preset or path file).
pub(crate) fn load(spec: &str) -> Result<Option<Network>, SpecError> {
    if let Some(p) = longhaul_topology::network(spec) {
        return p
            .network()
            .map(Some)
            .map_err(|e| SpecError(format!("network preset {spec}: {e}")));
    }
    if longhaul_topology::preset(spec).is_some() {
        return Ok(None);
    }
    let Ok(text) = std::fs::read_to_string(spec) else {
        // Missing or unreadable: the path loader says why, naming both kinds of preset.
        return Ok(None);
    };
    if !longhaul_topology::is_network(&text) {
        return Ok(None);
    }
    Network::from_toml(&text, spec)
        .map(Some)
        .map_err(|e| SpecError(e.to_string()))
}

/// The environment variable holding host `name`'s IPv4 address: `LH_HOST_<NAME>` with the name
/// upper-cased and '-' as '_' (`LH_HOST6_<NAME>` for IPv6).
pub(crate) fn host_var(prefix: &str, name: &str) -> String {
    format!("{prefix}{}", name.to_ascii_uppercase().replace('-', "_"))
}

/// A host as a command's environment names it.
pub(crate) struct EnvHost {
    pub(crate) name: String,
    pub(crate) v4: Ipv4Addr,
    pub(crate) v6: Ipv6Addr,
    /// Its network namespace (`ip netns exec NS CMD` runs CMD there).
    pub(crate) namespace: String,
}

/// Every host as environment variables, for a command run on host `me` of `hosts` (in network
/// order): `LH_HOST_<NAME>` / `LH_HOST6_<NAME>` (addresses) and `LH_NETNS_<NAME>` (namespace) for
/// each host, `LH_HOSTS` (the names, in order), `LH_HOST` (its own name), and `LH_PEER` /
/// `LH_PEER6` (the first other host), as the two-host emulator sets them.
pub(crate) fn host_env(hosts: &[EnvHost], me: usize) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(3 * hosts.len() + 4);
    for h in hosts {
        env.push((host_var("LH_HOST_", &h.name), h.v4.to_string()));
        env.push((host_var("LH_HOST6_", &h.name), h.v6.to_string()));
        env.push((host_var("LH_NETNS_", &h.name), h.namespace.clone()));
    }
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    env.push(("LH_HOSTS".into(), names.join(" ")));
    env.push(("LH_HOST".into(), hosts[me].name.clone()));
    if let Some((_, peer)) = hosts.iter().enumerate().find(|(i, _)| *i != me) {
        env.push(("LH_PEER".into(), peer.v4.to_string()));
        env.push(("LH_PEER6".into(), peer.v6.to_string()));
    }
    env
}

/// Checks the flags that apply to a network and picks the host CMD runs on.
pub(crate) fn check(net: &Network, path: &PathArgs, on: Option<&str>) -> Result<usize, Refusal> {
    let flags = path.path_only_flags();
    if !flags.is_empty() {
        return Err(Refusal::Usage(format!(
            "{} {} a two-host path; a network's links carry their own (edit the network file, \
or change a running network's links with `longhaul emulate link NAME set`)",
            flags.join(", "),
            if flags.len() == 1 { "shapes" } else { "shape" }
        )));
    }
    match on {
        None => Ok(0),
        Some(name) => net.host_named(name).ok_or_else(|| {
            let names: Vec<&str> = net.hosts.iter().map(|h| h.name.as_str()).collect();
            Refusal::Usage(format!(
                "--on {name}: network {} has no such host (hosts: {})",
                net.name,
                names.join(", ")
            ))
        }),
    }
}

/// What a one-shot run of a network needs from the command line.
pub(crate) struct Once<'a> {
    pub(crate) path: &'a PathArgs,
    pub(crate) on: Option<&'a str>,
    pub(crate) switches: Option<usize>,
    /// Check the network against this machine's calibration first.
    pub(crate) calibration: bool,
    pub(crate) no_server: bool,
    pub(crate) json: bool,
    pub(crate) cmd: &'a [String],
}

/// The one-shot run: up, a server on every other host, CMD on `--on`, report, down.
pub(crate) fn run_once(net: Network, a: Once<'_>) -> anyhow::Result<ExitCode> {
    let me = match check(&net, a.path, a.on) {
        Ok(h) => h,
        Err(r) => return refuse(r),
    };
    if a.calibration {
        super::calibrate::check(&net);
    }
    let term = Termination::install().context("cannot install signal handlers")?;
    let fabric = Fabric::up(FabricConfig {
        tag: None,
        network: net,
        switches: a.switches,
        cpus: a.path.pin.clone(),
        realtime: a.path.realtime().then_some(50),
        host_tcp_defaults: a.path.host_defaults,
        pcap: a.path.pcap.clone().map(|d| (d, a.path.pcap_snaplen)),
    })
    .context("cannot bring up the emulated network")?;
    let net = fabric.network();
    let namespaces = fabric.namespaces();
    let hosts: Vec<EnvHost> = net
        .hosts
        .iter()
        .zip(&namespaces)
        .map(|(h, ns)| EnvHost {
            name: h.name.clone(),
            v4: h.v4,
            v6: h.v6,
            namespace: ns.clone(),
        })
        .collect();
    let env = host_env(&hosts, me);
    eprintln!(
        "emulate: network {} up: {} hosts, {} routers, {} links; CMD on {} ({}); TCP buffers up to {}",
        net.name,
        net.hosts.len(),
        net.routers.len(),
        net.links.len(),
        net.hosts[me].name,
        namespaces[me],
        fmt_size(fabric.tcp_buffer_max())
    );
    let mut servers: Vec<Child> = Vec::new();
    let mut status = None;
    if !a.no_server {
        for (i, ns) in namespaces.iter().enumerate() {
            if i != me && term.received().is_none() {
                servers.push(start_server(ns, &net.hosts[i].name)?);
            }
        }
    }
    if term.received().is_none() {
        let child = Command::new("ip")
            .args(["netns", "exec", &namespaces[me]])
            .args(a.cmd)
            .envs(env)
            .spawn()
            .with_context(|| format!("cannot run {:?} in {}", a.cmd.join(" "), namespaces[me]));
        status = Some(child.and_then(|mut c| {
            term.wait_child(&mut c)
                .with_context(|| format!("waiting for {:?}", a.cmd.join(" ")))
        }));
    }
    const SIGTERM: i32 = 15;
    for mut s in servers {
        let _ = stop_child(&mut s, SIGTERM);
    }
    let r = fabric.down();
    print(&r, a.path.max_lateness, a.json);
    if let Some(sig) = term.received() {
        eprintln!("emulate: stopped by signal {sig}; network torn down");
        return Ok(ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)));
    }
    let Some(status) = status else {
        bail!("CMD did not run");
    };
    let (status, _) = status?;
    Ok(exit_code(status))
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The report's text: a line per link direction that carried traffic, a line per switch, the
/// changes made, and the verdict.
pub(crate) fn text(r: &FabricReport, max_p99: Nanos) -> String {
    let mut out = String::new();
    for l in &r.links {
        for (dir, d, from, to) in [
            ("a→b", &l.a_to_b, &l.a, &l.b),
            ("b→a", &l.b_to_a, &l.b, &l.a),
        ] {
            let s = &d.link;
            if s.records == 0 && d.cut_drops == 0 {
                continue;
            }
            let rate = d
                .config
                .as_ref()
                .and_then(|c| c.bottleneck)
                .map_or_else(|| "unlimited".to_string(), |b| fmt_rate(b.rate_bps));
            out.push_str(&format!(
                "link {} {dir} ({from} → {to}, {rate}{}): {} segments, delivered {} ({}), drops queue {} \
random {} burst {} aqm {}, {} cut drops; queue max {}; arrivals late p99 {}{}\n",
                l.name,
                if l.up { "" } else { ", DOWN" },
                s.segments,
                s.delivered,
                fmt_size(s.delivered_bytes),
                s.drop_queue,
                s.drop_random,
                s.drop_burst,
                s.drop_aqm,
                d.cut_drops,
                fmt_size(s.queue_max_bytes),
                ms(d.lateness.p99_ns),
                super::report::captured(d.capture.as_ref()),
            ));
        }
    }
    for s in &r.switches {
        out.push_str(&format!(
            "{} (hosts {}): {} records read, {} written ({}), {} splits, {} unparseable, {} no route, \
{} hop time-exceeded, {} hop drops; lateness p50 {} p99 {} max {} ({} writes){}\n",
            s.name,
            s.hosts.join(", "),
            s.records_read,
            s.records_written,
            fmt_size(s.bytes_written),
            s.splits,
            s.unparseable,
            s.no_route,
            s.hop_time_exceeded,
            s.hop_drops,
            ms(s.lateness.p50_ns),
            ms(s.lateness.p99_ns),
            ms(s.lateness.max_ns),
            s.lateness.samples,
            s.hosts
                .iter()
                .zip(&s.arrivals)
                .map(|(h, a)| format!("; arrivals from {h}: {}", super::report::arrivals(a)))
                .collect::<String>(),
        ));
    }
    for c in &r.changes {
        out.push_str(&format!("change at {}: {}\n", c.at, c.what));
    }
    let problems = r.fidelity_problems(max_p99.as_nanos());
    if problems.is_empty() {
        out.push_str("fidelity: OK\n");
    } else {
        out.push_str(&format!(
            "fidelity: NOT TRUSTWORTHY ({})\n",
            problems.join("; ")
        ));
    }
    out
}

/// The `fidelity` object: `ok`, the threshold and the problems found.
pub(crate) fn fidelity(r: &FabricReport, max_p99: Nanos) -> serde_json::Value {
    let problems = r.fidelity_problems(max_p99.as_nanos());
    serde_json::json!({
        "ok": problems.is_empty(),
        "max_p99_lateness_ns": max_p99.as_nanos(),
        "problems": problems,
    })
}

/// Prints the report on standard error, as text or as `{"network": .., "fidelity": ..}`.
pub(crate) fn print(r: &FabricReport, max_p99: Nanos, json: bool) {
    if json {
        let doc = serde_json::json!({ "network": r, "fidelity": fidelity(r, max_p99) });
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("report serialises")
        );
    } else {
        eprint!("{}", text(r, max_p99));
    }
}

/// Every host pair's route, one per line (`cern1 -> gva -> chi -> star1`).
pub(crate) fn routes(net: &Network) -> String {
    let mut out = String::new();
    for from in 0..net.hosts.len() {
        for to in 0..net.hosts.len() {
            if from != to {
                out.push_str(&describe_route(net, from, to));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_variables_are_upper_case_with_underscores() {
        assert_eq!(host_var("LH_HOST_", "star-light2"), "LH_HOST_STAR_LIGHT2");
        assert_eq!(host_var("LH_HOST6_", "cern1"), "LH_HOST6_CERN1");
    }
}

//! The `PRESET|FILE` argument of `longhaul emulate`: resolving it to a topology, compiling it with the
//! command line's overrides, listing the presets and describing a path. The work is in
//! `longhaul-topology`.

use longhaul_emu::Hop;
use longhaul_topology::{CompiledPath, Overrides, Topology, describe, preset, presets};
use longhaul_units::{fmt_km, fmt_rate};

/// Why a `PRESET|FILE` argument was refused: printed as is, exit code 2.
#[derive(Debug)]
pub(crate) struct SpecError(pub(crate) String);

/// Reads `spec`: a preset name, else a TOML file path.
pub(crate) fn load(spec: &str) -> Result<Topology, SpecError> {
    if let Some(p) = preset(spec) {
        return p.topology().map_err(|e| SpecError(e.to_string()));
    }
    match std::fs::read_to_string(spec) {
        Ok(text) => Topology::from_toml(&text, spec).map_err(|e| SpecError(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let names: Vec<&str> = presets().iter().map(|p| p.name).collect();
            Err(SpecError(format!(
                "{spec:?} is neither a preset ({}) nor an existing topology file",
                names.join(", ")
            )))
        }
        Err(e) => Err(SpecError(format!("{spec}: cannot read: {e}"))),
    }
}

/// Loads and compiles `spec` with `overrides`; errors name the file, line and field (or the flag).
pub(crate) fn compile(spec: &str, overrides: &Overrides) -> Result<CompiledPath, SpecError> {
    load(spec)?.compile(overrides).map_err(|e| {
        SpecError(
            if e.file.is_empty() && e.field.as_deref().is_some_and(|f| f.starts_with("--")) {
                e.to_string()
            } else {
                format!("{spec}: {e}")
            },
        )
    })
}

/// The emulator's router hops for a compiled path, one per topology hop.
pub(crate) fn emu_hops(path: &CompiledPath) -> Vec<Hop> {
    path.hops
        .iter()
        .map(|h| Hop {
            name: h.name.clone(),
            one_way: h.one_way,
            cumulative_one_way: h.cumulative_one_way,
            addr_v4: h.addr_v4,
            addr_v6: h.addr_v6,
        })
        .collect()
}

/// `--describe`: the traceroute-style listing.
pub(crate) fn show(spec: &str, overrides: &Overrides) -> Result<String, SpecError> {
    Ok(describe(&compile(spec, overrides)?))
}

/// `longhaul emulate presets`: a table, or a JSON array with `json`.
pub(crate) fn list(json: bool) -> Result<String, SpecError> {
    let mut rows = Vec::new();
    for p in presets() {
        let c = p
            .topology()
            .and_then(|t| t.compile(&Overrides::default()))
            .map_err(|e| SpecError(format!("preset {}: {e}", p.name)))?;
        let rate = c.forward.bottleneck.map_or(0, |b| b.rate_bps);
        rows.push((p, c, rate));
    }
    let mut nets = Vec::new();
    for p in longhaul_topology::networks() {
        let n = p
            .network()
            .map_err(|e| SpecError(format!("network preset {}: {e}", p.name)))?;
        nets.push((p, n));
    }
    if json {
        let doc: Vec<_> = rows
            .iter()
            .map(|(p, c, rate)| {
                serde_json::json!({
                    "name": p.name,
                    "kind": "path",
                    "summary": p.summary,
                    "source": p.source,
                    "distance_km": c.distance_km,
                    "lsr_distance_km": c.lsr_distance_km(),
                    "rtt_ms": c.rtt.as_secs_f64() * 1e3,
                    "rate_bps": rate,
                    "router_hops": c.router_hops(),
                    "mtu": c.mtu,
                })
            })
            .chain(nets.iter().map(|(p, n)| {
                serde_json::json!({
                    "name": p.name,
                    "kind": "network",
                    "summary": p.summary,
                    "source": p.source,
                    "hosts": n.hosts.len(),
                    "routers": n.routers.len(),
                    "links": n.links.len(),
                    "longest_rtt_ms": longest_rtt(n).as_secs_f64() * 1e3,
                    "rated_links_bps": super::calibrate::load(n),
                    "mtu": n.mtu,
                })
            }))
            .collect();
        return Ok(serde_json::to_string_pretty(&doc).expect("presets serialise") + "\n");
    }
    let mut out = format!(
        "{:<20} {:>10} {:>11} {:>12} {:>4}  source\n",
        "preset", "distance", "RTT", "rate", "hops"
    );
    for (p, c, rate) in &rows {
        out.push_str(&format!(
            "{:<20} {:>10} {:>11} {:>12} {:>4}  {}\n",
            p.name,
            fmt_km(c.distance_km),
            format!("{:.1} ms", c.rtt.as_secs_f64() * 1e3),
            fmt_rate(*rate),
            c.router_hops(),
            p.source
        ));
    }
    out.push_str(&format!(
        "\n{:<22} {:>5} {:>7} {:>5} {:>12} {:>12}  source\n",
        "network", "hosts", "routers", "links", "longest RTT", "rated links"
    ));
    for (p, n) in &nets {
        out.push_str(&format!(
            "{:<22} {:>5} {:>7} {:>5} {:>12} {:>12}  {}\n",
            p.name,
            n.hosts.len(),
            n.routers.len(),
            n.links.len(),
            format!("{:.1} ms", longest_rtt(n).as_secs_f64() * 1e3),
            fmt_rate(super::calibrate::load(n)),
            p.source
        ));
    }
    out.push_str(
        "\nPaths: rates are defaults this machine sustains; override with --rate, --rtt, --loss, --mtu, \
--queue. Networks: rates scaled (the sum of rated links, each at its faster direction, is what the \
calibration compares).\nShow one hop by hop: longhaul emulate PRESET|FILE --describe\n",
    );
    Ok(out)
}

/// The longest RTT between two hosts of `n`.
fn longest_rtt(n: &longhaul_topology::Network) -> longhaul_units::Nanos {
    let hosts = 0..n.hosts.len();
    hosts
        .clone()
        .flat_map(|a| hosts.clone().map(move |b| (a, b)))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| n.rtt(a, b))
        .max()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_compile_and_map_to_emulator_hops() {
        let text = list(false).unwrap();
        for p in presets() {
            assert!(text.contains(p.name), "{text}");
        }
        let c = compile("ipv6-lsr-2004", &Overrides::default()).unwrap();
        let hops = emu_hops(&c);
        assert_eq!(hops.len(), c.hops.len());
        assert_eq!(hops[0].addr_v4.to_string(), "10.201.1.1");
        assert!(
            longhaul_emu::check_hops(&hops, c.forward.delay, c.reverse.delay).is_ok(),
            "{hops:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&list(true).unwrap()).unwrap();
        assert_eq!(
            v.as_array().unwrap().len(),
            presets().len() + longhaul_topology::networks().len()
        );
        for n in longhaul_topology::networks() {
            assert!(text.contains(n.name), "{text}");
        }
    }

    #[test]
    fn refuses_unknown_names_and_bad_overrides() {
        let e = load("no-such-path").unwrap_err().0;
        assert!(e.contains("cern-starlight"), "{e}");
        let bad = Overrides {
            mtu: Some(4000),
            ..Overrides::default()
        };
        let e = compile("cern-starlight", &bad).unwrap_err().0;
        assert!(e.contains("--mtu"), "{e}");
    }
}

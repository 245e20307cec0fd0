//! A listing of a compiled network: hosts, routers, links (each direction)
//! and the route, one-way delay and RTT of every pair of hosts.

use longhaul_link::{Jitter, LinkConfig, Loss};
use longhaul_units::{Nanos, fmt_km, fmt_rate, fmt_size_si};

use super::model::{Network, Node};

/// Above this many hosts the route table pairs only the first host of each
/// site (and hosts without one), at most this many, to stay readable.
pub const DESCRIBE_ALL_PAIRS_UP_TO: usize = 16;

fn ms3(d: Nanos) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn site_name(n: &Network, site: Option<usize>) -> String {
    site.map_or("-".into(), |s| {
        let s = &n.sites[s];
        match &s.city {
            Some(c) => format!("{} ({c})", s.name),
            None => s.name.clone(),
        }
    })
}

fn dir(c: &LinkConfig) -> String {
    let mut out = format!(
        "{} {}",
        ms3(c.propagation()),
        c.bottleneck.map_or("unlimited".into(), |b| format!(
            "{} queue {}{}",
            fmt_rate(b.rate_bps),
            fmt_size_si(b.queue_bytes),
            if b.aqm == Default::default() {
                ""
            } else {
                " codel"
            }
        ))
    );
    match c.loss {
        Loss::None => {}
        Loss::Bernoulli { p } => out.push_str(&format!(" loss {p}")),
        Loss::GilbertElliott { p, r, .. } => out.push_str(&format!(" loss GE p={p} r={r}")),
    }
    if let Jitter::Uniform { max } = c.jitter {
        out.push_str(&format!(" jitter 0..{}", ms3(max)));
    }
    out
}

/// A listing of a compiled network: a summary line; hosts (name, site,
/// addresses); routers; links (ends, km, and per direction delay, rate,
/// queue, loss); then for every pair of hosts the routers the route passes,
/// each direction's one-way delay and the RTT (a reverse route that differs
/// is shown on its own line). Above [`DESCRIBE_ALL_PAIRS_UP_TO`] hosts only
/// the first host of each site is paired, and at most that many hosts.
pub fn describe_network(n: &Network) -> String {
    let mut out = format!(
        "{}: {} hosts, {} routers, {} links, MTU {}\n",
        n.name,
        n.hosts.len(),
        n.routers.len(),
        n.links.len(),
        n.mtu
    );
    if let Some(d) = &n.description {
        out.push_str(&format!("  {d}\n"));
    }
    out.push_str("hosts:\n");
    for h in &n.hosts {
        out.push_str(&format!(
            "  {:<15} {:<24} {:<14} {}\n",
            h.name,
            site_name(n, h.site),
            h.v4,
            h.v6
        ));
    }
    if !n.routers.is_empty() {
        out.push_str("routers:\n");
        for r in &n.routers {
            out.push_str(&format!(
                "  {:<15} {:<24} {:<14} {}\n",
                r.name,
                site_name(n, r.site),
                r.v4,
                r.v6
            ));
        }
    }
    out.push_str("links:\n");
    for l in &n.links {
        let (a, b) = (n.node_name(l.a), n.node_name(l.b));
        out.push_str(&format!("  {:<20} {a} -- {b}, {}\n", l.name, fmt_km(l.km)));
        out.push_str(&format!("    {a} -> {b}: {}\n", dir(&l.a_to_b)));
        out.push_str(&format!("    {b} -> {a}: {}\n", dir(&l.b_to_a)));
    }
    let shown: Vec<usize> = if n.hosts.len() <= DESCRIBE_ALL_PAIRS_UP_TO {
        (0..n.hosts.len()).collect()
    } else {
        (0..n.hosts.len())
            .filter(|&i| {
                let s = n.hosts[i].site;
                s.is_none() || n.hosts.iter().position(|h| h.site == s) == Some(i)
            })
            .take(DESCRIBE_ALL_PAIRS_UP_TO)
            .collect()
    };
    if shown.len() < n.hosts.len() {
        out.push_str(&format!(
            "routes (between {} hosts, the first of each site; {} hosts in all):\n",
            shown.len(),
            n.hosts.len()
        ));
    } else {
        out.push_str("routes:\n");
    }
    let via = |from: usize, to: usize| -> String {
        let r: Vec<&str> = n
            .route(from, to)
            .iter()
            .map(|s| n.head(*s))
            .filter(|h| matches!(h, Node::Router(_)))
            .map(|h| n.node_name(h))
            .collect();
        if r.is_empty() {
            "direct".into()
        } else {
            r.join(" ")
        }
    };
    for (k, &i) in shown.iter().enumerate() {
        for &j in &shown[k + 1..] {
            let (hi, hj) = (&n.hosts[i].name, &n.hosts[j].name);
            out.push_str(&format!(
                "  {hi} -> {hj}: {}, one-way {}, RTT {}\n",
                via(i, j),
                ms3(n.one_way(i, j)),
                ms3(n.rtt(i, j))
            ));
            let back: Vec<_> = n.route(i, j).iter().rev().map(|s| s.reversed()).collect();
            if back != n.route(j, i) {
                out.push_str(&format!(
                    "  {hj} -> {hi}: {}, one-way {} (a different route back)\n",
                    via(j, i),
                    ms3(n.one_way(j, i))
                ));
            }
        }
    }
    out
}

//! `longhaul testbed hosts`: the hosts `longhaul agent` registered, their facts and reachability;
//! accepting a pending host or forgetting a registration (admins); the hosts' events.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use longhaul_testbed::agents::{AgentHostList, AgentHostView, HostEventLog};

use super::client::{ClientArgs, agent, call, url};

#[derive(Args, Debug)]
pub(super) struct HostsArgs {
    #[command(subcommand)]
    command: HostsCommand,
}

#[derive(Subcommand, Debug)]
enum HostsCommand {
    /// List the registered hosts.
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Accept a pending host (admins): compare the key fingerprint with the one its agent printed.
    /// A host the inventory does not name joins it.
    Accept {
        /// The host's resource id.
        host: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Forget a host's registration, its key (admins): after a reinstall, its next report
    /// registers it anew, pending. It stays in the inventory.
    Forget {
        /// The host's resource id.
        host: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the hosts' events, newest first: registered, accepted, facts changed, unreachable,
    /// hung, reachable, with the bookings covering the host then.
    Events {
        /// Only this host's.
        #[arg(long)]
        host: Option<String>,
        /// How many.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        client: ClientArgs,
    },
}

fn print_host(h: &AgentHostView) {
    let status = match (h.state.as_str(), h.reachable, h.hung) {
        ("pending", _, _) => "pending",
        (_, true, _) => "reachable",
        (_, false, true) => "HUNG",
        (_, false, false) => "UNREACHABLE",
    };
    let f = &h.facts;
    println!(
        "{:<24} {:<11} last seen {}  key {}",
        h.host, status, h.last_seen, h.fingerprint
    );
    println!(
        "    {} · kernel {} · {} CPUs · {} GiB · cc {} · longhaul {}",
        f.hostname.as_deref().unwrap_or("?"),
        f.kernel.as_deref().unwrap_or("?"),
        f.cpus.map_or_else(|| "?".into(), |n| n.to_string()),
        f.memory_bytes
            .map_or_else(|| "?".into(), |b| format!("{:.1}", b as f64 / 1073741824.0)),
        f.congestion_controls.join(" "),
        f.longhaul_version
    );
    for n in &f.nics {
        println!(
            "    {:<12} {:<5} mtu {:<5} {:>6} Mbit/s  {}",
            n.name,
            n.operstate,
            n.mtu.map_or_else(|| "?".into(), |m| m.to_string()),
            n.speed_mbps.map_or_else(|| "?".into(), |m| m.to_string()),
            n.driver.as_deref().unwrap_or("")
        );
    }
}

pub(super) fn run(h: &HostsArgs) -> anyhow::Result<ExitCode> {
    let client = match &h.command {
        HostsCommand::List { client }
        | HostsCommand::Accept { client, .. }
        | HostsCommand::Forget { client, .. }
        | HostsCommand::Events { client, .. } => client,
    };
    let auth = format!("Bearer {}", client.token);
    let json = client.json.json;
    match &h.command {
        HostsCommand::List { .. } => {
            let text = call::<()>(
                agent()
                    .get(&url(client, "/api/v1/hosts"))
                    .set("Authorization", &auth),
                None,
            )?;
            if json {
                println!("{text}");
                return Ok(ExitCode::SUCCESS);
            }
            let list: AgentHostList =
                serde_json::from_str(&text).context("the service's answer")?;
            if list.host.is_empty() {
                println!("no host has registered (run `longhaul agent` on one)");
            }
            for host in &list.host {
                print_host(host);
            }
        }
        HostsCommand::Accept { host, .. } | HostsCommand::Forget { host, .. } => {
            let path = match h.command {
                HostsCommand::Forget { .. } => "/api/v1/hosts/forget",
                _ => "/api/v1/hosts/accept",
            };
            let text = call::<()>(
                agent()
                    .post(&url(client, path))
                    .query("host", host)
                    .set("Authorization", &auth),
                None,
            )
            .with_context(|| format!("{} {host}", &path["/api/v1/hosts/".len()..]))?;
            if json {
                println!("{text}");
            } else if let Ok(view) = serde_json::from_str::<AgentHostView>(&text) {
                println!("accepted:");
                print_host(&view);
            } else {
                println!("{host}: registration forgotten");
            }
        }
        HostsCommand::Events { host, limit, .. } => {
            let mut req = agent()
                .get(&url(client, "/api/v1/hosts/events"))
                .query("limit", &limit.to_string())
                .set("Authorization", &auth);
            if let Some(host) = host {
                req = req.query("host", host);
            }
            let text = call::<()>(req, None)?;
            if json {
                println!("{text}");
                return Ok(ExitCode::SUCCESS);
            }
            let log: HostEventLog = serde_json::from_str(&text).context("the service's answer")?;
            for e in &log.event {
                println!(
                    "{:>6}  {}  {:<24} {:<13} {}",
                    e.seq, e.at, e.host, e.kind, e.detail
                );
                if !e.bookings.is_empty() {
                    println!("        during {}", e.bookings.join(", "));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

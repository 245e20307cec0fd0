//! `longhaul testbed power HOST ACTION`, `longhaul testbed console HOST` and `longhaul testbed
//! operations`: a host's power and console through the service (which holds the BMC credentials,
//! reads the consoles and checks the reservation), and the log of such attempts.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use longhaul_testbed::operations::{ConsoleLog, OperationLog, PowerReply, PowerRequest};

use super::client::{ClientArgs, agent, call, url};

/// What to do with a host's power.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum PowerArg {
    /// Read the state from the BMC.
    Status,
    /// Power on.
    On,
    /// Power off at once (not a graceful shutdown).
    Off,
    /// Off, then on (on only, when off).
    Cycle,
    /// Hard reset of a host that is on.
    Reset,
}

impl PowerArg {
    fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::On => "on",
            Self::Off => "off",
            Self::Cycle => "cycle",
            Self::Reset => "reset",
        }
    }
}

#[derive(Args, Debug)]
pub(super) struct PowerArgs {
    /// The host's resource id (`longhaul testbed` resources of kind host).
    host: String,
    /// What to do.
    #[arg(value_enum)]
    action: PowerArg,
    /// Why: required of an admin who holds no booking of the host; kept in the operations log.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
pub(super) struct OperationsArgs {
    /// Only the attempts on this host.
    #[arg(long)]
    host: Option<String>,
    /// How many, newest first.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    #[command(flatten)]
    client: ClientArgs,
}

/// An agent that waits as long as a power action may take (a cycle is two waits for the BMC).
fn patient_agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()
}

pub(super) fn power(p: &PowerArgs) -> anyhow::Result<ExitCode> {
    let auth = format!("Bearer {}", p.client.token);
    let text = match p.action {
        PowerArg::Status => call::<()>(
            patient_agent()
                .get(&url(&p.client, "/api/v1/power"))
                .query("host", &p.host)
                .set("Authorization", &auth),
            None,
        ),
        a => call(
            patient_agent()
                .post(&url(&p.client, "/api/v1/power"))
                .set("Authorization", &auth),
            Some(&PowerRequest {
                host: p.host.clone(),
                action: a.as_str().to_owned(),
                reason: p.reason.clone(),
            }),
        ),
    }
    .with_context(|| format!("power {} of {}", p.action.as_str(), p.host))?;
    if p.client.json.json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let r: PowerReply = serde_json::from_str(&text).context("the service's answer")?;
    println!(
        "{}: power {} ({} {}, {:.1} s; operation {})",
        r.host,
        r.state,
        r.endpoint,
        r.action,
        r.millis as f64 / 1000.0,
        r.seq
    );
    for a in &r.answers {
        println!("  {a}");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn operations(o: &OperationsArgs) -> anyhow::Result<ExitCode> {
    let mut req = agent()
        .get(&url(&o.client, "/api/v1/operations"))
        .query("limit", &o.limit.to_string())
        .set("Authorization", &format!("Bearer {}", o.client.token));
    if let Some(h) = &o.host {
        req = req.query("host", h);
    }
    let text = call::<()>(req, None)?;
    if o.client.json.json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let log: OperationLog = serde_json::from_str(&text).context("the service's answer")?;
    for op in &log.operations {
        println!(
            "{:>6}  {}  {:<8} {:<12} {:<24} {:<8} {}",
            op.seq,
            op.at,
            op.result,
            op.action,
            op.host,
            op.actor,
            op.state.as_deref().unwrap_or("")
        );
        println!("        {}", op.grounds);
        if let Some(d) = &op.detail {
            println!("        {d}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub(super) struct ConsoleArgs {
    /// The host's resource id.
    host: String,
    /// Which boot: a number from the list, or -1 for the latest (the default), -2 for the one
    /// before, ...
    #[arg(long, allow_hyphen_values = true)]
    boot: Option<i64>,
    /// Only lines read at or after this time (RFC 3339), across boots.
    #[arg(long)]
    since: Option<String>,
    /// Keep printing new lines as they arrive (through reboots) until interrupted.
    #[arg(short, long)]
    follow: bool,
    /// List the boots (with their oopses and panics) instead of lines.
    #[arg(long)]
    boots: bool,
    /// How many lines at most (the newest).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    lines: u32,
    /// Why: required of an admin who holds no booking of the host; kept in the operations log.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

fn print_line(l: &longhaul_testbed::operations::ConsoleLineView) {
    match &l.mark {
        Some(m) => println!("{} #{} [{m}] {}", l.at, l.boot, l.text),
        None => println!("{} #{} {}", l.at, l.boot, l.text),
    }
}

pub(super) fn console(c: &ConsoleArgs) -> anyhow::Result<ExitCode> {
    let get = |after: Option<u64>| -> anyhow::Result<(String, ConsoleLog)> {
        let mut req = agent()
            .get(&url(&c.client, "/api/v1/console"))
            .query("host", &c.host)
            .query("limit", &c.lines.to_string())
            .set("Authorization", &format!("Bearer {}", c.client.token));
        if let Some(b) = c.boot {
            req = req.query("boot", &b.to_string());
        }
        if let Some(s) = &c.since {
            req = req.query("since", s);
        }
        if let Some(a) = after {
            req = req.query("after", &a.to_string());
        }
        if let Some(r) = &c.reason {
            req = req.query("reason", r);
        }
        let text = call::<()>(req, None).with_context(|| format!("console of {}", c.host))?;
        let log = serde_json::from_str(&text).context("the service's answer")?;
        Ok((text, log))
    };
    let (text, log) = get(None)?;
    if c.client.json.json && !c.follow {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if c.boots {
        for b in &log.boots {
            println!(
                "boot {:>4}  {} .. {}  {:>7} lines  {} oopses  {} panics",
                b.boot, b.started, b.last, b.lines, b.oopses, b.panics
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut last = log.lines.last().map_or(log.last_seq, |l| l.seq);
    for l in &log.lines {
        print_line(l);
    }
    if !c.follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let (_, next) = get(Some(last))?;
        for l in &next.lines {
            if c.client.json.json {
                println!("{}", serde_json::to_string(l)?);
            } else {
                print_line(l);
            }
        }
        last = next.lines.last().map_or(last, |l| l.seq);
    }
}

//! `longhaul testbed`: the reservation service (`serve`, `token add|list|revoke|feed`) and its
//! command-line client (`reserve`, `list`, `confirm`, `cancel`, `release`, `extend`, `approve`,
//! `decline`, `preempt`, `audit`, `me`), a small blocking HTTP client over the public API; and the reservation check that
//! `emulate up` and `lab run` make when a testbed service is configured ([`check_reservation`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use longhaul_testbed::api::{
    AuditLog, BookingList, BookingView, CreateBooking, DeclineBooking, ExtendBooking, Me,
    PreemptBooking,
};
use longhaul_testbed::booking::Role;

mod client;
mod hosts;
mod operations;

use client::{ClientArgs, agent, call, url};

/// Flags of `longhaul testbed`.
#[derive(Args, Debug)]
pub(crate) struct TestbedArgs {
    #[command(subcommand)]
    command: TestbedCommand,
}

#[derive(Subcommand, Debug)]
enum TestbedCommand {
    /// Run the reservation service (HTTP API on --listen; SQLite with no setup, or PostgreSQL).
    Serve(ServeArgs),
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Book (or hold) a resource: `longhaul testbed reserve geneva/cern-starlight --from
    /// 2026-05-05T08:00:00+02:00 --to 2026-05-05T12:00:00+02:00`.
    Reserve(ReserveArgs),
    /// List bookings (of a resource, its ancestors and descendants with --resource).
    List(ListArgs),
    /// Confirm a hold.
    Confirm(IdArgs),
    /// Cancel a hold or a booking that has not started.
    Cancel(IdArgs),
    /// Give back the rest of an active booking.
    Release(IdArgs),
    /// Move a booking's end later, up to the next booking of a conflicting resource.
    Extend(ExtendArgs),
    /// Approve a booking waiting for approval (an event beyond the horizon; approvers and admins).
    Approve(IdArgs),
    /// Decline a booking waiting for approval, with a reason its owner sees (approvers and
    /// admins): it ends (status cancelled, approval declined) and frees its slot.
    Decline(DeclineArgs),
    /// Take a live booking away for maintenance, with a notice for its owner (admins).
    Preempt(PreemptArgs),
    /// Show who changed a booking, what and when.
    Audit(IdArgs),
    /// Show your account: user, role, time zone.
    Me(MeArgs),
    /// Read or change a host's power through its BMC (Redfish, IPMI or a local command), as the
    /// holder of an active booking covering it, or as an admin with --reason: `longhaul testbed
    /// power geneva/pc-1 cycle`. Prints the state the BMC reports afterwards.
    Power(operations::PowerArgs),
    /// Show a host's console as the service archived it (the current boot by default), or follow
    /// it live, as the holder of an active booking covering it (or an admin with --reason). Boots,
    /// oopses and panics are marked.
    Console(operations::ConsoleArgs),
    /// Show the operations log: every power attempt, allowed or refused, with the BMC's answer
    /// (yours; every user's for admins).
    Operations(operations::OperationsArgs),
    /// The hosts that registered themselves with `longhaul agent`: list them with their facts and
    /// reachability, accept or forget one (admins), show their events.
    Hosts(hosts::HostsArgs),
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Create an API token for USER and print it (it is stored hashed: shown once).
    Add {
        /// Account name.
        user: String,
        /// What the account may do.
        #[arg(long, value_enum, default_value_t = RoleArg::User)]
        role: RoleArg,
        /// Database URL (as for `serve`).
        #[arg(long)]
        database: Option<String>,
        /// The user's IANA time zone, for display and DST warnings (e.g. Europe/Zurich); applies to
        /// every token of USER.
        #[arg(long, value_name = "ZONE")]
        tz: Option<String>,
    },
    /// List every token: short id, user, role, zone, created, revoked (the tokens themselves are
    /// never stored, so never shown).
    List {
        /// Database URL (as for `serve`).
        #[arg(long)]
        database: Option<String>,
        /// Print JSON (an array of {id, user, role, zone, created_at, revoked, revoked_at}).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by its id (from `token list`), or every token of a user: the service
    /// refuses it with 401 from the next request on. The row stays, with the time of revocation.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["id", "user"])))]
    Revoke {
        /// Token id: the 8 hex digits `token list` shows (or more of them).
        id: Option<String>,
        /// Revoke every token of this user instead.
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// Database URL (as for `serve`).
        #[arg(long)]
        database: Option<String>,
    },
    /// Make (or replace) USER's calendar feed token and print it (stored hashed: shown once). It
    /// reads USER's iCal feed and the resource feeds as `?token=`, and is refused everywhere else;
    /// the previous one stops working. USER needs a valid API token.
    Feed {
        /// Account name.
        user: String,
        /// Remove USER's feed token instead: their feed URL stops working.
        #[arg(long)]
        revoke: bool,
        /// Database URL (as for `serve`).
        #[arg(long)]
        database: Option<String>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum RoleArg {
    User,
    Approver,
    Admin,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// `postgres://USER@HOST/DB`, `sqlite://PATH` or a path (default:
    /// $XDG_DATA_HOME/longhaul/testbed.sqlite).
    #[arg(long)]
    database: Option<String>,
    /// Address to listen on (port 0: a free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:7068")]
    listen: SocketAddr,
    /// Inventory file of real equipment (TOML, docs/testbed.md), added to the resources discovered
    /// from the topology presets.
    #[arg(long, value_name = "FILE")]
    inventory: Option<PathBuf>,
    /// Minutes a hold lasts before it must be confirmed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1440))]
    hold_minutes: u32,
    /// Seconds a hold lasts, instead of --hold-minutes (for tests and demos).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(1..=86400))]
    hold_seconds: Option<u32>,
    /// Seconds between sweeps that mark expired holds (audited as `system`).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=3600))]
    sweep_seconds: u32,
    /// Let approvers and admins approve their own bookings (by default another approver or an
    /// admin must: 403 self_approval). For a testbed with a single approver.
    #[arg(long)]
    allow_self_approval: bool,
    /// BMC file: each host's power endpoint and credentials (TOML, docs/testbed.md "Operations";
    /// must be readable by the service's account alone).
    #[arg(long, value_name = "FILE")]
    bmc: Option<PathBuf>,
    /// Receive netconsole datagrams on this UDP address (hosts are told apart by the `netconsole`
    /// address the BMC file gives them).
    #[arg(long, value_name = "ADDRESS:PORT")]
    netconsole: Option<SocketAddr>,
    /// Days the console archive keeps a line.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3650))]
    console_days: u32,
    /// Console lines kept per host (the newest).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u32).range(100..))]
    console_lines: u32,
    /// Seconds an accepted host's agent may be silent before the host is marked unreachable (hung
    /// when its console is silent too); agents report every third of it.
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(3..=86_400))]
    agent_timeout: u64,
    /// POST host events that concern a booking's holder (unreachable, hung, reachable) to this
    /// URL as JSON.
    #[arg(long, value_name = "URL", value_parser = web_url)]
    webhook: Option<String>,
    /// Log level (error, warn, info, debug); RUST_LOG overrides.
    #[arg(long, default_value = "info")]
    log: String,
}

#[derive(Args, Debug)]
struct ReserveArgs {
    /// Resource id (see `GET /api/v1/resources`).
    resource: String,
    /// Start, RFC 3339 with an offset.
    #[arg(long)]
    from: String,
    /// End, RFC 3339 with an offset.
    #[arg(long)]
    to: String,
    /// Only hold it: it expires unless confirmed (`longhaul testbed confirm ID`).
    #[arg(long)]
    hold: bool,
    /// A major event, beyond the normal horizon (needs approval).
    #[arg(long)]
    event: bool,
    /// Free text.
    #[arg(long)]
    note: Option<String>,
    /// Idempotency key: a retry with the same key never books twice (default: a fresh one, reused
    /// by this command's own retry).
    #[arg(long)]
    idempotency_key: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// Only bookings conflicting with this resource.
    #[arg(long)]
    resource: Option<String>,
    /// Window start, RFC 3339.
    #[arg(long)]
    from: Option<String>,
    /// Window end, RFC 3339.
    #[arg(long)]
    to: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct ExtendArgs {
    /// Booking id.
    id: u64,
    /// The new end, RFC 3339 with an offset.
    #[arg(long)]
    to: String,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct PreemptArgs {
    /// Booking id.
    id: u64,
    /// Why, shown to the owner (required).
    #[arg(long)]
    notice: String,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct DeclineArgs {
    /// Booking id.
    id: u64,
    /// Why, shown to the owner (required; at most 1000 characters).
    #[arg(long)]
    reason: String,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct MeArgs {
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
struct IdArgs {
    /// Booking id.
    id: u64,
    #[command(flatten)]
    client: ClientArgs,
}

fn default_database() -> anyhow::Result<String> {
    let dir = longhaul_sys::data_dir().context("HOME is not set: pass --database")?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join("testbed.sqlite").display().to_string())
}

pub(crate) fn run(a: &TestbedArgs) -> anyhow::Result<ExitCode> {
    match &a.command {
        TestbedCommand::Serve(s) => {
            crate::logging::to_stderr(&s.log);
            let database = match &s.database {
                Some(d) => d.clone(),
                None => default_database()?,
            };
            longhaul_web::serve(&longhaul_web::ServeOptions {
                database,
                listen: s.listen,
                inventory: s.inventory.clone(),
                hold_ttl: match s.hold_seconds {
                    Some(secs) => jiff::SignedDuration::from_secs(i64::from(secs)),
                    None => jiff::SignedDuration::from_mins(i64::from(s.hold_minutes)),
                },
                sweep_every: std::time::Duration::from_secs(u64::from(s.sweep_seconds)),
                allow_self_approval: s.allow_self_approval,
                bmc: s.bmc.clone(),
                netconsole: s.netconsole,
                console_retention: longhaul_web::console::Retention {
                    days: s.console_days,
                    lines: s.console_lines,
                },
                agent_timeout: std::time::Duration::from_secs(s.agent_timeout),
                webhook: s.webhook.clone(),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Token {
            command:
                TokenCommand::Add {
                    user,
                    role,
                    database,
                    tz,
                },
        } => {
            let database = match database {
                Some(d) => d.clone(),
                None => default_database()?,
            };
            let role = match role {
                RoleArg::User => Role::User,
                RoleArg::Approver => Role::Approver,
                RoleArg::Admin => Role::Admin,
            };
            let token = longhaul_web::add_token(&database, user, role, tz.as_deref())?;
            println!("{token}");
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Token {
            command: TokenCommand::List { database, json },
        } => token_list(database.as_deref(), *json),
        TestbedCommand::Token {
            command: TokenCommand::Revoke { id, user, database },
        } => token_revoke(id.as_deref(), user.as_deref(), database.as_deref()),
        TestbedCommand::Token {
            command:
                TokenCommand::Feed {
                    user,
                    revoke,
                    database,
                },
        } => {
            let database = match database {
                Some(d) => d.clone(),
                None => default_database()?,
            };
            if *revoke {
                if longhaul_web::revoke_feed_token(&database, user)? {
                    println!("revoked the calendar feed token of {user}");
                } else {
                    println!("{user} had no calendar feed token");
                }
            } else {
                println!("{}", longhaul_web::feed_token(&database, user)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Reserve(r) => reserve(r),
        TestbedCommand::List(l) => list(l),
        TestbedCommand::Confirm(i) => change(i, "confirm"),
        TestbedCommand::Cancel(i) => change(i, "cancel"),
        TestbedCommand::Release(i) => change(i, "release"),
        TestbedCommand::Extend(e) => extend(e),
        TestbedCommand::Approve(i) => change(i, "approve"),
        TestbedCommand::Decline(d) => decline(d),
        TestbedCommand::Preempt(p) => preempt(p),
        TestbedCommand::Audit(i) => audit(i),
        TestbedCommand::Me(m) => me(m),
        TestbedCommand::Power(p) => operations::power(p),
        TestbedCommand::Operations(o) => operations::operations(o),
        TestbedCommand::Console(c) => operations::console(c),
        TestbedCommand::Hosts(h) => hosts::run(h),
    }
}

fn print_booking(v: &BookingView) {
    let hold = v
        .hold_until
        .as_deref()
        .map(|h| format!(" until {h}"))
        .unwrap_or_default();
    println!(
        "{:>6}  {:<12} {} .. {}  {}  ({}){}",
        v.id, v.status, v.start, v.end, v.resource, v.owner, hold
    );
    if let Some(l) = &v.local {
        println!("        local ({}): {} .. {}", l.zone, l.start, l.end);
    }
    if let Some(a) = &v.approval {
        println!("        approval: {a}");
    }
    if let (Some(by), Some(n)) = (&v.preempted_by, &v.notice) {
        println!("        preempted by {by}: {n}");
    }
    if let (Some(by), Some(r)) = (&v.declined_by, &v.decline_reason) {
        println!("        declined by {by}: {r}");
    }
    for w in &v.warnings {
        println!("        warning {}: {}", w.code, w.message);
    }
}

fn reserve(r: &ReserveArgs) -> anyhow::Result<ExitCode> {
    let body = CreateBooking {
        resource: r.resource.clone(),
        start: r.from.clone(),
        end: r.to.clone(),
        hold: r.hold,
        event: r.event,
        note: r.note.clone(),
    };
    let key = match &r.idempotency_key {
        Some(k) => k.clone(),
        None => format!(
            "cli-{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        ),
    };
    let send = || {
        call(
            agent()
                .post(&url(&r.client, "/api/v1/bookings"))
                .set("Authorization", &format!("Bearer {}", r.client.token))
                .set("Idempotency-Key", &key),
            Some(&body),
        )
    };
    // One retry on a transport error: the same key, so never a second booking.
    let text = match send() {
        Err(e) if e.downcast_ref::<ureq::Error>().is_some() => send()?,
        other => other?,
    };
    if r.client.json.json {
        println!("{text}");
    } else {
        print_booking(&serde_json::from_str(&text).context("the service's answer")?);
    }
    Ok(ExitCode::SUCCESS)
}

fn list(l: &ListArgs) -> anyhow::Result<ExitCode> {
    let mut req = agent()
        .get(&url(&l.client, "/api/v1/bookings"))
        .set("Authorization", &format!("Bearer {}", l.client.token));
    for (k, v) in [("resource", &l.resource), ("from", &l.from), ("to", &l.to)] {
        if let Some(v) = v {
            req = req.query(k, v);
        }
    }
    let text = call::<()>(req, None)?;
    if l.client.json.json {
        println!("{text}");
    } else {
        let list: BookingList = serde_json::from_str(&text).context("the service's answer")?;
        for b in &list.bookings {
            print_booking(b);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn change(i: &IdArgs, op: &str) -> anyhow::Result<ExitCode> {
    let text = call::<()>(
        agent()
            .post(&url(&i.client, &format!("/api/v1/bookings/{}/{op}", i.id)))
            .set("Authorization", &format!("Bearer {}", i.client.token)),
        None,
    )?;
    if i.client.json.json {
        println!("{text}");
    } else {
        print_booking(&serde_json::from_str(&text).context("the service's answer")?);
    }
    Ok(ExitCode::SUCCESS)
}

fn post_with<B: serde::Serialize>(
    c: &ClientArgs,
    path: &str,
    body: &B,
) -> anyhow::Result<ExitCode> {
    let text = call(
        agent()
            .post(&url(c, path))
            .set("Authorization", &format!("Bearer {}", c.token)),
        Some(body),
    )?;
    if c.json.json {
        println!("{text}");
    } else {
        print_booking(&serde_json::from_str(&text).context("the service's answer")?);
    }
    Ok(ExitCode::SUCCESS)
}

fn extend(e: &ExtendArgs) -> anyhow::Result<ExitCode> {
    post_with(
        &e.client,
        &format!("/api/v1/bookings/{}/extend", e.id),
        &ExtendBooking { end: e.to.clone() },
    )
}

fn decline(d: &DeclineArgs) -> anyhow::Result<ExitCode> {
    post_with(
        &d.client,
        &format!("/api/v1/bookings/{}/decline", d.id),
        &DeclineBooking {
            reason: d.reason.clone(),
        },
    )
}

fn database_or_default(database: Option<&str>) -> anyhow::Result<String> {
    match database {
        Some(d) => Ok(d.to_owned()),
        None => default_database(),
    }
}

fn token_list(database: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let tokens = longhaul_web::list_tokens(&database_or_default(database)?)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&tokens)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<8}  {:<16} {:<8} {:<20} {:<27}  REVOKED",
        "ID", "USER", "ROLE", "ZONE", "CREATED"
    );
    for t in &tokens {
        println!(
            "{:<8}  {:<16} {:<8} {:<20} {:<27}  {}",
            t.id,
            t.user,
            t.role,
            t.zone.as_deref().unwrap_or("-"),
            t.created_at,
            t.revoked_at.as_deref().unwrap_or("-")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn token_revoke(
    id: Option<&str>,
    user: Option<&str>,
    database: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let sel = match (id, user) {
        (Some(id), None) => longhaul_web::TokenSelector::Id(id),
        (None, Some(user)) => longhaul_web::TokenSelector::User(user),
        _ => bail!("give a token id or --user USER, not both"),
    };
    for (t, now) in longhaul_web::revoke_tokens(&database_or_default(database)?, sel)? {
        let at = t.revoked_at.as_deref().unwrap_or("?");
        if now {
            println!("revoked token {} ({}, {}) at {at}", t.id, t.user, t.role);
        } else {
            println!(
                "token {} ({}, {}) was revoked already at {at}",
                t.id, t.user, t.role
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn preempt(p: &PreemptArgs) -> anyhow::Result<ExitCode> {
    post_with(
        &p.client,
        &format!("/api/v1/bookings/{}/preempt", p.id),
        &PreemptBooking {
            notice: p.notice.clone(),
        },
    )
}

fn audit(i: &IdArgs) -> anyhow::Result<ExitCode> {
    let text = call::<()>(
        agent()
            .get(&url(&i.client, &format!("/api/v1/bookings/{}/audit", i.id)))
            .set("Authorization", &format!("Bearer {}", i.client.token)),
        None,
    )?;
    if i.client.json.json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let log: AuditLog = serde_json::from_str(&text).context("the service's answer")?;
    for e in &log.events {
        let from = e
            .status_before
            .as_deref()
            .map(|s| format!("{s} -> "))
            .unwrap_or_default();
        let moved = e
            .end_before
            .as_deref()
            .map(|b| format!(" (end {b} -> {})", e.end))
            .unwrap_or_default();
        let notice = e
            .notice
            .as_deref()
            .or(e.reason.as_deref())
            .map(|n| format!(": {n}"))
            .unwrap_or_default();
        println!(
            "{:>5}  {}  {:<8} {} ({})  {from}{}{moved}{notice}",
            e.seq, e.at, e.action, e.actor, e.role, e.status_after
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn me(m: &MeArgs) -> anyhow::Result<ExitCode> {
    let text = call::<()>(
        agent()
            .get(&url(&m.client, "/api/v1/me"))
            .set("Authorization", &format!("Bearer {}", m.client.token)),
        None,
    )?;
    if m.client.json.json {
        println!("{text}");
    } else {
        let me: Me = serde_json::from_str(&text).context("the service's answer")?;
        println!(
            "{} ({}), time zone {}",
            me.user,
            me.role,
            me.zone.as_deref().unwrap_or("UTC (none set)")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The reservation check of `emulate up` and `lab run` (issue 6, "ties to the testbed"): with a
/// testbed service configured, a testbed comes up only for the holder of the current booking of
/// its resources, or when nobody holds them.
#[derive(Args, Debug, Clone)]
pub(crate) struct TiesArgs {
    /// The reservation service (`longhaul testbed serve`). When set, the testbed comes up only if
    /// you hold the current booking of its resources (held or confirmed), or nobody does.
    #[arg(long = "testbed", env = "LONGHAUL_TESTBED", value_name = "URL")]
    testbed: Option<String>,
    /// Your API token for --testbed (`longhaul testbed token add`).
    #[arg(
        long = "testbed-token",
        env = "LONGHAUL_TESTBED_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    testbed_token: Option<String>,
}

/// The resources a testbed of `topologies` uses, as the service discovers them
/// (`Inventory::from_topologies`): its hosts and links (a booking of a site covers them, as their
/// ancestor).
pub(crate) fn resources_of(
    topologies: &[longhaul_topology::Topology],
) -> anyhow::Result<Vec<String>> {
    let inv = longhaul_testbed::resource::Inventory::from_topologies(topologies)
        .context("the testbed's resources")?;
    Ok(inv
        .iter()
        .filter(|r| r.kind != longhaul_testbed::resource::ResourceKind::Site)
        .map(|r| r.id.to_string())
        .collect())
}

/// The topology of `emulate up PRESET|FILE`: the preset's, or the file's; `None` without one (a
/// plain --rtt/--rate path is no reservable resource).
pub(crate) fn topology_of(spec: Option<&str>) -> anyhow::Result<Vec<longhaul_topology::Topology>> {
    let Some(spec) = spec else {
        return Ok(Vec::new());
    };
    if let Some(p) = longhaul_topology::preset(spec) {
        return Ok(vec![p.topology()?]);
    }
    if longhaul_topology::network(spec).is_some() {
        // A network maps to no reservable resource yet (docs/testbed.md, "Ties").
        return Ok(Vec::new());
    }
    match std::fs::read_to_string(spec) {
        Ok(text) if longhaul_topology::is_network(&text) => Ok(Vec::new()),
        Ok(text) => Ok(vec![longhaul_topology::Topology::from_toml(&text, spec)?]),
        // The emulator refuses it with its own message.
        Err(_) => Ok(Vec::new()),
    }
}

/// "14:00 UTC" today, "2026-11-22 14:00 UTC" another day.
fn until_text(end: &str, now: jiff::Timestamp) -> String {
    match end.parse::<jiff::Timestamp>() {
        Ok(t) if t.strftime("%F").to_string() == now.strftime("%F").to_string() => {
            t.strftime("%H:%M UTC").to_string()
        }
        Ok(t) => t.strftime("%F %H:%M UTC").to_string(),
        Err(_) => end.to_owned(),
    }
}

/// With a testbed service configured (--testbed / LONGHAUL_TESTBED), refuses unless the caller
/// holds the current booking of every resource in `topologies`, or nobody holds it:
/// `testbed: geneva/cern-starlight is reserved by alice until 14:00 UTC (booking 42)`. Without a
/// service, does nothing. An unreachable service refuses too (fail closed).
pub(crate) fn check_reservation(
    ties: &TiesArgs,
    topologies: &[longhaul_topology::Topology],
) -> anyhow::Result<()> {
    let Some(server) = ties.testbed.as_deref().filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let Some(token) = ties.testbed_token.as_deref().filter(|t| !t.is_empty()) else {
        bail!(
            "testbed: a reservation service is configured ({server}) but no token: set \
             LONGHAUL_TESTBED_TOKEN or --testbed-token (from `longhaul testbed token add USER`)"
        );
    };
    let resources = resources_of(topologies)?;
    if resources.is_empty() {
        return Ok(());
    }
    let base = server.trim_end_matches('/');
    let get = |path: &str, query: Option<(&str, &str)>| {
        let mut req = agent()
            .get(&format!("{base}{path}"))
            .set("Authorization", &format!("Bearer {token}"));
        if let Some((k, v)) = query {
            req = req.query(k, v);
        }
        req.call().map_err(Box::new)
    };
    let unreachable = |e: Box<ureq::Error>| {
        anyhow::anyhow!(
            "testbed: cannot ask the reservation service at {server} ({e}); unset LONGHAUL_TESTBED \
             (or drop --testbed) to run without reservations"
        )
    };
    let me: Me = match get("/api/v1/me", None) {
        Ok(r) => r
            .into_json()
            .context("testbed: the service's answer to /api/v1/me")?,
        Err(e) if matches!(*e, ureq::Error::Status(401, _)) => {
            bail!("testbed: the reservation service at {server} does not know this token")
        }
        Err(e) => return Err(unreachable(e)),
    };
    let now = jiff::Timestamp::now();
    for r in &resources {
        let current: longhaul_testbed::api::CurrentBookings =
            match get("/api/v1/current", Some(("resource", r))) {
                Ok(resp) => resp
                    .into_json()
                    .context("testbed: the service's answer to /api/v1/current")?,
                // The service does not list this resource: nothing to reserve.
                Err(e) if matches!(*e, ureq::Error::Status(404, _)) => continue,
                Err(e) => return Err(unreachable(e)),
            };
        if let Some(b) = current.bookings.iter().find(|b| b.owner != me.user) {
            bail!(
                "testbed: {} is reserved by {} until {} (booking {})",
                b.resource,
                b.owner,
                until_text(&b.end, now),
                b.id
            );
        }
    }
    Ok(())
}

/// An `http://` or `https://` URL.
fn web_url(s: &str) -> Result<String, String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not an http:// or https:// URL"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resources_of_a_preset_are_its_hosts_and_link() {
        let mut r = resources_of(&topology_of(Some("cern-starlight")).unwrap()).unwrap();
        r.sort();
        assert_eq!(
            r,
            [
                "chicago/starlight-host",
                "geneva/cern-host",
                "geneva/cern-starlight"
            ]
        );
        assert!(topology_of(None).unwrap().is_empty());
        assert!(topology_of(Some("/nonexistent.toml")).unwrap().is_empty());
    }

    #[test]
    fn until_is_the_time_today_and_the_date_otherwise() {
        let now: jiff::Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
        assert_eq!(until_text("2026-11-21T14:00:00Z", now), "14:00 UTC");
        assert_eq!(
            until_text("2026-11-22T14:00:00Z", now),
            "2026-11-22 14:00 UTC"
        );
    }

    #[test]
    fn no_service_configured_means_no_check() {
        let ties = TiesArgs {
            testbed: None,
            testbed_token: Some("lh_x".into()),
        };
        let t = topology_of(Some("cern-starlight")).unwrap();
        assert!(check_reservation(&ties, &t).is_ok());
        let no_token = TiesArgs {
            testbed: Some("http://127.0.0.1:9".into()),
            testbed_token: None,
        };
        let e = check_reservation(&no_token, &t).unwrap_err().to_string();
        assert!(e.contains("no token"), "{e}");
    }
}

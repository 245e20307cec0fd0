//! `longhaul testbed`: the reservation service (`serve`, `token add`) and its command-line client
//! (`reserve`, `list`, `confirm`, `cancel`, `release`), a small blocking HTTP client over the public
//! API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use longhaul_testbed::api::{BookingList, BookingView, CreateBooking, ErrorBody};
use longhaul_testbed::booking::Role;

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
    /// Log level (error, warn, info, debug); RUST_LOG overrides.
    #[arg(long, default_value = "info")]
    log: String,
}

/// Where the client finds the service.
#[derive(Args, Debug)]
struct ClientArgs {
    /// Service URL.
    #[arg(
        long,
        env = "LONGHAUL_TESTBED_URL",
        default_value = "http://127.0.0.1:7068"
    )]
    server: String,
    /// API token (`longhaul testbed token add`).
    #[arg(long, env = "LONGHAUL_TESTBED_TOKEN", hide_env_values = true)]
    token: String,
    /// Print the service's JSON instead of a summary.
    #[arg(long)]
    json: bool,
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
struct IdArgs {
    /// Booking id.
    id: u64,
    #[command(flatten)]
    client: ClientArgs,
}

fn default_database() -> anyhow::Result<String> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").context("HOME is not set: pass --database")?)
                .join(".local/share")
        }
    };
    let dir = base.join("longhaul");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join("testbed.sqlite").display().to_string())
}

pub(crate) fn run(a: &TestbedArgs) -> anyhow::Result<ExitCode> {
    match &a.command {
        TestbedCommand::Serve(s) => {
            crate::init_logging(&s.log);
            let database = match &s.database {
                Some(d) => d.clone(),
                None => default_database()?,
            };
            longhaul_web::serve(&longhaul_web::ServeOptions {
                database,
                listen: s.listen,
                inventory: s.inventory.clone(),
                hold_ttl: jiff::SignedDuration::from_mins(i64::from(s.hold_minutes)),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Token {
            command:
                TokenCommand::Add {
                    user,
                    role,
                    database,
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
            let token = longhaul_web::add_token(&database, user, role)?;
            println!("{token}");
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Reserve(r) => reserve(r),
        TestbedCommand::List(l) => list(l),
        TestbedCommand::Confirm(i) => change(i, "confirm"),
        TestbedCommand::Cancel(i) => change(i, "cancel"),
        TestbedCommand::Release(i) => change(i, "release"),
    }
}

/// The service's answer: the body on 2xx; the error body's message otherwise.
fn call(req: ureq::Request, body: Option<&CreateBooking>) -> anyhow::Result<String> {
    let url = req.url().to_owned();
    let result = match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    };
    match result {
        Ok(resp) => Ok(resp.into_string()?),
        Err(ureq::Error::Status(code, resp)) => {
            let text = resp.into_string().unwrap_or_default();
            match serde_json::from_str::<ErrorBody>(&text) {
                Ok(e) => {
                    let mut msg = format!("{} ({code} {})", e.message, e.code);
                    for r in &e.reasons {
                        msg.push_str(&format!("\n  {}: {}", r.code, r.message));
                    }
                    bail!(msg)
                }
                Err(_) => bail!("{url}: HTTP {code}: {text}"),
            }
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "cannot reach the testbed service at {url} (is `longhaul testbed serve` running?)"
        ))),
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_secs(30))
        .build()
}

fn url(c: &ClientArgs, path: &str) -> String {
    format!("{}{path}", c.server.trim_end_matches('/'))
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
    if r.client.json {
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
    let text = call(req, None)?;
    if l.client.json {
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
    let text = call(
        agent()
            .post(&url(&i.client, &format!("/api/v1/bookings/{}/{op}", i.id)))
            .set("Authorization", &format!("Bearer {}", i.client.token)),
        None,
    )?;
    if i.client.json {
        println!("{text}");
    } else {
        print_booking(&serde_json::from_str(&text).context("the service's answer")?);
    }
    Ok(ExitCode::SUCCESS)
}

//! `longhaul agent`: runs on a testbed host, registers it with the testbed service under its
//! resource id and a per-host key (made on the first run, kept private), reports the host's facts
//! (what `doctor` reads: interfaces with speed, MTU, driver and offloads; CPU, memory, kernel,
//! congestion controls; longhaul's version) and heartbeats with them at the interval the service
//! asks. The service keeps the host pending until an admin accepts it (docs/testbed.md §11).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use longhaul_models::tuning::Probe;
use longhaul_testbed::agents::{
    AgentReply, AgentReport, HostFacts, Nic, fingerprint, key_is_well_formed,
};
use longhaul_testbed::api::ErrorBody;

#[derive(Args, Debug)]
pub(crate) struct AgentArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// The testbed service's URL.
    #[arg(
        long,
        env = "LONGHAUL_TESTBED_URL",
        default_value = "http://127.0.0.1:7068"
    )]
    server: String,
    /// This host's resource id in the testbed's inventory (`site/host`); a host the inventory does
    /// not name joins it, under a site it does, when an admin accepts it.
    #[arg(long)]
    host: String,
    /// This host's agent key: made on the first run (32 random bytes, hex, mode 0600), read after.
    #[arg(long, default_value = "/var/lib/longhaul/agent.key")]
    key_file: PathBuf,
    /// Report once, print the service's answer and exit (0 when accepted, 3 when still pending).
    #[arg(long)]
    once: bool,
    #[command(flatten)]
    json: crate::args::Json,
}

/// The longest wait between attempts while the service cannot be reached.
const MAX_RETRY: Duration = Duration::from_secs(60);

pub(crate) fn run(a: &AgentArgs) -> anyhow::Result<ExitCode> {
    let key = key(&a.key_file)?;
    eprintln!(
        "longhaul agent: {} reports to {} with key {} ({})",
        a.host,
        a.server,
        fingerprint(&key),
        a.key_file.display()
    );
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .redirects(0)
        .build();
    let url = format!("{}/api/v1/agent/report", a.server.trim_end_matches('/'));
    let mut last_state = String::new();
    let mut retry = Duration::from_secs(1);
    loop {
        let report = AgentReport {
            host: a.host.clone(),
            facts: facts(),
        };
        let wait = match send(&http, &url, &key, &report) {
            Ok(reply) => {
                if a.once {
                    print_reply(a, &reply)?;
                    return Ok(if reply.state == "accepted" {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(3)
                    });
                }
                if reply.state != last_state {
                    if last_state.is_empty() {
                        crate::systemd::ready(&describe(&a.host, &reply));
                    }
                    eprintln!("longhaul agent: {}", describe(&a.host, &reply));
                    last_state.clone_from(&reply.state);
                }
                retry = Duration::from_secs(1);
                Duration::from_secs(reply.heartbeat_s.max(1))
            }
            Err(Failure::Refused(msg)) => bail!("{msg}"),
            Err(Failure::Transient(msg)) => {
                if a.once {
                    bail!("{msg}");
                }
                eprintln!(
                    "longhaul agent: {msg}; trying again in {} s",
                    retry.as_secs()
                );
                let w = retry;
                retry = (retry * 2).min(MAX_RETRY);
                w
            }
        };
        std::thread::sleep(wait);
    }
}

fn describe(host: &str, reply: &AgentReply) -> String {
    match reply.state.as_str() {
        "pending" => format!(
            "{host} is registered, pending an admin's acceptance (longhaul testbed hosts accept \
             {host}; key {})",
            reply.fingerprint
        ),
        s => format!("{host} is {s}; reporting every {} s", reply.heartbeat_s),
    }
}

fn print_reply(a: &AgentArgs, reply: &AgentReply) -> anyhow::Result<()> {
    if a.json.json {
        println!("{}", serde_json::to_string_pretty(reply)?);
    } else {
        println!("{}", describe(&a.host, reply));
    }
    Ok(())
}

enum Failure {
    /// The service refused this report for good: a wrong key, facts or host it will not take.
    Refused(String),
    /// The service could not be reached, or is busy: try again.
    Transient(String),
}

fn send(
    http: &ureq::Agent,
    url: &str,
    key: &str,
    report: &AgentReport,
) -> Result<AgentReply, Failure> {
    let result = http
        .post(url)
        .set("Authorization", &format!("Bearer {key}"))
        .send_json(report);
    match result {
        Ok(resp) => resp
            .into_json::<AgentReply>()
            .map_err(|e| Failure::Transient(format!("{url}: unreadable answer: {e}"))),
        Err(ureq::Error::Status(code, resp)) => {
            let text = resp.into_string().unwrap_or_default();
            let msg = match serde_json::from_str::<ErrorBody>(&text) {
                Ok(e) => format!("{} ({code} {})", e.message, e.code),
                Err(_) => format!("{url}: HTTP {code}"),
            };
            if code == 429 || code >= 500 {
                Err(Failure::Transient(msg))
            } else {
                Err(Failure::Refused(msg))
            }
        }
        Err(e) => Err(Failure::Transient(format!(
            "cannot reach the testbed service at {url}: {e}"
        ))),
    }
}

/// The key in `path`, made there first when there is none. Refused: a key file that is a symbolic
/// link, not a regular file, not owned by this user, readable by others, or not a key; a new one
/// is created exclusively (never through a file someone planted) with mode 0600.
fn key(path: &Path) -> anyhow::Result<String> {
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => {
            let meta = f.metadata()?;
            let uid = effective_uid();
            if !meta.is_file() {
                bail!("key file {} is not a regular file", path.display());
            }
            if meta.uid() != uid {
                bail!(
                    "key file {} belongs to uid {}, not to this user ({uid})",
                    path.display(),
                    meta.uid()
                );
            }
            if meta.permissions().mode() & 0o077 != 0 {
                bail!(
                    "key file {} is readable by others (mode {:o}); chmod 600 it",
                    path.display(),
                    meta.permissions().mode() & 0o777
                );
            }
            let mut text = String::new();
            f.take(1024).read_to_string(&mut text)?;
            let key = text.trim().to_owned();
            if !key_is_well_formed(&key) {
                bail!(
                    "key file {} does not hold an agent key (64 hex digits)",
                    path.display()
                );
            }
            Ok(key)
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!("key file {} is a symbolic link; refused", path.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => make_key(path),
        Err(e) => Err(e).with_context(|| format!("reading key file {}", path.display())),
    }
}

fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn make_key(path: &Path) -> anyhow::Result<String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a key: {e}"))?;
    let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating key file {}", path.display()))?;
    writeln!(f, "{key}")?;
    f.sync_all()?;
    eprintln!("longhaul agent: made a new key in {}", path.display());
    Ok(key)
}

/// This host's facts now.
fn facts() -> HostFacts {
    let snap = longhaul_engine::doctor::gather();
    let record = longhaul_engine::doctor::record(&[]);
    let nics = snap
        .interfaces
        .iter()
        .filter(|i| !i.loopback)
        .map(|i| {
            let offloads = match &i.offloads {
                Probe::Known(o) => Some(o),
                Probe::Unknown(_) => None,
            };
            let on = |f: Option<&longhaul_models::tuning::Feature>| f.map(|f| f.on);
            Nic {
                name: i.name.clone(),
                operstate: i.operstate.clone(),
                mtu: i.mtu,
                speed_mbps: i.speed_mbps,
                driver: driver(&i.name),
                tso: offloads.and_then(|o| on(o.tso.as_ref())),
                gso: offloads.and_then(|o| on(o.gso.as_ref())),
                gro: offloads.and_then(|o| on(o.gro.as_ref())),
            }
        })
        .collect();
    HostFacts {
        hostname: record.hostname,
        kernel: snap.kernel_release,
        cpu_model: record.cpu_model,
        cpus: record.cpus.and_then(|n| u32::try_from(n).ok()),
        memory_bytes: memory_bytes(),
        congestion_controls: snap.available_cc,
        default_congestion_control: snap.default_cc,
        rmem_max: snap.rmem_max,
        wmem_max: snap.wmem_max,
        nics,
        longhaul_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The interface's kernel driver (`/sys/class/net/NAME/device/driver`); virtual interfaces have
/// none there.
fn driver(name: &str) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/class/net/{name}/device/driver")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// `MemTotal` of `/proc/meminfo`, bytes.
fn memory_bytes() -> Option<u64> {
    longhaul_sys::meminfo_bytes("MemTotal")
}

//! The service's BMC file: which power endpoint each host has, and its credentials. A TOML file
//! apart from the inventory (which is shared and shown to users), readable by the service's
//! account alone: one that group or others may read is refused, as ssh refuses such a key. Every
//! password is a [`Secret`], which never prints; see `docs/testbed.md` ("Operations").
//!
//! ```toml
//! [[host]]
//! id = "geneva/pc-1"                    # a host of the inventory
//! redfish = "https://10.1.0.5"          # the Redfish service root's host
//! system = "/redfish/v1/Systems/1"      # optional when the BMC has one system
//! ca_file = "/etc/longhaul/bmc-ca.pem"  # optional: trust this CA (BMCs' own certificates)
//! user = "longhaul"
//! password_file = "/etc/longhaul/bmc/pc-1"
//!
//! [[host]]
//! id = "chicago/pc-2"
//! ipmi = "10.2.0.6:623"                 # IPMI 2.0 over LAN (lanplus); port 623 by default
//! user = "admin"
//! password = "..."
//! at_end = "cycle"                      # optional: off, cycle or reset when a reservation ends
//!
//! [[host]]
//! id = "geneva/pc-3"                    # a console only
//! console = "tcp:10.1.0.9:7003"         # or unix:/PATH, device:/PATH (ser2net, conserver, QEMU)
//! netconsole = "10.1.0.7"               # and/or: netconsole datagrams from this address
//!
//! [[host]]
//! id = "emulated/vm-1"
//! command = { status = ["vmctl", "status", "vm-1"], on = ["vmctl", "start", "vm-1"],
//!             off = ["vmctl", "kill", "vm-1"], reset = ["vmctl", "reset", "vm-1"] }
//! ```

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::command::Commands;
use crate::ipmi::Ipmi;
use crate::redfish::Redfish;
use crate::secret::Secret;
use crate::{Endpoint, PowerAction, Wait};

/// One host's management: its power endpoint (and how long its actions may take) and where its
/// console is.
#[derive(Debug, Clone)]
pub struct HostPower {
    /// Where and how its power is controlled (`None`: it has a console only).
    pub endpoint: Option<Endpoint>,
    /// The wait for an action's outcome.
    pub wait: Wait,
    /// Its serial console, as the file gives it (`tcp:HOST:PORT`, `unix:/PATH`, `device:/PATH`);
    /// `longhaul-console` reads it.
    pub console: Option<String>,
    /// The address its netconsole messages come from.
    pub netconsole: Option<std::net::IpAddr>,
    /// What to do to its power when a reservation covering it ends (`off`, `cycle` or `reset`), so
    /// the next holder finds it in a clean state; nothing when absent.
    pub at_end: Option<PowerAction>,
}

/// The BMC file: hosts by resource id.
#[derive(Debug, Clone, Default)]
pub struct BmcFile {
    hosts: BTreeMap<String, HostPower>,
}

/// A BMC file that cannot be used: `FILE: WHERE: WHAT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    host: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    redfish: Option<String>,
    system: Option<String>,
    ca_file: Option<PathBuf>,
    ipmi: Option<String>,
    command: Option<CommandEntry>,
    console: Option<String>,
    netconsole: Option<std::net::IpAddr>,
    at_end: Option<String>,
    user: Option<String>,
    password: Option<String>,
    password_file: Option<PathBuf>,
    /// Seconds one request may take.
    timeout: Option<u64>,
    /// Seconds an action may take to show its outcome.
    wait: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandEntry {
    status: Vec<String>,
    on: Vec<String>,
    off: Vec<String>,
    reset: Option<Vec<String>>,
}

/// Refuses a file that group or others may read or write: it holds credentials.
pub fn check_private(path: &Path) -> Result<(), ConfigError> {
    let meta =
        std::fs::metadata(path).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ConfigError(format!(
            "{}: holds BMC credentials but group or others may read or write it (mode {mode:04o}): \
             chmod 600 it",
            path.display()
        )));
    }
    Ok(())
}

impl BmcFile {
    /// Reads and checks the file at `path` (private, see [`check_private`]), and the password
    /// files it names.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        check_private(path)?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses a BMC file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            ConfigError(match line {
                Some(l) => format!("{file}:{l}: {}", e.message().trim()),
                None => format!("{file}: {}", e.message().trim()),
            })
        })?;
        let mut hosts = BTreeMap::new();
        for (i, e) in doc.host.into_iter().enumerate() {
            let id = e.id.clone();
            let at = |m: String| ConfigError(format!("{file}: host[{i}] ({id}): {m}"));
            let power = entry(e).map_err(at)?;
            if hosts.insert(id.clone(), power).is_some() {
                return Err(ConfigError(format!(
                    "{file}: host[{i}] ({id}): named twice"
                )));
            }
        }
        Ok(Self { hosts })
    }

    /// The endpoint of host `id`.
    pub fn get(&self, id: &str) -> Option<&HostPower> {
        self.hosts.get(id)
    }

    /// Every host id, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.hosts.keys().map(String::as_str)
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// True when it names none.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

fn entry(e: Entry) -> Result<HostPower, String> {
    let timeout = Duration::from_secs(e.timeout.unwrap_or(10).clamp(1, 600));
    let wait = Wait {
        limit: Duration::from_secs(e.wait.unwrap_or(120).clamp(1, 3600)),
        ..Wait::default()
    };
    let password = match (&e.password, &e.password_file) {
        (Some(_), Some(_)) => return Err("give password or password_file, not both".into()),
        (Some(p), None) => Some(Secret::new(p.clone())),
        (None, Some(f)) => {
            check_private(f).map_err(|err| err.0)?;
            let text =
                std::fs::read_to_string(f).map_err(|err| format!("{}: {err}", f.display()))?;
            Some(Secret::new(text.trim_end_matches(['\r', '\n'])))
        }
        (None, None) => None,
    };
    let kinds = [e.redfish.is_some(), e.ipmi.is_some(), e.command.is_some()];
    match kinds.iter().filter(|k| **k).count() {
        0 if e.console.is_none() && e.netconsole.is_none() => {
            return Err(
                "name a power endpoint (redfish, ipmi or command), a console or a netconsole"
                    .into(),
            );
        }
        0 | 1 => {}
        _ => return Err("name one power endpoint: redfish, ipmi or command".into()),
    }
    let endpoint = if let Some(url) = e.redfish {
        let user = e.user.ok_or("redfish needs user")?;
        let password = password.ok_or("redfish needs password or password_file")?;
        Some(Endpoint::Redfish(Redfish::new(
            &url,
            e.system.as_deref(),
            user,
            password,
            e.ca_file.as_deref(),
            timeout,
        )?))
    } else if let Some(addr) = e.ipmi {
        if e.system.is_some() || e.ca_file.is_some() {
            return Err("system and ca_file are for redfish".into());
        }
        let user = e.user.ok_or("ipmi needs user")?;
        let password = password.ok_or("ipmi needs password or password_file")?;
        Some(Endpoint::Ipmi(Ipmi::new(&addr, user, password, timeout)?))
    } else if let Some(c) = e.command {
        if e.user.is_some() || password.is_some() || e.system.is_some() || e.ca_file.is_some() {
            return Err("user, password, system and ca_file are not for command".into());
        }
        Some(Endpoint::Command(Commands::new(
            c.status, c.on, c.off, c.reset, timeout,
        )?))
    } else {
        if e.user.is_some() || password.is_some() || e.system.is_some() || e.ca_file.is_some() {
            return Err("user, password, system and ca_file need a power endpoint".into());
        }
        None
    };
    let at_end = match e.at_end.as_deref() {
        None => None,
        Some(a @ ("off" | "cycle" | "reset")) => {
            if endpoint.is_none() {
                return Err("at_end needs a power endpoint".into());
            }
            PowerAction::parse(a)
        }
        Some(other) => {
            return Err(format!(
                "at_end = {other:?}: use \"off\", \"cycle\" or \"reset\""
            ));
        }
    };
    Ok(HostPower {
        endpoint,
        wait,
        console: e.console,
        netconsole: e.netconsole,
        at_end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_end_names_a_change_of_a_host_with_power() {
        let cmd = "command = { status = [\"true\"], on = [\"true\"], off = [\"true\"] }";
        let f = BmcFile::parse(
            &format!("[[host]]\nid = \"a/b\"\n{cmd}\nat_end = \"cycle\"\n"),
            "f",
        )
        .unwrap();
        assert_eq!(f.get("a/b").unwrap().at_end, Some(PowerAction::Cycle));
        let e = BmcFile::parse(
            &format!("[[host]]\nid = \"a/b\"\n{cmd}\nat_end = \"on\"\n"),
            "f",
        )
        .unwrap_err();
        assert!(e.0.contains("use \"off\", \"cycle\" or \"reset\""), "{e}");
        let e = BmcFile::parse(
            "[[host]]\nid = \"a/b\"\nconsole = \"tcp:h:1\"\nat_end = \"off\"\n",
            "f",
        )
        .unwrap_err();
        assert!(e.0.contains("at_end needs a power endpoint"), "{e}");
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        let f = BmcFile::parse(
            "[[host]]\nid = \"a/b\"\nipmi = \"127.0.0.1:9623\"\nuser = \"admin\"\npassword = \"hunter2\"\n",
            "bmc.toml",
        )
        .unwrap();
        assert!(!format!("{f:?}").contains("hunter2"));
        assert_eq!(
            f.get("a/b").unwrap().endpoint.as_ref().unwrap().describe(),
            "ipmi admin@127.0.0.1:9623"
        );
    }

    #[test]
    fn errors_name_the_file_and_host() {
        let e = BmcFile::parse("[[host]]\nid = \"a/b\"\nuser = \"x\"\n", "bmc.toml").unwrap_err();
        assert_eq!(
            e.0,
            "bmc.toml: host[0] (a/b): name a power endpoint (redfish, ipmi or command), a console or a netconsole"
        );
        let e = BmcFile::parse("[[host]]\nid = \"a/b\"\nredfsh = \"x\"\n", "bmc.toml").unwrap_err();
        assert!(
            e.0.starts_with("bmc.toml:3: unknown field `redfsh`"),
            "{}",
            e.0
        );
        let e = BmcFile::parse(
            "[[host]]\nid = \"a/b\"\nredfish = \"http://h\"\nuser = \"u\"\n",
            "bmc.toml",
        )
        .unwrap_err();
        assert!(
            e.0.ends_with("redfish needs password or password_file"),
            "{}",
            e.0
        );
        let twice = "[[host]]\nid = \"a\"\ncommand = { status = [\"true\"], on = [\"true\"], off = [\"true\"] }\n";
        let e = BmcFile::parse(&format!("{twice}{twice}"), "bmc.toml").unwrap_err();
        assert!(e.0.ends_with("named twice"), "{}", e.0);
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("lh-bmc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bmc.toml");
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = BmcFile::load(&f).unwrap_err();
        assert!(
            e.0.contains("mode 0644") && e.0.contains("chmod 600"),
            "{}",
            e.0
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(BmcFile::load(&f).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

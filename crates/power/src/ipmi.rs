//! IPMI 2.0 over LAN, through ipmitool's `lanplus` interface (RMCP+: authenticated and, with the
//! default cipher suite, encrypted). The password reaches ipmitool in its environment
//! (`IPMI_PASSWORD` with `-E`), never on a command line that `ps` shows. States are read with
//! `chassis power status`; requests are `chassis power on|off|reset`.

use std::time::Duration;

use crate::command::run_bounded;
use crate::secret::Secret;
use crate::{PowerError, PowerState, Request};

/// An IPMI BMC.
#[derive(Debug, Clone)]
pub struct Ipmi {
    host: String,
    port: u16,
    user: String,
    password: Secret,
    timeout: Duration,
}

impl Ipmi {
    /// The BMC at `addr` (`HOST`, `HOST:PORT`, `[V6]:PORT`; port 623 by default).
    pub fn new(
        addr: &str,
        user: String,
        password: Secret,
        timeout: Duration,
    ) -> Result<Self, String> {
        let (host, port) = match addr.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
                h.trim_start_matches('[').trim_end_matches(']'),
                p.parse::<u16>()
                    .map_err(|_| format!("ipmi: bad port in {addr:?}"))?,
            ),
            _ => (addr, 623),
        };
        let plain = |s: &str| {
            !s.is_empty() && !s.starts_with('-') && s.chars().all(|c| c.is_ascii_graphic())
        };
        if !plain(host) {
            return Err(format!("ipmi: {addr:?} is not a host name or address"));
        }
        if !plain(&user) {
            return Err(format!(
                "user {user:?} must be printable ASCII without spaces, not starting with -"
            ));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            user,
            password,
            timeout,
        })
    }

    /// `ipmi USER@HOST:PORT`.
    pub fn describe(&self) -> String {
        if self.host.contains(':') {
            format!("ipmi {}@[{}]:{}", self.user, self.host, self.port)
        } else {
            format!("ipmi {}@{}:{}", self.user, self.host, self.port)
        }
    }

    fn error(&self, message: String) -> PowerError {
        PowerError {
            endpoint: self.describe(),
            message,
        }
    }

    /// Runs `ipmitool ... chassis power WHAT`; its standard output.
    fn chassis_power(&self, what: &str) -> Result<String, PowerError> {
        let secs = self.timeout.as_secs().max(1).to_string();
        let argv: Vec<String> = [
            "ipmitool",
            "-I",
            "lanplus",
            "-H",
            &self.host,
            "-p",
            &self.port.to_string(),
            "-U",
            &self.user,
            "-E",
            "-N",
            &secs,
            "-R",
            "2",
            "chassis",
            "power",
            what,
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        // ipmitool tries three times (-R 2), each waiting -N seconds, plus its session set-up.
        let limit = self.timeout * 4 + Duration::from_secs(2);
        let ran = run_bounded(&argv, &[("IPMI_PASSWORD", self.password.expose())], limit)
            .map_err(|e| self.error(e))?;
        if ran.code != Some(0) {
            return Err(self.error(format!(
                "ipmitool chassis power {what} failed (exit {}): {}",
                ran.code
                    .map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
                ran.complaint()
            )));
        }
        Ok(ran.stdout)
    }

    /// `chassis power status`: `Chassis Power is on|off`.
    pub fn state(&self) -> Result<PowerState, PowerError> {
        let out = self.chassis_power("status")?;
        parse_status(&out).ok_or_else(|| {
            self.error(format!(
                "ipmitool printed {}, not \"Chassis Power is on|off\"",
                crate::quote(out.trim(), 120)
            ))
        })
    }

    /// `chassis power on|off|reset`.
    pub fn send(&self, request: Request) -> Result<String, PowerError> {
        let what = match request {
            Request::On => "on",
            Request::Off => "off",
            Request::Reset => "reset",
        };
        let out = self.chassis_power(what)?;
        let said = out
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        if !said.starts_with("Chassis Power Control:") {
            return Err(self.error(format!(
                "ipmitool printed {}, not \"Chassis Power Control: ...\"",
                crate::quote(said, 120)
            )));
        }
        Ok(said.to_owned())
    }
}

/// The state in ipmitool's `Chassis Power is on|off`.
pub fn parse_status(out: &str) -> Option<PowerState> {
    out.lines().find_map(|l| match l.trim() {
        "Chassis Power is on" => Some(PowerState::On),
        "Chassis Power is off" => Some(PowerState::Off),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipmi(addr: &str) -> Result<Ipmi, String> {
        Ipmi::new(
            addr,
            "admin".into(),
            Secret::new("x"),
            Duration::from_secs(1),
        )
    }

    #[test]
    fn addresses_parse_and_never_pass_as_options() {
        assert_eq!(
            ipmi("10.0.0.1").unwrap().describe(),
            "ipmi admin@10.0.0.1:623"
        );
        assert_eq!(
            ipmi("bmc-1:9623").unwrap().describe(),
            "ipmi admin@bmc-1:9623"
        );
        assert_eq!(
            ipmi("[fd00::1]:624").unwrap().describe(),
            "ipmi admin@[fd00::1]:624"
        );
        assert_eq!(
            ipmi("fd00::1").unwrap().describe(),
            "ipmi admin@[fd00::1]:623"
        );
        assert!(ipmi("-oProxyCommand=x").is_err());
        assert!(ipmi("a b").is_err());
        assert!(ipmi("h:99999").is_err());
        assert!(Ipmi::new("h", "-U".into(), Secret::new("x"), Duration::from_secs(1)).is_err());
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status("Chassis Power is on\n"), Some(PowerState::On));
        assert_eq!(parse_status("Chassis Power is off"), Some(PowerState::Off));
        assert_eq!(parse_status("Chassis Power is maybe"), None);
    }
}

//! Redfish (DMTF DSP0266): the `PowerState` of a `ComputerSystem` and its `ComputerSystem.Reset`
//! action, over HTTP(S) with basic authentication on each request (no session to leak or expire).
//! The BMC is a peer that can lie: every path it hands back (the systems collection's members, the
//! reset action's target) must stay under `/redfish/v1/` on the same service, bodies are read up to
//! [`BODY_LIMIT`], and an answer that is not Redfish JSON is an error quoting it, never a state.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::secret::Secret;
use crate::{PowerError, PowerState, Request};

/// The most of a BMC's answer that is read.
pub const BODY_LIMIT: u64 = 1 << 20;

/// A Redfish service and the system it powers.
#[derive(Debug, Clone)]
pub struct Redfish {
    base: String,
    system: Option<String>,
    user: String,
    password: Secret,
    agent: ureq::Agent,
}

/// Whether a path a BMC gave may be followed: under `/redfish/v1/`, on the same service.
fn safe_path(p: &str) -> bool {
    p.starts_with("/redfish/v1/")
        && !p.contains("..")
        && !p.contains("//")
        && p.chars()
            .all(|c| c.is_ascii_graphic() && c != '?' && c != '#' && c != '\\')
}

impl Redfish {
    /// The service at `url` (`http://` or `https://` and a host, nothing else), powering `system`
    /// (a `/redfish/v1/Systems/...` path; found when the service has exactly one when `None`).
    /// `ca_file`: a PEM file of the CA certificates to trust instead of the public roots.
    pub fn new(
        url: &str,
        system: Option<&str>,
        user: String,
        password: Secret,
        ca_file: Option<&Path>,
        timeout: Duration,
    ) -> Result<Self, String> {
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| format!("redfish {url:?} must start with https:// or http://"))?;
        let host = rest.trim_end_matches('/');
        if host.is_empty()
            || host.contains(['/', '@', '?', '#'])
            || !host.chars().all(|c| c.is_ascii_graphic())
        {
            return Err(format!(
                "redfish {url:?} must be the service's scheme and host only (the path is \
                 /redfish/v1; credentials go in user and password)"
            ));
        }
        if let Some(s) = system
            && !safe_path(s)
        {
            return Err(format!(
                "system {s:?} must be a /redfish/v1/Systems/... path"
            ));
        }
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(timeout)
            .timeout(timeout)
            .redirects(0)
            .user_agent(concat!("longhaul/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = ca_file {
            builder = builder.tls_config(tls_trusting(ca)?);
        }
        Ok(Self {
            base: url.trim_end_matches('/').to_owned(),
            system: system.map(str::to_owned),
            user,
            password,
            agent: builder.build(),
        })
    }

    /// `redfish URL[SYSTEM]`.
    pub fn describe(&self) -> String {
        format!(
            "redfish {}{}",
            self.base,
            self.system.as_deref().unwrap_or("")
        )
    }

    fn error(&self, message: String) -> PowerError {
        PowerError {
            endpoint: self.describe(),
            message,
        }
    }

    fn auth(&self) -> String {
        let pair = format!("{}:{}", self.user, self.password.expose());
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }

    fn read(&self, what: &str, resp: ureq::Response) -> Result<(u16, Value), PowerError> {
        let status = resp.status();
        let mut body = Vec::new();
        resp.into_reader()
            .take(BODY_LIMIT + 1)
            .read_to_end(&mut body)
            .map_err(|e| self.error(format!("{what}: reading the answer: {e}")))?;
        if body.len() as u64 > BODY_LIMIT {
            return Err(self.error(format!("{what}: the answer is over {BODY_LIMIT} bytes")));
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok((status, Value::Null));
        }
        let v = serde_json::from_slice(&body).map_err(|_| {
            self.error(format!(
                "{what}: the answer (HTTP {status}) is not JSON: {}",
                crate::quote(&String::from_utf8_lossy(&body), 80)
            ))
        })?;
        Ok((status, v))
    }

    fn call(
        &self,
        what: &str,
        req: ureq::Request,
        body: Option<&Value>,
    ) -> Result<(u16, Value), PowerError> {
        let req = req
            .set("Authorization", &self.auth())
            .set("Accept", "application/json")
            .set("OData-Version", "4.0");
        let sent = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match sent {
            Ok(resp) => self.read(what, resp),
            Err(ureq::Error::Status(401 | 403, _)) => Err(self.error(format!(
                "{what}: the BMC refused the credentials of user {:?}",
                self.user
            ))),
            Err(ureq::Error::Status(code, resp)) => {
                let detail = self
                    .read(what, resp)
                    .ok()
                    .and_then(|(_, v)| redfish_message(&v))
                    .map(|m| format!(": {}", crate::quote(&m, 200)))
                    .unwrap_or_default();
                Err(self.error(format!("{what}: HTTP {code}{detail}")))
            }
            Err(ureq::Error::Transport(t)) => Err(self.error(format!("{what}: {t}"))),
        }
    }

    fn get(&self, path: &str) -> Result<Value, PowerError> {
        let what = format!("GET {path}");
        let (_, v) = self.call(&what, self.agent.get(&format!("{}{path}", self.base)), None)?;
        if !v.is_object() {
            return Err(self.error(format!("{what}: the answer is not a Redfish resource")));
        }
        Ok(v)
    }

    /// The system's path: the configured one, or the only member of `/redfish/v1/Systems`.
    fn system(&self) -> Result<String, PowerError> {
        if let Some(s) = &self.system {
            return Ok(s.clone());
        }
        let systems = self.get("/redfish/v1/Systems")?;
        the_system(&systems).map_err(|m| self.error(m))
    }

    /// GET the system; its `PowerState`.
    pub fn state(&self) -> Result<PowerState, PowerError> {
        let path = self.system()?;
        let sys = self.get(&path)?;
        power_state(&sys).map_err(|m| self.error(format!("GET {path}: {m}")))
    }

    /// POSTs `ComputerSystem.Reset` with the `ResetType` the request maps to (On or ForceOn,
    /// ForceOff, ForceRestart), to the target and within the allowable values the system lists.
    pub fn send(&self, request: Request) -> Result<String, PowerError> {
        let path = self.system()?;
        let sys = self.get(&path)?;
        let (target, reset_type) = reset_for(&sys, &path, request).map_err(|m| self.error(m))?;
        let what = format!("POST {target} ResetType {reset_type}");
        let body = serde_json::json!({ "ResetType": reset_type });
        let (status, _) = self.call(
            &what,
            self.agent.post(&format!("{}{target}", self.base)),
            Some(&body),
        )?;
        Ok(format!("ResetType {reset_type} accepted (HTTP {status})"))
    }
}

/// The one system of a systems collection (a BMC's answer), or why not.
pub fn the_system(systems: &Value) -> Result<String, String> {
    let members: Vec<&str> = systems["Members"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["@odata.id"].as_str()).collect())
        .unwrap_or_default();
    match members.as_slice() {
        [one] if safe_path(one) => Ok((*one).to_owned()),
        [one] => Err(format!(
            "the systems collection names {}, not a /redfish/v1/ path: refused",
            crate::quote(one, 120)
        )),
        [] => Err("the systems collection is empty".into()),
        many => Err(format!(
            "the service has {} systems ({}): name one with system = \"...\"",
            many.len(),
            many.iter()
                .take(8)
                .map(|m| crate::quote(m, 80))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The `PowerState` of a system (a BMC's answer), or why there is none.
pub fn power_state(sys: &Value) -> Result<PowerState, String> {
    match sys["PowerState"].as_str() {
        Some("On") => Ok(PowerState::On),
        Some("Off") => Ok(PowerState::Off),
        Some("PoweringOn") => Ok(PowerState::PoweringOn),
        Some("PoweringOff") => Ok(PowerState::PoweringOff),
        other => Err(format!(
            "PowerState is {}, not On, Off, PoweringOn or PoweringOff",
            other.map_or_else(
                || crate::quote(&sys["PowerState"].to_string(), 40),
                |s| crate::quote(s, 40)
            )
        )),
    }
}

/// Where to POST the reset of the system at `path` (a BMC's answer) and which `ResetType` carries
/// out `request` there, or why none can.
pub fn reset_for(
    sys: &Value,
    path: &str,
    request: Request,
) -> Result<(String, &'static str), String> {
    let action = &sys["Actions"]["#ComputerSystem.Reset"];
    let target = match action["target"].as_str() {
        Some(t) if safe_path(t) => t.to_owned(),
        Some(t) => {
            return Err(format!(
                "the reset action's target {} is not a /redfish/v1/ path: refused",
                crate::quote(t, 120)
            ));
        }
        None => format!("{path}/Actions/ComputerSystem.Reset"),
    };
    let wanted: &[&'static str] = match request {
        Request::On => &["On", "ForceOn"],
        Request::Off => &["ForceOff"],
        Request::Reset => &["ForceRestart"],
    };
    let allowed: Option<Vec<&str>> = action["ResetType@Redfish.AllowableValues"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect());
    let reset_type = match &allowed {
        None => wanted[0],
        Some(list) => wanted
            .iter()
            .copied()
            .find(|w| list.contains(w))
            .ok_or_else(|| {
                format!(
                    "the system allows ResetType {} only, none of {}",
                    list.iter()
                        .take(12)
                        .map(|m| crate::quote(m, 30))
                        .collect::<Vec<_>>()
                        .join(", "),
                    wanted.join(", ")
                )
            })?,
    };
    Ok((target, reset_type))
}

/// The message of a Redfish error body (`error.message`, or its first extended message).
fn redfish_message(v: &Value) -> Option<String> {
    let e = &v["error"];
    e["@Message.ExtendedInfo"][0]["Message"]
        .as_str()
        .or_else(|| e["message"].as_str())
        .map(str::to_owned)
}

/// A TLS configuration that trusts the CA certificates in the PEM file `ca` (BMCs mostly carry
/// certificates of their vendor's or the site's own CA).
fn tls_trusting(ca: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(ca).map_err(|e| format!("ca_file {}: {e}", ca.display()))?;
    for c in certs {
        let c = c.map_err(|e| format!("ca_file {}: {e}", ca.display()))?;
        roots
            .add(c)
            .map_err(|e| format!("ca_file {}: {e}", ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("ca_file {}: no certificate in it", ca.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_from_a_bmc_stay_on_the_service() {
        assert!(safe_path("/redfish/v1/Systems/1"));
        assert!(!safe_path("http://evil/redfish/v1/Systems/1"));
        assert!(!safe_path("/redfish/v1/../../etc/passwd"));
        assert!(!safe_path("//evil/redfish/v1/"));
        assert!(!safe_path("/redfish/v1/Systems/1?x=1"));
        assert!(!safe_path("/other"));
    }

    #[test]
    fn urls_are_a_scheme_and_a_host() {
        let new = |u: &str| {
            Redfish::new(
                u,
                None,
                "u".into(),
                Secret::new("p"),
                None,
                Duration::from_secs(1),
            )
        };
        assert_eq!(
            new("http://127.0.0.1:8000/").unwrap().describe(),
            "redfish http://127.0.0.1:8000"
        );
        assert!(new("ftp://h").is_err());
        assert!(new("https://u:p@h").is_err());
        assert!(new("https://h/redfish/v1").is_err());
        assert!(new("https://").is_err());
    }
}

/// Hostile BMCs: a plain TCP server per case that answers each request with a canned response
/// (or nothing), so the client meets what a broken or lying BMC sends.
#[cfg(test)]
mod hostile {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::time::Instant;

    use super::*;
    use crate::{Endpoint, PowerAction, Wait};

    /// Serves `answer(path)` to every request; `None` keeps the connection open and silent.
    fn bmc(answer: fn(&str) -> Option<String>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { continue };
                std::thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut line = String::new();
                    let _ = r.read_line(&mut line);
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    match answer(&path) {
                        Some(a) => {
                            let _ = conn.write_all(a.as_bytes());
                        }
                        None => std::thread::sleep(Duration::from_secs(30)),
                    }
                });
            }
        });
        format!("http://{addr}")
    }

    fn ok(body: &str) -> Option<String> {
        Some(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    }

    fn endpoint(url: &str) -> Endpoint {
        Endpoint::Redfish(
            Redfish::new(
                url,
                None,
                "admin".into(),
                Secret::new("pw"),
                None,
                Duration::from_secs(1),
            )
            .unwrap(),
        )
    }

    const WAIT: Wait = Wait {
        limit: Duration::from_millis(400),
        poll: Duration::from_millis(50),
    };

    #[test]
    fn garbage_is_an_error_quoting_it_never_a_state() {
        let url = bmc(|_| ok("<html>\x1b[2J login </html>"));
        let e = endpoint(&url).state().unwrap_err();
        assert!(
            e.message
                .contains("is not JSON: \"<html>\\u{1b}[2J login </html>\""),
            "{e}"
        );
        assert_eq!(e.endpoint, format!("redfish {url}"));
    }

    #[test]
    fn a_bmc_that_never_answers_times_out() {
        let url = bmc(|_| None);
        let started = Instant::now();
        let e = endpoint(&url).state().unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(e.message.starts_with("GET /redfish/v1/Systems: "), "{e}");
    }

    #[test]
    fn an_endless_answer_is_cut_off() {
        // Headers, then a body that never ends: the client stops at BODY_LIMIT.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[",
            );
            let chunk = [b' '; 65536];
            while c.write_all(&chunk).is_ok() {}
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(e.message.contains("over 1048576 bytes"), "{e}");
    }

    #[test]
    fn paths_a_bmc_hands_back_must_stay_on_it() {
        let url = bmc(|p| match p {
            "/redfish/v1/Systems" => {
                ok(r#"{"Members": [{"@odata.id": "http://169.254.169.254/latest/meta-data"}]}"#)
            }
            _ => ok("{}"),
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(
            e.message.contains("not a /redfish/v1/ path: refused"),
            "{e}"
        );
        let url = bmc(|p| match p {
            "/redfish/v1/Systems" => ok(r#"{"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]}"#),
            _ => ok(
                r##"{"PowerState": "On", "Actions": {"#ComputerSystem.Reset": {"target": "https://evil.example/reset"}}}"##,
            ),
        });
        let e = endpoint(&url).run(PowerAction::Off, WAIT).unwrap_err();
        assert!(
            e.message
                .contains("reset action's target \"https://evil.example/reset\""),
            "{e}"
        );
    }

    #[test]
    fn a_bmc_that_lies_about_the_outcome_fails_the_action() {
        // Accepts ForceOff but keeps reporting On; the action fails instead of claiming off.
        let url = bmc(|p| match p {
            "/redfish/v1/Systems" => ok(r#"{"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]}"#),
            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset" => {
                Some("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".into())
            }
            _ => ok(r#"{"PowerState": "On"}"#),
        });
        let e = endpoint(&url).run(PowerAction::Off, WAIT).unwrap_err();
        assert!(
            e.message
                .contains("asked for off, but the BMC still reports on"),
            "{e}"
        );
        // A state Redfish does not define is no state.
        let url = bmc(|p| match p {
            "/redfish/v1/Systems" => ok(r#"{"Members": [{"@odata.id": "/redfish/v1/Systems/1"}]}"#),
            _ => ok(r#"{"PowerState": "Exploded"}"#),
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(e.message.contains("PowerState is \"Exploded\""), "{e}");
    }

    #[test]
    fn refusals_and_errors_are_named() {
        let url = bmc(|_| {
            Some(
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .into(),
            )
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(
            e.message
                .contains("refused the credentials of user \"admin\""),
            "{e}"
        );
        assert!(!e.to_string().contains("pw"));
        let url = bmc(|_| {
            let body = r#"{"error": {"message": "General error", "@Message.ExtendedInfo": [{"Message": "The system is in maintenance."}]}}"#;
            Some(format!(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ))
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(
            e.message
                .ends_with("HTTP 503: \"The system is in maintenance.\""),
            "{e}"
        );
        let url = bmc(|p| match p {
            "/redfish/v1/Systems" => ok(
                r#"{"Members": [{"@odata.id": "/redfish/v1/Systems/1"}, {"@odata.id": "/redfish/v1/Systems/2"}]}"#,
            ),
            _ => ok("{}"),
        });
        let e = endpoint(&url).state().unwrap_err();
        assert!(e.message.contains("has 2 systems"), "{e}");
    }
}

//! The testbed service's client side, shared by the `longhaul testbed` commands that talk to it:
//! where it is and which token to send ([`ClientArgs`]), and one call with its errors made readable.

use anyhow::bail;
use clap::Args;
use longhaul_testbed::api::ErrorBody;

/// Where the client finds the service.
#[derive(Args, Debug)]
#[command(mut_arg("json", |a| a.help("Print the service's JSON instead of a summary")))]
pub(super) struct ClientArgs {
    /// Service URL.
    #[arg(
        long,
        env = "LONGHAUL_TESTBED_URL",
        default_value = "http://127.0.0.1:7068"
    )]
    pub(super) server: String,
    /// API token (`longhaul testbed token add`).
    #[arg(long, env = "LONGHAUL_TESTBED_TOKEN", hide_env_values = true)]
    pub(super) token: String,
    #[command(flatten)]
    pub(super) json: crate::args::Json,
}

/// The service's answer: the body on 2xx; the error body's message otherwise.
pub(super) fn call<B: serde::Serialize>(
    req: ureq::Request,
    body: Option<&B>,
) -> anyhow::Result<String> {
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

pub(super) fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_secs(30))
        .build()
}

pub(super) fn url(c: &ClientArgs, path: &str) -> String {
    format!("{}{path}", c.server.trim_end_matches('/'))
}

//! `longhaul server`.

use std::net::IpAddr;
use std::process::ExitCode;

use anyhow::Context;
use longhaul_engine::{Server, ServerConfig, DEFAULT_PORT};

/// Flags of `longhaul server`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Serves control and data connections on one port (default 7067), IPv6 and IPv4 \
(dual-stack) unless -B picks one address. Each test gets its own threads; a bad client is logged and \
dropped without disturbing the others. Run as root so tests can ask for windows beyond \
net.core.rmem_max (SO_RCVBUFFORCE).")]
pub(crate) struct ServerArgs {
    /// Port for control and data connections.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Bind to this address only (default: every IPv6 and IPv4 address).
    #[arg(short = 'B', long)]
    bind: Option<IpAddr>,
    /// Most tests served at once; the next client is told "busy, N tests running".
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_tests: u32,
    /// Log level (error, warn, info, debug); RUST_LOG overrides.
    #[arg(long, default_value = "info")]
    log: String,
}

pub(crate) fn run(a: &ServerArgs) -> anyhow::Result<ExitCode> {
    crate::init_logging(&a.log);
    let cfg = ServerConfig { bind: a.bind, port: a.port, max_tests: a.max_tests, ..Default::default() };
    let server = Server::bind(cfg).context("cannot start the server")?;
    // Tell scripts where we are (useful with -p 0).
    eprintln!("longhaul server listening on {} (max {} tests)", server.local_addr(), a.max_tests);
    server.run()?;
    Ok(ExitCode::SUCCESS)
}

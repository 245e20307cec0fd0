//! Where a client connects: a host name resolved to the addresses of the family the user asked for
//! (`-4`/`-6`) and that a bound local address (`-B`) can reach. Tests and transfers resolve the same way.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::EngineError;

/// Which address family to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// Whatever the name resolves to first.
    #[default]
    Any,
    /// IPv4 only (`-4`).
    V4,
    /// IPv6 only (`-6`).
    V6,
}

/// The addresses of `host:port` of `family`, in the resolver's order, keeping only those of `bind`'s
/// family when a local address is bound; an error names the host when none is left.
pub(crate) fn resolve(
    host: &str,
    port: u16,
    family: Family,
    bind: Option<IpAddr>,
) -> Result<Vec<SocketAddr>, EngineError> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| EngineError::Resolve(format!("{host}: {e}")))?
        .filter(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .filter(|a| bind.is_none_or(|b| b.is_ipv4() == a.is_ipv4()))
        .collect();
    if addrs.is_empty() {
        return Err(EngineError::Resolve(format!(
            "{host}: no address of the requested family"
        )));
    }
    Ok(addrs)
}

/// A TCP connection to the first address of `host:port` (of `family`) that accepts within
/// `timeout`; the error names the last address tried, with `hint` (what to check) after it.
pub(crate) fn connect_any(
    host: &str,
    port: u16,
    family: Family,
    timeout: Duration,
    hint: &'static str,
) -> Result<TcpStream, EngineError> {
    let mut last = None;
    for a in resolve(host, port, family, None)? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(source) => {
                last = Some(EngineError::Connect {
                    target: a.to_string(),
                    source,
                    hint,
                })
            }
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// The unspecified address of `peer`'s family (0.0.0.0 or ::), to bind a socket for it.
pub(crate) fn unspecified(peer: SocketAddr) -> IpAddr {
    match peer {
        SocketAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

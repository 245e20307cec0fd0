//! `--encrypt`: TLS 1.3 (rustls, ring's AES-GCM and ChaCha20-Poly1305) on every connection of a test,
//! a transfer or a controller's job. `docs/encryption.md` is the user's account; this is the how.
//!
//! **On the wire.** An encrypted connection opens with a plaintext preamble of kind `Tls`
//! (`longhaul_proto::wire::Preamble::tls`), then the TLS handshake, then everything a plain
//! connection carries (its own preamble first) inside TLS. Any server accepts both; one started
//! with `--require-encryption` answers a plaintext control, transfer or job connection with an error
//! naming the fix and drops plaintext data connections.
//!
//! **Who is who.** A server presents the certificate in its `--tls-cert`/`--tls-key` files, or, without
//! them, one self-signed certificate made when it starts. A client checks that certificate against
//! its `--tls-ca` file (names as in any TLS client: the host as typed) or, without one, accepts any
//! certificate whose holder proves its key, and then relies on what authenticates the conversation
//! inside: a transfer's and a job's key proofs are bound to the TLS session (`Channel::binding` is
//! folded into their nonces, `longhaul_transfer::auth::bind_nonce`), so a relay in the middle, which holds two TLS sessions
//! with two different bindings, fails the proofs. A server with `--tls-client-ca` asks every client
//! for a certificate signed by that CA (mutual TLS). A session's other connections (a test's or a
//! transfer's data connections) accept only the certificate its control connection was shown
//! ([`Pinned`]), so they cannot be intercepted either; they then present the session's cookie and,
//! for a transfer, its proof, inside TLS.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use longhaul_proto::wire::Preamble;

use crate::EngineError;
use crate::channel::Channel;
use crate::control::is_timeout;

/// A certificate chain and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The certificate chain (PEM), the end-entity certificate first.
    pub cert: PathBuf,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// A server's TLS settings.
#[derive(Debug, Clone, Default)]
pub struct ServerTlsConfig {
    /// The certificate to present; `None`: a self-signed one made at start.
    pub identity: Option<Identity>,
    /// Ask every client for a certificate signed by a CA in this PEM file (mutual TLS); implies
    /// `required`.
    pub client_ca: Option<PathBuf>,
    /// Refuse plaintext connections.
    pub required: bool,
}

/// A client's `--encrypt` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsConfig {
    /// Check the server's certificate against the CAs in this PEM file (and its name against the
    /// host as given); `None`: any certificate, the conversation's key proofs authenticate.
    pub ca: Option<PathBuf>,
    /// The certificate this client presents (to a server with `--tls-client-ca`).
    pub identity: Option<Identity>,
}

/// A server's TLS, ready to accept.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    required: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("required", &self.required)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ServerTls {
    /// Loads the files (or makes the self-signed certificate) and builds the TLS 1.3 configuration.
    pub fn new(cfg: &ServerTlsConfig) -> Result<Self, EngineError> {
        let (chain, key) = match &cfg.identity {
            Some(id) => load_identity(id)?,
            None => self_signed()?,
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| EngineError::Tls(e.to_string()))?;
        let builder = match &cfg.client_ca {
            Some(ca) => {
                let roots = load_roots(ca)?;
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| EngineError::Tls(format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| EngineError::Tls(format!("the server's certificate and key: {e}")))?;
        // No resumption: every connection is a full handshake, and nothing waits unread in a
        // one-way data connection's socket.
        config.send_tls13_tickets = 0;
        Ok(Self {
            config: Arc::new(config),
            // Only clients with a certificate: a plaintext client has none.
            required: cfg.required || cfg.client_ca.is_some(),
        })
    }

    /// The rustls configuration, for the QUIC transport's handshakes.
    pub(crate) fn rustls_config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    /// Whether plaintext connections are refused.
    pub fn required(&self) -> bool {
        self.required
    }

    /// Runs the server's handshake on a connection whose `Tls` preamble was read, all of it by
    /// `deadline`.
    pub(crate) fn accept(
        &self,
        sock: TcpStream,
        deadline: Instant,
    ) -> Result<Channel, EngineError> {
        let conn = rustls::ServerConnection::new(Arc::clone(&self.config))
            .map_err(|e| EngineError::Tls(e.to_string()))?;
        let mut conn = rustls::Connection::Server(conn);
        handshake(&mut conn, &sock, deadline)?;
        Channel::tls(sock, conn).map_err(|e| EngineError::io("set up TLS", e))
    }
}

/// A client's TLS for the first connection of a session.
pub(crate) struct Connector {
    verify: Arc<dyn ServerCertVerifier>,
    /// The host's name is checked only against a CA.
    check_name: bool,
    identity: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
}

/// A client's TLS for a session's further connections: only the certificate the first one saw.
#[derive(Clone)]
pub(crate) struct Pinned {
    config: Arc<rustls::ClientConfig>,
}

impl Connector {
    /// Loads the files of `cfg`.
    pub(crate) fn new(cfg: &ClientTlsConfig) -> Result<Self, EngineError> {
        let verify: Arc<dyn ServerCertVerifier> = match &cfg.ca {
            Some(ca) => rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(load_roots(ca)?),
                provider(),
            )
            .build()
            .map_err(|e| EngineError::Tls(format!("{}: {e}", ca.display())))?,
            None => Arc::new(AnyCert::new(None)),
        };
        let identity = cfg
            .identity
            .as_ref()
            .map(load_identity)
            .transpose()?
            .map(|(c, k)| (c, Arc::new(k)));
        Ok(Self {
            verify,
            check_name: cfg.ca.is_some(),
            identity,
        })
    }

    fn config(
        &self,
        verify: Arc<dyn ServerCertVerifier>,
    ) -> Result<rustls::ClientConfig, EngineError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| EngineError::Tls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verify);
        match &self.identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| EngineError::Tls(format!("the client's certificate and key: {e}"))),
            None => Ok(builder.with_no_client_auth()),
        }
    }

    /// Opens TLS on a connected socket to `host` (sends the `Tls` preamble, then the handshake,
    /// all within `timeout`). Returns the channel and the connector for the session's further
    /// connections, pinned to the certificate this server showed.
    pub(crate) fn connect(
        &self,
        sock: TcpStream,
        host: &str,
        timeout: Duration,
    ) -> Result<(Channel, Pinned), EngineError> {
        let name = if self.check_name {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            ServerName::try_from(host.to_string()).map_err(|_| {
                EngineError::Tls(format!("{host:?} is not a name a certificate can hold"))
            })?
        } else {
            ServerName::try_from("longhaul").expect("a valid DNS name")
        };
        let config = Arc::new(self.config(Arc::clone(&self.verify))?);
        let channel = client_handshake(&config, name, sock, timeout)?;
        let cert = channel
            .peer_certificate()
            .ok_or_else(|| EngineError::Tls("the server presented no certificate".into()))?;
        let pinned = Pinned {
            config: Arc::new(self.config(Arc::new(AnyCert::new(Some(cert))))?),
        };
        Ok((channel, pinned))
    }
}

impl Pinned {
    /// The rustls configuration, for the QUIC transport's handshakes.
    pub(crate) fn rustls_config(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// A client configuration that accepts any server certificate whose holder proves its key:
    /// what a session without `--encrypt` has for the QUIC transport (encrypted, and as
    /// unauthenticated as a plain test).
    pub(crate) fn any() -> Result<Self, EngineError> {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| EngineError::Tls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert::new(None)))
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// Opens TLS on one of the session's further connections.
    pub(crate) fn connect(
        &self,
        sock: TcpStream,
        timeout: Duration,
    ) -> Result<Channel, EngineError> {
        let name = ServerName::try_from("longhaul").expect("a valid DNS name");
        client_handshake(&self.config, name, sock, timeout)
    }
}

fn client_handshake(
    config: &Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    sock: TcpStream,
    timeout: Duration,
) -> Result<Channel, EngineError> {
    let deadline = Instant::now() + timeout;
    std::io::Write::write_all(&mut &sock, &Preamble::tls().encode())
        .map_err(|e| EngineError::io("send the TLS preamble", e))?;
    let conn = rustls::ClientConnection::new(Arc::clone(config), name)
        .map_err(|e| EngineError::Tls(e.to_string()))?;
    let mut conn = rustls::Connection::Client(conn);
    handshake(&mut conn, &sock, deadline)?;
    Channel::tls(sock, conn).map_err(|e| EngineError::io("set up TLS", e))
}

/// Drives a handshake to its end by `deadline` (a whole-step deadline: a peer trickling its
/// handshake is dropped when the time is up).
fn handshake(
    conn: &mut rustls::Connection,
    sock: &TcpStream,
    deadline: Instant,
) -> Result<(), EngineError> {
    let peer = sock
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(EngineError::Timeout(format!(
                "the TLS handshake with {peer}"
            )));
        }
        sock.set_read_timeout(Some(left)).ok();
        sock.set_write_timeout(Some(left)).ok();
        match conn.complete_io(&mut &*sock) {
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(EngineError::Tls(format!(
                    "{peer} closed the connection during the TLS handshake (does it refuse \
                     encryption, or our certificate?)"
                )));
            }
            Err(e) => {
                tell_and_close(conn, sock);
                return Err(EngineError::Tls(format!("handshake with {peer}: {e}")));
            }
        }
    }
    // Finish what the handshake left to send (a client's Finished).
    while conn.wants_write() {
        conn.write_tls(&mut &*sock)
            .map_err(|e| EngineError::Tls(format!("handshake with {peer}: {e}")))?;
    }
    sock.set_read_timeout(None).ok();
    sock.set_write_timeout(None).ok();
    Ok(())
}

/// After a failed handshake: sends the alert rustls holds (why: an unknown CA, a missing client
/// certificate), then closes gracefully, reading what the peer still sends for a moment. Closing
/// with unread input would make the kernel answer with a reset, and a TLS 1.3 client, whose side
/// of the handshake ended before the server checked its certificate, would see "broken pipe"
/// instead of the alert.
fn tell_and_close(conn: &mut rustls::Connection, sock: &TcpStream) {
    let _ = sock.set_write_timeout(Some(Duration::from_millis(200)));
    while conn.wants_write() {
        if conn.write_tls(&mut &*sock).is_err() {
            break;
        }
    }
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut sink = [0u8; 4096];
    while let Some(left) = deadline
        .checked_duration_since(Instant::now())
        .filter(|l| !l.is_zero())
    {
        let _ = sock.set_read_timeout(Some(left));
        match std::io::Read::read(&mut &*sock, &mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// Accepts any server certificate (or only `pinned`), checking only that the server holds its key.
#[derive(Debug)]
struct AnyCert {
    pinned: Option<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl AnyCert {
    fn new(pinned: Option<CertificateDer<'static>>) -> Self {
        Self {
            pinned,
            algorithms: provider().signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pinned {
            Some(p) if p.as_ref() != end_entity.as_ref() => Err(rustls::Error::General(
                "this server's certificate changed within one session".into(),
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Only TLS 1.3 is offered, so this is never asked.
        Err(rustls::Error::General("TLS 1.2 is not offered".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn load_identity(
    id: &Identity,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), EngineError> {
    let chain = load_certs(&id.cert)?;
    let key = PrivateKeyDer::from_pem_file(&id.key).map_err(|e| {
        EngineError::Tls(format!("{}: no private key read ({e})", id.key.display()))
    })?;
    Ok((chain, key))
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, EngineError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| EngineError::Tls(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(EngineError::Tls(format!(
            "{}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

fn load_roots(path: &Path) -> Result<RootCertStore, EngineError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(path)? {
        roots
            .add(c)
            .map_err(|e| EngineError::Tls(format!("{}: {e}", path.display())))?;
    }
    Ok(roots)
}

/// A fresh self-signed certificate (ECDSA P-256) for a server without `--tls-cert`.
fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), EngineError> {
    let made = rcgen::generate_simple_self_signed(vec!["longhaul".to_string()])
        .map_err(|e| EngineError::Tls(format!("make a self-signed certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    Ok((vec![made.cert.der().clone()], key))
}

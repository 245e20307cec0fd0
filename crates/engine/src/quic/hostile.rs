//! Flows against hostile QUIC peers: quinn's own client with settings no longhaul client sends,
//! behind a relay that can stop passing the server's packets.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ClientConfig, TransportConfig, VarInt};

use super::flow::{ALPN, Counters, FlowPlan, QuicListener, endpoint, runtime};
use crate::tls::{Pinned, ServerTls, ServerTlsConfig};

/// A UDP relay on loopback: everything from the client goes to the server; the server's packets
/// go back only while `open`.
struct Relay {
    addr: SocketAddr,
    open: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(server: SocketAddr) -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let open = Arc::new(AtomicBool::new(true));
        let done = Arc::new(AtomicBool::new(false));
        let (o, d) = (open.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            let mut client = None;
            while !d.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if from == server {
                    if let Some(c) = client.filter(|_| o.load(Ordering::Relaxed)) {
                        let _ = sock.send_to(&buf[..n], c);
                    }
                } else {
                    client = Some(from);
                    let _ = sock.send_to(&buf[..n], server);
                }
            }
        });
        Self {
            addr,
            open,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A client announcing the largest flow-control windows QUIC can express (2^62 − 1 bytes, for
/// the connection and each stream) and then acknowledging nothing: the server's sender holds
/// no more than its own bound (three congestion windows and a short backlog), not the flow's
/// 256 MiB window, nor the peer's absurd one. Without that bound (the send window left at the
/// flow's), the sender's stream took 256 MiB in the first second.
#[test]
fn a_peer_announcing_absurd_windows_gets_no_more_than_the_senders_own_bound() {
    let rt = runtime().unwrap();
    let plan = FlowPlan {
        window: 256 << 20,
        controller: "cubic".into(),
        initial_rtt: Duration::from_millis(1),
        max_udp_payload: 1452,
        privileged: false,
        bidi: false,
    };
    let server_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(server_sock.local_addr().unwrap());
    server_sock.connect(relay.addr).unwrap();
    let tls = ServerTls::new(&ServerTlsConfig::default()).unwrap();
    let listener = QuicListener::listen(server_sock, tls.rustls_config(), &plan, 0, true).unwrap();

    let mut crypto = (**Pinned::any().unwrap().rustls_config()).clone();
    crypto.alpn_protocols = vec![ALPN.to_vec()];
    let mut transport = TransportConfig::default();
    transport
        .receive_window(VarInt::MAX)
        .stream_receive_window(VarInt::MAX);
    let mut config = ClientConfig::new(Arc::new(QuicClientConfig::try_from(crypto).unwrap()));
    config.transport_config(Arc::new(transport));
    let client = endpoint(
        rt,
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        None,
        plan.max_udp_payload,
    )
    .unwrap();
    let connecting = {
        let _inside = rt.enter();
        client.connect_with(config, relay.addr, "longhaul").unwrap()
    };
    let conn = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), connecting).await })
        .expect("handshake in time")
        .expect("handshake");
    let (flow, _) = listener.established(Duration::from_secs(10)).unwrap();
    // The handshake is done both ways: from now on the client hears nothing, so it
    // acknowledges nothing.
    relay.open.store(false, Ordering::Relaxed);

    let stop = AtomicBool::new(false);
    let bytes = AtomicU64::new(0);
    let payload = vec![0x5a_u8; 1 << 20];
    let started = Instant::now();
    let (held, took) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let st = Counters {
                stop: &stop,
                bytes: &bytes,
            };
            flow.send_loop(&st, &payload, 128 << 10, None)
        });
        std::thread::sleep(Duration::from_secs(3));
        let held = bytes.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        sender.join().unwrap().unwrap();
        (held, started.elapsed())
    });
    println!(
        "the sender's stream took {held} bytes from a peer that acknowledged none; ended in {took:?}"
    );
    assert!(held > 0, "nothing was written");
    assert!(
        held <= 8 << 20,
        "{held} bytes held for a peer that acknowledged nothing (the flow's window is {})",
        plan.window
    );
    // A stop is not held up by the silent peer past the wait for its acknowledgements.
    assert!(took < Duration::from_secs(3 + 4), "{took:?}");
    drop(conn);
    drop(flow);
    drop(client);
}

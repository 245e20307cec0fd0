use super::*;
use crate::ip::ip;
use crate::netns::run_in_netns;
use crate::testutil::{TestNetns, netns_privileges};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

const DEV: &str = "lh-t0";
/// `VIRTIO_NET_HDR_GSO_TCPV4` (include/uapi/linux/virtio_net.h).
const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_ECN`.
const GSO_ECN: u8 = 0x80;

#[test]
fn ioctl_numbers_match_if_tun_h() {
    // Values as printed by a C program including <linux/if_tun.h> on x86_64
    // and aarch64 (the asm-generic ioctl encoding).
    assert_eq!(TUNSETIFF, 0x4004_54ca);
    assert_eq!(TUNSETOFFLOAD, 0x4004_54d0);
    assert_eq!(TUNSETVNETHDRSZ, 0x4004_54d8);
}

#[test]
fn options_select_flags_and_offloads() {
    let plain = TunOptions::default();
    assert_eq!(plain.iff_flags(), 0x1001);
    assert_eq!(plain.offloads(), 0);
    let vnet = TunOptions::vnet();
    assert_eq!(vnet.iff_flags(), 0x5001);
    assert_eq!(vnet.offloads(), 0x07);
    let all = TunOptions {
        vnet_hdr: true,
        multi_queue: true,
        tso_ecn: true,
        udp_gso: true,
    };
    assert_eq!(all.iff_flags(), 0x5101);
    assert_eq!(all.offloads(), 0x6f);
}

#[test]
fn rejects_bad_names_and_options_before_any_call() {
    let err = Tun::open("lh-0123456789abc", TunOptions::vnet()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "ioctl(TUNSETIFF, \"lh-0123456789abc\", flags 0x5001): interface name of 16 bytes \
         (at most 15, IFNAMSIZ - 1, without NUL)"
    );
    let err = Tun::open("lh-a\0b", TunOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let opts = TunOptions {
        udp_gso: true,
        ..TunOptions::default()
    };
    let err = Tun::open("lh-x", opts).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("tso_ecn and udp_gso need vnet_hdr"),
        "{err}"
    );
}

fn up_with_peer(ns: &TestNetns, local: &str, peer: &str) {
    let (ns, local32) = (ns.name(), format!("{local}/32"));
    ip(&["-n", ns, "addr", "add", &local32, "peer", peer, "dev", DEV]).unwrap();
    ip(&["-n", ns, "link", "set", DEV, "up", "mtu", "1500"]).unwrap();
}

#[test]
fn creates_device_in_target_namespace_and_removes_it_on_drop() {
    if !netns_privileges() {
        return;
    }
    let ns = TestNetns::new("dev").unwrap();
    let opts = TunOptions {
        vnet_hdr: true,
        multi_queue: true,
        tso_ecn: true,
        udp_gso: true,
    };
    let q0 = run_in_netns(&ns.path(), || Tun::open(DEV, opts))
        .unwrap()
        .unwrap();
    assert_eq!(q0.name(), DEV);
    assert!(q0.vnet_hdr());
    let q1 = run_in_netns(&ns.path(), || Tun::open(DEV, opts))
        .unwrap()
        .unwrap();
    let shown = ip(&["-n", ns.name(), "-d", "link", "show", "dev", DEV]).unwrap();
    println!("{shown}");
    assert!(shown.contains("vnet_hdr on"), "{shown}");
    assert!(shown.contains("multi_queue"), "{shown}");
    assert!(shown.contains("numqueues 2"), "{shown}");
    // A single-queue open of the multi-queue device is refused.
    let err = run_in_netns(&ns.path(), || Tun::open(DEV, TunOptions::vnet()))
        .unwrap()
        .unwrap_err();
    println!("single-queue open of a multi-queue device: {err}");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    // `%d` names are filled in by the kernel.
    let auto = run_in_netns(&ns.path(), || Tun::open("lh-q%d", TunOptions::default()))
        .unwrap()
        .unwrap();
    assert_eq!(auto.name(), "lh-q0");
    drop((q0, q1, auto));
    // The kernel unregisters the device after the last queue closes, but not always before close()
    // returns (netdev teardown is deferred; seen under load in CI): wait for it to go.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let err = loop {
        match ip(&["-n", ns.name(), "link", "show", "dev", DEV]) {
            Err(e) => break e,
            Ok(shown) if std::time::Instant::now() > deadline => {
                panic!("{DEV} still there 10 s after its last queue closed: {shown}")
            }
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn single_queue_device_refuses_a_second_queue() {
    if !netns_privileges() {
        return;
    }
    let ns = TestNetns::new("busy").unwrap();
    let (first, second) = run_in_netns(&ns.path(), || {
        (
            Tun::open(DEV, TunOptions::default()),
            Tun::open(DEV, TunOptions::default()),
        )
    })
    .unwrap();
    let _first = first.unwrap();
    let err = second.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EBUSY), "{err}");
    assert!(
        err.to_string()
            .starts_with("ioctl(TUNSETIFF, \"lh-t0\", flags 0x1001): "),
        "{err}"
    );
}

/// Internet checksum (RFC 1071) of `data`.
fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4/UDP packet without UDP checksum (allowed for IPv4).
fn udp4_packet(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let (SocketAddr::V4(src), SocketAddr::V4(dst)) = (src, dst) else {
        panic!("IPv4 only");
    };
    let total = 20 + 8 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64; // TTL
    p[9] = 17; // UDP
    p[12..16].copy_from_slice(&src.ip().octets());
    p[16..20].copy_from_slice(&dst.ip().octets());
    let csum = inet_checksum(&p[..20]);
    p[10..12].copy_from_slice(&csum.to_be_bytes());
    p[20..22].copy_from_slice(&src.port().to_be_bytes());
    p[22..24].copy_from_slice(&dst.port().to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    p
}

/// Reads records until an IPv4 one arrives (IPv6 router solicitations and
/// MLD reports appear after link-up), returning the whole record.
fn read_ipv4_record(tun: &Tun) -> Vec<u8> {
    let skip = if tun.vnet_hdr() { VNET_HDR_LEN } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; MAX_RECORD_LEN];
    loop {
        assert!(Instant::now() < deadline, "no IPv4 packet within 5 s");
        if !tun.wait_readable(Duration::from_millis(100)).unwrap() {
            continue;
        }
        let n = tun.read(&mut buf).unwrap();
        if n > skip && buf[skip] >> 4 == 4 {
            return buf[..n].to_vec();
        }
    }
}

fn udp_round_trip(vnet_hdr: bool) {
    let ns = TestNetns::new(if vnet_hdr { "udpv" } else { "udp" }).unwrap();
    let opts = TunOptions {
        vnet_hdr,
        ..TunOptions::default()
    };
    let tun = run_in_netns(&ns.path(), || Tun::open(DEV, opts))
        .unwrap()
        .unwrap();
    up_with_peer(&ns, "10.201.1.1", "10.201.1.2");
    let sock = run_in_netns(&ns.path(), || UdpSocket::bind("10.201.1.1:0"))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let peer: SocketAddr = "10.201.1.2:9999".parse().unwrap();
    sock.send_to(b"hello tun", peer).unwrap();

    // Kernel → TUN.
    let rec = read_ipv4_record(&tun);
    let (hdr, pkt) = rec.split_at(if vnet_hdr { VNET_HDR_LEN } else { 0 });
    assert_eq!(pkt[9], 17, "not UDP: {pkt:02x?}");
    assert_eq!(&pkt[16..20], &Ipv4Addr::new(10, 201, 1, 2).octets());
    assert_eq!(&pkt[28..], b"hello tun");
    println!(
        "vnet_hdr={vnet_hdr}: read {} bytes, header {hdr:02x?}",
        rec.len()
    );
    if vnet_hdr {
        assert_eq!(hdr[1], 0, "small UDP packet is not GSO");
    }

    // TUN → kernel: a reply from the peer reaches the socket.
    let mut reply = vec![0u8; if vnet_hdr { VNET_HDR_LEN } else { 0 }];
    reply.extend(udp4_packet(peer, sock.local_addr().unwrap(), b"hello back"));
    assert_eq!(tun.write(&reply).unwrap(), reply.len());
    let mut buf = [0u8; 64];
    let (n, from) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello back");
    assert_eq!(from, peer);
}

#[test]
fn udp_round_trip_plain() {
    if !netns_privileges() {
        return;
    }
    udp_round_trip(false);
}

#[test]
fn udp_round_trip_vnet_hdr() {
    if !netns_privileges() {
        return;
    }
    udp_round_trip(true);
}

#[test]
fn nonblocking_read_would_block() {
    if !netns_privileges() {
        return;
    }
    let ns = TestNetns::new("nb").unwrap();
    let tun = run_in_netns(&ns.path(), || Tun::open(DEV, TunOptions::vnet()))
        .unwrap()
        .unwrap();
    // Link down: nothing is ever queued.
    tun.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let err = tun.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
    assert!(!tun.wait_readable(Duration::from_millis(5)).unwrap());
    // A record that is not an IP packet is refused.
    let err = tun.write(&[0u8; VNET_HDR_LEN + 20]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    assert!(
        err.to_string()
            .starts_with("write(30 bytes) on TUN lh-t0: "),
        "{err}"
    );
    // A valid one, written while the link is down.
    let mut rec = vec![0u8; VNET_HDR_LEN];
    let src = "10.201.1.2:9".parse().unwrap();
    let dst = "10.201.1.1:9".parse().unwrap();
    rec.extend(udp4_packet(src, dst, b"x"));
    let err = tun.write(&rec).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
}

/// What one direction of the test forwarder saw.
#[derive(Debug, Default)]
struct Forwarded {
    records: u64,
    bytes: u64,
    /// Records with `gso_type` TCPV4, `gso_size` > 0 and length > 1500.
    tcp4_super: u64,
    /// TCP segments in those records.
    tcp4_super_segments: u64,
    max_record: usize,
    max_gso_size: u16,
    write_errors: u64,
    first_write_error: Option<String>,
}

/// Segments in a TCP/IPv4 GSO record: payload (from the packet's own IP and
/// TCP headers; `hdr_len` is not trusted) divided by `gso_size`, rounded up.
fn tcp4_segments(pkt: &[u8], gso_size: u16) -> u64 {
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    let doff = usize::from(pkt[ihl + 12] >> 4) * 4;
    let payload = pkt.len() - ihl - doff;
    payload.div_ceil(usize::from(gso_size)) as u64
}

/// Copies records from `from` to `to` until `stop` (or 30 s).
fn forward(from: &Tun, to: &Tun, stop: &AtomicBool) -> Forwarded {
    let mut seen = Forwarded::default();
    let mut buf = vec![0u8; MAX_RECORD_LEN];
    let give_up = Instant::now() + Duration::from_secs(30);
    while !stop.load(Ordering::Relaxed) && Instant::now() < give_up {
        if !from.wait_readable(Duration::from_millis(20)).unwrap() {
            continue;
        }
        loop {
            let n = match from.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            };
            let rec = &buf[..n];
            seen.records += 1;
            seen.bytes += n as u64;
            seen.max_record = seen.max_record.max(n);
            let gso_type = rec[1] & !GSO_ECN;
            let gso_size = u16::from_le_bytes([rec[4], rec[5]]);
            if gso_type == GSO_TCPV4 && gso_size > 0 && n > 1500 {
                seen.tcp4_super += 1;
                seen.tcp4_super_segments += tcp4_segments(&rec[VNET_HDR_LEN..], gso_size);
                seen.max_gso_size = seen.max_gso_size.max(gso_size);
            }
            if let Err(e) = to.write(rec) {
                seen.write_errors += 1;
                seen.first_write_error.get_or_insert(e.to_string());
            }
        }
    }
    seen
}

/// Sets the flag when dropped, so forwarder threads end even if the test
/// body panics inside `thread::scope`.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

const TRANSFER: usize = 64 << 20;
/// Pattern period: a prime, so the data check catches shifted bytes.
const PERIOD: usize = 251;

fn send_pattern(mut stream: TcpStream) -> io::Result<()> {
    let chunk: Vec<u8> = (0..PERIOD * 4177).map(|i| (i % PERIOD) as u8).collect();
    let mut left = TRANSFER;
    while left > 0 {
        let n = left.min(chunk.len());
        stream.write_all(&chunk[..n])?;
        left -= n;
    }
    stream.shutdown(Shutdown::Write)
}

fn receive_pattern(mut stream: TcpStream) -> io::Result<usize> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0usize;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        for (i, &b) in buf[..n].iter().enumerate() {
            if b != ((total + i) % PERIOD) as u8 {
                return Err(io::Error::other(format!(
                    "corrupt byte at offset {}",
                    total + i
                )));
            }
        }
        total += n;
    }
}

/// Two namespaces, one vnet TUN each, joined only by a userspace forwarder in
/// this test: ping works without loss and a 64 MiB TCP transfer arrives intact
/// while the forwarder sees TCP/IPv4 GSO super-packets.
#[test]
fn gso_super_packets_cross_a_userspace_forwarder() {
    if !netns_privileges() {
        return;
    }
    let started = Instant::now();
    // Declared first, so dropped last: after the TUNs and sockets.
    let a = TestNetns::new("a").unwrap();
    let b = TestNetns::new("b").unwrap();
    let tun_a = run_in_netns(&a.path(), || Tun::open(DEV, TunOptions::vnet()))
        .unwrap()
        .unwrap();
    let tun_b = run_in_netns(&b.path(), || Tun::open(DEV, TunOptions::vnet()))
        .unwrap()
        .unwrap();
    up_with_peer(&a, "10.201.0.1", "10.201.0.2");
    up_with_peer(&b, "10.201.0.2", "10.201.0.1");
    tun_a.set_nonblocking(true).unwrap();
    tun_b.set_nonblocking(true).unwrap();

    let stop = AtomicBool::new(false);
    let (a_to_b, b_to_a, received, elapsed) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let ab = s.spawn(|| forward(&tun_a, &tun_b, &stop));
        let ba = s.spawn(|| forward(&tun_b, &tun_a, &stop));

        // Opted out of what cannot run (no ping), the rest of the test still runs.
        if longhaul_testkit::program("ping", "iputils-ping") {
            let out = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    a.name(),
                    "ping",
                    "-n",
                    "-c",
                    "3",
                    "-i",
                    "0.2",
                ])
                .args(["-W", "2", "10.201.0.2"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            println!("{}", text.trim_end());
            assert!(out.status.success(), "ping failed: {text}");
            assert!(text.contains(" 0% packet loss"), "{text}");
        }

        let listener = run_in_netns(&b.path(), || TcpListener::bind("10.201.0.2:0"))
            .unwrap()
            .unwrap();
        let addr = listener.local_addr().unwrap();
        // The handshake completes in the kernel, so accept() below cannot
        // block once connect() has returned.
        let client = run_in_netns(&a.path(), || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        })
        .unwrap()
        .unwrap();
        let (server, _) = listener.accept().unwrap();
        let timeout = Some(Duration::from_secs(15));
        client.set_write_timeout(timeout).unwrap();
        server.set_read_timeout(timeout).unwrap();
        let t0 = Instant::now();
        let sender = s.spawn(move || send_pattern(client));
        let received = receive_pattern(server).unwrap();
        let elapsed = t0.elapsed();
        sender.join().unwrap().unwrap();
        stop.store(true, Ordering::Relaxed);
        (ab.join().unwrap(), ba.join().unwrap(), received, elapsed)
    });

    println!("a→b {a_to_b:?}");
    println!("b→a {b_to_a:?}");
    let gbits = received as f64 * 8.0 / elapsed.as_secs_f64() / 1e9;
    println!(
        "64 MiB in {elapsed:.2?} ({gbits:.2} Gbit/s); {} TCPV4 super-packets a→b, \
         {:.1} segments per super-packet, {:.1} segments per read overall; test took {:.2?}",
        a_to_b.tcp4_super,
        a_to_b.tcp4_super_segments as f64 / a_to_b.tcp4_super.max(1) as f64,
        a_to_b.tcp4_super_segments as f64 / a_to_b.records.max(1) as f64,
        started.elapsed(),
    );
    assert_eq!(received, TRANSFER);
    assert!(a_to_b.tcp4_super > 0, "no GSO super-packets: {a_to_b:?}");
    assert!(a_to_b.max_record > 1500 + VNET_HDR_LEN, "{a_to_b:?}");
    assert!(
        a_to_b.max_gso_size > 0 && a_to_b.max_gso_size <= 1460,
        "{a_to_b:?}"
    );
}

//! Compares ways of sending a constant pattern over loopback TCP: plain
//! `write(2)`, `sendfile(2)` from a memfd, `send(MSG_ZEROCOPY)` and
//! `tee(2)`+`splice(2)` from a pipe.
//!
//! A receiver thread reads into a 128 KiB buffer until EOF. Each method sends
//! the same amount (4 GiB by default); the methods run in rotating order for
//! several rounds, and the medians are printed at the end. The sender runs on
//! CPU 0 and the receiver on CPU 1 unless `LONGHAUL_NO_PIN` is set.
//!
//! ```text
//! cargo run --release -p longhaul-sys --example zerocopy_loopback [-- GIB [ROUNDS]]
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use longhaul_sys::{
    CpuTime, SendfileSource, SpliceSource, ZeroCopySender, pin_thread_to_cpu, process_cpu_time,
    thread_cpu_time,
};

const BUF: usize = 128 * 1024;
const GIB: f64 = (1u64 << 30) as f64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Method {
    Write,
    Sendfile,
    ZeroCopy,
    Splice,
}

const METHODS: [Method; 4] = [
    Method::Write,
    Method::Sendfile,
    Method::ZeroCopy,
    Method::Splice,
];

struct Sample {
    gbps: f64,
    /// Whole-process CPU seconds per GiB.
    proc_cpu: f64,
    /// Sender-thread CPU seconds per GiB.
    send_cpu: f64,
    /// Receiver-thread CPU seconds per GiB.
    recv_cpu: f64,
    note: String,
}

fn per_gib(cpu: CpuTime, bytes: u64) -> f64 {
    cpu.total().as_secs_f64() / (bytes as f64 / GIB)
}

fn send_all(method: Method, sock: &mut TcpStream, pattern: &[u8], total: u64) -> String {
    let mut sent: u64 = 0;
    let left = |sent: u64| usize::try_from(total - sent).unwrap_or(usize::MAX);
    match method {
        Method::Write => {
            while sent < total {
                let off = (sent % BUF as u64) as usize;
                let end = BUF.min(off + left(sent));
                sent += sock.write(&pattern[off..end]).expect("write") as u64;
            }
            String::new()
        }
        Method::Sendfile => {
            let src = SendfileSource::new(pattern).expect("memfd");
            while sent < total {
                sent += src.send(sock.as_fd(), left(sent)).expect("sendfile") as u64;
            }
            String::new()
        }
        Method::ZeroCopy => {
            let mut zc = ZeroCopySender::new(sock.as_fd()).expect("SO_ZEROCOPY");
            while sent < total {
                let off = (sent % BUF as u64) as usize;
                let end = BUF.min(off + left(sent));
                sent += zc.send(sock.as_fd(), &pattern[off..end]).expect("send") as u64;
            }
            let drained = zc
                .flush(sock.as_fd(), Duration::from_secs(10))
                .expect("flush");
            format!(
                "sends {} completions {} copied {} notifications {} ENOBUFS {}{}",
                zc.sends(),
                zc.completions(),
                zc.copied_fallbacks(),
                zc.notifications(),
                zc.enobufs(),
                if drained { "" } else { " (not drained)" }
            )
        }
        Method::Splice => {
            let mut src = SpliceSource::new(pattern).expect("pipes");
            while sent < total {
                sent += src.send(sock.as_fd(), left(sent)).expect("splice") as u64;
            }
            String::new()
        }
    }
}

fn run(method: Method, pattern: &[u8], total: u64, pin: bool) -> Sample {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let receiver = std::thread::spawn(move || {
        if pin {
            pin_thread_to_cpu(1).expect("pin receiver");
        }
        let (mut s, _) = listener.accept().expect("accept");
        let before = thread_cpu_time().expect("rusage");
        let mut buf = vec![0u8; BUF];
        let mut got: u64 = 0;
        loop {
            let n = s.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        (
            got,
            thread_cpu_time().expect("rusage") - before,
            Instant::now(),
        )
    });
    let mut sock = TcpStream::connect(addr).expect("connect");
    let proc_before = process_cpu_time().expect("rusage");
    let thread_before = thread_cpu_time().expect("rusage");
    let start = Instant::now();
    let note = send_all(method, &mut sock, pattern, total);
    sock.shutdown(Shutdown::Write).expect("shutdown");
    let send_cpu = thread_cpu_time().expect("rusage") - thread_before;
    let (got, recv_cpu, end) = receiver.join().expect("receiver");
    let proc_cpu = process_cpu_time().expect("rusage") - proc_before;
    assert_eq!(
        got, total,
        "{method:?}: receiver got {got} of {total} bytes"
    );
    let secs = (end - start).as_secs_f64();
    Sample {
        gbps: total as f64 * 8.0 / secs / 1e9,
        proc_cpu: per_gib(proc_cpu, total),
        send_cpu: per_gib(send_cpu, total),
        recv_cpu: per_gib(recv_cpu, total),
        note,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let gib: f64 = args.next().map_or(4.0, |a| a.parse().expect("GIB"));
    let rounds: usize = args.next().map_or(3, |a| a.parse().expect("ROUNDS"));
    let total = (gib * GIB) as u64;
    // Sender on CPU 0, receiver on CPU 1 (unless LONGHAUL_NO_PIN is set).
    let pin = std::env::var_os("LONGHAUL_NO_PIN").is_none() && longhaul_sys::online_cpus() >= 2;
    if pin {
        pin_thread_to_cpu(0).expect("pin sender");
    }
    let pattern: Vec<u8> = (0..BUF).map(|i| (i % 251) as u8).collect();

    println!(
        "{gib} GiB per method, {rounds} rounds, 128 KiB buffers, {} CPUs online, pinned: {pin}",
        longhaul_sys::online_cpus()
    );
    let mut results: Vec<(Method, Vec<Sample>)> =
        METHODS.iter().map(|&m| (m, Vec::new())).collect();
    for round in 0..rounds {
        for i in 0..METHODS.len() {
            // Rotate the order each round so no method always runs first.
            let idx = (i + round) % METHODS.len();
            let method = METHODS[idx];
            let s = run(method, &pattern, total, pin);
            println!(
                "round {} {:>9}: {:6.2} Gbit/s  cpu/GiB process {:.3}s sender {:.3}s receiver {:.3}s  {}",
                round + 1,
                format!("{method:?}"),
                s.gbps,
                s.proc_cpu,
                s.send_cpu,
                s.recv_cpu,
                s.note
            );
            results[idx].1.push(s);
        }
    }
    println!("\nmedians over {rounds} rounds:");
    println!(
        "{:>9}  {:>8}  {:>16}  {:>15}  {:>17}",
        "method", "Gbit/s", "process CPU s/GiB", "sender CPU s/GiB", "receiver CPU s/GiB"
    );
    for (method, samples) in &results {
        let col = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        println!(
            "{:>9}  {:>8.2}  {:>17.3}  {:>16.3}  {:>18.3}",
            format!("{method:?}"),
            col(|s| s.gbps),
            col(|s| s.proc_cpu),
            col(|s| s.send_cpu),
            col(|s| s.recv_cpu)
        );
    }
}

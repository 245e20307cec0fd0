//! A transfer's data connection over QUIC: one bidirectional stream of a flow's connection,
//! read and written by one worker thread each, blocking as a socket does.
//!
//! The client opens the stream and writes the data proof first (as a TCP data connection writes
//! it after its preamble); the sending side's chunks follow in the same byte sequence as over TCP,
//! so `transfer::source` and `transfer::sink` read and write it as they do a TCP connection.
//! Reads are in order: quinn reassembles behind a loss within the flow-control window (the plan's
//! 2 × BDP).

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use quinn::{Connection, RecvStream, SendStream, VarInt};

use super::flow::{DONE, QuicFlow, described, runtime};

/// How long a finished sender waits for the receiver to read to the end and close the
/// connection before it closes it anyway (the transfer's own verdicts say whether all arrived).
const FINISH_WAIT: Duration = Duration::from_secs(30);

/// One stream of a flow, both halves.
pub(crate) struct QuicStream {
    flow: QuicFlow,
    send: Mutex<SendStream>,
    recv: Mutex<RecvStream>,
    /// How long a read blocks before it returns `TimedOut`, so its caller sees a stop.
    tick: Mutex<Option<Duration>>,
}

impl std::fmt::Debug for QuicStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicStream")
            .field("flow", &self.flow)
            .finish()
    }
}

/// A handle on a flow's connection that outlives the stream's worker: it closes the connection
/// under a blocked worker and reads the connection's losses once the worker is done.
#[derive(Debug, Clone)]
pub(crate) struct FlowHandle(Connection);

impl FlowHandle {
    /// Closes the connection: a worker blocked on it fails at once.
    pub(crate) fn close(&self) {
        self.0.close(VarInt::from_u32(DONE), b"stopped");
    }

    /// Packets the connection has declared lost (and resent) so far.
    pub(crate) fn lost_packets(&self) -> u64 {
        self.0.stats().path.lost_packets
    }
}

impl QuicStream {
    /// The client's side: opens the flow's stream and writes `proof` on it first.
    pub(crate) fn open(flow: QuicFlow, proof: &[u8], timeout: Duration) -> io::Result<Self> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        let (send, recv) = rt.block_on(async {
            tokio::time::timeout(timeout, async {
                let (mut send, recv) = flow.conn.open_bi().await.map_err(|e| described(&e))?;
                send.write_all(proof).await.map_err(|e| described(&e))?;
                Ok::<_, io::Error>((send, recv))
            })
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "opening the stream"))?
        })?;
        Ok(Self::new(flow, send, recv))
    }

    /// The server's side: takes the client's stream and its first `proof.len()` bytes (the data
    /// proof), all within `timeout`.
    pub(crate) fn accept(flow: QuicFlow, proof: &mut [u8], timeout: Duration) -> io::Result<Self> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        let (send, recv) = rt.block_on(async {
            tokio::time::timeout(timeout, async {
                let (send, mut recv) = flow.conn.accept_bi().await.map_err(|e| described(&e))?;
                recv.read_exact(proof).await.map_err(|e| described(&e))?;
                Ok::<_, io::Error>((send, recv))
            })
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the client's stream and proof"))?
        })?;
        Ok(Self::new(flow, send, recv))
    }

    fn new(flow: QuicFlow, send: SendStream, recv: RecvStream) -> Self {
        Self {
            flow,
            send: Mutex::new(send),
            recv: Mutex::new(recv),
            tick: Mutex::new(None),
        }
    }

    /// A handle on the connection ([`FlowHandle`]).
    pub(crate) fn handle(&self) -> FlowHandle {
        FlowHandle(self.flow.conn.clone())
    }

    /// Writes all of `buf`, blocking while the stream holds what its window allows (the sender's
    /// queue is bounded as a test's is, `QuicFlow::bound_backlog`).
    pub(crate) fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        let mut send = self.send.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = 0;
        while at < buf.len() {
            // Under a cap (`--rate`), pieces of 10 ms at it, each once the cap allows it.
            let (piece, wait) = self
                .flow
                .paced(self.flow.bound_backlog().min(buf.len() - at));
            std::thread::sleep(wait);
            rt.block_on(send.write_all(&buf[at..at + piece]))
                .map_err(|e| described(&e))?;
            at += piece;
        }
        Ok(())
    }

    /// Caps what this stream sends at `bytes_per_sec` from now on (`--rate`'s share).
    pub(crate) fn set_pacing(&self, bytes_per_sec: u64) {
        self.flow.set_pacing(bytes_per_sec);
    }

    /// Reads what has arrived in order: `Ok(0)` at the end of the stream, `TimedOut` after the
    /// tick ([`QuicStream::set_read_tick`]) with nothing read.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        let tick = *self.tick.lock().unwrap_or_else(|e| e.into_inner());
        let mut recv = self.recv.lock().unwrap_or_else(|e| e.into_inner());
        let read = rt.block_on(async {
            match tick {
                // quinn's read is cancel-safe: a timed-out read loses nothing.
                Some(t) => tokio::time::timeout(t, recv.read(buf)).await.ok(),
                None => Some(recv.read(buf).await),
            }
        });
        match read {
            None => Err(io::Error::new(io::ErrorKind::TimedOut, "no data yet")),
            Some(Ok(Some(n))) => Ok(n),
            Some(Ok(None)) => Ok(0),
            Some(Err(e)) => Err(described(&e)),
        }
    }

    /// How long a read waits before it returns `TimedOut` (`None`: until data or the end).
    pub(crate) fn set_read_tick(&self, tick: Option<Duration>) {
        *self.tick.lock().unwrap_or_else(|e| e.into_inner()) = tick;
    }

    /// Ends the sending half and waits (at most [`FINISH_WAIT`]) until the receiver has read to
    /// the end and closed the connection: quinn's acknowledgement of every byte is not enough,
    /// since a connection closed from this side takes with it what the receiver has buffered but
    /// not yet read.
    pub(crate) fn finish(&self) {
        let Ok(rt) = runtime() else { return };
        let mut send = self.send.lock().unwrap_or_else(|e| e.into_inner());
        if send.finish().is_ok() {
            let conn = self.flow.conn.clone();
            // The timer is made inside the runtime, which it needs.
            let _ = rt.block_on(async { tokio::time::timeout(FINISH_WAIT, conn.closed()).await });
        }
    }
}

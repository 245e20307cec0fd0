//! iperf3's control protocol (3.x), so that `longhaul test` runs against a stock `iperf3 -s` and a
//! stock `iperf3 -c` runs against `longhaul server`. Everything here is pure: the state bytes, the
//! cookie, the JSON frames with their limits, the client's parameters read into a [`TestParams`]
//! (and written from one), and the results both sides exchange at the end.
//!
//! The conversation, as iperf3 3.12 speaks it (C = client, S = server; one byte per state):
//!
//! ```text
//! C: cookie (37 bytes: 36 characters of [a-z2-7] and a NUL)
//!                     S: PARAM_EXCHANGE (9)
//! C: params (4-byte big-endian length, JSON)
//!                     S: CREATE_STREAMS (10)   | SERVER_ERROR (-2), i_errno, errno (4 bytes each)
//! C opens the streams: TCP connections sending the cookie first, or UDP sockets sending
//!    the 4 bytes "9876" and waiting for "6789" back (0x36373839 / 0x39383736 in host order)
//!                     S: TEST_START (1), TEST_RUNNING (2)
//! ... data ...
//! C: TEST_END (4)
//!                     S: EXCHANGE_RESULTS (13)
//! C: results (JSON)   S: results (JSON)
//!                     S: DISPLAY_RESULTS (14)
//! C: IPERF_DONE (16)
//! ```
//!
//! A busy iperf3 server answers a new control connection with ACCESS_DENIED (-1) and closes it.
//! Streams are numbered 1, 3, 4, 5, … in the order they were created (a quirk iperf3 keeps for
//! compatibility): [`stream_id`] and [`stream_index`] convert.
//!
//! Limits: iperf3 itself reads a JSON frame of any announced length; here a frame above
//! [`MAX_JSON_LEN`] is refused before anything is allocated, and a results document with more
//! streams than a test can have is refused.

use serde_json::{Map, Value, json};

use crate::msg::{MAX_BURST, MAX_STREAMS, UdpParams};
use crate::{Direction, EndCondition, ProtoError, TestParams, WindowRequest};

/// iperf3's port.
pub const DEFAULT_PORT: u16 = 5201;
/// Bytes of the cookie that opens every iperf3 connection.
pub const COOKIE_LEN: usize = 37;
/// Largest JSON frame accepted (iperf3's parameters are about 300 bytes; results about 150 per
/// stream).
pub const MAX_JSON_LEN: usize = 512 * 1024;
/// The datagram a UDP stream opens with, as iperf3 on a little-endian host sends it ("9876").
pub const UDP_CONNECT_MSG: [u8; 4] = 0x3637_3839u32.to_le_bytes();
/// The server's answer to it ("6789").
pub const UDP_CONNECT_REPLY: [u8; 4] = 0x3938_3736u32.to_le_bytes();
/// The answer of iperf3 servers before 3.11.
pub const LEGACY_UDP_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();
/// What iperf3 clients before 3.11 sent instead of [`UDP_CONNECT_MSG`].
const LEGACY_UDP_CONNECT_MSG: u32 = 123_456_789;
/// Longest test an iperf3 client may ask for (iperf3's `MAX_TIME`).
pub const MAX_TIME_S: u64 = 86_400;

/// One state byte of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The streams are up; the test is about to start.
    TestStart,
    /// Send now.
    TestRunning,
    /// The client's time or bytes are done.
    TestEnd,
    /// The server wants the parameters.
    ParamExchange,
    /// The client may open its streams.
    CreateStreams,
    /// The server is going away.
    ServerTerminate,
    /// The client was interrupted.
    ClientTerminate,
    /// Both sides send their results.
    ExchangeResults,
    /// The client may print its results.
    DisplayResults,
    /// Unused by 3.x servers.
    IperfStart,
    /// The client is done.
    IperfDone,
    /// The server is busy with another test.
    AccessDenied,
    /// The server refused: two 4-byte big-endian numbers follow (iperf3's error code and errno).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn byte(self) -> u8 {
        (match self {
            State::TestStart => 1i8,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        }) as u8
    }

    /// The state a byte names, if any.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            _ => return None,
        })
    }
}

/// iperf3's error codes (`i_errno`) a server sends with [`State::ServerError`]; the client prints
/// its own text for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// "test duration too long".
    Duration = 5,
    /// "number of parallel streams too large".
    NumStreams = 6,
    /// "block size too large".
    BlockSize = 7,
    /// "socket buffer size too large".
    BufSize = 8,
    /// "bogus value for --omit".
    Omit = 12,
    /// "invalid burst count".
    Burst = 15,
    /// "block size invalid" (UDP).
    UdpBlockSize = 20,
    /// "total required bandwidth is larger than server limit".
    TotalRate = 27,
    /// "protocol does not exist".
    Protocol = 131,
    /// "unable to set TCP_CONGESTION".
    SetCongestion = 134,
    /// "test authorization failed".
    AuthTest = 142,
}

/// The text an iperf3 client prints for a server error code (`iperf_strerror`, 3.12), for the codes
/// a server may send; others by number.
pub fn error_text(code: u32) -> String {
    match code {
        5 => "test duration too long".into(),
        6 => "number of parallel streams too large".into(),
        7 => "block size too large".into(),
        8 => "socket buffer size too large".into(),
        12 => "bogus value for --omit".into(),
        15 => "invalid burst count".into(),
        20 => "block size invalid".into(),
        27 => "total required bandwidth is larger than server limit".into(),
        131 => "protocol does not exist".into(),
        134 => "unable to set TCP_CONGESTION".into(),
        142 => "test authorization failed".into(),
        c => format!("iperf3 error {c}"),
    }
}

/// A cookie from 36 random bytes, in iperf3's alphabet.
pub fn make_cookie(random: &[u8; 36]) -> [u8; COOKIE_LEN] {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut c = [0u8; COOKIE_LEN];
    for (o, r) in c.iter_mut().zip(random) {
        *o = ALPHABET[usize::from(r % 32)];
    }
    c
}

/// Whether a datagram is a UDP stream's opening message (either byte order, or the legacy value).
pub fn is_udp_connect(datagram: &[u8]) -> bool {
    let Ok(b) = <[u8; 4]>::try_from(datagram) else {
        return false;
    };
    let (le, be) = (u32::from_le_bytes(b), u32::from_be_bytes(b));
    [le, be].contains(&0x3637_3839) || [le, be].contains(&LEGACY_UDP_CONNECT_MSG)
}

/// Whether a datagram answers a UDP stream's opening message.
pub fn is_udp_connect_reply(datagram: &[u8]) -> bool {
    datagram == UDP_CONNECT_REPLY || datagram == LEGACY_UDP_CONNECT_REPLY
}

/// A JSON frame: its length (4 bytes, big-endian) and the JSON.
pub fn encode_json(v: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(v).expect("a JSON value serialises");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The length a frame header announces, refused above [`MAX_JSON_LEN`] (before anything is read
/// or allocated for it).
pub fn json_len(header: [u8; 4]) -> Result<usize, ProtoError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_JSON_LEN {
        return Err(ProtoError::FrameTooLarge {
            len,
            limit: MAX_JSON_LEN,
        });
    }
    Ok(len)
}

/// Why an iperf3 client's parameters are refused: the code its client understands and our reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code sent to the client.
    pub code: ErrorCode,
    /// The reason, for the server's log.
    pub reason: String,
}

impl Refusal {
    fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

/// What an iperf3 client asked for, read into a longhaul test.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRequest {
    /// The test.
    pub params: TestParams,
    /// The client's iperf3 version, if it said.
    pub client_version: Option<String>,
    /// Options the client set that this server does not act on (the client is not told; the log
    /// says so).
    pub ignored: Vec<&'static str>,
    /// The client asked for `--get-server-output`.
    pub server_output: bool,
}

/// iperf3's default block (write) size for TCP: 128 KiB.
pub const DEFAULT_TCP_LEN: u32 = 128 * 1024;
/// iperf3's default UDP block size when the client sent none.
pub const DEFAULT_UDP_LEN: u32 = 1460;

/// Reads an iperf3 client's parameters (the JSON of its params frame).
///
/// As iperf3's server does, a flag counts when its key is present (`"reverse": true`), numbers may
/// come as integers or floats, and unknown keys are ignored. Out-of-range values are refused with
/// the error code iperf3's client knows for them. `rtt_ns` is left 0 (the server measures nothing
/// before the test).
pub fn read_params(json: &[u8]) -> Result<ClientRequest, Refusal> {
    let v: Value = serde_json::from_slice(json)
        .map_err(|e| Refusal::new(ErrorCode::Protocol, format!("parameters are not JSON: {e}")))?;
    let Value::Object(m) = v else {
        return Err(Refusal::new(
            ErrorCode::Protocol,
            "parameters are not a JSON object",
        ));
    };
    if m.contains_key("sctp") {
        return Err(Refusal::new(ErrorCode::Protocol, "SCTP is not supported"));
    }
    let udp = m.contains_key("udp");
    let num = |k: &str| -> Result<Option<u64>, Refusal> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1.8e19)
                .map(|f| Some(f as u64))
                .ok_or_else(|| {
                    Refusal::new(ErrorCode::Protocol, format!("\"{k}\" is not a number: {v}"))
                }),
        }
    };
    let streams = num("parallel")?.unwrap_or(1);
    if streams == 0 || streams > u64::from(MAX_STREAMS) {
        return Err(Refusal::new(
            ErrorCode::NumStreams,
            format!("{streams} streams (-P)"),
        ));
    }
    let streams = streams as u32;
    let time = num("time")?.unwrap_or(10);
    let len = match num("len")? {
        Some(l) if l > 0 => u32::try_from(l)
            .map_err(|_| Refusal::new(ErrorCode::BlockSize, format!("block size {l}")))?,
        _ if udp => DEFAULT_UDP_LEN,
        _ => DEFAULT_TCP_LEN,
    };
    let end = match (num("num")?, num("blockcount")?) {
        (Some(bytes), _) if bytes > 0 => EndCondition::Bytes { bytes },
        (_, Some(blocks)) if blocks > 0 => EndCondition::Bytes {
            bytes: blocks.saturating_mul(u64::from(len)),
        },
        _ if time == 0 || time > MAX_TIME_S => {
            return Err(Refusal::new(
                ErrorCode::Duration,
                format!("duration {time} s (-t)"),
            ));
        }
        _ => EndCondition::Time {
            ns: time * 1_000_000_000,
        },
    };
    let omit = num("omit")?.unwrap_or(0);
    let direction = match (m.contains_key("reverse"), m.contains_key("bidirectional")) {
        (_, true) => Direction::Bidir,
        (true, false) => Direction::Reverse,
        (false, false) => Direction::Forward,
    };
    let window = match num("window")? {
        Some(w) if w > 0 => WindowRequest::Fixed { bytes: w },
        _ => WindowRequest::Auto,
    };
    let bandwidth = num("bandwidth")?.unwrap_or(0);
    let burst = num("burst")?.unwrap_or(0);
    if burst > u64::from(MAX_BURST) {
        return Err(Refusal::new(ErrorCode::Burst, format!("burst {burst}")));
    }
    let fqrate = num("fqrate")?.unwrap_or(0);
    let per_stream_pace = if udp { 0 } else { bandwidth.max(fqrate) };
    let congestion = match m.get("congestion") {
        Some(Value::String(c)) => Some(c.clone()),
        _ => None,
    };
    let tos = match num("TOS")? {
        Some(t) => Some(u8::try_from(t).map_err(|_| {
            Refusal::new(ErrorCode::Protocol, format!("TOS {t} is not a byte (-S)"))
        })?),
        None => None,
    };
    let sockets = crate::msg::SocketFlags {
        // iperf3 sets the MSS on TCP streams only; a UDP test's is ignored, as its server does.
        mss: num("MSS")?
            .filter(|&m| m > 0 && !udp)
            .map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
        nodelay: m.contains_key("nodelay"),
        tos: tos.filter(|&t| t > 0),
        repeating_payload: m.contains_key("repeating_payload"),
        dont_fragment: m.contains_key("dont_fragment"),
    };
    let params = TestParams {
        streams,
        end,
        interval_ns: 1_000_000_000,
        direction,
        congestion: congestion.filter(|_| !udp),
        window,
        target_rate_bps: match (udp, bandwidth) {
            (true, b) if b > 0 => b.saturating_mul(u64::from(streams)),
            _ => 10_000_000_000,
        },
        pace_total_bps: (per_stream_pace > 0)
            .then(|| per_stream_pace.saturating_mul(u64::from(streams))),
        pace_auto: None,
        fast_start: false,
        write_len: len,
        zerocopy: false,
        rtt_ns: 0,
        omit_ns: if matches!(end, EndCondition::Time { .. }) {
            omit.saturating_mul(1_000_000_000)
        } else {
            0
        },
        udp: udp.then(|| UdpParams {
            rate_bps: bandwidth,
            burst: burst as u32,
            counters_64bit: m.contains_key("udp_counters_64bit"),
            no_offload: false,
        }),
        transport: crate::Transport::Tcp,
        sockets,
    };
    params.validate().map_err(|e| {
        let code = match e.to_string() {
            t if t.contains("omit") => ErrorCode::Omit,
            t if t.contains("datagram length") => ErrorCode::UdpBlockSize,
            t if t.contains("write length") => ErrorCode::BlockSize,
            t if t.contains("window") => ErrorCode::BufSize,
            t if t.contains("congestion") => ErrorCode::SetCongestion,
            t if t.contains("duration") => ErrorCode::Duration,
            _ => ErrorCode::Protocol,
        };
        Refusal::new(code, e.to_string())
    })?;
    let mut ignored = Vec::new();
    for (key, what) in [
        ("flowlabel", "-L (flow label)"),
        ("zerocopy", "-Z"),
        ("server_affinity", "-A (server affinity)"),
        ("pacing_timer", "--pacing-timer"),
    ] {
        if m.contains_key(key) {
            ignored.push(what);
        }
    }
    if m.contains_key("authtoken") {
        return Err(Refusal::new(
            ErrorCode::AuthTest,
            "iperf3's RSA authentication is not supported",
        ));
    }
    Ok(ClientRequest {
        params,
        client_version: m
            .get("client_version")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64).collect()),
        ignored,
        server_output: m.contains_key("get_server_output"),
    })
}

/// The parameters frame a longhaul client sends to an iperf3 server for `p`, as iperf3 3.12's
/// client would send them.
pub fn write_params(p: &TestParams, client_version: &str) -> Value {
    let mut m = Map::new();
    m.insert(if p.is_udp() { "udp" } else { "tcp" }.into(), json!(true));
    m.insert("omit".into(), json!(p.omit_ns / 1_000_000_000));
    let (time, num) = match p.end {
        EndCondition::Time { ns } => (ns.div_ceil(1_000_000_000), 0),
        EndCondition::Bytes { bytes } => (0, bytes),
    };
    m.insert("time".into(), json!(time));
    m.insert("num".into(), json!(num));
    m.insert("blockcount".into(), json!(0));
    m.insert("parallel".into(), json!(p.streams));
    match p.direction {
        Direction::Reverse => {
            m.insert("reverse".into(), json!(true));
        }
        Direction::Bidir => {
            m.insert("bidirectional".into(), json!(true));
        }
        Direction::Forward => {}
    }
    if let WindowRequest::Fixed { bytes } = p.window {
        m.insert("window".into(), json!(bytes));
    }
    m.insert("len".into(), json!(p.write_len));
    let per_stream = |total: u64| total / u64::from(p.streams.max(1));
    match (&p.udp, p.pace_total_bps) {
        (Some(u), _) => {
            m.insert("bandwidth".into(), json!(u.rate_bps));
            if u.burst > 0 {
                m.insert("burst".into(), json!(u.burst));
            }
            if u.counters_64bit {
                m.insert("udp_counters_64bit".into(), json!(1));
            }
        }
        (None, Some(pace)) => {
            m.insert("fqrate".into(), json!(per_stream(pace)));
        }
        (None, None) => {}
    }
    m.insert("pacing_timer".into(), json!(1000));
    if let Some(cc) = &p.congestion {
        m.insert("congestion".into(), json!(cc));
    }
    let f = &p.sockets;
    if let Some(mss) = f.mss {
        m.insert("MSS".into(), json!(mss));
    }
    if let Some(tos) = f.tos {
        m.insert("TOS".into(), json!(tos));
    }
    // As iperf3's client writes them: "nodelay" true, the others 1 (its server reads each as
    // that type only).
    if f.nodelay {
        m.insert("nodelay".into(), json!(true));
    }
    for (on, key) in [
        (f.repeating_payload, "repeating_payload"),
        (f.dont_fragment, "dont_fragment"),
    ] {
        if on {
            m.insert(key.into(), json!(1));
        }
    }
    m.insert("client_version".into(), json!(client_version));
    Value::Object(m)
}

/// One stream in a results document.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StreamResult {
    /// iperf3's stream id (1, 3, 4, …).
    pub id: u32,
    /// Bytes sent (the stream's sender) or received (its receiver).
    pub bytes: u64,
    /// Retransmits (a TCP sender; -1 on the wire when unknown: 0 here).
    pub retransmits: u64,
    /// UDP jitter at the receiver, ms.
    pub jitter_ms: f64,
    /// UDP datagrams lost (receiver).
    pub errors: u64,
    /// UDP datagrams: sent (sender) or the highest number seen (receiver).
    pub packets: u64,
    /// Seconds from the start to the stream's end.
    pub seconds: f64,
}

/// One side's results document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// CPU: total, user, system, % of one core.
    pub cpu: (f64, f64, f64),
    /// Congestion control used on the sending side, if it said.
    pub congestion_used: Option<String>,
    /// The streams.
    pub streams: Vec<StreamResult>,
    /// `server_output_text` (a server's), if any.
    pub server_output_text: Option<String>,
}

/// iperf3's id of stream `index` (0-based, in creation order): 1, then 3, 4, 5, …
pub fn stream_id(index: u32) -> u32 {
    if index == 0 {
        1
    } else {
        index.saturating_add(2)
    }
}

/// The 0-based index of iperf3's stream `id`, if it is one.
pub fn stream_index(id: u32) -> Option<u32> {
    match id {
        1 => Some(0),
        0 | 2 => None,
        id => Some(id - 2),
    }
}

/// Reads a results document (`sender_has_retransmits` and the CPU keys must be there, as iperf3
/// requires; at most `max_streams` streams).
pub fn read_results(json: &[u8], max_streams: usize) -> Result<Results, ProtoError> {
    let bad = |m: String| ProtoError::Invalid(format!("iperf3 results: {m}"));
    let v: Value = serde_json::from_slice(json)
        .map_err(|e| ProtoError::BadMessage(format!("iperf3 results are not JSON: {e}")))?;
    let f = |k: &str| -> Result<f64, ProtoError> {
        v.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| bad(format!("no number \"{k}\"")))
    };
    let cpu = (
        f("cpu_util_total")?,
        f("cpu_util_user")?,
        f("cpu_util_system")?,
    );
    f("sender_has_retransmits")?;
    let streams = v
        .get("streams")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"streams\" array".into()))?;
    if streams.len() > max_streams {
        return Err(bad(format!(
            "{} streams, the test has {max_streams}",
            streams.len()
        )));
    }
    let mut out = Vec::with_capacity(streams.len());
    for s in streams {
        let n = |k: &str| -> Result<f64, ProtoError> {
            s.get(k)
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(format!("a stream without a number \"{k}\"")))
        };
        let count = |k: &str| -> Result<u64, ProtoError> { Ok(n(k)?.clamp(0.0, 1.8e19) as u64) };
        let id = n("id")?;
        if !(1.0..=f64::from(u32::MAX)).contains(&id) {
            return Err(bad(format!("stream id {id}")));
        }
        let (start, end) = (
            s.get("start_time").and_then(Value::as_f64).unwrap_or(0.0),
            s.get("end_time").and_then(Value::as_f64).unwrap_or(0.0),
        );
        out.push(StreamResult {
            id: id as u32,
            bytes: count("bytes")?,
            retransmits: count("retransmits")?,
            jitter_ms: n("jitter")?.max(0.0) * 1e3,
            errors: count("errors")?,
            packets: count("packets")?,
            seconds: if (end - start).is_finite() {
                (end - start).max(0.0)
            } else {
                0.0
            },
        });
    }
    Ok(Results {
        cpu,
        congestion_used: v
            .get("congestion_used")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64).collect()),
        streams: out,
        server_output_text: v
            .get("server_output_text")
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64 * 1024).collect()),
    })
}

/// Writes a results document. `sender` says whether this side sent on any stream (iperf3's
/// `sender_has_retransmits`: 1 for a TCP sender, -1 for a receiver-only side, 0 for UDP).
pub fn write_results(r: &Results, tcp_sender: Option<bool>) -> Value {
    let streams: Vec<Value> = r
        .streams
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": if tcp_sender == Some(true) { s.retransmits as i64 } else { -1 },
                "jitter": s.jitter_ms / 1e3,
                "errors": s.errors,
                "packets": s.packets,
                "start_time": 0,
                "end_time": s.seconds,
            })
        })
        .collect();
    let mut v = json!({
        "cpu_util_total": r.cpu.0,
        "cpu_util_user": r.cpu.1,
        "cpu_util_system": r.cpu.2,
        "sender_has_retransmits": match tcp_sender { Some(true) => 1, Some(false) => -1, None => 0 },
        "streams": streams,
    });
    if let Some(cc) = &r.congestion_used {
        v["congestion_used"] = json!(cc);
    }
    if let Some(t) = &r.server_output_text {
        v["server_output_text"] = json!(t);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What iperf3 3.12's client sends for `iperf3 -c HOST -u -b 100M -P 2 -R -t 5 -l 1400`.
    const UDP_PARAMS: &str = r#"{"udp":true,"omit":0,"time":5,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":1400,"bandwidth":100000000,"pacing_timer":1000,"client_version":"3.12"}"#;

    #[test]
    fn state_bytes_round_trip_and_match_iperf3() {
        for s in [
            State::TestStart,
            State::TestRunning,
            State::TestEnd,
            State::ParamExchange,
            State::CreateStreams,
            State::ServerTerminate,
            State::ClientTerminate,
            State::ExchangeResults,
            State::DisplayResults,
            State::IperfStart,
            State::IperfDone,
            State::AccessDenied,
            State::ServerError,
        ] {
            assert_eq!(State::from_byte(s.byte()), Some(s));
        }
        assert_eq!(State::ParamExchange.byte(), 9);
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::from_byte(3), None);
        assert_eq!(&UDP_CONNECT_MSG, b"9876");
        assert_eq!(&UDP_CONNECT_REPLY, b"6789");
        assert!(is_udp_connect(b"9876") && is_udp_connect(b"6789"));
        assert!(!is_udp_connect(b"98765") && !is_udp_connect(b"1234"));
        assert!(is_udp_connect_reply(b"6789") && !is_udp_connect_reply(b"9876"));
    }

    #[test]
    fn a_udp_client_reads_as_the_same_test() {
        let r = read_params(UDP_PARAMS.as_bytes()).unwrap();
        let p = &r.params;
        assert_eq!(p.streams, 2);
        assert_eq!(p.direction, Direction::Reverse);
        assert_eq!(p.end, EndCondition::Time { ns: 5_000_000_000 });
        assert_eq!(p.write_len, 1400);
        assert_eq!(p.udp.unwrap().rate_bps, 100_000_000);
        assert_eq!(r.client_version.as_deref(), Some("3.12"));
        assert_eq!(r.ignored, vec!["--pacing-timer"]);
        // And what a longhaul client writes reads back the same.
        let again = read_params(&serde_json::to_vec(&write_params(p, "3.12")).unwrap()).unwrap();
        assert_eq!(again.params, *p);
    }

    #[test]
    fn tcp_defaults_and_pacing_follow_iperf3() {
        let r = read_params(br#"{"tcp":true,"time":10,"parallel":4,"bidirectional":true,"fqrate":1000000000,"congestion":"cubic"}"#).unwrap();
        let p = r.params;
        assert_eq!(p.write_len, DEFAULT_TCP_LEN);
        assert_eq!(p.direction, Direction::Bidir);
        assert_eq!(p.pace_total_bps, Some(4_000_000_000));
        assert_eq!(p.congestion.as_deref(), Some("cubic"));
        assert!(!p.is_udp());
    }

    /// A stock iperf3 client's socket flags become the test's, as its own server takes them.
    #[test]
    fn socket_flags_from_an_iperf3_client_are_taken() {
        let r = read_params(
            br#"{"tcp":true,"MSS":1000,"TOS":40,"nodelay":true,"repeating_payload":1}"#,
        )
        .unwrap();
        let f = r.params.sockets;
        assert_eq!(
            (f.mss, f.tos, f.nodelay, f.repeating_payload),
            (Some(1000), Some(40), true, true)
        );
        assert!(r.ignored.is_empty(), "{:?}", r.ignored);
        let u = read_params(br#"{"udp":true,"MSS":1000,"dont_fragment":1}"#).unwrap();
        assert_eq!(
            (u.params.sockets.mss, u.params.sockets.dont_fragment),
            (None, true)
        );
    }

    #[test]
    fn bad_parameters_are_refused_with_the_code_iperf3_knows() {
        for (json, code) in [
            (r#"{"tcp":true,"parallel":5000}"#, ErrorCode::NumStreams),
            (r#"{"tcp":true,"parallel":0}"#, ErrorCode::NumStreams),
            (r#"{"tcp":true,"time":90000}"#, ErrorCode::Duration),
            (r#"{"udp":true,"len":70000}"#, ErrorCode::UdpBlockSize),
            (r#"{"udp":true,"len":8}"#, ErrorCode::UdpBlockSize),
            (r#"{"tcp":true,"len":1e12}"#, ErrorCode::BlockSize),
            (r#"{"tcp":true,"omit":900}"#, ErrorCode::Omit),
            (r#"{"udp":true,"burst":5000}"#, ErrorCode::Burst),
            (r#"{"sctp":true}"#, ErrorCode::Protocol),
            (r#"{"tcp":true,"authtoken":"x"}"#, ErrorCode::AuthTest),
            (
                r#"{"tcp":true,"congestion":"x;y"}"#,
                ErrorCode::SetCongestion,
            ),
            (r#"{"tcp":true,"time":"ten"}"#, ErrorCode::Protocol),
            (r#"{"tcp":true,"TOS":300}"#, ErrorCode::Protocol),
            (r#"{"tcp":true,"MSS":40}"#, ErrorCode::Protocol),
            (r#"{"tcp":true,"MSS":1e12}"#, ErrorCode::Protocol),
            (r#"{"tcp":true,"parallel":-1}"#, ErrorCode::Protocol),
            (r#"[1,2]"#, ErrorCode::Protocol),
            (r#"{"tcp":tru"#, ErrorCode::Protocol),
        ] {
            let e = read_params(json.as_bytes()).unwrap_err();
            assert_eq!(e.code, code, "{json}: {e:?}");
        }
    }

    #[test]
    fn results_round_trip_and_are_bounded() {
        let r = Results {
            cpu: (12.5, 2.5, 10.0),
            congestion_used: Some("bbr".into()),
            streams: vec![
                StreamResult {
                    id: 1,
                    bytes: 1_000_000,
                    retransmits: 3,
                    seconds: 10.0,
                    ..Default::default()
                },
                StreamResult {
                    id: 3,
                    bytes: 7,
                    jitter_ms: 0.25,
                    errors: 2,
                    packets: 9,
                    seconds: 9.5,
                    ..Default::default()
                },
            ],
            server_output_text: None,
        };
        let json = serde_json::to_vec(&write_results(&r, Some(true))).unwrap();
        let back = read_results(&json, 2).unwrap();
        assert_eq!(back, r);
        assert!(
            read_results(&json, 1).is_err(),
            "more streams than the test has"
        );
        assert!(
            read_results(br#"{"streams":[]}"#, 4).is_err(),
            "no CPU keys"
        );
        let bad_id = br#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":0,"bytes":1,"retransmits":0,"jitter":0,"errors":0,"packets":0}]}"#;
        assert!(read_results(bad_id, 4).is_err());
        assert_eq!(
            [stream_id(0), stream_id(1), stream_id(2)],
            [1, 3, 4],
            "iperf3 skips id 2"
        );
        assert_eq!(
            [stream_index(1), stream_index(2), stream_index(4)],
            [Some(0), None, Some(2)]
        );
    }

    #[test]
    fn frames_are_bounded_before_reading() {
        let f = encode_json(&json!({"a": 1}));
        assert_eq!(json_len(f[..4].try_into().unwrap()).unwrap(), f.len() - 4);
        assert!(json_len((MAX_JSON_LEN as u32 + 1).to_be_bytes()).is_err());
        let c = make_cookie(&[255; 36]);
        assert!(c[..36].iter().all(u8::is_ascii_alphanumeric) && c[36] == 0);
    }
}

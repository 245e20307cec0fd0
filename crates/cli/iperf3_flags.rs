//! iperf3's client flags that `longhaul test` takes as iperf3 users type them (the common ones,
//! `-P`, `-t`, `-R`, ..., are `test`'s own), and those it refuses with the longhaul way to do the
//! same. docs/test.md's table of every iperf3 3.x client flag is kept to these definitions by the
//! test `the_iperf3_table_in_the_docs_matches_the_flags`.

use longhaul_proto::msg::{MAX_MSS, MIN_MSS, SocketFlags};
use longhaul_units::parse_size;

/// The iperf3 flags `test` takes (beside those it shares with iperf3 from the start).
#[derive(clap::Args, Debug, Default, Clone)]
#[command(next_help_heading = "iperf3's client flags")]
pub(crate) struct Iperf3Flags {
    /// Bitrate column in fixed units: k, m, g, t (Kbits .. Tbits/sec) or K, M, G, T (KBytes ..
    /// TBytes/sec), as iperf3 -f [default: the unit that fits].
    #[arg(short = 'f', long, value_name = "UNIT", value_parser = rate_unit)]
    pub(crate) format: Option<char>,
    /// Send this many blocks of -l bytes (iperf3 -k; the same as -n N x -l).
    #[arg(short = 'k', long, value_name = "N", value_parser = parse_size,
          conflicts_with_all = ["bytes", "time", "omit"])]
    pub(crate) blockcount: Option<u64>,
    /// Prefix every output line with STR (iperf3 -T); with --json, the document's "title".
    #[arg(short = 'T', long, value_name = "STR")]
    pub(crate) title: Option<String>,
    /// A string put in the JSON document as "extra_data" (iperf3 --extra-data).
    #[arg(long, value_name = "STR")]
    pub(crate) extra_data: Option<String>,
    /// Start every output line with the local time in strftime FORMAT [default: "%c "].
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "%c ")]
    pub(crate) timestamps: Option<String>,
    /// Append the output to FILE instead of standard output (never through a symbolic link).
    #[arg(long, value_name = "FILE")]
    pub(crate) logfile: Option<std::path::PathBuf>,
    /// Flush the output at every line: always so in longhaul (iperf3 --forceflush).
    #[arg(long)]
    pub(crate) forceflush: bool,
    /// More detail: the test's parameters and every data socket as the kernel set it up (TOS,
    /// no-delay, MSS, buffers) on both ends.
    #[arg(short = 'V', long)]
    pub(crate) verbose: bool,
    /// Debug logging on standard error (iperf3 -d; RUST_LOG chooses finer).
    #[arg(short = 'd', long, value_name = "LEVEL", num_args = 0..=1, require_equals = true,
          default_missing_value = "4", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub(crate) debug: Option<u8>,
    /// The server's results in the output: always so in longhaul (each end's lines, the
    /// server's CPU and sockets; in --json, end.streams[].receiver and start.longhaul.remote_*).
    #[arg(long)]
    pub(crate) get_server_output: bool,
    /// Run the client on CPU N (iperf3 -A N). A longhaul server serves many tests: pin it as a
    /// whole (taskset, or CPUAffinity= in its systemd unit), not from here.
    #[arg(short = 'A', long, value_name = "N", value_parser = affinity)]
    pub(crate) affinity: Option<usize>,
    /// Bind the client's data connections to PORT, PORT+1, ... (iperf3 --cport).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) cport: Option<u16>,
    /// TCP_MAXSEG on both ends' data sockets: the largest segment sent (iperf3 -M).
    #[arg(short = 'M', long = "set-mss", value_name = "BYTES", value_parser = mss)]
    pub(crate) set_mss: Option<u32>,
    /// TCP_NODELAY on both ends' data sockets: Nagle's algorithm off (iperf3 -N).
    #[arg(short = 'N', long)]
    pub(crate) no_delay: bool,
    /// The IP TOS byte (IPv6: traffic class) of every data packet, 0-255: decimal, 0octal or
    /// 0xhex (iperf3 -S).
    #[arg(short = 'S', long, value_name = "N", value_parser = tos, conflicts_with = "dscp")]
    pub(crate) tos: Option<u8>,
    /// The DSCP of every data packet: 0-63 or a name (ef, af11 .. af43, cs0 .. cs7, va, le).
    #[arg(long, value_name = "N|NAME", value_parser = dscp)]
    pub(crate) dscp: Option<u8>,
    /// Send the bytes 0123456789 over and over instead of pseudo-random ones (iperf3
    /// --repeating-payload).
    #[arg(long)]
    pub(crate) repeating_payload: bool,
    /// UDP over IPv4: set DF, never fragment (a datagram above the path's MTU fails instead).
    #[arg(long)]
    pub(crate) dont_fragment: bool,
    /// Pace each TCP stream at RATE in the kernel (iperf3 --fq-rate; SO_MAX_PACING_RATE, as -b).
    #[arg(long, value_name = "RATE", value_parser = crate::args::rate)]
    pub(crate) fq_rate: Option<u64>,
    #[command(flatten)]
    pub(crate) refused: Refused,
}

impl Iperf3Flags {
    /// The socket options the flags ask both ends to set.
    pub(crate) fn sockets(&self) -> SocketFlags {
        SocketFlags {
            mss: self.set_mss,
            nodelay: self.no_delay,
            tos: self.tos.or(self.dscp.map(|d| d << 2)),
            repeating_payload: self.repeating_payload,
            dont_fragment: self.dont_fragment,
        }
    }

    /// The first flag given that acts on this host's output or process rather than on the test
    /// (so has no meaning in a campaign's or a monitor's file, whose tests run elsewhere).
    pub(crate) fn local_only(&self) -> Option<&'static str> {
        [
            (self.format.is_some(), "-f"),
            (self.title.is_some(), "-T"),
            (self.extra_data.is_some(), "--extra-data"),
            (self.timestamps.is_some(), "--timestamps"),
            (self.logfile.is_some(), "--logfile"),
            (self.verbose, "-V"),
            (self.debug.is_some(), "-d"),
            (self.affinity.is_some(), "-A"),
            (self.cport.is_some(), "--cport"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Pins this process (and the threads it starts) to the CPU of `-A`.
    pub(crate) fn pin(&self) -> anyhow::Result<()> {
        let Some(cpu) = self.affinity else {
            return Ok(());
        };
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set)
            .map_err(|e| anyhow::anyhow!("-A {cpu}: cannot run on CPU {cpu}: {e}"))
    }
}

/// `-f`: iperf3's unit letters.
fn rate_unit(s: &str) -> Result<char, String> {
    match s {
        "k" | "m" | "g" | "t" | "K" | "M" | "G" | "T" => Ok(s.chars().next().unwrap_or('m')),
        _ => Err("give one of k, m, g, t (bits) or K, M, G, T (bytes)".into()),
    }
}

/// A rate in the fixed unit of `-f`, as iperf3 prints it: "941 Mbits/sec", "9.41 Gbits/sec".
pub(crate) fn fmt_rate_in(bps: f64, unit: char) -> String {
    let (div, label) = match unit {
        'k' => (1e3, "Kbits"),
        'm' => (1e6, "Mbits"),
        'g' => (1e9, "Gbits"),
        't' => (1e12, "Tbits"),
        'K' => (8.0 * 1024.0, "KBytes"),
        'M' => (8.0 * 1024.0 * 1024.0, "MBytes"),
        'G' => (8.0 * 1024.0 * 1024.0 * 1024.0, "GBytes"),
        _ => (8.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "TBytes"),
    };
    let v = bps / div;
    let digits = if v < 9.995 {
        2
    } else if v < 99.95 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {label}/sec")
}

/// `-A N` (a CPU); iperf3's `N,M` also names the server's, which a server of many tests refuses.
fn affinity(s: &str) -> Result<usize, String> {
    if s.contains(',') {
        return Err(
            "a longhaul server serves many tests at once: give the client's CPU only, \
                    and pin the server as a whole (taskset, or CPUAffinity= in its systemd unit)"
                .into(),
        );
    }
    let cpu: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a CPU number"))?;
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(format!(
            "CPU {cpu} is beyond the {} a CPU set holds",
            rustix::thread::CpuSet::MAX_CPU
        ));
    }
    Ok(cpu)
}

fn mss(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(m) if (MIN_MSS..=MAX_MSS).contains(&m) => Ok(m),
        _ => Err(format!(
            "give {MIN_MSS} to {MAX_MSS} bytes (Linux's bounds of TCP_MAXSEG)"
        )),
    }
}

/// A number as C's strtol with base 0 reads it: decimal, 0octal, 0xhex.
fn c_number(s: &str) -> Option<u32> {
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

fn tos(s: &str) -> Result<u8, String> {
    c_number(s)
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| format!("{s:?} is not a TOS byte: 0-255, as 52, 064 or 0x34"))
}

/// DSCP names (RFC 2474 class selectors, RFC 2597 assured forwarding, RFC 3246 expedited
/// forwarding, RFC 5865 voice admit, RFC 8622 lower effort) and their code points.
const DSCP_NAMES: [(&str, u8); 24] = [
    ("cs0", 0),
    ("cs1", 8),
    ("cs2", 16),
    ("cs3", 24),
    ("cs4", 32),
    ("cs5", 40),
    ("cs6", 48),
    ("cs7", 56),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("ef", 46),
    ("va", 44),
    ("le", 1),
    ("default", 0),
];

fn dscp(s: &str) -> Result<u8, String> {
    let lower = s.to_ascii_lowercase();
    if let Some((_, v)) = DSCP_NAMES.iter().find(|(n, _)| *n == lower) {
        return Ok(*v);
    }
    c_number(s)
        .and_then(|v| u8::try_from(v).ok())
        .filter(|v| *v < 64)
        .ok_or_else(|| {
            format!("{s:?} is not a DSCP: 0-63, or ef, af11 .. af43, cs0 .. cs7, va, le")
        })
}

/// An iperf3 client flag `test` refuses: its names, whether it takes a value, and the one line
/// that says what to do instead.
#[derive(Debug)]
pub(crate) struct RefusedFlag {
    pub(crate) long: &'static str,
    pub(crate) short: Option<char>,
    pub(crate) takes_value: bool,
    pub(crate) instead: &'static str,
}

/// Every iperf3 client flag `test` refuses, with the longhaul way.
pub(crate) const REFUSED: &[RefusedFlag] = &[
    RefusedFlag {
        long: "file",
        short: Some('F'),
        takes_value: true,
        instead: "disk-to-disk is `longhaul send FILE HOST:DEST` (or `get`): verified, resumable",
    },
    RefusedFlag {
        long: "pidfile",
        short: Some('I'),
        takes_value: true,
        instead: "a test's PID is the shell's $!; `longhaul server --pidfile` writes the server's",
    },
    RefusedFlag {
        long: "bind-dev",
        short: None,
        takes_value: true,
        instead: "bind to the interface's address with -B ADDR",
    },
    RefusedFlag {
        long: "rcv-timeout",
        short: None,
        takes_value: true,
        instead: "a stalled test ends on its own: the server's --stall-timeout (60 s) and \
                  --connect-timeout for each set-up step",
    },
    RefusedFlag {
        long: "snd-timeout",
        short: None,
        takes_value: true,
        instead: "a stalled test ends on its own: the server's --stall-timeout (60 s) and \
                  --connect-timeout for each set-up step",
    },
    RefusedFlag {
        long: "sctp",
        short: None,
        takes_value: false,
        instead: "longhaul tests TCP, UDP (-u) and QUIC (--transport udp), not SCTP",
    },
    RefusedFlag {
        long: "xbind",
        short: Some('X'),
        takes_value: true,
        instead: "longhaul tests TCP, UDP (-u) and QUIC (--transport udp), not SCTP",
    },
    RefusedFlag {
        long: "nstreams",
        short: None,
        takes_value: true,
        instead: "longhaul has no SCTP; parallel streams are -P N",
    },
    RefusedFlag {
        long: "mptcp",
        short: Some('m'),
        takes_value: false,
        instead: "longhaul tests TCP, UDP (-u) and QUIC (--transport udp), not MPTCP",
    },
    RefusedFlag {
        long: "pacing-timer",
        short: None,
        takes_value: true,
        instead: "longhaul paces in the kernel (-b, --fq-rate, --pace: SO_MAX_PACING_RATE), \
                  with no timer to set",
    },
    RefusedFlag {
        long: "flowlabel",
        short: Some('L'),
        takes_value: true,
        instead: "longhaul sets no IPv6 flow label; the kernel's own (net.ipv6.auto_flowlabels) \
                  stays",
    },
    RefusedFlag {
        long: "username",
        short: None,
        takes_value: true,
        instead: "longhaul authenticates with a key: --key FILE (server --require-key)",
    },
    RefusedFlag {
        long: "rsa-public-key-path",
        short: None,
        takes_value: true,
        instead: "longhaul authenticates with a key: --key FILE (server --require-key)",
    },
    RefusedFlag {
        long: "skip-rx-copy",
        short: None,
        takes_value: false,
        instead: "longhaul's receivers read every byte; -Z sends by zero copy",
    },
    RefusedFlag {
        long: "cntl-ka",
        short: None,
        takes_value: true,
        instead: "every step of the control conversation has a deadline on both ends, and the server ends a test whose streams stall for --stall-timeout; no keepalive to set",
    },
    RefusedFlag {
        long: "version",
        short: Some('v'),
        takes_value: false,
        instead: "the version is `longhaul --version`",
    },
];

/// The refused flags as clap arguments (hidden from `--help`; docs/test.md lists them), so that
/// each is a usage error (status 2) with its line instead of "unexpected argument".
#[derive(Debug, Default, Clone)]
pub(crate) struct Refused;

impl RefusedFlag {
    /// The one-line error when it is given.
    pub(crate) fn message(&self) -> String {
        format!(
            "iperf3's --{}{} is not supported: {}",
            self.long,
            self.short.map_or(String::new(), |c| format!(" (-{c})")),
            self.instead
        )
    }
}

fn id(f: &RefusedFlag) -> String {
    format!("iperf3-refused-{}", f.long)
}

impl clap::FromArgMatches for Refused {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = REFUSED
            .iter()
            .find(|f| m.value_source(&id(f)) == Some(clap::parser::ValueSource::CommandLine));
        match given {
            Some(f) => Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!("{}\n", f.message()),
            )),
            None => Ok(Self),
        }
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        Self::from_arg_matches(m).map(|_| ())
    }
}

impl clap::Args for Refused {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for f in REFUSED {
            let mut arg = clap::Arg::new(id(f)).long(f.long).hide(true);
            if let Some(c) = f.short {
                arg = arg.short(c);
            }
            arg = if f.takes_value {
                arg.num_args(1).value_name("VALUE")
            } else {
                arg.action(clap::ArgAction::SetTrue)
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_takes_c_numbers_and_dscp_names() {
        for s in ["52", "064", "0x34"] {
            assert_eq!(tos(s), Ok(52), "{s}");
        }
        assert!(tos("256").is_err());
        assert_eq!(dscp("EF"), Ok(46));
        assert_eq!(dscp("af11"), Ok(10));
        assert_eq!(dscp("0x2e"), Ok(46));
        assert!(dscp("64").is_err());
    }

    /// docs/test.md's table of iperf3's client flags: every refused flag with its line as the code
    /// gives it, and every other flag taken by `longhaul test`.
    #[test]
    fn the_iperf3_table_in_the_docs_matches_the_flags() {
        use clap::CommandFactory;
        let docs = include_str!("../../docs/test.md");
        let table = docs
            .split("## iperf3's client flags")
            .nth(1)
            .expect("docs/test.md has the iperf3 flag table")
            .split("\n## ")
            .next()
            .unwrap_or_default();
        let mut cli = crate::Cli::command();
        cli.build();
        let test = cli.find_subcommand("test").expect("the test subcommand");
        let mut refused_rows = 0;
        for row in table.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split(" | ").collect();
            assert!(cells.len() >= 3, "{row}");
            let longs: Vec<&str> = cells[0]
                .split('`')
                .skip(1)
                .step_by(2)
                .flat_map(|flags| flags.split(", "))
                .filter_map(|f| f.strip_prefix("--"))
                .map(|f| f.split([' ', '[']).next().unwrap_or(f))
                .collect();
            assert!(!longs.is_empty(), "no long flag in {row}");
            for long in longs {
                let here = test.get_arguments().find(|a| {
                    a.get_long() == Some(long)
                        || a.get_all_aliases().is_some_and(|v| v.contains(&long))
                });
                if cells[1] == "refused" {
                    let f = REFUSED.iter().find(|f| f.long == long).unwrap_or_else(|| {
                        panic!("--{long} is refused in the docs, not in REFUSED")
                    });
                    assert_eq!(cells[2].trim_end_matches(" |"), f.instead, "--{long}");
                    assert!(here.is_some_and(|a| a.is_hide_set()), "--{long}");
                    refused_rows += 1;
                } else {
                    assert!(
                        here.is_some_and(|a| !a.is_hide_set()),
                        "the docs say `test` takes --{long}; its --help has no such flag"
                    );
                }
            }
        }
        assert_eq!(
            refused_rows,
            REFUSED.len(),
            "every refused flag has its row"
        );
    }

    #[test]
    fn fixed_units_print_as_iperf3_does() {
        assert_eq!(fmt_rate_in(941e6, 'm'), "941 Mbits/sec");
        assert_eq!(fmt_rate_in(9.41e9, 'g'), "9.41 Gbits/sec");
        assert_eq!(fmt_rate_in(94.1e6, 'm'), "94.1 Mbits/sec");
        assert_eq!(
            fmt_rate_in(8.0 * 1024.0 * 1024.0 * 100.0, 'M'),
            "100 MBytes/sec"
        );
    }
}

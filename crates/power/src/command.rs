//! Local commands as a power endpoint (a VM manager, an emulated host's script), and the bounded
//! runner the IPMI endpoint uses for ipmitool too. Commands run without a shell, from their
//! argument vectors; each has a time limit and at most [`OUTPUT_LIMIT`] of its output is kept.
//! The status command prints `on` or `off` (its first word; case does not matter).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{PowerError, PowerState, Request};

/// Output kept from a command, per stream; the rest is read and dropped.
pub const OUTPUT_LIMIT: u64 = 64 * 1024;

/// What a command did.
#[derive(Debug)]
pub struct Ran {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Standard output, at most [`OUTPUT_LIMIT`], lossily decoded.
    pub stdout: String,
    /// Standard error, likewise.
    pub stderr: String,
}

impl Ran {
    /// The last non-empty line of standard error (or output), for messages.
    pub fn complaint(&self) -> String {
        let last = |s: &str| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::trim)
                .map(str::to_owned)
        };
        last(&self.stderr)
            .or_else(|| last(&self.stdout))
            .map_or_else(|| "no output".to_owned(), |l| crate::quote(&l, 200))
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut r).take(OUTPUT_LIMIT).read_to_end(&mut kept);
        let _ = std::io::copy(&mut r, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// Runs `argv` with `env` added, standard input closed, for at most `limit` (then it is killed).
pub fn run_bounded(argv: &[String], env: &[(&str, &str)], limit: Duration) -> Result<Ran, String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    let mut child = Command::new(prog)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{prog} gave no answer within {} s (killed)",
                    limit.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {prog}: {e}")),
        }
    };
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Ok(Ran {
        code: status.code(),
        stdout: join(out),
        stderr: join(err),
    })
}

/// Power through local commands.
#[derive(Debug, Clone)]
pub struct Commands {
    status: Vec<String>,
    on: Vec<String>,
    off: Vec<String>,
    reset: Option<Vec<String>>,
    timeout: Duration,
}

impl Commands {
    /// The commands; each must name a program.
    pub fn new(
        status: Vec<String>,
        on: Vec<String>,
        off: Vec<String>,
        reset: Option<Vec<String>>,
        timeout: Duration,
    ) -> Result<Self, String> {
        for (name, argv) in [("status", &status), ("on", &on), ("off", &off)]
            .into_iter()
            .chain(reset.as_ref().map(|r| ("reset", r)))
        {
            if argv.first().is_none_or(|p| p.is_empty()) {
                return Err(format!("command.{name} names no program"));
            }
        }
        Ok(Self {
            status,
            on,
            off,
            reset,
            timeout,
        })
    }

    /// `command PROGRAM`, naming the status command's program.
    pub fn describe(&self) -> String {
        format!("command {}", self.status[0])
    }

    fn error(&self, message: String) -> PowerError {
        PowerError {
            endpoint: self.describe(),
            message,
        }
    }

    fn run(&self, argv: &[String]) -> Result<Ran, PowerError> {
        let ran = run_bounded(argv, &[], self.timeout).map_err(|e| self.error(e))?;
        if ran.code != Some(0) {
            return Err(self.error(format!(
                "{} failed (exit {}): {}",
                argv[0],
                ran.code
                    .map_or_else(|| "by a signal".to_owned(), |c| c.to_string()),
                ran.complaint()
            )));
        }
        Ok(ran)
    }

    /// Runs the status command and reads `on` or `off` from it.
    pub fn state(&self) -> Result<PowerState, PowerError> {
        let ran = self.run(&self.status)?;
        let word = ran
            .stdout
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        match word.as_str() {
            "on" => Ok(PowerState::On),
            "off" => Ok(PowerState::Off),
            _ => Err(self.error(format!(
                "the status command printed {}, not on or off",
                crate::quote(ran.stdout.trim(), 80)
            ))),
        }
    }

    /// Runs the request's command.
    pub fn send(&self, request: Request) -> Result<String, PowerError> {
        let argv = match request {
            Request::On => &self.on,
            Request::Off => &self.off,
            Request::Reset => self
                .reset
                .as_ref()
                .ok_or_else(|| self.error("no reset command is configured: use cycle".into()))?,
        };
        self.run(argv)?;
        Ok(format!("{} ran", argv[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Endpoint, PowerAction, Wait};

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_command_endpoint_reads_its_outcome_back() {
        let dir = std::env::temp_dir().join(format!("lh-power-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let flag = dir.join("on");
        let f = flag.display();
        let c = Commands::new(
            sh(&format!("[ -e {f} ] && echo On || echo off")),
            sh(&format!("touch {f}")),
            sh(&format!("rm -f {f}")),
            None,
            Duration::from_secs(5),
        )
        .unwrap();
        let e = Endpoint::Command(c);
        let wait = Wait {
            limit: Duration::from_secs(2),
            poll: Duration::from_millis(10),
        };
        assert_eq!(
            e.run(PowerAction::Status, wait).unwrap().state,
            PowerState::Off
        );
        let on = e.run(PowerAction::On, wait).unwrap();
        assert_eq!(on.state, PowerState::On);
        assert_eq!(on.answers, ["state off", "sh ran", "state on"]);
        let cycle = e.run(PowerAction::Cycle, wait).unwrap();
        assert_eq!(
            cycle.answers,
            ["state on", "sh ran", "state off", "sh ran", "state on"]
        );
        let err = e.run(PowerAction::Reset, wait).unwrap_err();
        assert!(err.message.contains("no reset command"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_command_that_lies_hangs_or_floods_is_an_error_not_a_state() {
        let t = Duration::from_secs(1);
        let wait = Wait {
            limit: Duration::from_millis(300),
            poll: Duration::from_millis(10),
        };
        // Says it is off whatever is asked: "on" must fail, not report on.
        let liar = Endpoint::Command(
            Commands::new(sh("echo off"), sh("true"), sh("true"), None, t).unwrap(),
        );
        let e = liar.run(PowerAction::On, wait).unwrap_err();
        assert!(
            e.message
                .contains("asked for on, but the BMC still reports off"),
            "{e}"
        );
        let garbage = Endpoint::Command(
            Commands::new(
                sh("printf 'maybe\\n\\033[2J'"),
                sh("true"),
                sh("true"),
                None,
                t,
            )
            .unwrap(),
        );
        let e = garbage.state().unwrap_err();
        assert!(e.message.contains("not on or off"), "{e}");
        let hang = Endpoint::Command(
            Commands::new(sh("sleep 30"), sh("true"), sh("true"), None, t).unwrap(),
        );
        let started = Instant::now();
        let e = hang.state().unwrap_err();
        assert!(e.message.contains("no answer within 1 s"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let flood = run_bounded(&sh("head -c 10000000 /dev/zero; echo on"), &[], t).unwrap();
        assert_eq!(flood.stdout.len() as u64, OUTPUT_LIMIT);
        let fails = Endpoint::Command(
            Commands::new(
                sh("echo 'no such vm' >&2; exit 3"),
                sh("true"),
                sh("true"),
                None,
                t,
            )
            .unwrap(),
        );
        let e = fails.state().unwrap_err();
        assert_eq!(
            e.to_string(),
            "command sh: sh failed (exit 3): \"no such vm\""
        );
    }
}

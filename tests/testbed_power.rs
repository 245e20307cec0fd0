//! Power control through real BMC protocols (issue 20), end to end: `longhaul testbed serve --bmc`
//! against sushy-tools' `sushy-emulator` (a Redfish BMC; pinned in the venv `scripts/test.sh`
//! makes) and Debian's `ipmi_sim` (an IPMI 2.0 BMC) whose chassis control starts and stops a
//! process, with each state cross-checked by the BMC's own API (Redfish GET) or `ipmitool`. Also:
//! who may (the holder of an active booking; an admin with a reason), the operations log of every
//! attempt, and a BMC that refuses the credentials.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::{TempDir, free_port};
use serde_json::{Value, json};

use crate::testbed::{Service, agent, get, send};
use crate::testbed_console::{book_now, console_until, private_file, texts};
use crate::util::{bin, program};

/// Where `scripts/test.sh` installs sushy-tools (pinned there).
const SUSHY_DEFAULT: &str = "/opt/longhaul-venv/bin/sushy-emulator";
const PASSWORD: &str = "bmc-secret-7f3a";

const INVENTORY: &str = r#"
[[resource]]
id = "cern"
kind = "site"
zone = "Europe/Zurich"

[[resource]]
id = "cern/pc-1"
kind = "host"

[[resource]]
id = "cern/pc-2"
kind = "host"

[[resource]]
id = "cern/pc-3"
kind = "host"
"#;

/// Kills and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A sushy-emulator with the fake driver: one system, `pc-1`, off, behind basic auth
/// (admin / [`PASSWORD`]). The fake driver applies each power change 1-11 s after it is asked, as
/// a real BMC takes its time: what the service reads back must wait for it.
struct Sushy {
    _child: Reaped,
    base: String,
    system: String,
}

impl Sushy {
    fn start(dir: &Path) -> Option<Self> {
        let exe = std::env::var_os("LONGHAUL_SUSHY_EMULATOR")
            .map_or_else(|| PathBuf::from(SUSHY_DEFAULT), PathBuf::from);
        if !longhaul_testkit::require(
            exe.is_file(),
            format_args!(
                "sushy-emulator not found at {}: scripts/test.sh installs it there, or set \
                 LONGHAUL_SUSHY_EMULATOR",
                exe.display()
            ),
        ) {
            return None;
        }
        let python = exe.with_file_name("python3");
        let hash = Command::new(&python)
            .args([
                "-c",
                "import bcrypt, sys; print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt()).decode())",
                PASSWORD,
            ])
            .output()
            .expect("bcrypt from the venv");
        assert!(
            hash.status.success(),
            "{}",
            String::from_utf8_lossy(&hash.stderr)
        );
        let htpasswd = dir.join("htpasswd");
        private_file(
            &htpasswd,
            &format!("admin:{}", String::from_utf8_lossy(&hash.stdout)),
        );
        let port = free_port();
        let uuid = "7c1e6b2a-4a53-4d4e-9d53-0a1c2f3e4d5a";
        let conf = dir.join("sushy.conf");
        std::fs::write(
            &conf,
            format!(
                "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {port}\n\
                 SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_STATE_DIR = '{}'\n\
                 SUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_FAKE_SYSTEMS = [{{'uuid': '{uuid}', \
                 'name': 'pc-1', 'power_state': 'Off', 'nics': []}}]\n",
                htpasswd.display(),
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new(&exe)
            .args(["--fake", "--config"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sushy-emulator");
        let sushy = Self {
            _child: Reaped(child),
            base: format!("http://127.0.0.1:{port}"),
            system: format!("/redfish/v1/Systems/{uuid}"),
        };
        let started = Instant::now();
        while agent()
            .get(&format!("{}/redfish/v1/", sushy.base))
            .call()
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "sushy-emulator did not come up"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(sushy)
    }

    /// The system's PowerState, from the emulator's own API.
    fn power_state(&self) -> String {
        let auth = format!("Basic {}", base64_of(&format!("admin:{PASSWORD}")));
        let v: Value = agent()
            .get(&format!("{}{}", self.base, self.system))
            .set("Authorization", &auth)
            .call()
            .expect("GET the system")
            .into_json()
            .unwrap();
        v["PowerState"].as_str().unwrap_or("").to_owned()
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn power(
    svc: &Service,
    token: &str,
    host: &str,
    action: &str,
    reason: Option<&str>,
) -> (u16, Value) {
    let mut body = json!({"host": host, "action": action});
    if let Some(r) = reason {
        body["reason"] = json!(r);
    }
    send(
        agent()
            .post(&svc.url("/api/v1/power"))
            .set("Authorization", &format!("Bearer {token}")),
        Some(&body),
    )
}

fn operations(svc: &Service, token: &str) -> Vec<Value> {
    let (status, body) = get(svc, token, "/api/v1/operations?limit=1000");
    assert_eq!(status, 200, "{body}");
    body["operations"].as_array().unwrap().clone()
}

#[test]
fn testbed_power_through_a_redfish_bmc() {
    let dir = TempDir::new("power-redfish");
    let Some(sushy) = Sushy::start(&dir.0) else {
        return;
    };
    let secret = dir.0.join("pc-1.secret");
    private_file(&secret, &format!("{PASSWORD}\n"));
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-1\"\nredfish = \"{0}\"\nuser = \"admin\"\npassword_file = \"{1}\"\nwait = 60\n\n\
             [[host]]\nid = \"cern/pc-3\"\nredfish = \"{0}\"\nuser = \"admin\"\npassword = \"not-{PASSWORD}\"\n",
            sushy.base,
            secret.display()
        ),
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[
            ("alice", "user", None),
            ("bob", "user", None),
            ("root", "admin", None),
        ],
        &["--bmc", &bmc.display().to_string()],
        INVENTORY,
    );
    let (alice, bob, root) = (&tokens[0], &tokens[1], &tokens[2]);
    book_now(&svc, alice, "cern/pc-1");

    // Who may: not bob (no booking), not an admin without a reason.
    let (s, b) = power(&svc, bob, "cern/pc-1", "off", None);
    assert_eq!(
        (s, b["code"].as_str()),
        (403, Some("no_reservation")),
        "{b}"
    );
    let (s, b) = get(&svc, bob, "/api/v1/power?host=cern/pc-1");
    assert_eq!(
        (s, b["code"].as_str()),
        (403, Some("no_reservation")),
        "{b}"
    );
    let (s, b) = power(&svc, root, "cern/pc-1", "on", None);
    assert_eq!(
        (s, b["code"].as_str()),
        (403, Some("reason_required")),
        "{b}"
    );
    assert_eq!(sushy.power_state(), "Off", "nothing reached the BMC");

    // The holder: each outcome is read back, and the BMC's own API agrees.
    let (s, b) = get(&svc, alice, "/api/v1/power?host=cern/pc-1");
    assert_eq!((s, b["state"].as_str()), (200, Some("off")), "{b}");
    let (s, b) = power(&svc, alice, "cern/pc-1", "on", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    assert_eq!(b["endpoint"], "redfish");
    assert_eq!(sushy.power_state(), "On");
    let (s, b) = power(&svc, alice, "cern/pc-1", "off", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("off")), "{b}");
    assert!(
        b["answers"]
            .to_string()
            .contains("ResetType ForceOff accepted"),
        "{b}"
    );
    assert_eq!(sushy.power_state(), "Off");
    // A cycle of a host that is off only powers it on; of one that is on, goes through off.
    let (s, b) = power(&svc, alice, "cern/pc-1", "cycle", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let (s, b) = power(&svc, alice, "cern/pc-1", "cycle", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let answers = b["answers"].as_array().unwrap();
    let pos = |needle: &str| {
        answers
            .iter()
            .position(|a| a.as_str().unwrap().contains(needle))
    };
    assert!(
        pos("ForceOff") < pos("state off") && pos("state off") < pos("ResetType On"),
        "{b}"
    );
    assert_eq!(sushy.power_state(), "On");
    let (s, b) = power(&svc, alice, "cern/pc-1", "reset", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    assert!(b["answers"].to_string().contains("ForceRestart"), "{b}");
    assert_eq!(sushy.power_state(), "On");

    // An admin with a reason may; a BMC that refuses the credentials is a 502 naming the host and
    // the endpoint, and never a state.
    let (s, b) = get(&svc, root, "/api/v1/power?host=cern/pc-1");
    assert_eq!(s, 403, "a GET carries no reason: {b}");
    let (s, b) = power(
        &svc,
        root,
        "cern/pc-1",
        "status",
        Some("checking after the hang report"),
    );
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let (s, b) = power(&svc, root, "cern/pc-3", "off", Some("testing the BMC"));
    assert_eq!((s, b["code"].as_str()), (502, Some("bmc_error")), "{b}");
    let msg = b["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("cern/pc-3: redfish {}: ", sushy.base))
            && msg.contains("refused the credentials of user \"admin\""),
        "{msg}"
    );
    assert!(b.get("state").is_none());
    // Bad input: an unknown action, a host without an endpoint, a site.
    let (s, b) = power(&svc, alice, "cern/pc-1", "explode", None);
    assert_eq!(
        (s, b["code"].as_str()),
        (400, Some("invalid_action")),
        "{b}"
    );
    let (s, b) = power(&svc, root, "cern/pc-2", "status", Some("x"));
    assert_eq!(
        (s, b["code"].as_str()),
        (404, Some("no_power_endpoint")),
        "{b}"
    );
    let (s, b) = power(&svc, root, "cern", "status", Some("x"));
    assert_eq!((s, b["code"].as_str()), (422, Some("not_a_host")), "{b}");

    // The operations log: every attempt, allowed or refused, with the BMC's answer; admins see
    // all, users their own; no credential anywhere.
    let all = operations(&svc, root);
    let text = serde_json::to_string(&all).unwrap();
    assert!(!text.contains(PASSWORD), "a password reached the log");
    let refused: Vec<&Value> = all.iter().filter(|o| o["result"] == "refused").collect();
    assert_eq!(refused.len(), 4, "{text}");
    assert!(refused.iter().all(|o| o["allowed"] == false));
    let ok: Vec<&Value> = all.iter().filter(|o| o["result"] == "ok").collect();
    assert_eq!(ok.len(), 7, "{text}");
    assert!(
        ok.iter()
            .all(|o| o["state"].is_string() && o["detail"].is_string())
    );
    let admin = all
        .iter()
        .find(|o| o["actor"] == "root" && o["result"] == "ok")
        .unwrap();
    assert_eq!(admin["grounds"], "admin: checking after the hang report");
    assert_eq!(admin["reason"], "checking after the hang report");
    let failed = all.iter().find(|o| o["result"] == "failed").unwrap();
    assert!(
        failed["detail"]
            .as_str()
            .unwrap()
            .contains("refused the credentials")
    );
    let mine = operations(&svc, bob);
    assert_eq!(mine.len(), 2);
    assert!(
        mine.iter()
            .all(|o| o["actor"] == "bob" && o["result"] == "refused")
    );

    // The command line, as a user runs it.
    let out = Command::new(bin())
        .args([
            "testbed",
            "power",
            "cern/pc-1",
            "status",
            "--server",
            &svc.url(""),
            "--token",
            alice,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.starts_with("cern/pc-1: power on (redfish status"),
        "{printed}"
    );
    let out = Command::new(bin())
        .args([
            "testbed",
            "power",
            "cern/pc-1",
            "off",
            "--server",
            &svc.url(""),
            "--token",
            bob,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("power off of cern/pc-1: bob holds no active reservation covering cern/pc-1")
            && err.trim_end().ends_with("(403 no_reservation)"),
        "{err}"
    );
}

/// An `ipmi_sim` BMC on a free UDP port whose chassis control starts, stops and restarts a process
/// (the "machine": its pid file says whether it runs).
struct IpmiSim {
    _child: Reaped,
    port: u16,
    pidfile: PathBuf,
}

impl IpmiSim {
    /// The machine is `sleep 3600`.
    fn start(dir: &Path) -> Option<Self> {
        Self::start_with(dir, "setsid sleep 3600 </dev/null >/dev/null 2>&1 &")
    }

    /// The machine is what `launch` (a shell command that starts it in the background) starts.
    fn start_with(dir: &Path, launch: &str) -> Option<Self> {
        if !program("ipmi_sim", "openipmi") || !program("ipmitool", "ipmitool") {
            return None;
        }
        let pidfile = dir.join("machine.pid");
        let script = dir.join("chassis");
        // ipmi_sim runs `chassis get power` and `chassis set power 1|0` / `set reset 1`.
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\npid={0}\n\
                 alive() {{ [ -r /proc/$1/stat ] && [ \"$(cut -d' ' -f3 /proc/$1/stat)\" != Z ]; }}\n\
                 up() {{ [ -s $pid ] && alive \"$(cat $pid)\"; }}\n\
                 start() {{ {launch} echo $! > $pid; }}\n\
                 stop() {{ if up; then p=$(cat $pid); kill $p; while alive $p; do sleep 0.1; done; fi; rm -f $pid; }}\n\
                 op=$1; shift\n\
                 if [ \"$op\" = get ]; then for p in \"$@\"; do case $p in power) if up; then echo power:1; else echo power:0; fi;; *) echo $p:0;; esac; done; exit 0; fi\n\
                 while [ $# -ge 2 ]; do case $1 in power) if [ \"$2\" = 1 ]; then up || start; else stop; fi;; reset) stop; start;; esac; shift 2; done\n",
                pidfile.display()
            ),
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let port = free_port();
        let conf = dir.join("lan.conf");
        std::fs::write(
            &conf,
            format!(
                "name \"lh-power\"\nset_working_mc 0x20\n  startlan 1\n    addr 127.0.0.1 {port}\n    \
                 priv_limit admin\n    allowed_auths_callback none md2 md5 straight\n    \
                 allowed_auths_user none md2 md5 straight\n    allowed_auths_operator none md2 md5 straight\n    \
                 allowed_auths_admin none md2 md5 straight\n    guid a123456789abcdefa123456789abcdef\n  endlan\n  \
                 chassis_control \"{}\"\n  user 2 true \"admin\" \"{PASSWORD}\" admin 10 none md2 md5 straight\n",
                script.display()
            ),
        )
        .unwrap();
        let emu = dir.join("bmc.emu");
        std::fs::write(
            &emu,
            "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n",
        )
        .unwrap();
        let state = dir.join("ipmi-state");
        std::fs::create_dir_all(&state).unwrap();
        let child = Command::new("ipmi_sim")
            .arg("-c")
            .arg(&conf)
            .arg("-f")
            .arg(&emu)
            .arg("-s")
            .arg(&state)
            .arg("-n")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ipmi_sim");
        let sim = Self {
            _child: Reaped(child),
            port,
            pidfile,
        };
        let started = Instant::now();
        while sim.ipmitool("status").is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "ipmi_sim did not come up"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(sim)
    }

    /// `ipmitool chassis power status`'s state, or `None` when it fails.
    fn ipmitool(&self, what: &str) -> Option<String> {
        let out = Command::new("ipmitool")
            .args([
                "-I",
                "lanplus",
                "-H",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "admin",
                "-E",
            ])
            .args(["-N", "1", "-R", "1", "chassis", "power", what])
            .env("IPMI_PASSWORD", PASSWORD)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        out.status.success().then(|| {
            text.trim()
                .trim_start_matches("Chassis Power is ")
                .to_owned()
        })
    }

    fn machine_pid(&self) -> Option<String> {
        std::fs::read_to_string(&self.pidfile)
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

impl Drop for IpmiSim {
    fn drop(&mut self) {
        if let Some(pid) = self.machine_pid() {
            let _ = Command::new("kill").arg(pid).status();
        }
    }
}

#[test]
fn testbed_power_through_an_ipmi_bmc() {
    let dir = TempDir::new("power-ipmi");
    let Some(sim) = IpmiSim::start(&dir.0) else {
        return;
    };
    assert_eq!(sim.ipmitool("status").as_deref(), Some("off"));
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-2\"\nipmi = \"127.0.0.1:{0}\"\nuser = \"admin\"\npassword = \"{PASSWORD}\"\ntimeout = 2\nwait = 30\n\n\
             [[host]]\nid = \"cern/pc-3\"\nipmi = \"127.0.0.1:{0}\"\nuser = \"admin\"\npassword = \"wrong\"\ntimeout = 1\n",
            sim.port
        ),
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[("alice", "user", None), ("root", "admin", None)],
        &["--bmc", &bmc.display().to_string()],
        INVENTORY,
    );
    let (alice, root) = (&tokens[0], &tokens[1]);
    // A booking of the site covers its hosts.
    book_now(&svc, alice, "cern");
    let (s, b) = power(&svc, alice, "cern/pc-2", "on", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    assert_eq!(b["endpoint"], "ipmi");
    assert_eq!(
        sim.ipmitool("status").as_deref(),
        Some("on"),
        "ipmitool agrees"
    );
    let first = sim.machine_pid().expect("the machine runs");
    let (s, b) = power(&svc, alice, "cern/pc-2", "reset", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let second = sim.machine_pid().expect("the machine runs again");
    assert_ne!(first, second, "a reset restarts the machine");
    let (s, b) = power(&svc, alice, "cern/pc-2", "cycle", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    assert!(
        b["answers"]
            .to_string()
            .contains("Chassis Power Control: Down/Off"),
        "{b}"
    );
    assert_ne!(
        sim.machine_pid().as_deref(),
        Some(second.as_str()),
        "a cycle starts it afresh"
    );
    let (s, b) = power(&svc, alice, "cern/pc-2", "off", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("off")), "{b}");
    assert_eq!(
        sim.ipmitool("status").as_deref(),
        Some("off"),
        "ipmitool agrees"
    );
    assert_eq!(sim.machine_pid(), None);
    let (s, b) = power(&svc, alice, "cern/pc-2", "reset", None);
    assert_eq!((s, b["code"].as_str()), (502, Some("bmc_error")), "{b}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("reset needs the host on"),
        "{b}"
    );

    // Wrong credentials: a clear error naming the host and the BMC, in the log as failed.
    let (s, b) = power(
        &svc,
        root,
        "cern/pc-3",
        "status",
        Some("checking the BMC account"),
    );
    assert_eq!((s, b["code"].as_str()), (502, Some("bmc_error")), "{b}");
    let msg = b["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "cern/pc-3: ipmi admin@127.0.0.1:{}: ipmitool chassis power status failed",
            sim.port
        )),
        "{msg}"
    );
    let all = operations(&svc, root);
    assert!(!serde_json::to_string(&all).unwrap().contains(PASSWORD));
    assert_eq!(all.iter().filter(|o| o["result"] == "ok").count(), 4);
    assert_eq!(all.iter().filter(|o| o["result"] == "failed").count(), 2);
}

/// The test guest of `tests/guest/build.sh` (Debian's kernel, a busybox init), built once into a
/// cache; `None` (the test fails with the reason, or is skipped) when QEMU or busybox is missing.
fn guest_kit() -> Option<PathBuf> {
    if !program("qemu-system-x86_64", "qemu-system-x86") || !program("busybox", "busybox-static") {
        return None;
    }
    let dir = PathBuf::from(
        std::env::var("LONGHAUL_GUEST_DIR").unwrap_or_else(|_| "/var/cache/longhaul-guest".into()),
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("run tests/guest/build.sh");
    assert!(
        out.status.success(),
        "tests/guest/build.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

/// An `ipmi_sim` BMC whose chassis control runs a QEMU guest: power on starts it (its console a
/// TCP server at `console`, which holds the guest until a reader connects, so the first line is
/// never lost; its second serial port a Unix socket the test sends commands to), power off kills
/// it, reset restarts it.
fn ipmi_sim_with_guest(dir: &Path, kit: &Path, console: u16) -> Option<IpmiSim> {
    let qemu = format!(
        "qemu-system-x86_64 -accel tcg -m 256 -nodefaults -no-user-config -display none \
         -kernel {kit}/vmlinux -initrd {kit}/initramfs.cpio.gz -append \"$(cat {kit}/cmdline)\" \
         -chardev socket,id=s0,host=127.0.0.1,port={console},server=on,wait=on \
         -chardev socket,id=s1,path={dir}/ttyS1.sock,server=on,wait=off \
         -serial chardev:s0 -serial chardev:s1",
        kit = kit.display(),
        dir = dir.display()
    );
    IpmiSim::start_with(
        dir,
        &format!(
            "setsid {qemu} </dev/null >{}/qemu.log 2>&1 &",
            dir.display()
        ),
    )
}

#[test]
fn testbed_power_cycle_brings_a_panicked_guest_back() {
    let dir = TempDir::new("power-guest");
    let Some(kit) = guest_kit() else {
        return;
    };
    let console = free_port();
    let Some(sim) = ipmi_sim_with_guest(&dir.0, &kit, console) else {
        return;
    };
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-2\"\nipmi = \"127.0.0.1:{}\"\nuser = \"admin\"\npassword = \"{PASSWORD}\"\n\
             timeout = 2\nwait = 60\nconsole = \"tcp:127.0.0.1:{console}\"\n",
            sim.port
        ),
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[("alice", "user", None)],
        &["--bmc", &bmc.display().to_string()],
        INVENTORY,
    );
    let alice = &tokens[0];
    book_now(&svc, alice, "cern");
    let up = |boots: usize| {
        move |l: &Value| {
            l["boots"].as_array().unwrap().len() == boots
                && texts(l)
                    .iter()
                    .any(|t| t.contains("longhaul-guest: init up"))
        }
    };

    let (s, b) = power(&svc, alice, "cern/pc-2", "on", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let log = console_until(&svc, alice, "host=cern/pc-2", up(1));
    assert_eq!(
        log["lines"][0]["mark"], "boot",
        "the kernel's first line is captured: {log}"
    );
    assert!(texts(&log)[0].contains("Linux version"), "{log}");

    // Panic the guest's kernel (sysrq c, from inside); the console archive marks it.
    let mut cmd = std::os::unix::net::UnixStream::connect(dir.0.join("ttyS1.sock")).unwrap();
    std::io::Write::write_all(&mut cmd, b"panic\n").unwrap();
    let log = console_until(&svc, alice, "host=cern/pc-2", |l| {
        l["boots"][0]["panics"] == 1
    });
    let panic = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mark"] == "panic")
        .unwrap();
    assert!(
        panic["text"]
            .as_str()
            .unwrap()
            .contains("Kernel panic - not syncing"),
        "{panic}"
    );
    assert_eq!(
        sim.ipmitool("status").as_deref(),
        Some("on"),
        "a panicked host is still powered"
    );

    // A power cycle through the IPMI BMC brings it back: a new boot in the archive.
    let (s, b) = power(&svc, alice, "cern/pc-2", "cycle", None);
    assert_eq!((s, b["state"].as_str()), (200, Some("on")), "{b}");
    let log = console_until(&svc, alice, "host=cern/pc-2", up(2));
    let boots = log["boots"].as_array().unwrap();
    assert_eq!(
        (boots[0]["panics"].as_u64(), boots[1]["panics"].as_u64()),
        (Some(1), Some(0)),
        "{log}"
    );
    assert_eq!(log["lines"][0]["mark"], "boot");
    let out = Command::new(bin())
        .args([
            "testbed",
            "console",
            "cern/pc-2",
            "--boots",
            "--server",
            &svc.url(""),
            "--token",
            alice,
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().count(), 2, "{printed}");
    assert!(
        printed.lines().next().unwrap().contains("1 panics"),
        "{printed}"
    );
}

/// `at_end`: a host is powered off when the reservation covering it ends (here released early),
/// by `system`, with the booking in the log's grounds; a booking of another host does not touch
/// it; a host without `at_end` is left alone.
#[test]
fn testbed_power_off_when_a_reservation_ends() {
    let dir = TempDir::new("at-end");
    let flag = |n: u32| dir.0.join(format!("pc-{n}.on"));
    let entry = |n: u32, at_end: &str| {
        let f = flag(n);
        let f = f.display();
        format!(
            "[[host]]\nid = \"cern/pc-{n}\"\n{at_end}\
             command = {{ status = [\"sh\", \"-c\", \"[ -e {f} ] && echo on || echo off\"], \
             on = [\"touch\", \"{f}\"], off = [\"rm\", \"-f\", \"{f}\"] }}\n"
        )
    };
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        &format!("{}\n{}", entry(1, "at_end = \"off\"\n"), entry(2, "")),
    );
    let db = dir.0.join("tb.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[
            ("alice", "user", None),
            ("bob", "user", None),
            ("root", "admin", None),
        ],
        &["--bmc", &bmc.display().to_string(), "--sweep-seconds", "1"],
        "[[resource]]\nid = \"cern\"\nkind = \"site\"\n\n[[resource]]\nid = \"cern/pc-1\"\nkind = \"host\"\n\n\
         [[resource]]\nid = \"cern/pc-2\"\nkind = \"host\"\n",
    );
    let (alice, bob, root) = (&tokens[0], &tokens[1], &tokens[2]);
    let book = |token: &str, host: &str| {
        let now = jiff::Timestamp::now().as_second();
        let at = |s: i64| jiff::Timestamp::from_second(s).unwrap().to_string();
        let (status, b) = crate::testbed::post_booking(
            &svc,
            token,
            &json!({"resource": host, "start": at(now), "end": at(now + 3600)}),
            None,
        );
        assert_eq!(status, 201, "{b}");
        b["id"].as_i64().unwrap()
    };
    let release = |token: &str, id: i64| {
        let (status, b) = send(
            agent()
                .post(&svc.url(&format!("/api/v1/bookings/{id}/release")))
                .set("Authorization", &format!("Bearer {token}")),
            None,
        );
        assert_eq!(status, 200, "{b}");
    };
    let alices = book(alice, "cern/pc-1");
    let bobs = book(bob, "cern/pc-2");
    for (token, host) in [(alice, "cern/pc-1"), (bob, "cern/pc-2")] {
        let (status, b) = power(&svc, token, host, "on", None);
        assert_eq!((status, b["state"].as_str()), (200, Some("on")), "{b}");
    }
    // Bob's booking ends first: pc-1 (alice's) and pc-2 (no at_end) stay on.
    release(bob, bobs);
    std::thread::sleep(Duration::from_secs(3));
    assert!(flag(1).exists() && flag(2).exists(), "nothing reset yet");
    // Alice's ends: pc-1 goes off within a sweep or two.
    release(alice, alices);
    let released = Instant::now();
    while flag(1).exists() {
        assert!(
            released.elapsed() < Duration::from_secs(30),
            "pc-1 never went off"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(flag(2).exists(), "pc-2 has no at_end");
    let resets: Vec<Value> = operations(&svc, root)
        .into_iter()
        .filter(|o| o["actor"] == "system")
        .collect();
    assert_eq!(resets.len(), 1, "one reset: {resets:?}");
    let r = &resets[0];
    assert_eq!(
        (
            r["host"].as_str(),
            r["action"].as_str(),
            r["result"].as_str(),
            r["state"].as_str()
        ),
        (
            Some("cern/pc-1"),
            Some("power off"),
            Some("ok"),
            Some("off")
        ),
        "{r}"
    );
    assert_eq!(
        r["grounds"],
        format!("at_end: booking {alices} (alice) ended"),
        "{r}"
    );
}

//! The Debian package on this machine (issue 21): packaging/deb/build.sh builds it from this build's
//! binary; lintian passes, every tag it still reports overridden with its reason; `dpkg -i`
//! installs it; each unit's `ExecStart`, run as the unit's user with the unit's capabilities and
//! its configuration file from /etc/longhaul, serves (a `longhaul test` and a `send` through the
//! server, the testbed's API, the monitor's /metrics, the agent registering with that testbed);
//! `dpkg -r` keeps the configuration and `dpkg -P` removes it, and neither touches the data roots.
//!
//! systemd is not PID 1 here, so the test plays its part for each unit: the state directory, the
//! user and capabilities (setpriv), the notification socket, and /etc/longhaul (a bind mount in a
//! mount namespace of the unit's process, so other tests running meanwhile never read the settings
//! this one gives).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::{TempDir, free_port};

use crate::util::{
    bin, ended_within, json_test, machine_shared, netns_privileges, program, sigterm,
};

/// The data roots of the units (their StateDirectory=); the agent's is systemd's private one.
const DATA_ROOTS: [&str; 4] = [
    "/var/lib/longhaul-server",
    "/var/lib/longhaul-testbed",
    "/var/lib/longhaul-monitor",
    "/var/lib/longhaul-agent",
];

/// The uid and gid the test gives the agent's DynamicUser= (systemd picks one in 61184–65519).
const DYNAMIC_ID: u32 = 61184;

#[test]
fn the_debian_package_installs_serves_and_purges_keeping_the_data() {
    if !netns_privileges()
        || !program("dpkg-deb", "dpkg")
        || !program("lintian", "lintian")
        || !program("fakeroot", "fakeroot")
        || !program("setpriv", "util-linux")
    {
        return;
    }
    // It builds and lints on both cores for a minute: never beside a test that needs the machine.
    let _machine = machine_shared();
    assert!(
        !installed(),
        "a longhaul package is installed on this machine: this test installs and purges its own \
         (dpkg -P longhaul first)"
    );
    for root in DATA_ROOTS {
        assert!(
            !Path::new(root).exists(),
            "{root} exists: this test would mix its data with this machine's"
        );
    }
    let had_user = id("longhaul").is_some();
    let _cleanup = Cleanup { had_user };
    let dir = TempDir::new("deb");

    // Built from this build's binary, and lintian finds nothing it does not say why for. (The
    // overrides are the release binary's, which carries bytes a debug build does not: an override
    // that matches nothing here is no finding.)
    let out = run(Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/packaging/deb/build.sh"
        ))
        .args(["--binary", bin(), "--out"])
        .arg(&dir.0));
    let deb = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(deb.ends_with(format!("longhaul_{}_amd64.deb", env!("CARGO_PKG_VERSION"))));
    let lint = Command::new("lintian")
        .args([
            "-I",
            "-E",
            "--pedantic",
            "--fail-on",
            "error,warning,info,pedantic",
        ])
        .arg(&deb)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&lint.stdout);
    let found: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with(['E', 'W', 'I', 'P', 'X']) && l.as_bytes().get(1) == Some(&b':'))
        .filter(|l| !l.contains(": mismatched-override "))
        .collect();
    assert!(
        matches!(lint.status.code(), Some(0 | 2)) && found.is_empty(),
        "lintian ({}): {said}{}",
        lint.status,
        String::from_utf8_lossy(&lint.stderr)
    );

    // Installed: the binary, its pages, the configuration files, the user.
    run(Command::new("dpkg").arg("-i").arg(&deb));
    assert!(installed());
    let version = run(Command::new("/usr/bin/longhaul").arg("--version"));
    let ours = run(Command::new(bin()).arg("--version"));
    assert_eq!(version.stdout, ours.stdout);
    let page = run(Command::new("man").args(["-w", "longhaul-testbed-serve"]));
    assert!(String::from_utf8_lossy(&page.stdout).contains("/usr/share/man/man1/"));
    let (uid, gid) = id("longhaul").expect("the package made the user longhaul");
    assert!(uid < 1000, "a system user: uid {uid}");
    for name in ["server", "testbed", "monitor", "agent"] {
        let conf = format!("/etc/longhaul/{name}.toml");
        let meta = std::fs::metadata(&conf).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o022,
            0,
            "{conf}: not writable but by root"
        );
    }

    // Each unit's ExecStart, as its user, with its configuration file.
    let etc = dir.0.join("etc");
    std::fs::create_dir(&etc).unwrap();
    for name in ["server", "testbed", "monitor", "agent"] {
        std::fs::copy(
            format!("/etc/longhaul/{name}.toml"),
            etc.join(format!("{name}.toml")),
        )
        .unwrap();
    }
    let transfers = dir.0.join("srv");
    std::fs::create_dir(&transfers).unwrap();
    std::os::unix::fs::chown(&transfers, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = transfers.join("key");
    as_user(uid, gid, &["keygen", key.to_str().unwrap()]);
    let (port, web, metrics) = (free_port(), free_port(), free_port());
    let testbed_url = format!("http://127.0.0.1:{web}");
    append(
        &etc.join("server.toml"),
        &format!(
            "port = {port}\niperf3-port = \"off\"\nroot = \"{}\"\nkey = \"{}\"\n",
            transfers.display(),
            key.display()
        ),
    );
    append(
        &etc.join("testbed.toml"),
        &format!("listen = \"127.0.0.1:{web}\"\ninventory = \"/etc/longhaul/inventory.toml\"\n"),
    );
    append(
        &etc.join("monitor.toml"),
        &format!("listen = \"127.0.0.1:{metrics}\"\n"),
    );
    append(
        &etc.join("agent.toml"),
        &format!("server = \"{testbed_url}\"\nhost = \"lab/dtn-1\"\n"),
    );
    std::fs::write(
        etc.join("mesh.toml"),
        format!(
            "name = \"lab\"\n[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\nport = {port}\n\
             [[host]]\nname = \"b\"\naddress = \"127.0.0.2\"\nport = {port}\n\
             [[test]]\nname = \"paths\"\nkind = \"traceroute\"\nfrom = [\"a\", \"b\"]\n\
             every = \"10min\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        etc.join("inventory.toml"),
        "[[resource]]\nid = \"lab\"\nkind = \"site\"\n",
    )
    .unwrap();
    let notify = dir.0.join("notify");
    std::fs::create_dir(&notify).unwrap();
    std::fs::set_permissions(&notify, std::fs::Permissions::from_mode(0o777)).unwrap();

    // The server: a test and a transfer from a client.
    let mut server = Unit::start("server", &etc, &notify);
    let summary = json_test("127.0.0.1", port, &["-t", "1"]);
    assert!(
        summary["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0,
        "{summary}"
    );
    let file = dir.0.join("payload");
    std::fs::write(&file, vec![7u8; 3 << 20]).unwrap();
    run(Command::new(bin())
        .arg("send")
        .arg(&file)
        .arg("127.0.0.1:in")
        .args(["-p", &port.to_string(), "--key", key.to_str().unwrap()]));
    let landed = transfers.join("in/payload");
    assert_eq!(std::fs::read(&landed).unwrap(), vec![7u8; 3 << 20]);
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&landed).unwrap()),
        uid,
        "written by the unit's user"
    );
    server.stop();

    // The testbed service, its database in its state directory, and an agent registering with it.
    let database = "/var/lib/longhaul-testbed/testbed.sqlite";
    state_directory("/var/lib/longhaul-testbed", uid, gid, 0o700);
    let token = as_user(
        uid,
        gid,
        &[
            "testbed",
            "token",
            "add",
            "admin",
            "--role",
            "admin",
            "--database",
            database,
        ],
    );
    let mut testbed = Unit::start("testbed", &etc, &notify);
    state_directory("/var/lib/longhaul-agent", DYNAMIC_ID, DYNAMIC_ID, 0o700);
    let mut agent = Unit::start("agent", &etc, &notify);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let hosts: serde_json::Value = ureq::get(&format!("{testbed_url}/api/v1/hosts"))
            .set("Authorization", &format!("Bearer {}", token.trim()))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        if hosts["host"][0]["host"] == "lab/dtn-1" {
            assert_eq!(hosts["host"][0]["state"], "pending", "{hosts}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never registered: {hosts}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    agent.stop();
    testbed.stop();
    let key_file = std::fs::metadata("/var/lib/longhaul-agent/agent.key").unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&key_file),
        DYNAMIC_ID,
        "the agent's key is its user's"
    );

    // The monitor, with CAP_NET_RAW only: its metrics.
    state_directory("/var/lib/longhaul-monitor", uid, gid, 0o700);
    as_user(
        uid,
        gid,
        &["keygen", "/var/lib/longhaul-monitor/monitor.key"],
    );
    let mut monitor = Unit::start("monitor", &etc, &notify);
    let mesh: serde_json::Value = ureq::get(&format!("http://127.0.0.1:{metrics}/api/v1/mesh"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert!(mesh.to_string().contains("\"lab\""), "{mesh}");
    monitor.stop();
    assert!(Path::new("/var/lib/longhaul-monitor/archive.sqlite").exists());

    // Removed: the binary goes, the configuration stays; purged: the configuration goes. The data
    // roots stay through both.
    let data: BTreeMap<PathBuf, Vec<u8>> = ["/var/lib/longhaul-testbed", "/var/lib/longhaul-agent"]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert!(data.len() >= 2, "{data:?}");
    let kept = || {
        for (path, bytes) in &data {
            assert_eq!(
                &std::fs::read(path).unwrap(),
                bytes,
                "{} kept",
                path.display()
            );
        }
    };
    // Installed again over itself (dpkg's upgrade path): the administrator's change to a
    // configuration file and the data stay.
    // (A comment: other tests running now read this file when they start a server.)
    append(
        Path::new("/etc/longhaul/server.toml"),
        "# tuned for this node\n",
    );
    let upgraded = run(Command::new("dpkg")
        .arg("-i")
        .arg(&deb)
        .env("DEBIAN_FRONTEND", "noninteractive"));
    assert!(
        std::fs::read_to_string("/etc/longhaul/server.toml")
            .unwrap()
            .ends_with("# tuned for this node\n"),
        "{}",
        String::from_utf8_lossy(&upgraded.stdout)
    );
    kept();
    assert_eq!(id("longhaul"), Some((uid, gid)), "the same user");
    run(Command::new("dpkg").args(["-r", "longhaul"]));
    assert!(!Path::new("/usr/bin/longhaul").exists());
    assert!(
        Path::new("/etc/longhaul/server.toml").exists(),
        "remove keeps the configuration"
    );
    run(Command::new("dpkg").args(["-P", "longhaul"]));
    assert!(!installed());
    assert!(
        !Path::new("/etc/longhaul").exists(),
        "purge removes the configuration"
    );
    kept();
    for root in DATA_ROOTS {
        if root != "/var/lib/longhaul-server" {
            assert!(Path::new(root).is_dir(), "{root} kept");
        }
    }
}

/// A unit's `ExecStart`, run as systemd would: its user and group (or a dynamic one), its
/// ambient capabilities and bounding set, no new privileges, and its files in /etc/longhaul.
struct Unit {
    name: &'static str,
    child: Child,
}

impl Unit {
    /// Starts the unit `longhaul-NAME.service` as installed, with `etc` as /etc/longhaul, and waits
    /// for its READY=1.
    fn start(name: &'static str, etc: &Path, notify_dir: &Path) -> Unit {
        let text = std::fs::read_to_string(format!("/lib/systemd/system/longhaul-{name}.service"))
            .unwrap();
        let key = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .map(str::to_owned)
        };
        let exec = key("ExecStart").expect("an ExecStart");
        let (uid, gid) = if key("DynamicUser").as_deref() == Some("yes") {
            (DYNAMIC_ID, DYNAMIC_ID)
        } else {
            id(&key("User").expect("a User")).unwrap()
        };
        let caps: Vec<String> = key("AmbientCapabilities")
            .unwrap_or_default()
            .split_whitespace()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect();
        let bounding = key("CapabilityBoundingSet").unwrap_or_default();
        let bounding: Vec<String> = bounding
            .split_whitespace()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect();
        let caps = std::iter::once("-all".to_owned())
            .chain(caps)
            .collect::<Vec<_>>()
            .join(",");
        let bounding = std::iter::once("-all".to_owned())
            .chain(bounding)
            .collect::<Vec<_>>()
            .join(",");
        let socket = notify_dir.join(format!("{name}.sock"));
        let _ = std::fs::remove_file(&socket);
        let systemd = UnixDatagram::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
        systemd
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(r#"mount --bind "$0" /etc/longhaul && exec "$@""#)
            .arg(etc)
            .arg("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg(if key("DynamicUser").is_some() {
                "--clear-groups"
            } else {
                "--init-groups"
            })
            .arg(format!("--inh-caps={caps}"))
            .arg(format!("--ambient-caps={caps}"))
            .arg(format!("--bounding-set={bounding}"))
            .arg("--no-new-privs")
            .args(exec.split_whitespace())
            .env_clear()
            .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
            .env("NOTIFY_SOCKET", &socket)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut buf = [0u8; 4096];
        let got = systemd.recv(&mut buf);
        let said = String::from_utf8_lossy(&buf[..got.unwrap_or(0)]).into_owned();
        if !said.lines().any(|l| l == "READY=1") {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "longhaul-{name}.service ({exec}) never said READY=1 ({said:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Unit { name, child }
    }

    /// SIGTERM, as `systemctl stop` sends; the unit ends.
    fn stop(&mut self) {
        sigterm(self.child.id());
        let what = format!("longhaul-{}", self.name);
        ended_within(&mut self.child, Duration::from_secs(20), &what);
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Leaves the machine as the test found it, whatever failed: the package purged, the data roots it
/// made and the user it made removed.
struct Cleanup {
    had_user: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if installed() {
            let _ = Command::new("dpkg").args(["-P", "longhaul"]).output();
        }
        for root in DATA_ROOTS {
            let _ = std::fs::remove_dir_all(root);
        }
        if !self.had_user {
            let _ = Command::new("userdel").arg("longhaul").output();
        }
    }
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", "longhaul"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("ok installed"))
}

/// The uid and gid of `user`, if it exists.
fn id(user: &str) -> Option<(u32, u32)> {
    let line = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find(|l| l.split(':').next() == Some(user))?
        .to_owned();
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

/// Runs the installed `longhaul ARGS` as `uid:gid`, as an administrator would with `sudo -u`;
/// its standard output.
fn as_user(uid: u32, gid: u32, args: &[&str]) -> String {
    let out = run(Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--init-groups",
        ])
        .arg("/usr/bin/longhaul")
        .args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes a unit's StateDirectory= as systemd does: owned by its user, with its mode.
fn state_directory(path: &str, uid: u32, gid: u32, mode: u32) {
    std::fs::create_dir_all(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Runs `cmd`; its output, once it succeeded.
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

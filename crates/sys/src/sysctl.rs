//! Reading and writing kernel tunables under `/proc/sys`, and a snapshot of
//! the networking limits that matter for long fat networks ([`NetLimits`]).
//!
//! Names use the `sysctl(8)` dotted form (`net.core.rmem_max`), which maps to
//! `/proc/sys/net/core/rmem_max`. A name that already contains `/` is taken as
//! a path relative to `/proc/sys` unchanged, which is how to reach entries
//! whose components contain dots (e.g. `net/ipv4/conf/eth0.100/rp_filter`).
//! The `*_in` variants take another root directory in place of `/proc/sys`,
//! for tests against a fake tree.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, SysError};

/// Where the kernel exposes sysctls.
pub const PROC_SYS: &str = "/proc/sys";

/// The file for sysctl `name` under `root`.
///
/// Fails with `InvalidInput` for empty names and names with empty, `.` or `..`
/// components, so a name can never escape `root`.
pub fn sysctl_path_in(root: &Path, name: &str) -> Result<PathBuf> {
    let rel = if name.contains('/') {
        name.trim_start_matches('/').to_owned()
    } else {
        name.replace('.', "/")
    };
    if rel.is_empty()
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(SysError::new(
            format!("sysctl name {name:?}"),
            io::Error::new(io::ErrorKind::InvalidInput, "not a valid sysctl name"),
        ));
    }
    Ok(root.join(rel))
}

/// Reads sysctl `name` (e.g. `net.core.rmem_max`), trimmed of surrounding
/// whitespace. Multi-valued entries keep their inner whitespace
/// (`"4096\t131072\t6291456"`).
///
/// Errors name the path; a sysctl that does not exist (module not loaded, or
/// not visible in this network namespace) gives `ErrorKind::NotFound`.
pub fn read_sysctl(name: &str) -> Result<String> {
    read_sysctl_in(Path::new(PROC_SYS), name)
}

/// [`read_sysctl`] with `root` in place of `/proc/sys`.
pub fn read_sysctl_in(root: &Path, name: &str) -> Result<String> {
    let path = sysctl_path_in(root, name)?;
    fs::read_to_string(&path)
        .map(|s| s.trim().to_owned())
        .map_err(|e| SysError::new(format!("read {}", path.display()), e))
}

/// Writes `value` to sysctl `name` in a single `write(2)` (as multi-valued
/// entries such as `net.ipv4.tcp_rmem` require). Needs root for most entries;
/// fails with `PermissionDenied` otherwise, or with `EROFS` when `/proc/sys`
/// is mounted read-only (as in many containers).
pub fn write_sysctl(name: &str, value: &str) -> Result<()> {
    write_sysctl_in(Path::new(PROC_SYS), name, value)
}

/// [`write_sysctl`] with `root` in place of `/proc/sys`. The entry must
/// already exist; it is never created.
pub fn write_sysctl_in(root: &Path, name: &str, value: &str) -> Result<()> {
    let path = sysctl_path_in(root, name)?;
    let describe = || format!("write {} = {value:?}", path.display());
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| SysError::new(describe(), e))?;
    let n = file
        .write(value.as_bytes())
        .map_err(|e| SysError::new(describe(), e))?;
    if n != value.len() {
        return Err(SysError::new(
            describe(),
            io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", value.len()),
            ),
        ));
    }
    Ok(())
}

/// Kernel networking limits relevant to TCP throughput on long fat networks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetLimits {
    /// `net.core.rmem_max`: cap on `SO_RCVBUF` requests, bytes.
    pub rmem_max: u64,
    /// `net.core.wmem_max`: cap on `SO_SNDBUF` requests, bytes.
    pub wmem_max: u64,
    /// `net.ipv4.tcp_rmem`: min, default and autotuning max receive buffer, bytes.
    pub tcp_rmem: [u64; 3],
    /// `net.ipv4.tcp_wmem`: min, default and autotuning max send buffer, bytes.
    pub tcp_wmem: [u64; 3],
    /// `net.ipv4.tcp_available_congestion_control`: algorithms loaded.
    pub available_cc: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`: algorithms unprivileged
    /// processes may select.
    pub allowed_cc: Vec<String>,
    /// `net.ipv4.tcp_congestion_control`: the default algorithm.
    pub default_cc: String,
    /// `net.ipv4.tcp_adv_win_scale`, if present (removed in Linux 6.6).
    pub adv_win_scale: Option<i32>,
    /// `net.ipv4.tcp_window_scaling`: whether RFC 7323 window scaling is on.
    pub tcp_window_scaling: bool,
    /// `net.ipv4.tcp_mtu_probing` (0 off, 1 after blackhole detection, 2 always).
    pub tcp_mtu_probing: Option<u32>,
    /// `net.core.default_qdisc` (e.g. `fq`, `fq_codel`), if visible.
    pub default_qdisc: Option<String>,
}

impl NetLimits {
    /// Reads the limits from `/proc/sys`.
    ///
    /// The `Option` fields are `None` when their entry does not exist; any
    /// other entry missing, unreadable or malformed is an error naming its
    /// path. Note that `net.core.rmem_max`/`wmem_max` are not visible inside
    /// non-initial network namespaces on some kernels (e.g. in containers),
    /// in which case this fails with `ErrorKind::NotFound`.
    pub fn read() -> Result<NetLimits> {
        NetLimits::read_in(Path::new(PROC_SYS))
    }

    /// [`NetLimits::read`] with `root` in place of `/proc/sys`.
    pub fn read_in(root: &Path) -> Result<NetLimits> {
        let get = |name: &str| read_sysctl_in(root, name);
        let optional = |name: &str| match read_sysctl_in(root, name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        };
        let list = |v: String| v.split_whitespace().map(str::to_owned).collect();
        Ok(NetLimits {
            rmem_max: parse(root, "net.core.rmem_max", &get("net.core.rmem_max")?)?,
            wmem_max: parse(root, "net.core.wmem_max", &get("net.core.wmem_max")?)?,
            tcp_rmem: parse_triple(root, "net.ipv4.tcp_rmem", &get("net.ipv4.tcp_rmem")?)?,
            tcp_wmem: parse_triple(root, "net.ipv4.tcp_wmem", &get("net.ipv4.tcp_wmem")?)?,
            available_cc: list(get("net.ipv4.tcp_available_congestion_control")?),
            allowed_cc: list(get("net.ipv4.tcp_allowed_congestion_control")?),
            default_cc: get("net.ipv4.tcp_congestion_control")?,
            adv_win_scale: optional("net.ipv4.tcp_adv_win_scale")?
                .map(|v| parse(root, "net.ipv4.tcp_adv_win_scale", &v))
                .transpose()?,
            tcp_window_scaling: parse::<u32>(
                root,
                "net.ipv4.tcp_window_scaling",
                &get("net.ipv4.tcp_window_scaling")?,
            )? != 0,
            tcp_mtu_probing: optional("net.ipv4.tcp_mtu_probing")?
                .map(|v| parse(root, "net.ipv4.tcp_mtu_probing", &v))
                .transpose()?,
            default_qdisc: optional("net.core.default_qdisc")?,
        })
    }
}

fn malformed(root: &Path, name: &str, value: &str, what: &str) -> SysError {
    let path = sysctl_path_in(root, name).unwrap_or_else(|_| root.join(name));
    SysError::new(
        format!("parse {} ({value:?})", path.display()),
        io::Error::new(io::ErrorKind::InvalidData, format!("expected {what}")),
    )
}

fn parse<T: std::str::FromStr>(root: &Path, name: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| malformed(root, name, value, "an integer"))
}

fn parse_triple(root: &Path, name: &str, value: &str) -> Result<[u64; 3]> {
    let err = || malformed(root, name, value, "three integers");
    let mut it = value.split_whitespace().map(str::parse::<u64>);
    let mut out = [0u64; 3];
    for slot in &mut out {
        *slot = it.next().ok_or_else(err)?.map_err(|_| err())?;
    }
    if it.next().is_some() {
        return Err(err());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty directory under the system temp dir.
    struct TempTree(PathBuf);

    impl TempTree {
        fn new(tag: &str) -> TempTree {
            let dir = std::env::temp_dir().join(format!(
                "longhaul-sys-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempTree(dir)
        }

        fn put(&self, name: &str, value: &str) {
            let path = sysctl_path_in(&self.0, name).unwrap();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, value).unwrap();
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn full_tree(tag: &str) -> TempTree {
        let t = TempTree::new(tag);
        t.put("net.core.rmem_max", "212992\n");
        t.put("net.core.wmem_max", "4194304\n");
        t.put("net.ipv4.tcp_rmem", "4096\t131072\t6291456\n");
        t.put("net.ipv4.tcp_wmem", "4096\t16384\t4194304\n");
        t.put(
            "net.ipv4.tcp_available_congestion_control",
            "reno cubic bbr\n",
        );
        t.put("net.ipv4.tcp_allowed_congestion_control", "reno cubic\n");
        t.put("net.ipv4.tcp_congestion_control", "cubic\n");
        t.put("net.ipv4.tcp_window_scaling", "1\n");
        t
    }

    #[test]
    fn paths() {
        let root = Path::new("/proc/sys");
        assert_eq!(
            sysctl_path_in(root, "net.core.rmem_max").unwrap(),
            Path::new("/proc/sys/net/core/rmem_max")
        );
        assert_eq!(
            sysctl_path_in(root, "net/ipv4/conf/eth0.100/rp_filter").unwrap(),
            Path::new("/proc/sys/net/ipv4/conf/eth0.100/rp_filter")
        );
        for bad in ["", "net..core", "net/../../etc/passwd", ".", "net.core."] {
            let e = sysctl_path_in(root, bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn reads_fake_tree_with_optional_entries_missing() {
        let t = full_tree("min");
        let l = NetLimits::read_in(&t.0).unwrap();
        assert_eq!(l.rmem_max, 212992);
        assert_eq!(l.wmem_max, 4194304);
        assert_eq!(l.tcp_rmem, [4096, 131072, 6291456]);
        assert_eq!(l.tcp_wmem, [4096, 16384, 4194304]);
        assert_eq!(l.available_cc, ["reno", "cubic", "bbr"]);
        assert_eq!(l.allowed_cc, ["reno", "cubic"]);
        assert_eq!(l.default_cc, "cubic");
        assert!(l.tcp_window_scaling);
        assert_eq!(l.adv_win_scale, None);
        assert_eq!(l.tcp_mtu_probing, None);
        assert_eq!(l.default_qdisc, None);

        t.put("net.ipv4.tcp_adv_win_scale", "-2\n");
        t.put("net.ipv4.tcp_mtu_probing", "1\n");
        t.put("net.core.default_qdisc", "fq\n");
        t.put("net.ipv4.tcp_window_scaling", "0\n");
        let l = NetLimits::read_in(&t.0).unwrap();
        assert_eq!(l.adv_win_scale, Some(-2));
        assert_eq!(l.tcp_mtu_probing, Some(1));
        assert_eq!(l.default_qdisc.as_deref(), Some("fq"));
        assert!(!l.tcp_window_scaling);
    }

    #[test]
    fn errors_name_the_path() {
        let t = full_tree("bad");
        t.put("net.ipv4.tcp_wmem", "4096 16384\n");
        let e = NetLimits::read_in(&t.0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("net/ipv4/tcp_wmem"), "{e}");

        fs::remove_file(t.0.join("net/core/wmem_max")).unwrap();
        let e = NetLimits::read_in(&t.0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let expected = format!("read {}", t.0.join("net/core/wmem_max").display());
        assert_eq!(e.call(), expected);
    }

    #[test]
    fn write_then_read_in_fake_tree() {
        let t = full_tree("write");
        write_sysctl_in(&t.0, "net.core.rmem_max", "536870912").unwrap();
        assert_eq!(
            read_sysctl_in(&t.0, "net.core.rmem_max").unwrap(),
            "536870912"
        );
        let e = write_sysctl_in(&t.0, "net.core.nonexistent", "1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("nonexistent = \"1\""), "{e}");
    }

    #[test]
    fn reads_real_proc_sys() {
        let l = NetLimits::read().unwrap();
        assert!(l.rmem_max > 0 && l.wmem_max > 0);
        assert!(l.tcp_rmem[0] <= l.tcp_rmem[1] && l.tcp_rmem[1] <= l.tcp_rmem[2]);
        assert!(l.available_cc.contains(&l.default_cc), "{l:?}");
        let e = read_sysctl("net.core.no_such_entry").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string()
                .starts_with("read /proc/sys/net/core/no_such_entry: ")
        );
    }

    #[test]
    fn real_write_round_trip_when_root() {
        // Rewrite the current value so the test never changes the system.
        let name = "net.ipv4.tcp_wmem";
        let current = read_sysctl(name).unwrap();
        match write_sysctl(name, &current) {
            Ok(()) => assert_eq!(read_sysctl(name).unwrap(), current),
            Err(e) => assert!(
                matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::EROFS)
                ),
                "{e}"
            ),
        }
    }
}

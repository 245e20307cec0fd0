//! Private directories for the emulator's state (the named testbeds' files, the `tcp_mem` lease):
//! mode 0700, owned by the user running the emulator, never reached through a symbolic link, under a
//! parent nobody else may write to (issue 11, finding 11).

use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

use crate::error::EmuError;

fn io(what: String) -> impl FnOnce(std::io::Error) -> EmuError {
    move |source| EmuError::Io { what, source }
}

/// Creates `dir` (or makes an existing one right): mode 0700, owned by this user,
/// never through a symbolic link, under a parent only its owner may write to.
pub(crate) fn ensure_private_dir(dir: &std::path::Path) -> Result<(), EmuError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(io(format!("create {}", parent.display())))?;
        let m = std::fs::metadata(parent).map_err(io(format!("stat {}", parent.display())))?;
        const STICKY: u32 = 0o1000;
        if m.permissions().mode() & 0o022 != 0 && m.permissions().mode() & STICKY == 0 {
            return Err(EmuError::Config(format!(
                "{} is writable by other users (mode {:o}), who could replace the emulator's state \
directory {}; refusing to use it (chmod go-w {}, or set LONGHAUL_EMULATE_DIR elsewhere)",
                parent.display(),
                m.permissions().mode() & 0o7777,
                dir.display(),
                parent.display()
            )));
        }
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(format!("create {}", dir.display()))(e)),
    }
    let fd = open_private_dir(dir, true)?.expect("the state directory exists");
    let st = rustix::fs::fstat(&fd).map_err(|e| io(format!("stat {}", dir.display()))(e.into()))?;
    if st.st_mode & 0o7777 != 0o700 {
        rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o700))
            .map_err(|e| io(format!("chmod 0700 {}", dir.display()))(e.into()))?;
    }
    Ok(())
}

/// Opens `dir` without following a symbolic link and checks its owner: the user running this
/// process (and, unless `writer`, root). `None` when it does not exist.
pub(crate) fn open_private_dir(
    dir: &std::path::Path,
    writer: bool,
) -> Result<Option<OwnedFd>, EmuError> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(dir, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => {
            if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(EmuError::Config(format!(
                    "the emulator's state directory {} is a symbolic link; refusing to follow it \
(remove the link: the emulator creates the directory itself)",
                    dir.display()
                )));
            }
            return Err(io(format!(
                "open the emulator's state directory {} (only root and the user who started a \
testbed may use it)",
                dir.display()
            ))(e.into()));
        }
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| io(format!("stat {}", dir.display()))(e.into()))?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me && (writer || st.st_uid != 0) {
        return Err(EmuError::Config(format!(
            "the emulator's state directory {} belongs to uid {}, not to uid {me} running this \
command; refusing to use it (remove it)",
            dir.display(),
            st.st_uid
        )));
    }
    Ok(Some(fd))
}

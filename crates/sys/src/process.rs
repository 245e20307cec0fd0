//! Process-level calls: detaching a server into the background, and a process's start time.

use crate::error::{Result, SysError};

/// Detaches the process from its terminal and runs it in the background (`daemon(3)`: fork, `setsid`,
/// working directory `/`, standard input, output and error on `/dev/null`). Only the child returns.
///
/// Call it before starting any thread: `fork` copies only the calling thread, so threads started
/// earlier would be missing in the child, and locks they held would stay locked.
pub fn daemonize() -> Result<()> {
    // SAFETY: daemon(3) takes no pointers. The caller's contract (no other threads yet) keeps fork
    // sound: the child continues as the only thread with a consistent heap.
    let rc = unsafe { libc::daemon(0, 0) };
    if rc != 0 {
        return Err(SysError::last_os_error(|| {
            "daemon(nochdir=0, noclose=0)".to_string()
        }));
    }
    Ok(())
}

/// A process's start time, clock ticks since boot (`/proc/PID/stat` field 22), if it exists.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

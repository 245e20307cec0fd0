//! Process-level calls: detaching a server into the background.

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

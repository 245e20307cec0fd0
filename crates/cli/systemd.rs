//! Telling systemd a daemon is ready (`Type=notify` units, packaging/systemd/): `READY=1` with a
//! status line once it serves. Nothing happens outside systemd (no NOTIFY_SOCKET).

/// The daemon serves now; `status` is what `systemctl status` shows.
pub(crate) fn ready(status: &str) {
    let states = [
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(status),
    ];
    if let Err(e) = sd_notify::notify(false, &states) {
        tracing::warn!(target: "longhaul::systemd", error = %e, "cannot tell systemd it is ready");
    }
}

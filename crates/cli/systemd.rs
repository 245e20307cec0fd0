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

/// Feeds systemd's watchdog (`WatchdogSec=` in the unit; `$WATCHDOG_USEC` here) from a thread of
/// its own, every half interval, each time `alive()` has returned: a daemon wedged where `alive`
/// looks (a lock never released) stops feeding it, and systemd kills and restarts it. Nothing
/// happens without a watchdog.
pub(crate) fn watchdog(alive: impl Fn() -> bool + Send + 'static) {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return;
    }
    let every = std::time::Duration::from_micros(usec / 2);
    let spawned = std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            loop {
                if alive()
                    && let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog])
                {
                    tracing::warn!(target: "longhaul::systemd", error = %e, "cannot feed the watchdog");
                }
                std::thread::sleep(every);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(target: "longhaul::systemd", error = %e, "no watchdog thread");
    }
}

# Sourced by the bench scripts that move gigabytes through RAM over an emulated path.
#
# Some virtual machines (this one: Firecracker with free page reporting) hand free memory back to
# their host (/sys/module/page_reporting/parameters/); the next touch of such a page traps to the
# host, and both the trap and the reporting itself stall the whole virtual CPU, the emulator's
# real-time forwarders included. A 4 GiB copy into tmpfs touches a million fresh pages, and a row
# that frees the previous row's copy sets the reporter going for seconds.
#
# What was measured here (bench/RESULTS.md, "Issue 23"): on 2026-12-06 at 05:00, keeping freed pages
# for 5 minutes (min_free_ms 300000) and touching memory once before the runs made 4 of 4 runs OK
# (0 of 4 without). At 08:30 the same machine reported freed memory beyond about 2 GiB within seconds
# whatever min_free_ms said, and touching memory first made it worse (9.5 GB reported during the
# run, p99 lateness 14-24 ms); waiting until the reporter had been quiet for 3 s before each run
# made 5 of 5 4-GiB runs OK.
#
# keep_pages: keeps freed pages for 5 minutes where the knob exists (the most this kernel takes).
# pages_quiet: waits (at most 60 s) until the reporter has returned nothing for 3 s: call it after a
# row has freed what it frees and right before its timed command. restore_pages puts the setting
# back (call it from the script's exit trap). Nothing happens where the knobs are absent.
KEEP_PAGES_DIR=/sys/module/page_reporting/parameters
KEEP_PAGES_WAS=

keep_pages() {
    [ -w "$KEEP_PAGES_DIR/min_free_ms" ] || return 0
    KEEP_PAGES_WAS=$(cat "$KEEP_PAGES_DIR/min_free_ms")
    echo 300000 >"$KEEP_PAGES_DIR/min_free_ms"
    echo "keeping freed pages (page reporting: $KEEP_PAGES_DIR); each row waits for the reporter to go quiet" >&2
}

pages_quiet() {
    [ -r "$KEEP_PAGES_DIR/reported_kib" ] || return 0
    local before now waited=0
    before=$(cat "$KEEP_PAGES_DIR/reported_kib")
    while [ $waited -lt 60 ]; do
        sleep 3
        waited=$((waited + 3))
        now=$(cat "$KEEP_PAGES_DIR/reported_kib")
        [ "$now" = "$before" ] && return 0
        before=$now
    done
    echo "the VM's page reporter is still busy after 60 s; running anyway" >&2
}

restore_pages() {
    [ -n "$KEEP_PAGES_WAS" ] && echo "$KEEP_PAGES_WAS" >"$KEEP_PAGES_DIR/min_free_ms"
    KEEP_PAGES_WAS=
    return 0
}

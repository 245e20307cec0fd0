# Sourced by the bench scripts that move gigabytes through RAM over an emulated path.
#
# Some virtual machines (this one: Firecracker with free page reporting) hand every free block of
# memory back to their host at once (/sys/module/page_reporting/parameters/min_free_ms = 0); the
# next touch of such a page traps to the host, and the trap stalls the whole virtual CPU, the
# emulator's real-time forwarders included. A 4 GiB copy into tmpfs touches a million of them, and
# the emulator's verdict turns NOT TRUSTWORTHY (p99 lateness 1.3-12.7 ms in 4 of 6 runs, 2026-12-06);
# with freed pages kept for the run, 0 of 4 (bench/RESULTS.md, "Issue 23 item 3").
#
# keep_pages GIB: keeps freed pages for 5 minutes (the most this kernel takes: 600000 is refused)
# and touches GIB GiB once (at most half of what is available), so later allocations reuse memory
# the host already backs (a row that frees its copy and the next that writes one stay within
# that); restore_pages puts the setting back (call it from the script's exit trap). Nothing
# happens where the knob is absent.
KEEP_PAGES_KNOB=/sys/module/page_reporting/parameters/min_free_ms
KEEP_PAGES_WAS=

keep_pages() {
    [ -w "$KEEP_PAGES_KNOB" ] || return 0
    KEEP_PAGES_WAS=$(cat "$KEEP_PAGES_KNOB")
    echo 300000 >"$KEEP_PAGES_KNOB"
    local avail_mib want_mib
    avail_mib=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
    want_mib=$(($1 * 1024))
    [ "$want_mib" -le $((avail_mib / 2)) ] || want_mib=$((avail_mib / 2))
    echo "keeping freed pages for the run (page reporting: $KEEP_PAGES_KNOB); touching $want_mib MiB once" >&2
    local f=/dev/shm/lh-keep-pages.$$
    head -c $((want_mib << 20)) /dev/zero >"$f"
    rm -f "$f"
}

restore_pages() {
    [ -n "$KEEP_PAGES_WAS" ] && echo "$KEEP_PAGES_WAS" >"$KEEP_PAGES_KNOB"
    KEEP_PAGES_WAS=
    return 0
}

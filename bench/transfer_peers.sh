#!/usr/bin/env bash
# Disk-to-disk against the tools physics data moves with (issue 23), side by side in one run:
# `longhaul send`, GridFTP (`globus-url-copy` to `globus-gridftp-server`, Grid Community Toolkit)
# and XRootD (`xrdcp` to `xrootd`), each in its defaults and in the settings its documentation
# recommends for long paths, on loopback, an emulated 120 ms, 2 Gbit/s path and an emulated 250 ms,
# 1 Gbit/s path with 0.01 % random loss each way; for one large file, many small files and one
# 3-byte file.
#
# Usage: bench/transfer_peers.sh [BIG_MIB] [NFILES] [PATHS] [WORKLOADS]
#   defaults: 4096 MiB, 1000 files of 64 KiB, PATHS="loopback wan lossy", WORKLOADS="big small tiny"
#   TOOLS="longhaul gridftp xrootd" (the default) picks the tools; EMULATE (default "--realtime
#   --pin 0,1": the emulator's forwarders at real-time priority) more flags of `emulate up`; BENCH_DIR (default
#   /dev/shm/lh-peers: RAM) holds the files; set it on a real filesystem to compare on disk (then each
#   row starts with the page cache dropped, so the source is read from the disk, and the table says
#   which side bounded the row);
#   REPS (default 1) runs every row that many times, round after round (each round all rows in
#   turn, so a slow spell of this shared machine hits every tool alike), and the comparison takes
#   each row's median over its runs with a whole copy and a trustworthy emulator;
#   ROW_TIMEOUT (default 900 s) ends a row that takes longer (GridFTP's plain `-r` moves about one
#   small file per second at 120 ms: 1,000 files take longer than that).
#
# What is measured, per row: the client's wall clock from the command's start to its end (every
# copy is then compared byte for byte with its source: a row whose copy differs is marked BAD);
# the client host's TCP retransmits over its segments sent (its own network namespace, fresh for
# the row: /proc/net/snmp); and the emulator's fidelity verdict (a fresh testbed per row, its
# report at `emulate down`). With BENCH_DIR on a disk, also the disk's busy time over the row
# (/proc/diskstats: the device's I/O ticks over the wall clock), what it read and wrote during the
# row, and how long a `sync` after the row took (the writes the tool left in the page cache; no tool
# here syncs by default). Both hosts' tcp_rmem/tcp_wmem maximum are 64 MiB, as on a tuned
# data-transfer node (per namespace); congestion control BBR (this kernel's default) for every tool.
#
# The peers' settings, each from its documentation:
#   GridFTP, defaults: `globus-url-copy SRC ftp://HOST:PORT/DST` (stream mode, one connection).
#   GridFTP, tuned: `-fast -p 4` and `-fast -p 8` (ESnet fasterdata, fasterdata.es.net/tools.html:
#     "globus-url-copy -p 4 -tcp-bs 16M"; its results table: 4 to 8 streams; `-fast`: "Recommended
#     when using GridFTP servers", gass/copy/source/globus-url-copy.txt); many files add `-cc 4`
#     (fasterdata's background page: "several files at once (typically 4-5 is a good number to
#     try)") or `-cc 16 -pp`. `-tcp-bs` is left out on purpose: it sets SO_SNDBUF/SO_RCVBUF, which
#     turns Linux's autotuning off and caps each stream at net.core.rmem_max (4 MiB on this machine,
#     0.27 Gbit/s at 120 ms); autotuning to 64 MiB is the better setting here.
#   XRootD, defaults: `xrdcp -f SRC root://HOST:PORT//DST`. XRootD, tuned: XRD_CPPARALLELCHUNKS=16
#     (xrootd/xrootd#1491: "tune the number of in-flight chunks with XRD_CPPARALLELCHUNKS"; the
#     default is 4 chunks of 8 MiB in flight, about one BDP of these paths); many files add
#     `--parallel 4` (xrdcp.1). An upload uses one TCP connection whatever `--streams` says
#     (src/XrdCl/XrdClXRootDTransport.cc: writes are not multiplexed), so `--streams` is not used.
#   longhaul: `longhaul send SRC HOST:` with no flag: its defaults are its tuning. On an emulated
#     path, where the path is known and carries nothing else, also `--rate R --dedicated`
#     (docs/pacing.md: R the payload ceiling, 1.93G and 0.965G here): one stream paced at R,
#     opened at R from the first round trip; and that with `-C cubic`, the controller for a clean
#     dedicated path (docs/pacing.md: no BBR ProbeRTT dip, no 1 % pacing margin; it backs off on
#     random loss, so not for the lossy path). And `longhaul send` with no flag to a server whose
#     operator named the path's rate (`server --path-rate R`, docs/transfer.md): the client plans
#     and paces with it.
# Both peers' servers run as `nobody` (neither runs as root), without authentication (GridFTP's
# `-aa` anonymous access, XRootD with no security library): the cheapest setting for them.
#
# Needs root (namespaces). Installs globus-gridftp-server-progs, globus-gass-copy-progs,
# xrootd-server and xrootd-client if missing.
# Output: a table on stdout; raw rows with the exact commands in bench/runs/<UTC>-transfer-peers/raw.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG_MIB=${1:-4096}
NFILES=${2:-1000}
PATHS=${3:-"loopback wan lossy"}
WORKLOADS=${4:-"big small tiny"}
TOOLS=${TOOLS:-"longhaul gridftp xrootd"}
EMULATE=${EMULATE:---realtime --pin 0,1}
ROW_TIMEOUT=${ROW_TIMEOUT:-900}
REPS=${REPS:-1}
LH_PORT=7296
LH_SERVER_FLAGS=
FTP_PORT=2811
XRD_PORT=1094
NAME=peers
BUFMAX=67108864

[ "$(id -u)" = 0 ] || { echo "bench/transfer_peers.sh needs root (namespaces)" >&2; exit 1; }
need=()
for p in globus-gridftp-server-progs globus-gass-copy-progs xrootd-server xrootd-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi
GFS=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
cargo build --release --quiet --bin longhaul
LH=$PWD/target/release/longhaul

out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transfer-peers
mkdir -p "$out"
raw=$out/raw.csv
echo "path,rep,workload,tool,bytes,seconds,gbps,retrans_pct,fidelity,copy,disk_busy_pct,disk_read_mb,disk_write_mb,flush_s,command" >"$raw"
data=${BENCH_DIR:-/dev/shm/lh-peers}
mkdir -p "$data"
chmod 755 "$data"
# On a disk (not tmpfs): the block device under BENCH_DIR, whose counters each row reads.
disk=
if [ "$(stat -f -c %T "$data")" != tmpfs ]; then
    disk=$(basename "$(findmnt -n -o SOURCE --target "$data")")
    grep -q " $disk " /proc/diskstats || { echo "no /proc/diskstats line for $disk (BENCH_DIR $data)" >&2; exit 1; }
    echo "files on $disk ($(findmnt -n -o FSTYPE --target "$data")): page cache dropped before each row" >&2
fi
# disk_stats -> "sectors_read sectors_written io_ticks_ms" of $disk
disk_stats() { awk -v d="$disk" '$3 == d { print $6, $10, $13 }' /proc/diskstats; }

# --- data ----------------------------------------------------------------------------------------
src=$data/src
mkdir -p "$src/small"
if [ "$(stat -c %s "$src/big.bin" 2>/dev/null || echo 0)" != $((BIG_MIB << 20)) ]; then
    echo "making $src/big.bin ($BIG_MIB MiB of random bytes)..." >&2
    head -c $((BIG_MIB << 20)) /dev/urandom >"$src/big.bin"
fi
if [ "$(find "$src/small" -type f | wc -l)" != "$NFILES" ]; then
    echo "making $NFILES files of 64 KiB..." >&2
    rm -rf "$src/small" && mkdir -p "$src/small"
    (cd "$src/small" && head -c $((NFILES * 65536)) /dev/urandom | split -b 64K -a 6 -d - f)
fi
printf abc >"$src/tiny"
chmod -R a+rX "$src"
"$LH" keygen "$data/key" >/dev/null 2>&1 || true
dst=$data/dst
# The peers' servers run as nobody: their pid files, logs and XRootD's admin path live here.
run=$data/run
admin=$run/xrd-admin
mkdir -p "$admin" && chown -R nobody:nogroup "$run"

cleanup() {
    stop_servers
    "$LH" emulate down --name "$NAME" >/dev/null 2>&1 || true
    restore_pages
}
stop_servers() {
    local f
    for f in "$run"/*.pid; do
        [ -f "$f" ] || continue
        kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
    # GridFTP forks a process per session; they end with their client, or here.
    pkill -u nobody -f "$GFS" 2>/dev/null || true
    pkill -u nobody -x xrootd 2>/dev/null || true
    sleep 0.3
}
trap cleanup EXIT
# shellcheck source=bench/keep_pages.sh
. bench/keep_pages.sh
# Freed pages kept a while; each row waits for the VM's page reporter to go quiet first.
keep_pages

# on HOST CMD...: CMD on host a (client) or b (server) of the row's path.
on() {
    local h=$1
    shift
    if [ "$path" = loopback ]; then "$@"; else "$LH" emulate exec --name "$NAME" "$h" -- "$@"; fi
}

# named CMD...: CMD with the emulated hosts' addresses in /etc/hosts (a mount namespace of its own):
# GridFTP turns addresses into names, and a DNS lookup from the namespaces reaches no server.
printf '127.0.0.1 localhost %s\n10.201.0.1 lh-%s-a\n10.201.0.2 lh-%s-b\n' "$(hostname)" "$NAME" "$NAME" >"$data/hosts"
named=$data/named
cat >"$named" <<EOF
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" /etc/hosts && exec "\$@"' "$data/hosts" "\$@"
EOF
chmod 755 "$named"

up() { # brings the row's path up; sets $host
    case $path in
    loopback) host=127.0.0.1 ;;
    # shellcheck disable=SC2086
    wan) "$LH" emulate up --name "$NAME" --rtt 120ms --rate 2G --no-server $EMULATE >/dev/null ;;
    # shellcheck disable=SC2086
    lossy) "$LH" emulate up --name "$NAME" --rtt 250ms --rate 1G --loss 0.01% --no-server $EMULATE >/dev/null ;;
    esac
    if [ "$path" != loopback ]; then
        host=10.201.0.2
        for h in a b; do
            on "$h" sysctl -q -w net.ipv4.tcp_rmem="4096 131072 $BUFMAX" net.ipv4.tcp_wmem="4096 16384 $BUFMAX"
        done
    fi
}

down() { # -> the fidelity verdict of the row's path
    if [ "$path" = loopback ]; then
        echo "-"
        return
    fi
    "$LH" emulate down --name "$NAME" >"$out/last-down.txt" 2>&1 || true
    local v
    v=$(sed -n 's/^ *fidelity: //p' "$out/last-down.txt" | head -1)
    cat "$out/last-down.txt" >>"$out/emulator-reports.txt"
    echo "${v:-unknown}" | tr ',' ';'
}

start_server() { # tool
    rm -rf "$dst" && mkdir -p "$dst" && chown nobody:nogroup "$dst"
    case $1 in
    longhaul)
        # shellcheck disable=SC2086
        on b "$LH" server -p $LH_PORT --iperf3-port off --root "$dst" --key "$data/key" --log warn \
            $LH_SERVER_FLAGS -D --pidfile "$run/lh.pid" 2>/dev/null
        for _ in $(seq 50); do [ -s "$run/lh.pid" ] && break; sleep 0.1; done
        ;;
    gridftp)
        : >"$run/gridftp.conf"
        on b "$named" setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$GFS" -c "$run/gridftp.conf" \
            -aa -p $FTP_PORT -control-interface "$host" -data-interface "$host" -home-dir "$dst" \
            -d error -l "$run/gridftp.log" -pidfile "$run/gridftp.pid" >/dev/null 2>&1 &
        for _ in $(seq 50); do [ -s "$run/gridftp.pid" ] && break; sleep 0.1; done
        ;;
    xrootd)
        cat >"$run/xrootd.cfg" <<EOF
all.export $dst
xrd.port $XRD_PORT
all.adminpath $admin
all.pidpath $admin
EOF
        on b setpriv --reuid=nobody --regid=nogroup --clear-groups -- xrootd -c "$run/xrootd.cfg" \
            -l "$run/xrootd.log" -n "$NAME" -I v4 >/dev/null 2>&1 &
        echo $! >"$run/xrootd-exec.pid"
        for _ in $(seq 100); do
            on a bash -c "exec 3<>/dev/tcp/$host/$XRD_PORT" 2>/dev/null && break
            sleep 0.1
        done
        ;;
    esac
}

# The client commands, one per row: "workload|tool|label|command" (SRC, DSTURL placeholders below).
rows() {
    cat <<'EOF'
big|longhaul|longhaul send|$LH send $src/big.bin $host: -p $LH_PORT --key $data/key
big|longhaul|longhaul send (server --path-rate R)|$LH send $src/big.bin $host: -p $LH_PORT --key $data/key
big|longhaul|longhaul send --rate R --dedicated|$LH send $src/big.bin $host: -p $LH_PORT --key $data/key --rate $PATHRATE --dedicated
big|longhaul|longhaul send --rate R --dedicated -C cubic|$LH send $src/big.bin $host: -p $LH_PORT --key $data/key --rate $PATHRATE --dedicated -C cubic
big|gridftp|globus-url-copy|globus-url-copy file://$src/big.bin ftp://$host:$FTP_PORT$dst/big.bin
big|gridftp|globus-url-copy -fast -p 4|globus-url-copy -fast -p 4 file://$src/big.bin ftp://$host:$FTP_PORT$dst/big.bin
big|gridftp|globus-url-copy -fast -p 8|globus-url-copy -fast -p 8 file://$src/big.bin ftp://$host:$FTP_PORT$dst/big.bin
big|xrootd|xrdcp|xrdcp -f -N $src/big.bin root://$host:$XRD_PORT/$dst/big.bin
big|xrootd|xrdcp XRD_CPPARALLELCHUNKS=16|env XRD_CPPARALLELCHUNKS=16 xrdcp -f -N $src/big.bin root://$host:$XRD_PORT/$dst/big.bin
small|longhaul|longhaul send|$LH send $src/small $host: -p $LH_PORT --key $data/key
small|gridftp|globus-url-copy -r -cd|globus-url-copy -r -cd file://$src/small/ ftp://$host:$FTP_PORT$dst/small/
small|gridftp|globus-url-copy -r -cd -fast -cc 4|globus-url-copy -r -cd -fast -cc 4 file://$src/small/ ftp://$host:$FTP_PORT$dst/small/
small|gridftp|globus-url-copy -r -cd -fast -cc 16 -pp|globus-url-copy -r -cd -fast -cc 16 -pp file://$src/small/ ftp://$host:$FTP_PORT$dst/small/
small|xrootd|xrdcp -r|xrdcp -f -N -r $src/small root://$host:$XRD_PORT/$dst/
small|xrootd|xrdcp -r --parallel 4|xrdcp -f -N -r --parallel 4 $src/small root://$host:$XRD_PORT/$dst/
tiny|longhaul|longhaul send|$LH send $src/tiny $host: -p $LH_PORT --key $data/key
tiny|gridftp|globus-url-copy|globus-url-copy file://$src/tiny ftp://$host:$FTP_PORT$dst/tiny
tiny|gridftp|globus-url-copy -fast|globus-url-copy -fast file://$src/tiny ftp://$host:$FTP_PORT$dst/tiny
tiny|xrootd|xrdcp|xrdcp -f -N $src/tiny root://$host:$XRD_PORT/$dst/tiny
EOF
}

bytes_of() {
    case $1 in
    big) echo $((BIG_MIB << 20)) ;;
    small) echo $((NFILES * 65536)) ;;
    tiny) echo 3 ;;
    esac
}

same_copy() { # workload -> ok | BAD
    case $1 in
    big) cmp -s "$src/big.bin" "$dst/big.bin" && echo ok || echo BAD ;;
    small) diff -rq "$src/small" "$dst/small" >/dev/null 2>&1 && echo ok || echo BAD ;;
    tiny) cmp -s "$src/tiny" "$dst/tiny" && echo ok || echo BAD ;;
    esac
}

# Runs argv[2:] and writes its wall-clock seconds (monotonic clock, microseconds) to argv[1].
timed='import subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[2:])
open(sys.argv[1], "w").write(f"{time.monotonic() - t:.6f}")
sys.exit(r.returncode)'

stop_servers
for path in $PATHS; do
    # The path's payload ceiling (1448 of every 1500 bytes), for the rows that are told it.
    case $path in wan) PATHRATE=1.93G ;; lossy) PATHRATE=0.965G ;; *) PATHRATE= ;; esac
    for rep in $(seq "$REPS"); do
    for w in $WORKLOADS; do
        while IFS='|' read -r rw tool label template; do
            [ "$rw" = "$w" ] || continue
            case " $TOOLS " in *" $tool "*) ;; *) continue ;; esac
            [[ -z $PATHRATE && ($template == *PATHRATE* || $label == *--path-rate*) ]] && continue
            LH_SERVER_FLAGS=
            [[ $label == *"server --path-rate"* ]] && LH_SERVER_FLAGS="--path-rate $PATHRATE"
            up
            start_server "$tool"
            cmd=$(eval "echo \"$template\"")
            t=$out/time.txt
            rm -f "$t"
            if [ -n "$disk" ]; then
                sync
                echo 3 >/proc/sys/vm/drop_caches
            fi
            pages_quiet
            [ -n "$disk" ] && read -r r0 w0 b0 < <(disk_stats)
            # shellcheck disable=SC2086
            rc=0
            on a "$named" python3 -c "$timed" "$t" timeout "$ROW_TIMEOUT" $cmd >"$out/last.out" 2>"$out/last.err" || rc=$?
            [ $rc = 0 ] || echo "FAILED ($path $w $label, status $rc): $(tail -2 "$out/last.err" | tr '\n' ' ')" >&2
            secs=$(cat "$t" 2>/dev/null || echo nan)
            busy=- rmb=- wmb=- flush=-
            if [ -n "$disk" ]; then
                read -r r1 w1 b1 < <(disk_stats)
                flush=$(python3 -c 'import os, time; t = time.monotonic(); os.sync(); print(f"{time.monotonic() - t:.3f}")')
                busy=$(awk -v b=$((b1 - b0)) -v s="$secs" 'BEGIN { if (s + 0 > 0) printf "%.0f", b / 10 / s; else print "nan" }')
                rmb=$(((r1 - r0) / 2048)) wmb=$(((w1 - w0) / 2048))
            fi
            snmp=$(on a cat /proc/net/snmp)
            retrans=$(awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) n[$i] = i; h = 1 } else { printf "%.4f", ($n["OutSegs"] ? 100 * $n["RetransSegs"] / $n["OutSegs"] : 0) } }' <<<"$snmp")
            [ "$path" = loopback ] && retrans=-
            copy=$(same_copy "$w")
            # A row over ROW_TIMEOUT (timeout's status 124) is reported as such, not as a bad copy.
            [ $rc = 124 ] && copy="timeout>${ROW_TIMEOUT}s"
            stop_servers
            fid=$(down)
            bytes=$(bytes_of "$w")
            gbps=$(awk -v b="$bytes" -v s="$secs" 'BEGIN { if (s + 0 > 0) printf "%.3f", b * 8 / s / 1e9; else print "nan" }')
            echo "$path,$rep,$w,$label,$bytes,$secs,$gbps,$retrans,$fid,$copy,$busy,$rmb,$wmb,$flush,\"$cmd\"" >>"$raw"
            tail -1 "$raw" >&2
        done < <(rows)
    done
    done
done

python3 - "$raw" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rtt = {"loopback": None, "wan": 0.120, "lossy": 0.250}
ceiling = {"wan": 2e9 * 1448 / 1500, "lossy": 1e9 * 1448 / 1500}
on_disk = any(r["disk_busy_pct"] != "-" for r in rows)


def bound(r):
    """Which side held the row back: the disk when it was busy most of the row, the path when the
    row ran at 90 % of its ceiling or more, else the tool itself (its protocol, CPU or waiting)."""
    if r["disk_busy_pct"] not in ("-", "nan") and float(r["disk_busy_pct"]) >= 80:
        return "disk"
    ceil = ceiling.get(r["path"])
    if ceil and r["gbps"] != "nan" and float(r["gbps"]) * 1e9 >= 0.9 * ceil:
        return "network"
    return "tool"


disk_head = f" {'disk busy':>9} {'read MB':>7} {'wrote MB':>8} {'sync s':>6} {'bound':7}" if on_disk else ""
print(f"{'path':9} {'rep':>3} {'workload':8} {'tool':40} {'s':>8} {'Gbit/s':>7} {'RTTs':>6} {'of ceiling':>10} {'retr %':>7}{disk_head} copy fidelity")
for r in rows:
    s = float(r["seconds"])
    rt = rtt.get(r["path"])
    rtts = f"{s / rt:.1f}" if rt and s == s else "-"
    ceil = ceiling.get(r["path"])
    of = f"{float(r['gbps']) * 1e9 / ceil * 100:.0f} %" if ceil and r["gbps"] != "nan" else "-"
    d = (f" {r['disk_busy_pct'] + ' %':>9} {r['disk_read_mb']:>7} {r['disk_write_mb']:>8} {r['flush_s']:>6} {bound(r):7}"
         if on_disk else "")
    print(f"{r['path']:9} {r['rep']:>3} {r['workload']:8} {r['tool']:40} {s:8.3f} {r['gbps']:>7} {rtts:>6} {of:>10} {r['retrans_pct']:>7}{d} {r['copy']:4} {r['fidelity']}")
print()


def trusted(r):
    """A run that counts: a whole copy, a time, and an emulator that kept its timing (or none)."""
    return r["copy"] == "ok" and float(r["seconds"]) == float(r["seconds"]) and r["fidelity"] in ("OK", "-")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


print("medians over the trustworthy runs of each row (runs: trustworthy/all)")
for p in sorted({r["path"] for r in rows}):
    for w in ("big", "small", "tiny"):
        here = [r for r in rows if r["path"] == p and r["workload"] == w]
        tools = list(dict.fromkeys(r["tool"] for r in here))
        med = {}
        for t in tools:
            runs = [r for r in here if r["tool"] == t]
            good = [float(r["seconds"]) for r in runs if trusted(r)]
            if good:
                med[t] = median(good)
            shown = f"{med[t]:8.3f} s" if t in med else "no trustworthy run"
            print(f"{p:9} {w:6} {t:44} {shown:>18} ({len(good)}/{len(runs)})")
        peers = {t: m for t, m in med.items() if not t.startswith("longhaul")}
        if not peers:
            continue
        best = min(peers, key=peers.get)
        for t in (t for t in med if t.startswith("longhaul")):
            print(f"{p:9} {w:6} {t}: {med[t]:.3f} s, best peer {best} {peers[best]:.3f} s: "
                  f"longhaul is {peers[best] / med[t]:.2f}x as fast")
EOF
cp "$run"/*.log "$out/" 2>/dev/null || true
echo "raw: $raw" >&2

#!/usr/bin/env bash
# Disk-to-disk transfers (issue 4), side by side in one run: `longhaul send`, `scp` and `rsync -e ssh`
# (OpenSSH's sshd started by this script), and `longhaul test -n` moving the same bytes memory to
# memory, on (a) loopback and (b) an emulated 120 ms, 2 Gbit/s path (`longhaul emulate up`), for one
# big file and for many small files. Prints seconds, rates, ratios and peak memory (max RSS of the
# client, and of the longhaul server, which is started afresh for every run).
#
# Usage: bench/transfer.sh [BIG_MIB] [NFILES] [SSH_BIG_MIB] [PATHS] [SCP_NFILES]
#   defaults: 4096 MiB file, 10000 files of 64 KiB, scp/rsync move a 1024 MiB file on the emulated path
#   (at 120 ms OpenSSH's 2 MiB channel window caps them near 140 Mbit/s: 4 GiB would take 4 minutes
#   each; their rate, not their duration, is what is compared), PATHS="loopback emulated", and scp
#   moves the first SCP_NFILES=300 of the small files on the emulated path (it spends several round
#   trips per file, about 0.5 s each at 120 ms: all 10,000 would take over an hour; again the rate is
#   compared).
# Files live in BENCH_DIR (default /dev/shm/lh-bench: RAM, about 10 GiB at the defaults). A data-transfer
# node's storage outruns its network; this VM's disk does not (it writes ~250 MB/s with fdatasync, about
# the 2 Gbit/s of the emulated path), so on disk every tool would measure the disk. BENCH_DIR=/var/tmp/...
# runs the same comparison on the disk.
# Needs root (namespaces, sshd). Installs openssh-server, rsync and GNU time if missing.
# Output: a table on stdout; raw rows with the exact commands in bench/runs/<UTC date>-transfer/raw.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG_MIB=${1:-4096}
NFILES=${2:-10000}
SSH_BIG_MIB=${3:-1024}
PATHS=${4:-"loopback emulated"}
SCP_NFILES=${5:-300}
RTT=120ms
RATE=2G
LH_PORT=7299
SSH_PORT=2222

[ "$(id -u)" = 0 ] || { echo "bench/transfer.sh needs root (namespaces, sshd)" >&2; exit 1; }
need=()
for p in openssh-server rsync time; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi
cargo build --release --quiet
LH=$PWD/target/release/longhaul

out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transfer
mkdir -p "$out"
raw=$out/raw.csv
echo "path,workload,tool,bytes,seconds,gbps,client_rss_mib,server_rss_mib,command" >"$raw"
data=${BENCH_DIR:-/dev/shm/lh-bench}
mkdir -p "$data"

# --- data: one big random file, NFILES random files of 64 KiB, a smaller file for scp/rsync -------
src=$data/src
mkdir -p "$src/small"
if [ "$(stat -c %s "$src/big.bin" 2>/dev/null || echo 0)" != $((BIG_MIB << 20)) ]; then
    echo "making $src/big.bin ($BIG_MIB MiB of random bytes)..." >&2
    head -c $((BIG_MIB << 20)) /dev/urandom >"$src/big.bin"
fi
if [ "$(stat -c %s "$src/ssh.bin" 2>/dev/null || echo 0)" != $((SSH_BIG_MIB << 20)) ]; then
    head -c $((SSH_BIG_MIB << 20)) "$src/big.bin" >"$src/ssh.bin"
fi
if [ "$(find "$src/small" -type f | wc -l)" != "$NFILES" ]; then
    echo "making $NFILES files of 64 KiB..." >&2
    rm -rf "$src/small" && mkdir -p "$src/small"
    (cd "$src/small" && head -c $((NFILES * 65536)) /dev/urandom | split -b 64K -a 6 -d - f)
fi
if [ "$(find "$src/scp-small" -type f 2>/dev/null | wc -l)" != "$SCP_NFILES" ]; then
    rm -rf "$src/scp-small" && mkdir -p "$src/scp-small"
    # sed, not head: head would close the pipe early and pipefail would end the script.
    find "$src/small" -type f | sort | sed -n "1,${SCP_NFILES}p" | xargs cp -t "$src/scp-small"
fi
small_bytes=$((NFILES * 65536))

# --- keys and sshd ------------------------------------------------------------------------------------
keys=$data/keys
mkdir -p "$keys"
chmod 700 "$keys"
[ -f "$keys/lh.key" ] || "$LH" keygen "$keys/lh.key" 2>/dev/null
[ -f "$keys/id" ] || ssh-keygen -q -t ed25519 -N '' -f "$keys/id"
[ -f "$keys/host" ] || ssh-keygen -q -t ed25519 -N '' -f "$keys/host"
cp "$keys/id.pub" "$keys/authorized_keys"
mkdir -p /run/sshd
sshd_config() { # listen address
    cat <<EOF
Port $SSH_PORT
ListenAddress $1
HostKey $keys/host
PidFile $data/sshd.pid
AuthorizedKeysFile $keys/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
EOF
}
SSH="ssh -p $SSH_PORT -i $keys/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
SCP="scp -q -P $SSH_PORT -i $keys/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"

cleanup() {
    [ -f "$data/sshd.pid" ] && kill "$(cat "$data/sshd.pid")" 2>/dev/null || true
    [ -f "$data/server.pid" ] && kill "$(cat "$data/server.pid")" 2>/dev/null || true
    "$LH" emulate down --name bench >/dev/null 2>&1 || true
}
trap cleanup EXIT

# run_in PATH CMD...: CMD on the client side of PATH.
run_in() {
    local p=$1
    shift
    if [ "$p" = emulated ]; then "$LH" emulate exec --name bench a -- "$@"; else "$@"; fi
}
run_b() {
    local p=$1
    shift
    if [ "$p" = emulated ]; then "$LH" emulate exec --name bench b -- "$@"; else "$@"; fi
}

start_lh_server() { # path root -> starts a fresh server, its pid in $data/server.pid
    local p=$1 root=$2
    rm -f "$data/server.pid"
    run_b "$p" "$LH" server -p $LH_PORT --root "$root" --key "$keys/lh.key" --log warn \
        -D --pidfile "$data/server.pid" 2>/dev/null
    for _ in $(seq 50); do [ -s "$data/server.pid" ] && break; sleep 0.1; done
}
stop_lh_server() { # -> prints the server's peak RSS in MiB
    local pid
    pid=$(cat "$data/server.pid")
    awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status"
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# measure PATH WORKLOAD TOOL BYTES SERVER_RSS CMD... : runs CMD on the client side under GNU time.
measure() {
    local p=$1 w=$2 tool=$3 bytes=$4 srss=$5
    shift 5
    local t=$out/time.txt
    run_in "$p" /usr/bin/time -f "%e %M" -o "$t" "$@" >"$out/last.out" 2>"$out/last.err" ||
        { echo "FAILED: $*" >&2; tail -3 "$out/last.err" >&2; }
    read -r secs rss_kb <"$t"
    local gbps
    gbps=$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.3f", b * 8 / s / 1e9 }')
    echo "$p,$w,$tool,$bytes,$secs,$gbps,$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f", k / 1024 }'),$srss,\"$*\"" >>"$raw"
    tail -1 "$raw" >&2
}

for p in $PATHS; do
    if [ "$p" = emulated ]; then
        "$LH" emulate up --name bench --rtt $RTT --rate $RATE --no-server >/dev/null
        host=10.201.0.2
    else
        host=127.0.0.1
    fi
    dst=$data/dst-$p
    sshd_config "$host" >"$data/sshd_config"
    run_b "$p" /usr/sbin/sshd -f "$data/sshd_config" -E "$out/sshd.log"
    for w in big small; do
        if [ $w = big ]; then what=$src/big.bin bytes=$((BIG_MIB << 20)) ssh_what=$src/ssh.bin ssh_bytes=$((SSH_BIG_MIB << 20))
        else what=$src/small bytes=$small_bytes ssh_what=$src/small ssh_bytes=$small_bytes; fi
        [ "$p" = loopback ] && { ssh_what=$what; ssh_bytes=$bytes; }
        # longhaul send (a fresh server per run, so its peak memory is this run's)
        rm -rf "$dst" && mkdir -p "$dst"
        start_lh_server "$p" "$dst"
        measure "$p" $w "longhaul send" "$bytes" "" "$LH" send "$what" "$host:" -p $LH_PORT --key "$keys/lh.key" --json
        srss=$(stop_lh_server)
        sed -i '$ s/,,"/,'"$srss"',"/' "$raw"
        cp "$out/last.out" "$out/$p-$w-longhaul.json"
        # memory to memory, the same bytes
        start_lh_server "$p" "$dst"
        measure "$p" $w "longhaul test -n" "$bytes" "" "$LH" test "$host" -p $LH_PORT -n "$bytes" -P 4 --json
        stop_lh_server >/dev/null
        # scp and rsync over ssh
        rm -rf "$dst" && mkdir -p "$dst"
        if [ "$p" = emulated ] && [ $w = small ]; then
            measure "$p" $w scp $((SCP_NFILES * 65536)) "" $SCP -r "$src/scp-small" "root@$host:$dst/"
        else
            measure "$p" $w scp "$ssh_bytes" "" $SCP -r "$ssh_what" "root@$host:$dst/"
        fi
        rm -rf "$dst" && mkdir -p "$dst"
        measure "$p" $w "rsync -e ssh" "$ssh_bytes" "" rsync -a -e "$SSH" "$ssh_what" "root@$host:$dst/"
    done
    kill "$(cat "$data/sshd.pid")" 2>/dev/null || true
    rm -f "$data/sshd.pid"
    [ "$p" = emulated ] && "$LH" emulate down --name bench >"$out/emulator-down.txt"
done

python3 - "$raw" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def get(p, w, tool):
    for r in rows:
        if r["path"] == p and r["workload"] == w and r["tool"] == tool:
            return r
print(f"{'path':9} {'workload':8} {'tool':17} {'MiB':>8} {'s':>7} {'Gbit/s':>7} {'client MiB':>10} {'server MiB':>10}")
for r in rows:
    print(f"{r['path']:9} {r['workload']:8} {r['tool']:17} {int(r['bytes'])/2**20:8.0f} {float(r['seconds']):7.2f} "
          f"{float(r['gbps']):7.3f} {r['client_rss_mib']:>10} {r['server_rss_mib'] or '-':>10}")
print()
for p in sorted({r["path"] for r in rows}):
    for w in ("big", "small"):
        lh, m2m, scp, rs = (get(p, w, t) for t in ("longhaul send", "longhaul test -n", "scp", "rsync -e ssh"))
        if not (lh and m2m and scp and rs):
            continue
        g = lambda r: float(r["gbps"])
        print(f"{p:9} {w:6} longhaul send / memory-to-memory = {g(lh)/g(m2m):.2f}   "
              f"/ scp = {g(lh)/g(scp):.1f}x   / rsync = {g(lh)/g(rs):.1f}x   "
              f"peak memory client {lh['client_rss_mib']} MiB, server {lh['server_rss_mib']} MiB")
EOF
echo "raw: $raw" >&2

#!/usr/bin/env bash
# --transport udp (issue 19), side by side in one run: `longhaul test` over QUIC with each of its
# controllers, over the kernel's TCP (cubic, bbr), and Debian's iperf3 (cubic, bbr) as the peer
# tool, memory to memory, one stream, on loopback and on emulated 120 ms, 1 Gbit/s paths with
# random loss. For every run: the receiver's rate, the sender's retransmitted (TCP) or lost (QUIC)
# packets, and the CPU the whole machine spent (/proc/stat busy jiffies: both ends and, on an
# emulated path, the emulator) as CPU seconds per Gbit moved.
#
# Usage: bench/transport.sh [SECS] [REPS]      default 15 s tests (after 5 s omitted), 1 repetition
#        LOSSES="0 0.1% 1%" (the default) picks the emulated paths; LOOPBACK=0 skips loopback.
# Needs root (namespaces). Output: bench/runs/<UTC date>-transport/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-15}
REPS=${2:-1}
LOSSES=${LOSSES:-0 0.1% 1%}
LOOPBACK=${LOOPBACK:-1}
PORT=7299
[ "$(id -u)" = 0 ] || { echo "bench/transport.sh needs root (namespaces)" >&2; exit 1; }
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transport
mkdir -p "$out"
raw=$out/raw.csv
echo "path,run,tool,gbps,lost_or_retransmitted,cpu_s_per_gbit,fidelity,command" >"$raw"

cleanup() {
    pkill -f "longhaul server --port $PORT" 2>/dev/null || true
    pkill -f "iperf3 -s -p $((PORT + 1))" 2>/dev/null || true
    "$LH" emulate down --name trb >/dev/null 2>&1 || true
}
trap cleanup EXIT

busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)

run_in() { # PATH CMD...
    local p=$1
    shift
    if [ "$p" = loopback ]; then "$@"; else "$LH" emulate exec --name trb a -- "$@"; fi
}

measure() { # PATH RUN TOOL CMD...   (the command prints iperf3-shaped JSON)
    local p=$1 run=$2 tool=$3
    shift 3
    local b0 b1 fid=-
    b0=$(busy)
    run_in "$p" "$@" >"$out/last.json" 2>"$out/last.err" || true
    b1=$(busy)
    if [ "$p" != loopback ]; then
        fid=$("$LH" emulate status --name trb --json |
            python3 -c 'import json,sys; f=json.load(sys.stdin)["testbeds"][0]["fidelity"]; print("OK" if f["ok"] else "NOT TRUSTWORTHY")')
    fi
    python3 - "$out/last.json" "$p" "$run" "$tool" "$((b1 - b0))" "$hz" "$fid" "$*" >>"$raw" <<'PY'
import json, sys
path, p, run, tool, jiffies, hz, fid, cmd = sys.argv[1:]
try:
    e = json.load(open(path))["end"]
    rx = e["sum_received"]
    gbps = rx["bits_per_second"] / 1e9
    lost = e["sum_sent"].get("retransmits", 0)
    gbit = rx["bytes"] * 8 / 1e9
    cpu = int(jiffies) / int(hz) / gbit if gbit else float("nan")
    print(f'{p},{run},{tool},{gbps:.3f},{lost},{cpu:.2f},{fid},"{cmd}"')
except Exception as err:
    print(f'{p},{run},{tool},FAILED,,,{fid},"{cmd}"')
PY
    tail -1 "$raw"
}

tools() { # PATH HOST
    local p=$1 h=$2 run
    for run in $(seq 1 "$REPS"); do
        for cc in cubic newreno bbr udt; do
            measure "$p" "$run" "quic-$cc" "$LH" test "$h" -p "$PORT" --transport udp -C "$cc" -t "$SECS" -O 5 --json
        done
        for cc in cubic bbr; do
            measure "$p" "$run" "tcp-$cc" "$LH" test "$h" -p "$PORT" -C "$cc" -t "$SECS" -O 5 -l 128K --json
            measure "$p" "$run" "iperf3-$cc" iperf3 -c "$h" -p $((PORT + 1)) -C "$cc" -t "$SECS" -O 5 -J
        done
    done
}

if [ "$LOOPBACK" = 1 ]; then
    "$LH" server --port "$PORT" --iperf3-port off >/dev/null 2>&1 &
    iperf3 -s -p $((PORT + 1)) -D
    sleep 1
    tools loopback 127.0.0.1
    cleanup
fi
for loss in $LOSSES; do
    "$LH" emulate up --name trb --no-server --rtt 120ms --rate 1G --loss "$loss" >/dev/null
    "$LH" emulate exec --name trb b -- "$LH" server --port "$PORT" --iperf3-port off >/dev/null 2>&1 &
    "$LH" emulate exec --name trb b -- iperf3 -s -p $((PORT + 1)) -D
    sleep 1
    tools "120ms-1G-loss-$loss" 10.201.0.2
    cleanup
done
echo "raw: $raw"

#!/usr/bin/env bash
# Fairness of a UDP-transport *transfer* towards TCP (issue 19's "one UDP transfer and one CUBIC TCP
# flow sharing a 1 Gbit/s bottleneck"): for each controller, one `longhaul send --transport udp -C CC`
# of a file too large to finish in the window, and one iperf3 CUBIC flow started a second later,
# share an emulated 120 ms, 1 Gbit/s bottleneck with a one-BDP drop-tail buffer. Each flow's rate is
# taken over the same window (iperf3's SECS−2 seconds, to the transfer's last progress line in it): the transfer's from its `--json-stream`
# progress lines, each stamped with the wall clock as it arrives. Prints the rates and CUBIC's share.
#
# Usage: bench/transfer_fairness.sh [SECS] [REPS]     default 60 s, 1 repetition
#        CONTROLLERS="bbr udt cubic newreno" (the default), STREAMS=N for `send -P N` (default: the
#        transfer's own default, 4 streams, each a QUIC connection with its own controller)
# Needs root (namespaces). Files in BENCH_DIR (default /dev/shm/lh-bench-fair).
# Output: bench/runs/<UTC date>-transfer-fairness/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
REPS=${2:-1}
CONTROLLERS=${CONTROLLERS:-bbr udt cubic newreno}
STREAMS=${STREAMS:-}
PORT=7297
[ "$(id -u)" = 0 ] || { echo "bench/transfer_fairness.sh needs root (namespaces)" >&2; exit 1; }
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transfer-fairness
mkdir -p "$out"
raw=$out/raw.csv
echo "run,controller,udp_mbps,cubic_mbps,cubic_share,window_s,udp_command,cubic_command" >"$raw"
NAME=lh-tfair
data=${BENCH_DIR:-/dev/shm/lh-bench-fair}
mkdir -p "$data/src" "$data/root"
"$LH" keygen "$data/key" >/dev/null 2>&1 || true
# 100 MiB per second of the window: more than 1 Gbit/s carries, so the transfer is still running
# when the CUBIC flow ends.
mib=$((SECS * 100))
file=$data/src/f$mib.bin
[ "$(stat -c %s "$file" 2>/dev/null || echo 0)" = $((mib << 20)) ] ||
    head -c $((mib << 20)) /dev/urandom >"$file"

cleanup() {
    pkill -f "longhaul server --port $PORT" 2>/dev/null || true
    pkill -f "iperf3 -s -p $((PORT + 1))" 2>/dev/null || true
    "$LH" emulate down --name "$NAME" >/dev/null 2>&1 || true
    rm -rf "$data/root"
}
trap cleanup EXIT
cleanup
mkdir -p "$data/root"
"$LH" emulate up --name "$NAME" --no-server --rtt 120ms --rate 1G >/dev/null
"$LH" emulate exec --name "$NAME" b -- "$LH" server --port "$PORT" --iperf3-port off \
    --root "$data/root" --key "$data/key" >/dev/null 2>&1 &
"$LH" emulate exec --name "$NAME" b -- iperf3 -s -p $((PORT + 1)) -D
sleep 1

stamp() { python3 -u -c 'import sys, time
for line in sys.stdin:
    print(f"{time.time():.3f} {line}", end="")'; }

for run in $(seq 1 "$REPS"); do
    for cc in $CONTROLLERS; do
        rm -rf "${data:?}/root/"*
        udp_cmd="$LH send $file 10.201.0.2:in -p $PORT --key $data/key --transport udp -C $cc${STREAMS:+ -P $STREAMS} --json-stream"
        tcp_cmd="iperf3 -c 10.201.0.2 -p $((PORT + 1)) -C cubic -t $((SECS - 2)) -J"
        # shellcheck disable=SC2086
        ("$LH" emulate exec --name "$NAME" a -- $udp_cmd 2>/dev/null | stamp >"$out/udp-$cc-$run.jsonl") &
        udp_pid=$!
        sleep 1
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        "$LH" emulate exec --name "$NAME" a -- $tcp_cmd >"$out/cubic-$cc-$run.json" 2>/dev/null
        t1=$(date +%s.%N)
        # The transfer has no more to show: stop it (its file outlasts the window).
        pkill -f "longhaul send $file" 2>/dev/null || true
        wait "$udp_pid" || true
        row=$(python3 - "$out/udp-$cc-$run.jsonl" "$out/cubic-$cc-$run.json" "$t0" "$t1" <<'PY'
import json, sys
stamped, cubic_file, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
cubic = json.load(open(cubic_file))
# The CUBIC flow's window on the wall clock: it ends when its command returns (within a few ms).
dur = cubic["end"]["sum_received"]["seconds"]
start = t1 - dur
points = []
for line in open(stamped):
    at, _, text = line.partition(" ")
    try:
        e = json.loads(text)
    except ValueError:
        continue
    if e.get("event") == "progress":
        points.append((float(at), e["bytes"]))
def bytes_at(t):
    before = [p for p in points if p[0] <= t]
    after = [p for p in points if p[0] >= t]
    if not before:
        return 0  # before its first line (hashing, handshakes) nothing has moved
    if not after:
        raise SystemExit(f"the transfer's progress does not reach {t:.1f}")
    (ta, ba), (tb, bb) = before[-1], after[0]
    return ba if tb == ta else ba + (bb - ba) * (t - ta) / (tb - ta)
# Both over the same window: from the CUBIC flow's start to the transfer's last progress line
# inside the CUBIC flow's run (its lines come once a second).
end = max(p[0] for p in points if p[0] <= t1)
udp = (bytes_at(end) - bytes_at(start)) * 8 / (end - start) / 1e6
# CUBIC's bytes over [0, end - start] of its own clock, from its intervals (the last one prorated).
span = end - start
got = 0.0
for iv in cubic["intervals"]:
    s = iv["sum"]
    if s["start"] >= span:
        break
    share = min(1.0, (span - s["start"]) / max(s["seconds"], 1e-9))
    got += s["bytes"] * share
tcp = got * 8 / span / 1e6
print(f"{udp:.1f},{tcp:.1f},{tcp / (tcp + udp):.3f},{span:.1f}")
PY
        )
        echo "$run,$cc,$row,\"$udp_cmd\",\"$tcp_cmd\"" >>"$raw"
        echo "$cc $row" | awk -F'[ ,]' '{printf "%-8s UDP transfer %7s Mbit/s  CUBIC %7s Mbit/s  CUBIC share %s (over %s s)\n", $1, $2, $3, $4, $5}'
        sleep 2
    done
done
echo "raw: $raw"

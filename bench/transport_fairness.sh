#!/usr/bin/env bash
# Fairness of the UDP transport towards TCP (issue 19): for each of its controllers, one
# `longhaul test --transport udp -C CC` and one iperf3 CUBIC flow (started a second later) share an
# emulated 120 ms, 1 Gbit/s bottleneck with a one-BDP drop-tail buffer for SECS seconds. Prints
# each flow's rate and CUBIC's share of what both carried.
#
# Usage: bench/transport_fairness.sh [SECS] [REPS]     default 60 s, 1 repetition
#        CONTROLLERS="cubic newreno bbr udt" (the default)
# Needs root (namespaces). Output: bench/runs/<UTC date>-fairness/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
REPS=${2:-1}
CONTROLLERS=${CONTROLLERS:-cubic newreno bbr udt}
PORT=7299
[ "$(id -u)" = 0 ] || { echo "bench/transport_fairness.sh needs root (namespaces)" >&2; exit 1; }
command -v iperf3 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-fairness
mkdir -p "$out"
raw=$out/raw.csv
echo "run,controller,udp_mbps,cubic_mbps,cubic_share,udp_command,cubic_command" >"$raw"
NAME=lh-fair

cleanup() {
    pkill -f "longhaul server --port $PORT" 2>/dev/null || true
    pkill -f "iperf3 -s -p $((PORT + 1))" 2>/dev/null || true
    "$LH" emulate down --name "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup
"$LH" emulate up --name "$NAME" --no-server --rtt 120ms --rate 1G >/dev/null
"$LH" emulate exec --name "$NAME" b -- "$LH" server --port "$PORT" --iperf3-port off >/dev/null 2>&1 &
"$LH" emulate exec --name "$NAME" b -- iperf3 -s -p $((PORT + 1)) -D
sleep 1

rate() { # JSON file -> Mbit/s received
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' "$1"
}

for run in $(seq 1 "$REPS"); do
    for cc in $CONTROLLERS; do
        udp_cmd="$LH test 10.201.0.2 -p $PORT --transport udp -C $cc -t $SECS --json"
        tcp_cmd="iperf3 -c 10.201.0.2 -p $((PORT + 1)) -C cubic -t $((SECS - 2)) -J"
        "$LH" emulate exec --name "$NAME" a -- $udp_cmd >"$out/udp-$cc-$run.json" 2>/dev/null &
        udp_pid=$!
        sleep 1
        "$LH" emulate exec --name "$NAME" a -- $tcp_cmd >"$out/cubic-$cc-$run.json" 2>/dev/null
        wait "$udp_pid"
        udp=$(rate "$out/udp-$cc-$run.json") tcp=$(rate "$out/cubic-$cc-$run.json")
        share=$(python3 -c "print(f'{$tcp / ($tcp + $udp):.3f}')")
        echo "$run,$cc,$udp,$tcp,$share,\"$udp_cmd\",\"$tcp_cmd\"" >>"$raw"
        printf '%-8s UDP %7.1f Mbit/s  CUBIC %7.1f Mbit/s  CUBIC share %s\n' "$cc" "$udp" "$tcp" "$share"
        sleep 2
    done
done
echo "raw: $raw"

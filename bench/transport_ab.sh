#!/usr/bin/env bash
# Two builds of longhaul side by side on the UDP transport, alone on an emulated 120 ms, 1 Gbit/s
# path: `longhaul test --transport udp -C CC -t 15 -O 5`, the builds alternating, at each loss rate.
# For a change to a controller (docs/transport.md): what it costs a flow that has the path alone.
#
# Usage: bench/transport_ab.sh BIN_A BIN_B [REPS]     default 2 repetitions
#        CC=bbr (the default) picks the controller, LOSSES="0 1%" (the default) the paths.
# Needs root (namespaces). Output: bench/runs/<UTC date>-transport-ab/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/transport_ab.sh BIN_A BIN_B [REPS]}
B=${2:?usage: bench/transport_ab.sh BIN_A BIN_B [REPS]}
REPS=${3:-2}
CC=${CC:-bbr}
LOSSES=${LOSSES:-0 1%}
[ "$(id -u)" = 0 ] || { echo "bench/transport_ab.sh needs root (namespaces)" >&2; exit 1; }
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transport-ab
mkdir -p "$out"
raw=$out/raw.csv
echo "run,loss,build,mbps,fidelity,command" >"$raw"
for run in $(seq 1 "$REPS"); do
    for loss in $LOSSES; do
        for build in A B; do
            bin=$A
            [ "$build" = B ] && bin=$B
            json=$out/$build-$run-${loss%\%}.json
            cmd="$bin emulate --rtt 120ms --rate 1G --loss $loss -- $bin test 10.201.0.2 --transport udp -C $CC -t 15 -O 5 --json"
            $cmd >"$json" 2>"$out/emulate.log"
            mbps=$(python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' "$json")
            fidelity=$(grep -o 'fidelity: [A-Z ]*' "$out/emulate.log" | head -1)
            echo "$run,$loss,$build,$mbps,$fidelity,\"$cmd\"" >>"$raw"
            printf 'run %s loss %-4s %s %7.1f Mbit/s  %s\n' "$run" "$loss" "$build" "$mbps" "$fidelity"
        done
    done
done
echo "raw: $raw"

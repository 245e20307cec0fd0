#!/usr/bin/env bash
# Two builds of longhaul side by side on the UDP transport, alone on an emulated 120 ms (1 Gbit/s)
# path: `longhaul test --transport udp -C CC -t 15 -O 5`, the builds alternating, at each loss rate.
# For a change to a controller (docs/transport.md): what it costs a flow that has the path alone.
#
# Usage: bench/transport_ab.sh BIN_A BIN_B [REPS]     default 2 repetitions
#        CC=bbr (the default) picks the controller, LOSSES="0 1%" (the default) the paths,
#        RATE=1G (the default) their rate, EMULATE="--host-defaults" more `emulate` flags.
# Needs root (namespaces). Output: bench/runs/<UTC date>-transport-ab/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/transport_ab.sh BIN_A BIN_B [REPS]}
B=${2:?usage: bench/transport_ab.sh BIN_A BIN_B [REPS]}
REPS=${3:-2}
CC=${CC:-bbr}
LOSSES=${LOSSES:-0 1%}
RATE=${RATE:-1G}
EMULATE=${EMULATE:-}
[ "$(id -u)" = 0 ] || { echo "bench/transport_ab.sh needs root (namespaces)" >&2; exit 1; }
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transport-ab
mkdir -p "$out"
raw=$out/raw.csv
echo "run,loss,build,mbps,sender_cpu_pct,receiver_cpu_pct,fidelity,command" >"$raw"
for run in $(seq 1 "$REPS"); do
    for loss in $LOSSES; do
        for build in A B; do
            bin=$A
            [ "$build" = B ] && bin=$B
            json=$out/$build-$run-${loss%\%}.json
            cmd="$bin emulate --rtt 120ms --rate $RATE --loss $loss $EMULATE -- $bin test 10.201.0.2 --transport udp -C $CC -t 15 -O 5 --json"
            $cmd >"$json" 2>"$out/emulate.log"
            # The received rate, and each end's CPU (% of one core, iperf3's `host_total` and
            # `remote_total`: the client sends).
            read -r mbps scpu rcpu < <(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]; c=e.get("cpu_utilization_percent") or {}; print("%.1f %.1f %.1f" % (e["sum_received"]["bits_per_second"] / 1e6, c.get("host_total", 0), c.get("remote_total", 0)))' "$json")
            fidelity=$(grep -o 'fidelity: [A-Z ]*' "$out/emulate.log" | head -1)
            echo "$run,$loss,$build,$mbps,$scpu,$rcpu,$fidelity,\"$cmd\"" >>"$raw"
            printf 'run %s loss %-4s %s %7.1f Mbit/s  CPU %s / %s %%  %s\n' "$run" "$loss" "$build" "$mbps" "$scpu" "$rcpu" "$fidelity"
        done
    done
done
echo "raw: $raw"

#!/usr/bin/env bash
# Two builds of longhaul's `--pace auto` governor side by side on an emulated 120 ms, 1 Gbit/s path
# with a 1.5 MB (0.1 x BDP) queue: clean, and with 400 Mbit/s of on/off cross traffic (3 s on every
# 8 s) whose departures the governor must win back. One `longhaul test -t SECS -i 0.25 --pace auto`
# per run, the builds alternating. For a change to the governor (crates/proto/src/auto_pace.rs):
# the rate it holds, the retransmits it causes, and the time it takes to reach 90 % of 965 Mbit/s.
#
# Usage: bench/pace_ab.sh BIN_A BIN_B [REPS] [SECS]     defaults 3 and 16
#        CC=bbr (the default) or cubic: the streams' congestion control.
#        LOAD=N keeps N busy loops running through the runs (a loaded host, whose timing jitters by
#        milliseconds: the emulator's lateness p99 reads 3-4 ms with LOAD=2 on the 2-core machine).
# Needs root (namespaces). Output: bench/runs/<UTC date>-pace-ab/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/pace_ab.sh BIN_A BIN_B [REPS] [SECS]}
B=${2:?usage: bench/pace_ab.sh BIN_A BIN_B [REPS] [SECS]}
REPS=${3:-3} SECS=${4:-16}
CC=${CC:-bbr}
LOAD=${LOAD:-0}
[ "$(id -u)" = 0 ] || { echo "bench/pace_ab.sh needs root (namespaces)" >&2; exit 1; }
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-pace-ab
mkdir -p "$out"
raw=$out/raw.csv
busy=()
for _ in $(seq 1 "$LOAD"); do
    sh -c 'while :; do :; done' &
    busy+=($!)
done
trap '[ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null' EXIT
echo "run,path,build,received_mbps,retransmits,to_rate_s,fidelity,load,command" >"$raw"
for run in $(seq 1 "$REPS"); do
    for path in clean cross; do
        extra=""
        [ "$path" = cross ] && extra="--cross-on-off 400M,3s,5s"
        for build in A B; do
            bin=$A
            [ "$build" = B ] && bin=$B
            json=$out/$build-$run-$path.json
            cmd="$bin emulate --rtt 120ms --rate 1G --queue 1500K $extra -- $bin test 10.201.0.2 -t $SECS -i 0.25 -C $CC --pace auto --json"
            # shellcheck disable=SC2086
            $cmd >"$json" 2>"$out/emulate.log"
            row=$(python3 - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r, s = d["end"]["sum_received"], d["end"]["sum_sent"]
to_rate = next((iv["sum"]["end"] for iv in d["intervals"]
                if iv["sum"]["bits_per_second"] >= 0.9 * 965e6), None)
print(f'{r["bits_per_second"] / 1e6:.1f},{s.get("retransmits") or 0},'
      f'{"" if to_rate is None else f"{to_rate:.2f}"}')
PY
            )
            fidelity=$(grep -o 'fidelity: [A-Z ]*' "$out/emulate.log" | head -1)
            echo "$run,$path,$build,$row,$fidelity,$LOAD,\"$cmd\"" >>"$raw"
            printf 'run %s %-5s %s %s  %s\n' "$run" "$path" "$build" "$row" "$fidelity"
        done
    done
done
python3 - "$raw" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| path | build | received Mbit/s (median) | retransmits (median) | to 90 % (median) |")
print("|---|---|---|---|---|")
for p in ("clean", "cross"):
    for b in ("A", "B"):
        rs = [r for r in rows if r["path"] == p and r["build"] == b]
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        times = [float(r["to_rate_s"]) for r in rs if r["to_rate_s"]]
        t = f"{statistics.median(times):.2f} s" if times else "never"
        print(f"| {p} | {b} | {med('received_mbps'):.1f} | {med('retransmits'):.0f} | {t} |")
PY
echo "raw: $raw"

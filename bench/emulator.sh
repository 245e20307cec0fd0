#!/usr/bin/env bash
# The emulator's own capacity and timing fidelity (issue 3): one TCP stream through `longhaul emulate`,
#  - "unthrottled": bottleneck far above what 2 cores can forward (100 Gbit/s, 256 MiB queue), 0 and 120 ms RTT;
#  - lateness (write time - scheduled release) p50/p99 at 1, 2.5 and 5 Gbit/s on a 120 ms path.
# Each case runs REPS times; medians are printed. Needs root (namespaces, TUN).
#
# Usage: bench/emulator.sh [REPS] [SECONDS]      (defaults: 3 reps of 10 s)
#        LONGHAUL=/path/to/longhaul bench/emulator.sh ...   (that binary instead of building target/release)
# Output: a table on stdout; raw rows in bench/runs/<UTC date>-emulator/raw.csv with the exact commands.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SECS=${2:-10}
if [ -n "${LONGHAUL:-}" ]; then
    LH=$(realpath "$LONGHAUL")
else
    cargo build --release --quiet
    LH=$PWD/target/release/longhaul
fi
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-emulator
mkdir -p "$out"
raw=$out/raw.csv
echo "case,rtt,rate,rep,recv_gbps,retransmits,ab_p50_ms,ab_p99_ms,ab_max_ms,ba_p99_ms,fidelity_ok,command" >"$raw"

run_case() { # name rtt rate rep [extra emulate flags...]
    local name=$1 rtt=$2 rate=$3 rep=$4
    shift 4
    local cmd=("$LH" emulate --rtt "$rtt" --rate "$rate" "$@" --json -- "$LH" test 10.201.0.2 -t "$SECS" -C cubic --json)
    "${cmd[@]}" >"$out/test.json" 2>"$out/emu.json" || { echo "run failed: ${cmd[*]}" >&2; tail -5 "$out/emu.json" >&2; return 1; }
    python3 - "$out/test.json" "$out/emu.json" "$name" "$rtt" "$rate" "$rep" "${cmd[*]}" >>"$raw" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
e = json.loads(text[text.index("{"):])   # the emulator's report is the JSON document on stderr
ab, ba = e["emulator"]["a_to_b"], e["emulator"]["b_to_a"]
ms = lambda ns: ns / 1e6
print(",".join(map(str, [sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6],
    round(t["end"]["sum_received"]["bits_per_second"] / 1e9, 3), t["end"]["sum_sent"]["retransmits"],
    round(ms(ab["lateness"]["p50_ns"]), 3), round(ms(ab["lateness"]["p99_ns"]), 3), round(ms(ab["lateness"]["max_ns"]), 3),
    round(ms(ba["lateness"]["p99_ns"]), 3), e["fidelity"]["ok"], '"' + sys.argv[7] + '"'])))
EOF
    tail -1 "$raw" >&2
}

for rep in $(seq "$REPS"); do
    # Unthrottled: the default queue (1 BDP) would be a few frames at 0 RTT and the run would measure the
    # queue, not the forwarder; give both a queue no 2-core box can fill.
    run_case unthrottled 0ms 100G "$rep" --queue 256M
    run_case unthrottled 120ms 100G "$rep" --queue 256M
    run_case lateness 120ms 1G "$rep"
    run_case lateness 120ms 2.5G "$rep"
    run_case lateness 120ms 5G "$rep"
done
rm -f "$out/test.json" "$out/emu.json"

python3 - "$raw" <<'EOF' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
for r in rows:
    k = (r["case"], r["rtt"], r["rate"])
    if k not in keys:
        keys.append(k)
print("| case | RTT | bottleneck | received Gbit/s | retransmits | lateness a→b p50 / p99 / max (ms) | b→a p99 (ms) | trustworthy runs |")
print("|---|---|---|---|---|---|---|---|")
for k in keys:
    sel = [r for r in rows if (r["case"], r["rtt"], r["rate"]) == k]
    med = lambda f: statistics.median(float(r[f]) for r in sel)
    ok = sum(r["fidelity_ok"] == "True" for r in sel)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {med('recv_gbps'):.2f} | {med('retransmits'):.0f} | "
          f"{med('ab_p50_ms'):.3f} / {med('ab_p99_ms'):.3f} / {med('ab_max_ms'):.1f} | {med('ba_p99_ms'):.3f} | {ok}/{len(sel)} |")
print(f"\nmedians of {len(rows) // len(keys)} runs; raw rows with commands: {sys.argv[1]}")
EOF

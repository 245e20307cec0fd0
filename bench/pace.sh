#!/usr/bin/env bash
# `--pace auto` against the alternatives on one emulated 120 ms, 1 Gbit/s path with three bottleneck
# queues (0.1, 1 and 2 x BDP = 1.5, 15 and 30 MB): unpaced CUBIC, unpaced BBR, CUBIC paced by hand at
# the true payload rate (1 Gbit/s of 1,500-byte packets carries 965 Mbit/s of 1,448-byte segments),
# and CUBIC under --pace auto. Each is one `longhaul test -t SECS -i 0.25` from host a to b, in turn,
# REPS rounds (A B C D A B C D ...). Reported per run: received rate, retransmitted segments (and their
# share of the segments sent), and the time to rate: the end of the first quarter-second interval
# whose rate reached 90 % of 965 Mbit/s.
#
# Usage: bench/pace.sh [REPS] [SECS]     (defaults 2 and 15)
# Output: bench/runs/<UTC date>-pace/raw.csv (one row per run, with the exact command) and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-2} secs=${2:-15}
lh=$PWD/target/release/longhaul
[ -x "$lh" ] || cargo build --release --quiet
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-pace
mkdir -p "$out"
raw=$out/raw.csv
echo "queue,mode,rep,received_mbps,retransmits,retransmit_share,to_rate_s,command" >"$raw"
name=lhbp
down() { "$lh" emulate down --name $name >/dev/null 2>&1 || true; }
trap down EXIT

for queue in 1500K 15M 30M; do
    down
    "$lh" emulate up --name $name --rtt 120ms --rate 1G --queue "$queue" >/dev/null
    for rep in $(seq "$reps"); do
        for mode in cubic bbr "hand 965M" auto; do
            case $mode in
            cubic) flags="-C cubic" ;;
            bbr) flags="-C bbr" ;;
            "hand 965M") flags="-C cubic --pace 965M" ;;
            auto) flags="-C cubic --pace auto" ;;
            esac
            cmd="$lh test 10.201.0.2 -t $secs -i 0.25 $flags --json"
            # shellcheck disable=SC2086
            "$lh" emulate exec --name $name a -- $cmd >"$out/run.json" 2>/dev/null
            row=$(python3 - "$out/run.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
s, r = d["end"]["sum_sent"], d["end"]["sum_received"]
mss = d["start"]["longhaul"]["local_sockets"][0]["mss"] or 1448
segs = max(1, s["bytes"] // mss)
retr = s.get("retransmits") or 0
to_rate = next((iv["sum"]["end"] for iv in d["intervals"]
                if iv["sum"]["bits_per_second"] >= 0.9 * 965e6), None)
print(f'{r["bits_per_second"] / 1e6:.1f},{retr},{retr / segs:.5f},'
      f'{"" if to_rate is None else f"{to_rate:.2f}"}')
EOF
            )
            echo "$queue,$mode,$rep,$row,\"$cmd\"" >>"$raw"
            tail -1 "$raw" >&2
        done
    done
done
rm -f "$out/run.json"

python3 - "$raw" >"$out/summary.txt" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| queue | mode | received Mbit/s (median) | retransmits (median, share) | time to 90 % (median) |")
print("|---|---|---|---|---|")
for q in ("1500K", "15M", "30M"):
    for m in ("cubic", "bbr", "hand 965M", "auto"):
        rs = [r for r in rows if r["queue"] == q and r["mode"] == m]
        if not rs:
            continue
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        times = [float(r["to_rate_s"]) for r in rs if r["to_rate_s"]]
        t = f"{statistics.median(times):.2f} s" if len(times) == len(rs) else \
            f"{len(rs) - len(times)} of {len(rs)} runs never"
        print(f"| {q} | {m} | {med('received_mbps'):.1f} | {med('retransmits'):.0f} "
              f"({100 * med('retransmit_share'):.3f} %) | {t} |")
EOF
cat "$out/summary.txt"

#!/usr/bin/env bash
# `send --dedicated` (the fast start) against the same send without it, on one emulated 120 ms,
# 2 Gbit/s path (the issue's path; queue 1 BDP, the emulator's default): 1 GiB of random data from
# RAM (/dev/shm) to the server's root in RAM, three ways in turn, REPS rounds (A B C A B C ...):
#   default    longhaul send's defaults (--rate 10G sizes windows; slow start, unpaced at the path)
#   rate       --rate 1.93G (the path's payload ceiling: windows sized and streams paced for it)
#   dedicated  --rate 1.93G --dedicated (the same, opened at the rate from the first round trip)
# Reported per run: the summary's rate (bytes moved / wall time of the transfer), retransmits, and
# for the fast start its time from the first byte to a round trip carrying 90 % of the rate.
#
# Usage: bench/fast_start.sh [REPS]     (default 3; run as root, on a quiet machine)
# Output: bench/runs/<UTC date>-fast-start/raw.csv (one row per run, with the exact command) and
# summary.txt (medians, and the ratios dedicated/default and dedicated/rate).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
lh=$PWD/target/release/longhaul
[ -x "$lh" ] || cargo build --release --quiet
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-fast-start
mkdir -p "$out"
raw=$out/raw.csv
echo "mode,rep,gbps,retransmits,to_rate_ms,rtts_to_rate,command" >"$raw"
name=lhbf
work=$(mktemp -d /dev/shm/lh-bench-fast-XXXX)
down() {
    [ -n "${server:-}" ] && kill "$server" 2>/dev/null
    "$lh" emulate down --name $name >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap down EXIT
head -c 1073741824 /dev/urandom >"$work/big.dat"
"$lh" keygen "$work/key" >/dev/null
mkdir "$work/root"
"$lh" emulate up --name $name --rtt 120ms --rate 2G --no-server >/dev/null
"$lh" emulate exec --name $name b -- "$lh" server --root "$work/root" --key "$work/key" \
    --log warn >/dev/null 2>&1 &
server=$!
sleep 1
for rep in $(seq "$reps"); do
    for mode in default rate dedicated; do
        case $mode in
        default) flags="" ;;
        rate) flags="--rate 1.93G" ;;
        dedicated) flags="--rate 1.93G --dedicated" ;;
        esac
        rm -rf "${work:?}/root/in"
        cmd="$lh send $work/big.dat 10.201.0.2:in --key $work/key --json $flags"
        # shellcheck disable=SC2086
        "$lh" emulate exec --name $name a -- $cmd >"$out/run.json"
        row=$(python3 - "$out/run.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] and d["bytes_moved"] == 1 << 30, d
f = d.get("fast_start") or {}
ms = f.get("to_rate_ms")
rtts = "" if ms is None else f'{ms / f["rtt_ms"]:.2f}'
print(f'{d["bits_per_second"] / 1e9:.3f},{d["retransmits"]},{"" if ms is None else f"{ms:.0f}"},{rtts}')
EOF
        )
        echo "$mode,$rep,$row,\"$cmd\"" >>"$raw"
        tail -1 "$raw" >&2
    done
done
rm -f "$out/run.json"

python3 - "$raw" >"$out/summary.txt" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
for mode in ("default", "rate", "dedicated"):
    rs = [r for r in rows if r["mode"] == mode]
    g = statistics.median(float(r["gbps"]) for r in rs)
    retr = statistics.median(int(r["retransmits"]) for r in rs)
    to = [float(r["rtts_to_rate"]) for r in rs if r["rtts_to_rate"]]
    med[mode] = g
    print(f'{mode:10} median {g:.3f} Gbit/s over {len(rs)} runs ({", ".join(r["gbps"] for r in rs)}), '
          f'median retransmits {retr:.0f}'
          + (f', 90 % of the rate after {statistics.median(to):.2f} RTTs (median)' if to else ''))
print(f'dedicated/default {med["dedicated"] / med["default"]:.3f}, '
      f'dedicated/rate {med["dedicated"] / med["rate"]:.3f}')
EOF
cat "$out/summary.txt"

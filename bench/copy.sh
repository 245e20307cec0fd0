#!/usr/bin/env bash
# Third-party copies (issue 14), side by side in one run on an emulated 120 ms, 2 Gbit/s path
# (`longhaul emulate up`): `longhaul send` run on host a into host b's server, against
# `longhaul copy` asked by a controller that tells a's server to send the same file to b's
# (ticket, job connections, progress relayed). Alternating, REPS times each, a fresh destination
# every run. Prints seconds and rates per run and the median ratio copy ÷ send.
#
# Usage: bench/copy.sh [MIB] [REPS]      default 2048 MiB, 3 repetitions
# The file lives in /dev/shm (RAM), as in bench/transfer.sh. Needs root (namespaces).
# Output: bench/runs/<UTC date>-copy/raw.csv with the exact commands.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-2048}
REPS=${2:-3}
PORT=7299
[ "$(id -u)" = 0 ] || { echo "bench/copy.sh needs root (namespaces)" >&2; exit 1; }
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-copy
mkdir -p "$out"
raw=$out/raw.csv
echo "run,tool,bytes,seconds,gbps,reported_gbps,command" >"$raw"
data=/dev/shm/lh-bench-copy
mkdir -p "$data/src" "$data/dst" "$data/keys"
chmod 700 "$data/keys"
if [ "$(stat -c %s "$data/src/big.bin" 2>/dev/null || echo 0)" != $((MIB << 20)) ]; then
    head -c $((MIB << 20)) /dev/urandom >"$data/src/big.bin"
fi
[ -f "$data/keys/lh.key" ] || "$LH" keygen "$data/keys/lh.key" 2>/dev/null
[ -f "$data/keys/ops.key" ] || "$LH" keygen "$data/keys/ops.key" 2>/dev/null
printf '[[controller]]\nname = "bench"\nkey = "ops.key"\nmax_duration = "10min"\n' >"$data/keys/controllers.toml"

cleanup() {
    for h in a b; do [ -f "$data/$h.pid" ] && kill "$(cat "$data/$h.pid")" 2>/dev/null || true; done
    "$LH" emulate down --name copyb >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$LH" emulate up --name copyb --rtt 120ms --rate 2G --no-server >/dev/null
b_addr=10.201.0.2
start_server() { # HOST ROOT
    rm -f "$data/$1.pid"
    "$LH" emulate exec --name copyb "$1" -- "$LH" server -p $PORT --root "$2" --key "$data/keys/lh.key" \
        --controllers "$data/keys/controllers.toml" --log warn -D --pidfile "$data/$1.pid" 2>/dev/null
    for _ in $(seq 50); do [ -s "$data/$1.pid" ] && break; sleep 0.1; done
}
start_server a "$data/src"
start_server b "$data/dst"

measure() { # RUN TOOL CMD... (on host a)
    local run=$1 tool=$2
    shift 2
    find "$data/dst" -mindepth 1 -delete
    "$LH" emulate exec --name copyb a -- /usr/bin/time -f "%e" -o "$out/time.txt" "$@" >"$out/last.json" 2>"$out/last.err" ||
        { echo "FAILED: $*" >&2; tail -3 "$out/last.err" >&2; }
    cmp -s "$data/src/big.bin" "$data/dst/big.bin" || { echo "NOT IDENTICAL after $tool" >&2; exit 1; }
    local secs reported
    secs=$(cat "$out/time.txt")
    reported=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d.get("sender", d); print("%.3f" % (s["bits_per_second"] / 1e9))' "$out/last.json")
    echo "$run,$tool,$((MIB << 20)),$secs,$(awk -v b=$((MIB << 20)) -v s="$secs" 'BEGIN { printf "%.3f", b * 8 / s / 1e9 }'),$reported,\"$*\"" >>"$raw"
    tail -1 "$raw" >&2
}
for r in $(seq "$REPS"); do
    measure "$r" "longhaul send" "$LH" send "$data/src/big.bin" "$b_addr:" -p $PORT --key "$data/keys/lh.key" --json
    measure "$r" "longhaul copy" "$LH" copy -p $PORT --key "$data/keys/ops.key" 127.0.0.1:big.bin "$b_addr:" --json
done

python3 - "$raw" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(tool, f): return statistics.median(float(r[f]) for r in rows if r["tool"] == tool)
for tool in ("longhaul send", "longhaul copy"):
    print(f"{tool:14} median {med(tool, 'seconds'):.2f} s = {med(tool, 'gbps'):.3f} Gbit/s wall, "
          f"{med(tool, 'reported_gbps'):.3f} Gbit/s as the sender reports")
print(f"copy ÷ send (wall rate, medians): {med('longhaul copy', 'gbps') / med('longhaul send', 'gbps'):.3f}")
PY
echo "raw: $raw"

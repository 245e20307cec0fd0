#!/usr/bin/env bash
# Before/after comparison of longhaul builds on the hot paths that do not need the emulator: `longhaul
# test` over loopback (1 and 4 streams) and `longhaul send` over loopback (one big file and many small
# files, from RAM to RAM), with each binary in turn, REPS rounds (A B A B ...), so that background load
# on this shared machine hits every binary alike. Each binary talks to a server of its own build (the
# protocols may differ between builds). Prints medians per binary and the ratio of each binary to the
# first one. Needs nothing but the binaries; files live in BENCH_DIR (default /dev/shm/lh-ab, RAM).
#
# Usage: bench/ab.sh REPS SECS BIG_MIB NFILES BINARY...
#   e.g. git worktree add /tmp/base <old commit> && (cd /tmp/base && cargo build --release)
#        bench/ab.sh 5 5 2048 5000 /tmp/base/target/release/longhaul target/release/longhaul
#   TRANSPORT=udp runs every case over the UDP transport (`--transport udp`; default tcp).
# Output: bench/runs/<UTC date>-ab/raw.csv (one row per run, with the exact command) and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 5 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
reps=$1 secs=$2 big_mib=$3 nfiles=$4
shift 4
port=7399
transport=${TRANSPORT:-tcp}
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-ab
mkdir -p "$out"
raw=$out/raw.csv
echo "bin,rep,case,gbps,seconds,command" >"$raw"
data=${BENCH_DIR:-/dev/shm/lh-ab}
mkdir -p "$data/src/small"
if [ "$(stat -c %s "$data/src/big.bin" 2>/dev/null || echo 0)" != $((big_mib << 20)) ]; then
    head -c $((big_mib << 20)) /dev/urandom >"$data/src/big.bin"
fi
if [ "$(find "$data/src/small" -type f | wc -l)" != "$nfiles" ]; then
    rm -rf "$data/src/small" && mkdir -p "$data/src/small"
    (cd "$data/src/small" && head -c $((nfiles * 65536)) /dev/urandom | split -b 64K -a 6 -d - f)
fi
key=$data/key
[ -f "$key" ] || "$1" keygen "$key" >/dev/null

server_pid=
stop_server() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    server_pid=
}
trap stop_server EXIT
start_server() { # BINARY ROOT
    "$1" server -B 127.0.0.1 -p $port --root "$2" --key "$key" --log warn >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && return
        sleep 0.05
    done
    echo "server $1 did not start" >&2
    exit 1
}

row() { # BIN REP CASE GBPS SECONDS CMD...
    local b=$1 r=$2 c=$3 g=$4 s=$5
    shift 5
    echo "$b,$r,$c,$g,$s,\"$*\"" >>"$raw"
    tail -1 "$raw" >&2
}

for rep in $(seq "$reps"); do
    for bin in "$@"; do
        dst=$data/dst
        rm -rf "$dst" && mkdir -p "$dst"
        start_server "$bin" "$dst"
        for p in 1 4; do
            cmd=("$bin" test 127.0.0.1 -p $port --transport "$transport" -t "$secs" -P $p --json)
            g=$("${cmd[@]}" | python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))')
            row "$bin" "$rep" "test -P $p" "$g" "$secs" "${cmd[@]}"
        done
        for w in big small; do
            if [ $w = big ]; then what=$data/src/big.bin; else what=$data/src/small; fi
            rm -rf "${dst:?}"/*
            cmd=("$bin" send "$what" 127.0.0.1: -p $port --transport "$transport" --key "$key" --json)
            read -r g s < <("${cmd[@]}" | python3 -c 'import json,sys; d = json.load(sys.stdin); assert d["verified"]; print("%.3f %.2f" % (d["bytes_moved"] * 8 / d["seconds"] / 1e9, d["seconds"]))')
            row "$bin" "$rep" "send $w" "$g" "$s" "${cmd[@]}"
        done
        stop_server
    done
done
rm -rf "$data/dst"

python3 - "$raw" <<'EOF' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bins = list(dict.fromkeys(r["bin"] for r in rows))
cases = list(dict.fromkeys(r["case"] for r in rows))
med = {(b, c): statistics.median(float(r["gbps"]) for r in rows if r["bin"] == b and r["case"] == c) for b in bins for c in cases}
print("| case | " + " | ".join(f"{b} (Gbit/s, median)" for b in bins) + " | " + " | ".join(f"ratio {i + 1}/1" for i in range(1, len(bins))) + " |")
print("|---" * (1 + 2 * len(bins) - 1) + "|")
for c in cases:
    runs = [med[(b, c)] for b in bins]
    ratios = [f"{runs[i] / runs[0]:.3f}" for i in range(1, len(bins))]
    print(f"| {c} | " + " | ".join(f"{x:.2f}" for x in runs) + " | " + " | ".join(ratios) + " |")
print(f"\nruns per cell: {len(rows) // (len(bins) * len(cases))}; raw rows: {sys.argv[1]}")
EOF

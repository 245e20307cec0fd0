#!/usr/bin/env bash
# Side-by-side loopback benchmark: longhaul vs Debian's iperf3, same congestion control, 1 and 4 streams.
#
# Runs both tools alternately (A B A B ...) so drift on this shared 2-core machine hits both equally,
# and prints medians, throughput ratios and CPU seconds per Gbit moved (client + server), from each
# tool's own JSON (`cpu_utilization_percent`, which both compute the same way: process CPU ÷ wall time).
#
# Usage: bench/loopback.sh [REPS] [SECONDS]     (defaults: 5 reps of 5 s per configuration)
# Env:   CCS="bbr cubic"  STREAMS="1 4"  EXTRA_CASES=1 (also compare both tools at equal write sizes,
#        -l 128K and -l 1M, and with -Z)
# Output: a table on stdout; raw rows in bench/runs/<UTC date>-loopback/raw.csv with the exact commands.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${1:-5}
SECS=${2:-5}
CCS=${CCS:-"bbr cubic"}
STREAMS=${STREAMS:-"1 4"}
EXTRA_CASES=${EXTRA_CASES:-1}
LH_PORT=7199
IP_PORT=5299

if ! command -v iperf3 >/dev/null; then
    echo "installing iperf3 (Debian package)..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null; }
fi
cargo build --release --quiet
LH=./target/release/longhaul

out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-loopback
mkdir -p "$out"
raw=$out/raw.csv
echo "tool,case,cc,streams,rep,gbps,cpu_client_pct,cpu_server_pct,command" >"$raw"

cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
pids=()
trap cleanup EXIT
iperf3 -s -B 127.0.0.1 -p $IP_PORT >/dev/null 2>&1 &
pids+=($!)
$LH server -B 127.0.0.1 -p $LH_PORT --log warn >/dev/null 2>&1 &
pids+=($!)
sleep 1

# extract GBPS CPU_CLIENT CPU_SERVER from either tool's JSON on stdin
extract() {
    python3 -c '
import json, sys
d = json.load(sys.stdin)
if "error" in d and d["error"]:
    sys.exit("error: " + d["error"])
e = d["end"]; c = e["cpu_utilization_percent"]
print("%.3f %.1f %.1f" % (e["sum_received"]["bits_per_second"] / 1e9, c["host_total"], c["remote_total"]))'
}

run_one() { # tool case cc streams rep cmd...
    local tool=$1 case=$2 cc=$3 p=$4 rep=$5
    shift 5
    local res
    res=$("$@" | extract)
    read -r gbps cc_pct cs_pct <<<"$res"
    echo "$tool,$case,$cc,$p,$rep,$gbps,$cc_pct,$cs_pct,\"$*\"" >>"$raw"
    printf '  %-8s %-9s %-5s P%-2s rep %s: %7.2f Gbit/s  cpu %5.1f%% + %5.1f%%\n' "$tool" "$case" "$cc" "$p" "$rep" "$gbps" "$cc_pct" "$cs_pct" >&2
}

cases=("defaults")
[ "$EXTRA_CASES" = 1 ] && cases+=("l128K" "l1M" "zerocopy")
for cc in $CCS; do
    for p in $STREAMS; do
        for case in "${cases[@]}"; do
            case $case in
                defaults) lh_extra=(); ip_extra=() ;;
                l128K) lh_extra=(-l 128K); ip_extra=(-l 128K) ;;
                l1M) lh_extra=(-l 1M); ip_extra=(-l 1M) ;;
                zerocopy) lh_extra=(-Z); ip_extra=(-Z) ;;
            esac
            for rep in $(seq "$REPS"); do
                run_one longhaul "$case" "$cc" "$p" "$rep" \
                    $LH test 127.0.0.1 -p $LH_PORT -t "$SECS" -P "$p" -C "$cc" --json "${lh_extra[@]}"
                run_one iperf3 "$case" "$cc" "$p" "$rep" \
                    iperf3 -c 127.0.0.1 -p $IP_PORT -t "$SECS" -P "$p" -C "$cc" -J "${ip_extra[@]}"
            done
        done
    done
done

python3 - "$raw" <<'EOF' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = []
for r in rows:
    k = (r["case"], r["cc"], r["streams"])
    if k not in keys:
        keys.append(k)
print("| case | cc | streams | longhaul Gbit/s (median) | iperf3 Gbit/s (median) | ratio | longhaul CPU s/Gbit | iperf3 CPU s/Gbit | CPU ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for k in keys:
    med = {}
    for tool in ("longhaul", "iperf3"):
        sel = [r for r in rows if (r["case"], r["cc"], r["streams"]) == k and r["tool"] == tool]
        g = statistics.median(float(r["gbps"]) for r in sel)
        # CPU seconds per Gbit moved: (client% + server%) / 100 per second of test, divided by Gbit/s.
        cpg = statistics.median((float(r["cpu_client_pct"]) + float(r["cpu_server_pct"])) / 100 / float(r["gbps"]) for r in sel)
        med[tool] = (g, cpg, len(sel))
    (lg, lc, n), (ig, ic, _) = med["longhaul"], med["iperf3"]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {lg:.2f} | {ig:.2f} | {lg/ig:.2f}x | {lc:.4f} | {ic:.4f} | {lc/ic:.2f}x |")
print(f"\n{n} alternating runs per cell; raw rows and exact commands: {sys.argv[1]}")
EOF
echo "versions: $($LH --version); $(iperf3 --version | head -1); kernel $(uname -r); $(nproc) cores" | tee -a "$out/summary.txt"

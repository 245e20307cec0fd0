#!/usr/bin/env bash
# The multi-host emulator (issue 13) under load. Needs root. Two benchmarks:
#
#   bench/network.sh scale [SECS]     aggregate held against host pairs (1, 2, 4, 8) and path length (1, 4, 8
#                                     links per pair), with one switch thread and with two (--switches 1|2):
#                                     (a) unthrottled (every link 100 Gbit/s): what the fabric can move, its
#                                     lateness and its CPU per segment per link; (b) each pair's links held to
#                                     TOTAL/pairs for TOTAL in 1, 2, 4, 8 Gbit/s, stopping at the first total not
#                                     held: the largest total received at >= 90 % with fidelity OK.
#   bench/network.sh sc2004 [SECS]    the sc2004-bwc preset at its scaled rates, six flows at once (remote sites
#                                     to the show floor, mixed rates and RTTs): aggregate against the sum of the
#                                     flows' bottlenecks, fidelity.
#
# Every flow is `longhaul test DST -t SECS -O 3 --rate R --json` (window sized for R), started together from
# CMD's shell with `ip netns exec`. Output: bench/runs/<UTC date>-network-<mode>/raw.csv and summary.txt.
# LONGHAUL (default target/release/longhaul) picks the binary.
set -u
cd "$(dirname "$0")/.."
mode=${1:?usage: bench/network.sh scale|sc2004 [SECS]}
secs=${2:-8}
lh=$(realpath "${LONGHAUL:-target/release/longhaul}")
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-network-$mode
mkdir -p "$out"
raw=$out/raw.csv
# The bench measures by itself: no calibration first (a binary from before it has no such flag).
nocal=$("$lh" emulate --help | grep -q -- --no-calibration && echo --no-calibration)

# network PAIRS LINKS RATE FILE: pair i is s<i> -> r<i>_1 -> ... -> d<i>, LINKS links of RATE each (0.5 ms each);
# the first routers of all pairs are joined in a chain so that every host reaches every other.
network() {
    local pairs=$1 links=$2 rate=$3 f=$4
    {
        echo "name = \"scale-${pairs}x${links}\""
        for i in $(seq "$pairs"); do echo "[[host]]"; echo "name = \"s$i\""; echo "[[host]]"; echo "name = \"d$i\""; done
        for i in $(seq "$pairs"); do
            for j in $(seq $((links - 1))); do echo "[[router]]"; echo "name = \"r$i-$j\""; done
        done
        for i in $(seq "$pairs"); do
            local prev=s$i
            for j in $(seq $((links - 1))); do
                printf '[[link]]\na = "%s"\nb = "r%s-%s"\nrate = "%s"\nqueue = "4M"\ndelay = "0.5ms"\n' "$prev" "$i" "$j" "$rate"
                prev=r$i-$j
            done
            printf '[[link]]\na = "%s"\nb = "d%s"\nrate = "%s"\nqueue = "4M"\ndelay = "0.5ms"\n' "$prev" "$i" "$rate"
        done
        # Join the pairs so that every host reaches every other (hosts do not forward): through their
        # first routers, or, for one-link paths, through a hub router linked to every sender.
        if [ "$links" -gt 1 ]; then
            for i in $(seq 2 "$pairs"); do
                printf '[[link]]\nname = "join%s"\na = "r%s-1"\nb = "r%s-1"\ndelay = "0.5ms"\n' "$i" "$((i - 1))" "$i"
            done
        elif [ "$pairs" -gt 1 ]; then
            echo "[[router]]"; echo 'name = "hub"'
            for i in $(seq "$pairs"); do
                printf '[[link]]\nname = "join%s"\na = "s%s"\nb = "hub"\ndelay = "0.5ms"\n[[link]]\nname = "joind%s"\na = "d%s"\nb = "hub"\ndelay = "0.5ms"\n' "$i" "$i" "$i" "$i"
            done
        fi
    } >"$f"
}

# run FILE ON SWITCHES FLOWS... (each flow "SRC DST RATE"): prints "received_bps_sum ok p99_ms cpu_s link_segments"
run() {
    local f=$1 on=$2 switches=$3; shift 3
    local cmd="" n=0
    for flow in "$@"; do
        set -- $flow
        n=$((n + 1))
        local src=${1^^} dst=${2^^}
        cmd+="ip netns exec \$LH_NETNS_${src//-/_} $lh test \$LH_HOST_${dst//-/_} -t $secs -O 3 --rate $3 --json > $out/flow$n.json & "
    done
    cmd+="wait"
    "$lh" emulate "$f" $nocal --on "$on" --switches "$switches" --json -- sh -c "$cmd" >/dev/null 2>"$out/e.json" &
    local pid=$!
    sleep 2
    local c1; c1=$(cpu "$pid")
    sleep $((secs - 2))
    local c2; c2=$(cpu "$pid")
    wait "$pid"
    python3 - "$out" "$n" "$c1" "$c2" <<'PY'
import json, sys
out, n, c1, c2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
total = 0.0
for i in range(1, n + 1):
    try:
        total += json.load(open(f"{out}/flow{i}.json"))["end"]["sum_received"]["bits_per_second"]
    except Exception:
        pass
s = open(f"{out}/e.json").read()
r = json.loads(s[s.index("\n{") + 1:])
p99 = max(x["lateness"]["p99_ns"] for x in r["network"]["switches"]) / 1e6
segs = sum(l[d]["link"]["segments"] for l in r["network"]["links"] for d in ("a_to_b", "b_to_a"))
print(f"{total:.0f} {str(r['fidelity']['ok']).lower()} {p99:.3f} {(c2 - c1) / 100:.2f} {segs}")
PY
}

# cpu PID: utime+stime (clock ticks) of the emulator's switch threads.
cpu() {
    local sum=0
    for t in /proc/$1/task/*; do
        grep -q '^lh-switch' "$t/comm" 2>/dev/null || continue
        local s; s=$(cat "$t/stat" 2>/dev/null) || continue
        s=${s##*) }
        set -- $s
        sum=$((sum + ${12} + ${13}))
    done
    echo "$sum"
}

case $mode in
scale)
    echo "switches,pairs,links,rate_each,received_bps,fidelity_ok,p99_ms,switch_cpu_s,link_segments,load1" >"$raw"
    for switches in 1 2; do
        for pairs in 1 2 4 8; do
            for links in 1 4 8; do
                for total in unthrottled 1000000000 2000000000 4000000000 8000000000; do
                    if [ "$total" = unthrottled ]; then rate=100G; else rate=$((total / pairs)); fi
                    f=$out/net.toml
                    network "$pairs" "$links" "$rate" "$f"
                    flows=()
                    for i in $(seq "$pairs"); do flows+=("s$i d$i $rate"); done
                    load=$(cut -d' ' -f1 /proc/loadavg)
                    r=$(run "$f" s1 "$switches" "${flows[@]}")
                    echo "$switches,$pairs,$links,$rate,${r// /,},$load" | tee -a "$raw" >&2
                    # The ladder stops at the first total not held (>= 90 % received, fidelity OK).
                    set -- ${r:-0 false}
                    if [ "$total" != unthrottled ] && { [ "$2" != true ] || awk -v r="$1" -v t="$total" 'BEGIN { exit !(r < 0.9 * t) }'; }; then
                        break
                    fi
                done
            done
        done
    done
    python3 - "$raw" "$secs" <<'PY' | tee "$out/summary.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
secs = int(sys.argv[2])
print("| switches | pairs | links per path | unthrottled: Gbit/s, p99 lateness, switch CPU per segment per link | largest held total (>= 90 %, fidelity OK) |")
print("|---|---|---|---|---|")
keys = dict.fromkeys((r["switches"], r["pairs"], r["links"]) for r in rows)
for k in keys:
    sel = [r for r in rows if (r["switches"], r["pairs"], r["links"]) == k]
    u = [r for r in sel if r["rate_each"] == "100G"][0]
    # CPU over the sampled secs-2 s, segments over the whole run: scale segments to the sample window.
    per = float(u["switch_cpu_s"]) / max(1, int(u["link_segments"]) * (int(secs) - 2) / int(secs)) * 1e9
    held = [int(r["rate_each"]) * int(r["pairs"]) for r in sel if r["rate_each"] != "100G"
            and r["fidelity_ok"] == "true" and float(r["received_bps"]) >= 0.9 * int(r["rate_each"]) * int(r["pairs"])]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {float(u['received_bps']) / 1e9:.2f}, {u['p99_ms']} ms, {per:.0f} ns "
          f"| {max(held) / 1e9 if held else 0:.1f} Gbit/s |")
print(f"\nraw rows: {sys.argv[1]}")
PY
    ;;
sc2004)
    echo "rep,received_bps,fidelity_ok,p99_ms,switch_cpu_s,link_segments,bottleneck_sum_bps,load1" >"$raw"
    # Remote sites to the show floor: both LA waves, Chicago (FNAL and CERN share it: 219 ms and 15 ms RTTs),
    # Sunnyvale, and the 25 Mbit/s host over the Jacksonville wave (seed 003's "small flows with large flows").
    flows=("caltech1 floor1 250M" "caltech2 floor2 250M" "fnal1 floor3 250M" "cern1 floor3 250M"
        "slac1 floor4 250M" "uf1 floor1 25M")
    bottlenecks=$((4 * 250000000 + 25000000))
    for rep in 1 2 3; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        r=$(run sc2004-bwc caltech1 2 "${flows[@]}")
        echo "$rep,${r// /,},$bottlenecks,$load" | tee -a "$raw" >&2
    done
    python3 - "$raw" <<'PY' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
b = int(rows[0]["bottleneck_sum_bps"])
agg = [float(r["received_bps"]) for r in rows]
print(f"sc2004-bwc, 6 flows: aggregate median {statistics.median(agg) / 1e6:.1f} Mbit/s of {b / 1e6:.0f} Mbit/s of "
      f"bottlenecks = {statistics.median(agg) / b * 100:.1f} % (runs: {', '.join(f'{a / 1e6:.1f}' for a in agg)}); "
      f"fidelity OK in {sum(r['fidelity_ok'] == 'true' for r in rows)} of {len(rows)}; "
      f"p99 lateness {', '.join(r['p99_ms'] for r in rows)} ms")
print(f"raw rows: {sys.argv[1]}")
PY
    ;;
*) echo "usage: bench/network.sh scale|sc2004 [SECS]" >&2; exit 2 ;;
esac
rm -f "$out"/flow*.json "$out/e.json" "$out/net.toml"

#!/usr/bin/env bash
# A campaign over the emulator's sc2004-bwc network (issue 14): the six flows of `bench/network.sh sc2004`
# (remote sites to the show floor, mixed rates and RTTs), each run by its sending server as a job of one
# controller, all started at one instant, against the same six flows started from one shell (no controller).
# Needs root.
#
#   bench/campaign.sh [SECS] [REPS]      default 20 s, 3 repetitions, alternating campaign / direct
#
# Every host of a named network `bwc` runs `longhaul server --controllers FILE`; the controller runs on
# floor2 (its job connections cross the emulated network too, as a real controller's would). Output:
# bench/runs/<UTC date>-campaign/raw.csv (aggregate, start spread, fidelity per run) and summary.txt.
# LONGHAUL (default target/release/longhaul) picks the binary.
set -u
cd "$(dirname "$0")/.."
secs=${1:-20}
reps=${2:-3}
lh=$(realpath "${LONGHAUL:-target/release/longhaul}")
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-campaign
mkdir -p "$out"
out=$(realpath "$out")
raw=$out/raw.csv
work=$(mktemp -d /tmp/lh-campaign-XXXXXX)
trap 'pkill -f -- "--controllers $work/controllers.toml"; "$lh" emulate down --name bwc >/dev/null 2>&1; rm -rf "$work"' EXIT

"$lh" keygen "$work/ops.key" >/dev/null 2>&1
printf '[[controller]]\nname = "bench"\nkey = "ops.key"\nmax_duration = "10min"\nmax_jobs = 4\n' >"$work/controllers.toml"
"$lh" emulate up sc2004-bwc --name bwc --no-server --no-calibration >/dev/null
hosts=$("$lh" emulate status --name bwc --json | python3 -c \
    'import json,sys; d=json.load(sys.stdin); print(" ".join(h["host"] for h in d["testbeds"][0]["hosts"]))' 2>/dev/null)
[ -n "$hosts" ] || hosts="floor1 floor2 floor3 floor4 caltech1 caltech2 fnal1 uf1 slac1 cern1"
for h in $hosts; do
    "$lh" emulate exec --name bwc "$h" -- "$lh" server --controllers "$work/controllers.toml" --log warn \
        >/dev/null 2>&1 &
done
sleep 2

# The six flows: FROM TO RATE (bottlenecks: four 250 Mbit/s waves, uf1's 25 Mbit/s host link).
flows=("caltech1 floor1 250M" "caltech2 floor2 250M" "fnal1 floor3 250M" "cern1 floor3 250M"
    "slac1 floor4 250M" "uf1 floor1 25M")
bottlenecks=1025000000
ip_of() { # HOST -> its IPv4 address, from the environment every host gets
    "$lh" emulate exec --name bwc floor2 -- sh -c "echo \$LH_HOST_${1^^}"
}
{
    echo "start_in = \"3s\""
    echo "args = \"-t $secs -O 3\""
    for f in "${flows[@]}"; do
        set -- $f
        echo "[[pair]]"; echo "name = \"$1-$2\""; echo "from = \"$(ip_of "$1")\""; echo "to = \"$(ip_of "$2")\""
        echo "args = \"--rate $3\""
    done
} >"$work/sc2004.toml"

direct() { # the same flows from one shell on floor2's namespace, each `ip netns exec` to its sender
    local cmd=""
    local i=0
    for f in "${flows[@]}"; do
        set -- $f
        i=$((i + 1))
        cmd+="ip netns exec lh-bwc-$1 $lh test $(ip_of "$2") -t $secs -O 3 --rate $3 --json > $work/d$i.json & "
    done
    sh -c "$cmd wait"
    python3 - "$work" <<'PY'
import json, sys
print(sum(json.load(open(f"{sys.argv[1]}/d{i}.json"))["end"]["sum_received"]["bits_per_second"] for i in range(1, 7)))
PY
}

echo "rep,mode,aggregate_bps,bottleneck_sum_bps,start_spread_ms,pairs_ok,load1" >"$raw"
for rep in $(seq "$reps"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$lh" emulate exec --name bwc floor2 -- "$lh" campaign "$work/sc2004.toml" --key "$work/ops.key" --json \
        >"$work/c.json" 2>"$work/c.err"
    python3 - "$work/c.json" "$bottlenecks" "$rep" "$load" <<'PY' | tee -a "$raw"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["aggregate"]
print(f'{sys.argv[3]},campaign,{a["sum_received_bits_per_second"]:.0f},{sys.argv[2]},'
      f'{d["start_spread_ns"] / 1e6:.3f},{a["pairs_ok"]},{sys.argv[4]}')
PY
    load=$(cut -d' ' -f1 /proc/loadavg)
    bps=$(direct)
    echo "$rep,direct,${bps%.*},$bottlenecks,,6,$load" | tee -a "$raw"
done
# The emulator's verdict over every run (its counters are the session's).
"$lh" emulate status --name bwc --json | python3 -c \
    'import json,sys; d=json.load(sys.stdin)["testbeds"][0]["fidelity"]; print("fidelity over all runs:", "OK" if d["ok"] else "NOT TRUSTWORTHY", "; ".join(d["problems"]))' \
    | tee "$out/fidelity.txt"
python3 - "$raw" <<'PY' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
b = int(rows[0]["bottleneck_sum_bps"])
for mode in ("campaign", "direct"):
    agg = [float(r["aggregate_bps"]) for r in rows if r["mode"] == mode]
    m = statistics.median(agg)
    line = (f"{mode}: aggregate median {m / 1e6:.1f} Mbit/s of {b / 1e6:.0f} Mbit/s of bottlenecks = "
            f"{m / b * 100:.1f} % (runs {', '.join(f'{x / 1e6:.1f}' for x in agg)})")
    if mode == "campaign":
        line += f"; start spread {', '.join(r['start_spread_ms'] for r in rows if r['mode'] == mode)} ms"
    print(line)
c = statistics.median(float(r["aggregate_bps"]) for r in rows if r["mode"] == "campaign")
d = statistics.median(float(r["aggregate_bps"]) for r in rows if r["mode"] == "direct")
print(f"campaign / direct = {c / d:.3f}")
print(f"raw rows: {sys.argv[1]}")
PY

#!/usr/bin/env bash
# `longhaul monitor` (issue 15): what watching costs, and how well the probe stream measures.
# Needs root (the emulator). Three parts, one run:
#
#   bench/monitor.sh [MINUTES] [PROBES]    default 5 minutes of overhead, 3000 probes per accuracy run
#
# 1. Accuracy, side by side with iputils ping (the tool everyone checks a path with) on an emulated
#    path of 120 ms RTT and 1 % random loss in each direction (so 1.99 % of round trips lose a
#    packet), 10 ms apart: `longhaul probe B -c PROBES -i 10ms` and `ping -c PROBES -i 0.01 -q B`,
#    alternating, 3 repetitions each. Reported: median RTT and round-trip loss against the configured
#    ones, with the binomial 95 % interval of the loss for PROBES probes.
# 2. Overhead at the default schedule: 4 `longhaul server`s on loopback and a monitor running the
#    mesh all-to-all (12 pairs) with every test at its defaults (throughput every 6 h `-t 10`,
#    traceroute every 10 min, latency streams of 10 probes a second, reported every minute) for
#    MINUTES: the monitor's CPU time (utime + stime from /proc) and its peak memory (VmHWM), and the
#    servers' CPU.
# 3. Archive growth: the bytes a result of each kind adds to the SQLite archive, measured on three
#    archives (one kind each) filled by accelerated schedules for 2 minutes (the file vacuumed, less the
#    same file emptied of results), projected to a pair's day
#    at the default schedule (4 throughput, 144 traceroute, 1440 latency results).
#
# Output: bench/runs/<UTC date>-monitor/raw.csv and summary.txt. LONGHAUL picks the binary (default
# target/release/longhaul).
set -u
cd "$(dirname "$0")/.."
minutes=${1:-5}
probes=${2:-3000}
lh=$(realpath "${LONGHAUL:-target/release/longhaul}")
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-monitor
mkdir -p "$out"
out=$(realpath "$out")
raw=$out/raw.csv
work=$(mktemp -d /tmp/lh-bench-monitor-XXXXXX)
trap 'pkill -f -- "--controllers $work/controllers.toml" 2>/dev/null; pkill -f -- "monitor run $work" 2>/dev/null; "$lh" emulate down --name mbench >/dev/null 2>&1; rm -rf "$work"' EXIT
echo "part,tool,rep,metric,value" >"$raw"

# --- 1. accuracy ----------------------------------------------------------------------------------
"$lh" emulate up --name mbench --rtt 120ms --loss 1% --rate 100M >/dev/null
for rep in 1 2 3; do
    "$lh" emulate exec --name mbench a -- "$lh" probe 10.201.0.2 -c "$probes" -i 10ms --json \
        >"$work/probe$rep.json"
    python3 - "$work/probe$rep.json" "$rep" >>"$raw" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); rep = sys.argv[2]
print(f"accuracy,longhaul probe,{rep},rtt_median_ms,{s['rtt']['median_ns'] / 1e6:.3f}")
print(f"accuracy,longhaul probe,{rep},loss_percent,{s['loss'] * 100:.3f}")
print(f"accuracy,longhaul probe,{rep},jitter_ms,{s['jitter_ns'] / 1e6:.3f}")
print(f"accuracy,longhaul probe,{rep},lost_on_the_way_there,{s['sent'] - s['b_received']}")
EOF
    "$lh" emulate exec --name mbench a -- ping -c "$probes" -i 0.01 -q 10.201.0.2 >"$work/ping$rep.txt" 2>&1
    python3 - "$work/ping$rep.txt" "$rep" >>"$raw" <<'EOF'
import re, sys
t = open(sys.argv[1]).read(); rep = sys.argv[2]
m = re.search(r"(\d+) packets transmitted, (\d+) received", t)
sent, got = int(m.group(1)), int(m.group(2))
# iputils ping -q prints min/avg/max/mdev, not the median: avg is the nearest it gives.
a = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", t)
print(f"accuracy,ping,{rep},rtt_avg_ms,{float(a.group(2)):.3f}")
print(f"accuracy,ping,{rep},loss_percent,{(sent - got) / sent * 100:.3f}")
print(f"accuracy,ping,{rep},mdev_ms,{float(a.group(4)):.3f}")
EOF
done
"$lh" emulate down --name mbench >/dev/null

# --- 2. overhead at the default schedule -----------------------------------------------------------
"$lh" keygen "$work/mon.key" >/dev/null 2>&1
printf '[[controller]]\nname = "bench"\nkey = "mon.key"\nmax_jobs = 16\n' >"$work/controllers.toml"
ports=(7301 7302 7303 7304)
for p in "${ports[@]}"; do
    "$lh" server -p "$p" -B 127.0.0.1 --controllers "$work/controllers.toml" --log error >/dev/null 2>&1 &
done
sleep 1
mesh() { # NAME then the [[test]] tables on stdin
    echo "name = \"$1\""
    for i in 0 1 2 3; do
        printf '[[host]]\nname = "h%s"\naddress = "127.0.0.1"\nport = %s\ngroups = ["all"]\n' "$i" "${ports[$i]}"
    done
    cat
}
mesh default >"$work/default.toml" <<'EOF'
[[test]]
name = "bw"
kind = "throughput"
from = ["all"]
args = "-t 10"
[[test]]
name = "trace"
kind = "traceroute"
from = ["all"]
[[test]]
name = "lat"
kind = "latency"
from = ["all"]
EOF
cpu_s() { awk '{ print ($14 + $15) / 100 }' "/proc/$1/stat"; }
servers_cpu() { local t=0; for p in $(pgrep -f -- "--controllers $work/controllers.toml"); do
    t=$(python3 -c "print($t + $(cpu_s "$p"))"); done; echo "$t"; }
s0=$(servers_cpu)
"$lh" monitor run "$work/default.toml" --key "$work/mon.key" --archive "$work/default.sqlite" \
    --no-listen --log warn >"$work/default.out" 2>&1 &
mon=$!
sleep $((minutes * 60))
m_cpu=$(cpu_s "$mon")
m_hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$mon/status")
s1=$(servers_cpu)
kill -TERM "$mon"; wait "$mon" 2>/dev/null
rows=$(grep -c . "$work/default.out" || true)
{
    echo "overhead,monitor,1,minutes,$minutes"
    echo "overhead,monitor,1,cpu_seconds,$m_cpu"
    echo "overhead,monitor,1,peak_rss_kib,$m_hwm"
    echo "overhead,servers,1,cpu_seconds,$(python3 -c "print(round($s1 - $s0, 2))")"
    echo "overhead,monitor,1,results,$rows"
} >>"$raw"

# --- 3. archive growth per result, by kind ----------------------------------------------------------
mesh tp <<'EOF' >"$work/tp.toml"
[[test]]
name = "bw"
kind = "throughput"
from = ["all"]
every = "1min"
slip = "0s"
args = "-t 10"
EOF
mesh tr <<'EOF' >"$work/tr.toml"
[[test]]
name = "trace"
kind = "traceroute"
from = ["all"]
every = "5s"
slip = "0s"
EOF
mesh lat <<'EOF' >"$work/lat.toml"
[[test]]
name = "lat"
kind = "latency"
from = ["all"]
every = "5s"
EOF
for k in tp tr lat; do
    "$lh" monitor run "$work/$k.toml" --key "$work/mon.key" --archive "$work/$k.sqlite" \
        --no-listen --log warn >/dev/null 2>&1 &
done
sleep 120
pkill -TERM -f -- "monitor run $work/" ; sleep 3
python3 - "$work" >>"$raw" <<'EOF'
import sqlite3, os, sys
work = sys.argv[1]
for k in ("tp", "tr", "lat"):
    db = f"{work}/{k}.sqlite"
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = c.execute("SELECT count(*) FROM monitor_results").fetchone()[0]
    c.execute("VACUUM")
    full = os.path.getsize(db)
    # The same archive emptied: what the schema and indexes take without a result.
    c.execute("DELETE FROM monitor_results")
    c.execute("DELETE FROM monitor_events")
    c.commit()
    c.execute("VACUUM")
    c.close()
    print(f"growth,{k},1,rows,{rows}")
    print(f"growth,{k},1,bytes,{full - os.path.getsize(db)}")
EOF

# --- summary --------------------------------------------------------------------------------------
python3 - "$raw" "$probes" >"$out/summary.txt" <<'EOF'
import csv, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]))); n = int(sys.argv[2])
def vals(part, tool, metric):
    return [float(r["value"]) for r in rows if r["part"] == part and r["tool"] == tool and r["metric"] == metric]
p = 1 - 0.99 ** 2
half = 1.96 * math.sqrt(p * (1 - p) / n) * 100
print(f"accuracy: emulated 120 ms RTT, 1 % loss each way (round trip {p * 100:.2f} %, 95 % interval for {n} probes +-{half:.2f} points)")
for tool, rtt in (("longhaul probe", "rtt_median_ms"), ("ping", "rtt_avg_ms")):
    r, l = vals("accuracy", tool, rtt), vals("accuracy", tool, "loss_percent")
    print(f"  {tool:15s} rtt {rtt.split('_')[1]} {statistics.median(r):8.3f} ms (runs {', '.join(f'{x:.3f}' for x in r)})"
          f"   loss median {statistics.median(l):.3f} % (runs {', '.join(f'{x:.2f}' for x in l)})")
there = vals("accuracy", "longhaul probe", "lost_on_the_way_there")
print(f"  longhaul probe: lost on the way there (server's count) {', '.join(f'{x:.0f}' for x in there)} of {n} (expected {n * 0.01:.0f})")
o = {r["metric"]: float(r["value"]) for r in rows if r["part"] == "overhead" and r["tool"] == "monitor"}
srv = vals("overhead", "servers", "cpu_seconds")[0]
print(f"overhead: 12 pairs at the default schedule for {o['minutes']:.0f} min, {o['results']:.0f} results:")
print(f"  monitor CPU {o['cpu_seconds']:.2f} s ({o['cpu_seconds'] / (o['minutes'] * 60) * 100:.2f} % of one core), peak RSS {o['peak_rss_kib'] / 1024:.1f} MiB; the four servers' CPU {srv:.2f} s")
g = {}
for r in rows:
    if r["part"] == "growth":
        g.setdefault(r["tool"], {})[r["metric"]] = float(r["value"])
per = {k: g[k]["bytes"] / g[k]["rows"] for k in g if g[k]["rows"]}
day = 4 * per["tp"] + 144 * per["tr"] + 1440 * per["lat"]
print("archive growth (SQLite, vacuumed; per result: (file size - the same file emptied) / rows):")
for k, name, perday in (("tp", "throughput", 4), ("tr", "traceroute", 144), ("lat", "latency", 1440)):
    print(f"  {name:10s} {per[k]:8.0f} B/result ({g[k]['rows']:.0f} rows)  x {perday:4d}/day")
print(f"  per pair per day at the default schedule: {day / 1024:.0f} KiB; a 100-pair mesh: {day * 100 * 365 / 2**30:.1f} GiB a year")
EOF
cat "$out/summary.txt"

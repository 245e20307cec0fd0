#!/usr/bin/env bash
# Side-by-side comparison of longhaul binaries as the emulator's forwarder (issue 3): the unthrottled case of
# bench/emulator.sh (one `longhaul test -C cubic` stream, --rate 100G --queue 256M) run with each binary in turn,
# REPS rounds, so that background load hits all of them alike. Besides throughput it samples each forwarder
# thread's CPU time (utime+stime, clock ticks) and minor page faults from /proc/PID/task/*/stat between 2 s and
# SECS-1 s into the run, and records the 1-minute load average before each run. Needs root.
#
# Usage: bench/emulator_ab.sh REPS RTT SECS BINARY...
#   e.g. git worktree add /tmp/perf-base <old commit> && (cd /tmp/perf-base && cargo build --release)
#        bench/emulator_ab.sh 5 0ms 8 /tmp/perf-base/target/release/longhaul target/release/longhaul
# Output: bench/runs/<UTC date>-emulator-ab/raw.csv (one row per run) and summary.txt (medians per binary).
set -u
cd "$(dirname "$0")/.."
reps=$1; rtt=$2; secs=$3; shift 3
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-emulator-ab
mkdir -p "$out"
raw=$out/raw.csv
echo "bin,rep,rtt,gbps,retr,ab_records,ab_avg_rec,ab_p50_ms,ab_p99_ms,ba_records,fwd_ab_cpu,fwd_ab_minflt,fwd_ba_cpu,fwd_ba_minflt,load1,ab_tun_drops" >"$raw"
snap() { # PID -> "thread name|utime+stime|minflt" per thread
    for t in /proc/$1/task/*; do
        n=$(cat "$t/comm" 2>/dev/null) || continue
        s=$(cat "$t/stat" 2>/dev/null) || continue
        s=${s##*) }
        set -- $s
        echo "$n|$((${12} + ${13}))|${8}"
    done
}
for rep in $(seq "$reps"); do
    for bin in "$@"; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        "$bin" emulate --rtt "$rtt" --rate 100G --queue 256M --json -- "$bin" test 10.201.0.2 -t "$secs" -C cubic --json \
            >"$out/t.json" 2>"$out/e.json" &
        pid=$!
        sleep 2; s1=$(snap $pid); sleep $((secs - 3)); s2=$(snap $pid)
        wait $pid || { echo "run failed: $bin" >&2; continue; }
        python3 - "$bin" "$rep" "$rtt" "$load" "$s1" "$s2" "$out" >>"$raw" <<'PY'
import json, sys
b, rep, rtt, load, s1, s2, out = sys.argv[1:]
t = json.load(open(out + "/t.json"))
s = open(out + "/e.json").read()
e = json.loads(s[s.index("{"):])
ab, ba = e["emulator"]["a_to_b"], e["emulator"]["b_to_a"]
def parse(x):
    d = {}
    for line in x.splitlines():
        n, c, f = line.split("|")
        d[n] = (int(c), int(f))
    return d
d1, d2 = parse(s1), parse(s2)
def diff(prefix):
    k = [n for n in d2 if n.startswith(prefix) and n in d1]
    return (d2[k[0]][0] - d1[k[0]][0], d2[k[0]][1] - d1[k[0]][1]) if k else ("", "")
fa, fb = diff("lh-fwd a"), diff("lh-fwd b")
print(",".join(map(str, [b, rep, rtt, round(t["end"]["sum_received"]["bits_per_second"] / 1e9, 3), t["end"]["sum_sent"]["retransmits"],
    ab["records_read"], round(ab["bytes_written"] / max(1, ab["records_written"])), round(ab["lateness"]["p50_ns"] / 1e6, 3),
    round(ab["lateness"]["p99_ns"] / 1e6, 3), ba["records_read"], fa[0], fa[1], fb[0], fb[1], load, ab.get("tun_tx_dropped")])))
PY
        tail -1 "$raw" >&2
    done
done
rm -f "$out/t.json" "$out/e.json"
python3 - "$raw" "$secs" <<'EOF2' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
secs = int(sys.argv[2])
print("| binary | runs | received Gbit/s (median) | runs (Gbit/s) | retransmits | a→b lateness p50 / p99 (ms) | a→b records/s | a→b forwarder CPU (% of a core) | a→b minor faults/s | b→a forwarder CPU | load average (1 min) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for b in dict.fromkeys(r["bin"] for r in rows):
    sel = [r for r in rows if r["bin"] == b]
    med = lambda k: statistics.median(float(r[k]) for r in sel if r[k] != "")
    win = secs - 3
    print(f"| {b} | {len(sel)} | {med('gbps'):.2f} | {' '.join(r['gbps'] for r in sel)} | {med('retr'):.0f} | "
          f"{med('ab_p50_ms'):.3f} / {med('ab_p99_ms'):.3f} | {med('ab_records') / secs:.0f} | {med('fwd_ab_cpu') / win:.0f} % | "
          f"{med('fwd_ab_minflt') / win:.0f} | {med('fwd_ba_cpu') / win:.0f} % | {min(r['load1'] for r in sel)}–{max(r['load1'] for r in sel)} |")
print(f"\nraw rows: {sys.argv[1]}")
EOF2

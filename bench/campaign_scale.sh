#!/usr/bin/env bash
# How one controller copes with many servers (issue 14, "scale on paper"): N `longhaul server
# --controllers FILE` on loopback, a campaign of N pairs (server i tests to server i+1, `-t SECS --pace
# RATE`), the controller run under /usr/bin/time. Reports per N: the controller's wall time, peak RSS and
# CPU, the start spread, the pairs that ran, and the size of the JSON result.
#
#   bench/campaign_scale.sh "10 100 300" [SECS] [RATE]      default 2 s at 10M per pair, -l 128K
#
# Output: bench/runs/<UTC date>-campaign-scale/raw.csv and summary.txt. LONGHAUL picks the binary;
# CAMPAIGN_FLAGS adds flags to the campaign (e.g. CAMPAIGN_FLAGS=--encrypt: every connection in TLS).
set -u
cd "$(dirname "$0")/.."
sizes=${1:-"10 100"}
secs=${2:-2}
rate=${3:-10M}
lh=$(realpath "${LONGHAUL:-target/release/longhaul}")
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-campaign-scale
mkdir -p "$out"
raw=$out/raw.csv
work=$(mktemp -d /tmp/lh-cscale-XXXXXX)
trap 'pkill -f -- "--controllers $work/controllers.toml" 2>/dev/null; rm -rf "$work"' EXIT
"$lh" keygen "$work/ops.key" >/dev/null 2>&1
printf '[[controller]]\nname = "bench"\nkey = "ops.key"\nmax_jobs = 2\n' >"$work/controllers.toml"
base=20000
echo "servers,wall_s,controller_max_rss_kib,controller_cpu_s,start_spread_ms,pairs_ok,result_bytes,load1" >"$raw"
for n in $sizes; do
    for i in $(seq 0 $((n - 1))); do
        "$lh" server -p $((base + i)) -B 127.0.0.1 --controllers "$work/controllers.toml" --log error \
            >/dev/null 2>&1 &
    done
    sleep $((2 + n / 100))
    {
        echo "start_in = \"3s\""
        echo "args = \"-t $secs --pace $rate -P 1 -l 128K\""
        for i in $(seq 0 $((n - 1))); do
            printf '[[pair]]\nname = "p%s"\nfrom = "127.0.0.1"\nfrom_port = %s\nto = "127.0.0.1"\nto_port = %s\n' \
                "$i" $((base + i)) $((base + (i + 1) % n))
        done
    } >"$work/c.toml"
    load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e %M %U %S" -o "$work/time" \
        "$lh" campaign "$work/c.toml" --key "$work/ops.key" --connect-timeout 30 --json ${CAMPAIGN_FLAGS:-} \
        >"$work/r.json" 2>/dev/null
    # (time's last line: a failed command adds a line before it)
    read -r wall rss user sys < <(tail -n 1 "$work/time")
    python3 - "$work/r.json" "$n" "$wall" "$rss" "$user" "$sys" "$load" <<'PY' | tee -a "$raw"
import json, os, sys
f, n, wall, rss, user, sys_, load = sys.argv[1:]
d = json.load(open(f))
print(f'{n},{wall},{rss},{float(user) + float(sys_):.2f},{d["start_spread_ns"] / 1e6:.3f},'
      f'{d["aggregate"]["pairs_ok"]},{os.path.getsize(f)},{load}')
PY
    pkill -f -- "--controllers $work/controllers.toml"
    sleep 2
done
python3 - "$raw" <<'PY' | tee "$out/summary.txt"
import csv, sys
print("| servers | pairs ok | controller wall s | peak RSS MiB | CPU s | start spread ms | result KiB |")
print("|---|---|---|---|---|---|---|")
for r in csv.DictReader(open(sys.argv[1])):
    print(f'| {r["servers"]} | {r["pairs_ok"]} | {r["wall_s"]} | {int(r["controller_max_rss_kib"]) / 1024:.1f} | '
          f'{r["controller_cpu_s"]} | {r["start_spread_ms"]} | {int(r["result_bytes"]) / 1024:.0f} |')
print(f"raw rows: {sys.argv[1]}")
PY

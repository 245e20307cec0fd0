#!/usr/bin/env bash
# A striped copy against the campaign's memory-to-memory aggregate (issue 14), side by side on the
# emulator's sc2004-bwc network: four pairs over four distinct 250 Mbit/s waves (caltech1->floor1,
# caltech2->floor2 over the two LA waves, 76 ms; fnal1->floor3 over Chicago, 15 ms; slac1->floor4 over
# Sunnyvale, 80 ms). Needs root.
#
#   bench/stripe.sh [MIB] [REPS] [SECS]    default a 4096 MiB file, 3 repetitions, 20 s tests
#
# Each repetition runs, from floor2 (the controller; its job connections cross the emulated network):
#   campaign: the four pairs as `longhaul test -t SECS -O 3 --rate 250M`, started at one instant; its
#             aggregate is the memory-to-memory figure;
#   stripe:   `longhaul copy --stripe ... --rate 250M` of one MIB-MiB file (in /dev/shm) from the four
#             senders, which serve one source directory, to the four receivers, which write into one
#             destination directory (a cluster with shared storage); wall-clock time of the command,
#             the file compared with cmp afterwards.
# Output: bench/runs/<UTC date>-stripe/raw.csv and summary.txt. LONGHAUL picks the binary
# (default target/release/longhaul).
set -u
cd "$(dirname "$0")/.."
mib=${1:-4096}
reps=${2:-3}
secs=${3:-20}
lh=$(realpath "${LONGHAUL:-target/release/longhaul}")
out=bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-stripe
mkdir -p "$out"
out=$(realpath "$out")
raw=$out/raw.csv
data=/dev/shm/lh-bench-stripe
mkdir -p "$data/src" "$data/dst" "$data/keys"
chmod 700 "$data/keys"
trap 'pkill -f -- "--controllers $data/keys/controllers.toml"; "$lh" emulate down --name stripe >/dev/null 2>&1' EXIT

if [ "$(stat -c %s "$data/src/big.bin" 2>/dev/null || echo 0)" != $((mib << 20)) ]; then
    head -c $((mib << 20)) /dev/urandom >"$data/src/big.bin"
fi
for k in ops a b; do [ -f "$data/keys/$k.key" ] || "$lh" keygen "$data/keys/$k.key" >/dev/null 2>&1; done
printf '[[controller]]\nname = "bench"\nkey = "ops.key"\nmax_duration = "10min"\nmax_jobs = 4\n' \
    >"$data/keys/controllers.toml"
"$lh" emulate up sc2004-bwc --name stripe --no-server --no-calibration >/dev/null
serve() { # HOST ROOT KEY
    "$lh" emulate exec --name stripe "$1" -- "$lh" server --root "$2" --key "$data/keys/$3.key" \
        --controllers "$data/keys/controllers.toml" --log warn >/dev/null 2>&1 &
}
senders=(caltech1 caltech2 fnal1 slac1)
receivers=(floor1 floor2 floor3 floor4)
for h in "${senders[@]}"; do serve "$h" "$data/src" a; done
for h in "${receivers[@]}"; do serve "$h" "$data/dst" b; done
sleep 2
ip_of() { "$lh" emulate exec --name stripe floor2 -- sh -c "echo \$LH_HOST_${1^^}"; }
{
    echo "start_in = \"3s\""
    echo "args = \"-t $secs -O 3 --rate 250M\""
    for i in 0 1 2 3; do
        echo "[[pair]]"
        echo "name = \"${senders[$i]}-${receivers[$i]}\""
        echo "from = \"$(ip_of "${senders[$i]}")\""
        echo "to = \"$(ip_of "${receivers[$i]}")\""
    done
} >"$data/campaign.toml"
stripes=()
for i in 1 2 3; do stripes+=(--stripe "$(ip_of "${senders[$i]}")=$(ip_of "${receivers[$i]}")"); done
copy=("$lh" copy --key "$data/keys/ops.key" --rate 250M "${stripes[@]}"
    "$(ip_of "${senders[0]}"):big.bin" "$(ip_of "${receivers[0]}"):" --json)
echo "copy command: ${copy[*]}" | tee "$out/commands.txt"
echo "campaign: $lh campaign $data/campaign.toml --key $data/keys/ops.key --json" | tee -a "$out/commands.txt"

echo "rep,mode,bytes,seconds,aggregate_bps,load1" >"$raw"
for rep in $(seq "$reps"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$lh" emulate exec --name stripe floor2 -- "$lh" campaign "$data/campaign.toml" \
        --key "$data/keys/ops.key" --json >"$out/campaign-$rep.json" 2>"$out/campaign-$rep.err"
    python3 - "$out/campaign-$rep.json" "$rep" "$load" <<'PY' | tee -a "$raw"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["aggregate"]
assert a["pairs_ok"] == 4, d
print(f'{sys.argv[2]},campaign,,,{a["sum_received_bits_per_second"]:.0f},{sys.argv[3]}')
PY
    find "$data/dst" -mindepth 1 -delete
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$lh" emulate exec --name stripe floor2 -- /usr/bin/time -f "%e" -o "$out/time.txt" "${copy[@]}" \
        >"$out/stripe-$rep.json" 2>"$out/stripe-$rep.err" || { echo "FAILED:" >&2; tail -5 "$out/stripe-$rep.err" >&2; }
    cmp -s "$data/src/big.bin" "$data/dst/big.bin" || { echo "NOT IDENTICAL after the striped copy" >&2; exit 1; }
    python3 - "$out/stripe-$rep.json" "$rep" "$load" "$(cat "$out/time.txt")" $((mib << 20)) <<'PY' | tee -a "$raw"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"], d
secs, size = float(sys.argv[4]), int(sys.argv[5])
print(f'{sys.argv[2]},stripe,{size},{secs},{size * 8 / secs:.0f},{sys.argv[3]}')
PY
done
"$lh" emulate status --name stripe --json | python3 -c \
    'import json,sys; d=json.load(sys.stdin)["testbeds"][0]["fidelity"]; print("fidelity over all runs:", "OK" if d["ok"] else "NOT TRUSTWORTHY", "; ".join(d["problems"]))' \
    | tee "$out/fidelity.txt"
python3 - "$raw" <<'PY' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {}
for mode in ("campaign", "stripe"):
    agg = [float(r["aggregate_bps"]) for r in rows if r["mode"] == mode]
    med[mode] = statistics.median(agg)
    print(f"{mode}: median {med[mode] / 1e6:.1f} Mbit/s (runs {', '.join(f'{x / 1e6:.1f}' for x in agg)})")
print(f"striped copy (wall) / campaign memory-to-memory aggregate = {med['stripe'] / med['campaign']:.3f}")
print(f"raw rows: {sys.argv[1]}")
PY

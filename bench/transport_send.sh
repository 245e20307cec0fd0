#!/usr/bin/env bash
# `longhaul send --transport udp` (issue 19) beside `longhaul send` over the kernel's TCP, the same
# file in one run: on loopback, and on an emulated 120 ms, 1 Gbit/s path with random loss, where a
# loss-based TCP falls as Mathis's model says. For every run: the seconds, the rate of the file's
# bytes, the sender's retransmitted (TCP) or lost (QUIC) packets, and the CPU the whole machine spent
# (/proc/stat busy jiffies: both ends and, on an emulated path, the emulator) per Gbit moved.
#
# Usage: bench/transport_send.sh [MIB] [REPS]     default a 1024 MiB file, 1 repetition
#        LOSSES="0 1%" (the default) picks the emulated paths; LOOPBACK=0 skips loopback;
#        LOSSY_MIB (default 512) is the file moved on the emulated paths; a run still going after
#        LIMIT seconds (default 120: TCP CUBIC at 1 % loss) is stopped and rated by what the
#        receiver's journal holds.
# Files live in BENCH_DIR (default /dev/shm/lh-bench-udp: RAM, so the disk is not what is measured).
# Needs root (namespaces). Output: bench/runs/<UTC date>-transport-send/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1024}
REPS=${2:-1}
LOSSES=${LOSSES:-0 1%}
LOOPBACK=${LOOPBACK:-1}
LOSSY_MIB=${LOSSY_MIB:-512}
LIMIT=${LIMIT:-120}
PORT=7298
[ "$(id -u)" = 0 ] || { echo "bench/transport_send.sh needs root (namespaces)" >&2; exit 1; }
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transport-send
mkdir -p "$out"
raw=$out/raw.csv
echo "path,run,tool,bytes,seconds,gbps,lost_or_retransmitted,cpu_s_per_gbit,fidelity,command" >"$raw"
data=${BENCH_DIR:-/dev/shm/lh-bench-udp}
mkdir -p "$data/src" "$data/root"
"$LH" keygen "$data/key" >/dev/null 2>&1 || true
for m in "$MIB" "$LOSSY_MIB"; do
    [ "$(stat -c %s "$data/src/f$m.bin" 2>/dev/null || echo 0)" = $((m << 20)) ] ||
        head -c $((m << 20)) /dev/urandom >"$data/src/f$m.bin"
done

cleanup() {
    pkill -f "longhaul server --port $PORT" 2>/dev/null || true
    "$LH" emulate down --name tsb >/dev/null 2>&1 || true
}
trap cleanup EXIT

busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)

run_in() { # PATH CMD...
    local p=$1
    shift
    if [ "$p" = loopback ]; then "$@"; else "$LH" emulate exec --name tsb a -- "$@"; fi
}

measure() { # PATH RUN TOOL CMD...   (the command is a `longhaul send --json`)
    local p=$1 run=$2 tool=$3
    shift 3
    local b0 b1 t0 t1 fid=-
    rm -rf "$data/root/in"
    b0=$(busy)
    t0=$(date +%s.%N)
    # A run that has not finished after LIMIT seconds is stopped; its rate is what the receiver's
    # journal holds over that time.
    run_in "$p" timeout "$LIMIT" "$@" >"$out/last.json" 2>"$out/last.err" || true
    t1=$(date +%s.%N)
    b1=$(busy)
    if [ "$p" != loopback ]; then
        fid=$("$LH" emulate status --name tsb --json |
            python3 -c 'import json,sys; f=json.load(sys.stdin)["testbeds"][0]["fidelity"]; print("OK" if f["ok"] else "NOT TRUSTWORTHY")')
    fi
    python3 - "$out/last.json" "$p" "$run" "$tool" "$((b1 - b0))" "$hz" "$fid" "$*" \
        "$(awk "BEGIN { print $t1 - $t0 }")" "$data/root/in" >>"$raw" <<'PY'
import glob, json, sys
path, p, run, tool, jiffies, hz, fid, cmd, wall, dest = sys.argv[1:]

def journal_bytes():
    files, total = {}, 0
    for j in glob.glob(dest + "/.longhaul-journal*"):
        for line in open(j, errors="replace"):
            try:
                rec = json.loads(line.rsplit(" ", 1)[0])
            except ValueError:
                continue
            if rec.get("r") == "file":
                files[rec["id"]] = (rec["size"], rec["chunk_size"])
            elif rec.get("r") == "chunk":
                size, cs = files[rec["id"]]
                total += min(cs, size - rec["index"] * cs)
    return total

try:
    try:
        s = json.load(open(path))
        assert s["verified"], "not verified"
        moved, secs, lost, note = s["bytes_moved"], s["seconds"], s.get("retransmits") or 0, ""
    except ValueError:
        moved, secs, lost, note = journal_bytes(), float(wall), "", " (stopped at the limit)"
    gbit = moved * 8 / 1e9
    cpu = int(jiffies) / int(hz) / gbit if gbit else float("nan")
    print(f'{p},{run},{tool}{note},{moved},{secs:.2f},{gbit / secs:.3f},{lost},{cpu:.2f},{fid},"{cmd}"')
except Exception as err:
    print(f'{p},{run},{tool},FAILED ({err}),,,,,{fid},"{cmd}"')
PY
    tail -1 "$raw"
}

tools() { # PATH HOST FILE
    local p=$1 h=$2 f=$3 run
    local send=("$LH" send "$f" "$h:in" -p "$PORT" --key "$data/key" --json)
    for run in $(seq 1 "$REPS"); do
        for cc in cubic bbr; do
            measure "$p" "$run" "udp-$cc" "${send[@]}" --transport udp -C "$cc"
            measure "$p" "$run" "tcp-$cc" "${send[@]}" -C "$cc"
        done
    done
}

if [ "$LOOPBACK" = 1 ]; then
    "$LH" server --port "$PORT" --iperf3-port off --root "$data/root" --key "$data/key" >/dev/null 2>&1 &
    sleep 1
    tools loopback 127.0.0.1 "$data/src/f$MIB.bin"
    cleanup
fi
for loss in $LOSSES; do
    "$LH" emulate up --name tsb --no-server --rtt 120ms --rate 1G --loss "$loss" >/dev/null
    "$LH" emulate exec --name tsb b -- "$LH" server --port "$PORT" --iperf3-port off \
        --root "$data/root" --key "$data/key" >/dev/null 2>&1 &
    sleep 1
    # --rate 1G: the path's rate, so that TCP's windows and chunks are sized for it, as a user who
    # knows the path would ask.
    send_rate=(--rate 1G)
    p="120ms-1G-loss-$loss"
    for run in $(seq 1 "$REPS"); do
        for cc in cubic bbr; do
            measure "$p" "$run" "udp-$cc" "$LH" send "$data/src/f$LOSSY_MIB.bin" 10.201.0.2:in -p "$PORT" \
                --key "$data/key" --json "${send_rate[@]}" --transport udp -C "$cc"
            measure "$p" "$run" "tcp-$cc" "$LH" send "$data/src/f$LOSSY_MIB.bin" 10.201.0.2:in -p "$PORT" \
                --key "$data/key" --json "${send_rate[@]}" -C "$cc"
        done
    done
    cleanup
done
echo "raw: $raw"

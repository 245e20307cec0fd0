#!/usr/bin/env bash
# Two builds of `longhaul send` side by side on an emulated long path (issue 23): a 3-byte file, a
# 256 KiB file and a large file, the builds alternating (A B A B ...) so that background load hits
# both alike; each build sends to a server of its own build (the protocols may differ). Prints, per
# build and file, the median wall clock of the client command (start to verified end) in seconds
# and in round trips of the path, and for the large file the rate and the client host's
# retransmits over its segments sent (/proc/net/snmp of its namespace, counted over the run).
#
# Usage: bench/transfer_ab.sh BIN_A BIN_B [REPS] [BIG_MIB]     default 5 repetitions, 1024 MiB
#        RTT=120ms RATE=2G (the defaults) set the path; EMULATE (default "--realtime --pin 0,1": the
#        forwarders at real-time priority, so the hosts' work does not stall them) more flags of
#        `emulate up`.
# Needs root (namespaces). Files in BENCH_DIR (default /dev/shm/lh-tab, RAM).
# Output: bench/runs/<UTC date>-transfer-ab/raw.csv with every command, and summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/transfer_ab.sh BIN_A BIN_B [REPS] [BIG_MIB]}
B=${2:?usage: bench/transfer_ab.sh BIN_A BIN_B [REPS] [BIG_MIB]}
REPS=${3:-5}
BIG_MIB=${4:-1024}
RTT=${RTT:-120ms}
RATE=${RATE:-2G}
EMULATE=${EMULATE:---realtime --pin 0,1}
NAME=tab
PORT=7295
[ "$(id -u)" = 0 ] || { echo "bench/transfer_ab.sh needs root (namespaces)" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q time >/dev/null
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-transfer-ab
mkdir -p "$out"
raw=$out/raw.csv
echo "bin,rep,file,bytes,seconds,retrans_pct,command" >"$raw"
data=${BENCH_DIR:-/dev/shm/lh-tab}
mkdir -p "$data/src"
printf abc >"$data/src/tiny"
[ "$(stat -c %s "$data/src/mid" 2>/dev/null || echo 0)" = $((256 << 10)) ] || head -c $((256 << 10)) /dev/urandom >"$data/src/mid"
[ "$(stat -c %s "$data/src/big" 2>/dev/null || echo 0)" = $((BIG_MIB << 20)) ] || head -c $((BIG_MIB << 20)) /dev/urandom >"$data/src/big"
"$A" keygen "$data/key" >/dev/null 2>&1 || true
LH=$A

cleanup() {
    [ -f "$data/server.pid" ] && kill "$(cat "$data/server.pid")" 2>/dev/null || true
    "$LH" emulate down --name "$NAME" >/dev/null 2>&1 || true
}
trap 'cleanup; restore_pages' EXIT
cleanup
# shellcheck source=bench/keep_pages.sh
. "$(dirname "$0")/keep_pages.sh"
keep_pages
# shellcheck disable=SC2086
"$LH" emulate up --name "$NAME" --rtt "$RTT" --rate "$RATE" --no-server $EMULATE >/dev/null
for h in a b; do
    "$LH" emulate exec --name "$NAME" "$h" -- sysctl -q -w net.ipv4.tcp_rmem="4096 131072 67108864" net.ipv4.tcp_wmem="4096 16384 67108864"
done

snmp() { # -> "RetransSegs OutSegs" of host a
    "$LH" emulate exec --name "$NAME" a -- cat /proc/net/snmp |
        awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) n[$i] = i; h = 1 } else print $n["RetransSegs"], $n["OutSegs"] }'
}

for rep in $(seq 1 "$REPS"); do
    for which in A B; do
        bin=$A
        [ $which = B ] && bin=$B
        rm -rf "$data/dst" && mkdir -p "$data/dst" && rm -f "$data/server.pid"
        "$LH" emulate exec --name "$NAME" b -- "$bin" server -p $PORT --iperf3-port off --root "$data/dst" \
            --key "$data/key" --log warn -D --pidfile "$data/server.pid" 2>/dev/null
        for _ in $(seq 50); do [ -s "$data/server.pid" ] && break; sleep 0.1; done
        for f in tiny mid big; do
            rm -f "$data/dst/$f"
            cmd="$bin send $data/src/$f 10.201.0.2: -p $PORT --key $data/key"
            pages_quiet
            read -r r0 o0 < <(snmp)
            # shellcheck disable=SC2086
            "$LH" emulate exec --name "$NAME" a -- /usr/bin/time -f "%e" -o "$out/time.txt" $cmd >/dev/null 2>"$out/last.err" ||
                { echo "FAILED: $cmd: $(tail -1 "$out/last.err")" >&2; }
            read -r r1 o1 < <(snmp)
            cmp -s "$data/src/$f" "$data/dst/$f" || { echo "BAD COPY: $cmd" >&2; exit 1; }
            pct=$(awk -v r=$((r1 - r0)) -v o=$((o1 - o0)) 'BEGIN { printf "%.4f", o ? 100 * r / o : 0 }')
            echo "$which,$rep,$f,$(stat -c %s "$data/src/$f"),$(cat "$out/time.txt"),$pct,\"$cmd\"" >>"$raw"
            tail -1 "$raw" >&2
        done
        kill "$(cat "$data/server.pid")" 2>/dev/null || true
        sleep 0.5
    done
done
"$LH" emulate down --name "$NAME" >"$out/emulator-down.txt" 2>&1 || true
grep "fidelity" "$out/emulator-down.txt" >&2 || true

python3 - "$raw" "$RTT" "$A" "$B" <<'EOF' | tee "$out/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rtt = float(sys.argv[2].rstrip("ms")) / 1000
print(f"A = {sys.argv[3]}\nB = {sys.argv[4]}\npath RTT {rtt * 1000:.0f} ms; medians of {len(rows) // 6} repetitions")
for f in ("tiny", "mid", "big"):
    for b in ("A", "B"):
        rs = [r for r in rows if r["bin"] == b and r["file"] == f]
        s = statistics.median(float(r["seconds"]) for r in rs)
        line = f"{f:5} {b}: {s:7.2f} s = {s / rtt:5.1f} RTTs"
        if f == "big":
            gbps = int(rs[0]["bytes"]) * 8 / s / 1e9
            retr = statistics.median(float(r["retrans_pct"]) for r in rs)
            line += f", {gbps:.3f} Gbit/s, retransmits {retr:.4f} % of segments"
        print(line)
    a = statistics.median(float(r["seconds"]) for r in rows if r["bin"] == "A" and r["file"] == f)
    b = statistics.median(float(r["seconds"]) for r in rows if r["bin"] == "B" and r["file"] == f)
    print(f"{f:5} B/A time: {b / a:.2f}")
EOF
echo "raw: $raw" >&2

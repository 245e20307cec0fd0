#!/usr/bin/env bash
# --encrypt (issue 14), side by side in one run: plaintext and TLS for `longhaul test` (memory to
# memory) and `longhaul send` (a file from RAM to RAM), and `scp` (OpenSSH, AES-GCM or ChaCha20, its
# defaults; sshd started by this script), on loopback and on an emulated 120 ms, 2 Gbit/s path.
# Alternating, REPS times each. For every run: wall-clock rate (bytes ÷ seconds of the client
# process) and the CPU the whole machine spent (both ends, sshd, and on the emulated path the
# emulator too: /proc/stat busy jiffies before and after), as CPU seconds per Gbit moved.
#
# Usage: bench/encrypt.sh [MIB] [REPS] [SECS]   default 2048 MiB file, 3 repetitions, 10 s tests
#        PATHS="loopback emulated" (the default) picks the paths.
# Needs root (namespaces, sshd). Output: bench/runs/<UTC date>-encrypt/raw.csv with every command.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-2048}
REPS=${2:-3}
SECS=${3:-10}
# scp over 120 ms is capped near 0.13 Gbit/s by OpenSSH's channel window: a smaller file there.
SCP_EMU_MIB=256
PORT=7298
SSH_PORT=2298
[ "$(id -u)" = 0 ] || { echo "bench/encrypt.sh needs root (namespaces, sshd)" >&2; exit 1; }
for p in openssh-server time; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ -n "${need[*]-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi
cargo build --release --quiet
LH=$PWD/target/release/longhaul
out=$PWD/bench/runs/$(date -u +%Y%m%dT%H%M%SZ)-encrypt
mkdir -p "$out"
raw=$out/raw.csv
echo "path,run,tool,bytes,seconds,gbps,cpu_s,cpu_s_per_gbit,command" >"$raw"
data=/dev/shm/lh-bench-encrypt
mkdir -p "$data/src" "$data/dst" "$data/keys"
chmod 700 "$data/keys"
if [ "$(stat -c %s "$data/src/big.bin" 2>/dev/null || echo 0)" != $((MIB << 20)) ]; then
    head -c $((MIB << 20)) /dev/urandom >"$data/src/big.bin"
fi
head -c $((SCP_EMU_MIB << 20)) "$data/src/big.bin" >"$data/src/scp.bin"
keys=$data/keys
[ -f "$keys/lh.key" ] || "$LH" keygen "$keys/lh.key" 2>/dev/null
[ -f "$keys/id" ] || ssh-keygen -q -t ed25519 -N '' -f "$keys/id"
[ -f "$keys/host" ] || ssh-keygen -q -t ed25519 -N '' -f "$keys/host"
cp "$keys/id.pub" "$keys/authorized_keys"
mkdir -p /run/sshd
SCP="scp -q -P $SSH_PORT -i $keys/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"

cleanup() {
    for f in sshd server; do [ -f "$data/$f.pid" ] && kill "$(cat "$data/$f.pid")" 2>/dev/null || true; done
    "$LH" emulate down --name encb >/dev/null 2>&1 || true
}
trap cleanup EXIT

run_in() { # PATH HOST CMD...
    local p=$1 h=$2
    shift 2
    if [ "$p" = emulated ]; then "$LH" emulate exec --name encb "$h" -- "$@"; else "$@"; fi
}
busy() { # busy jiffies of the whole machine (user nice system irq softirq steal)
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
measure() { # PATH RUN TOOL BYTES FILE CMD...   (FILE: what arrives in dst, "-" for a test)
    local p=$1 run=$2 tool=$3 bytes=$4 file=$5
    shift 5
    find "$data/dst" -mindepth 1 -delete
    local b0 b1 secs
    b0=$(busy)
    run_in "$p" a /usr/bin/time -f "%e" -o "$out/time.txt" "$@" >"$out/last.out" 2>"$out/last.err" ||
        { echo "FAILED: $*" >&2; tail -3 "$out/last.err" >&2; }
    b1=$(busy)
    secs=$(cat "$out/time.txt")
    if [ "$file" = - ]; then
        # A test runs for SECS: what moved is in its report.
        bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"])' "$out/last.out")
    else
        cmp -s "$file" "$data/dst/$(basename "$file")" || { echo "NOT IDENTICAL after $tool" >&2; exit 1; }
    fi
    local hz cpu gbit
    hz=$(getconf CLK_TCK)
    cpu=$(awk -v a="$b0" -v b="$b1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
    gbit=$(awk -v b="$bytes" 'BEGIN { printf "%.4f", b * 8 / 1e9 }')
    echo "$p,$run,$tool,$bytes,$secs,$(awk -v g="$gbit" -v s="$secs" 'BEGIN { printf "%.3f", g / s }'),$cpu,$(awk -v c="$cpu" -v g="$gbit" 'BEGIN { printf "%.3f", c / g }'),\"$*\"" >>"$raw"
    tail -1 "$raw" >&2
}

for p in ${PATHS:-loopback emulated}; do
    if [ "$p" = emulated ]; then
        "$LH" emulate up --name encb --rtt 120ms --rate 2G --no-server >/dev/null
        host=10.201.0.2 scp_file=$data/src/scp.bin
    else
        host=127.0.0.1 scp_file=$data/src/big.bin
    fi
    rm -f "$data/server.pid"
    run_in "$p" b "$LH" server -p $PORT --root "$data/dst" --key "$keys/lh.key" --log warn -D \
        --pidfile "$data/server.pid" 2>/dev/null
    cat >"$data/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress $host
HostKey $keys/host
PidFile $data/sshd.pid
AuthorizedKeysFile $keys/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
EOF
    run_in "$p" b /usr/sbin/sshd -f "$data/sshd_config" -E "$out/sshd.log"
    for _ in $(seq 50); do [ -s "$data/server.pid" ] && [ -s "$data/sshd.pid" ] && break; sleep 0.1; done
    for r in $(seq "$REPS"); do
        for enc in "" --encrypt; do
            measure $p "$r" "longhaul test${enc:+ $enc}" 0 - "$LH" test "$host" -p $PORT -t "$SECS" --json $enc
        done
        for enc in "" --encrypt; do
            measure $p "$r" "longhaul send${enc:+ $enc}" $((MIB << 20)) "$data/src/big.bin" "$LH" send "$data/src/big.bin" "$host:" -p $PORT --key "$keys/lh.key" --json $enc
        done
        measure $p "$r" scp "$(stat -c %s "$scp_file")" "$scp_file" $SCP "$scp_file" "root@$host:$data/dst/"
    done
    kill "$(cat "$data/server.pid")" "$(cat "$data/sshd.pid")" 2>/dev/null || true
    rm -f "$data/server.pid" "$data/sshd.pid"
    [ "$p" = emulated ] && "$LH" emulate down --name encb >"$out/emulator-down.txt"
done

python3 - "$raw" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(p, tool, f):
    v = [float(r[f]) for r in rows if r["path"] == p and r["tool"] == tool]
    return statistics.median(v) if v else float("nan")
for p in ("loopback", "emulated"):
    print(p)
    for tool in ("longhaul test", "longhaul test --encrypt", "longhaul send", "longhaul send --encrypt", "scp"):
        print(f"  {tool:24} median {med(p, tool, 'gbps'):7.3f} Gbit/s, {med(p, tool, 'cpu_s_per_gbit'):6.3f} CPU s per Gbit")
    for what in ("test", "send"):
        plain, enc = f"longhaul {what}", f"longhaul {what} --encrypt"
        print(f"  {what}: encrypted ÷ plain rate {med(p, enc, 'gbps') / med(p, plain, 'gbps'):.3f}, "
              f"CPU per Gbit {med(p, enc, 'cpu_s_per_gbit') / med(p, plain, 'cpu_s_per_gbit'):.2f}×, "
              f"scp's CPU per Gbit ÷ encrypted {what}'s {med(p, 'scp', 'cpu_s_per_gbit') / med(p, enc, 'cpu_s_per_gbit'):.2f}")
PY
echo "raw: $raw"

#!/bin/sh
# The README's main job: one transfer with the kernel's default TCP buffers (stock iperf3 on untuned
# hosts), then one with `longhaul test`'s auto-sized windows, across the emulated CERN-StarLight path
# (7,067 km, RTT 127.2 ms) held to RATE (default 1G, what this machine emulates faithfully). Both run in
# the same emulated hosts, whose TCP buffer limits are left at the kernel defaults (--host-defaults:
# tcp_wmem max 4 MiB, tcp_rmem max 6 MiB). Both tools leave the first OMIT seconds (slow start: about
# 2 s at 127 ms) out of their figures with the same -O, and then measure for SECONDS. Needs root (asks
# sudo); installs iperf3 if missing.
#
#   sh bench/demo.sh [SECONDS] [RATE] [OMIT]
set -eu
secs=${1:-20}
rate=${2:-1G}
omit=${3:-3}
cd "$(dirname "$0")/.."
cargo build --release --quiet
lh="$PWD/target/release/longhaul"
[ "$(id -u)" = 0 ] || exec sudo -E sh "$0" "$@"
if ! command -v iperf3 >/dev/null; then
    echo "demo: installing iperf3 (Debian package) for the default-tuned comparison" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iperf3 >/dev/null; }
fi
exec "$lh" emulate cern-starlight --rate "$rate" --host-defaults --b-cmd 'iperf3 -s >/dev/null 2>&1' -- sh -c '
  secs=$1 rate=$2 lh=$3 omit=$4
  rx() { sed -n "s/.*\"bits_per_second\":[[:space:]]*\([0-9.e+]*\).*/\1/p" | tail -1; }
  echo "== default-tuned: iperf3 -c $LH_PEER -t $secs -O $omit (kernel-default buffers, autotuning) =="
  a=$(iperf3 -c "$LH_PEER" -t "$secs" -O "$omit" -J | tr -d "\n" | sed "s/.*\"sum_received\"//" | rx)
  echo "== auto-sized: longhaul test $LH_PEER -t $secs -O $omit --rate $rate (windows 2 x BDP from the measured RTT) =="
  b=$("$lh" test "$LH_PEER" -t "$secs" -O "$omit" --rate "$rate" -J | tr -d "\n" | sed "s/.*\"sum_received\"//" | rx)
  awk -v a="$a" -v b="$b" -v r="$rate" "BEGIN {
    n = r + 0; u = substr(r, length(r)); if (u ~ /[gG]/) n *= 1e9; else if (u ~ /[mM]/) n *= 1e6; else if (u ~ /[kK]/) n *= 1e3;
    printf \"default-tuned (iperf3):        %7.1f Mbit/s  %5.1f %% of the %s bottleneck\n\", a / 1e6, 100 * a / n, r;
    printf \"auto-sized (longhaul test):    %7.1f Mbit/s  %5.1f %% of the %s bottleneck\n\", b / 1e6, 100 * b / n, r }"
' demo "$secs" "$rate" "$lh" "$omit"

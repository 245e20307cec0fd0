#!/bin/sh
# The emulator's fidelity verdict checked against an independent clock (issue 22): one
# `longhaul test` over a named testbed while tcpdump captures each host's own device (the
# hosts' kernels stamp the packets, not the emulator), then bench/fidelity_check.py
# recomputes every packet's due release from the sender's timestamps and compares the
# receiver's. As root.
#
#   bench/fidelity_check.sh OUTDIR PRESET|- "EMULATE FLAGS" "TEST FLAGS"   (-: no preset)
#   e.g. bench/fidelity_check.sh /tmp/fc tokyo-loop-30000km "--rate 10G --mtu 9000 --pin 0,1 --realtime" \
#        "-t 30 -O 15 -C cubic --pace 11G"
#
# Writes OUTDIR/{a,b}.pcap, test.json, emulator.txt (the emulator's own report, `down`),
# emulator.json (its counters as `status --json` gave them just before), and check.txt (the
# independent figures, both directions). Needs RATE, ONE_WAY_MS and MTU of the path in the
# environment (the preset's), QUEUE_BYTES (its bottleneck queue; unset: unbounded) and SKIP_S to
# leave out the first seconds (a test's -O); CLIENT_CPU pins the test's client to that CPU;
# IPV6=1 runs the test to host b's IPv6 address and checks the IPv6 packets.
set -eu
out=$1; preset=$2; eflags=$3; tflags=$4
LH=${LH:-target/release/longhaul}
here=$(cd "$(dirname "$0")" && pwd)
name=lhfc$$
mkdir -p "$out"
[ "$preset" = - ] && preset=
# shellcheck disable=SC2086
"$LH" emulate up --name "$name" ${preset:+"$preset"} $eflags > "$out/up.txt"
for h in a b; do
  ip netns exec "lh-$name-$h" tcpdump -i lh0 -n -s 128 -B 262144 --time-stamp-precision=nano \
    -w "$out/$h.pcap" tcp 2> "$out/tcpdump-$h.txt" &
done
sleep 1
status=0
peer=LH_PEER; src_a=10.201.0.1; src_b=10.201.0.2
[ -n "${IPV6:-}" ] && { peer=LH_PEER6; src_a=fd00:4c48::1; src_b=fd00:4c48::2; }
"$LH" emulate exec --name "$name" a -- ${CLIENT_CPU:+taskset -c "$CLIENT_CPU"} \
  sh -c "$LH test \$$peer $tflags --json > $out/test.json" || status=$?
sleep 1
# A failed snapshot must not skip the teardown below (set -e).
"$LH" emulate status --name "$name" --json > "$out/emulator.json" || status=$?
pkill -INT -f "tcpdump -i lh0 -n -s 128 -B 262144 --time-stamp-precision=nano -w $out/" || true
wait
"$LH" emulate down --name "$name" > "$out/emulator.txt" 2>&1
: > "$out/check.txt"
for dir in "a.pcap b.pcap $src_a a→b" "b.pcap a.pcap $src_b b→a"; do
  set -- $dir
  python3 "$here/fidelity_check.py" --rate "$RATE" --one-way-ms "$ONE_WAY_MS" --mtu "$MTU" \
    ${QUEUE_BYTES:+--queue-bytes "$QUEUE_BYTES"} \
    --src "$3" --skip-s "${SKIP_S:-0}" --name "$4" "$out/$1" "$out/$2" >> "$out/check.txt"
done
cat "$out/tcpdump-a.txt" "$out/tcpdump-b.txt" | grep -E "captured|dropped" >> "$out/check.txt" || true
grep -E "^ *(a→b|b→a|fidelity)" "$out/emulator.txt" | cut -c1-400
cat "$out/check.txt"
exit $status

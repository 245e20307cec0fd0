#!/bin/sh
# One paced CUBIC run over tokyo at 10G, with or without a tcpdump tap on host a's lh0 (to /dev/null).
# Usage: tapcost.sh OUT tap|none
out=$1; mode=$2; LH=/tmp/lh-head; name=lhtc$$
mkdir -p "$out"
$LH emulate up --name $name tokyo-loop-30000km --rate 10G --mtu 9000 --pin 0,1 --realtime > "$out/up.txt"
if [ "$mode" = tap ]; then
  ip netns exec lh-$name-a tcpdump -i lh0 -n -s 128 -B 262144 --time-stamp-precision=nano -w /dev/null tcp 2> "$out/tcpdump.txt" &
fi
sleep 1
$LH emulate exec --name $name a -- sh -c "$LH test \$LH_PEER -t 30 -O 15 -C cubic --pace 11G --json > $out/test.json"
pkill -INT -f "tcpdump -i lh0 -n -s 128 -B 262144 --time-stamp-precision=nano -w /dev/null" || true
wait
$LH emulate down --name $name > "$out/emulator.txt" 2>&1
python3 -c "import json;d=json.load(open('$out/test.json'));print('$mode', round(d['end']['sum_received']['bits_per_second']/1e9,3))"
grep -E "fidelity" "$out/emulator.txt"

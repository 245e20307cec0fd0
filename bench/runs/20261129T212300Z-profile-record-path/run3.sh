#!/bin/bash
tag=$1; shift
LH=/work/main/target/release/longhaul
($LH emulate tokyo-loop-30000km --rate 10G --mtu 9000 "$@" -- sh -c 'sleep 1; $0 test $LH_PEER -t 30 -O 15 -C ${CC:-cubic} --json > /tmp/prof/test-'$tag'.json' $LH > /tmp/prof/emu-$tag.out 2> /tmp/prof/emu-$tag.err; echo rc=$? >> /tmp/prof/emu-$tag.err) &
sleep 0.7
EP=$(pgrep -f "longhaul emulate tokyo" | head -1)
for side in a b; do
  ns=$(ip netns list | awk '{print $1}' | grep "^lh-e$EP-.*-$side$")
  ip netns exec $ns sysctl -q -w net.ipv4.tcp_recovery=${RECOVERY:-0}
  echo "$ns tcp_recovery=$(ip netns exec $ns sysctl -n net.ipv4.tcp_recovery)"
done
wait
grep -o "^[ab]→[ab]\|lateness p50.*writes)\|fidelity.*" emu-$tag.err
python3 -c "
import json;d=json.load(open('test-$tag.json'));e=d['end'];print('received %.2f Gbit/s retransmits %s'%(e['sum_received']['bits_per_second']/1e9, e['sum_sent'].get('retransmits')))
print(' '.join('%.1f'%(i['sum']['bits_per_second']/1e9) for i in d['intervals']))"

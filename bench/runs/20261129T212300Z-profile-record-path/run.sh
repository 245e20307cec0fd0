#!/bin/bash
# usage: run.sh TAG RPS(0|1) [emulate flags...]
tag=$1 rps=$2; shift 2
LH=/work/main/target/release/longhaul
cd /tmp/prof
($LH emulate tokyo-loop-30000km --rate 10G --mtu 9000 "$@" -- sh -c '$0 test $LH_PEER -t 30 -O 15 -C ${CC:-cubic} --json > /tmp/prof/test-'$tag'.json' $LH > /tmp/prof/emu-$tag.out 2> /tmp/prof/emu-$tag.err; echo rc=$? >> /tmp/prof/emu-$tag.err) &
sleep 3
EP=$(pgrep -f "longhaul emulate tokyo" | head -1)
for side in a b; do
  ns=$(ip netns list | awk '{print $1}' | grep "^lh-e$EP-.*-$side$")
  dev=$(ip netns exec $ns ip -o link | awk -F': ' '$2!="lo"{print $2}' | cut -d@ -f1 | head -1)
  if [ "$rps" = 1 ]; then
    # written by the other side's forwarder: a's TUN by b→a (CPU1), processed on CPU0; b's by a→b (CPU0), on CPU1
    mask=${MASK_A:-1}; [ $side = b ] && mask=${MASK_B:-2}
    ip netns exec $ns sh -c "echo $mask > /sys/class/net/$dev/queues/rx-0/rps_cpus"
  fi
  echo "$ns $dev rps=$(ip netns exec $ns cat /sys/class/net/$dev/queues/rx-0/rps_cpus)"
done
cat /proc/net/softnet_stat | awk '{print "softnet dropped", $2}' > /tmp/prof/softnet-$tag.before
wait
cat /proc/net/softnet_stat | awk '{print "softnet dropped", $2}' > /tmp/prof/softnet-$tag.after
grep -E "lateness|fidelity|emulate:" emu-$tag.err | cut -c1-400
python3 -c "
import json;d=json.load(open('test-$tag.json'));e=d['end'];print('received %.2f Gbit/s retransmits %s'%(e['sum_received']['bits_per_second']/1e9, e['sum_sent'].get('retransmits')))
print(' '.join('%.1f'%(i['sum']['bits_per_second']/1e9) for i in d['intervals']))"

#!/bin/sh
# Issue 22: one CUBIC stream for 600 s (after 15 s omitted) over a record preset at 10 Gbit/s,
# MTU 9000, forwarders pinned and real-time, the sender paced at 11G (the kernel's own pacing
# delivers ~86 % of the set rate on this 2-core machine). Usage: run600.sh PRESET [PEER_VAR], PEER_VAR
# LH_PEER (IPv4, the default) or LH_PEER6. As root, from this directory.
LH=${LH:-/work/main/target/release/longhaul}
p=$1; peer=${2:-LH_PEER}; tag=$p; [ "$peer" = LH_PEER6 ] && tag=$p-ipv6
$LH emulate "$p" --rate 10G --mtu 9000 --pin 0,1 --realtime -- \
  sh -c "$LH test \$$peer -t 600 -O 15 -C cubic --pace 11G --json > test-$tag-600s.json" > emulator-$tag-600s.txt 2>&1
echo "rc=$?" >> emulator-$tag-600s.txt

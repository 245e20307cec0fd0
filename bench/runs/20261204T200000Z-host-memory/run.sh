#!/bin/sh
# Issue 22, host memory plan: one stream over tokyo-loop-30000km at 10 Gbit/s, MTU 9000, with the
# default --host-memory raise (net.ipv4.tcp_mem raised for the run and restored). As root.
LH=${LH:-target/release/longhaul}
for cc in cubic bbr; do
  $LH emulate tokyo-loop-30000km --rate 10G --mtu 9000 --pin 0,1 -- \
    sh -c "$PWD/$LH test \$LH_PEER -t 30 -O 15 -C $cc --json > tokyo-10g-9000-$cc.json"
done

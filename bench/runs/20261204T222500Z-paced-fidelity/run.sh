#!/bin/sh
# Issue 22: paced CUBIC over tokyo-loop-30000km at 10 Gbit/s, MTU 9000: which emulator and sender
# settings keep p99 lateness under 1 ms. Usage: run.sh NAME "EMULATE FLAGS" "TEST FLAGS". As root,
# from the repository root's bench/runs/<this dir>.
LH=${LH:-/work/main/target/release/longhaul}
name=$1; eflags=$2; tflags=$3
$LH emulate tokyo-loop-30000km --rate 10G --mtu 9000 --pin 0,1 $eflags -- \
  sh -c "$LH test \$LH_PEER -t ${T:-30} -O ${O:-15} -C cubic --json $tflags > test-$name.json" > emulator-$name.txt 2>&1
echo "rc=$?" >> emulator-$name.txt

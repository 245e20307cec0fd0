#!/bin/bash
# /tmp/lat.sh LABEL LOADCMD: a 20 s 500M test through a fresh 120ms/2G path while LOADCMD runs; prints fidelity.
LH=/work/main/target/release/longhaul
$LH emulate up --name lhl --rtt 120ms --rate 2G --realtime --pin 0,1 >/dev/null
sleep 1
( sleep 2; eval "$2" ) &
lp=$!
$LH emulate exec --name lhl a -- $LH test 10.201.0.2 -t 15 -b 500M --json > /tmp/lat-$1.json 2>/dev/null
wait $lp
$LH emulate down --name lhl > /tmp/lat-$1.down 2>&1
echo "$1: $(grep -o 'fidelity: .*' /tmp/lat-$1.down | cut -c1-200)"
grep -o "lateness p50[^(]*" /tmp/lat-$1.down
grep -o "in the [0-9]* ms around it[^;]*" /tmp/lat-$1.down | head -3

#!/usr/bin/env bash
set -u
LH=/work/main/target/release/longhaul; PORT=7296; NAME=lh-fdiag; data=/dev/shm/lh-bench-fair
$LH emulate down --name $NAME >/dev/null 2>&1
rm -rf $data/root; mkdir -p $data/root
$LH emulate up --name $NAME --no-server --rtt 120ms --rate 1G >/dev/null
$LH emulate exec --name $NAME b -- $LH server --port $PORT --iperf3-port off --root $data/root --key $data/key >/dev/null 2>&1 &
$LH emulate exec --name $NAME b -- iperf3 -s -p $((PORT+1)) -D
sleep 1
for run in 1 2 3; do
  rm -rf $data/root/*
  (RUST_LOG=longhaul_engine::quic::model=debug $LH emulate exec --name $NAME a -- env RUST_LOG=longhaul_engine::quic::model=debug $LH send $data/src/f6000.bin 10.201.0.2:in -p $PORT --key $data/key --transport udp -C bbr -P 1 --json-stream >/tmp/fdiag-$run.jsonl 2>/tmp/fdiag-$run.log) &
  sleep 1
  $LH emulate exec --name $NAME a -- iperf3 -c 10.201.0.2 -p $((PORT+1)) -C cubic -t 58 -J > /tmp/fdiag-cubic-$run.json 2>/dev/null
  pkill -f "longhaul send $data/src/f6000.bin"; sleep 3
  python3 -c "import json;print('run $run cubic', json.load(open('/tmp/fdiag-cubic-$run.json'))['end']['sum_received']['bits_per_second']/1e6)"
done
pkill -f "longhaul server --port $PORT"; pkill -f "iperf3 -s -p $((PORT+1))"
$LH emulate down --name $NAME >/dev/null 2>&1

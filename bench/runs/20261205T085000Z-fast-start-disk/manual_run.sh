#!/bin/bash
# manual fast-start run: prints per-phase lateness from emulate status --json
LH=${LH:-/work/main/target/release/longhaul}
EXTRA=${EXTRA:-}
cd /tmp/fsm
[ -f key ] || $LH keygen key
[ -f big.dat ] || head -c 1073741824 /dev/urandom > big.dat
R=${R:-/tmp/fsm/root}; rm -rf $R; mkdir -p $R
$LH emulate up --name lhfs --no-server --rtt 120ms --rate 2G $EXTRA >/dev/null
$LH emulate exec --name lhfs b -- $LH server --root $R --key /tmp/fsm/key --log warn 2>server.log &
sleep 1
$PERF $LH emulate exec --name lhfs a -- $LH send /tmp/fsm/big.dat 10.201.0.2:fast --key /tmp/fsm/key --json --rate 1.93G --dedicated $SENDX > send.json
python3 -c 'import json;d=json.load(open("send.json"));print("rate",d["bits_per_second"]/1e9, "to_rate", d["fast_start"]["to_rate_ms"] if d.get("fast_start") else None)'
$LH emulate status --json --name lhfs > status.json
$LH emulate down --name lhfs > down.txt 2>&1
kill %1 2>/dev/null
python3 - <<'P'
import json
s=json.load(open("status.json"))
t=s["testbeds"][0]
print(json.dumps(t["fidelity"])[:300])
def walk(o,p=""):
    if isinstance(o,dict):
        for k,v in o.items():
            if k in("lateness","phases") or "lat" in k: print(p+k, json.dumps(v)[:400])
            elif isinstance(v,(dict,list)): walk(v,p+k+".")
    elif isinstance(o,list):
        for i,v in enumerate(o): walk(v,p+str(i)+".")
walk(t)
P

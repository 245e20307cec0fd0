import sys
sys.path.insert(0, "/work/main/bench")
import fidelity_check as fc
from collections import defaultdict, deque
sent = fc.packets("a.pcap", "10.201.0.1")
read = fc.packets("emu/a_to_b.pcap", "10.201.0.1")
reads = defaultdict(deque)
for t, key, _, _ in read: reads[key].append(t)
ns_per_byte = 8e9/10e9; mtu=9000
free_s = free_r = 0.0
start = sent[0][0]
rows = []
for t, key, hdr, total in sent:
    r = reads[key].popleft()
    payload = total - hdr; mss = mtu - hdr
    wire = 0
    while True:
        c = min(payload, mss); wire += hdr + c; payload -= c
        if payload <= 0: break
    free_s = max(t, free_s) + wire*ns_per_byte
    free_r = max(r, free_r) + wire*ns_per_byte
    rows.append(((t-start)/1e9, (r-t)/1e6, (free_r-free_s)/1e6, (free_s - t)/1e6))
rows = [x for x in rows if x[0] >= 15]
d = sorted(x[2] for x in rows)
print("d=dep_read-dep_send ms p50 %.3f p90 %.3f p99 %.3f max %.3f" % (d[len(d)//2], d[int(.9*len(d))], d[int(.99*len(d))], d[-1]))
q = sorted(x[3] for x in rows)
print("ideal queueing+ser (ms) p50 %.3f p90 %.3f p99 %.3f max %.3f" % (q[len(q)//2], q[int(.9*len(q))], q[int(.99*len(q))], q[-1]))
# per 0.5 s: max d, max lag, mean ideal queue
import math
b = defaultdict(list)
for x in rows: b[math.floor(x[0]*2)/2].append(x)
for k in sorted(b):
    xs = b[k]
    print("%5.1f lagmax %.2f dmax %.2f dmean %.3f idealq_mean %.2f" % (k, max(x[1] for x in xs), max(x[2] for x in xs), sum(x[2] for x in xs)/len(xs), sum(x[3] for x in xs)/len(xs)))

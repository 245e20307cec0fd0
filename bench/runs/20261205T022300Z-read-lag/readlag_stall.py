import sys
sys.path.insert(0, "/work/main/bench")
import fidelity_check as fc
from collections import defaultdict, deque
sent = fc.packets("a.pcap", "10.201.0.1")
read = fc.packets("emu/a_to_b.pcap", "10.201.0.1")
reads = defaultdict(deque)
for t, key, _, _ in read: reads[key].append(t)
start = sent[0][0]
rows = []
for t, key, hdr, total in sent:
    r = reads[key].popleft()
    rows.append((t, r, total))
i = max(range(len(rows)), key=lambda i: rows[i][1]-rows[i][0] if (rows[i][0]-start) > 15e9 else 0)
for j in range(i-60, i+15):
    t, r, tot = rows[j]
    print("%d sent %.3f ms  read %.3f ms  lag %.3f  len %d  readgap %.3f" % (j, (t-rows[i][0])/1e6, (r-rows[i][0])/1e6, (r-t)/1e6, tot, (r-rows[j-1][1])/1e6))

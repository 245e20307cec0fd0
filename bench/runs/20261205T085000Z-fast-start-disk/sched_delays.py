"""Reads `perf sched timehist` output (stdin): the forwarders' scheduling delays over 1 ms, what ran
before them on that CPU, and which tasks ran over 5 ms at a stretch."""
import re
import sys
from collections import Counter

rows = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
    if m:
        rows.append((float(m[1]), int(m[2]), m[3].strip(), float(m[4]), float(m[5]), float(m[6])))
prev, delays = {}, []
for t, cpu, task, _wait, delay, run in rows:
    if "lh-fwd" in task and delay > 1:
        delays.append((delay, t, cpu, task, prev.get(cpu)))
    prev[cpu] = (task, run)
delays.sort(reverse=True)
print(len(delays), "forwarder scheduling delays over 1 ms; the longest (ms, time, cpu, task, ran before it):")
for d in delays[:10]:
    print(d)
long = [r for r in rows if r[5] > 5 and "idle" not in r[2]]
print(len(long), "runs over 5 ms by:", Counter(r[2].split("[")[0] for r in long))

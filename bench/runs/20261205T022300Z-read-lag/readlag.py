#!/usr/bin/env python3
"""Experiment: is the gap between the hosts'-clock lateness and the emulator's own the time a
record waits in the sender's TUN queue? SENT.pcap (sender's lh0), READ.pcap (emulator capture
taken at read, LH_CAPTURE_AT_READ), RECEIVED.pcap (receiver's lh0)."""
import sys, json
sys.path.insert(0, "/work/main/bench")
import fidelity_check as fc
from collections import defaultdict, deque

def main():
    rate, one_way_ms, mtu, src, skip_s, qb = sys.argv[1:7]
    sent_p, read_p, recv_p = sys.argv[7:10]
    rate = fc.rate_bps(rate); one_way = float(one_way_ms) * 1e6; mtu = int(mtu)
    qb = None if qb == "-" else int(qb)
    sent = fc.packets(sent_p, src)
    read = fc.packets(read_p, src)
    recv = fc.packets(recv_p, src)
    reads = defaultdict(deque)
    for t, key, _, _ in read:
        reads[key].append(t)
    lags = []
    as_read = []
    start = sent[0][0]
    for t, key, hdr, total in sent:
        q = reads.get(key)
        if not q:
            continue
        r = q.popleft()
        if t - start >= float(skip_s) * 1e9:
            lags.append(r - t)
        as_read.append((r, key, hdr, total))
    as_read.sort(key=lambda x: x[0])
    lags.sort()
    pct = lambda v, q: round(fc.percentile(v, q) / 1e6, 4)
    print(f"read lag (read - sent) ms: n={len(lags)} p50 {pct(lags,.5)} p90 {pct(lags,.9)} p99 {pct(lags,.99)} p999 {pct(lags,.999)} max {round(lags[-1]/1e6,3)}")
    skip_ns = float(skip_s) * 1e9
    a = fc.check(sent, recv, rate, one_way, mtu, skip_ns, qb)
    print("model from send times:", json.dumps(a))
    # The replica with the emulator's arrivals (read times); skip counted from its first read.
    b = fc.check(as_read, recv, rate, one_way, mtu, skip_ns, qb)
    print("model from read times:", json.dumps(b))

main()

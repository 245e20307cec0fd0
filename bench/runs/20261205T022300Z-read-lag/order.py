import sys
sys.path.insert(0, "/work/main/bench")
import fidelity_check as fc
for src, s, r in (("10.201.0.1", "a.pcap", "emu/a_to_b.pcap"), ("10.201.0.2", "b.pcap", "emu/b_to_a.pcap")):
    sent = [k for _, k, _, _ in fc.packets(s, src)]
    read = [k for _, k, _, _ in fc.packets(r, src)]
    # align: first sent key in read
    i = read.index(sent[0])
    read = read[i:]
    n = min(len(sent), len(read))
    mism = sum(1 for a, b in zip(sent[:n], read[:n]) if a != b)
    first = next((j for j in range(n) if sent[j] != read[j]), None)
    print(src, "sent", len(sent), "read", len(read), "offset", i, "compared", n, "out of order/different", mism, "first at", first)

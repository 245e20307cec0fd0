#!/usr/bin/env python3
"""The emulator's lateness measured against an independent clock (issue 22).

Reads two captures taken by tcpdump *inside the emulated hosts* (not the emulator's own
`--pcap`): one on the sending host's device (when its stack handed each packet to the link)
and one on the receiving host's device (when the packet entered that host's stack). The
kernel stamps both with the same clock, in the hosts' own code paths; the emulator's
bookkeeping takes no part.

Each packet seen at the sender is matched to its copy at the receiver (by its transport
header and length, the k-th copy to the k-th copy). The release it was due is recomputed
from the sender's timestamps by the bottleneck's rule (a FIFO served at RATE: a record of
n segments of H header bytes and P payload bytes takes 8 (n H + P) / RATE, starting when
it arrives or when the link frees, whichever is later; with --queue-bytes a segment that would
overflow the queue is dropped and its record not matched) plus the one-way propagation delay.
Lateness = receiver's timestamp - that release. It counts everything the emulator's own
figure counts, and also the time a packet waited in the sending host's TUN queue before
the emulator read it, which the emulator cannot see.

Usage: fidelity_check.py --rate 10G --one-way-ms 161.5 --mtu 9000 --src 10.201.0.1 SENT.pcap
RECEIVED.pcap (the packets from --src: an IPv4 or IPv6 address)
[--skip-s N] (ignore the first N seconds after the first packet, e.g. a test's -O).
Prints one line per figure and a JSON document with --json.
"""

import argparse
import ipaddress
import json
import struct
import sys
from collections import defaultdict, deque

EARLY_NS = 50_000
LINKTYPE_RAW = 101
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
LINKTYPE_ETHERNET = 1


def rate_bps(text):
    units = {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
    if text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


def read_pcap(path):
    """Yields (time_ns, original_length, ip_bytes) for every record of a pcap file."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise SystemExit(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
            magic = struct.unpack(">I", head[:4])[0]
        else:
            raise SystemExit(f"{path}: not a pcap file (magic {magic:#x}; pcapng is not read)")
        nano = magic == 0xA1B23C4D
        linktype = struct.unpack(endian + "I", head[20:24])[0] & 0x0FFFFFFF
        skip = {
            LINKTYPE_RAW: 0,
            LINKTYPE_IPV4: 0,
            LINKTYPE_IPV6: 0,
            LINKTYPE_LINUX_SLL: 16,
            LINKTYPE_LINUX_SLL2: 20,
            LINKTYPE_ETHERNET: 14,
        }.get(linktype)
        if skip is None:
            raise SystemExit(f"{path}: link type {linktype} is not read")
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, orig = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                return
            t = sec * 1_000_000_000 + (frac if nano else frac * 1000)
            yield t, orig - skip, data[skip:]


def transport(ip):
    """(key, header_bytes, payload_bytes) of a TCP/UDP packet, or None.

    The key is the transport header (with its options) and the IP payload length: what the
    link leaves alone (the router hops rewrite TTL and the IP checksum)."""
    if len(ip) < 20:
        return None
    version = ip[0] >> 4
    if version == 4:
        ihl = (ip[0] & 0xF) * 4
        proto = ip[9]
        total = struct.unpack(">H", ip[2:4])[0]
        l4 = ip[ihl:]
        ip_payload = total - ihl
    elif version == 6:
        ihl = 40
        proto = ip[6]
        l4 = ip[40:]
        ip_payload = struct.unpack(">H", ip[4:6])[0]
    else:
        return None
    if proto == 6 and len(l4) >= 20:
        thl = (l4[12] >> 4) * 4
        return (bytes(l4[:thl]), ip_payload), ihl + thl
    if proto == 17 and len(l4) >= 8:
        return (bytes(l4[:8]), ip_payload), ihl + 8
    return None


def source(ip):
    """The packet's source address as text."""
    if ip[0] >> 4 == 4 and len(ip) >= 20:
        return ".".join(str(b) for b in ip[12:16])
    if ip[0] >> 4 == 6 and len(ip) >= 40:
        return ":".join(f"{ip[i]:02x}{ip[i + 1]:02x}" for i in range(8, 24, 2))
    return ""


def packets(path, src):
    """(time_ns, key, header_bytes, total_bytes) of each TCP/UDP packet from `src` in `path`."""
    out = []
    for t, length, ip in read_pcap(path):
        if not ip or source(ip) != src:
            continue
        tr = transport(ip)
        if tr is None:
            continue
        key, hdr = tr
        out.append((t, key, hdr, length))
    return out


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def check(sent, received, rate, one_way_ns, mtu, skip_ns, queue_bytes=None):
    """Matches, recomputes the releases and returns the figures."""
    arrivals = defaultdict(deque)
    for t, key, _, _ in received:
        arrivals[key].append(t)
    link_free = 0.0
    ns_per_byte = 8e9 / rate
    lateness = []
    early = []
    unmatched = 0
    dropped = 0
    start = sent[0][0] if sent else 0
    for t, key, hdr, total in sent:
        payload = total - hdr
        mss = max(1, mtu - hdr)
        lost = False
        # Segment by segment, drop-tail: a segment that would take the backlog (the frame in
        # service included) past the queue is dropped, as the emulator's link model does.
        while True:
            chunk = min(payload, mss)
            wire = hdr + chunk
            backlog = max(0.0, link_free - t) / ns_per_byte
            if queue_bytes is not None and backlog + wire > queue_bytes:
                lost = True
            else:
                link_free = max(float(t), link_free) + wire * ns_per_byte
            payload -= chunk
            if payload <= 0:
                break
        if lost:
            # Dropped whole, or delivered in parts with rewritten headers: nothing to match.
            dropped += 1
            continue
        due = link_free + one_way_ns
        got = arrivals.get(key)
        if not got:
            unmatched += 1
            continue
        at = got.popleft()
        if t - start < skip_ns:
            continue
        late = at - due
        lateness.append(late)
        # More than 50 µs before its release: the emulator ran early (the two stamps are taken
        # at slightly different points of the hosts' stacks; a few µs either way is noise).
        if late < -EARLY_NS:
            early.append(late)
    lateness.sort()
    ms = lambda v: None if v is None else round(v / 1e6, 3)
    return {
        "packets_sent": len(sent),
        "packets_received": len(received),
        "matched": len(lateness),
        "unmatched": unmatched,
        "dropped_by_the_model": dropped,
        "mean_ms": ms(sum(lateness) / len(lateness) if lateness else None),
        "p50_ms": ms(percentile(lateness, 0.50)),
        "p99_ms": ms(percentile(lateness, 0.99)),
        "max_ms": ms(lateness[-1] if lateness else None),
        "min_ms": ms(lateness[0] if lateness else None),
        "early": len(early),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", required=True, help="bottleneck rate, e.g. 10G")
    ap.add_argument("--one-way-ms", type=float, required=True, help="propagation delay")
    ap.add_argument("--mtu", type=int, required=True)
    ap.add_argument("--src", required=True, help="the sending host's address")
    ap.add_argument("--queue-bytes", type=int, help="bottleneck queue (default: unbounded)")
    ap.add_argument("--skip-s", type=float, default=0.0)
    ap.add_argument("--name", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("sent")
    ap.add_argument("received")
    a = ap.parse_args()
    if ":" in a.src:
        a.src = ipaddress.IPv6Address(a.src).exploded
    r = check(
        packets(a.sent, a.src),
        packets(a.received, a.src),
        rate_bps(a.rate),
        a.one_way_ms * 1e6,
        a.mtu,
        a.skip_s * 1e9,
        a.queue_bytes,
    )
    r["name"] = a.name
    if a.json:
        json.dump(r, sys.stdout, indent=2)
        print()
    else:
        print(
            f"{a.name}: {r['matched']} packets matched ({r['unmatched']} sent unmatched, "
            f"{r['dropped_by_the_model']} dropped by the queue); "
            f"lateness by the hosts' clock mean {r['mean_ms']} ms p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms "
            f"max {r['max_ms']} ms min {r['min_ms']} ms; {r['early']} more than 50 µs early"
        )


if __name__ == "__main__":
    main()

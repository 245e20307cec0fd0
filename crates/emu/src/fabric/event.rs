//! A packet on its way through the fabric, and the queue of packets waiting
//! for their next step, in time order.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use longhaul_packet::Parsed;
use longhaul_topology::Step;

/// A record between two steps of its route.
#[derive(Debug)]
pub(crate) struct Packet {
    /// The record: virtio-net header + one IP packet (maybe a GSO
    /// super-packet).
    pub(crate) bytes: Vec<u8>,
    /// Its parse, while `bytes` is the record it was made from.
    pub(crate) parsed: Option<Parsed>,
    /// The links it crosses, source host to destination host.
    pub(crate) path: Arc<[Step]>,
    /// The next step: it has crossed `path[..pos]`; at `path.len()` it is
    /// written to the destination host.
    pub(crate) pos: usize,
    /// The host that sent it (an ICMP error about it goes there).
    pub(crate) src: usize,
    /// The host it is for.
    pub(crate) dst: usize,
    /// The router it is for instead (a ping to the router's own address; `path` ends there).
    pub(crate) to_router: Option<usize>,
}

/// A packet due at the next node of its route at `at` (monotonic ns).
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) at: u64,
    seq: u64,
    pub(crate) packet: Packet,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Events in time order; equal times in the order they were pushed (a
/// duplicate right after its original, a split record's runs in order).
#[derive(Debug, Default)]
pub(crate) struct Events {
    heap: BinaryHeap<Reverse<Event>>,
    next_seq: u64,
    bytes: usize,
    max_bytes: usize,
}

impl Events {
    /// Queues `packet` for its next step at `at`.
    pub(crate) fn push(&mut self, at: u64, packet: Packet) {
        self.bytes += packet.bytes.len();
        self.max_bytes = self.max_bytes.max(self.bytes);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Event { at, seq, packet }));
    }

    /// When the first event is due.
    pub(crate) fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.at)
    }

    /// The first event if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<Event> {
        if self.next_due()? > now {
            return None;
        }
        let e = self.heap.pop()?.0;
        self.bytes -= e.packet.bytes.len();
        Some(e)
    }

    /// Most bytes waiting at once.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes waiting now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(tag: u8) -> Packet {
        Packet {
            bytes: vec![tag; 10],
            parsed: None,
            path: Arc::from(Vec::new()),
            pos: 0,
            src: 0,
            dst: 1,
            to_router: None,
        }
    }

    #[test]
    fn events_leave_in_time_order_and_ties_in_push_order() {
        let mut q = Events::default();
        q.push(30, packet(1));
        q.push(10, packet(2));
        q.push(30, packet(3));
        q.push(20, packet(4));
        assert_eq!(q.bytes(), 40);
        assert_eq!(q.next_due(), Some(10));
        assert!(q.pop_due(9).is_none());
        let order: Vec<u8> = std::iter::from_fn(|| q.pop_due(100))
            .map(|e| e.packet.bytes[0])
            .collect();
        assert_eq!(order, [2, 4, 1, 3]);
        assert_eq!((q.bytes(), q.max_bytes()), (0, 40));
    }
}

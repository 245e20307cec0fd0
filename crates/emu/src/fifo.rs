//! The release queue of one direction: records waiting for their scheduled
//! release time, kept in release order.
//!
//! The link model releases in FIFO order unless jitter may reorder or
//! segments are displaced, so an insertion almost always goes at the back;
//! [`ReleaseQueue::push`] walks back from the end only past items due later,
//! which keeps equal times in arrival order (a duplicate stays right after
//! its original) and costs O(1) in the common case.

use std::collections::VecDeque;

/// One record waiting to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Scheduled release, monotonic ns.
    pub at: u64,
    /// The record (virtio-net header + IP packet).
    pub bytes: Vec<u8>,
}

/// Records in release order (stable for equal times).
#[derive(Debug, Default)]
pub struct ReleaseQueue {
    items: VecDeque<Pending>,
    bytes: usize,
    max_bytes: usize,
}

impl ReleaseQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `bytes` for release at `at`, after every item due at or before `at`.
    pub fn push(&mut self, at: u64, bytes: Vec<u8>) {
        self.bytes += bytes.len();
        self.max_bytes = self.max_bytes.max(self.bytes);
        let mut i = self.items.len();
        while i > 0 && self.items[i - 1].at > at {
            i -= 1;
        }
        self.items.insert(i, Pending { at, bytes });
    }

    /// Release time of the first item, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.items.front().map(|p| p.at)
    }

    /// Removes and returns the first item if it is due at `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<Pending> {
        if self.items.front()?.at > now {
            return None;
        }
        let p = self.items.pop_front()?;
        self.bytes -= p.bytes.len();
        Some(p)
    }

    /// Number of records waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Most bytes ever waiting at once.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_time_order_and_stable_for_ties() {
        let mut q = ReleaseQueue::new();
        q.push(10, vec![1]);
        q.push(20, vec![2]);
        q.push(20, vec![3]); // a duplicate: right after its original
        q.push(15, vec![4]); // displaced earlier than the tail
        q.push(30, vec![5, 5]);
        assert_eq!(q.len(), 5);
        assert_eq!(q.bytes(), 6);
        assert_eq!(q.next_due(), Some(10));
        assert_eq!(q.pop_due(9), None);
        let mut order = Vec::new();
        while let Some(p) = q.pop_due(25) {
            order.push(p.bytes[0]);
        }
        assert_eq!(order, [1, 4, 2, 3]);
        assert_eq!(q.next_due(), Some(30));
        assert_eq!(q.pop_due(u64::MAX).unwrap().bytes, [5, 5]);
        assert!(q.is_empty());
        assert_eq!(q.bytes(), 0);
        assert_eq!(q.max_bytes(), 6);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn fifo_input_stays_fifo() {
        let mut q = ReleaseQueue::new();
        for i in 0..1000u64 {
            q.push(i / 3, i.to_le_bytes().to_vec());
        }
        let mut prev = None;
        while let Some(p) = q.pop_due(u64::MAX) {
            let i = u64::from_le_bytes(p.bytes.try_into().unwrap());
            assert!(prev.is_none_or(|x| x + 1 == i));
            prev = Some(i);
        }
        assert_eq!(prev, Some(999));
    }
}

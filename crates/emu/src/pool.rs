//! Recycled record buffers, so the forwarder's hot path neither allocates nor
//! copies a super-packet between reading and writing it.
//!
//! Without it every record was copied into a fresh 64 KB `Vec` for the
//! release queue and freed after its write. At 0 ms RTT the queue holds only
//! a few records, so each free left the top of the thread's malloc arena
//! empty; glibc gave those pages back (`madvise`), and the next copy faulted
//! 16 fresh, zeroed pages in again: about a third of the data direction's CPU
//! time went to page faults (bench/RESULTS.md, the emulator section).
//!
//! Now a large record is read straight into a pool buffer, which moves into
//! the release queue as it is, and goes back to the pool after its write.
//! Small records (ACKs) are still copied into an exact-size `Vec`: cheap,
//! and a queue of a million ACKs at a long RTT should not hold a million
//! 64 KB buffers.

use longhaul_sys::MAX_RECORD_LEN;

/// Records shorter than this are copied out of the read buffer instead of
/// handing the buffer over, so a queued record never holds a buffer more
/// than twice its size.
pub const HANDOVER_MIN: usize = 32 * 1024;

/// Most free buffers kept (64 × 64 KB = 4 MiB per direction); more are
/// returned to the allocator.
pub const POOL_MAX_FREE: usize = 64;

/// Free buffers of capacity ≥ [`MAX_RECORD_LEN`].
#[derive(Debug)]
pub struct BufPool {
    free: Vec<Vec<u8>>,
    /// Most free buffers kept: [`POOL_MAX_FREE`], or the prefilled count.
    max_free: usize,
    allocated: u64,
    reused: u64,
}

impl Default for BufPool {
    fn default() -> Self {
        Self {
            free: Vec::new(),
            max_free: POOL_MAX_FREE,
            allocated: 0,
            reused: 0,
        }
    }
}

impl BufPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pool holding `n` buffers, allocated and written now (so their pages are the process's
    /// before the run: a delay line that fills during slow start neither page-faults nor
    /// zero-fills on the forwarder's clock), and keeping up to `n` free ones afterwards.
    /// Profiled at 10 Gbit/s × 323 ms, fresh buffers cost ~7 % of the forwarders' samples
    /// (memset, clear_page, page faults; bench/RESULTS.md, issue 22).
    pub fn prefilled(n: usize) -> Self {
        // Not zeros: `vec![0; n]` is calloc, whose pages stay unmapped until first written.
        let free = (0..n).map(|_| vec![0xa5u8; MAX_RECORD_LEN]).collect();
        Self {
            free,
            max_free: n.max(POOL_MAX_FREE),
            allocated: n as u64,
            reused: 0,
        }
    }

    /// How many buffers a delay line of `bytes` (records in flight and queued) needs, if every
    /// record is a full-size one, at most `budget` bytes' worth.
    pub fn buffers_for(bytes: u64, budget: u64) -> usize {
        let each = MAX_RECORD_LEN as u64;
        (bytes.min(budget) / each) as usize
    }

    /// A buffer of length [`MAX_RECORD_LEN`] to read into (its contents are
    /// whatever the last user left, or zeros).
    pub fn take_full(&mut self) -> Vec<u8> {
        let mut b = match self.free.pop() {
            Some(b) => {
                self.reused += 1;
                b
            }
            None => {
                self.allocated += 1;
                Vec::with_capacity(MAX_RECORD_LEN)
            }
        };
        // A recycled buffer held a large record, so this writes at most its
        // short tail.
        b.resize(MAX_RECORD_LEN, 0);
        b
    }

    /// An empty buffer of capacity ≥ [`MAX_RECORD_LEN`] to build a record in.
    pub fn take_empty(&mut self) -> Vec<u8> {
        match self.free.pop() {
            Some(mut b) => {
                self.reused += 1;
                b.clear();
                b
            }
            None => {
                self.allocated += 1;
                Vec::with_capacity(MAX_RECORD_LEN)
            }
        }
    }

    /// Takes a written record's buffer back if it is a pool-sized one and
    /// the pool is not full; otherwise frees it.
    pub fn put(&mut self, b: Vec<u8>) {
        if b.capacity() >= MAX_RECORD_LEN && self.free.len() < self.max_free {
            self.free.push(b);
        }
    }

    /// The bytes of `buf` as a record for the release queue: moved out of
    /// `buf` (which gets a buffer from the pool in exchange, as
    /// [`take_full`](Self::take_full) or [`take_empty`](Self::take_empty)
    /// according to `refill_full`) when at least [`HANDOVER_MIN`] long,
    /// copied otherwise.
    pub fn hand_over(&mut self, buf: &mut Vec<u8>, len: usize, refill_full: bool) -> Vec<u8> {
        if len < HANDOVER_MIN {
            return buf[..len].to_vec();
        }
        let fresh = if refill_full {
            self.take_full()
        } else {
            self.take_empty()
        };
        let mut out = std::mem::replace(buf, fresh);
        out.truncate(len);
        out
    }

    /// A copy of `bytes` in a pool buffer (large) or an exact-size `Vec`.
    pub fn copy_of(&mut self, bytes: &[u8]) -> Vec<u8> {
        if bytes.len() < HANDOVER_MIN {
            return bytes.to_vec();
        }
        let mut b = self.take_empty();
        b.extend_from_slice(bytes);
        b
    }

    /// Free buffers held (for the tests).
    #[cfg(test)]
    fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Buffers allocated because the pool was empty.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Buffers served from the pool.
    pub fn reused(&self) -> u64 {
        self.reused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_records_move_and_come_back() {
        let mut pool = BufPool::new();
        let mut buf = pool.take_full();
        assert_eq!(buf.len(), MAX_RECORD_LEN);
        assert_eq!(pool.allocated(), 1);
        buf[..4].copy_from_slice(b"abcd");
        let ptr = buf.as_ptr();
        let rec = pool.hand_over(&mut buf, 60_000, true);
        // The record is the read buffer itself, not a copy.
        assert_eq!(rec.as_ptr(), ptr);
        assert_eq!(rec.len(), 60_000);
        assert_eq!(&rec[..4], b"abcd");
        assert_ne!(buf.as_ptr(), ptr);
        assert_eq!(buf.len(), MAX_RECORD_LEN);
        assert_eq!(pool.allocated(), 2);
        // After its write it is reused, at full length again.
        pool.put(rec);
        assert_eq!(pool.free_len(), 1);
        let again = pool.hand_over(&mut buf, 40_000, true);
        assert_eq!(buf.as_ptr(), ptr);
        assert_eq!(buf.len(), MAX_RECORD_LEN);
        assert_eq!(&buf[..4], b"abcd");
        assert_eq!((pool.allocated(), pool.reused()), (2, 1));
        pool.put(again);
        let e = pool.take_empty();
        assert!(e.is_empty() && e.capacity() >= MAX_RECORD_LEN);
    }

    #[test]
    fn small_records_are_copied_and_not_pooled() {
        let mut pool = BufPool::new();
        let mut buf = pool.take_full();
        let ptr = buf.as_ptr();
        let ack = pool.hand_over(&mut buf, 66, true);
        assert_eq!(ack.len(), 66);
        assert_eq!(ack.capacity(), 66);
        assert_eq!(buf.as_ptr(), ptr);
        pool.put(ack);
        assert_eq!(pool.free_len(), 0);
        let small = pool.copy_of(&[7u8; 100]);
        assert_eq!(small, vec![7u8; 100]);
        let big = pool.copy_of(&[9u8; 40_000]);
        assert_eq!(big, vec![9u8; 40_000]);
        assert!(big.capacity() >= MAX_RECORD_LEN);
        pool.put(big);
        assert_eq!(pool.free_len(), 1);
    }

    #[test]
    fn a_prefilled_pool_serves_without_allocating_and_keeps_what_it_had() {
        let n = POOL_MAX_FREE + 36;
        let mut pool = BufPool::prefilled(n);
        assert_eq!((pool.free_len(), pool.allocated()), (n, n as u64));
        let bufs: Vec<_> = (0..n).map(|_| pool.take_full()).collect();
        assert_eq!((pool.allocated(), pool.reused()), (n as u64, n as u64));
        assert!(bufs.iter().all(|b| b.len() == MAX_RECORD_LEN));
        for b in bufs {
            pool.put(b);
        }
        assert_eq!(pool.free_len(), n, "kept beyond POOL_MAX_FREE");
        assert_eq!(
            BufPool::buffers_for(10 * MAX_RECORD_LEN as u64, u64::MAX),
            10
        );
        assert_eq!(
            BufPool::buffers_for(10 * MAX_RECORD_LEN as u64, 3 * MAX_RECORD_LEN as u64),
            3
        );
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut pool = BufPool::new();
        let bufs: Vec<_> = (0..POOL_MAX_FREE + 10).map(|_| pool.take_full()).collect();
        for b in bufs {
            pool.put(b);
        }
        assert_eq!(pool.free_len(), POOL_MAX_FREE);
    }
}

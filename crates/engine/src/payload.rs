//! The bytes a test sends: pseudo-random, in a page-aligned buffer (also used to receive).

use std::sync::Arc;

/// A byte buffer whose start is aligned to a page.
///
/// Measured on this project's 2-core AMD EPYC VM: sending from a heap buffer that starts 16 bytes past a
/// page boundary (what `malloc` and `Arc<[u8]>` give) made the kernel's copy from user memory about 3×
/// slower than from a page-aligned one, halving loopback throughput (`perf`: `_copy_from_iter` 54 % vs
/// 18 % of the sender's time). iperf3 is fast here because it mmaps its buffer. So both the payload and
/// the receive buffer are page-aligned.
pub(crate) struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// Alignment of [`AlignedBuf`]: one page.
const ALIGN: usize = 4096;

impl AlignedBuf {
    pub(crate) fn zeroed(len: usize) -> Self {
        let storage = vec![0u8; len + ALIGN];
        let start = storage.as_ptr().align_offset(ALIGN).min(ALIGN);
        Self {
            storage,
            start,
            len,
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// Test payload: pseudo-random bytes, so no compressing or deduplicating element on the path can make a
/// stream look faster than it is (the LSR rules required every packet to carry different data); or,
/// `repeating` (`--repeating-payload`), iperf2's and iperf3's `0123456789` over and over, for
/// measuring what such an element does.
pub(crate) fn payload(len: usize, repeating: bool) -> Result<Arc<AlignedBuf>, crate::EngineError> {
    let mut buf = AlignedBuf::zeroed(len);
    if repeating {
        for (b, digit) in buf.as_mut_slice().iter_mut().zip((b'0'..=b'9').cycle()) {
            *b = digit;
        }
        return Ok(Arc::new(buf));
    }
    let mut seed = crate::random::seed()?;
    for chunk in buf.as_mut_slice().chunks_mut(8) {
        // xorshift64*: fast and good enough for filler bytes; not for anything secret.
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        let v = seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    Ok(Arc::new(buf))
}

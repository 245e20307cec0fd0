//! Pacing plan: a total rate (`--pace`) split across the sending streams.
//!
//! iperf3's `--fq-rate` and `-b` are per stream, so users multiply by hand and get it wrong when they
//! change `-P`. Here the user states the total and each stream gets its share as a kernel pacing cap
//! (`SO_MAX_PACING_RATE`, bytes/s), which TCP's internal pacing honours even without the fq qdisc.
//! The shares add up exactly to the total (in bytes/s); the first streams take the remainder.

/// Splits `total_bps` (bit/s) across `streams` streams; returns each stream's cap in bytes/s.
pub fn split_pacing(total_bps: u64, streams: u32) -> Vec<u64> {
    let streams = u64::from(streams.max(1));
    let total_bytes = total_bps / 8;
    let share = total_bytes / streams;
    let extra = total_bytes % streams;
    (0..streams).map(|i| share + u64::from(i < extra)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_total() {
        let caps = split_pacing(10_000_000_003 * 8, 3);
        assert_eq!(caps, vec![3_333_333_335, 3_333_333_334, 3_333_333_334]);
        assert_eq!(caps.iter().sum::<u64>(), 10_000_000_003);
    }

    #[test]
    fn one_stream_gets_everything() {
        assert_eq!(split_pacing(1_000_000_000, 1), vec![125_000_000]);
    }
}

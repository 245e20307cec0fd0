//! The Internet checksum (RFC 1071), its incremental update (RFC 1624) and the TCP/UDP/ICMPv6
//! pseudo-header sums for IPv4 (RFC 9293 §3.1, RFC 768) and IPv6 (RFC 8200 §8.1).
//!
//! Contract: sums are accumulated in a `u64` as big-endian 32-bit words (deferred carries, RFC 1071
//! §2(C)) and folded to 16 bits only at the end, so partial sums of separate pieces may be added as
//! long as every piece but the last has an even length. [`fold`] gives the (uncomplemented) 16-bit
//! sum, which is what a CHECKSUM_PARTIAL TCP header carries; [`checksum`] gives the complemented
//! value that goes on the wire.

/// Adds `data` to the running sum `acc` (an odd trailing byte is padded with zero, RFC 1071).
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut acc = acc;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_be_bytes(tail))
}

/// Folds a running sum to 16 bits with end-around carry (not complemented).
pub fn fold(acc: u64) -> u16 {
    let mut s = acc;
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    // The loop leaves at most 16 significant bits.
    s as u16
}

/// The Internet checksum of `data`: the complement of the folded sum. A buffer whose checksum field
/// is correct has `checksum(buf) == 0`.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// Sum of the IPv4 pseudo-header: source, destination, zero, protocol, upper-layer length.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u32) -> u64 {
    let mut acc = sum(&src, 0);
    acc = sum(&dst, acc);
    acc + u64::from(proto) + u64::from(len)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit upper-layer length,
/// three zero bytes, next header.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], proto: u8, len: u32) -> u64 {
    let mut acc = sum(&src, 0);
    acc = sum(&dst, acc);
    acc + u64::from(proto) + u64::from(len)
}

/// RFC 1624 eqn. 3: the new checksum `HC' = ~(~HC + ~m + m')` after a 16-bit word of the covered data
/// changed from `old` to `new`.
pub fn update16(old_checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!old_checksum) + u64::from(!old) + u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&b, 0)), 0xddf2);
        assert_eq!(checksum(&b), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(&[0xab], 0)), 0xab00);
        assert_eq!(fold(sum(&[1, 2, 3, 4, 5], 0)), 0x0102 + 0x0304 + 0x0500);
    }

    #[test]
    fn update16_matches_recompute() {
        let mut data = [
            0x45u8, 0, 0, 40, 1, 2, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([data[8], data[9]]);
        data[8] = 63;
        let new = u16::from_be_bytes([data[8], data[9]]);
        let inc = update16(c, old, new);
        data[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, checksum(&data));
    }
}

//! Randomness from the kernel for test cookies and payload seeds (read from /dev/urandom; never blocks
//! after boot).

use std::fs::File;
use std::io::Read;

pub(crate) fn fill(buf: &mut [u8]) {
    // /dev/urandom cannot fail on a running Linux system short of a missing /dev; fall back to the clock
    // and address-space layout so a cookie is still unpredictable enough to keep tests apart.
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let salt = buf.as_ptr() as usize as u128;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = ((t ^ salt) >> ((i % 16) * 8)) as u8 ^ i as u8;
        }
    }
}

/// A fresh 16-byte test cookie.
pub(crate) fn cookie() -> [u8; 16] {
    let mut c = [0u8; 16];
    fill(&mut c);
    c
}

/// A non-zero 64-bit seed.
pub(crate) fn seed() -> u64 {
    let mut b = [0u8; 8];
    fill(&mut b);
    u64::from_le_bytes(b) | 1
}

/// Lower-case hex of a cookie, as it travels in JSON.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a 32-digit hex cookie.
pub(crate) fn unhex(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cookies_differ_and_round_trip_through_hex() {
        let (a, b) = (super::cookie(), super::cookie());
        assert_ne!(a, b);
        assert_eq!(super::unhex(&super::hex(&a)), Some(a));
        assert_eq!(super::unhex("zz"), None);
        assert_eq!(super::unhex(&"é".repeat(16)), None);
    }
}

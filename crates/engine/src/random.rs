//! Randomness from the kernel for test cookies, transfer cookies, handshake nonces and payload seeds:
//! getrandom(2), which needs no file descriptor (it works when the process has run out of them) and
//! never blocks after boot.
//!
//! It fails closed: when the kernel gives no random bytes, the caller gets [`EngineError::Random`]
//! and refuses the session; there is no fallback to the clock or to addresses (issue 11, finding 8:
//! the old fallback to the time XOR a pointer, taken when /dev/urandom could not be opened, made
//! cookies and nonces guessable).

use crate::EngineError;

/// Fills `buf` from the kernel's random source; `what` names the value for the error.
pub(crate) fn fill(buf: &mut [u8], what: &'static str) -> Result<(), EngineError> {
    getrandom::fill(buf).map_err(|e| EngineError::Random(e, what))
}

/// A fresh 16-byte test or transfer cookie.
pub(crate) fn cookie() -> Result<[u8; 16], EngineError> {
    let mut c = [0u8; 16];
    fill(&mut c, "a session cookie")?;
    Ok(c)
}

/// A non-zero 64-bit seed.
pub(crate) fn seed() -> Result<u64, EngineError> {
    let mut b = [0u8; 8];
    fill(&mut b, "a payload seed")?;
    Ok(u64::from_le_bytes(b) | 1)
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
        let (a, b) = (super::cookie().unwrap(), super::cookie().unwrap());
        assert_ne!(a, b);
        assert_eq!(super::unhex(&super::hex(&a)), Some(a));
        assert_eq!(super::unhex("zz"), None);
        assert_eq!(super::unhex(&"é".repeat(16)), None);
    }
}

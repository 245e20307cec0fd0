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

#[cfg(test)]
mod tests {
    use longhaul_proto::conversation::{cookie_hex as hex, parse_cookie as unhex};

    #[test]
    fn cookies_differ_and_round_trip_through_hex() {
        let (a, b) = (super::cookie().unwrap(), super::cookie().unwrap());
        assert_ne!(a, b);
        assert_eq!(unhex(&hex(&a)), Some(a));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(&"é".repeat(16)), None);
    }
}

//! Chunk hashes and the end-to-end file digest, both BLAKE3.
//!
//! Why BLAKE3: it is a cryptographic hash (a corrupted or forged chunk cannot be made to match), it runs
//! at several GB/s per core, so hashing keeps up with a 10 Gbit/s stream on one core, and its keyed mode
//! gives the authentication proofs of [`crate::auth`] without a second primitive.
//!
//! Every chunk carries its BLAKE3 hash ([`hash_chunk`]). The **file digest** is
//!
//! ```text
//! BLAKE3( size as u64 LE ‖ chunk_size as u64 LE ‖ hash(chunk 0) ‖ hash(chunk 1) ‖ … )
//! ```
//!
//! computed by [`file_digest`]. Both ends build it from chunk hashes they already have (the receiver's
//! come from the verified chunks, including those replayed from the resume journal), so neither side
//! re-reads the file sequentially at the end, and chunks may arrive in any order. It is **not** the
//! output of `b3sum` (that hashes the bytes as one stream); users comparing with `b3sum` or `sha256sum`
//! must hash the files themselves. Size and chunk size are part of the input so that two files whose
//! chunk hashes happen to concatenate alike under different cuts cannot share a digest.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A 32-byte BLAKE3 output (chunk hash, file digest or authentication proof).
///
/// Equality is constant-time (it compares through [`blake3::Hash`], whose `PartialEq` is documented as
/// constant-time), so comparing a received proof with the expected one leaks nothing through timing.
/// Serialised as 64 lowercase hex digits.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(pub [u8; 32]);

impl PartialEq for Digest {
    fn eq(&self, other: &Self) -> bool {
        blake3::Hash::from_bytes(self.0) == blake3::Hash::from_bytes(other.0)
    }
}

impl Eq for Digest {}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&to_hex(&self.0))
    }
}

impl From<blake3::Hash> for Digest {
    fn from(h: blake3::Hash) -> Self {
        Self(*h.as_bytes())
    }
}

impl TryFrom<String> for Digest {
    type Error = HexError;

    fn try_from(s: String) -> Result<Self, HexError> {
        parse_hex(&s).map(Self)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> Self {
        d.to_string()
    }
}

/// Text that is not the expected number of hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected} hex digits, got {len} characters{}", if *.bad_digit { " with a non-hex digit" } else { "" })]
pub struct HexError {
    /// Hex digits expected.
    pub expected: usize,
    /// Characters received.
    pub len: usize,
    /// Whether a character was not a hex digit.
    pub bad_digit: bool,
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses exactly `2 × N` hex digits (either case) into `N` bytes.
pub fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], HexError> {
    let err = |bad_digit| HexError {
        expected: 2 * N,
        len: s.chars().count(),
        bad_digit,
    };
    if !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(err(true));
    }
    if s.len() != 2 * N {
        return Err(err(false));
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(s.as_bytes().chunks(2)) {
        let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
        *o = digit(pair[0]) << 4 | digit(pair[1]);
    }
    Ok(out)
}

/// Serde adapter for `[u8; N]` fields written as hex text (`#[serde(with = "hex_bytes")]`).
pub mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// Writes the bytes as lowercase hex.
    pub fn serialize<S: Serializer, const N: usize>(v: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::to_hex(v))
    }

    /// Reads exactly `2 × N` hex digits.
    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[u8; N], D::Error> {
        let s = String::deserialize(d)?;
        super::parse_hex(&s).map_err(D::Error::custom)
    }
}

/// BLAKE3 of one chunk's bytes.
pub fn hash_chunk(data: &[u8]) -> Digest {
    blake3::hash(data).into()
}

/// The file digest (module docs) from the file size, the chunk size and the chunk hashes in index order.
/// The caller supplies exactly `ChunkPlan::count()` hashes; the digest does not check that, because the
/// count is itself hashed through `size` and `chunk_size`, so a missing hash gives a different digest.
pub fn file_digest<'a>(
    size: u64,
    chunk_size: u64,
    chunk_hashes: impl IntoIterator<Item = &'a Digest>,
) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&size.to_le_bytes());
    h.update(&chunk_size.to_le_bytes());
    for c in chunk_hashes {
        h.update(&c.0);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_hash_is_plain_blake3() {
        // Known answer: BLAKE3("abc") from the reference implementation's test vectors.
        assert_eq!(
            hash_chunk(b"abc").to_string(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
    }

    #[test]
    fn file_digest_depends_on_every_input() {
        let a = hash_chunk(b"a");
        let b = hash_chunk(b"b");
        let base = file_digest(2, 1 << 20, [&a, &b]);
        assert_ne!(base, file_digest(2, 1 << 20, [&b, &a]), "order matters");
        assert_ne!(base, file_digest(3, 1 << 20, [&a, &b]), "size matters");
        assert_ne!(
            base,
            file_digest(2, 2 << 20, [&a, &b]),
            "chunk size matters"
        );
        assert_ne!(base, file_digest(2, 1 << 20, [&a]), "every chunk matters");
        assert_eq!(base, file_digest(2, 1 << 20, &[a, b]));
        // Not b3sum: the digest of a one-chunk file differs from the plain hash of its bytes.
        assert_ne!(file_digest(1, 1 << 20, [&a]), a);
    }

    #[test]
    fn hex_round_trips_and_rejects_bad_text() {
        let d = hash_chunk(b"x");
        let s = d.to_string();
        assert_eq!(Digest::try_from(s.to_uppercase()).unwrap(), d);
        assert_eq!(
            serde_json::from_str::<Digest>(&serde_json::to_string(&d).unwrap()).unwrap(),
            d
        );
        let short = HexError {
            expected: 64,
            len: 2,
            bad_digit: false,
        };
        assert_eq!(parse_hex::<32>("ab"), Err(short));
        let bad = format!("{}zz", &s[..62]);
        assert_eq!(parse_hex::<32>(&bad).unwrap_err().len, 64);
        assert!(parse_hex::<32>(&bad).unwrap_err().bad_digit);
        // 64 bytes but not 64 ASCII characters: must not panic on a char boundary.
        let wide = format!("é{}", &s[..62]);
        assert!(parse_hex::<32>(&wide).is_err());
        assert_eq!(parse_hex::<2>("0aFf"), Ok([0x0a, 0xff]));
    }
}

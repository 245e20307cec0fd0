//! A bit error on the wire (the emulator's corruption stage, `LinkConfig::corrupt`): one bit of a
//! single-segment record flipped after its checksums were completed, as a bad fibre or transceiver
//! damages a frame after the sending NIC computed them.
//!
//! Contract of [`damage`]: the record must be one segment (GSO NONE); a CHECKSUM_PARTIAL record is
//! completed first ([`crate::finish_checksum`]), so the receiver verifies the full checksum and drops
//! the packet (Linux counts it in `InCsumErrors`). The flipped bit is in the transport header or
//! payload, never in the IP header, so every router still forwards the packet to its destination;
//! which bit is chosen by `salt`. A packet without transport bytes is left unchanged. A UDP/IPv4
//! packet sent without a checksum (field 0) is damaged undetectably, as on a real wire.

use crate::PacketError;
use crate::segment::finish_checksum;
use crate::vnet::VNET_HDR_LEN;
use crate::{GsoType, parse};

/// Flips one bit of the transport part of the single-segment record `record`; see the module docs.
pub fn damage(record: &mut [u8], salt: u64) -> Result<(), PacketError> {
    let p = parse(record)?;
    if p.vnet.gso_type != GsoType::None {
        return Err(PacketError::NotSingleSegment);
    }
    finish_checksum(record)?;
    let l4 = p.ip_len.saturating_sub(p.ip_header_len);
    if l4 == 0 {
        return Ok(());
    }
    let byte = VNET_HDR_LEN + p.ip_header_len + (salt % l4 as u64) as usize;
    record[byte] ^= 1 << ((salt >> 32) % 8);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, Addrs, TcpSpec, verify_record};
    use crate::ip::Ipv4Header;
    use crate::segment::{ChecksumMode, split};

    #[test]
    fn a_damaged_segment_fails_its_checksum_and_keeps_its_ip_header() {
        for salt in [0u64, 1, 19, 1447, 0x0000_0005_0000_0077, u64::MAX] {
            for addrs in [
                Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]),
                Addrs::v6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
            ] {
                let mut s = TcpSpec::new(addrs);
                s.payload_len = 1448;
                let mut rec = build::tcp_record(&s);
                verify_record(&rec).unwrap();
                let mut before = rec.clone();
                finish_checksum(&mut before).unwrap();
                damage(&mut rec, salt).unwrap();
                assert!(verify_record(&rec).is_err(), "salt {salt}: still verifies");
                let ip = parse(&rec).unwrap().ip_header_len;
                let differ: Vec<usize> = (0..rec.len()).filter(|&i| rec[i] != before[i]).collect();
                assert_eq!(differ.len(), 1, "salt {salt}: one byte");
                assert!(
                    differ[0] >= VNET_HDR_LEN + ip,
                    "salt {salt}: IP header untouched"
                );
                assert_eq!((rec[differ[0]] ^ before[differ[0]]).count_ones(), 1);
                if let Ok(h) = Ipv4Header::new(&rec[VNET_HDR_LEN..]) {
                    assert!(h.checksum_ok());
                }
            }
        }
    }

    #[test]
    fn a_partial_checksum_is_completed_before_the_damage() {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.payload_len = 3000;
        s.mss = 1448;
        let rec = build::tcp_record(&s);
        let p = parse(&rec).unwrap();
        let mut one = Vec::new();
        split(&rec, &p, 1, 1, ChecksumMode::Partial, &mut one).unwrap();
        assert!(parse(&one).unwrap().vnet.needs_csum());
        damage(&mut one, 7).unwrap();
        let q = parse(&one).unwrap();
        assert!(!q.vnet.needs_csum(), "the receiver must verify it");
        assert!(verify_record(&one).is_err());
    }

    #[test]
    fn a_super_packet_is_refused() {
        let mut s = TcpSpec::new(Addrs::v4([10, 0, 0, 1], [10, 0, 0, 2]));
        s.payload_len = 3000;
        s.mss = 1448;
        let mut rec = build::tcp_record(&s);
        assert_eq!(damage(&mut rec, 0), Err(PacketError::NotSingleSegment));
    }
}

//! Receive-side scaling: which virtual CPU a frame lands on, as a multi-queue NIC decides it.
//!
//! A NIC hashes the flow's addresses and ports with the Toeplitz function and a secret key,
//! then looks the low bits up in an indirection table whose entries name receive queues, one
//! queue per CPU. bpfemu does the same with the key most drivers ship by default (the one
//! Microsoft's RSS specification publishes) and the table `ethtool` sets up by default
//! (entry `i` is queue `i % queues`), so per-CPU maps fill as they would on real hardware.

/// The default RSS key of the Microsoft specification (and of many drivers).
pub const DEFAULT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Entries in the indirection table (what most NICs and `ethtool -x` show).
const INDIRECTION_ENTRIES: u32 = 128;

/// The Toeplitz hash of `input` under `key` (`key` must be at least `input.len() + 4` bytes).
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let mut hash = 0u32;
    // The 32-bit window of the key that lines up with the current input bit.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, byte) in input.iter().enumerate() {
        let next_key_byte = key.get(i + 4).copied().unwrap_or(0);
        for bit in (0..8).rev() {
            if byte & (1 << bit) != 0 {
                hash ^= window;
            }
            window = (window << 1) | u32::from((next_key_byte >> bit) & 1);
        }
    }
    hash
}

/// The bytes RSS hashes for a frame: addresses, then ports for unfragmented TCP and UDP; empty
/// for frames that are not IP (those land on queue 0).
pub fn hash_input(frame: &[u8]) -> Vec<u8> {
    let mut offset = 12;
    let mut ethertype = read_u16(frame, offset);
    while matches!(ethertype, Some(0x8100 | 0x88a8)) {
        offset += 4;
        ethertype = read_u16(frame, offset);
    }
    let l3 = offset + 2;
    match ethertype {
        Some(0x0800) => ipv4_input(frame, l3),
        Some(0x86dd) => ipv6_input(frame, l3),
        _ => Vec::new(),
    }
}

fn read_u16(frame: &[u8], at: usize) -> Option<u16> {
    frame
        .get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn ipv4_input(frame: &[u8], l3: usize) -> Vec<u8> {
    let Some(header) = frame.get(l3..l3 + 20) else {
        return Vec::new();
    };
    let mut input = header[12..20].to_vec();
    let header_len = usize::from(header[0] & 0x0f) * 4;
    let fragmented = u16::from_be_bytes([header[6], header[7]]) & 0x3fff != 0;
    if !fragmented && matches!(header[9], 6 | 17) {
        input.extend(ports(frame, l3 + header_len));
    }
    input
}

fn ipv6_input(frame: &[u8], l3: usize) -> Vec<u8> {
    let Some(header) = frame.get(l3..l3 + 40) else {
        return Vec::new();
    };
    let mut input = header[8..40].to_vec();
    if matches!(header[6], 6 | 17) {
        input.extend(ports(frame, l3 + 40));
    }
    input
}

fn ports(frame: &[u8], l4: usize) -> Vec<u8> {
    frame
        .get(l4..l4 + 4)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// The queue (= virtual CPU) of `frame` on a NIC with `queues` queues.
pub fn steer(frame: &[u8], queues: u32) -> u32 {
    if queues <= 1 {
        return 0;
    }
    let input = hash_input(frame);
    if input.is_empty() {
        return 0;
    }
    let hash = toeplitz(&DEFAULT_KEY, &input);
    (hash % INDIRECTION_ENTRIES) % queues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_input(src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> Vec<u8> {
        let mut v = src.to_vec();
        v.extend(dst);
        if let Some((s, d)) = ports {
            v.extend(s.to_be_bytes());
            v.extend(d.to_be_bytes());
        }
        v
    }

    /// The verification vectors of Microsoft's RSS specification.
    #[test]
    fn matches_the_specification_vectors() {
        let cases = [
            (
                [66, 9, 149, 187],
                [161, 142, 100, 80],
                2794,
                1766,
                0x323e_8fc2,
                0x51cc_c178,
            ),
            (
                [199, 92, 111, 2],
                [65, 69, 140, 83],
                14230,
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
            (
                [24, 19, 198, 95],
                [12, 22, 207, 184],
                12898,
                38024,
                0xd2d0_a5de,
                0x5c2b_394a,
            ),
        ];
        for (src, dst, sport, dport, two_tuple, four_tuple) in cases {
            assert_eq!(toeplitz(&DEFAULT_KEY, &v4_input(src, dst, None)), two_tuple);
            let input = v4_input(src, dst, Some((sport, dport)));
            assert_eq!(toeplitz(&DEFAULT_KEY, &input), four_tuple);
        }
    }

    #[test]
    fn frames_spread_and_non_ip_goes_to_queue_zero() {
        use crate::traffic::{Rng, normal};
        let frames = normal(&mut Rng::new(3), 200);
        let mut per_queue = [0; 4];
        for frame in &frames {
            per_queue[steer(frame, 4) as usize] += 1;
        }
        assert!(per_queue.iter().all(|&n| n > 10), "{per_queue:?}");
        assert_eq!(steer(&[0u8; 60], 4), 0);
        assert_eq!(steer(&frames[0], 1), 0);
    }

    #[test]
    fn vlan_tags_are_skipped() {
        use crate::traffic::{ETH_P_8021Q, Frame, Transport, addr};
        let plain = Frame::ipv4(
            addr::v4(addr::CLIENT_NET, 1),
            addr::v4(addr::SERVER_NET, 2),
            Transport::Udp {
                sport: 10,
                dport: 20,
                payload: vec![],
            },
        );
        let tagged = plain.clone().with_vlans(&[(ETH_P_8021Q, 5)]);
        assert_eq!(hash_input(&plain.build()), hash_input(&tagged.build()));
        assert_eq!(hash_input(&plain.build()).len(), 12);
    }
}

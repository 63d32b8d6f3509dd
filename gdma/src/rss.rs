//! RSS: Toeplitz hash and keys.

/// Toeplitz key size (`MANA_HASH_KEY_SIZE`).
pub const TOEPLITZ_KEY_SIZE: usize = 40;
/// Hardware indirection table size used by DPDK (`INDIRECTION_TABLE_NUM_ELEMENTS`).
pub const INDIRECTION_TABLE_SIZE: usize = 64;

/// The default key of DPDK's mana driver (`mana_rss_hash_key_default`).
pub const DPDK_MANA_DEFAULT_RSS_KEY: [u8; TOEPLITZ_KEY_SIZE] = [
    0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2, 0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94,
    0x6b, 0x9e, 0x38, 0xd9, 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56, 0x3d, 0x59,
    0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a,
];

/// The sample key of Microsoft's RSS specification ("Verifying the RSS
/// hash calculation").
pub const MICROSOFT_RSS_KEY: [u8; TOEPLITZ_KEY_SIZE] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Microsoft RSS Toeplitz hash of `input` under `key`.
///
/// For each input bit (most significant bit of each byte first) that is
/// set, the 32 key bits starting at that bit position are XORed into the
/// result. A 40-byte key covers 36 input bytes (IPv6 + ports); key bits past
/// the end are taken as zero, so longer inputs hash their tail as zero bits.
pub fn toeplitz(key: &[u8; TOEPLITZ_KEY_SIZE], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // `window` holds key bits [8i, 8i + 64) while byte i is processed.
    let mut window = u64::from_be_bytes([
        key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
    ]);
    for (next, &byte) in (8..).zip(input) {
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= (window >> 32) as u32;
            }
            window <<= 1;
        }
        window |= *key.get(next).unwrap_or(&0) as u64;
    }
    result
}

/// Hash of an IPv4 2-tuple: input `src ‖ dst` (network byte order).
pub fn toeplitz_ipv4(key: &[u8; TOEPLITZ_KEY_SIZE], src: [u8; 4], dst: [u8; 4]) -> u32 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&src);
    b[4..].copy_from_slice(&dst);
    toeplitz(key, &b)
}

/// Hash of an IPv4 4-tuple: input `src ‖ dst ‖ sport ‖ dport`.
pub fn toeplitz_ipv4_l4(
    key: &[u8; TOEPLITZ_KEY_SIZE],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
) -> u32 {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&src);
    b[4..8].copy_from_slice(&dst);
    b[8..10].copy_from_slice(&sport.to_be_bytes());
    b[10..].copy_from_slice(&dport.to_be_bytes());
    toeplitz(key, &b)
}

/// Hash of an IPv6 2-tuple: input `src ‖ dst`.
pub fn toeplitz_ipv6(key: &[u8; TOEPLITZ_KEY_SIZE], src: [u8; 16], dst: [u8; 16]) -> u32 {
    let mut b = [0u8; 32];
    b[..16].copy_from_slice(&src);
    b[16..].copy_from_slice(&dst);
    toeplitz(key, &b)
}

/// Hash of an IPv6 4-tuple: input `src ‖ dst ‖ sport ‖ dport`.
pub fn toeplitz_ipv6_l4(
    key: &[u8; TOEPLITZ_KEY_SIZE],
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
) -> u32 {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(&src);
    b[16..32].copy_from_slice(&dst);
    b[32..34].copy_from_slice(&sport.to_be_bytes());
    b[34..].copy_from_slice(&dport.to_be_bytes());
    toeplitz(key, &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Microsoft RSS verification suite, IPv4:
    /// (destination, dport, source, sport, hash(IP only), hash(IP + TCP)).
    const V4: [(&str, u16, &str, u16, u32, u32); 5] = [
        (
            "161.142.100.80",
            1766,
            "66.9.149.187",
            2794,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            "65.69.140.83",
            4739,
            "199.92.111.2",
            14230,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            "12.22.207.184",
            38024,
            "24.19.198.95",
            12898,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            "209.142.163.6",
            2217,
            "38.27.205.30",
            48228,
            0x82989176,
            0xafc7327f,
        ),
        (
            "202.188.127.2",
            1303,
            "153.39.163.191",
            44251,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    /// Microsoft RSS verification suite, IPv6.
    const V6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:3::1",
            1766,
            "3ffe:2501:200:1fff::7",
            2794,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "ff02::1",
            4739,
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "fe80::200:f8ff:fe21:67cf",
            38024,
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_ipv4_vectors() {
        for (dst, dport, src, sport, h3, h4) in V4 {
            let d = dst.parse::<Ipv4Addr>().unwrap().octets();
            let s = src.parse::<Ipv4Addr>().unwrap().octets();
            assert_eq!(
                toeplitz_ipv4(&MICROSOFT_RSS_KEY, s, d),
                h3,
                "{src} -> {dst}"
            );
            assert_eq!(
                toeplitz_ipv4_l4(&MICROSOFT_RSS_KEY, s, d, sport, dport),
                h4,
                "{src} -> {dst}"
            );
        }
    }

    #[test]
    fn microsoft_ipv6_vectors() {
        for (dst, dport, src, sport, h3, h4) in V6 {
            let d = dst.parse::<Ipv6Addr>().unwrap().octets();
            let s = src.parse::<Ipv6Addr>().unwrap().octets();
            assert_eq!(
                toeplitz_ipv6(&MICROSOFT_RSS_KEY, s, d),
                h3,
                "{src} -> {dst}"
            );
            assert_eq!(
                toeplitz_ipv6_l4(&MICROSOFT_RSS_KEY, s, d, sport, dport),
                h4,
                "{src} -> {dst}"
            );
        }
    }

    /// Bit-by-bit reference straight from the definition.
    fn reference(key: &[u8; 40], input: &[u8]) -> u32 {
        let key_bit = |i: usize| -> u32 {
            key.get(i / 8)
                .map_or(0, |b| ((b >> (7 - i % 8)) & 1) as u32)
        };
        let mut r = 0u32;
        for (i, byte) in input.iter().enumerate() {
            for b in 0..8 {
                if byte & (0x80 >> b) != 0 {
                    let start = i * 8 + b;
                    let mut k = 0u32;
                    for j in 0..32 {
                        k = (k << 1) | key_bit(start + j);
                    }
                    r ^= k;
                }
            }
        }
        r
    }

    #[test]
    fn matches_reference_including_long_inputs() {
        let mut x = 0x1234_5678u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for len in [0usize, 1, 4, 12, 36, 37, 40, 64] {
            let input: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
            for key in [&MICROSOFT_RSS_KEY, &DPDK_MANA_DEFAULT_RSS_KEY] {
                assert_eq!(toeplitz(key, &input), reference(key, &input), "len {len}");
            }
        }
        assert_eq!(toeplitz(&DPDK_MANA_DEFAULT_RSS_KEY, &[0x80]), 0x2cc681d1);
        assert_eq!(toeplitz(&DPDK_MANA_DEFAULT_RSS_KEY, &[]), 0);
    }
}

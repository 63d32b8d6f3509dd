//! Internet checksum helpers for the pseudo-header the device expects in the
//! L4 checksum field when it computes TCP/UDP checksums.

#![forbid(unsafe_code)]

fn sum16(bytes: &[u8], mut acc: u32) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The folded (not complemented) pseudo-header sum of an IPv4 header:
/// addresses, protocol and L4 length (0 when the total length is 0, as
/// for segmentation).
pub fn ipv4_pseudo(ip: &[u8]) -> u16 {
    let ihl = usize::from(ip[0] & 0xf) * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]);
    let l4_len = u32::from(total).saturating_sub(ihl as u32);
    fold(sum16(&ip[12..20], u32::from(ip[9]) + l4_len))
}

/// [`ipv4_pseudo`] as the two bytes the L4 checksum field takes (network
/// order), computed with word loads: the words are summed in the machine's
/// byte order, which one's-complement addition allows, and the folded
/// result stored as is.
#[inline(always)]
pub fn ipv4_pseudo_bytes(ip: &[u8; 20]) -> [u8; 2] {
    let ihl = u32::from(ip[0] & 0xf) * 4;
    let total = u32::from(u16::from_be_bytes([ip[2], ip[3]]));
    // Protocol and L4 length (below 2^17), in big-endian words in machine
    // order: byte-swapping a 32-bit value swaps each of its 16-bit words
    // and the two words' places, neither of which changes their sum.
    let tail = (u32::from(ip[9]) + total.saturating_sub(ihl)).to_be();
    // Both addresses in one load, the tail added with the carry put back (a
    // sum that wraps is below `tail`: adding the carry cannot wrap again).
    let [_, _, _, _, _, _, _, _, _, _, _, _, a @ ..] = *ip;
    let (s, c) = u64::from_ne_bytes(a).overflowing_add(u64::from(tail));
    let s = s + u64::from(c);
    // 64 to 32 bits the same way (no second carry: a sum that carries
    // leaves at most 2^32 - 2).
    let (v, c) = (s as u32).overflowing_add((s >> 32) as u32);
    let v = v + u32::from(c);
    // Then 32 to 16 bits: the upper half of `v + rotr(v, 16)` is the sum of
    // the two halves with the carry of the lower one added back.
    ((v.wrapping_add(v.rotate_right(16)) >> 16) as u16).to_ne_bytes()
}

/// The same for an IPv6 header (extension headers are not walked: the
/// next-header field must name TCP or UDP).
pub fn ipv6_pseudo(ip: &[u8]) -> u16 {
    let payload = u16::from_be_bytes([ip[4], ip[5]]);
    fold(sum16(&ip[8..40], u32::from(ip[6]) + u32::from(payload)))
}

/// The complemented checksum of `bytes`.
#[cfg(test)]
fn checksum(bytes: &[u8]) -> u16 {
    !fold(sum16(bytes, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_pseudo_header_matches_a_hand_computed_value() {
        // 192.168.0.1 -> 192.168.0.199, TCP, total length 60 (20 + 40).
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&60u16.to_be_bytes());
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
        ip[16..20].copy_from_slice(&[192, 168, 0, 199]);
        // c0a8 + 0001 + c0a8 + 00c7 + 0006 + 0028 = 0x18246 -> 0x8247
        assert_eq!(ipv4_pseudo(&ip), 0x8247);
    }

    #[test]
    fn the_word_load_pseudo_header_equals_the_byte_wise_one() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..20000 {
            let mut ip = [0u8; 20];
            for b in ip.iter_mut() {
                *b = next() as u8;
            }
            ip[0] = 0x40 | (5 + (i % 11) as u8);
            if i % 7 == 0 {
                ip[2..4].copy_from_slice(&[0, 0]); // TSO: total length 0
            }
            if i % 13 == 0 {
                ip[12..20].fill(0xff); // carries all the way
            }
            assert_eq!(
                ipv4_pseudo_bytes(&ip),
                ipv4_pseudo(&ip).to_be_bytes(),
                "{ip:x?}"
            );
        }
    }

    #[test]
    fn checksum_of_a_valid_header_is_zero() {
        let hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&hdr), 0);
    }
}

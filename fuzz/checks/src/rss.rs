//! Target `rss`: the Toeplitz hash (what the driver and the emulated device
//! compute over a key the application configures) against a bit-by-bit
//! reading of its definition, for any key and input, and the tuple helpers
//! against the hash of the bytes they concatenate.

use gdma::{toeplitz, toeplitz_ipv4, toeplitz_ipv4_l4, toeplitz_ipv6, toeplitz_ipv6_l4};

use crate::bits::padded;

/// The definition: for every set input bit `i` (most significant first),
/// XOR in the 32 key bits starting at bit `i`; key bits past the end are 0.
fn reference(key: &[u8; 40], input: &[u8]) -> u32 {
    let key_bit = |i: usize| {
        key.get(i / 8)
            .map_or(0, |b| u32::from(b >> (7 - i % 8) & 1))
    };
    let mut r = 0;
    for i in 0..input.len() * 8 {
        if input[i / 8] >> (7 - i % 8) & 1 == 1 {
            r ^= (0..32).fold(0, |k, j| k << 1 | key_bit(i + j));
        }
    }
    r
}

/// The first 40 bytes are the key, the rest (at most 64 bytes) the input.
pub fn check(data: &[u8]) {
    let key: [u8; 40] = padded(data);
    let input = &data[data.len().min(40)..];
    let input = &input[..input.len().min(64)];
    let h = toeplitz(&key, input);
    assert_eq!(
        h,
        reference(&key, input),
        "key {key:02x?} input {input:02x?}"
    );

    // The hash is linear in the input: h(a ^ b) = h(a) ^ h(b).
    let other: Vec<u8> = input.iter().rev().copied().collect();
    let x: Vec<u8> = input.iter().zip(&other).map(|(a, b)| a ^ b).collect();
    assert_eq!(toeplitz(&key, &x), h ^ toeplitz(&key, &other));

    // Trailing zero bytes add nothing.
    let mut z = input.to_vec();
    z.extend_from_slice(&[0; 4]);
    assert_eq!(toeplitz(&key, &z), h);

    // The tuple helpers hash src ‖ dst ‖ sport ‖ dport, ports big-endian.
    let t: [u8; 36] = padded(input);
    let v4 = |i: usize| -> [u8; 4] { padded(&t[i..]) };
    let v6 = |i: usize| -> [u8; 16] { padded(&t[i..]) };
    let port = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
    assert_eq!(toeplitz_ipv4(&key, v4(0), v4(4)), toeplitz(&key, &t[..8]));
    assert_eq!(
        toeplitz_ipv4_l4(&key, v4(0), v4(4), port(8), port(10)),
        toeplitz(&key, &t[..12])
    );
    assert_eq!(toeplitz_ipv6(&key, v6(0), v6(16)), toeplitz(&key, &t[..32]));
    assert_eq!(
        toeplitz_ipv6_l4(&key, v6(0), v6(16), port(32), port(34)),
        toeplitz(&key, &t)
    );
}

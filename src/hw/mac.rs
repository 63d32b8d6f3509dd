//! Ethernet MAC addresses: what the port's sysfs `address` file and the
//! `mac=` devargs hold. Pure Rust (the devargs parser is fuzzed on it).

#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

/// A 48-bit Ethernet MAC address, bytes in transmission order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// True when the group (I/G) bit is clear, i.e. not multicast/broadcast.
    #[must_use]
    pub const fn is_unicast(&self) -> bool {
        self.0[0] & 0x01 == 0
    }

    /// True for 00:00:00:00:00:00, which no port owns.
    #[must_use]
    pub const fn is_zero(&self) -> bool {
        matches!(self.0, [0, 0, 0, 0, 0, 0])
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[must_use]
    pub const fn is_broadcast(&self) -> bool {
        matches!(self.0, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// Error of [`MacAddr::from_str`]: the text is not a MAC in an accepted form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseMacError(pub String);

impl fmt::Display for ParseMacError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: invalid MAC address ({})", self.0, MAC_FORMAT_HINT)
    }
}

impl std::error::Error for ParseMacError {}

pub(crate) const MAC_FORMAT_HINT: &str =
    "expected six hex bytes like 00:0d:3a:76:3b:d0, 00-0d-3a-76-3b-d0 or 000d:3a76:3bd0";

impl FromStr for MacAddr {
    type Err = ParseMacError;

    /// Parses the accepted forms exactly; no whitespace is trimmed, so a
    /// caller reading e.g. sysfs `address` must trim the newline itself.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_mac(s)
            .map(MacAddr)
            .ok_or_else(|| ParseMacError(s.to_owned()))
    }
}

/// Value of one hex digit. Written by hand because `from_str_radix` also
/// accepts a leading `+`, which is not part of any MAC notation.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A group of one to four hex digits (at most four, so it fits in u16).
fn hex_group(group: &str) -> Option<u16> {
    let bytes = group.as_bytes();
    if bytes.is_empty() || bytes.len() > 4 {
        return None;
    }
    bytes
        .iter()
        .try_fold(0u16, |acc, &b| Some((acc << 4) | u16::from(hex_digit(b)?)))
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    // One separator style per address: with '-' present, any ':' ends up
    // inside a group and fails the hex check.
    let sep = if s.contains('-') { '-' } else { ':' };
    let mut groups = [0u16; 6];
    let (mut n, mut min_len, mut max_len) = (0, usize::MAX, 0);
    for group in s.split(sep) {
        *groups.get_mut(n)? = hex_group(group)?; // seventh group: None
        n += 1;
        min_len = min_len.min(group.len());
        max_len = max_len.max(group.len());
    }
    match n {
        // Six groups of one or two digits: a byte each.
        6 if max_len <= 2 => {
            let mut out = [0u8; 6];
            for (o, g) in out.iter_mut().zip(groups) {
                *o = g.to_be_bytes()[1];
            }
            Some(out)
        }
        // Three groups of exactly four digits (only with ':'), big-endian.
        3 if sep == ':' && min_len == 4 => {
            let [a, b] = groups[0].to_be_bytes();
            let [c, d] = groups[1].to_be_bytes();
            let [e, f] = groups[2].to_be_bytes();
            Some([a, b, c, d, e, f])
        }
        _ => None,
    }
}

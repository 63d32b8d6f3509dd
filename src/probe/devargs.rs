//! Parser for the `net_mana` device arguments (`devargs->drv_str`).
//!
//! DPDK hands the driver everything after the first comma of the device
//! argument, so `-a 7870:00:00.0,mac=00:0d:3a:76:3b:d0,mac=00:0d:3a:76:3b:d1`
//! (or the `--vdev=<pci>,mac=...` form Azure documents) arrives here as
//! `mac=00:0d:3a:76:3b:d0,mac=00:0d:3a:76:3b:d1`. An empty string means "no
//! filter": every port of the PCI device is probed.
//!
//! Grammar (stricter and more helpful than the upstream C driver, which only
//! says `-EINVAL`):
//!
//! * arguments are `key=value` pairs separated by single commas; the keys
//!   are `mac`, repeatable, up to [`MAX_MACS`] addresses in total, and
//!   `rx_path` and `tx_path` (`auto`, `scalar` or `vector`: the receive
//!   loop and the plain send run of the device's queues, as
//!   `NET_MANA_RX_PATH` and `NET_MANA_TX_PATH` choose them for every
//!   device), each at most once;
//! * a value may also be a DPDK kvargs bracket list, `mac=[m1,m2]`; commas
//!   inside brackets do not separate arguments;
//! * ASCII whitespace around keys, values and list items is trimmed: it can
//!   never be part of a key or a MAC, so trimming is unambiguous and forgives
//!   `mac=a, mac=b` typed in a quoted shell argument;
//! * MACs are `xx:xx:xx:xx:xx:xx` or `xx-xx-xx-xx-xx-xx` (one or two hex
//!   digits per byte, one separator style per address) or `xxxx:xxxx:xxxx`
//!   (exactly four hex digits per group), case-insensitive;
//! * a MANA port MAC is unicast, so multicast, broadcast and all-zero
//!   addresses are rejected instead of silently matching nothing;
//! * listing the same MAC twice is rejected (it would probe a port twice).
//!
//! This module is pure Rust with no FFI so that it can be unit-tested,
//! property-tested and fuzzed without DPDK.

#![forbid(unsafe_code)]

pub use crate::hw::mac::MacAddr;
use crate::hw::mac::MAC_FORMAT_HINT;
use std::fmt;

/// Most MAC addresses one device argument may list (upstream
/// `MAX_NUM_ADDRESS`): one per port a function may have
/// (`hw::sysfs::MAX_PORTS`; this module stays self-contained for the fuzzer).
pub const MAX_MACS: usize = 8;

const MAC_KEY: &str = "mac";
const RX_PATH_KEY: &str = "rx_path";
const TX_PATH_KEY: &str = "tx_path";

/// The keys, for messages.
const KEYS_HINT: &str = "the accepted keys are mac=<mac_addr>, rx_path=auto|scalar|vector and tx_path=auto|scalar|vector";

/// A data-path loop asked for by a device argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathChoice {
    Auto,
    Scalar,
    Vector,
}

impl PathChoice {
    fn parse(v: &str) -> Option<PathChoice> {
        match v {
            "auto" => Some(PathChoice::Auto),
            "scalar" => Some(PathChoice::Scalar),
            "vector" => Some(PathChoice::Vector),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            PathChoice::Auto => "auto",
            PathChoice::Scalar => "scalar",
            PathChoice::Vector => "vector",
        }
    }
}

/// Example used in error hints, so every message shows the same address.
const EXAMPLE_MAC: &str = "00:0d:3a:76:3b:d0";

/// Why a device-argument string was rejected. Every variant quotes the
/// offending text; `Display` says what is wrong and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DevargsError {
    /// Two commas in a row, or a leading/trailing comma (`mac=a,,mac=b`).
    EmptyPair {
        /// The whole device-argument string.
        drv_str: String,
    },
    /// A pair without `=` (`00:0d:3a:76:3b:d0` or `mac`).
    MissingEquals {
        /// The pair as written (trimmed).
        pair: String,
    },
    /// A value of `rx_path` or `tx_path` other than `auto`, `scalar` or
    /// `vector`.
    UnknownPath {
        /// The pair as written (trimmed).
        pair: String,
        /// `rx_path` or `tx_path`.
        key: &'static str,
    },
    /// `rx_path` or `tx_path` given twice.
    RepeatedKey {
        /// The second pair as written (trimmed).
        pair: String,
        /// `rx_path` or `tx_path`.
        key: &'static str,
    },
    /// A key other than `mac`, `rx_path` and `tx_path` (also an empty key,
    /// `=00:0d:...`).
    UnknownKey {
        /// The pair as written (trimmed).
        pair: String,
        /// The key as written (trimmed).
        key: String,
    },
    /// `mac=` or `mac=[]`.
    EmptyValue {
        /// The pair as written (trimmed).
        pair: String,
    },
    /// An empty item inside a bracket list (`mac=[a,,b]`).
    EmptyListItem {
        /// The pair as written (trimmed).
        pair: String,
    },
    /// A `[` never closed, or a `]` never opened.
    UnbalancedBracket {
        /// The argument holding the unmatched bracket (trimmed).
        text: String,
        /// The unmatched bracket, `'['` or `']'`.
        bracket: char,
    },
    /// Text that is not a MAC address in any accepted form.
    InvalidMac {
        /// The value as written (trimmed).
        text: String,
    },
    /// A multicast or broadcast address.
    MulticastMac {
        /// The value as written (trimmed).
        text: String,
        /// The parsed address.
        mac: MacAddr,
    },
    /// 00:00:00:00:00:00.
    ZeroMac {
        /// The value as written (trimmed).
        text: String,
    },
    /// A MAC beyond the [`MAX_MACS`] limit.
    TooManyMacs {
        /// The first MAC over the limit, as written (trimmed).
        text: String,
    },
    /// A MAC listed twice (in any notation).
    DuplicateMac {
        /// The second occurrence, as written (trimmed).
        text: String,
        /// The parsed address.
        mac: MacAddr,
    },
}

impl fmt::Display for DevargsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const PORT_HINT: &str = "give the unicast MAC of a MANA port, as shown by 'ip link'";
        match self {
            Self::EmptyPair { drv_str } => write!(
                f,
                "{drv_str}: empty argument (remove the stray ','; arguments are \
                 separated by single commas, e.g. mac={EXAMPLE_MAC},mac=00:0d:3a:76:3b:d1)"
            ),
            Self::MissingEquals { pair } => write!(
                f,
                "{pair}: missing '=' (arguments are key=value; {KEYS_HINT}, \
                 e.g. mac={EXAMPLE_MAC})"
            ),
            Self::UnknownKey { pair, key } => write!(
                f,
                "{pair}: unknown key '{key}' ({KEYS_HINT}, e.g. mac={EXAMPLE_MAC})"
            ),
            Self::UnknownPath { pair, key } => write!(
                f,
                "{pair}: unknown {} path (use auto, scalar or vector; auto takes \
                 the vector loop where the CPU has AVX2)",
                if *key == TX_PATH_KEY {
                    "transmit"
                } else {
                    "receive"
                }
            ),
            Self::RepeatedKey { pair, key } => {
                write!(f, "{pair}: {key} given twice (give it once)")
            }
            Self::EmptyValue { pair } => write!(
                f,
                "{pair}: empty value (give a MAC address, e.g. mac={EXAMPLE_MAC}, or \
                 drop the argument to probe every port)"
            ),
            Self::EmptyListItem { pair } => write!(
                f,
                "{pair}: empty item in MAC list (remove the stray ',', e.g. \
                 mac=[{EXAMPLE_MAC},00:0d:3a:76:3b:d1])"
            ),
            Self::UnbalancedBracket { text, bracket: '[' } => write!(
                f,
                "{text}: unclosed '[' (end the MAC list with ']', e.g. \
                 mac=[{EXAMPLE_MAC},00:0d:3a:76:3b:d1])"
            ),
            Self::UnbalancedBracket { text, bracket } => write!(
                f,
                "{text}: '{bracket}' without a matching '[' (a MAC list is written \
                 mac=[{EXAMPLE_MAC},00:0d:3a:76:3b:d1])"
            ),
            Self::InvalidMac { text } => {
                write!(f, "mac={text}: invalid MAC address ({MAC_FORMAT_HINT})")
            }
            Self::MulticastMac { text, mac } if mac.is_broadcast() => write!(
                f,
                "mac={text}: {mac} is the broadcast address, not a port address ({PORT_HINT})"
            ),
            Self::MulticastMac { text, mac } => write!(
                f,
                "mac={text}: {mac} is a multicast address (low bit of the first byte \
                 set), not a port address ({PORT_HINT})"
            ),
            Self::ZeroMac { text } => write!(
                f,
                "mac={text}: the all-zero MAC address is not a port address ({PORT_HINT})"
            ),
            Self::TooManyMacs { text } => write!(
                f,
                "mac={text}: too many MAC addresses (the limit is {MAX_MACS} per device; \
                 list at most {MAX_MACS}, or omit mac= to probe every port)"
            ),
            Self::DuplicateMac { text, mac } => write!(
                f,
                "mac={text}: duplicate MAC address {mac} (list each port MAC once)"
            ),
        }
    }
}

impl std::error::Error for DevargsError {}

/// Parsed device arguments: the optional set of port MACs to probe, and
/// the receive loop asked for.
///
/// Fixed-size storage: at most [`MAX_MACS`] addresses, no heap.
#[derive(Clone, Copy, Default)]
pub struct Devargs {
    macs: [MacAddr; MAX_MACS],
    len: usize,
    rx_path: Option<PathChoice>,
    tx_path: Option<PathChoice>,
}

impl Devargs {
    /// Parses `devargs->drv_str`. An empty (or all-whitespace) string gives
    /// an empty filter.
    ///
    /// # Errors
    ///
    /// The first problem from the left, as a [`DevargsError`] whose
    /// `Display` is meant to be logged as is.
    pub fn parse(drv_str: &str) -> Result<Devargs, DevargsError> {
        let mut out = Devargs::default();
        if trim(drv_str).is_empty() {
            return Ok(out);
        }
        for_each_pair(drv_str, |pair| out.parse_pair(drv_str, pair))?;
        Ok(out)
    }

    /// The MACs to probe, in the order given; empty means "all ports".
    #[must_use]
    pub fn macs(&self) -> &[MacAddr] {
        // `len <= MAX_MACS` always holds; `get` keeps this path panic-free.
        self.macs.get(..self.len).unwrap_or(&[])
    }

    /// The receive loop asked for, if `rx_path` was given.
    #[must_use]
    pub fn rx_path(&self) -> Option<PathChoice> {
        self.rx_path
    }

    /// The arguments in their canonical form (`mac=` in lower case with
    /// colons, in order, then `rx_path=` and `tx_path=`); parsing it gives
    /// the same.
    #[must_use]
    pub fn canonical(&self) -> String {
        let macs = self.macs().iter().map(|m| format!("{MAC_KEY}={m}"));
        let paths = [(RX_PATH_KEY, self.rx_path), (TX_PATH_KEY, self.tx_path)]
            .into_iter()
            .filter_map(|(k, p)| Some(format!("{k}={}", p?.as_str())));
        macs.chain(paths).collect::<Vec<_>>().join(",")
    }

    /// The plain send run asked for, if `tx_path` was given.
    #[must_use]
    pub fn tx_path(&self) -> Option<PathChoice> {
        self.tx_path
    }

    /// Whether the port with this MAC should be probed: true when no filter
    /// was given or the MAC is listed.
    #[must_use]
    pub fn selects(&self, port_mac: &MacAddr) -> bool {
        self.len == 0 || self.macs().contains(port_mac)
    }

    fn parse_pair(&mut self, drv_str: &str, raw: &str) -> Result<(), DevargsError> {
        let pair = trim(raw);
        if pair.is_empty() {
            return Err(DevargsError::EmptyPair {
                drv_str: drv_str.to_owned(),
            });
        }
        let Some((key, value)) = pair.split_once('=') else {
            return Err(DevargsError::MissingEquals {
                pair: pair.to_owned(),
            });
        };
        let (key, value) = (trim(key), trim(value));
        let (path_key, slot) = match key {
            RX_PATH_KEY => (RX_PATH_KEY, Some(&mut self.rx_path)),
            TX_PATH_KEY => (TX_PATH_KEY, Some(&mut self.tx_path)),
            _ => ("", None),
        };
        if let Some(slot) = slot {
            let choice = PathChoice::parse(value).ok_or_else(|| DevargsError::UnknownPath {
                pair: pair.to_owned(),
                key: path_key,
            })?;
            if slot.replace(choice).is_some() {
                return Err(DevargsError::RepeatedKey {
                    pair: pair.to_owned(),
                    key: path_key,
                });
            }
            return Ok(());
        }
        if key != MAC_KEY {
            return Err(DevargsError::UnknownKey {
                pair: pair.to_owned(),
                key: key.to_owned(),
            });
        }
        let list = value
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .map(trim);
        match list {
            Some("") => Err(DevargsError::EmptyValue {
                pair: pair.to_owned(),
            }),
            Some(items) => items.split(',').map(trim).try_for_each(|item| {
                if item.is_empty() {
                    Err(DevargsError::EmptyListItem {
                        pair: pair.to_owned(),
                    })
                } else {
                    self.push(item)
                }
            }),
            None if value.is_empty() => Err(DevargsError::EmptyValue {
                pair: pair.to_owned(),
            }),
            None => self.push(value),
        }
    }

    /// Validates one MAC text and appends it.
    fn push(&mut self, text: &str) -> Result<(), DevargsError> {
        let text_owned = || text.to_owned();
        let mac: MacAddr = text
            .parse()
            .map_err(|_| DevargsError::InvalidMac { text: text_owned() })?;
        if mac.is_zero() {
            return Err(DevargsError::ZeroMac { text: text_owned() });
        }
        if !mac.is_unicast() {
            return Err(DevargsError::MulticastMac {
                text: text_owned(),
                mac,
            });
        }
        // Duplicates before the limit: fixing a duplicate may also fix the count.
        if self.macs().contains(&mac) {
            return Err(DevargsError::DuplicateMac {
                text: text_owned(),
                mac,
            });
        }
        let Some(slot) = self.macs.get_mut(self.len) else {
            return Err(DevargsError::TooManyMacs { text: text_owned() });
        };
        *slot = mac;
        self.len += 1;
        Ok(())
    }
}

impl PartialEq for Devargs {
    fn eq(&self, other: &Self) -> bool {
        self.macs() == other.macs()
            && self.rx_path == other.rx_path
            && self.tx_path == other.tx_path
    }
}

impl Eq for Devargs {}

impl fmt::Debug for Devargs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Devargs")
            .field("macs", &self.macs())
            .field("rx_path", &self.rx_path)
            .field("tx_path", &self.tx_path)
            .finish()
    }
}

fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace())
}

/// Splits `s` at commas outside brackets and feeds each raw pair to `f`,
/// left to right, so the first error reported is the leftmost one.
fn for_each_pair<'a>(
    s: &'a str,
    mut f: impl FnMut(&'a str) -> Result<(), DevargsError>,
) -> Result<(), DevargsError> {
    let mut depth = 0usize;
    let mut start = 0;
    // Byte offsets of ASCII delimiters are always char boundaries, so the
    // `get`s below never fail; `unwrap_or_default` only avoids a panic path.
    let from = |i: usize| s.get(i..).unwrap_or_default();
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' if depth == 0 => {
                // Quote the whole argument around the stray ']'.
                let rest = from(start);
                let end = rest
                    .get(i - start..)
                    .and_then(|tail| tail.find(','))
                    .map_or(rest.len(), |j| i - start + j);
                return Err(DevargsError::UnbalancedBracket {
                    text: trim(rest.get(..end).unwrap_or(rest)).to_owned(),
                    bracket: ']',
                });
            }
            b']' => depth -= 1,
            b',' if depth == 0 => {
                f(s.get(start..i).unwrap_or_default())?;
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(DevargsError::UnbalancedBracket {
            text: trim(from(start)).to_owned(),
            bracket: '[',
        });
    }
    f(from(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr([0x00, 0x0d, 0x3a, 0x76, 0x3b, 0xd0]);
    const B: MacAddr = MacAddr([0x00, 0x0d, 0x3a, 0x76, 0x3b, 0xd1]);

    fn ok(s: &str) -> Vec<MacAddr> {
        match Devargs::parse(s) {
            Ok(d) => d.macs().to_vec(),
            Err(e) => panic!("{s:?} rejected: {e}"),
        }
    }

    fn err(s: &str) -> DevargsError {
        match Devargs::parse(s) {
            Ok(d) => panic!("{s:?} accepted as {d:?}"),
            Err(e) => e,
        }
    }

    fn msg(s: &str) -> String {
        err(s).to_string()
    }

    #[test]
    fn empty_means_no_filter() {
        for s in ["", " ", "\t \n"] {
            let d = Devargs::parse(s).unwrap();
            assert!(d.macs().is_empty());
            assert!(d.selects(&A));
            assert_eq!(d, Devargs::default());
        }
    }

    #[test]
    fn mac_forms() {
        for s in [
            "00:0d:3a:76:3b:d0",
            "00:0D:3A:76:3B:D0",
            "00-0d-3a-76-3b-d0",
            "00-0D-3a-76-3B-d0",
            "0:d:3a:76:3b:d0",
            "0-d-3a-76-3b-d0",
            "000d:3a76:3bd0",
            "000D:3A76:3BD0",
        ] {
            assert_eq!(s.parse::<MacAddr>(), Ok(A), "{s}");
            assert_eq!(ok(&format!("mac={s}")), [A], "{s}");
        }
    }

    #[test]
    fn mac_display_is_lowercase_colon() {
        assert_eq!(A.to_string(), "00:0d:3a:76:3b:d0");
        assert_eq!(MacAddr([0xAB; 6]).to_string(), "ab:ab:ab:ab:ab:ab");
        assert_eq!(format!("{A:?}"), "MacAddr(00:0d:3a:76:3b:d0)");
    }

    #[test]
    fn mac_rejects_malformed() {
        for s in [
            "",
            ":",
            "00:0d:3a:76:3b",
            "00:0d:3a:76:3b:d0:11",
            "00:0d:3a:76:3b:",
            ":0d:3a:76:3b:d0",
            "00:0d:3a:76:3b:zz",
            "000:0d:3a:76:3b:d0",
            "00:0d:3a-76:3b:d0",
            "00.0d.3a.76.3b.d0",
            "000d3a763bd0",
            "000d-3a76-3bd0",
            "0001:0002:0003:04:05:06",
            "00:0d:3a:0076:3b:d0",
            "00d:3a76:3bd0",
            "0000d:3a76:3bd0",
            "+0:0d:3a:76:3b:d0",
            " 00:0d:3a:76:3b:d0",
            "00:0d:3a:76:3b:d0\n",
            "00:0d:3a:76:3b:d٠",
            "ｆｆ:0d:3a:76:3b:d0",
        ] {
            assert!(s.parse::<MacAddr>().is_err(), "{s:?}");
        }
        assert_eq!(
            "zz".parse::<MacAddr>().unwrap_err().to_string(),
            "zz: invalid MAC address (expected six hex bytes like 00:0d:3a:76:3b:d0, \
             00-0d-3a-76-3b-d0 or 000d:3a76:3bd0)"
        );
    }

    #[test]
    fn mac_predicates() {
        assert!(A.is_unicast() && !A.is_zero() && !A.is_broadcast());
        assert!(!MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_unicast());
        assert!(MacAddr([0xff; 6]).is_broadcast() && !MacAddr([0xff; 6]).is_unicast());
        assert!(MacAddr([0; 6]).is_zero() && MacAddr([0; 6]).is_unicast());
    }

    #[test]
    fn repeated_and_list_forms() {
        assert_eq!(ok("mac=00:0d:3a:76:3b:d0,mac=00:0d:3a:76:3b:d1"), [A, B]);
        assert_eq!(ok("mac=00:0d:3a:76:3b:d1,mac=00:0d:3a:76:3b:d0"), [B, A]);
        assert_eq!(ok("mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1]"), [A, B]);
        assert_eq!(ok("mac=[00:0d:3a:76:3b:d0]"), [A]);
        assert_eq!(
            ok("mac=[00:0d:3a:76:3b:d0],mac=000d:3a76:3bd1"),
            [A, B],
            "list mixed with plain"
        );
    }

    #[test]
    fn whitespace_is_trimmed() {
        assert_eq!(
            ok(" mac = 00:0d:3a:76:3b:d0 , mac=00-0d-3a-76-3b-d1 "),
            [A, B]
        );
        assert_eq!(
            ok("mac= [ 00:0d:3a:76:3b:d0 ,\t00:0d:3a:76:3b:d1 ] "),
            [A, B]
        );
        // Inside a MAC whitespace is still an error.
        assert_eq!(
            err("mac=00:0d:3a:76: 3b:d0"),
            DevargsError::InvalidMac {
                text: "00:0d:3a:76: 3b:d0".into()
            }
        );
    }

    #[test]
    fn eight_macs_fill_the_limit() {
        let macs: Vec<String> = (0..8).map(|i| format!("02:00:00:00:00:{i:02x}")).collect();
        let d = Devargs::parse(
            &macs
                .iter()
                .map(|m| format!("mac={m}"))
                .collect::<Vec<_>>()
                .join(","),
        )
        .unwrap();
        assert_eq!(d.macs().len(), MAX_MACS);
        assert!(d.selects(&MacAddr([2, 0, 0, 0, 0, 7])));
        assert!(!d.selects(&MacAddr([2, 0, 0, 0, 0, 8])));
        let list = Devargs::parse(&format!("mac=[{}]", macs.join(","))).unwrap();
        assert_eq!(list, d);
    }

    #[test]
    fn tx_path_beside_rx_path_and_macs() {
        let d = Devargs::parse("tx_path=scalar,mac=00:0d:3a:76:3b:d0,rx_path=vector").unwrap();
        assert_eq!(d.tx_path(), Some(PathChoice::Scalar));
        assert_eq!(d.rx_path(), Some(PathChoice::Vector));
        assert_eq!(d.macs(), [A]);
        assert_eq!(
            d.canonical(),
            "mac=00:0d:3a:76:3b:d0,rx_path=vector,tx_path=scalar"
        );
        assert_eq!(Devargs::parse(&d.canonical()), Ok(d));
        assert!(matches!(
            err("tx_path=fast"),
            DevargsError::UnknownPath { key: "tx_path", .. }
        ));
        assert_eq!(
            msg("tx_path=turbo"),
            "tx_path=turbo: unknown transmit path (use auto, scalar or vector; auto \
             takes the vector loop where the CPU has AVX2)"
        );
        assert_eq!(
            msg("tx_path=auto,rx_path=auto,tx_path=auto"),
            "tx_path=auto: tx_path given twice (give it once)"
        );
    }

    #[test]
    fn rx_path_beside_macs() {
        for (s, want) in [
            ("rx_path=auto", PathChoice::Auto),
            (" rx_path = scalar ", PathChoice::Scalar),
            ("mac=00:0d:3a:76:3b:d0,rx_path=vector", PathChoice::Vector),
        ] {
            let d = Devargs::parse(s).unwrap();
            assert_eq!(d.rx_path(), Some(want), "{s}");
            assert_eq!(Devargs::parse(&d.canonical()), Ok(d), "{s}");
        }
        let d = Devargs::parse("rx_path=scalar").unwrap();
        assert!(d.macs().is_empty() && d.selects(&A), "no MAC filter");
        assert_eq!(
            Devargs::parse("mac=00:0d:3a:76:3b:d0").unwrap().rx_path(),
            None
        );
        for bad in ["rx_path=", "rx_path=Vector", "rx_path=[scalar]"] {
            assert!(
                matches!(err(bad), DevargsError::UnknownPath { .. }),
                "{bad}"
            );
        }
    }

    #[test]
    fn selects() {
        let d = Devargs::parse("mac=00:0d:3a:76:3b:d0").unwrap();
        assert!(d.selects(&A));
        assert!(!d.selects(&B));
    }

    #[test]
    fn exact_messages() {
        assert_eq!(
            msg("mac=00:0d:3a:76:3b:zz"),
            "mac=00:0d:3a:76:3b:zz: invalid MAC address (expected six hex bytes like \
             00:0d:3a:76:3b:d0, 00-0d-3a-76-3b-d0 or 000d:3a76:3bd0)"
        );
        assert_eq!(
            msg("foo=1"),
            "foo=1: unknown key 'foo' (the accepted keys are mac=<mac_addr>, \
             rx_path=auto|scalar|vector and tx_path=auto|scalar|vector, e.g. \
             mac=00:0d:3a:76:3b:d0)"
        );
        assert_eq!(
            msg("rx_path=fast"),
            "rx_path=fast: unknown receive path (use auto, scalar or vector; auto \
             takes the vector loop where the CPU has AVX2)"
        );
        assert_eq!(
            msg("rx_path=scalar,rx_path=vector"),
            "rx_path=vector: rx_path given twice (give it once)"
        );
        assert_eq!(
            msg("mac="),
            "mac=: empty value (give a MAC address, e.g. mac=00:0d:3a:76:3b:d0, or \
             drop the argument to probe every port)"
        );
        assert_eq!(
            msg("00:0d:3a:76:3b:d0"),
            "00:0d:3a:76:3b:d0: missing '=' (arguments are key=value; the accepted \
             keys are mac=<mac_addr>, rx_path=auto|scalar|vector and \
             tx_path=auto|scalar|vector, e.g. mac=00:0d:3a:76:3b:d0)"
        );
        assert_eq!(
            msg("mac=00:0d:3a:76:3b:d0,,mac=00:0d:3a:76:3b:d1"),
            "mac=00:0d:3a:76:3b:d0,,mac=00:0d:3a:76:3b:d1: empty argument (remove \
             the stray ','; arguments are separated by single commas, e.g. \
             mac=00:0d:3a:76:3b:d0,mac=00:0d:3a:76:3b:d1)"
        );
        assert_eq!(
            msg("mac=[00:0d:3a:76:3b:d0,,00:0d:3a:76:3b:d1]"),
            "mac=[00:0d:3a:76:3b:d0,,00:0d:3a:76:3b:d1]: empty item in MAC list \
             (remove the stray ',', e.g. mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1])"
        );
        assert_eq!(
            msg("mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1"),
            "mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1: unclosed '[' (end the MAC \
             list with ']', e.g. mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1])"
        );
        assert_eq!(
            msg("mac=00:0d:3a:76:3b:d0],mac=00:0d:3a:76:3b:d1"),
            "mac=00:0d:3a:76:3b:d0]: ']' without a matching '[' (a MAC list is \
             written mac=[00:0d:3a:76:3b:d0,00:0d:3a:76:3b:d1])"
        );
        assert_eq!(
            msg("mac=01:00:5e:00:00:01"),
            "mac=01:00:5e:00:00:01: 01:00:5e:00:00:01 is a multicast address (low \
             bit of the first byte set), not a port address (give the unicast MAC \
             of a MANA port, as shown by 'ip link')"
        );
        assert_eq!(
            msg("mac=FF-FF-FF-FF-FF-FF"),
            "mac=FF-FF-FF-FF-FF-FF: ff:ff:ff:ff:ff:ff is the broadcast address, not \
             a port address (give the unicast MAC of a MANA port, as shown by 'ip link')"
        );
        assert_eq!(
            msg("mac=0:0:0:0:0:0"),
            "mac=0:0:0:0:0:0: the all-zero MAC address is not a port address (give \
             the unicast MAC of a MANA port, as shown by 'ip link')"
        );
        assert_eq!(
            msg("mac=00:0d:3a:76:3b:d0,mac=00-0D-3A-76-3B-D0"),
            "mac=00-0D-3A-76-3B-D0: duplicate MAC address 00:0d:3a:76:3b:d0 (list \
             each port MAC once)"
        );
        let nine: Vec<String> = (0..9)
            .map(|i| format!("mac=02:00:00:00:00:{i:02x}"))
            .collect();
        assert_eq!(
            msg(&nine.join(",")),
            "mac=02:00:00:00:00:08: too many MAC addresses (the limit is 8 per \
             device; list at most 8, or omit mac= to probe every port)"
        );
    }

    #[test]
    fn error_variants() {
        use DevargsError::*;
        let s = |x: &str| x.to_owned();
        let cases: &[(&str, DevargsError)] = &[
            (
                "MAC=00:0d:3a:76:3b:d0",
                UnknownKey {
                    pair: s("MAC=00:0d:3a:76:3b:d0"),
                    key: s("MAC"),
                },
            ),
            (
                "macs=00:0d:3a:76:3b:d0",
                UnknownKey {
                    pair: s("macs=00:0d:3a:76:3b:d0"),
                    key: s("macs"),
                },
            ),
            (
                "=00:0d:3a:76:3b:d0",
                UnknownKey {
                    pair: s("=00:0d:3a:76:3b:d0"),
                    key: s(""),
                },
            ),
            (
                "mac=00:0d:3a:76:3b:d0,txq=4",
                UnknownKey {
                    pair: s("txq=4"),
                    key: s("txq"),
                },
            ),
            ("mac", MissingEquals { pair: s("mac") }),
            (
                "mac:00:0d:3a:76:3b:d0",
                MissingEquals {
                    pair: s("mac:00:0d:3a:76:3b:d0"),
                },
            ),
            ("mac= ", EmptyValue { pair: s("mac=") }),
            ("mac=[]", EmptyValue { pair: s("mac=[]") }),
            ("mac=[ ]", EmptyValue { pair: s("mac=[ ]") }),
            (",", EmptyPair { drv_str: s(",") }),
            (
                ",mac=00:0d:3a:76:3b:d0",
                EmptyPair {
                    drv_str: s(",mac=00:0d:3a:76:3b:d0"),
                },
            ),
            (
                "mac=00:0d:3a:76:3b:d0,",
                EmptyPair {
                    drv_str: s("mac=00:0d:3a:76:3b:d0,"),
                },
            ),
            (
                "mac=00:0d:3a:76:3b:d0, ,mac=00:0d:3a:76:3b:d1",
                EmptyPair {
                    drv_str: s("mac=00:0d:3a:76:3b:d0, ,mac=00:0d:3a:76:3b:d1"),
                },
            ),
            (
                "mac=[00:0d:3a:76:3b:d0,]",
                EmptyListItem {
                    pair: s("mac=[00:0d:3a:76:3b:d0,]"),
                },
            ),
            (
                "mac=[,00:0d:3a:76:3b:d0]",
                EmptyListItem {
                    pair: s("mac=[,00:0d:3a:76:3b:d0]"),
                },
            ),
            (
                "mac=[",
                UnbalancedBracket {
                    text: s("mac=["),
                    bracket: '[',
                },
            ),
            (
                "mac=00:0d:3a:76:3b:d0,mac=[[00:0d:3a:76:3b:d1]",
                UnbalancedBracket {
                    text: s("mac=[[00:0d:3a:76:3b:d1]"),
                    bracket: '[',
                },
            ),
            (
                "]",
                UnbalancedBracket {
                    text: s("]"),
                    bracket: ']',
                },
            ),
            (
                "mac=[00:0d:3a:76:3b:d0]]",
                UnbalancedBracket {
                    text: s("mac=[00:0d:3a:76:3b:d0]]"),
                    bracket: ']',
                },
            ),
            (
                "mac=[[00:0d:3a:76:3b:d0]]",
                InvalidMac {
                    text: s("[00:0d:3a:76:3b:d0]"),
                },
            ),
            (
                "mac=[00:0d:3a:76:3b:d0]x",
                InvalidMac {
                    text: s("[00:0d:3a:76:3b:d0]x"),
                },
            ),
            (
                "mac=00:0d:3a:76:3b:d0=1",
                InvalidMac {
                    text: s("00:0d:3a:76:3b:d0=1"),
                },
            ),
            ("mac=[00:0d:3a:76:3b:d0,zz]", InvalidMac { text: s("zz") }),
            (
                "mac=03:00:00:00:00:01",
                MulticastMac {
                    text: s("03:00:00:00:00:01"),
                    mac: MacAddr([3, 0, 0, 0, 0, 1]),
                },
            ),
            (
                "mac=[00:0d:3a:76:3b:d0,000d:3a76:3bd0]",
                DuplicateMac {
                    text: s("000d:3a76:3bd0"),
                    mac: A,
                },
            ),
            (
                "mac=0000:0000:0000",
                ZeroMac {
                    text: s("0000:0000:0000"),
                },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(&err(input), want, "{input:?}");
            assert!(!want.to_string().is_empty());
        }
    }

    #[test]
    fn first_error_from_the_left_wins() {
        assert!(matches!(
            err("mac=zz,foo=1"),
            DevargsError::InvalidMac { .. }
        ));
        assert!(matches!(
            err("foo=1,mac=zz"),
            DevargsError::UnknownKey { .. }
        ));
        assert!(matches!(
            err("mac=zz,mac=["),
            DevargsError::InvalidMac { .. }
        ));
    }

    #[test]
    fn nine_in_a_list_and_mixed() {
        let macs: Vec<String> = (0..9).map(|i| format!("02:00:00:00:00:{i:02x}")).collect();
        assert_eq!(
            err(&format!("mac=[{}]", macs.join(","))),
            DevargsError::TooManyMacs {
                text: "02:00:00:00:00:08".into()
            }
        );
        let mixed = format!("mac=[{}],mac={}", macs[..8].join(","), macs[8]);
        assert!(matches!(err(&mixed), DevargsError::TooManyMacs { .. }));
    }

    #[test]
    fn odd_bytes_never_panic() {
        for s in [
            "é=ü",
            "mac=é",
            "[é,]",
            "mac=[é",
            "]é",
            "\u{0}",
            "mac=\u{feff}00:0d:3a:76:3b:d0",
        ] {
            let _ = Devargs::parse(s).map_err(|e| assert!(!e.to_string().is_empty()));
        }
    }
}

//! Targets `devargs` and `devargs_model`: the `mac=` device-argument parser
//! of the driver (`src/probe/devargs.rs` with `src/hw/mac.rs`, included by path: the driver crate needs
//! DPDK to build, this module is plain Rust).
//!
//! `devargs` feeds it any text; `devargs_model` writes argument strings from
//! a list of MACs in every accepted notation (case, separators, one-digit
//! bytes, bracket lists, whitespace) and `rx_path=`/`tx_path=` anywhere, sometimes
//! with one defect, and checks the parser accepts exactly the valid ones,
//! returns their MACs in order and the path, and otherwise names the first
//! problem from the left.

use arbitrary::{Arbitrary, Unstructured};

#[path = "../../../src/probe/devargs.rs"]
#[allow(dead_code)]
mod parser;

use parser::{Devargs, DevargsError, MacAddr, PathChoice, MAX_MACS};

/// Target `devargs`: any UTF-8 text.
pub fn check_text(data: &[u8]) {
    // drv_str comes from a C string: any bytes, but only UTF-8 reaches the
    // Rust parser (the C-ABI glue rejects the rest before calling it).
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    // MacAddr::from_str must agree with Display on whatever it accepts.
    if let Ok(m) = s.parse::<MacAddr>() {
        assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
    }

    match Devargs::parse(s) {
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
            // Every message quotes what it refuses.
            let quoted = match &e {
                DevargsError::EmptyPair { drv_str } => drv_str,
                DevargsError::MissingEquals { pair }
                | DevargsError::UnknownKey { pair, .. }
                | DevargsError::UnknownPath { pair, .. }
                | DevargsError::RepeatedKey { pair, .. }
                | DevargsError::EmptyValue { pair }
                | DevargsError::EmptyListItem { pair } => pair,
                DevargsError::UnbalancedBracket { text, .. }
                | DevargsError::InvalidMac { text }
                | DevargsError::MulticastMac { text, .. }
                | DevargsError::ZeroMac { text }
                | DevargsError::TooManyMacs { text }
                | DevargsError::DuplicateMac { text, .. } => text,
            };
            assert!(
                msg.contains(quoted.as_str()),
                "{msg:?} does not quote {quoted:?}"
            );
            assert!(
                s.contains(quoted.as_str()),
                "{quoted:?} is not in the input {s:?}"
            );
        }
        Ok(d) => {
            let macs = d.macs();
            assert!(macs.len() <= MAX_MACS);
            assert_eq!(
                macs.is_empty() && d.rx_path().is_none() && d.tx_path().is_none(),
                s.trim_ascii().is_empty(),
                "{s:?}"
            );
            for (i, m) in macs.iter().enumerate() {
                assert!(m.is_unicast() && !m.is_zero(), "{s:?}");
                assert!(!macs[..i].contains(m), "duplicate accepted: {s:?}");
                assert!(d.selects(m));
            }
            // Re-parsing the canonical form gives the same result.
            assert_eq!(Devargs::parse(&d.canonical()), Ok(d));
        }
    }
}

const SPACE: [&str; 6] = ["", " ", "\t", "  ", "\n", "\r\x0c"];

fn space(u: &mut Unstructured<'_>) -> arbitrary::Result<&'static str> {
    Ok(if u8::arbitrary(u)? < 192 {
        ""
    } else {
        SPACE[usize::from(u8::arbitrary(u)?) % SPACE.len()]
    })
}

fn hex(u: &mut Unstructured<'_>, v: u32, digits: usize) -> arbitrary::Result<String> {
    let s = format!("{v:0digits$x}");
    let upper = u8::arbitrary(u)?;
    Ok(match upper % 3 {
        0 => s,
        1 => s.to_uppercase(),
        _ => s
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect(),
    })
}

/// `mac` written in one of the accepted notations.
fn notation(u: &mut Unstructured<'_>, mac: [u8; 6]) -> arbitrary::Result<String> {
    let form = u8::arbitrary(u)? % 3;
    if form == 2 {
        let g = |i: usize| u32::from(mac[i]) << 8 | u32::from(mac[i + 1]);
        return Ok(format!(
            "{}:{}:{}",
            hex(u, g(0), 4)?,
            hex(u, g(2), 4)?,
            hex(u, g(4), 4)?
        ));
    }
    let sep = if form == 0 { ":" } else { "-" };
    let mut parts = Vec::with_capacity(6);
    for &b in &mac {
        // Bytes below 0x10 may be written with one digit.
        let digits = if b < 0x10 && bool::arbitrary(u)? {
            1
        } else {
            2
        };
        parts.push(hex(u, u32::from(b), digits)?);
    }
    Ok(parts.join(sep))
}

/// A defect injected in front of pair `at`, and the error it must give.
#[derive(Debug, Clone, Copy, Arbitrary)]
enum Defect {
    EmptyPair,
    UnknownKey,
    MissingEquals,
    EmptyValue,
    EmptyList,
    EmptyListItem,
    InvalidMac,
    UnknownPath,
    UnknownTxPath,
    /// A second `rx_path=auto`: wrong only after another one.
    RepeatedPath,
    /// The same for `tx_path`.
    RepeatedTxPath,
}

const CHOICES: [(PathChoice, &str); 3] = [
    (PathChoice::Auto, "auto"),
    (PathChoice::Scalar, "scalar"),
    (PathChoice::Vector, "vector"),
];

/// A pair written: its text, the indices of its MACs, and for a path pair
/// which (0 `rx_path`, 1 `tx_path`) and the choice.
type Pair = (String, Vec<usize>, Option<(usize, PathChoice)>);

/// Target `devargs_model`.
pub fn check_model(data: &[u8]) {
    let _ = model(&mut Unstructured::new(data));
}

fn model(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    // The MACs: random, or picked to collide with earlier ones, to be zero,
    // multicast or broadcast.
    let n = usize::from(u8::arbitrary(u)? % 12);
    let mut macs: Vec<[u8; 6]> = Vec::with_capacity(n);
    for _ in 0..n {
        let mut m = <[u8; 6]>::arbitrary(u)?;
        match u8::arbitrary(u)? % 16 {
            0 if !macs.is_empty() => m = macs[usize::from(m[0]) % macs.len()],
            1 => m = [0; 6],
            2 => m = [0xff; 6],
            3 => m[0] |= 1,
            _ => m[0] &= !1,
        }
        macs.push(m);
    }
    // Written as pairs: `mac=<m>` or `mac=[<m>,<m>,...]`.
    let mut pairs: Vec<Pair> = Vec::new();
    let mut i = 0;
    while i < n {
        let take = if bool::arbitrary(u)? {
            1 + usize::from(u8::arbitrary(u)?) % (n - i)
        } else {
            0
        };
        let (text, items) = if take == 0 {
            let t = format!(
                "{}mac{}={}{}{}",
                space(u)?,
                space(u)?,
                space(u)?,
                notation(u, macs[i])?,
                space(u)?
            );
            (t, vec![i])
        } else {
            let mut items = Vec::new();
            for &m in &macs[i..i + take] {
                items.push(format!("{}{}{}", space(u)?, notation(u, m)?, space(u)?));
            }
            let t = format!(
                "{}mac{}={}[{}]{}",
                space(u)?,
                space(u)?,
                space(u)?,
                items.join(","),
                space(u)?
            );
            (t, (i..i + take).collect())
        };
        i += items.len();
        pairs.push((text, items, None));
    }
    // An `rx_path=` and a `tx_path=`, each maybe, anywhere among them.
    for (which, key) in ["rx_path", "tx_path"].into_iter().enumerate() {
        if bool::arbitrary(u)? {
            let (choice, word) = CHOICES[usize::from(u8::arbitrary(u)?) % CHOICES.len()];
            let at = usize::from(u8::arbitrary(u)?) % (pairs.len() + 1);
            let text = format!(
                "{}{key}{}={}{word}{}",
                space(u)?,
                space(u)?,
                space(u)?,
                space(u)?
            );
            pairs.insert(at, (text, Vec::new(), Some((which, choice))));
        }
    }
    let defect = if bool::arbitrary(u)? {
        Some((
            Defect::arbitrary(u)?,
            usize::from(u8::arbitrary(u)?) % (pairs.len() + 1),
        ))
    } else {
        None
    };
    let mut texts: Vec<String> = pairs.iter().map(|p| p.0.clone()).collect();
    if let Some((d, at)) = defect {
        let t = match d {
            Defect::EmptyPair => " ".to_string(),
            Defect::UnknownKey => "max=00:0d:3a:76:3b:d0".to_string(),
            Defect::MissingEquals => "mac 00:0d:3a:76:3b:d0".to_string(),
            Defect::EmptyValue => "mac= ".to_string(),
            Defect::EmptyList => "mac=[ ]".to_string(),
            Defect::EmptyListItem => "mac=[ ,02:00:00:00:00:02]".to_string(),
            Defect::InvalidMac => "mac=00:0d:3a:76:3b".to_string(),
            Defect::UnknownPath => "rx_path=fast".to_string(),
            Defect::UnknownTxPath => "tx_path=Vector".to_string(),
            Defect::RepeatedPath => "rx_path=auto".to_string(),
            Defect::RepeatedTxPath => "tx_path=auto".to_string(),
        };
        texts.insert(at, t);
    }
    let s = texts.join(",");
    let got = Devargs::parse(&s);

    // What the parser must say: the first problem from the left.
    let mut seen: Vec<[u8; 6]> = Vec::new();
    let mut path: [Option<PathChoice>; 2] = [None, None];
    let mut want: Result<(), &str> = Ok(());
    // A second rx_path (tx_path) is refused where it stands; the defects
    // that repeat one are an `auto` of it.
    fn take_path(path: &mut Option<PathChoice>, c: PathChoice) -> Result<(), &'static str> {
        match path.replace(c) {
            Some(_) => Err("repeated"),
            None => Ok(()),
        }
    }
    let repeats = |d: Defect| match d {
        Defect::RepeatedPath => Some(0),
        Defect::RepeatedTxPath => Some(1),
        _ => None,
    };
    'pairs: for (p, (_, items, choice)) in pairs.iter().enumerate() {
        if let Some((d, at)) = defect {
            if at == p {
                match repeats(d) {
                    Some(w) => {
                        if let Err(e) = take_path(&mut path[w], PathChoice::Auto) {
                            want = Err(e);
                            break;
                        }
                    }
                    None => {
                        want = Err("defect");
                        break;
                    }
                }
            }
        }
        if let Some((w, c)) = choice {
            if let Err(e) = take_path(&mut path[*w], *c) {
                want = Err(e);
                break;
            }
        }
        for &k in items {
            let m = macs[k];
            let e = if m == [0; 6] {
                "zero"
            } else if m[0] & 1 == 1 {
                "multicast"
            } else if seen.contains(&m) {
                "duplicate"
            } else if seen.len() == MAX_MACS {
                "too many"
            } else {
                seen.push(m);
                continue;
            };
            want = Err(e);
            break 'pairs;
        }
    }
    if want.is_ok() {
        if let Some((d, _)) = defect.filter(|&(_, at)| at == pairs.len()) {
            want = match repeats(d) {
                Some(w) => take_path(&mut path[w], PathChoice::Auto),
                None => Err("defect"),
            };
        }
    }
    // An empty pair at either end of a string with nothing else is the
    // empty string: no filter.
    if want == Err("defect") && pairs.is_empty() && matches!(defect, Some((Defect::EmptyPair, _))) {
        want = Ok(());
    }
    match (want, &got) {
        (Ok(()), Ok(d)) => {
            let parsed: Vec<[u8; 6]> = d.macs().iter().map(|m| m.0).collect();
            assert_eq!(parsed, seen, "{s:?}");
            assert_eq!([d.rx_path(), d.tx_path()], path, "{s:?}");
        }
        (Err(kind), Err(e)) => {
            let ok = match (kind, e) {
                ("repeated", DevargsError::RepeatedKey { .. })
                | ("zero", DevargsError::ZeroMac { .. })
                | ("multicast", DevargsError::MulticastMac { .. })
                | ("duplicate", DevargsError::DuplicateMac { .. })
                | ("too many", DevargsError::TooManyMacs { .. }) => true,
                ("defect", e) => matches!(
                    (defect.map(|d| d.0), e),
                    (Some(Defect::EmptyPair), DevargsError::EmptyPair { .. })
                        | (Some(Defect::UnknownKey), DevargsError::UnknownKey { .. })
                        | (
                            Some(Defect::MissingEquals),
                            DevargsError::MissingEquals { .. }
                        )
                        | (Some(Defect::EmptyValue), DevargsError::EmptyValue { .. })
                        | (Some(Defect::EmptyList), DevargsError::EmptyValue { .. })
                        | (
                            Some(Defect::EmptyListItem),
                            DevargsError::EmptyListItem { .. }
                        )
                        | (Some(Defect::InvalidMac), DevargsError::InvalidMac { .. })
                        | (
                            Some(Defect::UnknownPath),
                            DevargsError::UnknownPath { key: "rx_path", .. }
                        )
                        | (
                            Some(Defect::UnknownTxPath),
                            DevargsError::UnknownPath { key: "tx_path", .. }
                        )
                ),
                _ => false,
            };
            assert!(ok, "{s:?}: expected {kind} ({defect:?}), got {e:?}");
        }
        (want, got) => panic!("{s:?}: expected {want:?}, got {got:?}"),
    }
    Ok(())
}

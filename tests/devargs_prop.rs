//! Property tests for the `mac=` devargs parser (pure Rust, no DPDK needed at
//! run time). Run with `cargo test --test devargs_prop`.

use proptest::prelude::*;
use rte_net_mana::devargs::{Devargs, DevargsError, MacAddr, MAX_MACS};

/// Any unicast, non-zero MAC: what a MANA port can have.
fn unicast_mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>()
        .prop_map(|mut b| {
            b[0] &= 0xfe;
            MacAddr(b)
        })
        .prop_filter("all-zero MAC", |m| m.0 != [0; 6])
}

/// `n` distinct unicast MACs in random order.
fn distinct_macs(n: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<MacAddr>> {
    prop::collection::btree_set(unicast_mac(), n)
        .prop_map(|s| s.into_iter().collect::<Vec<_>>())
        .prop_shuffle()
}

#[derive(Clone, Copy, Debug)]
enum Style {
    Colon,
    Dash,
    /// One hex digit for bytes < 0x10 (`0:d:3a:...`).
    ColonShort,
    DashShort,
    /// `xxxx:xxxx:xxxx`.
    Words,
}

/// How one MAC is written: style, upper case, whitespace padding.
#[derive(Clone, Copy, Debug)]
struct Fmt {
    style: Style,
    upper: bool,
    pad_left: bool,
    pad_right: bool,
}

fn fmt_strategy() -> impl Strategy<Value = Fmt> {
    (
        prop_oneof![
            Just(Style::Colon),
            Just(Style::Dash),
            Just(Style::ColonShort),
            Just(Style::DashShort),
            Just(Style::Words),
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(style, upper, pad_left, pad_right)| Fmt {
            style,
            upper,
            pad_left,
            pad_right,
        })
}

fn format_mac(m: &MacAddr, f: Fmt) -> String {
    let b = m.0;
    let bytes = |sep: &str, short: bool| {
        b.iter()
            .map(|x| {
                if short {
                    format!("{x:x}")
                } else {
                    format!("{x:02x}")
                }
            })
            .collect::<Vec<_>>()
            .join(sep)
    };
    let s = match f.style {
        Style::Colon => bytes(":", false),
        Style::Dash => bytes("-", false),
        Style::ColonShort => bytes(":", true),
        Style::DashShort => bytes("-", true),
        Style::Words => format!(
            "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        ),
    };
    let s = if f.upper { s.to_uppercase() } else { s };
    format!(
        "{}{}{}",
        if f.pad_left { " " } else { "" },
        s,
        if f.pad_right { "\t" } else { "" }
    )
}

/// Joins formatted MACs into a drv_str: `starts[i]` opens a new `mac=` pair
/// at MAC i; a pair of one MAC is a bracket list when `bracket[i]`.
fn join(texts: &[String], starts: &[bool], bracket: &[bool]) -> String {
    let mut groups: Vec<Vec<&str>> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if !starts[i] => g.push(t),
            _ => groups.push(vec![t]),
        }
    }
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            if g.len() == 1 && !bracket[i] {
                format!("mac={}", g[0])
            } else {
                format!("mac=[{}]", g.join(","))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// MACs plus a random way of writing and grouping each.
fn written(
    n: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = (Vec<MacAddr>, Vec<String>, String)> {
    distinct_macs(n).prop_flat_map(|macs| {
        let k = macs.len();
        (
            Just(macs),
            prop::collection::vec(fmt_strategy(), k),
            prop::collection::vec(any::<bool>(), k),
            prop::collection::vec(any::<bool>(), k),
        )
            .prop_map(|(macs, fmts, starts, bracket)| {
                let texts: Vec<String> = macs
                    .iter()
                    .zip(&fmts)
                    .map(|(m, f)| format_mac(m, *f))
                    .collect();
                let s = join(&texts, &starts, &bracket);
                (macs, texts, s)
            })
    })
}

/// Strings over the grammar's alphabet, so the fuzzing gets past the key.
fn grammarish() -> impl Strategy<Value = String> {
    "(mac=|\\[|\\]|,|=|:|-|[0-9a-fA-F]{1,4}| |x|é){0,40}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn round_trip((macs, _texts, s) in written(1..=MAX_MACS)) {
        let d = Devargs::parse(&s).map_err(|e| TestCaseError::fail(format!("{s:?}: {e}")))?;
        prop_assert_eq!(d.macs(), &macs[..], "{:?}", s);
        for m in &macs {
            prop_assert!(d.selects(m));
        }
    }

    #[test]
    fn nine_or_more_hit_the_limit((macs, texts, s) in written(MAX_MACS + 1..=20)) {
        prop_assert!(macs.len() > MAX_MACS);
        match Devargs::parse(&s) {
            Err(e @ DevargsError::TooManyMacs { .. }) => {
                prop_assert_eq!(
                    &e,
                    &DevargsError::TooManyMacs { text: texts[MAX_MACS].trim().to_owned() }
                );
                prop_assert!(e.to_string().contains("the limit is 8"), "{}", e);
            }
            other => prop_assert!(false, "{:?} gave {:?}", s, other),
        }
    }

    #[test]
    fn mac_display_from_str_round_trip(b in any::<[u8; 6]>()) {
        let m = MacAddr(b);
        let text = m.to_string();
        prop_assert_eq!(text.len(), 17);
        prop_assert_eq!(&text, &text.to_lowercase());
        prop_assert_eq!(text.parse::<MacAddr>(), Ok(m));
    }

    #[test]
    fn any_string_never_panics(s in any::<String>()) {
        check_any(&s)?;
    }

    #[test]
    fn grammar_like_strings_never_panic(s in grammarish()) {
        check_any(&s)?;
    }
}

/// Whatever the input: errors explain themselves, and what is accepted obeys
/// the invariants and survives a canonical re-format.
fn check_any(s: &str) -> Result<(), TestCaseError> {
    match Devargs::parse(s) {
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
            let _ = format!("{e:?}");
        }
        Ok(d) => {
            let macs = d.macs();
            prop_assert!(macs.len() <= MAX_MACS);
            for (i, m) in macs.iter().enumerate() {
                prop_assert!(m.is_unicast() && m.0 != [0; 6]);
                prop_assert!(!macs[..i].contains(m), "duplicate accepted: {:?}", s);
            }
            let canon = macs
                .iter()
                .map(|m| format!("mac={m}"))
                .collect::<Vec<_>>()
                .join(",");
            prop_assert_eq!(Devargs::parse(&canon), Ok(d));
        }
    }
    Ok(())
}

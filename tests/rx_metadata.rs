//! The packet type and flags each kind of received packet carries, with
//! and without RSS, as an application reads them (testpmd's verbose dump):
//! IPv4 and IPv6, each with TCP, UDP and another protocol. What the driver
//! advertises in `dev_supported_ptypes` it reports, so an application that
//! skips its own parser on that promise (l3fwd `--parse-ptype`) routes
//! every packet right. (Before: IPv6 without RSS had no L3 type, and
//! IPv6's IP checksum flag was UNKNOWN.)

mod common;
use common::*;
use mana_emu::pkt;
use std::time::Duration;

const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const V6_SRC: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// One frame per kind, each of its own length (`base + i`), with the hw
/// packet type and the IP/L4 checksum flags it must arrive with.
fn kinds(base: usize) -> Vec<(Vec<u8>, &'static str, &'static str, &'static str)> {
    let d = mac(MAC_A);
    let pad = |mut f: Vec<u8>, len: usize| {
        assert!(f.len() <= len);
        f.resize(len, 0);
        f
    };
    let mut v4_other = pkt::build::udp4(d, SRC, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 30);
    v4_other[14 + 9] = 47; // GRE: no L4 verdict, no L4 type
    pkt::fill_ipv4_csum(&mut v4_other, 14);
    let mut v6_other = pkt::build::udp6(d, SRC, V6_SRC, V6_DST, 1, 2, 30);
    v6_other[14 + 6] = 59; // no next header
    let l4_good = "RTE_MBUF_F_RX_L4_CKSUM_GOOD";
    let l4_unknown = "RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN";
    let frames = [
        (
            pkt::build::tcp4(d, SRC, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 7, 30),
            "L2_ETHER L3_IPV4_EXT_UNKNOWN L4_TCP",
            l4_good,
        ),
        (
            pkt::build::udp4(d, SRC, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 30),
            "L2_ETHER L3_IPV4_EXT_UNKNOWN L4_UDP",
            l4_good,
        ),
        (v4_other, "L2_ETHER L3_IPV4_EXT_UNKNOWN", l4_unknown),
        (
            pkt::build::tcp6(d, SRC, V6_SRC, V6_DST, 1, 2, 30),
            "L2_ETHER L3_IPV6_EXT_UNKNOWN L4_TCP",
            l4_good,
        ),
        (
            pkt::build::udp6(d, SRC, V6_SRC, V6_DST, 1, 2, 30),
            "L2_ETHER L3_IPV6_EXT_UNKNOWN L4_UDP",
            l4_good,
        ),
        (v6_other, "L2_ETHER L3_IPV6_EXT_UNKNOWN", l4_unknown),
    ];
    frames
        .into_iter()
        .enumerate()
        .map(|(i, (f, ptype, l4))| (pad(f, base + i), ptype, "RTE_MBUF_F_RX_IP_CKSUM_GOOD", l4))
        .collect()
}

/// testpmd's verbose block of the packet of `length` bytes: its line and
/// the `ol_flags` line after it.
fn block(out: &str, length: usize) -> (String, String) {
    let key = format!(" - length={length} - ");
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.contains(&key) {
            let flags = lines.find(|l| l.contains("ol_flags:")).unwrap_or("");
            return (l.to_string(), flags.to_string());
        }
    }
    panic!("no packet of {length} bytes in:\n{out}");
}

fn check(nq: usize) {
    if skip() {
        return;
    }
    let env = EmuEnv::new(
        &format!("rx-meta-{nq}q"),
        single(vec![PortDef::sink(MAC_A).lossless()]),
    )
    .unwrap();
    let q = format!("--rxq={nq}");
    let tq = format!("--txq={nq}");
    let mut t = spawn(&env, &["--forward-mode=rxonly", &q, &tq]);
    cmd(&mut t, "set verbose 1");
    cmd(&mut t, "start");
    let base = 200;
    let frames = kinds(base);
    let all: Vec<Vec<u8>> = frames.iter().map(|k| k.0.clone()).collect();
    t.inject(MAC_A, &all).unwrap();
    let last = format!(" - length={} - ", base + frames.len() - 1);
    let mut out = t.wait_for(&last, Duration::from_secs(30)).unwrap();
    out += &cmd(&mut t, "stop");
    let rss = nq > 1;
    for (i, (_, ptype, ip, l4)) in frames.iter().enumerate() {
        let (pkt_line, flags) = block(&out, base + i);
        let what = format!("kind {i} ({ptype}), {nq} queues:\n{pkt_line}\n{flags}");
        assert!(
            pkt_line.contains(&format!("hw ptype: {ptype}  -")),
            "{what}"
        );
        assert!(flags.contains(ip), "{what}");
        assert!(flags.contains(l4), "{what}");
        assert_eq!(flags.contains("RTE_MBUF_F_RX_RSS_HASH"), rss, "{what}");
    }
    let s = t.port_stats(0).unwrap();
    assert_eq!(s.rx_packets, frames.len() as u64);
    t.quit().unwrap();
}

#[test]
fn every_packet_kind_without_rss() {
    check(1);
}

#[test]
fn every_packet_kind_with_rss() {
    check(2);
}

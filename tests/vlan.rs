//! VLAN strip toggled while the port forwards (`vlan set strip on|off`),
//! seen on the wire: tagged frames received on A are forwarded (io) to B,
//! whose wire is a pcap file.

mod common;

use common::*;

#[test]
fn vlan_strip_toggles_while_the_port_forwards() {
    if skip() {
        return;
    }
    const N: usize = 100;
    let scratch = EmuEnv::new("rs-vlan-pcap", Config::default_single()).unwrap();
    let wire = scratch.dir.join("b.pcap");
    let env = EmuEnv::new(
        "rs-vlan",
        single(vec![
            PortDef::sink(MAC_A).lossless(),
            PortDef::pcap_tx(MAC_B, &wire),
        ]),
    )
    .unwrap();
    let tagged: Vec<Vec<u8>> = udp_frames(MAC_A, N, 7)
        .iter()
        // The device reports only the VID of a tag it strips (MANA's CQE
        // has no PCP/DEI), so a tag put back carries priority 0.
        .map(|f| pkt::vlan_insert(f, 0, false, 100))
        .collect();
    let mut t = spawn(&env, &["--forward-mode=io"]);
    cmd(&mut t, "start");
    let phase = |t: &mut Testpmd, command: Option<&str>, k: u64| {
        if let Some(c) = command {
            let o = cmd(t, c);
            assert!(!o.contains("failed"), "{c}: {o}");
        }
        inject_paced(t, MAC_A, &tagged, N, |c, _| {
            c.port(MAC_B).unwrap().tx_packets == k * N as u64
        });
    };
    phase(&mut t, None, 1);
    phase(&mut t, Some("vlan set strip on 0"), 2);
    phase(&mut t, Some("vlan set strip off 0"), 3);
    cmd(&mut t, "stop");
    t.quit().unwrap();
    let got = mana_emu::backend::read_pcap(&wire).unwrap();
    assert_eq!(got.len(), 3 * N);
    let untagged: Vec<Vec<u8>> = tagged
        .iter()
        .map(|f| {
            let mut f = f.clone();
            assert_eq!(pkt::vlan_strip(&mut f).map(|v| v & 0xfff), Some(100));
            f
        })
        .collect();
    let same = |a: &[Vec<u8>], b: &[Vec<u8>]| a.iter().zip(b).filter(|(x, y)| x == y).count();
    assert_eq!(
        same(&got[..N], &tagged),
        N,
        "strip off: the tag goes back on"
    );
    assert_eq!(
        same(&got[N..2 * N], &untagged),
        N,
        "strip on: forwarded untagged"
    );
    assert_eq!(same(&got[2 * N..], &tagged), N, "strip off again");
}

/// VLAN insertion on transmit (`tx_vlan set`), seen on the wire: every
/// frame testpmd's txonly engine sends carries the tag, whether the packet
/// is one segment (the burst's fast path) or a chain of two (`set txpkts
/// 32,32`, the general path), and both ends count the 4 tag bytes.
#[test]
fn tx_vlan_insertion_tags_every_frame_on_the_wire() {
    if skip() {
        return;
    }
    const VID: u16 = 0x123;
    let scratch = EmuEnv::new("rs-txvlan-pcap", Config::default_single()).unwrap();
    let wire = scratch.dir.join("a.pcap");
    let env = EmuEnv::new("rs-txvlan", single(vec![PortDef::pcap_tx(MAC_A, &wire)])).unwrap();
    let mut t = spawn(&env, &["--forward-mode=txonly"]);
    for c in [
        "port stop 0",
        &format!("tx_vlan set 0 {VID}"),
        "port start 0",
    ] {
        let o = cmd(&mut t, c);
        assert!(!o.contains("rror") && !o.contains("nvalid"), "{c}: {o}");
    }
    let phase = |t: &mut Testpmd, txpkts: &str, at_least: u64| {
        let o = cmd(t, &format!("set txpkts {txpkts}"));
        assert!(!o.contains("rror") && !o.contains("nvalid"), "{o}");
        cmd(t, "start");
        wait_dev(t, "tagged traffic", |c| {
            c.port(MAC_A).unwrap().tx_packets >= at_least
        });
        cmd(t, "stop");
        settled(t).port(MAC_A).unwrap().tx_packets
    };
    let single_seg = phase(&mut t, "64", 200);
    let total = phase(&mut t, "32,32", single_seg + 200);
    let s = t.port_stats(0).unwrap();
    let d = settled(&t);
    let d = d.port(MAC_A).unwrap();
    assert_eq!((s.tx_packets, d.tx_packets), (total, total));
    assert_eq!(d.tx_bytes, 68 * total, "64-byte frames plus the tag");
    assert_eq!(s.tx_bytes, d.tx_bytes, "the driver counts the tag too");
    assert_eq!(s.tx_errors, 0);
    assert!(d.drops.is_empty(), "device drops {:?}", d.drops);
    t.quit().unwrap();
    let got = mana_emu::backend::read_pcap(&wire).unwrap();
    assert_eq!(got.len() as u64, total);
    for (i, f) in got.iter().enumerate() {
        let mut f = f.clone();
        assert_eq!(
            pkt::vlan_strip(&mut f),
            Some(VID),
            "frame {i} carries the tag"
        );
        assert_eq!(
            (f.len(), &f[12..14]),
            (64, &[8u8, 0][..]),
            "frame {i}: IPv4 under the tag"
        );
    }
    // The two shapes put the same headers on the wire (txonly writes only
    // the headers; a chained frame's payload is whatever its second mbuf
    // held before).
    let headers = 14 + 4 + 20 + 8;
    assert_eq!(
        got[0][..headers],
        got[got.len() - 1][..headers],
        "one segment and two give one frame"
    );
}

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

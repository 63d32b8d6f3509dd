//! One MANA function carries several ports, which an application may take
//! one at a time: `port attach <pci>,mac=<mac>` adds the port of that MAC
//! to a function that is probed already.

mod common;

use common::*;

fn pair() -> Config {
    single(vec![
        PortDef::new(MAC_A, &format!(r#"{{ kind = "pair", peer = "{MAC_B}" }}"#)),
        PortDef::new(MAC_B, &format!(r#"{{ kind = "pair", peer = "{MAC_A}" }}"#)),
    ])
}

/// Both ports detached with their function, then attached back one MAC at
/// a time; the two then forward to each other, counted at both ends.
#[test]
fn the_ports_of_a_probed_function_are_attached_one_mac_at_a_time() {
    if skip() {
        return;
    }
    let env = EmuEnv::new("attach-one-by-one", pair()).unwrap();
    let mut t = spawn_with(&env, &[&format!("{PCI},mac={MAC_A}")], &[], &[]);
    cmd(&mut t, "port stop all");
    let o = cmd(&mut t, "port detach 0");
    assert_has(&o, "Device is detached");
    let o = cmd(&mut t, &format!("port attach {PCI},mac={MAC_A}"));
    assert_has(&o, "is attached");
    let o = cmd(&mut t, &format!("port attach {PCI},mac={MAC_B}"));
    assert!(!o.contains("Failed to attach"), "{o}");
    assert_has(&o, "is attached. Now total ports is 2");
    // Attaching a MAC that is there already adds nothing and fails nothing.
    let o = cmd(&mut t, &format!("port attach {PCI},mac={MAC_B}"));
    assert!(!o.contains("Failed to attach"), "{o}");
    let info = cmd(&mut t, "show port info all");
    for m in [MAC_A, MAC_B] {
        assert_has(&info, &format!("MAC address: {}", m.to_uppercase()));
    }
    assert_eq!(info.matches("Infos for port").count(), 2, "{info}");
    cmd(&mut t, "set fwd txonly");
    cmd(&mut t, "port start all");
    cmd(&mut t, "start");
    wait_dev(&t, "both ports send", |c| {
        [MAC_A, MAC_B]
            .iter()
            .all(|m| c.port(m).is_some_and(|p| p.tx_packets > 1000))
    });
    cmd(&mut t, "stop");
    cmd(&mut t, "port stop all");
    let dev = settled(&t);
    let (a, b) = (dev.port(MAC_A).unwrap(), dev.port(MAC_B).unwrap());
    let info = cmd(&mut t, "show port info all");
    let (pa, pb) = (port_of(&info, MAC_A), port_of(&info, MAC_B));
    let (sa, sb) = (t.port_stats(pa).unwrap(), t.port_stats(pb).unwrap());
    assert_eq!((sa.tx_packets, sb.tx_packets), (a.tx_packets, b.tx_packets));
    assert_eq!((sa.tx_bytes, sb.tx_bytes), (a.tx_bytes, b.tx_bytes));
    // txonly does not poll: each port received a ring of frames and the
    // device dropped the rest for want of buffers; nothing else was lost.
    for (tx, rx) in [(a, b), (b, a)] {
        assert_eq!(
            tx.tx_packets,
            rx.rx_packets + rx.drops("no_rx_buffer"),
            "{rx:?}"
        );
        assert!(rx.rx_packets > 0);
    }
    t.quit().unwrap();
}

/// The port id `show port info all` gives the port of `mac`.
fn port_of(info: &str, mac: &str) -> u16 {
    let i = info
        .find(&format!("MAC address: {}", mac.to_uppercase()))
        .unwrap_or_else(|| panic!("no {mac} in {info}"));
    let head = &info[..i];
    let k = head.rfind("Infos for port ").unwrap() + "Infos for port ".len();
    head[k..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

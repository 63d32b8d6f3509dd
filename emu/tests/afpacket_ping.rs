//! The kernel stack as the peer: two network namespaces, each behind a veth
//! whose host end is an emulated MANA port (AF_PACKET backend, vPort MAC
//! filtering on). The upstream C driver under testpmd forwards between the
//! ports (mac forwarding), and `ping` goes from one namespace to the other
//! through DPDK.
//!
//! Needs root (netns, veth); skipped otherwise.

use mana_emu::config::{BackendConfig, PortConfig};
use mana_emu::harness::*;
use std::process::Command;
use std::time::Duration;

mod common;
use common::{config, ip, port, A, B};

/// Two namespaces with a veth each; removed on drop.
struct Net {
    ns: [String; 2],
    host: [String; 2],
}

impl Net {
    fn new() -> Result<Net, String> {
        let s = std::process::id() % 100_000;
        let n = Net {
            ns: [format!("meA{s}"), format!("meB{s}")],
            host: [format!("mh{s}a"), format!("mh{s}b")],
        };
        for i in 0..2 {
            let inner = format!("mn{s}{}", ["a", "b"][i]);
            ip(&["netns", "add", &n.ns[i]])?;
            // No IPv6 chatter (router solicitations, DAD): only the ping.
            let _ = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &n.ns[i],
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ])
                .status();
            ip(&[
                "link", "add", &n.host[i], "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &inner, "netns", &n.ns[i]])?;
            ip(&["-n", &n.ns[i], "link", "set", &inner, "name", "eth0"])?;
            ip(&[
                "-n",
                &n.ns[i],
                "addr",
                "add",
                &format!("10.77.0.{}/24", i + 1),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &n.ns[i], "link", "set", "eth0", "up"])?;
            ip(&["-n", &n.ns[i], "link", "set", "lo", "up"])?;
            ip(&["link", "set", &n.host[i], "up"])?;
        }
        Ok(n)
    }

    fn mac(&self, i: usize) -> String {
        let out = ip(&["-n", &self.ns[i], "-o", "link", "show", "eth0"]).unwrap();
        let p = out.find("link/ether ").unwrap() + 11;
        out[p..p + 17].to_string()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for i in 0..2 {
            let _ = ip(&["link", "del", &self.host[i]]);
            let _ = ip(&["netns", "del", &self.ns[i]]);
        }
    }
}

#[test]
fn ping_between_namespaces_through_testpmd() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !testpmd_available() || ip(&["-V"]).is_err() {
        eprintln!("needs root, iproute2 and dpdk-testpmd: skipping");
        return;
    }
    let net = Net::new().expect("netns + veth setup");
    let af_port = |mac: &str, ifname: &str| PortConfig {
        mac_filter: true,
        ..port(
            mac,
            BackendConfig::AfPacket {
                ifname: ifname.into(),
            },
        )
    };
    let c = config(vec![af_port(A, &net.host[0]), af_port(B, &net.host[1])]);
    // The namespaces reach each other's IP through the DPDK ports' MACs,
    // as VMs behind MANA vPorts do.
    ip(&[
        "-n",
        &net.ns[0],
        "neigh",
        "add",
        "10.77.0.2",
        "lladdr",
        A,
        "dev",
        "eth0",
    ])
    .unwrap();
    ip(&[
        "-n",
        &net.ns[1],
        "neigh",
        "add",
        "10.77.0.1",
        "lladdr",
        B,
        "dev",
        "eth0",
    ])
    .unwrap();
    let env = EmuEnv::new("ping", c).unwrap();
    let (m0, m1) = (net.mac(0), net.mac(1));
    let mut t = Testpmd::builder(&env)
        .driver(upstream_c_driver().unwrap())
        .preloads(queue_state_shim().unwrap())
        .args(&[
            "--rxd=256",
            "--txd=256",
            "--forward-mode=mac",
            &format!("--eth-peer=0,{m0}"),
            &format!("--eth-peer=1,{m1}"),
        ])
        .timeout(Duration::from_secs(90))
        .spawn()
        .unwrap();
    t.cmd("start").unwrap();
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.ns[0],
            "ping",
            "-c",
            "5",
            "-i",
            "0.2",
            // Until 5 replies came (a deadline that only catches a hang):
            // `-W` alone waits two round trips for the last reply once any
            // came, and lost it on a busy machine.
            "-w",
            "120",
            "10.77.0.2",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ping failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(replies(&text) >= 5, "{text}");
    // Quiesce: everything the device delivered has been polled.
    let mut tries = 0;
    let (s0, s1, dev) = loop {
        let s0 = t.port_stats(0).unwrap();
        let s1 = t.port_stats(1).unwrap();
        let dev = t.device_counters().unwrap();
        if (s0.rx_packets, s1.rx_packets)
            == (
                dev.port(A).unwrap().rx_packets,
                dev.port(B).unwrap().rx_packets,
            )
            || tries > 2400
        {
            break (s0, s1, dev);
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    t.cmd("stop").unwrap();
    let (a, b) = (dev.port(A).unwrap(), dev.port(B).unwrap());
    // Echo requests: ns A -> port A -> testpmd -> port B -> ns B; replies back.
    assert!(
        a.rx_packets >= 5 && b.tx_packets >= 5 && b.rx_packets >= 5 && a.tx_packets >= 5,
        "{a:?} {b:?}"
    );
    assert_eq!(s0.rx_packets, a.rx_packets);
    assert_eq!(s1.rx_packets, b.rx_packets);
    assert_eq!(s0.rx_bytes, a.rx_bytes);
    t.quit().unwrap();
}

/// The replies `ping` reports: with a deadline (`-w`) it sends until its
/// count is answered, so it may have sent more.
fn replies(ping: &str) -> u64 {
    ping.lines()
        .find_map(|l| l.split_once(" packets transmitted, "))
        .and_then(|(_, rest)| rest.split_once(" received"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0)
}

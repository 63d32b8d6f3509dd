//! VLAN tags through the AF_PACKET backend: a kernel on the far end of a
//! veth sends single- and double-tagged frames (802.1Q and 802.1ad outer
//! tags) and the emulated port receives them whole: every tag, TPID and VID
//! (seen in the buffer and in the CQE, as the device strips an outer 802.1Q
//! tag). The kernel strips the outer tag before packet sockets see a frame;
//! the backend puts it back from the socket's `PACKET_AUXDATA`.
//!
//! Needs root (netns, veth); skipped otherwise.

use mana_emu::config::BackendConfig;
use mana_emu::config::PortConfig;
use mana_emu::pkt::{self, build};
use mana_emu::testing::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

mod common;
use common::{config, ip, mac, port, rx_queue, A, B};

/// A namespace holding one end of a veth (`inner`); the other end (`host`)
/// stays in the root namespace for the emulator. Removed on drop.
struct Net {
    ns: String,
    host: String,
    inner: String,
}

impl Net {
    fn new() -> Result<Net, String> {
        let s = std::process::id() % 100_000;
        let n = Net {
            ns: format!("mvlan{s}"),
            host: format!("mvh{s}"),
            inner: format!("mvi{s}"),
        };
        ip(&["netns", "add", &n.ns])?;
        ip(&[
            "link", "add", &n.host, "type", "veth", "peer", "name", &n.inner,
        ])?;
        ip(&["link", "set", &n.inner, "netns", &n.ns])?;
        // No IPv6 chatter on either end: only the frames the test sends.
        let v6 = |dev: &str| format!("net.ipv6.conf.{dev}.disable_ipv6=1");
        let _ = Command::new("sysctl").args(["-qw", &v6(&n.host)]).status();
        let _ = Command::new("ip")
            .args(["netns", "exec", &n.ns, "sysctl", "-qw", &v6(&n.inner)])
            .status();
        ip(&["-n", &n.ns, "link", "set", &n.inner, "up"])?;
        ip(&["link", "set", &n.host, "up"])?;
        Ok(n)
    }

    /// Sends `frames` from the namespace's end of the veth, through a
    /// packet socket of a thread that joined the namespace.
    fn send_inside(&self, frames: &[Vec<u8>]) {
        let path = format!("/var/run/netns/{}", self.ns);
        let inner = self.inner.clone();
        let frames = frames.to_vec();
        std::thread::spawn(move || {
            let nsfile = std::fs::File::open(&path).expect("namespace file");
            // SAFETY: setns on a namespace fd we hold; it moves only this
            // thread into the namespace.
            let r = unsafe { libc::setns(nsfile.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            // SAFETY: plain socket(2).
            let fd = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    0, // send only
                )
            };
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            // SAFETY: a fresh socket we own.
            let sock = unsafe { OwnedFd::from_raw_fd(fd) };
            let name = std::ffi::CString::new(inner).unwrap();
            // SAFETY: a NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
            assert_ne!(ifindex, 0, "{name:?} in the namespace");
            for f in &frames {
                // SAFETY: sockaddr_ll is plain data; all-zero is valid.
                let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                to.sll_family = libc::AF_PACKET as u16;
                to.sll_ifindex = ifindex as i32;
                to.sll_halen = 6;
                to.sll_addr[..6].copy_from_slice(&f[..6]);
                // SAFETY: sending from a live buffer to an address of the
                // size given.
                let r = unsafe {
                    libc::sendto(
                        sock.as_raw_fd(),
                        f.as_ptr().cast(),
                        f.len(),
                        0,
                        (&to as *const libc::sockaddr_ll).cast(),
                        std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                    )
                };
                assert_eq!(
                    r,
                    f.len() as isize,
                    "sendto: {}",
                    std::io::Error::last_os_error()
                );
            }
        })
        .join()
        .expect("sender thread");
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.host]);
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

/// A tag: TPID, then TCI (PCP 3 bits, DEI, VID 12 bits).
fn tag(f: &[u8], tpid: u16, tci: u16) -> Vec<u8> {
    let mut v = f[..12].to_vec();
    v.extend_from_slice(&tpid.to_be_bytes());
    v.extend_from_slice(&tci.to_be_bytes());
    v.extend_from_slice(&f[12..]);
    v
}

#[test]
fn tagged_frames_from_a_veth_arrive_with_every_tag() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || ip(&["-V"]).is_err() {
        eprintln!("afpacket_vlan: needs root and iproute2: SKIPPED");
        return;
    }
    let net = Net::new().expect("netns + veth setup");
    let c = config(vec![PortConfig {
        mac_filter: true,
        ..port(
            A,
            BackendConfig::AfPacket {
                ifname: net.host.clone(),
            },
        )
    }]);
    let dev = TestDevice::new("afvlan", c);
    let ctx = dev.open();
    let mut rx = rx_queue(&ctx, 16);
    let plain = |i: u8| build::udp4(mac(A), mac(B), [10, 0, 0, i], [10, 0, 1, 1], 1000, 2000, 40);
    let frames = vec![
        // Untagged: unchanged.
        plain(1),
        // 802.1Q, VID 100, PCP 5.
        tag(&plain(2), 0x8100, (5 << 13) | 100),
        // 802.1ad outer (VID 200, DEI) over 802.1Q inner (VID 100).
        tag(&tag(&plain(3), 0x8100, 100), 0x88a8, (1 << 12) | 200),
        // Two 802.1Q tags (the older QinQ), outer VID 4094 PCP 7.
        tag(&tag(&plain(4), 0x8100, 7), 0x8100, (7 << 13) | 4094),
        // A priority tag (VID 0, PCP 6).
        tag(&plain(5), 0x8100, 6 << 13),
    ];
    net.send_inside(&frames);
    let got = rx.wait(0, frames.len());
    let mut bytes = 0;
    // The device strips an outer 802.1Q tag into the CQE (as MANA does)
    // and leaves 802.1ad tags in the frame: what each frame must look like
    // in the buffer, with the VLAN id the CQE must carry.
    for (i, (p, sent)) in got.iter().zip(&frames).enumerate() {
        let mut want = sent.clone();
        let tci = pkt::vlan_strip(&mut want);
        let f = p.cqe.rx_flags();
        assert_eq!(
            (f.vlan_present, f.vlan_id),
            (tci.is_some(), tci.unwrap_or(0) & 0xfff),
            "frame {i}: the CQE's tag"
        );
        assert_eq!(p.data, want, "frame {i}: {:02x?}\nsent {sent:02x?}", p.data);
        bytes += want.len();
    }
    let counters = dev.counters();
    let a = counters.port(A).unwrap();
    // (The device counts the bytes it placed in the buffers.)
    assert_eq!((a.rx_packets, a.rx_bytes), (5, bytes as u64), "{a:?}");
    assert!(a.drops.is_empty(), "{a:?}");
}

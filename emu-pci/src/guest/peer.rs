//! The host-side peer: a network namespace with one end of a veth pair
//! (address 10.99.0.1/24), whose other end the function's port drives
//! through an AF_PACKET socket. The namespace's kernel answers pings and
//! the harness runs TCP endpoints in it; both ends' counters are read back.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

pub const PEER_IP: &str = "10.99.0.1";
pub const GUEST_IP: &str = "10.99.0.2";

fn ip(args: &[&str]) -> io::Result<String> {
    let o = Command::new("ip").args(args).output()?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )))
    }
}

/// Packet and byte counts of an interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

impl std::ops::Sub for LinkCounters {
    type Output = LinkCounters;
    fn sub(self, o: LinkCounters) -> LinkCounters {
        LinkCounters {
            rx_packets: self.rx_packets - o.rx_packets,
            rx_bytes: self.rx_bytes - o.rx_bytes,
            tx_packets: self.tx_packets - o.tx_packets,
            tx_bytes: self.tx_bytes - o.tx_bytes,
        }
    }
}

pub struct Peer {
    pub ns: String,
    /// The veth end in the root namespace (the port's backend).
    pub host_if: String,
    /// The end inside the namespace.
    pub peer_if: String,
}

impl Peer {
    pub fn new() -> io::Result<Peer> {
        let s = std::process::id() % 100_000;
        let p = Peer {
            ns: format!("nmpci{s}"),
            host_if: format!("nmp{s}h"),
            peer_if: "eth0".into(),
        };
        remove_stale();
        let _ = ip(&["netns", "del", &p.ns]);
        let _ = ip(&["link", "del", &p.host_if]);
        ip(&["netns", "add", &p.ns])?;
        let inner = format!("nmp{s}p");
        ip(&[
            "link", "add", &p.host_if, "type", "veth", "peer", "name", &inner,
        ])?;
        ip(&["link", "set", &inner, "netns", &p.ns])?;
        ip(&["-n", &p.ns, "link", "set", &inner, "name", &p.peer_if])?;
        // Only the traffic the tests make: no IPv6 on either end.
        for (ns, ifn) in [
            (None, p.host_if.as_str()),
            (Some(p.ns.as_str()), p.peer_if.as_str()),
        ] {
            let key = format!("net.ipv6.conf.{ifn}.disable_ipv6=1");
            let mut c = Command::new("sysctl");
            if let Some(ns) = ns {
                c = Command::new("ip");
                c.args(["netns", "exec", ns, "sysctl"]);
            }
            let _ = c.args(["-qw", &key]).status();
        }
        // A wire carries whole frames: the namespace's veth must not hand the
        // port partial checksums (CHECKSUM_PARTIAL crosses a veth as is) or
        // 64 KiB GSO frames.
        let o = Command::new("ip")
            .args(["netns", "exec", &p.ns, "ethtool", "-K", &p.peer_if])
            .args(["tx", "off", "tso", "off", "gso", "off", "gro", "off"])
            .output()?;
        if !o.status.success() {
            return Err(io::Error::other(format!(
                "ethtool -K {} in {}: {}",
                p.peer_if,
                p.ns,
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        ip(&[
            "-n",
            &p.ns,
            "addr",
            "add",
            &format!("{PEER_IP}/24"),
            "dev",
            &p.peer_if,
        ])?;
        ip(&["-n", &p.ns, "link", "set", &p.peer_if, "up"])?;
        ip(&["-n", &p.ns, "link", "set", "lo", "up"])?;
        ip(&["link", "set", &p.host_if, "up"])?;
        Ok(p)
    }

    /// Both veth ends' MTU (frames beyond 1500 bytes cross the wire).
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let m = mtu.to_string();
        ip(&["link", "set", &self.host_if, "mtu", &m])?;
        ip(&["-n", &self.ns, "link", "set", &self.peer_if, "mtu", &m])?;
        Ok(())
    }

    /// The counters of the namespace's interface.
    pub fn counters(&self) -> io::Result<LinkCounters> {
        let out = ip(&[
            "-n",
            &self.ns,
            "-j",
            "-s",
            "link",
            "show",
            "dev",
            &self.peer_if,
        ])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| io::Error::other(format!("ip -j: {e}")))?;
        let s = &v[0]["stats64"];
        let g = |d: &str, k: &str| s[d][k].as_u64().unwrap_or(0);
        Ok(LinkCounters {
            rx_packets: g("rx", "packets"),
            rx_bytes: g("rx", "bytes"),
            tx_packets: g("tx", "packets"),
            tx_bytes: g("tx", "bytes"),
        })
    }

    /// The namespace's TCP sockets as `ss -tnoi` shows them (queues,
    /// retransmission timers), or why they could not be read.
    pub fn tcp_sockets(&self) -> String {
        match Command::new("ip")
            .args(["netns", "exec", &self.ns, "ss", "-tnoi"])
            .output()
        {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => format!("ss -tnoi in {}: {e}\n", self.ns),
        }
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn in_ns<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> std::thread::JoinHandle<io::Result<T>> {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path)?;
            // SAFETY: setns on a namespace file we opened; it changes the
            // network namespace of this thread only.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })
    }

    /// Accepts one TCP connection on `port` and reads it to the end:
    /// returns the bytes received.
    pub fn tcp_sink(
        &self,
        port: u16,
        timeout: Duration,
    ) -> std::thread::JoinHandle<io::Result<Vec<u8>>> {
        self.in_ns(move || {
            let l = TcpListener::bind((PEER_IP, port))?;
            l.set_nonblocking(true)?;
            let t0 = std::time::Instant::now();
            let (mut s, _) = loop {
                match l.accept() {
                    Ok(c) => break c,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock && t0.elapsed() < timeout => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(e) => return Err(e),
                }
            };
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(timeout))?;
            let mut v = Vec::new();
            s.read_to_end(&mut v)?;
            Ok(v)
        })
    }

    /// Connects to `addr:port` (retrying until `timeout`) and sends `data`;
    /// returns the local (source) port of the connection.
    pub fn tcp_send(
        &self,
        addr: &'static str,
        port: u16,
        data: Vec<u8>,
        timeout: Duration,
    ) -> std::thread::JoinHandle<io::Result<u16>> {
        self.in_ns(move || {
            let t0 = std::time::Instant::now();
            let mut s = loop {
                match TcpStream::connect((addr, port)) {
                    Ok(s) => break s,
                    Err(_) if t0.elapsed() < timeout => {
                        std::thread::sleep(Duration::from_millis(100))
                    }
                    Err(e) => return Err(e),
                }
            };
            let local = s.local_addr()?.port();
            s.set_write_timeout(Some(timeout))?;
            s.write_all(&data)?;
            s.shutdown(std::net::Shutdown::Write)?;
            // Wait for the guest to close its side (all data consumed).
            s.set_read_timeout(Some(timeout))?;
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            Ok(local)
        })
    }
}

/// Removes the namespaces and links of runs whose process is gone (killed
/// before its drop could clean up).
fn remove_stale() {
    let Ok(dir) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("nmpci")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Names carry the pid modulo 100000: a live process with that
        // suffix may own it; leave those.
        let alive = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|p| {
                p.file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                    .is_some_and(|n| n % 100_000 == pid)
            });
        if !alive {
            let _ = ip(&["netns", "del", &name]);
            let _ = ip(&["link", "del", &format!("nmp{pid}h")]);
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.ns]);
        let _ = ip(&["link", "del", &self.host_if]);
    }
}

/// Sends one raw Ethernet frame out of `ifname` from inside namespace `ns`
/// (what the port receives, as if from the wire).
pub fn send_raw(ns: &str, ifname: &str, frame: Vec<u8>) -> io::Result<()> {
    let path = format!("/var/run/netns/{ns}");
    let ifname =
        std::ffi::CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    std::thread::spawn(move || {
        let nsf = std::fs::File::open(&path)?;
        // SAFETY: setns on a namespace file we opened; this thread only.
        if unsafe { libc::setns(nsf.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a plain socket(2) call; the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        // SAFETY: `ifname` is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(ifname.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sockaddr_ll is plain data, all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = index as i32;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: sending `frame` (a valid buffer) to a valid sockaddr_ll.
        let n = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n != frame.len() as isize {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
    .join()
    .map_err(|_| io::Error::other("raw send thread panicked"))?
}

//! Where a port's frames go and come from: loopback, sink, a paired port,
//! pcap files, or an AF_PACKET socket on a Linux interface.

use crate::config::BackendConfig;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

pub enum Backend {
    Loopback,
    Sink,
    /// Global port index of the peer.
    Pair(usize),
    Pcap {
        rx: VecDeque<Vec<u8>>,
        tx: Option<BufWriter<File>>,
    },
    AfPacket(OwnedFd),
}

impl Backend {
    pub fn open(
        cfg: &BackendConfig,
        peer_index: impl Fn(&str) -> Option<usize>,
    ) -> io::Result<Backend> {
        Ok(match cfg {
            BackendConfig::Loopback => Backend::Loopback,
            BackendConfig::Sink => Backend::Sink,
            BackendConfig::Pair { peer } => {
                Backend::Pair(peer_index(&peer.to_ascii_lowercase()).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("pair peer {peer}"))
                })?)
            }
            BackendConfig::Pcap { rx, tx } => Backend::Pcap {
                rx: match rx {
                    Some(p) => read_pcap(p)?.into(),
                    None => VecDeque::new(),
                },
                tx: match tx {
                    Some(p) => Some(pcap_writer(p)?),
                    None => None,
                },
            },
            BackendConfig::AfPacket { ifname } => Backend::AfPacket(af_packet_open(ifname)?),
        })
    }

    pub fn flush(&mut self) {
        if let Backend::Pcap { tx: Some(w), .. } = self {
            let _ = w.flush();
        }
    }
}

const PCAP_MAGIC: u32 = 0xa1b2_c3d4;

pub fn pcap_writer(path: &Path) -> io::Result<BufWriter<File>> {
    let mut w = BufWriter::new(File::create(path)?);
    w.write_all(&PCAP_MAGIC.to_le_bytes())?;
    w.write_all(&2u16.to_le_bytes())?;
    w.write_all(&4u16.to_le_bytes())?;
    w.write_all(&0i32.to_le_bytes())?;
    w.write_all(&0u32.to_le_bytes())?;
    w.write_all(&65535u32.to_le_bytes())?;
    w.write_all(&1u32.to_le_bytes())?; // LINKTYPE_ETHERNET
    w.flush()?;
    Ok(w)
}

pub fn pcap_write(w: &mut impl Write, frame: &[u8]) -> io::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    w.write_all(&(now.as_secs() as u32).to_le_bytes())?;
    w.write_all(&now.subsec_micros().to_le_bytes())?;
    w.write_all(&(frame.len() as u32).to_le_bytes())?;
    w.write_all(&(frame.len() as u32).to_le_bytes())?;
    w.write_all(frame)
}

/// Reads every frame of a classic (microsecond or nanosecond, either byte
/// order) Ethernet pcap file.
pub fn read_pcap(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let mut data = Vec::new();
    File::open(path)?.read_to_end(&mut data)?;
    parse_pcap(&data).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

pub fn parse_pcap(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    if data.len() < 24 {
        return Err("short pcap header".into());
    }
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let swap = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => false,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => true,
        _ => return Err("not a pcap file".into()),
    };
    let rd = |b: &[u8]| {
        let v = u32::from_le_bytes(b.try_into().unwrap());
        if swap {
            v.swap_bytes()
        } else {
            v
        }
    };
    let mut off = 24;
    let mut out = Vec::new();
    while off + 16 <= data.len() {
        let incl = rd(&data[off + 8..off + 12]) as usize;
        off += 16;
        if off + incl > data.len() {
            return Err("truncated pcap record".into());
        }
        out.push(data[off..off + incl].to_vec());
        off += incl;
    }
    Ok(out)
}

fn af_packet_open(ifname: &str) -> io::Result<OwnedFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            proto,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let cname =
        std::ffi::CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface {ifname}"),
        ));
    }
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a properly initialised sockaddr_ll of the given size.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Do not read back what we send ourselves.
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with an int option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    // The outer VLAN tag the kernel strips on receive, handed back with
    // each frame (see af_packet_recv).
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with an int option value on our socket.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_AUXDATA,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // Room for a TCP window of frames arriving while the device thread is
    // busy (a guest under software emulation drains slowly): the socket
    // would otherwise drop them, as a full wire FIFO does.
    let size: libc::c_int = AF_PACKET_RCVBUF;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: setsockopt with an int option value on our socket.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            break;
        }
    }
    // Promiscuous membership, so frames for the emulated MAC are seen.
    // SAFETY: packet_mreq is plain data.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex as i32;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    // SAFETY: setsockopt with a packet_mreq value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&mr as *const libc::packet_mreq).cast(),
            std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
        )
    };
    Ok(owned)
}

pub fn af_packet_send(fd: &OwnedFd, frame: &[u8]) -> bool {
    // SAFETY: sending from a valid buffer on our socket.
    let r = unsafe {
        libc::send(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            libc::MSG_DONTWAIT,
        )
    };
    r == frame.len() as isize
}

/// Receive buffer of an AF_PACKET backend (SO_RCVBUFFORCE as root).
const AF_PACKET_RCVBUF: libc::c_int = 32 << 20;

/// Frames the socket dropped for lack of buffer space since the last call
/// (`PACKET_STATISTICS`, which resets on read).
pub fn af_packet_drops(fd: &OwnedFd) -> u64 {
    // SAFETY: tpacket_stats is plain data; all-zero is valid.
    let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: getsockopt into a tpacket_stats of the length passed.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if r == 0 {
        u64::from(st.tp_drops)
    } else {
        0
    }
}

/// Room left before a received frame for the VLAN tag the kernel took off.
const VLAN_HEADROOM: usize = 4;

/// Receives one frame if available; returns where in `buf` it lies.
///
/// The kernel strips the outer VLAN tag of a frame it receives (the veth's
/// receive path untags in software) before packet sockets see it, and hands
/// the tag over as `PACKET_AUXDATA`: the tag is put back, with its TPID
/// (802.1ad 0x88a8 or 802.1Q 0x8100), so the port receives the frame that
/// was on the wire.
pub fn af_packet_recv(fd: &OwnedFd, buf: &mut [u8]) -> Option<std::ops::Range<usize>> {
    let room = buf.len().checked_sub(VLAN_HEADROOM)?;
    let mut iov = libc::iovec {
        // SAFETY: VLAN_HEADROOM <= buf.len() (checked above).
        iov_base: unsafe { buf.as_mut_ptr().add(VLAN_HEADROOM) }.cast(),
        iov_len: room,
    };
    // u64s: aligned for the cmsghdr; room for one tpacket_auxdata.
    let mut ctl = [0u64; 16];
    // SAFETY: msghdr is plain data; all-zero is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&ctl);
    // SAFETY: msg points at one iovec over `buf` past the headroom and at
    // `ctl`, both live and writable for the lengths given.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if r <= 0 {
        return None;
    }
    let n = (r as usize).min(room);
    let frame = VLAN_HEADROOM..VLAN_HEADROOM + n;
    let Some(aux) = vlan_auxdata(&msg) else {
        return Some(frame);
    };
    if aux.tp_status & libc::TP_STATUS_VLAN_VALID == 0 || n < 12 {
        return Some(frame);
    }
    let tpid = if aux.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        aux.tp_vlan_tpid
    } else {
        crate::pkt::ETH_P_8021Q
    };
    // The MAC addresses move into the headroom; the tag follows them.
    buf.copy_within(VLAN_HEADROOM..VLAN_HEADROOM + 12, 0);
    buf[12..14].copy_from_slice(&tpid.to_be_bytes());
    buf[14..16].copy_from_slice(&aux.tp_vlan_tci.to_be_bytes());
    Some(0..VLAN_HEADROOM + n)
}

/// The `PACKET_AUXDATA` control message of a received frame, if any.
fn vlan_auxdata(msg: &libc::msghdr) -> Option<libc::tpacket_auxdata> {
    // SAFETY: msg was filled by recvmsg; the CMSG macros walk its control
    // buffer within msg_controllen.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: c is a header inside the control buffer (CMSG_FIRSTHDR /
        // CMSG_NXTHDR return null past its end).
        let h = unsafe { &*c };
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        let want = unsafe { libc::CMSG_LEN(std::mem::size_of::<libc::tpacket_auxdata>() as u32) };
        if h.cmsg_level == libc::SOL_PACKET
            && h.cmsg_type == libc::PACKET_AUXDATA
            && h.cmsg_len as usize >= want as usize
        {
            // SAFETY: the header says its data holds a tpacket_auxdata;
            // read unaligned (the data of a cmsg need not be aligned for it).
            return Some(unsafe {
                std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::tpacket_auxdata>())
            });
        }
        // SAFETY: as above.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    None
}

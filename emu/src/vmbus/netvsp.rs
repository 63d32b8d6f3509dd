//! The network VSP: the host's side of one synthetic NIC.
//!
//! It owns what `uio_hv_generic` exposes (the primary channel's rings, the
//! interrupt and monitor pages, the receive and send buffers) and the
//! sub-channels it offers, and answers the guest's NVSP and RNDIS
//! messages: version and NDIS setup, buffers, sub-channels, the RNDIS
//! device (OIDs, filter, RSS), the data path switch, and the synthetic data
//! path itself (frames the guest sends go out on the shared wire; frames
//! from the wire the VF does not take go into the receive buffer). It also
//! associates the VF: after the guest's RNDIS device is up (if the guest
//! announced SR-IOV), and again after the VF's PCI function is hot-added.

use super::chanpkt::{self, Packet, RxRange};
use super::config::NetvscConfig;
use super::datapath;
use super::nvsp::{self, GuestMsg};
use super::ring::{ReadError, RingPair, WriteError};
use super::rndis::{self, Control, RssParams};
use super::sections::Sections;
use super::shm::SharedMem;
use super::sysfs;
use super::vswitch::{Link, NicLink, VfEvent};
use super::{ChannelReport, NetvscReport};
use std::collections::{BTreeMap, VecDeque};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

/// Receive-buffer section size (Hyper-V's).
const SECTION_SIZE: u32 = 0x6c0;
/// Send-buffer section size (Hyper-V's `NETVSC_SEND_SECTION_SIZE`).
const CHIM_SECTION_SIZE: u32 = 6144;
/// Packets taken from one ring per pass, frames delivered per pass.
const BUDGET: usize = 256;
/// Packets waiting for room in a channel's ring; RX frames beyond this
/// wait in the switch's queue instead.
const OUTQ_MAX: usize = 4096;
/// Protocol errors kept for the report.
const ERRORS_KEPT: usize = 16;

/// One channel: its rings and what it moved.
pub struct Channel {
    pub relid: u32,
    pub index: u16,
    pub rings: RingPair,
}

#[derive(Default)]
struct ChannelStats {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    guest_signals: u64,
}

/// The RNDIS device the guest initialized.
#[derive(Default)]
struct RndisDev {
    initialized: bool,
    filter: u32,
    rss: Option<RssParams>,
    offload_params: Vec<u8>,
}

#[derive(Default)]
struct Counters {
    control: BTreeMap<String, u64>,
    drops: BTreeMap<String, u64>,
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    vf_assoc_allocated: u64,
    vf_assoc_revoked: u64,
    datapath_to_vf: u64,
    datapath_to_synthetic: u64,
    ring_full: u64,
    rx_buffer_waits: u64,
    errors: VecDeque<String>,
}

impl Counters {
    fn count(map: &mut BTreeMap<String, u64>, key: &str, n: u64) {
        *map.entry(key.to_string()).or_default() += n;
    }
}

struct State {
    subchannels: Vec<Arc<Channel>>,
    stats: Vec<ChannelStats>,
    outq: Vec<VecDeque<Vec<u8>>>,
    nvs_version: u32,
    ndis_version: (u32, u32),
    mtu: u32,
    sriov: bool,
    rxbuf: bool,
    chim: bool,
    sections: Sections,
    rndis: RndisDev,
    datapath_vf: bool,
    vf_serial: u32,
    /// The initial association went out (after RNDIS init).
    vf_announced: bool,
    /// A scheduled association message: (when, allocated).
    vf_assoc_at: Option<(Instant, bool)>,
    /// The interrupt-control words the guest wrote to `/dev/uioN`.
    irq_writes: u64,
    counters: Counters,
    broken: Option<String>,
}

/// One synthetic NIC.
pub struct Nic {
    pub index: usize,
    pub cfg: NetvscConfig,
    root: PathBuf,
    link: Arc<Link>,
    pub primary: Arc<Channel>,
    int_page: SharedMem,
    monitor: SharedMem,
    recv: SharedMem,
    send: SharedMem,
    uio_guest: OwnedFd,
    uio_host: OwnedFd,
    /// (st_dev, st_ino) of the guest's end of `/dev/uioN`.
    pub uio_id: (u64, u64),
    gpadls: (u32, u32),
    st: Mutex<State>,
}

fn cname(s: String) -> CString {
    CString::new(s).expect("no NUL")
}

pub fn file_id(fd: RawFd) -> io::Result<(u64, u64)> {
    // SAFETY: fstat into a zeroed stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_dev, st.st_ino))
}

impl Nic {
    pub fn new(index: usize, cfg: NetvscConfig, root: PathBuf, link: Arc<Link>) -> io::Result<Nic> {
        let tag = |what: &str| cname(format!("netvsc{index}-{what}"));
        let primary = Arc::new(Channel {
            relid: cfg.relid(),
            index: 0,
            rings: RingPair::new(&tag("ring0"), cfg.ring_size)?,
        });
        // uio_hv_generic masks the primary channel's interrupts on open.
        primary.rings.mask_guest(true);
        let mut fds = [0; 2];
        // SAFETY: socketpair into a 2-int array.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors we own.
        let (uio_guest, uio_host) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: setting O_NONBLOCK on our own descriptor.
        unsafe { libc::fcntl(uio_host.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let uio_id = file_id(uio_guest.as_raw_fd())?;
        let sections = Sections::new(
            (sysfs::RECV_BUF_SIZE / SECTION_SIZE as usize) as u32,
            SECTION_SIZE,
        );
        Ok(Nic {
            index,
            gpadls: sysfs::gpadls(index),
            int_page: SharedMem::new(&tag("int"), sysfs::PAGE)?,
            monitor: SharedMem::new(&tag("monitor"), sysfs::PAGE)?,
            recv: SharedMem::new(&tag("recv"), sysfs::RECV_BUF_SIZE)?,
            send: SharedMem::new(&tag("send"), sysfs::SEND_BUF_SIZE)?,
            primary,
            uio_guest,
            uio_host,
            uio_id,
            root,
            link,
            st: Mutex::new(State {
                subchannels: Vec::new(),
                stats: vec![ChannelStats::default()],
                outq: vec![VecDeque::new()],
                nvs_version: 0,
                ndis_version: (0, 0),
                mtu: 1500,
                sriov: false,
                rxbuf: false,
                chim: false,
                sections,
                rndis: RndisDev::default(),
                datapath_vf: false,
                vf_serial: 0,
                vf_announced: false,
                vf_assoc_at: None,
                irq_writes: 0,
                counters: Counters::default(),
                broken: None,
            }),
            cfg,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn nic_link(&self) -> &NicLink {
        &self.link.nics[self.index]
    }

    /// A new descriptor for `/dev/uioN` (all share one socket, as all
    /// opens of a uio device share its interrupt state).
    pub fn open_uio(&self, cloexec: bool) -> io::Result<RawFd> {
        let cmd = if cloexec {
            libc::F_DUPFD_CLOEXEC
        } else {
            libc::F_DUPFD
        };
        // SAFETY: duplicating our own descriptor.
        let fd = unsafe { libc::fcntl(self.uio_guest.as_raw_fd(), cmd, 0) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(fd)
        }
    }

    /// The memory behind uio map `k` (fd and size).
    pub fn map(&self, k: usize) -> Option<(RawFd, usize)> {
        let m = match k {
            0 => self.primary.rings.mem(),
            1 => &self.int_page,
            2 => &self.monitor,
            3 => &self.recv,
            4 => &self.send,
            _ => return None,
        };
        Some((m.fd(), m.len()))
    }

    /// The ring memory of channel `relid` (its sysfs `ring` file).
    pub fn channel_fd(&self, relid: u32) -> Option<RawFd> {
        if relid == self.primary.relid {
            return Some(self.primary.rings.mem().fd());
        }
        self.state()
            .subchannels
            .iter()
            .find(|c| c.relid == relid)
            .map(|c| c.rings.mem().fd())
    }

    fn channels(&self, st: &State) -> Vec<Arc<Channel>> {
        let mut v = vec![self.primary.clone()];
        v.extend(st.subchannels.iter().cloned());
        v
    }

    fn error(st: &mut State, msg: String) {
        eprintln!("mana-emu: netvsc: {msg}");
        st.counters.errors.push_back(msg);
        while st.counters.errors.len() > ERRORS_KEPT {
            st.counters.errors.pop_front();
        }
    }

    /// One pass: VF events, the guest's packets on every channel, frames
    /// for the guest, queued packets, timers. True if anything happened.
    pub fn poll(&self) -> bool {
        let mut st = self.state();
        if st.broken.is_some() {
            return false;
        }
        let mut did = self.vf_events(&mut st);
        did |= self.guest_signals(&mut st);
        did |= self.irq_control(&mut st);
        for ch in self.channels(&st) {
            for _ in 0..BUDGET {
                match ch.rings.read() {
                    Ok(Some(p)) => {
                        did = true;
                        self.handle_packet(&mut st, &ch, &p);
                    }
                    Ok(None) => break,
                    Err(ReadError::Corrupt(why)) => {
                        let m = format!(
                            "channel {} ring from the guest: {why}; channel stopped",
                            ch.relid
                        );
                        Self::error(&mut st, m.clone());
                        st.broken = Some(m);
                        return true;
                    }
                }
            }
        }
        did |= self.deliver_rx(&mut st);
        did |= self.flush(&mut st);
        did |= self.timers(&mut st);
        did
    }

    /// Is there work the host should come back for soon?
    pub fn busy(&self) -> bool {
        let st = self.state();
        st.outq.iter().any(|q| !q.is_empty())
            || st.vf_assoc_at.is_some()
            || (self.nic_link().rx_pending() > 0 && st.rndis.initialized)
    }

    fn guest_signals(&self, st: &mut State) -> bool {
        let mut did = false;
        for (i, ch) in self.channels(st).iter().enumerate() {
            let id = sysfs::monitor_id(ch.relid) as usize;
            // struct vmbus_mon_page: trigger groups of (pending, armed) at 8.
            let off = 8 + (id / 32) * 8;
            if self.monitor.take_bits(off, 1 << (id % 32)) != 0 {
                st.stats[i].guest_signals += 1;
                did = true;
            }
            // Without monitor ids a guest sets its relid's bit in the second
            // half of the interrupt page.
            let r = ch.relid as usize;
            if self.int_page.take_bits(2048 + (r / 32) * 4, 1 << (r % 32)) != 0 {
                st.stats[i].guest_signals += 1;
                did = true;
            }
        }
        did
    }

    /// Words written to `/dev/uioN`: 1 unmasks the primary channel's
    /// interrupts (and signals the host), 0 masks them.
    fn irq_control(&self, st: &mut State) -> bool {
        let mut did = false;
        loop {
            let mut w = [0u8; 4];
            // SAFETY: a non-blocking read into a 4-byte buffer.
            let n = unsafe { libc::read(self.uio_host.as_raw_fd(), w.as_mut_ptr().cast(), 4) };
            if n != 4 {
                return did;
            }
            did = true;
            st.irq_writes += 1;
            self.primary.rings.mask_guest(i32::from_ne_bytes(w) == 0);
        }
    }

    fn interrupt_guest(&self) {
        // SAFETY: a non-blocking 4-byte write to our socket; a full buffer
        // means interrupts are pending already, as a uio count would say.
        unsafe {
            libc::write(
                self.uio_host.as_raw_fd(),
                1u32.to_ne_bytes().as_ptr().cast(),
                4,
            )
        };
    }

    // -----------------------------------------------------------------
    // Guest packets
    // -----------------------------------------------------------------

    fn handle_packet(&self, st: &mut State, ch: &Channel, raw: &[u8]) {
        let p = match Packet::decode(raw) {
            Ok(p) => p,
            Err(e) => {
                Counters::count(&mut st.counters.control, "bad_packet", 1);
                return Self::error(st, format!("channel {}: {e}", ch.relid));
            }
        };
        let msg = GuestMsg::decode(&p.data);
        Counters::count(&mut st.counters.control, &msg.name(), 1);
        match (p.ty, msg) {
            (chanpkt::TYPE_COMP, GuestMsg::RndisAck(_)) => {
                if !st.sections.release(p.xactid as u32) {
                    Self::error(
                        st,
                        format!(
                            "receive buffer ack for section {} not outstanding",
                            p.xactid
                        ),
                    );
                }
            }
            (chanpkt::TYPE_INBAND, GuestMsg::Rndis(r)) => self.rndis_msg(st, ch, &p, r, None),
            (chanpkt::TYPE_GPA, GuestMsg::Rndis(r)) => match p.gpa_ranges() {
                Some(ranges) => self.rndis_msg(st, ch, &p, r, Some(ranges)),
                None => Self::error(
                    st,
                    format!("channel {}: GPA packet without its ranges", ch.relid),
                ),
            },
            (chanpkt::TYPE_INBAND, m) => self.nvs_msg(st, ch, &p, m),
            (ty, m) => Self::error(
                st,
                format!(
                    "channel {}: {} in a packet of type {ty:#x}",
                    ch.relid,
                    m.name()
                ),
            ),
        }
    }

    fn reply(&self, st: &mut State, ch: &Channel, p: &Packet, msg: &[u8]) {
        if p.wants_completion() {
            let pkt = chanpkt::completion(p.xactid, msg);
            self.queue(st, ch.index as usize, pkt);
        }
    }

    fn nvs_msg(&self, st: &mut State, ch: &Channel, p: &Packet, m: GuestMsg) {
        match m {
            GuestMsg::Init(i) => {
                let (lo, hi) = (i.ver_min.get(), i.ver_max.get());
                let ver = nvsp::VERSIONS
                    .iter()
                    .rev()
                    .copied()
                    .find(|v| (lo..=hi).contains(v));
                let status = match ver {
                    Some(v) => {
                        st.nvs_version = v;
                        nvsp::STATUS_OK
                    }
                    None => nvsp::STATUS_FAILED,
                };
                self.reply(st, ch, p, nvsp::init_resp(status).as_bytes());
            }
            GuestMsg::NdisConf(c) => {
                st.mtu = c.mtu.get().saturating_sub(14).max(68);
                st.sriov = c.caps.get() & nvsp::NDIS_CONF_SRIOV != 0;
            }
            GuestMsg::NdisInit(n) => st.ndis_version = (n.ndis_major.get(), n.ndis_minor.get()),
            GuestMsg::RxbufConn(c) => {
                let ok = st.nvs_version != 0
                    && c.gpadl.get() == self.gpadls.0
                    && c.sig.get() == nvsp::RXBUF_SIG;
                if !ok {
                    Self::error(
                        st,
                        format!(
                            "receive buffer GPADL {:#x} signature {:#x} (NVS version {:#x}): refused",
                            c.gpadl.get(),
                            c.sig.get(),
                            st.nvs_version
                        ),
                    );
                }
                st.rxbuf = ok;
                st.sections.reset();
                let r = nvsp::rxbuf_connresp(
                    if ok {
                        nvsp::STATUS_OK
                    } else {
                        nvsp::STATUS_FAILED
                    },
                    SECTION_SIZE,
                    st.sections.count(),
                );
                self.reply(st, ch, p, r.as_bytes());
            }
            GuestMsg::RxbufDisconn => {
                st.rxbuf = false;
                st.sections.reset();
            }
            GuestMsg::ChimConn(c) => {
                let ok = st.nvs_version != 0
                    && c.gpadl.get() == self.gpadls.1
                    && c.sig.get() == nvsp::CHIM_SIG;
                if !ok {
                    Self::error(
                        st,
                        format!("send buffer GPADL {:#x}: refused", c.gpadl.get()),
                    );
                }
                st.chim = ok;
                let r = nvsp::chim_connresp(
                    if ok {
                        nvsp::STATUS_OK
                    } else {
                        nvsp::STATUS_FAILED
                    },
                    CHIM_SECTION_SIZE,
                );
                self.reply(st, ch, p, r.as_bytes());
            }
            GuestMsg::ChimDisconn => st.chim = false,
            GuestMsg::SetDatapath(d) => {
                let vf = d.active_path.get() == nvsp::DATAPATH_VF;
                if vf {
                    st.counters.datapath_to_vf += 1;
                } else {
                    st.counters.datapath_to_synthetic += 1;
                }
                st.datapath_vf = vf;
                self.nic_link().vf_datapath.store(vf, Ordering::Release);
            }
            GuestMsg::SubchReq(r) => {
                let want = if r.op.get() == nvsp::SUBCH_OP_ALLOC {
                    r.nsubch.get()
                } else {
                    0
                };
                let room = self
                    .cfg
                    .max_queues
                    .saturating_sub(1 + st.subchannels.len() as u32);
                let n = want.min(room);
                let mut made = 0;
                for _ in 0..n {
                    match self.offer_subchannel(st) {
                        Ok(()) => made += 1,
                        Err(e) => {
                            Self::error(st, format!("offering a sub-channel: {e}"));
                            break;
                        }
                    }
                }
                let status = if r.op.get() == nvsp::SUBCH_OP_ALLOC {
                    nvsp::STATUS_OK
                } else {
                    nvsp::STATUS_FAILED
                };
                self.reply(st, ch, p, nvsp::subch_resp(status, made).as_bytes());
            }
            m => Self::error(st, format!("channel {}: unexpected {}", ch.relid, m.name())),
        }
    }

    fn offer_subchannel(&self, st: &mut State) -> io::Result<()> {
        let index = st.subchannels.len() as u16 + 1;
        let relid = self.primary.relid + u32::from(index);
        let ch = Arc::new(Channel {
            relid,
            index,
            rings: RingPair::new(
                &cname(format!("netvsc{}-ring{index}", self.index)),
                self.cfg.ring_size,
            )?,
        });
        // uio_hv_generic: "Disable interrupts on sub channel".
        ch.rings.mask_guest(true);
        st.subchannels.push(ch);
        st.stats.push(ChannelStats::default());
        st.outq.push(VecDeque::new());
        sysfs::add_channel(&self.root, self.cfg.uuid(), relid, index)
    }

    // -----------------------------------------------------------------
    // RNDIS
    // -----------------------------------------------------------------

    fn rndis_msg(
        &self,
        st: &mut State,
        ch: &Channel,
        p: &Packet,
        r: nvsp::Rndis,
        gpa: Option<Vec<chanpkt::Gpa>>,
    ) {
        let chim = match r.chim_idx.get() {
            nvsp::CHIM_IDX_INVALID => None,
            idx => {
                let (idx, sz) = (idx as usize, r.chim_sz.get() as usize);
                let sect = CHIM_SECTION_SIZE as usize;
                if !st.chim || idx >= sysfs::SEND_BUF_SIZE / sect || sz > sect || sz == 0 {
                    Self::error(
                        st,
                        format!("send buffer section {idx} with {sz} bytes refused"),
                    );
                    return self.reply(st, ch, p, nvsp::rndis_ack(nvsp::STATUS_FAILED).as_bytes());
                }
                let mut b = vec![0u8; sz];
                self.send.region().read(idx * sect, &mut b);
                Some(b)
            }
        };
        let direct = match gpa {
            Some(ranges) => match super::guest::read(&ranges) {
                Ok(b) => Some(b),
                Err(e) => {
                    Self::error(st, format!("channel {}: {e}", ch.relid));
                    Counters::count(&mut st.counters.drops, "guest_memory", 1);
                    return self.reply(st, ch, p, nvsp::rndis_ack(nvsp::STATUS_FAILED).as_bytes());
                }
            },
            None => None,
        };
        if r.mtype.get() == nvsp::RNDIS_MTYPE_CTRL {
            // The transfer completes first; the RNDIS completion follows
            // through the receive buffer.
            self.reply(st, ch, p, nvsp::rndis_ack(nvsp::STATUS_OK).as_bytes());
            for b in chim.iter().chain(direct.iter()) {
                self.control(st, b);
            }
            return;
        }
        let mut ok = true;
        if let Some(b) = &chim {
            ok &= self.tx_aggregate(st, ch, b);
        }
        if let Some(b) = &direct {
            ok &= self.tx_one(st, ch, b, b.len()).is_some();
        }
        let status = if ok {
            nvsp::STATUS_OK
        } else {
            nvsp::STATUS_FAILED
        };
        self.reply(st, ch, p, nvsp::rndis_ack(status).as_bytes());
    }

    /// Packet messages one after the other in a send-buffer section.
    fn tx_aggregate(&self, st: &mut State, ch: &Channel, b: &[u8]) -> bool {
        let mut off = 0;
        while off < b.len() {
            match self.tx_one(st, ch, &b[off..], b.len() - off) {
                Some(len) if len > 0 => off += len,
                _ => return false,
            }
        }
        true
    }

    /// Sends the frame of the packet message at the start of `b`; returns
    /// the message's length.
    fn tx_one(&self, st: &mut State, ch: &Channel, b: &[u8], avail: usize) -> Option<usize> {
        let m = match rndis::PacketMsg::decode(b) {
            Ok(m) if m.len <= avail && m.data_off + m.data_len <= b.len() => m,
            Ok(m) => {
                Self::error(
                    st,
                    format!("RNDIS packet of {} bytes with {avail} available", m.len),
                );
                Counters::count(&mut st.counters.drops, "tx_malformed", 1);
                return None;
            }
            Err(e) => {
                Self::error(st, format!("channel {}: {e}", ch.relid));
                Counters::count(&mut st.counters.drops, "tx_malformed", 1);
                return None;
            }
        };
        let frame = b[m.data_off..m.data_off + m.data_len].to_vec();
        match datapath::tx_frames(&m, frame) {
            Ok(frames) => {
                for f in frames {
                    let s = &mut st.stats[ch.index as usize];
                    s.tx_packets += 1;
                    s.tx_bytes += f.len() as u64;
                    st.counters.tx_packets += 1;
                    st.counters.tx_bytes += f.len() as u64;
                    self.link.to_wire(self.nic_link().port, f);
                }
            }
            Err(e) => {
                Self::error(st, format!("channel {}: {e}", ch.relid));
                Counters::count(&mut st.counters.drops, "tx_offload", 1);
            }
        }
        Some(m.len)
    }

    /// Handles one control message; queues its completion on the primary
    /// channel. A message the host cannot parse gets none (as RNDIS has no
    /// request id to answer it by); the error is reported.
    fn control(&self, st: &mut State, b: &[u8]) {
        let c = match Control::decode(b) {
            Ok(c) => c,
            Err(e) => return Self::error(st, e.to_string()),
        };
        let reply = match c {
            Control::Init { rid, .. } => {
                st.rndis = RndisDev {
                    initialized: true,
                    ..RndisDev::default()
                };
                self.nic_link().attached.store(true, Ordering::Release);
                Some(rndis::init_cmplt(
                    rid,
                    rndis::STATUS_SUCCESS,
                    &rndis::InitParams {
                        max_pkts: 8,
                        max_size: 0x4000,
                        align_shift: 3,
                    },
                ))
            }
            Control::Halt { .. } => {
                st.rndis.initialized = false;
                self.nic_link().attached.store(false, Ordering::Release);
                None
            }
            Control::Query { rid, oid, .. } => {
                let (status, info) = self.query(st, oid);
                Counters::count(&mut st.counters.control, &format!("query_{oid:#010x}"), 1);
                Some(rndis::query_cmplt(rid, status, &info))
            }
            Control::Set { rid, oid, data } => {
                let status = self.set(st, oid, &data);
                Counters::count(&mut st.counters.control, &format!("set_{oid:#010x}"), 1);
                Some(rndis::set_cmplt(rid, status))
            }
            Control::Reset => Some(rndis::reset_cmplt()),
            Control::Keepalive { rid } => Some(rndis::keepalive_cmplt(rid)),
        };
        if let Some(r) = reply {
            self.to_guest_rndis(st, 0, &r, nvsp::RNDIS_MTYPE_CTRL);
        }
        // The guest's RNDIS device is up: associate the VF, if the guest
        // announced SR-IOV and the VF is there.
        if st.rndis.initialized && !st.vf_announced && st.sriov && self.cfg.vf {
            st.vf_announced = true;
            if self.nic_link().vf_present.load(Ordering::Acquire) {
                self.send_vf_assoc(st, true);
            }
        }
    }

    fn query(&self, st: &State, oid: u32) -> (u32, Vec<u8>) {
        let mac = crate::config::parse_mac(&self.cfg.mac).expect("normalized");
        let ok = rndis::STATUS_SUCCESS;
        match oid {
            rndis::OID_802_3_PERMANENT_ADDRESS | rndis::OID_802_3_CURRENT_ADDRESS => {
                (ok, mac.to_vec())
            }
            // 0: NdisMediaStateConnected.
            rndis::OID_GEN_MEDIA_CONNECT_STATUS => (ok, 0u32.to_le_bytes().to_vec()),
            // In units of 100 bit/s.
            rndis::OID_GEN_LINK_SPEED => (
                ok,
                (self.cfg.link_speed_mbps.saturating_mul(10_000))
                    .to_le_bytes()
                    .to_vec(),
            ),
            rndis::OID_GEN_MAXIMUM_FRAME_SIZE => (ok, st.mtu.to_le_bytes().to_vec()),
            rndis::OID_TCP_OFFLOAD_HARDWARE_CAPABILITIES => (ok, rndis::offload_caps(62_780)),
            rndis::OID_GEN_RECEIVE_SCALE_CAPABILITIES => (ok, rndis::rss_caps(self.cfg.max_queues)),
            _ => (rndis::STATUS_NOT_SUPPORTED, Vec::new()),
        }
    }

    fn set(&self, st: &mut State, oid: u32, data: &[u8]) -> u32 {
        match oid {
            rndis::OID_GEN_CURRENT_PACKET_FILTER => match data.get(..4) {
                Some(b) => {
                    st.rndis.filter = u32::from_le_bytes(b.try_into().unwrap());
                    rndis::STATUS_SUCCESS
                }
                None => rndis::STATUS_INVALID_DATA,
            },
            rndis::OID_TCP_OFFLOAD_PARAMETERS => {
                st.rndis.offload_params = data.to_vec();
                rndis::STATUS_SUCCESS
            }
            rndis::OID_GEN_RECEIVE_SCALE_PARAMETERS => match RssParams::decode(data) {
                Ok(p) => {
                    st.rndis.rss = Some(p);
                    rndis::STATUS_SUCCESS
                }
                Err(e) => {
                    Self::error(st, e);
                    rndis::STATUS_INVALID_DATA
                }
            },
            _ => rndis::STATUS_NOT_SUPPORTED,
        }
    }

    // -----------------------------------------------------------------
    // VF association
    // -----------------------------------------------------------------

    fn send_vf_assoc(&self, st: &mut State, allocated: bool) {
        st.vf_serial += 1;
        if allocated {
            st.counters.vf_assoc_allocated += 1;
        } else {
            st.counters.vf_assoc_revoked += 1;
        }
        let m = nvsp::vf_assoc(allocated, st.vf_serial);
        self.queue(st, 0, chanpkt::inband(0, 0, m.as_bytes()));
    }

    fn vf_events(&self, st: &mut State) -> bool {
        let evs = self.nic_link().take_events();
        for e in &evs {
            match e {
                VfEvent::Added if self.cfg.vf && st.sriov && st.rndis.initialized => {
                    st.vf_assoc_at = Some((
                        Instant::now() + Duration::from_millis(self.cfg.vf_add_delay_ms),
                        true,
                    ));
                }
                VfEvent::Removed
                    if self.cfg.vf && self.cfg.vf_revoke_on_remove && st.rndis.initialized =>
                {
                    st.vf_assoc_at = None;
                    self.send_vf_assoc(st, false);
                }
                _ => {}
            }
        }
        !evs.is_empty()
    }

    fn timers(&self, st: &mut State) -> bool {
        match st.vf_assoc_at {
            Some((at, allocated)) if Instant::now() >= at => {
                st.vf_assoc_at = None;
                if !allocated || self.nic_link().vf_present.load(Ordering::Acquire) {
                    self.send_vf_assoc(st, allocated);
                }
                true
            }
            _ => false,
        }
    }

    // -----------------------------------------------------------------
    // Host to guest
    // -----------------------------------------------------------------

    fn queue(&self, st: &mut State, chan: usize, pkt: Vec<u8>) {
        st.outq[chan].push_back(pkt);
    }

    /// Writes queued packets into the rings while they fit.
    fn flush(&self, st: &mut State) -> bool {
        let mut did = false;
        for (i, ch) in self.channels(st).iter().enumerate() {
            while let Some(pkt) = st.outq[i].front() {
                match ch.rings.write(pkt) {
                    Ok(was_empty) => {
                        st.outq[i].pop_front();
                        did = true;
                        if was_empty && ch.rings.guest_wants_interrupts() {
                            self.interrupt_guest();
                        }
                    }
                    Err(WriteError::Full(_)) => {
                        st.counters.ring_full += 1;
                        break;
                    }
                    Err(WriteError::Corrupt(why)) => {
                        let m = format!(
                            "channel {} ring to the guest: {why}; channel stopped",
                            ch.relid
                        );
                        Self::error(st, m.clone());
                        st.broken = Some(m);
                        return true;
                    }
                }
            }
        }
        did
    }

    /// Puts an RNDIS message into the receive buffer and queues the
    /// transfer-page packet naming it on channel `chan`. False when no
    /// section is free.
    fn to_guest_rndis(&self, st: &mut State, chan: usize, msg: &[u8], mtype: u32) -> bool {
        if !st.rxbuf {
            Self::error(
                st,
                "RNDIS message for the guest before its receive buffer".into(),
            );
            return false;
        }
        let Some(first) = st.sections.alloc(msg.len()) else {
            return false;
        };
        let ofs = st.sections.offset(first);
        self.recv.region().write(ofs, msg);
        let range = RxRange {
            len: (msg.len() as u32).into(),
            ofs: (ofs as u32).into(),
        };
        let pkt = chanpkt::rxbuf(
            u64::from(first),
            nvsp::RXBUF_SIG,
            &[range],
            nvsp::rndis(mtype).as_bytes(),
        );
        self.queue(st, chan, pkt);
        true
    }

    /// Frames the switch diverted to this NIC: filtered as the guest asked,
    /// spread by its RSS parameters, put into the receive buffer.
    fn deliver_rx(&self, st: &mut State) -> bool {
        let link = self.nic_link();
        let frames = link.take_rx(BUDGET);
        if frames.is_empty() {
            return false;
        }
        let nchan = 1 + st.subchannels.len();
        let mut rest = frames.into_iter();
        while let Some(f) = rest.next() {
            if !st.rxbuf || !st.rndis.initialized {
                Counters::count(&mut st.counters.drops, "rx_not_ready", 1);
                continue;
            }
            if !self.filter_accepts(st, &f) {
                Counters::count(&mut st.counters.drops, "rx_filtered", 1);
                continue;
            }
            if st.outq.iter().map(|q| q.len()).sum::<usize>() >= OUTQ_MAX {
                link.put_back(std::iter::once(f).chain(rest).collect());
                break;
            }
            // NDIS hands the tag over as per-packet info.
            let mut g = f.clone();
            let tci = crate::pkt::vlan_strip(&mut g);
            let (ppis, chan) = datapath::rx_info(&g, tci, st.rndis.rss.as_ref(), nchan);
            let msg = rndis::packet_msg(&g, &ppis);
            if !self.to_guest_rndis(st, chan, &msg, nvsp::RNDIS_MTYPE_DATA) {
                // No free section: the guest has not returned them yet.
                st.counters.rx_buffer_waits += 1;
                link.put_back(std::iter::once(f).chain(rest).collect());
                break;
            }
            let s = &mut st.stats[chan];
            s.rx_packets += 1;
            s.rx_bytes += f.len() as u64;
            st.counters.rx_packets += 1;
            st.counters.rx_bytes += f.len() as u64;
        }
        true
    }

    fn filter_accepts(&self, st: &State, f: &[u8]) -> bool {
        let filter = st.rndis.filter;
        if filter & rndis::PACKET_TYPE_PROMISCUOUS != 0 {
            return true;
        }
        let Some(dst) = f.get(..6) else { return false };
        if dst == [0xff; 6] {
            filter & rndis::PACKET_TYPE_BROADCAST != 0
        } else if dst[0] & 1 != 0 {
            filter & (rndis::PACKET_TYPE_ALL_MULTICAST | rndis::PACKET_TYPE_MULTICAST) != 0
        } else {
            filter & rndis::PACKET_TYPE_DIRECTED != 0
                && crate::config::parse_mac(&self.cfg.mac).is_ok_and(|m| m == dst)
        }
    }

    // -----------------------------------------------------------------
    // Report
    // -----------------------------------------------------------------

    pub fn report(&self) -> NetvscReport {
        let st = self.state();
        let link = self.nic_link();
        let mut drops = st.counters.drops.clone();
        let q = link.rx_queue_drops.load(Ordering::Relaxed);
        if q > 0 {
            drops.insert("rx_queue_full".into(), q);
        }
        NetvscReport {
            uuid: self.cfg.uuid().to_string(),
            mac: self.cfg.mac.clone(),
            nvs_version: st.nvs_version,
            ndis_version: format!("{}.{}", st.ndis_version.0, st.ndis_version.1),
            rndis_initialized: st.rndis.initialized,
            packet_filter: st.rndis.filter,
            rss_enabled: st.rndis.rss.as_ref().is_some_and(|r| !r.disabled),
            datapath: if st.datapath_vf { "vf" } else { "synthetic" }.into(),
            rx_packets: st.counters.rx_packets,
            rx_bytes: st.counters.rx_bytes,
            tx_packets: st.counters.tx_packets,
            tx_bytes: st.counters.tx_bytes,
            frames_to_vf: link.to_vf.load(Ordering::Relaxed),
            channels: self
                .channels(&st)
                .iter()
                .zip(&st.stats)
                .map(|(c, s)| ChannelReport {
                    relid: c.relid,
                    rx_packets: s.rx_packets,
                    rx_bytes: s.rx_bytes,
                    tx_packets: s.tx_packets,
                    tx_bytes: s.tx_bytes,
                    guest_signals: s.guest_signals,
                })
                .collect(),
            vf_assoc_allocated: st.counters.vf_assoc_allocated,
            vf_assoc_revoked: st.counters.vf_assoc_revoked,
            datapath_to_vf: st.counters.datapath_to_vf,
            datapath_to_synthetic: st.counters.datapath_to_synthetic,
            messages: st.counters.control.clone(),
            drops,
            ring_full: st.counters.ring_full,
            rx_buffer_waits: st.counters.rx_buffer_waits,
            rx_sections_outstanding: st.sections.outstanding() as u64,
            errors: st.counters.errors.iter().cloned().collect(),
            broken: st.broken.clone(),
        }
    }
}

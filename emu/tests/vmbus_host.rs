//! The VMBus host of the synthetic NIC, driven by a minimal guest written
//! here (no DPDK): the rings and buffers are mapped as a guest maps them
//! through `/dev/uioN`, and the host's answers, refusals and reports are
//! checked message by message. `tests/netvsc.rs` (workspace root) runs
//! DPDK's real netvsc against the same host.

use mana_emu::config::Config;
use mana_emu::device::Emulator;
use mana_emu::vmbus::{chanpkt, nvsp, rndis, NetvscReport};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use zerocopy::IntoBytes;

const MAC: &str = "00:0d:3a:00:00:0a";

/// The guest's side of the primary channel: the ring memory mapped from the
/// host's memfd, written and read as DPDK's vmbus bus does.
struct Guest {
    base: *mut u8,
    half: usize,
    emu: Emulator,
    _dir: std::path::PathBuf,
}

impl Guest {
    fn new(name: &str) -> Guest {
        let dir = std::env::temp_dir().join(format!("vmbus-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = Config::parse(&format!(
            r#"
[options]
sysfs_root = "{}/sys"
run_dir = "{}/run"
control_socket = false
[[adapter]]
pci = "7870:00:00.0"
[[adapter.port]]
mac = "{MAC}"
backend = {{ kind = "sink" }}
[[netvsc]]
mac = "{MAC}"
ring_size = 65536
"#,
            dir.display(),
            dir.display()
        ))
        .unwrap();
        let emu = Emulator::new(cfg).unwrap();
        let host = emu.lock().vmbus().expect("a VMBus host");
        let (fd, size) = host.uio(0).unwrap().map(0).unwrap();
        // SAFETY: a shared mapping of the host's ring memfd, as a guest's
        // mmap of /dev/uio0 map 0 gets; unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Guest {
            base: p.cast(),
            half: size / 2,
            emu,
            _dir: dir,
        }
    }

    fn word(&self, ring: usize, off: usize) -> &AtomicU32 {
        assert!(off < 4096 && ring < 2);
        // SAFETY: inside the mapping (a control page), 4-byte aligned.
        unsafe { &*(self.base.add(ring * self.half + off) as *const AtomicU32) }
    }

    fn data(&self, ring: usize) -> *mut u8 {
        // SAFETY: the data area follows the ring's control page.
        unsafe { self.base.add(ring * self.half + 4096) }
    }

    fn dsize(&self) -> usize {
        self.half - 4096
    }

    /// Writes a packet into the guest-to-host ring (ring 0).
    fn send(&self, pkt: &[u8]) {
        let w = self.word(0, 0).load(Ordering::Acquire) as usize;
        let mut bytes = pkt.to_vec();
        bytes.extend_from_slice(&((w as u64) << 32).to_le_bytes());
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: index wrapped into the data area.
            unsafe { *self.data(0).add((w + i) % self.dsize()) = *b };
        }
        self.word(0, 0)
            .store(((w + bytes.len()) % self.dsize()) as u32, Ordering::Release);
    }

    /// Takes the next packet from the host-to-guest ring (ring 1).
    fn recv(&self, timeout: Duration) -> Option<chanpkt::Packet> {
        let t0 = Instant::now();
        loop {
            let w = self.word(1, 0).load(Ordering::Acquire) as usize;
            let r = self.word(1, 4).load(Ordering::Acquire) as usize;
            if w != r {
                let rd = |i: usize| {
                    // SAFETY: index wrapped into the data area.
                    unsafe { *self.data(1).add((r + i) % self.dsize()) }
                };
                let len = usize::from(u16::from_le_bytes([rd(4), rd(5)])) * 8;
                let pkt: Vec<u8> = (0..len).map(rd).collect();
                self.word(1, 4)
                    .store(((r + len + 8) % self.dsize()) as u32, Ordering::Release);
                return Some(chanpkt::Packet::decode(&pkt).expect("a well-formed host packet"));
            }
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends an NVSP request that wants a completion; returns the reply.
    fn request(&self, msg: &[u8], xactid: u64) -> chanpkt::Packet {
        self.send(&chanpkt::inband(chanpkt::FLAG_RC, xactid, msg));
        let p = self.recv(Duration::from_secs(120)).expect("a completion");
        assert_eq!((p.ty, p.xactid), (chanpkt::TYPE_COMP, xactid));
        p
    }

    fn report(&self) -> NetvscReport {
        self.emu.counters().netvsc.remove(0)
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), 2 * self.half) };
        self.emu.stop();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn init(ver: u32) -> Vec<u8> {
    nvsp::Init {
        ty: nvsp::TYPE_INIT.into(),
        ver_min: ver.into(),
        ver_max: ver.into(),
        rsvd: [0; 28],
    }
    .as_bytes()
    .to_vec()
}

fn conn(ty: u32, gpadl: u32, sig: u16) -> Vec<u8> {
    nvsp::BufConn {
        ty: ty.into(),
        gpadl: gpadl.into(),
        sig: sig.into(),
        rsvd: [0; 30],
    }
    .as_bytes()
    .to_vec()
}

#[test]
fn negotiation_buffers_and_refusals() {
    let g = Guest::new("nego");
    // A version the host does not speak, then 6.1.
    let r = g.request(&init(0x0007_0000), 1);
    assert_eq!(
        (u32_at(&r.data, 0), u32_at(&r.data, 12)),
        (nvsp::TYPE_INIT_RESP, nvsp::STATUS_FAILED)
    );
    let r = g.request(&init(nvsp::VERSION_61), 2);
    assert_eq!(u32_at(&r.data, 12), nvsp::STATUS_OK);
    // The receive buffer by a GPADL that is not the uio map's: refused.
    let (recv, send) = mana_emu::vmbus::sysfs::gpadls(0);
    let r = g.request(&conn(nvsp::TYPE_RXBUF_CONN, recv + 100, nvsp::RXBUF_SIG), 3);
    assert_eq!(
        (u32_at(&r.data, 0), u32_at(&r.data, 4)),
        (nvsp::TYPE_RXBUF_CONNRESP, nvsp::STATUS_FAILED)
    );
    // The right one: one section list, 1728-byte sections over 31 MiB.
    let r = g.request(&conn(nvsp::TYPE_RXBUF_CONN, recv, nvsp::RXBUF_SIG), 4);
    assert_eq!(u32_at(&r.data, 4), nvsp::STATUS_OK);
    assert_eq!(
        (u32_at(&r.data, 8), u32_at(&r.data, 16), u32_at(&r.data, 20)),
        (1, 1728, (31 << 20) / 1728)
    );
    let r = g.request(&conn(nvsp::TYPE_CHIM_CONN, send, nvsp::CHIM_SIG), 5);
    assert_eq!(
        (u32_at(&r.data, 4), u32_at(&r.data, 8)),
        (nvsp::STATUS_OK, 6144)
    );
    // A message type the host does not know: no answer, an error reported.
    g.send(&chanpkt::inband(
        chanpkt::FLAG_RC,
        6,
        &[0xe7, 3, 0, 0, 0, 0, 0, 0],
    ));
    // Sub-channels: asked for 20, the host offers what max_queues (8) allows.
    let req = nvsp::SubchReq {
        ty: nvsp::TYPE_SUBCH_REQ.into(),
        op: nvsp::SUBCH_OP_ALLOC.into(),
        nsubch: 20.into(),
        rsvd: [0; 28],
    };
    let r = g.request(req.as_bytes(), 7);
    assert_eq!(
        (u32_at(&r.data, 4), u32_at(&r.data, 8)),
        (nvsp::STATUS_OK, 7)
    );
    let root = g.emu.config().options.sysfs_root.clone();
    let uuid = g.emu.config().netvsc[0].uuid().to_string();
    for relid in 15..=21 {
        let d = mana_emu::vmbus::sysfs::channel_dir(&root, &uuid, relid);
        assert!(d.join("ring").exists(), "{}", d.display());
    }
    // Asked again: nothing more to offer.
    let r = g.request(req.as_bytes(), 8);
    assert_eq!(u32_at(&r.data, 8), 0);
    let rep = g.report();
    assert_eq!(rep.nvs_version, nvsp::VERSION_61);
    assert_eq!(rep.channels.len(), 8);
    assert_eq!(rep.messages.get("unknown_999"), Some(&1), "{rep:?}");
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("receive buffer GPADL") && e.contains("refused")),
        "{rep:?}"
    );
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("unexpected unknown_999")),
        "{rep:?}"
    );
    assert!(rep.broken.is_none());
}

#[test]
fn rndis_control_over_the_send_buffer_and_a_corrupt_ring() {
    let g = Guest::new("rndis");
    let (recv, send) = mana_emu::vmbus::sysfs::gpadls(0);
    g.request(&init(nvsp::VERSION_61), 1);
    let conf = nvsp::NdisConf {
        ty: nvsp::TYPE_NDIS_CONF.into(),
        mtu: 1514.into(),
        rsvd: 0.into(),
        caps: (nvsp::NDIS_CONF_SRIOV | nvsp::NDIS_CONF_VLAN).into(),
        rsvd1: [0; 20],
    };
    g.send(&chanpkt::inband(0, 0, conf.as_bytes()));
    g.request(&conn(nvsp::TYPE_RXBUF_CONN, recv, nvsp::RXBUF_SIG), 2);
    g.request(&conn(nvsp::TYPE_CHIM_CONN, send, nvsp::CHIM_SIG), 3);
    // RNDIS INITIALIZE through send-buffer section 5 (as a guest may).
    let host = g.emu.lock().vmbus().unwrap();
    let (sfd, ssize) = host.uio(0).unwrap().map(4).unwrap();
    // SAFETY: a shared mapping of the send buffer (uio map 4); unmapped below.
    let sbuf = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            ssize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            sfd,
            0,
        )
    };
    assert_ne!(sbuf, libc::MAP_FAILED);
    let mut req = Vec::new();
    for w in [rndis::INITIALIZE_MSG, 24, 41, 1, 0, 0x4000] {
        req.extend_from_slice(&w.to_le_bytes());
    }
    // SAFETY: within the send buffer's section 5.
    unsafe {
        std::ptr::copy_nonoverlapping(req.as_ptr(), sbuf.cast::<u8>().add(5 * 6144), req.len())
    };
    let m = nvsp::Rndis {
        ty: nvsp::TYPE_RNDIS.into(),
        mtype: nvsp::RNDIS_MTYPE_CTRL.into(),
        chim_idx: 5.into(),
        chim_sz: (req.len() as u32).into(),
        rsvd: [0; 24],
    };
    let ack = g.request(m.as_bytes(), 0xabc);
    assert_eq!(
        (u32_at(&ack.data, 0), u32_at(&ack.data, 4)),
        (nvsp::TYPE_RNDIS_ACK, nvsp::STATUS_OK)
    );
    // The completion arrives in the receive buffer; then the association
    // (the guest announced SR-IOV and the VF is present).
    let rx = g
        .recv(Duration::from_secs(120))
        .expect("the RNDIS completion");
    assert_eq!(rx.ty, chanpkt::TYPE_RXBUF);
    let (rfd, rsize) = host.uio(0).unwrap().map(3).unwrap();
    // SAFETY: a shared read-only mapping of the receive buffer (uio map 3).
    let rbuf = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            rsize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            rfd,
            0,
        )
    };
    assert_ne!(rbuf, libc::MAP_FAILED);
    let (len, ofs) = (u32_at(&rx.ext, 8) as usize, u32_at(&rx.ext, 12) as usize);
    let mut cmplt = vec![0u8; len];
    // SAFETY: the range the host named, inside the receive buffer.
    unsafe { std::ptr::copy_nonoverlapping(rbuf.cast::<u8>().add(ofs), cmplt.as_mut_ptr(), len) };
    assert_eq!(
        (u32_at(&cmplt, 0), u32_at(&cmplt, 8), u32_at(&cmplt, 12)),
        (rndis::INITIALIZE_CMPLT, 41, 0)
    );
    let assoc = g
        .recv(Duration::from_secs(120))
        .expect("the VF association");
    assert_eq!(
        (assoc.ty, u32_at(&assoc.data, 0), u32_at(&assoc.data, 4)),
        (chanpkt::TYPE_INBAND, nvsp::TYPE_VFASSOC_NOTE, 1)
    );
    // The guest returns the section.
    let back = nvsp::rndis_ack(nvsp::STATUS_OK);
    g.send(&chanpkt::completion(rx.xactid, back.as_bytes()));
    // A send-buffer section beyond the buffer: refused with a failed ack.
    let bad = nvsp::Rndis {
        chim_idx: 100_000.into(),
        ..m
    };
    let ack = g.request(bad.as_bytes(), 0xabd);
    assert_eq!(u32_at(&ack.data, 4), nvsp::STATUS_FAILED);
    let rep = g.report();
    assert!(rep.rndis_initialized);
    assert_eq!(
        (rep.vf_assoc_allocated, rep.rx_sections_outstanding),
        (1, 0),
        "{rep:?}"
    );
    assert!(
        rep.errors
            .iter()
            .any(|e| e.contains("send buffer section 100000")),
        "{rep:?}"
    );
    // A write index outside the ring: the channel stops, the report says why.
    g.word(0, 0).store(0x7fff_fff8, Ordering::Release);
    let t0 = Instant::now();
    while g.report().broken.is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the host never noticed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let rep = g.report();
    assert!(
        rep.broken.as_deref().unwrap().contains("channel stopped"),
        "{rep:?}"
    );
    // SAFETY: unmapping the mappings made above.
    unsafe {
        libc::munmap(sbuf, ssize);
        libc::munmap(rbuf, rsize);
    }
}

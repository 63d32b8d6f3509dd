//! The device model's hardware interface (`device::hw`), as the vfio-user
//! PCI function of `emu-pci` drives it, without a guest: queues on rings of
//! separate pages, SGEs naming addresses of a translated space (a stand-in
//! for guest-physical memory), CQs that report to EQs, doorbells by page.

use gdma::{
    cq_arm_tail, CqDoorbell, Cqe, CqeType, RqDoorbell, Sge, SqDoorbell, TxShortOob, WireType,
    WqType,
};
use mana_emu::config::{AdapterConfig, BackendConfig, Config, PortConfig};
use mana_emu::device::{State, VportRx, WqKind};
use mana_emu::mem::{DmaSpace, Region, Ring};
use std::sync::Arc;
use zerocopy::IntoBytes;

const PAGE: usize = 4096;
const MEM: usize = 16 * PAGE;
const KEY: u32 = 0x200;
const DB: u32 = 1;
// Where things are in the space (addresses are offsets into `Mem`).
const SQ: usize = 0;
const TX_CQ: usize = PAGE;
const RQ: usize = 2 * PAGE;
const RX_CQ: usize = 3 * PAGE;
const TX_BUF: u64 = 8 * PAGE as u64;
const RX_BUF: u64 = 9 * PAGE as u64;

/// The memory a driver would own: 16 pages, 8-byte aligned.
struct Mem(Vec<u64>);

impl Mem {
    fn base(&self) -> usize {
        self.0.as_ptr() as usize
    }
    fn bytes(&mut self) -> &mut [u8] {
        self.0.as_mut_bytes()
    }
}

/// The translated space over `Mem`, backwards: page `n` of the space is
/// page `15 - n` of the memory, so nothing contiguous in the space is
/// contiguous in memory.
struct Space {
    base: usize,
}

impl Space {
    fn host(&self, addr: usize) -> usize {
        self.base + (15 - addr / PAGE) * PAGE + addr % PAGE
    }
    fn page(&self, addr: usize) -> Region {
        // SAFETY: one page of `Mem`, which the test keeps alive (and does
        // not move) until the device model is dropped.
        unsafe { Region::new(self.host(addr), PAGE) }
    }
}

impl DmaSpace for Space {
    fn translate(&self, addr: u64, len: usize) -> Option<Vec<Region>> {
        let (mut at, end) = (addr as usize, addr as usize + len);
        if end > MEM {
            return None;
        }
        let mut out = Vec::new();
        while at < end {
            let n = (PAGE - at % PAGE).min(end - at);
            out.push(self.page(at - at % PAGE).sub(at % PAGE, n).unwrap());
            at += n;
        }
        Some(out)
    }
}

fn config() -> Config {
    Config {
        adapters: vec![AdapterConfig {
            pci: "0000:00:01.0".into(),
            numa_node: 0,
            ib_name: None,
            ib_name_after_reset: None,
            rnic_name: None,
            subsystem_vendor: 0x1414,
            subsystem_device: 1,
            ports: vec![PortConfig {
                mac: "00:15:5d:00:00:01".into(),
                ifname: None,
                backend: BackendConfig::Loopback,
                mtu: 1500,
                kernel_if_up: false,
                lossless_rx: false,
                mac_filter: false,
                link_speed_mbps: -1,
            }],
        }],
        ..Default::default()
    }
}

struct Rig {
    mem: Mem,
    space: Arc<Space>,
    st: State,
    rq: u32,
}

impl Rig {
    fn new() -> Rig {
        let mem = Mem(vec![0u64; MEM / 8]);
        let space = Arc::new(Space { base: mem.base() });
        let mut st = State::for_hardware(&config()).unwrap();
        let pd = st.hw_pd(DB, 0).unwrap();
        st.hw_register_space(pd, KEY, space.clone()).unwrap();
        let ring = |a| Ring::paged(vec![space.page(a)]).unwrap();
        let tx_cq = st.hw_create_cq(DB, 10, ring(TX_CQ), 5).unwrap();
        st.hw_create_wq(DB, WqKind::Sq, pd, 20, ring(SQ), tx_cq)
            .unwrap();
        let rx_cq = st.hw_create_cq(DB, 11, ring(RX_CQ), 6).unwrap();
        let rq = st
            .hw_create_wq(DB, WqKind::Rq, pd, 21, ring(RQ), rx_cq)
            .unwrap();
        st.hw_set_vport_rx(
            0,
            &VportRx {
                enabled: true,
                rss: false,
                key: [0; 40],
                table: Vec::new(),
                default_rq: rq,
            },
        )
        .unwrap();
        Rig { mem, space, st, rq }
    }

    /// Writes `data` at space address `addr`, page by page.
    fn write(&mut self, addr: usize, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let at = addr + done;
            let n = (PAGE - at % PAGE).min(data.len() - done);
            let off = self.space.host(at) - self.mem.base();
            self.mem.bytes()[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    fn read(&mut self, addr: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let at = addr + out.len();
            let n = (PAGE - at % PAGE).min(len - out.len());
            let off = self.space.host(at) - self.mem.base();
            out.extend_from_slice(&self.mem.bytes()[off..off + n]);
        }
        out
    }

    fn post_wqe(&mut self, ring: usize, wq: WqType, head_bu: u32, oob: &[u8], sge: Sge) -> u32 {
        let mut page = self.read(ring, PAGE);
        let n = gdma::write_wqe(&mut page, head_bu, wq, oob, &[sge], 0).unwrap();
        self.write(ring, &page);
        n
    }

    fn cqe(&mut self, cq: usize, slot: usize) -> Cqe {
        let b = self.read(cq + 64 * slot, 64);
        Cqe::read_unvalidated(&b).unwrap()
    }
}

fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x00, 0x15, 0x5d, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
    for (i, b) in f[14..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

#[test]
fn frames_move_through_paged_rings_and_translated_buffers() {
    let mut r = Rig::new();
    // Arm both CQs (tail = the initial head, 64 entries each).
    for cq in [10, 11] {
        let db = CqDoorbell::arm_at(cq, 64, 64).unwrap();
        r.st.hw_doorbell(DB, CqDoorbell::OFFSET, db.to_raw());
    }
    // A receive buffer that straddles two space pages (not contiguous in
    // memory), then a send.
    let rx = Sge::new(RX_BUF - 20, KEY, 2048);
    let n = r.post_wqe(RQ, WqType::Rq, 0, &[], rx);
    r.st.hw_doorbell(
        DB,
        RqDoorbell::OFFSET,
        RqDoorbell::for_head_bu(21, n).unwrap().to_raw(),
    );
    let f = frame();
    r.write(TX_BUF as usize, &f);
    let oob = TxShortOob::for_queue(10, 20, u32::from(r.st.vp_offset(0).unwrap())).unwrap();
    let n = r.post_wqe(SQ, WqType::Sq, 0, oob.as_bytes(), Sge::new(TX_BUF, KEY, 60));
    r.st.hw_doorbell(
        DB,
        SqDoorbell::OFFSET,
        SqDoorbell::for_head_bu(20, n).unwrap().to_raw(),
    );
    r.st.step();

    let tx = r.cqe(TX_CQ, 0);
    assert_eq!(tx.info.owner_bits(), 1);
    assert!(tx.info.is_sq());
    assert_eq!(tx.info.wq_num(), 20);
    assert_eq!(
        CqeType::from_raw(tx.header().cqe_type_raw()),
        Some(CqeType::TxOkay)
    );
    let rxc = r.cqe(RX_CQ, 0);
    assert_eq!(rxc.info.owner_bits(), 1);
    assert_eq!(rxc.info.wq_num(), 21);
    assert_eq!(
        CqeType::from_raw(rxc.header().cqe_type_raw()),
        Some(CqeType::RxOkay)
    );
    assert_eq!(rxc.rx_oob().ppi[0].pkt_len(), 60);
    assert_eq!(r.read(RX_BUF as usize - 20, 60), f);
    // Both CQs were armed: one completion event each, for their EQs.
    let mut ev = r.st.take_eq_events();
    ev.sort();
    assert_eq!(ev, [(5, 10), (6, 11)]);

    // Not re-armed: the next completions raise no event.
    let n2 = r.post_wqe(SQ, WqType::Sq, n, oob.as_bytes(), Sge::new(TX_BUF, KEY, 60));
    r.st.hw_doorbell(
        DB,
        SqDoorbell::OFFSET,
        SqDoorbell::for_head_bu(20, n + n2).unwrap().to_raw(),
    );
    r.st.step();
    assert_eq!(r.cqe(TX_CQ, 1).info.owner_bits(), 1);
    assert!(r.st.take_eq_events().is_empty());
    // No receive buffer was posted for it: dropped, as the hardware does.
    let c = r.st.counters();
    assert_eq!(c.ports[0].counters.drops("no_rx_buffer"), 1);
    // Arming with a CQE pending signals at once.
    let db = CqDoorbell::try_new(10, cq_arm_tail(65, 64), true).unwrap();
    r.st.hw_doorbell(DB, CqDoorbell::OFFSET, db.to_raw());
    assert_eq!(r.st.take_eq_events(), [(5, 10)]);
}

#[test]
fn keys_pages_and_queues_are_checked() {
    let mut r = Rig::new();
    // A send naming another key: an error CQE, nothing on the wire.
    let oob = TxShortOob::for_queue(10, 20, u32::from(r.st.vp_offset(0).unwrap())).unwrap();
    let n = r.post_wqe(
        SQ,
        WqType::Sq,
        0,
        oob.as_bytes(),
        Sge::new(TX_BUF, KEY + 1, 60),
    );
    r.st.hw_doorbell(
        DB,
        SqDoorbell::OFFSET,
        SqDoorbell::for_head_bu(20, n).unwrap().to_raw(),
    );
    r.st.step();
    let tx = r.cqe(TX_CQ, 0);
    assert_eq!(tx.info.owner_bits(), 1);
    assert_eq!(
        CqeType::from_raw(tx.header().cqe_type_raw()),
        Some(CqeType::TxHdrProcessingError)
    );
    let c = r.st.counters();
    assert_eq!(c.ports[0].counters.tx_packets, 0);
    assert_eq!(c.ports[0].counters.drops("bad_lkey"), 1);
    // A buffer outside the space: out of the key's memory.
    let n2 = r.post_wqe(
        SQ,
        WqType::Sq,
        n,
        oob.as_bytes(),
        Sge::new(MEM as u64 - 10, KEY, 60),
    );
    r.st.hw_doorbell(
        DB,
        SqDoorbell::OFFSET,
        SqDoorbell::for_head_bu(20, n + n2).unwrap().to_raw(),
    );
    r.st.step();
    assert_eq!(r.st.counters().ports[0].counters.drops("out_of_mr"), 1);
    // The same SQ id on another doorbell page is not this SQ.
    let before = r.st.counters().device.bad_doorbells;
    r.st.hw_doorbell(
        DB + 1,
        SqDoorbell::OFFSET,
        SqDoorbell::for_head_bu(20, 99).unwrap().to_raw(),
    );
    assert_eq!(r.st.counters().device.bad_doorbells, before + 1);
    assert!(!r.st.hw_has_wq(DB + 1, WqKind::Sq, 20));
    // An RQ the vPort steers to cannot go; once RX is off it can.
    assert!(r.st.hw_destroy_wq(r.rq).is_err());
    let off = VportRx {
        enabled: false,
        rss: false,
        key: [0; 40],
        table: Vec::new(),
        default_rq: 0,
    };
    r.st.hw_set_vport_rx(0, &off).unwrap();
    r.st.hw_destroy_wq(r.rq).unwrap();
    // Hardware objects are not the verbs layer's to destroy.
    assert!(r.st.destroy_wq(1).is_err());
    let gone = r.st.hw_reset();
    assert_eq!(gone.len(), 3, "{gone:?}"); // the SQ and both CQs
}

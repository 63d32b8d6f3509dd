//! The function driven the way the Linux `mana` driver drives it, without a
//! guest: guest memory is a memfd mapped as QEMU would map it, interrupts
//! are eventfds, and the "driver" below writes the SMC window, reads the
//! HWC's parameters from the EQ, posts receive buffers and requests, and
//! reads the completions and responses back. Fast-tier checks of the HWC
//! protocol; the guest tier (tests/guest_tier.rs) runs the real driver.

use gdma::control::*;
use gdma::le::{U16, U32, U64};
use gdma::{
    CqeInfo, Eqe, EqeType, HwcInitData, HwcRxOob, HwcTxOob, RqDoorbell, Sge, SmcEstablishHwc,
    SmcHeader, SqDoorbell, WireType, WqType, SMC_MSG_TYPE_DESTROY_HWC, SMC_MSG_TYPE_ESTABLISH_HWC,
};
use mana_pci::device::{Device, DeviceConfig};
use mana_pci::gdma::bar0::{DB_BASE, DB_PAGE_SIZE, SMC_OFFSET};
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use zerocopy::{FromZeros, IntoBytes};

const MEM: usize = 1 << 20;
const EQ: u64 = 0x1000;
const CQ: u64 = 0x2000;
const RQ: u64 = 0x3000;
const SQ: u64 = 0x4000;
const RESP: u64 = 0x8000;
const REQ: u64 = 0xa000;

struct Driver {
    dev: Device,
    mem: File,
    irq: File,
    eq_head: u32,
    cq_head: u32,
    rq_head_bu: u32,
    sq_head_bu: u32,
    eq_id: u32,
    cq_id: u32,
    rq_id: u32,
    sq_id: u32,
    mkey: u32,
    db_page: u32,
}

fn memfd(len: usize) -> File {
    // SAFETY: memfd_create with a static NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: a descriptor we just created and own.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(&vec![0u8; len]).unwrap();
    f
}

fn eventfd() -> File {
    // SAFETY: eventfd(2) with no preconditions; checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0);
    // SAFETY: a descriptor we just created and own.
    unsafe { File::from_raw_fd(fd) }
}

impl Driver {
    fn new() -> Driver {
        let mut dev = Device::new(DeviceConfig::default()).unwrap();
        let mem = memfd(MEM);
        dev.mem.map(0, MEM as u64, &mem, 0).unwrap();
        let irq = eventfd();
        dev.irqs.set(0, 1, vec![irq.try_clone().unwrap()]).unwrap();
        Driver {
            dev,
            mem,
            irq,
            eq_head: 256,
            cq_head: 64,
            rq_head_bu: 0,
            sq_head_bu: 0,
            eq_id: u32::MAX,
            cq_id: u32::MAX,
            rq_id: u32::MAX,
            sq_id: u32::MAX,
            mkey: 0,
            db_page: 0,
        }
    }

    fn read(&self, gpa: u64, out: &mut [u8]) {
        std::os::unix::fs::FileExt::read_exact_at(&self.mem, out, gpa).unwrap();
    }
    fn write(&self, gpa: u64, data: &[u8]) {
        std::os::unix::fs::FileExt::write_all_at(&self.mem, data, gpa).unwrap();
    }

    fn interrupts(&self) -> u64 {
        let mut b = [0u8; 8];
        match std::io::Read::read(&mut &self.irq, &mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    fn smc_header(&mut self) -> SmcHeader {
        let mut b = [0u8; 4];
        self.dev.bar0_read(SMC_OFFSET + 28, &mut b);
        SmcHeader::from_raw(u32::from_le_bytes(b))
    }

    /// `mana_smc_setup_hwc`: eight dword writes, the header last.
    fn establish(&mut self) -> SmcHeader {
        let w = SmcEstablishHwc {
            eq_addr: EQ,
            cq_addr: CQ,
            rq_addr: RQ,
            sq_addr: SQ,
            eq_msix_index: 0,
            hdr: SmcHeader::request(SMC_MSG_TYPE_ESTABLISH_HWC, false),
        }
        .encode()
        .unwrap();
        for (i, d) in w.chunks(4).enumerate() {
            self.dev.bar0_write(SMC_OFFSET + 4 * i, d);
        }
        self.smc_header()
    }

    /// The next EQE if its owner bits say it is new.
    fn next_eqe(&mut self) -> Option<Eqe> {
        let slot = u64::from(self.eq_head % 256);
        let mut b = [0u8; 16];
        self.read(EQ + 16 * slot, &mut b);
        let e = Eqe::read_unvalidated(&b).unwrap();
        if u32::from(e.info.owner_bits()) != (self.eq_head / 256) & 7 {
            return None;
        }
        self.eq_head += 1;
        Some(Eqe::decode(&b).expect("a new EQE decodes"))
    }

    /// The next CQE as (is_sq, wq, completion data) if new.
    fn next_cqe(&mut self) -> Option<(bool, u32, HwcRxOob)> {
        let slot = u64::from(self.cq_head % 64);
        let mut b = [0u8; 64];
        self.read(CQ + 64 * slot, &mut b);
        let info = CqeInfo::from_raw(u32::from_le_bytes(b[60..64].try_into().unwrap()));
        if u32::from(info.owner_bits()) != (self.cq_head / 64) & 7 {
            return None;
        }
        self.cq_head += 1;
        Some((
            info.is_sq(),
            info.wq_num(),
            HwcRxOob::decode(&b[..32]).unwrap(),
        ))
    }

    fn ring(&mut self, reg: usize, v: u64) {
        let off = DB_BASE + self.db_page as usize * DB_PAGE_SIZE + reg;
        self.dev.bar0_write(off, &v.to_le_bytes());
    }

    fn post_rx_buffer(&mut self) {
        let mut ring = vec![0u8; 4096];
        self.read(RQ, &mut ring);
        let sge = Sge::new(RESP, self.mkey, 4096);
        self.rq_head_bu +=
            gdma::write_wqe(&mut ring, self.rq_head_bu, WqType::Rq, &[], &[sge], 0).unwrap();
        self.write(RQ, &ring);
        let db = RqDoorbell::for_head_bu(self.rq_id, self.rq_head_bu).unwrap();
        self.ring(RqDoorbell::OFFSET, db.to_raw());
    }

    /// Posts `msg` (its HWC slot set to 0) on the SQ and rings.
    fn send(&mut self, msg: &mut [u8]) {
        msg[10..12].copy_from_slice(&0u16.to_le_bytes());
        self.write(REQ, msg);
        let mut oob = HwcTxOob::new_zeroed();
        oob.dw4 = oob.dw4.with_vscq_id(self.cq_id);
        oob.dw5 = oob.dw5.with_vsq_id(self.sq_id);
        let mut ring = vec![0u8; 4096];
        self.read(SQ, &mut ring);
        let sge = Sge::new(REQ, self.mkey, msg.len() as u32);
        self.sq_head_bu += gdma::write_wqe(
            &mut ring,
            self.sq_head_bu,
            WqType::Sq,
            oob.as_bytes(),
            &[sge],
            0,
        )
        .unwrap();
        self.write(SQ, &ring);
        let db = SqDoorbell::for_head_bu(self.sq_id, self.sq_head_bu).unwrap();
        self.ring(SqDoorbell::OFFSET, db.to_raw());
    }

    /// Re-arms the CQ and the EQ as the driver's handler does.
    fn rearm(&mut self) {
        let cq_tail = self.cq_head % (64 << 3);
        self.ring(
            0x800,
            gdma::CqDoorbell::try_new(self.cq_id, cq_tail, true)
                .unwrap()
                .to_raw(),
        );
        let eq_tail = self.eq_head % (256 << 3);
        self.ring(
            0xff8,
            gdma::EqDoorbell::try_new(self.eq_id, eq_tail, true)
                .unwrap()
                .to_raw(),
        );
    }

    /// The response the RQ completion `rx` announces.
    fn response(&self, rx: &HwcRxOob) -> Vec<u8> {
        let mut resp = vec![0u8; rx.tx_oob_data_size.get() as usize];
        self.read(RESP, &mut resp);
        resp
    }

    /// Sends `msg` and returns the response once its completion arrived:
    /// one interrupt, one completion event, the SQ's CQE then the RQ's.
    fn request(&mut self, msg: &mut [u8]) -> Vec<u8> {
        let before = self.interrupts();
        self.send(msg);
        assert_eq!(
            before + self.interrupts(),
            1,
            "one MSI-X interrupt per request"
        );
        let e = self.next_eqe().expect("completion event");
        assert_eq!(
            EqeType::from_raw(e.info.ty()),
            Some(EqeType::GDMA_EQE_COMPLETION)
        );
        assert_eq!(e.details[0].get(), self.cq_id);
        let (is_sq, wq, _) = self.next_cqe().expect("SQ completion");
        assert!(is_sq && wq == self.sq_id);
        let (is_sq, wq, rx) = self.next_cqe().expect("RQ completion");
        assert!(!is_sq && wq == self.rq_id);
        assert!(self.next_cqe().is_none());
        let resp = self.response(&rx);
        self.rearm();
        self.post_rx_buffer();
        resp
    }

    fn up() -> Driver {
        let mut d = Driver::new();
        let h = d.establish();
        assert!(
            h.direction() && !h.owner_is_pf() && h.status() == 0,
            "{h:?}"
        );
        assert_eq!(d.interrupts(), 1);
        let e = d.next_eqe().unwrap();
        assert_eq!(
            EqeType::from_raw(e.info.ty()),
            Some(EqeType::GDMA_EQE_HWC_INIT_EQ_ID_DB)
        );
        let v = e.details[0].get();
        d.eq_id = v & 0xffff;
        d.db_page = v >> 16;
        loop {
            let e = d.next_eqe().expect("HWC init events up to INIT_DONE");
            match EqeType::from_raw(e.info.ty()).unwrap() {
                EqeType::GDMA_EQE_HWC_INIT_DATA => {
                    let v = e.details[0].get();
                    let (ty, val) = (v >> 24, v & 0xff_ffff);
                    match ty {
                        t if t == HwcInitData::HWC_INIT_DATA_CQID as u32 => d.cq_id = val,
                        t if t == HwcInitData::HWC_INIT_DATA_RQID as u32 => d.rq_id = val,
                        t if t == HwcInitData::HWC_INIT_DATA_SQID as u32 => d.sq_id = val,
                        t if t == HwcInitData::HWC_INIT_DATA_GPA_MKEY as u32 => d.mkey = val,
                        t if t == HwcInitData::HWC_INIT_DATA_MAX_REQUEST as u32 => {
                            assert_eq!(val, 4096)
                        }
                        _ => {}
                    }
                }
                EqeType::GDMA_EQE_HWC_INIT_DONE => break,
                t => panic!("unexpected {t:?} during HWC setup"),
            }
        }
        assert!(d.next_eqe().is_none());
        // The handler took five entries, re-armed with entries left: the
        // device interrupted again at once. A real driver loops; here one
        // arm with the final head suffices.
        let eq_tail = d.eq_head % (256 << 3);
        d.ring(
            0xff8,
            gdma::EqDoorbell::try_new(d.eq_id, eq_tail, true)
                .unwrap()
                .to_raw(),
        );
        let _ = d.interrupts();
        d.post_rx_buffer();
        d
    }
}

fn req_hdr(code: RequestCode, req_size: usize, resp_size: usize) -> ReqHdr {
    ReqHdr::new(code, req_size as u32, resp_size as u32)
}

#[test]
fn hwc_comes_up_and_answers_requests() {
    let mut d = Driver::up();
    assert!(d.dev.hwc.is_some());

    // VERIFY_VF_DRIVER_VERSION, as mana_gd_verify_vf_version sends it.
    let mut r = VerifyVerReq::new_zeroed();
    r.hdr = req_hdr(RequestCode::GDMA_VERIFY_VF_DRIVER_VERSION, 640, 72);
    r.hdr.activity_id = U32::new(0x55);
    r.protocol_ver_min = U64::new(1);
    r.protocol_ver_max = U64::new(1);
    r.os_type = U32::new(0x10);
    let resp = d.request(r.as_mut_bytes());
    let v = VerifyVerResp::decode(&resp).unwrap();
    assert_eq!(v.hdr.status.get(), 0);
    assert_eq!(v.hdr.response.msg_size.get(), 72);
    assert_eq!(
        v.hdr.response.msg_type.get(),
        RequestCode::GDMA_VERIFY_VF_DRIVER_VERSION as u32
    );
    assert_eq!(v.hdr.activity_id.get(), 0x55);
    assert_eq!(v.gdma_protocol_ver.get(), 1);

    // LIST_DEVICES: the HWC and the Ethernet function.
    let mut r = ReqHdr::new(RequestCode::GDMA_LIST_DEVICES, 40, 296);
    let resp = d.request(r.as_mut_bytes());
    let l = ListDevicesResp::decode(&resp).unwrap();
    assert_eq!(l.num_of_devs.get(), 2);
    assert_eq!(l.devs[0], DevId::new(GDMA_DEVICE_HWC, 0));
    assert_eq!(l.devs[1], DevId::new(GDMA_DEVICE_MANA, 0));

    // A request the device does not implement: NOT_SUPPORTED, logged by
    // name, counted.
    let mut r = ReqHdr::new(RequestCode::MANA_REGISTER_FILTER, 40, 40);
    r.dev_id = DevId::new(GDMA_DEVICE_MANA, 0);
    let resp = d.request(r.as_mut_bytes());
    let h = RespHdr::decode(&resp).unwrap();
    assert_eq!(h.status.get(), status::NOT_SUPPORTED);
    assert_eq!(h.response.msg_size.get(), 32);
    assert_eq!(
        d.dev.ledger.unimplemented.get("MANA_REGISTER_FILTER"),
        Some(&1)
    );

    // An unknown code: answered too.
    let mut r = ReqHdr::new(RequestCode::GDMA_LIST_DEVICES, 40, 32);
    r.req.msg_type = U32::new(0x7777);
    r.resp.msg_type = U32::new(0x7777);
    let resp = d.request(r.as_mut_bytes());
    assert_eq!(
        RespHdr::decode(&resp).unwrap().status.get(),
        status::NOT_SUPPORTED
    );

    // A malformed header (request version 9): INVALID_PARAMETER.
    let mut r = ReqHdr::new(RequestCode::GDMA_QUERY_MAX_RESOURCES, 40, 72);
    r.req.msg_version = U16::new(9);
    let resp = d.request(r.as_mut_bytes());
    assert_eq!(
        RespHdr::decode(&resp).unwrap().status.get(),
        status::INVALID_PARAMETER
    );

    assert_eq!(d.dev.ledger.unanswered(), 0);
    assert_eq!(d.dev.ledger.responses, 5);

    // DESTROY_HWC: the window answers, the HWC is gone.
    let hdr = SmcHeader::request(SMC_MSG_TYPE_DESTROY_HWC, false);
    d.dev
        .bar0_write(SMC_OFFSET + 28, &hdr.to_raw().to_le_bytes());
    let h = d.smc_header();
    assert!(h.direction() && h.status() == 0 && !h.owner_is_pf());
    assert!(d.dev.hwc.is_none());
    assert!(d.dev.ledger.leaked.is_empty());
    assert!(d.dev.errors.is_empty(), "{:?}", d.dev.errors);
}

#[test]
fn responses_wait_for_a_receive_buffer() {
    let mut d = Driver::up();
    let mut r = ReqHdr::new(RequestCode::GDMA_LIST_DEVICES, 40, 296);
    // The first request takes the one posted buffer; none is posted again.
    d.send(r.as_mut_bytes());
    assert!(matches!(d.next_cqe(), Some((true, _, _))));
    assert!(matches!(d.next_cqe(), Some((false, _, _))));
    d.rearm();
    let _ = d.interrupts();
    // The second waits in the device: only the SQ's completion.
    d.send(r.as_mut_bytes());
    assert!(matches!(d.next_cqe(), Some((true, _, _))));
    assert!(d.next_cqe().is_none());
    assert_eq!(d.dev.ledger.unanswered(), 1);
    // A buffer arrives: the response goes into it.
    d.rearm();
    d.post_rx_buffer();
    let (is_sq, _, rx) = d.next_cqe().expect("the held response");
    assert!(!is_sq);
    let l = ListDevicesResp::decode(&d.response(&rx)).unwrap();
    assert_eq!(l.num_of_devs.get(), 2);
    assert_eq!(d.dev.ledger.unanswered(), 0);
    // A second establish while the HWC is up is refused, the first stays.
    assert_eq!(d.establish().status(), 1);
    assert!(d.dev.hwc.is_some());
    assert_eq!(d.dev.errors.get("smc").map(|e| e.0), Some(1));
}

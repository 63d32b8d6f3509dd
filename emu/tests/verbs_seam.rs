//! The verbs seam as a C driver sees it: the exported `ibv_*`/`manadv_*`
//! functions, the `verbs_context` slots at their fixed negative offsets
//! (checked with literal offsets measured on the bookworm header, not with
//! the bindgen layout the implementation uses), object contents, the
//! allocator contract and async / completion events.

#![allow(clippy::missing_safety_doc)]

use mana_emu::ffi::*;
use mana_emu::verbs::*;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

const PCI: &str = "7870:00:00.0";

static SETUP: Once = Once::new();
/// The global emulator is per process: tests share it, one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    SETUP.call_once(|| {
        let dir = std::env::temp_dir().join(format!("mana-emu-verbs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = format!(
            r#"
[options]
sysfs_root = "{d}/sys"
run_dir = "{d}/run"
control_socket = false
reset_down_ms = 200
[[adapter]]
pci = "{PCI}"
ib_name = "mana_0"
[[adapter.port]]
mac = "00:0d:3a:00:00:01"
backend = {{ kind = "loopback" }}
[[adapter.port]]
mac = "00:0d:3a:00:00:02"
backend = {{ kind = "sink" }}
kernel_if_up = true
"#,
            d = dir.display()
        );
        let p = dir.join("c.toml");
        std::fs::write(&p, cfg).unwrap();
        std::env::set_var("MANA_EMU_CONFIG", &p);
    });
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

unsafe fn first_device() -> *mut ibv_device {
    let mut n = 0;
    // SAFETY: the exported function with a valid out pointer.
    let l = unsafe { ibv_get_device_list(&mut n) };
    assert!(!l.is_null());
    assert_eq!(n, 1);
    // SAFETY: the list holds n = 1 device pointers plus the NULL terminator.
    let d = unsafe { *l };
    // SAFETY: index 1 is the terminator slot of the list.
    assert!(unsafe { (*l.add(1)).is_null() }, "NULL-terminated");
    // SAFETY: the list came from ibv_get_device_list.
    unsafe { ibv_free_device_list(l) };
    d
}

/// A slot of `verbs_context` at a negative offset from `&context`.
unsafe fn slot(ctx: *mut ibv_context, off: isize) -> usize {
    // SAFETY: the caller passes a context from ibv_open_device, preceded by its verbs_context.
    unsafe { *((ctx as *const u8).offset(off) as *const usize) }
}

#[test]
fn device_list_and_sysfs_the_pmd_reads() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let d = first_device();
        let name = CStr::from_ptr(ibv_get_device_name(d)).to_str().unwrap();
        assert_eq!(name, "mana_0");
        assert_eq!((*d).node_type, IBV_NODE_CA);
        assert!(CStr::from_ptr((*d).dev_name.as_ptr())
            .to_str()
            .unwrap()
            .starts_with("uverbs"));
        let ibdev = CStr::from_ptr((*d).ibdev_path.as_ptr())
            .to_str()
            .unwrap()
            .to_string();
        assert!(ibdev.ends_with("/class/infiniband/mana_0"));
        let ue = std::fs::read_to_string(format!("{ibdev}/device/uevent")).unwrap();
        assert!(ue.lines().any(|l| l == format!("PCI_SLOT_NAME={PCI}")));
        let mut ports = Vec::new();
        for e in std::fs::read_dir(format!("{ibdev}/device/net")).unwrap() {
            let p = e.unwrap().path();
            let dp: u32 = std::fs::read_to_string(p.join("dev_port"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let mac = std::fs::read_to_string(p.join("address"))
                .unwrap()
                .trim()
                .to_string();
            ports.push((dp, mac));
        }
        ports.sort();
        assert_eq!(
            ports,
            vec![
                (0, "00:0d:3a:00:00:01".into()),
                (1, "00:0d:3a:00:00:02".into())
            ]
        );
        assert_eq!(
            first_device(),
            d,
            "same object while the device is unchanged"
        );
    }
}

#[test]
fn context_layout_slots_at_fixed_negative_offsets() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let ctx = ibv_open_device(first_device());
        assert!(!ctx.is_null());
        // ibv_context: abi_compat at +320 == UINTPTR_MAX; sz at -8.
        assert_eq!(*((ctx as *const u8).add(320) as *const usize), usize::MAX);
        assert!(slot(ctx, -8) >= 320, "sz covers every v44 slot");
        for (name, off) in [
            ("alloc_parent_domain", -208),
            ("destroy_rwq_ind_table", -168),
            ("create_rwq_ind_table", -160),
            ("destroy_wq", -152),
            ("create_wq", -136),
            ("query_device_ex", -104),
            ("create_qp_ex", -56),
        ] {
            assert_ne!(slot(ctx, off), 0, "{name} at {off}");
        }
        assert_eq!(slot(ctx, -112), 0, "priv stays NULL");
        // ibv_context_ops called unconditionally by inline wrappers.
        for (name, off) in [
            ("poll_cq", 8 + 88),
            ("req_notify_cq", 8 + 96),
            ("post_send", 8 + 200),
            ("post_recv", 8 + 208),
        ] {
            assert_ne!(
                *((ctx as *const u8).add(off) as *const usize),
                0,
                "ops.{name}"
            );
        }
        assert!((*ctx).cmd_fd >= 0 && (*ctx).async_fd >= 0);
        // cmd_fd is mmap-able (what DPDK secondaries do).
        let p = libc::mmap(
            null_mut(),
            4096,
            libc::PROT_WRITE,
            libc::MAP_SHARED,
            (*ctx).cmd_fd,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        libc::munmap(p, 4096);
        // query_device_ex through the slot, like the inline wrapper.
        type Qdx = unsafe extern "C" fn(
            *mut ibv_context,
            *const ibv_query_device_ex_input,
            *mut ibv_device_attr_ex,
            usize,
        ) -> i32;
        let f: Qdx = std::mem::transmute(slot(ctx, -104));
        let mut a: ibv_device_attr_ex = std::mem::zeroed();
        assert_eq!(
            f(
                ctx,
                std::ptr::null(),
                &mut a,
                std::mem::size_of::<ibv_device_attr_ex>()
            ),
            0
        );
        let o = &a.orig_attr;
        assert_eq!(
            (o.vendor_id, o.vendor_part_id, o.phys_port_cnt),
            (0x1414, 2, 2)
        );
        assert_eq!((o.max_qp_wr, o.max_cqe, o.max_sge), (2048, 2048, 15));
        assert_eq!(a.raw_packet_caps, IBV_RAW_PACKET_CAP_IP_CSUM);
        let mut l: ibv_device_attr = std::mem::zeroed();
        assert_eq!(ibv_query_device(ctx, &mut l), 0);
        assert_eq!(l.vendor_part_id, 2);
        let mut pa: ibv_port_attr = std::mem::zeroed();
        assert_eq!(ibv_query_port(ctx, 1, &mut pa), 0);
        assert_eq!(
            (pa.state, pa.link_layer),
            (IBV_PORT_ACTIVE, IBV_LINK_LAYER_ETHERNET as u8)
        );
        assert_eq!(ibv_query_port(ctx, 3, &mut pa), libc::EINVAL);
        // libmana v44: poll_cq returns a positive EOPNOTSUPP.
        let cqops = (*ctx).ops.poll_cq.unwrap();
        assert_eq!(cqops(null_mut(), 1, null_mut()), libc::EOPNOTSUPP);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static FREES: AtomicUsize = AtomicUsize::new(0);
static FREE_DATA: Mutex<Vec<usize>> = Mutex::new(Vec::new());

unsafe extern "C" fn t_alloc(size: usize, _data: *mut c_void) -> *mut c_void {
    ALLOCS.fetch_add(1, Ordering::SeqCst);
    let mut p = null_mut();
    // SAFETY: posix_memalign with a valid out pointer.
    assert_eq!(unsafe { libc::posix_memalign(&mut p, 4096, size) }, 0);
    // SAFETY: p points at `size` freshly allocated bytes.
    unsafe { libc::memset(p, 0, size) };
    p
}

unsafe extern "C" fn t_free(p: *mut c_void, data: *mut c_void) {
    FREES.fetch_add(1, Ordering::SeqCst);
    FREE_DATA.lock().unwrap().push(data as usize);
    // SAFETY: p came from t_alloc (posix_memalign).
    unsafe { libc::free(p) };
}

unsafe fn set_alloc(ctx: *mut ibv_context, data: usize) {
    let mut a = manadv_ctx_allocators {
        alloc: Some(t_alloc),
        free: Some(t_free),
        data: data as *mut c_void,
    };
    assert_eq!(
        // SAFETY: a context from ibv_open_device and an allocator struct on the stack.
        unsafe {
            manadv_set_context_attr(
                ctx,
                MANADV_CTX_ATTR_BUF_ALLOCATORS,
                (&mut a as *mut manadv_ctx_allocators).cast(),
            )
        },
        0
    );
}

type AllocPd =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;
type CreateWq = unsafe extern "C" fn(*mut ibv_context, *mut ibv_wq_init_attr) -> *mut ibv_wq;
type DestroyWq = unsafe extern "C" fn(*mut ibv_wq) -> i32;
type CreateInd = unsafe extern "C" fn(
    *mut ibv_context,
    *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table;
type DestroyInd = unsafe extern "C" fn(*mut ibv_rwq_ind_table) -> i32;
type CreateQpEx = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

unsafe fn parent(ctx: *mut ibv_context, pd: *mut ibv_pd, port: usize) -> *mut ibv_pd {
    // SAFETY: the alloc_parent_domain slot has this signature (verbs.h).
    let f: AllocPd = unsafe { std::mem::transmute(slot(ctx, -208)) };
    // SAFETY: plain C struct; all-zero is valid.
    let mut a: ibv_parent_domain_init_attr = unsafe { std::mem::zeroed() };
    a.pd = pd;
    a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    a.pd_context = port as *mut c_void;
    // SAFETY: a valid context and attribute struct.
    unsafe { f(ctx, &mut a) }
}

unsafe fn raw_qp(pd: *mut ibv_pd, cq: *mut ibv_cq, wr: u32) -> *mut ibv_qp {
    // SAFETY: plain C struct; all-zero is valid.
    let mut qa: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    qa.send_cq = cq;
    qa.recv_cq = cq;
    qa.cap.max_send_wr = wr;
    qa.cap.max_send_sge = 15;
    qa.qp_type = IBV_QPT_RAW_PACKET;
    // SAFETY: a PD and CQ from the seam.
    unsafe { ibv_create_qp(pd, &mut qa) }
}

#[test]
fn dpdk_like_queue_setup_with_manadv() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let ctx = ibv_open_device(first_device());
        let pd = ibv_alloc_pd(ctx);
        assert!(!pd.is_null());
        // No allocator yet: libmana v44 refuses CQs.
        assert!(ibv_create_cq(ctx, 64, null_mut(), null_mut(), 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        let (a0, f0) = (ALLOCS.load(Ordering::SeqCst), FREES.load(Ordering::SeqCst));
        set_alloc(ctx, 7);
        assert!(
            ibv_create_cq(ctx, 257, null_mut(), null_mut(), 0).is_null(),
            "v44 limit"
        );
        assert_eq!(errno(), libc::EINVAL);
        let txcq = ibv_create_cq(ctx, 256, 0x1234 as *mut c_void, null_mut(), 0);
        assert!(!txcq.is_null());
        assert_eq!(
            ((*txcq).context, (*txcq).cqe, (*txcq).cq_context as usize),
            (ctx, 256, 0x1234)
        );
        // RAW QP on a plain PD: EINVAL ("Create RAW QP should use parent domain").
        assert!(raw_qp(pd, txcq, 256).is_null());
        assert_eq!(errno(), libc::EINVAL);
        // Parent domain: only PD_CONTEXT accepted.
        let f: AllocPd = std::mem::transmute(slot(ctx, -208));
        let mut bad: ibv_parent_domain_init_attr = std::mem::zeroed();
        bad.pd = pd;
        assert!(f(ctx, &mut bad).is_null());
        let ppd = parent(ctx, pd, 1);
        assert!(!ppd.is_null());
        // Before the QP exists the CQ has no id (libmana 44).
        let mut dcq: manadv_cq = std::mem::zeroed();
        let mut obj: manadv_obj = std::mem::zeroed();
        obj.cq.in_ = txcq;
        obj.cq.out = &mut dcq;
        assert_eq!(manadv_init_obj(&mut obj, MANADV_OBJ_CQ as u64), 0);
        assert_eq!((dcq.cq_id, dcq.count), (0, 256));
        assert_eq!(manadv_init_obj(&mut obj, 1 << 5), libc::EINVAL);
        let qp = raw_qp(ppd, txcq, 256);
        assert!(!qp.is_null());
        assert_eq!(
            ((*qp).qp_type, (*qp).send_cq, (*qp).pd),
            (IBV_QPT_RAW_PACKET, txcq, ppd)
        );
        let mut dqp: manadv_qp = std::mem::zeroed();
        obj.qp.in_ = qp;
        obj.qp.out = &mut dqp;
        assert_eq!(
            manadv_init_obj(&mut obj, (MANADV_OBJ_QP | MANADV_OBJ_CQ) as u64),
            0
        );
        assert!(dqp.sq_id >= 1024 && dcq.cq_id >= 1024 && dqp.sq_id != dcq.cq_id);
        assert_eq!(
            (dqp.sq_count, dqp.sq_size),
            (256, 65536),
            "align_hw_size(256 * get_wqe_size(15))"
        );
        assert_eq!(dcq.buf as usize % 4096, 0);
        assert!(!dqp.db_page.is_null());
        // RX: WQs, indirection table, RSS QP.
        let cw: CreateWq = std::mem::transmute(slot(ctx, -136));
        let mut wqs = Vec::new();
        let mut cqs = Vec::new();
        for i in 0..4 {
            set_alloc(ctx, 100 + i);
            let cq = ibv_create_cq(ctx, 128, null_mut(), null_mut(), 0);
            let mut wa: ibv_wq_init_attr = std::mem::zeroed();
            wa.wq_type = IBV_WQT_RQ;
            wa.max_wr = 128;
            wa.max_sge = 1;
            wa.pd = ppd;
            wa.cq = cq;
            let wq = cw(ctx, &mut wa);
            assert!(!wq.is_null());
            assert_eq!(
                ((*wq).context, (*wq).cq, (*wq).wq_type),
                (ctx, cq, IBV_WQT_RQ)
            );
            wqs.push(wq);
            cqs.push(cq);
        }
        let ci: CreateInd = std::mem::transmute(slot(ctx, -160));
        let mut ia = ibv_rwq_ind_table_init_attr {
            log_ind_tbl_size: 2,
            ind_tbl: wqs.as_mut_ptr(),
            comp_mask: 0,
        };
        let ind = ci(ctx, &mut ia);
        assert!(!ind.is_null());
        let mut dwq: manadv_rwq = std::mem::zeroed();
        let mut o2: manadv_obj = std::mem::zeroed();
        o2.rwq.in_ = wqs[0];
        o2.rwq.out = &mut dwq;
        assert_eq!(manadv_init_obj(&mut o2, MANADV_OBJ_RWQ as u64), 0);
        assert_eq!(
            (dwq.wq_id, dwq.count, dwq.size),
            (0, 128, 4096),
            "no id before the RSS QP"
        );
        let cq_ex: CreateQpEx = std::mem::transmute(slot(ctx, -56));
        let mut key = gdma::DPDK_MANA_DEFAULT_RSS_KEY;
        let mut qa: ibv_qp_init_attr_ex = std::mem::zeroed();
        qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE;
        qa.qp_type = IBV_QPT_RAW_PACKET;
        qa.pd = ppd;
        qa.rwq_ind_tbl = ind;
        qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ as u8;
        qa.rx_hash_conf.rx_hash_key_len = 39;
        qa.rx_hash_conf.rx_hash_key = key.as_mut_ptr();
        qa.rx_hash_conf.rx_hash_fields_mask = (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4) as u64;
        assert!(cq_ex(ctx, &mut qa).is_null(), "key length must be 40");
        qa.rx_hash_conf.rx_hash_key_len = 40;
        let rss = cq_ex(ctx, &mut qa);
        assert!(!rss.is_null());
        let mut ids = Vec::new();
        for (i, wq) in wqs.iter().enumerate() {
            let mut dw: manadv_rwq = std::mem::zeroed();
            let mut dc: manadv_cq = std::mem::zeroed();
            let mut o: manadv_obj = std::mem::zeroed();
            o.rwq.in_ = *wq;
            o.rwq.out = &mut dw;
            o.cq.in_ = cqs[i];
            o.cq.out = &mut dc;
            assert_eq!(
                manadv_init_obj(&mut o, (MANADV_OBJ_RWQ | MANADV_OBJ_CQ) as u64),
                0
            );
            assert!(dw.wq_id >= 1024 && dc.cq_id >= 1024);
            assert_eq!(dw.db_page, dqp.db_page, "one doorbell page per context");
            ids.push(dw.wq_id);
        }
        ids.dedup();
        assert_eq!(ids.len(), 4);
        // Port 2's kernel interface is up: exclusive use fails with EBUSY.
        let ppd2 = parent(ctx, pd, 2);
        let cq2 = ibv_create_cq(ctx, 64, null_mut(), null_mut(), 0);
        assert!(raw_qp(ppd2, cq2, 64).is_null());
        assert_eq!(errno(), libc::EBUSY);
        // Teardown in DPDK's order; buffers go back through the allocator
        // current at destroy time.
        set_alloc(ctx, 999);
        let before = FREE_DATA.lock().unwrap().len();
        assert_eq!(ibv_destroy_qp(rss), 0);
        let di: DestroyInd = std::mem::transmute(slot(ctx, -168));
        assert_eq!(di(ind), 0);
        let dw: DestroyWq = std::mem::transmute(slot(ctx, -152));
        for (wq, cq) in wqs.iter().zip(&cqs) {
            assert_eq!(dw(*wq), 0);
            assert_eq!(ibv_destroy_cq(*cq), 0);
        }
        assert_eq!(ibv_destroy_cq(txcq), libc::EBUSY, "still used by the QP");
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_cq(txcq), 0);
        assert_eq!(ibv_destroy_cq(cq2), 0);
        assert_eq!(
            ibv_dealloc_pd(pd),
            libc::EBUSY,
            "parent domains still exist"
        );
        assert_eq!(ibv_dealloc_pd(ppd), 0);
        assert_eq!(ibv_dealloc_pd(ppd2), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        let allocs = ALLOCS.load(Ordering::SeqCst) - a0;
        let frees = FREES.load(Ordering::SeqCst) - f0;
        // CQ, SQ, 4x(CQ+RQ), CQ2, and the SQ of the EBUSY attempt (libmana
        // allocates before the kernel refuses, then frees).
        assert_eq!(allocs, 1 + 1 + 4 * 2 + 1 + 1);
        assert_eq!(frees, allocs);
        let fd = FREE_DATA.lock().unwrap();
        assert_eq!(fd.len() - before, 11, "4x(RQ+CQ), SQ, TX CQ, CQ2");
        assert!(
            fd[before..].iter().all(|&d| d == 999),
            "freed with the allocator current at destroy time"
        );
        drop(fd);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

#[test]
fn completion_channel_and_traffic_through_the_seam() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let ctx = ibv_open_device(first_device());
        set_alloc(ctx, 0);
        let pd = ibv_alloc_pd(ctx);
        let ppd = parent(ctx, pd, 1);
        let ch = ibv_create_comp_channel(ctx);
        assert!(!ch.is_null());
        let cq = ibv_create_cq(ctx, 64, 0x77 as *mut c_void, ch, 0);
        assert_eq!((*ch).refcnt, 1);
        let qp = raw_qp(ppd, cq, 64);
        let mut dqp: manadv_qp = std::mem::zeroed();
        let mut dcq: manadv_cq = std::mem::zeroed();
        let mut obj: manadv_obj = std::mem::zeroed();
        obj.qp.in_ = qp;
        obj.qp.out = &mut dqp;
        obj.cq.in_ = cq;
        obj.cq.out = &mut dcq;
        assert_eq!(
            manadv_init_obj(&mut obj, (MANADV_OBJ_QP | MANADV_OBJ_CQ) as u64),
            0
        );
        // Packet memory registered on the plain PD, like DPDK's mempools.
        let mut pkt = vec![0u8; 4096];
        let f = mana_emu::pkt::build::udp4([2; 6], [4; 6], [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 50);
        pkt[..f.len()].copy_from_slice(&f);
        let mr = ibv_reg_mr(
            pd,
            pkt.as_mut_ptr().cast(),
            pkt.len(),
            IBV_ACCESS_LOCAL_WRITE as i32,
        );
        assert!(!mr.is_null());
        assert_eq!(
            ((*mr).addr as usize, (*mr).length),
            (pkt.as_ptr() as usize, 4096)
        );
        // Arm (ibv_req_notify_cq), then send one packet.
        let arm = (*ctx).ops.req_notify_cq.unwrap();
        assert_eq!(arm(cq, 0), 0);
        let fl = libc::fcntl((*ch).fd, libc::F_GETFL);
        libc::fcntl((*ch).fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        let (mut ecq, mut ectx) = (null_mut(), null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut ecq, &mut ectx), -1);
        assert_eq!(errno(), libc::EAGAIN);
        let ring = std::slice::from_raw_parts_mut(dqp.sq_buf as *mut u8, dqp.sq_size as usize);
        let oob = gdma::TxShortOob::for_queue(dcq.cq_id, dqp.sq_id, dqp.tx_vp_offset).unwrap();
        let sge = gdma::Sge::new(pkt.as_ptr() as u64, (*mr).lkey, f.len() as u32);
        let bu = gdma::write_wqe(
            ring,
            0,
            gdma::WqType::Sq,
            &oob.to_raw().to_le_bytes(),
            &[sge],
            0,
        )
        .unwrap();
        let db = gdma::SqDoorbell::for_head_bu(dqp.sq_id, bu)
            .unwrap()
            .to_raw();
        std::ptr::write_volatile(dqp.db_page as *mut u64, db);
        // The event names the CQ and its context.
        let t0 = std::time::Instant::now();
        while ibv_get_cq_event(ch, &mut ecq, &mut ectx) != 0 {
            assert!(t0.elapsed().as_secs() < 120, "no completion event");
            std::thread::yield_now();
        }
        assert_eq!((ecq, ectx as usize), (cq, 0x77));
        ibv_ack_cq_events(cq, 1);
        assert_eq!((*cq).comp_events_completed, 1);
        // The CQE itself: owner 1 in slot 0.
        let info = std::ptr::read_volatile((dcq.buf as *const u8).add(60) as *const u32);
        assert_eq!(
            (info >> 29, info & 0xff_ffff, (info >> 24) & 1),
            (1, dqp.sq_id, 1)
        );
        assert_eq!(
            ibv_destroy_comp_channel(ch),
            libc::EBUSY,
            "CQ still attached"
        );
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(ppd), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

#[test]
fn async_fatal_event_and_device_return() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let d = first_device();
        let old_guid = ibv_get_device_guid(d);
        let ctx = ibv_open_device(d);
        let fl = libc::fcntl((*ctx).async_fd, libc::F_GETFL);
        libc::fcntl((*ctx).async_fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        let mut ev: ibv_async_event = std::mem::zeroed();
        assert_eq!(
            ibv_get_async_event(ctx, &mut ev),
            -1,
            "empty: -1 (DPDK loops until non-zero)"
        );
        assert_eq!(errno(), libc::EAGAIN);
        let emu = global().unwrap();
        emu.schedule(
            mana_emu::Fault::Reset {
                pci: PCI.into(),
                down_ms: None,
                new_name: None,
            },
            mana_emu::Trigger::Now,
        )
        .unwrap();
        assert_eq!(ibv_get_async_event(ctx, &mut ev), 0);
        assert_eq!(
            (ev.event_type, ev.element.port_num),
            (IBV_EVENT_DEVICE_FATAL, 0)
        );
        ibv_ack_async_event(&mut ev);
        assert_eq!(
            CStr::from_ptr(ibv_event_type_str(ev.event_type))
                .to_str()
                .unwrap(),
            "local catastrophic error"
        );
        // Dead context: creates fail with EIO.
        assert!(ibv_alloc_pd(ctx).is_null());
        assert_eq!(errno(), libc::EIO);
        let mut n = 0;
        let l = ibv_get_device_list(&mut n);
        assert_eq!(n, 0, "gone during the reset");
        ibv_free_device_list(l);
        assert!(
            ibv_open_device(d).is_null(),
            "the old device object is dead"
        );
        assert_eq!(ibv_close_device(ctx), 0);
        let t0 = std::time::Instant::now();
        loop {
            let l = ibv_get_device_list(&mut n);
            let dev = *l;
            ibv_free_device_list(l);
            if n == 1 {
                // (The old one is freed with its context: compare what
                // tells generations apart, not addresses.)
                assert_ne!(ibv_get_device_guid(dev), old_guid, "a fresh ibv_device");
                let c2 = ibv_open_device(dev);
                assert!(!c2.is_null());
                assert!(!ibv_alloc_pd(c2).is_null());
                break;
            }
            assert!(t0.elapsed().as_secs() < 120);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Each reset brings the device back as a fresh `ibv_device` (a new
/// generation); the old one must be freed once nothing lists or opens it,
/// as libibverbs does, or a process that lives through resets grows by one
/// device per reset (the soak's 0.68 KiB per reset).
#[test]
fn old_devices_are_freed_across_resets() {
    let _g = setup();
    // SAFETY: the C ABI exercised as a driver does, with objects from the seam itself.
    unsafe {
        let emu = global().unwrap();
        // Devices other tests keep open count too (an open context keeps
        // its device through a reset): the number after the first reset is
        // the baseline each later one must leave as it was.
        let mut live = Vec::new();
        for _ in 0..21 {
            let d = first_device();
            let ctx = ibv_open_device(d);
            assert!(!ctx.is_null());
            emu.schedule(
                mana_emu::Fault::Reset {
                    pci: PCI.into(),
                    down_ms: Some(5),
                    new_name: None,
                },
                mana_emu::Trigger::Now,
            )
            .unwrap();
            // The driver's recovery: close the dead context, poll the list
            // until the device is back.
            assert_eq!(ibv_close_device(ctx), 0);
            let t0 = std::time::Instant::now();
            loop {
                let mut n = 0;
                let l = ibv_get_device_list(&mut n);
                ibv_free_device_list(l);
                if n == 1 {
                    break;
                }
                assert!(t0.elapsed().as_secs() < 120, "the device never came back");
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            live.push(live_devices());
        }
        // The current generation replaces the last one, nothing else kept.
        assert_eq!(
            live[1..],
            [live[0]; 20],
            "ibv_devices alive after each reset"
        );
    }
}

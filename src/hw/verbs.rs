//! Owned wrappers over the libibverbs / libmana objects the driver creates.
//! Each object is destroyed by `Drop`; creation errors carry the errno and
//! the verb that failed, so callers can log what went wrong.

use crate::ffi;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::ptr::{self, NonNull};

/// A failed verbs call: which call, and the errno it left.
#[derive(Debug)]
pub struct VerbsError {
    pub call: &'static str,
    pub errno: i32,
}

impl VerbsError {
    fn last(call: &'static str) -> VerbsError {
        VerbsError {
            call,
            errno: ffi::errno(),
        }
    }
    fn from_ret(call: &'static str, ret: i32) -> VerbsError {
        // Verbs return either -1 with errno, or a positive/negative errno.
        let errno = match ret {
            -1 => ffi::errno(),
            r => r.abs(),
        };
        VerbsError { call, errno }
    }
    /// The negative errno a DPDK op returns for this failure.
    pub fn neg(&self) -> i32 {
        -self.errno.max(1)
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed: {}",
            self.call,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

pub type Result<T> = std::result::Result<T, VerbsError>;

fn nonnull<T>(p: *mut T, call: &'static str) -> Result<NonNull<T>> {
    NonNull::new(p).ok_or_else(|| VerbsError::last(call))
}

/// One RDMA device as listed by `ibv_get_device_list`.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    pub ibdev_path: PathBuf,
}

/// Whether an RDMA device whose `vendor_part_id` is `part` is MANA's
/// Ethernet (raw packet) function. 7.x kernels give a function a second
/// device, the RNIC (`GDMA_DEVICE_MANA_IB`); 6.12's `mana_ib` leaves the
/// part id 0 and offers only the Ethernet one.
pub fn is_ethernet_function(part: u32) -> bool {
    part == 0 || part == u32::from(gdma::control::GDMA_DEVICE_MANA)
}

/// The device list; devices are opened by index while the list is alive.
pub struct DeviceList {
    list: Option<NonNull<*mut ffi::ibv_device>>,
    len: usize,
}

impl DeviceList {
    /// The RDMA devices libibverbs sees. Without the kernel's RDMA stack
    /// libibverbs fails with ENOSYS: that is an empty list, which the probe
    /// then explains.
    pub fn get() -> Result<DeviceList> {
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        match NonNull::new(list) {
            Some(l) => Ok(DeviceList {
                list: Some(l),
                len: n.max(0) as usize,
            }),
            None if ffi::errno() == libc::ENOSYS => Ok(DeviceList { list: None, len: 0 }),
            None => Err(VerbsError::last("ibv_get_device_list")),
        }
    }

    fn device(&self, i: usize) -> *mut ffi::ibv_device {
        let list = self.list.expect("index into an empty device list");
        assert!(i < self.len);
        // SAFETY: the list holds `len` valid device pointers.
        unsafe { *list.as_ptr().add(i) }
    }

    pub fn infos(&self) -> Vec<DeviceInfo> {
        (0..self.len)
            .map(|i| {
                // SAFETY: a listed device stays valid while the list lives;
                // name and ibdev_path are NUL-terminated arrays.
                let d = unsafe { &*self.device(i) };
                let s = |a: &[std::ffi::c_char]| {
                    // SAFETY: see above.
                    unsafe { CStr::from_ptr(a.as_ptr()) }
                        .to_string_lossy()
                        .into_owned()
                };
                DeviceInfo {
                    name: s(&d.name),
                    ibdev_path: PathBuf::from(s(&d.ibdev_path)),
                }
            })
            .collect()
    }

    pub fn open(&self, i: usize) -> Result<Context> {
        // SAFETY: the device pointer comes from the live list.
        let ctx = unsafe { ffi::ibv_open_device(self.device(i)) };
        Ok(Context {
            ctx: nonnull(ctx, "ibv_open_device")?,
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if let Some(l) = self.list {
            // SAFETY: the list came from ibv_get_device_list and is freed once.
            unsafe { ffi::ibv_free_device_list(l.as_ptr()) };
        }
    }
}

/// An open device context (one per ethdev port, as libmana expects).
pub struct Context {
    ctx: NonNull<ffi::ibv_context>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Context {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Context {}

impl Context {
    pub fn as_ptr(&self) -> *mut ffi::ibv_context {
        self.ctx.as_ptr()
    }

    pub fn query_device_ex(&self) -> Result<ffi::ibv_device_attr_ex> {
        let mut attr = ffi::ibv_device_attr_ex::default();
        // SAFETY: valid context and out-struct.
        let ret = unsafe { ffi::mana_shim_query_device_ex(self.as_ptr(), &mut attr) };
        if ret != 0 {
            return Err(VerbsError::from_ret("ibv_query_device_ex", ret));
        }
        Ok(attr)
    }

    /// Points libmana's queue-buffer allocator at `alloc`/`free`; it is
    /// per context and last-writer-wins, so callers set it before each queue.
    pub fn set_allocators(&self, alloc: ffi::manadv_ctx_allocators) -> Result<()> {
        let mut a = alloc;
        // SAFETY: libmana copies the struct by value.
        let ret = unsafe {
            ffi::manadv_set_context_attr(
                self.as_ptr(),
                ffi::MANADV_CTX_ATTR_BUF_ALLOCATORS,
                &mut a as *mut _ as *mut c_void,
            )
        };
        if ret != 0 {
            return Err(VerbsError::from_ret("manadv_set_context_attr", ret));
        }
        Ok(())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object is dropped before the context (owners
        // keep the context last); closing also unmaps the doorbell page.
        unsafe { ffi::ibv_close_device(self.as_ptr()) };
    }
}

/// A protection domain, or a parent domain carrying the IB port number.
pub struct Pd {
    pd: NonNull<ffi::ibv_pd>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Pd {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Pd {}

impl Pd {
    pub fn alloc(ctx: &Context) -> Result<Pd> {
        // SAFETY: valid context.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.as_ptr()) };
        Ok(Pd {
            pd: nonnull(pd, "ibv_alloc_pd")?,
        })
    }

    /// libmana takes the IB port of every queue from the parent domain's
    /// `pd_context`.
    pub fn alloc_parent(ctx: &Context, pd: &Pd, ib_port: u32) -> Result<Pd> {
        let mut attr = ffi::ibv_parent_domain_init_attr {
            pd: pd.as_ptr(),
            comp_mask: ffi::IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
            pd_context: ib_port as usize as *mut c_void,
            ..Default::default()
        };
        // SAFETY: valid context and attributes.
        let p = unsafe { ffi::mana_shim_alloc_parent_domain(ctx.as_ptr(), &mut attr) };
        Ok(Pd {
            pd: nonnull(p, "ibv_alloc_parent_domain")?,
        })
    }

    pub fn as_ptr(&self) -> *mut ffi::ibv_pd {
        self.pd.as_ptr()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: the PD is deallocated once, after its users.
        unsafe { ffi::ibv_dealloc_pd(self.as_ptr()) };
    }
}

/// A registered memory region.
pub struct Mr {
    mr: NonNull<ffi::ibv_mr>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Mr {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Mr {}

impl Mr {
    /// # Safety
    /// `pd` must be a live PD that outlives the MR.
    pub unsafe fn register_raw(pd: *mut ffi::ibv_pd, addr: *mut c_void, len: usize) -> Result<Mr> {
        // SAFETY: registration only records the range; the caller keeps the
        // PD (and the memory) alive while the MR exists.
        let mr = unsafe { ffi::mana_shim_reg_mr(pd, addr, len) };
        Ok(Mr {
            mr: nonnull(mr, "ibv_reg_mr")?,
        })
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: reading a field of a live MR.
        unsafe { (*self.mr.as_ptr()).lkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: deregistered once.
        unsafe { ffi::ibv_dereg_mr(self.mr.as_ptr()) };
    }
}

/// A completion channel, for rx interrupts.
pub struct CompChannel {
    ch: NonNull<ffi::ibv_comp_channel>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for CompChannel {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    pub fn create(ctx: &Context) -> Result<CompChannel> {
        // SAFETY: valid context.
        let ch = unsafe { ffi::ibv_create_comp_channel(ctx.as_ptr()) };
        Ok(CompChannel {
            ch: nonnull(ch, "ibv_create_comp_channel")?,
        })
    }

    pub fn fd(&self) -> i32 {
        // SAFETY: reading a field of a live channel.
        unsafe { (*self.ch.as_ptr()).fd }
    }

    /// Consumes one completion event if present (the fd is non-blocking).
    pub fn take_event(&self) -> bool {
        let mut cq = ptr::null_mut();
        let mut cq_ctx = ptr::null_mut();
        // SAFETY: valid channel and out-pointers.
        if unsafe { ffi::ibv_get_cq_event(self.ch.as_ptr(), &mut cq, &mut cq_ctx) } != 0 {
            return false;
        }
        // SAFETY: `cq` was returned by the event.
        unsafe { ffi::ibv_ack_cq_events(cq, 1) };
        true
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        // SAFETY: destroyed after the CQs that use it.
        unsafe { ffi::ibv_destroy_comp_channel(self.ch.as_ptr()) };
    }
}

pub struct Cq {
    cq: NonNull<ffi::ibv_cq>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Cq {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Cq {}

impl Cq {
    pub fn create(
        ctx: &Context,
        cqe: u32,
        channel: Option<&CompChannel>,
        comp_vector: i32,
    ) -> Result<Cq> {
        let ch = channel.map_or(ptr::null_mut(), |c| c.ch.as_ptr());
        // SAFETY: valid context; the channel outlives the CQ.
        let cq = unsafe {
            ffi::ibv_create_cq(ctx.as_ptr(), cqe as i32, ptr::null_mut(), ch, comp_vector)
        };
        Ok(Cq {
            cq: nonnull(cq, "ibv_create_cq")?,
        })
    }

    pub fn as_ptr(&self) -> *mut ffi::ibv_cq {
        self.cq.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: destroyed after its QP/WQ.
        unsafe { ffi::ibv_destroy_cq(self.as_ptr()) };
    }
}

pub struct Wq {
    wq: NonNull<ffi::ibv_wq>,
}

/// libmana's `get_wqe_size`: the bytes it reserves per WQE of `sge` SGEs.
const fn libmana_wqe_size(sge: u32) -> u32 {
    (16 * sge + 16).next_multiple_of(32)
}

/// The `max_wr` and `max_sge` to ask libmana for so the RQ ring (it
/// allocates `max_wr * get_wqe_size(max_sge)`, rounded up to a power of
/// two) holds twice the bytes of `wqes` WQEs of `segs` SGEs: WQE offsets
/// wrap with the ring, and with half of it never posted a completion
/// naming a WQE before the oldest posted one (a repeated one) can never be
/// taken for one ahead of it. The fewest SGEs that do it with `wqes`
/// entries (one-SGE WQEs ask for two), else `limit` SGEs and more entries.
pub fn rq_shape(wqes: u32, segs: u32, limit: u32) -> (u32, u32) {
    let need = 2 * libmana_wqe_size(segs);
    match (1..=limit).find(|&s| libmana_wqe_size(s) >= need) {
        Some(s) => (wqes, s),
        None => {
            let per = libmana_wqe_size(limit);
            ((wqes * need).div_ceil(per), limit)
        }
    }
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Wq {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Wq {}

impl Wq {
    /// A receive WQ for `max_wr` WQEs of `segs` SGEs each; `max_sge`: the
    /// most SGEs the device lets a WQ declare.
    pub fn create_rq(
        ctx: &Context,
        parent: &Pd,
        cq: &Cq,
        max_wr: u32,
        segs: u32,
        max_sge: u32,
    ) -> Result<Wq> {
        let (max_wr, max_sge) = rq_shape(max_wr, segs, max_sge);
        let mut attr = ffi::ibv_wq_init_attr {
            wq_type: ffi::IBV_WQT_RQ,
            max_wr,
            max_sge,
            pd: parent.as_ptr(),
            cq: cq.as_ptr(),
            ..Default::default()
        };
        // SAFETY: valid context and attributes.
        let wq = unsafe { ffi::mana_shim_create_wq(ctx.as_ptr(), &mut attr) };
        Ok(Wq {
            wq: nonnull(wq, "ibv_create_wq")?,
        })
    }

    pub fn as_ptr(&self) -> *mut ffi::ibv_wq {
        self.wq.as_ptr()
    }
}

impl Drop for Wq {
    fn drop(&mut self) {
        // SAFETY: destroyed after the indirection table and RSS QP.
        unsafe { ffi::mana_shim_destroy_wq(self.as_ptr()) };
    }
}

pub struct IndTable {
    t: NonNull<ffi::ibv_rwq_ind_table>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for IndTable {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for IndTable {}

impl IndTable {
    /// `wqs.len()` must be a power of two.
    pub fn create(ctx: &Context, wqs: &[&Wq]) -> Result<IndTable> {
        debug_assert!(wqs.len().is_power_of_two());
        let mut ptrs: Vec<*mut ffi::ibv_wq> = wqs.iter().map(|w| w.as_ptr()).collect();
        let mut attr = ffi::ibv_rwq_ind_table_init_attr {
            log_ind_tbl_size: wqs.len().trailing_zeros(),
            ind_tbl: ptrs.as_mut_ptr(),
            comp_mask: 0,
        };
        // SAFETY: `ptrs` lives across the call.
        let t = unsafe { ffi::mana_shim_create_rwq_ind_table(ctx.as_ptr(), &mut attr) };
        Ok(IndTable {
            t: nonnull(t, "ibv_create_rwq_ind_table")?,
        })
    }
}

impl Drop for IndTable {
    fn drop(&mut self) {
        // SAFETY: destroyed after the RSS QP, before the WQs.
        unsafe { ffi::mana_shim_destroy_rwq_ind_table(self.t.as_ptr()) };
    }
}

pub struct Qp {
    qp: NonNull<ffi::ibv_qp>,
}

// SAFETY: libibverbs objects are not tied to the thread that created
// them (rdma-core locks what it shares internally), and the driver calls
// them from one thread at a time, under the port's control lock.
unsafe impl Send for Qp {}
// SAFETY: shared references only read the object's handle; every call
// through it is made under the port's control lock.
unsafe impl Sync for Qp {}

impl Qp {
    /// A RAW_PACKET send queue on the parent domain.
    pub fn create_raw_sq(parent: &Pd, cq: &Cq, max_send_wr: u32, max_send_sge: u32) -> Result<Qp> {
        let mut attr = ffi::ibv_qp_init_attr {
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            cap: ffi::ibv_qp_cap {
                max_send_wr,
                max_send_sge,
                ..Default::default()
            },
            qp_type: ffi::IBV_QPT_RAW_PACKET,
            sq_sig_all: 0,
            ..Default::default()
        };
        // SAFETY: valid PD and attributes.
        let qp = unsafe { ffi::ibv_create_qp(parent.as_ptr(), &mut attr) };
        Ok(Qp {
            qp: nonnull(qp, "ibv_create_qp")?,
        })
    }

    /// The receive-side RSS QP spreading over `table`.
    pub fn create_rss(
        ctx: &Context,
        parent: &Pd,
        table: &IndTable,
        key: &[u8; 40],
        fields: u64,
    ) -> Result<Qp> {
        let mut key = *key;
        let mut attr = ffi::ibv_qp_init_attr_ex {
            comp_mask: ffi::IBV_QP_INIT_ATTR_PD
                | ffi::IBV_QP_INIT_ATTR_RX_HASH
                | ffi::IBV_QP_INIT_ATTR_IND_TABLE,
            qp_type: ffi::IBV_QPT_RAW_PACKET,
            pd: parent.as_ptr(),
            rwq_ind_tbl: table.t.as_ptr(),
            rx_hash_conf: ffi::ibv_rx_hash_conf {
                rx_hash_function: ffi::IBV_RX_HASH_FUNC_TOEPLITZ as u8,
                rx_hash_key_len: key.len() as u8,
                rx_hash_key: key.as_mut_ptr(),
                rx_hash_fields_mask: fields,
            },
            ..Default::default()
        };
        // SAFETY: valid context and attributes; the key is copied by the callee.
        let qp = unsafe { ffi::mana_shim_create_qp_ex(ctx.as_ptr(), &mut attr) };
        Ok(Qp {
            qp: nonnull(qp, "ibv_create_qp_ex")?,
        })
    }

    pub fn as_ptr(&self) -> *mut ffi::ibv_qp {
        self.qp.as_ptr()
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: destroyed before its CQs and WQs.
        unsafe { ffi::ibv_destroy_qp(self.as_ptr()) };
    }
}

/// `manadv_init_obj` for a send QP and its CQ.
pub fn init_sq(qp: &Qp, cq: &Cq) -> Result<(ffi::manadv_qp, ffi::manadv_cq)> {
    let mut dv_qp = ffi::manadv_qp::default();
    let mut dv_cq = ffi::manadv_cq::default();
    let mut obj = ffi::manadv_obj::default();
    obj.qp.in_ = qp.as_ptr();
    obj.qp.out = &mut dv_qp;
    obj.cq.in_ = cq.as_ptr();
    obj.cq.out = &mut dv_cq;
    // SAFETY: all in/out pointers are valid for the call.
    let ret =
        unsafe { ffi::manadv_init_obj(&mut obj, (ffi::MANADV_OBJ_QP | ffi::MANADV_OBJ_CQ) as u64) };
    if ret != 0 {
        return Err(VerbsError::from_ret("manadv_init_obj", ret));
    }
    Ok((dv_qp, dv_cq))
}

/// `manadv_init_obj` for a receive WQ and its CQ (valid after the RSS QP exists).
pub fn init_rq(wq: &Wq, cq: &Cq) -> Result<(ffi::manadv_rwq, ffi::manadv_cq)> {
    let mut dv_wq = ffi::manadv_rwq::default();
    let mut dv_cq = ffi::manadv_cq::default();
    let mut obj = ffi::manadv_obj::default();
    obj.rwq.in_ = wq.as_ptr();
    obj.rwq.out = &mut dv_wq;
    obj.cq.in_ = cq.as_ptr();
    obj.cq.out = &mut dv_cq;
    // SAFETY: all in/out pointers are valid for the call.
    let ret = unsafe {
        ffi::manadv_init_obj(&mut obj, (ffi::MANADV_OBJ_RWQ | ffi::MANADV_OBJ_CQ) as u64)
    };
    if ret != 0 {
        return Err(VerbsError::from_ret("manadv_init_obj", ret));
    }
    Ok((dv_wq, dv_cq))
}

#[cfg(test)]
mod tests {
    use super::rq_shape;

    #[test]
    fn rq_rings_hold_twice_the_posted_wqes() {
        // One-SGE WQEs (32 bytes): two SGEs make libmana reserve 64.
        assert_eq!(rq_shape(256, 1, 15), (256, 2));
        // Two SGEs (64 bytes): 128 per entry.
        assert_eq!(rq_shape(256, 2, 15), (256, 6));
        // Five (96 bytes): 192.
        assert_eq!(rq_shape(256, 5, 15), (256, 10));
        // Nine (160 bytes): more than a 256-byte entry, so more entries.
        assert_eq!(rq_shape(256, 9, 15), (320, 15));
        // A device that lets a WQ declare fewer SGEs.
        assert_eq!(rq_shape(64, 2, 2), (128, 2));
    }
}

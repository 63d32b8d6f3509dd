//! The MANA RDMA function (`GDMA_DEVICE_MANA_IB`), which the kernel's
//! `mana_ib` drives: its registration, the adapter (capabilities, creation,
//! the MAC and GIDs it answers for), and the objects user contexts make
//! through it.
//!
//! At probe the 6.12 `mana_ib` registers the device, asks for the adapter's
//! capabilities (`MANA_IB_GET_ADAPTER_CAP`, version 3), creates one EQ for
//! fatal events and one per completion vector (on its own doorbell page and
//! PD), creates the adapter naming the fatal-event EQ, and configures the
//! netdev's MAC; the RDMA core then installs the port's GIDs, each one a
//! `MANA_IB_CONFIG_IP_ADDR`. Removal destroys the adapter, the EQs, and
//! deregisters.

pub mod mr;
pub mod rnic;

pub use mr::{GpaMr, Mr, MrSpace, Pd};
pub use rnic::{RnicCq, UdQp};

use crate::device::Device;
use crate::gdma::requests::{fail, gdma_general_resp, invalid, v1, Failure, Handled};
use crate::gdma::Registration;
use gdma::control::*;
use gdma::le::{U32, U64};
use gdma::WireType;
use std::collections::{BTreeMap, BTreeSet};
use zerocopy::FromZeros;

/// The RDMA function's protection domain, memory key and doorbell page for
/// its kernel queues (its EQs).
pub const RDMA_PDID: u32 = 3;
pub const RDMA_GPA_MKEY: u32 = 0x300;
pub const RDMA_DB_PAGE: u32 = 2;

/// What `MANA_IB_GET_ADAPTER_CAP` reports. The queue sizes give the
/// driver's `max_qp_wr` = min(1 MiB / 512, 1 MiB / 256) = 2048, and the
/// counts match what the LD_PRELOAD emulator's `ibv_query_device` reports
/// (`mana_emu::config::Limits`).
pub const CAP_QUEUE_BYTES: u32 = 1 << 20;
pub const CAP_MAX_QP: u32 = 64;
pub const CAP_MAX_CQ: u32 = 64;
pub const CAP_MAX_MR: u32 = 4096;
pub const CAP_MAX_PD: u32 = 64;
pub const CAP_SEND_SGE: u32 = 30;
pub const CAP_RECV_SGE: u32 = 15;

/// The adapter (`MANA_IB_CREATE_ADAPTER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adapter {
    pub handle: u64,
    /// The EQ fatal events go to.
    pub notify_eq: u32,
    /// MACs configured (`MANA_IB_CONFIG_MAC_ADDR`).
    pub macs: BTreeSet<[u8; 6]>,
    /// GIDs configured (`MANA_IB_CONFIG_IP_ADDR`): SGID type and the GID.
    pub gids: BTreeSet<(u32, [u8; 16])>,
}

/// The doorbell pages user contexts get (`GDMA_ALLOCATE_RESOURCE_RANGE`):
/// those after the HWC's, the Ethernet function's and the RDMA function's.
pub const USER_DB_PAGES: std::ops::Range<u32> = RDMA_DB_PAGE + 1..crate::gdma::DB_PAGES;

/// The RDMA function's state.
#[derive(Clone, Debug)]
pub struct Rdma {
    pub adapter: Option<Adapter>,
    pub(crate) next_handle: u64,
    /// Adapters created since the function started.
    pub adapters_created: u64,
    /// Doorbell pages allocated to user contexts.
    pub db_pages: BTreeSet<u32>,
    /// Doorbell pages ever allocated.
    pub db_pages_allocated: u64,
    /// Protection domains and memory regions by handle.
    pub pds: BTreeMap<u64, Pd>,
    pub mrs: BTreeMap<u64, Mr>,
    /// Guest-physical MRs of kernel consumers' PDs, by handle.
    pub gpa_mrs: BTreeMap<u64, GpaMr>,
    /// The adapter's CQs and UD/GSI QPs by handle (7.x `ib_mad`'s).
    pub cqs: BTreeMap<u64, RnicCq>,
    pub qps: BTreeMap<u64, UdQp>,
}

impl Default for Rdma {
    fn default() -> Self {
        Rdma {
            adapter: None,
            next_handle: 0x3000,
            adapters_created: 0,
            db_pages: BTreeSet::new(),
            db_pages_allocated: 0,
            pds: BTreeMap::new(),
            mrs: BTreeMap::new(),
            gpa_mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
        }
    }
}

impl Rdma {
    /// PDs of user contexts: those without `GDMA_PD_FLAG_ALLOW_GPA_MR`
    /// (7.x `ib_mad` holds a kernel PD for as long as `mana_ib` lives).
    pub fn user_pds(&self) -> usize {
        self.pds.values().filter(|p| !p.allow_gpa_mr).count()
    }
}

impl Device {
    /// Handles a request of the RDMA function; `None` for codes it does
    /// not implement.
    pub(crate) fn rdma_request(
        &mut self,
        c: RequestCode,
        hdr: &ReqHdr,
        msg: &[u8],
    ) -> Option<Handled> {
        use RequestCode::*;
        Some(match c {
            MANA_IB_GET_ADAPTER_CAP => self.query_adapter_caps(hdr),
            MANA_IB_CREATE_ADAPTER => self.create_adapter(hdr, msg),
            MANA_IB_DESTROY_ADAPTER => self.destroy_adapter(hdr, msg),
            MANA_IB_CONFIG_MAC_ADDR => self.config_mac(hdr, msg),
            MANA_IB_CONFIG_IP_ADDR => self.config_ip(hdr, msg),
            MANA_IB_QUERY_VF_COUNTERS => self.query_vf_counters(hdr, msg),
            MANA_IB_CREATE_CQ => self.create_rnic_cq(hdr, msg),
            MANA_IB_DESTROY_CQ => self.destroy_rnic_cq(hdr, msg),
            MANA_IB_CREATE_UD_QP => self.create_ud_qp(hdr, msg),
            MANA_IB_DESTROY_UD_QP => self.destroy_ud_qp(hdr, msg),
            MANA_IB_SET_QP_STATE => self.set_qp_state(hdr, msg),
            GDMA_ALLOCATE_RESOURCE_RANGE => self.allocate_resource_range(msg),
            GDMA_DESTROY_RESOURCE_RANGE => self.destroy_resource_range(msg),
            GDMA_CREATE_PD => self.create_pd(msg),
            GDMA_DESTROY_PD => self.destroy_pd(msg),
            GDMA_CREATE_MR => self.create_mr(msg),
            GDMA_DESTROY_MR => self.destroy_mr(msg),
            _ => return None,
        })
    }

    /// The registration `GDMA_REGISTER_DEVICE` hands the RDMA function.
    pub(crate) fn rdma_registration() -> Registration {
        Registration {
            pdid: RDMA_PDID,
            gpa_mkey: RDMA_GPA_MKEY,
            db_page: RDMA_DB_PAGE,
        }
    }

    /// Destroys the RDMA device's adapter (its deregistration); returns it
    /// if it was alive. Doorbell pages, PDs and MRs are the PCI function's
    /// (their requests name no device): a 7.x kernel deregisters its RDMA
    /// device while the Ethernet function's IB device (`manae_0`) still
    /// holds a user's, so they go with the function ([`Device::rdma_reset`]).
    pub(crate) fn rdma_drop_adapter(&mut self) -> Vec<String> {
        let Some(a) = self.rdma.adapter.take() else {
            return Vec::new();
        };
        let mut leaked = vec![format!(
            "adapter {:#x} ({} MACs, {} GIDs)",
            a.handle,
            a.macs.len(),
            a.gids.len()
        )];
        // Its queues go with it.
        leaked.extend(self.rnic_drop_queues());
        leaked
    }

    /// Destroys the RDMA function's objects; returns what was alive.
    pub(crate) fn rdma_reset(&mut self) -> Vec<String> {
        let mut leaked = self.rdma_drop_adapter();
        for p in std::mem::take(&mut self.rdma.db_pages) {
            leaked.push(format!("doorbell page {p}"));
        }
        for (_, m) in std::mem::take(&mut self.rdma.mrs) {
            self.release_region(Some(m.region));
            leaked.push(format!("{m:?}"));
        }
        for (h, m) in std::mem::take(&mut self.rdma.gpa_mrs) {
            leaked.push(format!("GPA MR {:#x} (handle {h:#x})", m.lkey));
        }
        for (h, p) in std::mem::take(&mut self.rdma.pds) {
            leaked.push(format!("PD {} (handle {h:#x})", p.id));
        }
        leaked
    }

    /// The RDMA function's registration, for a request addressed to it.
    fn rdma_registered(&self, hdr: &ReqHdr) -> Result<Registration, Failure> {
        if hdr.dev_id.ty.get() != GDMA_DEVICE_MANA_IB {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "addressed to device {:#x}, not the RDMA function",
                    hdr.dev_id.as_u32()
                ),
            ));
        }
        self.registration(hdr)
    }

    /// The adapter a request names.
    fn adapter_mut(&mut self, hdr: &ReqHdr, handle: u64) -> Result<&mut Adapter, Failure> {
        self.rdma_registered(hdr)?;
        match self.rdma.adapter.as_mut() {
            Some(a) if a.handle == handle => Ok(a),
            _ => Err(fail(
                status::NOT_FOUND,
                format!("adapter {handle:#x} does not exist"),
            )),
        }
    }

    fn query_adapter_caps(&mut self, hdr: &ReqHdr) -> Handled {
        self.rdma_registered(hdr)?;
        let mut r = QueryAdapterCapsResp::new_zeroed();
        r.max_sq_id = U32::new(crate::gdma::MAX_WQS);
        r.max_rq_id = U32::new(crate::gdma::MAX_WQS);
        r.max_cq_id = U32::new(crate::gdma::MAX_CQS);
        r.max_qp_count = U32::new(CAP_MAX_QP);
        r.max_cq_count = U32::new(CAP_MAX_CQ);
        r.max_mr_count = U32::new(CAP_MAX_MR);
        r.max_pd_count = U32::new(CAP_MAX_PD);
        // No RDMA reads or memory windows: the function moves raw frames.
        r.max_requester_sq_size = U32::new(CAP_QUEUE_BYTES);
        r.max_responder_sq_size = U32::new(CAP_QUEUE_BYTES);
        r.max_requester_rq_size = U32::new(CAP_QUEUE_BYTES);
        r.max_responder_rq_size = U32::new(CAP_QUEUE_BYTES);
        r.max_send_sge_count = U32::new(CAP_SEND_SGE);
        r.max_recv_sge_count = U32::new(CAP_RECV_SGE);
        Ok((GDMA_MESSAGE_V3, zerocopy::IntoBytes::as_bytes(&r).to_vec()))
    }

    fn create_adapter(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = CreateAdapterReq::decode(msg).map_err(invalid)?;
        self.rdma_registered(hdr)?;
        if let Some(a) = &self.rdma.adapter {
            return Err(fail(
                status::INVALID_DEVICE_STATE,
                format!("adapter {:#x} exists already", a.handle),
            ));
        }
        let flags = r.feature_flags.get();
        if flags != 0 {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("feature flags {flags:#x}: the adapter advertises none"),
            ));
        }
        let eq = r.notify_eq_id.get();
        match self.eqs.get(&eq) {
            Some(q) if q.owner == hdr.dev_id => {}
            Some(_) => {
                return Err(fail(
                    status::INVALID_PARAMETER,
                    format!("notify EQ {eq} belongs to another device"),
                ))
            }
            None => {
                return Err(fail(
                    status::NOT_FOUND,
                    format!("notify EQ {eq} does not exist"),
                ))
            }
        }
        let handle = self.rdma.next_handle;
        self.rdma.next_handle += 1;
        self.rdma.adapters_created += 1;
        self.rdma.adapter = Some(Adapter {
            handle,
            notify_eq: eq,
            macs: BTreeSet::new(),
            gids: BTreeSet::new(),
        });
        log::info!("RDMA adapter {handle:#x} created, fatal events to EQ {eq}");
        let mut resp = CreateAdapterResp::new_zeroed();
        resp.adapter = U64::new(handle);
        v1(&resp)
    }

    fn destroy_adapter(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = DestroyAdapterReq::decode(msg).map_err(invalid)?;
        let h = r.adapter.get();
        self.adapter_mut(hdr, h)?;
        if !self.rdma.qps.is_empty() || !self.rdma.cqs.is_empty() {
            return Err(fail(
                status::DEVICE_BUSY,
                format!(
                    "adapter {h:#x} still has {} QPs and {} CQs",
                    self.rdma.qps.len(),
                    self.rdma.cqs.len()
                ),
            ));
        }
        let a = self.rdma.adapter.take().unwrap();
        log::info!(
            "RDMA adapter {h:#x} destroyed ({} MACs, {} GIDs configured)",
            a.macs.len(),
            a.gids.len()
        );
        v1(&gdma_general_resp())
    }

    /// The RDMA function's counters: all zero, as the device carries no
    /// reliable-connection traffic (its QPs are the Ethernet function's
    /// raw ones, counted by `MANA_QUERY_GF_STAT`). The answer has the size
    /// the driver asked: 26 counters or all 34.
    fn query_vf_counters(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryVfCountersReq::decode(msg).map_err(invalid)?;
        self.adapter_mut(hdr, r.adapter.get())?;
        let size = hdr.resp.msg_size.get() as usize;
        if size != QueryVfCountersResp::SHORT_SIZE
            && size != std::mem::size_of::<QueryVfCountersResp>()
        {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("resp.msg_size {size}: 240 (26 counters) or 304 (34)"),
            ));
        }
        let resp = QueryVfCountersResp::new_zeroed();
        let mut body = zerocopy::IntoBytes::as_bytes(&resp).to_vec();
        body.truncate(size);
        Ok((GDMA_MESSAGE_V1, body))
    }

    fn config_mac(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = ConfigMacAddrReq::decode(msg).map_err(invalid)?;
        let vport_mac = self.cfg.mac;
        let a = self.adapter_mut(hdr, r.adapter.get())?;
        let mac = r.mac();
        let s = fmt_mac(&mac);
        match r.op() {
            AddrOp::Add if mac != vport_mac => Err(fail(
                status::INVALID_PARAMETER,
                format!("MAC {s} is not the vPort's ({})", fmt_mac(&vport_mac)),
            )),
            AddrOp::Add if !a.macs.insert(mac) => Err(fail(
                status::INVALID_DEVICE_STATE,
                format!("MAC {s} is configured already"),
            )),
            AddrOp::Remove if !a.macs.remove(&mac) => Err(fail(
                status::NOT_FOUND,
                format!("MAC {s} is not configured"),
            )),
            op => {
                log::info!("RDMA adapter: MAC {s} {op:?}");
                v1(&gdma_general_resp())
            }
        }
    }

    fn config_ip(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = ConfigIpAddrReq::decode(msg).map_err(invalid)?;
        let a = self.adapter_mut(hdr, r.adapter.get())?;
        let gid = r.gid();
        let ty = r.sgid_type.get();
        let v4_mapped = gid[..10].iter().all(|b| *b == 0) && gid[10..12] == [0xff, 0xff];
        if (ty == SGID_TYPE_IPV4) != v4_mapped {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "GID {} with sgid_type {ty}: IPv4 GIDs are ::ffff:a.b.c.d, and only they",
                    fmt_gid(&gid)
                ),
            ));
        }
        let s = fmt_gid(&gid);
        match r.op() {
            AddrOp::Add if !a.gids.insert((ty, gid)) => Err(fail(
                status::INVALID_DEVICE_STATE,
                format!("GID {s} is configured already"),
            )),
            AddrOp::Remove if !a.gids.remove(&(ty, gid)) => Err(fail(
                status::NOT_FOUND,
                format!("GID {s} is not configured"),
            )),
            op => {
                log::info!("RDMA adapter: GID {s} {op:?}");
                v1(&gdma_general_resp())
            }
        }
    }
}

impl Device {
    /// `GDMA_ALLOCATE_RESOURCE_RANGE`: doorbell pages for user contexts
    /// (`mana_ib` sends it with no device id: the pages are the PCI
    /// function's).
    fn allocate_resource_range(&mut self, msg: &[u8]) -> Handled {
        let r = AllocateResourceRangeReq::decode(msg).map_err(invalid)?;
        let ty = r.resource_type.get();
        if ty != GDMA_RESOURCE_DOORBELL_PAGE {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("resource type {ty}: only doorbell pages ({GDMA_RESOURCE_DOORBELL_PAGE})"),
            ));
        }
        let (n, align, from) = (
            r.num_resources.get(),
            r.alignment.get(),
            r.allocated_resources.get(),
        );
        if n == 0 || align == 0 || !align.is_power_of_two() {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("{n} doorbell pages aligned to {align}"),
            ));
        }
        let used = &self.rdma.db_pages;
        let first = USER_DB_PAGES
            .filter(|p| *p >= from && p % align == 0)
            .find(|p| (*p..p + n).all(|q| USER_DB_PAGES.contains(&q) && !used.contains(&q)))
            .ok_or_else(|| {
                fail(
                    status::INSUFFICIENT_RESOURCES,
                    format!(
                        "no {n} free doorbell pages in {}..{}",
                        USER_DB_PAGES.start, USER_DB_PAGES.end
                    ),
                )
            })?;
        self.rdma.db_pages.extend(first..first + n);
        self.rdma.db_pages_allocated += u64::from(n);
        log::info!("doorbell pages {first}..{} allocated", first + n);
        let mut resp = AllocateResourceRangeResp::new_zeroed();
        resp.allocated_resources = U32::new(first);
        v1(&resp)
    }

    fn destroy_resource_range(&mut self, msg: &[u8]) -> Handled {
        let r = DestroyResourceRangeReq::decode(msg).map_err(invalid)?;
        let ty = r.resource_type.get();
        if ty != GDMA_RESOURCE_DOORBELL_PAGE {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("resource type {ty}: only doorbell pages ({GDMA_RESOURCE_DOORBELL_PAGE})"),
            ));
        }
        let (first, n) = (r.allocated_resources.get(), r.num_resources.get());
        let range = first..first.saturating_add(n);
        if n == 0 || !range.clone().all(|p| self.rdma.db_pages.contains(&p)) {
            return Err(fail(
                status::NOT_FOUND,
                format!("doorbell pages {first}..{} are not allocated", range.end),
            ));
        }
        for p in range {
            self.rdma.db_pages.remove(&p);
        }
        log::info!("doorbell pages {first}..{} freed", first + n);
        v1(&gdma_general_resp())
    }
}

fn fmt_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A GID as sysfs prints it (`fe80:0000:...`).
pub fn fmt_gid(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

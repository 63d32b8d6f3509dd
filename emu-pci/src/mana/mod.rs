//! The MANA Ethernet function: its vPort, the requests `mana` sends for it
//! (device and vPort queries, vPort TX/RX configuration, WQ objects, RQ
//! fences, statistics), and its data queues, which live in the shared
//! device model (`mana_emu::device`, through its `hw` interface): the
//! control path here turns DMA regions into rings, picks queue ids and
//! steering, and posts the EQEs the model's CQs raise.

use crate::device::{Device, QueueKind};
use crate::gdma::requests::{fail, invalid, v1, Handled, MANA_GPA_MKEY};
use crate::gdma::ring::Ring;
use crate::gdma::MANA_DB_PAGE;
use gdma::control::*;
use gdma::le::{U16, U32, U64};
use gdma::{EqeType, WireType};
use mana_emu::device::{VportRx, WqKind};
use mana_emu::mem::Ring as ModelRing;
use std::sync::Arc;
use zerocopy::FromZeros;

/// The vPort handle the device reports for vPort 0.
pub const VPORT_HANDLE: u64 = 0x1000;
/// The vPort's port in the device model.
const PORT: usize = 0;

/// Queue types of `MANA_CREATE_WQ_OBJ` (`enum gdma_queue_type`).
const GDMA_SQ: u32 = 1;
const GDMA_RQ: u32 = 2;

/// The vPort as the driver configured it.
#[derive(Clone, Debug)]
pub struct Vport {
    /// `MANA_CONFIG_VPORT_TX`: (pdid, doorbell page).
    pub tx: Option<(u32, u32)>,
    /// The device model's PD for the registered device (its port and its
    /// guest-physical memory key).
    pub model_pd: Option<u32>,
    /// A user context's binding of the vPort (`mana_ib`'s raw QPs
    /// configure TX with a user PD and the context's doorbell page): the
    /// PD's handle, the page and the model's PD holding the PD's MR keys.
    pub user: Option<UserBinding>,
    /// `MANA_CONFIG_VPORT_RX`, as last applied.
    pub rx_enabled: bool,
    pub rss_enabled: bool,
    pub hash_key: [u8; MANA_HASH_KEY_SIZE],
    /// Indirection table of WQ object handles.
    pub table: Vec<u64>,
    pub default_rxobj: Option<u64>,
    /// Applied RX configurations and RQ fences.
    pub rx_configs: u64,
    pub fences: u64,
}

impl Default for Vport {
    fn default() -> Self {
        Vport {
            tx: None,
            model_pd: None,
            user: None,
            rx_enabled: false,
            rss_enabled: false,
            hash_key: [0; MANA_HASH_KEY_SIZE],
            table: Vec::new(),
            default_rxobj: None,
            rx_configs: 0,
            fences: 0,
        }
    }
}

/// The vPort as a user context configured it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserBinding {
    pub pd_handle: u64,
    pub pdid: u32,
    pub db_page: u32,
    pub model_pd: u32,
}

/// A WQ object: an SQ or RQ and its CQ, in the device model.
#[derive(Clone, Debug)]
pub struct WqObj {
    /// Doorbell page of its queues.
    pub page: u32,
    pub kind: WqKind,
    pub wq_id: u32,
    pub cq_id: u32,
    pub eq: u32,
    /// Handles in the device model.
    pub model_wq: u32,
    pub model_cq: u32,
    pub regions: [u64; 2],
}

impl Device {
    /// The function goes into service (a service reset was raised): the
    /// port delivers no more frames, so none lands in memory the driver
    /// frees while its unanswered teardown times out.
    pub(crate) fn quiesce_vport_rx(&mut self) {
        let off = VportRx {
            enabled: false,
            rss: false,
            key: self.vport.hash_key,
            table: Vec::new(),
            default_rq: 0,
        };
        match self.net.hw_set_vport_rx(PORT, &off) {
            Ok(()) => log::info!("vPort RX off: the function is in service"),
            Err(e) => self.error(
                "vport",
                format_args!("vPort RX off for the service: errno {}", e.0),
            ),
        }
    }

    /// Handles a MANA request; `None` for codes the device does not
    /// implement.
    pub(crate) fn mana_request(
        &mut self,
        c: RequestCode,
        hdr: &ReqHdr,
        msg: &[u8],
    ) -> Option<Handled> {
        use RequestCode::*;
        Some(match c {
            MANA_QUERY_DEV_CONFIG => self.query_dev_config(hdr, msg),
            MANA_QUERY_VPORT_CONFIG => self.query_vport_config(hdr, msg),
            MANA_QUERY_LINK_CONFIG => self.query_link_config(hdr, msg),
            MANA_CONFIG_VPORT_TX => self.config_vport_tx(hdr, msg),
            MANA_CREATE_WQ_OBJ => self.create_wq_obj(hdr, msg),
            MANA_DESTROY_WQ_OBJ => self.destroy_wq_obj(hdr, msg),
            MANA_CONFIG_VPORT_RX => self.config_vport_rx(hdr, msg),
            MANA_FENCE_RQ => self.fence_rq(hdr, msg),
            MANA_QUERY_GF_STAT => self.query_gf_stat(hdr, msg),
            _ => return None,
        })
    }

    /// The device model's side of `GDMA_REGISTER_DEVICE` for the Ethernet
    /// function: a PD on the vPort's port and the guest-physical memory key.
    pub(crate) fn mana_register(&mut self) -> Result<(), String> {
        let pd = self
            .net
            .hw_pd(MANA_DB_PAGE, PORT)
            .map_err(|e| format!("device model PD: errno {}", e.0))?;
        self.net
            .hw_register_space(pd, MANA_GPA_MKEY, Arc::new(self.mem.clone()))
            .map_err(|e| format!("device model memory key: errno {}", e.0))?;
        self.vport.model_pd = Some(pd);
        Ok(())
    }

    /// Destroys the Ethernet function's objects; returns what was alive.
    pub(crate) fn mana_reset(&mut self) -> Vec<String> {
        let mut leaked: Vec<String> = self
            .wq_objs
            .iter()
            .map(|(h, o)| {
                format!(
                    "WQ object {h:#x} ({:?} {}, CQ {})",
                    o.kind, o.wq_id, o.cq_id
                )
            })
            .collect();
        for (_, o) in std::mem::take(&mut self.wq_objs) {
            self.wq_ids.free(o.wq_id);
            self.cq_ids.free(o.cq_id);
            let wk = if o.kind == WqKind::Sq {
                QueueKind::Sq
            } else {
                QueueKind::Rq
            };
            self.retire_queue(o.page, wk, o.wq_id);
            self.retire_queue(o.page, QueueKind::Cq, o.cq_id);
            for r in o.regions {
                self.release_region(Some(r));
            }
        }
        // The model's own objects are those of the WQ objects above (or
        // nothing): its list would repeat them.
        let _ = self.net.hw_reset();
        self.vport = Vport::default();
        leaked.sort();
        leaked.dedup();
        leaked
    }

    /// A data CQ that reports to EQ `eq`, if any.
    pub(crate) fn mana_cq_on_eq(&self, eq: u32) -> Option<u32> {
        self.wq_objs.values().find(|o| o.eq == eq).map(|o| o.cq_id)
    }

    /// Runs the device model once (doorbells rung, frames waiting) and
    /// posts the completion events its CQs raised.
    pub fn net_run(&mut self) -> bool {
        let did = self.net.step();
        self.net_events();
        did
    }

    pub(crate) fn net_events(&mut self) {
        for (eq, cq) in self.net.take_eq_events() {
            self.post_eqe(eq, EqeType::GDMA_EQE_COMPLETION, cq);
        }
        for (eq, ty) in self.net.take_eq_lies() {
            *self.ledger.lie_eqes.entry(eq).or_insert(0) += 1;
            self.post_unknown_eqe(eq, ty, 0);
        }
    }

    /// A doorbell for a data queue (SQ, RQ or CQ) of page `page`.
    pub(crate) fn data_doorbell(&mut self, page: u32, reg: usize, value: u64, db: &gdma::Doorbell) {
        if self.rnic_doorbell(page, db) {
            return;
        }
        let id = db.id();
        let (known, kind) = match db {
            gdma::Doorbell::Sq(_) => (self.net.hw_has_wq(page, WqKind::Sq, id), QueueKind::Sq),
            gdma::Doorbell::Rq(_) => (self.net.hw_has_wq(page, WqKind::Rq, id), QueueKind::Rq),
            gdma::Doorbell::Cq(_) => (self.net.hw_has_cq(page, id), QueueKind::Cq),
            gdma::Doorbell::Eq(_) => unreachable!("EQ doorbells are the GDMA layer's"),
        };
        if !known {
            self.unknown_queue_doorbell(
                page,
                kind,
                id,
                format_args!(
                    "page {page} +{reg:#x}: no {kind:?} {id} on this page (value {value:#x})"
                ),
            );
            return;
        }
        self.net.hw_doorbell(page, reg, value);
        self.net_run();
    }

    fn query_dev_config(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryDevCfgReq::decode(msg).map_err(invalid)?;
        // A query, not a use of the function: later kernels (7.x,
        // `mana_gd_query_max_resources`) ask it right after LIST_DEVICES,
        // before REGISTER_DEVICE, to size their MSI-X sharing. It needs the
        // device LIST_DEVICES returned, not its registration.
        if hdr.dev_id != DevId::new(GDMA_DEVICE_MANA, 0) {
            return Err(fail(
                status::NOT_FOUND,
                format!(
                    "device {:#x} is not the MANA device LIST_DEVICES returns",
                    hdr.dev_id.as_u32()
                ),
            ));
        }
        log::info!(
            "driver speaks MANA {}.{}.{}",
            r.proto_major_ver.get(),
            r.proto_minor_ver.get(),
            r.proto_micro_ver.get()
        );
        let mut resp = QueryDevCfgResp::new_zeroed();
        resp.max_num_vports = U16::new(1);
        resp.max_num_eqs = U32::new(crate::gdma::MAX_EQS);
        resp.adapter_mtu = U16::new(self.cfg.adapter_mtu);
        let mut body = zerocopy::IntoBytes::as_bytes(&resp).to_vec();
        // Version 1 ends before adapter_mtu.
        if hdr.resp.msg_version.get() < GDMA_MESSAGE_V2 {
            body.truncate(QueryDevCfgResp::V1_SIZE);
            return Ok((GDMA_MESSAGE_V1, body));
        }
        Ok((GDMA_MESSAGE_V2, body))
    }

    fn query_vport_config(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryVportCfgReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        if r.vport_index.get() != 0 {
            return Err(fail(
                status::NOT_FOUND,
                format!("vPort {}: the device has one", r.vport_index.get()),
            ));
        }
        let mut resp = QueryVportCfgResp::new_zeroed();
        resp.max_num_sq = U32::new(self.cfg.max_queues);
        resp.max_num_rq = U32::new(self.cfg.max_queues);
        resp.num_indirection_ent = U32::new(self.cfg.indirection_entries);
        resp.mac_addr = self.cfg.mac;
        resp.vport = U64::new(VPORT_HANDLE);
        v1(&resp)
    }

    /// The vPort's link: no QoS clamp, and the speed `DeviceConfig` gives.
    fn query_link_config(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryLinkCfgReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        self.check_vport(r.vport.get())?;
        let mut resp = QueryLinkCfgResp::new_zeroed();
        resp.qos_unconfigured = 1;
        resp.link_speed_mbps = U32::new(self.cfg.link_speed_mbps);
        let mut body = zerocopy::IntoBytes::as_bytes(&resp).to_vec();
        if hdr.resp.msg_version.get() < GDMA_MESSAGE_V2 {
            body.truncate(QueryLinkCfgResp::V1_SIZE);
            return Ok((GDMA_MESSAGE_V1, body));
        }
        Ok((GDMA_MESSAGE_V2, body))
    }

    fn check_vport(&self, vport: u64) -> Result<(), crate::gdma::requests::Failure> {
        if vport != VPORT_HANDLE {
            return Err(fail(status::NOT_FOUND, format!("vPort handle {vport:#x}")));
        }
        Ok(())
    }

    fn config_vport_tx(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = ConfigVportReq::decode(msg).map_err(invalid)?;
        let reg = self.registration(hdr)?;
        self.check_vport(r.vport.get())?;
        let (pdid, db) = (r.pdid.get(), r.doorbell_pageid.get());
        if pdid != reg.pdid || db != reg.db_page {
            self.bind_user_vport(pdid, db, &reg)?;
        }
        // The kernel configures TX at every `ip link set up` and tells the
        // device nothing when it stops using the vPort.
        self.vport.tx = Some((pdid, db));
        let mut resp = ConfigVportResp::new_zeroed();
        resp.tx_vport_offset = U16::new(u16::from(self.net.vp_offset(PORT).unwrap_or(0)));
        resp.short_form_allowed = 1;
        v1(&resp)
    }

    /// `CONFIG_VPORT_TX` with a user PD and a user context's doorbell page
    /// (`mana_ib`'s raw QP): the vPort's queues go to that page and the
    /// PD's MRs are the keys their SGEs name. One user at a time, and only
    /// while the kernel's own queues are gone (the kernel's netdev down).
    fn bind_user_vport(
        &mut self,
        pdid: u32,
        db: u32,
        reg: &crate::gdma::Registration,
    ) -> Result<(), crate::gdma::requests::Failure> {
        let Some((&pd_handle, _)) = self.rdma.pds.iter().find(|(_, p)| p.id == pdid) else {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "pdid {pdid} is neither the function's ({}) nor a user PD",
                    reg.pdid
                ),
            ));
        };
        if !self.rdma.db_pages.contains(&db) {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("doorbell page {db} is not allocated to a user context"),
            ));
        }
        if let Some(u) = &self.vport.user {
            if (u.pdid, u.db_page) == (pdid, db) {
                return Ok(());
            }
            if self.wq_objs.values().any(|o| o.page == u.db_page) {
                return Err(fail(
                    status::DEVICE_BUSY,
                    format!(
                        "the vPort's queues belong to PD {} on page {}",
                        u.pdid, u.db_page
                    ),
                ));
            }
            self.unbind_user_vport();
        }
        if let Some(o) = self.wq_objs.values().find(|o| o.page != db) {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("the vPort is in use by queues on doorbell page {}", o.page),
            ));
        }
        let model_pd = self.net.hw_pd(db, PORT).map_err(|e| {
            fail(
                status::INSUFFICIENT_RESOURCES,
                format!("model PD: errno {}", e.0),
            )
        })?;
        let keys: Vec<_> = self
            .rdma
            .mrs
            .values()
            .filter(|m| m.pd == pd_handle)
            .map(|m| (m.lkey, m.space.clone()))
            .collect();
        for (lkey, space) in keys {
            let _ = self.net.hw_register_space(model_pd, lkey, space);
        }
        log::info!("vPort bound to user PD {pdid} on doorbell page {db}");
        self.vport.user = Some(UserBinding {
            pd_handle,
            pdid,
            db_page: db,
            model_pd,
        });
        Ok(())
    }

    /// Drops the user binding: its keys and model PD.
    pub(crate) fn unbind_user_vport(&mut self) {
        if let Some(u) = self.vport.user.take() {
            let keys: Vec<u32> = self
                .rdma
                .mrs
                .values()
                .filter(|m| m.pd == u.pd_handle)
                .map(|m| m.lkey)
                .collect();
            for k in keys {
                let _ = self.net.hw_unregister_space(k);
            }
            let _ = self.net.dealloc_pd(u.model_pd);
            if self.vport.tx == Some((u.pdid, u.db_page)) {
                self.vport.tx = None;
            }
        }
    }

    /// The device model's ring over the pages of DMA region `handle` (taken
    /// over by a queue of `size` bytes named `owner`).
    fn model_ring(
        &mut self,
        handle: u64,
        size: u32,
        owner: String,
    ) -> Result<ModelRing, crate::gdma::requests::Failure> {
        let ring: Ring = self
            .take_region(handle, u64::from(size), owner)
            .map_err(|(s, why)| fail(s, why))?;
        let mut pages = Vec::new();
        for i in 0..ring.len() / crate::gdma::ring::PAGE {
            let gpa = ring.gpa(i * crate::gdma::ring::PAGE);
            match self.mem.regions(gpa, crate::gdma::ring::PAGE).as_deref() {
                Some([r]) => pages.push(*r),
                _ => {
                    return Err(fail(
                        status::INVALID_PARAMETER,
                        format!("DMA region {handle:#x}: page {gpa:#x} is not guest memory"),
                    ))
                }
            }
        }
        Ok(ModelRing::paged(pages).expect("4 KiB pages"))
    }

    fn create_wq_obj(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = CreateWqobjReq::decode(msg).map_err(invalid)?;
        let ext = CreateWqobjReqExt::of(msg).map_err(invalid)?;
        let reg = self.registration(hdr)?;
        if ext.allow_rqwqe_chain != 0 {
            return Err(fail(status::NOT_SUPPORTED, "RQ WQE chaining"));
        }
        self.check_vport(r.vport.get())?;
        let kind = match r.wq_type.get() {
            GDMA_SQ => WqKind::Sq,
            GDMA_RQ => WqKind::Rq,
            t => {
                return Err(fail(
                    status::INVALID_PARAMETER,
                    format!("wq_type {t}: 1 (SQ) or 2 (RQ)"),
                ))
            }
        };
        let Some((_, page)) = self.vport.tx else {
            return Err(fail(
                status::INVALID_DEVICE_STATE,
                "vPort not configured (CONFIG_VPORT_TX)",
            ));
        };
        // The queues go to the doorbell page and PD of the vPort's TX
        // configuration: the kernel's, or a user context's.
        let model_pd = match &self.vport.user {
            Some(u) if u.db_page == page => u.model_pd,
            _ if page == reg.db_page => self.vport.model_pd.expect("registered"),
            _ => {
                return Err(fail(
                    status::INVALID_DEVICE_STATE,
                    format!("doorbell page {page} of the TX configuration has no PD"),
                ))
            }
        };
        let eq = r.cq_parent_qid.get();
        match self.eqs.get(&eq) {
            Some(q) if q.owner == hdr.dev_id => {}
            _ => return Err(fail(status::NOT_FOUND, format!("parent EQ {eq}"))),
        }
        if r.cq_moderation_ctx_id.get() != 0 {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("CQ moderation context {}", r.cq_moderation_ctx_id.get()),
            ));
        }
        let (wq_region, cq_region) = (r.wq_gdma_region.get(), r.cq_gdma_region.get());
        let handle = self.next_wq_obj;
        let Some(wq_id) = self.wq_ids.alloc() else {
            return Err(fail(status::INSUFFICIENT_RESOURCES, "no WQ id left"));
        };
        let Some(cq_id) = self.cq_ids.alloc() else {
            self.wq_ids.free(wq_id);
            return Err(fail(status::INSUFFICIENT_RESOURCES, "no CQ id left"));
        };
        let undo = |d: &mut Device| {
            d.wq_ids.free(wq_id);
            d.cq_ids.free(cq_id);
            for h in [wq_region, cq_region] {
                if d.regions.get(&h).is_some_and(|r| r.owner.is_some()) {
                    d.regions.get_mut(&h).unwrap().owner = None;
                }
            }
        };
        let built = (|| {
            let wq_ring =
                self.model_ring(wq_region, r.wq_size.get(), format!("WQ object {handle:#x}"))?;
            let cq_ring =
                self.model_ring(cq_region, r.cq_size.get(), format!("WQ object {handle:#x}"))?;
            let pd = model_pd;
            let model_cq = self
                .net
                .hw_create_cq(page, cq_id, cq_ring, eq)
                .map_err(|e| fail(status::INVALID_PARAMETER, format!("CQ: errno {}", e.0)))?;
            let model_wq = match self
                .net
                .hw_create_wq(page, kind, pd, wq_id, wq_ring, model_cq)
            {
                Ok(w) => w,
                Err(e) => {
                    let _ = self.net.hw_destroy_cq(model_cq);
                    return Err(fail(
                        status::INVALID_PARAMETER,
                        format!("WQ: errno {}", e.0),
                    ));
                }
            };
            Ok((model_wq, model_cq))
        })();
        let (model_wq, model_cq) = match built {
            Ok(x) => x,
            Err(f) => {
                undo(self);
                return Err(f);
            }
        };
        self.next_wq_obj += 1;
        let wk = if kind == WqKind::Sq {
            QueueKind::Sq
        } else {
            QueueKind::Rq
        };
        self.revive_queue(page, wk, wq_id);
        self.revive_queue(page, QueueKind::Cq, cq_id);
        self.wq_objs.insert(
            handle,
            WqObj {
                page,
                kind,
                wq_id,
                cq_id,
                eq,
                model_wq,
                model_cq,
                regions: [wq_region, cq_region],
            },
        );
        log::info!(
            "WQ object {handle:#x}: {kind:?} {wq_id} ({} bytes), CQ {cq_id} ({} bytes) on EQ {eq}",
            r.wq_size.get(),
            r.cq_size.get()
        );
        let mut resp = CreateWqobjResp::new_zeroed();
        resp.wq_id = U32::new(wq_id);
        resp.cq_id = U32::new(cq_id);
        resp.wq_obj = U64::new(handle);
        // Version 2 reports the CQ's moderation: none (the device does not
        // advertise GDMA_PF_CAP_FLAG_1_DYN_INTERRUPT_MODERATION, so a
        // request for it is declined by reporting it off).
        let mut body = zerocopy::IntoBytes::as_bytes(&resp).to_vec();
        if hdr.resp.msg_version.get() < GDMA_MESSAGE_V2 {
            body.truncate(CreateWqobjResp::V1_SIZE);
            return Ok((GDMA_MESSAGE_V1, body));
        }
        Ok((GDMA_MESSAGE_V2, body))
    }

    fn destroy_wq_obj(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = DestroyWqobjReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        let h = r.wq_obj_handle.get();
        let o = self
            .wq_objs
            .get(&h)
            .cloned()
            .ok_or_else(|| fail(status::NOT_FOUND, format!("WQ object {h:#x}")))?;
        let want = if o.kind == WqKind::Sq {
            GDMA_SQ
        } else {
            GDMA_RQ
        };
        if r.wq_type.get() != want {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("wq_type {} for a {:?} object", r.wq_type.get(), o.kind),
            ));
        }
        self.net.hw_destroy_wq(o.model_wq).map_err(|e| {
            fail(
                status::DEVICE_BUSY,
                format!(
                    "{:?} {}: errno {} (still steered to?)",
                    o.kind, o.wq_id, e.0
                ),
            )
        })?;
        let _ = self.net.hw_destroy_cq(o.model_cq);
        self.wq_objs.remove(&h);
        self.wq_ids.free(o.wq_id);
        self.cq_ids.free(o.cq_id);
        let wk = if o.kind == WqKind::Sq {
            QueueKind::Sq
        } else {
            QueueKind::Rq
        };
        self.retire_queue(o.page, wk, o.wq_id);
        self.retire_queue(o.page, QueueKind::Cq, o.cq_id);
        for r in o.regions {
            self.release_region(Some(r));
        }
        v1(&gdma_general())
    }

    fn config_vport_rx(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let version = hdr.req.msg_version.get();
        if !(GDMA_MESSAGE_V2..=GDMA_MESSAGE_V5).contains(&version) {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("CONFIG_VPORT_RX version {version} (the device takes v2 to v5)"),
            ));
        }
        let s = CfgRxSteerReqV2::decode_with_table(msg).map_err(invalid)?;
        self.registration(hdr)?;
        self.check_vport(s.req.vport.get())?;
        if s.req.cqe_coalescing_enable == 1 || s.req.cqe8_coalescing_enable == 1 {
            // Permitted, not required: the model reports one packet per CQE.
            log::debug!("CONFIG_VPORT_RX permits CQE coalescing; the device does not coalesce");
        }
        let hash_types = s.req.rss_hash_types.get();
        if hash_types != 0 {
            // Not modelled: the model hashes what the 6.12 driver gets (IPv4
            // addresses, TCP/UDP ports) whatever the driver selects.
            log::info!("CONFIG_VPORT_RX v{version}: RSS hash types {hash_types:#x} (not modelled)");
        }
        let mut v = self.vport.clone();
        match s.rx_enable {
            TriState::True => v.rx_enabled = true,
            TriState::False => v.rx_enabled = false,
            TriState::Unknown => {}
        }
        match s.rss_enable {
            TriState::True => v.rss_enabled = true,
            TriState::False => v.rss_enabled = false,
            TriState::Unknown => {}
        }
        if s.req.update_default_rxobj != 0 {
            v.default_rxobj = Some(s.req.default_rxobj.get());
        }
        if s.req.update_hashkey != 0 {
            v.hash_key = s.req.hashkey;
        }
        if s.req.update_indir_tab != 0 {
            v.table = s.table.iter().map(|h| h.get()).collect();
        }
        let rq = |d: &Device, h: u64| match d.wq_objs.get(&h) {
            Some(o) if o.kind == WqKind::Rq => Ok(o.model_wq),
            _ => Err(fail(
                status::INVALID_PARAMETER,
                format!("RX object {h:#x} is not an RQ object"),
            )),
        };
        let model = if v.rx_enabled {
            let default = v.default_rxobj.ok_or_else(|| {
                fail(
                    status::INVALID_PARAMETER,
                    "RX enabled without a default RX object",
                )
            })?;
            let table = if v.rss_enabled {
                v.table
                    .iter()
                    .map(|h| rq(self, *h))
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                Vec::new()
            };
            VportRx {
                enabled: true,
                rss: v.rss_enabled,
                key: v.hash_key,
                table,
                default_rq: rq(self, default)?,
            }
        } else {
            VportRx {
                enabled: false,
                rss: false,
                key: v.hash_key,
                table: Vec::new(),
                default_rq: 0,
            }
        };
        self.net.hw_set_vport_rx(PORT, &model).map_err(|e| {
            fail(
                status::INVALID_PARAMETER,
                format!("steering: errno {}", e.0),
            )
        })?;
        v.rx_configs += 1;
        log::info!(
            "vPort RX {}: RSS {}, {} table entries",
            if v.rx_enabled { "on" } else { "off" },
            if v.rss_enabled { "on" } else { "off" },
            v.table.len()
        );
        self.vport = v;
        // Version 2 of the response adds the coalescing timeout: 0, the
        // device does not coalesce.
        let resp = CfgRxSteerResp::new_zeroed();
        let mut body = zerocopy::IntoBytes::as_bytes(&resp).to_vec();
        if hdr.resp.msg_version.get() < GDMA_MESSAGE_V2 {
            body.truncate(CfgRxSteerResp::V1_SIZE);
            return Ok((GDMA_MESSAGE_V1, body));
        }
        Ok((GDMA_MESSAGE_V2, body))
    }

    fn fence_rq(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = FenceRqReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        let h = r.wq_obj_handle.get();
        let o = match self.wq_objs.get(&h) {
            Some(o) if o.kind == WqKind::Rq => o.clone(),
            _ => return Err(fail(status::NOT_FOUND, format!("RQ object {h:#x}"))),
        };
        // Frames already taken are completed first (one model pass), then
        // the fence CQE.
        self.net_run();
        self.net
            .hw_fence_rq(o.model_wq)
            .map_err(|e| fail(status::INVALID_PARAMETER, format!("fence: errno {}", e.0)))?;
        self.net_events();
        self.vport.fences += 1;
        v1(&gdma_general())
    }

    fn query_gf_stat(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryGfStatReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        let c = self.net.counters();
        let p = &c.ports[PORT].counters;
        let mut resp = QueryGfStatResp::new_zeroed();
        // Only what the device counts; the flags say which.
        const RX_DISCARDS_NO_WQE: u64 = 1 << 0;
        const HC_RX_BYTES: u64 = 1 << 2;
        const HC_TX_BYTES: u64 = 1 << 19;
        resp.reported_stats =
            U64::new(r.req_stats.get() & (RX_DISCARDS_NO_WQE | HC_RX_BYTES | HC_TX_BYTES));
        resp.rx_discards_nowqe = U64::new(p.drops("no_rx_buffer"));
        resp.hc_rx_bytes = U64::new(p.rx_bytes);
        resp.hc_tx_bytes = U64::new(p.tx_bytes);
        Ok((
            GDMA_MESSAGE_V2.min(hdr.resp.msg_version.get()),
            zerocopy::IntoBytes::as_bytes(&resp).to_vec(),
        ))
    }
}

fn gdma_general() -> RespHdr {
    RespHdr::new_zeroed()
}

//! Request dispatch: every message taken off the HWC is answered, with the
//! response header echoing the request's HWC slot, device id and activity
//! id. Requests the device does not implement are answered
//! `NOT_SUPPORTED` and logged by name; malformed ones `INVALID_PARAMETER`
//! with the field that failed. This module also holds the GDMA-layer
//! requests (the MANA ones are in `crate::mana`).

use super::eq::Eq;
use super::ring::Producer;
use super::{DmaRegion, Registration, DB_PAGES, MANA_DB_PAGE, MAX_CQS, MAX_EQS, MAX_WQS};
use crate::device::{Device, QueueKind};
use crate::ledger::request_name;
use crate::pci::MSIX_VECTORS;
use gdma::control::*;
use gdma::le::{U32, U64};
use gdma::{EqeType, WireType};
use zerocopy::{FromZeros, IntoBytes};

/// The MANA Ethernet function's protection domain and memory key for
/// guest-physical SGEs.
pub const MANA_PDID: u32 = 2;
pub const MANA_GPA_MKEY: u32 = 0x200;

/// Queue type numbers of `GDMA_CREATE_QUEUE` / `GDMA_DISABLE_QUEUE`.
const GDMA_EQ: u32 = 4;

/// How a request was handled: the response (its header is filled in by
/// the dispatcher) and its format version, or a failure.
pub(crate) type Handled = Result<(u16, Vec<u8>), Failure>;

pub(crate) struct Failure {
    pub status: u32,
    pub why: String,
}

pub(crate) fn fail(status: u32, why: impl Into<String>) -> Failure {
    Failure {
        status,
        why: why.into(),
    }
}

pub(crate) fn invalid(e: gdma::DecodeError) -> Failure {
    fail(status::INVALID_PARAMETER, e.to_string())
}

/// A response body as `(version 1, bytes)`.
pub(crate) fn v1<T: IntoBytes + zerocopy::Immutable>(r: &T) -> Handled {
    Ok((GDMA_MESSAGE_V1, r.as_bytes().to_vec()))
}

impl Device {
    /// Answers one request message (as read from the driver's buffer).
    pub(crate) fn handle_request(&mut self, msg: &[u8]) -> Vec<u8> {
        let hdr = match ReqHdr::decode(msg) {
            Ok(h) => h,
            Err(e) => return self.answer_malformed(msg, e),
        };
        let code = hdr.req.msg_type.get();
        let name = request_name(code);
        self.ledger.received(&name);
        if hdr.req.msg_size.get() as usize != msg.len() {
            let why = format!(
                "msg_size {} but the SGE carries {} bytes",
                hdr.req.msg_size.get(),
                msg.len()
            );
            return self.answer(
                &hdr,
                &name,
                Err(fail(status::INVALID_PARAMETER, why)),
                false,
            );
        }
        let (result, unimplemented) = match RequestCode::from_raw(code) {
            Some(c) => self.dispatch(c, &hdr, msg),
            None => (
                Err(fail(status::NOT_SUPPORTED, "unknown request code")),
                true,
            ),
        };
        self.answer(&hdr, &name, result, unimplemented)
    }

    fn dispatch(&mut self, c: RequestCode, hdr: &ReqHdr, msg: &[u8]) -> (Handled, bool) {
        use RequestCode::*;
        // Request formats past v3 exist only for CONFIG_VPORT_RX (v5, 7.x).
        let version = hdr.req.msg_version.get();
        if version > GDMA_MESSAGE_V3 && c != MANA_CONFIG_VPORT_RX {
            let why = format!("request version {version}: this request has at most v3");
            return (Err(fail(status::INVALID_PARAMETER, why)), false);
        }
        let r = match c {
            GDMA_VERIFY_VF_DRIVER_VERSION => self.verify_version(msg),
            GDMA_QUERY_MAX_RESOURCES => self.query_max_resources(),
            GDMA_LIST_DEVICES => self.list_devices(),
            GDMA_REGISTER_DEVICE => self.register_device(hdr),
            GDMA_DEREGISTER_DEVICE => self.deregister_device(hdr),
            GDMA_QUERY_HWC_TIMEOUT => self.query_hwc_timeout(msg),
            GDMA_GENERATE_TEST_EQE => self.generate_test_eqe(hdr, msg),
            GDMA_CREATE_QUEUE => self.create_queue(hdr, msg),
            GDMA_DISABLE_QUEUE => self.disable_queue(hdr, msg),
            GDMA_CREATE_DMA_REGION => self.create_dma_region(msg),
            GDMA_DMA_REGION_ADD_PAGES => self.dma_region_add_pages(msg),
            GDMA_DESTROY_DMA_REGION => self.destroy_dma_region(msg),
            _ => match self
                .rdma_request(c, hdr, msg)
                .or_else(|| self.mana_request(c, hdr, msg))
            {
                Some(r) => r,
                None => return (Err(fail(status::NOT_SUPPORTED, "not implemented")), true),
            },
        };
        (r, false)
    }

    fn answer(&mut self, req: &ReqHdr, name: &str, r: Handled, unimplemented: bool) -> Vec<u8> {
        // A device answers at most the version the driver asked for.
        let asked = req.resp.msg_version.get();
        let more = std::mem::take(&mut self.more_entries);
        let (status, version, mut body) = match r {
            Ok((v, body)) if more => (status::MORE_ENTRIES, v.min(asked), body),
            Ok((v, body)) => (status::SUCCESS, v.min(asked), body),
            Err(f) => {
                if unimplemented {
                    log::warn!("{name}: {}; answered {:#x}", f.why, f.status);
                } else {
                    log::warn!("{name} refused: {}; answered {:#x}", f.why, f.status);
                }
                (f.status, GDMA_MESSAGE_V1.min(asked), vec![0u8; 32])
            }
        };
        // MORE_ENTRIES is a success that continues.
        let counted = if status == status::MORE_ENTRIES {
            0
        } else {
            status
        };
        self.ledger.answered(name, counted, unimplemented);
        let size = body.len() as u32;
        let h = RespHdr::answering(req, version, size, status);
        body[..32].copy_from_slice(h.as_bytes());
        if counted == 0 {
            log::debug!("{name}: ok ({size} bytes)");
        }
        body
    }

    /// A request whose header does not decode: answered if its HWC slot can
    /// be read (so the driver does not wait for a timeout).
    fn answer_malformed(&mut self, msg: &[u8], e: gdma::DecodeError) -> Vec<u8> {
        let name = msg
            .get(4..8)
            .map(|b| request_name(u32::from_le_bytes(b.try_into().unwrap())))
            .unwrap_or_else(|| "truncated request".into());
        self.ledger.received(&name);
        let mut raw = ReqHdr::new_zeroed();
        let n = msg.len().min(40);
        raw.as_mut_bytes()[..n].copy_from_slice(&msg[..n]);
        raw.resp.msg_version = GDMA_MESSAGE_V1.into();
        let why = format!("malformed request header: {e}");
        self.answer(
            &raw,
            &name,
            Err(fail(status::INVALID_PARAMETER, why)),
            false,
        )
    }

    /// The registration of the device a request addresses.
    pub(crate) fn registration(&self, hdr: &ReqHdr) -> Result<Registration, Failure> {
        let dev = hdr.dev_id;
        self.registered.get(&dev.as_u32()).copied().ok_or_else(|| {
            fail(
                status::INVALID_DEVICE_STATE,
                format!("device {:#x} is not registered", dev.as_u32()),
            )
        })
    }

    fn verify_version(&mut self, msg: &[u8]) -> Handled {
        let r = VerifyVerReq::decode(msg).map_err(invalid)?;
        let (min, max) = (r.protocol_ver_min.get(), r.protocol_ver_max.get());
        if !(min..=max).contains(&GDMA_PROTOCOL_V1) {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!("protocol versions {min}..={max} exclude {GDMA_PROTOCOL_V1}"),
            ));
        }
        let os = String::from_utf8_lossy(&r.os_ver_str2);
        log::info!(
            "driver: os type {:#x}, {}.{}.{} ({}), capabilities {:#x}",
            r.os_type.get(),
            r.os_ver_major.get(),
            r.os_ver_minor.get(),
            r.os_ver_build.get(),
            os.trim_end_matches('\0'),
            r.gd_drv_cap_flags1.get()
        );
        let mut resp = VerifyVerResp::new_zeroed();
        resp.gdma_protocol_ver = U64::new(GDMA_PROTOCOL_V1);
        resp.pf_cap_flags1 = U64::new(GDMA_DRV_CAP_FLAG_1_HWC_TIMEOUT_RECONFIG);
        v1(&resp)
    }

    fn query_max_resources(&mut self) -> Handled {
        let mut r = QueryMaxResourcesResp::new_zeroed();
        r.max_sq = U32::new(MAX_WQS / 2);
        r.max_rq = U32::new(MAX_WQS / 2);
        r.max_cq = U32::new(MAX_CQS);
        r.max_eq = U32::new(MAX_EQS);
        r.max_db = U32::new(DB_PAGES);
        r.max_mst = U32::new(1024);
        r.max_msix = U32::new(MSIX_VECTORS as u32);
        v1(&r)
    }

    fn list_devices(&mut self) -> Handled {
        let mut r = ListDevicesResp::new_zeroed();
        let devs = [
            DevId::new(GDMA_DEVICE_HWC, 0),
            DevId::new(GDMA_DEVICE_MANA, 0),
            DevId::new(GDMA_DEVICE_MANA_IB, 0),
        ];
        r.num_of_devs = U32::new(devs.len() as u32);
        r.devs[..devs.len()].copy_from_slice(&devs);
        v1(&r)
    }

    fn register_device(&mut self, hdr: &ReqHdr) -> Handled {
        let dev = hdr.dev_id;
        let is_mana = dev == DevId::new(GDMA_DEVICE_MANA, 0);
        if !is_mana && dev != DevId::new(GDMA_DEVICE_MANA_IB, 0) {
            return Err(fail(
                status::NOT_FOUND,
                format!("device {:#x} is not one LIST_DEVICES returns", dev.as_u32()),
            ));
        }
        if self.registered.contains_key(&dev.as_u32()) {
            return Err(fail(
                status::INVALID_DEVICE_STATE,
                "device already registered",
            ));
        }
        let reg = if is_mana {
            self.mana_register()
                .map_err(|why| fail(status::INSUFFICIENT_RESOURCES, why))?;
            Registration {
                pdid: MANA_PDID,
                gpa_mkey: MANA_GPA_MKEY,
                db_page: MANA_DB_PAGE,
            }
        } else {
            Device::rdma_registration()
        };
        self.registered.insert(dev.as_u32(), reg);
        let mut r = RegisterDeviceResp::new_zeroed();
        r.pdid = U32::new(reg.pdid);
        r.gpa_mkey = U32::new(reg.gpa_mkey);
        r.db_id = U32::new(reg.db_page);
        v1(&r)
    }

    fn deregister_device(&mut self, hdr: &ReqHdr) -> Handled {
        let dev = hdr.dev_id;
        if dev.ty.get() == GDMA_DEVICE_HWC {
            return Err(fail(
                status::INVALID_PARAMETER,
                "the HWC is not deregistered",
            ));
        }
        self.registration(hdr)?;
        // What the device still holds for it goes with it.
        let eqs: Vec<u32> = self
            .eqs
            .values()
            .filter(|q| q.owner == dev)
            .map(|q| q.id)
            .collect();
        for id in eqs {
            let q = self.eqs.remove(&id).unwrap();
            self.eq_ids.free(id);
            self.release_region(q.region);
            let l = format!("EQ {id}");
            log::warn!("DEREGISTER_DEVICE: {l} was still alive; destroyed by the device");
            self.ledger.leaked.push(l);
        }
        let leaked = if dev.ty.get() == GDMA_DEVICE_MANA {
            self.mana_reset()
        } else {
            self.rdma_drop_adapter().into_iter().collect()
        };
        for l in leaked {
            log::warn!("DEREGISTER_DEVICE: {l} was still alive; destroyed by the device");
            self.ledger.leaked.push(l);
        }
        self.registered.remove(&dev.as_u32());
        v1(&gdma_general_resp())
    }

    fn query_hwc_timeout(&mut self, msg: &[u8]) -> Handled {
        let r = QueryHwcTimeoutReq::decode(msg).map_err(invalid)?;
        let mut resp = QueryHwcTimeoutResp::new_zeroed();
        // The device takes the driver's timeout as it is.
        resp.timeout_ms = r.timeout_ms;
        v1(&resp)
    }

    fn generate_test_eqe(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = GenerateTestEventReq::decode(msg).map_err(invalid)?;
        let id = r.queue_index.get();
        match self.eqs.get(&id) {
            Some(q) if q.owner == hdr.dev_id => {}
            Some(_) => {
                return Err(fail(
                    status::INVALID_PARAMETER,
                    format!("EQ {id} belongs to another device"),
                ))
            }
            None => return Err(fail(status::NOT_FOUND, format!("EQ {id} does not exist"))),
        }
        self.post_eqe(id, EqeType::GDMA_EQE_TEST_EVENT, 0);
        v1(&gdma_general_resp())
    }

    fn create_queue(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = CreateQueueReq::decode(msg).map_err(invalid)?;
        let reg = self.registration(hdr)?;
        if r.queue_type.get() != GDMA_EQ {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!(
                    "queue type {}: only EQs are created this way",
                    r.queue_type.get()
                ),
            ));
        }
        if r.pdid.get() != reg.pdid || r.doorbell_id.get() != reg.db_page {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "pdid {} / doorbell {}: the device's are {} / {}",
                    r.pdid.get(),
                    r.doorbell_id.get(),
                    reg.pdid,
                    reg.db_page
                ),
            ));
        }
        let size = u64::from(r.queue_size.get());
        let entries = size / gdma::EQE_SIZE as u64;
        let throttle = r.log2_throttle_limit.get();
        if entries.is_power_of_two() && u64::from(throttle) > u64::from(entries.ilog2()) {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("log2_throttle_limit {throttle} above log2 of {entries} entries"),
            ));
        }
        let msix = r.eq_pci_msix_index.get();
        if msix as usize >= self.irqs.count() {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!("MSI-X vector {msix}"),
            ));
        }
        let id = self
            .eq_ids
            .alloc()
            .ok_or_else(|| fail(status::INSUFFICIENT_RESOURCES, "no EQ id left"))?;
        let handle = r.gdma_region.get();
        let ring = match self.take_region(handle, size, format!("EQ {id}")) {
            Ok(ring) => ring,
            Err((s, why)) => {
                self.eq_ids.free(id);
                return Err(fail(s, why));
            }
        };
        self.revive_queue(reg.db_page, QueueKind::Eq, id);
        self.eqs.insert(
            id,
            Eq {
                id,
                owner: hdr.dev_id,
                producer: Producer::new(ring, gdma::EQE_SIZE, true),
                msix: msix as u16,
                db_page: reg.db_page,
                region: Some(handle),
                events: 0,
                interrupts: 0,
            },
        );
        log::info!("EQ {id}: {entries} entries, MSI-X {msix}");
        let mut resp = CreateQueueResp::new_zeroed();
        resp.queue_index = U32::new(id);
        v1(&resp)
    }

    fn disable_queue(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = DisableQueueReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
        if r.queue_type.get() != GDMA_EQ {
            return Err(fail(
                status::NOT_SUPPORTED,
                format!(
                    "queue type {}: only EQs are disabled this way",
                    r.queue_type.get()
                ),
            ));
        }
        let id = r.queue_index.get();
        match self.eqs.get(&id) {
            Some(q) if q.owner == hdr.dev_id => {}
            Some(_) => {
                return Err(fail(
                    status::INVALID_PARAMETER,
                    format!("EQ {id} belongs to another device"),
                ))
            }
            None => return Err(fail(status::NOT_FOUND, format!("EQ {id} does not exist"))),
        }
        if let Some(cq) = self.mana_cq_on_eq(id) {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("EQ {id} still serves CQ {cq}"),
            ));
        }
        if let Some(a) = self.rdma.adapter.as_ref().filter(|a| a.notify_eq == id) {
            return Err(fail(
                status::DEVICE_BUSY,
                format!("EQ {id} still takes adapter {:#x}'s fatal events", a.handle),
            ));
        }
        let q = self.eqs.remove(&id).unwrap();
        self.eq_ids.free(id);
        self.retire_queue(q.db_page, QueueKind::Eq, id);
        self.release_region(q.region);
        log::info!(
            "EQ {id} disabled ({} events, {} interrupts)",
            q.events,
            q.interrupts
        );
        v1(&gdma_general_resp())
    }

    fn create_dma_region(&mut self, msg: &[u8]) -> Handled {
        let (r, pages) = CreateDmaRegionReq::decode_with_pages(msg).map_err(invalid)?;
        if self.regions.len() >= 4096 {
            return Err(fail(
                status::INSUFFICIENT_RESOURCES,
                "4096 DMA regions exist",
            ));
        }
        let region = DmaRegion {
            length: r.length.get(),
            offset_in_page: r.offset_in_page.get(),
            page_size: r.page_size(),
            page_count: r.page_count.get(),
            pages: pages.iter().collect(),
            owner: None,
        };
        // mana_ib sends the rest of a long page list by ADD_PAGES and
        // expects MORE_ENTRIES until the list is complete.
        self.more_entries = !region.complete();
        let h = self.new_region(region);
        let mut resp = CreateDmaRegionResp::new_zeroed();
        resp.dma_region_handle = U64::new(h);
        v1(&resp)
    }

    fn dma_region_add_pages(&mut self, msg: &[u8]) -> Handled {
        let (r, pages) = DmaRegionAddPagesReq::decode_with_pages(msg).map_err(invalid)?;
        let h = r.dma_region_handle.get();
        let reg = self.regions.get_mut(&h).ok_or_else(|| {
            fail(
                status::NOT_FOUND,
                format!("DMA region {h:#x} does not exist"),
            )
        })?;
        if reg.pages.len() + pages.len() > reg.page_count as usize {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "{} more pages for a region of {} with {} already",
                    pages.len(),
                    reg.page_count,
                    reg.pages.len()
                ),
            ));
        }
        if let Some(bad) = pages.iter().find(|p| p % reg.page_size != 0) {
            return Err(fail(
                status::INVALID_PARAMETER,
                format!(
                    "page {bad:#x} is not aligned to the region's {}-byte pages",
                    reg.page_size
                ),
            ));
        }
        reg.pages.extend(pages.iter());
        self.more_entries = !reg.complete();
        v1(&gdma_general_resp())
    }

    fn destroy_dma_region(&mut self, msg: &[u8]) -> Handled {
        let r = DestroyDmaRegionReq::decode(msg).map_err(invalid)?;
        let h = r.dma_region_handle.get();
        match self.regions.get(&h) {
            None => Err(fail(
                status::NOT_FOUND,
                format!("DMA region {h:#x} does not exist"),
            )),
            Some(reg) if reg.owner.is_some() => Err(fail(
                status::DEVICE_BUSY,
                format!(
                    "DMA region {h:#x} belongs to {}",
                    reg.owner.as_deref().unwrap()
                ),
            )),
            Some(_) => {
                self.regions.remove(&h);
                v1(&gdma_general_resp())
            }
        }
    }
}

/// A response with nothing after the header (`struct gdma_general_resp`).
pub(crate) fn gdma_general_resp() -> RespHdr {
    RespHdr::new_zeroed()
}

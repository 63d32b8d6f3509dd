//! The MANA Ethernet function: its vPort, the requests `mana` sends for it
//! (device and vPort queries, vPort TX/RX configuration, WQ objects, RQ
//! fences, statistics), and the doorbells of its data queues.

use crate::device::Device;
use crate::gdma::requests::{fail, invalid, v1, Handled};
use gdma::control::*;
use gdma::le::{U16, U32, U64};
use gdma::WireType;
use zerocopy::FromZeros;

/// The vPort handle the device reports for vPort 0.
pub const VPORT_HANDLE: u64 = 0x1000;

impl Device {
    /// Handles a MANA request; `None` for codes the device does not
    /// implement.
    pub(crate) fn mana_request(&mut self, c: RequestCode, hdr: &ReqHdr, msg: &[u8]) -> Option<Handled> {
        use RequestCode::*;
        Some(match c {
            MANA_QUERY_DEV_CONFIG => self.query_dev_config(hdr, msg),
            MANA_QUERY_VPORT_CONFIG => self.query_vport_config(hdr, msg),
            _ => return None,
        })
    }

    /// Destroys the Ethernet function's objects; returns what was alive.
    pub(crate) fn mana_reset(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// A data CQ that reports to EQ `eq`, if any.
    pub(crate) fn mana_cq_on_eq(&self, _eq: u32) -> Option<u32> {
        None
    }

    fn query_dev_config(&mut self, hdr: &ReqHdr, msg: &[u8]) -> Handled {
        let r = QueryDevCfgReq::decode(msg).map_err(invalid)?;
        self.registration(hdr)?;
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

    pub(crate) fn data_sq_doorbell(&mut self, page: u32, id: u32, _tail: u32) {
        self.error("doorbell", format_args!("SQ doorbell on page {page} for SQ {id}, which does not exist"));
    }
    pub(crate) fn data_rq_doorbell(&mut self, page: u32, id: u32, _tail: u32) {
        self.error("doorbell", format_args!("RQ doorbell on page {page} for RQ {id}, which does not exist"));
    }
    pub(crate) fn data_cq_doorbell(&mut self, page: u32, id: u32, _tail: u32, _arm: bool) {
        self.error("doorbell", format_args!("CQ doorbell on page {page} for CQ {id}, which does not exist"));
    }
}

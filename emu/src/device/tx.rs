//! Send queues: consuming WQEs, validating the TX OOB (format, CQ, SQ
//! frame, vPort), gathering the frame, checksum offloads, TSO (LSO), VLAN
//! insertion and MTU checks; one CQE per WQE unless suppressed, one per
//! failed WQE always, with the drop reason counted on the port.

#![forbid(unsafe_code)]

use super::dma;
use super::State;
use crate::pkt;
use crate::wire::{self, vendor_err as ve, TxOob, WqeHeader};

const TX_BUDGET: usize = 256;
/// Largest frame a TX WQE may gather (an LSO send: 64 KiB + headers).
const MAX_TX_GATHER: u64 = 65536 + 256;

impl State {
    pub(super) fn process_sq(&mut self, wqh: u32, out: &mut Vec<(usize, Vec<u8>)>) -> bool {
        let mut did = false;
        for _ in 0..TX_BUDGET {
            let w = &self.wqs[&wqh];
            if !w.active || w.dev_off == w.db_tail {
                break;
            }
            let port = w.port.expect("SQ has a port");
            if self.ports[port].tx_paused {
                break;
            }
            did = true;
            let off = w.dev_off;
            let ring_off = (off as usize) & (w.buf.len() - 1);
            let sq_id = w.hw_id.unwrap_or(0);
            let cqh = w.cq;
            let base_pd = self.base_pd(w.pd);
            let parsed = dma::read_wqe(w, wire::MAX_TX_WQE);
            let (advance, result) = match parsed {
                Err((code, skip)) => (skip, Err((wire::CQE_TX_INVALID_OOB, code, "malformed_wqe"))),
                Ok((h, oob, sges)) => (
                    h.wqe_bytes(),
                    self.build_tx(wqh, port, base_pd, &h, &oob, &sges),
                ),
            };
            let w = self.wqs.get_mut(&wqh).unwrap();
            w.dev_off = w.dev_off.wrapping_add(advance);
            w.counters.wqes += 1;
            let cq_id = self.cqs.get(&cqh).and_then(|c| c.hw_id).unwrap_or(0);
            let _ = cq_id;
            match result {
                Ok((frames, suppress)) => {
                    let link = self.ports[port].link_up;
                    let mut n = 0u64;
                    let mut bytes = 0u64;
                    for f in frames {
                        if !link {
                            self.ports[port].counters.drop("link_down", 1);
                            continue;
                        }
                        n += 1;
                        bytes += f.len() as u64;
                        out.push((port, f));
                    }
                    let w = self.wqs.get_mut(&wqh).unwrap();
                    w.counters.packets += n;
                    w.counters.bytes += bytes;
                    let pc = &mut self.ports[port].counters;
                    pc.tx_packets += n;
                    pc.tx_bytes += bytes;
                    self.packets_moved += n;
                    if !suppress {
                        self.post_cqe(
                            cqh,
                            wire::tx_comp(wire::CQE_TX_OKAY, 0, ring_off as u32),
                            sq_id,
                            true,
                        );
                    }
                }
                Err((cqe_type, code, reason)) => {
                    self.wqs.get_mut(&wqh).unwrap().counters.errors += 1;
                    self.ports[port].counters.drop(reason, 1);
                    // One CQE for every failed WQE, suppressed or not.
                    self.post_cqe(
                        cqh,
                        wire::tx_comp(cqe_type, code, ring_off as u32),
                        sq_id,
                        true,
                    );
                }
            }
        }
        did
    }

    /// Validates one TX WQE and builds the frames it sends.
    #[allow(clippy::type_complexity)]
    pub(super) fn build_tx(
        &self,
        wqh: u32,
        port: usize,
        base_pd: u32,
        h: &WqeHeader,
        oob: &[u8],
        sges: &[wire::Sge],
    ) -> Result<(Vec<Vec<u8>>, bool), (u32, u32, &'static str)> {
        let w = &self.wqs[&wqh];
        let o = TxOob::decode(oob);
        let long = oob.len() == 24;
        if o.pkt_fmt > 1 || (o.pkt_fmt == 1) != long {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_OOB, "malformed_wqe"));
        }
        let cq_id = self
            .cqs
            .get(&w.cq)
            .and_then(|c| c.hw_id)
            .unwrap_or(u32::MAX);
        if o.vcq_num != cq_id {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_CQ_NUM, "malformed_wqe"));
        }
        let sq_id = w.hw_id.unwrap_or(0);
        if u32::from(o.vsq_frame) != (sq_id >> 10) & 0x3fff {
            return Err((wire::CQE_TX_INVALID_OOB, ve::BAD_SQ_FRAME, "malformed_wqe"));
        }
        if o.short_vp_offset != self.ports[port].vp_offset {
            return Err((wire::CQE_TX_VPORT_IDX_OUT_OF_RANGE, ve::BAD_VPORT, "vport"));
        }
        // An LSO send (TSO), encoded as the Linux driver does: the WQE
        // header's client_oob_in_sgl + client_data_unit (MSS) + last_vbytes
        // (size of SGE 0, exactly the headers), at least 2 SGEs.
        let mss = usize::from(h.client_data_unit);
        let lso = h.client_oob_in_sgl;
        if lso && mss == 0 {
            return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_NO_MSS, "lso"));
        }
        if !lso && mss != 0 {
            return Err((wire::CQE_TX_INVALID_OOB, ve::MSS_WITHOUT_LSO, "lso"));
        }
        if lso && (sges.len() < 2 || u32::from(h.last_vbytes) != sges[0].size) {
            return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_SGL, "lso"));
        }
        // Larger than any LSO send (64 KiB of payload plus headers): refuse
        // before gathering, whatever the driver put in the SGE sizes.
        let total: u64 = sges.iter().map(|s| u64::from(s.size)).sum();
        if total > MAX_TX_GATHER {
            return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
        }
        let mut frame = Vec::with_capacity(total as usize);
        for s in sges {
            match self.mr_lookup(base_pd, s) {
                Ok(r) => dma::gather_sge(&r, &mut frame),
                Err(code) => {
                    let reason = if code == ve::BAD_LKEY {
                        "bad_lkey"
                    } else {
                        "out_of_mr"
                    };
                    return Err((wire::CQE_TX_HDR_PROCESSING_ERROR, code, reason));
                }
            }
        }
        let mtu = self.ports[port].mtu as usize;
        let mut frames = if lso {
            let hlen = sges[0].size as usize;
            let hl = pkt::parse_lso_headers(&frame[..hlen]).map_err(|e| {
                let code = match e {
                    pkt::LsoHeaderError::NotHeaders => ve::LSO_BAD_HEADER,
                    pkt::LsoHeaderError::NotTcp => ve::LSO_NOT_TCP,
                };
                (wire::CQE_TX_HDR_PROCESSING_ERROR, code, "lso")
            })?;
            // The OOB asks for what segmentation implies, as the kernel
            // fills it: outer IP version, IP (v4) and TCP checksums, the
            // transport offset.
            if o.is_outer_ipv4 != hl.ipv4
                || o.is_outer_ipv6 == hl.ipv4
                || (hl.ipv4 && !o.comp_iphdr_csum)
                || !o.comp_tcp_csum
                || o.comp_udp_csum
                || usize::from(o.trans_off) != hl.l4
            {
                return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_OOB, "lso"));
            }
            let payload = frame.len() - hlen;
            if payload == 0 {
                return Err((wire::CQE_TX_INVALID_OOB, ve::LSO_BAD_SGL, "lso"));
            }
            let (_, largest) = pkt::lso_shape(&hl, payload, mss);
            let limit = mtu + pkt::ETH_HLEN + if hl.vlan { 4 } else { 0 };
            if largest > limit {
                return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
            }
            pkt::lso_segment(&frame[..hlen], &hl, &frame[hlen..], mss)
        } else {
            if frame.len() < pkt::ETH_HLEN {
                return Err((wire::CQE_TX_INVALID_ETH_TYPE, ve::RUNT, "malformed_wqe"));
            }
            // Checksum offloads (the frame is untagged here: DPDK inserts
            // VLAN through the long OOB).
            let lay = pkt::parse(&frame).ok_or((
                wire::CQE_TX_HDR_PROCESSING_ERROR,
                ve::RUNT,
                "malformed_wqe",
            ))?;
            if o.comp_iphdr_csum && lay.ipv4 {
                pkt::fill_ipv4_csum(&mut frame, lay.l3);
            }
            if o.comp_tcp_csum || o.comp_udp_csum {
                let proto = if o.comp_tcp_csum {
                    pkt::IPPROTO_TCP
                } else {
                    pkt::IPPROTO_UDP
                };
                // TCP: the driver gives the transport offset; UDP: DPDK does
                // not set it (tx.c), so the device parses the headers.
                let l4 = if o.comp_tcp_csum && o.trans_off != 0 {
                    Some(usize::from(o.trans_off))
                } else {
                    lay.l4
                };
                let end = if lay.ip_end != 0 {
                    lay.ip_end
                } else {
                    frame.len()
                };
                match l4 {
                    Some(l4) if l4 + if proto == pkt::IPPROTO_TCP { 20 } else { 8 } <= end => {
                        pkt::fill_l4_csum_offload(&mut frame, l4, end, proto)
                    }
                    _ => {
                        return Err((
                            wire::CQE_TX_HDR_PROCESSING_ERROR,
                            ve::BAD_L4_OFFSET,
                            "malformed_wqe",
                        ))
                    }
                }
            }
            let limit = mtu + pkt::ETH_HLEN + if lay.vlan.is_some() { 4 } else { 0 };
            if frame.len() > limit {
                return Err((wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
            }
            vec![frame]
        };
        if long && o.inject_vlan {
            for f in frames.iter_mut() {
                *f = pkt::vlan_insert(f, o.pcp, o.dei, o.vlan_id);
            }
        }
        Ok((frames, o.suppress_txcqe))
    }
}

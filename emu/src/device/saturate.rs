//! The device's benchmark mode (`options.bench = "saturate"`): the driver's
//! queues kept saturated at a few nanoseconds of device time per packet, so
//! that a native measurement of the driver's lcore is bounded by the
//! driver, not by the device model (which in full parses every WQE, copies
//! and checks every frame and hashes it).
//!
//! - Send queues: each WQE is completed by ring bookkeeping. Its header
//!   gives its size, the OOB's first dword the CQE suppression bit, the SGL
//!   the byte count; the frame is never read, no offload is applied and
//!   nothing reaches the port's backend. One `CQE_TX_OKAY` per WQE unless
//!   suppressed, as the full model writes it.
//! - Receive queues: every WQE posted on an RQ behind a port's RSS QP is
//!   completed as soon as the device sees it, with the `CQE_RX_OKAY` the
//!   full model would write for the port's template frame (64-byte
//!   UDP/IPv4 to the port's MAC: IP and UDP checksums verified, the RSS
//!   hash and type the port's RSS configuration gives it, length 64). The
//!   template's bytes are written into a buffer the first time the device
//!   completes that buffer (its first SGE's key and address); later
//!   completions of the same buffer write only the CQE, so the device's
//!   cost does not grow with the frame. The driver's work per packet is
//!   real RX's: CQE parse, mbuf fields, refill.
//!
//! Faults acting on CQEs (delay, corruption, lies) do not reach saturated
//! queues. A malformed WQE, an SGE outside its memory region and a buffer
//! smaller than the template get the error CQEs of the full model.

#![forbid(unsafe_code)]

use super::dma;
use super::objects::Cq;
use super::State;
use crate::pkt;
use crate::wire::{self, vendor_err as ve, RxFlags, RxPpi};
use std::collections::HashSet;

/// WQEs completed per queue per device pass.
const BUDGET: usize = 1024;
/// Length of the template frame (testpmd's default frame size).
pub const TEMPLATE_LEN: usize = 64;

/// State of the benchmark mode.
#[derive(Default)]
pub(super) struct Saturator {
    /// (lkey, address) of every buffer already holding the template.
    written: HashSet<(u32, u64)>,
    /// Per port: the template and the RX completion fields it gets.
    templates: Vec<Option<Template>>,
}

#[derive(Clone)]
struct Template {
    /// What the fields were computed for: RSS on, key, hashed fields.
    rss: (bool, [u8; 40], u64),
    frame: Vec<u8>,
    flags: RxFlags,
    hash: u32,
}

/// The frame every RX buffer of a port with MAC `mac` receives in the
/// benchmark mode: UDP/IPv4, [`TEMPLATE_LEN`] bytes, valid checksums.
pub fn template_frame(mac: [u8; 6]) -> Vec<u8> {
    pkt::build::udp4(
        mac,
        [0x02, 0, 0, 0, 0, 0x01],
        [198, 18, 0, 1],
        [198, 18, 0, 2],
        1024,
        1025,
        TEMPLATE_LEN - 42,
    )
}

/// Writes a CQE at the CQ's producer index (owner bits from it); the
/// caller signals the CQ once per batch.
fn put_cqe(c: &mut Cq, data: [u8; 60], wq_num: u32, is_sq: bool) {
    let count = u64::from(c.count);
    let owner = ((c.prod / count) & wire::OWNER_MASK) as u32;
    let slot = (c.prod % count) as usize;
    dma::write_cqe(c, slot * 64, &data, wire::cqe_info(wq_num, is_sq, owner));
    c.prod += 1;
    c.counters.cqes += 1;
}

/// How one RX WQE is completed.
enum RxFill {
    /// The template (the buffers hold it); `fresh`: not written there yet.
    Ok { sge: wire::Sge, fresh: bool },
    /// An error CQE: CQE type, vendor error, drop reason.
    Err(u32, u32, &'static str),
}

impl State {
    /// Completes the posted WQEs of SQ `wqh` by ring bookkeeping.
    pub(super) fn saturate_sq(&mut self, wqh: u32) -> bool {
        let State {
            wqs,
            cqs,
            ports,
            counters,
            packets_moved,
            ..
        } = self;
        let Some(w) = wqs.get_mut(&wqh) else {
            return false;
        };
        let port = w.port.expect("SQ has a port");
        if ports[port].tx_paused || !w.active {
            return false;
        }
        let Some(c) = cqs.get_mut(&w.cq) else {
            return false;
        };
        let sq_id = w.hw_id.unwrap_or(0);
        let link = ports[port].link_up;
        let mut n = 0;
        while n < BUDGET && w.dev_off != w.db_tail {
            n += 1;
            let ring_off = (w.dev_off as usize) & (w.buf.len() - 1);
            w.counters.wqes += 1;
            counters.bench_tx_wqes += 1;
            match dma::read_wqe_header(w, w.dev_off, wire::MAX_TX_WQE) {
                Ok(h) => {
                    let oob = w.buf.read_u64(ring_off + 8).to_le_bytes();
                    let suppress = wire::TxOob::decode(&oob).suppress_txcqe;
                    let bytes: u64 = (0..usize::from(h.num_sge))
                        .map(|i| u64::from(dma::read_sge(w, ring_off, &h, i).size))
                        .sum();
                    w.dev_off = w.dev_off.wrapping_add(h.wqe_bytes());
                    if link {
                        w.counters.packets += 1;
                        w.counters.bytes += bytes;
                        ports[port].counters.tx_packets += 1;
                        ports[port].counters.tx_bytes += bytes;
                        *packets_moved += 1;
                    } else {
                        ports[port].counters.drop("link_down", 1);
                    }
                    if !suppress {
                        let d = wire::tx_comp(wire::CQE_TX_OKAY, 0, ring_off as u32);
                        put_cqe(c, d, sq_id, true);
                    }
                }
                Err((code, skip)) => {
                    w.dev_off = w.dev_off.wrapping_add(skip);
                    w.counters.errors += 1;
                    ports[port].counters.drop("malformed_wqe", 1);
                    let d = wire::tx_comp(wire::CQE_TX_INVALID_OOB, code, ring_off as u32);
                    put_cqe(c, d, sq_id, true);
                }
            }
        }
        if n > 0 {
            let cqh = w.cq;
            self.signal_cq(cqh);
        }
        n > 0
    }

    /// Completes every posted WQE of every RQ behind a port's RSS QP with
    /// the port's template.
    pub(super) fn saturate_rx(&mut self) -> bool {
        let mut did = false;
        for port in 0..self.ports.len() {
            let Some(rss) = self.ports[port].rss.as_ref() else {
                continue;
            };
            let mut rqs: Vec<u32> = rss.table.clone();
            rqs.push(rss.default_rq);
            rqs.sort_unstable();
            rqs.dedup();
            let t = self.template(port);
            for rq in rqs {
                did |= self.saturate_rq(port, rq, &t);
            }
        }
        did
    }

    /// The port's template with the completion fields its current RSS
    /// configuration gives it (computed again when that changes).
    fn template(&mut self, port: usize) -> Template {
        let rss = self.ports[port].rss.as_ref().expect("port has RSS");
        let sig = (rss.enabled, rss.key, rss.fields);
        if self.saturator.templates.len() <= port {
            self.saturator.templates.resize(port + 1, None);
        }
        if let Some(t) = &self.saturator.templates[port] {
            if t.rss == sig {
                return t.clone();
            }
        }
        let frame = template_frame(self.ports[port].mac);
        let (_, hash, htype) = self.select_rq(port, &frame).expect("port has RSS");
        let l = pkt::parse(&frame).expect("template parses");
        let ok_ip = pkt::ipv4_csum_ok(&frame, l.l3);
        let ok_udp = pkt::l4_csum_ok(&frame, &l) == Some(true);
        debug_assert!(ok_ip && ok_udp, "template checksums");
        let t = Template {
            rss: sig,
            flags: RxFlags {
                hashtype: htype as u16,
                ip_ok: ok_ip,
                udp_ok: ok_udp,
                ..Default::default()
            },
            hash,
            frame,
        };
        self.saturator.templates[port] = Some(t.clone());
        t
    }

    fn saturate_rq(&mut self, port: usize, rq: u32, t: &Template) -> bool {
        let Some(w) = self.wqs.get(&rq) else {
            return false;
        };
        if !w.active || w.dev_off == w.db_tail {
            return false;
        }
        let base_pd = self.base_pd(w.pd);
        // 1. Which WQEs complete how (read from the ring only).
        let mut fills = Vec::new();
        let mut off = w.dev_off;
        while fills.len() < BUDGET && off != w.db_tail {
            let ring_off = (off as usize) & (w.buf.len() - 1);
            match dma::read_wqe_header(w, off, wire::MAX_RX_WQE) {
                Ok(h) => {
                    let sges: Vec<wire::Sge> = (0..usize::from(h.num_sge))
                        .map(|i| dma::read_sge(w, ring_off, &h, i))
                        .collect();
                    let cap: u64 = sges.iter().map(|s| u64::from(s.size)).sum();
                    let fill = if cap < t.frame.len() as u64 {
                        RxFill::Err(wire::CQE_RX_TRUNCATED, 0, "rx_truncated")
                    } else {
                        let fresh = !self
                            .saturator
                            .written
                            .contains(&(sges[0].mem_key, sges[0].address));
                        RxFill::Ok {
                            sge: sges[0],
                            fresh,
                        }
                    };
                    fills.push((ring_off, h.wqe_bytes(), sges, fill));
                    off = off.wrapping_add(h.wqe_bytes());
                }
                Err((code, skip)) => {
                    fills.push((
                        ring_off,
                        skip,
                        Vec::new(),
                        RxFill::Err(wire::CQE_RX_TRUNCATED, code, "malformed_wqe"),
                    ));
                    off = off.wrapping_add(skip);
                }
            }
        }
        // 2. The template into buffers completed for the first time.
        for (_, _, sges, fill) in fills.iter_mut() {
            let RxFill::Ok { sge, fresh: true } = fill else {
                continue;
            };
            let key = (sge.mem_key, sge.address);
            let mut regions = Vec::new();
            for s in sges.iter() {
                match self.mr_lookup(base_pd, s) {
                    Ok(r) => regions.push(r),
                    Err(code) => {
                        let reason = if code == ve::BAD_LKEY {
                            "bad_lkey"
                        } else {
                            "out_of_mr"
                        };
                        *fill = RxFill::Err(wire::CQE_RX_TRUNCATED, code, reason);
                        break;
                    }
                }
            }
            if matches!(fill, RxFill::Ok { .. }) {
                dma::scatter(&regions, &t.frame);
                self.saturator.written.insert(key);
                self.counters.bench_template_writes += 1;
            }
        }
        // 3. The CQEs, in ring order.
        let State {
            wqs,
            cqs,
            ports,
            counters,
            packets_moved,
            ..
        } = self;
        let w = wqs.get_mut(&rq).expect("RQ checked above");
        let Some(c) = cqs.get_mut(&w.cq) else {
            return false;
        };
        let rq_id = w.hw_id.unwrap_or(0);
        let len = t.frame.len() as u64;
        let n = fills.len();
        for (ring_off, advance, _, fill) in fills {
            w.dev_off = w.dev_off.wrapping_add(advance);
            w.counters.wqes += 1;
            counters.bench_rx_wqes += 1;
            let d = match fill {
                RxFill::Ok { .. } => {
                    w.counters.packets += 1;
                    w.counters.bytes += len;
                    ports[port].counters.rx_packets += 1;
                    ports[port].counters.rx_bytes += len;
                    *packets_moved += 1;
                    let ppi = RxPpi {
                        pkt_len: len as u16,
                        pkt_hash: t.hash,
                    };
                    wire::rx_comp(wire::CQE_RX_OKAY, 0, &t.flags, &[ppi], ring_off as u32)
                }
                RxFill::Err(ty, code, reason) => {
                    w.counters.errors += 1;
                    ports[port].counters.drop(reason, 1);
                    let flags = RxFlags::default();
                    wire::rx_comp(ty, code, &flags, &[], ring_off as u32)
                }
            };
            put_cqe(c, d, rq_id, false);
        }
        let cqh = w.cq;
        self.signal_cq(cqh);
        n > 0
    }
}

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
use crate::wire::WqeHeader;
use crate::wire::{self, vendor_err as ve, RxFlags, RxPpi};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// WQEs completed per queue per device pass.
const BUDGET: usize = 1024;
/// Length of the template frame (testpmd's default frame size).
pub const TEMPLATE_LEN: usize = 64;

/// State of the benchmark mode.
#[derive(Default)]
pub(super) struct Saturator {
    /// (lkey, address) of every buffer already holding the template.
    written: HashSet<(u32, u64), BuildHasherDefault<AddrHasher>>,
    /// Per port: the template and the RX completion fields it gets.
    templates: Vec<Option<Template>>,
}

/// A multiplicative hash for buffer keys, looked up once per packet
/// (SipHash, the default, costs more than the rest of a completion).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Clone)]
struct Template {
    /// What the fields were computed for: RSS on, key, hashed fields,
    /// indirection table, default RQ.
    rss: (bool, [u8; 40], u64, Vec<u32>, u32),
    /// The RQs behind the port's RSS QP, each once.
    rqs: Vec<u32>,
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
    /// With the template; `fresh`: the buffer does not hold it yet.
    Ok { fresh: bool },
    /// An error CQE: CQE type, vendor error, drop reason.
    Err(u32, u32, &'static str),
}

/// One RX WQE to complete: its ring offset, header (if it parsed), size
/// in the ring, first SGE, and how.
struct RxWqe {
    ring_off: usize,
    header: Option<WqeHeader>,
    advance: u32,
    sge: wire::Sge,
    fill: RxFill,
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
            if self.ports[port].rss.is_none() {
                continue;
            }
            let t = self.template(port);
            for &rq in &t.rqs {
                did |= self.saturate_rq(port, rq, &t);
            }
            self.saturator.templates[port] = Some(t);
        }
        did
    }

    /// The port's template with the completion fields its current RSS
    /// configuration gives it (computed again when that changes), taken
    /// out of the cache for the pass.
    fn template(&mut self, port: usize) -> Template {
        let rss = self.ports[port].rss.as_ref().expect("port has RSS");
        if self.saturator.templates.len() <= port {
            self.saturator.templates.resize(port + 1, None);
        }
        if let Some(t) = self.saturator.templates[port].take() {
            let (en, key, fields, table, default) = &t.rss;
            if *en == rss.enabled
                && *key == rss.key
                && *fields == rss.fields
                && *table == rss.table
                && *default == rss.default_rq
            {
                return t;
            }
        }
        let sig = (
            rss.enabled,
            rss.key,
            rss.fields,
            rss.table.clone(),
            rss.default_rq,
        );
        let mut rqs = rss.table.clone();
        rqs.push(rss.default_rq);
        rqs.sort_unstable();
        rqs.dedup();
        let frame = template_frame(self.ports[port].mac);
        let (_, hash, htype) = self.select_rq(port, &frame).expect("port has RSS");
        let l = pkt::parse(&frame).expect("template parses");
        let ok_ip = pkt::ipv4_csum_ok(&frame, l.l3);
        let ok_udp = pkt::l4_csum_ok(&frame, &l) == Some(true);
        debug_assert!(ok_ip && ok_udp, "template checksums");
        Template {
            rss: sig,
            rqs,
            flags: RxFlags {
                hashtype: htype as u16,
                ip_ok: ok_ip,
                udp_ok: ok_udp,
                ..Default::default()
            },
            hash,
            frame,
        }
    }

    fn saturate_rq(&mut self, port: usize, rq: u32, t: &Template) -> bool {
        let Some(w) = self.wqs.get(&rq) else {
            return false;
        };
        if !w.active || w.dev_off == w.db_tail {
            return false;
        }
        let base_pd = self.base_pd(w.pd);
        let len = t.frame.len() as u64;
        // 1. Which WQEs complete how (read from the ring only).
        let mut fills = Vec::new();
        let mut off = w.dev_off;
        while fills.len() < BUDGET && off != w.db_tail {
            let ring_off = (off as usize) & (w.buf.len() - 1);
            let e = match dma::read_wqe_header(w, off, wire::MAX_RX_WQE) {
                Ok(h) => {
                    let sge = dma::read_sge(w, ring_off, &h, 0);
                    let cap: u64 = u64::from(sge.size)
                        + (1..usize::from(h.num_sge))
                            .map(|i| u64::from(dma::read_sge(w, ring_off, &h, i).size))
                            .sum::<u64>();
                    let fill = if cap < len {
                        RxFill::Err(wire::CQE_RX_TRUNCATED, 0, "rx_truncated")
                    } else {
                        let key = (sge.mem_key, sge.address);
                        RxFill::Ok {
                            fresh: !self.saturator.written.contains(&key),
                        }
                    };
                    RxWqe {
                        ring_off,
                        header: Some(h),
                        advance: h.wqe_bytes(),
                        sge,
                        fill,
                    }
                }
                Err((code, skip)) => RxWqe {
                    ring_off,
                    header: None,
                    advance: skip,
                    sge: wire::Sge::default(),
                    fill: RxFill::Err(wire::CQE_RX_TRUNCATED, code, "malformed_wqe"),
                },
            };
            off = off.wrapping_add(e.advance);
            fills.push(e);
        }
        // 2. The template into buffers completed for the first time.
        for e in fills.iter_mut() {
            let (RxFill::Ok { fresh: true }, Some(h)) = (&e.fill, &e.header) else {
                continue;
            };
            let mut regions = Vec::new();
            for i in 0..usize::from(h.num_sge) {
                let s = dma::read_sge(&self.wqs[&rq], e.ring_off, h, i);
                match self.mr_lookup(base_pd, &s) {
                    Ok(r) => regions.push(r),
                    Err(code) => {
                        let reason = if code == ve::BAD_LKEY {
                            "bad_lkey"
                        } else {
                            "out_of_mr"
                        };
                        e.fill = RxFill::Err(wire::CQE_RX_TRUNCATED, code, reason);
                        break;
                    }
                }
            }
            if matches!(e.fill, RxFill::Ok { .. }) {
                dma::scatter(&regions, &t.frame);
                self.saturator
                    .written
                    .insert((e.sge.mem_key, e.sge.address));
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
        let ppi = [RxPpi {
            pkt_len: len as u16,
            pkt_hash: t.hash,
        }];
        let n = fills.len();
        let mut ok = 0u64;
        for e in fills {
            w.dev_off = w.dev_off.wrapping_add(e.advance);
            let d = match e.fill {
                RxFill::Ok { .. } => {
                    ok += 1;
                    wire::rx_comp(wire::CQE_RX_OKAY, 0, &t.flags, &ppi, e.ring_off as u32)
                }
                RxFill::Err(ty, code, reason) => {
                    w.counters.errors += 1;
                    ports[port].counters.drop(reason, 1);
                    let flags = RxFlags::default();
                    wire::rx_comp(ty, code, &flags, &[], e.ring_off as u32)
                }
            };
            put_cqe(c, d, rq_id, false);
        }
        w.counters.wqes += n as u64;
        w.counters.packets += ok;
        w.counters.bytes += ok * len;
        ports[port].counters.rx_packets += ok;
        ports[port].counters.rx_bytes += ok * len;
        *packets_moved += ok;
        counters.bench_rx_wqes += n as u64;
        let cqh = w.cq;
        self.signal_cq(cqh);
        n > 0
    }
}

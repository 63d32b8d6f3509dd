//! Verbs objects and the control path: adapters and ports, PDs (and parent
//! domains), WQs, CQs, indirection tables, QPs and completion channels;
//! their creation (with the checks libmana and the kernel make) and
//! destruction; the queue buffer sizes libmana computes.

#![forbid(unsafe_code)]

use super::cq::PendingCqe;
use super::rss::Rss;
use super::PortCounters;
use super::{Errno, QueueCounters, QueueReport, Res, State, EBUSY, EINVAL};
use crate::backend::Backend;
use crate::config::RdmaCoreLimits;
use crate::doorbell::PAGE;
use crate::mem::{Region, Ring};
use crate::wire;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::time::Instant;

pub struct Adapter {
    pub pci: String,
    pub ports: Vec<usize>,
    pub present: bool,
    pub removed: bool,
    pub generation: u64,
    pub ib_name: String,
    /// The RNIC's IB device (7.x), listed beside `ib_name`.
    pub rnic_name: Option<String>,
    pub(super) back_at: Option<Instant>,
    pub(super) next_name: Option<String>,
    pub(super) cfg_index: usize,
}

impl Adapter {
    /// Its IB devices: the Ethernet one, then the RNIC where there is one.
    pub fn ib_names(&self) -> Vec<String> {
        std::iter::once(self.ib_name.clone())
            .chain(self.rnic_name.clone())
            .collect()
    }
}

pub struct Port {
    pub adapter: usize,
    pub index: usize,
    pub mac: [u8; 6],
    pub mtu: u32,
    pub kernel_if_up: bool,
    pub lossless: bool,
    pub mac_filter: bool,
    pub link_up: bool,
    pub tx_paused: bool,
    pub vp_offset: u8,
    pub(super) backend: Backend,
    pub(super) backlog: VecDeque<Vec<u8>>,
    pub(super) rss: Option<Rss>,
    pub counters: PortCounters,
    pub(super) capture: Option<Vec<Vec<u8>>>,
}

pub(super) struct Pd {
    pub(super) ctx: u32,
    pub(super) parent_of: Option<u32>,
    pub(super) port: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WqKind {
    Sq,
    Rq,
}

pub(super) struct Wq {
    pub(super) ctx: u32,
    pub(super) pd: u32,
    pub(super) kind: WqKind,
    pub(super) port: Option<usize>,
    pub(super) hw_id: Option<u32>,
    pub(super) buf: Ring,
    pub(super) count: u32,
    pub(super) cq: u32,
    pub(super) dev_off: u32,
    pub(super) db_tail: u32,
    pub(super) active: bool,
    pub(super) counters: QueueCounters,
}

pub(super) struct Cq {
    pub(super) ctx: u32,
    pub(super) hw_id: Option<u32>,
    pub(super) buf: Ring,
    pub(super) count: u32,
    pub(super) prod: u64,
    pub(super) armed: bool,
    /// The EQ a hardware CQ reports to (see `hw`); verbs CQs signal their
    /// completion channel instead.
    pub(super) eq: Option<u32>,
    pub(super) channel: Option<u32>,
    pub(super) user: usize,
    pub(super) bound: Option<u32>,
    pub(super) delayed: VecDeque<PendingCqe>,
    pub(super) counters: QueueCounters,
}

pub(super) struct IndTable {
    pub(super) ctx: u32,
    pub(super) wqs: Vec<u32>,
    pub(super) log_size: u32,
}

pub(super) enum QpKind {
    Raw { sq: u32 },
    Rss { table: u32, port: usize },
}

pub(super) struct Qp {
    pub(super) ctx: u32,
    pub(super) kind: QpKind,
}

pub(super) struct Channel {
    pub(super) w: OwnedFd,
    pub(super) r: OwnedFd,
}

/// What a RAW (send) QP creation returns (`mana_ib_create_qp_resp`).
#[derive(Clone, Copy, Debug)]
pub struct RawQpInfo {
    pub qp: u32,
    pub sq: u32,
    pub sq_id: u32,
    pub cq_id: u32,
    pub tx_vp_offset: u32,
}

/// The RSS hash configuration of an RSS QP.
#[derive(Clone, Debug)]
pub struct HashConf {
    pub key: Vec<u8>,
    pub fields: u64,
    pub toeplitz: bool,
}

/// `align_hw_size` of libmana v44: align to 4 KiB, then next power of two.
pub fn align_hw_size(size: usize) -> usize {
    size.div_ceil(PAGE)
        .max(1)
        .saturating_mul(PAGE)
        .next_power_of_two()
}

/// `get_wqe_size(sge)` of libmana: ALIGN(16*sge + 8 + 8, 32).
pub fn wqe_size(sge: u32) -> usize {
    ((sge as usize) * 16 + 16).div_ceil(32) * 32
}

pub fn cq_buffer_size(cqe: u32) -> usize {
    align_hw_size(((cqe as usize) * 64).next_power_of_two())
}
pub fn sq_buffer_size(max_send_wr: u32, max_send_sge: u32) -> usize {
    align_hw_size(max_send_wr as usize * wqe_size(max_send_sge))
}
pub fn rq_buffer_size(max_wr: u32, max_sge: u32) -> usize {
    align_hw_size(max_wr as usize * wqe_size(max_sge))
}

impl State {
    pub fn alloc_pd(&mut self, ctx: u32) -> Res<u32> {
        self.ctx_alive(ctx)?;
        self.take_alloc_fail()?;
        let h = self.handle();
        self.pds.insert(
            h,
            Pd {
                ctx,
                parent_of: None,
                port: None,
            },
        );
        Ok(h)
    }

    /// `pd_context` carries the 1-based IB port (DPDK `mana_probe_port`).
    pub fn alloc_parent_domain(&mut self, ctx: u32, pd: u32, port: u32) -> Res<u32> {
        let c = self.ctx_alive(ctx)?;
        let adapter = c.adapter;
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        if p.ctx != ctx || p.parent_of.is_some() {
            return Err(EINVAL);
        }
        let ports = &self.adapters[adapter].ports;
        let gport = if port >= 1 && (port as usize) <= ports.len() {
            Some(ports[port as usize - 1])
        } else {
            None
        };
        let h = self.handle();
        self.pds.insert(
            h,
            Pd {
                ctx,
                parent_of: Some(pd),
                port: gport,
            },
        );
        Ok(h)
    }

    pub fn dealloc_pd(&mut self, pd: u32) -> Res<()> {
        if !self.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        let in_use = self.pds.values().any(|p| p.parent_of == Some(pd))
            || self.mrs.values().any(|m| m.pd == pd)
            || self.wqs.values().any(|w| w.pd == pd);
        if in_use {
            return Err(EBUSY);
        }
        self.pds.remove(&pd);
        Ok(())
    }

    fn queue_limit(&self) -> u32 {
        match self.opts.rdma_core() {
            RdmaCoreLimits::V44 => 256,
            RdmaCoreLimits::Modern => self.limits.max_qp_wr,
        }
    }

    /// Checks done by libmana / the kernel before a CQ buffer is allocated.
    pub fn check_cq(&self, ctx: u32, cqe: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        if cqe == 0 || cqe > self.queue_limit() || cqe > self.limits.max_cqe {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_cq(
        &mut self,
        ctx: u32,
        cqe: u32,
        buf: Region,
        channel: Option<u32>,
        user: usize,
    ) -> Res<u32> {
        self.check_cq(ctx, cqe)?;
        self.take_alloc_fail()?;
        if buf.len() < cqe as usize * 64 {
            return Err(EINVAL);
        }
        if let Some(ch) = channel {
            if !self.channels.contains_key(&ch) {
                return Err(EINVAL);
            }
        }
        let h = self.handle();
        self.cqs.insert(
            h,
            Cq {
                ctx,
                hw_id: None,
                buf: Ring::flat(buf),
                count: cqe,
                prod: u64::from(cqe),
                armed: false,
                eq: None,
                channel,
                user,
                bound: None,
                delayed: VecDeque::new(),
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    pub fn destroy_cq(&mut self, cq: u32) -> Res<Region> {
        let c = self.cqs.get(&cq).ok_or(EINVAL)?;
        if super::hw::is_hw_ctx(c.ctx) {
            return Err(EINVAL);
        }
        if let Some(w) = c.bound {
            if self.wqs.contains_key(&w) {
                return Err(EBUSY);
            }
        }
        let ring = self.retire_cq(cq).expect("present");
        Ok(ring.as_flat().expect("verbs CQs are flat"))
    }

    pub(super) fn retire_cq(&mut self, cq: u32) -> Option<Ring> {
        let c = self.cqs.remove(&cq)?;
        self.retire(QueueReport {
            kind: "cq".into(),
            id: c.hw_id.unwrap_or(0),
            port: String::new(),
            live: false,
            counters: c.counters,
        });
        Some(c.buf)
    }

    pub fn check_wq(&self, ctx: u32, pd: u32, max_wr: u32, max_sge: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        if !self.pds.contains_key(&pd) {
            return Err(EINVAL);
        }
        if max_wr == 0 || max_wr > self.queue_limit() || max_wr > self.limits.max_qp_wr {
            return Err(EINVAL);
        }
        if max_sge == 0
            || max_sge > self.limits.max_sge
            || wqe_size(max_sge) > wire::MAX_RX_WQE as usize
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_wq(
        &mut self,
        ctx: u32,
        pd: u32,
        cq: u32,
        max_wr: u32,
        max_sge: u32,
        buf: Region,
    ) -> Res<u32> {
        self.check_wq(ctx, pd, max_wr, max_sge)?;
        self.take_alloc_fail()?;
        let c = self.cqs.get(&cq).ok_or(EINVAL)?;
        if c.ctx != ctx || c.bound.is_some() {
            return Err(EINVAL);
        }
        let port = self.pds.get(&pd).and_then(|p| p.port);
        let h = self.handle();
        self.cqs.get_mut(&cq).unwrap().bound = Some(h);
        self.wqs.insert(
            h,
            Wq {
                ctx,
                pd,
                kind: WqKind::Rq,
                port,
                hw_id: None,
                buf: Ring::flat(buf),
                count: max_wr,
                cq,
                dev_off: 0,
                db_tail: 0,
                active: false,
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    pub fn destroy_wq(&mut self, wq: u32) -> Res<Region> {
        match self.wqs.get(&wq) {
            Some(w) if !super::hw::is_hw_ctx(w.ctx) => {}
            _ => return Err(EINVAL),
        }
        if self.tables.values().any(|t| t.wqs.contains(&wq)) {
            return Err(EBUSY);
        }
        let ring = self.retire_wq(wq).expect("present");
        Ok(ring.as_flat().expect("verbs WQs are flat"))
    }

    pub(super) fn retire_wq(&mut self, wq: u32) -> Option<Ring> {
        let w = self.wqs.remove(&wq)?;
        if let Some(c) = self.cqs.get_mut(&w.cq) {
            if c.bound == Some(wq) {
                c.bound = None;
            }
        }
        let port = w
            .port
            .map(|p| crate::config::format_mac(&self.ports[p].mac))
            .unwrap_or_default();
        self.retire(QueueReport {
            kind: if w.kind == WqKind::Sq { "sq" } else { "rq" }.into(),
            id: w.hw_id.unwrap_or(0),
            port,
            live: false,
            counters: w.counters,
        });
        Some(w.buf)
    }

    pub fn create_ind_table(&mut self, ctx: u32, wqs: Vec<u32>, log_size: u32) -> Res<u32> {
        self.ctx_alive(ctx)?;
        self.take_alloc_fail()?;
        if (1usize << log_size) > wire::INDIRECTION_TABLE_SIZE || wqs.len() != 1 << log_size {
            return Err(EINVAL);
        }
        for w in &wqs {
            match self.wqs.get(w) {
                Some(q) if q.ctx == ctx && q.kind == WqKind::Rq => {}
                _ => return Err(EINVAL),
            }
        }
        let h = self.handle();
        self.tables.insert(h, IndTable { ctx, wqs, log_size });
        Ok(h)
    }

    pub fn destroy_ind_table(&mut self, t: u32) -> Res<()> {
        if self
            .qps
            .values()
            .any(|q| matches!(q.kind, QpKind::Rss { table, .. } if table == t))
        {
            return Err(EBUSY);
        }
        self.tables.remove(&t).map(|_| ()).ok_or(EINVAL)
    }

    fn parent_port(&self, pd: u32) -> Res<usize> {
        let p = self.pds.get(&pd).ok_or(EINVAL)?;
        if p.parent_of.is_none() {
            return Err(EINVAL); // "Create RAW QP should use parent domain"
        }
        p.port.ok_or(EINVAL)
    }

    pub fn check_raw_qp(&self, ctx: u32, pd: u32, max_send_wr: u32, max_send_sge: u32) -> Res<()> {
        self.ctx_alive(ctx)?;
        self.parent_port(pd)?;
        if max_send_wr == 0
            || max_send_wr > self.queue_limit()
            || max_send_wr > self.limits.max_qp_wr
        {
            return Err(EINVAL);
        }
        // Kernel: max_send_sge > MAX_TX_WQE_SGL_ENTRIES (30); libmana v44:
        // get_wqe_size(sge) > 512.
        if max_send_sge == 0
            || max_send_sge > 30
            || wqe_size(max_send_sge) > wire::MAX_TX_WQE as usize
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    pub fn create_raw_qp(
        &mut self,
        ctx: u32,
        pd: u32,
        send_cq: u32,
        max_send_wr: u32,
        max_send_sge: u32,
        buf: Region,
    ) -> Res<RawQpInfo> {
        self.check_raw_qp(ctx, pd, max_send_wr, max_send_sge)?;
        let port = self.parent_port(pd)?;
        let c = self.cqs.get(&send_cq).ok_or(EINVAL)?;
        if c.ctx != ctx || c.bound.is_some() {
            return Err(EINVAL);
        }
        if self.ports[port].kernel_if_up {
            // manadv(7): the port is in use by the kernel.
            return Err(Errno(self.limits.vport_busy_errno));
        }
        self.take_alloc_fail()?;
        let sq = self.handle();
        let sq_id = self.qid();
        let cq_id = self.qid();
        let cqm = self.cqs.get_mut(&send_cq).unwrap();
        cqm.bound = Some(sq);
        cqm.hw_id = Some(cq_id);
        self.wqs.insert(
            sq,
            Wq {
                ctx,
                pd,
                kind: WqKind::Sq,
                port: Some(port),
                hw_id: Some(sq_id),
                buf: Ring::flat(buf),
                count: max_send_wr,
                cq: send_cq,
                dev_off: 0,
                db_tail: 0,
                active: true,
                counters: QueueCounters::default(),
            },
        );
        let qp = self.handle();
        self.qps.insert(
            qp,
            Qp {
                ctx,
                kind: QpKind::Raw { sq },
            },
        );
        Ok(RawQpInfo {
            qp,
            sq,
            sq_id,
            cq_id,
            tx_vp_offset: u32::from(self.ports[port].vp_offset),
        })
    }

    pub fn create_rss_qp(&mut self, ctx: u32, pd: u32, table: u32, hash: &HashConf) -> Res<u32> {
        self.ctx_alive(ctx)?;
        let port = self.parent_port(pd)?;
        if !hash.toeplitz || hash.key.len() != wire::HASH_KEY_SIZE {
            return Err(EINVAL);
        }
        let t = self.tables.get(&table).ok_or(EINVAL)?;
        if t.ctx != ctx {
            return Err(EINVAL);
        }
        let wqs = t.wqs.clone();
        let log_size = t.log_size;
        if self.ports[port].kernel_if_up {
            return Err(Errno(self.limits.vport_busy_errno));
        }
        self.take_alloc_fail()?;
        for w in &wqs {
            if self.wqs[w].active {
                return Err(EBUSY);
            }
        }
        for w in &wqs {
            let wq_id = self.qid();
            let cq_id = self.qid();
            let cqh = self.wqs[w].cq;
            let q = self.wqs.get_mut(w).unwrap();
            q.hw_id = Some(wq_id);
            q.active = true;
            q.port = Some(port);
            q.dev_off = 0;
            q.db_tail = 0;
            if let Some(c) = self.cqs.get_mut(&cqh) {
                c.hw_id = Some(cq_id);
            }
        }
        let qp = self.handle();
        let tab: Vec<u32> = (0..wire::INDIRECTION_TABLE_SIZE)
            .map(|i| wqs[i % wqs.len()])
            .collect();
        let mut key = [0u8; 40];
        key.copy_from_slice(&hash.key);
        self.ports[port].rss = Some(Rss {
            qp,
            enabled: log_size != 0,
            key,
            fields: hash.fields,
            table: tab,
            default_rq: *wqs.last().unwrap(),
        });
        self.qps.insert(
            qp,
            Qp {
                ctx,
                kind: QpKind::Rss { table, port },
            },
        );
        Ok(qp)
    }

    /// Destroys a QP. A RAW QP returns its SQ buffer (to free); an RSS QP
    /// tears down the hardware RQs (they go dead before destroy_wq).
    pub fn destroy_qp(&mut self, qp: u32) -> Res<Option<Region>> {
        let q = self.qps.remove(&qp).ok_or(EINVAL)?;
        match q.kind {
            QpKind::Raw { sq } => Ok(self
                .retire_wq(sq)
                .map(|r| r.as_flat().expect("verbs SQs are flat"))),
            QpKind::Rss { table, port } => {
                if let Some(t) = self.tables.get(&table) {
                    for w in t.wqs.clone() {
                        if let Some(q) = self.wqs.get_mut(&w) {
                            q.active = false;
                        }
                    }
                }
                if self.ports[port].rss.as_ref().is_some_and(|r| r.qp == qp) {
                    self.ports[port].rss = None;
                }
                Ok(None)
            }
        }
    }

    /// (buffer, count, hw id or 0 before the QP exists) of a CQ.
    pub fn cq_info(&self, cq: u32) -> Option<(Region, u32, u32)> {
        self.cqs
            .get(&cq)
            .and_then(|c| Some((c.buf.as_flat()?, c.count, c.hw_id.unwrap_or(0))))
    }

    /// (buffer, count, hw id or 0) of a WQ / SQ.
    pub fn wq_info(&self, wq: u32) -> Option<(Region, u32, u32)> {
        self.wqs
            .get(&wq)
            .and_then(|w| Some((w.buf.as_flat()?, w.count, w.hw_id.unwrap_or(0))))
    }
}

/// Retired queue reports kept one by one; older ones are folded into one
/// aggregate per kind and port (id 0) so a long soak keeps flat memory
/// while sums over all queues stay exact.
const RETIRED_KEPT: usize = 4096;

impl State {
    fn retire(&mut self, report: QueueReport) {
        if self.retired.len() >= RETIRED_KEPT {
            let old = self.retired.remove(0);
            let c = &old.counters;
            match self
                .retired_folded
                .iter_mut()
                .find(|q| q.kind == old.kind && q.port == old.port)
            {
                Some(a) => {
                    let t = &mut a.counters;
                    t.packets += c.packets;
                    t.bytes += c.bytes;
                    t.wqes += c.wqes;
                    t.cqes += c.cqes;
                    t.errors += c.errors;
                    t.doorbells += c.doorbells;
                }
                None => self.retired_folded.push(QueueReport { id: 0, ..old }),
            }
        }
        self.retired.push(report);
    }
}

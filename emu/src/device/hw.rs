//! Objects a host-side device creates directly, in place of the verbs
//! layer: the vfio-user PCI function of `emu-pci`, whose control path (the
//! HWC requests of the Linux `mana` driver) makes CQs, SQs and RQs on DMA
//! rings, a guest-physical memory key and a vPort's RX steering, and rings
//! their doorbells from BAR0.
//!
//! Such objects belong to the pseudo-context of their doorbell page
//! ([`hw_ctx`]), which no verbs context ever has, so contexts never see
//! them and the verbs calls refuse them. A hardware CQ reports to an EQ
//! rather than a completion channel: when it is armed and a CQE lands, the
//! completion event is queued for [`State::take_eq_events`], for the PCI
//! function to write the EQE and raise the interrupt.

#![forbid(unsafe_code)]

use super::mr::{Mr, MrMem};
use super::objects::{Cq, Pd, Wq};
use super::rss::Rss;
use super::{QueueCounters, Res, State, WqKind, EBUSY, EINVAL};
use crate::config::Config;
use crate::doorbell::DbRing;
use crate::ffi::*;
use crate::mem::{DmaSpace, Ring};
use crate::wire::{self, RxFlags};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

const HW_CTX: u32 = 0x8000_0000;

/// The pseudo-context owning the hardware objects of doorbell page `page`.
pub const fn hw_ctx(db_page: u32) -> u32 {
    HW_CTX | db_page
}

/// Whether `ctx` is a hardware pseudo-context (verbs handles stay far below).
pub const fn is_hw_ctx(ctx: u32) -> bool {
    ctx & HW_CTX != 0
}

/// A vPort's receive configuration (`MANA_CONFIG_VPORT_RX`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VportRx {
    /// Frames are received at all.
    pub enabled: bool,
    /// Spread by the Toeplitz hash over `table`; otherwise all go to
    /// `default_rq`.
    pub rss: bool,
    pub key: [u8; wire::HASH_KEY_SIZE],
    /// RQ handles, a power-of-two count.
    pub table: Vec<u32>,
    /// RQ handle for unhashable frames (and everything without RSS).
    pub default_rq: u32,
}

/// The hardware hashes IPv4/IPv6 addresses, and TCP/UDP ports when present.
const HASH_ALL: u64 = (IBV_RX_HASH_SRC_IPV4
    | IBV_RX_HASH_DST_IPV4
    | IBV_RX_HASH_SRC_IPV6
    | IBV_RX_HASH_DST_IPV6
    | IBV_RX_HASH_SRC_PORT_TCP
    | IBV_RX_HASH_DST_PORT_TCP
    | IBV_RX_HASH_SRC_PORT_UDP
    | IBV_RX_HASH_DST_PORT_UDP) as u64;

impl State {
    /// A device for a host-side function (`cfg` normalized): its ports and
    /// backends, no verbs context and no trapped page. Its ports keep the
    /// configured MTU (there is no netdev `mtu` file to follow).
    pub fn for_hardware(cfg: &Config) -> io::Result<State> {
        let mut cfg = cfg.clone();
        cfg.normalize()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        State::build(&cfg, DbRing::new(), -1, Vec::new())
    }

    /// A protection domain on `port` (the PCI function's `pdid`).
    pub fn hw_pd(&mut self, db_page: u32, port: usize) -> Res<u32> {
        if port >= self.ports.len() {
            return Err(EINVAL);
        }
        let h = self.handle();
        self.pds.insert(
            h,
            Pd {
                ctx: hw_ctx(db_page),
                parent_of: None,
                port: Some(port),
            },
        );
        Ok(h)
    }

    /// Makes `lkey` stand for every address of `space` in PD `pd` (the
    /// function's `gpa_mkey`: SGEs carry guest-physical addresses).
    pub fn hw_register_space(&mut self, pd: u32, lkey: u32, space: Arc<dyn DmaSpace>) -> Res<()> {
        if !self.pds.contains_key(&pd) || self.mrs.contains_key(&lkey) {
            return Err(EINVAL);
        }
        self.mrs.insert(
            lkey,
            Mr {
                pd,
                mem: MrMem::Space(space),
            },
        );
        Ok(())
    }

    /// Withdraws a key `hw_register_space` made (a user MR destroyed).
    pub fn hw_unregister_space(&mut self, lkey: u32) -> Res<()> {
        match self.mrs.get(&lkey) {
            Some(m) if matches!(m.mem, MrMem::Space(_)) => {
                self.mrs.remove(&lkey);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    /// A CQ of `ring.len() / 64` entries with id `hw_id`, reporting to EQ
    /// `eq`. It starts disarmed (the driver arms it with a CQ doorbell).
    pub fn hw_create_cq(&mut self, db_page: u32, hw_id: u32, ring: Ring, eq: u32) -> Res<u32> {
        let count = (ring.len() / wire::CQE_SIZE) as u32;
        if count == 0 || self.hw_cq(db_page, hw_id).is_some() {
            return Err(EINVAL);
        }
        let h = self.handle();
        self.cqs.insert(
            h,
            Cq {
                ctx: hw_ctx(db_page),
                hw_id: Some(hw_id),
                buf: ring,
                count,
                prod: u64::from(count),
                armed: false,
                eq: Some(eq),
                channel: None,
                user: 0,
                bound: None,
                delayed: VecDeque::new(),
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    /// An SQ or RQ with id `hw_id` on `pd`'s port, completing to CQ `cq`
    /// (a handle from [`hw_create_cq`](Self::hw_create_cq)). Live at once.
    pub fn hw_create_wq(
        &mut self,
        db_page: u32,
        kind: WqKind,
        pd: u32,
        hw_id: u32,
        ring: Ring,
        cq: u32,
    ) -> Res<u32> {
        let ctx = hw_ctx(db_page);
        let port = self
            .pds
            .get(&pd)
            .filter(|p| p.ctx == ctx)
            .and_then(|p| p.port)
            .ok_or(EINVAL)?;
        match self.cqs.get(&cq) {
            Some(c) if c.ctx == ctx && c.bound.is_none() => {}
            _ => return Err(EINVAL),
        }
        if !ring.len().is_power_of_two() || self.hw_wq(db_page, kind, hw_id).is_some() {
            return Err(EINVAL);
        }
        let h = self.handle();
        self.cqs.get_mut(&cq).unwrap().bound = Some(h);
        self.wqs.insert(
            h,
            Wq {
                ctx,
                pd,
                kind,
                port: Some(port),
                hw_id: Some(hw_id),
                count: (ring.len() / wire::BU as usize) as u32,
                buf: ring,
                cq,
                dev_off: 0,
                db_tail: 0,
                active: true,
                counters: QueueCounters::default(),
            },
        );
        Ok(h)
    }

    fn hw_cq(&self, db_page: u32, hw_id: u32) -> Option<u32> {
        let ctx = hw_ctx(db_page);
        self.cqs
            .iter()
            .find(|(_, c)| c.ctx == ctx && c.hw_id == Some(hw_id))
            .map(|(h, _)| *h)
    }

    fn hw_wq(&self, db_page: u32, kind: WqKind, hw_id: u32) -> Option<u32> {
        let ctx = hw_ctx(db_page);
        self.wqs
            .iter()
            .find(|(_, w)| w.ctx == ctx && w.kind == kind && w.hw_id == Some(hw_id))
            .map(|(h, _)| *h)
    }

    /// Destroys a hardware WQ. Refused while a vPort steers frames to it.
    pub fn hw_destroy_wq(&mut self, wq: u32) -> Res<()> {
        match self.wqs.get(&wq) {
            Some(w) if is_hw_ctx(w.ctx) => {}
            _ => return Err(EINVAL),
        }
        if self
            .ports
            .iter()
            .filter_map(|p| p.rss.as_ref())
            .any(|r| r.default_rq == wq || r.table.contains(&wq))
        {
            return Err(EBUSY);
        }
        self.retire_wq(wq);
        Ok(())
    }

    /// Destroys a hardware CQ. Refused while its WQ exists.
    pub fn hw_destroy_cq(&mut self, cq: u32) -> Res<()> {
        match self.cqs.get(&cq) {
            Some(c) if is_hw_ctx(c.ctx) => {
                if c.bound.is_some_and(|w| self.wqs.contains_key(&w)) {
                    return Err(EBUSY);
                }
            }
            _ => return Err(EINVAL),
        }
        self.retire_cq(cq);
        Ok(())
    }

    /// A doorbell store at `offset` of hardware doorbell page `db_page`.
    pub fn hw_doorbell(&mut self, db_page: u32, offset: usize, value: u64) {
        self.queue_doorbell(hw_ctx(db_page), offset, value);
    }

    /// Whether doorbell page `db_page` has a CQ `hw_id` / a WQ of `kind`.
    pub fn hw_has_cq(&self, db_page: u32, hw_id: u32) -> bool {
        self.hw_cq(db_page, hw_id).is_some()
    }
    pub fn hw_has_wq(&self, db_page: u32, kind: WqKind, hw_id: u32) -> bool {
        self.hw_wq(db_page, kind, hw_id).is_some()
    }

    /// Configures how `port` receives. The RQs must be hardware RQs on
    /// that port.
    pub fn hw_set_vport_rx(&mut self, port: usize, rx: &VportRx) -> Res<()> {
        if port >= self.ports.len() {
            return Err(EINVAL);
        }
        if !rx.enabled {
            self.ports[port].rss = None;
            return Ok(());
        }
        let ok = |h: &u32| {
            self.wqs
                .get(h)
                .is_some_and(|w| is_hw_ctx(w.ctx) && w.kind == WqKind::Rq && w.port == Some(port))
        };
        if !ok(&rx.default_rq)
            || !rx.table.iter().all(ok)
            || (rx.rss && !rx.table.len().is_power_of_two())
        {
            return Err(EINVAL);
        }
        self.ports[port].rss = Some(Rss {
            qp: 0,
            enabled: rx.rss,
            key: rx.key,
            fields: HASH_ALL,
            table: if rx.rss {
                rx.table.clone()
            } else {
                vec![rx.default_rq]
            },
            default_rq: rx.default_rq,
        });
        Ok(())
    }

    /// Fences RQ `wq`: a `CQE_RX_OBJECT_FENCE` on its CQ after every
    /// completion for frames it already took.
    pub fn hw_fence_rq(&mut self, wq: u32) -> Res<()> {
        let w = self
            .wqs
            .get(&wq)
            .filter(|w| is_hw_ctx(w.ctx) && w.kind == WqKind::Rq)
            .ok_or(EINVAL)?;
        let (cq, id, off) = (w.cq, w.hw_id.unwrap_or(0), w.dev_off);
        let ring_off = off as usize & (w.buf.len() - 1);
        self.post_cqe(
            cq,
            wire::rx_comp(
                wire::CQE_RX_OBJECT_FENCE,
                0,
                &RxFlags::default(),
                &[],
                ring_off as u32,
            ),
            id,
            false,
        );
        Ok(())
    }

    /// Completion events of armed hardware CQs since the last call:
    /// (EQ, CQ id), in order.
    pub fn take_eq_events(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.eq_events)
    }

    /// The EQEs of undefined type a lying device owes (EQ, type): the
    /// hardware form of `LieKind::UnknownEvent`, for the device that owns
    /// the EQs to post.
    pub fn take_eq_lies(&mut self) -> Vec<(u32, u8)> {
        std::mem::take(&mut self.eq_lies)
    }

    /// Destroys every hardware object; returns a description of each.
    pub fn hw_reset(&mut self) -> Vec<String> {
        let mut gone = Vec::new();
        for p in &mut self.ports {
            p.rss = None;
            p.backlog.clear();
        }
        let wqs: Vec<u32> = self
            .wqs
            .iter()
            .filter(|(_, w)| is_hw_ctx(w.ctx))
            .map(|(h, _)| *h)
            .collect();
        for h in wqs {
            let w = &self.wqs[&h];
            gone.push(format!(
                "{} {}",
                if w.kind == WqKind::Sq { "SQ" } else { "RQ" },
                w.hw_id.unwrap_or(0)
            ));
            self.retire_wq(h);
        }
        let cqs: Vec<u32> = self
            .cqs
            .iter()
            .filter(|(_, c)| is_hw_ctx(c.ctx))
            .map(|(h, _)| *h)
            .collect();
        for h in cqs {
            gone.push(format!("CQ {}", self.cqs[&h].hw_id.unwrap_or(0)));
            self.retire_cq(h);
        }
        self.mrs.retain(|_, m| !matches!(m.mem, MrMem::Space(_)));
        self.pds.retain(|_, p| !is_hw_ctx(p.ctx));
        self.eq_events.clear();
        gone
    }

    /// The descriptors of the ports' host backends that can become
    /// readable (AF_PACKET sockets), for a device thread to wait on.
    pub fn backend_fds(&self) -> Vec<RawFd> {
        self.ports
            .iter()
            .filter_map(|p| match &p.backend {
                crate::backend::Backend::AfPacket(fd) => Some(fd.as_raw_fd()),
                _ => None,
            })
            .collect()
    }

    /// A port's TX vPort offset (what `CONFIG_VPORT_TX` reports).
    pub fn vp_offset(&self, port: usize) -> Option<u8> {
        self.ports.get(port).map(|p| p.vp_offset)
    }
}

//! Doorbell stores as the device sees them: a store to a context's page
//! (trapped, or sampled from its memfd page) decoded into a new SQ/RQ tail
//! or a CQ arm; stores through the pages of dead and closed contexts are
//! discarded and counted. (How stores are captured: [`crate::doorbell`].)

#![forbid(unsafe_code)]

use super::dma;
use super::{State, WqKind};
use crate::wire;

impl State {
    /// One doorbell store at `offset` of context `ctx`'s page.
    pub fn doorbell(&mut self, ctx: u32, offset: usize, value: u64) {
        let Some(c) = self.ctxs.get(&ctx) else {
            self.counters.discarded_doorbells += 1;
            return;
        };
        if c.dead {
            self.counters.discarded_doorbells += 1;
            return;
        }
        self.queue_doorbell(ctx, offset, value);
    }

    /// A doorbell store for the queues owned by `ctx` (a context, or the
    /// pseudo-context of a hardware doorbell page).
    pub(super) fn queue_doorbell(&mut self, ctx: u32, offset: usize, value: u64) {
        self.counters.doorbells += 1;
        let id = (value & 0xff_ffff) as u32;
        match offset {
            wire::DB_SQ | wire::DB_RQ => {
                let kind = if offset == wire::DB_SQ {
                    WqKind::Sq
                } else {
                    WqKind::Rq
                };
                let tail = (value >> 32) as u32;
                let Some(w) = self
                    .wqs
                    .values_mut()
                    .find(|w| w.ctx == ctx && w.kind == kind && w.hw_id == Some(id) && w.active)
                else {
                    self.counters.bad_doorbells += 1;
                    return;
                };
                let delta = tail.wrapping_sub(w.db_tail);
                let fill = tail.wrapping_sub(w.dev_off);
                if delta % wire::BU != 0 || fill as usize > w.buf.len() {
                    self.counters.bad_doorbells += 1;
                    return;
                }
                w.counters.doorbells += 1;
                w.db_tail = tail;
                if kind == WqKind::Rq {
                    self.rq_doorbell_taken();
                }
            }
            wire::DB_CQ => {
                let tail = (value >> 32) & 0x7fff_ffff;
                let arm = value >> 63 != 0;
                let Some(cqh) = self
                    .cqs
                    .iter()
                    .find(|(_, c)| c.ctx == ctx && c.hw_id == Some(id))
                    .map(|(h, _)| *h)
                else {
                    self.counters.bad_doorbells += 1;
                    return;
                };
                if arm {
                    self.arm_cq_at(cqh, tail);
                }
            }
            _ => self.counters.bad_doorbells += 1,
        }
    }

    pub(super) fn drain_doorbells(&mut self) -> bool {
        let mut did = false;
        while let Some(w) = self.ring.pop() {
            did = true;
            match self.trap_slots.get(&w.slot) {
                Some(&ctx) => {
                    if w.width != 8 {
                        self.counters.bad_doorbells += 1; // short doorbells (RTE_ARCH_32) unsupported
                        continue;
                    }
                    self.doorbell(ctx, w.offset as usize, w.value)
                }
                None => self.counters.discarded_doorbells += 1,
            }
        }
        // Poll the memfd pages (poll mode, and secondaries in trap mode).
        // Those of dead contexts too: what is stored there is discarded.
        let ctxs: Vec<(u32, [u64; 3])> = self
            .ctxs
            .iter()
            .map(|(h, c)| (*h, dma::read_doorbells(&c.shm)))
            .collect();
        for (h, vals) in ctxs {
            for (i, off) in [wire::DB_SQ, wire::DB_RQ, wire::DB_CQ]
                .into_iter()
                .enumerate()
            {
                let last = self.ctxs[&h].last[i];
                if vals[i] != last {
                    self.ctxs.get_mut(&h).unwrap().last[i] = vals[i];
                    self.doorbell(h, off, vals[i]);
                    did = true;
                }
            }
        }
        // Closed contexts' memfd pages: whatever changed was a doorbell
        // rung through a mapping that outlived its context.
        let mut stale = 0;
        for p in &mut self.closed_pages {
            for (i, v) in dma::read_doorbells(&p.shm).into_iter().enumerate() {
                if v != p.last[i] {
                    p.last[i] = v;
                    stale += 1;
                }
            }
        }
        if stale > 0 {
            self.counters.discarded_doorbells += stale;
            did = true;
        }
        did
    }
}

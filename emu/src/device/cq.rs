//! Completion queues: posting a CQE (owner bits from the producer count,
//! optional corruption), delayed CQEs kept in order, arming (directly or by
//! a CQ doorbell) and the completion-channel event an armed CQ signals.

#![forbid(unsafe_code)]

use super::dma;
use super::lies::Lie;
use super::objects::Channel;
use super::{Res, State, EBUSY, EINVAL, ENOMEM};
use crate::fd::{pipe, write_fd};
use crate::wire;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

pub(super) struct PendingCqe {
    pub(super) due: Instant,
    pub(super) slot_off: usize,
    pub(super) data: [u8; 60],
    pub(super) info: u32,
}

impl State {
    pub fn create_channel(&mut self) -> Res<(u32, RawFd)> {
        let (r, w) = pipe().map_err(|_| ENOMEM)?;
        let h = self.handle();
        let fd = r.as_raw_fd();
        self.channels.insert(h, Channel { w, r });
        Ok((h, fd))
    }

    pub fn destroy_channel(&mut self, ch: u32) -> Res<()> {
        if self.cqs.values().any(|c| c.channel == Some(ch)) {
            return Err(EBUSY);
        }
        self.channels
            .remove(&ch)
            .map(|c| drop((c.r, c.w)))
            .ok_or(EINVAL)
    }

    /// Attaches a completion channel to a CQ; `user` is what an event
    /// carries (the `ibv_cq` pointer in the verbs layer).
    pub fn set_cq_channel(&mut self, cq: u32, ch: u32, user: usize) -> Res<()> {
        if !self.channels.contains_key(&ch) {
            return Err(EINVAL);
        }
        let c = self.cqs.get_mut(&cq).ok_or(EINVAL)?;
        c.channel = Some(ch);
        c.user = user;
        Ok(())
    }

    /// Arms a CQ directly (the `ibv_req_notify_cq` path): the next CQE
    /// signals the channel.
    pub fn arm_cq(&mut self, cq: u32) -> Res<()> {
        let c = self.cqs.get_mut(&cq).ok_or(EINVAL)?;
        c.armed = true;
        self.counters.cq_arms += 1;
        Ok(())
    }

    /// A CQ doorbell with the arm bit; `tail` is the driver's consumer
    /// index. No CQE past it: armed for the next one; CQEs past it: armed
    /// and signalled at once; more past it than the ring holds: the CQ
    /// overflowed (counted, not armed).
    pub(super) fn arm_cq_at(&mut self, cqh: u32, tail: u64) {
        self.counters.cq_arms += 1;
        let c = self.cqs.get_mut(&cqh).unwrap();
        let m = u64::from(c.count) << 3;
        let diff = ((c.prod % m) + m - (tail % m)) % m;
        if diff == 0 {
            c.armed = true;
        } else if diff <= u64::from(c.count) {
            c.armed = true;
            self.signal_cq(cqh);
        } else {
            self.counters.cqe_overflow_warnings += 1;
        }
    }

    pub(super) fn signal_cq(&mut self, cqh: u32) {
        let Some(c) = self.cqs.get_mut(&cqh) else {
            return;
        };
        if !c.armed {
            return;
        }
        c.armed = false;
        if let Some(eq) = c.eq {
            // A hardware CQ: its device posts the EQE (see `hw`).
            self.eq_events.push((eq, c.hw_id.unwrap_or(0)));
            self.counters.cq_events += 1;
        } else if let Some(ch) = c.channel.and_then(|ch| self.channels.get(&ch)) {
            write_fd(ch.w.as_raw_fd(), &(c.user as u64).to_le_bytes());
            self.counters.cq_events += 1;
        }
    }

    pub(super) fn post_cqe(&mut self, cqh: u32, data: [u8; 60], wq_num: u32, is_sq: bool) {
        let Some(c) = self.cqs.get(&cqh) else {
            return;
        };
        let count = u64::from(c.count);
        let owner = ((c.prod / count) & wire::OWNER_MASK) as u32;
        let info = wire::cqe_info(wq_num, is_sq, owner);
        match self.pick_lie(cqh, &data, info, owner) {
            Lie::Honest => self.write_cqe(cqh, data, info),
            Lie::Owner(o) => {
                let info = (info & !(7u32 << 29)) | (o << 29);
                self.write_cqe(cqh, data, info)
            }
            Lie::Data(d) => self.write_cqe(cqh, d, info),
            Lie::Info(i) => self.write_cqe(cqh, data, i),
            Lie::Duplicate => {
                self.write_cqe(cqh, data, info);
                let Some(c) = self.cqs.get(&cqh) else { return };
                let owner = ((c.prod / count) & wire::OWNER_MASK) as u32;
                self.write_cqe(cqh, data, wire::cqe_info(wq_num, is_sq, owner));
            }
            Lie::Drop => {}
        }
    }

    /// Writes a CQE at the producer index (delayed if asked), with `info`
    /// as given (its owner bits included).
    fn write_cqe(&mut self, cqh: u32, mut data: [u8; 60], mut info: u32) {
        let Some(c) = self.cqs.get_mut(&cqh) else {
            return;
        };
        let count = u64::from(c.count);
        let slot = (c.prod % count) as usize;
        if self.cqe_corrupt > 0 {
            self.cqe_corrupt -= 1;
            // Garble: an undefined CQE type, vendor bits and the reserved
            // bits of cqe_info (owner bits stay valid so the driver sees it).
            data[0] = (data[0] & 0xc0) | 0x3f;
            data[3] = 0xa5;
            info |= 0xf << 25;
        }
        c.prod += 1;
        c.counters.cqes += 1;
        let pending = PendingCqe {
            due: Instant::now(),
            slot_off: slot * 64,
            data,
            info,
        };
        let delay = match &mut self.cqe_delay {
            Some((d, n)) if *n > 0 => {
                *n -= 1;
                Some(*d)
            }
            _ => None,
        };
        if let Some(d) = delay {
            c.delayed.push_back(PendingCqe {
                due: Instant::now() + d,
                ..pending
            });
        } else if !c.delayed.is_empty() {
            c.delayed.push_back(pending);
        } else {
            dma::write_cqe(c, pending.slot_off, &pending.data, pending.info);
            self.signal_cq(cqh);
        }
    }

    pub(super) fn flush_delayed(&mut self) -> bool {
        let now = Instant::now();
        let mut fired = Vec::new();
        for (h, c) in self.cqs.iter_mut() {
            while let Some(p) = c.delayed.front() {
                if p.due > now {
                    break;
                }
                let p = c.delayed.pop_front().unwrap();
                dma::write_cqe(c, p.slot_off, &p.data, p.info);
                fired.push(*h);
            }
        }
        let any = !fired.is_empty();
        for h in fired {
            self.signal_cq(h);
        }
        any
    }
}

//! Device contexts (a uverbs file): opening one on a present adapter,
//! its doorbell page (memfd, and trapped page in trap mode) and async-event
//! pipe, and closing it with everything still attached. The pages of
//! closed contexts stay watched so that late stores count as discarded.

#![forbid(unsafe_code)]

use super::{Res, State, EINVAL, EIO, ENODEV, ENOMEM};
use crate::config::DoorbellMode;
use crate::doorbell::TrapPage;
use crate::fd::{memfd_page, pipe};
use crate::mem::Region;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub struct Ctx {
    pub adapter: usize,
    pub generation: u64,
    /// Opened on the function's RNIC (7.x), not its Ethernet IB device.
    pub rnic: bool,
    pub dead: bool,
    pub memfd: OwnedFd,
    pub(super) shm: Region,
    pub trap: Option<TrapPage>,
    pub(super) last: [u64; 3],
    pub(super) async_w: OwnedFd,
    pub async_r: OwnedFd,
}

/// The doorbell page of a closed context, as other mappings may still see
/// it: its memfd page (a DPDK secondary's mapping, or the primary's in poll
/// mode) and its trapped page. Stores to either are discarded doorbells.
pub(super) struct ClosedPage {
    pub(super) shm: Region,
    pub(super) last: [u64; 3],
    pub(super) trap: Option<TrapPage>,
}

/// Closed contexts whose memfd page is still sampled (and whose trapped
/// page is detached when the device goes away); older ones are forgotten
/// (their stores are still ignored, but no longer counted).
const CLOSED_PAGES_KEPT: usize = 256;

/// One IB device as `ibv_get_device_list` lists it.
pub struct Listed {
    pub adapter: usize,
    pub generation: u64,
    pub name: String,
    /// The function's RNIC (7.x), not its Ethernet device.
    pub rnic: bool,
    pub pci: String,
    pub num_ports: u32,
}

/// What `open_context` hands to the verbs layer.
pub struct CtxInfo {
    pub handle: u32,
    pub cmd_fd: RawFd,
    pub async_fd: RawFd,
    pub db_page: usize,
    pub num_ports: u32,
}

impl State {
    pub(super) fn ctx_alive(&self, ctx: u32) -> Res<&Ctx> {
        let c = self.ctxs.get(&ctx).ok_or(EINVAL)?;
        if c.dead {
            return Err(EIO);
        }
        Ok(c)
    }

    /// The IB devices `ibv_get_device_list` lists now, in its order: each
    /// present adapter's Ethernet device and, with two per function, its
    /// RNIC (after it, as 7.x registers them, or before it with
    /// `limits.rnic_listed_first`).
    pub fn visible(&self) -> Vec<Listed> {
        let mut out = Vec::new();
        for (i, a) in self.adapters.iter().enumerate() {
            if !a.present || a.removed {
                continue;
            }
            let dev = |name: &String, rnic| Listed {
                adapter: i,
                generation: a.generation,
                name: name.clone(),
                rnic,
                pci: a.pci.clone(),
                num_ports: a.ports.len() as u32,
            };
            let mut devs = vec![dev(&a.ib_name, false)];
            if let Some(r) = &a.rnic_name {
                let rnic = dev(r, true);
                if self.limits.rnic_listed_first {
                    devs.insert(0, rnic);
                } else {
                    devs.push(rnic);
                }
            }
            out.extend(devs);
        }
        out
    }

    pub fn ibdev_path(&self, adapter: usize) -> std::path::PathBuf {
        crate::sysfs::ib_dir(&self.opts.sysfs_root, &self.adapters[adapter].ib_name)
    }

    pub fn open_context(&mut self, adapter: usize, generation: u64, rnic: bool) -> Res<CtxInfo> {
        let a = self.adapters.get(adapter).ok_or(ENODEV)?;
        if !a.present || a.removed || a.generation != generation {
            return Err(ENODEV);
        }
        let num_ports = a.ports.len() as u32;
        let (memfd, shm) = memfd_page().map_err(|_| ENOMEM)?;
        let (async_r, async_w) = pipe().map_err(|_| ENOMEM)?;
        let trap = if self.opts.doorbell_mode == DoorbellMode::Trap {
            Some(TrapPage::new(self.ring, self.wake_fd).map_err(|_| ENOMEM)?)
        } else {
            None
        };
        let handle = self.handle();
        let db_page = trap.as_ref().map_or(shm.addr(), |t| t.addr);
        if let Some(t) = &trap {
            self.trap_slots.insert(t.slot, handle);
            // Its slot was reused (all slots taken): the page is live again.
            for p in &mut self.closed_pages {
                if p.trap.as_ref().is_some_and(|o| o.slot == t.slot) {
                    p.trap = None;
                }
            }
        }
        let info = CtxInfo {
            handle,
            cmd_fd: memfd.as_raw_fd(),
            async_fd: async_r.as_raw_fd(),
            db_page,
            num_ports,
        };
        self.ctxs.insert(
            handle,
            Ctx {
                adapter,
                generation,
                rnic,
                dead: false,
                memfd,
                shm,
                trap,
                last: [0; 3],
                async_w,
                async_r,
            },
        );
        Ok(info)
    }

    /// Closes a context, releasing every object still attached to it (as
    /// the kernel does when the uverbs file is closed). Buffers are not
    /// freed: like rdma-core, the application owns leaked queue memory.
    pub fn close_context(&mut self, ctx: u32) {
        let Some(mut c) = self.ctxs.remove(&ctx) else {
            return;
        };
        // The kernel zaps every mapping of the doorbell page when the
        // uverbs file goes (and at a reset): stores through any mapping
        // left over (another process's, or a stale pointer) must not reach
        // a later context. Its pages are never reused for a new context
        // (fresh memfd per context, fresh trapped page while slots last);
        // they are kept watched so such stores count as discarded.
        if let Some(t) = &c.trap {
            t.close();
            self.trap_slots.remove(&t.slot);
        }
        if self.closed_pages.len() >= CLOSED_PAGES_KEPT {
            if let Some(old) = self.closed_pages.pop_front() {
                if let Some(t) = old.trap {
                    t.detach(self.ring);
                }
                crate::fd::release_page(old.shm);
            }
        }
        self.closed_pages.push_back(ClosedPage {
            shm: c.shm,
            last: c.last,
            trap: c.trap.take(),
        });
        let qps: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| q.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for q in qps {
            let _ = self.destroy_qp(q);
        }
        let ts: Vec<u32> = self
            .tables
            .iter()
            .filter(|(_, t)| t.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for t in ts {
            self.tables.remove(&t);
        }
        let ws: Vec<u32> = self
            .wqs
            .iter()
            .filter(|(_, w)| w.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for w in ws {
            self.retire_wq(w);
        }
        let cs: Vec<u32> = self
            .cqs
            .iter()
            .filter(|(_, c)| c.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        for c in cs {
            self.retire_cq(c);
        }
        let pds: Vec<u32> = self
            .pds
            .iter()
            .filter(|(_, p)| p.ctx == ctx)
            .map(|(h, _)| *h)
            .collect();
        self.mrs.retain(|_, m| !pds.contains(&m.pd));
        for p in pds {
            self.pds.remove(&p);
        }
        // c's fds close here; the memfd page stays mapped (see memfd_page).
    }

    pub fn ctx_db_page(&self, ctx: u32) -> Option<usize> {
        self.ctxs
            .get(&ctx)
            .map(|c| c.trap.as_ref().map_or(c.shm.addr(), |t| t.addr))
    }
}

//! Doorbell capture.
//!
//! * **Trap mode** (exact): the doorbell page handed to the driver is a
//!   `PROT_NONE` mapping. A `SA_SIGINFO` SIGSEGV handler recognises faults
//!   inside a registered doorbell page, decodes the x86-64 store (or load),
//!   records `{page, offset, value}` in a lock-free ring, wakes the device
//!   thread through an eventfd, and resumes after the instruction. Faults
//!   elsewhere are passed on to the previous handler (or the default action,
//!   so genuine crashes still crash).
//! * **Poll mode**: every context also has a memfd page (its `cmd_fd`); the
//!   device thread samples its three 64-bit registers. DPDK secondaries map
//!   this page themselves.
//! * **Dead and closed contexts**: their pages are never handed to a new
//!   context (see [`TrapPage`]); what is stored to them is discarded by the
//!   device, as writes to the kernel's disassociated page are.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

pub const PAGE: usize = 4096;
/// Trapped doorbell pages per process (one per context ever opened, see
/// [`TrapPage`]).
const MAX_PAGES: usize = 4096;
const RING_SIZE: usize = 1 << 16;

/// One trapped store (or a store to an unknown register offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbWrite {
    pub slot: u32,
    pub offset: u32,
    pub value: u64,
    pub width: u32,
}

struct Cell {
    seq: AtomicUsize,
    slot: AtomicU32,
    offset: AtomicU32,
    width: AtomicU32,
    value: AtomicU64,
}

/// Bounded multi-producer single-consumer ring (sequence-numbered cells),
/// usable from a signal handler: no allocation, no locks.
pub struct DbRing {
    cells: Box<[Cell]>,
    enq: AtomicUsize,
    deq: AtomicUsize,
    pub full_spins: AtomicU64,
    pub dropped: AtomicU64,
}

impl DbRing {
    pub fn new() -> &'static DbRing {
        let cells: Vec<Cell> = (0..RING_SIZE)
            .map(|i| Cell {
                seq: AtomicUsize::new(i),
                slot: AtomicU32::new(0),
                offset: AtomicU32::new(0),
                width: AtomicU32::new(0),
                value: AtomicU64::new(0),
            })
            .collect();
        // Leaked on purpose: a signal handler may hold a reference at any time.
        Box::leak(Box::new(DbRing {
            cells: cells.into_boxed_slice(),
            enq: AtomicUsize::new(0),
            deq: AtomicUsize::new(0),
            full_spins: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }))
    }

    /// Pushes one record; spins (yielding) while the consumer catches up.
    /// Returns false if the ring stayed full for about a second (device
    /// thread gone): the store is then dropped rather than hanging the
    /// driver thread inside the signal handler.
    pub fn push(&self, w: DbWrite) -> bool {
        let mut spins = 0u32;
        loop {
            let pos = self.enq.load(Ordering::Relaxed);
            let cell = &self.cells[pos & (RING_SIZE - 1)];
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq as isize - pos as isize;
            if diff == 0 {
                if self
                    .enq
                    .compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    cell.slot.store(w.slot, Ordering::Relaxed);
                    cell.offset.store(w.offset, Ordering::Relaxed);
                    cell.width.store(w.width, Ordering::Relaxed);
                    cell.value.store(w.value, Ordering::Relaxed);
                    cell.seq.store(pos + 1, Ordering::Release);
                    return true;
                }
            } else if diff < 0 {
                self.full_spins.fetch_add(1, Ordering::Relaxed);
                spins += 1;
                if spins > 1_000_000 {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                // SAFETY: sched_yield is async-signal-safe and has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// Records pushed and not yet popped (a snapshot: both ends move).
    pub fn pending(&self) -> u64 {
        let enq = self.enq.load(Ordering::Relaxed);
        let deq = self.deq.load(Ordering::Relaxed);
        enq.wrapping_sub(deq) as u64
    }

    /// Pops one record (single consumer: the device thread).
    pub fn pop(&self) -> Option<DbWrite> {
        let pos = self.deq.load(Ordering::Relaxed);
        let cell = &self.cells[pos & (RING_SIZE - 1)];
        if cell.seq.load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        let w = DbWrite {
            slot: cell.slot.load(Ordering::Relaxed),
            offset: cell.offset.load(Ordering::Relaxed),
            width: cell.width.load(Ordering::Relaxed),
            value: cell.value.load(Ordering::Relaxed),
        };
        cell.seq.store(pos + RING_SIZE, Ordering::Release);
        self.deq.store(pos + 1, Ordering::Relaxed);
        Some(w)
    }
}

/// Per-page state the signal handler needs besides the address.
struct PageSlot {
    ring: AtomicPtr<DbRing>,
    wake_fd: AtomicI32,
    /// 0 while the page belongs to a live context (or was never used);
    /// else when its context closed (a sequence number): such pages are
    /// handed out again only once every slot has been used, oldest first.
    closed_at: AtomicU64,
    /// Last value stored per 8-byte register, for trapped loads.
    shadow: [AtomicU64; PAGE / 8],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: PageSlot = PageSlot {
    ring: AtomicPtr::new(std::ptr::null_mut()),
    wake_fd: AtomicI32::new(0),
    closed_at: AtomicU64::new(0),
    shadow: [const { AtomicU64::new(0) }; PAGE / 8],
};

#[allow(clippy::declare_interior_mutable_const)]
const NO_BASE: AtomicUsize = AtomicUsize::new(0);

/// Page address of each slot, kept apart from the (page-sized) slots so the
/// signal handler's search touches one compact array. 0 = unused.
static BASES: [AtomicUsize; MAX_PAGES] = [NO_BASE; MAX_PAGES];
static SLOTS: [PageSlot; MAX_PAGES] = [EMPTY_SLOT; MAX_PAGES];
/// Slots handed out so far (the handler searches `BASES[..NEXT_SLOT]`).
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
static CLOSE_SEQ: AtomicU64 = AtomicU64::new(0);
pub static TRAPPED: AtomicU64 = AtomicU64::new(0);

/// The slot whose page contains `page`, searching the newest first (live
/// contexts are usually the most recent ones).
fn slot_of(page: usize) -> Option<usize> {
    // Unused slots have base 0: never match the zero page.
    if page == 0 {
        return None;
    }
    let n = NEXT_SLOT.load(Ordering::Acquire).min(MAX_PAGES);
    (0..n)
        .rev()
        .find(|&i| BASES[i].load(Ordering::Acquire) == page)
}

struct PrevAction(UnsafeCell<libc::sigaction>);
// SAFETY: written once under `INSTALL` before any reader can exist.
unsafe impl Sync for PrevAction {}
static PREV: PrevAction = PrevAction(UnsafeCell::new(
    // SAFETY: sigaction is plain old data; all-zero is SIG_DFL.
    unsafe { std::mem::zeroed() },
));
static INSTALL: Once = Once::new();

/// Installs the SIGSEGV handler (once per process), remembering the previous one.
pub fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: standard sigaction setup; PREV is written before the new
        // handler can run (it is only reached for registered pages, and none
        // exist yet).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = segv_handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGSEGV, &sa, PREV.0.get()) != 0 {
                panic!("mana-emu: sigaction(SIGSEGV) failed");
            }
        }
    });
}

/// A trapped doorbell page (`PROT_NONE`), registered with the handler.
///
/// Every context gets a page of its own: the page of a closed context is
/// not handed out again while unused slots remain (`MAX_PAGES` per
/// process), so a store through a stale pointer to it is never taken for a
/// doorbell of a newer context. Once all slots have been used, the pages of
/// the contexts that closed longest ago are reused.
pub struct TrapPage {
    pub slot: u32,
    pub addr: usize,
}

impl TrapPage {
    /// Maps a page, registers it, returns its address. Pages are never
    /// unmapped (a late store from a driver thread must still be handled).
    pub fn new(ring: &'static DbRing, wake_fd: i32) -> std::io::Result<TrapPage> {
        install_handler();
        let (idx, p) = match Self::fresh()? {
            Some(v) => v,
            None => Self::oldest_closed()
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?,
        };
        let s = &SLOTS[idx];
        for r in &s.shadow {
            r.store(0, Ordering::Relaxed);
        }
        s.wake_fd.store(wake_fd, Ordering::Relaxed);
        s.ring
            .store(ring as *const DbRing as *mut DbRing, Ordering::Release);
        BASES[idx].store(p, Ordering::Release);
        Ok(TrapPage {
            slot: idx as u32,
            addr: p,
        })
    }

    /// A never-used slot with a new page, if any is left.
    fn fresh() -> std::io::Result<Option<(usize, usize)>> {
        // Claim an index only if one is left, so NEXT_SLOT stays a bound.
        let claimed = NEXT_SLOT.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_PAGES).then_some(n + 1)
        });
        let Ok(idx) = claimed else {
            return Ok(None);
        };
        // SAFETY: anonymous private mapping, no aliasing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            // The slot stays unused (base 0) for good.
            return Err(std::io::Error::last_os_error());
        }
        Ok(Some((idx, p as usize)))
    }

    /// Takes over the page of the context that closed longest ago.
    fn oldest_closed() -> Option<(usize, usize)> {
        loop {
            let (idx, at) = (0..MAX_PAGES)
                .map(|i| (i, SLOTS[i].closed_at.load(Ordering::Acquire)))
                .filter(|&(_, at)| at != 0)
                .min_by_key(|&(_, at)| at)?;
            if SLOTS[idx]
                .closed_at
                .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some((idx, BASES[idx].load(Ordering::Acquire)));
            }
        }
    }

    /// Its context closed. Stores to the page are still trapped and still
    /// reach the owning device, which no longer maps the slot to a context
    /// and counts them as discarded doorbells (the kernel's disassociated
    /// page: writes land on a dummy page). The page becomes reusable, last
    /// in line.
    pub fn close(&self) {
        let seq = CLOSE_SEQ.fetch_add(1, Ordering::Relaxed) + 1;
        SLOTS[self.slot as usize]
            .closed_at
            .store(seq, Ordering::Release);
    }

    /// Detaches the page from the device owning `ring` (the device is going
    /// away, its wake fd with it), unless another device has taken the page
    /// over since. Later stores are trapped and dropped without a trace.
    pub fn detach(&self, ring: &'static DbRing) {
        let _ = SLOTS[self.slot as usize].ring.compare_exchange(
            ring as *const DbRing as *mut DbRing,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

// ---------------------------------------------------------------------------
// The signal handler
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    Gpr(u8),
    /// Low byte of a GPR, or AH/CH/DH/BH (encoding 4..7 without REX).
    Gpr8(u8, bool),
    Xmm(u8),
    Imm(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Store {
        width: u32,
        src: Operand,
    },
    Load {
        width: u32,
        dst: u8,
        zero_extend_to_64: bool,
    },
}

/// Decodes the x86-64 instruction in `code` that touched memory.
/// Returns the access and the instruction length.
pub fn decode(code: &[u8]) -> Option<(Access, usize)> {
    let mut i = 0;
    let mut opsize16 = false;
    let mut rex = 0u8;
    let mut vex: Option<(u8, u8, u8)> = None; // (R, W, pp)
                                              // Legacy prefixes.
    while i < code.len() {
        match code[i] {
            0x66 => opsize16 = true,
            0x67 | 0x2e | 0x3e | 0x26 | 0x36 | 0x64 | 0x65 | 0xf0 | 0xf2 | 0xf3 => {}
            _ => break,
        }
        i += 1;
        if i > 14 {
            return None;
        }
    }
    let f3 = code[..i].contains(&0xf3);
    let b0 = *code.get(i)?;
    if (0x40..=0x4f).contains(&b0) {
        rex = b0;
        i += 1;
    } else if b0 == 0xc5 {
        let b1 = *code.get(i + 1)?;
        vex = Some(((!b1 >> 7) & 1, 0, b1 & 3));
        i += 2;
    } else if b0 == 0xc4 {
        let b1 = *code.get(i + 1)?;
        let b2 = *code.get(i + 2)?;
        if b1 & 0x1f != 1 {
            return None; // only the 0F map
        }
        vex = Some(((!b1 >> 7) & 1, b2 >> 7, b2 & 3));
        i += 3;
    }
    let rex_w = rex & 8 != 0;
    let rex_r = (rex >> 2) & 1;
    let mut op = *code.get(i)?;
    i += 1;
    let two_byte = if vex.is_some() {
        true
    } else if op == 0x0f {
        op = *code.get(i)?;
        i += 1;
        true
    } else {
        false
    };
    let modrm = *code.get(i)?;
    let reg = (modrm >> 3) & 7;
    let mlen = modrm_len(&code[i..])?;
    i += mlen;
    let width_v = if rex_w {
        8
    } else if opsize16 {
        2
    } else {
        4
    };
    let acc = match (two_byte, op) {
        (false, 0x89) => Access::Store {
            width: width_v,
            src: Operand::Gpr(reg | (rex_r << 3)),
        },
        (false, 0x88) => Access::Store {
            width: 1,
            src: Operand::Gpr8(reg | (rex_r << 3), rex != 0),
        },
        (false, 0xc7) if reg == 0 => {
            let n = if opsize16 && !rex_w { 2 } else { 4 };
            let b = code.get(i..i + n)?;
            let v = if n == 2 {
                u64::from(u16::from_le_bytes([b[0], b[1]]))
            } else {
                let v = i32::from_le_bytes(b.try_into().ok()?);
                if rex_w {
                    v as i64 as u64
                } else {
                    v as u32 as u64
                }
            };
            i += n;
            Access::Store {
                width: width_v,
                src: Operand::Imm(v),
            }
        }
        (false, 0xc6) if reg == 0 => {
            let v = *code.get(i)?;
            i += 1;
            Access::Store {
                width: 1,
                src: Operand::Imm(u64::from(v)),
            }
        }
        (false, 0x8b) => Access::Load {
            width: width_v,
            dst: reg | (rex_r << 3),
            zero_extend_to_64: !opsize16,
        },
        // movq m64, xmm (66 [REX] 0F D6 /r, or VEX.128.66.0F D6)
        (true, 0xd6) => {
            let (r, pp) = match vex {
                Some((r, _, pp)) => (r, pp),
                None => (rex_r, if opsize16 { 1 } else { 0 }),
            };
            if pp != 1 {
                return None;
            }
            Access::Store {
                width: 8,
                src: Operand::Xmm(reg | (r << 3)),
            }
        }
        // movd/movq m32/m64, xmm (66 [REX.W] 0F 7E /r, or VEX)
        (true, 0x7e) if !f3 => {
            let (r, w, pp) = match vex {
                Some(v) => v,
                None => (rex_r, u8::from(rex_w), if opsize16 { 1 } else { 0 }),
            };
            if pp != 1 {
                return None;
            }
            Access::Store {
                width: if w != 0 { 8 } else { 4 },
                src: Operand::Xmm(reg | (r << 3)),
            }
        }
        _ => return None,
    };
    Some((acc, i))
}

/// Length of ModRM + SIB + displacement starting at `b[0]` (the ModRM byte).
/// Register-direct forms (mod == 3) cannot fault on memory: rejected.
fn modrm_len(b: &[u8]) -> Option<usize> {
    let modrm = *b.first()?;
    let md = modrm >> 6;
    let rm = modrm & 7;
    if md == 3 {
        return None;
    }
    let mut n = 1;
    if rm == 4 {
        let sib = *b.get(1)?;
        n += 1;
        if md == 0 && sib & 7 == 5 {
            n += 4;
        }
    } else if md == 0 && rm == 5 {
        n += 4; // RIP-relative
    }
    match md {
        1 => n += 1,
        2 => n += 4,
        _ => {}
    }
    Some(n)
}

const GREG: [libc::c_int; 16] = [
    libc::REG_RAX,
    libc::REG_RCX,
    libc::REG_RDX,
    libc::REG_RBX,
    libc::REG_RSP,
    libc::REG_RBP,
    libc::REG_RSI,
    libc::REG_RDI,
    libc::REG_R8,
    libc::REG_R9,
    libc::REG_R10,
    libc::REG_R11,
    libc::REG_R12,
    libc::REG_R13,
    libc::REG_R14,
    libc::REG_R15,
];

fn raw_write(msg: &[u8]) {
    // SAFETY: write(2) to stderr is async-signal-safe.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

extern "C" fn segv_handler(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: the kernel passes valid siginfo/ucontext pointers to an
    // SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = addr & !(PAGE - 1);
    let Some(slot) = slot_of(page) else {
        chain(sig, info, uctx);
        return;
    };
    // SAFETY: uctx is the interrupted thread's ucontext_t.
    let uc = unsafe { &mut *(uctx as *mut libc::ucontext_t) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let mut code = [0u8; 16];
    // SAFETY: the faulting instruction is mapped executable code; x86
    // instructions are at most 15 bytes and text mappings do not end in the
    // middle of the instruction that just executed.
    unsafe { std::ptr::copy_nonoverlapping(rip as *const u8, code.as_mut_ptr(), 15) };
    let Some((acc, len)) = decode(&code[..15]) else {
        raw_write(b"mana-emu: unsupported instruction on a doorbell page\n");
        chain(sig, info, uctx);
        return;
    };
    let s = &SLOTS[slot];
    let off = addr - page;
    let reg_idx = (off / 8).min(PAGE / 8 - 1);
    match acc {
        Access::Store { width, src } => {
            let raw = match src {
                Operand::Gpr(r) => uc.uc_mcontext.gregs[GREG[r as usize] as usize] as u64,
                Operand::Gpr8(r, has_rex) => {
                    let r = r as usize;
                    if !has_rex && (4..8).contains(&r) {
                        (uc.uc_mcontext.gregs[GREG[r - 4] as usize] as u64) >> 8
                    } else {
                        uc.uc_mcontext.gregs[GREG[r] as usize] as u64
                    }
                }
                Operand::Xmm(x) => {
                    // SAFETY: fpregs points at the saved FPU state of the
                    // interrupted context on Linux x86-64.
                    let el = unsafe { (*uc.uc_mcontext.fpregs)._xmm[x as usize].element };
                    u64::from(el[0]) | (u64::from(el[1]) << 32)
                }
                Operand::Imm(v) => v,
            };
            let value = if width >= 8 {
                raw
            } else {
                raw & ((1u64 << (width * 8)) - 1)
            };
            // Merge into the shadow register (for partial stores and loads).
            let sh = &s.shadow[reg_idx];
            let shift = (off % 8) * 8;
            let merged = if width >= 8 {
                value
            } else {
                let mask = ((1u64 << (width * 8)) - 1) << shift;
                (sh.load(Ordering::Relaxed) & !mask) | ((value << shift) & mask)
            };
            sh.store(merged, Ordering::Relaxed);
            TRAPPED.fetch_add(1, Ordering::Relaxed);
            let ring = s.ring.load(Ordering::Acquire);
            if !ring.is_null() {
                // SAFETY: rings are leaked ('static) and never freed.
                let ring = unsafe { &*ring };
                let _ = ring.push(DbWrite {
                    slot: slot as u32,
                    offset: off as u32,
                    value,
                    width,
                });
                let one: u64 = 1;
                let fd = s.wake_fd.load(Ordering::Relaxed);
                // SAFETY: write(2) on an eventfd is async-signal-safe.
                unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
            }
        }
        Access::Load {
            width,
            dst,
            zero_extend_to_64,
        } => {
            let v = s.shadow[reg_idx].load(Ordering::Relaxed) >> ((off % 8) * 8);
            let g = &mut uc.uc_mcontext.gregs[GREG[dst as usize] as usize];
            *g = match width {
                8 => v as i64,
                4 if zero_extend_to_64 => (v as u32) as i64,
                _ => {
                    let mask = (1u64 << (width * 8)) - 1;
                    ((*g as u64 & !mask) | (v & mask)) as i64
                }
            };
        }
    }
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] += len as i64;
}

fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // SAFETY: PREV was initialised before the handler was installed.
    let prev = unsafe { &*PREV.0.get() };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Restore the default action and return: the instruction faults
        // again and the process dies with SIGSEGV as it would have.
        // SAFETY: resetting a signal disposition is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, uctx);
    } else {
        // SAFETY: a plain sa_handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_forms() {
        // mov %rdx,(%rdi)
        assert_eq!(
            decode(&[0x48, 0x89, 0x17]),
            Some((
                Access::Store {
                    width: 8,
                    src: Operand::Gpr(2)
                },
                3
            ))
        );
        // mov %r9,0x400(%rax)
        assert_eq!(
            decode(&[0x4c, 0x89, 0x88, 0x00, 0x04, 0, 0]),
            Some((
                Access::Store {
                    width: 8,
                    src: Operand::Gpr(9)
                },
                7
            ))
        );
        // mov %eax,0x8(%rsp,%rbx,1)
        assert_eq!(
            decode(&[0x89, 0x44, 0x1c, 0x08]),
            Some((
                Access::Store {
                    width: 4,
                    src: Operand::Gpr(0)
                },
                4
            ))
        );
        // movq $-1,(%rdi)
        assert_eq!(
            decode(&[0x48, 0xc7, 0x07, 0xff, 0xff, 0xff, 0xff]),
            Some((
                Access::Store {
                    width: 8,
                    src: Operand::Imm(u64::MAX)
                },
                7
            ))
        );
        // movq %xmm1,(%rdi)
        assert_eq!(
            decode(&[0x66, 0x0f, 0xd6, 0x0f]),
            Some((
                Access::Store {
                    width: 8,
                    src: Operand::Xmm(1)
                },
                4
            ))
        );
        // vmovq %xmm0,(%rax)
        assert_eq!(
            decode(&[0xc5, 0xf9, 0xd6, 0x00]),
            Some((
                Access::Store {
                    width: 8,
                    src: Operand::Xmm(0)
                },
                4
            ))
        );
        // mov (%rdi),%rax
        assert_eq!(
            decode(&[0x48, 0x8b, 0x07]),
            Some((
                Access::Load {
                    width: 8,
                    dst: 0,
                    zero_extend_to_64: true
                },
                3
            ))
        );
        // register-direct: not a memory access
        assert_eq!(decode(&[0x48, 0x89, 0xc7]), None);
    }
}

//! A device that lies: `Fault::Lie` makes completions and events wrong at
//! random, in the ways a broken or hostile device could, from a seed so a
//! run can be repeated (the same seed and the same sequence of completions
//! give the same lies). What was done of each kind is counted in
//! `DeviceCounters::lies` so a test can compare with what the driver
//! counted.

#![forbid(unsafe_code)]

use super::State;
use crate::fd::write_fd;
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum LieKind {
    /// The CQE's owner bits name the previous lap (the slot looks empty,
    /// counted `owner_stale`) or a lap that is neither the previous nor
    /// the current one (counted `owner_ahead`).
    OwnerPhase,
    /// An undefined CQE type (50..=63).
    UnknownType,
    /// An RX completion whose first packet is longer (16 KiB..64 KiB) than
    /// any posted buffer.
    BadLength,
    /// The info dword names another queue (another id, or the other
    /// direction).
    WrongQueue,
    /// The WQE offset lies outside the ring (`wqe_outside`) or inside it
    /// but off a WQE boundary (`wqe_misaligned`).
    BadWqeOffset,
    /// The CQE is written twice, in two slots.
    Duplicate,
    /// The CQE is never written (its work was done).
    Drop,
    /// An asynchronous device event of an undefined type (the verbs form of
    /// an EQE of unknown type) to the context owning the CQ; for a hardware
    /// CQ (one reporting to an EQ), an EQE of undefined type on its EQ
    /// (`State::take_eq_lies`). The CQE itself is honest.
    UnknownEvent,
}

impl LieKind {
    pub const ALL: [LieKind; 8] = [
        LieKind::OwnerPhase,
        LieKind::UnknownType,
        LieKind::BadLength,
        LieKind::WrongQueue,
        LieKind::BadWqeOffset,
        LieKind::Duplicate,
        LieKind::Drop,
        LieKind::UnknownEvent,
    ];

    /// The kind named as in a `Fault` and on the CLI (`owner_phase`).
    pub fn parse(s: &str) -> Option<LieKind> {
        LieKind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn name(self) -> &'static str {
        match self {
            LieKind::OwnerPhase => "owner_phase",
            LieKind::UnknownType => "unknown_type",
            LieKind::BadLength => "bad_length",
            LieKind::WrongQueue => "wrong_queue",
            LieKind::BadWqeOffset => "bad_wqe_offset",
            LieKind::Duplicate => "duplicate",
            LieKind::Drop => "drop",
            LieKind::UnknownEvent => "unknown_event",
        }
    }
}

/// The lying mode while it lasts.
pub(super) struct Liar {
    rng: SplitMix,
    per_million: u32,
    kinds: Vec<LieKind>,
    remaining: Option<u64>,
    until: Option<Instant>,
    /// Lie only in the CQs of these contexts (`State::lie_only_on`); all
    /// CQs if None.
    ctxs: Option<Vec<u32>>,
}

/// What `post_cqe` does with one CQE.
pub(super) enum Lie {
    Honest,
    /// Written with these owner bits instead.
    Owner(u32),
    Data([u8; 60]),
    Info(u32),
    Duplicate,
    Drop,
}

/// splitmix64: small, seedable, good enough to pick lies.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Undefined async event types start here (ibv_event_type ends near 20).
const UNKNOWN_EVENT_BASE: u32 = 0x100;

impl Liar {
    pub(super) fn new(
        seed: u64,
        per_million: u32,
        kinds: &[LieKind],
        count: Option<u64>,
        ms: Option<u64>,
    ) -> Liar {
        let kinds = if kinds.is_empty() {
            LieKind::ALL.to_vec()
        } else {
            kinds.to_vec()
        };
        Liar {
            rng: SplitMix(seed),
            per_million: per_million.min(1_000_000),
            kinds,
            remaining: count,
            until: ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
            ctxs: None,
        }
    }
}

/// Undefined EQE types a lying hardware CQ's device posts (the last
/// defined one, `GDMA_EQE_RNIC_QP_FATAL`, is 176).
const UNKNOWN_EQE_BASE: u8 = 200;

impl State {
    /// Confines the lies `Fault::Lie` started to the CQs of contexts
    /// `ctxs` (for the PCI function: `hw_ctx` of the doorbell pages of the
    /// user contexts, so the kernel's own queues stay honest). EINVAL if
    /// the device is not lying.
    pub fn lie_only_on(&mut self, ctxs: Vec<u32>) -> super::Res<()> {
        let l = self.liar.as_mut().ok_or(super::EINVAL)?;
        l.ctxs = Some(ctxs);
        Ok(())
    }

    /// Whether the device is lying (`Fault::Lie` started, not yet over).
    pub fn lying(&self) -> bool {
        self.liar
            .as_ref()
            .is_some_and(|l| l.remaining != Some(0) && l.until.is_none_or(|t| Instant::now() < t))
    }

    /// Whether (and how) the CQE about to be posted lies. `data`/`info`
    /// are the honest CQE, `owner` its honest owner bits.
    pub(super) fn pick_lie(&mut self, cqh: u32, data: &[u8; 60], info: u32, owner: u32) -> Lie {
        let Some(l) = self.liar.as_mut() else {
            return Lie::Honest;
        };
        if l.remaining == Some(0) || l.until.is_some_and(|t| Instant::now() >= t) {
            self.liar = None;
            return Lie::Honest;
        }
        if let Some(cs) = &l.ctxs {
            if !self.cqs.get(&cqh).is_some_and(|c| cs.contains(&c.ctx)) {
                return Lie::Honest;
            }
        }
        if (l.rng.next() % 1_000_000) as u32 >= l.per_million {
            return Lie::Honest;
        }
        let ty = data[0] & 0x3f;
        let rx_ok = matches!(
            u32::from(ty),
            crate::wire::CQE_RX_OKAY | crate::wire::CQE_RX_COALESCED_4
        );
        let fits: Vec<LieKind> = l
            .kinds
            .iter()
            .copied()
            .filter(|k| *k != LieKind::BadLength || rx_ok)
            .collect();
        if fits.is_empty() {
            return Lie::Honest;
        }
        let r = l.rng.next();
        let kind = fits[(r % fits.len() as u64) as usize];
        let r = r >> 8;
        let is_sq = info & (1 << 24) != 0;
        let (what, lie) = match kind {
            LieKind::OwnerPhase => {
                if r & 1 == 0 {
                    ("owner_stale", Lie::Owner(owner.wrapping_sub(1) & 7))
                } else {
                    // One to six laps ahead: neither the previous nor this lap.
                    let ahead = 1 + ((r >> 1) % 6) as u32;
                    ("owner_ahead", Lie::Owner((owner + ahead) & 7))
                }
            }
            LieKind::UnknownType => {
                let mut d = *data;
                d[0] = (d[0] & 0xc0) | (50 + (r % 14) as u8);
                ("unknown_type", Lie::Data(d))
            }
            LieKind::BadLength => {
                let mut o = *gdma::RxCompOob::view(data);
                let len = 16384 + (r % 49152) as u16;
                o.ppi[0] = gdma::RxPacketInfo::new(len, o.ppi[0].pkt_hash());
                let mut d = *data;
                d.copy_from_slice(zerocopy::IntoBytes::as_bytes(&o));
                ("bad_length", Lie::Data(d))
            }
            LieKind::WrongQueue => {
                if r & 1 == 0 {
                    ("wrong_queue", Lie::Info(info ^ (1 << 24)))
                } else {
                    let other = (info ^ (1 + ((r >> 1) as u32 % 0xff_fffe))) & 0xff_ffff;
                    ("wrong_queue", Lie::Info((info & !0xff_ffff) | other))
                }
            }
            LieKind::BadWqeOffset => {
                // Past any ring this device makes (rings are < 64 MiB), or
                // inside it but off a WQE boundary.
                let outside = r & 1 == 0;
                let far = 0x400_0000 | ((r >> 1) as u32 & 0x1ff_ffe0);
                let mut d = *data;
                if is_sq {
                    let mut o = *gdma::TxCompOob::view(data);
                    let old = o.offsets.tx_wqe_offset();
                    let off = if outside { far } else { old | 16 };
                    o.offsets = o.offsets.with_tx_wqe_offset(off & 0x7ff_ffff);
                    d.copy_from_slice(zerocopy::IntoBytes::as_bytes(&o));
                } else {
                    let mut o = *gdma::RxCompOob::view(data);
                    let old = o.rx_wqe_offset();
                    let off = if outside { far } else { old | 16 };
                    o.rx_wqe_offset = gdma::le::U32::new(off);
                    d.copy_from_slice(zerocopy::IntoBytes::as_bytes(&o));
                }
                let what = if outside {
                    "wqe_outside"
                } else {
                    "wqe_misaligned"
                };
                (what, Lie::Data(d))
            }
            LieKind::Duplicate => ("duplicate", Lie::Duplicate),
            LieKind::Drop => ("drop", Lie::Drop),
            LieKind::UnknownEvent => {
                if let Some(eq) = self.cqs.get(&cqh).and_then(|c| c.eq) {
                    self.eq_lies.push((eq, UNKNOWN_EQE_BASE + (r % 32) as u8));
                } else if !self.unknown_verbs_event(cqh, r) {
                    return Lie::Honest;
                }
                ("unknown_event", Lie::Honest)
            }
        };
        if let Some(n) = self.liar.as_mut().and_then(|l| l.remaining.as_mut()) {
            *n -= 1;
        }
        *self.counters.lies.entry(what.to_string()).or_default() += 1;
        lie
    }

    /// `LieKind::UnknownEvent` on a verbs CQ: an async event of undefined
    /// type to the context owning it (the CQE stays honest); whether it
    /// was sent.
    fn unknown_verbs_event(&mut self, cqh: u32, r: u64) -> bool {
        let ctx = self.cqs.get(&cqh).map(|c| c.ctx);
        let ty = UNKNOWN_EVENT_BASE + (r % 64) as u32;
        let mut ev = [0u8; 16];
        ev[0..8].copy_from_slice(&1u64.to_le_bytes());
        ev[8..12].copy_from_slice(&ty.to_le_bytes());
        ctx.and_then(|h| self.ctxs.get(&h))
            .filter(|c| !c.dead)
            .map(|c| write_fd(c.async_w.as_raw_fd(), &ev))
            .is_some()
    }
}

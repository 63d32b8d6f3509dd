//! Target `cq_phase`: the owner-bit classification of CQ slots
//! ([`cqe_state`]) against a model of a producer (the device) and a consumer
//! (the driver) that share a ring, from any starting index (so across the
//! 2^32 wrap) and with producers that lap the consumer.
//!
//! The model does not use the phase formula: it knows which index last wrote
//! each slot, so it knows how many laps ahead of the consumer that write is.
//! A write of the consumer's own lap is new (`Ready`); the previous lap's is
//! old (`Empty`); one to six laps ahead is an overflow the driver must see;
//! seven laps ahead carries the previous lap's owner bits and eight laps
//! ahead the current lap's, which three owner bits cannot tell apart from
//! `Empty` and `Ready`.

use arbitrary::{Arbitrary, Unstructured};
use gdma::{
    cq_arm_tail, cq_initial_index, cq_slot, cqe_state, cqe_state_lap, owner_bits, CqeState,
};

/// Runs one simulation, then the algebraic checks on large rings.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let _ = simulate(&mut u);
    let _ = large_rings(&mut u);
}

/// A ring that remembers, for each slot, the index that last wrote it.
struct Ring {
    count: u32,
    last: Vec<u32>,
}

impl Ring {
    /// A ring as a consumer at `start` finds it: every slot written by the
    /// lap before (`start == count`: the zeroed memory of a new CQ).
    fn new(count: u32, start: u32) -> Self {
        let mut last = vec![0; count as usize];
        for k in 1..=count {
            let i = start.wrapping_sub(k);
            last[cq_slot(i, count) as usize] = i;
        }
        Self { count, last }
    }
    fn write(&mut self, i: u32) {
        self.last[cq_slot(i, self.count) as usize] = i;
    }
    fn owner(&self, slot: u32) -> u8 {
        owner_bits(self.last[slot as usize], self.count)
    }
}

fn pow2_count(u: &mut Unstructured<'_>, max_log2: u32) -> arbitrary::Result<u32> {
    Ok(1 << (u32::from(u8::arbitrary(u)?) % (max_log2 + 1)))
}

fn simulate(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    // Power-of-two counts keep their phase across the 2^32 wrap, so they may
    // start anywhere; other counts start where the driver starts (count)
    // plus a little, and never wrap.
    let pow2 = bool::arbitrary(u)?;
    let count = if pow2 {
        pow2_count(u, 10)?
    } else {
        u32::from(u16::arbitrary(u)? % 1024) + 1
    };
    let start = match u8::arbitrary(u)? % 4 {
        0 => cq_initial_index(count),
        _ if pow2 => u32::arbitrary(u)?,
        _ => count + u32::from(u16::arbitrary(u)?),
    };
    let mut ring = Ring::new(count, start);
    let (mut p, mut c) = (start, start);
    for _ in 0..32 {
        if u.is_empty() {
            break;
        }
        // How far the producer gets ahead: mostly within the ring, sometimes
        // up to nine laps.
        let n = match u8::arbitrary(u)? % 4 {
            0 => u32::from(u16::arbitrary(u)?) % (9 * count + 1),
            _ => u32::from(u16::arbitrary(u)?) % (count + 1),
        };
        let room = 9 * count - p.wrapping_sub(c);
        for _ in 0..n.min(room) {
            ring.write(p);
            p = p.wrapping_add(1);
        }
        // The consumer polls a burst.
        let burst = 1 + u32::from(u8::arbitrary(u)?);
        for _ in 0..burst {
            let out = p.wrapping_sub(c);
            let slot = cq_slot(c, count);
            let got = cqe_state(ring.owner(slot), c, count);
            let want = if out == 0 {
                CqeState::Empty
            } else {
                let laps = (out - 1) / count;
                assert_eq!(
                    ring.last[slot as usize],
                    c.wrapping_add(laps * count),
                    "model: count {count} start {start:#x} c {c:#x} p {p:#x}"
                );
                match laps % 8 {
                    0 => CqeState::Ready,
                    7 => CqeState::Empty,
                    _ => CqeState::Overflow,
                }
            };
            assert_eq!(
                got,
                want,
                "count {count} start {start:#x}: consumer {c:#x}, producer {p:#x}, owner {}",
                ring.owner(slot)
            );
            if pow2 {
                let lap = c >> count.trailing_zeros();
                assert_eq!(cqe_state_lap(ring.owner(slot), lap), got);
            }
            match got {
                CqeState::Ready if out <= count => c = c.wrapping_add(1),
                // Overflowed (or lapped so far the bits cannot show it): the
                // model's driver resynchronises at the producer.
                _ if out > count => c = p,
                CqeState::Empty => break,
                _ => unreachable!("{got:?} within one lap"),
            }
        }
        assert_eq!(cq_arm_tail(c, count) as u64, c as u64 % (count as u64 * 8));
    }
    Ok(())
}

/// Large and odd ring sizes, where the simulation's ring would not fit.
fn large_rings(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let count = if bool::arbitrary(u)? {
        pow2_count(u, 29)?
    } else {
        u32::arbitrary(u)?.max(1)
    };
    let head = u32::arbitrary(u)?;
    assert!(cq_slot(head, count) < count);
    assert_eq!(
        cq_arm_tail(head, count) as u64,
        head as u64 % (count as u64 * 8)
    );
    let own = owner_bits(head, count);
    assert!(own < 8);
    assert_eq!(cqe_state(own, head, count), CqeState::Ready);
    // Only the low three bits of the slot's owner field count.
    let junk = u8::arbitrary(u)? & !7;
    assert_eq!(cqe_state(own | junk, head, count), CqeState::Ready);
    if let Some(prev) = head.checked_sub(count) {
        assert_eq!(
            cqe_state(owner_bits(prev, count), head, count),
            CqeState::Empty
        );
    }
    for k in 1..=6u32 {
        let Some(ahead) = count.checked_mul(k).and_then(|d| head.checked_add(d)) else {
            break;
        };
        assert_eq!(
            cqe_state(owner_bits(ahead, count), head, count),
            CqeState::Overflow,
            "count {count} head {head:#x} k {k}"
        );
    }
    Ok(())
}

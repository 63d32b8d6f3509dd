//! The device's DMA: every read and write of driver memory goes through
//! here. WQEs (header, inline OOB, SGL) from a queue's ring, packet bytes
//! gathered from and scattered to SGEs (already checked by
//! [`State::mr_lookup`](super::State)), CQEs into a CQ's ring and the
//! doorbell registers of memfd pages. The memory itself is reached through
//! [`Region`]s, bounds-checked: a queue's [`Ring`](crate::mem::Ring), and
//! the regions an SGE translates to (one for a registered range, one per
//! page for a DMA space).

#![forbid(unsafe_code)]

use super::objects::{Cq, Wq, WqKind};
use crate::mem::Region;
use crate::wire::{self, vendor_err as ve, WqeHeader};

/// A parsed WQE: header, inline OOB bytes, SGL.
pub(super) type ParsedWqe = (WqeHeader, Vec<u8>, Vec<wire::Sge>);

/// Parses the WQE at the queue's device offset. Returns the header, the
/// inline OOB bytes and the SGL, or a vendor error code and how many
/// bytes to skip.
///
/// `client_oob_in_sgl` is accepted on send queues only (LSO WQEs; the
/// LSO rules are checked by `build_tx`).
pub(super) fn read_wqe(w: &Wq, max: u32) -> Result<ParsedWqe, (u32, u32)> {
    let h = read_wqe_header(w, w.dev_off, max)?;
    let ring_off = (w.dev_off as usize) & (w.buf.len() - 1);
    let oob = h.oob_bytes();
    let mut ob = vec![0u8; oob];
    w.buf.read(ring_off + 8, &mut ob);
    let mut sgl = vec![0u8; 16 * usize::from(h.num_sge)];
    w.buf.read_wrapping(ring_off + 8 + oob, &mut sgl);
    let sges = sgl
        .chunks_exact(16)
        .map(|c| wire::Sge::decode(c.try_into().unwrap()))
        .collect();
    Ok((h, ob, sges))
}

/// Reads and checks the header of the WQE at byte offset `off` of the
/// queue (its device offset, or one past it the caller has not consumed
/// yet): what [`read_wqe`] checks before it reads the OOB and SGL. On
/// success the inline OOB lies contiguous after the header and the SGL
/// follows it, wrapping at the ring's end.
pub(super) fn read_wqe_header(w: &Wq, off: u32, max: u32) -> Result<WqeHeader, (u32, u32)> {
    let avail = w.db_tail.wrapping_sub(off);
    let size = w.buf.len();
    let ring_off = (off as usize) & (size - 1);
    let h = WqeHeader::decode(w.buf.read_u64(ring_off));
    let oob = h.oob_bytes();
    let bytes = h.wqe_bytes();
    if bytes > avail {
        return Err((ve::WQE_PAST_TAIL, avail));
    }
    if h.num_sge == 0
        || (oob != 8 && oob != 24)
        || (h.client_oob_in_sgl && w.kind != WqKind::Sq)
        || bytes > max
        || ring_off + 8 + oob > size
    {
        return Err((ve::BAD_WQE_HEADER, bytes));
    }
    Ok(h)
}

/// SGE `i` of the WQE at ring offset `ring_off` whose header is `h`
/// (checked by [`read_wqe_header`]). SGEs start 16-byte aligned (WQEs are
/// 32-byte aligned, header + OOB is 16 or 32 bytes), so none straddles
/// the ring's end.
pub(super) fn read_sge(w: &Wq, ring_off: usize, h: &WqeHeader, i: usize) -> wire::Sge {
    let off = (ring_off + 8 + h.oob_bytes() + 16 * i) & (w.buf.len() - 1);
    let mut b = [0u8; 16];
    w.buf.read(off, &mut b);
    wire::Sge::decode(&b)
}

/// Appends the bytes of one SGE (the regions `mr_lookup` translated it
/// to, in order) to `frame`.
pub(super) fn gather_sge(sge: &[Region], frame: &mut Vec<u8>) {
    for r in sge {
        let start = frame.len();
        frame.resize(start + r.len(), 0);
        r.read(0, &mut frame[start..]);
    }
}

/// Writes `frame` across the SGEs of a receive WQE (each translated by
/// `mr_lookup` to its regions), in order, until the frame or the SGEs run
/// out.
pub(super) fn scatter(sges: &[Vec<Region>], frame: &[u8]) {
    let mut off = 0;
    for r in sges.iter().flatten() {
        if off >= frame.len() {
            break;
        }
        let n = r.len().min(frame.len() - off);
        r.write(0, &frame[off..off + n]);
        off += n;
    }
}

/// Writes a CQE into slot offset `slot_off` of a CQ's ring: the data, then
/// the info dword (with the owner bits) so a poller sees a complete entry.
pub(super) fn write_cqe(cq: &Cq, slot_off: usize, data: &[u8; 60], info: u32) {
    cq.buf.write_cqe(slot_off, data, info);
}

/// The SQ, RQ and CQ doorbell registers of a memfd doorbell page.
pub(super) fn read_doorbells(page: &Region) -> [u64; 3] {
    [
        page.read_u64(wire::DB_SQ),
        page.read_u64(wire::DB_RQ),
        page.read_u64(wire::DB_CQ),
    ]
}

//! How many buffers a receive WQE carries. MANA fills a receive WQE's SGEs
//! in order and reports the total length, so a frame longer than one mbuf
//! is received into a fixed list of mbufs posted together (one SGE each),
//! up to 15 (the 256-byte RQ WQE). The list is fixed when the queue is set
//! up: the one-buffer path stays as fast as before, and a queue whose
//! frames fit one mbuf never pays for chains.
//!
//! A queue scatters when its MTU frame does not fit one mbuf (as DPDK's
//! ixgbe and i40e do; testpmd's `--max-pkt-len` beyond `--mbuf-size` only
//! warns, and DPDK's C mana driver accepts such a queue) or when the
//! application asks for `RTE_ETH_RX_OFFLOAD_SCATTER`: then its WQEs hold
//! the largest frame the port takes, so later MTU changes fit too.

use crate::control::state::limits::{L2_OVERHEAD, MAX_MTU};
use crate::dataplane::rxq::RxConf;

/// The receive buffer a frame of `mtu` needs.
pub fn frame_len(mtu: u16) -> u32 {
    u32::from(mtu) + L2_OVERHEAD
}

/// The buffers per receive WQE of a queue with `buf_len`-byte buffers on a
/// port with MTU `mtu`, at most `max_sges`; `scatter`: the application
/// asked for scattered Rx. Fails, saying what mbufs would do, if a frame
/// needs more buffers than a WQE takes.
pub fn segments(buf_len: u32, mtu: u16, scatter: bool, max_sges: u32) -> Result<u32, String> {
    let frame = frame_len(mtu);
    let need = frame.div_ceil(buf_len.max(1));
    if need > max_sges {
        return Err(format!(
            "mbufs hold {buf_len} bytes but MTU {mtu} frames need {frame}; MANA receives a frame \
             into at most {max_sges} buffers: use an mbuf data room of at least {} bytes \
             (headroom included)",
            frame.div_ceil(max_sges) + crate::ffi::RTE_PKTMBUF_HEADROOM
        ));
    }
    if !scatter {
        return Ok(need);
    }
    let most = frame_len(MAX_MTU).div_ceil(buf_len.max(1));
    Ok(most.clamp(need, max_sges))
}

/// Why MTU `mtu` cannot be set while rx queue `qid`, set up with `conf`,
/// holds shorter frames, and what to do.
pub fn too_long(mtu: u16, qid: usize, conf: &RxConf) -> String {
    let frame = frame_len(mtu);
    if conf.scattered() {
        format!(
            "MTU {mtu} needs {frame}-byte frames; rx queue {qid} receives into at most {} buffers \
             of {} bytes ({}): set the MTU before setting up the queues, or use larger mbufs",
            conf.segs,
            conf.buf_len,
            conf.max_pkt_len()
        )
    } else {
        format!(
            "MTU {mtu} needs {frame}-byte receive buffers; rx queue {qid} has {} (no scatter): \
             set the MTU before setting up the queues (frames longer than an mbuf are then \
             received into several), or enable RTE_ETH_RX_OFFLOAD_SCATTER, or use larger mbufs",
            conf.buf_len
        )
    }
}

/// The most buffers a receive WQE of the device takes: the device's SGE
/// limit (`max_send_sge` holds the uverbs `max_sge`, the lower of send and
/// receive), at most what a 256-byte RQ WQE holds.
pub fn max_sges(max_send_sge: u16) -> u32 {
    u32::from(max_send_sge).clamp(1, gdma::MAX_RX_WQE_SGES as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_that_fit_one_mbuf_take_one() {
        assert_eq!(segments(2048, 1500, false, 15), Ok(1));
        assert_eq!(segments(1518, 1500, false, 15), Ok(1));
        assert_eq!(segments(8872, 8854, false, 15), Ok(1));
    }

    #[test]
    fn lisa_jumbo_frames_take_two_of_8872_bytes() {
        // --mbuf-size=9000 --max-pkt-len=9000: MTU 8982, 9000-byte frames.
        assert_eq!(segments(9000 - 128, 8982, false, 15), Ok(2));
        assert_eq!(segments(2048, 8982, false, 15), Ok(5));
        assert_eq!(segments(1517, 1500, false, 15), Ok(2));
    }

    #[test]
    fn a_requested_scatter_holds_the_largest_frame() {
        assert_eq!(segments(2048, 1500, true, 15), Ok(5));
        assert_eq!(segments(9018, 1500, true, 15), Ok(1));
        // Capped by the device, never below what the MTU needs.
        assert_eq!(segments(1024, 1500, true, 4), Ok(4));
        assert_eq!(segments(1024, 3000, true, 3), Ok(3));
    }

    #[test]
    fn more_buffers_than_a_wqe_takes_are_refused_with_the_fix() {
        assert_eq!(
            segments(1024, 9000, false, 4),
            Err(
                "mbufs hold 1024 bytes but MTU 9000 frames need 9018; MANA receives a frame \
                 into at most 4 buffers: use an mbuf data room of at least 2383 bytes \
                 (headroom included)"
                    .to_string()
            )
        );
    }

    #[test]
    fn the_device_limit_is_at_most_what_a_wqe_holds() {
        assert_eq!(max_sges(30), 15);
        assert_eq!(max_sges(15), 15);
        assert_eq!(max_sges(2), 2);
        assert_eq!(max_sges(0), 1);
    }
}

//! Receive queues: moving a port's received frames into the RQ RSS picks
//! (MTU drop, lossless back-pressure, no buffer), VLAN strip, IP/TCP/UDP
//! checksum verdicts, scattering into the WQE's SGEs (truncation), and
//! RX CQEs, coalesced four to a CQE when configured.

#![forbid(unsafe_code)]

use super::dma;
use super::State;
use crate::pkt;
use crate::wire::{self, vendor_err as ve, RxFlags, RxPpi};

impl State {
    fn rq_has_wqe(&self, rq: u32) -> bool {
        self.wqs
            .get(&rq)
            .is_some_and(|w| w.active && w.dev_off != w.db_tail)
    }

    /// Moves received frames of one port into its RQs.
    pub(super) fn process_rx(&mut self, port: usize) -> bool {
        let mut did = false;
        let coalesce = self.opts.rx_coalesce;
        // Completions gathered per RQ for coalescing: (rq, flags, ppis, first wqe offset).
        let mut batch: Vec<(u32, RxFlags, Vec<RxPpi>, u32)> = Vec::new();
        while let Some(frame) = self.ports[port].backlog.front() {
            // Frames longer than the port's MTU allows (plus the Ethernet
            // header and one 802.1Q tag if present) are not received.
            let tagged = frame.len() >= 14 && frame[12..14] == pkt::ETH_P_8021Q.to_be_bytes();
            let limit = self.ports[port].mtu as usize + pkt::ETH_HLEN + if tagged { 4 } else { 0 };
            if frame.len() > limit {
                self.ports[port].backlog.pop_front();
                self.ports[port].counters.drop("rx_mtu", 1);
                did = true;
                continue;
            }
            let sel = self.select_rq(port, frame);
            let Some((rq, hash, htype)) = sel else {
                let f = self.ports[port].backlog.pop_front().unwrap();
                let _ = f;
                self.ports[port].counters.drop("no_rx_queue", 1);
                did = true;
                continue;
            };
            if !self.rq_has_wqe(rq) {
                if self.ports[port].lossless && self.wqs.get(&rq).is_some_and(|w| w.active) {
                    break;
                }
                self.ports[port].backlog.pop_front();
                self.ports[port].counters.drop("no_rx_buffer", 1);
                did = true;
                continue;
            }
            let mut frame = self.ports[port].backlog.pop_front().unwrap();
            did = true;
            let mut flags = RxFlags {
                hashtype: htype as u16,
                ..Default::default()
            };
            if let Some(tci) = pkt::vlan_strip(&mut frame) {
                flags.vlan_present = true;
                flags.vlan_id = tci & 0xfff;
            }
            if let Some(l) = pkt::parse(&frame) {
                if l.ipv4 {
                    let ok = pkt::ipv4_csum_ok(&frame, l.l3);
                    flags.ip_ok = ok;
                    flags.ip_fail = !ok;
                } else if l.ipv6 {
                    // No header checksum, but the bit is set: the Linux
                    // driver trusts an L4 verdict only behind it, for IPv6
                    // too, so the hardware must set it there (inferred; not
                    // documented). The PMD takes no IP version from it.
                    flags.ip_ok = true;
                }
                if let Some(ok) = pkt::l4_csum_ok(&frame, &l) {
                    if l.proto == pkt::IPPROTO_TCP {
                        flags.tcp_ok = ok;
                        flags.tcp_fail = !ok;
                    } else {
                        flags.udp_ok = ok;
                        flags.udp_fail = !ok;
                    }
                }
            }
            let w = &self.wqs[&rq];
            let base_pd = self.base_pd(w.pd);
            let ring_off = (w.dev_off as usize) & (w.buf.len() - 1);
            let rq_id = w.hw_id.unwrap_or(0);
            let cqh = w.cq;
            let parsed = dma::read_wqe(w, wire::MAX_RX_WQE);
            let (advance, outcome) = match parsed {
                Err((code, skip)) => (skip, Err((code, "malformed_wqe"))),
                Ok((h, _, sges)) => {
                    let mut r = Ok(());
                    let mut regions = Vec::new();
                    for s in &sges {
                        match self.mr_lookup(base_pd, s) {
                            Ok(reg) => regions.push(reg),
                            Err(code) => {
                                r = Err((
                                    code,
                                    if code == ve::BAD_LKEY {
                                        "bad_lkey"
                                    } else {
                                        "out_of_mr"
                                    },
                                ));
                                break;
                            }
                        }
                    }
                    (h.wqe_bytes(), r.map(|_| regions))
                }
            };
            let w = self.wqs.get_mut(&rq).unwrap();
            w.dev_off = w.dev_off.wrapping_add(advance);
            w.counters.wqes += 1;
            match outcome {
                Ok(regions) => {
                    let cap: usize = regions.iter().flatten().map(|r| r.len()).sum();
                    dma::scatter(&regions, &frame);
                    if frame.len() > cap {
                        w.counters.errors += 1;
                        self.ports[port].counters.drop("rx_truncated", 1);
                        let ppi = [RxPpi {
                            pkt_len: cap.min(0xffff) as u16,
                            pkt_hash: hash,
                        }];
                        self.post_cqe(
                            cqh,
                            wire::rx_comp(wire::CQE_RX_TRUNCATED, 0, &flags, &ppi, ring_off as u32),
                            rq_id,
                            false,
                        );
                        continue;
                    }
                    w.counters.packets += 1;
                    w.counters.bytes += frame.len() as u64;
                    let pc = &mut self.ports[port].counters;
                    pc.rx_packets += 1;
                    pc.rx_bytes += frame.len() as u64;
                    self.packets_moved += 1;
                    let ppi = RxPpi {
                        pkt_len: frame.len() as u16,
                        pkt_hash: hash,
                    };
                    if coalesce {
                        if let Some(b) = batch
                            .iter_mut()
                            .find(|b| b.0 == rq && b.1 == flags && b.2.len() < 4)
                        {
                            b.2.push(ppi);
                        } else {
                            if let Some(pos) = batch.iter().position(|b| b.0 == rq) {
                                let b = batch.remove(pos);
                                self.post_rx_batch(b);
                            }
                            batch.push((rq, flags, vec![ppi], ring_off as u32));
                        }
                    } else {
                        self.post_cqe(
                            cqh,
                            wire::rx_comp(wire::CQE_RX_OKAY, 0, &flags, &[ppi], ring_off as u32),
                            rq_id,
                            false,
                        );
                    }
                }
                Err((code, reason)) => {
                    w.counters.errors += 1;
                    self.ports[port].counters.drop(reason, 1);
                    self.post_cqe(
                        cqh,
                        wire::rx_comp(
                            wire::CQE_RX_TRUNCATED,
                            code,
                            &RxFlags::default(),
                            &[],
                            ring_off as u32,
                        ),
                        rq_id,
                        false,
                    );
                }
            }
        }
        for b in batch {
            self.post_rx_batch(b);
        }
        did
    }

    fn post_rx_batch(&mut self, b: (u32, RxFlags, Vec<RxPpi>, u32)) {
        let (rq, flags, ppis, off) = b;
        let Some(w) = self.wqs.get(&rq) else { return };
        let (cqh, rq_id) = (w.cq, w.hw_id.unwrap_or(0));
        let ty = if ppis.len() > 1 {
            wire::CQE_RX_COALESCED_4
        } else {
            wire::CQE_RX_OKAY
        };
        self.post_cqe(cqh, wire::rx_comp(ty, 0, &flags, &ppis, off), rq_id, false);
    }
}

//! The benchmark mode (`options.bench = "saturate"`): every TX WQE is
//! completed by ring bookkeeping (frames never read, nothing on the wire),
//! every posted RX buffer completed with the port's template, the
//! template's bytes written once per buffer. Counted exactly, so the mode
//! cannot silently stop saturating.

use mana_emu::config::{BenchMode, Config};
use mana_emu::device::{template_frame, TEMPLATE_LEN};
use mana_emu::pkt;
use mana_emu::testing::*;
use mana_emu::wire::{self, RxFlags};

mod common;
use common::{mac, queue, two_sinks, udp, A};

fn saturating() -> Config {
    let mut c = two_sinks();
    c.options.bench = BenchMode::Saturate;
    c
}

#[test]
fn every_tx_wqe_completes_without_its_frame_being_read() {
    let dev = TestDevice::new("sat-tx", saturating());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let mut quiet = tx.oob();
    quiet.suppress_txcqe = true;
    let frame = udp(1);
    let (mut wqes, mut cqes) = (0u64, 0u64);
    // Three rounds of 40 WQEs: the SQ ring (64 entries) and the CQ wrap.
    for round in 0..3u8 {
        let mut want = Vec::new();
        for i in 0..40u8 {
            if i % 4 == 3 {
                tx.post_with(&frame, &quiet, false, 0);
            } else if i == 10 {
                // An lkey no MR has: the full model fails this WQE; the
                // benchmark mode never looks at the frame.
                let a = ctx.alloc_pkt(&frame);
                let o = tx.oob().encode(false);
                let sge = gdma::Sge::new(a, 0xdead, frame.len() as u32);
                want.push(tx.post_raw(&o, &[sge], 0));
            } else {
                want.push(tx.post(&frame));
            }
        }
        tx.ring();
        let c = tx.cq.wait(want.len());
        for (c, off) in c.iter().zip(&want) {
            assert_eq!(
                (c.cqe_type, c.vendor_err, c.wq_num, c.is_sq),
                (wire::CQE_TX_OKAY, 0, tx.sq_id, true),
                "round {round}: {c:?}"
            );
            assert_eq!(c.tx_wqe_offset(), *off);
        }
        dev.settle();
        assert!(tx.cq.poll().is_empty(), "suppressed WQEs get no CQE");
        wqes += 40;
        cqes += want.len() as u64;
    }
    assert_eq!(cqes, 90);
    let k = dev.counters();
    assert_eq!(k.device.bench_tx_wqes, wqes);
    let p = k.port(A).unwrap();
    assert_eq!(
        (p.tx_packets, p.tx_bytes),
        (wqes, wqes * frame.len() as u64)
    );
    assert!(p.drops.is_empty(), "{:?}", p.drops);
    let q = queue(&k, "sq", tx.sq_id);
    assert_eq!((q.counters.wqes, q.counters.packets), (wqes, wqes));
    assert_eq!(queue(&k, "cq", tx.cq.id).counters.cqes, cqes);
    assert!(dev.take_capture(A).is_empty(), "nothing reaches the wire");
    assert_eq!(
        (k.device.bench_rx_wqes, k.device.bench_template_writes),
        (0, 0)
    );
}

/// The CQE fields of one RX completion of the template.
fn assert_template_cqe(p: &RxPacket, rq_id: u32, off: u32, hash: u32, htype: u32) {
    let c = &p.cqe;
    assert_eq!(
        (c.cqe_type, c.vendor_err, c.wq_num, c.is_sq),
        (wire::CQE_RX_OKAY, 0, rq_id, false),
        "{c:?}"
    );
    assert_eq!(c.rx_wqe_offset(), off);
    assert_eq!(
        c.rx_ppi(0),
        wire::RxPpi {
            pkt_len: TEMPLATE_LEN as u16,
            pkt_hash: hash
        }
    );
    assert_eq!(
        c.rx_flags(),
        RxFlags {
            hashtype: htype as u16,
            ip_ok: true,
            udp_ok: true,
            ..Default::default()
        }
    );
}

#[test]
fn every_posted_rx_buffer_gets_the_template_written_once_per_buffer() {
    let dev = TestDevice::new("sat-rx", saturating());
    let ctx = dev.open();
    let mut rx = ctx
        .rx_queues(1, 1, 64, fields::IPV4, &DPDK_RSS_KEY)
        .unwrap();
    let rq_id = rx.queues[0].rq_id;
    let t = template_frame(mac(A));
    assert_eq!(t.len(), TEMPLATE_LEN);
    // 64 buffers, no frame injected: all complete at once.
    rx.post(0, 64, 2048);
    rx.ring(0);
    let got = rx.wait(0, 64);
    for (i, p) in got.iter().enumerate() {
        // One queue: RSS off, no hash (as the full model reports it).
        assert_template_cqe(p, rq_id, i as u32 * 32, 0, 0);
        assert_eq!(p.data, t, "buffer {i}");
    }
    let k = dev.counters();
    assert_eq!(
        (k.device.bench_rx_wqes, k.device.bench_template_writes),
        (64, 64)
    );
    // The same 64 buffers again, one of them overwritten by the "driver":
    // completed, the template not written again.
    let bufs: Vec<(u64, u32)> = rx.queues[0].posted.clone();
    let scribble = vec![0xeeu8; TEMPLATE_LEN];
    ctx.pool
        .write(bufs[5].0 as usize - ctx.pool.addr(), &scribble);
    for (a, size) in &bufs {
        rx.post_sges(0, &[gdma::Sge::new(*a, ctx.lkey, *size)]);
    }
    rx.ring(0);
    let ring = rx.queues[0].rq.len() as u32;
    let got = rx.wait(0, 64);
    for (i, p) in got.iter().enumerate() {
        assert_template_cqe(p, rq_id, (64 + i as u32) * 32 % ring, 0, 0);
        let want = if i == 5 { &scribble } else { &t };
        assert_eq!(&p.data, want, "buffer {i}");
    }
    // 32 fresh buffers: written.
    rx.post(0, 32, 2048);
    rx.ring(0);
    for p in rx.wait(0, 32) {
        assert_eq!(p.data, t);
    }
    dev.settle();
    assert!(rx.poll(0).is_empty(), "one CQE per posted buffer");
    let k = dev.counters();
    assert_eq!(
        (k.device.bench_rx_wqes, k.device.bench_template_writes),
        (160, 96)
    );
    let p = k.port(A).unwrap();
    assert_eq!((p.rx_packets, p.rx_bytes), (160, 160 * TEMPLATE_LEN as u64));
    let q = queue(&k, "rq", rq_id);
    assert_eq!((q.counters.wqes, q.counters.packets), (160, 160));
    assert_eq!(k.device.bench_tx_wqes, 0);
}

#[test]
fn rss_queues_all_saturate_with_the_templates_hash() {
    let dev = TestDevice::new("sat-rss", saturating());
    let ctx = dev.open();
    let mut rx = ctx
        .rx_queues(1, 4, 64, fields::IPV4, &DPDK_RSS_KEY)
        .unwrap();
    let t = template_frame(mac(A));
    // Hashed fields IPv4 source and destination: 198.18.0.1 -> 198.18.0.2.
    let hash = pkt::toeplitz(&DPDK_RSS_KEY, &t[26..34]);
    assert_eq!(&t[26..34], &[198, 18, 0, 1, 198, 18, 0, 2]);
    for q in 0..4 {
        rx.post(q, 16, 2048);
        rx.ring(q);
    }
    for q in 0..4 {
        let id = rx.queues[q].rq_id;
        for (i, p) in rx.wait(q, 16).iter().enumerate() {
            assert_template_cqe(p, id, i as u32 * 32, hash, wire::NDIS_HASH_IPV4);
            assert_eq!(p.data, t);
        }
    }
    let k = dev.counters();
    assert_eq!(
        (k.device.bench_rx_wqes, k.device.bench_template_writes),
        (64, 64)
    );
}

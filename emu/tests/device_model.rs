//! Device-model tests: queues driven like a MANA PMD drives them (WQEs in
//! driver memory, trapped 64-bit doorbell stores, owner-bit CQ polling),
//! asserting exact CQE contents, wire frames and counters.

use mana_emu::config::{BackendConfig, DoorbellMode};
use mana_emu::pkt::{self, build};
use mana_emu::testing::*;
use mana_emu::wire::{self, vendor_err as ve, Cqe, TxOob};
use std::time::Duration;

mod common;
use common::{mac, queue, rx_queue, two_sinks, SecondaryMapping, A, B};

fn udp(len: usize, flow: u8) -> Vec<u8> {
    build::udp4(
        mac(B),
        mac(A),
        [10, 0, 0, flow],
        [10, 0, 1, 1],
        1000 + u16::from(flow),
        2000,
        len,
    )
}

fn assert_tx_ok(c: &Cqe, sq_id: u32, off: u32, owner: u32) {
    assert_eq!(c.cqe_type, wire::CQE_TX_OKAY, "{c:?}");
    assert_eq!(c.client_type, 1);
    assert_eq!(c.vendor_err, 0);
    assert_eq!(c.wq_num, sq_id);
    assert!(c.is_sq);
    assert_eq!(c.owner, owner);
    assert_eq!(c.reserved_info, 0);
    assert_eq!(c.tx_wqe_offset(), off);
    assert_eq!(c.dword(1), 0, "tx_data_offset");
    assert!(
        c.data[12..60].iter().all(|&b| b == 0),
        "reserved bytes zero"
    );
}

#[test]
fn tx_single_frame_exact_cqe_and_counters() {
    let dev = TestDevice::new("tx1", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    assert!(
        tx.sq_id >= 1024 && (tx.sq_id >> 10) & 0x3fff != 0,
        "ids exercise vsq_frame: {:#x}",
        tx.sq_id
    );
    assert!(tx.cq.id >= 1024 && tx.cq.id != tx.sq_id);
    dev.capture(A);
    let f = udp(100, 1);
    let off = tx.post(&f);
    tx.ring();
    let c = tx.cq.wait(1);
    assert_eq!(c.len(), 1);
    assert_tx_ok(&c[0], tx.sq_id, off, 1);
    dev.settle();
    assert!(tx.cq.poll().is_empty(), "exactly one CQE");
    assert_eq!(dev.take_capture(A), vec![f.clone()]);
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!((pa.tx_packets, pa.tx_bytes), (1, f.len() as u64));
    assert_eq!((pa.rx_packets, pa.drops.len()), (0, 0));
    assert_eq!(k.port(B).unwrap().tx_packets, 0);
    let q = queue(&k, "sq", tx.sq_id);
    assert_eq!(
        (
            q.counters.packets,
            q.counters.bytes,
            q.counters.wqes,
            q.counters.doorbells
        ),
        (1, f.len() as u64, 1, 1)
    );
    let cq = queue(&k, "cq", tx.cq.id);
    assert_eq!(cq.counters.cqes, 1);
    assert_eq!(k.device.doorbells, 1);
    assert_eq!(k.device.bad_doorbells, 0);
}

#[test]
fn cq_wraps_at_requested_count_with_owner_laps() {
    let dev = TestDevice::new("wrap", two_sinks());
    let ctx = dev.open();
    // 96 entries: the buffer is rounded up to 128 slots, the ring wraps at 96.
    let mut tx = ctx.tx_queue(1, 96).unwrap();
    assert_eq!(tx.cq.buf.len(), 8192);
    let mut seen = 0u32;
    for round in 0..10 {
        let n = 29 + round;
        let mut offs = Vec::new();
        for i in 0..n {
            offs.push(tx.post(&udp(60, i as u8)));
        }
        tx.ring();
        let c = tx.cq.wait(n as usize);
        for (i, cqe) in c.iter().enumerate() {
            let p = 96 + seen + i as u32;
            assert_tx_ok(cqe, tx.sq_id, offs[i], (p / 96) & 7);
        }
        seen += n;
    }
    assert!(seen > 3 * 96);
    // Slots 96..127 exist in the buffer but are never written.
    assert!(tx.cq.buf.read(96 * 64, 32 * 64).iter().all(|&b| b == 0));
}

#[test]
fn tx_cqe_suppression_and_one_cqe_per_failed_wqe() {
    let dev = TestDevice::new("supp", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let mut o = tx.oob();
    o.suppress_txcqe = true;
    for i in 0..4 {
        tx.post_with(&udp(60, i), &o, false, 0);
    }
    let last = tx.post(&udp(60, 9));
    tx.ring();
    let c = tx.cq.wait(1);
    assert_tx_ok(&c[0], tx.sq_id, last, 1);
    dev.settle();
    assert!(tx.cq.poll().is_empty(), "suppressed WQEs get no CQE");
    assert_eq!(dev.take_capture(A).len(), 5);
    // A failing WQE gets its CQE even when suppressed.
    tx.post_with(&udp(60, 1), &o, false, 0);
    let frame = udp(60, 2);
    let a = ctx.alloc_pkt(&frame);
    let bad = tx.post_raw(
        &o.encode(false),
        &[gdma::Sge::new(a, 0xdead, frame.len() as u32)],
        0,
    );
    tx.post_with(&udp(60, 3), &o, false, 0);
    let last = tx.post(&udp(60, 4));
    tx.ring();
    let c = tx.cq.wait(2);
    assert_eq!(c[0].cqe_type, wire::CQE_TX_HDR_PROCESSING_ERROR);
    assert_eq!(c[0].vendor_err, ve::BAD_LKEY);
    assert_eq!(c[0].tx_wqe_offset(), bad);
    assert_eq!(c[0].wq_num, tx.sq_id);
    assert_tx_ok(&c[1], tx.sq_id, last, 1);
    dev.settle();
    assert!(tx.cq.poll().is_empty());
    assert_eq!(dev.take_capture(A).len(), 3);
    let k = dev.counters();
    assert_eq!(k.port(A).unwrap().drops("bad_lkey"), 1);
    assert_eq!(k.port(A).unwrap().tx_packets, 8);
}

#[test]
fn sgl_wraps_around_the_ring_end() {
    let dev = TestDevice::new("sglwrap", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 16).unwrap();
    assert_eq!(tx.sq.len(), 4096);
    dev.capture(A);
    // Fill 127 of the 128 BUs with 1-SGE WQEs.
    let mut sent = 0;
    while tx.head_bu < 127 {
        let n = (127 - tx.head_bu).min(16);
        for _ in 0..n {
            tx.post(&udp(60, 0));
        }
        tx.ring();
        tx.cq.wait(n as usize);
        sent += n;
    }
    assert_eq!(dev.take_capture(A).len(), sent as usize);
    // A 6-SGE WQE at the last BU: header + OOB at 4064, SGL wraps to 0.
    let frame = udp(300, 7);
    let cuts = [0, 14, 34, 42, 100, 200, frame.len()];
    let sges: Vec<gdma::Sge> = cuts
        .windows(2)
        .map(|w| {
            gdma::Sge::new(
                ctx.alloc_pkt(&frame[w[0]..w[1]]),
                ctx.lkey,
                (w[1] - w[0]) as u32,
            )
        })
        .collect();
    let o = tx.oob();
    let off = tx.post_raw(&o.encode(false), &sges, 0);
    assert_eq!(off, 4064);
    tx.ring();
    let c = tx.cq.wait(1);
    assert_tx_ok(&c[0], tx.sq_id, 4064, ((16 + sent) / 16) & 7);
    assert_eq!(dev.take_capture(A), vec![frame]);
}

#[test]
fn tx_vlan_insert_from_long_oob() {
    let dev = TestDevice::new("vlan", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let f = udp(80, 3);
    let mut o = tx.oob();
    o.pkt_fmt = 1;
    o.inject_vlan = true;
    o.pcp = 5;
    o.dei = true;
    o.vlan_id = 0x123;
    let off = tx.post_with(&f, &o, true, 0);
    tx.ring();
    assert_tx_ok(&tx.cq.wait(1)[0], tx.sq_id, off, 1);
    let w = dev.take_capture(A).pop().unwrap();
    assert_eq!(w.len(), f.len() + 4);
    assert_eq!(&w[..12], &f[..12]);
    assert_eq!(&w[12..14], &[0x81, 0x00]);
    assert_eq!(
        u16::from_be_bytes([w[14], w[15]]),
        (5 << 13) | (1 << 12) | 0x123
    );
    assert_eq!(&w[16..], &f[12..]);
}

/// What DPDK does before asking for L4 checksum offload: the checksum field
/// holds the (non-complemented) pseudo-header sum.
fn prefill(f: &mut [u8]) {
    let l = pkt::parse(f).unwrap();
    let l4 = l.l4.unwrap();
    let fo = l4 + if l.proto == pkt::IPPROTO_TCP { 16 } else { 6 };
    let s = pkt::csum_fold(pkt::pseudo_sum(f, &l, l.l4_len));
    f[fo..fo + 2].copy_from_slice(&s.to_be_bytes());
    f[l.l3 + 10] = 0;
    f[l.l3 + 11] = 0;
}

#[test]
fn tx_checksum_offload_ipv4_udp_tcp() {
    let dev = TestDevice::new("csum", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let good_udp = udp(99, 4);
    let good_tcp = build::tcp4(
        mac(B),
        mac(A),
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        40000,
        80,
        0x1234_5678,
        333,
    );
    for (good, is_tcp) in [(good_udp, false), (good_tcp, true)] {
        let mut f = good.clone();
        prefill(&mut f);
        assert_ne!(f, good);
        let mut o = tx.oob();
        o.is_outer_ipv4 = true;
        o.comp_iphdr_csum = true;
        if is_tcp {
            o.comp_tcp_csum = true;
            o.trans_off = 34;
        } else {
            // DPDK leaves trans_off unset (garbage) for UDP.
            o.comp_udp_csum = true;
            o.trans_off = 0x3ff;
        }
        tx.post_with(&f, &o, false, 0);
        tx.ring();
        assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
        let w = dev.take_capture(A).pop().unwrap();
        assert_eq!(w, good, "device completed the checksums");
    }
}

#[test]
fn tx_mtu_drop_gets_error_cqe() {
    let dev = TestDevice::new("mtu", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let ok = udp(1472, 1); // 1514 bytes: exactly MTU 1500
    let big = udp(1473, 2);
    assert_eq!(ok.len(), 1514);
    tx.post(&ok);
    let off = tx.post(&big);
    tx.ring();
    let c = tx.cq.wait(2);
    assert_eq!(c[0].cqe_type, wire::CQE_TX_OKAY);
    assert_eq!(c[1].cqe_type, wire::CQE_TX_MTU_DROP);
    assert_eq!(c[1].vendor_err, ve::MTU);
    assert_eq!(c[1].tx_wqe_offset(), off);
    assert_eq!(dev.take_capture(A), vec![ok]);
    assert_eq!(dev.counters().port(A).unwrap().drops("mtu"), 1);
}

#[test]
fn tx_bad_memory_gets_error_cqes_not_crashes() {
    let dev = TestDevice::new("badmem", two_sinks());
    let ctx = dev.open();
    let other = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let o = tx.oob().encode(false);
    let cases = [
        (
            gdma::Sge::new(ctx.pool.addr() as u64, 0xdead, 60),
            ve::BAD_LKEY,
        ),
        (
            gdma::Sge::new((ctx.pool.addr() + ctx.pool.len() - 10) as u64, ctx.lkey, 60),
            ve::OUT_OF_MR,
        ),
        (gdma::Sge::new(8, ctx.lkey, 60), ve::OUT_OF_MR),
        (
            gdma::Sge::new(other.pool.addr() as u64, other.lkey, 60),
            ve::BAD_LKEY,
        ),
    ];
    let mut offs = Vec::new();
    for (s, _) in &cases {
        offs.push(tx.post_raw(&o, &[*s], 0));
    }
    tx.ring();
    let c = tx.cq.wait(cases.len());
    for (i, (_, code)) in cases.iter().enumerate() {
        assert_eq!(c[i].cqe_type, wire::CQE_TX_HDR_PROCESSING_ERROR, "case {i}");
        assert_eq!(c[i].vendor_err, *code, "case {i}");
        assert_eq!(c[i].tx_wqe_offset(), offs[i]);
    }
    assert!(dev.take_capture(A).is_empty());
    let p = dev.counters();
    let p = p.port(A).unwrap();
    assert_eq!(
        (p.drops("bad_lkey"), p.drops("out_of_mr"), p.tx_packets),
        (2, 2, 0)
    );
    // An absurd SGE size inside a valid MR: refused before any gathering.
    let off = tx.post_raw(
        &o,
        &[gdma::Sge::new(ctx.pool.addr() as u64, ctx.lkey, u32::MAX)],
        0,
    );
    tx.ring();
    let c = tx.cq.wait(1);
    assert_eq!(
        (c[0].cqe_type, c[0].vendor_err, c[0].tx_wqe_offset()),
        (wire::CQE_TX_MTU_DROP, ve::MTU, off)
    );
    // The queue keeps working.
    let f = udp(60, 5);
    tx.post(&f);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    assert_eq!(dev.take_capture(A), vec![f]);
}

#[test]
fn tx_malformed_oob_and_header() {
    let dev = TestDevice::new("malformed", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let f = udp(60, 1);
    let mut cases: Vec<(TxOob, bool, u32, u32)> = Vec::new();
    let mut o = tx.oob();
    o.vcq_num ^= 1;
    cases.push((o, false, wire::CQE_TX_INVALID_OOB, ve::BAD_CQ_NUM));
    let mut o = tx.oob();
    o.vsq_frame ^= 1;
    cases.push((o, false, wire::CQE_TX_INVALID_OOB, ve::BAD_SQ_FRAME));
    let mut o = tx.oob();
    o.short_vp_offset ^= 1;
    cases.push((o, false, wire::CQE_TX_VPORT_IDX_OUT_OF_RANGE, ve::BAD_VPORT));
    let mut o = tx.oob();
    o.pkt_fmt = 1; // long format announced, short OOB given
    cases.push((o, false, wire::CQE_TX_INVALID_OOB, ve::BAD_OOB));
    let mut o = tx.oob();
    o.pkt_fmt = 2;
    cases.push((o, true, wire::CQE_TX_INVALID_OOB, ve::BAD_OOB));
    for (o, long, _, _) in &cases {
        tx.post_with(&f, o, *long, 0);
    }
    tx.ring();
    let c = tx.cq.wait(cases.len());
    for (i, (_, _, t, v)) in cases.iter().enumerate() {
        assert_eq!((c[i].cqe_type, c[i].vendor_err), (*t, *v), "case {i}");
    }
    // A header with a 12-byte OOB (div4 = 3): not a WQE MANA accepts.
    let off = (tx.head_bu * 32) as usize;
    let hdr = wire::WqeHeader {
        num_sge: 1,
        inline_oob_size_div4: 3,
        ..Default::default()
    };
    tx.sq.write(off, &hdr.encode().to_le_bytes());
    assert_eq!(hdr.wqe_bytes(), 64);
    tx.head_bu += 2;
    tx.ring();
    let c = tx.cq.wait(1);
    assert_eq!(
        (c[0].cqe_type, c[0].vendor_err, c[0].tx_wqe_offset()),
        (wire::CQE_TX_INVALID_OOB, ve::BAD_WQE_HEADER, off as u32)
    );
    assert!(dev.take_capture(A).is_empty());
    assert_eq!(dev.counters().port(A).unwrap().drops("malformed_wqe"), 5);
    assert_eq!(dev.counters().port(A).unwrap().drops("vport"), 1);
    tx.post(&f);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
}

fn rx1<'c, 'd>(ctx: &'c Ctx<'d>, n: usize, fields: u64) -> RxSet<'c, 'd> {
    ctx.rx_queues(1, n, 64, fields, &DPDK_RSS_KEY).unwrap()
}

#[test]
fn rx_single_packet_exact_cqe() {
    let dev = TestDevice::new("rx1", two_sinks());
    let ctx = dev.open();
    let mut rx = rx1(&ctx, 1, fields::IPV4);
    assert!(rx.queues[0].rq_id >= 1024 && rx.queues[0].cq.id >= 1024);
    rx.post(0, 8, 2048);
    rx.ring(0);
    let f = build::udp4(
        mac(A),
        mac(B),
        [192, 168, 0, 9],
        [192, 168, 0, 1],
        5000,
        6000,
        200,
    );
    dev.inject(A, f.clone());
    let p = rx.wait(0, 1);
    let c = &p[0].cqe;
    assert_eq!(
        (c.cqe_type, c.client_type, c.vendor_err),
        (wire::CQE_RX_OKAY, 1, 0)
    );
    assert_eq!(
        (c.wq_num, c.is_sq, c.owner, c.reserved_info),
        (rx.queues[0].rq_id, false, 1, 0)
    );
    assert_eq!(c.rx_wqe_offset(), 0);
    // One queue: RSS off (log_ind_tbl_size 0), no hash reported.
    assert_eq!(
        c.rx_ppi(0),
        wire::RxPpi {
            pkt_len: f.len() as u16,
            pkt_hash: 0
        }
    );
    assert!(c.data[20..56].iter().all(|&b| b == 0), "ppi[1..3] are zero");
    let fl = c.rx_flags();
    assert_eq!(
        fl,
        wire::RxFlags {
            ip_ok: true,
            udp_ok: true,
            ..Default::default()
        }
    );
    assert_eq!(c.dword(1) & 0x8000_8000, 0, "reserved flag bits");
    assert_eq!(p[0].data, f);
    let k = dev.counters();
    assert_eq!(
        (k.port(A).unwrap().rx_packets, k.port(A).unwrap().rx_bytes),
        (1, f.len() as u64)
    );
    // The second packet uses the second WQE.
    dev.inject(A, f.clone());
    assert_eq!(rx.wait(0, 1)[0].cqe.rx_wqe_offset(), 32);
}

#[test]
fn rx_vlan_strip_and_checksum_verdicts() {
    let dev = TestDevice::new("rxcsum", two_sinks());
    let ctx = dev.open();
    let mut rx = rx1(&ctx, 1, fields::IPV4);
    rx.post(0, 16, 2048);
    rx.ring(0);
    let good = udp(64, 3);
    let tagged = pkt::vlan_insert(&good, 3, false, 77);
    let mut bad_ip = udp(64, 4);
    bad_ip[24] ^= 0xff;
    let mut bad_tcp = build::tcp4(mac(A), mac(B), [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 3, 40);
    let n = bad_tcp.len();
    bad_tcp[n - 1] ^= 0x55;
    let v6 = build::udp6(mac(A), mac(B), [0xfe; 16], [0xfd; 16], 7, 8, 30);
    for f in [&tagged, &bad_ip, &bad_tcp, &v6] {
        dev.inject(A, f.to_vec());
    }
    let p = rx.wait(0, 4);
    let f0 = p[0].cqe.rx_flags();
    assert!(f0.vlan_present && f0.vlan_id == 77 && f0.ip_ok && f0.udp_ok);
    assert_eq!(p[0].data, good, "tag stripped");
    let f1 = p[1].cqe.rx_flags();
    assert!(f1.ip_fail && !f1.ip_ok && !f1.vlan_present);
    let f2 = p[2].cqe.rx_flags();
    assert!(f2.ip_ok && f2.tcp_fail && !f2.tcp_ok);
    let f3 = p[3].cqe.rx_flags();
    // IPv6 has no header checksum; the header bit is set all the same,
    // as the Linux driver's checksum path needs it (src/device/rx.rs).
    assert!(f3.udp_ok && f3.ip_ok && !f3.ip_fail);
    assert_eq!(f3.hashtype, 0, "IPv6 not in the hashed fields");
    assert_eq!(p[3].data, v6);
}

#[test]
fn rx_coalescing_up_to_four_packets_per_cqe() {
    let mut c = two_sinks();
    c.options.rx_coalesce = true;
    let dev = TestDevice::new("coal", c);
    let ctx = dev.open();
    let mut rx = rx1(&ctx, 1, fields::IPV4);
    rx.post(0, 8, 2048);
    rx.ring(0);
    dev.settle();
    let frames: Vec<Vec<u8>> = (0..6).map(|i| udp(60 + i, 9)).collect();
    dev.inject_batch(A, frames.clone());
    let p = rx.wait(0, 6);
    let c0 = &p[0].cqe;
    assert_eq!(c0.cqe_type, wire::CQE_RX_COALESCED_4);
    for k in 0..4 {
        assert_eq!(c0.rx_ppi(k).pkt_len as usize, frames[k].len());
        assert_eq!(p[k].cqe, *c0);
    }
    assert_eq!(c0.rx_wqe_offset(), 0);
    let c1 = &p[4].cqe;
    assert_eq!(c1.cqe_type, wire::CQE_RX_COALESCED_4);
    assert_eq!(c1.rx_ppi(1).pkt_len as usize, frames[5].len());
    assert_eq!((c1.rx_ppi(2).pkt_len, c1.rx_ppi(3).pkt_len), (0, 0));
    assert_eq!(c1.rx_wqe_offset(), 4 * 32);
    for (i, pk) in p.iter().enumerate() {
        assert_eq!(pk.data, frames[i]);
    }
    assert_eq!(dev.counters().port(A).unwrap().rx_packets, 6);
}

#[test]
#[allow(clippy::needless_range_loop)]
fn rss_spreads_by_toeplitz_and_reports_hash_type() {
    let dev = TestDevice::new("rss", two_sinks());
    let ctx = dev.open();
    let mut rx = rx1(&ctx, 4, fields::IPV4 | fields::TCP);
    for q in 0..4 {
        rx.post(q, 64, 2048);
        rx.ring(q);
    }
    let mut expect: Vec<Vec<(Vec<u8>, u32, u32)>> = vec![Vec::new(); 4];
    let mut all = Vec::new();
    for i in 0..48u8 {
        let sip = [10, 1, i, 7];
        let dip = [10, 2, 0, 1];
        let (f, h, t) = if i % 3 == 0 {
            // UDP ports are not in the field mask: IPv4 2-tuple hash.
            let f = build::udp4(mac(A), mac(B), sip, dip, 100 + u16::from(i), 53, 20);
            (
                f,
                pkt::toeplitz(&DPDK_RSS_KEY, &[sip, dip].concat()),
                wire::NDIS_HASH_IPV4,
            )
        } else {
            let f = build::tcp4(mac(A), mac(B), sip, dip, 3000 + u16::from(i), 443, 1, 20);
            let mut inp = [sip, dip].concat();
            inp.extend_from_slice(&(3000 + u16::from(i)).to_be_bytes());
            inp.extend_from_slice(&443u16.to_be_bytes());
            (
                f,
                pkt::toeplitz(&DPDK_RSS_KEY, &inp),
                wire::NDIS_HASH_TCP_IPV4,
            )
        };
        // 64-entry table replicated from the 4 WQs.
        expect[(h as usize & 63) % 4].push((f.clone(), h, t));
        all.push(f);
    }
    dev.inject_batch(A, all);
    for q in 0..4 {
        assert!(!expect[q].is_empty(), "queue {q} gets traffic");
        let got = rx.wait(q, expect[q].len());
        for (pk, (f, h, t)) in got.iter().zip(&expect[q]) {
            assert_eq!(&pk.data, f);
            assert_eq!(pk.cqe.rx_ppi(0).pkt_hash, *h);
            assert_eq!(u32::from(pk.cqe.rx_flags().hashtype), *t);
        }
    }
    dev.settle();
    for q in 0..4 {
        assert!(rx.poll(q).is_empty());
    }
}

#[test]
fn rx_drops_truncation_and_bad_buffers_never_write_outside() {
    let dev = TestDevice::new("rxdrop", two_sinks());
    let ctx = dev.open();
    // No RSS QP on port B: nowhere to deliver.
    dev.inject(B, udp(60, 1));
    dev.wait_counters(|k| k.port(B).unwrap().drops("no_rx_queue") == 1);
    let mut rx = rx1(&ctx, 1, fields::IPV4);
    for i in 0..3 {
        dev.inject(A, udp(60, i));
    }
    dev.wait_counters(|k| k.port(A).unwrap().drops("no_rx_buffer") == 3);
    // 64-byte buffer followed by a sentinel; a 100-byte frame is truncated.
    let a = ctx.alloc(128) as u64;
    let sentinel = vec![0xa5u8; 64];
    ctx.pool.write(a as usize - ctx.pool.addr() + 64, &sentinel);
    rx.post_sges(0, &[gdma::Sge::new(a, ctx.lkey, 64)]);
    // A buffer with a bad lkey, and one reaching past the MR.
    rx.post_sges(0, &[gdma::Sge::new(a, 0xbad, 64)]);
    let end = (ctx.pool.addr() + ctx.pool.len() - 16) as u64;
    rx.post_sges(0, &[gdma::Sge::new(end, ctx.lkey, 64)]);
    rx.ring(0);
    let f = udp(58, 2);
    assert_eq!(f.len(), 100);
    for _ in 0..3 {
        dev.inject(A, f.clone());
    }
    let c = rx.queues[0].cq.wait(3);
    assert_eq!(c[0].cqe_type, wire::CQE_RX_TRUNCATED);
    assert_eq!(c[0].rx_ppi(0).pkt_len, 64);
    assert_eq!(
        (c[1].cqe_type, c[1].vendor_err),
        (wire::CQE_RX_TRUNCATED, ve::BAD_LKEY)
    );
    assert_eq!(
        (c[2].cqe_type, c[2].vendor_err),
        (wire::CQE_RX_TRUNCATED, ve::OUT_OF_MR)
    );
    assert_eq!(ctx.read_pool(a, 64), f[..64].to_vec(), "truncated data");
    assert_eq!(
        ctx.read_pool(a + 64, 64),
        sentinel,
        "nothing written past the SGE"
    );
    assert!(
        ctx.read_pool(end, 16).iter().all(|&b| b == 0),
        "nothing written for a bad SGE"
    );
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!(
        (
            pa.drops("rx_truncated"),
            pa.drops("bad_lkey"),
            pa.drops("out_of_mr"),
            pa.rx_packets
        ),
        (1, 1, 1, 0)
    );
}

#[test]
fn eight_tx_queues_each_final_packet_completes() {
    let dev = TestDevice::new("eightq", two_sinks());
    let ctx = dev.open();
    dev.capture(A);
    let mut qs: Vec<_> = (0..8).map(|_| ctx.tx_queue(1, 64).unwrap()).collect();
    // Back-to-back doorbells of different queues on the one shared SQ
    // register: polling would lose all but the last; trapping sees each.
    for round in 0..40 {
        for q in qs.iter_mut() {
            q.post(&udp(60, round));
            q.ring();
        }
        for q in qs.iter_mut() {
            let c = q.cq.wait(1);
            assert_eq!(c[0].cqe_type, wire::CQE_TX_OKAY);
        }
    }
    // The same from 8 threads at once.
    for q in qs.iter_mut() {
        q.post(&udp(60, 99));
    }
    let stores: Vec<(usize, u64)> = qs
        .iter()
        .map(|q| {
            (
                ctx.db_page,
                gdma::SqDoorbell::for_head_bu(q.sq_id, q.head_bu)
                    .unwrap()
                    .to_raw(),
            )
        })
        .collect();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let hs: Vec<_> = stores
        .into_iter()
        .map(|(page, v)| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                // SAFETY: the context's trapped doorbell page (SQ register).
                unsafe { std::ptr::write_volatile(page as *mut u64, v) };
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for q in qs.iter_mut() {
        assert_eq!(q.cq.wait(1).len(), 1);
    }
    let k = dev.counters();
    assert_eq!(k.port(A).unwrap().tx_packets, 8 * 41);
    assert_eq!(k.device.doorbells, 8 * 41);
    assert_eq!(dev.take_capture(A).len(), 8 * 41);
}

#[test]
fn poll_mode_doorbells_through_the_memfd_page() {
    let mut c = two_sinks();
    c.options.doorbell_mode = DoorbellMode::Poll;
    let dev = TestDevice::new("pollmode", c);
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    for i in 0..20 {
        tx.post(&udp(60, i));
        tx.ring();
        tx.cq.wait(1);
    }
    // A second mapping of cmd_fd (what a DPDK secondary does) rings too.
    let secondary = SecondaryMapping::new(ctx.cmd_fd);
    tx.post(&udp(60, 1));
    let v = gdma::SqDoorbell::for_head_bu(tx.sq_id, tx.head_bu)
        .unwrap()
        .to_raw();
    secondary.ring(wire::DB_SQ, v);
    tx.cq.wait(1);
    assert_eq!(dev.counters().port(A).unwrap().tx_packets, 21);
}

#[test]
fn trap_mode_secondary_mapping_is_polled() {
    let dev = TestDevice::new("secondary", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    // A DPDK secondary's view of the doorbell page.
    let secondary = SecondaryMapping::new(ctx.cmd_fd);
    tx.post(&udp(60, 1));
    let v = gdma::SqDoorbell::for_head_bu(tx.sq_id, tx.head_bu)
        .unwrap()
        .to_raw();
    secondary.ring(wire::DB_SQ, v);
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
}

#[test]
fn pair_backend_wires_two_ports() {
    let mut c = two_sinks();
    c.adapters[0].ports[0].backend = BackendConfig::Pair { peer: B.into() };
    c.adapters[0].ports[1].backend = BackendConfig::Pair { peer: A.into() };
    let dev = TestDevice::new("pair", c);
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    let mut rx = ctx
        .rx_queues(2, 1, 64, fields::IPV4, &DPDK_RSS_KEY)
        .unwrap();
    rx.post(0, 32, 2048);
    rx.ring(0);
    let frames: Vec<_> = (0..20).map(|i| udp(50 + i, i as u8)).collect();
    for f in &frames {
        tx.post(f);
    }
    tx.ring();
    tx.cq.wait(20);
    let got: Vec<Vec<u8>> = rx.wait(0, 20).into_iter().map(|p| p.data).collect();
    assert_eq!(got, frames);
    let k = dev.counters();
    assert_eq!(k.port(A).unwrap().tx_packets, 20);
    assert_eq!(k.port(B).unwrap().rx_packets, 20);
    assert_eq!(k.port(A).unwrap().tx_bytes, k.port(B).unwrap().rx_bytes);
}

#[test]
fn loopback_and_pcap_backends() {
    let dir = std::env::temp_dir().join(format!("mana-emu-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rxf = dir.join("in.pcap");
    let txf = dir.join("out.pcap");
    let input: Vec<_> = (0..10).map(|i| udp(40 + i, i as u8)).collect();
    {
        let mut w = mana_emu::backend::pcap_writer(&rxf).unwrap();
        for f in &input {
            mana_emu::backend::pcap_write(&mut w, f).unwrap();
        }
    }
    let mut c = two_sinks();
    c.adapters[0].ports[0].backend = BackendConfig::Loopback;
    c.adapters[0].ports[1].backend = BackendConfig::Pcap {
        rx: Some(rxf),
        tx: Some(txf.clone()),
    };
    c.adapters[0].ports[1].lossless_rx = true;
    let dev = TestDevice::new("pcap", c);
    let ctx = dev.open();
    // Loopback: A's frames come back on A.
    let mut txa = ctx.tx_queue(1, 64).unwrap();
    let mut rxa = rx_queue(&ctx, 16);
    let f = udp(77, 1);
    txa.post(&f);
    txa.ring();
    assert_eq!(rxa.wait(0, 1)[0].data, f);
    // pcap in: fed once B's RX exists (lossless: no drops); pcap out.
    let mut rxb = ctx
        .rx_queues(2, 1, 64, fields::IPV4, &DPDK_RSS_KEY)
        .unwrap();
    rxb.post(0, 4, 2048);
    rxb.ring(0);
    let mut got: Vec<Vec<u8>> = rxb.wait(0, 4).into_iter().map(|p| p.data).collect();
    rxb.post(0, 6, 2048);
    rxb.ring(0);
    got.extend(rxb.wait(0, 6).into_iter().map(|p| p.data));
    assert_eq!(got, input);
    let mut txb = ctx.tx_queue(2, 64).unwrap();
    for f in &input[..3] {
        txb.post(f);
    }
    txb.ring();
    txb.cq.wait(3);
    drop(txb);
    drop(rxb);
    drop(rxa);
    drop(txa);
    drop(ctx);
    drop(dev); // flushes the pcap writer
    assert_eq!(
        mana_emu::backend::read_pcap(&txf).unwrap(),
        input[..3].to_vec()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn queue_limits_and_object_rules() {
    let dev = TestDevice::new("limits", two_sinks());
    let ctx = dev.open();
    // rdma-core 44: queues deeper than 256 entries are EINVAL.
    assert_eq!(ctx.tx_queue(1, 512).err().unwrap().0, libc::EINVAL);
    assert!(ctx.tx_queue(1, 256).is_ok());
    // A RAW QP needs a parent domain.
    let cqbuf = DmaBuf::new(16384);
    let sqbuf = DmaBuf::new(65536);
    let mut st = dev.emu.lock();
    let cq = st
        .create_cq(ctx.handle, 64, cqbuf.region(), None, 0)
        .unwrap();
    assert_eq!(
        st.create_raw_qp(ctx.handle, ctx.pd, cq, 64, 15, sqbuf.region())
            .err()
            .unwrap()
            .0,
        libc::EINVAL
    );
    // Port 3 does not exist.
    let bad = st.alloc_parent_domain(ctx.handle, ctx.pd, 3).unwrap();
    assert_eq!(
        st.create_raw_qp(ctx.handle, bad, cq, 64, 15, sqbuf.region())
            .err()
            .unwrap()
            .0,
        libc::EINVAL
    );
    // A CQ belongs to one WQ.
    let ppd = st.alloc_parent_domain(ctx.handle, ctx.pd, 1).unwrap();
    let q = st
        .create_raw_qp(ctx.handle, ppd, cq, 64, 15, sqbuf.region())
        .unwrap();
    assert_eq!(
        st.create_raw_qp(ctx.handle, ppd, cq, 64, 15, sqbuf.region())
            .err()
            .unwrap()
            .0,
        libc::EINVAL
    );
    // Destroying a CQ still used by a QP: EBUSY; a PD with children: EBUSY.
    assert_eq!(st.destroy_cq(cq).err().unwrap().0, libc::EBUSY);
    assert_eq!(st.dealloc_pd(ctx.pd).err().unwrap().0, libc::EBUSY);
    st.destroy_qp(q.qp).unwrap();
    st.destroy_cq(cq).unwrap();
    drop(st);
    let mut m = two_sinks();
    m.options.rdma_core = Some(mana_emu::config::RdmaCoreLimits::Modern);
    let dev2 = TestDevice::new("limits2", m);
    let ctx2 = dev2.open();
    assert!(
        ctx2.tx_queue(1, 1024).is_ok(),
        "modern rdma-core has no 256 limit"
    );
    assert_eq!(
        ctx2.tx_queue(1, 4096).err().unwrap().0,
        libc::EINVAL,
        "max_qp_wr 2048"
    );
}

#[test]
fn destroy_while_busy_quiesces_before_free() {
    let dev = TestDevice::new("quiesce", two_sinks());
    let ctx = dev.open();
    for round in 0..20 {
        let mut tx = ctx.tx_queue(1, 256).unwrap();
        for i in 0..200 {
            tx.post(&udp(60, i as u8));
        }
        tx.ring();
        if round % 2 == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        // Destroy (device lock taken: the device thread is out of the
        // queue) and free the rings immediately.
        tx.destroy().unwrap();
        drop(tx);
    }
    let k = dev.counters();
    assert!(k.port(A).unwrap().tx_packets <= 20 * 200);
    // Queue counters of destroyed queues survive for the exit dump.
    assert_eq!(
        k.queues
            .iter()
            .filter(|q| q.kind == "sq" && !q.live)
            .count(),
        20
    );
}

/// A fault outside the doorbell pages still kills the process with SIGSEGV
/// (the handler passes it on to the previous handler / the default action).
#[test]
fn unrelated_segfault_is_not_swallowed() {
    if std::env::var_os("MANA_EMU_SEGV_CHILD").is_some() {
        let dev = TestDevice::new("segvchild", two_sinks());
        let ctx = dev.open();
        let tx = ctx.tx_queue(1, 64).unwrap();
        tx.ring(); // the handler is installed and works
                   // SAFETY: deliberately invalid, to crash this child process.
        unsafe { std::ptr::write_volatile(16 as *mut u64, 1) };
        unreachable!("the store must kill the process");
    }
    let exe = std::env::current_exe().unwrap();
    let st = std::process::Command::new(exe)
        .args([
            "--exact",
            "unrelated_segfault_is_not_swallowed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MANA_EMU_SEGV_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGSEGV), "{st:?}");
}

#[test]
fn vport_mac_filter_option() {
    let mut c = two_sinks();
    c.adapters[0].ports[0].mac_filter = true;
    let dev = TestDevice::new("macfilter", c);
    let ctx = dev.open();
    let mut rx = rx_queue(&ctx, 8);
    let mine = build::udp4(mac(A), mac(B), [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 10);
    let other = build::udp4(mac(B), mac(A), [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 10);
    let bcast = build::udp4([0xff; 6], mac(B), [1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 10);
    let mine2 = build::udp4(mac(A), mac(B), [1, 1, 1, 1], [2, 2, 2, 2], 3, 4, 10);
    dev.inject_batch(A, vec![other, mine.clone(), bcast, mine2.clone()]);
    let got: Vec<Vec<u8>> = rx.wait(0, 2).into_iter().map(|p| p.data).collect();
    assert_eq!(got, vec![mine, mine2]);
    let c = dev.counters();
    let a = c.port(A).unwrap();
    assert_eq!((a.drops("mac_filter"), a.drops("vnet_broadcast")), (1, 1));
}

/// What an Azure virtual network carries to a vPort: unicast only. Frames
/// to the broadcast address, to IPv4 and IPv6 multicast groups (DTS's
/// `disable_promisc_multicast` injects 01:00:5e:00:00:01) and to the
/// link-local control group (STP, LLDP) never arrive, counted as dropped
/// with their reason, whatever the port's MAC filter option; unicast to the
/// port's MAC does.
#[test]
fn vnet_carries_no_broadcast_or_multicast() {
    let dev = TestDevice::new("vnetcast", two_sinks());
    let ctx = dev.open();
    let mut rx = rx_queue(&ctx, 8);
    let to = |dst: [u8; 6], sport: u16| {
        build::udp4(dst, mac(B), [1, 1, 1, 1], [2, 2, 2, 2], sport, 2, 10)
    };
    let mine = to(mac(A), 1);
    let mine2 = to(mac(A), 2);
    let blocked = vec![
        to([0xff; 6], 3),
        to([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01], 4),
        to([0x33, 0x33, 0x00, 0x00, 0x00, 0x01], 5),
        to([0x01, 0x80, 0xc2, 0x00, 0x00, 0x00], 6),
    ];
    let mut frames = blocked.clone();
    frames.insert(2, mine.clone());
    frames.push(mine2.clone());
    dev.inject_batch(A, frames);
    let got: Vec<Vec<u8>> = rx.wait(0, 2).into_iter().map(|p| p.data).collect();
    assert_eq!(got, vec![mine.clone(), mine2.clone()]);
    let c = dev.counters();
    let a = c.port(A).unwrap();
    assert_eq!(a.drops("vnet_broadcast"), 1, "{a:?}");
    assert_eq!(a.drops("vnet_multicast"), 3, "{a:?}");
    assert_eq!(
        (a.rx_packets, a.rx_bytes),
        (2, (mine.len() + mine2.len()) as u64),
        "{a:?}"
    );
}

/// RX interrupt mode as DPDK does it (`mana_arm_cq`): a CQ doorbell with
/// `arm` and the consumer index modulo count*8; the next CQE writes one
/// event to the CQ's completion channel. Arming with CQEs already pending
/// fires at once.
#[test]
fn cq_arm_doorbell_signals_the_completion_channel() {
    let dev = TestDevice::new("arm", two_sinks());
    let ctx = dev.open();
    let mut rx = rx1(&ctx, 1, fields::IPV4);
    rx.post(0, 16, 2048);
    rx.ring(0);
    // Attach a channel to the RQ's CQ (what ibv_create_cq(..., channel) does).
    let (ch, fd) = dev.emu.lock().create_channel().unwrap();
    let cqh = rx.queues[0].cq.handle;
    dev.emu.lock().set_cq_channel(cqh, ch, 0xabcd).unwrap();
    let read_event = || -> Option<u64> {
        let mut b = [0u8; 8];
        // SAFETY: reading our own non-blocking pipe.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 8) };
        (n == 8).then(|| u64::from_le_bytes(b))
    };
    let (cq_id, count) = (rx.queues[0].cq.id, rx.queues[0].cq.count);
    let arm = |head: u32| {
        gdma::CqDoorbell::arm_at(cq_id, head, count)
            .unwrap()
            .to_raw()
    };
    // Armed at the current head: nothing until a CQE arrives.
    ctx.ring(wire::DB_CQ, arm(rx.queues[0].cq.head));
    dev.settle();
    assert_eq!(read_event(), None);
    dev.inject(A, udp(60, 1));
    rx.wait(0, 1);
    dev.settle();
    assert_eq!(read_event(), Some(0xabcd));
    // One event per arm.
    dev.inject(A, udp(60, 2));
    rx.wait(0, 1);
    dev.settle();
    assert_eq!(read_event(), None);
    // Arming behind the producer (a CQE is pending): fires immediately.
    let head = rx.queues[0].cq.head;
    dev.inject(A, udp(60, 3));
    dev.wait_counters(|k| k.port(A).unwrap().rx_packets == 3);
    ctx.ring(wire::DB_CQ, arm(head));
    dev.settle();
    assert_eq!(read_event(), Some(0xabcd));
    let k = dev.counters();
    assert_eq!((k.device.cq_arms, k.device.cq_events), (2, 2));
}

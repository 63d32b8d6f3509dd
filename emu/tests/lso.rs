//! LSO (TCP segmentation offload) sends, encoded as the Linux kernel's
//! `mana_start_xmit` posts a GSO packet: WQE header `client_oob_in_sgl = 1`,
//! `last_vbytes` = size of SGE 0, `client_data_unit` = MSS; SGE 0 holds
//! exactly the L2+L3+L4 headers (IP lengths and IPv4 checksum 0, TCP
//! checksum = pseudo-header sum with length 0), the payload follows in
//! SGEs 1..n; the inline OOB asks for the outer IP version, IP and TCP
//! checksums and gives the transport offset.
//!
//! Expected segments are built here from scratch (full checksums over the
//! final bytes), independently of the device's incremental computation;
//! one small case is a golden byte vector computed outside Rust.

use mana_emu::config::BackendConfig;
use mana_emu::pkt;
use mana_emu::testing::*;
use mana_emu::wire::{self, vendor_err as ve, Cqe};

mod common;
use common::*;

const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const CWR: u8 = 0x80;

/// A TCP segment built from its fields, with correct lengths and
/// checksums computed from scratch.
struct Tcp<'a> {
    v6: bool,
    vlan: Option<u16>,
    ip_id: u16,
    seq: u32,
    flags: u8,
    options: &'a [u8],
    payload: &'a [u8],
}

impl Tcp<'_> {
    fn frame(&self) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&mac(B));
        f.extend_from_slice(&mac(A));
        if let Some(tci) = self.vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let tcp_len = 20 + self.options.len() + self.payload.len();
        if self.v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0x01, 0x23, 0x45]);
            f.extend_from_slice(&(tcp_len as u16).to_be_bytes());
            f.extend_from_slice(&[pkt::IPPROTO_TCP, 64]);
            f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[
                0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe, 2,
            ]);
        } else {
            let l3 = f.len() + 2;
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0x00]);
            f.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            f.extend_from_slice(&self.ip_id.to_be_bytes());
            f.extend_from_slice(&[0x40, 0, 64, pkt::IPPROTO_TCP, 0, 0]);
            f.extend_from_slice(&[192, 168, 7, 1, 192, 168, 9, 254]);
            pkt::fill_ipv4_csum(&mut f, l3);
        }
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&443u16.to_be_bytes());
        f.extend_from_slice(&self.seq.to_be_bytes());
        f.extend_from_slice(&0xdead_beefu32.to_be_bytes());
        let doff = ((20 + self.options.len()) / 4) as u8;
        f.extend_from_slice(&[doff << 4, self.flags, 0x7f, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(self.options);
        f.extend_from_slice(self.payload);
        let l = pkt::parse(&f).unwrap();
        pkt::fill_l4_csum_full(&mut f, &l);
        f
    }
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The segments a correct TSO makes of `orig` at `mss`.
fn expected(orig: &Tcp, mss: usize) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = orig.payload.chunks(mss).collect();
    let n = chunks.len();
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut flags = orig.flags;
            if i + 1 != n {
                flags &= !(FIN | PSH);
            }
            if i != 0 {
                flags &= !CWR;
            }
            Tcp {
                ip_id: orig.ip_id.wrapping_add(i as u16),
                seq: orig.seq.wrapping_add((i * mss) as u32),
                flags,
                payload: c,
                ..*orig
            }
            .frame()
        })
        .collect()
}

fn assert_ok(c: &Cqe, sq_id: u32, off: u32) {
    assert_eq!(
        (c.cqe_type, c.vendor_err, c.wq_num, c.is_sq),
        (wire::CQE_TX_OKAY, 0, sq_id, true),
        "{c:?}"
    );
    assert_eq!(c.tx_wqe_offset(), off);
}

/// Splits `payload` into SGE-sized pieces at the given cut points.
fn cut<'a>(payload: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut v = Vec::new();
    let mut prev = 0;
    for &c in cuts.iter().chain(std::iter::once(&payload.len())) {
        v.push(&payload[prev..c]);
        prev = c;
    }
    v
}

#[test]
fn lso_golden_bytes() {
    // Computed independently (Python): 10 payload bytes at MSS 4.
    let want = [
        "000d3a00000b000d3a00000a08004500002c12344000400614960a0000010a0000029c400050010203040a0b0c0d5090ffffa15a0000a0a1a2a3",
        "000d3a00000b000d3a00000a08004500002c12354000400614950a0000010a0000029c400050010203080a0b0c0d5010ffff99ce0000a4a5a6a7",
        "000d3a00000b000d3a00000a08004500002a12364000400614960a0000010a0000029c4000500102030c0a0b0c0d5019ffff3c670000a8a9",
    ];
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    // The headers exactly as the Linux driver leaves them: total length 0,
    // IP checksum 0, TCP checksum = pseudo-header sum 0x1409, flags
    // CWR|ACK|PSH|FIN.
    let hdr = hex("000d3a00000b000d3a00000a0800450000001234400040060000\
         0a0000010a0000029c400050010203040a0b0c0d5099ffff14090000");
    assert_eq!(hdr.len(), 54);
    let hl = pkt::parse_lso_headers(&hdr).unwrap();
    assert_eq!(pkt::lso_tcp_prefill(&hdr, &hl), 0x1409);
    let data: Vec<u8> = (0xa0..0xaa).collect();

    let dev = TestDevice::new("lso-golden", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let o = tx.lso_oob(&hl);
    assert_eq!((o.trans_off, o.is_outer_ipv4), (34, true));
    let off = tx.post_lso(&hdr, &[&data[..3], &data[3..]], &o, false, 4);
    tx.ring();
    assert_ok(&tx.cq.wait(1)[0], tx.sq_id, off);
    let got = dev.take_capture(A);
    assert_eq!(got, want.iter().map(|s| hex(s)).collect::<Vec<_>>());
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!((pa.tx_packets, pa.tx_bytes), (3, 58 + 58 + 56));
}

#[test]
fn lso_ipv4_segments_exact_and_counted_as_on_the_wire() {
    let dev = TestDevice::new("lso-v4", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let data = payload(3500);
    let orig = Tcp {
        v6: false,
        vlan: None,
        ip_id: 0xfffe, // wraps during the send
        seq: 0xffff_f000,
        flags: CWR | ACK | PSH | FIN,
        options: &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2], // NOP NOP timestamps
        payload: &data,
    };
    let (hdr, hl, pl) = linux_lso_split(&orig.frame());
    assert_eq!((hdr.len(), hl.l4, pl.len()), (66, 34, 3500));
    // SGE boundaries unrelated to the MSS; payload in 3 SGEs.
    let o = tx.lso_oob(&hl);
    let off = tx.post_lso(&hdr, &cut(&pl, &[1, 2222]), &o, false, 1000);
    tx.ring();
    assert_ok(&tx.cq.wait(1)[0], tx.sq_id, off);
    dev.settle();
    assert!(tx.cq.poll().is_empty(), "one CQE per WQE");
    let got = dev.take_capture(A);
    let want = expected(&orig, 1000);
    assert_eq!(got.len(), 4);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "segment {i}");
        let l = pkt::parse(g).unwrap();
        assert!(pkt::ipv4_csum_ok(g, l.l3));
        assert_eq!(pkt::l4_csum_ok(g, &l), Some(true));
    }
    // Spot checks of what `expected` encodes.
    assert_eq!(
        got.iter().map(|s| s.len()).collect::<Vec<_>>(),
        [1066, 1066, 1066, 566]
    );
    assert_eq!(
        got.iter().map(|s| s[47]).collect::<Vec<_>>(),
        [CWR | ACK, ACK, ACK, ACK | PSH | FIN]
    );
    assert_eq!(
        got.iter()
            .map(|s| u16::from_be_bytes([s[18], s[19]]))
            .collect::<Vec<_>>(),
        [0xfffe, 0xffff, 0, 1]
    );
    let bytes: u64 = got.iter().map(|s| s.len() as u64).sum();
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    assert_eq!((pa.tx_packets, pa.tx_bytes), (4, bytes));
    assert!(pa.drops.is_empty(), "{:?}", pa.drops);
    let q = queue(&k, "sq", tx.sq_id);
    assert_eq!(
        (q.counters.packets, q.counters.bytes, q.counters.wqes),
        (4, bytes, 1)
    );
}

#[test]
fn lso_ipv6_with_vlan_insert_and_many_sges() {
    let dev = TestDevice::new("lso-v6", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 256).unwrap();
    dev.capture(A);
    let data = payload(9000);
    let orig = Tcp {
        v6: true,
        vlan: None,
        ip_id: 0,
        seq: 7,
        flags: ACK | PSH,
        options: &[],
        payload: &data,
    };
    let (hdr, hl, pl) = linux_lso_split(&orig.frame());
    assert_eq!((hdr.len(), hl.l4, hl.ipv4), (74, 54, false));
    // 28 payload SGEs (29 in all, near the 30-SGE limit).
    let cuts: Vec<usize> = (1..28).map(|i| i * 321).collect();
    let sg = cut(&pl, &cuts);
    assert_eq!(sg.len(), 28);
    let mut o = tx.lso_oob(&hl);
    assert!(o.is_outer_ipv6 && !o.is_outer_ipv4);
    o.pkt_fmt = 1;
    o.inject_vlan = true;
    o.pcp = 3;
    o.vlan_id = 0x123;
    let off = tx.post_lso(&hdr, &sg, &o, true, 1420);
    tx.ring();
    assert_ok(&tx.cq.wait(1)[0], tx.sq_id, off);
    let got = dev.take_capture(A);
    let want: Vec<Vec<u8>> = expected(&orig, 1420)
        .into_iter()
        .map(|f| pkt::vlan_insert(&f, 3, false, 0x123))
        .collect();
    assert_eq!(got.len(), 7); // 6 * 1420 + 480
    assert_eq!(got, want);
    assert_eq!(got[0].len(), 14 + 4 + 40 + 20 + 1420);
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    let bytes: u64 = got.iter().map(|s| s.len() as u64).sum();
    assert_eq!((pa.tx_packets, pa.tx_bytes), (7, bytes));
}

#[test]
fn lso_in_frame_vlan_tag_and_single_segment() {
    let dev = TestDevice::new("lso-one", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    // Payload not above the MSS: one segment, lengths and checksums filled.
    let data = payload(700);
    let orig = Tcp {
        v6: false,
        vlan: Some(0x2064),
        ip_id: 9,
        seq: 1,
        flags: ACK | FIN | CWR,
        options: &[],
        payload: &data,
    };
    let (hdr, hl, pl) = linux_lso_split(&orig.frame());
    assert_eq!((hl.l3, hl.l4, hl.vlan), (18, 38, true));
    let o = tx.lso_oob(&hl);
    let off = tx.post_lso(&hdr, &[&pl], &o, false, 1448);
    tx.ring();
    assert_ok(&tx.cq.wait(1)[0], tx.sq_id, off);
    assert_eq!(dev.take_capture(A), vec![orig.frame()]);
    // A 1500-byte MTU allows 1500 + 14 + 4 bytes for an in-frame tag.
    let data = payload(3000);
    let orig = Tcp {
        payload: &data,
        ..orig
    };
    let (hdr, hl, pl) = linux_lso_split(&orig.frame());
    let o = tx.lso_oob(&hl);
    tx.post_lso(&hdr, &[&pl], &o, false, 1460);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    let got = dev.take_capture(A);
    assert_eq!(got, expected(&orig, 1460));
    assert_eq!(got[0].len(), 1518);
}

#[test]
fn lso_rejections_get_error_cqes_and_are_counted() {
    let dev = TestDevice::new("lso-bad", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 256).unwrap();
    dev.capture(A);
    let data = payload(4000);
    let orig = Tcp {
        v6: false,
        vlan: None,
        ip_id: 1,
        seq: 1,
        flags: ACK,
        options: &[],
        payload: &data,
    };
    let (hdr, hl, pl) = linux_lso_split(&orig.frame());
    let good = tx.lso_oob(&hl);
    let sge = |b: &[u8]| gdma::Sge::new(ctx.alloc_pkt(b), ctx.lkey, b.len() as u32);
    let lso_hdr =
        |n: usize, mss: u32, lv: u32| gdma::WqeHeader::try_new_lso(n, 8, mss, lv).unwrap();

    let mut cases: Vec<(u32, u32, u32, &str)> = Vec::new(); // (offset, cqe type, vendor_err, drop reason)
    let inval = wire::CQE_TX_INVALID_OOB;
    let hdrerr = wire::CQE_TX_HDR_PROCESSING_ERROR;

    // client_oob_in_sgl without an MSS.
    let o = good.encode(false);
    let off = tx.post_with_header(
        lso_hdr(2, 1448, 54).with_client_data_unit(0),
        &o,
        &[sge(&hdr), sge(&pl)],
    );
    cases.push((off, inval, ve::LSO_NO_MSS, "lso"));
    // An MSS without client_oob_in_sgl (the old, wrong encoding): the
    // whole frame in one SGE.
    let off = tx.post_with_header(
        gdma::WqeHeader::try_new(1, 8, 1448).unwrap(),
        &o,
        &[sge(&orig.frame())],
    );
    cases.push((off, inval, ve::MSS_WITHOUT_LSO, "lso"));
    // last_vbytes not the size of SGE 0.
    let off = tx.post_with_header(lso_hdr(2, 1448, 53), &o, &[sge(&hdr), sge(&pl)]);
    cases.push((off, inval, ve::LSO_BAD_SGL, "lso"));
    // One SGE only (headers and payload together).
    let whole = [hdr.clone(), pl.clone()].concat();
    let off = tx.post_with_header(lso_hdr(2, 1448, 54).with_num_sge(1), &o, &[sge(&whole)]);
    cases.push((off, inval, ve::LSO_BAD_SGL, "lso"));
    // No payload.
    let off = tx.post_lso(&hdr, &[&[]], &good, false, 1448);
    cases.push((off, inval, ve::LSO_BAD_SGL, "lso"));
    // SGE 0 holds more than the headers.
    let off = tx.post_lso(&whole[..64], &[&pl[10..]], &good, false, 1448);
    cases.push((off, hdrerr, ve::LSO_BAD_HEADER, "lso"));
    // SGE 0 holds less than the headers.
    let off = tx.post_lso(&hdr[..50], &[&whole[50..]], &good, false, 1448);
    cases.push((off, hdrerr, ve::LSO_BAD_HEADER, "lso"));
    // Not TCP: UDP over IPv4, and a non-IP frame.
    let mut udp = hdr[..42].to_vec();
    udp[23] = pkt::IPPROTO_UDP;
    let off = tx.post_lso(&udp, &[&pl], &good, false, 1448);
    cases.push((off, hdrerr, ve::LSO_NOT_TCP, "lso"));
    let mut arp = hdr.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let off = tx.post_lso(&arp, &[&pl], &good, false, 1448);
    cases.push((off, hdrerr, ve::LSO_NOT_TCP, "lso"));
    // An IPv4 fragment.
    let mut frag = hdr.clone();
    frag[20] |= 0x20; // MF
    let off = tx.post_lso(&frag, &[&pl], &good, false, 1448);
    cases.push((off, hdrerr, ve::LSO_NOT_TCP, "lso"));
    // OOBs that do not ask for what segmentation needs.
    for bad in [
        wire::TxOob {
            comp_tcp_csum: false,
            ..good
        },
        wire::TxOob {
            comp_iphdr_csum: false,
            ..good
        },
        wire::TxOob {
            comp_udp_csum: true,
            ..good
        },
        wire::TxOob {
            is_outer_ipv4: false,
            is_outer_ipv6: true,
            ..good
        },
        wire::TxOob {
            trans_off: 0,
            ..good
        },
        wire::TxOob {
            trans_off: 54,
            ..good
        },
    ] {
        let off = tx.post_lso(&hdr, &[&pl], &bad, false, 1448);
        cases.push((off, inval, ve::LSO_BAD_OOB, "lso"));
    }
    // Segments above the port MTU (1500): 54 + 1461 > 1514.
    let off = tx.post_lso(&hdr, &[&pl], &good, false, 1461);
    cases.push((off, wire::CQE_TX_MTU_DROP, ve::MTU, "mtu"));
    // Suppressed CQE requested: errors still complete.
    let sup = wire::TxOob {
        suppress_txcqe: true,
        comp_tcp_csum: false,
        ..good
    };
    let off = tx.post_lso(&hdr, &[&pl], &sup, false, 1448);
    cases.push((off, inval, ve::LSO_BAD_OOB, "lso"));
    // And a good one after all that: exactly at the MTU.
    let ok_off = tx.post_lso(&hdr, &[&pl[..2000], &pl[2000..]], &good, false, 1460);
    tx.ring();

    let c = tx.cq.wait(cases.len() + 1);
    for (i, (off, ty, code, _)) in cases.iter().enumerate() {
        assert_eq!(
            (c[i].cqe_type, c[i].vendor_err, c[i].tx_wqe_offset()),
            (*ty, *code, *off),
            "case {i}"
        );
    }
    assert_ok(&c[cases.len()], tx.sq_id, ok_off);
    let got = dev.take_capture(A);
    assert_eq!(
        got,
        expected(&orig, 1460),
        "only the good send reached the wire"
    );
    assert_eq!(got[0].len(), 1514);
    let k = dev.counters();
    let pa = k.port(A).unwrap();
    let n_lso = cases.iter().filter(|c| c.3 == "lso").count() as u64;
    assert_eq!(
        (pa.drops("lso"), pa.drops("mtu"), pa.tx_packets),
        (n_lso, 1, 3)
    );
    let q = queue(&k, "sq", tx.sq_id);
    assert_eq!(
        (q.counters.errors, q.counters.wqes),
        (cases.len() as u64, cases.len() as u64 + 1)
    );
}

#[test]
fn lso_wrong_prefill_gives_a_wrong_checksum_on_the_wire() {
    // The device completes the TCP checksum from the driver's prefill (as
    // MANA's partial-checksum offload does): prefilling the full
    // pseudo-header (with a length, as for plain checksum offload) or the
    // final checksum is a driver bug that shows on the wire.
    let dev = TestDevice::new("lso-prefill", two_sinks());
    let ctx = dev.open();
    let mut tx = ctx.tx_queue(1, 64).unwrap();
    dev.capture(A);
    let data = payload(2000);
    let orig = Tcp {
        v6: false,
        vlan: None,
        ip_id: 1,
        seq: 1,
        flags: ACK,
        options: &[],
        payload: &data,
    };
    let (mut hdr, hl, pl) = linux_lso_split(&orig.frame());
    hdr[50..52].fill(0);
    let o = tx.lso_oob(&hl);
    tx.post_lso(&hdr, &[&pl], &o, false, 1000);
    tx.ring();
    assert_eq!(tx.cq.wait(1)[0].cqe_type, wire::CQE_TX_OKAY);
    for s in dev.take_capture(A) {
        let l = pkt::parse(&s).unwrap();
        assert!(pkt::ipv4_csum_ok(&s, l.l3));
        assert_eq!(pkt::l4_csum_ok(&s, &l), Some(false));
    }
}

/// The Rust PMD's TSO (testpmd `csum` engine, `tso set`) against this
/// device: frames of 3 x MSS + 500 bytes of payload received on port 0 leave
/// port 1 as segments identical to those built here from scratch.
#[test]
fn testpmd_tso_through_the_rust_pmd() {
    use mana_emu::harness::{target_profile_dir, testpmd_available, EmuEnv, Testpmd};
    use std::time::Duration;
    let pmd = target_profile_dir().join("deps/librte_net_mana.so");
    if !testpmd_available() || !pmd.exists() {
        eprintln!("dpdk-testpmd or {} missing: skipping", pmd.display());
        return;
    }
    let mut c = two_sinks();
    c.adapters[0].ports[0].mtu = 9000;
    let dir = std::env::temp_dir().join(format!("mana-emu-lso-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("tx.pcap");
    c.adapters[0].ports[1].backend = BackendConfig::Pcap {
        rx: None,
        tx: Some(pcap.clone()),
    };
    let env = EmuEnv::new("lso-testpmd", c).unwrap();
    let mut t = Testpmd::builder(&env)
        .driver(pmd)
        .args(&[
            "--forward-mode=csum",
            "--mbuf-size=10240",
            "--max-pkt-len=9018",
        ])
        .timeout(Duration::from_secs(120))
        .spawn()
        .expect("testpmd starts");
    for cmd in [
        "port stop all",
        "csum set ip hw 1",
        "csum set tcp hw 1",
        "tso set 1400 1",
        "port start all",
        "start",
    ] {
        let o = t.cmd(cmd).unwrap();
        if o.contains("TSO is not supported") {
            eprintln!("librte_net_mana.so has no TSO (stale build?): skipping");
            return;
        }
        assert!(!o.contains("Fail") && !o.contains("rror"), "{cmd}: {o}");
    }
    let data = payload(3 * 1400 + 500);
    let mut origs = Vec::new();
    for (i, v6) in [false, true].into_iter().enumerate() {
        origs.push(Tcp {
            v6,
            vlan: None,
            ip_id: 100,
            seq: 5000 * i as u32,
            flags: ACK | PSH,
            options: &[],
            payload: &data,
        });
    }
    let frames: Vec<Vec<u8>> = origs.iter().map(|o| o.frame()).collect();
    t.inject(A, &frames).unwrap();
    let k = t
        .wait_device(Duration::from_secs(10), |k| {
            k.port(B).unwrap().tx_packets >= 8 || !k.port(B).unwrap().drops.is_empty()
        })
        .unwrap();
    t.cmd("stop").unwrap();
    let out = t.quit().unwrap();
    let pb = k.port(B).unwrap();
    assert!(pb.drops.is_empty(), "{:?}\n{out}", pb.drops);
    let got = mana_emu::backend::read_pcap(&pcap).unwrap();
    let want: Vec<Vec<u8>> = origs.iter().flat_map(|o| expected(o, 1400)).collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // The csum engine rewrites the MACs (source: port 1's).
        assert_eq!(&g[6..12], &mac(B), "segment {i}");
        assert!(g[12..] == w[12..], "segment {i} differs");
    }
    assert_eq!(
        (pb.tx_packets, pb.tx_bytes),
        (8, want.iter().map(|w| w.len() as u64).sum())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

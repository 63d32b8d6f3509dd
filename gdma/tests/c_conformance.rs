//! Conformance against the C layouts of DPDK 22.11.11's `drivers/net/mana/mana.h`.
//!
//! The test writes a C program (our own) that includes `mana.h`, assigns
//! deterministic pseudo-random values to the bitfields of each hardware
//! struct, and prints the resulting bytes; the same values are encoded with
//! this crate and the bytes compared. It also compares the constants.
//! Doorbells are not in `mana.h` (they live in `gdma.c`), so the program
//! restates them as its own unions from the bit positions of the reference.
//!
//! Skipped, with a notice, if the DPDK source, `cc` or `pkg-config libdpdk`
//! is unavailable.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use gdma::le::{U16, U32};
use gdma::*;
use zerocopy::IntoBytes;

const MANA_DIR: &str = "/var/cache/net-mana/dpdk-stable-22.11.11/drivers/net/mana";
const CASES: usize = 48;

type Build = fn(&[u64]) -> Vec<u8>;

struct Spec {
    tag: &'static str,
    c_type: &'static str,
    fields: Vec<(String, u32)>,
    build: Build,
}

fn f(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|(n, w)| (n.to_string(), *w)).collect()
}

fn bytes<T: IntoBytes + zerocopy::Immutable>(v: &T) -> Vec<u8> {
    v.as_bytes().to_vec()
}

fn specs() -> Vec<Spec> {
    let short_fields = [
        ("packet_format", 1),
        ("tx_is_outer_ipv4", 1),
        ("tx_is_outer_ipv6", 1),
        ("tx_compute_IP_header_checksum", 1),
        ("tx_compute_TCP_checksum", 1),
        ("tx_compute_UDP_checksum", 1),
        ("suppress_tx_CQE_generation", 1),
        ("VCQ_number", 24),
        ("tx_transport_header_offset", 10),
        ("VSQ_frame_num", 14),
        ("short_vport_offset", 8),
    ];
    let long_fields = [
        ("tx_is_encapsulated_packet", 1),
        ("tx_inner_is_ipv6", 1),
        ("tx_inner_TCP_options_present", 1),
        ("inject_vlan_prior_tag", 1),
        ("reserved1", 12),
        ("priority_code_point", 3),
        ("drop_eligible_indicator", 1),
        ("vlan_identifier", 12),
        ("tx_inner_frame_offset", 10),
        ("tx_inner_IP_header_relative_offset", 6),
        ("long_vport_offset", 12),
        ("reserved3", 4),
        ("reserved4", 32),
        ("reserved5", 32),
    ];
    fn short(v: &[u64]) -> TxShortOob {
        TxShortOob::new()
            .with_pkt_fmt(v[0] as u8)
            .with_is_outer_ipv4(v[1] != 0)
            .with_is_outer_ipv6(v[2] != 0)
            .with_comp_iphdr_csum(v[3] != 0)
            .with_comp_tcp_csum(v[4] != 0)
            .with_comp_udp_csum(v[5] != 0)
            .with_suppress_txcqe_gen(v[6] != 0)
            .with_vcq_num(v[7] as u32)
            .with_trans_off(v[8] as u16)
            .with_vsq_frame(v[9] as u16)
            .with_short_vp_offset(v[10] as u8)
    }
    fn long(v: &[u64]) -> TxLongOob {
        TxLongOob::new()
            .with_is_encap(v[0] != 0)
            .with_inner_is_ipv6(v[1] != 0)
            .with_inner_tcp_opt(v[2] != 0)
            .with_inject_vlan_pri_tag(v[3] != 0)
            .with_reserved1(v[4] as u16)
            .with_pcp(v[5] as u8)
            .with_dei(v[6] != 0)
            .with_vlan_id(v[7] as u16)
            .with_inner_frame_offset(v[8] as u16)
            .with_inner_ip_rel_offset(v[9] as u8)
            .with_long_vp_offset(v[10] as u16)
            .with_reserved2(v[11] as u8)
            .with_reserved3(v[12] as u32)
            .with_reserved4(v[13] as u32)
    }
    fn hdr(v: &[u64]) -> CqeHeader {
        CqeHeader::new()
            .with_cqe_type_raw(v[0] as u8)
            .with_client_type(v[1] as u8)
            .with_vendor_err(v[2] as u32)
    }
    let hdr_fields = |prefix: &str| {
        f(&[("cqe_type", 6), ("client_type", 2), ("vendor_err", 24)])
            .into_iter()
            .map(|(n, w)| (format!("{prefix}{n}"), w))
            .collect::<Vec<_>>()
    };

    let mut v = Vec::new();
    v.push(Spec {
        tag: "tx_short",
        c_type: "struct transmit_short_oob_v2",
        fields: f(&short_fields),
        build: |v| bytes(&short(v)),
    });
    v.push(Spec {
        tag: "tx_long",
        c_type: "struct transmit_long_oob_v2",
        fields: f(&long_fields),
        build: |v| bytes(&long(v)),
    });
    let mut oob_fields: Vec<_> = short_fields
        .iter()
        .map(|(n, w)| (format!("short_oob.{n}"), *w))
        .collect();
    oob_fields.extend(
        long_fields
            .iter()
            .map(|(n, w)| (format!("long_oob.{n}"), *w)),
    );
    v.push(Spec {
        tag: "tx_oob",
        c_type: "struct transmit_oob_v2",
        fields: oob_fields,
        build: |v| {
            bytes(&TxOob {
                s_oob: short(&v[..11]),
                l_oob: long(&v[11..]),
            })
        },
    });
    v.push(Spec {
        tag: "wqe_hdr",
        c_type: "struct gdma_wqe_dma_oob",
        fields: f(&[
            ("reserved", 24),
            ("last_v_bytes", 8),
            ("num_sgl_entries", 8),
            ("inline_client_oob_size_in_dwords", 3),
            ("client_oob_in_sgl", 1),
            ("consume_credit", 1),
            ("fence", 1),
            ("reserved1", 2),
            ("client_data_unit", 14),
            ("check_sn", 1),
            ("sgl_direct", 1),
        ]),
        // DPDK splits the kernel's reserved1:4 and reserved2:2 into named bits.
        build: |v| {
            bytes(
                &WqeHeader::new()
                    .with_reserved(v[0] as u32)
                    .with_last_vbytes(v[1] as u8)
                    .with_num_sge(v[2] as u8)
                    .with_inline_oob_size_div4(v[3] as u8)
                    .with_client_oob_in_sgl(v[4] != 0)
                    .with_reserved1((v[5] | v[6] << 1 | v[7] << 2) as u8)
                    .with_client_data_unit(v[8] as u16)
                    .with_reserved2((v[9] | v[10] << 1) as u8),
            )
        },
    });
    v.push(Spec {
        tag: "sge",
        c_type: "struct gdma_sgl_element",
        fields: f(&[("address", 64), ("memory_key", 32), ("size", 32)]),
        build: |v| bytes(&Sge::new(v[0], v[1] as u32, v[2] as u32)),
    });
    let mut cqe_fields: Vec<_> = (0..60)
        .map(|i| (format!("dma_client_data[{i}]"), 8))
        .collect();
    cqe_fields.extend(f(&[
        ("wq_num", 24),
        ("is_sq", 1),
        ("reserved", 4),
        ("owner_bits", 3),
    ]));
    v.push(Spec {
        tag: "cqe",
        c_type: "struct gdma_hardware_completion_entry",
        fields: cqe_fields,
        build: |v| {
            let data: [u8; 60] = core::array::from_fn(|i| v[i] as u8);
            let info = CqeInfo::new()
                .with_wq_num(v[60] as u32)
                .with_is_sq(v[61] != 0)
                .with_reserved(v[62] as u8)
                .with_owner_bits(v[63] as u8);
            bytes(&Cqe::from_parts(&data, info))
        },
    });
    v.push(Spec {
        tag: "cqe_hdr",
        c_type: "struct mana_cqe_header",
        fields: hdr_fields(""),
        build: |v| bytes(&hdr(v)),
    });
    let mut txc = hdr_fields("cqe_hdr.");
    txc.extend(f(&[
        ("tx_data_offset", 32),
        ("tx_sgl_offset", 5),
        ("tx_wqe_offset", 27),
    ]));
    txc.extend((0..12).map(|i| (format!("reserved[{i}]"), 32)));
    v.push(Spec {
        tag: "tx_comp",
        c_type: "struct mana_tx_comp_oob",
        fields: txc,
        build: |v| {
            let o = TxCompOob {
                cqe_hdr: hdr(v),
                tx_data_offset: U32::new(v[3] as u32),
                offsets: TxCompOffsets::new()
                    .with_tx_sgl_offset(v[4] as u8)
                    .with_tx_wqe_offset(v[5] as u32),
                reserved: core::array::from_fn(|i| U32::new(v[6 + i] as u32)),
            };
            bytes(&o)
        },
    });
    let ppi_fields = |p: &str| {
        f(&[
            ("packet_length", 16),
            ("reserved0", 16),
            ("reserved1", 32),
            ("packet_hash", 32),
        ])
        .into_iter()
        .map(|(n, w)| (format!("{p}{n}"), w))
        .collect::<Vec<_>>()
    };
    fn ppi(v: &[u64]) -> RxPacketInfo {
        RxPacketInfo {
            pkt_len: U16::new(v[0] as u16),
            reserved1: U16::new(v[1] as u16),
            reserved2: U32::new(v[2] as u32),
            pkt_hash: U32::new(v[3] as u32),
        }
    }
    v.push(Spec {
        tag: "rx_ppi",
        c_type: "struct mana_rx_comp_per_packet_info",
        fields: ppi_fields(""),
        build: |v| bytes(&ppi(v)),
    });
    let mut rxc = hdr_fields("cqe_hdr.");
    rxc.extend(f(&[
        ("rx_vlan_id", 12),
        ("rx_vlan_tag_present", 1),
        ("rx_outer_ip_header_checksum_succeeded", 1),
        ("rx_outer_ip_header_checksum_failed", 1),
        ("reserved", 1),
        ("rx_hash_type", 9),
        ("rx_ip_header_checksum_succeeded", 1),
        ("rx_ip_header_checksum_failed", 1),
        ("rx_tcp_checksum_succeeded", 1),
        ("rx_tcp_checksum_failed", 1),
        ("rx_udp_checksum_succeeded", 1),
        ("rx_udp_checksum_failed", 1),
        ("reserved1", 1),
    ]));
    for i in 0..4 {
        rxc.extend(ppi_fields(&format!("packet_info[{i}].")));
    }
    rxc.push(("received_wqe_offset".into(), 32));
    v.push(Spec {
        tag: "rx_comp",
        c_type: "struct mana_rx_comp_oob",
        fields: rxc,
        build: |v| {
            let flags = RxCompFlags::new()
                .with_rx_vlan_id(v[3] as u16)
                .with_rx_vlantag_present(v[4] != 0)
                .with_rx_outer_iphdr_csum_succeed(v[5] != 0)
                .with_rx_outer_iphdr_csum_fail(v[6] != 0)
                .with_reserved1(v[7] != 0)
                .with_rx_hashtype(v[8] as u16)
                .with_rx_iphdr_csum_succeed(v[9] != 0)
                .with_rx_iphdr_csum_fail(v[10] != 0)
                .with_rx_tcp_csum_succeed(v[11] != 0)
                .with_rx_tcp_csum_fail(v[12] != 0)
                .with_rx_udp_csum_succeed(v[13] != 0)
                .with_rx_udp_csum_fail(v[14] != 0)
                .with_reserved2(v[15] != 0);
            let o = RxCompOob {
                cqe_hdr: hdr(v),
                flags,
                ppi: core::array::from_fn(|i| ppi(&v[16 + 4 * i..])),
                rx_wqe_offset: U32::new(v[32] as u32),
            };
            bytes(&o)
        },
    });
    // Doorbells: our own C restatement (see module doc).
    v.push(Spec {
        tag: "db_sq",
        c_type: "union test_db",
        fields: f(&[("sq.id", 24), ("sq.reserved", 8), ("sq.tail_ptr", 32)]),
        build: |v| {
            bytes(
                &SqDoorbell::new()
                    .with_id(v[0] as u32)
                    .with_reserved(v[1] as u8)
                    .with_tail_ptr(v[2] as u32),
            )
        },
    });
    v.push(Spec {
        tag: "db_rq",
        c_type: "union test_db",
        fields: f(&[("rq.id", 24), ("rq.wqe_cnt", 8), ("rq.tail_ptr", 32)]),
        build: |v| {
            bytes(
                &RqDoorbell::new()
                    .with_id(v[0] as u32)
                    .with_wqe_cnt(v[1] as u8)
                    .with_tail_ptr(v[2] as u32),
            )
        },
    });
    v.push(Spec {
        tag: "db_cq",
        c_type: "union test_db",
        fields: f(&[
            ("cq.id", 24),
            ("cq.reserved", 8),
            ("cq.tail_ptr", 31),
            ("cq.arm", 1),
        ]),
        build: |v| {
            bytes(
                &CqDoorbell::new()
                    .with_id(v[0] as u32)
                    .with_reserved(v[1] as u8)
                    .with_tail_ptr(v[2] as u32)
                    .with_arm(v[3] != 0),
            )
        },
    });
    v.push(Spec {
        tag: "db_eq",
        c_type: "union test_db",
        fields: f(&[
            ("eq.id", 16),
            ("eq.reserved", 16),
            ("eq.tail_ptr", 31),
            ("eq.arm", 1),
        ]),
        build: |v| {
            bytes(
                &EqDoorbell::new()
                    .with_id(v[0] as u16)
                    .with_reserved(v[1] as u16)
                    .with_tail_ptr(v[2] as u32)
                    .with_arm(v[3] != 0),
            )
        },
    });
    v.push(Spec {
        tag: "sdb_wq",
        c_type: "union test_short_db",
        fields: f(&[("sq.tail_ptr_incr", 16), ("sq.id", 12), ("sq.reserved", 4)]),
        build: |v| {
            bytes(
                &ShortWqDoorbell::new()
                    .with_tail_ptr_incr(v[0] as u16)
                    .with_id(v[1] as u16)
                    .with_reserved(v[2] as u8),
            )
        },
    });
    v.push(Spec {
        tag: "sdb_cq",
        c_type: "union test_short_db",
        fields: f(&[
            ("cq.tail_ptr_incr", 16),
            ("cq.id", 12),
            ("cq.reserved", 3),
            ("cq.arm", 1),
        ]),
        build: |v| {
            bytes(
                &ShortCqDoorbell::new()
                    .with_tail_ptr_incr(v[0] as u16)
                    .with_id(v[1] as u16)
                    .with_reserved(v[2] as u8)
                    .with_arm(v[3] != 0),
            )
        },
    });
    v
}

/// (C expression, value this crate uses).
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("PCI_VENDOR_ID_MICROSOFT", PCI_VENDOR_ID_MICROSOFT as u64),
        ("PCI_DEVICE_ID_MICROSOFT_MANA", PCI_DEVICE_ID_MANA_VF as u64),
        ("GDMA_WQE_ALIGNMENT_UNIT_SIZE", WQE_BU_SIZE as u64),
        ("COMP_ENTRY_SIZE", CQE_SIZE as u64),
        ("MAX_TX_WQE_SIZE", MAX_SQE_SIZE as u64),
        ("MAX_RX_WQE_SIZE", MAX_RQE_SIZE as u64),
        (
            "INLINE_OOB_SMALL_SIZE_IN_BYTES",
            INLINE_OOB_SMALL_SIZE as u64,
        ),
        (
            "INLINE_OOB_LARGE_SIZE_IN_BYTES",
            INLINE_OOB_LARGE_SIZE as u64,
        ),
        ("MAX_SGL_ENTRIES_FOR_TRANSMIT", MAX_TX_WQE_SGES as u64),
        ("GDMA_COMP_DATA_SIZE", CQE_DATA_SIZE as u64),
        ("COMPLETION_QUEUE_OWNER_MASK", CQE_OWNER_MASK as u64),
        (
            "COMPLETION_QUEUE_ENTRY_OWNER_BITS_SIZE",
            CQE_OWNER_BITS as u64,
        ),
        ("RX_COM_OOB_NUM_PACKETINFO_SEGMENTS", RX_OOB_NUM_PPI as u64),
        (
            "WORK_QUEUE_NUMBER_BASE_BITS",
            WORK_QUEUE_NUMBER_BASE_BITS as u64,
        ),
        ("GDMA_SHORT_DB_INC_MASK", SHORT_DB_INC_MASK as u64),
        ("GDMA_SHORT_DB_QID_MASK", SHORT_DB_QID_MASK as u64),
        ("GDMA_SHORT_DB_MAX_WQE", SHORT_DB_MAX_WQE_BU as u64),
        (
            "TX_WQE_SHORT_DB_THRESHOLD",
            TX_WQE_SHORT_DB_THRESHOLD as u64,
        ),
        (
            "RX_WQE_SHORT_DB_THRESHOLD",
            RX_WQE_SHORT_DB_THRESHOLD as u64,
        ),
        ("TOEPLITZ_HASH_KEY_SIZE_IN_BYTES", TOEPLITZ_KEY_SIZE as u64),
        (
            "INDIRECTION_TABLE_NUM_ELEMENTS",
            INDIRECTION_TABLE_SIZE as u64,
        ),
        ("NDIS_HASH_IPV4", ndis_hash::IPV4 as u64),
        ("NDIS_HASH_TCP_IPV4", ndis_hash::TCP_IPV4 as u64),
        ("NDIS_HASH_UDP_IPV4", ndis_hash::UDP_IPV4 as u64),
        ("NDIS_HASH_IPV6", ndis_hash::IPV6 as u64),
        ("NDIS_HASH_TCP_IPV6", ndis_hash::TCP_IPV6 as u64),
        ("NDIS_HASH_UDP_IPV6", ndis_hash::UDP_IPV6 as u64),
        ("NDIS_HASH_IPV6_EX", ndis_hash::IPV6_EX as u64),
        ("NDIS_HASH_TCP_IPV6_EX", ndis_hash::TCP_IPV6_EX as u64),
        ("NDIS_HASH_UDP_IPV6_EX", ndis_hash::UDP_IPV6_EX as u64),
        ("MANA_HASH_L3", MANA_HASH_L3 as u64),
        ("MANA_HASH_L4", MANA_HASH_L4 as u64),
        ("SHORT_PACKET_FORMAT", PacketFormat::Short as u64),
        ("LONG_PACKET_FORMAT", PacketFormat::Long as u64),
        ("GDMA_QUEUE_SEND", QueueType::Send as u64),
        ("GDMA_QUEUE_RECEIVE", QueueType::Receive as u64),
        ("GDMA_QUEUE_COMPLETION", QueueType::Completion as u64),
        ("GDMA_QUEUE_EVENT", QueueType::Event as u64),
        ("CQE_INVALID", CqeType::Invalid as u64),
        ("CQE_RX_OKAY", CqeType::RxOkay as u64),
        ("CQE_RX_COALESCED_4", CqeType::RxCoalesced4 as u64),
        ("CQE_RX_OBJECT_FENCE", CqeType::RxObjectFence as u64),
        ("CQE_RX_TRUNCATED", CqeType::RxTruncated as u64),
        ("CQE_TX_OKAY", CqeType::TxOkay as u64),
        ("CQE_TX_SA_DROP", CqeType::TxSaDrop as u64),
        ("CQE_TX_MTU_DROP", CqeType::TxMtuDrop as u64),
        ("CQE_TX_INVALID_OOB", CqeType::TxInvalidOob as u64),
        ("CQE_TX_INVALID_ETH_TYPE", CqeType::TxInvalidEthType as u64),
        (
            "CQE_TX_HDR_PROCESSING_ERROR",
            CqeType::TxHdrProcessingError as u64,
        ),
        ("CQE_TX_VF_DISABLED", CqeType::TxVfDisabled as u64),
        (
            "CQE_TX_VPORT_IDX_OUT_OF_RANGE",
            CqeType::TxVportIdxOutOfRange as u64,
        ),
        ("CQE_TX_VPORT_DISABLED", CqeType::TxVportDisabled as u64),
        (
            "CQE_TX_VLAN_TAGGING_VIOLATION",
            CqeType::TxVlanTaggingViolation as u64,
        ),
        ("sizeof(struct transmit_short_oob_v2)", 8),
        ("sizeof(struct transmit_long_oob_v2)", 16),
        ("sizeof(struct transmit_oob_v2)", 24),
        ("sizeof(struct gdma_wqe_dma_oob)", 8),
        ("sizeof(struct gdma_sgl_element)", 16),
        ("sizeof(struct gdma_hardware_completion_entry)", 64),
        ("sizeof(struct mana_cqe_header)", 4),
        ("sizeof(struct mana_tx_comp_oob)", 60),
        ("sizeof(struct mana_rx_comp_per_packet_info)", 12),
        ("sizeof(struct mana_rx_comp_oob)", 60),
        (
            "offsetof(struct gdma_hardware_completion_entry, work_queue_owner_bits)",
            60,
        ),
        ("offsetof(struct mana_rx_comp_oob, packet_info)", 8),
        ("offsetof(struct mana_rx_comp_oob, received_wqe_offset)", 56),
        ("offsetof(struct mana_tx_comp_oob, reserved)", 12),
    ]
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn mask(w: u32) -> u64 {
    if w == 64 {
        u64::MAX
    } else {
        (1 << w) - 1
    }
}

/// Values per case: 0 = all zero, 1 = all ones, 2.. = each field alone at
/// max, then random.
fn values(fields: &[(String, u32)], case: usize, rng: &mut Rng) -> Vec<u64> {
    fields
        .iter()
        .enumerate()
        .map(|(i, (_, w))| match case {
            0 => 0,
            1 => mask(*w),
            c if c - 2 < fields.len() => {
                if c - 2 == i {
                    mask(*w)
                } else {
                    0
                }
            }
            _ => rng.next() & mask(*w),
        })
        .collect()
}

fn tool_ok(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn c_layouts_match_dpdk_mana_h() {
    if !Path::new(MANA_DIR).join("mana.h").exists() {
        println!("NOTICE: {MANA_DIR}/mana.h not found; skipping C conformance test");
        eprintln!("NOTICE: {MANA_DIR}/mana.h not found; skipping C conformance test");
        return;
    }
    if !tool_ok("cc", "--version") {
        eprintln!("NOTICE: no C compiler `cc`; skipping C conformance test");
        return;
    }
    let cflags = match Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        _ => {
            eprintln!("NOTICE: `pkg-config --cflags libdpdk` failed; skipping C conformance test");
            return;
        }
    };

    let specs = specs();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut expected: HashMap<String, Vec<u8>> = HashMap::new();
    let mut c = String::from(
        r#"#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <rte_ethdev.h>
#include <infiniband/verbs.h>
#include "mana.h"

/* Doorbells are defined in gdma.c, not mana.h: restated here. */
union test_db {
	uint64_t raw;
	struct { uint64_t id:24; uint64_t reserved:8; uint64_t tail_ptr:31; uint64_t arm:1; } cq;
	struct { uint64_t id:24; uint64_t wqe_cnt:8; uint64_t tail_ptr:32; } rq;
	struct { uint64_t id:24; uint64_t reserved:8; uint64_t tail_ptr:32; } sq;
	struct { uint64_t id:16; uint64_t reserved:16; uint64_t tail_ptr:31; uint64_t arm:1; } eq;
};
union test_short_db {
	uint32_t raw;
	struct { uint32_t tail_ptr_incr:16; uint32_t id:12; uint32_t reserved:3; uint32_t arm:1; } cq;
	struct { uint32_t tail_ptr_incr:16; uint32_t id:12; uint32_t reserved:4; } sq;
};

static void dump(const char *tag, int idx, const void *p, size_t n)
{
	const unsigned char *b = p;
	printf("%s %d ", tag, idx);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

int main(void)
{
"#,
    );
    for (name, _) in constants() {
        // The short-doorbell macros exist only under RTE_ARCH_32.
        let arch32_only = name.contains("SHORT_DB");
        if arch32_only {
            writeln!(c, "#ifdef {name}").unwrap();
        }
        writeln!(
            c,
            "\tprintf(\"const %s %llu\\n\", \"{name}\", (unsigned long long)({name}));"
        )
        .unwrap();
        if arch32_only {
            writeln!(c, "#endif").unwrap();
        }
    }
    for s in &specs {
        let cases = CASES.max(s.fields.len() + 8);
        for case in 0..cases {
            let vals = values(&s.fields, case, &mut rng);
            writeln!(c, "\t{{ {} v; memset(&v, 0, sizeof(v));", s.c_type).unwrap();
            for ((name, _), val) in s.fields.iter().zip(&vals) {
                writeln!(c, "\t  v.{name} = {val}ULL;").unwrap();
            }
            writeln!(c, "\t  dump(\"{}\", {case}, &v, sizeof(v)); }}", s.tag).unwrap();
            expected.insert(format!("{} {case}", s.tag), (s.build)(&vals));
        }
    }
    c.push_str("\treturn 0;\n}\n");

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gdma_c_conformance");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("conformance.c");
    let exe = dir.join("conformance");
    std::fs::write(&src, &c).unwrap();
    let out = Command::new("cc")
        .args(cflags.split_whitespace())
        .arg(format!("-I{MANA_DIR}"))
        .args(["-O0", "-w", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe)
        .output()
        .expect("run conformance program");
    assert!(run.status.success());
    let stdout = String::from_utf8(run.stdout).unwrap();

    let consts: HashMap<&str, u64> = constants().into_iter().collect();
    let (mut n_const, mut n_struct) = (0, 0);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("const ") {
            let (name, val) = rest.rsplit_once(' ').unwrap();
            let val: u64 = val.parse().unwrap();
            assert_eq!(consts[name], val, "constant {name}");
            n_const += 1;
            continue;
        }
        let (key, hex) = line.rsplit_once(' ').unwrap();
        let c_bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let rust = expected
            .remove(key)
            .unwrap_or_else(|| panic!("unexpected line {line}"));
        assert_eq!(rust, c_bytes, "{key}: Rust encoding differs from C");
        n_struct += 1;
    }
    let always = consts.keys().filter(|n| !n.contains("SHORT_DB")).count();
    assert!(
        n_const >= always,
        "only {n_const} of {always} constants printed"
    );
    assert!(
        expected.is_empty(),
        "missing C output for {:?}",
        expected.keys()
    );
    println!("C conformance: {n_const} constants and {n_struct} struct encodings match");
}

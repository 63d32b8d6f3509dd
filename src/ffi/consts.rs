//! DPDK 22.11 flag values defined with `RTE_BIT64()`, which bindgen cannot
//! evaluate (values from `rte_ethdev.h`).

#![forbid(unsafe_code)]

pub const RX_OFFLOAD_VLAN_STRIP: u64 = 1 << 0;
pub const RX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
pub const RX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
pub const RX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
pub const RX_OFFLOAD_SCATTER: u64 = 1 << 13;
pub const RX_OFFLOAD_RSS_HASH: u64 = 1 << 19;
pub const RX_OFFLOAD_CHECKSUM: u64 =
    RX_OFFLOAD_IPV4_CKSUM | RX_OFFLOAD_UDP_CKSUM | RX_OFFLOAD_TCP_CKSUM;

pub const TX_OFFLOAD_VLAN_INSERT: u64 = 1 << 0;
pub const TX_OFFLOAD_IPV4_CKSUM: u64 = 1 << 1;
pub const TX_OFFLOAD_UDP_CKSUM: u64 = 1 << 2;
pub const TX_OFFLOAD_TCP_CKSUM: u64 = 1 << 3;
pub const TX_OFFLOAD_TCP_TSO: u64 = 1 << 5;
pub const TX_OFFLOAD_MULTI_SEGS: u64 = 1 << 15;
pub const TX_OFFLOAD_MBUF_FAST_FREE: u64 = 1 << 16;

pub const RSS_IPV4: u64 = 1 << 2;
pub const RSS_FRAG_IPV4: u64 = 1 << 3;
pub const RSS_NONFRAG_IPV4_TCP: u64 = 1 << 4;
pub const RSS_NONFRAG_IPV4_UDP: u64 = 1 << 5;
pub const RSS_NONFRAG_IPV4_OTHER: u64 = 1 << 7;
pub const RSS_IPV6: u64 = 1 << 8;
pub const RSS_FRAG_IPV6: u64 = 1 << 9;
pub const RSS_NONFRAG_IPV6_TCP: u64 = 1 << 10;
pub const RSS_NONFRAG_IPV6_UDP: u64 = 1 << 11;
pub const RSS_NONFRAG_IPV6_OTHER: u64 = 1 << 13;
pub const RSS_IPV6_EX: u64 = 1 << 15;
pub const RSS_IPV6_TCP_EX: u64 = 1 << 16;
pub const RSS_IPV6_UDP_EX: u64 = 1 << 17;

pub const LINK_SPEED_100G: u32 = 1 << 14;
pub const SPEED_NUM_100G: u32 = 100_000;
pub const MQ_RX_RSS_FLAG: u32 = 1 << 0;

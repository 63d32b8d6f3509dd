//! Receive-side scaling: the port's RSS configuration (key, hashed fields,
//! 64-entry indirection table, default RQ), the Toeplitz hash over the
//! configured fields and the RQ a frame goes to.

#![forbid(unsafe_code)]

use super::State;
use crate::pkt;
use crate::wire;

pub(super) struct Rss {
    pub(super) qp: u32,
    pub(super) enabled: bool,
    pub(super) key: [u8; 40],
    pub(super) fields: u64,
    /// RQ handles; the hash indexes it modulo its length (a power of two).
    pub(super) table: Vec<u32>,
    pub(super) default_rq: u32,
}

impl State {
    pub(super) fn select_rq(&self, port: usize, frame: &[u8]) -> Option<(u32, u32, u32)> {
        let rss = self.ports[port].rss.as_ref()?;
        // A one-entry indirection table configures the vPort without RSS
        // (`rss_enable = log_ind_tbl_size != 0`, kernel
        // mana_ib_cfg_vport_steering): everything goes to the default RQ
        // and no hash is reported. (Whether the NIC still computes one then
        // is not documented; reporting none is the conservative choice.)
        if !rss.enabled {
            return Some((rss.default_rq, 0, 0));
        }
        let (hash, htype) = rss_hash(rss, frame);
        let rq = if htype != 0 {
            rss.table[hash as usize & (rss.table.len() - 1)]
        } else {
            rss.default_rq
        };
        Some((rq, hash, htype))
    }
}

/// RSS: Toeplitz over the configured fields. Returns (hash, NDIS hash type).
fn rss_hash(rss: &Rss, f: &[u8]) -> (u32, u32) {
    use crate::ffi::*;
    let Some(l) = pkt::parse(f) else {
        return (0, 0);
    };
    let fl = rss.fields;
    let mut input = Vec::with_capacity(36);
    let ip = l.l3;
    let (src_ip, dst_ip, htype_l3, tcp_t, udp_t) = if l.ipv4 {
        (
            (fl & u64::from(IBV_RX_HASH_SRC_IPV4) != 0).then(|| &f[ip + 12..ip + 16]),
            (fl & u64::from(IBV_RX_HASH_DST_IPV4) != 0).then(|| &f[ip + 16..ip + 20]),
            wire::NDIS_HASH_IPV4,
            wire::NDIS_HASH_TCP_IPV4,
            wire::NDIS_HASH_UDP_IPV4,
        )
    } else if l.ipv6 {
        (
            (fl & u64::from(IBV_RX_HASH_SRC_IPV6) != 0).then(|| &f[ip + 8..ip + 24]),
            (fl & u64::from(IBV_RX_HASH_DST_IPV6) != 0).then(|| &f[ip + 24..ip + 40]),
            wire::NDIS_HASH_IPV6,
            wire::NDIS_HASH_TCP_IPV6,
            wire::NDIS_HASH_UDP_IPV6,
        )
    } else {
        return (0, 0);
    };
    if src_ip.is_none() && dst_ip.is_none() {
        return (0, 0);
    }
    if let Some(s) = src_ip {
        input.extend_from_slice(s);
    }
    if let Some(d) = dst_ip {
        input.extend_from_slice(d);
    }
    let mut htype = htype_l3;
    if let Some(l4) = l.l4 {
        let (sp, dp, t) = match l.proto {
            pkt::IPPROTO_TCP => (IBV_RX_HASH_SRC_PORT_TCP, IBV_RX_HASH_DST_PORT_TCP, tcp_t),
            pkt::IPPROTO_UDP => (IBV_RX_HASH_SRC_PORT_UDP, IBV_RX_HASH_DST_PORT_UDP, udp_t),
            _ => (0, 0, 0),
        };
        let use_sp = sp != 0 && fl & u64::from(sp) != 0;
        let use_dp = dp != 0 && fl & u64::from(dp) != 0;
        if (use_sp || use_dp) && l.l4_len >= 4 {
            if use_sp {
                input.extend_from_slice(&f[l4..l4 + 2]);
            }
            if use_dp {
                input.extend_from_slice(&f[l4 + 2..l4 + 4]);
            }
            htype = t;
        }
    }
    (pkt::toeplitz(&rss.key, &input), htype)
}

//! RSS configuration: the Toeplitz key, the hash types, and the 64-entry
//! redirection table, kept across stop/start and device resets.

use crate::control::error::{self, Error};
use crate::ffi;
use crate::ffi::consts::*;

pub const RETA_SIZE: usize = 64;

/// RSS types on IPv4 addresses: the device hashes the addresses of every
/// IPv4 packet, fragments included.
const V4: u64 = RSS_IPV4 | RSS_FRAG_IPV4 | RSS_NONFRAG_IPV4_OTHER;
/// The same for IPv6. The `_EX` types are accepted as what the device does
/// with them: it hashes the header's addresses (NDIS's IPv6-ex hashing is
/// not configurable through verbs).
const V6: u64 = RSS_IPV6 | RSS_FRAG_IPV6 | RSS_NONFRAG_IPV6_OTHER | RSS_IPV6_EX;
/// RSS types that add the TCP or UDP ports.
const TCP: u64 = RSS_NONFRAG_IPV4_TCP | RSS_NONFRAG_IPV6_TCP | RSS_IPV6_TCP_EX;
const UDP: u64 = RSS_NONFRAG_IPV4_UDP | RSS_NONFRAG_IPV6_UDP | RSS_IPV6_UDP_EX;

/// RSS types the device hashes: every group an application is likely to
/// ask for (`RTE_ETH_RSS_IP`, `_TCP`, `_UDP`) is inside.
pub const RSS_OFFLOADS: u64 = V4 | V6 | TCP | UDP;

/// The RSS configuration a port keeps across stop/start and resets.
#[derive(Clone)]
pub struct Rss {
    pub key: [u8; 40],
    pub hf: u64,
    /// The queue each of the 64 hardware entries sends to.
    pub reta: [u16; RETA_SIZE],
}

impl Rss {
    pub fn new() -> Rss {
        Rss {
            key: gdma::DPDK_MANA_DEFAULT_RSS_KEY,
            hf: RSS_IPV4
                | RSS_NONFRAG_IPV4_TCP
                | RSS_NONFRAG_IPV4_UDP
                | RSS_IPV6
                | RSS_NONFRAG_IPV6_TCP
                | RSS_NONFRAG_IPV6_UDP,
            reta: [0; RETA_SIZE],
        }
    }

    /// Takes the application's key, if it gave one; it must be 40 bytes.
    pub fn take_key(&mut self, conf: &ffi::rte_eth_rss_conf) -> error::Result<()> {
        if conf.rss_key.is_null() {
            return Ok(());
        }
        if conf.rss_key_len != 40 {
            return Err(Error::invalid(format!(
                "RSS key length {} is not 40 bytes",
                conf.rss_key_len
            )));
        }
        // SAFETY: a non-null key the application says is 40 bytes long.
        let key = unsafe { std::slice::from_raw_parts(conf.rss_key, 40) };
        self.key.copy_from_slice(key);
        Ok(())
    }

    /// `dev_configure`'s RSS settings: the key, and the hash types unless
    /// none were asked for (then the current ones stay).
    pub fn take_conf(&mut self, conf: &ffi::rte_eth_rss_conf) -> error::Result<()> {
        self.take_key(conf)?;
        if conf.rss_hf != 0 {
            self.hf = conf.rss_hf & RSS_OFFLOADS;
        }
        Ok(())
    }

    /// The default redirection table over `nq` queues.
    pub fn spread(&mut self, nq: u16) {
        for (i, e) in self.reta.iter_mut().enumerate() {
            *e = (i % usize::from(nq.max(1))) as u16;
        }
    }

    /// libibverbs hash fields for DPDK RSS types.
    pub fn verbs_fields(&self) -> u64 {
        let v4 = (ffi::IBV_RX_HASH_SRC_IPV4 | ffi::IBV_RX_HASH_DST_IPV4) as u64;
        let v6 = (ffi::IBV_RX_HASH_SRC_IPV6 | ffi::IBV_RX_HASH_DST_IPV6) as u64;
        let tcp = (ffi::IBV_RX_HASH_SRC_PORT_TCP | ffi::IBV_RX_HASH_DST_PORT_TCP) as u64;
        let udp = (ffi::IBV_RX_HASH_SRC_PORT_UDP | ffi::IBV_RX_HASH_DST_PORT_UDP) as u64;
        let hf = self.hf;
        let mut f = 0;
        if hf & (V4 | RSS_NONFRAG_IPV4_TCP | RSS_NONFRAG_IPV4_UDP) != 0 {
            f |= v4;
        }
        if hf
            & (V6 | RSS_NONFRAG_IPV6_TCP | RSS_NONFRAG_IPV6_UDP | RSS_IPV6_TCP_EX | RSS_IPV6_UDP_EX)
            != 0
        {
            f |= v6;
        }
        if hf & TCP != 0 {
            f |= tcp;
        }
        if hf & UDP != 0 {
            f |= udp;
        }
        f
    }

    /// The device repeats its list of receive queues over the 64 entries,
    /// so a table must repeat with period `n` and name each queue once per
    /// period; returns that list.
    pub fn queue_order(reta: &[u16; RETA_SIZE], n: usize) -> Result<Vec<u16>, String> {
        let order: Vec<u16> = reta[..n.min(RETA_SIZE)].to_vec();
        let mut seen = vec![false; n];
        for &q in &order {
            if usize::from(q) >= n || std::mem::replace(&mut seen[usize::from(q)], true) {
                return Err(format!(
                    "entries 0..{n} must name each of the {n} receive queues exactly once (got {order:?})"
                ));
            }
        }
        if let Some(i) = (n..RETA_SIZE).find(|&i| reta[i] != reta[i % n]) {
            return Err(format!(
                "MANA repeats the queue list every {n} entries: entry {i} must equal entry {} ({}), not {}",
                i % n,
                reta[i % n],
                reta[i]
            ));
        }
        Ok(order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reta_must_repeat_a_permutation_of_the_queues() {
        let mut reta = [0u16; RETA_SIZE];
        for (i, e) in reta.iter_mut().enumerate() {
            *e = [2, 0, 3, 1][i % 4];
        }
        assert_eq!(Rss::queue_order(&reta, 4).unwrap(), vec![2, 0, 3, 1]);
        reta[9] = 2;
        let e = Rss::queue_order(&reta, 4).unwrap_err();
        assert_eq!(
            e,
            "MANA repeats the queue list every 4 entries: entry 9 must equal entry 1 (0), not 2"
        );
        reta[9] = 0;
        reta[1] = 2;
        reta[5] = 2;
        assert!(Rss::queue_order(&reta, 4)
            .unwrap_err()
            .contains("exactly once"));
    }

    #[test]
    fn rss_types_map_to_verbs_hash_fields() {
        let mut r = Rss::new();
        r.hf = RSS_IPV6;
        assert_eq!(
            r.verbs_fields(),
            (ffi::IBV_RX_HASH_SRC_IPV6 | ffi::IBV_RX_HASH_DST_IPV6) as u64,
            "both IPv6 addresses, unlike the C driver"
        );
        r.hf = RSS_NONFRAG_IPV4_UDP;
        assert_eq!(r.verbs_fields(), 0x1 | 0x2 | 0x40 | 0x80);
        r.hf = RSS_IPV6_TCP_EX;
        assert_eq!(r.verbs_fields(), 0x4 | 0x8 | 0x10 | 0x20);
    }

    /// DPDK's group macros, written out from rte_ethdev.h: an application
    /// passing one of them must be able to configure the port.
    #[test]
    fn the_rss_groups_applications_pass_are_all_supported() {
        const RTE_ETH_RSS_IP: u64 = 0xa38c;
        const RTE_ETH_RSS_TCP: u64 = (1 << 4) | (1 << 10) | (1 << 16);
        const RTE_ETH_RSS_UDP: u64 = (1 << 5) | (1 << 11) | (1 << 17);
        for g in [RTE_ETH_RSS_IP, RTE_ETH_RSS_TCP, RTE_ETH_RSS_UDP] {
            assert_eq!(g & !RSS_OFFLOADS, 0, "{g:#x} beyond {RSS_OFFLOADS:#x}");
        }
    }
}

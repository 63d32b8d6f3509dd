//! The synthetic data path's packet work: what the host does to a frame
//! the guest sends (VLAN insertion, checksums, LSO, as its per-packet info
//! asks) and what it tells the guest about a frame it receives (VLAN tag
//! stripped into per-packet info, checksum verdicts, RSS hash and queue).

use super::rndis::{self, Ppi, RssParams};
use crate::pkt;

/// The frames a packet message puts on the wire.
pub fn tx_frames(msg: &rndis::PacketMsg, mut frame: Vec<u8>) -> Result<Vec<Vec<u8>>, String> {
    if frame.len() < pkt::ETH_HLEN {
        return Err(format!("frame of {} bytes", frame.len()));
    }
    if let Some(v) = msg.ppi(rndis::PPI_VLAN) {
        // NDIS VLAN info: priority bits 0-2, CFI bit 3, VLAN id bits 4-15.
        frame = pkt::vlan_insert(&frame, (v & 7) as u8, v & 8 != 0, ((v >> 4) & 0xfff) as u16);
    }
    if let Some(info) = msg
        .ppi(rndis::PPI_LSO)
        .filter(|v| v & rndis::LSO2_ISLSO2 != 0)
    {
        return segment(&frame, (info & rndis::LSO2_MSS_MASK) as usize);
    }
    if let Some(cs) = msg.ppi(rndis::PPI_CSUM) {
        let l = pkt::parse(&frame).ok_or("checksum offload on a frame that does not parse")?;
        if cs & rndis::TXCSUM_IPCS != 0 && l.ipv4 {
            pkt::fill_ipv4_csum(&mut frame, l.l3);
        }
        if cs & (rndis::TXCSUM_TCPCS | rndis::TXCSUM_UDPCS) != 0 {
            pkt::fill_l4_csum_full(&mut frame, &l);
        }
    }
    Ok(vec![frame])
}

/// LSOv2: the host segments at `mss` and computes every checksum itself.
fn segment(frame: &[u8], mss: usize) -> Result<Vec<Vec<u8>>, String> {
    if mss == 0 {
        return Err("LSO with MSS 0".into());
    }
    let l = pkt::parse(frame).ok_or("LSO on a frame that does not parse")?;
    let l4 = l.l4.ok_or("LSO on a frame without TCP")?;
    if l.proto != pkt::IPPROTO_TCP {
        return Err("LSO on a frame that is not TCP".into());
    }
    let thl = usize::from(frame[l4 + 12] >> 4) * 4;
    let hlen = l4 + thl;
    if hlen > frame.len() {
        return Err(format!(
            "LSO headers of {hlen} bytes in a {}-byte frame",
            frame.len()
        ));
    }
    let hl = pkt::parse_lso_headers(&frame[..hlen]).map_err(|e| format!("LSO headers: {e:?}"))?;
    let mut hdr = frame[..hlen].to_vec();
    let prefill = pkt::lso_tcp_prefill(&hdr, &hl);
    hdr[l4 + 16..l4 + 18].copy_from_slice(&prefill.to_be_bytes());
    Ok(pkt::lso_segment(&hdr, &hl, &frame[hlen..], mss))
}

/// Per-packet info for a received frame (its VLAN tag already stripped
/// into `vlan_tci`) and the channel RSS picks (0 without RSS).
pub fn rx_info(
    frame: &[u8],
    vlan_tci: Option<u16>,
    rss: Option<&RssParams>,
    channels: usize,
) -> (Vec<Ppi>, usize) {
    let mut ppis = Vec::with_capacity(4);
    if let Some(tci) = vlan_tci {
        let (pcp, cfi, vid) = (
            u32::from(tci >> 13),
            u32::from(tci >> 12 & 1),
            u32::from(tci & 0xfff),
        );
        ppis.push(Ppi {
            ty: rndis::PPI_VLAN,
            value: pcp | cfi << 3 | vid << 4,
        });
    }
    let layout = pkt::parse(frame);
    if let Some(l) = &layout {
        let mut cs = 0;
        if l.ipv4 {
            cs |= if pkt::ipv4_csum_ok(frame, l.l3) {
                rndis::RXCSUM_IPCS_OK
            } else {
                rndis::RXCSUM_IPCS_FAILED
            };
        }
        match (l.proto, pkt::l4_csum_ok(frame, l)) {
            (pkt::IPPROTO_TCP, Some(true)) => cs |= rndis::RXCSUM_TCPCS_OK,
            (pkt::IPPROTO_TCP, Some(false)) => cs |= rndis::RXCSUM_TCPCS_FAILED,
            (pkt::IPPROTO_UDP, Some(true)) => cs |= rndis::RXCSUM_UDPCS_OK,
            (pkt::IPPROTO_UDP, Some(false)) => cs |= rndis::RXCSUM_UDPCS_FAILED,
            _ => {}
        }
        if cs != 0 {
            ppis.push(Ppi {
                ty: rndis::PPI_CSUM,
                value: cs,
            });
        }
    }
    let mut channel = 0;
    if let (Some(r), Some(l)) = (rss.filter(|r| !r.disabled && !r.table.is_empty()), &layout) {
        if let Some((hash, htype)) = ndis_hash(frame, l, r) {
            ppis.push(Ppi {
                ty: rndis::PPI_HASHVAL,
                value: hash,
            });
            ppis.push(Ppi {
                ty: rndis::PPI_HASHINF,
                value: htype | rndis::NDIS_HASH_FUNCTION_TOEPLITZ,
            });
            let q = r.table[hash as usize % r.table.len()] as usize;
            channel = if q < channels { q } else { 0 };
        }
    }
    (ppis, channel)
}

/// The NDIS Toeplitz hash the guest's parameters ask for: TCP 4-tuple
/// where the TCP type is enabled, else the address pair.
fn ndis_hash(f: &[u8], l: &pkt::Layout, r: &RssParams) -> Option<(u32, u32)> {
    if r.key.len() < rndis::NDIS_HASH_KEYSIZE {
        return None;
    }
    let (addrs, t_ip, t_tcp) = if l.ipv4 {
        (
            &f[l.l3 + 12..l.l3 + 20],
            rndis::NDIS_HASH_IPV4,
            rndis::NDIS_HASH_TCP_IPV4,
        )
    } else if l.ipv6 {
        (
            &f[l.l3 + 8..l.l3 + 40],
            rndis::NDIS_HASH_IPV6,
            rndis::NDIS_HASH_TCP_IPV6,
        )
    } else {
        return None;
    };
    let mut input = addrs.to_vec();
    let ty = match l.l4 {
        Some(p) if l.proto == pkt::IPPROTO_TCP && r.hash & t_tcp != 0 && l.l4_len >= 4 => {
            input.extend_from_slice(&f[p..p + 4]);
            t_tcp
        }
        _ if r.hash & t_ip != 0 => t_ip,
        _ => return None,
    };
    Some((pkt::toeplitz(&r.key, &input), ty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg_with(ppis: Vec<Ppi>) -> rndis::PacketMsg {
        rndis::PacketMsg {
            len: 0,
            data_off: 0,
            data_len: 0,
            ppis,
        }
    }

    #[test]
    fn tx_vlan_and_checksums() {
        let mut f = pkt::build::udp4([2; 6], [4; 6], [10, 0, 0, 1], [10, 0, 0, 2], 5, 6, 30);
        let l = pkt::parse(&f).unwrap();
        // Zero the checksums; the host fills them.
        f[l.l3 + 10] = 0;
        f[l.l3 + 11] = 0;
        let csum = rndis::TXCSUM_IPV4 | rndis::TXCSUM_IPCS | rndis::TXCSUM_UDPCS;
        let vlan = 3 | 100 << 4; // priority 3, id 100
        let out = tx_frames(
            &msg_with(vec![
                Ppi {
                    ty: rndis::PPI_VLAN,
                    value: vlan,
                },
                Ppi {
                    ty: rndis::PPI_CSUM,
                    value: csum,
                },
            ]),
            f.clone(),
        )
        .unwrap();
        assert_eq!(out.len(), 1);
        let o = &out[0];
        assert_eq!(&o[12..16], &[0x81, 0x00, 0x60, 100]);
        let lo = pkt::parse(o).unwrap();
        assert!(pkt::ipv4_csum_ok(o, lo.l3));
        assert_eq!(pkt::l4_csum_ok(o, &lo), Some(true));
    }

    #[test]
    fn tx_lso_segments() {
        let f = pkt::build::tcp4([2; 6], [4; 6], [10, 0, 0, 1], [10, 0, 0, 2], 5, 6, 1, 3000);
        let v = rndis::LSO2_ISLSO2 | (54 << 20) | 1000;
        let out = tx_frames(
            &msg_with(vec![Ppi {
                ty: rndis::PPI_LSO,
                value: v,
            }]),
            f,
        )
        .unwrap();
        assert_eq!(
            out.iter().map(|s| s.len() - 54).collect::<Vec<_>>(),
            [1000, 1000, 1000]
        );
        for s in &out {
            let l = pkt::parse(s).unwrap();
            assert_eq!(pkt::l4_csum_ok(s, &l), Some(true));
        }
    }

    #[test]
    fn rx_info_reports_checksums_hash_and_queue() {
        let f = pkt::build::tcp4(
            [2; 6],
            [4; 6],
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            1000,
            80,
            1,
            10,
        );
        let r = RssParams {
            disabled: false,
            hash: rndis::NDIS_HASH_IPV4 | rndis::NDIS_HASH_TCP_IPV4 | 1,
            table: (0..128).map(|i| i % 4).collect(),
            key: vec![0x6d; 40],
        };
        let (ppis, ch) = rx_info(&f, Some(0x2064), Some(&r), 4);
        let get = |t| ppis.iter().find(|p| p.ty == t).map(|p| p.value);
        assert_eq!(get(rndis::PPI_VLAN), Some(1 | 100 << 4));
        assert_eq!(
            get(rndis::PPI_CSUM),
            Some(rndis::RXCSUM_IPCS_OK | rndis::RXCSUM_TCPCS_OK)
        );
        let l = pkt::parse(&f).unwrap();
        let mut input = f[l.l3 + 12..l.l3 + 20].to_vec();
        input.extend_from_slice(&f[l.l4.unwrap()..l.l4.unwrap() + 4]);
        let h = pkt::toeplitz(&r.key, &input);
        assert_eq!(get(rndis::PPI_HASHVAL), Some(h));
        assert_eq!(get(rndis::PPI_HASHINF), Some(rndis::NDIS_HASH_TCP_IPV4 | 1));
        assert_eq!(ch, (h as usize % 128) % 4);
        // Without RSS: no hash, channel 0.
        let (ppis, ch) = rx_info(&f, None, None, 4);
        assert_eq!((ppis.len(), ch), (1, 0));
    }
}

//! Ethernet / IP / TCP / UDP handling for the device's offloads: header
//! parsing, Internet checksums, TX checksum offload, TSO, VLAN insert and
//! strip, RX checksum verdicts and the Toeplitz RSS hash.

#![forbid(unsafe_code)]

pub const ETH_HLEN: usize = 14;
pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn put_be16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}

/// Where the headers of a frame are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the L3 header.
    pub l3: usize,
    pub ethertype: u16,
    pub vlan: Option<u16>,
    /// IPv4 / IPv6.
    pub ipv4: bool,
    pub ipv6: bool,
    /// Offset of the L4 header (if IP and not a fragment).
    pub l4: Option<usize>,
    pub proto: u8,
    /// L4 length from the IP header (payload after the L4 offset).
    pub l4_len: usize,
    /// End of the IP datagram (frames may carry Ethernet padding).
    pub ip_end: usize,
    pub fragment: bool,
}

/// Parses Ethernet (+ one 802.1Q tag), IPv4 / IPv6 (no extension headers).
pub fn parse(f: &[u8]) -> Option<Layout> {
    if f.len() < ETH_HLEN {
        return None;
    }
    let mut l = Layout {
        l3: ETH_HLEN,
        ethertype: be16(f, 12),
        ..Default::default()
    };
    if l.ethertype == ETH_P_8021Q {
        if f.len() < ETH_HLEN + 4 {
            return None;
        }
        l.vlan = Some(be16(f, 14));
        l.ethertype = be16(f, 16);
        l.l3 = ETH_HLEN + 4;
    }
    let ip = l.l3;
    match l.ethertype {
        ETH_P_IP => {
            if f.len() < ip + 20 || f[ip] >> 4 != 4 {
                return Some(l);
            }
            let ihl = usize::from(f[ip] & 0xf) * 4;
            let tot = usize::from(be16(f, ip + 2));
            if ihl < 20 || tot < ihl || ip + tot > f.len() {
                return Some(l);
            }
            l.ipv4 = true;
            l.proto = f[ip + 9];
            let frag = be16(f, ip + 6);
            l.fragment = frag & 0x3fff != 0;
            l.ip_end = ip + tot;
            if !l.fragment {
                l.l4 = Some(ip + ihl);
                l.l4_len = tot - ihl;
            }
        }
        ETH_P_IPV6 => {
            if f.len() < ip + 40 || f[ip] >> 4 != 6 {
                return Some(l);
            }
            let plen = usize::from(be16(f, ip + 4));
            if ip + 40 + plen > f.len() {
                return Some(l);
            }
            l.ipv6 = true;
            l.proto = f[ip + 6];
            l.ip_end = ip + 40 + plen;
            if l.proto == IPPROTO_TCP || l.proto == IPPROTO_UDP {
                l.l4 = Some(ip + 40);
                l.l4_len = plen;
            }
        }
        _ => {}
    }
    Some(l)
}

/// One's-complement sum of `data` added to `sum` (not folded).
pub fn csum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum = sum.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
        if sum > 0xffff_0000 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    if let [b] = chunks.remainder() {
        sum = sum.wrapping_add(u32::from(*b) << 8);
    }
    sum
}

pub fn csum_fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Pseudo-header sum for an L4 segment of `len` bytes.
pub fn pseudo_sum(f: &[u8], l: &Layout, len: usize) -> u32 {
    let ip = l.l3;
    let mut s = 0u32;
    if l.ipv4 {
        s = csum_add(s, &f[ip + 12..ip + 20]);
    } else {
        s = csum_add(s, &f[ip + 8..ip + 40]);
    }
    s = s.wrapping_add(u32::from(l.proto));
    s = s
        .wrapping_add((len as u32) & 0xffff)
        .wrapping_add((len as u32) >> 16);
    s
}

/// IPv4 header checksum computed in place.
pub fn fill_ipv4_csum(f: &mut [u8], l3: usize) {
    let ihl = usize::from(f[l3] & 0xf) * 4;
    put_be16(f, l3 + 10, 0);
    let c = !csum_fold(csum_add(0, &f[l3..l3 + ihl]));
    put_be16(f, l3 + 10, c);
}

pub fn ipv4_csum_ok(f: &[u8], l3: usize) -> bool {
    let ihl = usize::from(f[l3] & 0xf) * 4;
    csum_fold(csum_add(0, &f[l3..l3 + ihl])) == 0xffff
}

fn l4_csum_field(proto: u8) -> usize {
    if proto == IPPROTO_TCP {
        16
    } else {
        6
    }
}

/// TX checksum offload: the checksum field holds the pseudo-header sum the
/// driver prefilled; the device sums the segment over it and stores the
/// complement (what MANA expects, per DPDK `tx.c` "HW needs partial ... checksum").
pub fn fill_l4_csum_offload(f: &mut [u8], l4: usize, end: usize, proto: u8) {
    let c = !csum_fold(csum_add(0, &f[l4..end]));
    let c = if proto == IPPROTO_UDP && c == 0 {
        0xffff
    } else {
        c
    };
    put_be16(f, l4 + l4_csum_field(proto), c);
}

/// Full L4 checksum (pseudo-header included), computed from scratch.
pub fn fill_l4_csum_full(f: &mut [u8], l: &Layout) {
    let Some(l4) = l.l4 else { return };
    let end = l4 + l.l4_len;
    put_be16(f, l4 + l4_csum_field(l.proto), 0);
    let s = pseudo_sum(f, l, l.l4_len);
    let c = !csum_fold(csum_add(s, &f[l4..end]));
    let c = if l.proto == IPPROTO_UDP && c == 0 {
        0xffff
    } else {
        c
    };
    put_be16(f, l4 + l4_csum_field(l.proto), c);
}

/// RX verdict for the L4 checksum: Some(true) good, Some(false) bad,
/// None when not TCP/UDP over IP.
pub fn l4_csum_ok(f: &[u8], l: &Layout) -> Option<bool> {
    let l4 = l.l4?;
    if l.proto != IPPROTO_TCP && l.proto != IPPROTO_UDP {
        return None;
    }
    let min = if l.proto == IPPROTO_TCP { 20 } else { 8 };
    if l.l4_len < min {
        return Some(false);
    }
    if l.proto == IPPROTO_UDP && l.ipv4 && be16(f, l4 + 6) == 0 {
        return Some(true); // no checksum
    }
    let s = pseudo_sum(f, l, l.l4_len);
    Some(csum_fold(csum_add(s, &f[l4..l4 + l.l4_len])) == 0xffff)
}

/// Inserts an 802.1Q tag after the MAC addresses.
pub fn vlan_insert(f: &[u8], pcp: u8, dei: bool, vid: u16) -> Vec<u8> {
    let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0xfff);
    let mut v = Vec::with_capacity(f.len() + 4);
    v.extend_from_slice(&f[..12]);
    v.extend_from_slice(&ETH_P_8021Q.to_be_bytes());
    v.extend_from_slice(&tci.to_be_bytes());
    v.extend_from_slice(&f[12..]);
    v
}

/// Removes an outer 802.1Q tag; returns the TCI.
pub fn vlan_strip(f: &mut Vec<u8>) -> Option<u16> {
    if f.len() >= 18 && be16(f, 12) == ETH_P_8021Q {
        let tci = be16(f, 14);
        f.drain(12..16);
        Some(tci)
    } else {
        None
    }
}

/// Where the headers of an LSO send are, parsed from SGE 0 alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LsoHeaders {
    /// Offset of the IP header (14, or 18 behind an 802.1Q tag).
    pub l3: usize,
    /// Offset of the TCP header (`trans_off`).
    pub l4: usize,
    /// L2 + L3 + L4 header length: the size SGE 0 must have.
    pub len: usize,
    pub ipv4: bool,
    /// An 802.1Q tag inside the frame (not inserted through the OOB).
    pub vlan: bool,
}

/// Why SGE 0 of an LSO send was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LsoHeaderError {
    /// Not exactly Ethernet + IP + TCP headers (truncated, bad version or
    /// length fields, or payload bytes after the TCP header).
    NotHeaders,
    /// A well-formed header of something other than a non-fragmented
    /// IPv4 / IPv6 TCP packet.
    NotTcp,
}

/// Parses SGE 0 of an LSO send, which must hold exactly the L2 + L3 + L4
/// headers: Ethernet (+ one 802.1Q tag), IPv4 (options allowed, not a
/// fragment) or IPv6 (no extension headers), and TCP (options allowed).
/// The IP length fields are not read: the driver leaves them 0.
pub fn parse_lso_headers(h: &[u8]) -> Result<LsoHeaders, LsoHeaderError> {
    use LsoHeaderError::*;
    if h.len() < ETH_HLEN {
        return Err(NotHeaders);
    }
    let (mut ethertype, mut l3, mut vlan) = (be16(h, 12), ETH_HLEN, false);
    if ethertype == ETH_P_8021Q {
        if h.len() < ETH_HLEN + 4 {
            return Err(NotHeaders);
        }
        ethertype = be16(h, 16);
        l3 += 4;
        vlan = true;
    }
    let (l4, ipv4) = match ethertype {
        ETH_P_IP => {
            if h.len() < l3 + 20 || h[l3] >> 4 != 4 {
                return Err(NotHeaders);
            }
            let ihl = usize::from(h[l3] & 0xf) * 4;
            if ihl < 20 || h.len() < l3 + ihl {
                return Err(NotHeaders);
            }
            if h[l3 + 9] != IPPROTO_TCP || be16(h, l3 + 6) & 0x3fff != 0 {
                return Err(NotTcp);
            }
            (l3 + ihl, true)
        }
        ETH_P_IPV6 => {
            if h.len() < l3 + 40 || h[l3] >> 4 != 6 {
                return Err(NotHeaders);
            }
            if h[l3 + 6] != IPPROTO_TCP {
                return Err(NotTcp);
            }
            (l3 + 40, false)
        }
        _ => return Err(NotTcp),
    };
    if h.len() < l4 + 20 {
        return Err(NotHeaders);
    }
    let thl = usize::from(h[l4 + 12] >> 4) * 4;
    if thl < 20 || h.len() != l4 + thl {
        return Err(NotHeaders);
    }
    Ok(LsoHeaders {
        l3,
        l4,
        len: l4 + thl,
        ipv4,
        vlan,
    })
}

/// Number of segments and the largest segment's frame length of an LSO
/// send of `payload` bytes.
pub fn lso_shape(hl: &LsoHeaders, payload: usize, mss: usize) -> (usize, usize) {
    (payload.div_ceil(mss), hl.len + payload.min(mss))
}

/// Segments an LSO send (TSO) as MANA does, from the headers of SGE 0 as
/// the Linux driver leaves them and the payload of SGEs 1..n.
///
/// Every segment carries a copy of the headers with: IPv4 total length set,
/// identification incremented per segment and header checksum computed;
/// IPv6 payload length set; TCP sequence number advanced by the payload
/// already sent; FIN and PSH only on the last segment, CWR only on the
/// first; TCP checksum completed from the driver's prefill. The prefill is
/// the folded, uncomplemented pseudo-header sum over the addresses and the
/// protocol with length 0; the device adds the segment's TCP length and
/// its bytes and stores the complement (so a wrong prefill gives a wrong
/// checksum on the wire, as on a NIC that trusts it).
pub fn lso_segment(hdr: &[u8], hl: &LsoHeaders, payload: &[u8], mss: usize) -> Vec<Vec<u8>> {
    let (l3, l4) = (hl.l3, hl.l4);
    let seq0 = u32::from_be_bytes(hdr[l4 + 4..l4 + 8].try_into().unwrap());
    let flags0 = hdr[l4 + 13];
    let id0 = if hl.ipv4 { be16(hdr, l3 + 4) } else { 0 };
    let nseg = payload.len().div_ceil(mss);
    let mut out = Vec::with_capacity(nseg);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let mut s = Vec::with_capacity(hdr.len() + chunk.len());
        s.extend_from_slice(hdr);
        s.extend_from_slice(chunk);
        let l3_len = s.len() - l3;
        if hl.ipv4 {
            put_be16(&mut s, l3 + 2, l3_len as u16);
            put_be16(&mut s, l3 + 4, id0.wrapping_add(i as u16));
            fill_ipv4_csum(&mut s, l3);
        } else {
            put_be16(&mut s, l3 + 4, (l3_len - 40) as u16);
        }
        let seq = seq0.wrapping_add((i * mss) as u32);
        s[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut fl = flags0;
        if i + 1 != nseg {
            fl &= !(0x01 | 0x08); // FIN, PSH only on the last segment
        }
        if i != 0 {
            fl &= !0x80; // CWR only on the first
        }
        s[l4 + 13] = fl;
        let tcp_len = s.len() - l4;
        // The checksum field still holds the prefill, summed with the rest.
        let sum = csum_add(0, &s[l4..]).wrapping_add(tcp_len as u32);
        let c = !csum_fold(sum);
        put_be16(&mut s, l4 + 16, c);
        out.push(s);
    }
    out
}

/// The TCP checksum prefill of an LSO send: the folded, uncomplemented
/// pseudo-header sum over the addresses and the protocol, length 0
/// (Linux: `~csum_tcpudp_magic(saddr, daddr, 0, IPPROTO_TCP, 0)` /
/// `~csum_ipv6_magic(...)`; DPDK: `rte_ipv4_phdr_cksum` /
/// `rte_ipv6_phdr_cksum` with `RTE_MBUF_F_TX_TCP_SEG`).
pub fn lso_tcp_prefill(hdr: &[u8], hl: &LsoHeaders) -> u16 {
    let l3 = hl.l3;
    let addrs = if hl.ipv4 {
        &hdr[l3 + 12..l3 + 20]
    } else {
        &hdr[l3 + 8..l3 + 40]
    };
    csum_fold(csum_add(0, addrs).wrapping_add(u32::from(IPPROTO_TCP)))
}

/// Toeplitz hash (the RSS hash of NDIS / MANA) of `input` under `key`.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let mut result = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    let mut next_bit = 32usize;
    for &byte in input {
        for b in (0..8).rev() {
            if byte >> b & 1 != 0 {
                result ^= window;
            }
            let kb = key
                .get(next_bit / 8)
                .map_or(0, |k| (k >> (7 - next_bit % 8)) & 1);
            window = (window << 1) | u32::from(kb);
            next_bit += 1;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's RSS verification suite key and vectors.
    const MS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    #[test]
    fn toeplitz_ms_vectors() {
        // 66.9.149.187:2794 -> 161.142.100.80:1766
        let mut inp = vec![66, 9, 149, 187, 161, 142, 100, 80];
        assert_eq!(toeplitz(&MS_KEY, &inp), 0x323e8fc2);
        inp.extend_from_slice(&2794u16.to_be_bytes());
        inp.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(toeplitz(&MS_KEY, &inp), 0x51ccc178);
    }

    #[test]
    fn toeplitz_agrees_with_the_gdma_crate() {
        // Two independent implementations (this one and the PMD's).
        let mut x = 0x1234_5678u32;
        for len in 0..40 {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            for key in [MS_KEY, gdma::DPDK_MANA_DEFAULT_RSS_KEY] {
                assert_eq!(
                    toeplitz(&key, &input),
                    gdma::toeplitz(&key, &input),
                    "len {len}"
                );
            }
        }
    }

    #[test]
    fn csum_known() {
        // RFC 1071 example words.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(csum_fold(csum_add(0, &d)), 0xddf2);
    }
}

/// Test-frame builders (valid checksums).
pub mod build {
    use super::*;

    fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn ipv4_hdr(f: &mut Vec<u8>, proto: u8, src: [u8; 4], dst: [u8; 4], payload: usize, id: u16) {
        let l3 = f.len();
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&((20 + payload) as u16).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        fill_ipv4_csum(f, l3);
    }

    /// Ethernet / IPv4 / UDP with `payload_len` bytes of pattern.
    #[allow(clippy::too_many_arguments)]
    pub fn udp4(
        dst: [u8; 6],
        src: [u8; 6],
        sip: [u8; 4],
        dip: [u8; 4],
        sport: u16,
        dport: u16,
        payload_len: usize,
    ) -> Vec<u8> {
        let mut f = eth(dst, src, ETH_P_IP);
        ipv4_hdr(&mut f, IPPROTO_UDP, sip, dip, 8 + payload_len, sport);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend((0..payload_len).map(|i| (i as u8).wrapping_mul(7)));
        let l = parse(&f).unwrap();
        fill_l4_csum_full(&mut f, &l);
        f
    }

    /// Ethernet / IPv4 / TCP (ACK|PSH) with `payload_len` bytes of pattern.
    #[allow(clippy::too_many_arguments)]
    pub fn tcp4(
        dst: [u8; 6],
        src: [u8; 6],
        sip: [u8; 4],
        dip: [u8; 4],
        sport: u16,
        dport: u16,
        seq: u32,
        payload_len: usize,
    ) -> Vec<u8> {
        let mut f = eth(dst, src, ETH_P_IP);
        ipv4_hdr(&mut f, IPPROTO_TCP, sip, dip, 20 + payload_len, 1);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&0u32.to_be_bytes());
        f.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend((0..payload_len).map(|i| (i as u8).wrapping_mul(13)));
        let l = parse(&f).unwrap();
        fill_l4_csum_full(&mut f, &l);
        f
    }

    /// Ethernet and an IPv6 header (hop limit 64) for `l4_len` bytes of
    /// `proto`.
    fn ipv6(
        dst: [u8; 6],
        src: [u8; 6],
        proto: u8,
        sip: [u8; 16],
        dip: [u8; 16],
        l4_len: usize,
    ) -> Vec<u8> {
        let mut f = eth(dst, src, ETH_P_IPV6);
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4_len as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&sip);
        f.extend_from_slice(&dip);
        f
    }

    /// Ethernet / IPv6 / TCP (ACK|PSH) with `payload_len` bytes of pattern.
    pub fn tcp6(
        dst: [u8; 6],
        src: [u8; 6],
        sip: [u8; 16],
        dip: [u8; 16],
        sport: u16,
        dport: u16,
        payload_len: usize,
    ) -> Vec<u8> {
        let mut f = ipv6(dst, src, IPPROTO_TCP, sip, dip, 20 + payload_len);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend((0..payload_len).map(|i| (i as u8).wrapping_mul(13)));
        let l = parse(&f).unwrap();
        fill_l4_csum_full(&mut f, &l);
        f
    }

    /// Ethernet / IPv6 / UDP.
    pub fn udp6(
        dst: [u8; 6],
        src: [u8; 6],
        sip: [u8; 16],
        dip: [u8; 16],
        sport: u16,
        dport: u16,
        payload_len: usize,
    ) -> Vec<u8> {
        let mut f = ipv6(dst, src, IPPROTO_UDP, sip, dip, 8 + payload_len);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend((0..payload_len).map(|i| i as u8));
        let l = parse(&f).unwrap();
        fill_l4_csum_full(&mut f, &l);
        f
    }
}

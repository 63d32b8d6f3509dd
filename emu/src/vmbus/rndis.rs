//! RNDIS messages and the NDIS objects they carry.
//!
//! Control: the guest initializes the RNDIS device, queries OIDs (MAC, MTU,
//! link state and speed, offload and RSS capabilities), sets OIDs (packet
//! filter, offload parameters, RSS parameters) and halts it; each request
//! carries an id the completion echoes. Data: a packet message holds one
//! Ethernet frame plus per-packet info (checksum, LSO, VLAN, hash).
//!
//! Layouts: DPDK `drivers/net/netvsc/rndis.h` and `ndis.h` (sizes checked
//! against the C structs: `ndis_offload` 156 bytes, `ndis_rss_params` 40,
//! `ndis_rss_caps` 18 as sent, `rndis_packet_msg` 44).

pub const INITIALIZE_MSG: u32 = 0x0000_0002;
pub const INITIALIZE_CMPLT: u32 = 0x8000_0002;
pub const HALT_MSG: u32 = 0x0000_0003;
pub const QUERY_MSG: u32 = 0x0000_0004;
pub const QUERY_CMPLT: u32 = 0x8000_0004;
pub const SET_MSG: u32 = 0x0000_0005;
pub const SET_CMPLT: u32 = 0x8000_0005;
pub const RESET_MSG: u32 = 0x0000_0006;
pub const RESET_CMPLT: u32 = 0x8000_0006;
pub const INDICATE_STATUS_MSG: u32 = 0x0000_0007;
pub const KEEPALIVE_MSG: u32 = 0x0000_0008;
pub const KEEPALIVE_CMPLT: u32 = 0x8000_0008;
pub const PACKET_MSG: u32 = 0x0000_0001;

pub const STATUS_SUCCESS: u32 = 0;
pub const STATUS_FAILURE: u32 = 0xC000_0001;
pub const STATUS_INVALID_DATA: u32 = 0xC001_0015;
pub const STATUS_NOT_SUPPORTED: u32 = 0xC000_00BB;
pub const STATUS_MEDIA_CONNECT: u32 = 0x4001_000B;
pub const STATUS_MEDIA_DISCONNECT: u32 = 0x4001_000C;

pub const OID_GEN_MAXIMUM_FRAME_SIZE: u32 = 0x0001_0106;
pub const OID_GEN_LINK_SPEED: u32 = 0x0001_0107;
pub const OID_GEN_CURRENT_PACKET_FILTER: u32 = 0x0001_010E;
pub const OID_GEN_MEDIA_CONNECT_STATUS: u32 = 0x0001_0114;
pub const OID_GEN_RECEIVE_SCALE_CAPABILITIES: u32 = 0x0001_0203;
pub const OID_GEN_RECEIVE_SCALE_PARAMETERS: u32 = 0x0001_0204;
pub const OID_802_3_PERMANENT_ADDRESS: u32 = 0x0101_0101;
pub const OID_802_3_CURRENT_ADDRESS: u32 = 0x0101_0102;
pub const OID_TCP_OFFLOAD_PARAMETERS: u32 = 0xFC01_020C;
pub const OID_TCP_OFFLOAD_HARDWARE_CAPABILITIES: u32 = 0xFC01_020D;

pub const PACKET_TYPE_DIRECTED: u32 = 0x01;
pub const PACKET_TYPE_MULTICAST: u32 = 0x02;
pub const PACKET_TYPE_ALL_MULTICAST: u32 = 0x04;
pub const PACKET_TYPE_BROADCAST: u32 = 0x08;
pub const PACKET_TYPE_PROMISCUOUS: u32 = 0x20;

pub const NDIS_OBJTYPE_DEFAULT: u8 = 0x80;
pub const NDIS_OBJTYPE_RSS_CAPS: u8 = 0x88;
pub const NDIS_OBJTYPE_RSS_PARAMS: u8 = 0x89;
pub const NDIS_OBJTYPE_OFFLOAD: u8 = 0xa7;

pub const NDIS_HASH_FUNCTION_TOEPLITZ: u32 = 0x01;
pub const NDIS_HASH_IPV4: u32 = 0x100;
pub const NDIS_HASH_TCP_IPV4: u32 = 0x200;
pub const NDIS_HASH_IPV6: u32 = 0x400;
pub const NDIS_HASH_IPV6_EX: u32 = 0x800;
pub const NDIS_HASH_TCP_IPV6: u32 = 0x1000;
pub const NDIS_HASH_TCP_IPV6_EX: u32 = 0x2000;
pub const NDIS_RSS_FLAG_DISABLE: u16 = 0x10;
pub const NDIS_HASH_KEYSIZE: usize = 40;
pub const NDIS_HASH_INDCNT: usize = 128;

/// Per-packet info types.
pub const PPI_CSUM: u32 = 0;
pub const PPI_LSO: u32 = 2;
pub const PPI_VLAN: u32 = 6;
pub const PPI_HASHVAL: u32 = 8;
pub const PPI_HASHINF: u32 = 9;

pub const TXCSUM_IPV4: u32 = 0x01;
pub const TXCSUM_IPV6: u32 = 0x02;
pub const TXCSUM_TCPCS: u32 = 0x04;
pub const TXCSUM_UDPCS: u32 = 0x08;
pub const TXCSUM_IPCS: u32 = 0x10;
pub const RXCSUM_TCPCS_FAILED: u32 = 0x01;
pub const RXCSUM_UDPCS_FAILED: u32 = 0x02;
pub const RXCSUM_IPCS_FAILED: u32 = 0x04;
pub const RXCSUM_TCPCS_OK: u32 = 0x08;
pub const RXCSUM_UDPCS_OK: u32 = 0x10;
pub const RXCSUM_IPCS_OK: u32 = 0x20;
pub const LSO2_MSS_MASK: u32 = 0x000f_ffff;
pub const LSO2_ISLSO2: u32 = 0x4000_0000;
pub const LSO2_ISIPV6: u32 = 0x8000_0000;

/// `rndis_packet_msg` header length.
pub const PACKET_HDR_LEN: usize = 44;
/// Offsets in packet messages count from the `dataoffset` field (byte 8).
pub const PACKET_OFFSET_BASE: usize = 8;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

/// A control message from the guest (fails closed on short or
/// inconsistent messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    Init {
        rid: u32,
        major: u32,
        minor: u32,
        max_xfer: u32,
    },
    Halt {
        rid: u32,
    },
    Query {
        rid: u32,
        oid: u32,
        input: Vec<u8>,
    },
    Set {
        rid: u32,
        oid: u32,
        data: Vec<u8>,
    },
    Reset,
    Keepalive {
        rid: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlError {
    Short(usize),
    /// `len` beyond the bytes received, or an information buffer outside it.
    BadLength(String),
    Unknown(u32),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Short(n) => write!(f, "RNDIS message of {n} bytes"),
            ControlError::BadLength(s) => write!(f, "RNDIS message {s}"),
            ControlError::Unknown(t) => write!(f, "unknown RNDIS message type {t:#x}"),
        }
    }
}

impl Control {
    pub fn decode(b: &[u8]) -> Result<Control, ControlError> {
        let ty = u32_at(b, 0).ok_or(ControlError::Short(b.len()))?;
        let len = u32_at(b, 4).ok_or(ControlError::Short(b.len()))? as usize;
        if len > b.len() || len < 12 {
            return Err(ControlError::BadLength(format!(
                "type {ty:#x} says {len} bytes, {} received",
                b.len()
            )));
        }
        let b = &b[..len];
        let rid = u32_at(b, 8).expect("len >= 12");
        let short = || ControlError::Short(len);
        match ty {
            INITIALIZE_MSG => Ok(Control::Init {
                rid,
                major: u32_at(b, 12).ok_or_else(short)?,
                minor: u32_at(b, 16).ok_or_else(short)?,
                max_xfer: u32_at(b, 20).ok_or_else(short)?,
            }),
            HALT_MSG => Ok(Control::Halt { rid }),
            QUERY_MSG | SET_MSG => {
                let oid = u32_at(b, 12).ok_or_else(short)?;
                let ilen = u32_at(b, 16).ok_or_else(short)? as usize;
                let ioff = u32_at(b, 20).ok_or_else(short)? as usize;
                // The information buffer offset counts from `rid` (byte 8).
                let data = if ilen == 0 {
                    Vec::new()
                } else {
                    let start = ioff.checked_add(8).ok_or_else(short)?;
                    b.get(start..start.saturating_add(ilen))
                        .ok_or_else(|| {
                            ControlError::BadLength(format!(
                                "oid {oid:#x}: {ilen} bytes at offset {ioff} outside {len}"
                            ))
                        })?
                        .to_vec()
                };
                Ok(if ty == QUERY_MSG {
                    Control::Query {
                        rid,
                        oid,
                        input: data,
                    }
                } else {
                    Control::Set { rid, oid, data }
                })
            }
            RESET_MSG => Ok(Control::Reset),
            KEEPALIVE_MSG => Ok(Control::Keepalive { rid }),
            other => Err(ControlError::Unknown(other)),
        }
    }
}

/// What the host reports in `RNDIS_INITIALIZE_CMPLT`.
#[derive(Clone, Copy, Debug)]
pub struct InitParams {
    pub max_pkts: u32,
    pub max_size: u32,
    /// log2 of the packet alignment in aggregated messages.
    pub align_shift: u32,
}

pub fn init_cmplt(rid: u32, status: u32, p: &InitParams) -> Vec<u8> {
    let mut m = Vec::with_capacity(52);
    for w in [
        INITIALIZE_CMPLT,
        52,
        rid,
        status,
        1, // major
        0, // minor
        1, // RNDIS_DF_CONNECTIONLESS
        0, // RNDIS_MEDIUM_802_3
        p.max_pkts,
        p.max_size,
        p.align_shift,
        0, // aflistoffset
        0, // aflistsz
    ] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m
}

pub fn query_cmplt(rid: u32, status: u32, info: &[u8]) -> Vec<u8> {
    let len = 24 + info.len();
    let mut m = Vec::with_capacity(len);
    for w in [
        QUERY_CMPLT,
        len as u32,
        rid,
        status,
        info.len() as u32,
        // Offset of the information buffer, counted from `rid`.
        if info.is_empty() { 0 } else { 16 },
    ] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m.extend_from_slice(info);
    m
}

pub fn set_cmplt(rid: u32, status: u32) -> Vec<u8> {
    [SET_CMPLT, 16, rid, status]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

pub fn keepalive_cmplt(rid: u32) -> Vec<u8> {
    [KEEPALIVE_CMPLT, 16, rid, STATUS_SUCCESS]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

pub fn reset_cmplt() -> Vec<u8> {
    [RESET_CMPLT, 16, STATUS_SUCCESS, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// `RNDIS_INDICATE_STATUS_MSG` with no status buffer.
pub fn indicate_status(status: u32) -> Vec<u8> {
    [INDICATE_STATUS_MSG, 20, status, 0, 0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// The offloads the host offers (`OID_TCP_OFFLOAD_HARDWARE_CAPABILITIES`):
/// IPv4 header, TCP and UDP checksums both ways (IPv4 and IPv6), LSOv2 for
/// IPv4 and IPv6, as a 156-byte revision 3 `ndis_offload`.
pub fn offload_caps(lso_max: u32) -> Vec<u8> {
    let mut m = vec![0u8; 156];
    m[0] = NDIS_OBJTYPE_OFFLOAD;
    m[1] = 3;
    m[2..4].copy_from_slice(&156u16.to_le_bytes());
    let put =
        |m: &mut Vec<u8>, off: usize, v: u32| m[off..off + 4].copy_from_slice(&v.to_le_bytes());
    const ENCAP_8023: u32 = 0x2;
    // ndis_csum at 4: ip4 tx encap/caps, ip4 rx, ip6 tx, ip6 rx.
    put(&mut m, 4, ENCAP_8023);
    put(&mut m, 8, 0x001 | 0x004 | 0x010 | 0x040 | 0x100); // IP4OPT TCP4OPT TCP4 UDP4 IP4
    put(&mut m, 12, ENCAP_8023);
    put(&mut m, 16, 0x001 | 0x004 | 0x010 | 0x040 | 0x100);
    put(&mut m, 20, ENCAP_8023);
    put(&mut m, 24, 0x001 | 0x004 | 0x010 | 0x040); // IP6EXT TCP6OPT TCP6 UDP6
    put(&mut m, 28, ENCAP_8023);
    put(&mut m, 32, 0x001 | 0x004 | 0x010 | 0x040);
    // ndis_lsov2 at 80: ip4 encap, maxsz, minsg; ip6 encap, maxsz, minsg, opts.
    put(&mut m, 80, ENCAP_8023);
    put(&mut m, 84, lso_max);
    put(&mut m, 88, 2);
    put(&mut m, 92, ENCAP_8023);
    put(&mut m, 96, lso_max);
    put(&mut m, 100, 2);
    put(&mut m, 104, 0x001 | 0x004); // IP6EXT TCP6OPT
    m
}

/// `OID_GEN_RECEIVE_SCALE_CAPABILITIES`: Toeplitz over IPv4/IPv6 with
/// `nrxr` receive rings and a 128-entry table (revision 2, 18 bytes).
pub fn rss_caps(nrxr: u32) -> Vec<u8> {
    let mut m = vec![NDIS_OBJTYPE_RSS_CAPS, 2, 18, 0];
    let caps = 0x100 | 0x200 | 0x400 | NDIS_HASH_FUNCTION_TOEPLITZ; // IPV4 IPV6 IPV6_EX
    m.extend_from_slice(&caps.to_le_bytes());
    m.extend_from_slice(&nrxr.to_le_bytes()); // MSIs
    m.extend_from_slice(&nrxr.to_le_bytes());
    m.extend_from_slice(&(NDIS_HASH_INDCNT as u16).to_le_bytes());
    m
}

/// RSS parameters set by the guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RssParams {
    pub disabled: bool,
    /// NDIS hash type bits and function.
    pub hash: u32,
    /// Queue (channel index) per indirection-table entry.
    pub table: Vec<u32>,
    pub key: Vec<u8>,
}

impl RssParams {
    /// Parses an `ndis_rss_params` object (offsets count from its start).
    pub fn decode(b: &[u8]) -> Result<RssParams, String> {
        if b.len() < 28 || b[0] != NDIS_OBJTYPE_RSS_PARAMS {
            return Err(format!(
                "RSS parameters: {} bytes, type {:#x}",
                b.len(),
                b.first().copied().unwrap_or(0)
            ));
        }
        let flags = u16_at(b, 4).expect("len");
        let hash = u32_at(b, 8).expect("len");
        let indsize = u16_at(b, 12).expect("len") as usize;
        let indoff = u32_at(b, 16).expect("len") as usize;
        let keysize = u16_at(b, 20).expect("len") as usize;
        let keyoff = u32_at(b, 24).expect("len") as usize;
        let table_bytes = b
            .get(indoff..indoff.saturating_add(indsize))
            .ok_or(format!(
                "RSS table {indsize} bytes at {indoff} outside {}",
                b.len()
            ))?;
        if !indsize.is_multiple_of(4) || indsize / 4 > NDIS_HASH_INDCNT {
            return Err(format!("RSS table of {indsize} bytes"));
        }
        let key = b
            .get(keyoff..keyoff.saturating_add(keysize))
            .ok_or(format!(
                "RSS key {keysize} bytes at {keyoff} outside {}",
                b.len()
            ))?;
        Ok(RssParams {
            disabled: flags & NDIS_RSS_FLAG_DISABLE != 0,
            hash,
            table: table_bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            key: key.to_vec(),
        })
    }
}

/// One per-packet-info element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ppi {
    pub ty: u32,
    pub value: u32,
}

/// A packet message: where its frame lies and its per-packet info.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketMsg {
    /// Total message length (`len`, aggregation padding included).
    pub len: usize,
    /// Frame bytes at this offset from the message start.
    pub data_off: usize,
    pub data_len: usize,
    pub ppis: Vec<Ppi>,
}

impl PacketMsg {
    /// Decodes the header and per-packet info of a packet message. `b`
    /// holds at least the header and the info (the frame may be elsewhere,
    /// as in GPA-direct sends); `len` bounds are checked by the caller.
    pub fn decode(b: &[u8]) -> Result<PacketMsg, String> {
        let ty = u32_at(b, 0).ok_or("RNDIS packet header missing")?;
        if ty != PACKET_MSG || b.len() < PACKET_HDR_LEN {
            return Err(format!(
                "RNDIS message type {ty:#x} of {} bytes, not a packet",
                b.len()
            ));
        }
        let f = |off| u32_at(b, off).expect("header length checked") as usize;
        let (len, doff, dlen, ioff, ilen) = (f(4), f(8), f(12), f(28), f(32));
        if dlen == 0 || doff < PACKET_HDR_LEN - PACKET_OFFSET_BASE {
            return Err(format!("RNDIS packet data {dlen} bytes at offset {doff}"));
        }
        let data_off = doff + PACKET_OFFSET_BASE;
        if data_off.checked_add(dlen).is_none_or(|e| e > len) {
            return Err(format!(
                "RNDIS packet data {dlen} bytes at {data_off} past its length {len}"
            ));
        }
        let mut ppis = Vec::new();
        if ilen > 0 {
            let start = ioff + PACKET_OFFSET_BASE;
            let info = b.get(start..start.saturating_add(ilen)).ok_or(format!(
                "RNDIS packet info {ilen} bytes at {start} not present"
            ))?;
            let mut rest = info;
            while !rest.is_empty() {
                let size = u32_at(rest, 0).ok_or("truncated per-packet info")? as usize;
                let ty = u32_at(rest, 4).ok_or("truncated per-packet info")?;
                let off = u32_at(rest, 8).ok_or("truncated per-packet info")? as usize;
                if size < 12 || size > rest.len() || !size.is_multiple_of(4) || off > size {
                    return Err(format!("per-packet info of size {size}, offset {off}"));
                }
                if let Some(v) = u32_at(&rest[..size], off) {
                    ppis.push(Ppi { ty, value: v });
                }
                rest = &rest[size..];
            }
        }
        Ok(PacketMsg {
            len,
            data_off,
            data_len: dlen,
            ppis,
        })
    }

    pub fn ppi(&self, ty: u32) -> Option<u32> {
        self.ppis.iter().find(|p| p.ty == ty).map(|p| p.value)
    }
}

/// Builds a packet message around `frame` with `ppis` (as the host sends
/// received frames).
pub fn packet_msg(frame: &[u8], ppis: &[Ppi]) -> Vec<u8> {
    let info_len = ppis.len() * 16;
    let data_off = PACKET_HDR_LEN + info_len;
    let len = data_off + frame.len();
    let mut m = Vec::with_capacity(len);
    for w in [
        PACKET_MSG,
        len as u32,
        (data_off - PACKET_OFFSET_BASE) as u32,
        frame.len() as u32,
        0,
        0,
        0,
        (PACKET_HDR_LEN - PACKET_OFFSET_BASE) as u32,
        info_len as u32,
        0,
        0,
    ] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    for p in ppis {
        for w in [16u32, p.ty, 12, p.value] {
            m.extend_from_slice(&w.to_le_bytes());
        }
    }
    m.extend_from_slice(frame);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query as `hn_rndis_query` builds it: 28-byte header, info offset 20.
    #[test]
    fn query_and_set_decode() {
        let mut q = Vec::new();
        for w in [
            QUERY_MSG,
            28 + 4,
            9,
            OID_GEN_RECEIVE_SCALE_CAPABILITIES,
            4,
            20,
            0,
        ] {
            q.extend_from_slice(&w.to_le_bytes());
        }
        q.extend_from_slice(&[0x88, 2, 18, 0]);
        assert_eq!(
            Control::decode(&q).unwrap(),
            Control::Query {
                rid: 9,
                oid: OID_GEN_RECEIVE_SCALE_CAPABILITIES,
                input: vec![0x88, 2, 18, 0]
            }
        );
        let mut s = Vec::new();
        for w in [
            SET_MSG,
            32,
            3,
            OID_GEN_CURRENT_PACKET_FILTER,
            4,
            20,
            0,
            0x0d,
        ] {
            s.extend_from_slice(&w.to_le_bytes());
        }
        assert_eq!(
            Control::decode(&s).unwrap(),
            Control::Set {
                rid: 3,
                oid: OID_GEN_CURRENT_PACKET_FILTER,
                data: 0x0du32.to_le_bytes().to_vec()
            }
        );
        // Information buffer outside the message.
        s[16] = 40;
        assert!(matches!(
            Control::decode(&s),
            Err(ControlError::BadLength(_))
        ));
        // Length beyond the bytes.
        let mut t = s.clone();
        t[4] = 200;
        assert!(matches!(
            Control::decode(&t),
            Err(ControlError::BadLength(_))
        ));
        assert!(matches!(
            Control::decode(&[1, 2, 3]),
            Err(ControlError::Short(3))
        ));
        let mut u = vec![0x99, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(Control::decode(&u), Err(ControlError::Unknown(0x99)));
        u[0] = 3;
        assert_eq!(Control::decode(&u), Ok(Control::Halt { rid: 0 }));
    }

    #[test]
    fn completions_golden() {
        let c = query_cmplt(5, STATUS_SUCCESS, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            c,
            [
                &[0x04, 0, 0, 0x80, 30, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 16, 0, 0, 0][..],
                &[1, 2, 3, 4, 5, 6]
            ]
            .concat()
        );
        let i = init_cmplt(
            1,
            0,
            &InitParams {
                max_pkts: 8,
                max_size: 0x4000,
                align_shift: 3,
            },
        );
        assert_eq!(i.len(), 52);
        assert_eq!(&i[..8], &[0x02, 0, 0, 0x80, 52, 0, 0, 0]);
        assert_eq!(&i[32..44], &[8, 0, 0, 0, 0, 0x40, 0, 0, 3, 0, 0, 0]);
        assert_eq!(
            set_cmplt(7, 0),
            [5, 0, 0, 0x80, 16, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]
        );
        let caps = offload_caps(62780);
        assert_eq!((caps.len(), caps[0], caps[1]), (156, 0xa7, 3));
        assert_eq!(&caps[2..4], &[156, 0]);
        assert_eq!(
            rss_caps(8),
            [0x88, 2, 18, 0, 1, 7, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0, 128, 0]
        );
    }

    /// The RSS parameters `hn_rndis_conf_rss` sends: the 40-byte header,
    /// the 128-entry table at 40, the key at 552.
    #[test]
    fn rss_params_decode() {
        let mut b = vec![0u8; 592];
        b[0] = NDIS_OBJTYPE_RSS_PARAMS;
        b[1] = 2;
        b[2..4].copy_from_slice(&40u16.to_le_bytes());
        b[8..12].copy_from_slice(&(NDIS_HASH_IPV4 | NDIS_HASH_TCP_IPV4 | 1).to_le_bytes());
        b[12..14].copy_from_slice(&512u16.to_le_bytes());
        b[16..20].copy_from_slice(&40u32.to_le_bytes());
        b[20..22].copy_from_slice(&40u16.to_le_bytes());
        b[24..28].copy_from_slice(&552u32.to_le_bytes());
        for i in 0..128 {
            b[40 + 4 * i..44 + 4 * i].copy_from_slice(&((i % 4) as u32).to_le_bytes());
        }
        b[552] = 0x2c;
        let p = RssParams::decode(&b).unwrap();
        assert!(!p.disabled);
        assert_eq!(p.table.len(), 128);
        assert_eq!(&p.table[..5], &[0, 1, 2, 3, 0]);
        assert_eq!((p.key.len(), p.key[0]), (40, 0x2c));
        b[4] = NDIS_RSS_FLAG_DISABLE as u8;
        assert!(RssParams::decode(&b).unwrap().disabled);
        b[24..28].copy_from_slice(&560u32.to_le_bytes());
        assert!(RssParams::decode(&b).is_err());
    }

    /// A packet message as `hn_encap` builds it (hash value info, then a
    /// checksum request), and the host's own encoding read back.
    #[test]
    fn packet_messages() {
        let frame = [0xeeu8; 60];
        let m = packet_msg(
            &frame,
            &[
                Ppi {
                    ty: PPI_HASHVAL,
                    value: 2,
                },
                Ppi {
                    ty: PPI_CSUM,
                    value: TXCSUM_IPV4 | TXCSUM_IPCS,
                },
            ],
        );
        assert_eq!(m.len(), 44 + 32 + 60);
        assert_eq!(&m[8..12], &(68u32).to_le_bytes()); // dataoffset = 76 - 8
        assert_eq!(&m[28..32], &(36u32).to_le_bytes()); // pktinfooffset = 44 - 8
        let p = PacketMsg::decode(&m).unwrap();
        assert_eq!((p.len, p.data_off, p.data_len), (136, 76, 60));
        assert_eq!(p.ppi(PPI_HASHVAL), Some(2));
        assert_eq!(p.ppi(PPI_CSUM), Some(TXCSUM_IPV4 | TXCSUM_IPCS));
        assert_eq!(p.ppi(PPI_VLAN), None);
        let mut bad = m.clone();
        bad[12] = 200; // data past the length
        assert!(PacketMsg::decode(&bad).is_err());
        let mut bad = m.clone();
        bad[44] = 13; // per-packet info size not a multiple of 4
        assert!(PacketMsg::decode(&bad).is_err());
        let mut bad = m;
        bad[0] = 2;
        assert!(PacketMsg::decode(&bad).is_err());
    }
}

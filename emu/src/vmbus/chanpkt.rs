//! VMBus channel packets: what travels in a channel's ring buffers.
//!
//! Every packet starts with a 16-byte descriptor (type, header and total
//! length in 8-byte units, flags, transaction id); the ring adds an 8-byte
//! trailer after it (see [`super::ring`]). The guest sends in-band packets
//! (an NVSP message inline), GPA-direct packets (a scatter list of guest
//! pages, then the NVSP message) and completions (receive-buffer acks);
//! the host sends in-band notifications, completions and transfer-page
//! packets (ranges of the receive buffer).
//!
//! Layouts: DPDK `drivers/bus/vmbus/rte_vmbus_reg.h`, Linux
//! `include/linux/hyperv.h` (`vmpacket_descriptor`, `vmtransfer_page_*`,
//! `vmdata_gpa_direct`).

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const TYPE_INBAND: u16 = 0x0006;
/// Transfer-page packet: ranges of the receive buffer (host to guest).
pub const TYPE_RXBUF: u16 = 0x0007;
/// GPA-direct packet: a guest scatter list, then the message (guest to host).
pub const TYPE_GPA: u16 = 0x0009;
pub const TYPE_COMP: u16 = 0x000b;

/// The sender asks for a completion.
pub const FLAG_RC: u16 = 0x0001;

/// Packet lengths are counted in 8-byte units.
pub const ALIGN: usize = 8;

/// `struct vmbus_chanpkt_hdr`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct Header {
    pub ty: U16,
    /// Header length (descriptor plus type-specific part), 8-byte units.
    pub hlen: U16,
    /// Total length, 8-byte units.
    pub tlen: U16,
    pub flags: U16,
    pub xactid: U64,
}

pub const HEADER_LEN: usize = 16;

/// One range of a GPA-direct packet (`struct vmbus_gpa`): `len` bytes at
/// `ofs` in guest page `page` (page frame number of 4 KiB pages).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct Gpa {
    pub len: U32,
    pub ofs: U32,
    pub page: U64,
}

/// One range of a transfer-page packet (`struct vmbus_rxbuf_desc`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct RxRange {
    pub len: U32,
    pub ofs: U32,
}

/// A packet read from a ring, checked against its own lengths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    pub ty: u16,
    pub flags: u16,
    pub xactid: u64,
    /// The type-specific header bytes after the 16-byte descriptor.
    pub ext: Vec<u8>,
    /// The payload after the header (`tlen - hlen` units).
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketError {
    Short(usize),
    /// `hlen` below the descriptor or above `tlen`, or `tlen` past the bytes.
    BadLengths {
        hlen: u16,
        tlen: u16,
        have: usize,
    },
}

impl std::fmt::Display for PacketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacketError::Short(n) => write!(f, "channel packet of {n} bytes (under 16)"),
            PacketError::BadLengths { hlen, tlen, have } => write!(
                f,
                "channel packet lengths hlen {hlen} tlen {tlen} (8-byte units) do not fit {have} bytes"
            ),
        }
    }
}

impl Packet {
    /// Decodes a whole packet (descriptor included, trailer excluded).
    pub fn decode(b: &[u8]) -> Result<Packet, PacketError> {
        let (h, _) = Header::read_from_prefix(b).map_err(|_| PacketError::Short(b.len()))?;
        let hlen = usize::from(h.hlen.get()) * ALIGN;
        let tlen = usize::from(h.tlen.get()) * ALIGN;
        if hlen < HEADER_LEN || hlen > tlen || tlen > b.len() {
            return Err(PacketError::BadLengths {
                hlen: h.hlen.get(),
                tlen: h.tlen.get(),
                have: b.len(),
            });
        }
        Ok(Packet {
            ty: h.ty.get(),
            flags: h.flags.get(),
            xactid: h.xactid.get(),
            ext: b[HEADER_LEN..hlen].to_vec(),
            data: b[hlen..tlen].to_vec(),
        })
    }

    /// The ranges of a GPA-direct packet (`rsvd`, `gpa_cnt`, then the ranges).
    pub fn gpa_ranges(&self) -> Option<Vec<Gpa>> {
        let cnt = U32::read_from_bytes(self.ext.get(4..8)?).ok()?.get() as usize;
        let body = self.ext.get(8..8 + cnt.checked_mul(16)?)?;
        Some(
            body.chunks_exact(16)
                .map(|c| Gpa::read_from_bytes(c).expect("16-byte chunk"))
                .collect(),
        )
    }

    pub fn wants_completion(&self) -> bool {
        self.flags & FLAG_RC != 0
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Encodes a packet: descriptor, `ext` (type-specific header, padded to 8),
/// payload padded to 8. Lengths are in 8-byte units and must fit 16 bits.
pub fn encode(ty: u16, flags: u16, xactid: u64, ext: &[u8], data: &[u8]) -> Vec<u8> {
    let hlen = pad8(HEADER_LEN + ext.len());
    let tlen = hlen + pad8(data.len());
    assert!(
        tlen / ALIGN <= usize::from(u16::MAX),
        "channel packet too long"
    );
    let h = Header {
        ty: ty.into(),
        hlen: ((hlen / ALIGN) as u16).into(),
        tlen: ((tlen / ALIGN) as u16).into(),
        flags: flags.into(),
        xactid: xactid.into(),
    };
    let mut out = Vec::with_capacity(tlen);
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(ext);
    out.resize(hlen, 0);
    out.extend_from_slice(data);
    out.resize(tlen, 0);
    out
}

/// An in-band packet carrying `msg`.
pub fn inband(flags: u16, xactid: u64, msg: &[u8]) -> Vec<u8> {
    encode(TYPE_INBAND, flags, xactid, &[], msg)
}

/// A completion for transaction `xactid` carrying `msg`.
pub fn completion(xactid: u64, msg: &[u8]) -> Vec<u8> {
    encode(TYPE_COMP, 0, xactid, &[], msg)
}

/// A transfer-page packet: `ranges` of receive buffer `rxbuf_id`, then `msg`.
pub fn rxbuf(xactid: u64, rxbuf_id: u16, ranges: &[RxRange], msg: &[u8]) -> Vec<u8> {
    let mut ext = Vec::with_capacity(8 + ranges.len() * 8);
    ext.extend_from_slice(&rxbuf_id.to_le_bytes());
    ext.extend_from_slice(&[0, 0]);
    ext.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    for r in ranges {
        ext.extend_from_slice(r.as_bytes());
    }
    encode(TYPE_RXBUF, 0, xactid, &ext, msg)
}

/// A GPA-direct packet (what a guest sends; used by tests).
pub fn gpa_direct(xactid: u64, ranges: &[Gpa], msg: &[u8]) -> Vec<u8> {
    let mut ext = Vec::with_capacity(8 + ranges.len() * 16);
    ext.extend_from_slice(&[0, 0, 0, 0]);
    ext.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    for r in ranges {
        ext.extend_from_slice(r.as_bytes());
    }
    encode(TYPE_GPA, FLAG_RC, xactid, &ext, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transfer-page packet as DPDK's `hn_nvs_handle_rxbuf` reads it:
    /// descriptor, rxbuf_id 0xcafe, one range, then the 40-byte NVSP message.
    #[test]
    fn rxbuf_packet_golden() {
        let msg = [0xabu8; 40];
        let p = rxbuf(
            7,
            0xcafe,
            &[RxRange {
                len: 100.into(),
                ofs: 0x2000.into(),
            }],
            &msg,
        );
        let mut want = vec![
            0x07, 0x00, // type RXBUF
            0x04, 0x00, // hlen 32 bytes
            0x09, 0x00, // tlen 72 bytes
            0x00, 0x00, // flags
            7, 0, 0, 0, 0, 0, 0, 0, // xactid
            0xfe, 0xca, 0, 0, // rxbuf_id, rsvd
            1, 0, 0, 0, // rxbuf_cnt
            100, 0, 0, 0, 0x00, 0x20, 0, 0, // range: len, ofs
        ];
        want.extend_from_slice(&msg);
        assert_eq!(p, want);
        let d = Packet::decode(&p).unwrap();
        assert_eq!((d.ty, d.xactid, d.data.len()), (TYPE_RXBUF, 7, 40));
    }

    #[test]
    fn gpa_packet_round_trip_and_bad_lengths() {
        let g = Gpa {
            len: 52.into(),
            ofs: 0x10.into(),
            page: 0x7f00_1234u64.into(),
        };
        let p = gpa_direct(0, &[g], &[1, 2, 3, 4]);
        // descriptor 16 + rsvd/cnt 8 + one range 16 = 40 = 5 units; +8 data.
        assert_eq!(&p[2..6], &[5, 0, 6, 0]);
        let d = Packet::decode(&p).unwrap();
        assert!(d.wants_completion());
        assert_eq!(d.gpa_ranges().unwrap(), vec![g]);
        assert_eq!(&d.data[..4], &[1, 2, 3, 4]);
        let mut bad = p.clone();
        bad[2] = 1; // hlen below the descriptor
        assert!(matches!(
            Packet::decode(&bad),
            Err(PacketError::BadLengths { .. })
        ));
        let mut bad = p;
        bad[4] = 60; // tlen past the bytes
        assert!(Packet::decode(&bad).is_err());
        assert_eq!(Packet::decode(&[0; 8]), Err(PacketError::Short(8)));
    }
}

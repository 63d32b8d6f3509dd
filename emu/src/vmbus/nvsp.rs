//! NVSP, the network VSP protocol spoken over a synthetic NIC's channels.
//!
//! Every message starts with a 32-bit type. The guest negotiates a protocol
//! version, describes its NDIS (MTU, SR-IOV and VLAN capability), hands the
//! host its receive and send buffers (by GPADL handle, as `uio_hv_generic`
//! set them up), asks for sub-channels, and carries RNDIS messages (control
//! and data) in `RNDIS` messages. The host answers the requests that want a
//! completion, acknowledges RNDIS messages, and notifies the guest of the
//! VF it associates with the NIC (and of send-indirection tables).
//!
//! Layouts: DPDK `drivers/net/netvsc/hn_nvs.h`, Linux
//! `drivers/net/hyperv/hyperv_net.h` (`nvsp_message`). Fixed-size messages
//! are 40 bytes, as both send them.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const VERSION_1: u32 = 0x0000_0002;
pub const VERSION_2: u32 = 0x0003_0002;
pub const VERSION_4: u32 = 0x0004_0000;
pub const VERSION_5: u32 = 0x0005_0000;
pub const VERSION_6: u32 = 0x0006_0000;
pub const VERSION_61: u32 = 0x0006_0001;
/// Every version a host of this generation accepts, oldest first.
pub const VERSIONS: [u32; 6] = [
    VERSION_1, VERSION_2, VERSION_4, VERSION_5, VERSION_6, VERSION_61,
];

pub const RXBUF_SIG: u16 = 0xcafe;
pub const CHIM_SIG: u16 = 0xface;
pub const CHIM_IDX_INVALID: u32 = 0xffff_ffff;

pub const RNDIS_MTYPE_DATA: u32 = 0;
pub const RNDIS_MTYPE_CTRL: u32 = 1;

pub const STATUS_OK: u32 = 1;
pub const STATUS_FAILED: u32 = 2;

pub const TYPE_INIT: u32 = 1;
pub const TYPE_INIT_RESP: u32 = 2;
pub const TYPE_NDIS_INIT: u32 = 100;
pub const TYPE_RXBUF_CONN: u32 = 101;
pub const TYPE_RXBUF_CONNRESP: u32 = 102;
pub const TYPE_RXBUF_DISCONN: u32 = 103;
pub const TYPE_CHIM_CONN: u32 = 104;
pub const TYPE_CHIM_CONNRESP: u32 = 105;
pub const TYPE_CHIM_DISCONN: u32 = 106;
pub const TYPE_RNDIS: u32 = 107;
pub const TYPE_RNDIS_ACK: u32 = 108;
pub const TYPE_NDIS_CONF: u32 = 125;
pub const TYPE_VFASSOC_NOTE: u32 = 128;
pub const TYPE_SET_DATAPATH: u32 = 129;
pub const TYPE_SUBCH_REQ: u32 = 133;
pub const TYPE_TXTBL_NOTE: u32 = 134;

pub const NDIS_CONF_SRIOV: u64 = 0x0004;
pub const NDIS_CONF_VLAN: u64 = 0x0008;

pub const DATAPATH_SYNTHETIC: u32 = 0;
pub const DATAPATH_VF: u32 = 1;

pub const SUBCH_OP_ALLOC: u32 = 1;

/// The size of a fixed NVSP message.
pub const MSG_LEN: usize = 40;

macro_rules! wire_struct {
    ($(#[$m:meta])* $name:ident { $($f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
        #[repr(C)]
        pub struct $name { $(pub $f: $t),* }
    };
}

wire_struct!(
    /// `NVS_TYPE_INIT`: the guest proposes one version (min = max).
    Init { ty: U32, ver_min: U32, ver_max: U32, rsvd: [u8; 28] }
);
wire_struct!(InitResp {
    ty: U32,
    ver: U32,
    rsvd: U32,
    status: U32,
    pad: [u8; 24]
});
wire_struct!(
    /// `NVS_TYPE_NDIS_CONF` (no response): MTU including the Ethernet header.
    NdisConf { ty: U32, mtu: U32, rsvd: U32, caps: U64, rsvd1: [u8; 20] }
);
wire_struct!(
    /// `NVS_TYPE_NDIS_INIT` (no response).
    NdisInit { ty: U32, ndis_major: U32, ndis_minor: U32, rsvd: [u8; 28] }
);
wire_struct!(
    /// `NVS_TYPE_RXBUF_CONN` / `NVS_TYPE_CHIM_CONN`: a buffer by GPADL.
    BufConn { ty: U32, gpadl: U32, sig: U16, rsvd: [u8; 30] }
);
wire_struct!(RxbufSection {
    start: U32,
    slotsz: U32,
    slotcnt: U32,
    end: U32
});
wire_struct!(RxbufConnResp {
    ty: U32,
    status: U32,
    nsect: U32,
    sect: RxbufSection,
    pad: [u8; 12]
});
wire_struct!(ChimConnResp {
    ty: U32,
    status: U32,
    sectsz: U32,
    pad: [u8; 28]
});
wire_struct!(
    /// `NVS_TYPE_RNDIS`: an RNDIS message in the send buffer section
    /// `chim_idx` (`chim_sz` bytes) or in the packet's GPA ranges.
    Rndis { ty: U32, mtype: U32, chim_idx: U32, chim_sz: U32, rsvd: [u8; 24] }
);
wire_struct!(RndisAck {
    ty: U32,
    status: U32,
    rsvd: [u8; 32]
});
wire_struct!(
    /// `NVS_TYPE_VFASSOC_NOTE`: the host (de)associates a VF with the NIC.
    VfAssoc { ty: U32, allocated: U32, serial: U32, pad: [u8; 28] }
);
wire_struct!(SetDatapath {
    ty: U32,
    active_path: U32,
    rsvd: [u8; 32]
});
wire_struct!(SubchReq {
    ty: U32,
    op: U32,
    nsubch: U32,
    rsvd: [u8; 28]
});
wire_struct!(SubchResp {
    ty: U32,
    status: U32,
    nsubch: U32,
    rsvd: [u8; 28]
});

/// A message from the guest, decoded (fails closed: short or unknown
/// messages are `Unknown`/`Short`, never guessed at).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestMsg {
    Init(Init),
    NdisConf(NdisConf),
    NdisInit(NdisInit),
    RxbufConn(BufConn),
    RxbufDisconn,
    ChimConn(BufConn),
    ChimDisconn,
    Rndis(Rndis),
    /// A receive-buffer acknowledgement (in a completion packet).
    RndisAck(RndisAck),
    SetDatapath(SetDatapath),
    SubchReq(SubchReq),
    Unknown(u32),
    Short {
        ty: Option<u32>,
        len: usize,
    },
}

fn take<T: FromBytes + KnownLayout + Immutable>(b: &[u8], ty: u32) -> Result<T, GuestMsg> {
    T::read_from_prefix(b)
        .map(|(v, _)| v)
        .map_err(|_| GuestMsg::Short {
            ty: Some(ty),
            len: b.len(),
        })
}

impl GuestMsg {
    pub fn decode(b: &[u8]) -> GuestMsg {
        let Some(ty) = b
            .get(..4)
            .map(|t| u32::from_le_bytes(t.try_into().unwrap()))
        else {
            return GuestMsg::Short {
                ty: None,
                len: b.len(),
            };
        };
        let r = match ty {
            TYPE_INIT => take(b, ty).map(GuestMsg::Init),
            TYPE_NDIS_CONF => take(b, ty).map(GuestMsg::NdisConf),
            TYPE_NDIS_INIT => take(b, ty).map(GuestMsg::NdisInit),
            TYPE_RXBUF_CONN => take(b, ty).map(GuestMsg::RxbufConn),
            TYPE_RXBUF_DISCONN => Ok(GuestMsg::RxbufDisconn),
            TYPE_CHIM_CONN => take(b, ty).map(GuestMsg::ChimConn),
            TYPE_CHIM_DISCONN => Ok(GuestMsg::ChimDisconn),
            TYPE_RNDIS => take(b, ty).map(GuestMsg::Rndis),
            TYPE_RNDIS_ACK => take(b, ty).map(GuestMsg::RndisAck),
            TYPE_SET_DATAPATH => take(b, ty).map(GuestMsg::SetDatapath),
            TYPE_SUBCH_REQ => take(b, ty).map(GuestMsg::SubchReq),
            other => Ok(GuestMsg::Unknown(other)),
        };
        r.unwrap_or_else(|e| e)
    }

    /// The name used in counters and logs.
    pub fn name(&self) -> String {
        match self {
            GuestMsg::Init(_) => "init".into(),
            GuestMsg::NdisConf(_) => "ndis_conf".into(),
            GuestMsg::NdisInit(_) => "ndis_init".into(),
            GuestMsg::RxbufConn(_) => "rxbuf_conn".into(),
            GuestMsg::RxbufDisconn => "rxbuf_disconn".into(),
            GuestMsg::ChimConn(_) => "chim_conn".into(),
            GuestMsg::ChimDisconn => "chim_disconn".into(),
            GuestMsg::Rndis(_) => "rndis".into(),
            GuestMsg::RndisAck(_) => "rndis_ack".into(),
            GuestMsg::SetDatapath(_) => "set_datapath".into(),
            GuestMsg::SubchReq(_) => "subch_req".into(),
            GuestMsg::Unknown(t) => format!("unknown_{t}"),
            GuestMsg::Short { ty, .. } => format!("short_{}", ty.unwrap_or(0)),
        }
    }
}

pub fn init_resp(status: u32) -> InitResp {
    InitResp {
        ty: TYPE_INIT_RESP.into(),
        status: status.into(),
        ..Default::default()
    }
}

pub fn rxbuf_connresp(status: u32, slotsz: u32, slotcnt: u32) -> RxbufConnResp {
    RxbufConnResp {
        ty: TYPE_RXBUF_CONNRESP.into(),
        status: status.into(),
        nsect: 1.into(),
        sect: RxbufSection {
            start: 0.into(),
            slotsz: slotsz.into(),
            slotcnt: slotcnt.into(),
            end: (slotsz * slotcnt).into(),
        },
        ..Default::default()
    }
}

pub fn chim_connresp(status: u32, sectsz: u32) -> ChimConnResp {
    ChimConnResp {
        ty: TYPE_CHIM_CONNRESP.into(),
        status: status.into(),
        sectsz: sectsz.into(),
        ..Default::default()
    }
}

pub fn rndis(mtype: u32) -> Rndis {
    Rndis {
        ty: TYPE_RNDIS.into(),
        mtype: mtype.into(),
        chim_idx: CHIM_IDX_INVALID.into(),
        chim_sz: 0.into(),
        ..Default::default()
    }
}

pub fn rndis_ack(status: u32) -> RndisAck {
    RndisAck {
        ty: TYPE_RNDIS_ACK.into(),
        status: status.into(),
        ..Default::default()
    }
}

pub fn vf_assoc(allocated: bool, serial: u32) -> VfAssoc {
    VfAssoc {
        ty: TYPE_VFASSOC_NOTE.into(),
        allocated: u32::from(allocated).into(),
        serial: serial.into(),
        ..Default::default()
    }
}

pub fn subch_resp(status: u32, nsubch: u32) -> SubchResp {
    SubchResp {
        ty: TYPE_SUBCH_REQ.into(),
        status: status.into(),
        nsubch: nsubch.into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// The messages as DPDK's netvsc builds them (hn_nvs.c), byte by byte.
    #[test]
    fn guest_messages_decode() {
        let mut init = vec![1, 0, 0, 0, 0x01, 0x00, 0x06, 0x00, 0x01, 0x00, 0x06, 0x00];
        init.resize(40, 0);
        match GuestMsg::decode(&init) {
            GuestMsg::Init(m) => {
                assert_eq!((m.ver_min.get(), m.ver_max.get()), (VERSION_61, VERSION_61))
            }
            m => panic!("{m:?}"),
        }
        // NDIS config: MTU 1514, caps VLAN | SRIOV at offset 12.
        let mut conf = vec![
            125, 0, 0, 0, 0xea, 0x05, 0, 0, 0, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0,
        ];
        conf.resize(40, 0);
        match GuestMsg::decode(&conf) {
            GuestMsg::NdisConf(c) => {
                assert_eq!(c.mtu.get(), 1514);
                assert_eq!(c.caps.get(), NDIS_CONF_SRIOV | NDIS_CONF_VLAN);
            }
            m => panic!("{m:?}"),
        }
        // RXBUF connect: GPADL 0x1234, signature 0xcafe at offset 8.
        let mut conn = vec![101, 0, 0, 0, 0x34, 0x12, 0, 0, 0xfe, 0xca];
        conn.resize(40, 0);
        match GuestMsg::decode(&conn) {
            GuestMsg::RxbufConn(c) => assert_eq!((c.gpadl.get(), c.sig.get()), (0x1234, RXBUF_SIG)),
            m => panic!("{m:?}"),
        }
        // A data RNDIS message in send section 3, 0x180 bytes.
        let mut r = vec![107, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0x80, 0x01, 0, 0];
        r.resize(40, 0);
        match GuestMsg::decode(&r) {
            GuestMsg::Rndis(m) => {
                assert_eq!(
                    (m.mtype.get(), m.chim_idx.get(), m.chim_sz.get()),
                    (0, 3, 0x180)
                )
            }
            m => panic!("{m:?}"),
        }
        assert_eq!(
            GuestMsg::decode(&[107, 0, 0, 0]),
            GuestMsg::Short {
                ty: Some(107),
                len: 4
            }
        );
        assert_eq!(
            GuestMsg::decode(&[1, 2]),
            GuestMsg::Short { ty: None, len: 2 }
        );
        assert_eq!(GuestMsg::decode(&[99, 0, 0, 0]), GuestMsg::Unknown(99));
    }

    #[test]
    fn host_messages_golden() {
        let r = rxbuf_connresp(STATUS_OK, 0x6c0, 100);
        assert_eq!(
            &r.as_bytes()[..28],
            &[
                102, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, // type, status, nsect
                0, 0, 0, 0, 0xc0, 0x06, 0, 0, 100, 0, 0, 0, 0x00, 0xa3, 0x02, 0 // section
            ]
        );
        assert_eq!(r.as_bytes().len(), MSG_LEN);
        let v = vf_assoc(true, 7);
        assert_eq!(&v.as_bytes()[..12], &[128, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(v.as_bytes().len(), MSG_LEN);
        assert_eq!(
            &chim_connresp(STATUS_OK, 6144).as_bytes()[..12],
            &[105, 0, 0, 0, 1, 0, 0, 0, 0, 0x18, 0, 0]
        );
        assert_eq!(
            &init_resp(STATUS_OK).as_bytes()[..16],
            &[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
        );
        assert_eq!(
            &subch_resp(STATUS_OK, 3).as_bytes()[..12],
            &[133, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0]
        );
        assert_eq!(
            &rndis_ack(STATUS_OK).as_bytes()[..8],
            &[108, 0, 0, 0, 1, 0, 0, 0]
        );
        for m in [
            init_resp(1).as_bytes().len(),
            chim_connresp(1, 1).as_bytes().len(),
            rndis(0).as_bytes().len(),
            rndis_ack(1).as_bytes().len(),
            subch_resp(1, 1).as_bytes().len(),
        ] {
            assert_eq!(m, MSG_LEN);
        }
    }
}

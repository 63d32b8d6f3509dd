//! Which plain send run a transmit queue uses: chosen at queue setup from
//! the CPU's flags and the queue's offloads, or forced (`NET_MANA_TX_PATH`).

use crate::ffi::consts;

/// The plain send run of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TxPath {
    Scalar,
    /// Four plain packets per step (`txq::avx2`), the scalar run for the
    /// rest.
    VectorAvx2,
}

/// What the application asked for: the best path, or one forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxPathWish {
    Auto,
    Scalar,
    Vector,
}

impl TxPathWish {
    /// The environment variable that forces a path (the tests run every
    /// transmit test under each).
    pub const ENV: &'static str = "NET_MANA_TX_PATH";

    fn unknown(shown: &str) -> String {
        format!(
            "{}={shown}: unknown transmit path (use auto, scalar or vector)",
            Self::ENV
        )
    }

    /// Parses `auto`, `scalar` or `vector`.
    pub fn parse(v: &str) -> Result<TxPathWish, String> {
        match v.trim() {
            "auto" => Ok(TxPathWish::Auto),
            "scalar" => Ok(TxPathWish::Scalar),
            "vector" => Ok(TxPathWish::Vector),
            other => Err(Self::unknown(other)),
        }
    }

    /// From the environment: `Auto` if the variable is unset.
    pub fn from_env() -> Result<TxPathWish, String> {
        match std::env::var(Self::ENV) {
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(TxPathWish::Auto),
            Err(std::env::VarError::NotUnicode(v)) => Err(Self::unknown(&format!("{v:?}"))),
        }
    }
}

/// The offloads whose packets ask for OOB bits the plain run does not
/// write: a queue with any of them sends such packets mostly, which the
/// vector step would only check and hand to the scalar run.
const PER_PACKET: u64 = consts::TX_OFFLOAD_VLAN_INSERT
    | consts::TX_OFFLOAD_IPV4_CKSUM
    | consts::TX_OFFLOAD_UDP_CKSUM
    | consts::TX_OFFLOAD_TCP_CKSUM
    | consts::TX_OFFLOAD_TCP_TSO;

impl TxPath {
    /// Whether this build and CPU can run the vector step.
    pub fn vector_available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2") && super::avx2::layout_fits()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The run a queue with `offloads` uses: the vector one where the CPU
    /// has it, unless `wish` forces the scalar one. Forcing the vector run
    /// on a CPU without it is an error; a queue with per-packet offloads
    /// (checksums, VLAN insertion, TSO) runs the scalar one whatever the
    /// wish.
    pub fn choose(wish: TxPathWish, offloads: u64) -> Result<TxPath, String> {
        let have = Self::vector_available();
        if wish == TxPathWish::Vector && !have {
            return Err(format!(
                "{}=vector: this CPU has no AVX2 (or the mbuf layout is not the one \
                 the vector transmit path reads); use auto or scalar",
                TxPathWish::ENV
            ));
        }
        Ok(
            if offloads & PER_PACKET == 0 && have && wish != TxPathWish::Scalar {
                TxPath::VectorAvx2
            } else {
                TxPath::Scalar
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_parses_its_three_values_and_refuses_others() {
        assert_eq!(TxPathWish::parse(" vector\n"), Ok(TxPathWish::Vector));
        assert_eq!(TxPathWish::parse("scalar"), Ok(TxPathWish::Scalar));
        assert_eq!(TxPathWish::parse("auto"), Ok(TxPathWish::Auto));
        assert_eq!(
            TxPathWish::parse("fast"),
            Err("NET_MANA_TX_PATH=fast: unknown transmit path (use auto, scalar or vector)".into())
        );
    }

    #[test]
    fn per_packet_offloads_and_the_scalar_wish_choose_the_scalar_run() {
        let have = TxPath::vector_available();
        let v = if have {
            TxPath::VectorAvx2
        } else {
            TxPath::Scalar
        };
        let free = consts::TX_OFFLOAD_MBUF_FAST_FREE | consts::TX_OFFLOAD_MULTI_SEGS;
        assert_eq!(TxPath::choose(TxPathWish::Auto, free), Ok(v));
        assert_eq!(TxPath::choose(TxPathWish::Scalar, 0), Ok(TxPath::Scalar));
        for o in [
            consts::TX_OFFLOAD_VLAN_INSERT,
            consts::TX_OFFLOAD_IPV4_CKSUM,
            consts::TX_OFFLOAD_UDP_CKSUM,
            consts::TX_OFFLOAD_TCP_CKSUM,
            consts::TX_OFFLOAD_TCP_TSO,
        ] {
            assert_eq!(TxPath::choose(TxPathWish::Auto, o), Ok(TxPath::Scalar));
        }
        if have {
            assert_eq!(
                TxPath::choose(TxPathWish::Vector, 0),
                Ok(TxPath::VectorAvx2)
            );
        } else {
            assert!(TxPath::choose(TxPathWish::Vector, 0).is_err());
        }
    }
}

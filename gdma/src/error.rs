//! Error types shared by every decoder and encoder in the crate.

use core::fmt;

/// Why a byte buffer or raw register value was rejected.
///
/// `what` is the C name of the hardware structure (kernel spelling, e.g.
/// `"mana_rxcomp_oob"`), `field` the field inside it, so a log line points
/// straight at the offending bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The buffer is shorter than the structure.
    TooShort {
        /// C name of the structure.
        what: &'static str,
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A reserved / must-be-zero field is not zero.
    ReservedNonZero {
        /// C name of the structure.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
    },
    /// The CQE type is not one of the values `mana_cqe_type` defines.
    UnknownCqeType {
        /// The raw 6-bit value.
        value: u8,
    },
    /// A field holds a value outside what the format allows (unknown enum
    /// member, impossible size, wrong completion kind, ...).
    InvalidField {
        /// C name of the structure.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
        /// What the field may hold.
        expected: &'static str,
    },
}

impl DecodeError {
    /// The field the error is about, if it names one.
    pub const fn field(&self) -> Option<&'static str> {
        match self {
            Self::TooShort { .. } => None,
            Self::ReservedNonZero { field, .. } | Self::InvalidField { field, .. } => Some(field),
            Self::UnknownCqeType { .. } => Some("cqe_type"),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { what, needed, got } => {
                write!(
                    f,
                    "{what}: buffer too short: need {needed} bytes, got {got}"
                )
            }
            Self::ReservedNonZero { what, field, value } => {
                write!(
                    f,
                    "{what}: reserved field `{field}` must be zero, is {value:#x}"
                )
            }
            Self::UnknownCqeType { value } => {
                write!(f, "mana_cqe_header: unknown cqe_type {value}")
            }
            Self::InvalidField {
                what,
                field,
                value,
                expected,
            } => write!(
                f,
                "{what}: field `{field}` = {value:#x} is invalid: expected {expected}"
            ),
        }
    }
}

/// Why a value could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncodeError {
    /// The value does not fit in the field's bit width.
    FieldOverflow {
        /// C name of the structure.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
        /// Largest value the field holds.
        max: u64,
    },
    /// The value fits but is not allowed (e.g. a WQE that exceeds the
    /// queue's maximum WQE size).
    InvalidValue {
        /// C name of the structure.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
        /// What the field may hold.
        expected: &'static str,
    },
    /// The output buffer is too small.
    BufferTooSmall {
        /// C name of the structure.
        what: &'static str,
        /// Bytes required.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::FieldOverflow {
                what,
                field,
                value,
                max,
            } => write!(
                f,
                "{what}: value {value:#x} does not fit field `{field}` (max {max:#x})"
            ),
            Self::InvalidValue {
                what,
                field,
                value,
                expected,
            } => write!(
                f,
                "{what}: field `{field}` = {value:#x} is invalid: expected {expected}"
            ),
            Self::BufferTooSmall { what, needed, got } => {
                write!(
                    f,
                    "{what}: output buffer too small: need {needed} bytes, got {got}"
                )
            }
        }
    }
}

impl core::error::Error for DecodeError {}
impl core::error::Error for EncodeError {}

/// Range check helper: `Ok(value)` if it fits in `bits`, else `FieldOverflow`.
#[inline]
pub(crate) const fn check_bits(
    what: &'static str,
    field: &'static str,
    value: u64,
    bits: u32,
) -> Result<u64, EncodeError> {
    let max = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    if value > max {
        Err(EncodeError::FieldOverflow {
            what,
            field,
            value,
            max,
        })
    } else {
        Ok(value)
    }
}

/// MBZ helper: `Err(ReservedNonZero)` if `value != 0`.
#[inline]
pub(crate) const fn mbz(
    what: &'static str,
    field: &'static str,
    value: u64,
) -> Result<(), DecodeError> {
    if value != 0 {
        Err(DecodeError::ReservedNonZero { what, field, value })
    } else {
        Ok(())
    }
}

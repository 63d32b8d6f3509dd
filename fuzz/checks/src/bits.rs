//! Reference readings of wire bits, written with plain shifts and masks
//! (independently of the `bitfield-struct` accessors the decoders use), and
//! the assertions every check makes about errors.

use gdma::{DecodeError, EncodeError};

/// Little-endian `u16` at `off`.
pub fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// Little-endian `u32` at `off`.
pub fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Little-endian `u64` at `off`.
pub fn le64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Bits `lo .. lo + width` of `v`.
pub const fn field(v: u64, lo: u32, width: u32) -> u64 {
    (v >> lo) & mask(width)
}

/// The low `width` bits set.
pub const fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    }
}

/// `bytes` padded with zeros (or cut) to `N` bytes.
pub fn padded<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    let n = bytes.len().min(N);
    a[..n].copy_from_slice(&bytes[..n]);
    a
}

/// A decode error names one of the fields the reference found wrong, and
/// its message is a sentence that starts with the structure's name.
#[track_caller]
pub fn assert_decode_err(
    e: &DecodeError,
    what: &str,
    wrong: &[&str],
    input: &dyn core::fmt::Debug,
) {
    let msg = e.to_string();
    assert!(
        msg.starts_with(what),
        "error {msg:?} does not name {what} (input {input:?})"
    );
    match e.field() {
        Some(f) => assert!(
            wrong.contains(&f),
            "error names field {f:?}, the reference found {wrong:?} wrong (input {input:?}): {msg}"
        ),
        None => assert!(
            matches!(e, DecodeError::TooShort { .. }) && wrong.contains(&"length"),
            "error without a field {e:?}, the reference found {wrong:?} wrong (input {input:?})"
        ),
    }
}

/// An encode error names one of `fields` (`"buffer"` for an output buffer
/// too small) and its message says which.
#[track_caller]
pub fn assert_encode_err(e: &EncodeError, fields: &[&str], input: &dyn core::fmt::Debug) {
    let field = match *e {
        EncodeError::FieldOverflow { field, .. } | EncodeError::InvalidValue { field, .. } => field,
        EncodeError::BufferTooSmall { .. } => "buffer",
    };
    assert!(
        fields.contains(&field),
        "encode error names {field:?}, expected one of {fields:?} (input {input:?}): {e}"
    );
    let msg = e.to_string();
    assert!(
        field == "buffer" || msg.contains(field),
        "message does not name {field}: {msg}"
    );
}

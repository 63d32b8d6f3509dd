//! Reading guest memory named by guest-physical page numbers.
//!
//! netvsc hands the host the IOVA of its RNDIS control messages and of the
//! mbufs it sends directly (GPA-direct packets, 4 KiB pages). The emulated
//! guest runs in the same process with `--iova-mode=va`, so an IOVA is a
//! virtual address of this process. The host reads it with
//! `process_vm_readv` on itself: a bogus address fails with `EFAULT`
//! instead of faulting the host, like a DMA to an unmapped page.

use super::chanpkt::Gpa;

/// Upper bound of one read (an LSO send of 64 KiB plus headers).
pub const MAX_READ: usize = 72 * 1024;

/// Copies the bytes of `ranges` (each within one 4 KiB page) in order.
pub fn read(ranges: &[Gpa]) -> Result<Vec<u8>, String> {
    let total: usize = ranges.iter().map(|g| g.len.get() as usize).sum();
    if total > MAX_READ {
        return Err(format!("GPA ranges of {total} bytes (above {MAX_READ})"));
    }
    let mut out = vec![0u8; total];
    let mut remote = Vec::with_capacity(ranges.len());
    for g in ranges {
        let (len, ofs, page) = (g.len.get() as usize, g.ofs.get() as usize, g.page.get());
        if ofs + len > 4096 {
            return Err(format!(
                "GPA range of {len} bytes at offset {ofs} crosses its page"
            ));
        }
        let addr = page
            .checked_mul(4096)
            .and_then(|a| a.checked_add(ofs as u64))
            .filter(|a| *a != 0 && *a < (1 << 47))
            .ok_or(format!(
                "GPA page {page:#x} is not an address of this process (is the guest using --iova-mode=va?)"
            ))?;
        remote.push(libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        });
    }
    if total == 0 {
        return Ok(out);
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: total,
    };
    let mut done = 0usize;
    // process_vm_readv takes at most IOV_MAX remote vectors per call.
    for chunk in remote.chunks(1024) {
        let want: usize = chunk.iter().map(|v| v.iov_len).sum();
        let local = libc::iovec {
            // SAFETY: `done + want <= total`: the chunks partition `remote`.
            iov_base: unsafe { local.iov_base.cast::<u8>().add(done) }.cast(),
            iov_len: want,
        };
        // SAFETY: the local vector covers `want` bytes of `out`; the kernel
        // checks the remote ones and fails with EFAULT instead of faulting.
        let n = unsafe {
            libc::process_vm_readv(
                libc::getpid(),
                &local,
                1,
                chunk.as_ptr(),
                chunk.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 || n as usize != want {
            return Err(format!(
                "reading {want} bytes of guest memory at {:p}: {}",
                chunk[0].iov_base,
                if n < 0 {
                    std::io::Error::last_os_error().to_string()
                } else {
                    format!("only {n} bytes")
                }
            ));
        }
        done += want;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpa_of(b: &[u8]) -> Vec<Gpa> {
        let mut v = Vec::new();
        let mut a = b.as_ptr() as usize;
        let end = a + b.len();
        while a < end {
            let n = (4096 - a % 4096).min(end - a);
            v.push(Gpa {
                len: (n as u32).into(),
                ofs: ((a % 4096) as u32).into(),
                page: ((a / 4096) as u64).into(),
            });
            a += n;
        }
        v
    }

    #[test]
    fn reads_across_pages_and_refuses_bad_addresses() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(read(&gpa_of(&data)).unwrap(), data);
        let bad = Gpa {
            len: 16.into(),
            ofs: 0.into(),
            page: 1.into(),
        };
        assert!(read(&[bad]).unwrap_err().contains("Bad address"));
        let cross = Gpa {
            len: 100.into(),
            ofs: 4090.into(),
            page: 5.into(),
        };
        assert!(read(&[cross]).unwrap_err().contains("crosses"));
    }
}

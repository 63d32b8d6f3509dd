//! MSI-X vectors: the eventfds QEMU hands over with `SET_IRQS`, one per
//! vector. Signalling one is the device's interrupt; QEMU applies the
//! guest's table (address, data, mask) and the pending bit.

use std::fs::File;
use std::io::Write;

/// The function's MSI-X vectors.
pub struct Interrupts {
    vectors: Vec<Option<File>>,
    /// Interrupts raised per vector (including those QEMU held as pending).
    pub raised: Vec<u64>,
    /// Interrupts that had no eventfd to go to (vector not enabled).
    pub lost: u64,
}

impl Interrupts {
    pub fn new(count: usize) -> Self {
        Interrupts {
            vectors: (0..count).map(|_| None).collect(),
            raised: vec![0; count],
            lost: 0,
        }
    }

    pub fn count(&self) -> usize {
        self.vectors.len()
    }

    /// `SET_IRQS` with eventfds for vectors `start..start + count`; a vector
    /// without a descriptor in `fds` is disconnected.
    pub fn set(&mut self, start: u32, count: u32, fds: Vec<File>) -> Result<(), String> {
        let (start, count) = (start as usize, count as usize);
        if start + count > self.vectors.len() {
            return Err(format!(
                "SET_IRQS for vectors {start}..{} of {}",
                start + count,
                self.vectors.len()
            ));
        }
        let mut fds = fds.into_iter();
        for v in &mut self.vectors[start..start + count] {
            *v = fds.next();
        }
        Ok(())
    }

    /// Disconnects every vector (`SET_IRQS` with count 0, or a reset).
    pub fn clear(&mut self) {
        self.vectors.iter_mut().for_each(|v| *v = None);
    }

    /// Raises vector `v`. Returns false if the vector is not connected.
    pub fn raise(&mut self, v: usize) -> bool {
        match self.vectors.get_mut(v) {
            Some(Some(f)) => {
                self.raised[v] += 1;
                // An eventfd write of 1 only fails if the counter would
                // overflow, which a pending interrupt never reaches.
                let _ = f.write_all(&1u64.to_ne_bytes());
                true
            }
            _ => {
                self.lost += 1;
                false
            }
        }
    }
}

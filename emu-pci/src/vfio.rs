//! The vfio-user server side: QEMU connects over a unix socket and forwards
//! the guest's configuration-space and BAR accesses, shares guest memory
//! (`DMA_MAP` with memfds) and hands over one eventfd per MSI-X vector.
//! Built on the rust-vmm `vfio-user` crate's server, which runs the
//! protocol on the calling thread; every callback takes the device lock.

use crate::device::Device;
use crate::pci::config::CONFIG_SIZE;
use crate::pci::{BAR0_SIZE, BAR2_SIZE, MSIX_VECTORS};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_BAR0_REGION_INDEX,
    VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
    VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{IrqInfo, Server, ServerBackend, ServerRegion};

/// The device as the threads share it: the vfio-user thread (on which the
/// guest's vCPUs wait) goes first; the data thread steps aside while it
/// waits, since a mutex is not fair and a busy data thread could otherwise
/// take the lock back again and again while the guest stalls.
#[derive(Clone)]
pub struct Shared(Arc<Inner>);

struct Inner {
    dev: Mutex<Device>,
    urgent: AtomicU32,
}

impl Shared {
    pub fn new(d: Device) -> Shared {
        Shared(Arc::new(Inner {
            dev: Mutex::new(d),
            urgent: AtomicU32::new(0),
        }))
    }
}

/// Takes the device for the VMM's requests (and inspection).
pub fn lock(d: &Shared) -> MutexGuard<'_, Device> {
    d.0.urgent.fetch_add(1, Ordering::AcqRel);
    let g = d.0.dev.lock().unwrap_or_else(|e| e.into_inner());
    d.0.urgent.fetch_sub(1, Ordering::AcqRel);
    g
}

/// Takes the device for background work, after any [`lock`] waiting.
pub fn lock_background(d: &Shared) -> MutexGuard<'_, Device> {
    while d.0.urgent.load(Ordering::Acquire) > 0 {
        std::thread::yield_now();
    }
    d.0.dev.lock().unwrap_or_else(|e| e.into_inner())
}

fn regions() -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let size = match index {
                VFIO_PCI_BAR0_REGION_INDEX => BAR0_SIZE,
                VFIO_PCI_BAR2_REGION_INDEX => BAR2_SIZE,
                VFIO_PCI_CONFIG_REGION_INDEX => CONFIG_SIZE as u64,
                _ => 0,
            };
            let flags = if size > 0 {
                VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
            } else {
                0
            };
            ServerRegion {
                region_info: vfio_region_info {
                    argsz: std::mem::size_of::<vfio_region_info>() as u32,
                    index,
                    size,
                    flags,
                    ..Default::default()
                },
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

fn irqs() -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| {
            if index == VFIO_PCI_MSIX_IRQ_INDEX {
                IrqInfo {
                    index,
                    count: MSIX_VECTORS as u32,
                    flags: VFIO_IRQ_INFO_EVENTFD,
                }
            } else {
                IrqInfo {
                    index,
                    count: 0,
                    flags: 0,
                }
            }
        })
        .collect()
}

/// Listens on `socket` (which must not exist) for one vfio-user client.
pub fn listen(socket: &Path) -> io::Result<Server> {
    Server::new(socket, true, irqs(), regions())
        .map_err(|e| io::Error::other(format!("vfio-user socket {}: {e}", socket.display())))
}

/// Serves one client until it disconnects.
pub fn serve(server: &Server, dev: Shared) -> io::Result<()> {
    let mut b = Backend { dev };
    server
        .run(&mut b)
        .map_err(|e| io::Error::other(format!("vfio-user: {e}")))
}

struct Backend {
    dev: Shared,
}

fn bad(msg: String) -> io::Error {
    log::warn!("{msg}");
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> io::Result<()> {
        let mut d = lock(&self.dev);
        let off = offset as usize;
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => d.config.read(off, data),
            VFIO_PCI_BAR0_REGION_INDEX if offset + data.len() as u64 <= BAR0_SIZE => {
                d.bar0_read(off, data)
            }
            // BAR2 holds the MSI-X table and PBA, which QEMU emulates.
            VFIO_PCI_BAR2_REGION_INDEX if offset + data.len() as u64 <= BAR2_SIZE => data.fill(0),
            _ => {
                return Err(bad(format!(
                    "read of region {region} at {offset:#x}+{}",
                    data.len()
                )))
            }
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut d = lock(&self.dev);
        let off = offset as usize;
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => d.config.write(off, data),
            VFIO_PCI_BAR0_REGION_INDEX if offset + data.len() as u64 <= BAR0_SIZE => {
                d.bar0_write(off, data)
            }
            VFIO_PCI_BAR2_REGION_INDEX if offset + data.len() as u64 <= BAR2_SIZE => {}
            _ => {
                return Err(bad(format!(
                    "write of region {region} at {offset:#x}+{}",
                    data.len()
                )))
            }
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        _flags: vfio_user::DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> io::Result<()> {
        let d = lock(&self.dev);
        match fd {
            Some(f) => {
                d.mem.map(address, size, &f, offset)?;
                log::debug!("DMA map {address:#x}+{size:#x} (file offset {offset:#x})");
            }
            // Memory QEMU cannot share (ROMs, MMIO): the device cannot
            // reach it, as if an IOMMU did not map it.
            None => {
                log::debug!("DMA map {address:#x}+{size:#x} without a descriptor: not reachable")
            }
        }
        Ok(())
    }

    fn dma_unmap(
        &mut self,
        _flags: vfio_user::DmaUnmapFlags,
        address: u64,
        size: u64,
    ) -> io::Result<()> {
        lock(&self.dev).mem.unmap(address, size);
        log::debug!("DMA unmap {address:#x}+{size:#x}");
        Ok(())
    }

    fn reset(&mut self) -> io::Result<()> {
        log::info!("device reset");
        lock(&self.dev).reset();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        if index != VFIO_PCI_MSIX_IRQ_INDEX {
            return Err(bad(format!(
                "SET_IRQS for IRQ index {index}: only MSI-X exists"
            )));
        }
        let mut d = lock(&self.dev);
        if flags & VFIO_IRQ_SET_ACTION_TRIGGER == 0 {
            // Masking is QEMU's (it emulates the MSI-X table).
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 && count == 0 {
            d.irqs.clear();
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_EVENTFD != 0 {
            return d.irqs.set(start, count, fds).map_err(bad);
        }
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 {
            for v in start..start + count {
                d.irqs.raise(v as usize);
            }
            return Ok(());
        }
        Err(bad(format!("SET_IRQS flags {flags:#x} not supported")))
    }
}

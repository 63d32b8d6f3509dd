//! A running function: the vfio-user server thread (region accesses, DMA
//! maps, interrupts, and everything a doorbell triggers) and the data
//! thread, which waits on the port's host backend and runs the device
//! model when frames arrive.

use crate::device::{Device, DeviceConfig};
use crate::vfio::{self, lock, lock_background, Shared};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Function {
    pub dev: Shared,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<io::Result<()>>>,
    data: Option<JoinHandle<()>>,
}

impl Function {
    /// Creates the device and listens on `socket` (which must not exist)
    /// for the VMM.
    pub fn start(cfg: DeviceConfig, socket: &Path) -> io::Result<Function> {
        let dev = Shared::new(Device::new(cfg)?);
        let server = vfio::listen(socket)?;
        let d = dev.clone();
        let server = std::thread::Builder::new()
            .name("mana-pci-vfio".into())
            .spawn(move || {
                let r = vfio::serve(&server, d);
                match &r {
                    Ok(()) => log::info!("vfio-user client disconnected"),
                    Err(e) => log::error!("vfio-user server stopped: {e}"),
                }
                r
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let (d, s) = (dev.clone(), stop.clone());
        let fds = lock(&dev).net.backend_fds();
        let data = std::thread::Builder::new()
            .name("mana-pci-data".into())
            .spawn(move || data_thread(d, s, fds))?;
        Ok(Function {
            dev,
            stop,
            server: Some(server),
            data: Some(data),
        })
    }

    /// Serves until the VMM disconnects, then stops the data thread.
    pub fn wait(&mut self) -> io::Result<()> {
        let r = match self.server.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("vfio-user thread panicked"))),
            None => Ok(()),
        };
        self.stop();
        r
    }

    /// Stops the data thread; the server thread ends when its client goes
    /// (a VMM that is gone, or never came, is not waited for).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.data.take() {
            let _ = h.join();
        }
        if self.server.as_ref().is_some_and(|h| h.is_finished()) {
            let _ = self.server.take().map(|h| h.join());
        }
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.data.take() {
            let _ = h.join();
        }
        // The server thread ends when its client goes; it is not joined
        // here (a VMM that never connected would block the drop).
    }
}

fn data_thread(dev: Shared, stop: Arc<AtomicBool>, fds: Vec<i32>) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let did = lock_background(&dev).net_run();
        if did {
            continue;
        }
        if pfds.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        // SAFETY: `pfds` is a valid array of pollfd of the given length. The
        // descriptors are the device model's sockets; this thread holds a
        // clone of the shared device, so they stay open while it polls.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 2) };
    }
}

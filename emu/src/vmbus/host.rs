//! The VMBus host: every synthetic NIC of the configuration and the thread
//! that serves them (Hyper-V's side of the channels). It polls the rings
//! (the guest signals through the monitor page, which cannot wake anyone),
//! briefly spinning after work, then sleeping up to 200 µs; frames from the
//! wire wake it through an eventfd.

use super::netvsp::Nic;
use super::vswitch::Link;
use super::NetvscReport;
use crate::config::Config;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct VmbusHost {
    pub nics: Vec<Arc<Nic>>,
    link: Arc<Link>,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl VmbusHost {
    /// Creates the NICs of `cfg.netvsc` (their memory and sysfs trees) and
    /// starts the host thread.
    pub fn start(cfg: &Config, link: Arc<Link>) -> io::Result<Arc<VmbusHost>> {
        let root = cfg.options.sysfs_root.clone();
        super::sysfs::create(&root, &cfg.netvsc)?;
        let nics = cfg
            .netvsc
            .iter()
            .enumerate()
            .map(|(i, n)| Nic::new(i, n.clone(), root.clone(), link.clone()).map(Arc::new))
            .collect::<io::Result<Vec<_>>>()?;
        let host = Arc::new(VmbusHost {
            nics,
            link,
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        });
        let h = host.clone();
        let t = std::thread::Builder::new()
            .name("mana-emu-vmbus".into())
            .spawn(move || h.run())?;
        *host.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        super::interpose::set_host(&host);
        // DPDK secondaries of this process find the host through this.
        super::secondary::announce(&root)?;
        Ok(host)
    }

    fn run(&self) {
        let wake = self.link.host_wake.as_raw_fd();
        let mut idle = 0u32;
        while !self.stop.load(Ordering::Acquire) {
            let mut did = false;
            for n in &self.nics {
                did |= n.poll();
            }
            if did {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if idle < 64 {
                std::hint::spin_loop();
                continue;
            }
            let busy = self.nics.iter().any(|n| n.busy());
            let timeout = if busy { 0 } else { 1 };
            let mut pfd = libc::pollfd {
                fd: wake,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll on one valid descriptor.
            unsafe { libc::poll(&mut pfd, 1, timeout) };
            if pfd.revents & libc::POLLIN != 0 {
                drain(wake);
            } else if busy {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                // The guest's rings are polled at least every ~1.2 ms.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        // SAFETY: an 8-byte write to our eventfd.
        unsafe {
            libc::write(
                self.link.host_wake.as_raw_fd(),
                1u64.to_ne_bytes().as_ptr().cast(),
                8,
            )
        };
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }

    /// The NIC behind `/dev/uio<n>`.
    pub fn uio(&self, n: usize) -> Option<&Arc<Nic>> {
        self.nics.get(n)
    }

    /// The NIC whose `/dev/uioN` descriptor has this identity.
    pub fn uio_by_file(&self, id: (u64, u64)) -> Option<&Arc<Nic>> {
        self.nics.iter().find(|n| n.uio_id == id)
    }

    pub fn by_uuid(&self, uuid: &str) -> Option<&Arc<Nic>> {
        self.nics.iter().find(|n| n.cfg.uuid() == uuid)
    }

    pub fn reports(&self) -> Vec<NetvscReport> {
        self.nics.iter().map(|n| n.report()).collect()
    }
}

fn drain(fd: RawFd) {
    let mut b = [0u8; 8];
    // SAFETY: reading the eventfd counter into an 8-byte buffer.
    unsafe { libc::read(fd, b.as_mut_ptr().cast(), 8) };
}

//! The virtual switch port a synthetic NIC shares with its VF.
//!
//! On Azure the synthetic NIC and the MANA VF are two doors to one vPort:
//! the same MAC, the same wire. Frames from the wire go to the VF once the
//! guest switched the data path to it (and the VF can take them), else to
//! the synthetic NIC; frames either door sends go out on the one wire.
//!
//! The MANA device thread calls [`Vswitch::divert`] for every frame that
//! arrives for a port and [`Vswitch::take_to_wire`] once per pass; the VMBus
//! host thread takes diverted frames with [`NicLink::take_rx`] and sends
//! with [`Link::to_wire`]. Lock order: the device's state, then these
//! queues; the host never holds a queue while waiting for the device.

use super::config::NetvscConfig;
use super::host::VmbusHost;
use crate::config::Config;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Frames waiting for a synthetic NIC beyond this are dropped (as a full
/// host queue would).
const RX_QUEUE_MAX: usize = 65536;

/// A hot-plug event of a VF's PCI function, for the VMBus host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VfEvent {
    Removed,
    Added,
}

/// What the MANA side and the VMBus host share about one synthetic NIC.
pub struct NicLink {
    /// Index of the MANA port (device state) whose wire the NIC shares.
    pub port: usize,
    /// PCI address of the VF's adapter.
    pub vf_pci: String,
    /// The guest switched the data path to the VF.
    pub vf_datapath: AtomicBool,
    /// The guest's NetVSC driver has the NIC (RNDIS initialized): until
    /// then, as with the kernel's driver holding it, frames go to the VF.
    pub attached: AtomicBool,
    /// The VF's PCI function is present.
    pub vf_present: AtomicBool,
    rx: Mutex<VecDeque<Vec<u8>>>,
    events: Mutex<Vec<VfEvent>>,
    pub rx_queue_drops: AtomicU64,
    pub to_vf: AtomicU64,
}

impl NicLink {
    /// Frames diverted to the NIC, oldest first (at most `max`).
    pub fn take_rx(&self, max: usize) -> Vec<Vec<u8>> {
        let mut q = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let n = q.len().min(max);
        q.drain(..n).collect()
    }

    /// Puts back frames the NIC could not take yet (no receive buffer).
    pub fn put_back(&self, frames: Vec<Vec<u8>>) {
        let mut q = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        for f in frames.into_iter().rev() {
            q.push_front(f);
        }
    }

    pub fn rx_pending(&self) -> usize {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn take_events(&self) -> Vec<VfEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The switch: one link per synthetic NIC, and the frames they send.
pub struct Link {
    pub nics: Vec<NicLink>,
    to_wire: Mutex<Vec<(usize, Vec<u8>)>>,
    to_wire_pending: AtomicBool,
    /// Wakes the MANA device thread (its eventfd).
    device_wake: RawFd,
    /// Wakes the VMBus host thread.
    pub(crate) host_wake: Arc<std::os::fd::OwnedFd>,
}

fn kick(fd: RawFd) {
    // SAFETY: an 8-byte write to an eventfd from a valid buffer.
    unsafe { libc::write(fd, 1u64.to_ne_bytes().as_ptr().cast(), 8) };
}

impl Link {
    /// Sends `frame` out on the wire of MANA port `port`.
    pub fn to_wire(&self, port: usize, frame: Vec<u8>) {
        self.to_wire
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((port, frame));
        self.to_wire_pending.store(true, Ordering::Release);
        kick(self.device_wake);
    }

    fn wake_host(&self) {
        use std::os::fd::AsRawFd;
        kick(self.host_wake.as_raw_fd());
    }
}

/// Held by the MANA device state; empty (and free) without `[[netvsc]]`.
#[derive(Default)]
pub struct Vswitch {
    link: Option<Arc<Link>>,
    host: Option<Arc<VmbusHost>>,
}

impl Vswitch {
    /// Builds the links of `cfg.netvsc` (MANA ports found by MAC) and starts
    /// the VMBus host. `device_wake` is the device thread's eventfd.
    pub fn new(
        cfg: &Config,
        port_macs: &[[u8; 6]],
        device_wake: RawFd,
    ) -> std::io::Result<Vswitch> {
        if cfg.netvsc.is_empty() {
            return Ok(Vswitch::default());
        }
        let mut nics = Vec::new();
        for n in &cfg.netvsc {
            let mac = crate::config::parse_mac(&n.mac)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            let port = port_macs.iter().position(|m| *m == mac).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("netvsc {}: no MANA port with this MAC", n.mac),
                )
            })?;
            let vf_pci = vf_pci_of(cfg, n);
            nics.push(NicLink {
                port,
                vf_pci,
                vf_datapath: AtomicBool::new(false),
                attached: AtomicBool::new(false),
                vf_present: AtomicBool::new(true),
                rx: Mutex::new(VecDeque::new()),
                events: Mutex::new(Vec::new()),
                rx_queue_drops: AtomicU64::new(0),
                to_vf: AtomicU64::new(0),
            });
        }
        let host_wake = Arc::new(crate::fd::eventfd()?);
        let link = Arc::new(Link {
            nics,
            to_wire: Mutex::new(Vec::new()),
            to_wire_pending: AtomicBool::new(false),
            device_wake,
            host_wake,
        });
        let host = VmbusHost::start(cfg, link.clone())?;
        Ok(Vswitch {
            link: Some(link),
            host: Some(host),
        })
    }

    pub fn host(&self) -> Option<Arc<VmbusHost>> {
        self.host.clone()
    }

    /// A frame arrived on the wire of MANA port `port`. Returns it when the
    /// VF takes it (`vf_ready`: the VF's function is present and receiving);
    /// else a synthetic NIC on that port takes it.
    pub fn divert(&self, port: usize, vf_ready: bool, frame: Vec<u8>) -> Option<Vec<u8>> {
        let Some(link) = &self.link else {
            return Some(frame);
        };
        let Some(nic) = link.nics.iter().find(|n| n.port == port) else {
            return Some(frame);
        };
        let attached = nic.attached.load(Ordering::Acquire);
        if !attached || (nic.vf_datapath.load(Ordering::Acquire) && vf_ready) {
            if attached {
                nic.to_vf.fetch_add(1, Ordering::Relaxed);
            }
            return Some(frame);
        }
        let mut q = nic.rx.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= RX_QUEUE_MAX {
            nic.rx_queue_drops.fetch_add(1, Ordering::Relaxed);
        } else {
            q.push_back(frame);
        }
        drop(q);
        link.wake_host();
        None
    }

    /// Frames the synthetic NICs sent, with the MANA port whose wire they
    /// go out on.
    pub fn take_to_wire(&self) -> Vec<(usize, Vec<u8>)> {
        match &self.link {
            Some(l) if l.to_wire_pending.swap(false, Ordering::AcqRel) => {
                std::mem::take(&mut *l.to_wire.lock().unwrap_or_else(|e| e.into_inner()))
            }
            _ => Vec::new(),
        }
    }

    /// The PCI function `pci` was hot-removed or hot-added.
    pub fn pci_event(&self, pci: &str, ev: VfEvent) {
        let Some(link) = &self.link else { return };
        for n in link.nics.iter().filter(|n| n.vf_pci == pci) {
            n.vf_present.store(ev == VfEvent::Added, Ordering::Release);
            n.events.lock().unwrap_or_else(|e| e.into_inner()).push(ev);
        }
        link.wake_host();
    }

    /// The synthetic NICs' counters.
    pub fn reports(&self) -> Vec<super::NetvscReport> {
        self.host.as_ref().map(|h| h.reports()).unwrap_or_default()
    }
}

impl Drop for Vswitch {
    fn drop(&mut self) {
        if let Some(h) = &self.host {
            h.stop();
        }
    }
}

/// The PCI address of the adapter owning the port with the NIC's MAC.
fn vf_pci_of(cfg: &Config, n: &NetvscConfig) -> String {
    cfg.adapters
        .iter()
        .find(|a| a.ports.iter().any(|p| p.mac == n.mac))
        .map(|a| a.pci.clone())
        .unwrap_or_default()
}

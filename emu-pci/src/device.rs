//! The PCI function as a whole: configuration space, guest memory, MSI-X,
//! and the GDMA device behind BAR0. Every field sits behind one mutex (see
//! [`crate::vfio`]); the vfio-user thread calls in for region accesses,
//! DMA maps and interrupt setup.

use crate::gdma::{DmaRegion, Eq, Hwc, IdPool, Registration};
use crate::interrupts::Interrupts;
use crate::ledger::Ledger;
use crate::mana::{Vport, WqObj};
use crate::memory::GuestMemory;
use crate::pci::config::ConfigSpace;
use crate::pci::MSIX_VECTORS;
use crate::rdma::Rdma;
use mana_emu::config::{AdapterConfig, BackendConfig, Config, PortConfig};
use mana_emu::device::State;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// What the device reports about itself.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// The vPort's MAC address.
    pub mac: [u8; 6],
    /// Largest frame payload the adapter carries (`adapter_mtu` minus the
    /// Ethernet header is the netdev's max MTU).
    pub adapter_mtu: u16,
    /// Send and receive queues per vPort.
    pub max_queues: u32,
    /// Entries of the vPort's RSS indirection table.
    pub indirection_entries: u32,
    /// The link speed `MANA_QUERY_LINK_CONFIG` reports (Mbit/s).
    pub link_speed_mbps: u32,
    /// Where the vPort's frames go on the host side.
    pub backend: BackendConfig,
    /// Hold received frames while the driver has no receive buffer posted,
    /// instead of dropping them as the hardware does (for tests whose
    /// counters must match exactly while a guest under software emulation
    /// drains slowly).
    pub lossless_rx: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            mac: [0x00, 0x15, 0x5d, 0x4e, 0x00, 0x01],
            adapter_mtu: 9014,
            max_queues: 16,
            indirection_entries: 64,
            link_speed_mbps: 100_000,
            backend: BackendConfig::Loopback,
            lossless_rx: false,
        }
    }
}

impl DeviceConfig {
    /// The configuration of the shared device model: one adapter with one
    /// port (the vPort), MAC-filtered as an Azure vPort is.
    pub fn model_config(&self) -> Config {
        let m = self.mac;
        Config {
            adapters: vec![AdapterConfig {
                pci: "0000:00:01.0".into(),
                numa_node: 0,
                ib_name: None,
                ib_name_after_reset: None,
                rnic_name: None,
                subsystem_vendor: 0x1414,
                subsystem_device: 0x0001,
                ports: vec![PortConfig {
                    mac: format!(
                        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                        m[0], m[1], m[2], m[3], m[4], m[5]
                    ),
                    ifname: None,
                    backend: self.backend.clone(),
                    mtu: u32::from(self.adapter_mtu) - 14,
                    kernel_if_up: false,
                    lossless_rx: self.lossless_rx,
                    mac_filter: true,
                    link_speed_mbps: -1,
                }],
            }],
            ..Default::default()
        }
    }
}

pub struct Device {
    pub cfg: DeviceConfig,
    pub config: ConfigSpace,
    /// The shared device model that moves the vPort's frames (queues,
    /// WQEs, CQEs, offloads, RSS, the host-side backend). Declared before
    /// `mem`: it holds regions of guest memory and is dropped first.
    pub net: State,
    pub mem: GuestMemory,
    pub irqs: Interrupts,
    /// The SMC window's 32 bytes.
    pub(crate) smc: [u8; gdma::SMC_APERTURE_SIZE],
    /// Low halves of doorbells written as two 32-bit stores, by BAR offset.
    pub(crate) split_db: BTreeMap<usize, u32>,
    pub hwc: Option<Hwc>,
    /// Event queues by id (the HWC's included).
    pub eqs: BTreeMap<u32, Eq>,
    pub regions: BTreeMap<u64, DmaRegion>,
    pub(crate) next_region: u64,
    pub(crate) eq_ids: IdPool,
    pub(crate) cq_ids: IdPool,
    pub(crate) wq_ids: IdPool,
    /// Registered GDMA devices by `gdma_dev_id` value.
    pub registered: BTreeMap<u32, Registration>,
    pub vport: Vport,
    /// WQ objects (`MANA_CREATE_WQ_OBJ`) by handle.
    pub wq_objs: BTreeMap<u64, WqObj>,
    pub(crate) next_wq_obj: u64,
    /// The RDMA function (`mana_ib`).
    pub rdma: Rdma,
    pub ledger: Ledger,
    /// Device-side problems seen (bad doorbells, malformed WQEs): count and
    /// the last one's description, by kind.
    pub errors: BTreeMap<String, (u64, String)>,
    /// Queues destroyed since their id was last handed out, as
    /// (doorbell page, kind, id): a doorbell for one of them is a late
    /// store to a queue the driver just tore down, ignored as hardware
    /// ignores it, and counted in `stale_doorbells`.
    pub(crate) retired: BTreeSet<(u32, QueueKind, u32)>,
    pub stale_doorbells: u64,
    /// The request being answered succeeded with more to come
    /// (`GDMA_STATUS_MORE_ENTRIES`): set by its handler, taken by the
    /// answer.
    pub(crate) more_entries: bool,
}

/// The kinds of queue a doorbell names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QueueKind {
    Sq,
    Rq,
    Cq,
    Eq,
}

impl Device {
    pub fn new(cfg: DeviceConfig) -> io::Result<Device> {
        let net = State::for_hardware(&cfg.model_config())?;
        Ok(Device {
            cfg,
            config: ConfigSpace::new(),
            net,
            mem: GuestMemory::default(),
            irqs: Interrupts::new(MSIX_VECTORS),
            smc: [0; gdma::SMC_APERTURE_SIZE],
            split_db: BTreeMap::new(),
            hwc: None,
            eqs: BTreeMap::new(),
            regions: BTreeMap::new(),
            next_region: 1,
            eq_ids: IdPool::new(0, crate::gdma::MAX_EQS),
            cq_ids: IdPool::new(0, crate::gdma::MAX_CQS),
            wq_ids: IdPool::new(0, crate::gdma::MAX_WQS),
            registered: BTreeMap::new(),
            vport: Vport::default(),
            wq_objs: BTreeMap::new(),
            next_wq_obj: 0x100,
            rdma: Rdma::default(),
            ledger: Ledger::default(),
            errors: BTreeMap::new(),
            retired: BTreeSet::new(),
            stale_doorbells: 0,
            more_entries: false,
        })
    }

    /// Counts and logs a device-side problem.
    pub(crate) fn error(&mut self, kind: &str, detail: std::fmt::Arguments<'_>) {
        let e = self
            .errors
            .entry(kind.to_string())
            .or_insert((0, String::new()));
        e.0 += 1;
        e.1 = detail.to_string();
        log::warn!("{kind}: {detail}");
    }

    /// Records that a queue was destroyed (see `retired`).
    pub(crate) fn retire_queue(&mut self, page: u32, kind: QueueKind, id: u32) {
        self.retired.insert((page, kind, id));
    }

    /// Records that a queue id is in use again.
    pub(crate) fn revive_queue(&mut self, page: u32, kind: QueueKind, id: u32) {
        self.retired.remove(&(page, kind, id));
    }

    /// A doorbell for a queue that does not exist: a late store to a
    /// destroyed one (counted), or an error.
    pub(crate) fn unknown_queue_doorbell(
        &mut self,
        page: u32,
        kind: QueueKind,
        id: u32,
        detail: std::fmt::Arguments<'_>,
    ) {
        if self.retired.contains(&(page, kind, id)) {
            self.stale_doorbells += 1;
            log::debug!("doorbell for destroyed {kind:?} {id} on page {page} ignored: {detail}");
        } else {
            self.error("doorbell", detail);
        }
    }

    /// A function-level reset: every object gone, the HWC down, the SMC
    /// window back to the driver. Guest memory maps, interrupt eventfds and
    /// the port's backend belong to the VMM and host and stay.
    pub fn reset(&mut self) {
        if self.hwc.is_some() || !self.eqs.is_empty() || !self.regions.is_empty() {
            self.reset_objects("a device reset");
        }
        self.hwc = None;
        self.smc = [0; gdma::SMC_APERTURE_SIZE];
        self.split_db.clear();
        self.config = ConfigSpace::new();
    }
}

//! Setup shared by the emulator's integration tests: one adapter with the
//! ports a test asks for, the two MACs most tests use, frames between them,
//! and a second mapping of a context's doorbell page (a DPDK secondary's).
//!
//! Each test file uses part of this, hence `dead_code` allowed.

#![allow(dead_code)]

use mana_emu::config::{AdapterConfig, BackendConfig, Config, PortConfig};
use mana_emu::device::{Counters, QueueReport};
use mana_emu::pkt::build;
use mana_emu::testing::{fields, Ctx, RxSet, DPDK_RSS_KEY};
use std::os::fd::RawFd;

/// Port A (the device's port 1 in every configuration here).
pub const A: &str = "00:0d:3a:00:00:0a";
/// Port B.
pub const B: &str = "00:0d:3a:00:00:0b";
/// The adapter's PCI address.
pub const PCI: &str = "7870:00:00.0";

pub fn mac(s: &str) -> [u8; 6] {
    mana_emu::config::parse_mac(s).unwrap()
}

/// A port with the defaults the tests build on: MTU 1500, kernel netdev
/// down, no lossless RX, no MAC filter. Other settings with
/// `PortConfig { field: value, ..port(mac, backend) }`.
pub fn port(mac: &str, backend: BackendConfig) -> PortConfig {
    PortConfig {
        mac: mac.into(),
        ifname: None,
        backend,
        mtu: 1500,
        kernel_if_up: false,
        lossless_rx: false,
        mac_filter: false,
        link_speed_mbps: -1,
    }
}

/// The default options with one adapter at [`PCI`], IB device `mana_0`,
/// holding `ports`.
pub fn config(ports: Vec<PortConfig>) -> Config {
    let mut c = Config::default_single();
    c.adapters = vec![AdapterConfig {
        pci: PCI.into(),
        numa_node: 0,
        ib_name: Some("mana_0".into()),
        ib_name_after_reset: None,
        rnic_name: None,
        subsystem_vendor: 0x1414,
        subsystem_device: 1,
        ports,
    }];
    c
}

/// Ports A and B, both sinks.
pub fn two_sinks() -> Config {
    config(vec![
        port(A, BackendConfig::Sink),
        port(B, BackendConfig::Sink),
    ])
}

/// A UDP/IPv4 frame from B to A with 40 bytes of payload, from 10.0.0.`i`
/// (port 1000) to 10.0.1.1 (port 2000).
pub fn udp(i: u8) -> Vec<u8> {
    build::udp4(mac(B), mac(A), [10, 0, 0, i], [10, 0, 1, 1], 1000, 2000, 40)
}

/// One receive queue on IB port 1 (A) behind an RSS QP hashing IPv4
/// addresses with DPDK's default key, depth 64, with `buffers` 2 KiB
/// buffers posted and the doorbell rung.
pub fn rx_queue<'c, 'd>(ctx: &'c Ctx<'d>, buffers: usize) -> RxSet<'c, 'd> {
    let mut rx = ctx
        .rx_queues(1, 1, 64, fields::IPV4, &DPDK_RSS_KEY)
        .unwrap();
    rx.post(0, buffers, 2048);
    rx.ring(0);
    rx
}

/// The counters of queue `kind` ("sq", "rq", "cq") with hardware id `id`.
pub fn queue<'a>(k: &'a Counters, kind: &str, id: u32) -> &'a QueueReport {
    k.queues
        .iter()
        .find(|q| q.kind == kind && q.id == id)
        .unwrap_or_else(|| panic!("no {kind} {id:#x} in {:?}", k.queues))
}

/// A second shared mapping of a context's `cmd_fd`, as a DPDK secondary
/// process makes it (`mmap(PROT_WRITE, MAP_SHARED, fd, 0)`); unmapped on
/// drop.
pub struct SecondaryMapping(usize);

impl SecondaryMapping {
    pub fn new(cmd_fd: RawFd) -> SecondaryMapping {
        // SAFETY: a new one-page shared mapping at an address the kernel
        // picks (null hint), so no existing mapping is replaced; failure is
        // checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_WRITE,
                libc::MAP_SHARED,
                cmd_fd,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        SecondaryMapping(p as usize)
    }

    /// A 64-bit doorbell store at `offset` of the page.
    pub fn ring(&self, offset: usize, value: u64) {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= 4096,
            "offset {offset}"
        );
        // SAFETY: `self.0` is a writable mapping of 4096 bytes that lives
        // until drop, and the store is 8-byte aligned and inside it
        // (asserted above).
        unsafe { std::ptr::write_volatile((self.0 + offset) as *mut u64, value) };
    }
}

impl Drop for SecondaryMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps the page `new` mapped; nothing refers to it after
        // `self` goes.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, 4096) };
    }
}

/// Runs `ip ARGS` (iproute2); its standard output, or what it said on
/// failure.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let o = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}
